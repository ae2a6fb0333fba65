//! A small in-memory JMAP server for protocol tests (hyper's server on a
//! loopback port): `/.well-known/jmap` redirects to a session whose URLs are
//! relative (as Cyrus writes them), the API answers Mailbox/get,
//! Email/query, Email/get, Email/set, Email/changes, Identity/get and
//! EmailSubmission/set for one account (back-references `#ids` resolved),
//! and `/jmap/es` is a push stream. A test chooses the limits and the faults:
//! an HTTP status for every API request, an RFC 7807 problem, a method error,
//! a body that is not a session, a push stream that drops after each event.
//! It records what it was sent (calls per request, ids per get).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;

#[derive(Clone, Debug)]
pub struct Config {
    pub max_calls: u64,
    pub max_get: u64,
    /// Every API request answered with this status (401, 403, 429, 503).
    pub api_status: Option<u16>,
    /// Every API request refused as this RFC 7807 problem (`notJSON`, `limit`).
    pub problem: Option<&'static str>,
    /// Calls of this method answered with a `serverFail` method error.
    pub failing_method: Option<&'static str>,
    /// The session resource replaced by this body.
    pub session_body: Option<&'static str>,
    /// Offer an EventSource URL.
    pub push: bool,
    /// The account offers submission (as the session does); Cyrus without
    /// a submission relay offers it in the session only.
    pub account_submission: bool,
    /// The push URL answered with this status and no stream (Cyrus 3.6
    /// answers 204 No Content when it has no push for the client).
    pub push_status: Option<u16>,
    /// A submitted message is delivered into the (one) Inbox.
    pub deliver_submitted: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_calls: 16,
            max_get: 100,
            api_status: None,
            problem: None,
            failing_method: None,
            session_body: None,
            push: true,
            account_submission: true,
            push_status: None,
            deliver_submitted: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Mail {
    pub mailbox: String,
    pub keywords: BTreeMap<String, bool>,
    pub subject: String,
    /// `X-Mailbench-Track`, as created.
    pub track: Option<String>,
}

#[derive(Default, Debug)]
pub struct State {
    pub mails: BTreeMap<String, Mail>,
    pub next: u64,
    /// Ids created, by the state number that created them.
    pub log: Vec<(u64, String)>,
    pub requests: u64,
    /// Method calls in those requests.
    pub method_calls: u64,
    pub most_calls: usize,
    pub most_get_ids: usize,
    pub submitted: u64,
    pub push_streams: u64,
    /// Creation ids of the request being answered (`#m` -> its id).
    pub created_refs: BTreeMap<String, String>,
}

pub const MAILBOXES: &[(&str, &str)] = &[
    ("mb-inbox", "inbox"),
    ("mb-drafts", "drafts"),
    ("mb-sent", "sent"),
    ("mb-trash", "trash"),
    ("mb-archive", "archive"),
];

pub struct Fake {
    pub port: u16,
    pub cfg: Config,
    pub state: Arc<Mutex<State>>,
}

impl Fake {
    pub async fn start(cfg: Config) -> Fake {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let (c, s) = (cfg.clone(), state.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = l.accept().await else {
                    return;
                };
                let (c, s) = (c.clone(), s.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |r| serve(c.clone(), s.clone(), r));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        Fake { port, cfg, state }
    }

    pub fn url(&self, path: &str) -> url::Url {
        url::Url::parse(&format!("http://127.0.0.1:{}{path}", self.port)).unwrap()
    }

    /// A message delivered into the Inbox.
    pub fn deliver(&self, subject: &str) -> String {
        let mut s = self.state.lock().unwrap();
        add(&mut s, "mb-inbox", subject, &[])
    }
}

fn add(s: &mut State, mailbox: &str, subject: &str, kw: &[&str]) -> String {
    s.next += 1;
    let id = format!("M{}", s.next);
    let keywords = kw.iter().map(|k| (k.to_string(), true)).collect();
    s.mails.insert(
        id.clone(),
        Mail {
            mailbox: mailbox.into(),
            keywords,
            subject: subject.into(),
            track: None,
        },
    );
    s.log.push((s.next, id.clone()));
    id
}

type Body = http_body_full::Full;

mod http_body_full {
    use hyper::body::{Body, Bytes, Frame};
    use std::pin::Pin;
    use std::task::{Context, Poll};
    /// A body in one frame, or (`stream`) an open push stream fed by a channel.
    pub enum Full {
        Once(Option<Bytes>),
        Stream(tokio::sync::mpsc::Receiver<Bytes>),
    }
    impl Body for Full {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            match self.get_mut() {
                Full::Once(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
                Full::Stream(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
            }
        }
    }
}

fn reply(status: u16, ctype: &str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", ctype)
        .body(Body::Once(Some(body.into())))
        .unwrap()
}

fn session(cfg: &Config) -> Value {
    json!({
        "capabilities": {
            "urn:ietf:params:jmap:core": {"maxSizeUpload": 50_000_000, "maxConcurrentUpload": 4,
                "maxSizeRequest": 10_000_000, "maxConcurrentRequests": 4,
                "maxCallsInRequest": cfg.max_calls, "maxObjectsInGet": cfg.max_get,
                "maxObjectsInSet": 100, "collationAlgorithms": []},
            "urn:ietf:params:jmap:mail": {}, "urn:ietf:params:jmap:submission": {},
            "urn:example:unknown": {"x": 1}
        },
        "accounts": {"A1": {"name": "user1@fake.test", "isPersonal": true, "isReadOnly": false,
                            "accountCapabilities": if cfg.account_submission {
                                json!({"urn:ietf:params:jmap:mail": {}, "urn:ietf:params:jmap:submission": {}})
                            } else {
                                json!({"urn:ietf:params:jmap:mail": {}})
                            }}},
        "primaryAccounts": {"urn:ietf:params:jmap:mail": "A1"},
        "username": "user1@fake.test",
        "apiUrl": "/jmap/api",
        "downloadUrl": "/jmap/dl/{accountId}/{blobId}/{name}?type={type}",
        "uploadUrl": "/jmap/up/{accountId}/",
        "eventSourceUrl": if cfg.push { json!("/jmap/es?types={types}&closeafter={closeafter}&ping={ping}") } else { Value::Null },
        "state": "s0",
        "vendorExtension": true
    })
}

async fn serve(
    cfg: Config,
    st: Arc<Mutex<State>>,
    r: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let auth_ok = r
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Basic "));
    if !auth_ok {
        return Ok(reply(401, "text/plain", "login"));
    }
    let path = r.uri().path().to_string();
    Ok(match path.as_str() {
        "/.well-known/jmap" => Response::builder()
            .status(301)
            .header("location", "/jmap/session")
            .body(Body::Once(None))
            .unwrap(),
        "/jmap/session" => match cfg.session_body {
            Some(b) => reply(200, "text/html", b),
            None => reply(200, "application/json", session(&cfg).to_string()),
        },
        "/jmap/api" => api(&cfg, &st, r).await,
        "/jmap/es" => match cfg.push_status {
            Some(code) => Response::builder()
                .status(code)
                .body(Body::Once(None))
                .unwrap(),
            None => push(&st),
        },
        _ => reply(404, "text/plain", "no such resource"),
    })
}

/// The push stream: one state event of the current state, then the stream
/// ends (a proxy that drops streams).
fn push(st: &Arc<Mutex<State>>) -> Response<Body> {
    let state = {
        let mut s = st.lock().unwrap();
        s.push_streams += 1;
        s.next
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let ev = format!(
        ": hello\r\nevent: ping\r\ndata: {{\"interval\":30}}\r\n\r\nevent: state\r\ndata: {{\"@type\":\"StateChange\",\"changed\":{{\"A1\":{{\"Email\":\"s{state}\"}}}}}}\r\n\r\n"
    );
    tokio::spawn(async move {
        let _ = tx.send(Bytes::from(ev)).await;
    });
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(Body::Stream(rx))
        .unwrap()
}

async fn api(cfg: &Config, st: &Arc<Mutex<State>>, r: Request<Incoming>) -> Response<Body> {
    use hyper::body::Body as _;
    let mut body = r.into_body();
    let mut raw = Vec::new();
    while let Some(Ok(f)) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        if let Ok(d) = f.into_data() {
            raw.extend_from_slice(&d);
        }
    }
    if let Some(s) = cfg.api_status {
        let mut b = Response::builder().status(s);
        if s == 429 || s == 503 {
            b = b.header("retry-after", "5");
        }
        return b
            .body(Body::Once(Some(Bytes::from_static(b"go away"))))
            .unwrap();
    }
    if let Some(p) = cfg.problem {
        let mut j = json!({"type": format!("urn:ietf:params:jmap:error:{p}"), "status": 400, "detail": "refused by the fake"});
        if p == "limit" {
            j["limit"] = json!("maxSizeRequest");
        }
        return reply(400, "application/problem+json", j.to_string());
    }
    let Ok(req) = serde_json::from_slice::<Value>(&raw) else {
        return reply(
            400,
            "application/problem+json",
            json!({"type": "urn:ietf:params:jmap:error:notJSON", "status": 400}).to_string(),
        );
    };
    let calls = req["methodCalls"].as_array().cloned().unwrap_or_default();
    let mut s = st.lock().unwrap();
    s.requests += 1;
    s.method_calls += calls.len() as u64;
    s.most_calls = s.most_calls.max(calls.len());
    if calls.len() as u64 > cfg.max_calls {
        return reply(
            400,
            "application/problem+json",
            json!({"type": "urn:ietf:params:jmap:error:limit", "limit": "maxCallsInRequest"})
                .to_string(),
        );
    }
    let mut out: Vec<Value> = Vec::new();
    for c in calls {
        let (name, mut args, id) = (
            c[0].as_str().unwrap_or("").to_string(),
            c[1].clone(),
            c[2].as_str().unwrap_or("").to_string(),
        );
        resolve_refs(&mut args, &out);
        let res = if cfg.failing_method == Some(name.as_str()) {
            (
                "error".to_string(),
                json!({"type": "serverFail", "description": "the fake fails"}),
            )
        } else {
            method(&mut s, cfg, &name, &args, &mut out, &id)
        };
        out.push(json!([res.0, res.1, id]));
    }
    reply(
        200,
        "application/json",
        json!({"methodResponses": out, "sessionState": "s0"}).to_string(),
    )
}

fn resolve_refs(args: &mut Value, done: &[Value]) {
    let Some(m) = args.as_object_mut() else {
        return;
    };
    let refs: Vec<(String, Value)> = m
        .iter()
        .filter(|(k, _)| k.starts_with('#'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, r) in refs {
        m.remove(&k);
        let of = r["resultOf"].as_str().unwrap_or("");
        let path = r["path"].as_str().unwrap_or("").trim_start_matches('/');
        let v = done
            .iter()
            .find(|d| d[2] == of)
            .map(|d| d[1][path].clone())
            .unwrap_or(Value::Null);
        m.insert(k[1..].to_string(), v);
    }
}

fn email_json(id: &str, m: &Mail) -> Value {
    json!({"id": id, "mailboxIds": {m.mailbox.clone(): true}, "keywords": m.keywords, "subject": m.subject,
           "size": 1000, "messageId": [format!("{id}@fake")], "header:X-Mailbench-Track:asText": m.track,
           "threadId": "T1", "preview": "ignored by the client"})
}

fn method(
    s: &mut State,
    cfg: &Config,
    name: &str,
    a: &Value,
    _out: &mut [Value],
    _id: &str,
) -> (String, Value) {
    let ok = |v: Value| (name.to_string(), v);
    match name {
        "Mailbox/get" => ok(json!({"accountId": "A1", "state": "m1", "notFound": [],
            "list": MAILBOXES.iter().map(|(id, role)| json!({"id": id, "name": role, "role": role, "parentId": null, "totalEmails": 0, "sortOrder": 1})).collect::<Vec<_>>()})),
        "Email/query" => {
            let mb = a["filter"]["inMailbox"].as_str().unwrap_or("");
            let limit = a["limit"].as_u64().unwrap_or(u64::MAX) as usize;
            let ids: Vec<String> = s
                .mails
                .iter()
                .rev()
                .filter(|(_, m)| m.mailbox == mb)
                .map(|(id, _)| id.clone())
                .take(limit)
                .collect();
            ok(
                json!({"accountId": "A1", "queryState": format!("q{}", s.next), "ids": ids, "position": 0, "canCalculateChanges": false}),
            )
        }
        "Email/get" => {
            let ids: Vec<String> = serde_json::from_value(a["ids"].clone()).unwrap_or_default();
            s.most_get_ids = s.most_get_ids.max(ids.len());
            if ids.len() as u64 > cfg.max_get {
                return ("error".into(), json!({"type": "requestTooLarge"}));
            }
            let list: Vec<Value> = ids
                .iter()
                .filter_map(|i| s.mails.get(i).map(|m| email_json(i, m)))
                .collect();
            ok(
                json!({"accountId": "A1", "state": format!("s{}", s.next), "list": list, "notFound": []}),
            )
        }
        "Email/set" => ok(email_set(s, a)),
        "Email/changes" => {
            let since: u64 = a["sinceState"]
                .as_str()
                .unwrap_or("s0")
                .trim_start_matches('s')
                .parse()
                .unwrap_or(0);
            let created: Vec<&String> = s
                .log
                .iter()
                .filter(|(n, _)| *n > since)
                .map(|(_, id)| id)
                .collect();
            ok(
                json!({"accountId": "A1", "oldState": format!("s{since}"), "newState": format!("s{}", s.next),
                      "hasMoreChanges": false, "created": created, "updated": [], "destroyed": []}),
            )
        }
        "Identity/get" => ok(
            json!({"accountId": "A1", "state": "i1", "list": [{"id": "I1", "email": "user1@fake.test", "name": ""}], "notFound": []}),
        ),
        "EmailSubmission/set" => {
            s.submitted += 1;
            let email = a["create"]["s"]["emailId"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let email = match email.strip_prefix('#') {
                Some(r) => s.created_refs.get(r).cloned().unwrap_or_default(),
                None => email,
            };
            let patch = a["onSuccessUpdateEmail"]["#s"].clone();
            let mut copy = None;
            if let Some(m) = s.mails.get_mut(&email) {
                apply(m, &patch);
                copy = Some((m.subject.clone(), m.track.clone()));
            }
            // The one account is every recipient: the message arrives in
            // its Inbox.
            if cfg.deliver_submitted
                && let Some((subject, track)) = copy
            {
                let id = add(s, "mb-inbox", &subject, &[]);
                if let Some(m) = s.mails.get_mut(&id) {
                    m.track = track;
                }
            }
            ok(json!({"accountId": "A1", "newState": "e1", "created": {"s": {"id": "S1"}}}))
        }
        _ => ("error".into(), json!({"type": "unknownMethod"})),
    }
}

fn email_set(s: &mut State, a: &Value) -> Value {
    let mut created = serde_json::Map::new();
    if let Some(c) = a["create"].as_object() {
        for (k, e) in c {
            let mb = e["mailboxIds"]
                .as_object()
                .and_then(|m| m.keys().next().cloned())
                .unwrap_or_default();
            let kw: Vec<&str> = e["keywords"]
                .as_object()
                .map(|k| k.keys().map(String::as_str).collect())
                .unwrap_or_default();
            let id = add(s, &mb, e["subject"].as_str().unwrap_or(""), &kw);
            if let Some(m) = s.mails.get_mut(&id) {
                m.track = e["header:X-Mailbench-Track:asText"]
                    .as_str()
                    .map(Into::into);
            }
            s.created_refs.insert(k.clone(), id.clone());
            created.insert(
                k.clone(),
                json!({"id": id, "blobId": "B", "threadId": "T", "size": 10}),
            );
        }
    }
    let mut not_updated = serde_json::Map::new();
    if let Some(u) = a["update"].as_object() {
        for (id, patch) in u {
            let Some(m) = s.mails.get_mut(id) else {
                not_updated.insert(id.clone(), json!({"type": "notFound"}));
                continue;
            };
            apply(m, patch);
        }
    }
    let mut destroyed = Vec::new();
    for id in a["destroy"].as_array().into_iter().flatten() {
        if let Some(id) = id.as_str()
            && s.mails.remove(id).is_some()
        {
            destroyed.push(id.to_string());
        }
    }
    json!({"accountId": "A1", "oldState": "x", "newState": format!("s{}", s.next), "created": created,
           "updated": {}, "destroyed": destroyed, "notUpdated": not_updated})
}

/// A PatchObject of keywords and mailboxes.
fn apply(m: &mut Mail, patch: &Value) {
    for (p, v) in patch.as_object().into_iter().flatten() {
        if let Some(k) = p.strip_prefix("keywords/") {
            if v.as_bool() == Some(true) {
                m.keywords.insert(k.into(), true);
            } else {
                m.keywords.remove(k);
            }
        } else if let Some(mb) = p.strip_prefix("mailboxIds/")
            && v.as_bool() == Some(true)
        {
            m.mailbox = mb.into();
        }
    }
}
