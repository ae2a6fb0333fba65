//! A minimal IMAP4rev1 client over `Wire`: one command at a time (no pipelining, so
//! each command's latency is exact), LITERAL+ appends, IDLE, and the few response
//! parsers the simulated users need. Every untagged `EXISTS` is timestamped, which
//! is how delivery latency is measured.

use crate::endpoint::{Endpoint, StartTls, Tls};
use crate::trace::Trace;
use crate::wire::{ErrorKind, OpError, OpResult, Wire, show};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    No,
    Bad,
}

#[derive(Debug, Default)]
pub struct Response {
    pub untagged: Vec<Vec<u8>>,
    /// The tagged status text (after `OK`/`NO`/`BAD`).
    pub text: String,
    /// Bytes of `untagged`.
    bytes: usize,
}

impl Response {
    /// Keeps an untagged unit, within the limits of one command's answer
    /// (`MAX_UNTAGGED_PER_COMMAND` units, `MAX_UNTAGGED_BYTES`): a server
    /// that floods a command with untagged responses is refused, not stored.
    fn keep(&mut self, u: Vec<u8>) -> Result<(), String> {
        use mailbench_base::limits::{MAX_UNTAGGED_BYTES, MAX_UNTAGGED_PER_COMMAND};
        self.bytes += u.len();
        if self.untagged.len() >= MAX_UNTAGGED_PER_COMMAND {
            return Err(format!(
                "more than {MAX_UNTAGGED_PER_COMMAND} untagged responses"
            ));
        }
        if self.bytes > MAX_UNTAGGED_BYTES {
            return Err(format!(
                "more than {} MiB of untagged responses",
                MAX_UNTAGGED_BYTES >> 20
            ));
        }
        self.untagged.push(u);
        Ok(())
    }
}

/// What the client knows of the Inbox: kept while other mailboxes are
/// selected, so an arrival seen anywhere (IDLE, NOOP, a task's own SELECT of the
/// Inbox, the answer to any command) is fetched and timed.
#[derive(Debug, Default, Clone)]
pub struct InboxWatch {
    /// Messages in the Inbox, as last announced while it was selected.
    pub exists: u32,
    /// `(count, when)` of every increase of `exists` not yet taken by a fetch
    /// of new mail; counts follow EXPUNGEs (sequence numbers move down).
    pub arrivals: Vec<(u32, Instant)>,
    /// The Inbox's UIDNEXT as last announced.
    pub uidnext: Option<u32>,
}

pub struct ImapConn {
    wire: Wire,
    tag: u32,
    pub op_timeout: Duration,
    pub caps: Vec<String>,
    pub selected: Option<String>,
    /// The selected mailbox was opened with EXAMINE.
    read_only: bool,
    /// The mailbox a SELECT/EXAMINE in progress opens (its untagged answers
    /// describe it).
    selecting: Option<String>,
    /// Messages in the selected mailbox, as last announced.
    pub exists: u32,
    pub inbox: InboxWatch,
    /// Commands sent (generator efficiency).
    pub commands: u64,
    idle_tag: Option<String>,
    trace: Option<Trace>,
}

/// Whether a mailbox name is the Inbox (case-insensitive, RFC 3501 5.1).
pub fn is_inbox(name: &str) -> bool {
    name.eq_ignore_ascii_case("INBOX")
}

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// IMAP quoted string of a mailbox name.
pub fn mailbox(name: &str) -> String {
    quote(name)
}

impl ImapConn {
    /// Connects in plain text and reads the greeting (no TLS, no policy).
    pub async fn connect(host: &str, port: u16, op_timeout: Duration) -> OpResult<ImapConn> {
        let wire = Wire::connect(host, port, op_timeout).await?;
        Self::from_wire(wire, op_timeout, None).await
    }

