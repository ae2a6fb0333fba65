//! `mail run`: every simulated user is an independent tokio task with its own IMAP
//! connection, a day's schedule of tasks at random times (compressed by
//! `--day-length`), and an IDLE watch on its Inbox between tasks. Task latency is
//! measured from the task's intended start, so a slow server cannot hide its
//! stalls by delaying the next task (no coordinated omission). Delivery latency
//! runs from the start of submission to the moment the recipient's server announced
//! the new message (the `X-Mailbench-Track` header identifies it).

use crate::endpoint::backoff;
use crate::imap::ImapConn;
use crate::mailboxes::Mailboxes;
use crate::message::{Envelope, Generator, message_id, unix_now};
use crate::profile::{Profile, TaskKind};
use crate::stats::{IntervalOps, Protocol, Stats};
use crate::target::Target;
use crate::topology::Topology;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

pub mod capacity;
mod folders;
mod inbox;
pub mod jmap_user;
mod tasks;
mod track;

pub use track::{Track, new_run_id, parse_track};

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
    /// Slots for the connections a user opens besides its own
    /// ([`capacity::SECOND_CONNECTIONS`]).
    pub second_conns: tokio::sync::Semaphore,
    /// Slots for the users' tasks in flight ([`capacity::tasks_in_flight`]).
    pub task_slots: capacity::TaskSlots,
    /// Where JMAP users connect, and their share (`None`: all IMAP).
    pub jmap: Option<jmap_user::JmapUsers>,
}

