//! `mail run`: every simulated user is an independent tokio task with its own IMAP
//! connection, a day's schedule of tasks at random times (compressed by
//! `--day-length`), and an IDLE watch on its Inbox between tasks. Task latency is
//! measured from the task's intended start, so a slow server cannot hide its
//! stalls by delaying the next task (no coordinated omission). Delivery latency
//! runs from the start of submission to the moment the recipient's server announced
//! the new message (the `X-Mailbench-Track` header identifies it).

use crate::imap::{self, ImapConn, fetch_seq_uid, header_value, list_names};
use crate::mailboxes::{Mailboxes, discover};
use crate::message::{Envelope, Generator, imap_date, message_id, unix_now};
use crate::profile::{Profile, RecipientsExt, TaskKind};
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
/// The Sieve script holding the users' rules.
pub const SCRIPT: &str = "mailbench";

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
    /// Where the user's mailboxes are (learned at the first logon).
    boxes: Option<Mailboxes>,
    inbox: Vec<Msg>,
    last_uid: u32,
    /// The lowest UID a message new to the user can have (UIDNEXT as known
    /// after the last look at the Inbox).
    next_uid: u32,
    synced: bool,
    smart: Vec<String>,
    smart_listed: bool,
    rules: Vec<String>,
    next_name: u32,
    /// When the next poll is due (polling mode: a schedule of its own,
    /// whatever the tasks do).
    next_poll: Option<Instant>,
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
        boxes: None,
        inbox: Vec::new(),
        last_uid: 0,
        next_uid: 1,
        synced: false,
        smart: Vec::new(),
        smart_listed: false,
        rules: Vec::new(),
        next_name: 1,
        next_poll: None,
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
        // Mail announced while the task ran (its own SELECT of the Inbox, the
        // answer to any command) is fetched now, due next task or not.
        u.take_news(&sh).await;
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

/// The envelope of a message `from` sends as its `seq`-th of run `run_id`.
fn envelope<'a>(
    from: &'a str,
    to: &'a [String],
    subject: String,
    run_id: &str,
    seq: u64,
    track: Option<String>,
) -> Envelope<'a> {
    Envelope {
        from,
        to,
        subject: subject.into(),
        track,
        in_reply_to: None,
        references: Vec::new(),
        message_id: message_id(&[run_id, &seq.to_string()]),
        date: unix_now(),
    }
}