    /// Connects to `ep` with TLS as its scheme and `starttls` say: implicit TLS
    /// for `imaps://`; on `imap://` STARTTLS when offered (`auto`) or always
    /// (`require`). Fails (kind `tls`) when the connection could not carry a
    /// password safely (tls.rs). `trace` receives the traffic (`--trace-imap`).
    pub async fn open(
        ep: &Endpoint,
        tls: &Tls,
        starttls: StartTls,
        op_timeout: Duration,
        trace: Option<Trace>,
    ) -> OpResult<ImapConn> {
        let wire = tls.connect(ep, op_timeout).await?;
        let mut c = Self::from_wire(wire, op_timeout, trace).await?;
        if !c.wire.is_tls() && starttls != StartTls::Never {
            if c.caps.is_empty() {
                let r = c.cmd("CAPABILITY", "CAPABILITY").await?;
                for u in &r.untagged {
                    c.parse_caps(u);
                }
            }
            if Tls::upgrade(starttls, c.has_cap("STARTTLS"), "IMAP", &c.wire.peer)? {
                let (st, resp) = c.cmd_status("STARTTLS").await?;
                if st != Status::Ok {
                    return Err(c.wire.refused(ErrorKind::Tls, "STARTTLS", &resp.text));
                }
                let deadline = Instant::now() + op_timeout;
                tls.handshake(&mut c.wire, &ep.host, "STARTTLS", deadline)
                    .await?;
                if let (Some(t), Some(sec)) = (&c.trace, c.wire.security()) {
                    t.note(&format!("TLS: {sec}"));
                }
                // Capabilities from before TLS are not to be trusted (RFC 3501 6.2.1).
                c.caps.clear();
            }
        }
        tls.check_credentials_safe(&c.wire, "IMAP", "imaps://")?;
        Ok(c)
    }

    /// How the connection is protected: `None` = plain text.
    pub fn security(&self) -> Option<&str> {
        self.wire.security()
    }

    pub async fn from_wire(
        wire: Wire,
        op_timeout: Duration,
        trace: Option<Trace>,
    ) -> OpResult<ImapConn> {
        let mut c = ImapConn {
            wire,
            tag: 0,
            op_timeout,
            caps: Vec::new(),
            selected: None,
            read_only: false,
            selecting: None,
            exists: 0,
            inbox: InboxWatch::default(),
            commands: 0,
            idle_tag: None,
            trace,
        };
        if let Some(t) = &c.trace {
            t.note(&format!("connected to {}", c.wire.peer));
            if let Some(sec) = c.wire.security() {
                t.note(&format!("TLS: {sec}"));
            }
        }
        let deadline = Instant::now() + op_timeout;
        let greet = c.read_unit(deadline).await?;
        if !greet.starts_with(b"* OK") && !greet.starts_with(b"* PREAUTH") {
            return Err(OpError::new(
                ErrorKind::Malformed,
                format!(
                    "{} did not greet as an IMAP server: {}",
                    c.wire.peer,
                    show(&greet)
                ),
            ));
        }
        c.parse_caps(&greet);
        Ok(c)
    }

    pub fn peer(&self) -> &str {
        &self.wire.peer
    }

    pub fn bytes(&self) -> (u64, u64) {
        (self.wire.bytes_in, self.wire.bytes_out)
    }

    pub fn has_cap(&self, cap: &str) -> bool {
        self.caps.iter().any(|c| c.eq_ignore_ascii_case(cap))
    }

    fn parse_caps(&mut self, unit: &[u8]) {
        let text = String::from_utf8_lossy(unit);
        let list = if let Some(i) = text.find("[CAPABILITY ") {
            let rest = &text[i + 12..];
            rest.split(']').next().unwrap_or("").to_string()
        } else if let Some(rest) = text.strip_prefix("* CAPABILITY ") {
            rest.to_string()
        } else {
            return;
        };
        self.caps = list.split_whitespace().map(|s| s.to_string()).collect();
    }

