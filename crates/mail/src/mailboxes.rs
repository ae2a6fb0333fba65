//! The user's mailboxes as the server names them. The profile speaks of
//! `Sent`, `Drafts`, `Deleted Items`, `Calendar`, `Folder NN` and search
//! folders; a server may keep personal mailboxes under a prefix (`INBOX.` with
//! `.` as delimiter is a common default) and may mark its own Sent, Drafts,
//! Trash and Junk mailboxes with special-use attributes. So after login a user
//! asks NAMESPACE (RFC 2342; else the delimiter from `LIST "" ""`) and lists its
//! mailboxes (`RETURN (SPECIAL-USE)` when LIST-EXTENDED and SPECIAL-USE are
//! advertised, RFC 6154): an advertised \Sent, \Drafts, \Trash or \Junk mailbox
//! is used as it is, every other name is the profile's under the prefix.

use crate::imap::{ImapConn, ListEntry, is_inbox, mailbox, parse_list, personal_namespace};
use crate::wire::OpResult;
use mailbench_results::mail::run::MailboxLayout;
use serde::Serialize;

/// The profile's names of the special mailboxes.
pub const SENT: &str = "Sent";
pub const DRAFTS: &str = "Drafts";
pub const DELETED: &str = "Deleted Items";
pub const CALENDAR: &str = "Calendar";
pub const SMART_PREFIX: &str = "Search Folder ";

/// A special-use role (RFC 6154) the profile has a mailbox for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Sent,
    Drafts,
    Trash,
    Junk,
}

impl Role {
    pub fn attribute(self) -> &'static str {
        match self {
            Role::Sent => "\\Sent",
            Role::Drafts => "\\Drafts",
            Role::Trash => "\\Trash",
            Role::Junk => "\\Junk",
        }
    }
}

/// Where one user's mailboxes are on the server: their layout (what the
/// result reports) and the listing it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mailboxes {
    #[serde(flatten)]
    pub layout: MailboxLayout,
    /// Every mailbox the listing answered.
    #[serde(skip)]
    pub listed: Vec<ListEntry>,
}

impl Mailboxes {
    /// The layout from a personal namespace and a mailbox listing.
    pub fn from_listing(prefix: &str, delimiter: Option<char>, listed: Vec<ListEntry>) -> Self {
        let find = |role: Role| {
            listed
                .iter()
                .find(|e| e.has_flag(role.attribute()) && !e.has_flag("\\Noselect"))
                .map(|e| e.name.clone())
        };
        let mut special_use = Vec::new();
        let mut pick = |role: Role, name: &str, default: &str| match find(role) {
            Some(n) => {
                special_use.push(name.to_string());
                n
            }
            None => format!("{prefix}{default}"),
        };
        let sent = pick(Role::Sent, "sent", SENT);
        let drafts = pick(Role::Drafts, "drafts", DRAFTS);
        let deleted_items = pick(Role::Trash, "deleted_items", DELETED);
        let junk = find(Role::Junk);
        if junk.is_some() {
            special_use.push("junk".to_string());
        }
        let layout = MailboxLayout {
            prefix: prefix.to_string(),
            delimiter,
            sent,
            drafts,
            deleted_items,
            junk,
            special_use,
        };
        Mailboxes { layout, listed }
    }

    /// The server name of a profile mailbox other than the special ones.
    pub fn named(&self, name: &str) -> String {
        if is_inbox(name) {
            "INBOX".to_string()
        } else {
            format!("{}{name}", self.layout.prefix)
        }
    }

    pub fn calendar(&self) -> String {
        self.named(CALENDAR)
    }

    /// The n-th (1-based) non-default folder.
    pub fn folder(&self, n: u32) -> String {
        self.named(&folder_name(n))
    }

    /// A search folder called `id`.
    pub fn smart(&self, id: &str) -> String {
        self.named(&format!("{SMART_PREFIX}{id}"))
    }

    /// LIST pattern of the search folders.
    pub fn smart_pattern(&self) -> String {
        self.named(&format!("{SMART_PREFIX}*"))
    }

    /// Whether the listing had `name` (the Inbox in any case).
    pub fn listed(&self, name: &str) -> bool {
        self.listed
            .iter()
            .any(|e| e.name == name || (is_inbox(name) && is_inbox(&e.name)))
    }