/// The next poll after one due at `due` that ran at `now`: every `interval`
/// from the first, skipping polls that fell behind (never a burst).
fn next_poll(due: Instant, interval: Duration, now: Instant) -> Instant {
    let next = due + interval;
    if next <= now { now + interval } else { next }
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

    fn boxes(&self) -> OpResult<&Mailboxes> {
        self.boxes
            .as_ref()
            .ok_or_else(|| OpError::new(ErrorKind::Reset, "not connected"))
    }

    /// Connect, log in, learn the mailboxes (first time), select the Inbox and
    /// learn what is in it.
    async fn connect(&mut self, sh: &Shared, op: OpName) -> OpResult<()> {
        let t = Instant::now();
        let r = async {
            let mut c = sh.target.imap_login(&self.addr).await?;
            if self.boxes.is_none() {
                self.boxes = Some(discover(&mut c).await?);
            }
            c.select(INBOX, false).await?;
            self.imap = Some(c);
            self.sync_inbox(sh).await
        }
        .await;
        self.count_cmds(sh);
        match &r {
            Ok(()) => sh.stats().ok(op, t.elapsed()),
            Err(e) => {
                self.imap = None;
                sh.stats().error(op, &self.addr, e);
            }
        }
        if self.next_poll.is_none() {
            self.next_poll = Some(Instant::now() + sh.params.poll_interval);
        }
        r
    }

    fn count_cmds(&mut self, sh: &Shared) {
        if let Some(c) = self.imap.as_mut() {
            sh.imap_cmds.fetch_add(c.commands, Ordering::Relaxed);
            c.commands = 0;
        }
    }

    /// First logon: learn the UIDs already in the Inbox, except this run's
    /// messages delivered before the logon (a slow server, a long ramp-up),
    /// which are fetched as new mail. Later: fetch new arrivals.
    async fn sync_inbox(&mut self, sh: &Shared) -> OpResult<()> {
        if self.synced {
            return self.fetch_new(sh).await;
        }
        let c = self.conn()?;
        let uids = c.uid_search("SEARCH", "UID SEARCH ALL").await?;
        let since = imap_date(unix_now() - 86400);
        let ours = c
            .uid_search(
                "SEARCH",
                &format!(
                    "UID SEARCH SINCE {since} HEADER X-Mailbench-Track {}",
                    imap::mailbox(&sh.run_id)
                ),
            )
            .await?;
        c.inbox.arrivals.clear();
        let uidnext = c.inbox.uidnext.unwrap_or(0);
        let first_ours = ours.iter().min().copied().unwrap_or(u32::MAX);
        for uid in uids.into_iter().filter(|u| *u < first_ours) {
            self.last_uid = self.last_uid.max(uid);
            self.inbox.push(Msg {
                uid,
                from: None,
                rcpts: Vec::new(),
                seen: true,
            });
        }
        self.synced = true;
        if ours.is_empty() {
            self.next_uid = uidnext.max(self.last_uid + 1);
            return Ok(());
        }
        self.fetch_new(sh).await
    }

    /// Whether the Inbox announced mail the user has not fetched yet.
    fn has_news(&self) -> bool {
        self.imap
            .as_ref()
            .is_some_and(|c| c.inbox_news(self.next_uid))
    }

    /// Fetches announced arrivals now (recorded as `new_mail`).
    async fn take_news(&mut self, sh: &Shared) {
        if !self.has_news() {
            return;
        }
        let t = Instant::now();
        let r = self.fetch_new(sh).await;
        self.new_mail_done(sh, t, r);
    }

    /// Records a new-mail operation begun at `t` (its commands too); a
    /// failure drops the connection (the next task reconnects).
    fn new_mail_done(&mut self, sh: &Shared, t: Instant, r: OpResult<()>) {
        self.count_cmds(sh);
        match r {
            Ok(()) => sh.stats().ok("new_mail", t.elapsed()),
            Err(e) => {
                sh.stats().error("new_mail", &self.addr, &e);
                self.drop_conn();
            }
        }
    }

    /// Fetches the tracking header of messages that arrived in the Inbox since the
    /// last look and counts the deliveries of this run. Each one's arrival is
    /// the moment its EXISTS was announced (else now, an upper bound).
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
        let mut got = Vec::new();
        let mut max_seq = 0;
        for u in &r.untagged {
            let Some((seq, uid)) = fetch_seq_uid(u) else {
                continue;
            };
            max_seq = max_seq.max(seq);
            if uid <= last {
                continue;
            }
            let arrival = c
                .inbox
                .arrivals
                .iter()
                .find(|(n, _)| *n >= seq)
                .map(|(_, t)| *t)
                .unwrap_or(now);
            got.push((uid, header_value(u, "X-Mailbench-Track"), arrival));
        }
        // Announcements of messages this fetch did not cover stay pending.
        c.inbox.arrivals.retain(|(n, _)| *n > max_seq);
        let uidnext = c.inbox.uidnext.unwrap_or(0);
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
        self.next_uid = self.next_uid.max(uidnext).max(self.last_uid + 1);
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

    /// Whether this user waits in IDLE (else it polls).
    fn idles(&self, sh: &Shared) -> bool {
        sh.params.use_idle && self.imap.as_ref().is_some_and(|c| c.has_cap("IDLE"))
    }

    /// Waits for `when` while watching the Inbox (IDLE, else polling on its own
    /// schedule). Returns true when the run is stopping.
    async fn wait_until(
        &mut self,
        sh: &Shared,
        when: Instant,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        loop {
            if *stop.borrow() {
                return true;
            }
            let now = Instant::now();
            let poll_due = self
                .next_poll
                .filter(|_| self.imap.is_some() && !self.idles(sh));
            if let Some(due) = poll_due
                && now >= due
            {
                self.poll(sh).await;
                self.next_poll = Some(next_poll(due, sh.params.poll_interval, Instant::now()));
                continue;
            }
            if now >= when {
                return false;
            }
            if self.idles(sh) {
                match self.idle_until(sh, when, stop).await {
                    Some(true) => return true,
                    Some(false) => return false,
                    None => continue,
                }
            }
            let until = poll_due.map_or(when, |p| p.min(when));
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = stop.changed() => return true,
            }
            if until == when {
                self.sched_delay(sh, when);
                return false;
            }
        }
    }

    /// Timer lateness of a user waking for its next task.
    fn sched_delay(&self, sh: &Shared, when: Instant) {
        let late = Instant::now().saturating_duration_since(when);
        let mut s = sh.stats();
        s.sched_delay.record(late);
        s.sched_delay_interval.record(late);
    }

    /// One stretch of IDLE on the Inbox until `when` or new mail: Some(true)
    /// when stopping, Some(false) when `when` came, None after new mail was
    /// fetched (or the connection failed) and the wait goes on.
    async fn idle_until(
        &mut self,
        sh: &Shared,
        when: Instant,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<bool> {
        if self.imap.as_ref().is_some_and(|c| !c.idling()) {
            // Back to the Inbox first, fetching anything it announces.
            let r = async { self.conn()?.ensure_selected(INBOX).await }.await;
            if let Err(e) = r {
                sh.stats().error("new_mail", &self.addr, &e);
                self.drop_conn();
                return None;
            }
            self.take_news(sh).await;
            let r = async { self.conn()?.idle_start().await }.await;
            self.count_cmds(sh);
            if let Err(e) = r {
                if self.imap.is_some() {
                    sh.stats().error("new_mail", &self.addr, &e);
                    self.drop_conn();
                }
                return None;
            }
        }
        let c = self.imap.as_mut()?;
        let r = tokio::select! {
            r = c.idle_wait(when) => r,
            _ = stop.changed() => return Some(true),
        };
        match r {
            Ok(false) => {
                self.sched_delay(sh, when);
                Some(false)
            }
            Ok(true) => {
                let t = Instant::now();
                let r = async {
                    self.conn()?.idle_done().await?;
                    self.fetch_new(sh).await
                }
                .await;
                self.new_mail_done(sh, t, r);
                None
            }
            Err(e) => {
                sh.stats().error("new_mail", &self.addr, &e);
                self.drop_conn();
                None
            }
        }
    }

    /// One poll (`new_mail`): NOOP on the selected Inbox, else SELECT it (both
    /// report new EXISTS/UIDNEXT), then fetch what arrived.
    async fn poll(&mut self, sh: &Shared) {
        let t = Instant::now();
        let r = async {
            let c = self.conn()?;
            if c.inbox_selected() {
                c.cmd("NOOP", "NOOP").await?;
            } else {
                c.select(INBOX, false).await?;
            }
            if self.has_news() {
                self.fetch_new(sh).await?;
            }
            Ok::<(), OpError>(())
        }
        .await;
        self.new_mail_done(sh, t, r);
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

    /// `k` recipients drawn from the profile's count for `kind`.
    fn recipients(&mut self, sh: &Shared, kind: TaskKind) -> usize {
        sh.profile
            .task(kind)
            .and_then(|s| s.recipients.as_ref())
            .map(|r| r.draw(&mut self.rng))
            .unwrap_or(1)
    }

    fn new_id(&mut self, sh: &Shared) -> u64 {
        sh.msg_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Submits `msg` to `rcpts` and files a copy in `copy_to`; counts the flow.
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
                let k = self.recipients(sh, TaskKind::Send);
                let idxs = self.colleagues(sh, k, &[]);
                let addrs: Vec<String> = idxs.iter().map(|i| sh.topo.users[*i].clone()).collect();
                let n = idxs.len() as u64;
                (addrs, idxs, n)
            };
        let seq = self.new_id(sh);
        let track = self.track(sh, seq, &idxs);
        let env = envelope(
            &self.addr,
            &addrs,
            format!("Status {seq}"),
            &sh.run_id,
            seq,
            Some(track),
        );
        let msg = sh.msggen.mail(&mut self.rng, &env);
        let sent = self.boxes()?.sent.clone();
        self.submit(sh, addrs, deliveries, msg, &sent).await?;
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
    /// (and, for Reply All, its other recipients, up to the profile's count) with
    /// In-Reply-To/References to it, save a copy in Sent, flag the original
    /// \Answered.
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
                    "UID FETCH {} (BODY.PEEK[HEADER.FIELDS (FROM TO CC SUBJECT MESSAGE-ID REFERENCES)] BODY.PEEK[TEXT]<0.2048>)",
                    orig.uid
                ),
            )
            .await?;
        let lits = r.untagged.first().map(|u| literals(u)).unwrap_or_default();
        let header = lits.first().cloned().unwrap_or_default();
        let quoted = lits
            .get(1)
            .map(|t| String::from_utf8_lossy(t).into_owned())
            .unwrap_or_default();
        let kind = if all {
            TaskKind::ReplyAll
        } else {
            TaskKind::Reply
        };
        let k = self.recipients(sh, kind);
        let mut first: Vec<usize> = orig.from.into_iter().collect();
        if all {
            first.extend(orig.rcpts.iter().copied());
        }
        let idxs = self.colleagues(sh, if all { k } else { k.max(1) }, &first);
        let addrs: Vec<String> = idxs.iter().map(|i| sh.topo.users[*i].clone()).collect();
        let seq = self.new_id(sh);
        let track = self.track(sh, seq, &idxs);
        let mut env = envelope(
            &self.addr,
            &addrs,
            format!("RE: Status {seq}"),
            &sh.run_id,
            seq,
            Some(track),
        );
        env.in_reply_to = unfolded_header(&header, "Message-ID");
        env.references = unfolded_header(&header, "References")
            .map(|r| r.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let msg = sh.msggen.reply(&mut self.rng, &env, &quoted);
        let n = idxs.len() as u64;
        let sent = self.boxes()?.sent.clone();
        self.submit(sh, addrs, n, msg, &sent).await?;
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
            .and_then(|u| literals(u).into_iter().next())
            .unwrap_or_default();
        let k = self.recipients(sh, TaskKind::Forward);
        let idxs = self.colleagues(sh, k, &[]);
        let addrs: Vec<String> = idxs.iter().map(|i| sh.topo.users[*i].clone()).collect();
        let seq = self.new_id(sh);
        let track = self.track(sh, seq, &idxs);
        let env = envelope(
            &self.addr,
            &addrs,
            format!("FW: Status {seq}"),
            &sh.run_id,
            seq,
            Some(track),
        );
        let msg = sh.msggen.forward(&mut self.rng, &env, &original);
        let n = idxs.len() as u64;
        let sent = self.boxes()?.sent.clone();
        self.submit(sh, addrs, n, msg, &sent).await?;
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
            self.boxes()?.deleted_items.clone()
        } else {
            let n = self.rng.random_range(1..=folders);
            self.boxes()?.folder(n)
        };
        let c = self.conn()?;
        c.ensure_selected(INBOX).await?;
        move_or_copy(c, uid, &dest).await?;
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
        let deleted = self.boxes()?.deleted_items.clone();
        let c = self.conn()?;
        c.select(&deleted, false).await?;
        let uids = c.uid_search("SEARCH", "UID SEARCH ALL").await?;
        if let Some(uid) = uids.first() {
            expunge_uid(c, *uid).await?;
            return Ok(Outcome::Done);
        }
        let Some(i) = self.pick_seen() else {
            return Ok(Outcome::Skipped("nothing to delete"));
        };
        let uid = self.inbox[i].uid;
        let c = self.conn()?;
        c.select(INBOX, false).await?;
        expunge_uid(c, uid).await?;
        self.inbox.swap_remove(i);
        Ok(Outcome::Done)
    }

    /// Free/Busy: EXAMINE the Calendar and SEARCH the appointments starting today
    /// or tomorrow (a body search on DTSTART), then fetch their envelopes.
    async fn t_free_busy(&mut self) -> OpResult<Outcome> {
        let now = unix_now();
        let d0 = crate::message::ical_time(now);
        let d1 = crate::message::ical_time(now + 86400);
        let calendar = self.boxes()?.calendar();
        let c = self.conn()?;
        c.select(&calendar, true).await?;
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
        let calendar = self.boxes()?.calendar();
        let c = self.conn()?;
        c.select(&calendar, false).await?;
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
        let env = envelope(
            &self.addr,
            &to,
            format!("Appointment {seq}"),
            &sh.run_id,
            seq,
            None,
        );
        let start = unix_now() + self.rng.random_range(0..7 * 86400);
        let msg = sh.msggen.calendar(&mut self.rng, &env, start, 30, false);
        let calendar = self.boxes()?.calendar();
        self.conn()?.append(&calendar, "\\Seen", &msg).await?;
        Ok(Outcome::Done)
    }

    /// Request Meeting: an iMIP invitation (METHOD:REQUEST) submitted to the
    /// attendees; the organizer's copy goes to the Calendar.
    async fn t_meeting(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let k = self.recipients(sh, TaskKind::RequestMeeting);
        let idxs = self.colleagues(sh, k, &[]);
        let addrs: Vec<String> = idxs.iter().map(|i| sh.topo.users[*i].clone()).collect();
        let seq = self.new_id(sh);
        let track = self.track(sh, seq, &idxs);
        let env = envelope(
            &self.addr,
            &addrs,
            format!("Meeting {seq}"),
            &sh.run_id,
            seq,
            Some(track),
        );
        let start = unix_now() + self.rng.random_range(3600..7 * 86400);
        let msg = sh.msggen.calendar(&mut self.rng, &env, start, 60, true);
        let n = idxs.len() as u64;
        let calendar = self.boxes()?.calendar();
        self.submit(sh, addrs, n, msg, &calendar).await?;
        Ok(Outcome::Done)
    }

    /// Create Smart Folder: CREATE a folder, SEARCH the Inbox with the folder's
    /// criteria and COPY the matches (up to 50) into it.
    async fn t_create_smart(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let name = self
            .boxes()?
            .smart(&format!("{}-{}", sh.run_id, self.next_name));
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
            let pattern = self.boxes()?.smart_pattern();
            let c = self.conn()?;
            let r = c
                .cmd("LIST", &format!("LIST \"\" {}", imap::mailbox(&pattern)))
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
        Ok(Outcome::Done)
    }
}

