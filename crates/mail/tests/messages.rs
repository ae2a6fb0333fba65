//! Every kind of message the profiles produce (send with and without an
//! attachment, reply, reply all, forward, meeting request, appointment),
//! generated as `mail run` and `mail setup` do and checked with mail-parser
//! (tests/conform). `cargo test --test messages -- --nocapture` prints each
//! kind's structure as the parser sees it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod conform;

use mail_parser::{MimeHeaders, PartType};
use mailbench_mail::message::{Envelope, Generator, message_id};
use mailbench_mail::profile::{Profile, ProfileExt};
use rand::SeedableRng;

fn env<'a>(to: &'a [String], subject: &str, id: &str, track: bool) -> Envelope<'a> {
    Envelope {
        from: "user1@example.test",
        to,
        subject: subject.to_string().into(),
        track: track.then(|| "r1 7 123456 0 1,2".to_string()),
        in_reply_to: None,
        references: Vec::new(),
        message_id: message_id(&["r1", id]),
        date: 1_700_000_000,
    }
}

/// One line per part: its content type, transfer encoding and size.
fn structure(m: &mail_parser::Message<'_>) -> String {
    let mut s = format!(
        "  Message-ID <{}>, Subject {:?}, In-Reply-To {:?}, References {:?}\n",
        m.message_id().unwrap_or(""),
        m.subject().unwrap_or(""),
        conform::ids(m.in_reply_to()),
        conform::ids(m.references())
    );
    for (i, p) in m.parts.iter().enumerate() {
        let ct = p
            .content_type()
            .map(|c| format!("{}/{}", c.ctype(), c.subtype().unwrap_or("")))
            .unwrap_or_else(|| "text/plain (default)".into());
        let kind = match &p.body {
            PartType::Multipart(_) => "multipart".to_string(),
            PartType::Message(inner) => {
                format!("message, subject {:?}", inner.subject().unwrap_or(""))
            }
            _ => format!("{} bytes", p.contents().len()),
        };
        s.push_str(&format!(
            "  part {i}: {ct}, {}, {kind}\n",
            p.content_transfer_encoding().unwrap_or("-")
        ));
    }
    s
}

/// The generator, its random source, the recipients, and the structure of every
/// message shown so far.
struct Kinds {
    g: Generator,
    rng: rand::rngs::SmallRng,
    to: Vec<String>,
    shown: String,
}

impl Kinds {
    fn show(&mut self, kind: &str, m: &mail_parser::Message<'_>) {
        self.shown.push_str(&format!("{kind}\n{}", structure(m)));
    }

    /// Send: every size class of the mix, with and without attachments; returns an
    /// original with an attachment.
    fn sends(&mut self) -> Vec<u8> {
        let mut with_attachment = None;
        let mut plain = None;
        for i in 0..200 {
            let m = self.g.mail(
                &mut self.rng,
                &env(&self.to, "Status 1", &format!("s{i}"), true),
            );
            let parsed = conform::check("send", &m);
            if parsed.attachment_count() > 0 {
                with_attachment.get_or_insert(m);
            } else {
                plain.get_or_insert(m);
            }
        }
        let original = with_attachment.expect("the mix has attachments");
        let orig = conform::check("send", &original);
        self.show("send (with an attachment)", &orig);
        let plain = plain.expect("the mix has plain messages");
        self.show("send", &conform::check("send", &plain));
        assert!(orig.message_id().unwrap().starts_with("r1.s"));
        assert!(orig.message_id().unwrap().ends_with("@mailbench"));
        let track = String::from_utf8_lossy(&original);
        assert!(track.contains("\r\nX-Mailbench-Track: r1 7 123456 0 1,2\r\n"));
        original
    }

