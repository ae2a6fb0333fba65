//! Where the simulated users connect: endpoints parsed from URLs (`imap://`,
//! `imaps://`, `smtp://`, `submission://`, `submissions://`, `smtps://`,
//! `sieve://`) or the local target's ports, the TLS policy (tls.rs), and the
//! credentials (from the local target's secret, a users file or the environment;
//! never flags).

use crate::imap::ImapConn;
use crate::sieve::SieveConn;
use crate::smtp::SmtpConn;
use crate::tls::{StartTls, Tls};
use crate::wire::{ErrorKind, OpError, OpResult};
use mailbench_base::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Endpoint {
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// Parses `scheme://host[:port][/]` with one of the `allowed` schemes and its
    /// default port; an IPv6 host is written in brackets (`imaps://[::1]:993`).
    pub fn parse(url: &str, what: &str, allowed: &[(&str, u16)]) -> Result<Endpoint> {
        let bad = |m: &str| {
            Error::usage(format!(
                "--{what} `{url}`: {m}; write e.g. {}://127.0.0.1:{}",
                allowed[0].0, allowed[0].1
            ))
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("not a URL"))?;
        let scheme = scheme.to_ascii_lowercase();
        let Some((_, default_port)) = allowed.iter().find(|(s, _)| *s == scheme) else {
            return Err(bad(&format!("scheme `{scheme}` is not one of {}", {
                let v: Vec<&str> = allowed.iter().map(|(s, _)| *s).collect();
                v.join(", ")
            })));
        };
        let hostport = rest.trim_end_matches('/');
        if hostport.contains('/') || hostport.contains('@') {
            return Err(bad(
                "only scheme://host:port is accepted (no user, password or path)",
            ));
        }
        let port_of =
            |p: &str| -> Result<u16> { p.parse().map_err(|_| bad("the port is not a number")) };
        let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
            let (h, after) = inner
                .split_once(']')
                .ok_or_else(|| bad("the [ of an IPv6 address is not closed"))?;
            match after {
                "" => (h, *default_port),
                a => match a.strip_prefix(':') {
                    Some(p) => (h, port_of(p)?),
                    None => return Err(bad("junk after the IPv6 address")),
                },
            }
        } else {
            match hostport.rsplit_once(':') {
                Some((h, _)) if h.contains(':') => {
                    return Err(bad("write an IPv6 address in brackets"));
                }
                Some((h, p)) => (h, port_of(p)?),
                None => (hostport, *default_port),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Endpoint {
            scheme,
            host: host.to_string(),
            port,
        })
    }

    pub fn local(scheme: &str, port: u16) -> Endpoint {
        Endpoint {
            scheme: scheme.into(),
            host: "127.0.0.1".into(),
            port,
        }
    }

    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub fn url(&self) -> String {
        if self.host.contains(':') {
            format!("{}://[{}]:{}", self.scheme, self.host, self.port)
        } else {
            format!("{}://{}:{}", self.scheme, self.host, self.port)
        }
    }

    /// TLS from the first byte (`imaps`, `submissions`, `smtps`).
    pub fn implicit_tls(&self) -> bool {
        crate::tls::is_implicit_tls(&self.scheme)
    }
}

pub const IMAP_SCHEMES: &[(&str, u16)] = &[("imap", 143), ("imaps", 993)];
/// `submissions` (RFC 8314) and the older name `smtps`: implicit TLS on 465.
pub const SUBMISSION_SCHEMES: &[(&str, u16)] = &[
    ("smtp", 587),
    ("submission", 587),
    ("submissions", 465),
    ("smtps", 465),
];
/// ManageSieve has no implicit-TLS scheme; `sieve://` upgrades with STARTTLS.
pub const SIEVE_SCHEMES: &[(&str, u16)] = &[("sieve", 4190)];

/// User passwords: one shared password or one per user.
#[derive(Clone, Default)]
pub struct Credentials {
    shared: Option<String>,
    per_user: HashMap<String, String>,
    /// The users file's addresses in file order.
    order: Vec<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credentials({} users, shared: {})",
            self.per_user.len(),
            self.shared.is_some()
        )
    }
}

/// Environment variable holding the shared password of remote targets.
pub const PASSWORD_ENV: &str = "MAILBENCH_PASSWORD";

impl Credentials {
    pub fn shared(pw: String) -> Credentials {
        crate::secrets::register(&pw);
        Credentials {
            shared: Some(pw),
            ..Default::default()
        }
    }

    /// From a users file (`address password` per line; `#` comments), then a
    /// password file (one line), then `MAILBENCH_PASSWORD`.
    pub fn load(users_file: Option<&Path>, password_file: Option<&Path>) -> Result<Credentials> {
        let mut c = Credentials::default();
        if let Some(p) = users_file {
            for (u, pw) in read_users_file(p)? {
                crate::secrets::register(&pw);
                c.order.push(u.clone());
                c.per_user.insert(u, pw);
            }
        }
        if let Some(p) = password_file {
            let text = std::fs::read_to_string(p).map_err(|e| {
                Error::usage(format!("cannot read password file {}: {e}", p.display()))
            })?;
            c.shared = Some(text.lines().next().unwrap_or("").to_string());
        } else if let Ok(pw) = std::env::var(PASSWORD_ENV) {
            c.shared = Some(pw);
        }
        if let Some(pw) = &c.shared {
            crate::secrets::register(pw);
        }
        Ok(c)
    }

