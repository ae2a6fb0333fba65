//! The life of one run, whatever the number of hosts. A run is a world of N
//! ranks, N ≥ 1 (MPI ranks, or this process alone: `multihost::Single`,
//! whose barrier and gather do nothing). Every command goes through
//! [`drive`], once:
//!
//! 1. the interrupt handler, then the world;
//! 2. every rank resolves and checks its share of the test ([`Place`]: its
//!    rank, host and every rank's host) and the ranks agree — bad input on
//!    any rank is an error on every rank, before anything is written;
//! 3. rank 0 creates the run folder ([`new_run_folder`], the only place a
//!    run folder is made) and, with several ranks, the side channel
//!    (heartbeats, live figures, failures named by host);
//! 4. the command's body runs this rank's part ([`Run`]: the rank folder —
//!    the run folder itself with one rank —, the common start instant,
//!    phases, the interrupt);
//! 5. [`finish`] gathers the parts to rank 0, which merges them into one
//!    typed result and writes it through the one output path;
//! 6. rank 0 prints the outcome; the exit code comes from its verdict.

use crate::live::LiveSlot;
use crate::output::{self, Outcome};
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::{RunDir, TestLog};
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_multihost::watch::{Coordinator, Endpoint, Failure, Member, WatchOptions};
use mailbench_multihost::{Transport, from_unix_ms, to_unix_ms, wait_until};
use mailbench_results::ranks::RanksFailed;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// What every command takes from the common flags.
#[derive(Debug, Clone, Default)]
pub struct Common {
    /// The results folder (each run writes `OUTPUT/<kind>-<time>/`).
    pub output: PathBuf,
    /// One JSON object on stdout instead of the text.
    pub json: bool,
    /// Nothing on stdout but the JSON object; no progress.
    pub quiet: bool,
    /// The test log echoed on stderr.
    pub verbose: bool,
}

/// The commands that run through [`drive`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    StorageInit,
    StorageRun,
    StorageVerify,
    StorageBackup,
    StorageRecover,
    StorageSuite,
    MailSetup,
    MailRun,
    MailSweep,
}

impl Command {
    /// The result kind and the run folder's prefix.
    pub fn kind(self) -> &'static str {
        match self {
            Command::StorageInit => "storage-init",
            Command::StorageRun => "storage-run",
            Command::StorageVerify => "storage-verify",
            Command::StorageBackup => "storage-backup",
            Command::StorageRecover => "storage-recover",
            Command::StorageSuite => "storage-suite",
            Command::MailSetup => "mail-setup",
            Command::MailRun => "mail-run",
            Command::MailSweep => "mail-sweep",
        }
    }

    pub(crate) fn is_mail(self) -> bool {
        matches!(
            self,
            Command::MailSetup | Command::MailRun | Command::MailSweep
        )
    }
}

/// Where a rank stands when it resolves its share.
pub struct Place<'a> {
    pub rank: usize,
    pub size: usize,
    pub host: &'a str,
    /// Every rank's host, by rank.
    pub hosts: &'a [String],
}

/// One rank's run: what its part needs of the world.
pub(crate) struct Run<'a> {
    pub(crate) t: &'a dyn Transport,
    pub(crate) cmd: Command,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) host: String,
    pub(crate) hosts: Vec<String>,
    /// The run folder (rank 0's, shared with the ranks by name).
    pub(crate) top: PathBuf,
    pub(crate) coord: Option<Coordinator>,
    pub(crate) member: Option<Member>,
    pub(crate) interrupt: Interrupt,
    pub(crate) common: &'a Common,
    /// `--start-at`: the earliest start of the load.
    pub(crate) start_at: Option<SystemTime>,
    pub(crate) live: LiveSlot,
}

/// Creates a new run folder `base/<kind>-<UTC time>/` with its test log:
/// the one place a run folder is made.
pub fn new_run_folder(base: &Path, kind: &str) -> Result<RunDir> {
    RunDir::create(base, kind)
}

/// The environment's switches of a run (the test suite's and an operator's).
pub(crate) fn ack_stream() -> bool {
    std::env::var_os("MAILBENCH_ACK_STREAM").is_some()
}

