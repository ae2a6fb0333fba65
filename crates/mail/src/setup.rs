//! `mail setup`: for every user, log in (which checks the credentials on real
//! servers), create the profile's folders and top each folder up to the profile's
//! message count with IMAP APPEND (many users at once). Idempotent: folders that
//! exist are kept and folders already holding enough messages get none, so a
//! second run appends nothing.

use crate::imap::{self, is_inbox, status_messages};
use crate::mailboxes::{Mailboxes, SMART_PREFIX, discover};
use crate::message::{Envelope, Generator, unix_now};
use crate::profile::Profile;
use crate::target::Target;
use crate::topology::Topology;
use crate::wire::{ErrorKind, OpResult};
use mailbench_base::rundir::TestLog;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Default, Clone, Serialize)]
pub struct SetupReport {
    pub users: usize,
    pub users_ok: usize,
    pub lists: usize,
    pub folders_created: u64,
    pub messages_appended: u64,
    pub bytes_appended: u64,
    pub messages_present: u64,
    pub errors_by_kind: BTreeMap<ErrorKind, u64>,
    pub error_samples: Vec<String>,
    pub seconds: f64,
    pub appends_per_s: f64,
    /// Where the first provisioned user's mailboxes are on the server.
    pub mailboxes: Option<Mailboxes>,
}

/// The folders of a user (server names) and how many messages each should
/// hold at least.
pub fn folder_plan(p: &Profile, m: &Mailboxes) -> Vec<(String, u32)> {
    let i = &p.initial;
    let mut v = vec![
        ("INBOX".to_string(), i.inbox),
        (m.layout.sent.clone(), i.sent),
        (m.layout.drafts.clone(), 0),
        (m.layout.deleted_items.clone(), i.deleted_items),
        (m.calendar(), i.calendar),
        (m.named(&format!("{SMART_PREFIX}Unread Mail")), 0),
    ];
    for n in 1..=i.folders {
        v.push((m.folder(n), i.messages_per_folder));
    }
    v
}

/// Provisions every user of `topo` with the profile's initial content.
/// After `stop` is raised no user starts, users stop between appends, and
/// the rest are dropped after `STOP_GRACE`.
pub async fn provision(
    target: Arc<Target>,
    topo: Arc<Topology>,
    profile: Arc<Profile>,
    concurrency: usize,
    seed: u64,
    log: TestLog,
    stop: mailbench_base::interrupt::Interrupt,
) -> SetupReport {
    let t0 = Instant::now();
    let workers = concurrency.max(1).min(topo.users.len().max(1));
    let job = Arc::new(Provisioning {
        report: Mutex::new(SetupReport {
            users: topo.users.len(),
            lists: topo.lists.len(),
            ..Default::default()
        }),
        msggen: Generator::new(&profile.sizes, seed),
        next: std::sync::atomic::AtomicUsize::new(0),
        target,
        topo,
        profile,
        seed,
        log,
        stop: stop.clone(),
    });
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let job = job.clone();
        set.spawn(async move { job.work().await });
    }
    wait_or_stop(&mut set, &stop).await;
    let mut rep = match job.report.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    };
    rep.seconds = t0.elapsed().as_secs_f64();
    rep.appends_per_s = if rep.seconds > 0.0 {
        rep.messages_appended as f64 / rep.seconds
    } else {
        0.0
    };
    rep
}

/// What every worker of a setup shares: the server, the users and the
/// profile, the next user to provision, and the report they add to.
struct Provisioning {
    target: Arc<Target>,
    topo: Arc<Topology>,
    profile: Arc<Profile>,
    msggen: Generator,
    seed: u64,
    log: TestLog,
    stop: mailbench_base::interrupt::Interrupt,
    next: std::sync::atomic::AtomicUsize,
    report: Mutex<SetupReport>,
}

impl Provisioning {
    /// One worker: provisions the next user not taken yet until none is
    /// left or `stop` is raised.
    async fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i >= self.topo.users.len() || self.stop.raised() {
                break;
            }
            let mut rng = SmallRng::seed_from_u64(self.seed ^ (i as u64).wrapping_mul(0x5851_F42D));
            let mut f = UserFigures::default();
            let r = self.user(i, &mut rng, &mut f).await;
            self.record(i, f, r);
        }
    }

    /// Adds what user `i` stored and how its provisioning ended to the report.
    fn record(&self, i: usize, mut f: UserFigures, r: OpResult<bool>) {
        let mut rep = match self.report.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        // What was stored counts even when the user failed later on.
        rep.folders_created += f.folders_created;
        rep.messages_appended += f.appended;
        rep.bytes_appended += f.bytes;
        rep.messages_present += f.present;
        if rep.mailboxes.is_none() {
            rep.mailboxes = f.mailboxes.take();
        }
        match r {
            Ok(true) => rep.users_ok += 1,
            // Interrupted half-way: neither done nor failed.
            Ok(false) => {}
            Err(e) => {
                *rep.errors_by_kind.entry(e.kind).or_default() += 1;
                if rep.error_samples.len() < 20 {
                    let line = format!("{}: {e}", self.topo.users[i]);
                    self.log.line(format!("setup error: {line}"));
                    rep.error_samples.push(line);
                }
            }
        }
        let done = rep.users_ok + rep.errors_by_kind.values().sum::<u64>() as usize;
        if done.is_multiple_of(100) {
            self.log
                .line(format!("setup: {done}/{} users", self.topo.users.len()));
        }
    }
}