    fn next_tag(&mut self) -> String {
        self.tag += 1;
        format!("a{}", self.tag)
    }

    /// Sends one command and collects its untagged responses; NO/BAD is an error of
    /// kind `Rejected` naming `what`.
    pub async fn cmd(&mut self, what: &str, line: &str) -> OpResult<Response> {
        let (st, resp) = self.cmd_status(line).await?;
        match st {
            Status::Ok => Ok(resp),
            _ => Err(self.wire.refused(ErrorKind::Rejected, what, &resp.text)),
        }
    }

    /// Sends one command and returns its status without judging it.
    pub async fn cmd_status(&mut self, line: &str) -> OpResult<(Status, Response)> {
        self.cmd_status_shown(line, None).await
    }

    /// As `cmd_status`; the trace shows `shown` after the tag instead of the
    /// line (a password replaced).
    async fn cmd_status_shown(
        &mut self,
        line: &str,
        shown: Option<&str>,
    ) -> OpResult<(Status, Response)> {
        let tag = self.next_tag();
        let deadline = Instant::now() + self.op_timeout;
        let mut out = Vec::with_capacity(tag.len() + line.len() + 3);
        out.extend_from_slice(tag.as_bytes());
        out.push(b' ');
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\r\n");
        self.commands += 1;
        if let Some(t) = &self.trace {
            match shown {
                Some(text) => t.client(format!("{tag} {text}").as_bytes()),
                None => t.client(&out),
            }
        }
        self.wire.write_all(&out, deadline).await?;
        self.collect(&tag, deadline).await
    }

    /// Reads one response unit (traced).
    async fn read_unit(&mut self, deadline: Instant) -> OpResult<Vec<u8>> {
        let u = self.wire.read_unit(deadline).await?;
        if let Some(t) = &self.trace {
            t.server(&u);
        }
        Ok(u)
    }

    /// Writes client bytes (traced).
    async fn send(&mut self, bytes: &[u8], deadline: Instant) -> OpResult<()> {
        if let Some(t) = &self.trace {
            t.client(bytes);
        }
        self.wire.write_all(bytes, deadline).await
    }

    /// A command with one literal argument: `prefix {n+}` CRLF literal `suffix`.
    pub async fn cmd_literal(
        &mut self,
        what: &str,
        prefix: &str,
        literal: &[u8],
    ) -> OpResult<Response> {
        let tag = self.next_tag();
        let deadline = Instant::now() + self.op_timeout;
        self.commands += 1;
        let plus = self.has_cap("LITERAL+");
        let head = format!(
            "{tag} {prefix} {{{}{}}}\r\n",
            literal.len(),
            if plus { "+" } else { "" }
        );
        self.send(head.as_bytes(), deadline).await?;
        if !plus {
            loop {
                let u = self.read_unit(deadline).await?;
                if u.starts_with(b"+") {
                    break;
                }
                if u.starts_with(tag.as_bytes()) {
                    return Err(self.wire.refused(ErrorKind::Rejected, what, show(&u)));
                }
                self.check_untagged(&u)?;
            }
        }
        if let Some(t) = &self.trace {
            t.client(literal);
        }
        self.wire.write_all(literal, deadline).await?;
        self.wire.write_all(b"\r\n", deadline).await?;
        let (st, resp) = self.collect(&tag, deadline).await?;
        match st {
            Status::Ok => Ok(resp),
            _ => Err(self.wire.refused(ErrorKind::Rejected, what, &resp.text)),
        }
    }

