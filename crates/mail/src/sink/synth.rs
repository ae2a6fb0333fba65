//! The messages the sink makes up when asked for content it did not keep: a
//! short header (with the tracking header of a delivered message) and a
//! plain-text body of filler lines, so that the whole message has the size
//! that was received. The same message is made every time it is asked for.

use super::store::{Msg, flag_list};

/// The filler every body is cut from (7-bit text, lines end with CRLF).
const FILL: &[u8; 78] =
    b"The sink keeps no message bodies: this line stands for text it received.  ....";

/// The date every made-up message carries.
const DATE: &str = "Thu, 01 Jan 2026 09:00:00 +0000";
/// The INTERNALDATE of every message.
pub const INTERNALDATE: &str = "01-Jan-2026 09:00:00 +0000";

/// The header block of message `m` of `user`'s mailbox `mailbox` (ends with
/// the empty line).
pub fn head(user: &str, mailbox: &str, m: &Msg) -> String {
    let mut h = format!(
        "Date: {DATE}\r\nFrom: <sender@sink.invalid>\r\nTo: <{user}>\r\nSubject: Message {uid}\r\n\
         Message-ID: <{uid}.{mb:x}@sink.invalid>\r\n",
        uid = m.uid,
        mb = fnv(mailbox.as_bytes()) ^ fnv(user.as_bytes()).rotate_left(7),
    );
    if let Some(t) = &m.track {
        h.push_str("X-Mailbench-Track: ");
        h.push_str(t);
        h.push_str("\r\n");
    }
    h.push_str("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n");
    h
}

fn fnv(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, c| {
        (h ^ u32::from(*c)).wrapping_mul(0x0100_0193)
    })
}

/// Body bytes of a message of `size` with a header of `head_len`: the rest
/// of the size (never a lone byte, which no line could hold).
pub fn body_len(size: u32, head_len: usize) -> usize {
    match (size as usize).saturating_sub(head_len) {
        1 => 0,
        n => n,
    }
}

/// Appends `n` bytes of filler lines (each ending with CRLF) to `out`.
pub fn fill(out: &mut Vec<u8>, n: usize) {
    let mut rem = n;
    while rem >= 2 {
        let full = FILL.len() + 2;
        // Never leave a single byte for the last line.
        let line = if rem >= full + 2 || rem <= full {
            rem.min(full)
        } else {
            rem - 2
        };
        out.extend_from_slice(&FILL[..line - 2]);
        out.extend_from_slice(b"\r\n");
        rem -= line;
    }
}