    pub fn password(&self, user: &str) -> Option<&str> {
        self.per_user
            .get(user)
            .map(|s| s.as_str())
            .or(self.shared.as_deref())
    }

    pub fn is_empty(&self) -> bool {
        self.shared.is_none() && self.per_user.is_empty()
    }

    /// Users listed in the users file, in file order.
    pub fn listed_users(&self) -> &[String] {
        &self.order
    }
}

/// The `address password` lines of a users file, in order (`#` comments and
/// blank lines skipped; an address listed twice is an error).
pub fn read_users_file(p: &Path) -> Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(p)
        .map_err(|e| Error::usage(format!("cannot read users file {}: {e}", p.display())))?;
    let mut out: Vec<(String, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let Some((u, pw)) = l.split_once(char::is_whitespace) else {
            return Err(Error::usage(format!(
                "users file {} line {}: write `address password`",
                p.display(),
                i + 1
            )));
        };
        if !seen.insert(u.to_string()) {
            return Err(Error::usage(format!(
                "users file {} line {}: {u} is listed twice",
                p.display(),
                i + 1
            )));
        }
        out.push((u.to_string(), pw.trim().to_string()));
    }
    Ok(out)
}

/// Endpoints and credentials of the server under test.
#[derive(Debug, Clone)]
pub struct Target {
    /// `local` or `remote`.
    pub kind: String,
    pub imap: Endpoint,
    pub submission: Endpoint,
    pub sieve: Option<Endpoint>,
    pub creds: Credentials,
    pub op_timeout: Duration,
    pub tls: Tls,
    /// Servers that upgraded with STARTTLS at start: every later connection
    /// must upgrade too (a stripped STARTTLS offer fails instead of
    /// silently falling back to plain text).
    pub pinned: Pinned,
    /// `--trace-imap DIR`: every user's IMAP traffic.
    pub trace: Option<crate::trace::TraceDir>,
}

/// Which endpoints must use STARTTLS from now on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pinned {
    pub imap: bool,
    pub submission: bool,
    pub sieve: bool,
}

/// How each endpoint's connection was protected at start (for the results).
#[derive(Debug, Clone, Serialize)]
pub struct Security {
    pub imap: String,
    pub submission: String,
    pub sieve: Option<String>,
}

/// Whether a connection was upgraded with STARTTLS (its security text says so).
fn upgraded(security: Option<&str>) -> bool {
    security.is_some_and(|s| s.starts_with("STARTTLS"))
}

fn describe(security: Option<&str>, starttls: StartTls) -> String {
    match security {
        Some(s) => s.to_string(),
        None if starttls == StartTls::Never => "plain text (--starttls never)".into(),
        None => "plain text (no STARTTLS offered)".into(),
    }
}

impl Target {
    fn policy(&self, pinned: bool) -> StartTls {
        if pinned {
            StartTls::Require
        } else {
            self.tls.starttls
        }
    }

    /// Connects to the IMAP server with the TLS policy, greeting read.
    pub async fn imap_connect(&self, timeout: Duration) -> OpResult<ImapConn> {
        self.imap_connect_traced(timeout, None).await
    }

    async fn imap_connect_traced(
        &self,
        timeout: Duration,
        trace: Option<crate::trace::Trace>,
    ) -> OpResult<ImapConn> {
        ImapConn::open(
            &self.imap,
            &self.tls,
            self.policy(self.pinned.imap),
            timeout,
            trace,
        )
        .await
    }

    pub async fn smtp_connect(&self, timeout: Duration) -> OpResult<SmtpConn> {
        SmtpConn::open(
            &self.submission,
            &self.tls,
            self.policy(self.pinned.submission),
            timeout,
        )
        .await
    }

    pub async fn sieve_connect(&self, ep: &Endpoint, timeout: Duration) -> OpResult<SieveConn> {
        SieveConn::open(ep, &self.tls, self.policy(self.pinned.sieve), timeout).await
    }

    /// Connects and logs `user` in (traced with `--trace-imap`).
    pub async fn imap_login(&self, user: &str) -> OpResult<ImapConn> {
        let trace = self.trace.as_ref().and_then(|t| t.open(user));
        let mut c = self.imap_connect_traced(self.op_timeout, trace).await?;
        c.login(user, self.creds.password(user).unwrap_or(""))
            .await?;
        Ok(c)
    }

    pub async fn smtp_login(&self, user: &str) -> OpResult<SmtpConn> {
        let mut c = self.smtp_connect(self.op_timeout).await?;
        c.hello_auth(user, self.creds.password(user).unwrap_or(""))
            .await?;
        Ok(c)
    }