/// How long users being provisioned may take to finish their current
/// command after Ctrl-C before they are dropped.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Waits for every task of `set`; once `stop` is raised, at most
/// `STOP_GRACE` more, then aborts the rest (setup ends within seconds of a
/// Ctrl-C whatever the number of users).
async fn wait_or_stop(
    set: &mut tokio::task::JoinSet<()>,
    stop: &mailbench_base::interrupt::Interrupt,
) {
    let mut abort_at: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            r = set.join_next() => if r.is_none() { return },
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        let now = tokio::time::Instant::now();
        match abort_at {
            None if stop.raised() => abort_at = Some(now + STOP_GRACE),
            Some(t) if now >= t => {
                set.abort_all();
                while set.join_next().await.is_some() {}
                return;
            }
            _ => {}
        }
    }
}

/// What one user's provisioning stored, kept up to date as it goes (so a
/// user that fails half-way still reports what it stored).
#[derive(Default)]
struct UserFigures {
    folders_created: u64,
    appended: u64,
    bytes: u64,
    present: u64,
    mailboxes: Option<Mailboxes>,
}

impl Provisioning {
    /// Provisions user `i`: its folders, topped up to the profile's message
    /// counts; `f` holds what was stored so far. Ok(false) when `stop` ended it
    /// half-way.
    async fn user(&self, i: usize, rng: &mut SmallRng, f: &mut UserFigures) -> OpResult<bool> {
        let Provisioning {
            target,
            topo,
            profile,
            msggen,
            stop,
            ..
        } = self;
        let me = &topo.users[i];
        let mut c = target.imap_login(me, topo.login(i)).await?;
        let boxes = discover(&mut c).await?;
        f.mailboxes = Some(boxes.clone());
        let now = unix_now();
        for (folder, want) in folder_plan(profile, &boxes) {
            if !boxes.listed(&folder) && !is_inbox(&folder) {
                let (st, resp) = c.cmd_status(&boxes.create_command(&c, &folder)).await?;
                if st == imap::Status::Ok {
                    f.folders_created += 1;
                } else if !resp.text.to_ascii_lowercase().contains("exists") {
                    return Err(crate::wire::OpError::new(
                        ErrorKind::Rejected,
                        format!("CREATE {folder} refused: {}", resp.text),
                    ));
                }
            }
            if want == 0 {
                continue;
            }
            let r = c
                .cmd(
                    "STATUS",
                    &format!("STATUS {} (MESSAGES)", imap::mailbox(&folder)),
                )
                .await?;
            let have = status_messages(&r.untagged).unwrap_or(0);
            f.present += u64::from(have.min(want));
            for n in have..want {
                if stop.raised() {
                    c.logout().await;
                    return Ok(false);
                }
                let from_idx = if topo.users.len() > 1 {
                    let mut j = rng.random_range(0..topo.users.len() - 1);
                    if j >= i {
                        j += 1;
                    }
                    j
                } else {
                    i
                };
                let to = vec![me.clone()];
                let env = Envelope {
                    from: &topo.users[from_idx],
                    to: &to,
                    subject: format!("Initial {folder} {n}").into(),
                    track: None,
                    in_reply_to: None,
                    references: Vec::new(),
                    message_id: crate::message::message_id(&["setup", me, &folder, &n.to_string()]),
                    date: now - rng.random_range(0..30 * 86400),
                };
                let msg = if folder == boxes.calendar() {
                    let start = now + rng.random_range(-3 * 86400..14 * 86400i64);
                    // Whole-hour starts in working hours.
                    let start = start - start.rem_euclid(3600);
                    msggen.calendar(rng, &env, start, 60, false)
                } else {
                    msggen.mail(rng, &env)
                };
                let flags = if is_inbox(&folder) && n + 5 >= want {
                    ""
                } else {
                    "\\Seen"
                };
                c.append(&folder, flags, &msg).await?;
                f.appended += 1;
                f.bytes += msg.len() as u64;
            }
        }
        c.logout().await;
        Ok(true)
    }
}

/// How long setup may take at most before it is called stuck (bounded loops).
pub fn setup_budget(users: usize) -> Duration {
    Duration::from_secs(600 + users as u64)
}