/// UID MOVE `uid` of the selected mailbox to `dest`; without MOVE: UID COPY,
/// then flag it \Deleted and UID EXPUNGE it.
async fn move_or_copy(c: &mut ImapConn, uid: u32, dest: &str) -> OpResult<()> {
    if c.has_cap("MOVE") {
        c.cmd("MOVE", &format!("UID MOVE {uid} {}", imap::mailbox(dest)))
            .await?;
        return Ok(());
    }
    c.cmd("COPY", &format!("UID COPY {uid} {}", imap::mailbox(dest)))
        .await?;
    expunge_uid(c, uid).await
}

/// Flags `uid` of the selected mailbox \Deleted and removes it (UID EXPUNGE
/// with UIDPLUS, else EXPUNGE).
async fn expunge_uid(c: &mut ImapConn, uid: u32) -> OpResult<()> {
    c.cmd(
        "STORE",
        &format!("UID STORE {uid} +FLAGS.SILENT (\\Deleted)"),
    )
    .await?;
    if c.has_cap("UIDPLUS") {
        c.cmd("EXPUNGE", &format!("UID EXPUNGE {uid}")).await?;
    } else {
        c.cmd("EXPUNGE", "EXPUNGE").await?;
    }
    Ok(())
}

/// The value of header `name` in a header block, continuation lines joined.
fn unfolded_header(block: &[u8], name: &str) -> Option<String> {
    let text = String::from_utf8_lossy(block);
    let mut value: Option<String> = None;
    for line in text.split("\r\n") {
        match &mut value {
            Some(v) if line.starts_with([' ', '\t']) => {
                v.push(' ');
                v.push_str(line.trim());
            }
            Some(_) => break,
            None => {
                if let Some((h, v)) = line.split_once(':')
                    && h.trim().eq_ignore_ascii_case(name)
                {
                    value = Some(v.trim().to_string());
                }
            }
        }
    }
    value.filter(|v| !v.is_empty())
}

