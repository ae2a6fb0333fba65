//! Where a simulated user connects, below the protocol clients: an endpoint
//! parsed from a URL (`imap://`, `imaps://`, `smtp://`, `submission://`,
//! `submissions://`, `smtps://`, `sieve://`) or the local target's ports, how
//! the connection is secured and opened (`tls`: implicit TLS, STARTTLS
//! handshakes, certificates), and the credentials (`credentials`: from the
//! local target's secret, a users file or the environment; never flags).
//! Built on the wire layer only; the IMAP, SMTP and ManageSieve clients are
//! built on it, and the target (target.rs) on them.

pub mod backoff;
pub mod credentials;
pub mod tls;

pub use credentials::{Credentials, PASSWORD_ENV, read_users_file};
pub use tls::{StartTls, Tls};

use mailbench_base::{Error, Result};
use serde::Serialize;

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
        mailbench_base::secrets::refuse_url_credentials(&format!("--{what}"), url)?;
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
        tls::is_implicit_tls(&self.scheme)
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
