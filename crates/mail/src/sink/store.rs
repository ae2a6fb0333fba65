//! The sink's state: per account its mailboxes, and per message only what the
//! profile's tasks ask about (UID, size, flags, the tracking header of a
//! delivered message). Message bodies are not kept: a fetch answers with a
//! message of the stored size made up on the spot (`synth`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// The flags a message can carry, one bit each.
pub const SEEN: u8 = 1;
pub const ANSWERED: u8 = 2;
pub const FLAGGED: u8 = 4;
pub const DELETED: u8 = 8;
pub const DRAFT: u8 = 16;
pub const FORWARDED: u8 = 32;

/// The flags by their IMAP names (system flags and `$Forwarded`).
pub const FLAG_NAMES: [(&str, u8); 6] = [
    ("\\Seen", SEEN),
    ("\\Answered", ANSWERED),
    ("\\Flagged", FLAGGED),
    ("\\Deleted", DELETED),
    ("\\Draft", DRAFT),
    ("$Forwarded", FORWARDED),
];

/// The flag bits named in an IMAP flag list (`(\Seen $Forwarded)`); other
/// keywords are not kept.
pub fn parse_flags(list: &str) -> u8 {
    list.trim_matches(['(', ')'])
        .split_whitespace()
        .filter_map(|w| {
            FLAG_NAMES
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(w))
                .map(|(_, b)| *b)
        })
        .fold(0, |a, b| a | b)
}

/// The IMAP flag list of `bits` (`(\Seen \Answered)`).
pub fn flag_list(bits: u8) -> String {
    let names: Vec<&str> = FLAG_NAMES
        .iter()
        .filter(|(_, b)| bits & b != 0)
        .map(|(n, _)| *n)
        .collect();
    format!("({})", names.join(" "))
}

/// One message: what the tasks look at, no body.
#[derive(Debug, Clone, PartialEq)]
pub struct Msg {
    pub uid: u32,
    /// Size in bytes as received (the made-up message of a fetch has it).
    pub size: u32,
    pub flags: u8,
    /// The `X-Mailbench-Track` header of a message delivered over SMTP.
    pub track: Option<Box<str>>,
}

#[derive(Debug)]
pub struct Mailbox {
    pub name: Box<str>,
    /// A special-use attribute given at CREATE (`\Sent`), if any.
    pub special: Option<Box<str>>,
    pub uidnext: u32,
    /// By UID, ascending: the sequence number of `msgs[i]` is `i + 1`.
    pub msgs: Vec<Msg>,
}

impl Mailbox {
    pub fn new(name: &str, special: Option<&str>) -> Mailbox {
        Mailbox {
            name: name.into(),
            special: special.map(Into::into),
            uidnext: 1,
            msgs: Vec::new(),
        }
    }

    /// Adds a message with the next UID; returns the UID.
    pub fn add(&mut self, size: u32, flags: u8, track: Option<Box<str>>) -> u32 {
        let uid = self.uidnext;
        self.uidnext = self.uidnext.saturating_add(1);
        self.msgs.push(Msg {
            uid,
            size,
            flags,
            track,
        });
        uid
    }

    /// The largest UID held (0 when empty).
    pub fn max_uid(&self) -> u32 {
        self.msgs.last().map_or(0, |m| m.uid)
    }
}

/// One user's mailboxes (the Inbox always first).
#[derive(Debug)]
pub struct Boxes {
    pub list: Vec<Mailbox>,
}

impl Boxes {
    fn new() -> Boxes {
        Boxes {
            list: vec![Mailbox::new("INBOX", None)],
        }
    }