    async fn collect(&mut self, tag: &str, deadline: Instant) -> OpResult<(Status, Response)> {
        let mut resp = Response::default();
        loop {
            let u = self.read_unit(deadline).await?;
            if let Some(rest) = u
                .strip_prefix(tag.as_bytes())
                .and_then(|r| r.strip_prefix(b" "))
            {
                let text = String::from_utf8_lossy(rest).to_string();
                let (st, t) = if let Some(t) = text.strip_prefix("OK") {
                    (Status::Ok, t)
                } else if let Some(t) = text.strip_prefix("NO") {
                    (Status::No, t)
                } else if let Some(t) = text.strip_prefix("BAD") {
                    (Status::Bad, t)
                } else {
                    return Err(OpError::new(
                        ErrorKind::Malformed,
                        format!(
                            "{} sent a tagged line without a status: {}",
                            self.wire.peer,
                            show(&u)
                        ),
                    ));
                };
                resp.text = t.trim().to_string();
                if resp.text.contains("[CAPABILITY ") {
                    self.parse_caps(&u);
                }
                return Ok((st, resp));
            }
            self.check_untagged(&u)?;
            resp.keep(u).map_err(|m| {
                OpError::new(
                    ErrorKind::Malformed,
                    format!("{} sent {m} to one command", self.wire.peer),
                )
            })?;
        }
    }