    pub async fn sieve_login(&self, user: &str) -> Option<OpResult<SieveConn>> {
        let ep = self.sieve.as_ref()?;
        Some(
            async {
                let mut c = self.sieve_connect(ep, self.op_timeout).await?;
                c.auth(user, self.creds.password(user).unwrap_or(""))
                    .await?;
                Ok(c)
            }
            .await,
        )
    }

    /// Checks that every endpoint accepts a connection, greets, and sets up TLS
    /// as the policy asks (certificates verified); the error names the address
    /// tried (exit 3). Pins STARTTLS where it was used and returns how each
    /// connection was protected.
    pub async fn probe(&mut self) -> Result<Security> {
        let t = self.op_timeout.min(Duration::from_secs(10));
        let fail = |what: &str, ep: &Endpoint, e: OpError| {
            let hint = match (ep.implicit_tls(), ep.port) {
                (false, 993 | 465) if e.kind == ErrorKind::Timeout => {
                    " (that port usually speaks TLS from the first byte: write imaps:// or submissions://)"
                }
                _ => "",
            };
            if e.kind == ErrorKind::Tls {
                Error::runtime(format!("{what} server {}: {e}", ep.url()))
            } else {
                Error::runtime(format!("{what} server {} unreachable: {e}{hint}", ep.url()))
            }
        };
        let mut c = self
            .imap_connect(t)
            .await
            .map_err(|e| fail("IMAP", &self.imap, e))?;
        let imap = describe(c.security(), self.tls.starttls);
        self.pinned.imap = upgraded(c.security());
        c.logout().await;
        let mut c = self
            .smtp_connect(t)
            .await
            .map_err(|e| fail("submission", &self.submission, e))?;
        let submission = describe(c.security(), self.tls.starttls);
        self.pinned.submission = upgraded(c.security());
        c.quit().await;
        let mut sieve = None;
        if let Some(s) = self.sieve.clone() {
            let mut c = self
                .sieve_connect(&s, t)
                .await
                .map_err(|e| fail("ManageSieve", &s, e))?;
            sieve = Some(describe(c.security(), self.tls.starttls));
            self.pinned.sieve = upgraded(c.security());
            c.logout().await;
        }
        Ok(Security {
            imap,
            submission,
            sieve,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_default_ports() {
        let e = Endpoint::parse("imap://127.0.0.1:10143", "imap", IMAP_SCHEMES).unwrap();
        assert_eq!((e.host.as_str(), e.port), ("127.0.0.1", 10143));
        assert!(!e.implicit_tls());
        let e =
            Endpoint::parse("smtp://mail.example.org", "submission", SUBMISSION_SCHEMES).unwrap();
        assert_eq!(e.port, 587);
        let e = Endpoint::parse("submission://h/", "submission", SUBMISSION_SCHEMES).unwrap();
        assert_eq!((e.scheme.as_str(), e.port), ("submission", 587));
        for (url, port) in [("imaps://h", 993), ("IMAPS://h:10993", 10993)] {
            let e = Endpoint::parse(url, "imap", IMAP_SCHEMES).unwrap();
            assert_eq!((e.scheme.as_str(), e.port), ("imaps", port));
            assert!(e.implicit_tls());
        }
        for scheme in ["submissions", "smtps"] {
            let e = Endpoint::parse(&format!("{scheme}://h"), "submission", SUBMISSION_SCHEMES)
                .unwrap();
            assert_eq!(e.port, 465);
            assert!(e.implicit_tls());
        }
        let e = Endpoint::parse("sieve://h", "sieve", SIEVE_SCHEMES).unwrap();
        assert_eq!(e.port, 4190);
        assert!(!e.implicit_tls());
        let e = Endpoint::parse("imaps://[::1]:993", "imap", IMAP_SCHEMES).unwrap();
        assert_eq!((e.host.as_str(), e.port), ("::1", 993));
        assert_eq!(e.url(), "imaps://[::1]:993");
        let e = Endpoint::parse("imaps://[::1]", "imap", IMAP_SCHEMES).unwrap();
        assert_eq!((e.host.as_str(), e.port), ("::1", 993));
        // Wrong protocol for the flag, no ManageSieve implicit TLS, junk.
        assert!(Endpoint::parse("imaps://h", "submission", SUBMISSION_SCHEMES).is_err());
        assert!(Endpoint::parse("smtps://h", "imap", IMAP_SCHEMES).is_err());
        assert!(Endpoint::parse("sieves://h", "sieve", SIEVE_SCHEMES).is_err());
        assert!(Endpoint::parse("http://h", "imap", IMAP_SCHEMES).is_err());
        assert!(Endpoint::parse("imap://u:p@h", "imap", IMAP_SCHEMES).is_err());
        assert!(Endpoint::parse("imap://h:x", "imap", IMAP_SCHEMES).is_err());
        assert!(Endpoint::parse("imaps://:993", "imap", IMAP_SCHEMES).is_err());
    }
}
