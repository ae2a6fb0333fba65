//! Redaction by construction: every secret mailbench is given (a user's
//! password, the local target's own, credentials found in a URL) is
//! registered here before it is used, and every text mailbench writes passes
//! through [`redact`] on its way out: the test log ([`crate::rundir::TestLog`]),
//! every file of a run folder ([`crate::rundir::RunDir::write`],
//! [`crate::rundir::write_text`], JSON string by string), stdout and stderr
//! ([`say`], [`warn`]), protocol errors and traces (the mail crate calls
//! [`redact`] where it builds them). No sink needs to know what a secret is.
//!
//! A secret is matched wherever it occurs, not word by word, in every form
//! mailbench itself sends or writes it in: as is; inside an IMAP quoted string
//! (`\"` and `\\` escaped); JSON-escaped; HTML-escaped; URL-encoded; and inside
//! base64 (SASL PLAIN and LOGIN tokens, HTTP Basic), whatever comes before it
//! in the token: its base64 "core" at each of the three byte alignments is
//! searched, and a match masks the whole base64 run around it (so the user
//! name before it and the padding after it go too). All forms of all secrets
//! are searched at once (one Aho-Corasick automaton), so the cost does not
//! grow with the number of users beyond the automaton's size.
//!
//! A secret's base64 core shorter than [`MIN_CORE`] characters (passwords of
//! 1-3 bytes at some alignments) is not searched: it would mask ordinary words.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use base64::Engine as _;
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

/// What a redacted secret is replaced with.
pub const MASK: &str = "***";

/// Shortest base64 core searched.
pub const MIN_CORE: usize = 4;

#[derive(Default)]
struct Registry {
    secrets: BTreeSet<String>,
    /// The automaton over every form of every secret, and which patterns are
    /// base64 cores; rebuilt on the first redaction after a registration.
    built: Option<Arc<Built>>,
}

struct Built {
    ac: AhoCorasick,
    /// Per pattern: a base64 core (its match widens to the base64 run).
    b64: Vec<bool>,
}

static REGISTRY: RwLock<Registry> = RwLock::new(Registry {
    secrets: BTreeSet::new(),
    built: None,
});

fn write() -> std::sync::RwLockWriteGuard<'static, Registry> {
    match REGISTRY.write() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Registers `secret` (empty ones are ignored) for redaction in every output.
pub fn register(secret: &str) {
    register_all(std::iter::once(secret));
}

/// Registers many secrets at once (one rebuild of the automaton).
pub fn register_all<'a>(secrets: impl IntoIterator<Item = &'a str>) {
    let mut g = write();
    let mut added = false;
    for s in secrets {
        if !s.is_empty() {
            added |= g.secrets.insert(s.to_string());
        }
    }
    if added {
        g.built = None;
    }
}

/// The automaton for the registered secrets (built once per change), or
/// `None` when nothing is registered.
fn built() -> Option<Arc<Built>> {
    {
        let g = match REGISTRY.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if g.secrets.is_empty() {
            return None;
        }
        if let Some(b) = &g.built {
            return Some(b.clone());
        }
    }
    let mut g = write();
    if g.built.is_none() {
        g.built = build(&g.secrets).map(Arc::new);
    }
    g.built.clone()
}

fn build(secrets: &BTreeSet<String>) -> Option<Built> {
    let mut patterns: Vec<String> = Vec::new();
    let mut b64 = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for s in secrets {
        for (form, is_b64) in forms(s) {
            if seen.insert(form.clone()) {
                patterns.push(form);
                b64.push(is_b64);
            }
        }
    }
    let ac = AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        .kind(Some(AhoCorasickKind::ContiguousNFA))
        .build(&patterns)
        .ok()?;
    Some(Built { ac, b64 })
}

/// Every form `s` is searched in: (text, is a base64 core).
pub fn forms(s: &str) -> Vec<(String, bool)> {
    let mut out = vec![(s.to_string(), false)];
    let mut add = |f: String| {
        if !f.is_empty() && !out.iter().any(|(o, _)| *o == f) {
            out.push((f, false));
        }
    };
    add(s.replace('\\', "\\\\").replace('"', "\\\""));
    if let Ok(j) = serde_json::to_string(s) {
        add(j[1..j.len() - 1].to_string());
    }
    add(html_escaped(s));
    add(url_encoded(s, true));
    add(url_encoded(s, false));
    for core in base64_cores(s.as_bytes()) {
        if core.len() >= MIN_CORE && !out.iter().any(|(o, _)| *o == core) {
            out.push((core, true));
        }
    }
    out
}

/// `s` as HTML text or attribute: the one escaper of the reports, so the HTML
/// form of a secret registered here is the form the reports write.
pub fn html_escaped(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// `s` percent-encoded (every byte but RFC 3986's unreserved ones), in upper-
/// or lower-case hex.
fn url_encoded(s: &str, upper: bool) -> String {
    let mut o = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            o.push(b as char);
        } else if upper {
            o.push_str(&format!("%{b:02X}"));
        } else {
            o.push_str(&format!("%{b:02x}"));
        }
    }
    o
}

