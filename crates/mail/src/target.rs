//! Where the simulated users connect: endpoints parsed from URLs (`imap://`,
//! `smtp://`, `sieve://`) or the local target's ports, and the credentials (from
//! the local target's secret, a users file or the environment; never flags).

use crate::imap::ImapConn;
use crate::sieve::SieveConn;
use crate::smtp::SmtpConn;
use crate::wire::OpResult;
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
    /// Parses `scheme://host[:port][/]`; TLS schemes are refused (not built in).
    pub fn parse(url: &str, what: &str, allowed: &[(&str, u16)]) -> Result<Endpoint> {
        let bad = |m: &str| {
            Error::usage(format!(
                "--{what} `{url}`: {m}; write e.g. {}://127.0.0.1:{}",
                allowed[0].0, allowed[0].1
            ))
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("not a URL"))?;
        let scheme = scheme.to_ascii_lowercase();
        if matches!(scheme.as_str(), "imaps" | "submissions" | "smtps") {
            return Err(Error::usage(format!(
                "--{what} `{url}`: TLS (imaps://, submissions://, STARTTLS) is not supported by this \
                 build of mailbench; use {}:// on a trusted network or a TLS-terminating proxy",
                allowed[0].0
            )));
        }
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
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                let port: u16 = p.parse().map_err(|_| bad("the port is not a number"))?;
                (h.trim_start_matches('[').trim_end_matches(']'), port)
            }
            _ => (hostport, *default_port),
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
        format!("{}://{}:{}", self.scheme, self.host, self.port)
    }
}

pub const IMAP_SCHEMES: &[(&str, u16)] = &[("imap", 143)];
pub const SUBMISSION_SCHEMES: &[(&str, u16)] = &[("smtp", 587), ("submission", 587)];
pub const SIEVE_SCHEMES: &[(&str, u16)] = &[("sieve", 4190)];

/// User passwords: one shared password or one per user.
#[derive(Clone, Default)]
pub struct Credentials {
    shared: Option<String>,
    per_user: HashMap<String, String>,
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
        Credentials {
            shared: Some(pw),
            per_user: HashMap::new(),
        }
    }

    /// From a users file (`address password` per line; `#` comments), then a
    /// password file (one line), then `MAILBENCH_PASSWORD`.
    pub fn load(users_file: Option<&Path>, password_file: Option<&Path>) -> Result<Credentials> {
        let mut c = Credentials::default();
        if let Some(p) = users_file {
            let text = std::fs::read_to_string(p).map_err(|e| {
                Error::usage(format!("cannot read users file {}: {e}", p.display()))
            })?;
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
                c.per_user.insert(u.to_string(), pw.trim().to_string());
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

    /// Users listed in the users file, in file order is not kept: sorted.
    pub fn listed_users(&self) -> Vec<String> {
        let mut v: Vec<String> = self.per_user.keys().cloned().collect();
        v.sort();
        v
    }
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
}

impl Target {
    pub async fn imap_login(&self, user: &str) -> OpResult<ImapConn> {
        let mut c = ImapConn::connect(&self.imap.host, self.imap.port, self.op_timeout).await?;
        c.login(user, self.creds.password(user).unwrap_or(""))
            .await?;
        Ok(c)
    }

    pub async fn smtp_login(&self, user: &str) -> OpResult<SmtpConn> {
        let mut c =
            SmtpConn::connect(&self.submission.host, self.submission.port, self.op_timeout).await?;
        c.hello_auth(user, self.creds.password(user).unwrap_or(""))
            .await?;
        Ok(c)
    }

    pub async fn sieve_login(&self, user: &str) -> Option<OpResult<SieveConn>> {
        let ep = self.sieve.as_ref()?;
        Some(
            async {
                let mut c = SieveConn::connect(&ep.host, ep.port, self.op_timeout).await?;
                c.auth(user, self.creds.password(user).unwrap_or(""))
                    .await?;
                Ok(c)
            }
            .await,
        )
    }

    /// Checks that every endpoint accepts a TCP connection and greets; the error
    /// names the address tried (exit 3).
    pub async fn probe(&self) -> Result<()> {
        let t = self.op_timeout.min(Duration::from_secs(10));
        ImapConn::connect(&self.imap.host, self.imap.port, t)
            .await
            .map_err(|e| {
                Error::runtime(format!("IMAP server {} unreachable: {e}", self.imap.url()))
            })?;
        SmtpConn::connect(&self.submission.host, self.submission.port, t)
            .await
            .map_err(|e| {
                Error::runtime(format!(
                    "submission server {} unreachable: {e}",
                    self.submission.url()
                ))
            })?;
        if let Some(s) = &self.sieve {
            SieveConn::connect(&s.host, s.port, t).await.map_err(|e| {
                Error::runtime(format!("ManageSieve server {} unreachable: {e}", s.url()))
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_tls_is_named() {
        let e = Endpoint::parse("imap://127.0.0.1:10143", "imap", IMAP_SCHEMES).unwrap();
        assert_eq!((e.host.as_str(), e.port), ("127.0.0.1", 10143));
        let e =
            Endpoint::parse("smtp://mail.example.org", "submission", SUBMISSION_SCHEMES).unwrap();
        assert_eq!(e.port, 587);
        assert!(
            Endpoint::parse("imaps://h:993", "imap", IMAP_SCHEMES)
                .unwrap_err()
                .to_string()
                .contains("TLS")
        );
        assert!(Endpoint::parse("http://h", "imap", IMAP_SCHEMES).is_err());
        assert!(Endpoint::parse("imap://u:p@h", "imap", IMAP_SCHEMES).is_err());
        assert!(Endpoint::parse("imap://h:x", "imap", IMAP_SCHEMES).is_err());
    }
}
