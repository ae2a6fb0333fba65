//! The JMAP session resource (RFC 8620 §2): where it is (`--jmap`: the
//! resource itself, or a host whose `/.well-known/jmap` leads to it), what it
//! says (typed; properties this client does not use are ignored, as §1.5
//! asks), its URLs resolved against the session's own URL (Cyrus writes them
//! relative: `/jmap/`), and the core limits every request stays within.

use crate::wire::{ErrorKind, OpError, OpResult};
use mailbench_base::{Error, Result};
use serde::Deserialize;
use std::collections::HashMap;
use url::Url;

pub const CORE: &str = "urn:ietf:params:jmap:core";
pub const MAIL: &str = "urn:ietf:params:jmap:mail";
pub const SUBMISSION: &str = "urn:ietf:params:jmap:submission";
/// Where a host announces its session resource (RFC 8620 §2.2).
pub const WELL_KNOWN: &str = "/.well-known/jmap";

/// The session resource as served.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub capabilities: HashMap<String, serde_json::Value>,
    pub accounts: HashMap<String, Account>,
    #[serde(default)]
    pub primary_accounts: HashMap<String, String>,
    #[serde(default)]
    pub username: String,
    pub api_url: String,
    pub download_url: String,
    pub upload_url: String,
    /// Required by RFC 8620; a server without it gets polled.
    #[serde(default)]
    pub event_source_url: Option<String>,
    pub state: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub is_read_only: bool,
    #[serde(default)]
    pub account_capabilities: HashMap<String, serde_json::Value>,
}

/// `urn:ietf:params:jmap:core` (RFC 8620 §2): the limits of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CoreLimits {
    pub max_size_upload: u64,
    pub max_concurrent_upload: u64,
    pub max_size_request: u64,
    pub max_concurrent_requests: u64,
    pub max_calls_in_request: u64,
    pub max_objects_in_get: u64,
    pub max_objects_in_set: u64,
}

/// A session made ready to use: the account, the limits and every URL
/// absolute.
#[derive(Debug, Clone)]
pub struct Ready {
    pub url: Url,
    pub api: Url,
    /// Templates resolved later (their `{...}` variables first).
    pub upload: String,
    pub event_source: Option<String>,
    pub account: String,
    pub limits: CoreLimits,
    /// The server takes EmailSubmission/set (else mail is sent over SMTP).
    pub submission: bool,
    pub state: String,
}

/// The session URL of `--jmap`: `http(s)://host[:port]` alone means the
/// host's `/.well-known/jmap`; a URL with a path is the resource itself.
pub fn session_url(arg: &str) -> Result<Url> {
    mailbench_base::secrets::refuse_url_credentials("--jmap", arg)?;
    let bad = |m: &str| {
        Error::usage(format!(
            "--jmap `{arg}`: {m}; write e.g. https://mail.example.org (its {WELL_KNOWN}) or \
             https://mail.example.org/jmap/session"
        ))
    };
    let mut url = Url::parse(arg).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme is not http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("no query or fragment"));
    }
    if url.path().is_empty() || url.path() == "/" {
        url.set_path(WELL_KNOWN);
    }
    Ok(url)
}

/// `template` with `vars` substituted (RFC 6570 level 1, the only level JMAP
/// uses), resolved against `base`.
pub fn expand(base: &Url, template: &str, vars: &[(&str, &str)]) -> OpResult<Url> {
    let mut s = template.to_string();
    for (k, v) in vars {
        s = s.replace(&format!("{{{k}}}"), &encode(v));
    }
    base.join(&s).map_err(|e| {
        OpError::new(
            ErrorKind::Malformed,
            format!("JMAP session {base}: URL `{template}` does not resolve: {e}"),
        )
    })
}

/// Percent-encoding of a template value (unreserved characters kept).
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Session {
    /// The session served at `url` as `body`: it must be a session (a clear
    /// error naming the URL when it is not) with the core and mail
    /// capabilities, a mail account and usable limits.
    pub fn parse(url: &Url, body: &[u8]) -> OpResult<Session> {
        serde_json::from_slice(body).map_err(|e| {
            OpError::new(
                ErrorKind::Malformed,
                format!(
                    "{url} is not a JMAP session resource ({e}); give --jmap the session URL \
                     or the host whose {WELL_KNOWN} leads to it"
                ),
            )
        })
    }

    pub fn ready(self, url: &Url) -> OpResult<Ready> {
        let bad =
            |m: String| OpError::new(ErrorKind::Malformed, format!("JMAP session {url}: {m}"));
        let core = self
            .capabilities
            .get(CORE)
            .ok_or_else(|| bad(format!("no {CORE} capability")))?;
        let limits: CoreLimits =
            serde_json::from_value(core.clone()).map_err(|e| bad(format!("{CORE} limits: {e}")))?;
        if limits.max_calls_in_request == 0
            || limits.max_objects_in_get == 0
            || limits.max_concurrent_requests == 0
            || limits.max_objects_in_set == 0
        {
            return Err(bad(format!(
                "{CORE} limits of 0 leave nothing to do: {limits:?}"
            )));
        }
        if !self.capabilities.contains_key(MAIL) {
            return Err(bad(format!("no {MAIL} capability: not a mail server")));
        }
        let account = self
            .primary_accounts
            .get(MAIL)
            .cloned()
            .ok_or_else(|| bad(format!("no primary account for {MAIL}")))?;
        if !self.accounts.contains_key(&account) {
            return Err(bad(format!(
                "the primary account `{account}` is not listed"
            )));
        }
        let api = expand(url, &self.api_url, &[])?;
        // The session may offer submission while the account does not
        // (Cyrus without a submission relay): the account decides.
        let submission = self.capabilities.contains_key(SUBMISSION)
            && self.accounts[&account]
                .account_capabilities
                .contains_key(SUBMISSION);
        Ok(Ready {
            url: url.clone(),
            api,
            upload: self.upload_url,
            event_source: self.event_source_url,
            account,
            limits,
            submission,
            state: self.state,
        })
    }
}