/// The contents of the `{n}` literals of a response unit, in order.
fn literals(u: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(rel) = u[i..].windows(3).position(|w| w == b"}\r\n") {
        let close = i + rel;
        let open = u[..close].iter().rposition(|c| *c == b'{');
        let n = open.and_then(|o| {
            std::str::from_utf8(&u[o + 1..close])
                .ok()?
                .trim_end_matches('+')
                .parse::<usize>()
                .ok()
        });
        let start = close + 3;
        match n {
            Some(n) if start + n <= u.len() => {
                out.push(u[start..start + n].to_vec());
                i = start + n;
            }
            _ => i = start,
        }
        if i >= u.len() {
            break;
        }
    }
    out
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
    use crate::profile::ProfileExt;

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
            literals(b"* 1 FETCH (BODY[] {3}\r\nabc)"),
            vec![b"abc".to_vec()]
        );
        assert_eq!(
            literals(b"* 1 FETCH (UID 4 BODY[HEADER.FIELDS (FROM)] {6}\r\nF: a\r\n BODY[TEXT]<0> {2}\r\nhi)"),
            vec![b"F: a\r\n".to_vec(), b"hi".to_vec()]
        );
        let h =
            b"From: a@x\r\nMessage-ID: <1@x>\r\nReferences: <0@x>\r\n <00@x>\r\nSubject: s\r\n\r\n";
        assert_eq!(unfolded_header(h, "message-id").as_deref(), Some("<1@x>"));
        assert_eq!(
            unfolded_header(h, "References").as_deref(),
            Some("<0@x> <00@x>")
        );
        assert_eq!(unfolded_header(h, "Cc"), None);
    }
}
