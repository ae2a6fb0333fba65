//! `mail run`: every simulated user is an independent tokio task with its own IMAP
//! connection, a day's schedule of tasks at random times (compressed by
//! `--day-length`), and an IDLE watch on its Inbox between tasks. Task latency is
//! measured from the task's intended start, so a slow server cannot hide its
//! stalls by delaying the next task (no coordinated omission). Delivery latency
//! runs from the start of submission to the moment the recipient's server announced
//! the new message (the `X-Mailbench-Track` header identifies it).

use crate::imap::{self, ImapConn, fetch_seq_uid, header_value, list_names, parse_numbers};
use crate::message::{Envelope, Generator, imap_date, unix_now};
use crate::profile::{Profile, TaskKind};
use crate::stats::{IntervalOps, OpName, Stats};
use crate::target::Target;
use crate::topology::Topology;
use crate::wire::{ErrorKind, OpError, OpResult};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

pub const INBOX: &str = "INBOX";
pub const SENT: &str = "Sent";
pub const DELETED: &str = "Deleted Items";
pub const CALENDAR: &str = "Calendar";
pub const SMART_PREFIX: &str = "Search Folder ";
pub const SCRIPT: &str = "mailbench";

/// Name of the n-th (1-based) non-default folder.
pub fn folder_name(n: u32) -> String {
    format!("Folder {n:02}")
}

#[derive(Debug, Clone)]
pub struct RunParams {
    pub day_length: Duration,
    pub ramp_up: Duration,
    pub drain: Duration,
    pub use_idle: bool,
    pub poll_interval: Duration,
    pub seed: u64,
}

/// Figures a finished run hands to the report.
#[derive(Debug)]
pub struct RunData {
    pub stats: Stats,
    pub run_id: String,
    pub imap_commands: u64,
    pub smtp_commands: u64,
    pub sieve_commands: u64,
    pub planned_tasks: u64,
    pub interrupted: bool,
    pub measured: Duration,
    pub users_finished: usize,
}

pub struct Shared {
    pub t0: Instant,
    pub run_id: String,
    pub profile: Profile,
    pub topo: Topology,
    pub target: Target,
    pub msggen: Generator,
    pub params: RunParams,
    pub stats: Mutex<Stats>,
    pub msg_seq: AtomicU64,
    pub imap_cmds: AtomicU64,
    pub smtp_cmds: AtomicU64,
    pub sieve_cmds: AtomicU64,
    pub planned: AtomicU64,
    pub interrupted: AtomicBool,
}

impl Shared {
    fn stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        match self.stats.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Start of the measured day (after ramp-up).
    pub fn day_start(&self) -> Instant {
        self.t0 + self.params.ramp_up
    }

    pub fn day_end(&self) -> Instant {
        self.day_start() + self.params.day_length
    }

    pub fn take_interval(&self) -> IntervalOps {
        self.stats().take_interval()
    }

    pub fn counts(&self) -> (u64, u64, u64) {
        let s = self.stats();
        (s.submitted, s.expected_deliveries, s.delivered)
    }
}

#[derive(Debug, Clone)]
struct Msg {
    uid: u32,
    from: Option<usize>,
    rcpts: Vec<usize>,
    seen: bool,
}