    /// The mailbox called `name` (the Inbox in any case).
    pub fn get(&self, name: &str) -> Option<&Mailbox> {
        let name = canonical(name);
        self.list.iter().find(|b| &*b.name == name)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Mailbox> {
        let name = canonical(name);
        self.list.iter_mut().find(|b| &*b.name == name)
    }

    pub fn inbox(&mut self) -> &mut Mailbox {
        if self.list.is_empty() || &*self.list[0].name != "INBOX" {
            self.list.insert(0, Mailbox::new("INBOX", None));
        }
        &mut self.list[0]
    }
}

/// `INBOX` for the Inbox in any case (RFC 3501 5.1), else the name as is.
pub fn canonical(name: &str) -> &str {
    if name.eq_ignore_ascii_case("INBOX") {
        "INBOX"
    } else {
        name
    }
}

/// An account: its mailboxes and the sessions waiting for its new mail.
#[derive(Debug)]
pub struct Account {
    boxes: Mutex<Boxes>,
    /// Woken at every delivery (the account's IDLE sessions).
    pub arrived: Notify,
}

impl Account {
    pub fn lock(&self) -> MutexGuard<'_, Boxes> {
        match self.boxes.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

/// Every account, the distribution lists and the one password.
#[derive(Debug)]
pub struct Store {
    accounts: Mutex<HashMap<Box<str>, Arc<Account>>>,
    /// List address -> member addresses (lower case).
    lists: HashMap<Box<str>, Vec<Box<str>>>,
    password: String,
}

impl Store {
    pub fn new(password: String, lists: HashMap<Box<str>, Vec<Box<str>>>) -> Store {
        Store {
            accounts: Mutex::new(HashMap::new()),
            lists,
            password,
        }
    }

    pub fn password_ok(&self, pw: &str) -> bool {
        pw == self.password
    }

    /// The account of `user` (any user: created at first use).
    pub fn account(&self, user: &str) -> Arc<Account> {
        let key = user.to_ascii_lowercase();
        let mut all = match self.accounts.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        all.entry(key.into_boxed_str())
            .or_insert_with(|| {
                Arc::new(Account {
                    boxes: Mutex::new(Boxes::new()),
                    arrived: Notify::new(),
                })
            })
            .clone()
    }

    /// The addresses a recipient stands for: a list's members, else itself.
    fn expand(&self, rcpt: &str) -> Vec<String> {
        let key = rcpt.to_ascii_lowercase();
        match self.lists.get(key.as_str()) {
            Some(members) => members.iter().map(|m| m.to_string()).collect(),
            None => vec![key],
        }
    }

    /// Delivers a message of `size` bytes to every recipient's Inbox at once
    /// (lists expanded) and wakes their sessions; returns the deliveries made.
    pub fn deliver(&self, rcpts: &[String], size: u32, track: Option<&str>) -> usize {
        let mut n = 0;
        for r in rcpts {
            for addr in self.expand(r) {
                let acct = self.account(&addr);
                acct.lock().inbox().add(size, 0, track.map(Into::into));
                acct.arrived.notify_waiters();
                n += 1;
            }
        }
        n
    }

    /// Accounts known so far.
    pub fn accounts(&self) -> usize {
        match self.accounts.lock() {
            Ok(g) => g.len(),
            Err(p) => p.into_inner().len(),
        }
    }
}

/// Distribution lists from an alias table (`list member, member` a line,
/// `#` comments), addresses in lower case.
pub fn parse_lists(text: &str) -> HashMap<Box<str>, Vec<Box<str>>> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let mut words = l.split([' ', ',', '\t']).filter(|w| !w.is_empty());
        let Some(list) = words.next() else { continue };
        let members: Vec<Box<str>> = words.map(|w| w.to_ascii_lowercase().into()).collect();
        out.insert(
            list.trim_end_matches(':').to_ascii_lowercase().into(),
            members,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_expand_and_deliveries_land_in_every_inbox() {
        let lists = parse_lists("# lists\nteam@x a@x, B@x\n");
        let s = Store::new("pw".into(), lists);
        let n = s.deliver(&["team@x".into(), "c@x".into()], 1200, Some("r1 1 2 3 -"));
        assert_eq!(n, 3);
        for u in ["a@x", "b@x", "C@x"] {
            let a = s.account(u);
            let g = a.lock();
            let inbox = g.get("inbox").unwrap();
            assert_eq!(inbox.msgs.len(), 1, "{u}");
            assert_eq!(inbox.msgs[0].size, 1200);
            assert_eq!(inbox.msgs[0].track.as_deref(), Some("r1 1 2 3 -"));
        }
        assert_eq!(s.accounts(), 3);
        assert!(s.password_ok("pw") && !s.password_ok("x"));
    }

    #[test]
    fn flags_parse_and_print() {
        let b = parse_flags("(\\Seen $forwarded \\Unknown)");
        assert_eq!(b, SEEN | FORWARDED);
        assert_eq!(flag_list(b), "(\\Seen $Forwarded)");
        assert_eq!(flag_list(0), "()");
    }
}