    /// Validates an untagged unit and tracks EXISTS/EXPUNGE/CAPABILITY.
    fn check_untagged(&mut self, u: &[u8]) -> OpResult<()> {
        if u.starts_with(b"+") {
            return Ok(());
        }
        let Some(rest) = u.strip_prefix(b"* ") else {
            return Err(OpError::new(
                ErrorKind::Malformed,
                format!("{} sent an unexpected line: {}", self.wire.peer, show(u)),
            ));
        };
        if rest.starts_with(b"CAPABILITY ") {
            self.parse_caps(u);
            return Ok(());
        }
        if rest.starts_with(b"BYE") {
            return Ok(());
        }
        if rest.starts_with(b"OK [UIDNEXT ") {
            self.check_uidnext(rest);
            return Ok(());
        }
        let mut it = rest.splitn(3, |c| *c == b' ');
        let (Some(num), Some(word)) = (it.next(), it.next()) else {
            return Ok(());
        };
        let Some(n) = std::str::from_utf8(num)
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            return Ok(());
        };
        if word.eq_ignore_ascii_case(b"EXISTS") {
            self.exists = n;
            if self.inbox_in_view() {
                if n > self.inbox.exists {
                    self.inbox.arrivals.push((n, Instant::now()));
                }
                self.inbox.exists = n;
            }
        } else if word.eq_ignore_ascii_case(b"EXPUNGE") {
            self.exists = self.exists.saturating_sub(1);
            if self.inbox_in_view() {
                self.inbox.exists = self.inbox.exists.saturating_sub(1);
                // Messages after the expunged one move down by one.
                for a in self.inbox.arrivals.iter_mut() {
                    if a.0 >= n {
                        a.0 -= 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the untagged answers being read describe the Inbox (it is
    /// selected, or a SELECT of it is in progress).
    fn inbox_in_view(&self) -> bool {
        self.selecting
            .as_deref()
            .or(self.selected.as_deref())
            .is_some_and(is_inbox)
    }

    /// `* OK [UIDNEXT n]` of the Inbox.
    fn check_uidnext(&mut self, rest: &[u8]) {
        let Some(r) = rest.strip_prefix(b"OK [UIDNEXT ") else {
            return;
        };
        let num: Vec<u8> = r
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .copied()
            .collect();
        if let Some(n) = std::str::from_utf8(&num).ok().and_then(|s| s.parse().ok())
            && self.inbox_in_view()
        {
            self.inbox.uidnext = Some(n);
        }
    }

    /// Whether the Inbox is the selected mailbox.
    pub fn inbox_selected(&self) -> bool {
        self.selected.as_deref().is_some_and(is_inbox)
    }

    /// Arrivals in the Inbox not yet fetched: an EXISTS increase, or a UIDNEXT
    /// beyond `next_uid` (the first UID the user has not seen).
    pub fn inbox_news(&self, next_uid: u32) -> bool {
        !self.inbox.arrivals.is_empty() || self.inbox.uidnext.is_some_and(|u| u > next_uid)
    }

    pub async fn login(&mut self, user: &str, password: &str) -> OpResult<()> {
        let user_q = quote(user);
        let line = format!("LOGIN {user_q} {}", quote(password));
        let shown = crate::trace::redacted_login(&user_q);
        let (st, resp) = self.cmd_status_shown(&line, Some(&shown)).await?;
        if st != Status::Ok {
            return Err(OpError::new(
                ErrorKind::Auth,
                format!(
                    "login of {user} refused by {}: {}",
                    self.wire.peer, resp.text
                ),
            ));
        }
        if !resp.text.contains("[CAPABILITY ") {
            let r = self.cmd("CAPABILITY", "CAPABILITY").await?;
            for u in &r.untagged {
                self.parse_caps(u);
            }
        }
        Ok(())
    }

    /// SELECT (or EXAMINE when `read_only`) a mailbox. Selecting the Inbox
    /// compares its EXISTS with the count known from the last time it was
    /// selected: anything beyond is an arrival (seen now, an upper bound).
    pub async fn select(&mut self, name: &str, read_only: bool) -> OpResult<()> {
        self.exists = 0;
        self.selected = None;
        self.selecting = Some(name.to_string());
        let verb = if read_only { "EXAMINE" } else { "SELECT" };
        let r = self.cmd(verb, &format!("{verb} {}", mailbox(name))).await;
        self.selecting = None;
        r?;
        self.selected = Some(name.to_string());
        self.read_only = read_only;
        Ok(())
    }

    /// Selects `name` unless it is already selected.
    pub async fn ensure_selected(&mut self, name: &str) -> OpResult<()> {
        if self.selected.as_deref() == Some(name) {
            return Ok(());
        }
        self.select(name, false).await
    }

    /// UID SEARCH / UID SORT: the numbers of the `* SEARCH`/`* SORT` lines.
    pub async fn uid_search(&mut self, what: &str, line: &str) -> OpResult<Vec<u32>> {
        let r = self.cmd(what, line).await?;
        Ok(parse_numbers(&r.untagged))
    }

    /// APPEND a message; returns the new UID when the server says (APPENDUID).
    /// A mailbox open read-only (EXAMINE) is closed first: some servers
    /// (Courier) refuse to append to it.
    pub async fn append(&mut self, folder: &str, flags: &str, msg: &[u8]) -> OpResult<Option<u32>> {
        if self.read_only && self.selected.as_deref() == Some(folder) {
            self.cmd("CLOSE", "CLOSE").await?;
            self.selected = None;
            self.read_only = false;
        }
        let prefix = if flags.is_empty() {
            format!("APPEND {}", mailbox(folder))
        } else {
            format!("APPEND {} ({flags})", mailbox(folder))
        };
        let r = self.cmd_literal("APPEND", &prefix, msg).await?;
        Ok(appenduid(&r.text))
    }

    /// Starts IDLE (waits for the continuation).
    pub async fn idle_start(&mut self) -> OpResult<()> {
        let tag = self.next_tag();
        let deadline = Instant::now() + self.op_timeout;
        self.commands += 1;
        self.send(format!("{tag} IDLE\r\n").as_bytes(), deadline)
            .await?;
        loop {
            let u = self.read_unit(deadline).await?;
            if u.starts_with(b"+") {
                self.idle_tag = Some(tag);
                return Ok(());
            }
            if u.starts_with(tag.as_bytes()) {
                return Err(self.wire.refused(ErrorKind::Rejected, "IDLE", show(&u)));
            }
            self.check_untagged(&u)?;
        }
    }

    /// While idling: waits until `until` or until new messages are announced.
    /// Returns true when EXISTS grew. Cancel-safe.
    pub async fn idle_wait(&mut self, until: Instant) -> OpResult<bool> {
        let before = self.inbox.arrivals.len();
        loop {
            if Instant::now() >= until {
                return Ok(false);
            }
            match self.read_unit(until).await {
                Ok(u) => {
                    self.check_untagged(&u)?;
                    if u.starts_with(b"* BYE") {
                        return Err(OpError::new(
                            ErrorKind::Reset,
                            format!("{} ended the session: {}", self.wire.peer, show(&u)),
                        ));
                    }
                    if self.inbox.arrivals.len() > before {
                        return Ok(true);
                    }
                }
                Err(e) if e.kind == ErrorKind::Timeout => return Ok(false),
                Err(e) => return Err(e),
            }
        }
    }

    /// Ends IDLE (DONE) and waits for its tagged completion.
    pub async fn idle_done(&mut self) -> OpResult<()> {
        let Some(tag) = self.idle_tag.take() else {
            return Ok(());
        };
        let deadline = Instant::now() + self.op_timeout;
        self.send(b"DONE\r\n", deadline).await?;
        let (st, resp) = self.collect(&tag, deadline).await?;
        if st != Status::Ok {
            return Err(OpError::new(
                ErrorKind::Rejected,
                format!(
                    "IDLE ended with an error by {}: {}",
                    self.wire.peer, resp.text
                ),
            ));
        }
        Ok(())
    }

    pub fn idling(&self) -> bool {
        self.idle_tag.is_some()
    }

    pub async fn logout(&mut self) {
        let _ = self.idle_done().await;
        let _ = self.cmd_status("LOGOUT").await;
    }
}

/// Numbers of `* SEARCH` / `* SORT` / `* ESEARCH`-less answers.
pub fn parse_numbers(untagged: &[Vec<u8>]) -> Vec<u32> {
    let mut out = Vec::new();
    for u in untagged {
        let rest = u
            .strip_prefix(b"* SEARCH")
            .or_else(|| u.strip_prefix(b"* SORT"));
        if let Some(rest) = rest {
            for w in rest.split(|c| *c == b' ') {
                if let Some(n) = std::str::from_utf8(w).ok().and_then(|s| s.parse().ok()) {
                    out.push(n);
                }
            }
        }
    }
    out
}

/// `[APPENDUID <validity> <uid>]` in a tagged OK text.
pub fn appenduid(text: &str) -> Option<u32> {
    let i = text.find("[APPENDUID ")?;
    let rest = &text[i + 11..];
    rest.split([' ', ']']).nth(1)?.parse().ok()
}

/// The sequence number and UID of a `* n FETCH (... UID u ...)` unit.
pub fn fetch_seq_uid(u: &[u8]) -> Option<(u32, u32)> {
    let rest = u.strip_prefix(b"* ")?;
    let sp = rest.iter().position(|c| *c == b' ')?;
    let seq: u32 = std::str::from_utf8(&rest[..sp]).ok()?.parse().ok()?;
    if !rest[sp + 1..].starts_with(b"FETCH") {
        return None;
    }
    let i = find(rest, b"UID ")?;
    let num: Vec<u8> = rest[i + 4..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .copied()
        .collect();
    let uid = std::str::from_utf8(&num).ok()?.parse().ok()?;
    Some((seq, uid))
}

/// The value of header `name:` inside a fetched unit (first line only).
pub fn header_value(u: &[u8], name: &str) -> Option<String> {
    let needle = format!("{name}:");
    let i = find_ci(u, needle.as_bytes())?;
    let rest = &u[i + needle.len()..];
    let end = rest
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(rest.len());
    Some(String::from_utf8_lossy(&rest[..end]).trim().to_string())
}

/// One `* LIST` answer: the mailbox's attributes, hierarchy delimiter and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    pub flags: Vec<String>,
    pub delim: Option<char>,
    pub name: String,
}

impl ListEntry {
    /// Whether the mailbox has attribute `flag` (e.g. `\\Sent`), any case.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f.eq_ignore_ascii_case(flag))
    }
}

/// A token of an IMAP response: parentheses, NIL, or a string (atom, quoted
/// string or literal).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Open,
    Close,
    Nil,
    Text(String),
}

/// Tokens of the rest of a response line (with its literals); None when a
/// quoted string or literal is cut short.
fn tokenize(b: &[u8]) -> Option<Vec<Tok>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\r' | b'\n' => i += 1,
            b'(' => {
                out.push(Tok::Open);
                i += 1;
            }
            b')' => {
                out.push(Tok::Close);
                i += 1;
            }
            b'"' => {
                i += 1;
                let mut v = Vec::new();
                loop {
                    let c = *b.get(i)?;
                    i += 1;
                    match c {
                        b'\\' => {
                            v.push(*b.get(i)?);
                            i += 1;
                        }
                        b'"' => break,
                        _ => v.push(c),
                    }
                }
                out.push(Tok::Text(String::from_utf8_lossy(&v).into_owned()));
            }
            b'{' => {
                let close = i + b[i..].iter().position(|c| *c == b'}')?;
                let n: usize = std::str::from_utf8(&b[i + 1..close])
                    .ok()?
                    .trim_end_matches('+')
                    .parse()
                    .ok()?;
                let mut start = close + 1;
                if b[start..].starts_with(b"\r\n") {
                    start += 2;
                }
                let v = b.get(start..start + n)?;
                out.push(Tok::Text(String::from_utf8_lossy(v).into_owned()));
                i = start + n;
            }
            _ => {
                let start = i;
                while i < b.len() && !b" ()\"\r\n".contains(&b[i]) {
                    i += 1;
                }
                let atom = &b[start..i];
                out.push(if atom.eq_ignore_ascii_case(b"NIL") {
                    Tok::Nil
                } else {
                    Tok::Text(String::from_utf8_lossy(atom).into_owned())
                });
            }
        }
    }
    Some(out)
}