    /// The special-use role of a server mailbox name, if it is one of ours.
    pub fn role_of(&self, name: &str) -> Option<Role> {
        if name == self.layout.sent {
            Some(Role::Sent)
        } else if name == self.layout.drafts {
            Some(Role::Drafts)
        } else if name == self.layout.deleted_items {
            Some(Role::Trash)
        } else {
            None
        }
    }

    /// The CREATE command for `name`: with `USE (\Role)` when the server
    /// advertises CREATE-SPECIAL-USE and the mailbox has a role.
    pub fn create_command(&self, c: &ImapConn, name: &str) -> String {
        match self.role_of(name) {
            Some(r) if c.has_cap("CREATE-SPECIAL-USE") => {
                format!("CREATE {} (USE ({}))", mailbox(name), r.attribute())
            }
            _ => format!("CREATE {}", mailbox(name)),
        }
    }
}

/// Name of the n-th (1-based) non-default folder, as the profile calls it.
pub fn folder_name(n: u32) -> String {
    format!("Folder {n:02}")
}

/// Asks the server where the user's mailboxes are (NAMESPACE or `LIST ""
/// ""`, then the listing of every mailbox).
pub async fn discover(c: &mut ImapConn) -> OpResult<Mailboxes> {
    let mut ns = None;
    if c.has_cap("NAMESPACE") {
        let r = c.cmd("NAMESPACE", "NAMESPACE").await?;
        ns = personal_namespace(&r.untagged);
    }
    let (prefix, delimiter) = match ns {
        Some(n) => n,
        None => {
            let r = c.cmd("LIST", "LIST \"\" \"\"").await?;
            let d = parse_list(&r.untagged).first().and_then(|e| e.delim);
            (String::new(), d)
        }
    };
    let line = if c.has_cap("SPECIAL-USE") && c.has_cap("LIST-EXTENDED") {
        "LIST \"\" \"*\" RETURN (SPECIAL-USE)"
    } else {
        "LIST \"\" \"*\""
    };
    let r = c.cmd("LIST", line).await?;
    Ok(Mailboxes::from_listing(
        &prefix,
        delimiter,
        parse_list(&r.untagged),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(flags: &[&str], name: &str) -> ListEntry {
        ListEntry {
            flags: flags.iter().map(|s| s.to_string()).collect(),
            delim: Some('.'),
            name: name.into(),
        }
    }

    #[test]
    fn special_use_wins_over_the_profile_names_under_the_prefix() {
        let m = Mailboxes::from_listing(
            "INBOX.",
            Some('.'),
            vec![
                entry(&[], "INBOX"),
                entry(&["\\HasNoChildren", "\\Sent"], "INBOX.Sent Messages"),
                entry(&["\\Trash"], "INBOX.Trash"),
                entry(&["\\Junk"], "INBOX.Spam"),
                entry(&["\\Drafts", "\\Noselect"], "INBOX.Old Drafts"),
            ],
        );
        assert_eq!(m.layout.sent, "INBOX.Sent Messages");
        assert_eq!(m.layout.deleted_items, "INBOX.Trash");
        assert_eq!(m.layout.drafts, "INBOX.Drafts");
        assert_eq!(m.layout.junk.as_deref(), Some("INBOX.Spam"));
        assert_eq!(m.layout.special_use, vec!["sent", "deleted_items", "junk"]);
        assert_eq!(m.calendar(), "INBOX.Calendar");
        assert_eq!(m.folder(3), "INBOX.Folder 03");
        assert_eq!(m.named("inbox"), "INBOX");
        assert_eq!(m.smart_pattern(), "INBOX.Search Folder *");
        assert!(m.listed("INBOX.Trash") && m.listed("Inbox") && !m.listed("INBOX.Drafts"));
        assert_eq!(m.role_of("INBOX.Trash"), Some(Role::Trash));

        let plain = Mailboxes::from_listing("", Some('/'), vec![entry(&[], "INBOX")]);
        assert_eq!(
            (
                plain.layout.sent.as_str(),
                plain.layout.drafts.as_str(),
                plain.layout.deleted_items.as_str()
            ),
            ("Sent", "Drafts", "Deleted Items")
        );
        assert!(plain.layout.special_use.is_empty() && plain.layout.junk.is_none());
    }
}