impl Ready {
    pub fn upload_url(&self) -> OpResult<Url> {
        expand(&self.url, &self.upload, &[("accountId", &self.account)])
    }

    /// The push stream for e-mail and mailbox changes, pinged every
    /// `ping_s` seconds, or None when the server offers none.
    pub fn event_source_url(&self, ping_s: u64) -> Option<OpResult<Url>> {
        let t = self.event_source.as_deref()?;
        let ping = ping_s.to_string();
        Some(expand(
            &self.url,
            t,
            &[
                ("types", "Email,Mailbox"),
                ("closeafter", "no"),
                ("ping", &ping),
            ],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn cyrus_like() -> String {
        serde_json::json!({
            "capabilities": {
                CORE: {"maxSizeUpload": 1_073_741_824u64, "maxConcurrentUpload": 5,
                       "maxSizeRequest": 10_485_760, "maxConcurrentRequests": 5,
                       "maxCallsInRequest": 50, "maxObjectsInGet": 4096, "maxObjectsInSet": 4096,
                       "collationAlgorithms": ["i;ascii-numeric"]},
                MAIL: {}, SUBMISSION: {}, "https://cyrusimap.org/ns/jmap/mail": {}
            },
            "accounts": {"u1": {"name": "u1", "isPersonal": true, "isReadOnly": false,
                                "accountCapabilities": {MAIL: {}, SUBMISSION: {}}}},
            "primaryAccounts": {MAIL: "u1", SUBMISSION: "u1"},
            "username": "u1",
            "apiUrl": "/jmap/",
            "downloadUrl": "/jmap/download/{accountId}/{blobId}/{name}?accept={type}",
            "uploadUrl": "/jmap/upload/{accountId}/",
            "eventSourceUrl": "/jmap/eventsource/?types={types}&closeafter={closeafter}&ping={ping}",
            "state": "0",
            "somethingNew": {"ignored": true}
        })
        .to_string()
    }

    #[test]
    fn relative_urls_resolve_against_the_session_url() {
        let url = Url::parse("http://127.0.0.1:8080/.well-known/jmap").unwrap();
        let r = Session::parse(&url, cyrus_like().as_bytes())
            .unwrap()
            .ready(&url)
            .unwrap();
        assert_eq!(r.api.as_str(), "http://127.0.0.1:8080/jmap/");
        assert_eq!(
            r.upload_url().unwrap().as_str(),
            "http://127.0.0.1:8080/jmap/upload/u1/"
        );
        assert_eq!(
            r.event_source_url(30).unwrap().unwrap().as_str(),
            "http://127.0.0.1:8080/jmap/eventsource/?types=Email%2CMailbox&closeafter=no&ping=30"
        );
        assert_eq!(
            (r.limits.max_calls_in_request, r.limits.max_objects_in_get),
            (50, 4096)
        );
        assert!(r.submission);
        // Offered by the session, not by the account: no submission.
        let no_sub = cyrus_like().replace(
            &format!("\"{MAIL}\":{{}},\"{SUBMISSION}\":{{}}}},\"isPersonal\""),
            &format!("\"{MAIL}\":{{}}}},\"isPersonal\""),
        );
        let r2 = Session::parse(&url, no_sub.as_bytes())
            .unwrap()
            .ready(&url)
            .unwrap();
        assert!(!r2.submission, "{no_sub}");
        // Absolute URLs stay as they are.
        let other = cyrus_like().replace("\"/jmap/\"", "\"https://api.example.org/jmap/api/\"");
        let r = Session::parse(&url, other.as_bytes())
            .unwrap()
            .ready(&url)
            .unwrap();
        assert_eq!(r.api.as_str(), "https://api.example.org/jmap/api/");
    }

    #[test]
    fn what_is_not_a_usable_session_is_named() {
        let url = Url::parse("http://h/x").unwrap();
        let e = Session::parse(&url, b"<html>hello</html>").unwrap_err();
        // (Other tests of this process register short passwords such as
        // `p`, which the redaction masks in any message: test words without.)
        assert!(e.msg().contains("h/x is not a JMAP session"), "{e}");
        let no_mail = cyrus_like().replace(MAIL, "urn:x");
        let e = Session::parse(&url, no_mail.as_bytes())
            .unwrap()
            .ready(&url)
            .unwrap_err();
        assert!(
            e.msg().contains("not a mail server") || e.msg().contains("primary"),
            "{e}"
        );
        let zero = cyrus_like().replace("\"maxCallsInRequest\":50", "\"maxCallsInRequest\":0");
        let e = Session::parse(&url, zero.as_bytes())
            .unwrap()
            .ready(&url)
            .unwrap_err();
        assert!(e.msg().contains("limits of 0"), "{e}");
    }

    #[test]
    fn the_jmap_option_takes_a_host_or_the_resource() {
        let u = session_url("https://mail.example.org").unwrap();
        assert_eq!(u.as_str(), "https://mail.example.org/.well-known/jmap");
        let u = session_url("http://127.0.0.1:8008/").unwrap();
        assert_eq!(u.as_str(), "http://127.0.0.1:8008/.well-known/jmap");
        let u = session_url("https://h/jmap/session").unwrap();
        assert_eq!(u.path(), "/jmap/session");
        for bad in [
            "imap://h",
            "h",
            "https://u:url-test-secret@h",
            "https://h/?a=1",
            "http://:80/x",
        ] {
            assert!(session_url(bad).is_err(), "{bad}");
        }
    }
}