/// The `* LIST` (or `* LSUB`) answers among `untagged`, parsed.
pub fn parse_list(untagged: &[Vec<u8>]) -> Vec<ListEntry> {
    untagged.iter().filter_map(|u| list_entry(u)).collect()
}

fn list_entry(u: &[u8]) -> Option<ListEntry> {
    let rest = u.strip_prefix(b"* ")?;
    let sp = rest.iter().position(|c| *c == b' ')?;
    let word = &rest[..sp];
    if !word.eq_ignore_ascii_case(b"LIST") && !word.eq_ignore_ascii_case(b"LSUB") {
        return None;
    }
    let toks = tokenize(&rest[sp + 1..])?;
    let mut it = toks.into_iter();
    if it.next()? != Tok::Open {
        return None;
    }
    let mut flags = Vec::new();
    loop {
        match it.next()? {
            Tok::Close => break,
            Tok::Text(f) => flags.push(f),
            _ => return None,
        }
    }
    let delim = match it.next()? {
        Tok::Nil => None,
        Tok::Text(d) => d.chars().next(),
        _ => return None,
    };
    let Tok::Text(name) = it.next()? else {
        return None;
    };
    Some(ListEntry { flags, delim, name })
}

/// Mailbox names of `* LIST` answers.
pub fn list_names(untagged: &[Vec<u8>]) -> Vec<String> {
    parse_list(untagged).into_iter().map(|e| e.name).collect()
}

