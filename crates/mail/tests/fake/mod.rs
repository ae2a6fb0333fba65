//! A small in-memory IMAP + SMTP server for protocol tests: enough of IMAP4rev1
//! (LOGIN, NAMESPACE, LIST with special-use attributes, CREATE, DELETE,
//! SELECT/EXAMINE, STATUS, APPEND, UID SEARCH/SORT/FETCH/STORE/COPY/MOVE/
//! EXPUNGE, FETCH, NOOP, IDLE, LOGOUT) and SMTP submission (AUTH PLAIN, one
//! message per connection) to drive `mail setup` and `mail run` against a
//! server whose layout and capabilities a test chooses. Messages submitted
//! over SMTP land in the recipients' Inboxes at once and wake their IDLE.
//! Every connection is served by its own task; everything stops with the
//! runtime when the `Fake` is dropped.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

#[derive(Clone, Debug)]
pub struct FakeConfig {
    /// Capabilities after login (IMAP4rev1 is always there).
    pub caps: Vec<&'static str>,
    /// Personal namespace prefix and delimiter.
    pub prefix: &'static str,
    pub delim: char,
    /// Refuse CREATE of names outside the prefix, as Dovecot does.
    pub strict_namespace: bool,
    /// Mailboxes every user has from the start, with a special-use attribute.
    pub special: Vec<(&'static str, &'static str)>,
    pub password: &'static str,
    /// APPENDs accepted per user before every further one is refused.
    pub append_limit: Option<usize>,
    /// Added before every tagged answer (a slow server).
    pub delay: Duration,
    /// Distribution lists the SMTP side expands: (address, members).
    pub lists: Vec<(String, Vec<String>)>,
    /// Refuse IMAP LOGIN with a reply that quotes the command back.
    pub echo_imap_login: bool,
    /// Refuse SMTP AUTH with a reply that quotes the command back.
    pub echo_smtp_auth: bool,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            caps: vec![
                "LITERAL+",
                "IDLE",
                "NAMESPACE",
                "MOVE",
                "SORT",
                "UIDPLUS",
                "SPECIAL-USE",
                "LIST-EXTENDED",
            ],
            prefix: "",
            delim: '/',
            strict_namespace: true,
            special: Vec::new(),
            password: "fake-secret",
            append_limit: None,
            delay: Duration::ZERO,
            lists: Vec::new(),
            echo_imap_login: false,
            echo_smtp_auth: false,
        }
    }
}

#[derive(Default, Clone)]
struct Msg {
    uid: u32,
    deleted: bool,
    bytes: Vec<u8>,
}

#[derive(Default)]
struct Mailbox {
    msgs: Vec<Msg>,
    uidnext: u32,
    special: Option<String>,
}

#[derive(Default)]
struct Store {
    boxes: BTreeMap<String, Mailbox>,
    appends: usize,
    /// Inbox UIDs opened with a non-peeking `BODY[]` fetch (read).
    read: std::collections::BTreeSet<u32>,
    /// Inbox UIDs delivered over SMTP.
    delivered: std::collections::BTreeSet<u32>,
}

#[derive(Default)]
pub struct State {
    users: HashMap<String, Store>,
    /// Every SMTP message received (raw), in order.
    pub submitted: Vec<Vec<u8>>,
    /// Commands received, by verb (upper case).
    pub verbs: BTreeMap<String, u64>,
}

