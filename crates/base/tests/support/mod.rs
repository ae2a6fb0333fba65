//! What the redaction tests share: the encodings mailbench sends a secret in.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use base64::Engine as _;

/// Every encoding of `pw` (for user `login`) that mailbench puts on a wire
/// or in a file: plain (IMAP literal, ManageSieve), IMAP quoted, SASL PLAIN
/// (with and without padding), SASL LOGIN, HTTP Basic, URL-encoded,
/// JSON-escaped.
pub fn encodings(login: &str, pw: &str) -> Vec<String> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let plain = b64(&format!("\0{login}\0{pw}"));
    let json = serde_json::to_string(pw).unwrap();
    vec![
        pw.to_string(),
        format!("\"{}\"", pw.replace('\\', "\\\\").replace('"', "\\\"")),
        plain.clone(),
        plain.trim_end_matches('=').to_string(),
        b64(pw),
        b64(&format!("{login}:{pw}")),
        pw.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect(),
        json[1..json.len() - 1].to_string(),
    ]
}

/// What must not be left of `pw` in a redacted text that held `enc`.
pub fn leaks(out: &str, pw: &str, enc: &str) -> bool {
    out.contains(pw) || (enc.len() >= 8 && out.contains(enc))
}
