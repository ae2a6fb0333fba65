//! A JMAP user's day (docs/mail-load.md, "The same tasks over JMAP"): the
//! same schedule, task names, latency from the intended start and stats as an
//! IMAP user's, over the JMAP client (`crate::jmap`). New mail comes from the
//! push stream when the session offers one that stays open, else from
//! polling Email/changes every `--poll-interval`; delivered mail is tracked
//! by its `X-Mailbench-Track` header as on the IMAP path. Sending goes
//! through EmailSubmission/set when the account offers it, otherwise over
//! SMTP submission as IMAP users send, with a copy filed in Sent.

use super::tasks::pick_colleagues;
use super::{Outcome, Shared, envelope, next_poll, schedule};
use crate::endpoint::backoff;
use crate::jmap::proto::Email;
use crate::jmap::push::Push;
use crate::jmap::{Counts, Draft, JmapConn};
use crate::mailboxes::{CALENDAR, DELETED, DRAFTS, SENT, SMART_PREFIX, folder_name};
use crate::profile::{RecipientsExt, TaskKind};
use crate::stats::Protocol;
use crate::wire::{ErrorKind, OpError, OpResult};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use url::Url;

/// The Inbox view and the screens a task lists: at most this many messages.
const SCREEN: u64 = 50;
/// Email/changes asks for at most this many changes at a time.
const MAX_CHANGES: u64 = 256;
/// Keep-alive interval asked of the push stream, seconds.
const PING_S: u64 = 30;

/// Where JMAP users connect: the session URL (`--jmap`).
#[derive(Debug, Clone)]
pub struct JmapUsers {
    pub url: Url,
    /// The share of users on JMAP, in % (`MailConfig::jmap_pct`).
    pub pct: u32,
    /// The number (from 0) of this generator's first user: `--first-user` − 1,
    /// its slice's first with several generators, so that the mix holds over
    /// every generator's users together.
    pub first: usize,
    /// What the JMAP users sent and received (the result's generator figures).
    pub counts: Arc<Counts>,
}

impl JmapUsers {
    /// Whether this generator's user of index `idx` is a JMAP user: chosen
    /// by the user's number, not by its index within this generator.
    pub fn takes(&self, idx: usize) -> bool {
        mailbench_results::mail::config::jmap_user(self.pct, self.first + idx)
    }
}

#[derive(Debug, Clone)]
struct JMsg {
    id: String,
    from: Option<usize>,
    rcpts: Vec<usize>,
    seen: bool,
}

struct JUser {
    idx: usize,
    addr: String,
    /// The name the user logs in with (`--login-format`, the users file).
    login: String,
    rng: SmallRng,
    conn: Option<JmapConn>,
    /// Mailbox ids by the names setup gives them (and `inbox` by role).
    boxes: HashMap<String, String>,
    inbox: Vec<JMsg>,
    known: HashSet<String>,
    /// The Email state new mail is asked from.
    state: Option<String>,
    push: Option<Push>,
    next_poll: Option<Instant>,
    smart: Vec<String>,
    rules: Vec<String>,
    next_name: u32,
    backoff: backoff::Backoff,
    /// How late the timer woke the user for its next task.
    woke_late: Option<Duration>,
}