/// The base64 characters that depend on `bytes` alone when they are encoded
/// after 0, 1 or 2 other bytes (mod 3): whatever precedes the secret in a
/// token (`\0user\0` of SASL PLAIN, `user:` of HTTP Basic), one of these is
/// in its encoding.
pub fn base64_cores(bytes: &[u8]) -> Vec<String> {
    let e = base64::engine::general_purpose::STANDARD;
    (0..3usize)
        .map(|a| {
            let mut buf = vec![0u8; a];
            buf.extend_from_slice(bytes);
            let enc = e.encode(&buf);
            // Character i covers bits 6i..6i+6; the secret holds bits 8a..8(a+n).
            let first = (8 * a).div_ceil(6);
            let end = (8 * (a + bytes.len())) / 6;
            enc.get(first..end.max(first)).unwrap_or("").to_string()
        })
        .collect()
}

fn is_b64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'+' || c == b'/'
}

/// `text` with every form of every registered secret replaced by [`MASK`].
pub fn redact(text: &str) -> Cow<'_, str> {
    let Some(b) = built() else {
        return Cow::Borrowed(text);
    };
    let bytes = text.as_bytes();
    let mut spans: Vec<(usize, usize)> =
        b.ac.find_overlapping_iter(text)
            .map(|m| {
                let (mut s, mut e) = (m.start(), m.end());
                if b.b64[m.pattern().as_usize()] {
                    while s > 0 && is_b64(bytes[s - 1]) {
                        s -= 1;
                    }
                    while e < bytes.len() && is_b64(bytes[e]) {
                        e += 1;
                    }
                    let mut pad = 0;
                    while pad < 2 && e < bytes.len() && bytes[e] == b'=' {
                        e += 1;
                        pad += 1;
                    }
                }
                (s, e)
            })
            .collect();
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut open: Option<(usize, usize)> = None;
    for (s, e) in spans {
        match open {
            Some((os, oe)) if s <= oe => open = Some((os, oe.max(e))),
            Some((os, oe)) => {
                out.push_str(&text[at..os]);
                out.push_str(MASK);
                at = oe;
                open = Some((s, e));
            }
            None => open = Some((s, e)),
        }
    }
    if let Some((os, oe)) = open {
        out.push_str(&text[at..os]);
        out.push_str(MASK);
        at = oe;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// Redacts bytes (a server's response, lossily as text).
pub fn redact_bytes(bytes: &[u8]) -> String {
    redact(&String::from_utf8_lossy(bytes)).into_owned()
}

/// Redacts every string of a JSON value (keys are mailbench's own names).
pub fn redact_json(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            if let Cow::Owned(r) = redact(s) {
                *s = r;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact_json),
        Value::Object(o) => o.values_mut().for_each(redact_json),
        _ => {}
    }
}

/// A line on stdout, redacted.
pub fn say(text: &str) {
    println!("{}", redact(text));
}

/// A line on stderr, redacted.
pub fn warn(text: &str) {
    eprintln!("{}", redact(text));
}

/// The `user:password@` part of a URL, if it has one (between `://` and the
/// host).
pub fn url_userinfo(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    let auth = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    auth.rfind('@').map(|i| &auth[..i])
}

/// Refuses a URL given as `what` that carries credentials
/// (`scheme://user:password@host`; mailbench never sends credentials from a
/// URL): they are registered as secrets first, and the error shows the URL
/// with them masked (exit 2).
pub fn refuse_url_credentials(what: &str, url: &str) -> crate::Result<()> {
    let Some(info) = url_userinfo(url) else {
        return Ok(());
    };
    let password = info.split_once(':').map_or(info, |(_, p)| p);
    register_all([info, password, percent_decoded(password).as_str()]);
    let shown = url.replacen(info, MASK, 1);
    Err(crate::Error::usage(format!(
        "{what} `{shown}`: credentials do not belong in a URL; give it as scheme://host:port \
         and the passwords in a users file, a password file or MAILBENCH_PASSWORD"
    )))
}

/// `%XX` sequences decoded (what a URL's password means).
fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|c| hex(*c)),
            b.get(i + 2).and_then(|c| hex(*c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_url_are_refused_and_never_shown() {
        assert_eq!(url_userinfo("imap://h:143"), None);
        assert_eq!(url_userinfo("http://h/p@x"), None, "an @ in the path");
        assert_eq!(url_userinfo("imap://u:p%40ss@h:143/"), Some("u:p%40ss"));
        refuse_url_credentials("--imap", "imap://h:143").unwrap();
        let e = refuse_url_credentials("--imap", "imap://bob:Wh%40tEver99@h:143").unwrap_err();
        assert_eq!(e.exit_status().code(), 2);
        let m = e.to_string();
        assert!(
            m.contains("imap://***@h:143") && !m.contains("Wh%40tEver99"),
            "{m}"
        );
        // Registered in every form, decoded too.
        assert_eq!(redact("Wh@tEver99 Wh%40tEver99"), "*** ***");
    }

    #[test]
    fn base64_cores_are_the_characters_the_secret_alone_decides() {
        let e = base64::engine::general_purpose::STANDARD;
        for prefix in ["", "\0", "\0u\0", "\0us\0", "bob:"] {
            let token = e.encode(format!("{prefix}secret-pw"));
            assert!(
                base64_cores(b"secret-pw")
                    .iter()
                    .any(|c| token.contains(c.as_str())),
                "{prefix:?}: {token}"
            );
        }
    }
}