/// Runs `cmd` on this rank of the world: the share from `resolve`, then
/// `body` with the run; rank 0 prints the outcome. Returns the exit status.
pub(crate) fn drive<S>(
    cmd: Command,
    common: &Common,
    start_at: Option<SystemTime>,
    resolve: &dyn Fn(&Place) -> Result<S>,
    body: impl FnOnce(Run, S) -> Result<Outcome>,
) -> Result<ExitStatus> {
    drive_in(&Folder::New, cmd, common, start_at, resolve, body)
}

/// Where a run writes: a new run folder, or (a resumed suite) the folder of
/// the run it continues.
pub(crate) enum Folder {
    New,
    Existing(PathBuf),
}

/// [`drive`], in the folder `folder` says.
pub(crate) fn drive_in<S>(
    folder: &Folder,
    cmd: Command,
    common: &Common,
    start_at: Option<SystemTime>,
    resolve: &dyn Fn(&Place) -> Result<S>,
    body: impl FnOnce(Run, S) -> Result<Outcome>,
) -> Result<ExitStatus> {
    let interrupt = Interrupt::install()?;
    let world = world(common)?;
    let rank = world.rank();
    let outcome = {
        let (run, share) = start(
            world.as_ref(),
            (cmd, folder),
            common,
            start_at,
            resolve,
            interrupt,
        )?;
        body(run, share)
    };
    drop(world);
    let outcome = outcome?;
    if rank == 0 {
        output::print(&outcome, common);
    }
    Ok(outcome.status)
}

/// The world of this process: MPI when built with the `mpi` feature and
/// started by an MPI launcher, else this process alone (warned when it was
/// started as one of several ranks by a launcher but cannot join them).
fn world(common: &Common) -> Result<Box<dyn Transport>> {
    let launched = mailbench_multihost::launched_by_mpi();
    if launched
        && !mailbench_multihost::MPI_BUILT
        && mailbench_multihost::launcher_size().unwrap_or(1) > 1
        && !common.quiet
    {
        mailbench_base::secrets::warn(
            "mailbench: started as one of several MPI ranks, but this mailbench was built \
             without the `mpi` feature: this rank runs an independent test (build with \
             `cargo build --release --features mailbench/mpi` for one test over all ranks)",
        );
    }
    mailbench_multihost::world()
}

/// What rank 0 tells every rank before the parts start.
#[derive(Serialize, Deserialize)]
struct Setup {
    dir: PathBuf,
    hosts: Vec<String>,
    endpoint: Option<Endpoint>,
}

/// The host names, every rank's share resolved and agreed, the run folder
/// and the side channel.
fn start<'a, S>(
    t: &'a dyn Transport,
    (cmd, folder): (Command, &Folder),
    common: &'a Common,
    start_at: Option<SystemTime>,
    resolve: &dyn Fn(&Place) -> Result<S>,
    interrupt: Interrupt,
) -> Result<(Run<'a>, S)> {
    let (rank, size, host) = (t.rank(), t.size(), t.host());
    let mut ok = || interrupt_check(&interrupt);
    let names = t.gather(host.as_bytes(), &Vec::new, &mut ok)?;
    let hosts_here: Vec<String> = names
        .into_iter()
        .map(|n| String::from_utf8_lossy(&n.unwrap_or_default()).into_owned())
        .collect();
    let hosts: Vec<String> = broadcast_json(t, &hosts_here, "host names", &mut ok)?;
    let place = Place {
        rank,
        size,
        host: &host,
        hosts: &hosts,
    };
    let share = resolve(&place);
    agree(t, share.as_ref().err(), &hosts, &mut ok)?;
    let share = share?;
    let live: LiveSlot = Arc::new(Mutex::new(None));
    let mut coord = None;
    let setup = if rank == 0 {
        let dir = match folder {
            Folder::New => new_run_folder(&common.output, cmd.kind())?,
            Folder::Existing(d) => RunDir::at(d)?,
        };
        let (c, endpoint) = coordinator(&dir, cmd, &hosts_here, common, &interrupt, &live)?;
        coord = c;
        Setup {
            dir: dir.path,
            hosts: hosts_here,
            endpoint,
        }
    } else {
        Setup {
            dir: PathBuf::new(),
            hosts: Vec::new(),
            endpoint: None,
        }
    };
    let setup: Setup = broadcast_json(t, &setup, "setup", &mut ok)?;
    let member = match (&setup.endpoint, rank) {
        (Some(ep), r) if r > 0 => Some(Member::connect(ep, rank, &host, interrupt.clone())?),
        _ => None,
    };
    let run = Run {
        t,
        cmd,
        rank,
        size,
        host,
        hosts: setup.hosts,
        top: setup.dir,
        coord,
        member,
        interrupt,
        common,
        start_at,
        live,
    };
    Ok((run, share))
}