pub struct Fake {
    pub imap_port: u16,
    pub smtp_port: u16,
    /// A ManageSieve server that refuses AUTHENTICATE quoting it back.
    pub sieve_port: u16,
    pub state: Arc<Mutex<State>>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

struct Shared {
    cfg: FakeConfig,
    state: Arc<Mutex<State>>,
    notify: Notify,
}

impl Fake {
    pub fn start(cfg: FakeConfig) -> Fake {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let sh = Arc::new(Shared {
            cfg,
            state: state.clone(),
            notify: Notify::new(),
        });
        let (imap, smtp, sieve) = rt.block_on(async {
            let i = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let s = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let v = TcpListener::bind("127.0.0.1:0").await.unwrap();
            (i, s, v)
        });
        let imap_port = imap.local_addr().unwrap().port();
        let smtp_port = smtp.local_addr().unwrap().port();
        let sieve_port = sieve.local_addr().unwrap().port();
        rt.spawn(async move {
            while let Ok((c, _)) = sieve.accept().await {
                tokio::spawn(async move {
                    let _ = sieve_echo_session(c).await;
                });
            }
        });
        let s2 = sh.clone();
        rt.spawn(async move {
            while let Ok((c, _)) = imap.accept().await {
                let sh = s2.clone();
                tokio::spawn(async move {
                    let _ = imap_session(sh, c).await;
                });
            }
        });
        rt.spawn(async move {
            while let Ok((c, _)) = smtp.accept().await {
                let sh = sh.clone();
                tokio::spawn(async move {
                    let _ = smtp_session(sh, c).await;
                });
            }
        });
        Fake {
            imap_port,
            smtp_port,
            sieve_port,
            state,
            rt: Some(rt),
        }
    }

    /// Mailbox names of `user`.
    pub fn mailboxes(&self, user: &str) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.users
            .get(user)
            .map(|s| s.boxes.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Messages in `user`'s mailbox `name`.
    pub fn count(&self, user: &str, name: &str) -> usize {
        let st = self.state.lock().unwrap();
        st.users
            .get(user)
            .and_then(|s| s.boxes.get(name))
            .map(|b| b.msgs.len())
            .unwrap_or(0)
    }

    /// The messages in `user`'s mailbox `name`.
    pub fn messages(&self, user: &str, name: &str) -> Vec<Vec<u8>> {
        let st = self.state.lock().unwrap();
        st.users
            .get(user)
            .and_then(|s| s.boxes.get(name))
            .map(|b| b.msgs.iter().map(|m| m.bytes.clone()).collect())
            .unwrap_or_default()
    }

    /// `(delivered, of them read)` in `user`'s Inbox.
    pub fn delivered_read(&self, user: &str) -> (usize, usize) {
        let st = self.state.lock().unwrap();
        st.users
            .get(user)
            .map(|s| (s.delivered.len(), s.delivered.intersection(&s.read).count()))
            .unwrap_or((0, 0))
    }

    pub fn verb_count(&self, verb: &str) -> u64 {
        self.state
            .lock()
            .unwrap()
            .verbs
            .get(verb)
            .copied()
            .unwrap_or(0)
    }
}

fn store<'a>(st: &'a mut State, cfg: &FakeConfig, user: &str) -> &'a mut Store {
    st.users.entry(user.to_string()).or_insert_with(|| {
        let mut s = Store::default();
        s.boxes.insert(
            "INBOX".into(),
            Mailbox {
                uidnext: 1,
                ..Default::default()
            },
        );
        for (name, flag) in &cfg.special {
            s.boxes.insert(
                name.to_string(),
                Mailbox {
                    uidnext: 1,
                    special: Some(flag.to_string()),
                    ..Default::default()
                },
            );
        }
        s
    })
}

/// Words of a command line: quoted strings unquoted, parenthesised groups
/// kept whole.
fn words(line: &str) -> Vec<String> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' => i += 1,
            b'"' => {
                i += 1;
                let mut v = Vec::new();
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    v.push(b[i]);
                    i += 1;
                }
                i += 1;
                out.push(String::from_utf8_lossy(&v).into_owned());
            }
            b'(' => {
                let start = i;
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'(' {
                        depth += 1;
                    } else if b[i] == b')' {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    i += 1;
                }
                out.push(line[start..i].to_string());
            }
            _ => {
                let start = i;
                while i < b.len() && b[i] != b' ' {
                    i += 1;
                }
                out.push(line[start..i].to_string());
            }
        }
    }
    out
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// UIDs (or sequence numbers) of a set like `1:5,7,9:*` among `all` (sorted).
fn in_set(set: &str, n: u32, max: u32) -> bool {
    set.split(',').any(|part| {
        let (a, b) = part.split_once(':').unwrap_or((part, part));
        let v = |x: &str| {
            if x == "*" {
                max
            } else {
                x.parse().unwrap_or(0)
            }
        };
        let (lo, hi) = (v(a).min(v(b)), v(a).max(v(b)));
        n >= lo && n <= hi
    })
}