/// One JMAP user's day: logon in the ramp-up, the scheduled tasks, new mail
/// between them, the final check after the drain.
pub(super) async fn user_main(
    sh: Arc<Shared>,
    url: Url,
    idx: usize,
    mut stop: watch::Receiver<bool>,
) {
    let seed = sh.params.seed ^ ((idx as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut rng = SmallRng::seed_from_u64(seed);
    let logon_at = sh.t0 + sh.params.ramp_up.mul_f64(rng.random::<f64>());
    let plan = schedule(&sh.profile, sh.params.day_length, &mut rng);
    sh.planned.fetch_add(plan.len() as u64, Ordering::Relaxed);
    let mut u = JUser {
        idx,
        addr: sh.topo.users[idx].clone(),
        login: sh.topo.login(idx).to_string(),
        rng,
        conn: None,
        boxes: HashMap::new(),
        inbox: Vec::new(),
        known: HashSet::new(),
        state: None,
        push: None,
        next_poll: None,
        smart: Vec::new(),
        rules: Vec::new(),
        next_name: 1,
        backoff: backoff::Backoff::default(),
        woke_late: None,
    };
    tokio::select! {
        _ = tokio::time::sleep_until(logon_at) => {}
        _ = stop.changed() => {}
    }
    if !*stop.borrow() {
        u.logon(&sh, &url).await;
    }
    let day_start = sh.day_start();
    for (offset, kind) in plan {
        let when = day_start + offset;
        if u.wait_until(&sh, &url, when, &mut stop).await {
            break;
        }
        let Some(slot) = sh.take_slot(u.woke_late.take(), &mut stop).await else {
            break;
        };
        let r = u.task(&sh, &url, kind).await;
        drop(slot);
        let latency = Instant::now().saturating_duration_since(when);
        match r {
            Ok(Outcome::Done) => sh.stats().ok(Protocol::Jmap, kind.name(), latency),
            Ok(Outcome::Skipped(why)) => sh.stats().skipped(Protocol::Jmap, kind.name(), why),
            Err(e) => {
                sh.stats().error(Protocol::Jmap, kind.name(), &u.addr, &e);
                u.conn = None;
                u.push = None;
                u.backoff.failed(Instant::now(), &mut u.rng);
            }
        }
    }
    let far = Instant::now() + Duration::from_secs(365 * 86400);
    let _ = u.wait_until(&sh, &url, far, &mut stop).await;
    if !sh.interrupted.load(Ordering::Relaxed) {
        let t = Instant::now();
        match u.news(&sh, &url).await {
            Ok(()) => sh.stats().ok(Protocol::Jmap, "new_mail", t.elapsed()),
            Err(e) => sh.stats().error(Protocol::Jmap, "new_mail", &u.addr, &e),
        }
    }
}

impl JUser {
    /// Logon, measured as `logon`.
    async fn logon(&mut self, sh: &Shared, url: &Url) {
        let t = Instant::now();
        match self.connect(sh, url).await {
            Ok(()) => {
                self.backoff.succeeded();
                sh.stats().ok(Protocol::Jmap, "logon", t.elapsed());
            }
            Err(e) => {
                self.backoff.failed(Instant::now(), &mut self.rng);
                sh.stats().error(Protocol::Jmap, "logon", &self.addr, &e);
            }
        }
    }

    /// The session, the mailboxes by role and name, the Email state, the
    /// Inbox view (this run's messages already there count as delivered
    /// now), the push stream when the session offers one.
    async fn connect(&mut self, sh: &Shared, url: &Url) -> OpResult<()> {
        let pw = sh.target.creds.password(&self.addr).ok_or_else(|| {
            OpError::new(ErrorKind::Auth, format!("no password for {}", self.addr))
        })?;
        let mut c =
            JmapConn::open(url, &sh.target.tls, sh.target.op_timeout, &self.login, pw).await?;
        if let Some(j) = &sh.jmap {
            c.count_into(j.counts.clone());
        }
        let list = c.mailboxes().await?;
        self.boxes.clear();
        for m in &list {
            if m.parent_id.is_none() {
                self.boxes.insert(m.name.clone(), m.id.clone());
            }
        }
        for (role, name) in [
            ("inbox", "inbox"),
            ("drafts", DRAFTS),
            ("sent", SENT),
            ("trash", DELETED),
        ] {
            if let Some(m) = list.iter().find(|m| m.role.as_deref() == Some(role)) {
                self.boxes.insert(name.into(), m.id.clone());
            }
        }
        if !self.boxes.contains_key("inbox") {
            return Err(OpError::new(
                ErrorKind::Malformed,
                format!(
                    "{}: Mailbox/get lists no mailbox with role inbox",
                    self.addr
                ),
            ));
        }
        if self.state.is_none() {
            self.state = Some(c.email_state().await?);
        }
        let inbox = self.boxes["inbox"].clone();
        let (_, list) = c.list(&inbox, SCREEN).await?;
        self.take(sh, &inbox, list, Instant::now());
        if let Some(u) = c.session.event_source_url(PING_S) {
            let u = u?;
            let http = c.http_for(&u)?;
            let mut p = Push::new(u, http, sh.params.seed ^ self.idx as u64);
            p.count_into(c.counts().clone());
            self.push = Some(p);
        }
        self.conn = Some(c);
        Ok(())
    }

    /// Messages listed: those new to the user enter its Inbox, this run's
    /// tracked ones count as delivered at `arrival`.
    fn take(&mut self, sh: &Shared, inbox: &str, list: Vec<Email>, arrival: Instant) {
        let mut delivered = Vec::new();
        for e in list {
            if !e.mailbox_ids.contains_key(inbox) || !self.known.insert(e.id.clone()) {
                continue;
            }
            let mut m = JMsg {
                id: e.id,
                from: None,
                rcpts: Vec::new(),
                seen: e.keywords.contains_key("$seen"),
            };
            if let Some(tr) = e
                .track
                .as_deref()
                .and_then(|t| super::parse_track(t.trim(), &sh.run_id))
            {
                m.from = Some(tr.from);
                m.rcpts = tr.rcpts;
                let submitted = sh.t0 + Duration::from_micros(tr.t_us);
                delivered.push(arrival.saturating_duration_since(submitted));
            }
            self.inbox.push(m);
        }
        if !delivered.is_empty() {
            let mut s = sh.stats();
            for d in delivered {
                s.delivered(d);
            }
        }
    }

    /// New mail since the known state: Email/changes, Email/get of the
    /// created ids; destroyed ids leave the Inbox.
    async fn news(&mut self, sh: &Shared, url: &Url) -> OpResult<()> {
        if self.conn.is_none() {
            self.connect(sh, url).await?;
        }
        let inbox = self.boxes["inbox"].clone();
        for _ in 0..64 {
            let Some(state) = self.state.clone() else {
                return Ok(());
            };
            let c = self.conn()?;
            let ch = match c.changes(&state, MAX_CHANGES).await {
                Ok(ch) => ch,
                Err(e) if e.msg().contains("cannotCalculateChanges") => {
                    return self.resync(sh, &inbox).await;
                }
                Err(e) => return Err(e),
            };
            let created: Vec<String> = ch
                .created
                .into_iter()
                .filter(|id| !self.known.contains(id))
                .collect();
            let got = if created.is_empty() {
                Vec::new()
            } else {
                self.conn()?.get(&created, false).await?
            };
            self.take(sh, &inbox, got, Instant::now());
            let gone: HashSet<String> = ch.destroyed.into_iter().collect();
            self.inbox.retain(|m| !gone.contains(&m.id));
            self.state = Some(ch.new_state);
            if !ch.has_more_changes {
                break;
            }
        }
        Ok(())
    }

    /// A server that cannot calculate changes from the known state (RFC 8620
    /// §5.2 `cannotCalculateChanges`; Cyrus after a mailbox holding mail was
    /// destroyed) is answered as a client does: the state taken again, then
    /// the Inbox's ids listed again and the messages not yet known fetched,
    /// so no delivery is missed.
    async fn resync(&mut self, sh: &Shared, inbox: &str) -> OpResult<()> {
        let state = self.conn()?.email_state().await?;
        let ids = self.conn()?.ids(inbox).await?;
        let unknown: Vec<String> = ids
            .into_iter()
            .filter(|id| !self.known.contains(id))
            .collect();
        if !unknown.is_empty() {
            let got = self.conn()?.get(&unknown, false).await?;
            self.take(sh, inbox, got, Instant::now());
        }
        self.state = Some(state);
        Ok(())
    }

    /// Waits for `when`, taking new mail meanwhile (push events, or polls
    /// while no stream is open). Returns true when the run is stopping.
    async fn wait_until(
        &mut self,
        sh: &Shared,
        url: &Url,
        when: Instant,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        loop {
            if *stop.borrow() {
                return true;
            }
            let now = Instant::now();
            if now >= when {
                return false;
            }
            if self.conn.is_none() {
                let at = self.backoff.pending(now).unwrap_or(now).min(when);
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = stop.changed() => return true,
                }
                if Instant::now() < when && self.backoff.pending(Instant::now()).is_none() {
                    self.logon(sh, url).await;
                }
                continue;
            }
            let polling = self.push.as_ref().is_none_or(|p| !p.connected());
            let poll_at = if polling {
                *self.next_poll.get_or_insert(now + sh.params.poll_interval)
            } else {
                when
            };
            let woke = match self.push.as_mut() {
                Some(p) => tokio::select! {
                    _ = tokio::time::sleep_until(when.min(poll_at)) => Woke::Timer,
                    _ = p.next() => Woke::Push,
                    _ = stop.changed() => return true,
                },
                None => tokio::select! {
                    _ = tokio::time::sleep_until(when.min(poll_at)) => Woke::Timer,
                    _ = stop.changed() => return true,
                },
            };
            if matches!(woke, Woke::Timer) && Instant::now() >= when {
                // The timer woke the user for its task: how late.
                self.woke_late = Some(Instant::now().saturating_duration_since(when));
            }
            let due = matches!(woke, Woke::Push) || (polling && Instant::now() >= poll_at);
            if !due {
                continue;
            }
            if polling && matches!(woke, Woke::Timer) {
                self.next_poll = Some(next_poll(poll_at, sh.params.poll_interval, Instant::now()));
            }
            let t = Instant::now();
            match self.news(sh, url).await {
                Ok(()) => sh.stats().ok(Protocol::Jmap, "new_mail", t.elapsed()),
                Err(e) => {
                    sh.stats().error(Protocol::Jmap, "new_mail", &self.addr, &e);
                    self.conn = None;
                    self.push = None;
                    self.backoff.failed(Instant::now(), &mut self.rng);
                }
            }
        }
    }

    fn conn(&mut self) -> OpResult<&mut JmapConn> {
        self.conn
            .as_mut()
            .ok_or_else(|| OpError::new(ErrorKind::Reset, "not connected"))
    }

    fn mailbox(&self, name: &str) -> OpResult<String> {
        self.boxes.get(name).cloned().ok_or_else(|| {
            OpError::new(
                ErrorKind::Malformed,
                format!(
                    "{}: no mailbox `{name}` (run `mail setup` first)",
                    self.addr
                ),
            )
        })
    }

    async fn task(&mut self, sh: &Shared, url: &Url, kind: TaskKind) -> OpResult<Outcome> {
        if self.conn.is_none() {
            self.connect(sh, url).await?;
            self.backoff.succeeded();
        }
        match kind {
            TaskKind::Send => self.t_send(sh).await,
            TaskKind::Read => self.t_read().await,
            TaskKind::Reply => self.t_reply(sh, false, "Re:").await,
            TaskKind::ReplyAll => self.t_reply(sh, true, "Re:").await,
            TaskKind::Forward => self.t_reply(sh, false, "Fw:").await,
            TaskKind::RequestMeeting => self.t_meeting(sh).await,
            TaskKind::Move => self.t_move(sh, false).await,
            TaskKind::Delete => self.t_move(sh, true).await,
            TaskKind::PermanentlyDelete => self.t_perm_delete().await,
            TaskKind::FreeBusy => self.t_calendar(true).await,
            TaskKind::BrowseCalendar => self.t_calendar(false).await,
            TaskKind::MakeAppointment => self.t_appointment(sh).await,
            TaskKind::CreateSmartFolder => self.t_smart(sh, true).await,
            TaskKind::DeleteSmartFolder => self.t_smart(sh, false).await,
            TaskKind::CreateRule => self.t_rule(sh, true).await,
            TaskKind::DeleteRule => self.t_rule(sh, false).await,
            TaskKind::ApplyViewSort => self.t_view_sort().await,
        }
    }

    fn pick(&mut self, prefer_unseen: bool, only_seen: bool) -> Option<usize> {
        if prefer_unseen && let Some(i) = self.inbox.iter().position(|m| !m.seen) {
            return Some(i);
        }
        let pool: Vec<usize> = (0..self.inbox.len())
            .filter(|i| !only_seen || self.inbox[*i].seen)
            .collect();
        if pool.is_empty() {
            return None;
        }
        Some(pool[self.rng.random_range(0..pool.len())])
    }

    fn recipients(&mut self, sh: &Shared, kind: TaskKind, first: &[usize]) -> Vec<usize> {
        let k = sh
            .profile
            .task(kind)
            .and_then(|s| s.recipients.as_ref())
            .map(|r| r.draw(&mut self.rng))
            .unwrap_or(1);
        pick_colleagues(&mut self.rng, sh.topo.users.len(), self.idx, k, first)
    }

    /// A tracked message to `idxs`, submitted (EmailSubmission or SMTP) and
    /// counted in the flow.
    async fn send(&mut self, sh: &Shared, idxs: Vec<usize>, subject: &str) -> OpResult<()> {
        let addrs = sh.addresses(&idxs);
        let n = idxs.len() as u64;
        self.send_to(sh, addrs, &idxs, n, subject).await
    }

    /// A tracked message to `addrs` (`idxs`: the users among them;
    /// `deliveries`: the Inboxes it should reach).
    async fn send_to(
        &mut self,
        sh: &Shared,
        addrs: Vec<String>,
        idxs: &[usize],
        deliveries: u64,
        subject: &str,
    ) -> OpResult<()> {
        let seq = sh.msg_seq.fetch_add(1, Ordering::Relaxed);
        let t_us = Instant::now().saturating_duration_since(sh.t0).as_micros() as u64;
        let r: Vec<String> = idxs.iter().map(|i| i.to_string()).collect();
        let r = if r.is_empty() {
            "-".into()
        } else {
            r.join(",")
        };
        let track = format!("{} {seq} {t_us} {} {r}", sh.run_id, self.idx);
        let me = self.addr.clone();
        let env = envelope(
            &me,
            &addrs,
            format!("{subject} {seq}"),
            &sh.run_id,
            seq,
            Some(track.clone()),
        );
        let mime = sh.msggen.mail(&mut self.rng, &env);
        let drafts = self.mailbox(DRAFTS)?;
        let sent = self.mailbox(SENT)?;
        if self.conn()?.session.submission {
            let text = body_of(&mime);
            let d = Draft {
                from: self.addr.clone(),
                to: addrs.clone(),
                subject: format!("{subject} {seq}"),
                text,
                message_id: env.message_id.clone(),
                track: Some(track),
            };
            self.conn()?.submit(&drafts, &sent, &d).await?;
        } else {
            let mut s = sh.target.smtp_login(&self.addr, &self.login).await?;
            let r = s.send(&self.addr, &addrs, &mime).await;
            sh.smtp_cmds.fetch_add(s.commands, Ordering::Relaxed);
            r?;
            s.quit().await;
            let d = Draft {
                from: self.addr.clone(),
                to: addrs.clone(),
                subject: format!("{subject} {seq}"),
                text: body_of(&mime),
                message_id: env.message_id.clone(),
                track: None,
            };
            self.conn()?.save(&sent, &d, false).await?;
        }
        let mut st = sh.stats();
        st.submitted += 1;
        st.interval_submitted += 1;
        st.addressed += addrs.len() as u64;
        st.expected_deliveries += deliveries;
        Ok(())
    }

    /// Send: to a distribution list for the profile's share of sends (when
    /// the run has lists), else to colleagues.
    async fn t_send(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let share = sh
            .profile
            .task(TaskKind::Send)
            .and_then(|s| s.list_share)
            .unwrap_or(0.0);
        if !sh.topo.lists.is_empty() && self.rng.random::<f64>() < share {
            let l = &sh.topo.lists[self.rng.random_range(0..sh.topo.lists.len())];
            let (addr, n) = (l.address.clone(), l.members.len() as u64);
            self.send_to(sh, vec![addr], &[], n, "Status").await?;
            return Ok(Outcome::Done);
        }
        let idxs = self.recipients(sh, TaskKind::Send, &[]);
        self.send(sh, idxs, "Status").await?;
        Ok(Outcome::Done)
    }

    async fn t_read(&mut self) -> OpResult<Outcome> {
        let Some(i) = self.pick(true, false) else {
            return Ok(Outcome::Skipped("empty inbox"));
        };
        let id = self.inbox[i].id.clone();
        self.conn()?.read(&id).await?;
        self.inbox[i].seen = true;
        Ok(Outcome::Done)
    }

    /// Reply, Reply All (the original's people first), Forward: the original
    /// read with its body, then a new message sent.
    async fn t_reply(&mut self, sh: &Shared, all: bool, prefix: &str) -> OpResult<Outcome> {
        let Some(i) = self.pick(false, false) else {
            return Ok(Outcome::Skipped("empty inbox"));
        };
        let orig = self.inbox[i].clone();
        self.conn()?
            .get(std::slice::from_ref(&orig.id), true)
            .await?;
        let kind = match (prefix, all) {
            ("Fw:", _) => TaskKind::Forward,
            (_, true) => TaskKind::ReplyAll,
            _ => TaskKind::Reply,
        };
        let idxs = match (kind, orig.from) {
            (TaskKind::Reply, Some(f)) if f != self.idx => vec![f],
            (TaskKind::ReplyAll, Some(f)) => {
                let mut first = vec![f];
                first.extend(orig.rcpts.iter().copied());
                self.recipients(sh, kind, &first)
            }
            _ => self.recipients(sh, kind, &[]),
        };
        self.send(sh, idxs, prefix).await?;
        Ok(Outcome::Done)
    }

    async fn t_meeting(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let idxs = self.recipients(sh, TaskKind::RequestMeeting, &[]);
        self.send(sh, idxs, "Meeting").await?;
        Ok(Outcome::Done)
    }

    /// Move to a folder (Delete: to the trash) of a message already read.
    async fn t_move(&mut self, sh: &Shared, delete: bool) -> OpResult<Outcome> {
        let Some(i) = self.pick(false, true) else {
            return Ok(Outcome::Skipped("empty inbox"));
        };
        let folders = sh.profile.initial.folders;
        let dest = if delete || folders == 0 {
            self.mailbox(DELETED)?
        } else {
            let n = self.rng.random_range(1..=folders);
            self.mailbox(&folder_name(n))?
        };
        let inbox = self.mailbox("inbox")?;
        let m = self.inbox.swap_remove(i);
        let patch = serde_json::json!({
            format!("mailboxIds/{inbox}"): null, format!("mailboxIds/{dest}"): true});
        self.conn()?.set(vec![(m.id, patch)], Vec::new()).await?;
        Ok(Outcome::Done)
    }

    async fn t_perm_delete(&mut self) -> OpResult<Outcome> {
        let trash = self.mailbox(DELETED)?;
        let list = self
            .conn()?
            .query(&trash, "receivedAt", None, SCREEN)
            .await?;
        let Some(oldest) = list.last() else {
            return Ok(Outcome::Skipped("empty trash"));
        };
        let id = oldest.id.clone();
        self.conn()?.set(Vec::new(), vec![id]).await?;
        Ok(Outcome::Done)
    }

    /// Free/Busy (today's items) and Browse Calendar: the Calendar listed,
    /// one item read.
    async fn t_calendar(&mut self, free_busy: bool) -> OpResult<Outcome> {
        let cal = self.mailbox(CALENDAR)?;
        let today = crate::message::ical_time(crate::message::unix_now());
        let text = format!("DTSTART:{}", &today[..8]);
        let list = self
            .conn()?
            .query(
                &cal,
                "receivedAt",
                free_busy.then_some(text.as_str()),
                SCREEN,
            )
            .await?;
        if let Some(e) = list.first() {
            let id = e.id.clone();
            self.conn()?.get(&[id], true).await?;
        }
        Ok(Outcome::Done)
    }

    async fn t_appointment(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let cal = self.mailbox(CALENDAR)?;
        let seq = sh.msg_seq.fetch_add(1, Ordering::Relaxed);
        let d = Draft {
            from: self.addr.clone(),
            to: vec![self.addr.clone()],
            subject: format!("Appointment {seq}"),
            text: "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n".into(),
            message_id: crate::message::message_id(&[&sh.run_id, &seq.to_string()]),
            track: None,
        };
        self.conn()?.save(&cal, &d, false).await?;
        Ok(Outcome::Done)
    }

    /// Create: a mailbox, the Inbox searched, the hits added to it;
    /// Delete: the last one created destroyed (messages kept).
    async fn t_smart(&mut self, sh: &Shared, create: bool) -> OpResult<Outcome> {
        if !create {
            let Some(id) = self.smart.pop() else {
                return Ok(Outcome::Skipped("no smart folder"));
            };
            self.conn()?.mailbox_set(&[], &[id]).await?;
            return Ok(Outcome::Done);
        }
        let name = format!("{SMART_PREFIX}{}-{}", sh.run_id, self.next_name);
        self.next_name += 1;
        let id = self.conn()?.mailbox_set(&[name], &[]).await?;
        let Some(id) = id.into_iter().next() else {
            return Err(OpError::new(ErrorKind::Malformed, "Mailbox/set: no id"));
        };
        self.smart.push(id.clone());
        let inbox = self.mailbox("inbox")?;
        let hits = self
            .conn()?
            .query(&inbox, "receivedAt", Some("Status"), SCREEN)
            .await?;
        let update: Vec<(String, serde_json::Value)> = hits
            .into_iter()
            .map(|e| (e.id, serde_json::json!({format!("mailboxIds/{id}"): true})))
            .collect();
        if !update.is_empty() {
            self.conn()?.set(update, Vec::new()).await?;
        }
        Ok(Outcome::Done)
    }

    /// Rules over ManageSieve, as for IMAP users.
    async fn t_rule(&mut self, sh: &Shared, create: bool) -> OpResult<Outcome> {
        let rules = super::folders::Rules {
            addr: &self.addr,
            login: &self.login,
            names: &mut self.rules,
            next_name: &mut self.next_name,
        };
        rules.change(sh, create).await
    }

    async fn t_view_sort(&mut self) -> OpResult<Outcome> {
        let keys = ["receivedAt", "subject", "from", "size", "sentAt"];
        let key = keys[self.rng.random_range(0..keys.len())];
        let inbox = self.mailbox("inbox")?;
        self.conn()?.query(&inbox, key, None, SCREEN).await?;
        Ok(Outcome::Done)
    }
}

enum Woke {
    Timer,
    Push,
}

/// The text after the header of a generated message (its body).
fn body_of(mime: &[u8]) -> String {
    let at = mime
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
        .unwrap_or(0);
    String::from_utf8_lossy(&mime[at..]).into_owned()
}