/// Rank 0's side channel when there are several ranks (none for one).
fn coordinator(
    dir: &RunDir,
    cmd: Command,
    hosts: &[String],
    common: &Common,
    interrupt: &Interrupt,
    live: &LiveSlot,
) -> Result<(Option<Coordinator>, Option<Endpoint>)> {
    let size = hosts.len();
    if size == 1 {
        return Ok((None, None));
    }
    let listen = std::env::var("MAILBENCH_COORDINATOR_LISTEN").ok();
    let (c, ep) = Coordinator::start(
        hosts.to_vec(),
        listen.as_deref(),
        WatchOptions::default(),
        failure_hook(dir.path.clone(), cmd, hosts.to_vec(), interrupt.clone()),
        crate::live::interval_hook(cmd.is_mail(), size, common.quiet, live.clone()),
    )?;
    dir.log.line(format!(
        "{size} ranks on {hosts:?}; rank 0 listens on port {} at {:?}",
        ep.port, ep.addrs
    ));
    Ok((Some(c), Some(ep)))
}

/// Rank 0's `value` on every rank.
fn broadcast_json<T: Serialize + serde::de::DeserializeOwned>(
    t: &dyn Transport,
    value: &T,
    what: &str,
    ok: &mut dyn FnMut() -> Result<()>,
) -> Result<T> {
    let bytes = serde_json::to_vec(value).map_err(|e| Error::runtime(e.to_string()))?;
    serde_json::from_slice(&t.broadcast(&bytes, ok)?)
        .map_err(|e| Error::runtime(format!("{what} from rank 0: {e}")))
}

/// A rank's resolution failure as sent to rank 0: its exit code and message.
#[derive(Serialize, Deserialize)]
struct Refusal {
    code: i32,
    message: String,
}

impl Refusal {
    fn error(self) -> Error {
        match self.code {
            c if c == ExitStatus::Usage.code() => Error::Usage(self.message),
            c if c == ExitStatus::Interrupted.code() => Error::Interrupted,
            _ => Error::Runtime(self.message),
        }
    }
}

/// Every rank's resolution outcome to rank 0, then rank 0's verdict to all:
/// when any rank refused its share, every rank returns that error (the
/// first refusing rank's exit code; the message names each refusing host
/// when there are several ranks), before any folder exists.
fn agree(
    t: &dyn Transport,
    mine: Option<&Error>,
    hosts: &[String],
    ok: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let mine = mine.map(|e| Refusal {
        code: e.exit_status().code(),
        message: e.to_string(),
    });
    let bytes = serde_json::to_vec(&mine).map_err(|e| Error::runtime(e.to_string()))?;
    let gathered = t.gather(&bytes, &Vec::new, ok)?;
    let verdict = if t.rank() == 0 {
        let refusals: Vec<(usize, Refusal)> = gathered
            .into_iter()
            .enumerate()
            .filter_map(|(r, g)| {
                serde_json::from_slice::<Option<Refusal>>(&g.unwrap_or_default())
                    .ok()
                    .flatten()
                    .map(|x| (r, x))
            })
            .collect();
        joined_refusal(refusals, hosts, t.size())
    } else {
        None
    };
    let verdict: Option<Refusal> = broadcast_json(t, &verdict, "the ranks' check", ok)?;
    match verdict {
        Some(r) => Err(r.error()),
        None => Ok(()),
    }
}

