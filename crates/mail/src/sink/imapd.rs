//! The sink's IMAP4rev1 service: what the profile's tasks use (LOGIN,
//! NAMESPACE, LIST, CREATE, DELETE, STATUS, SELECT/EXAMINE, APPEND with
//! LITERAL+, SEARCH, SORT, FETCH, STORE, COPY, MOVE, EXPUNGE, IDLE, NOOP,
//! LOGOUT, with their UID forms), answered at once from the minimal state.

use super::conn::{Conn, literal_at_end};
use super::search::{in_set, search, sort};
use super::store::{Account, Boxes, DELETED, Mailbox, SEEN, Store, canonical, parse_flags};
use super::synth::{Items, fetch_answer};
use std::io;
use std::sync::Arc;
use tokio::net::TcpStream;

const CAPS: &str = "IMAP4rev1 LITERAL+ IDLE NAMESPACE MOVE SORT UIDPLUS UNSELECT SPECIAL-USE LIST-EXTENDED CREATE-SPECIAL-USE";
const DELIM: char = '/';

/// A client's session state.
#[derive(Default)]
struct Session {
    user: String,
    acct: Option<Arc<Account>>,
    selected: Option<String>,
    read_only: bool,
    /// Messages of the selected mailbox as last announced.
    exists: usize,
}

/// Whether the connection goes on after a command.
#[derive(PartialEq)]
enum Flow {
    Go,
    End,
}

/// Serves one IMAP connection until the client logs out or goes.
pub async fn serve(store: Arc<Store>, s: TcpStream) {
    let mut c = Conn::new(s);
    let greeting = format!("* OK [CAPABILITY {CAPS}] mailbench sink ready\r\n");
    if c.say(&greeting).await.is_err() {
        return;
    }
    let mut ses = Session::default();
    while let Ok(true) = c.next_line().await {
        match command(&store, &mut c, &mut ses).await {
            Ok(Flow::Go) => {}
            Ok(Flow::End) | Err(_) => return,
        }
    }
}

/// Words of a command line: quoted strings unquoted, parenthesised groups
/// kept whole.
pub fn words(line: &str) -> Vec<String> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' => i += 1,
            b'"' => {
                let mut v = Vec::new();
                i += 1;
                while let Some(&ch) = b.get(i) {
                    i += 1;
                    match ch {
                        b'"' => break,
                        b'\\' => {
                            if let Some(&n) = b.get(i) {
                                v.push(n);
                                i += 1;
                            }
                        }
                        _ => v.push(ch),
                    }
                }
                out.push(String::from_utf8_lossy(&v).into_owned());
            }
            b'(' => {
                let start = i;
                let mut depth = 0usize;
                while let Some(&ch) = b.get(i) {
                    i += 1;
                    depth = match ch {
                        b'(' => depth + 1,
                        b')' => depth.saturating_sub(1),
                        _ => depth,
                    };
                    if depth == 0 {
                        break;
                    }
                }
                out.push(String::from_utf8_lossy(&b[start..i]).into_owned());
            }
            _ => {
                let start = i;
                while i < b.len() && b[i] != b' ' {
                    i += 1;
                }
                out.push(String::from_utf8_lossy(&b[start..i]).into_owned());
            }
        }
    }
    out
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// One command line read into `c`: answered, new mail announced.
async fn command(store: &Store, c: &mut Conn, ses: &mut Session) -> io::Result<Flow> {
    let line = c.line();
    let (tag, rest) = line.split_once(' ').unwrap_or((&line, ""));
    let tag = tag.to_string();
    let mut args = words(rest);
    if args.is_empty() {
        c.say(&format!("{tag} BAD empty command\r\n")).await?;
        return Ok(Flow::Go);
    }
    let mut verb = args.remove(0).to_ascii_uppercase();
    if verb == "UID" && !args.is_empty() {
        verb = format!("UID {}", args.remove(0).to_ascii_uppercase());
    }
    let status = match verb.as_str() {
        "APPEND" => append(c, ses, &line, &args).await?,
        "IDLE" => return idle(c, ses, &tag).await,
        "LOGOUT" => {
            c.say(&format!(
                "* BYE logging out\r\n{tag} OK Logout completed.\r\n"
            ))
            .await?;
            return Ok(Flow::End);
        }
        _ => {
            if literal_at_end(&line).is_some() {
                // No other command of the profile carries a literal: read it
                // so the stream stays in step, then refuse the command.
                skip_literal(c, &line).await?;
                "BAD literals are only taken by APPEND here".to_string()
            } else {
                answer(store, c, ses, &verb, &args)
            }
        }
    };
    announce(ses, &mut c.out);
    c.out
        .extend_from_slice(format!("{tag} {status}\r\n").as_bytes());
    c.flush_out().await?;
    Ok(Flow::Go)
}