    /// Reply and reply all: In-Reply-To and References name the original.
    fn replies(&mut self, orig_id: &str) {
        let quoted = "a quoted line\r\nand a long one ".repeat(3) + &"x".repeat(2000);
        let to = self.to.clone();
        for (kind, rcpts) in [("reply", &to[..1]), ("reply all", &to[..])] {
            let mut e = env(rcpts, "RE: Status 1", kind, true);
            e.in_reply_to = Some(format!("<{orig_id}>"));
            e.references = vec!["<older@mailbench>".into()];
            let m = self.g.reply(&mut self.rng, &e, &quoted);
            let r = conform::check(kind, &m);
            assert_eq!(
                conform::ids(r.in_reply_to()),
                vec![orig_id.to_string()],
                "{kind}"
            );
            assert_eq!(
                conform::ids(r.references()),
                vec!["older@mailbench".to_string(), orig_id.to_string()],
                "{kind}"
            );
            self.show(kind, &r);
        }
    }

    /// Forward: the original attached whole as message/rfc822, not base64; an
    /// original SMTP cannot carry as it is (a bare LF) goes as a file.
    fn forwards(&mut self, original: &[u8]) {
        let orig = conform::check("send", original);
        let f = self.g.forward(
            &mut self.rng,
            &env(&self.to, "FW: Status 1", "f", true),
            original,
        );
        let fw = conform::check("forward", &f);
        let inner = fw
            .parts
            .iter()
            .find_map(|p| match &p.body {
                PartType::Message(m) => Some(m),
                _ => None,
            })
            .expect("forward attaches the original as message/rfc822");
        assert_eq!(inner.message_id(), orig.message_id());
        assert_eq!(inner.subject(), Some("Status 1"));
        assert_eq!(inner.attachment_count(), orig.attachment_count());
        self.show("forward", &fw);
        let odd = b"From: a@x\nSubject: odd\n\nbody\n".to_vec();
        let f = self
            .g
            .forward(&mut self.rng, &env(&self.to, "FW: odd", "f2", true), &odd);
        let fw2 = conform::check("forward of a bare-LF message", &f);
        assert!(
            fw2.attachments()
                .any(|a| a.is_content_type("application", "octet-stream"))
        );
    }

    /// Meeting request and appointment: text + text/calendar alternatives.
    fn calendar_items(&mut self) {
        let many: Vec<String> = (2..=12)
            .map(|i| format!("a.rather.long.attendee.name.{i}@departments.example.test"))
            .collect();
        let m = self.g.calendar(
            &mut self.rng,
            &env(&many, "Meeting 1", "m", true),
            1_700_003_600,
            60,
            true,
        );
        let mr = conform::check("meeting request", &m);
        let cal = mr
            .parts
            .iter()
            .find(|p| p.is_content_type("text", "calendar"))
            .expect("a text/calendar part");
        assert_eq!(
            cal.content_type().and_then(|c| c.attribute("method")),
            Some("REQUEST")
        );
        let ics = cal.text_contents().unwrap().replace("\r\n ", "");
        assert_eq!(ics.matches("ATTENDEE;").count(), many.len(), "{ics}");
        self.show("meeting request", &mr);
        let own = vec!["user1@example.test".to_string()];
        let a = self.g.calendar(
            &mut self.rng,
            &env(&own, "Appointment 1", "a", false),
            1_700_003_600,
            30,
            false,
        );
        let ap = conform::check("appointment", &a);
        assert!(String::from_utf8_lossy(&a).contains("METHOD:PUBLISH"));
        self.show("appointment", &ap);
    }
}

#[test]
fn every_message_kind_is_conformant() {
    let p = Profile::load("mmb3").unwrap();
    let mut k = Kinds {
        g: Generator::new(&p.sizes, 7),
        rng: rand::rngs::SmallRng::seed_from_u64(7),
        to: (2..=4).map(|i| format!("user{i}@example.test")).collect(),
        shown: String::new(),
    };
    let original = k.sends();
    let orig_id = conform::check("send", &original)
        .message_id()
        .unwrap()
        .to_string();
    k.replies(&orig_id);
    k.forwards(&original);
    k.calendar_items();
    eprintln!("{}", k.shown);
}