/// The ranks' refusals as one: the first one's code, every message (named
/// by rank and host when there are several ranks).
fn joined_refusal(
    refusals: Vec<(usize, Refusal)>,
    hosts: &[String],
    size: usize,
) -> Option<Refusal> {
    let code = refusals.first().map(|(_, x)| x.code)?;
    let message = if size == 1 {
        refusals.into_iter().map(|(_, x)| x.message).collect()
    } else {
        refusals
            .into_iter()
            .map(|(r, x)| {
                let h = hosts.get(r).map(String::as_str).unwrap_or("?");
                format!("rank {r} on host {h}: {}", x.message)
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    Some(Refusal { code, message })
}

pub(crate) fn interrupt_check(i: &Interrupt) -> Result<()> {
    if i.raised() {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

impl Run<'_> {
    pub(crate) fn phase(&self, p: &str) {
        if let Some(c) = &self.coord {
            c.set_phase(p);
        }
    }

    /// A line on stderr from rank 0 (nothing with `-q`).
    pub(crate) fn say(&self, text: &str) {
        if !self.common.quiet && self.rank == 0 {
            mailbench_base::secrets::warn(text);
        }
    }

    /// " over N load generator(s)" with several ranks, else nothing.
    pub(crate) fn over_generators(&self) -> String {
        if self.size > 1 {
            format!(" over {} load generator(s)", self.size)
        } else {
            String::new()
        }
    }

    /// The poll of every wait: a failed rank (rank 0 knows) or an interrupt.
    pub(crate) fn check(&self) -> Result<()> {
        if let Some(c) = &self.coord
            && let Some(f) = c.failures().first()
        {
            return Err(Error::runtime(f.reason.clone()));
        }
        interrupt_check(&self.interrupt)
    }

    /// The ranks that failed so far (rank 0 knows; none elsewhere).
    pub(crate) fn failures(&self) -> Vec<Failure> {
        self.coord
            .as_ref()
            .map(|c| c.failures())
            .unwrap_or_default()
    }

    /// The ranks a gather need not wait for.
    pub(crate) fn failed_ranks(&self) -> Vec<usize> {
        self.coord
            .as_ref()
            .map(|c| c.failed_ranks())
            .unwrap_or_default()
    }

    /// This rank's folder: the run folder itself with one rank, else
    /// `rank-N/` inside it.
    pub(crate) fn rank_dir(&self) -> Result<RunDir> {
        let dir = self.part_dir(&self.top)?;
        dir.log.set_echo(self.common.verbose);
        if self.size > 1 {
            dir.log.line(format!(
                "rank {} of {} on host {} ({} transport)",
                self.rank,
                self.size,
                self.host,
                self.t.kind()
            ));
        }
        Ok(dir)
    }

    /// This rank's folder of a part inside `within` (a sweep's level):
    /// `within` itself with one rank, else `within/rank-N/`.
    pub(crate) fn part_dir(&self, within: &Path) -> Result<RunDir> {
        if self.size == 1 {
            return RunDir::at(within);
        }
        RunDir::at(&within.join(format!("rank-{}", self.rank)))
    }

    /// Every rank ready (a barrier), then one start instant from rank 0 (two
    /// seconds from now with several ranks, or `--start-at` if later), waited
    /// for on every rank.
    pub(crate) fn start_together(&self, log: &TestLog, what: &str) -> Result<SystemTime> {
        self.phase("the barrier before the load");
        self.t.barrier(&mut || self.check())?;
        let start = if self.rank == 0 {
            let soon = SystemTime::now() + Duration::from_secs(if self.size > 1 { 2 } else { 0 });
            let at = self.start_at.map(|s| s.max(soon)).unwrap_or(soon);
            to_unix_ms(at).to_le_bytes().to_vec()
        } else {
            Vec::new()
        };
        let b = self.t.broadcast(&start, &mut || self.check())?;
        let ms = b
            .get(..8)
            .and_then(|s| <[u8; 8]>::try_from(s).ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| Error::runtime("start time from rank 0 is malformed"))?;
        let at = from_unix_ms(ms);
        log.line(format!(
            "{what}; the load starts at {}",
            humantime::format_rfc3339_millis(at)
        ));
        if self.size > 1 || self.start_at.is_some() {
            self.say(&format!(
                "mailbench: the load starts at {}",
                humantime::format_rfc3339_seconds(at)
            ));
        }
        self.phase("the wait for the start time");
        let late = wait_until(at, &mut || self.check())?;
        if late > Duration::from_millis(500) {
            log.line(format!(
                "started {:.1} s after the start time",
                late.as_secs_f64()
            ));
        }
        Ok(at)
    }

    /// Every rank's outcome of a step to rank 0, rank 0's verdict back to
    /// all: an error on any rank is an error on every rank, naming each.
    pub(crate) fn all_ok(&self, what: &str, mine: Result<()>) -> Result<()> {
        let msg: Option<String> = mine.err().map(|e| e.to_string());
        let bytes = serde_json::to_vec(&msg).map_err(|e| Error::runtime(e.to_string()))?;
        let skip = || self.failed_ranks();
        let gathered = self.t.gather(&bytes, &skip, &mut || self.check())?;
        let joined: Option<String> = if self.rank == 0 {
            let errs: Vec<String> = (gathered.into_iter().enumerate())
                .filter_map(|(r, g)| {
                    let m = serde_json::from_slice::<Option<String>>(&g?).ok()??;
                    if self.size == 1 {
                        return Some(m);
                    }
                    let h = self.hosts.get(r).map(String::as_str).unwrap_or("?");
                    Some(format!("rank {r} on host {h}: {m}"))
                })
                .collect();
            (!errs.is_empty()).then(|| errs.join("; "))
        } else {
            None
        };
        let back: Option<String> =
            broadcast_json(self.t, &joined, &format!("{what} outcome"), &mut || {
                self.check()
            })?;
        match back {
            Some(m) => Err(Error::runtime(format!("{what} failed: {m}"))),
            None => Ok(()),
        }
    }

    /// The side channel closed on every rank: the others say they are done
    /// before rank 0 stops listening, so no one takes the close for a failure.
    pub(crate) fn close(self) -> Result<()> {
        if let Some(m) = self.member {
            m.done();
        }
        self.t.barrier(&mut || Ok(()))?;
        if let Some(c) = self.coord {
            c.finish();
        }
        Ok(())
    }

    /// Every rank's outcome of resolving a share, agreed: a refusal on any
    /// rank is the error of every rank (see [`agree`]).
    pub(crate) fn agree<S>(&self, share: &Result<S>) -> Result<()> {
        agree(self.t, share.as_ref().err(), &self.hosts, &mut || {
            self.check()
        })
    }

    /// Rank 0's `value` on every rank.
    pub(crate) fn broadcast<T: Serialize + serde::de::DeserializeOwned>(
        &self,
        value: &T,
        what: &str,
    ) -> Result<T> {
        broadcast_json(self.t, value, what, &mut || self.check())
    }

    /// The side channel closed: the other ranks say they are done, rank 0
    /// stops listening.
    pub(crate) fn end(self) {
        if let Some(m) = self.member {
            m.done();
        }
        if let Some(c) = self.coord {
            c.finish();
        }
    }

    /// This rank failed: the others are told (or stopped, from rank 0, which
    /// writes the Fail result naming it and ends the job).
    pub(crate) fn failed(&self, e: &Error) {
        if let Some(m) = &self.member {
            m.fail(&e.to_string());
        }
        if let Some(c) = &self.coord {
            rank0_failed(self, c, e);
        }
    }
}

/// Rank 0, the moment a rank fails: a Fail result naming the host (the job
/// may be killed soon after; a sweep's is written by the sweep), then stop
/// the local test.
fn failure_hook(
    top: PathBuf,
    cmd: Command,
    hosts: Vec<String>,
    interrupt: Interrupt,
) -> mailbench_multihost::watch::FailureHook {
    let written = Arc::new(Mutex::new(()));
    Box::new(move |f: &Failure, all: &[Failure]| {
        let _g = written.lock();
        mailbench_base::secrets::warn(&format!("mailbench: FAIL: {}", f.reason));
        let summary = format!(
            "mailbench {} over {} ranks — FAIL\n{}\n",
            cmd.kind(),
            hosts.len(),
            all.iter()
                .map(|f| format!("  - {}", f.reason))
                .collect::<Vec<_>>()
                .join("\n")
        );
        // A sweep writes its own result with the levels measured and the
        // failed generators (rank 0's net, on the flag raised here).
        if cmd != Command::MailSweep {
            let failed = RanksFailed::new(cmd.kind(), &hosts, all);
            output::write_failed(&top, &failed, Some(&summary));
        }
        interrupt.raise();
    })
}

/// Rank 0 itself failed: say so, stop the others, write the Fail result,
/// end the job.
fn rank0_failed(run: &Run, c: &Coordinator, e: &Error) {
    let msg = format!("rank 0 on host {} failed: {e}", run.host);
    mailbench_base::secrets::warn(&format!("mailbench: {msg}"));
    c.stop_all(&msg);
    let f = Failure {
        rank: 0,
        host: run.host.clone(),
        reason: msg,
        at: mailbench_base::host::now_rfc3339(),
    };
    let mut all = c.failures();
    all.insert(0, f);
    let failed = RanksFailed::new(run.cmd.kind(), &run.hosts, &all);
    output::write_failed(&run.top, &failed, None);
    if run.size > 1 {
        run.t.abort(e.exit_status().code());
    }
}