/// Reads the literal a line announces (and the rest of the command).
async fn skip_literal(c: &mut Conn, line: &str) -> io::Result<u64> {
    let Some((n, plus)) = literal_at_end(line) else {
        return Ok(0);
    };
    if !plus {
        c.say("+ Ready for literal data\r\n").await?;
    }
    c.skip(n).await?;
    // The command goes on after the literal: here it ends there.
    if !c.next_line().await? {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(n)
}

/// `* n EXISTS` when the selected mailbox grew since it was last announced.
fn announce(ses: &mut Session, out: &mut Vec<u8>) {
    let (Some(acct), Some(sel)) = (&ses.acct, &ses.selected) else {
        return;
    };
    let n = acct.lock().get(sel).map_or(0, |b| b.msgs.len());
    if n > ses.exists {
        out.extend_from_slice(format!("* {n} EXISTS\r\n").as_bytes());
        ses.exists = n;
    }
}

/// Commands that need no literal and no waiting: the tagged status.
fn answer(store: &Store, c: &mut Conn, ses: &mut Session, verb: &str, args: &[String]) -> String {
    let out = &mut c.out;
    match verb {
        "CAPABILITY" => {
            out.extend_from_slice(format!("* CAPABILITY {CAPS}\r\n").as_bytes());
            "OK Capability completed.".into()
        }
        "NOOP" | "CHECK" => "OK done.".into(),
        "ENABLE" => "OK enabled.".into(),
        "ID" => {
            out.extend_from_slice(b"* ID (\"name\" \"mailbench sink\")\r\n");
            "OK ID completed.".into()
        }
        "LOGIN" => login(store, ses, args),
        _ => {
            let Some(acct) = ses.acct.clone() else {
                return "BAD log in first".into();
            };
            let mut boxes = acct.lock();
            account_command(&mut boxes, ses, verb, args, out)
        }
    }
}

fn login(store: &Store, ses: &mut Session, args: &[String]) -> String {
    let (Some(user), Some(pw)) = (args.first(), args.get(1)) else {
        return "BAD LOGIN user password".into();
    };
    if !store.password_ok(pw) {
        return "NO [AUTHENTICATIONFAILED] Authentication failed.".into();
    }
    ses.user = user.clone();
    ses.acct = Some(store.account(user));
    format!("OK [CAPABILITY {CAPS}] Logged in")
}

/// The commands of a logged-in user.
fn account_command(
    boxes: &mut Boxes,
    ses: &mut Session,
    verb: &str,
    args: &[String],
    out: &mut Vec<u8>,
) -> String {
    let arg = |i: usize| args.get(i).map_or("", String::as_str);
    match verb {
        "NAMESPACE" => {
            out.extend_from_slice(
                format!("* NAMESPACE ((\"\" \"{DELIM}\")) NIL NIL\r\n").as_bytes(),
            );
            "OK Namespace completed.".into()
        }
        "LIST" | "LSUB" => list(boxes, verb, arg(1), out),
        "CREATE" => create(boxes, arg(0), arg(1)),
        "DELETE" => delete(boxes, ses, arg(0)),
        "SUBSCRIBE" | "UNSUBSCRIBE" => "OK done.".into(),
        "STATUS" => status(boxes, arg(0), arg(1), out),
        "SELECT" | "EXAMINE" => select(boxes, ses, arg(0), verb == "EXAMINE", out),
        "CLOSE" | "UNSELECT" => {
            if verb == "CLOSE"
                && !ses.read_only
                && let Some(b) = ses.selected.as_deref().and_then(|s| boxes.get_mut(s))
            {
                b.msgs.retain(|m| m.flags & DELETED == 0);
            }
            ses.selected = None;
            format!("OK {} completed.", verb.to_ascii_lowercase())
        }
        _ => selected_command(boxes, ses, verb, args, out),
    }
}

fn list(boxes: &Boxes, verb: &str, pattern: &str, out: &mut Vec<u8>) -> String {
    if pattern.is_empty() {
        out.extend_from_slice(format!("* {verb} (\\Noselect) \"{DELIM}\" \"\"\r\n").as_bytes());
        return "OK List completed.".into();
    }
    for b in &boxes.list {
        if glob(pattern.as_bytes(), b.name.as_bytes()) {
            let special = b
                .special
                .as_deref()
                .map(|s| format!(" {s}"))
                .unwrap_or_default();
            out.extend_from_slice(
                format!(
                    "* {verb} (\\HasNoChildren{special}) \"{DELIM}\" {}\r\n",
                    quote(&b.name)
                )
                .as_bytes(),
            );
        }
    }
    "OK List completed.".into()
}

/// LIST pattern matching: `*` matches anything, `%` anything but the
/// hierarchy delimiter.
pub fn glob(p: &[u8], n: &[u8]) -> bool {
    match p.first() {
        None => n.is_empty(),
        Some(b'*') => (0..=n.len()).any(|k| glob(&p[1..], &n[k..])),
        Some(b'%') => (0..=n.len())
            .take_while(|k| *k == 0 || n[k - 1] != DELIM as u8)
            .any(|k| glob(&p[1..], &n[k..])),
        Some(c) => n.first() == Some(c) && glob(&p[1..], &n[1..]),
    }
}

fn create(boxes: &mut Boxes, name: &str, opts: &str) -> String {
    if name.is_empty() {
        return "BAD CREATE mailbox".into();
    }
    if boxes.get(name).is_some() {
        return "NO [ALREADYEXISTS] Mailbox already exists".into();
    }
    let special = opts
        .to_ascii_uppercase()
        .contains("USE")
        .then(|| opts.split(['(', ')', ' ']).find(|w| w.starts_with('\\')))
        .flatten();
    boxes.list.push(Mailbox::new(name, special));
    "OK Create completed.".into()
}

fn delete(boxes: &mut Boxes, ses: &mut Session, name: &str) -> String {
    let name = canonical(name);
    if name == "INBOX" {
        return "NO INBOX can not be deleted.".into();
    }
    let before = boxes.list.len();
    boxes.list.retain(|b| &*b.name != name);
    if boxes.list.len() == before {
        return "NO [NONEXISTENT] Mailbox doesn't exist".into();
    }
    if ses.selected.as_deref() == Some(name) {
        ses.selected = None;
    }
    "OK Delete completed.".into()
}

fn status(boxes: &Boxes, name: &str, items: &str, out: &mut Vec<u8>) -> String {
    let Some(b) = boxes.get(name) else {
        return "NO [NONEXISTENT] Mailbox doesn't exist".into();
    };
    let up = items.to_ascii_uppercase();
    let mut parts = Vec::new();
    for (item, value) in [
        ("MESSAGES", b.msgs.len()),
        ("RECENT", 0),
        ("UIDNEXT", b.uidnext as usize),
        ("UIDVALIDITY", 1),
        (
            "UNSEEN",
            b.msgs.iter().filter(|m| m.flags & SEEN == 0).count(),
        ),
    ] {
        if up.split(['(', ')', ' ']).any(|w| w == item) {
            parts.push(format!("{item} {value}"));
        }
    }
    out.extend_from_slice(format!("* STATUS {} ({})\r\n", quote(name), parts.join(" ")).as_bytes());
    "OK Status completed.".into()
}

fn select(
    boxes: &Boxes,
    ses: &mut Session,
    name: &str,
    read_only: bool,
    out: &mut Vec<u8>,
) -> String {
    ses.selected = None;
    let Some(b) = boxes.get(name) else {
        return "NO [NONEXISTENT] Mailbox doesn't exist".into();
    };
    let n = b.msgs.len();
    out.extend_from_slice(
        format!(
            "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Forwarded)\r\n\
             * OK [PERMANENTFLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft $Forwarded \\*)] Flags permitted.\r\n\
             * {n} EXISTS\r\n* 0 RECENT\r\n* OK [UIDVALIDITY 1] UIDs valid\r\n* OK [UIDNEXT {}] Predicted next UID\r\n",
            b.uidnext
        )
        .as_bytes(),
    );
    ses.selected = Some(b.name.to_string());
    ses.read_only = read_only;
    ses.exists = n;
    if read_only {
        "OK [READ-ONLY] Examine completed.".into()
    } else {
        "OK [READ-WRITE] Select completed.".into()
    }
}

/// APPEND: the literal is read and not kept; the message keeps its size.
async fn append(
    c: &mut Conn,
    ses: &mut Session,
    line: &str,
    args: &[String],
) -> io::Result<String> {
    let n = skip_literal(c, line).await?;
    let Some(acct) = &ses.acct else {
        return Ok("BAD log in first".into());
    };
    let name = args.first().map_or("", String::as_str);
    let flags = args
        .get(1)
        .filter(|a| a.starts_with('('))
        .map_or(0, |f| parse_flags(f));
    let mut boxes = acct.lock();
    let Some(b) = boxes.get_mut(name) else {
        return Ok("NO [TRYCREATE] Mailbox doesn't exist".into());
    };
    let uid = b.add(u32::try_from(n).unwrap_or(u32::MAX), flags, None);
    Ok(format!("OK [APPENDUID 1 {uid}] Append completed."))
}

/// IDLE: new mail is announced as it arrives, until DONE.
async fn idle(c: &mut Conn, ses: &mut Session, tag: &str) -> io::Result<Flow> {
    let Some(acct) = ses.acct.clone() else {
        c.say(&format!("{tag} BAD log in first\r\n")).await?;
        return Ok(Flow::Go);
    };
    c.say("+ idling\r\n").await?;
    loop {
        let arrived = acct.arrived.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        announce(ses, &mut c.out);
        if !c.out.is_empty() {
            c.flush_out().await?;
        }
        tokio::select! {
            r = c.next_line() => {
                if !r? {
                    return Ok(Flow::End);
                }
                let status = if c.line().eq_ignore_ascii_case("DONE") {
                    "OK Idle completed."
                } else {
                    "BAD expected DONE"
                };
                c.say(&format!("{tag} {status}\r\n")).await?;
                return Ok(Flow::Go);
            }
            _ = &mut arrived => {}
        }
    }
}

/// The commands on the selected mailbox.
fn selected_command(
    boxes: &mut Boxes,
    ses: &mut Session,
    verb: &str,
    args: &[String],
    out: &mut Vec<u8>,
) -> String {
    let Some(sel) = ses.selected.clone() else {
        return "BAD No mailbox selected.".into();
    };
    let uid = verb.starts_with("UID ");
    let base = verb.trim_start_matches("UID ");
    match base {
        "FETCH" => fetch(boxes, ses, &sel, uid, args, out),
        "SEARCH" | "SORT" => {
            let Some(b) = boxes.get(&sel) else {
                return "NO Mailbox is gone.".into();
            };
            let hits = if base == "SORT" {
                sort(b, args, uid)
            } else {
                search(b, args, uid)
            };
            let list: Vec<String> = hits.iter().map(u32::to_string).collect();
            let sep = if list.is_empty() { "" } else { " " };
            out.extend_from_slice(format!("* {base}{sep}{}\r\n", list.join(" ")).as_bytes());
            format!("OK {} completed.", base.to_ascii_lowercase())
        }
        "STORE" => store_flags(boxes, &sel, uid, args, out),
        "COPY" | "MOVE" => copy(boxes, ses, &sel, uid, base == "MOVE", args, out),
        "EXPUNGE" => {
            let set = if uid { args.first().cloned() } else { None };
            expunge(boxes, ses, &sel, set.as_deref(), out);
            "OK Expunge completed.".into()
        }
        _ => "BAD Unknown command.".into(),
    }
}

/// The sequence numbers (1-based) of `b`'s messages in `set` (UIDs or
/// sequence numbers).
fn picked(b: &Mailbox, set: &str, uid: bool) -> Vec<usize> {
    let (n, max_uid) = (b.msgs.len(), b.max_uid());
    let mut v: Vec<usize> = (0..n)
        .filter(|i| {
            if uid {
                in_set(set, b.msgs[*i].uid, max_uid)
            } else {
                in_set(set, *i as u32 + 1, n as u32)
            }
        })
        .map(|i| i + 1)
        .collect();
    // `N:*` with N past the last UID still names the last message (RFC 3501 6.4.8).
    if v.is_empty() && uid && n > 0 && set.ends_with(":*") {
        v.push(n);
    }
    v
}

fn fetch(
    boxes: &mut Boxes,
    ses: &Session,
    sel: &str,
    uid: bool,
    args: &[String],
    out: &mut Vec<u8>,
) -> String {
    let Some(b) = boxes.get_mut(sel) else {
        return "NO Mailbox is gone.".into();
    };
    let set = args.first().map_or("", String::as_str);
    let items = Items::parse(&args[1.min(args.len())..].join(" "), uid);
    for seq in picked(b, set, uid) {
        let m = &mut b.msgs[seq - 1];
        if items.sets_seen && !ses.read_only {
            m.flags |= SEEN;
        }
        fetch_answer(out, seq, m, &items, &ses.user, &b.name);
    }
    "OK Fetch completed.".into()
}

fn store_flags(
    boxes: &mut Boxes,
    sel: &str,
    uid: bool,
    args: &[String],
    out: &mut Vec<u8>,
) -> String {
    let Some(b) = boxes.get_mut(sel) else {
        return "NO Mailbox is gone.".into();
    };
    let (Some(set), Some(mode)) = (args.first(), args.get(1)) else {
        return "BAD STORE set flags".into();
    };
    let mode = mode.to_ascii_uppercase();
    let bits = parse_flags(args.get(2).map_or("", String::as_str));
    for seq in picked(b, set, uid) {
        let m = &mut b.msgs[seq - 1];
        m.flags = match mode.as_bytes().first() {
            Some(b'+') => m.flags | bits,
            Some(b'-') => m.flags & !bits,
            _ => bits,
        };
        if !mode.ends_with(".SILENT") {
            out.extend_from_slice(
                format!(
                    "* {seq} FETCH (UID {} FLAGS {})\r\n",
                    m.uid,
                    super::store::flag_list(m.flags)
                )
                .as_bytes(),
            );
        }
    }
    "OK Store completed.".into()
}

fn copy(
    boxes: &mut Boxes,
    ses: &mut Session,
    sel: &str,
    uid: bool,
    is_move: bool,
    args: &[String],
    out: &mut Vec<u8>,
) -> String {
    let (Some(set), Some(dest)) = (args.first(), args.get(1)) else {
        return "BAD COPY set mailbox".into();
    };
    if boxes.get(dest).is_none() {
        return "NO [TRYCREATE] Mailbox doesn't exist".into();
    }
    let Some(b) = boxes.get(sel) else {
        return "NO Mailbox is gone.".into();
    };
    let seqs = picked(b, set, uid);
    let msgs: Vec<_> = seqs.iter().map(|s| b.msgs[s - 1].clone()).collect();
    let Some(d) = boxes.get_mut(dest) else {
        return "NO [TRYCREATE] Mailbox doesn't exist".into();
    };
    let mut src = Vec::new();
    let mut dst = Vec::new();
    for m in msgs {
        src.push(m.uid.to_string());
        dst.push(d.add(m.size, m.flags & !DELETED, m.track).to_string());
    }
    let copyuid = format!("[COPYUID 1 {} {}]", src.join(","), dst.join(","));
    if !is_move {
        return format!("OK {copyuid} Copy completed.");
    }
    out.extend_from_slice(format!("* OK {copyuid} Moved\r\n").as_bytes());
    remove(boxes, ses, sel, |i, _| seqs.contains(&(i + 1)), out);
    "OK Move completed.".into()
}

fn expunge(boxes: &mut Boxes, ses: &mut Session, sel: &str, set: Option<&str>, out: &mut Vec<u8>) {
    let max_uid = boxes.get(sel).map_or(0, Mailbox::max_uid);
    remove(
        boxes,
        ses,
        sel,
        |_, m| m.flags & DELETED != 0 && set.is_none_or(|s| in_set(s, m.uid, max_uid)),
        out,
    );
}

/// Removes the messages `gone` picks (by index and message) from `sel`,
/// announcing each `* n EXPUNGE` with the sequence numbers as they shift.
fn remove(
    boxes: &mut Boxes,
    ses: &mut Session,
    sel: &str,
    gone: impl Fn(usize, &super::store::Msg) -> bool,
    out: &mut Vec<u8>,
) {
    let Some(b) = boxes.get_mut(sel) else {
        return;
    };
    let mut kept = Vec::with_capacity(b.msgs.len());
    let mut shift = 0usize;
    for (i, m) in std::mem::take(&mut b.msgs).into_iter().enumerate() {
        if gone(i, &m) {
            out.extend_from_slice(format!("* {} EXPUNGE\r\n", i + 1 - shift).as_bytes());
            shift += 1;
            ses.exists = ses.exists.saturating_sub(1);
        } else {
            kept.push(m);
        }
    }
    b.msgs = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_globs() {
        assert_eq!(
            words(r#""INBOX" (\Seen) "a \"b\" \\c" {3+}"#),
            vec!["INBOX", "(\\Seen)", "a \"b\" \\c", "{3+}"]
        );
        assert_eq!(words("\"unterminated \\"), vec!["unterminated "]);
        assert_eq!(words("(a (b) c"), vec!["(a (b) c"]);
        assert!(glob(b"*", b"Folder 01"));
        assert!(glob(b"Search Folder *", b"Search Folder r1-2"));
        assert!(!glob(b"Search Folder *", b"Folder 01"));
        assert!(glob(b"%", b"Sent") && !glob(b"%", b"a/b"));
    }
}
