//! Checks that a generated message is what RFC 5322 and RFC 2045-2049 allow,
//! by parsing it with mail-parser (a kept, independent parser) and by looking
//! at the raw lines: CRLF only, no line over 998 octets, one Date, From and
//! Message-ID each, a Message-ID in exactly one pair of angle brackets, a
//! message/rfc822 part never base64 or quoted-printable (RFC 2046 5.2.1) and
//! parseable itself, and text/calendar lines at most 75 octets (RFC 5545 3.1).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use mail_parser::{Message, MessageParser, MimeHeaders, PartType};

/// Panics (naming `what`) unless `raw` is a conformant message; returns it parsed.
pub fn check<'x>(what: &str, raw: &'x [u8]) -> Message<'x> {
    assert!(raw.ends_with(b"\r\n"), "{what}: does not end with CRLF");
    let lines: Vec<&[u8]> = raw.split(|b| *b == b'\n').collect();
    for (i, line) in lines.iter().enumerate() {
        let l = line.strip_suffix(b"\r").unwrap_or(line);
        if i + 1 < lines.len() {
            assert!(line.ends_with(b"\r"), "{what}: bare LF at line {}", i + 1);
        }
        assert!(!l.contains(&b'\r'), "{what}: bare CR at line {}", i + 1);
        assert!(
            l.len() <= 998,
            "{what}: line {} is {} octets long",
            i + 1,
            l.len()
        );
    }
    check_headers(what, raw);
    let m = MessageParser::default()
        .parse(raw)
        .unwrap_or_else(|| panic!("{what}: mail-parser cannot parse it"));
    assert!(m.date().is_some(), "{what}: no Date");
    assert!(m.from().is_some(), "{what}: no From");
    assert!(m.message_id().is_some(), "{what}: no Message-ID");
    for (n, part) in m.parts.iter().enumerate() {
        let ct = part.content_type();
        let ty = ct
            .map(|c| c.ctype().to_ascii_lowercase())
            .unwrap_or_default();
        let sub = ct
            .and_then(|c| c.subtype())
            .map(|s| s.to_ascii_lowercase())
            .unwrap_or_default();
        if ty == "message" && sub == "rfc822" {
            let cte = part
                .content_transfer_encoding()
                .unwrap_or("7bit")
                .to_ascii_lowercase();
            assert!(
                ["7bit", "8bit", "binary"].contains(&cte.as_str()),
                "{what}: part {n} is message/rfc822 in {cte} (RFC 2046 5.2.1 allows 7bit, 8bit, binary)"
            );
            let PartType::Message(inner) = &part.body else {
                panic!("{what}: part {n} message/rfc822 does not hold a message");
            };
            assert!(
                inner.from().is_some(),
                "{what}: the attached message has no From"
            );
            assert!(
                inner.subject().is_some(),
                "{what}: the attached message has no Subject"
            );
        }
        if ty == "text" && sub == "calendar" {
            let text = part.text_contents().unwrap_or("");
            for l in text.split("\r\n") {
                assert!(l.len() <= 75, "{what}: iCalendar line over 75 octets: {l}");
            }
            assert!(text.starts_with("BEGIN:VCALENDAR"), "{what}: {text}");
        }
    }
    m
}

/// The top-level header block: printable ASCII, `Name: value` or folded
/// continuation lines, and one Date, From, Message-ID and MIME-Version each.
fn check_headers(what: &str, raw: &[u8]) {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{what}: no blank line after the headers"));
    let head = std::str::from_utf8(&raw[..end]).unwrap_or_else(|_| panic!("{what}: 8-bit header"));
    let mut counts = std::collections::HashMap::new();
    let mut message_id = String::new();
    let mut current = String::new();
    for line in head.split("\r\n") {
        assert!(line.is_ascii(), "{what}: non-ASCII header line {line}");
        if line.starts_with([' ', '\t']) {
            if current == "message-id" {
                message_id.push_str(line);
            }
            continue;
        }
        let (name, value) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("{what}: not a header line: {line}"));
        assert!(
            !name.is_empty() && name.bytes().all(|b| (33..=126).contains(&b)),
            "{what}: bad header name `{name}`"
        );
        current = name.to_ascii_lowercase();
        *counts.entry(current.clone()).or_insert(0) += 1;
        if current == "message-id" {
            message_id = value.to_string();
        }
    }
    for h in ["date", "from", "message-id", "mime-version"] {
        assert_eq!(
            counts.get(h),
            Some(&1),
            "{what}: {h} appears {:?} times",
            counts.get(h)
        );
    }
    let id = message_id.trim();
    assert!(
        id.starts_with('<')
            && id.ends_with('>')
            && id.matches('<').count() == 1
            && id.matches('>').count() == 1
            && id.contains('@'),
        "{what}: Message-ID {id} is not one <id-left@id-right>"
    );
}

/// The texts of a HeaderValue that is a message-id list.
pub fn ids(v: &mail_parser::HeaderValue<'_>) -> Vec<String> {
    match v {
        mail_parser::HeaderValue::Text(t) => vec![t.to_string()],
        mail_parser::HeaderValue::TextList(l) => l.iter().map(|t| t.to_string()).collect(),
        _ => Vec::new(),
    }
}

/// The structure of a message as text: its key header lines as written
/// (unfolded: Message-ID, In-Reply-To, References, Content-Type,
/// Content-Transfer-Encoding) and the MIME tree as mail-parser sees it, one
/// line per part with its content type, transfer encoding and body size.
pub fn describe(raw: &[u8]) -> String {
    let mut out = String::new();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..end]).replace("\r\n ", " ");
    let head = head.replace("\r\n\t", " ");
    for name in [
        "message-id",
        "in-reply-to",
        "references",
        "content-type",
        "content-transfer-encoding",
    ] {
        for line in head.split("\r\n") {
            if line
                .split_once(':')
                .is_some_and(|(n, _)| n.eq_ignore_ascii_case(name))
            {
                out.push_str(&format!("  {line}\n"));
            }
        }
    }
    if let Some(m) = MessageParser::default().parse(raw) {
        out.push_str("  MIME tree:\n");
        tree(&m, 0, 2, &mut out);
    }
    out
}

fn tree(m: &Message<'_>, id: usize, depth: usize, out: &mut String) {
    let Some(part) = m.parts.get(id) else {
        return;
    };
    let ct = part
        .content_type()
        .map(|c| {
            format!(
                "{}/{}",
                c.ctype().to_ascii_lowercase(),
                c.subtype().unwrap_or("").to_ascii_lowercase()
            )
        })
        .unwrap_or_else(|| "text/plain (default)".into());
    let cte = part
        .content_transfer_encoding()
        .unwrap_or("7bit (default)")
        .to_ascii_lowercase();
    let size = part.offset_end.saturating_sub(part.offset_body);
    out.push_str(&format!(
        "{:indent$}- {ct}; transfer encoding {cte}; {size} octets\n",
        "",
        indent = depth * 2
    ));
    match &part.body {
        PartType::Multipart(children) => {
            for c in children {
                tree(m, *c as usize, depth + 1, out);
            }
        }
        PartType::Message(inner) => tree(inner, 0, depth + 1, out),
        _ => {}
    }
}
