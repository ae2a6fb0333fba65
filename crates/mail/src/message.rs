//! Message generation with mail-builder: text bodies from a word list, binary
//! attachments sliced from one pre-generated random pool (so generation costs
//! little CPU), replies (In-Reply-To and References to the original),
//! forwards (the original attached as message/rfc822 in 7bit or 8bit, never
//! base64: RFC 2046 5.2.1), appointments and iMIP meeting requests
//! (text/calendar, lines folded at 75 octets: RFC 5545 3.1). The tests parse
//! every kind with mail-parser.

use crate::profile::SizeClass;
use mail_builder::MessageBuilder;
use mail_builder::headers::content_type::ContentType;
use mail_builder::mime::{BodyPart, MimePart};
use rand::Rng;
use std::borrow::Cow;

const WORDS: &[&str] = &[
    "the",
    "quarterly",
    "report",
    "meeting",
    "budget",
    "please",
    "review",
    "attached",
    "storage",
    "server",
    "project",
    "schedule",
    "customer",
    "thanks",
    "regards",
    "update",
    "deadline",
    "proposal",
    "team",
    "mailbox",
    "capacity",
    "plan",
    "agenda",
    "minutes",
    "release",
    "design",
    "issue",
    "follow",
    "up",
    "on",
    "our",
    "call",
    "next",
    "week",
    "and",
    "of",
    "to",
    "in",
    "for",
    "with",
    "this",
    "that",
    "we",
    "will",
    "can",
    "draft",
];

const ATTACHMENT_TYPES: &[(&str, &str)] = &[
    ("application/pdf", "report.pdf"),
    ("application/vnd.ms-excel", "figures.xls"),
    ("application/msword", "notes.doc"),
    ("image/png", "diagram.png"),
];

/// Size of the random pool attachments are cut from.
const POOL: usize = 2 * 1024 * 1024;

pub struct Generator {
    pool: Vec<u8>,
    sizes: Vec<SizeClass>,
    total_weight: f64,
}

/// What to put in a message besides its body.
pub struct Envelope<'a> {
    pub from: &'a str,
    pub to: &'a [String],
    pub subject: Cow<'a, str>,
    /// `X-Mailbench-Track` value (recipients report delivery latency with it).
    pub track: Option<String>,
    /// The Message-ID answered (without angle brackets); References lists
    /// `references` then it.
    pub in_reply_to: Option<String>,
    pub references: Vec<String>,
    /// Message-ID without angle brackets (`message_id` makes one).
    pub message_id: String,
    /// Date header, seconds since the epoch.
    pub date: i64,
}

