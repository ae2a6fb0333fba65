//! Redaction of credentials by value. Every password mailbench is given
//! (`Credentials`, the local target's own) is registered here; every text
//! made from what a server sent passes through [`redact`] before it can
//! reach an error, a sample, test.log, result.json, the report or a trace:
//! `OpError::new` redacts its message (every protocol error is one), the
//! trace redacts each entry, the local servers' log lines are redacted.
//! A server that echoes a command back (`NO you said: LOGIN "u" "pw"`, or the
//! base64 token of AUTH PLAIN / AUTHENTICATE) therefore leaks nothing.
//!
//! Matched by value: the password as is, in IMAP quoted form, and any
//! base64 word whose decoded bytes contain it (SASL PLAIN tokens). Process-
//! wide because the sinks (errors built deep in the protocol code) have no
//! handle on the credentials; bounded by `MAX_SCANNED` passwords scanned
//! as substrings (beyond that, whole words are looked up in a set).

use base64::Engine as _;
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::RwLock;

/// What a redacted secret is replaced with.
pub const MASK: &str = "***";

/// Passwords searched as substrings of every text; more are matched as
/// whole words only (a users file of 100,000 users).
const MAX_SCANNED: usize = 256;

/// Shortest base64 word decoded to look for a password inside.
const MIN_B64: usize = 8;

#[derive(Default)]
struct Registry {
    scanned: Vec<String>,
    words: HashSet<String>,
}

static SECRETS: RwLock<Option<Registry>> = RwLock::new(None);

/// Registers `password` (empty ones are ignored) for redaction.
pub fn register(password: &str) {
    if password.is_empty() {
        return;
    }
    let mut g = match SECRETS.write() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    let r = g.get_or_insert_with(Registry::default);
    if r.words.insert(password.to_string()) && r.scanned.len() < MAX_SCANNED {
        r.scanned.push(password.to_string());
    }
}

/// `text` with every registered password (plain, IMAP-quoted, inside a
/// base64 word) replaced by `MASK`.
pub fn redact(text: &str) -> Cow<'_, str> {
    let g = match SECRETS.read() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    let Some(r) = g.as_ref() else {
        return Cow::Borrowed(text);
    };
    let mut out = Cow::Borrowed(text);
    for s in &r.scanned {
        for form in [s.clone(), quoted_inner(s)] {
            if out.contains(form.as_str()) {
                out = Cow::Owned(out.replace(form.as_str(), MASK));
            }
        }
    }
    if words_leak(&out, r) {
        out = Cow::Owned(mask_words(&out, r));
    }
    out
}

/// Redacts bytes (a server's response unit, lossily as text).
pub fn redact_bytes(bytes: &[u8]) -> String {
    redact(&String::from_utf8_lossy(bytes)).into_owned()
}

/// The password as it appears inside an IMAP quoted string.
fn quoted_inner(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn is_sep(c: char) -> bool {
    c.is_whitespace() || "\"'<>()[]{},;:".contains(c)
}

/// Whether a word of `text` is a password (large registries) or a base64
/// word hiding one.
fn words_leak(text: &str, r: &Registry) -> bool {
    text.split(is_sep)
        .any(|w| !w.is_empty() && (r.words.contains(w) || b64_hides(w, r)))
}

fn mask_words(text: &str, r: &Registry) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if !word.is_empty() && (r.words.contains(word.as_str()) || b64_hides(word, r)) {
            out.push_str(MASK);
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if is_sep(c) {
            flush(&mut word, &mut out);
            out.push(c);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Whether `w` is base64 whose decoded bytes contain a registered password.
fn b64_hides(w: &str, r: &Registry) -> bool {
    if w.len() < MIN_B64 {
        return false;
    }
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const ANY_PADDING: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let Ok(bytes) = ANY_PADDING.decode(w.trim_end_matches('=')) else {
        return false;
    };
    let text = String::from_utf8_lossy(&bytes);
    // SASL PLAIN: authzid NUL authcid NUL password.
    text.split('\0').any(|part| r.words.contains(part))
        || r.scanned.iter().any(|s| text.contains(s.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_in_every_form() {
        register("s3cr\"et-pw");
        register("");
        let token = base64::engine::general_purpose::STANDARD.encode("\0u@x\0s3cr\"et-pw");
        let padded = base64::engine::general_purpose::STANDARD.encode("\0u1@x\0s3cr\"et-pw");
        assert!(padded.ends_with("=="), "{padded}");
        for (text, left) in [
            (
                "a1 NO you said: LOGIN \"u@x\" \"s3cr\\\"et-pw\"",
                "LOGIN \"u@x\" \"***\"",
            ),
            ("535 you said AUTH PLAIN s3cr\"et-pw", "AUTH PLAIN ***"),
            (
                &format!("NO \"AUTHENTICATE\" \"PLAIN\" \"{token}\""),
                "\"PLAIN\" \"***\"",
            ),
            (&format!("535 5.7.8 {token}"), "535 5.7.8 ***"),
            (
                &format!("535 you said: AUTH PLAIN {padded}"),
                "AUTH PLAIN ***",
            ),
        ] {
            let r = redact(text);
            assert!(!r.contains("s3cr"), "{r}");
            assert!(!r.contains(&token) && !r.contains(&padded[..8]), "{r}");
            assert!(r.contains(left), "{r}");
        }
        // Nothing else is touched.
        assert_eq!(redact("a2 OK LOGIN done"), "a2 OK LOGIN done");
        assert!(matches!(redact("* 3 EXISTS"), Cow::Borrowed(_)));
    }
}