/// The lines of `head` whose field name is one of `names` (any case), then
/// the empty line (as `BODY[HEADER.FIELDS (...)]` answers).
pub fn fields(head: &str, names: &[String]) -> String {
    let mut out = String::new();
    for line in head.split("\r\n") {
        if let Some((name, _)) = line.split_once(':')
            && names.iter().any(|n| n.eq_ignore_ascii_case(name.trim()))
        {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("\r\n");
    out
}

/// What a FETCH asks for.
#[derive(Debug, Default, PartialEq)]
pub struct Items {
    pub uid: bool,
    pub flags: bool,
    pub internaldate: bool,
    pub size: bool,
    pub envelope: bool,
    pub bodystructure: bool,
    /// `BODY[]` / `BODY.PEEK[]`.
    pub whole: bool,
    /// `BODY[HEADER]`.
    pub header: bool,
    /// `BODY[HEADER.FIELDS (...)]`: the field names.
    pub fields: Option<Vec<String>>,
    /// `BODY[TEXT]`, with the length of `<0.n>` if partial.
    pub text: Option<Option<usize>>,
    /// A non-peeking `BODY[...]`: the message becomes \Seen.
    pub sets_seen: bool,
}

impl Items {
    /// Parses a FETCH item list (`(UID FLAGS BODY.PEEK[TEXT]<0.2048>)` or a
    /// single item); `uid_fetch`: the UID is always returned.
    pub fn parse(list: &str, uid_fetch: bool) -> Items {
        let up = list.to_ascii_uppercase();
        let has = |w: &str| up.split([' ', '(', ')']).any(|x| x == w);
        let mut i = Items {
            uid: uid_fetch || has("UID"),
            flags: has("FLAGS") || has("FAST") || has("ALL") || has("FULL"),
            internaldate: has("INTERNALDATE") || has("FAST") || has("ALL") || has("FULL"),
            size: has("RFC822.SIZE") || has("FAST") || has("ALL") || has("FULL"),
            envelope: has("ENVELOPE") || has("ALL") || has("FULL"),
            bodystructure: has("BODYSTRUCTURE") || has("FULL"),
            whole: up.contains("BODY[]") || up.contains("BODY.PEEK[]"),
            header: up.contains("[HEADER]"),
            sets_seen: up.contains("BODY["),
            ..Items::default()
        };
        if let Some(p) = up.find("HEADER.FIELDS (") {
            let names = up[p + 15..].split(')').next().unwrap_or("");
            i.fields = Some(names.split_whitespace().map(str::to_string).collect());
        }
        if let Some(p) = up.find("[TEXT]") {
            let partial = up[p + 6..]
                .strip_prefix('<')
                .and_then(|r| r.split('>').next())
                .and_then(|r| r.split_once('.'))
                .and_then(|(_, n)| n.parse().ok());
            i.text = Some(partial);
        }
        i
    }
}

/// Appends a literal.
fn literal(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(format!("{{{}}}\r\n", bytes.len()).as_bytes());
    out.extend_from_slice(bytes);
}

/// Appends the `* seq FETCH (...)` answer for message `m` of `user`'s
/// mailbox `mailbox`.
pub fn fetch_answer(out: &mut Vec<u8>, seq: usize, m: &Msg, i: &Items, user: &str, mailbox: &str) {
    let h = head(user, mailbox, m);
    let body = body_len(m.size, h.len());
    let total = h.len() + body;
    let mut parts: Vec<String> = Vec::new();
    if i.uid {
        parts.push(format!("UID {}", m.uid));
    }
    if i.flags || i.sets_seen {
        parts.push(format!("FLAGS {}", flag_list(m.flags)));
    }
    if i.internaldate {
        parts.push(format!("INTERNALDATE \"{INTERNALDATE}\""));
    }
    if i.size {
        parts.push(format!("RFC822.SIZE {total}"));
    }
    if i.envelope {
        parts.push(format!(
            "ENVELOPE (\"{DATE}\" \"Message {uid}\" ((NIL NIL \"sender\" \"sink.invalid\")) NIL NIL \
             ((NIL NIL {to})) NIL NIL NIL \"<{uid}@sink.invalid>\")",
            uid = m.uid,
            to = envelope_addr(user)
        ));
    }
    if i.bodystructure {
        parts.push(format!(
            "BODYSTRUCTURE (\"TEXT\" \"PLAIN\" (\"CHARSET\" \"us-ascii\") NIL NIL \"7BIT\" {body} {} NIL NIL NIL NIL)",
            body / (FILL.len() + 2) + 1
        ));
    }
    out.extend_from_slice(format!("* {seq} FETCH ({}", parts.join(" ")).as_bytes());
    let mut sep = if parts.is_empty() { "" } else { " " };
    if i.whole {
        out.extend_from_slice(format!("{sep}BODY[] ").as_bytes());
        let mut whole = Vec::with_capacity(total);
        whole.extend_from_slice(h.as_bytes());
        fill(&mut whole, body);
        literal(out, &whole);
        sep = " ";
    }
    if i.header {
        out.extend_from_slice(format!("{sep}BODY[HEADER] ").as_bytes());
        literal(out, h.as_bytes());
        sep = " ";
    }
    if let Some(names) = &i.fields {
        out.extend_from_slice(
            format!("{sep}BODY[HEADER.FIELDS ({})] ", names.join(" ")).as_bytes(),
        );
        literal(out, fields(&h, names).as_bytes());
        sep = " ";
    }
    if let Some(partial) = i.text {
        let n = partial.map_or(body, |p| p.min(body));
        let mut text = Vec::with_capacity(n);
        fill(&mut text, body);
        text.truncate(n);
        let tag = if partial.is_some() {
            "BODY[TEXT]<0>"
        } else {
            "BODY[TEXT]"
        };
        out.extend_from_slice(format!("{sep}{tag} ").as_bytes());
        literal(out, &text);
    }
    out.extend_from_slice(b")\r\n");
}

/// `"local" "domain"` of an address for an ENVELOPE.
fn envelope_addr(user: &str) -> String {
    let (local, domain) = user.split_once('@').unwrap_or((user, "sink.invalid"));
    let q = |s: &str| format!("\"{}\"", s.replace(['"', '\\'], ""));
    format!("{} {}", q(local), q(domain))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(size: u32, track: Option<&str>) -> Msg {
        Msg {
            uid: 7,
            size,
            flags: 0,
            track: track.map(Into::into),
        }
    }

    #[test]
    fn made_up_messages_have_the_size_received() {
        for size in [0u32, 10, 300, 301, 302, 381, 382, 383, 5000, 700_000] {
            let m = msg(size, Some("r1 3 99 2 4,5"));
            let h = head("u@x", "INBOX", &m);
            let b = body_len(size, h.len());
            let mut v = Vec::new();
            fill(&mut v, b);
            assert_eq!(v.len(), b, "{size}");
            assert_eq!(h.len() + b, (size as usize).max(h.len()), "{size}");
            // Lines end with CRLF and none is bare: attachable as message/rfc822.
            let whole = [h.as_bytes(), &v].concat();
            assert_eq!(
                crate::message::rfc822_encoding(&whole),
                Some("7bit"),
                "{size}"
            );
        }
    }

    #[test]
    fn fetch_answers_parse_as_the_client_reads_them() {
        let m = msg(4000, Some("r1 3 99 2 4,5"));
        let mut out = Vec::new();
        let i = Items::parse("(UID BODY.PEEK[HEADER.FIELDS (X-Mailbench-Track)])", true);
        assert!(!i.sets_seen && i.fields.is_some());
        fetch_answer(&mut out, 3, &m, &i, "u@x", "INBOX");
        assert_eq!(crate::imap::fetch_seq_uid(&out), Some((3, 7)));
        assert_eq!(
            crate::imap::header_value(&out, "X-Mailbench-Track").as_deref(),
            Some("r1 3 99 2 4,5")
        );
        let mut out = Vec::new();
        let i = Items::parse(
            "(BODY.PEEK[HEADER.FIELDS (FROM MESSAGE-ID REFERENCES)] BODY.PEEK[TEXT]<0.2048>)",
            true,
        );
        assert_eq!(i.text, Some(Some(2048)));
        fetch_answer(&mut out, 1, &m, &i, "u@x", "INBOX");
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("BODY[TEXT]<0> {2048}\r\n"), "{text}");
        assert!(text.contains("Message-ID: <7."), "{text}");
        let mut out = Vec::new();
        let i = Items::parse("(BODY[])", true);
        assert!(i.whole && i.sets_seen);
        fetch_answer(&mut out, 1, &m, &i, "u@x", "INBOX");
        assert!(String::from_utf8_lossy(&out).contains("BODY[] {4000}\r\n"));
    }
}
