//! JMAP requests and responses (RFC 8620 §3), typed: an invocation is the
//! triple `[name, arguments, call id]`; a later call of the same request
//! takes an earlier one's result through a back-reference (`"#ids":
//! {"resultOf": "c0", "name": "Email/query", "path": "/ids"}`). Calls are
//! packed into requests within the server's `maxCallsInRequest`, a call and
//! the calls referring to it always in the same request. Request-level
//! problems (RFC 7807 `urn:ietf:params:jmap:error:notJSON`, `limit`, ...) and
//! method-level errors (`["error", {"type": ...}, id]`) are typed too.

use crate::wire::{ErrorKind, OpError, OpResult};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One method call or response.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub name: String,
    pub args: Value,
    pub id: String,
}

impl Serialize for Invocation {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (&self.name, &self.args, &self.id).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Invocation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Invocation, D::Error> {
        let (name, args, id) = <(String, Value, String)>::deserialize(d)?;
        Ok(Invocation { name, args, id })
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub using: Vec<&'static str>,
    pub method_calls: Vec<Invocation>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub method_responses: Vec<Invocation>,
    #[serde(default)]
    pub session_state: String,
}

/// A request the server refused as a whole (RFC 8620 §3.6.1, RFC 7807).
#[derive(Debug, Deserialize)]
pub struct Problem {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub detail: Option<String>,
    /// With `limit`: which limit.
    #[serde(default)]
    pub limit: Option<String>,
}

/// A method-level error (RFC 8620 §3.6.2).
#[derive(Debug, Deserialize)]
pub struct MethodError {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// `#name: {resultOf, name, path}`.
pub fn back_ref(result_of: &str, name: &str, path: &str) -> Value {
    serde_json::json!({"resultOf": result_of, "name": name, "path": path})
}

/// Calls that must travel in one request (the later ones refer to the
/// earlier ones).
#[derive(Debug, Default, Clone)]
pub struct Group(pub Vec<Invocation>);

impl Group {
    /// Adds a call and returns its id (`c<n>`, unique within the batch the
    /// group goes into: `Batch::push` renumbers).
    pub fn call(&mut self, name: &str, args: Value) -> String {
        let id = format!("c{}", self.0.len());
        self.0.push(Invocation {
            name: name.into(),
            args,
            id: id.clone(),
        });
        id
    }
}

/// Groups packed into requests of at most `max_calls` calls.
pub fn pack(groups: Vec<Group>, max_calls: u64) -> OpResult<Vec<Vec<Invocation>>> {
    let max = usize::try_from(max_calls).unwrap_or(usize::MAX).max(1);
    let mut out: Vec<Vec<Invocation>> = Vec::new();
    for (gi, g) in groups.into_iter().enumerate() {
        if g.0.len() > max {
            return Err(OpError::new(
                ErrorKind::Rejected,
                format!(
                    "{} linked method calls do not fit the server's maxCallsInRequest of {max}",
                    g.0.len()
                ),
            ));
        }
        if out.last().is_none_or(|r| r.len() + g.0.len() > max) {
            out.push(Vec::new());
        }
        let Some(req) = out.last_mut() else {
            continue;
        };
        // Ids made unique in the request: `g<group>.<id>`, references too.
        for mut inv in g.0 {
            rename_refs(&mut inv.args, gi);
            inv.id = format!("g{gi}.{}", inv.id);
            req.push(inv);
        }
    }
    Ok(out)
}

fn rename_refs(args: &mut Value, gi: usize) {
    let Value::Object(map) = args else {
        return;
    };
    for (k, v) in map.iter_mut() {
        if let (true, Value::Object(r)) = (k.starts_with('#'), &mut *v)
            && let Some(Value::String(of)) = r.get_mut("resultOf")
        {
            *of = format!("g{gi}.{of}");
        }
    }
}

/// The arguments of the response to call `id` of group `gi` as `T`; a
/// method error is `Rejected` with its type (`ErrorKind::Timeout`-free: the
/// server answered).
pub fn answer<T: DeserializeOwned>(r: &Response, gi: usize, id: &str) -> OpResult<T> {
    let want = format!("g{gi}.{id}");
    let inv = r
        .method_responses
        .iter()
        .find(|i| i.id == want && i.name != "error")
        .or_else(|| r.method_responses.iter().find(|i| i.id == want));
    let Some(inv) = inv else {
        return Err(OpError::new(
            ErrorKind::Malformed,
            format!("JMAP response without an answer to call {want}"),
        ));
    };
    if inv.name == "error" {
        let e: MethodError = serde_json::from_value(inv.args.clone()).map_err(|e| {
            OpError::new(
                ErrorKind::Malformed,
                format!("JMAP method error unreadable: {e}"),
            )
        })?;
        return Err(OpError::new(
            ErrorKind::Rejected,
            format!(
                "JMAP method error {}{}",
                e.kind,
                e.description.map(|d| format!(": {d}")).unwrap_or_default()
            ),
        ));
    }
    serde_json::from_value(inv.args.clone()).map_err(|e| {
        OpError::new(
            ErrorKind::Malformed,
            format!("JMAP {} response unreadable: {e}", inv.name),
        )
    })
}

// ---- The arguments and answers of the methods mailbench calls. ----

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetResponse<T> {
    pub state: String,
    pub list: Vec<T>,
    #[serde(default)]
    pub not_found: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryResponse {
    pub query_state: String,
    pub ids: Vec<String>,
    #[serde(default)]
    pub total: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetResponse {
    #[serde(default)]
    pub new_state: Option<String>,
    #[serde(default)]
    pub created: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub not_created: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub not_updated: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub not_destroyed: Option<serde_json::Map<String, Value>>,
}

impl SetResponse {
    /// A `/set` that created, updated or destroyed nothing it was asked to
    /// is refused with the first SetError (RFC 8620 §5.3).
    pub fn check(&self, what: &str) -> OpResult<()> {
        for m in [&self.not_created, &self.not_updated, &self.not_destroyed]
            .into_iter()
            .flatten()
        {
            if let Some((id, err)) = m.iter().next() {
                let t = err.get("type").and_then(Value::as_str).unwrap_or("?");
                return Err(OpError::new(
                    ErrorKind::Rejected,
                    format!("{what}: {id} refused: {t}"),
                ));
            }
        }
        Ok(())
    }

    /// The server id of the object created as `key`.
    pub fn created_id(&self, key: &str) -> Option<String> {
        let c = self.created.as_ref()?.get(key)?;
        Some(c.get("id")?.as_str()?.to_string())
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangesResponse {
    pub old_state: String,
    pub new_state: String,
    pub has_more_changes: bool,
    #[serde(default)]
    pub created: Vec<String>,
    #[serde(default)]
    pub updated: Vec<String>,
    #[serde(default)]
    pub destroyed: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mailbox {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub total_emails: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Address {
    #[serde(default)]
    pub email: Option<String>,
}

/// The properties of an e-mail the Inbox view shows.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Email {
    pub id: String,
    #[serde(default)]
    pub mailbox_ids: serde_json::Map<String, Value>,
    #[serde(default)]
    pub keywords: serde_json::Map<String, Value>,
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub message_id: Option<Vec<String>>,
    /// `header:X-Mailbench-Track:asText`.
    #[serde(default, rename = "header:X-Mailbench-Track:asText")]
    pub track: Option<String>,
}

impl Email {
    pub fn seen(&self) -> bool {
        self.keywords.contains_key("$seen")
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Identity {
    pub id: String,
    #[serde(default)]
    pub email: String,
}

/// One `state` event of the push stream (RFC 8620 §7.1).
#[derive(Debug, Clone, Deserialize)]
pub struct StateChange {
    #[serde(rename = "@type")]
    pub kind: String,
    pub changed: std::collections::HashMap<String, std::collections::HashMap<String, String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn group(n: usize) -> Group {
        let mut g = Group::default();
        let first = g.call("Email/query", json!({}));
        for _ in 1..n {
            g.call(
                "Email/get",
                json!({"#ids": back_ref(&first, "Email/query", "/ids")}),
            );
        }
        g
    }

    #[test]
    fn groups_stay_whole_within_the_call_limit() {
        let reqs = pack(vec![group(2), group(2), group(1), group(3)], 4).unwrap();
        let sizes: Vec<usize> = reqs.iter().map(Vec::len).collect();
        assert_eq!(sizes, [4, 4]);
        // Ids unique per request, references renamed with them.
        assert_eq!(reqs[0][1].id, "g0.c1");
        assert_eq!(reqs[0][3].args["#ids"]["resultOf"], "g1.c0");
        assert_eq!(reqs[1][2].args["#ids"]["resultOf"], "g3.c0");
        let wire = serde_json::to_value(&reqs[0][0]).unwrap();
        assert_eq!(wire, json!(["Email/query", {}, "g0.c0"]));
        assert!(pack(vec![group(3)], 2).is_err());
        assert_eq!(pack(vec![group(1); 5], 1).unwrap().len(), 5);
    }

    #[test]
    fn answers_and_method_errors_are_typed() {
        let r: Response = serde_json::from_value(json!({
            "methodResponses": [
                ["Email/query", {"accountId": "a", "queryState": "q1", "ids": ["m1"],
                                 "position": 0, "canCalculateChanges": true, "extra": 1}, "g0.c0"],
                ["error", {"type": "unknownMethod"}, "g0.c1"]
            ],
            "sessionState": "s1", "latestClientVersion": "ignored"
        }))
        .unwrap();
        let q: QueryResponse = answer(&r, 0, "c0").unwrap();
        assert_eq!(q.ids, ["m1"]);
        let e = answer::<QueryResponse>(&r, 0, "c1").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Rejected);
        assert!(e.msg().contains("unknownMethod"), "{e}");
        assert_eq!(
            answer::<QueryResponse>(&r, 1, "c0").unwrap_err().kind,
            ErrorKind::Malformed
        );
    }

    #[test]
    fn set_errors_are_refusals() {
        let s: SetResponse = serde_json::from_value(json!({
            "accountId": "a", "oldState": "1", "newState": "2",
            "created": {"k": {"id": "M9"}},
            "notUpdated": {"M1": {"type": "notFound"}}
        }))
        .unwrap();
        assert_eq!(s.created_id("k").as_deref(), Some("M9"));
        assert!(s.check("Email/set").unwrap_err().msg().contains("notFound"));
    }
}