/// The first personal namespace of a `* NAMESPACE` answer (RFC 2342):
/// `(prefix, delimiter)`; None when the server has no personal namespace.
pub fn personal_namespace(untagged: &[Vec<u8>]) -> Option<(String, Option<char>)> {
    let u = untagged.iter().find(|u| {
        u.get(..12)
            .is_some_and(|h| h.eq_ignore_ascii_case(b"* NAMESPACE "))
    })?;
    let toks = tokenize(&u[12..])?;
    match toks.as_slice() {
        [Tok::Open, Tok::Open, Tok::Text(prefix), delim, ..] => {
            let d = match delim {
                Tok::Text(d) => d.chars().next(),
                _ => None,
            };
            Some((prefix.clone(), d))
        }
        _ => None,
    }
}

/// `MESSAGES n` of a `* STATUS` answer.
pub fn status_messages(untagged: &[Vec<u8>]) -> Option<u32> {
    for u in untagged {
        if u.starts_with(b"* STATUS ")
            && let Some(i) = find(u, b"MESSAGES ")
        {
            let num: Vec<u8> = u[i + 9..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .copied()
                .collect();
            return std::str::from_utf8(&num).ok()?.parse().ok();
        }
    }
    None
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn find_ci(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w.eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        assert_eq!(
            parse_numbers(&[b"* SEARCH 1 5 9".to_vec(), b"* SORT 3 2".to_vec()]),
            vec![1, 5, 9, 3, 2]
        );
        assert_eq!(
            appenduid("[APPENDUID 1700000 42] Append completed."),
            Some(42)
        );
        assert_eq!(
            fetch_seq_uid(b"* 12 FETCH (UID 77 BODY[HEADER.FIELDS (X-A)] {10}\r\nX-A: b\r\n\r\n)"),
            Some((12, 77))
        );
        assert_eq!(
            header_value(
                b"* 1 FETCH (UID 2 BODY[] {20}\r\nx-mailbench-track: a b\r\n\r\n)",
                "X-Mailbench-Track"
            ),
            Some("a b".into())
        );
        assert_eq!(
            list_names(&[
                b"* LIST (\\HasNoChildren) \".\" INBOX".to_vec(),
                b"* LIST (\\HasNoChildren) \".\" \"Deleted Items\"".to_vec(),
            ]),
            vec!["INBOX".to_string(), "Deleted Items".to_string()]
        );
        assert_eq!(
            status_messages(&[b"* STATUS \"Sent\" (MESSAGES 17)".to_vec()]),
            Some(17)
        );
    }

    #[test]
    fn list_and_namespace_answers() {
        let l = parse_list(&[
            b"* LIST (\\HasNoChildren \\Sent) \".\" \"INBOX.Sent Messages\"".to_vec(),
            b"* LIST (\\Noselect) NIL \"\"".to_vec(),
            b"* LIST () \"/\" {8}\r\nA \"b\" \\c".to_vec(),
            b"* LIST (\\Trash) \"/\" Trash (\"CHILDINFO\" (\"SUBSCRIBED\"))".to_vec(),
            b"* LIST (\\X) \"/\" \"with \\\"quote\\\" \\\\ back\"".to_vec(),
            b"* OK not a list".to_vec(),
        ]);
        assert_eq!(l.len(), 5, "{l:?}");
        assert_eq!(l[0].name, "INBOX.Sent Messages");
        assert_eq!(l[0].delim, Some('.'));
        assert!(l[0].has_flag("\\sent") && !l[0].has_flag("\\Trash"));
        assert_eq!((l[1].delim, l[1].name.as_str()), (None, ""));
        assert_eq!(l[2].name, "A \"b\" \\c");
        assert_eq!(l[3].name, "Trash");
        assert_eq!(l[4].name, "with \"quote\" \\ back");
        assert_eq!(
            personal_namespace(&[b"* NAMESPACE ((\"INBOX.\" \".\")) NIL NIL".to_vec()]),
            Some(("INBOX.".into(), Some('.')))
        );
        assert_eq!(
            personal_namespace(&[
                b"* NAMESPACE ((\"\" \"/\")(\"#mh/\" \"/\")) ((\"~\" \"/\")) NIL".to_vec()
            ]),
            Some(("".into(), Some('/')))
        );
        assert_eq!(
            personal_namespace(&[b"* NAMESPACE NIL NIL ((\"shared.\" \".\"))".to_vec()]),
            None
        );
    }
}