impl Generator {
    pub fn new(sizes: &[SizeClass], seed: u64) -> Generator {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ 0x706f_6f6c);
        let mut pool = vec![0u8; POOL];
        rng.fill(&mut pool[..]);
        Generator {
            pool,
            sizes: sizes.to_vec(),
            total_weight: sizes.iter().map(|s| s.weight.max(0.0)).sum(),
        }
    }

    pub fn pick_size<R: Rng>(&self, rng: &mut R) -> &SizeClass {
        let mut x = rng.random::<f64>() * self.total_weight;
        for s in &self.sizes {
            if x < s.weight {
                return s;
            }
            x -= s.weight.max(0.0);
        }
        &self.sizes[self.sizes.len() - 1]
    }

    /// Text of about `bytes` bytes, in lines of about 72 characters, each
    /// ending with CRLF.
    pub fn text<R: Rng>(&self, rng: &mut R, bytes: usize) -> String {
        let mut s = String::with_capacity(bytes + 80);
        let mut line = 0;
        while s.len() < bytes {
            let w = WORDS[rng.random_range(0..WORDS.len())];
            if line > 0 && line + 1 + w.len() > 72 {
                s.push_str("\r\n");
                line = 0;
            }
            if line > 0 {
                s.push(' ');
                line += 1;
            }
            s.push_str(w);
            line += w.len();
        }
        if line > 0 {
            s.push_str("\r\n");
        }
        s
    }

    fn attachment<R: Rng>(&self, rng: &mut R, bytes: usize) -> &[u8] {
        let n = bytes.min(self.pool.len());
        let off = rng.random_range(0..=self.pool.len() - n);
        &self.pool[off..off + n]
    }

    fn headers<'a>(&self, env: &'a Envelope<'a>) -> MessageBuilder<'a> {
        let mut b = MessageBuilder::new()
            .from(env.from)
            .to(env.to.iter().map(|s| s.as_str()).collect::<Vec<&str>>())
            .subject(env.subject.as_ref())
            .message_id(bare_id(&env.message_id))
            .date(env.date);
        if let Some(t) = &env.track {
            b = b.header(
                "X-Mailbench-Track",
                mail_builder::headers::raw::Raw::new(t.as_str()),
            );
        }
        if let Some(r) = &env.in_reply_to {
            let r = bare_id(r);
            let mut refs: Vec<&str> = env.references.iter().map(|x| bare_id(x)).collect();
            refs.retain(|x| *x != r && !x.is_empty());
            refs.push(r);
            b = b.in_reply_to(r).references(refs);
        }
        b
    }

    /// A message from the profile's size mix: text body and maybe one attachment.
    pub fn mail<R: Rng>(&self, rng: &mut R, env: &Envelope<'_>) -> Vec<u8> {
        let size = self.pick_size(rng).clone();
        let body = self.text(rng, size.body.bytes() as usize);
        let mut b = self.headers(env).text_body(body);
        if size.attachment.bytes() > 0 {
            let (ct, name) = ATTACHMENT_TYPES[rng.random_range(0..ATTACHMENT_TYPES.len())];
            let data = self.attachment(rng, size.attachment.bytes() as usize);
            b = b.attachment(ct, name, data);
        }
        b.write_to_vec().unwrap_or_default()
    }

    /// A forward: a short note and the original attached as message/rfc822,
    /// as it is (7bit or 8bit; RFC 2046 5.2.1 allows no other encoding). An
    /// original that SMTP cannot carry as it is (bare CR/LF, NUL, lines over
    /// 998 octets) is attached as a base64 application/octet-stream file.
    pub fn forward<R: Rng>(&self, rng: &mut R, env: &Envelope<'_>, original: &[u8]) -> Vec<u8> {
        let note = self.text(rng, 300);
        let part = match rfc822_encoding(original) {
            Some(cte) => MimePart::new(
                ContentType::new("message/rfc822"),
                BodyPart::Binary(Cow::Borrowed(original)),
            )
            .transfer_encoding(cte)
            .attachment("forwarded.eml"),
            None => MimePart::new(
                ContentType::new("application/octet-stream"),
                BodyPart::Binary(Cow::Borrowed(original)),
            )
            .attachment("forwarded.eml"),
        };
        let body = MimePart::new(
            ContentType::new("multipart/mixed"),
            BodyPart::Multipart(vec![
                MimePart::new(ContentType::new("text/plain"), BodyPart::Text(note.into())),
                part,
            ]),
        );
        self.headers(env)
            .body(body)
            .write_to_vec()
            .unwrap_or_default()
    }

    /// A reply: a short answer and the quoted original text (at most 40
    /// lines of at most 200 characters).
    pub fn reply<R: Rng>(&self, rng: &mut R, env: &Envelope<'_>, quoted: &str) -> Vec<u8> {
        let mut body = self.text(rng, 600);
        body.push_str("\r\n\r\n");
        for l in quoted.lines().take(40) {
            body.push_str("> ");
            body.extend(l.chars().filter(|c| !c.is_control()).take(200));
            body.push_str("\r\n");
        }
        self.headers(env)
            .text_body(body)
            .write_to_vec()
            .unwrap_or_default()
    }

    /// An appointment (METHOD:PUBLISH) or a meeting request (METHOD:REQUEST) with
    /// the envelope's recipients as attendees, as text + text/calendar alternatives.
    pub fn calendar<R: Rng>(
        &self,
        rng: &mut R,
        env: &Envelope<'_>,
        start_unix: i64,
        minutes: i64,
        request: bool,
    ) -> Vec<u8> {
        let method = if request { "REQUEST" } else { "PUBLISH" };
        let uid = format!("{}-cal", bare_id(&env.message_id));
        let mut lines = vec![
            "BEGIN:VCALENDAR".to_string(),
            "VERSION:2.0".into(),
            "PRODID:-//mailbench//EN".into(),
            format!("METHOD:{method}"),
            "BEGIN:VEVENT".into(),
            format!("UID:{uid}"),
            format!("DTSTAMP:{}", ical_time(env.date)),
            format!("DTSTART:{}", ical_time(start_unix)),
            format!("DTEND:{}", ical_time(start_unix + minutes * 60)),
            format!("SUMMARY:{}", ical_text(&env.subject)),
            format!("ORGANIZER:mailto:{}", env.from),
        ];
        if request {
            for a in env.to {
                lines.push(format!(
                    "ATTENDEE;ROLE=REQ-PARTICIPANT;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:{a}"
                ));
            }
        }
        lines.push("END:VEVENT".into());
        lines.push("END:VCALENDAR".into());
        let mut ics = String::with_capacity(800);
        for l in &lines {
            ics.push_str(&fold_ical(l));
        }
        let text = self.text(rng, 200);
        let body = MimePart::new(
            ContentType::new("multipart/alternative"),
            BodyPart::Multipart(vec![
                MimePart::new(ContentType::new("text/plain"), BodyPart::Text(text.into())),
                MimePart::new(
                    ContentType::new("text/calendar").attribute("method", method),
                    BodyPart::Text(ics.into()),
                ),
            ]),
        );
        self.headers(env)
            .body(body)
            .write_to_vec()
            .unwrap_or_default()
    }
}