enum Outcome {
    Done,
    Skipped(&'static str),
}

struct User {
    idx: usize,
    addr: String,
    rng: SmallRng,
    imap: Option<ImapConn>,
    inbox: Vec<Msg>,
    last_uid: u32,
    synced: bool,
    smart: Vec<String>,
    smart_listed: bool,
    rules: Vec<String>,
    next_name: u32,
}

/// The day's tasks of one user: `(offset from day start, kind)`, sorted.
pub fn schedule(
    profile: &Profile,
    day_length: Duration,
    rng: &mut SmallRng,
) -> Vec<(Duration, TaskKind)> {
    let mut out = Vec::new();
    for (kind, spec) in &profile.tasks {
        let base = spec.per_day.floor();
        let n = base as usize + usize::from(rng.random::<f64>() < spec.per_day - base);
        for _ in 0..n {
            let at = day_length.mul_f64(rng.random::<f64>());
            out.push((at, *kind));
        }
    }
    out.sort_by_key(|(at, _)| *at);
    out
}

/// Runs all users to the end of the day and the delivery drain. `stop` ends the
/// run early (interrupt); the controller also uses it after the drain.
pub async fn run_users(sh: Arc<Shared>, stop: watch::Receiver<bool>) -> usize {
    let mut set = tokio::task::JoinSet::new();
    let n = sh.topo.users.len();
    for idx in 0..n {
        let sh = sh.clone();
        let stop = stop.clone();
        set.spawn(async move { user_main(sh, idx, stop).await });
    }
    let mut finished = 0;
    while let Some(r) = set.join_next().await {
        if r.is_ok() {
            finished += 1;
        }
    }
    finished
}

async fn user_main(sh: Arc<Shared>, idx: usize, mut stop: watch::Receiver<bool>) {
    let seed = sh.params.seed ^ ((idx as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut rng = SmallRng::seed_from_u64(seed);
    let logon_at = sh.t0 + sh.params.ramp_up.mul_f64(rng.random::<f64>());
    let plan = schedule(&sh.profile, sh.params.day_length, &mut rng);
    sh.planned.fetch_add(plan.len() as u64, Ordering::Relaxed);
    let mut u = User {
        idx,
        addr: sh.topo.users[idx].clone(),
        rng,
        imap: None,
        inbox: Vec::new(),
        last_uid: 0,
        synced: false,
        smart: Vec::new(),
        smart_listed: false,
        rules: Vec::new(),
        next_name: 1,
    };
    // Logon during the ramp-up.
    tokio::select! {
        _ = tokio::time::sleep_until(logon_at) => {}
        _ = stop.changed() => {}
    }
    if !*stop.borrow() {
        let _ = u.connect(&sh, "logon").await;
    }
    let day_start = sh.day_start();
    for (offset, kind) in plan {
        let when = day_start + offset;
        if u.wait_until(&sh, when, &mut stop).await {
            break;
        }
        let r = u.task(&sh, kind).await;
        let latency = Instant::now().saturating_duration_since(when);
        match r {
            Ok(Outcome::Done) => sh.stats().ok(kind.name(), latency),
            Ok(Outcome::Skipped(why)) => sh.stats().skipped(kind.name(), why),
            Err(e) => {
                sh.stats().error(kind.name(), &u.addr, &e);
                u.drop_conn();
            }
        }
    }
    // Day over: keep watching for deliveries until the controller says stop.
    let far = Instant::now() + Duration::from_secs(365 * 86400);
    let _ = u.wait_until(&sh, far, &mut stop).await;
    if !sh.interrupted.load(Ordering::Relaxed) {
        // Final check: anything delivered but not yet announced.
        let t = Instant::now();
        match u.final_check(&sh).await {
            Ok(()) => sh.stats().ok("new_mail", t.elapsed()),
            Err(e) => sh.stats().error("new_mail", &u.addr, &e),
        }
    }
    if let Some(mut c) = u.imap.take() {
        let _ = tokio::time::timeout(Duration::from_secs(5), c.logout()).await;
    }
}

fn random_other(rng: &mut SmallRng, n: usize, me: usize) -> usize {
    if n <= 1 {
        return me;
    }
    let mut i = rng.random_range(0..n - 1);
    if i >= me {
        i += 1;
    }
    i
}

impl User {
    fn drop_conn(&mut self) {
        self.imap = None;
    }

    fn conn(&mut self) -> OpResult<&mut ImapConn> {
        self.imap
            .as_mut()
            .ok_or_else(|| OpError::new(ErrorKind::Reset, "not connected"))
    }

    /// Connect, log in, select the Inbox and learn what is in it.
    async fn connect(&mut self, sh: &Shared, op: OpName) -> OpResult<()> {
        let t = Instant::now();
        let r = async {
            let mut c = sh.target.imap_login(&self.addr).await?;
            c.select(INBOX, false).await?;
            self.imap = Some(c);
            self.sync_inbox(sh).await
        }
        .await;
        match &r {
            Ok(()) => sh.stats().ok(op, t.elapsed()),
            Err(e) => {
                self.imap = None;
                sh.stats().error(op, &self.addr, e);
            }
        }
        self.count_cmds(sh);
        r
    }

    fn count_cmds(&mut self, sh: &Shared) {
        if let Some(c) = self.imap.as_mut() {
            sh.imap_cmds.fetch_add(c.commands, Ordering::Relaxed);
            c.commands = 0;
        }
    }

    /// First logon: learn the UIDs already in the Inbox. Later: fetch new arrivals.
    async fn sync_inbox(&mut self, sh: &Shared) -> OpResult<()> {
        if self.synced {
            return self.fetch_new(sh).await;
        }
        let c = self.conn()?;
        let uids = c.uid_search("SEARCH", "UID SEARCH ALL").await?;
        c.exists_events.clear();
        for uid in uids {
            self.last_uid = self.last_uid.max(uid);
            self.inbox.push(Msg {
                uid,
                from: None,
                rcpts: Vec::new(),
                seen: true,
            });
        }
        self.synced = true;
        Ok(())
    }

    /// Fetches the tracking header of messages that arrived in the Inbox since the
    /// last look and counts the deliveries of this run.
    async fn fetch_new(&mut self, sh: &Shared) -> OpResult<()> {
        let last = self.last_uid;
        let c = self.conn()?;
        c.ensure_selected(INBOX).await?;
        let r = c
            .cmd(
                "FETCH",
                &format!(
                    "UID FETCH {}:* (UID BODY.PEEK[HEADER.FIELDS (X-Mailbench-Track)])",
                    last + 1
                ),
            )
            .await?;
        let now = Instant::now();
        let events = std::mem::take(&mut c.exists_events);
        let mut got = Vec::new();
        for u in &r.untagged {
            let Some((seq, uid)) = fetch_seq_uid(u) else {
                continue;
            };
            if uid <= last {
                continue;
            }
            let arrival = events
                .iter()
                .find(|(n, _)| *n >= seq)
                .map(|(_, t)| *t)
                .unwrap_or(now);
            got.push((uid, header_value(u, "X-Mailbench-Track"), arrival));
        }
        let mut delivered = Vec::new();
        for (uid, track, arrival) in got {
            self.last_uid = self.last_uid.max(uid);
            let mut msg = Msg {
                uid,
                from: None,
                rcpts: Vec::new(),
                seen: false,
            };
            if let Some(t) = track
                && let Some(tr) = parse_track(&t, &sh.run_id)
            {
                msg.from = Some(tr.from);
                msg.rcpts = tr.rcpts;
                let submitted = sh.t0 + Duration::from_micros(tr.t_us);
                delivered.push(arrival.saturating_duration_since(submitted));
            }
            self.inbox.push(msg);
        }
        if !delivered.is_empty() {
            let mut s = sh.stats();
            for d in delivered {
                s.delivered(d);
            }
        }
        Ok(())
    }

    async fn final_check(&mut self, sh: &Shared) -> OpResult<()> {
        if self.imap.is_none() {
            self.connect(sh, "logon").await?;
        }
        let c = self.conn()?;
        c.idle_done().await?;
        let r = self.fetch_new(sh).await;
        self.count_cmds(sh);
        r
    }

    /// Waits for `when` while watching the Inbox (IDLE, else polling). Returns true
    /// when the run is stopping.
    async fn wait_until(
        &mut self,
        sh: &Shared,
        when: Instant,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        let use_idle = sh.params.use_idle;
        let mut next_poll = Instant::now() + sh.params.poll_interval;
        loop {
            if *stop.borrow() {
                return true;
            }
            let now = Instant::now();
            if now >= when {
                return false;
            }
            let idle_ok = self.imap.as_ref().is_some_and(|c| c.has_cap("IDLE"));
            if use_idle && idle_ok {
                // Enter IDLE on the Inbox (first looking for anything new).
                if self.imap.as_ref().is_some_and(|c| !c.idling()) {
                    let t = Instant::now();
                    let r = async {
                        let c = self.conn()?;
                        if c.selected.as_deref() != Some(INBOX) || !c.exists_events.is_empty() {
                            self.fetch_new(sh).await?;
                        }
                        self.conn()?.idle_start().await
                    }
                    .await;
                    self.count_cmds(sh);
                    if let Err(e) = r {
                        sh.stats().error("new_mail", &self.addr, &e);
                        self.drop_conn();
                        continue;
                    }
                    let _ = t;
                }
                let Some(c) = self.imap.as_mut() else {
                    continue;
                };
                let r = tokio::select! {
                    r = c.idle_wait(when) => Some(r),
                    _ = stop.changed() => None,
                };
                match r {
                    None => return true,
                    Some(Ok(false)) => {
                        let late = Instant::now().saturating_duration_since(when);
                        let mut s = sh.stats();
                        s.sched_delay.record(late);
                        s.sched_delay_interval.record(late);
                        return false;
                    }
                    Some(Ok(true)) => {
                        let t = Instant::now();
                        let r = async {
                            self.conn()?.idle_done().await?;
                            self.fetch_new(sh).await
                        }
                        .await;
                        self.count_cmds(sh);
                        match r {
                            Ok(()) => sh.stats().ok("new_mail", t.elapsed()),
                            Err(e) => {
                                sh.stats().error("new_mail", &self.addr, &e);
                                self.drop_conn();
                            }
                        }
                    }
                    Some(Err(e)) => {
                        sh.stats().error("new_mail", &self.addr, &e);
                        self.drop_conn();
                    }
                }
            } else {
                let until = if self.imap.is_some() {
                    when.min(next_poll)
                } else {
                    when
                };
                let timer_wake = tokio::select! {
                    _ = tokio::time::sleep_until(until) => true,
                    _ = stop.changed() => false,
                };
                if !timer_wake {
                    return true;
                }
                if until == when {
                    let late = Instant::now().saturating_duration_since(when);
                    let mut s = sh.stats();
                    s.sched_delay.record(late);
                    s.sched_delay_interval.record(late);
                    return false;
                }
                next_poll = Instant::now() + sh.params.poll_interval;
                let t = Instant::now();
                let r = async {
                    self.conn()?.cmd("NOOP", "NOOP").await?;
                    self.fetch_new(sh).await
                }
                .await;
                self.count_cmds(sh);
                match r {
                    Ok(()) => sh.stats().ok("new_mail", t.elapsed()),
                    Err(e) => {
                        sh.stats().error("new_mail", &self.addr, &e);
                        self.drop_conn();
                    }
                }
            }
        }
    }

    async fn task(&mut self, sh: &Shared, kind: TaskKind) -> OpResult<Outcome> {
        if self.imap.is_none() {
            self.connect(sh, "logon").await?;
        }
        self.conn()?.idle_done().await?;
        let r = match kind {
            TaskKind::Send => self.t_send(sh).await,
            TaskKind::Read => self.t_read().await,
            TaskKind::Reply => self.t_reply(sh, false).await,
            TaskKind::ReplyAll => self.t_reply(sh, true).await,
            TaskKind::Forward => self.t_forward(sh).await,
            TaskKind::Move => self.t_move(sh, false).await,
            TaskKind::Delete => self.t_move(sh, true).await,
            TaskKind::PermanentlyDelete => self.t_perm_delete().await,
            TaskKind::FreeBusy => self.t_free_busy().await,
            TaskKind::BrowseCalendar => self.t_browse_calendar().await,
            TaskKind::MakeAppointment => self.t_appointment(sh).await,
            TaskKind::RequestMeeting => self.t_meeting(sh).await,
            TaskKind::CreateSmartFolder => self.t_create_smart(sh).await,
            TaskKind::DeleteSmartFolder => self.t_delete_smart().await,
            TaskKind::CreateRule => self.t_rule(sh, true).await,
            TaskKind::DeleteRule => self.t_rule(sh, false).await,
            TaskKind::ApplyViewSort => self.t_view_sort().await,
        };
        self.count_cmds(sh);
        r
    }

    // ---- helpers -------------------------------------------------------------

    fn pick_msg(&mut self, prefer_unseen: bool) -> Option<usize> {
        if self.inbox.is_empty() {
            return None;
        }
        if prefer_unseen && let Some(i) = self.inbox.iter().position(|m| !m.seen) {
            return Some(i);
        }
        Some(self.rng.random_range(0..self.inbox.len()))
    }

    fn colleagues(&mut self, sh: &Shared, k: usize, first: &[usize]) -> Vec<usize> {
        let n = sh.topo.users.len();
        let k = k.min(n.saturating_sub(1)).max(1);
        let mut out: Vec<usize> = Vec::with_capacity(k);
        for &i in first {
            if i != self.idx && i < n && !out.contains(&i) && out.len() < k {
                out.push(i);
            }
        }
        let mut guard = 0;
        while out.len() < k && guard < 10 * k + 100 {
            guard += 1;
            let i = random_other(&mut self.rng, n, self.idx);
            if i != self.idx && !out.contains(&i) {
                out.push(i);
            }
        }
        out
    }

    fn new_id(&mut self, sh: &Shared) -> u64 {
        sh.msg_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Submits `msg` to `rcpts` and files a copy in `copy_to`; counts the flow.
    #[allow(clippy::too_many_arguments)]
    async fn submit(
        &mut self,
        sh: &Shared,
        addrs: Vec<String>,
        deliveries: u64,
        msg: Vec<u8>,
        copy_to: &str,
    ) -> OpResult<()> {
        let mut s = sh.target.smtp_login(&self.addr).await?;
        let r = s.send(&self.addr, &addrs, &msg).await;
        sh.smtp_cmds.fetch_add(s.commands, Ordering::Relaxed);
        r?;
        s.quit().await;
        {
            let mut st = sh.stats();
            st.submitted += 1;
            st.interval_submitted += 1;
            st.addressed += addrs.len() as u64;
            st.expected_deliveries += deliveries;
        }
        self.conn()?.append(copy_to, "\\Seen", &msg).await?;
        Ok(())
    }

    fn track(&self, sh: &Shared, seq: u64, rcpts: &[usize]) -> String {
        let t_us = Instant::now().saturating_duration_since(sh.t0).as_micros() as u64;
        let r: Vec<String> = rcpts.iter().map(|i| i.to_string()).collect();
        format!(
            "{} {seq} {t_us} {} {}",
            sh.run_id,
            self.idx,
            if r.is_empty() {
                "-".into()
            } else {
                r.join(",")
            }
        )
    }

    fn envelope<'a>(
        &self,
        sh: &Shared,
        to: &'a [String],
        subject: String,
        seq: u64,
        track: Option<String>,
    ) -> Envelope<'a> {
        let _ = sh;
        Envelope {
            from: "",
            to,
            subject: subject.into(),
            track,
            in_reply_to: None,
            message_id: format!("<{}.{seq}@mailbench>", "m"),
            date: unix_now(),
        }
    }

    // ---- tasks ---------------------------------------------------------------

    /// Send: compose a new message (size mix) to individuals or one list, submit
    /// it, save a copy in Sent.
    async fn t_send(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let spec = sh.profile.task(TaskKind::Send);
        let share = spec.and_then(|s| s.list_share).unwrap_or(0.0);
        let (addrs, idxs, deliveries) =
            if !sh.topo.lists.is_empty() && self.rng.random::<f64>() < share {
                let l = &sh.topo.lists[self.rng.random_range(0..sh.topo.lists.len())];
                (vec![l.address.clone()], Vec::new(), l.members.len() as u64)
            } else {
                let k = spec
                    .and_then(|s| s.recipients.as_ref())
                    .map(|r| r.draw(&mut self.rng))
                    .unwrap_or(1);
                let idxs = self.colleagues(sh, k, &[]);
                let addrs: Vec<String> = idxs.iter().map(|i| sh.topo.users[*i].clone()).collect();
                let n = idxs.len() as u64;
                (addrs, idxs, n)
            };
        let seq = self.new_id(sh);
        let track = self.track(sh, seq, &idxs);
        let mut env = self.envelope(sh, &addrs, format!("Status {seq}"), seq, Some(track));
        env.from = &self.addr;
        env.message_id = format!("<{}.{seq}@mailbench>", sh.run_id);
        let msg = sh.msggen.mail(&mut self.rng, &env);
        self.submit(sh, addrs, deliveries, msg, SENT).await?;
        Ok(Outcome::Done)
    }

    /// Read: open the oldest unread Inbox message (else a random one): headers and
    /// structure, then the whole message (marks it \Seen).
    async fn t_read(&mut self) -> OpResult<Outcome> {
        let Some(i) = self.pick_msg(true) else {
            return Ok(Outcome::Skipped("empty inbox"));
        };
        let uid = self.inbox[i].uid;
        let c = self.conn()?;
        c.ensure_selected(INBOX).await?;
        c.cmd(
            "FETCH",
            &format!("UID FETCH {uid} (FLAGS INTERNALDATE RFC822.SIZE ENVELOPE BODYSTRUCTURE)"),
        )
        .await?;
        c.cmd("FETCH", &format!("UID FETCH {uid} (BODY[])")).await?;
        self.inbox[i].seen = true;
        Ok(Outcome::Done)
    }

    /// Reply / Reply All: fetch the original's headers and text, answer its sender
    /// (and, for Reply All, its other recipients, up to the profile's count), save
    /// a copy in Sent, flag the original \Answered.
    async fn t_reply(&mut self, sh: &Shared, all: bool) -> OpResult<Outcome> {
        let Some(i) = self.pick_msg(false) else {
            return Ok(Outcome::Skipped("empty inbox"));
        };
        let orig = self.inbox[i].clone();
        let c = self.conn()?;
        c.ensure_selected(INBOX).await?;
        let r = c
            .cmd(
                "FETCH",
                &format!(
                    "UID FETCH {} (BODY.PEEK[HEADER.FIELDS (FROM TO CC SUBJECT MESSAGE-ID)] BODY.PEEK[TEXT]<0.2048>)",
                    orig.uid
                ),
            )
            .await?;
        let quoted = r
            .untagged
            .first()
            .map(|u| String::from_utf8_lossy(u).to_string())
            .unwrap_or_default();
        let kind = if all {
            TaskKind::ReplyAll
        } else {
            TaskKind::Reply
        };
        let k = sh
            .profile
            .task(kind)
            .and_then(|s| s.recipients.as_ref())
            .map(|r| r.draw(&mut self.rng))
            .unwrap_or(1);
        let mut first: Vec<usize> = orig.from.into_iter().collect();
        if all {
            first.extend(orig.rcpts.iter().copied());
        }
        let idxs = self.colleagues(sh, if all { k } else { k.max(1) }, &first);
        let addrs: Vec<String> = idxs.iter().map(|i| sh.topo.users[*i].clone()).collect();
        let seq = self.new_id(sh);
        let track = self.track(sh, seq, &idxs);
        let mut env = self.envelope(sh, &addrs, format!("RE: Status {seq}"), seq, Some(track));
        env.from = &self.addr;
        env.message_id = format!("<{}.{seq}@mailbench>", sh.run_id);
        let msg = sh.msggen.reply(&mut self.rng, &env, &quoted);
        let n = idxs.len() as u64;
        self.submit(sh, addrs, n, msg, SENT).await?;
        let c = self.conn()?;
        c.ensure_selected(INBOX).await?;
        c.cmd(
            "STORE",
            &format!("UID STORE {} +FLAGS.SILENT (\\Answered \\Seen)", orig.uid),
        )
        .await?;
        Ok(Outcome::Done)
    }

    /// Forward: fetch the whole original, send it attached (message/rfc822) to the
    /// profile's count of colleagues, save a copy, flag the original $Forwarded.
    async fn t_forward(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let Some(i) = self.pick_msg(false) else {
            return Ok(Outcome::Skipped("empty inbox"));
        };
        let uid = self.inbox[i].uid;
        let c = self.conn()?;
        c.ensure_selected(INBOX).await?;
        let r = c
            .cmd("FETCH", &format!("UID FETCH {uid} (BODY.PEEK[])"))
            .await?;
        let original = r
            .untagged
            .first()
            .and_then(|u| first_literal(u))
            .unwrap_or_default();
        let k = sh
            .profile
            .task(TaskKind::Forward)
            .and_then(|s| s.recipients.as_ref())
            .map(|r| r.draw(&mut self.rng))
            .unwrap_or(1);
        let idxs = self.colleagues(sh, k, &[]);
        let addrs: Vec<String> = idxs.iter().map(|i| sh.topo.users[*i].clone()).collect();
        let seq = self.new_id(sh);
        let track = self.track(sh, seq, &idxs);
        let mut env = self.envelope(sh, &addrs, format!("FW: Status {seq}"), seq, Some(track));
        env.from = &self.addr;
        env.message_id = format!("<{}.{seq}@mailbench>", sh.run_id);
        let msg = sh.msggen.forward(&mut self.rng, &env, &original);
        let n = idxs.len() as u64;
        self.submit(sh, addrs, n, msg, SENT).await?;
        let c = self.conn()?;
        c.ensure_selected(INBOX).await?;
        c.cmd(
            "STORE",
            &format!("UID STORE {uid} +FLAGS.SILENT ($Forwarded)"),
        )
        .await?;
        Ok(Outcome::Done)
    }

    /// Move: UID MOVE an Inbox message (a read one if any) to a random folder.
    /// Delete: the same to Deleted Items. Without MOVE: COPY + \Deleted + UID EXPUNGE.
    async fn t_move(&mut self, sh: &Shared, delete: bool) -> OpResult<Outcome> {
        let Some(i) = self.pick_seen() else {
            return Ok(Outcome::Skipped("empty inbox"));
        };
        let uid = self.inbox[i].uid;
        let folders = sh.profile.initial.folders;
        let dest = if delete || folders == 0 {
            DELETED.to_string()
        } else {
            folder_name(self.rng.random_range(1..=folders))
        };
        let c = self.conn()?;
        c.ensure_selected(INBOX).await?;
        if c.has_cap("MOVE") {
            c.cmd("MOVE", &format!("UID MOVE {uid} {}", imap::mailbox(&dest)))
                .await?;
        } else {
            c.cmd("COPY", &format!("UID COPY {uid} {}", imap::mailbox(&dest)))
                .await?;
            c.cmd(
                "STORE",
                &format!("UID STORE {uid} +FLAGS.SILENT (\\Deleted)"),
            )
            .await?;
            c.cmd("EXPUNGE", &format!("UID EXPUNGE {uid}")).await?;
        }
        self.inbox.swap_remove(i);
        Ok(Outcome::Done)
    }

    fn pick_seen(&mut self) -> Option<usize> {
        let seen: Vec<usize> = (0..self.inbox.len())
            .filter(|i| self.inbox[*i].seen)
            .collect();
        if let Some(i) = seen.choose(&mut self.rng) {
            return Some(*i);
        }
        self.pick_msg(false)
    }

    /// Permanently Delete: in Deleted Items, flag the oldest message \Deleted and
    /// UID EXPUNGE it (from the Inbox when Deleted Items is empty).
    async fn t_perm_delete(&mut self) -> OpResult<Outcome> {
        let c = self.conn()?;
        c.select(DELETED, false).await?;
        let uids = c.uid_search("SEARCH", "UID SEARCH ALL").await?;
        if let Some(uid) = uids.first() {
            c.cmd(
                "STORE",
                &format!("UID STORE {uid} +FLAGS.SILENT (\\Deleted)"),
            )
            .await?;
            c.cmd("EXPUNGE", &format!("UID EXPUNGE {uid}")).await?;
            return Ok(Outcome::Done);
        }
        let Some(i) = self.pick_seen() else {
            return Ok(Outcome::Skipped("nothing to delete"));
        };
        let uid = self.inbox[i].uid;
        let c = self.conn()?;
        c.select(INBOX, false).await?;
        c.cmd(
            "STORE",
            &format!("UID STORE {uid} +FLAGS.SILENT (\\Deleted)"),
        )
        .await?;
        c.cmd("EXPUNGE", &format!("UID EXPUNGE {uid}")).await?;
        self.inbox.swap_remove(i);
        Ok(Outcome::Done)
    }

    /// Free/Busy: EXAMINE the Calendar and SEARCH the appointments starting today
    /// or tomorrow (a body search on DTSTART), then fetch their envelopes.
    async fn t_free_busy(&mut self) -> OpResult<Outcome> {
        let now = unix_now();
        let d0 = crate::message::ical_time(now);
        let d1 = crate::message::ical_time(now + 86400);
        let c = self.conn()?;
        c.select(CALENDAR, true).await?;
        let hits = c
            .uid_search(
                "SEARCH",
                &format!(
                    "UID SEARCH OR BODY \"DTSTART:{}\" BODY \"DTSTART:{}\"",
                    &d0[..8],
                    &d1[..8]
                ),
            )
            .await?;
        if !hits.is_empty() {
            let set: Vec<String> = hits.iter().take(50).map(|u| u.to_string()).collect();
            c.cmd(
                "FETCH",
                &format!("UID FETCH {} (UID ENVELOPE)", set.join(",")),
            )
            .await?;
        }
        Ok(Outcome::Done)
    }

    /// Browse Calendar: SELECT Calendar, fetch every item's summary, open one.
    async fn t_browse_calendar(&mut self) -> OpResult<Outcome> {
        let c = self.conn()?;
        c.select(CALENDAR, false).await?;
        if c.exists == 0 {
            return Ok(Outcome::Done);
        }
        let r = c
            .cmd("FETCH", "FETCH 1:* (UID FLAGS ENVELOPE RFC822.SIZE)")
            .await?;
        let uids: Vec<u32> = r
            .untagged
            .iter()
            .filter_map(|u| fetch_seq_uid(u).map(|x| x.1))
            .collect();
        if let Some(uid) = uids.choose(&mut self.rng) {
            let uid = *uid;
            self.conn()?
                .cmd("FETCH", &format!("UID FETCH {uid} (BODY.PEEK[])"))
                .await?;
        }
        Ok(Outcome::Done)
    }

    /// Make Appointment: APPEND an iCalendar appointment to the Calendar.
    async fn t_appointment(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let seq = self.new_id(sh);
        let to = vec![self.addr.clone()];
        let mut env = self.envelope(sh, &to, format!("Appointment {seq}"), seq, None);
        env.from = &self.addr;
        env.message_id = format!("<{}.{seq}@mailbench>", sh.run_id);
        let start = unix_now() + self.rng.random_range(0..7 * 86400);
        let msg = sh.msggen.calendar(&mut self.rng, &env, start, 30, false);
        self.conn()?.append(CALENDAR, "\\Seen", &msg).await?;
        Ok(Outcome::Done)
    }

    /// Request Meeting: an iMIP invitation (METHOD:REQUEST) submitted to the
    /// attendees; the organizer's copy goes to the Calendar.
    async fn t_meeting(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let k = sh
            .profile
            .task(TaskKind::RequestMeeting)
            .and_then(|s| s.recipients.as_ref())
            .map(|r| r.draw(&mut self.rng))
            .unwrap_or(1);
        let idxs = self.colleagues(sh, k, &[]);
        let addrs: Vec<String> = idxs.iter().map(|i| sh.topo.users[*i].clone()).collect();
        let seq = self.new_id(sh);
        let track = self.track(sh, seq, &idxs);
        let mut env = self.envelope(sh, &addrs, format!("Meeting {seq}"), seq, Some(track));
        env.from = &self.addr;
        env.message_id = format!("<{}.{seq}@mailbench>", sh.run_id);
        let start = unix_now() + self.rng.random_range(3600..7 * 86400);
        let msg = sh.msggen.calendar(&mut self.rng, &env, start, 60, true);
        let n = idxs.len() as u64;
        self.submit(sh, addrs, n, msg, CALENDAR).await?;
        Ok(Outcome::Done)
    }

    /// Create Smart Folder: CREATE a folder, SEARCH the Inbox with the folder's
    /// criteria and COPY the matches (up to 50) into it.
    async fn t_create_smart(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let name = format!("{SMART_PREFIX}{}-{}", sh.run_id, self.next_name);
        self.next_name += 1;
        let other =
            sh.topo.users[random_other(&mut self.rng, sh.topo.users.len(), self.idx)].clone();
        let since = imap_date(unix_now() - 7 * 86400);
        let criteria = [
            "UNSEEN".to_string(),
            format!("FROM \"{other}\""),
            "LARGER 20000".to_string(),
            "SUBJECT \"RE:\"".to_string(),
            format!("SINCE {since}"),
        ];
        let crit = criteria[self.rng.random_range(0..criteria.len())].clone();
        let c = self.conn()?;
        c.cmd("CREATE", &format!("CREATE {}", imap::mailbox(&name)))
            .await?;
        c.ensure_selected(INBOX).await?;
        let hits = c
            .uid_search("SEARCH", &format!("UID SEARCH {crit}"))
            .await?;
        if !hits.is_empty() {
            let set: Vec<String> = hits.iter().take(50).map(|u| u.to_string()).collect();
            c.cmd(
                "COPY",
                &format!("UID COPY {} {}", set.join(","), imap::mailbox(&name)),
            )
            .await?;
        }
        self.smart.push(name);
        Ok(Outcome::Done)
    }

    /// Delete Smart Folder: DELETE one (listing them first if none is known yet).
    async fn t_delete_smart(&mut self) -> OpResult<Outcome> {
        if self.smart.is_empty() && !self.smart_listed {
            self.smart_listed = true;
            let c = self.conn()?;
            let r = c
                .cmd(
                    "LIST",
                    &format!("LIST \"\" {}", imap::mailbox(&format!("{SMART_PREFIX}*"))),
                )
                .await?;
            self.smart = list_names(&r.untagged);
        }
        let Some(name) = self.smart.pop() else {
            return Ok(Outcome::Skipped("no smart folder"));
        };
        let c = self.conn()?;
        if c.selected.as_deref() == Some(name.as_str()) {
            c.select(INBOX, false).await?;
        }
        c.cmd("DELETE", &format!("DELETE {}", imap::mailbox(&name)))
            .await?;
        Ok(Outcome::Done)
    }

    /// Create / Delete Rule: rewrite the user's Sieve script with one rule more or
    /// less over ManageSieve (PUTSCRIPT + SETACTIVE, or DELETESCRIPT when empty).
    async fn t_rule(&mut self, sh: &Shared, create: bool) -> OpResult<Outcome> {
        if !create && self.rules.is_empty() {
            return Ok(Outcome::Skipped("no rule"));
        }
        let Some(conn) = sh.target.sieve_login(&self.addr).await else {
            return Ok(Outcome::Skipped("no ManageSieve"));
        };
        let mut s = conn?;
        if create {
            let name = format!("{}-{}", sh.run_id, self.next_name);
            self.next_name += 1;
            self.rules.push(name);
        } else {
            self.rules.pop();
        }
        let r = async {
            if self.rules.is_empty() {
                s.set_active("").await?;
                s.delete_script(SCRIPT).await
            } else {
                s.put_script(SCRIPT, &crate::sieve::script(&self.rules))
                    .await?;
                s.set_active(SCRIPT).await
            }
        }
        .await;
        sh.sieve_cmds.fetch_add(s.commands, Ordering::Relaxed);
        r?;
        s.logout().await;
        Ok(Outcome::Done)
    }

    /// Apply View/Sort: UID SORT the Inbox by a random key and fetch the first
    /// screen (50 summaries); without SORT, fetch all envelopes and sort here.
    async fn t_view_sort(&mut self) -> OpResult<Outcome> {
        let keys = [
            "REVERSE ARRIVAL",
            "SUBJECT",
            "FROM",
            "REVERSE SIZE",
            "REVERSE DATE",
        ];
        let key = keys[self.rng.random_range(0..keys.len())];
        let c = self.conn()?;
        c.ensure_selected(INBOX).await?;
        let uids = if c.has_cap("SORT") {
            c.uid_search("SORT", &format!("UID SORT ({key}) US-ASCII ALL"))
                .await?
        } else {
            let r = c.cmd("FETCH", "UID FETCH 1:* (UID ENVELOPE)").await?;
            let mut v: Vec<(Vec<u8>, u32)> = r
                .untagged
                .iter()
                .filter_map(|u| fetch_seq_uid(u).map(|(_, uid)| (u.clone(), uid)))
                .collect();
            v.sort();
            v.into_iter().map(|(_, u)| u).collect()
        };
        if !uids.is_empty() {
            let set: Vec<String> = uids.iter().take(50).map(|u| u.to_string()).collect();
            self.conn()?
                .cmd(
                    "FETCH",
                    &format!(
                        "UID FETCH {} (UID FLAGS ENVELOPE RFC822.SIZE)",
                        set.join(",")
                    ),
                )
                .await?;
        }
        let _ = parse_numbers;
        Ok(Outcome::Done)
    }
}

/// The content of the first `{n}` literal of a unit.
fn first_literal(u: &[u8]) -> Option<Vec<u8>> {
    let open = u.iter().position(|c| *c == b'{')?;
    let close = open + u[open..].iter().position(|c| *c == b'}')?;
    let n: usize = std::str::from_utf8(&u[open + 1..close])
        .ok()?
        .trim_end_matches('+')
        .parse()
        .ok()?;
    let start = close + 3;
    u.get(start..start + n).map(|s| s.to_vec())
}

pub struct Track {
    pub seq: u64,
    pub t_us: u64,
    pub from: usize,
    pub rcpts: Vec<usize>,
}

/// Parses `<run> <seq> <t_us> <from> <rcpt,...|->` when it belongs to `run_id`.
pub fn parse_track(v: &str, run_id: &str) -> Option<Track> {
    let mut it = v.split_whitespace();
    if it.next()? != run_id {
        return None;
    }
    let seq = it.next()?.parse().ok()?;
    let t_us = it.next()?.parse().ok()?;
    let from = it.next()?.parse().ok()?;
    let rcpts = match it.next() {
        Some("-") | None => Vec::new(),
        Some(r) => r.split(',').filter_map(|x| x.parse().ok()).collect(),
    };
    Some(Track {
        seq,
        t_us,
        from,
        rcpts,
    })
}

/// A run id unique enough to tell this run's messages from earlier runs'.
pub fn new_run_id(seed: u64) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    format!(
        "r{:x}",
        t ^ seed.rotate_left(17) ^ u64::from(std::process::id())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_follow_the_profile() {
        let p = Profile::load("mmb3").unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        let mut total = 0usize;
        let mut sends = 0usize;
        for _ in 0..200 {
            let s = schedule(&p, Duration::from_secs(600), &mut rng);
            assert!(s.windows(2).all(|w| w[0].0 <= w[1].0));
            assert!(s.iter().all(|(t, _)| *t < Duration::from_secs(600)));
            total += s.len();
            sends += s.iter().filter(|(_, k)| *k == TaskKind::Send).count();
        }
        // A whole number of sends a day: every user sends exactly that many.
        assert_eq!(sends, 200 * p.tasks[&TaskKind::Send].per_day as usize);
        let expect = p.expected_flow(100).tasks_per_day * 200.0;
        assert!(
            (total as f64 - expect).abs() < 0.02 * expect,
            "{total} {expect}"
        );
    }

    #[test]
    fn tracking_headers_round_trip() {
        let t = parse_track("rab 12 3456 7 1,2,3", "rab").unwrap();
        assert_eq!(
            (t.seq, t.t_us, t.from, t.rcpts),
            (12, 3456, 7, vec![1, 2, 3])
        );
        assert!(
            parse_track("rab 12 3456 7 -", "rab")
                .unwrap()
                .rcpts
                .is_empty()
        );
        assert!(parse_track("other 1 2 3 -", "rab").is_none());
        assert!(parse_track("rab x", "rab").is_none());
        assert_eq!(
            first_literal(b"* 1 FETCH (BODY[] {3}\r\nabc)"),
            Some(b"abc".to_vec())
        );
    }
}