fn pattern_match(pat: &str, name: &str) -> bool {
    match pat.split_once(['*', '%']) {
        None => pat == name || (pat.eq_ignore_ascii_case("INBOX") && name == "INBOX"),
        Some((head, tail)) => {
            name.starts_with(head) && name.len() >= head.len() + tail.len() && name.ends_with(tail)
        }
    }
}

fn header_block(m: &[u8]) -> &[u8] {
    let end = m
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
        .unwrap_or(m.len());
    &m[..end]
}

fn header_fields(m: &[u8], names: &[&str]) -> Vec<u8> {
    let text = String::from_utf8_lossy(header_block(m));
    let mut out = String::new();
    let mut keep = false;
    for line in text.split("\r\n") {
        if line.starts_with([' ', '\t']) {
            if keep {
                out.push_str(line);
                out.push_str("\r\n");
            }
            continue;
        }
        keep = line
            .split_once(':')
            .is_some_and(|(h, _)| names.iter().any(|n| n.eq_ignore_ascii_case(h.trim())));
        if keep {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("\r\n");
    out.into_bytes()
}

fn literal(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(format!("{{{}}}\r\n", bytes.len()).as_bytes());
    out.extend_from_slice(bytes);
}

struct Session {
    user: Option<String>,
    selected: Option<String>,
    exists: u32,
}

async fn imap_session(sh: Arc<Shared>, c: TcpStream) -> std::io::Result<()> {
    let (r, mut w) = c.into_split();
    let mut r = BufReader::new(r);
    w.write_all(b"* OK [CAPABILITY IMAP4rev1 LITERAL+ AUTH=PLAIN] fake ready\r\n")
        .await?;
    let mut ses = Session {
        user: None,
        selected: None,
        exists: 0,
    };
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let l = line.trim_end().to_string();
        let (tag, rest) = l.split_once(' ').unwrap_or((&l, ""));
        let tag = tag.to_string();
        let mut w_ = words(rest);
        if w_.is_empty() {
            w.write_all(format!("{tag} BAD empty\r\n").as_bytes())
                .await?;
            continue;
        }
        let mut verb = w_.remove(0).to_ascii_uppercase();
        if verb == "UID" && !w_.is_empty() {
            verb = format!("UID {}", w_.remove(0).to_ascii_uppercase());
        }
        *sh.state
            .lock()
            .unwrap()
            .verbs
            .entry(verb.clone())
            .or_default() += 1;
        // A literal at the end of the line (APPEND).
        let mut lit = None;
        if let Some(last) = w_.last().cloned()
            && last.starts_with('{')
            && last.ends_with('}')
        {
            let n: usize = last
                .trim_matches(['{', '}'])
                .trim_end_matches('+')
                .parse()
                .unwrap_or(0);
            if !last.contains('+') {
                w.write_all(b"+ go ahead\r\n").await?;
            }
            let mut buf = vec![0u8; n];
            r.read_exact(&mut buf).await?;
            let mut crlf = String::new();
            r.read_line(&mut crlf).await?;
            w_.pop();
            lit = Some(buf);
        }
        if verb == "IDLE" {
            idle(&sh, &mut r, &mut w, &mut ses, &tag).await?;
            continue;
        }
        let mut out = Vec::new();
        let status = command(&sh, &mut ses, &verb, &w_, lit, &mut out);
        if let Some(u) = &ses.user
            && let Some(sel) = &ses.selected
        {
            let n = {
                let mut st = sh.state.lock().unwrap();
                let s = store(&mut st, &sh.cfg, u);
                s.boxes.get(sel).map(|b| b.msgs.len() as u32).unwrap_or(0)
            };
            if n > ses.exists && verb != "SELECT" && verb != "EXAMINE" {
                out.extend_from_slice(format!("* {n} EXISTS\r\n").as_bytes());
                ses.exists = n;
            }
        }
        if !sh.cfg.delay.is_zero() {
            tokio::time::sleep(sh.cfg.delay).await;
        }
        out.extend_from_slice(format!("{tag} {status}\r\n").as_bytes());
        w.write_all(&out).await?;
        if verb == "LOGOUT" {
            return Ok(());
        }
    }
}

async fn idle(
    sh: &Arc<Shared>,
    r: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    w: &mut tokio::net::tcp::OwnedWriteHalf,
    ses: &mut Session,
    tag: &str,
) -> std::io::Result<()> {
    w.write_all(b"+ idling\r\n").await?;
    let mut line = String::new();
    loop {
        let notified = sh.notify.notified();
        let n = match (&ses.user, &ses.selected) {
            (Some(u), Some(sel)) => {
                let mut st = sh.state.lock().unwrap();
                let s = store(&mut st, &sh.cfg, u);
                s.boxes.get(sel).map(|b| b.msgs.len() as u32).unwrap_or(0)
            }
            _ => 0,
        };
        if n > ses.exists {
            w.write_all(format!("* {n} EXISTS\r\n").as_bytes()).await?;
            ses.exists = n;
        }
        tokio::select! {
            got = r.read_line(&mut line) => {
                if got? == 0 {
                    return Ok(());
                }
                w.write_all(format!("{tag} OK idle done\r\n").as_bytes()).await?;
                return Ok(());
            }
            _ = notified => {}
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

fn flags_of(b: &Mailbox, cfg: &FakeConfig) -> String {
    let mut f = vec!["\\HasNoChildren".to_string()];
    if let Some(s) = &b.special
        && cfg.caps.contains(&"SPECIAL-USE")
    {
        f.push(s.clone());
    }
    f.join(" ")
}

fn command(
    sh: &Shared,
    ses: &mut Session,
    verb: &str,
    args: &[String],
    lit: Option<Vec<u8>>,
    out: &mut Vec<u8>,
) -> String {
    if let Some(reply) = unauthenticated_command(sh, ses, verb, args, out) {
        return reply;
    }
    let cfg = &sh.cfg;
    let Some(user) = ses.user.clone() else {
        return "BAD log in first".into();
    };
    let mut st = sh.state.lock().unwrap();
    let s = store(&mut st, cfg, &user);
    if let Some(reply) = folder_command(cfg, s, verb, args, out) {
        return reply;
    }
    if let Some(reply) = mailbox_command(cfg, s, ses, verb, args, lit, out) {
        return reply;
    }
    selected_command(cfg, s, ses, verb, args, out)
}

/// The commands of any state (CAPABILITY, LOGIN, LOGOUT, NOOP); None for the others.
fn unauthenticated_command(
    sh: &Shared,
    ses: &mut Session,
    verb: &str,
    args: &[String],
    out: &mut Vec<u8>,
) -> Option<String> {
    let cfg = &sh.cfg;
    let caps = format!("IMAP4rev1 {}", cfg.caps.join(" "));
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    match verb {
        "CAPABILITY" => {
            out.extend_from_slice(format!("* CAPABILITY {caps}\r\n").as_bytes());
            Some("OK done".into())
        }
        "LOGIN" => {
            if cfg.echo_imap_login {
                return Some(format!("NO you said: LOGIN \"{}\" \"{}\"", arg(0), arg(1)));
            }
            if arg(1) != cfg.password {
                return Some("NO [AUTHENTICATIONFAILED] wrong".into());
            }
            ses.user = Some(arg(0));
            let mut st = sh.state.lock().unwrap();
            store(&mut st, cfg, &arg(0));
            Some(format!("OK [CAPABILITY {caps}] logged in"))
        }
        "LOGOUT" => {
            out.extend_from_slice(b"* BYE bye\r\n");
            Some("OK bye".into())
        }
        "NOOP" => Some("OK noop".into()),
        _ => None,
    }
}

/// Folder commands of a logged-in user (NAMESPACE, LIST, CREATE, DELETE); None for
/// the others.
fn folder_command(
    cfg: &FakeConfig,
    s: &mut Store,
    verb: &str,
    args: &[String],
    out: &mut Vec<u8>,
) -> Option<String> {
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let d = cfg.delim;
    let reply: String = match verb {
        "NAMESPACE" => {
            out.extend_from_slice(
                format!("* NAMESPACE ((\"{}\" \"{d}\")) NIL NIL\r\n", cfg.prefix).as_bytes(),
            );
            "OK ns".into()
        }
        "LIST" => {
            let pat = arg(1);
            if pat.is_empty() {
                out.extend_from_slice(format!("* LIST (\\Noselect) \"{d}\" \"\"\r\n").as_bytes());
            } else {
                for (name, b) in &s.boxes {
                    if pattern_match(&pat, name) {
                        out.extend_from_slice(
                            format!("* LIST ({}) \"{d}\" {}\r\n", flags_of(b, cfg), quote(name))
                                .as_bytes(),
                        );
                    }
                }
            }
            "OK list".into()
        }
        "CREATE" => {
            let name = arg(0);
            if cfg.strict_namespace
                && !name.eq_ignore_ascii_case("INBOX")
                && !name.starts_with(cfg.prefix)
            {
                return Some(format!(
                    "NO Client tried to access nonexistent namespace. (Mailbox name should probably be prefixed with: {})",
                    cfg.prefix
                ));
            }
            if s.boxes.contains_key(&name) {
                return Some("NO [ALREADYEXISTS] Mailbox already exists".into());
            }
            s.boxes.insert(
                name,
                Mailbox {
                    uidnext: 1,
                    ..Default::default()
                },
            );
            "OK created".into()
        }
        "DELETE" => match s.boxes.remove(&arg(0)) {
            Some(_) => "OK deleted".into(),
            None => "NO [NONEXISTENT] no such mailbox".into(),
        },
        _ => return None,
    };
    Some(reply)
}

/// Commands on one mailbox by name (SELECT, EXAMINE, STATUS, APPEND); None for the
/// others.
fn mailbox_command(
    cfg: &FakeConfig,
    s: &mut Store,
    ses: &mut Session,
    verb: &str,
    args: &[String],
    lit: Option<Vec<u8>>,
    out: &mut Vec<u8>,
) -> Option<String> {
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let reply: String = match verb {
        "SELECT" | "EXAMINE" => {
            let name = if arg(0).eq_ignore_ascii_case("INBOX") {
                "INBOX".to_string()
            } else {
                arg(0)
            };
            let Some(b) = s.boxes.get(&name) else {
                ses.selected = None;
                return Some("NO [NONEXISTENT] no such mailbox".into());
            };
            let n = b.msgs.len() as u32;
            out.extend_from_slice(
                format!(
                    "* FLAGS (\\Seen \\Deleted)\r\n* {n} EXISTS\r\n* 0 RECENT\r\n* OK [UIDVALIDITY 1] v\r\n* OK [UIDNEXT {}] next\r\n",
                    b.uidnext
                )
                .as_bytes(),
            );
            ses.selected = Some(name);
            ses.exists = n;
            "OK [READ-WRITE] selected".into()
        }
        "STATUS" => {
            let Some(b) = s.boxes.get(&arg(0)) else {
                return Some("NO [NONEXISTENT] no such mailbox".into());
            };
            out.extend_from_slice(
                format!(
                    "* STATUS {} (MESSAGES {} UIDNEXT {})\r\n",
                    quote(&arg(0)),
                    b.msgs.len(),
                    b.uidnext
                )
                .as_bytes(),
            );
            "OK status".into()
        }
        "APPEND" => {
            if cfg.append_limit.is_some_and(|l| s.appends >= l) {
                return Some("NO [OVERQUOTA] quota exceeded".into());
            }
            let Some(b) = s.boxes.get_mut(&arg(0)) else {
                return Some("NO [TRYCREATE] no such mailbox".into());
            };
            let uid = b.uidnext;
            b.uidnext += 1;
            b.msgs.push(Msg {
                uid,
                deleted: false,
                bytes: lit.unwrap_or_default(),
            });
            s.appends += 1;
            format!("OK [APPENDUID 1 {uid}] appended")
        }
        _ => return None,
    };
    Some(reply)
}

fn selected_command(
    cfg: &FakeConfig,
    s: &mut Store,
    ses: &mut Session,
    verb: &str,
    args: &[String],
    out: &mut Vec<u8>,
) -> String {
    let Some(sel) = ses.selected.clone() else {
        return "BAD no mailbox selected".into();
    };
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let uids: Vec<u32> = s.boxes[&sel].msgs.iter().map(|m| m.uid).collect();
    let max_uid = uids.last().copied().unwrap_or(0);
    match verb {
        "UID SEARCH" | "UID SORT" => {
            let word = if verb == "UID SORT" { "SORT" } else { "SEARCH" };
            let list: Vec<String> = uids.iter().map(|u| u.to_string()).collect();
            out.extend_from_slice(format!("* {word} {}\r\n", list.join(" ")).as_bytes());
            "OK search".into()
        }
        "UID FETCH" | "FETCH" => {
            let items = args[1..].join(" ");
            if sel == "INBOX"
                && verb == "UID FETCH"
                && items.to_ascii_uppercase().contains("BODY[]")
            {
                for u in &uids {
                    if in_set(&arg(0), *u, max_uid) {
                        s.read.insert(*u);
                    }
                }
            }
            let b = &s.boxes[&sel];
            let n = b.msgs.len() as u32;
            // `N:*` with N beyond the last UID still names the last message.
            let mut any = false;
            for (i, m) in b.msgs.iter().enumerate() {
                let key = if verb == "FETCH" { i as u32 + 1 } else { m.uid };
                let max = if verb == "FETCH" { n } else { max_uid };
                if in_set(&arg(0), key, max) {
                    fetch_item(out, i as u32 + 1, m, &items);
                    any = true;
                }
            }
            if !any && verb == "UID FETCH" && arg(0).ends_with(":*") && n > 0 {
                fetch_item(out, n, &b.msgs[n as usize - 1], &items);
            }
            "OK fetched".into()
        }
        "UID STORE" => {
            let del = args.iter().any(|a| a.contains("\\Deleted"));
            let b = s.boxes.get_mut(&sel).unwrap();
            for m in b.msgs.iter_mut() {
                if in_set(&arg(0), m.uid, max_uid) && del {
                    m.deleted = true;
                }
            }
            "OK stored".into()
        }
        "UID EXPUNGE" | "EXPUNGE" => {
            let set = if verb == "EXPUNGE" {
                "1:*".to_string()
            } else {
                arg(0)
            };
            expunge(
                s,
                ses,
                &sel,
                |m| m.deleted && in_set(&set, m.uid, max_uid),
                out,
            );
            "OK expunged".into()
        }
        "UID COPY" | "UID MOVE" => {
            let dest = arg(1);
            if !s.boxes.contains_key(&dest) {
                return "NO [TRYCREATE] no such mailbox".into();
            }
            let picked: Vec<Msg> = s.boxes[&sel]
                .msgs
                .iter()
                .filter(|m| in_set(&arg(0), m.uid, max_uid))
                .cloned()
                .collect();
            let db = s.boxes.get_mut(&dest).unwrap();
            for mut m in picked {
                m.uid = db.uidnext;
                m.deleted = false;
                db.uidnext += 1;
                db.msgs.push(m);
            }
            if verb == "UID MOVE" {
                if !cfg.caps.contains(&"MOVE") {
                    return "BAD unknown command".into();
                }
                expunge(s, ses, &sel, |m| in_set(&arg(0), m.uid, max_uid), out);
            }
            "OK copied".into()
        }
        _ => "BAD unknown command".into(),
    }
}

fn expunge(
    s: &mut Store,
    ses: &mut Session,
    sel: &str,
    gone: impl Fn(&Msg) -> bool,
    out: &mut Vec<u8>,
) {
    let b = s.boxes.get_mut(sel).unwrap();
    let mut i = 0;
    while i < b.msgs.len() {
        if gone(&b.msgs[i]) {
            b.msgs.remove(i);
            out.extend_from_slice(format!("* {} EXPUNGE\r\n", i + 1).as_bytes());
            ses.exists = ses.exists.saturating_sub(1);
        } else {
            i += 1;
        }
    }
}

fn fetch_item(out: &mut Vec<u8>, seq: u32, m: &Msg, items: &str) {
    out.extend_from_slice(format!("* {seq} FETCH (UID {} FLAGS ()", m.uid).as_bytes());
    let up = items.to_ascii_uppercase();
    if let Some(i) = up.find("HEADER.FIELDS (") {
        let names: Vec<&str> = up[i + 15..]
            .split(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        out.extend_from_slice(format!(" BODY[HEADER.FIELDS ({})] ", names.join(" ")).as_bytes());
        literal(out, &header_fields(&m.bytes, &names));
        if up.contains("BODY.PEEK[TEXT]") {
            let h = header_block(&m.bytes).len();
            let text = &m.bytes[h..];
            out.extend_from_slice(b" BODY[TEXT]<0> ");
            literal(out, &text[..text.len().min(2048)]);
        }
    } else if up.contains("BODY[]") || up.contains("BODY.PEEK[]") {
        out.extend_from_slice(b" BODY[] ");
        literal(out, &m.bytes);
    } else if up.contains("ENVELOPE") {
        out.extend_from_slice(b" ENVELOPE (NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL)");
    }
    out.extend_from_slice(b")\r\n");
}

/// ManageSieve that refuses every AUTHENTICATE quoting the command back.
async fn sieve_echo_session(c: TcpStream) -> std::io::Result<()> {
    let (r, mut w) = c.into_split();
    let mut r = BufReader::new(r);
    w.write_all(b"\"IMPLEMENTATION\" \"fake\"\r\n\"SASL\" \"PLAIN\"\r\n\"SIEVE\" \"fileinto\"\r\nOK \"ready\"\r\n")
        .await?;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let l = line.trim_end().replace('"', "'");
        if l.to_ascii_uppercase().starts_with("LOGOUT") {
            w.write_all(b"OK \"bye\"\r\n").await?;
            return Ok(());
        }
        w.write_all(format!("NO \"you said: {l}\"\r\n").as_bytes())
            .await?;
    }
}

async fn smtp_session(sh: Arc<Shared>, c: TcpStream) -> std::io::Result<()> {
    let (r, mut w) = c.into_split();
    let mut r = BufReader::new(r);
    w.write_all(b"220 fake ESMTP\r\n").await?;
    let mut rcpts: Vec<String> = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let l = line.trim_end().to_string();
        let up = l.to_ascii_uppercase();
        if up.starts_with("EHLO") {
            w.write_all(b"250-fake\r\n250-AUTH PLAIN\r\n250 8BITMIME\r\n")
                .await?;
        } else if up.starts_with("AUTH PLAIN") && sh.cfg.echo_smtp_auth {
            w.write_all(format!("535 5.7.8 you said: {l}\r\n").as_bytes())
                .await?;
        } else if up.starts_with("AUTH PLAIN") {
            w.write_all(b"235 ok\r\n").await?;
        } else if up.starts_with("MAIL FROM") {
            rcpts.clear();
            w.write_all(b"250 ok\r\n").await?;
        } else if up.starts_with("RCPT TO:") {
            rcpts.push(l[8..].trim_matches(['<', '>', ' ']).to_string());
            w.write_all(b"250 ok\r\n").await?;
        } else if up == "DATA" {
            w.write_all(b"354 go\r\n").await?;
            let mut msg = Vec::new();
            loop {
                let mut dl = String::new();
                if r.read_line(&mut dl).await? == 0 {
                    return Ok(());
                }
                if dl == ".\r\n" {
                    break;
                }
                let dl = dl.strip_prefix('.').unwrap_or(&dl);
                msg.extend_from_slice(dl.as_bytes());
            }
            deliver(&sh, &rcpts, msg);
            w.write_all(b"250 queued\r\n").await?;
        } else if up == "QUIT" {
            w.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else {
            w.write_all(b"250 ok\r\n").await?;
        }
    }
}

fn deliver(sh: &Shared, rcpts: &[String], msg: Vec<u8>) {
    {
        let mut st = sh.state.lock().unwrap();
        st.submitted.push(msg.clone());
        let mut all: Vec<String> = Vec::new();
        for r in rcpts {
            match sh.cfg.lists.iter().find(|(a, _)| a == r) {
                Some((_, members)) => all.extend(members.iter().cloned()),
                None => all.push(r.clone()),
            }
        }
        for r in &all {
            let s = store(&mut st, &sh.cfg, r);
            let b = s.boxes.get_mut("INBOX").unwrap();
            let uid = b.uidnext;
            b.uidnext += 1;
            s.delivered.insert(uid);
            b.msgs.push(Msg {
                uid,
                deleted: false,
                bytes: msg.clone(),
            });
        }
    }
    sh.notify.notify_waiters();
}