impl Shared {
    fn stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        match self.stats.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The addresses of the users `idxs`.
    pub(super) fn addresses(&self, idxs: &[usize]) -> Vec<String> {
        idxs.iter().map(|i| self.topo.users[*i].clone()).collect()
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

impl Shared {
    /// Waits for a task slot ([`Shared::task_slots`]) and records the task's
    /// scheduling delay: `late`, how late the timer woke the user for the
    /// task, plus the wait for a slot. A task already due when its user came
    /// back from the previous one (the server's time, not the generator's)
    /// has no `late` and records only its wait for a slot, when it had to
    /// wait. None when the run is stopping. IMAP and JMAP users alike.
    pub(super) async fn take_slot(
        &self,
        late: Option<Duration>,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<capacity::TaskSlot<'_>> {
        let (slot, waited) = match self.task_slots.try_take() {
            Some(slot) => (slot, None),
            None => {
                let t = Instant::now();
                tokio::select! {
                    slot = self.task_slots.take() => (slot, Some(t.elapsed())),
                    _ = stop.changed() => return None,
                }
            }
        };
        if late.is_some() || waited.is_some() {
            let delay = late.unwrap_or_default() + waited.unwrap_or_default();
            let mut s = self.stats();
            s.sched_delay.record(delay);
            s.sched_delay_interval.record(delay);
        }
        Some(slot)
    }
}

/// What a user knows of one Inbox message: kept for every message the
/// Inbox holds, so it is small (8 bytes, no heap): the Inbox grows by the
/// day's deliveries. Who sent a message and to whom (Reply, Reply All) is
/// read from its tracking header when it is answered, not kept.
#[derive(Debug, Clone, Copy)]
struct Msg {
    uid: u32,
    seen: bool,
}

// The size the Inbox's list is budgeted at (docs/performance.md).
const _: () = assert!(std::mem::size_of::<Msg>() <= 8);

impl Msg {
    fn new(uid: u32) -> Msg {
        Msg { uid, seen: false }
    }
}

enum Outcome {
    Done,
    Skipped(&'static str),
}

struct User {
    idx: usize,
    /// The address (From, To, Cc) and the name the user logs in with.
    addr: String,
    login: String,
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
    /// Waits between failed connections.
    backoff: backoff::Backoff,
    /// How late the timer woke the user for its next task.
    woke_late: Option<Duration>,
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
    // Kept by its user all day: no room beyond its tasks.
    out.shrink_to_fit();
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
        match sh.jmap.as_ref().filter(|j| j.takes(idx)) {
            Some(j) => {
                let url = j.url.clone();
                set.spawn(async move { jmap_user::user_main(sh, url, idx, stop).await })
            }
            None => set.spawn(async move { user_main(sh, idx, stop).await }),
        };
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
        login: sh.topo.login(idx).to_string(),
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
        backoff: backoff::Backoff::default(),
        woke_late: None,
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
        if u.wait_until(&sh, when, &mut stop).await || u.wait_backoff(&mut stop).await {
            break;
        }
        let Some(slot) = u.take_slot(&sh, &mut stop).await else {
            break;
        };
        let r = u.task(&sh, kind).await;
        drop(slot);
        let latency = Instant::now().saturating_duration_since(when);
        match r {
            Ok(Outcome::Done) => sh.stats().ok(Protocol::Imap, kind.name(), latency),
            Ok(Outcome::Skipped(why)) => sh.stats().skipped(Protocol::Imap, kind.name(), why),
            Err(e) => {
                sh.stats().error(Protocol::Imap, kind.name(), &u.addr, &e);
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
            Ok(()) => sh.stats().ok(Protocol::Imap, "new_mail", t.elapsed()),
            Err(e) => sh.stats().error(Protocol::Imap, "new_mail", &u.addr, &e),
        }
    }
    if let Some(mut c) = u.imap.take() {
        let _ = tokio::time::timeout(Duration::from_secs(5), c.logout()).await;
    }
}

impl User {
    /// Without a connection, waits for the back-off after a failed one to
    /// end. Returns true when the run is stopping.
    async fn wait_backoff(&mut self, stop: &mut watch::Receiver<bool>) -> bool {
        if self.imap.is_some() {
            return false;
        }
        let Some(at) = self.backoff.pending(Instant::now()) else {
            return false;
        };
        tokio::select! {
            _ = tokio::time::sleep_until(at) => *stop.borrow(),
            _ = stop.changed() => true,
        }
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

    /// Twelve users against the sink with two task slots, a day of their
    /// tasks compressed into two seconds so that most fall due while others
    /// run (the slow path): every task takes a slot, and never more than two
    /// are held at once.
    #[test]
    fn every_task_takes_a_slot_and_no_more_are_held_than_there_are() {
        use crate::options::{MailOptions, ResolveExt, Resolved};
        let sink = crate::sink::InProcess::start("pw", "").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let log = mailbench_base::rundir::TestLog::open(&dir.path().join("test.log")).unwrap();
        let o = Resolved::resolve(&MailOptions::default(), Duration::from_secs(8 * 3600)).unwrap();
        let mut profile = Profile::load("mmb3").unwrap();
        // Message tasks only, ten of each a day, on a small mailbox.
        profile.tasks.retain(|k, _| {
            matches!(
                k,
                TaskKind::Send | TaskKind::Read | TaskKind::Forward | TaskKind::Move
            )
        });
        profile.tasks.values_mut().for_each(|t| t.per_day = 10.0);
        profile.initial.inbox = 5;
        profile.initial.folders = 2;
        profile.initial.messages_per_folder = 1;
        profile.initial.calendar = 0;
        let topo = Topology::generate(&o.user_format, 1, 12, &profile, Some("x.test"), 1);
        let p = sink.ports;
        let target =
            Target::on_loopback("sink", [p.imap, p.submission, p.sieve], "pw".into(), &o).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let never = mailbench_base::interrupt::Interrupt::never();
        let setup = rt.block_on(crate::setup::provision(
            Arc::new(target.clone()),
            Arc::new(topo.clone()),
            Arc::new(profile.clone()),
            4,
            1,
            log,
            never,
        ));
        assert_eq!(setup.users_ok, 12);
        let sh = Arc::new(Shared {
            t0: Instant::now(),
            run_id: new_run_id(1),
            msggen: Generator::new(&profile.sizes, 1),
            profile,
            topo,
            target,
            params: RunParams {
                day_length: Duration::from_secs(2),
                ramp_up: Duration::from_millis(200),
                drain: Duration::ZERO,
                use_idle: true,
                poll_interval: Duration::from_secs(5),
                seed: 1,
            },
            stats: Mutex::new(Stats::default()),
            msg_seq: AtomicU64::new(1),
            imap_cmds: AtomicU64::new(0),
            smtp_cmds: AtomicU64::new(0),
            sieve_cmds: AtomicU64::new(0),
            planned: AtomicU64::new(0),
            interrupted: AtomicBool::new(false),
            second_conns: tokio::sync::Semaphore::new(capacity::SECOND_CONNECTIONS),
            task_slots: capacity::TaskSlots::new(2),
            jmap: None,
        });
        rt.block_on(async {
            let (stop, rx) = watch::channel(false);
            let users = tokio::spawn(run_users(sh.clone(), rx));
            // The users plan their day as they start, before their logon.
            tokio::time::sleep_until(sh.day_start()).await;
            let planned = || sh.planned.load(Ordering::Relaxed);
            let guard = Instant::now() + Duration::from_secs(120);
            while (sh.task_slots.given() < planned() || Instant::now() < sh.day_end())
                && Instant::now() < guard
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            stop.send_replace(true);
            assert_eq!(users.await.unwrap(), 12);
            let planned = planned();
            assert!(planned >= 12 * 30, "{planned} tasks planned");
            assert_eq!(sh.task_slots.given(), planned, "one slot per task");
        });
        let most = sh.task_slots.most_held();
        assert!((1..=2).contains(&most), "{most} slots held at once");
    }
}