/// A Message-ID (without angle brackets) made of `parts`: each reduced to
/// letters, digits, `-` and `_` (RFC 5322 dot-atom text), joined by dots.
pub fn message_id(parts: &[&str]) -> String {
    let mut id = String::new();
    for p in parts {
        let p: String = p
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if !id.is_empty() {
            id.push('.');
        }
        id.push_str(&p);
    }
    id.push_str("@mailbench");
    id
}

/// A Message-ID without the angle brackets it may have been written with.
pub fn bare_id(id: &str) -> &str {
    id.trim().trim_start_matches('<').trim_end_matches('>')
}

/// How a message can be attached as message/rfc822 (RFC 2046 5.2.1): `7bit`
/// or `8bit`; None when it cannot travel as it is (bare CR or LF, NUL, a
/// line over 998 octets).
pub fn rfc822_encoding(m: &[u8]) -> Option<&'static str> {
    let mut eight = false;
    let mut line = 0usize;
    for (i, &b) in m.iter().enumerate() {
        match b {
            0 => return None,
            b'\r' if m.get(i + 1) != Some(&b'\n') => return None,
            b'\n' => {
                if i == 0 || m[i - 1] != b'\r' {
                    return None;
                }
                line = 0;
                continue;
            }
            _ => {}
        }
        if b >= 0x80 {
            eight = true;
        }
        if b != b'\r' {
            line += 1;
            if line > 998 {
                return None;
            }
        }
    }
    Some(if eight { "8bit" } else { "7bit" })
}

/// iCalendar TEXT escaping (RFC 5545 3.3.11).
fn ical_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | ';' | ',' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// One iCalendar content line with CRLF, folded so that no line is longer
/// than 75 octets (RFC 5545 3.1): continuation lines start with a space.
pub fn fold_ical(line: &str) -> String {
    let mut out = String::with_capacity(line.len() + 8);
    let mut len = 0;
    for c in line.chars() {
        let n = c.len_utf8();
        if len + n > 75 {
            out.push_str("\r\n ");
            len = 1;
        }
        out.push(c);
        len += n;
    }
    out.push_str("\r\n");
    out
}

/// `YYYYMMDDTHHMMSSZ` of a Unix time.
pub fn ical_time(unix: i64) -> String {
    let days = unix.div_euclid(86400);
    let secs = unix.rem_euclid(86400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        secs / 3600,
        (secs % 3600) / 60,
        secs % 60
    )
}

/// `DD-Mon-YYYY` (IMAP SEARCH date) of a Unix time.
pub fn imap_date(unix: i64) -> String {
    const MON: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, m, d) = civil_from_days(unix.div_euclid(86400));
    format!("{d}-{}-{y}", MON[(m as usize).saturating_sub(1).min(11)])
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z.rem_euclid(146097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ProfileExt;
    use rand::SeedableRng;

    #[test]
    fn dates_and_messages() {
        assert_eq!(ical_time(0), "19700101T000000Z");
        assert_eq!(ical_time(1_700_000_000), "20231114T221320Z");
        assert_eq!(imap_date(1_700_000_000), "14-Nov-2023");
        let p = crate::profile::Profile::load("mmb3").unwrap();
        let g = Generator::new(&p.sizes, 1);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let to = vec!["b@x.test".to_string()];
        let env = Envelope {
            from: "a@x.test",
            to: &to,
            subject: "hello".into(),
            track: Some("run 1 2".into()),
            in_reply_to: None,
            references: Vec::new(),
            message_id: "1@x".into(),
            date: 1_700_000_000,
        };
        let m = g.mail(&mut rng, &env);
        let t = String::from_utf8_lossy(&m);
        assert!(t.contains("X-Mailbench-Track: run 1 2\r\n"), "{t}");
        let c = g.calendar(&mut rng, &env, 1_700_003_600, 30, true);
        let t = String::from_utf8_lossy(&c);
        assert!(
            t.contains("METHOD:REQUEST") && t.contains("ATTENDEE"),
            "{t}"
        );
        let f = g.forward(&mut rng, &env, &m);
        assert!(String::from_utf8_lossy(&f).contains("message/rfc822"));
        let total: f64 = (0..2000)
            .map(|_| {
                g.pick_size(&mut rng).body.bytes() as f64
                    + g.pick_size(&mut rng).attachment.bytes() as f64
            })
            .sum();
        assert!(total / 2000.0 > 5000.0);
    }
}
