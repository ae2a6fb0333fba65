//! `storage init|run|verify` as one test over many ranks.
//!
//! Every rank: resolves its share (paths with `{rank}`/`{host}`), creates its
//! databases, waits at a barrier for all the others, then starts the load at
//! the same wall-clock time (rank 0 picks it, or `--start-at`), so warm-up
//! and measured windows begin and end together. Each rank keeps its own
//! result in `<run>/rank-N/`; rank 0 gathers them and writes `<run>/result.json`
//! with per-host sections and the exact aggregate (the `report merge` of the
//! rank results). A rank that fails makes rank 0 write a Fail verdict naming
//! its host and stop the others.

use crate::watch::{
    Coordinator, Endpoint, Failure, FailureHook, IntervalHook, LiveMsg, Member, WatchOptions,
};
use crate::{Transport, from_unix_ms, to_unix_ms, wait_until};
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::{RunDir, TestLog};
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_results::ranks::RanksFailed;
use mailbench_results::storage::init::StorageInitResult;
use mailbench_results::storage::verify::StorageVerifyResult;
use mailbench_results::{AnyResult, RunHeader};
use mailbench_results::{Status, Verdict};
use mailbench_storage::run::{LiveFigures, Progress};
use mailbench_storage::spec::StorageSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

mod aggregate;

use aggregate::aggregate;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Init,
    Run,
    Verify,
    Backup,
    Recover,
    /// `mail run`: each rank drives its slice of the users.
    MailRun,
    /// `mail sweep`: every level on every rank, each its slice of the users.
    MailSweep,
}

impl Command {
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Command::Init => "storage-init",
            Command::Run => "storage-run",
            Command::Verify => "storage-verify",
            Command::Backup => "storage-backup",
            Command::Recover => "storage-recover",
            Command::MailRun => "mail-run",
            Command::MailSweep => "mail-sweep",
        }
    }
}

pub struct Options {
    /// When the load starts on every rank (default: 2 s after the last rank
    /// finished creating its databases).
    pub start_at: Option<SystemTime>,
    pub quiet: bool,
    pub verbose: bool,
    /// Where rank 0 listens for the side channel (default 0.0.0.0, free port).
    pub listen: Option<String>,
    pub watch: WatchOptions,
    /// The MAILBENCH_ACK_STREAM switch of `storage run`.
    pub ack_stream: bool,
    /// `storage backup --to` (may hold `{rank}` / `{host}`).
    pub backup_to: Option<PathBuf>,
    /// `storage recover --log-files`.
    pub log_files: u64,
}

/// What the command hands back to the CLI for its output: from the
/// aggregate result (rank 0) or this rank's own.
pub struct Outcome {
    pub status: ExitStatus,
    pub dir: PathBuf,
    pub verdict: Verdict,
    /// The `--json` line.
    pub line: String,
    pub summary: String,
}

/// Resolves this rank's spec from `(rank, host, every rank's host)`: the
/// caller applies [`spec_for_rank`], then checks the paths.
pub type Resolve<'a> = &'a dyn Fn(usize, &str, &[String]) -> Result<StorageSpec>;

/// What each rank's share is made of.
pub enum Share<'a> {
    /// Storage commands: this rank's databases.
    Storage(Resolve<'a>),
    /// `mail run`: this rank's options (its slice of the users), from
    /// `(rank, size, host)`; see [`crate::mail::slice`].
    Mail(crate::mail::MailResolve<'a>),
    /// `mail sweep`: this rank's options (the levels checked) and the levels.
    MailSweep(
        crate::mail::MailResolve<'a>,
        &'a mailbench_results::mail::sweep::SweepPlan,
    ),
}

#[derive(Serialize, Deserialize)]
struct Setup {
    dir: PathBuf,
    hosts: Vec<String>,
    endpoint: Option<Endpoint>,
}

#[derive(Serialize, Deserialize)]
struct Part {
    rank: usize,
    host: String,
    /// result.json of the rank, as written.
    result: String,
    intervals: String,
}

/// The spec of rank `rank` of `size`: templates expanded, a distinct seed
/// per rank (unique data on every host), and refusal when two ranks on one
/// host would share a folder.
pub fn spec_for_rank(
    mut spec: StorageSpec,
    rank: usize,
    host: &str,
    hosts: &[String],
) -> Result<StorageSpec> {
    let templated = spec
        .volumes
        .iter()
        .chain(spec.log_volumes.iter())
        .any(|p| p.to_string_lossy().contains("{rank}"));
    let same_host = hosts.iter().filter(|h| h.as_str() == host).count() > 1;
    if same_host && !templated {
        return Err(Error::usage(format!(
            "{} ranks run on host {host} and would share the database folders {:?}: put `{{rank}}` in \
             --path (and --log-path), e.g. --path /data/mailbench-{{rank}}",
            hosts.iter().filter(|h| h.as_str() == host).count(),
            spec.volumes
        )));
    }
    let x = |p: &Path| crate::expand_path(p, rank, host);
    spec.volumes = spec.volumes.iter().map(|p| x(p)).collect();
    spec.log_volumes = spec.log_volumes.iter().map(|p| x(p)).collect();
    for i in &mut spec.instances {
        i.volume = x(&i.volume);
        i.db_path = x(&i.db_path);
        i.log_dir = x(&i.log_dir);
    }
    spec.seed = spec
        .seed
        .wrapping_add((rank as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    Ok(spec)
}

pub(crate) struct Ctx<'a> {
    pub(crate) t: &'a dyn Transport,
    pub(crate) cmd: Command,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) host: String,
    pub(crate) hosts: Vec<String>,
    pub(crate) top: PathBuf,
    pub(crate) coord: Option<Coordinator>,
    pub(crate) member: Option<Member>,
    pub(crate) interrupt: Interrupt,
    pub(crate) opts: &'a Options,
}

impl Ctx<'_> {
    pub(crate) fn phase(&self, p: &str) {
        if let Some(c) = &self.coord {
            c.set_phase(p);
        }
    }

    /// The poll of every wait: a failed rank (rank 0 knows) or an interrupt.
    pub(crate) fn check(&self) -> Result<()> {
        if let Some(c) = &self.coord
            && let Some(f) = c.failures().first()
        {
            return Err(Error::runtime(f.reason.clone()));
        }
        if self.interrupt.raised() {
            return Err(Error::Interrupted);
        }
        Ok(())
    }

    pub(crate) fn rank_dir(&self) -> Result<RunDir> {
        if self.size == 1 {
            return RunDir::at(&self.top);
        }
        let dir = RunDir::at(&self.top.join(format!("rank-{}", self.rank)))?;
        dir.log.line(format!(
            "rank {} of {} on host {} ({} transport)",
            self.rank,
            self.size,
            self.host,
            self.t.kind()
        ));
        Ok(dir)
    }

    /// Every rank ready (a barrier), then one start instant from rank 0 (two
    /// seconds from now with several ranks, or `--start-at` if later), waited
    /// for on every rank.
    pub(crate) fn start_together(&self, log: &TestLog, what: &str) -> Result<SystemTime> {
        self.phase("the barrier before the load");
        self.t.barrier(&mut || self.check())?;
        let start = if self.rank == 0 {
            let soon = SystemTime::now() + Duration::from_secs(if self.size > 1 { 2 } else { 0 });
            let at = self.opts.start_at.map(|s| s.max(soon)).unwrap_or(soon);
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
        if !self.opts.quiet && self.rank == 0 {
            eprintln!(
                "mailbench: the load starts at {}",
                humantime::format_rfc3339_seconds(at)
            );
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
}

/// Runs `cmd` on this rank; on rank 0 also writes the aggregate. Creates
/// `output/<kind>-<time>/` (rank 0's name, shared with the ranks).
pub fn command(
    t: &dyn Transport,
    cmd: Command,
    share: Share,
    output: &Path,
    interrupt: Interrupt,
    opts: &Options,
) -> Result<Outcome> {
    let rank = t.rank();
    let size = t.size();
    let host = t.host();
    let mut ok = || interrupt_check(&interrupt);
    // Host names, the run folder and rank 0's address.
    let names = t.gather(host.as_bytes(), &Vec::new, &mut ok)?;
    let hosts_here: Vec<String> = names
        .into_iter()
        .map(|n| String::from_utf8_lossy(&n.unwrap_or_default()).into_owned())
        .collect();
    // Every rank resolves and checks its share before rank 0 creates the run
    // folder: bad input on any rank is an error on every rank, nothing written.
    let hosts_all: Vec<String> = {
        let bytes = serde_json::to_vec(&hosts_here).map_err(|e| Error::runtime(e.to_string()))?;
        serde_json::from_slice(&t.broadcast(&bytes, &mut ok)?)
            .map_err(|e| Error::runtime(format!("host names from rank 0: {e}")))?
    };
    let part = resolve_share(share, cmd, rank, size, &host, &hosts_all, opts);
    agree(t, &part, &hosts_all, &mut ok)?;
    let part = part?;
    let mut coord = None;
    let setup = if rank == 0 {
        let dir = RunDir::create(output, cmd.kind())?;
        let top = dir.path.clone();
        let endpoint = if size > 1 {
            let (c, ep) = Coordinator::start(
                hosts_here.clone(),
                opts.listen.as_deref(),
                opts.watch,
                failure_hook(top.clone(), cmd, hosts_here.clone(), interrupt.clone()),
                if matches!(cmd, Command::MailRun | Command::MailSweep) {
                    let quiet = opts.quiet;
                    Box::new(move |parts: &[LiveMsg]| {
                        if !quiet {
                            crate::mail::print_live(parts, size)
                        }
                    })
                } else {
                    interval_hook(size, opts.quiet)
                },
            )?;
            dir.log.line(format!(
                "{size} ranks on {:?}; rank 0 listens on port {} at {:?}",
                hosts_here, ep.port, ep.addrs
            ));
            coord = Some(c);
            Some(ep)
        } else {
            None
        };
        Setup {
            dir: top,
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
    let bytes = serde_json::to_vec(&setup).map_err(|e| Error::runtime(e.to_string()))?;
    let setup: Setup = serde_json::from_slice(&t.broadcast(&bytes, &mut ok)?)
        .map_err(|e| Error::runtime(format!("setup from rank 0: {e}")))?;
    let member = match (&setup.endpoint, rank) {
        (Some(ep), r) if r > 0 => Some(Member::connect(ep, rank, &host, interrupt.clone())?),
        _ => None,
    };
    let ctx = Ctx {
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
        opts,
    };
    let own = match part {
        RankShare::Storage(spec) => rank_part(&ctx, *spec),
        RankShare::Mail(o) => return crate::mail::run(ctx, *o),
        RankShare::MailSweep(o, plan) => return crate::mail_sweep::run(ctx, *o, plan),
    };
    finish(ctx, own)
}

/// A rank's share, resolved and checked before anything is written.
enum RankShare {
    Storage(Box<StorageSpec>),
    Mail(Box<mailbench_mail::options::Resolved>),
    MailSweep(
        Box<mailbench_mail::options::Resolved>,
        mailbench_results::mail::sweep::SweepPlan,
    ),
}

fn resolve_share(
    share: Share,
    cmd: Command,
    rank: usize,
    size: usize,
    host: &str,
    hosts: &[String],
    opts: &Options,
) -> Result<RankShare> {
    match share {
        Share::Mail(resolve) => Ok(RankShare::Mail(Box::new(resolve(rank, size, host)?))),
        Share::MailSweep(resolve, plan) => Ok(RankShare::MailSweep(
            Box::new(resolve(rank, size, host)?),
            plan.clone(),
        )),
        Share::Storage(resolve) => {
            let spec = resolve(rank, host, hosts)?;
            let sharing = hosts.iter().filter(|h| *h == host).count();
            if cmd == Command::Backup
                && let Some(to) = &opts.backup_to
                && sharing > 1
                && !to.to_string_lossy().contains("{rank}")
            {
                return Err(Error::usage(format!(
                    "{sharing} ranks run on host {host} and would copy into the same folder {}: \
                     put `{{rank}}` in --to, e.g. --to /backup/mailbench-{{rank}}",
                    to.display()
                )));
            }
            Ok(RankShare::Storage(Box::new(spec)))
        }
    }
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
    part: &Result<RankShare>,
    hosts: &[String],
    ok: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let mine = part.as_ref().err().map(|e| Refusal {
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
        let code = refusals.first().map(|(_, x)| x.code);
        code.map(|code| Refusal {
            code,
            message: if t.size() == 1 {
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
            },
        })
    } else {
        None
    };
    let bytes = serde_json::to_vec(&verdict).map_err(|e| Error::runtime(e.to_string()))?;
    let verdict: Option<Refusal> = serde_json::from_slice(&t.broadcast(&bytes, ok)?)
        .map_err(|e| Error::runtime(format!("the ranks' check from rank 0: {e}")))?;
    match verdict {
        Some(r) => Err(r.error()),
        None => Ok(()),
    }
}

fn interrupt_check(i: &Interrupt) -> Result<()> {
    if i.raised() {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

/// This rank's own test; its result.json text.
fn rank_part(ctx: &Ctx, spec: StorageSpec) -> Result<(RunDir, Value)> {
    let dir = ctx.rank_dir()?;
    dir.log.set_echo(ctx.opts.verbose);
    match ctx.cmd {
        Command::MailRun | Command::MailSweep => Err(Error::runtime(
            "a mail command was given a storage share (a bug: please report it)",
        )),
        Command::Init => init_part(ctx, spec, dir),
        Command::Verify => {
            ctx.phase("verification");
            let started = std::time::Instant::now();
            let header = RunHeader::begin("storage-verify");
            let v = mailbench_storage::verify::verify_all(&spec, &ctx.interrupt)?;
            let mut r = StorageVerifyResult::new(header, v, started.elapsed());
            r.rank = Some(ctx.rank);
            written(dir, AnyResult::StorageVerify(Box::new(r)))
        }
        Command::Backup => {
            ctx.phase("backup");
            let to = ctx
                .opts
                .backup_to
                .as_ref()
                .map(|p| crate::expand_path(p, ctx.rank, &ctx.host));
            let r =
                mailbench_storage::backup::run_backup(&spec, &dir, to.as_deref(), &ctx.interrupt)?;
            written(dir, AnyResult::StorageBackup(Box::new(r)))
        }
        Command::Recover => recover_part(ctx, spec, dir),
        Command::Run => run_part(ctx, spec, dir),
    }
}

/// `storage init` on this rank (interrupted: a partial result, as on one host).
fn init_part(ctx: &Ctx, spec: StorageSpec, dir: RunDir) -> Result<(RunDir, Value)> {
    ctx.phase("database creation");
    let started = std::time::Instant::now();
    let mut run = RunHeader::begin("storage-init");
    let (init, verdict) = match mailbench_storage::init::init_all(&spec, &dir.log, &ctx.interrupt) {
        // Ctrl-C: a partial result, as on one host; the creation
        // resumes where it stopped.
        Err(Error::Interrupted) => {
            dir.log.line("stopped: interrupted");
            (
                mailbench_results::storage::init::InitSummary {
                    seconds: started.elapsed().as_secs_f64(),
                    ..Default::default()
                },
                init_interrupted(),
            )
        }
        r => (r?, Verdict::from_reasons(Vec::new())),
    };
    run.finish(started.elapsed());
    let r = StorageInitResult {
        run,
        verdict,
        init,
        spec,
        rank: Some(ctx.rank),
    };
    written(dir, AnyResult::StorageInit(Box::new(r)))
}

/// `storage recover` on this rank (rank 0 names its phases).
fn recover_part(ctx: &Ctx, spec: StorageSpec, dir: RunDir) -> Result<(RunDir, Value)> {
    ctx.phase("recovery");
    let quiet = ctx.opts.quiet || ctx.rank > 0;
    let mut phase = |t: &str| {
        if !quiet {
            eprintln!("mailbench: rank 0: {t}");
        }
    };
    let r = mailbench_storage::recover::run_recover(
        &spec,
        &dir,
        ctx.opts.log_files,
        &ctx.interrupt,
        &mut phase,
    )?;
    written(dir, AnyResult::StorageRecover(Box::new(r)))
}

/// `storage run` on this rank: its databases created, the start together with the
/// other ranks, the load (live figures to rank 0).
fn run_part(ctx: &Ctx, spec: StorageSpec, dir: RunDir) -> Result<(RunDir, Value)> {
    ctx.phase("database creation");
    if !ctx.opts.quiet && ctx.rank == 0 {
        eprintln!(
            "mailbench: {} rank(s): creating databases, then starting together",
            ctx.size
        );
    }
    let init = mailbench_storage::init::init_all(&spec, &dir.log, &ctx.interrupt)?;
    match ctx.start_together(&dir.log, "databases ready") {
        // Ctrl-C before the start: a partial result all the same.
        Err(Error::Interrupted) => {
            let r = mailbench_storage::run::interrupted_before_start(&spec, &dir, init)?;
            return written(dir, AnyResult::StorageRun(Box::new(r)));
        }
        other => other?,
    };
    ctx.phase("the load");
    let mut progress = RankProgress {
        seq: 0,
        coord: ctx.coord.as_ref(),
        member: ctx.member.as_ref(),
        echo: if ctx.size == 1 {
            Some(mailbench_runner::progress::terminal(ctx.opts.quiet))
        } else {
            None
        },
        phases: ctx.rank == 0 && !ctx.opts.quiet,
    };
    let mut result = mailbench_storage::run::run(
        &spec,
        &dir,
        &ctx.interrupt,
        &mut progress,
        ctx.opts.ack_stream,
    )?;
    drop(progress);
    if result.init.as_ref().is_some_and(|i| i.written_bytes == 0) {
        result.init = Some(init);
    }
    written(dir, AnyResult::StorageRun(Box::new(result)))
}

/// The verdict of a database creation stopped by Ctrl-C / SIGTERM.
fn init_interrupted() -> Verdict {
    Verdict {
        status: Status::Interrupted,
        reasons: vec![
            "Database creation was interrupted: run `mailbench storage init` again \
             (same flags) to finish it where it stopped."
                .into(),
        ],
    }
}

/// This rank's result written through the one output path; its value.
fn written(dir: RunDir, r: AnyResult) -> Result<(RunDir, Value)> {
    mailbench_runner::write_files(&dir, &r)?;
    let v = r.to_value().map_err(|e| Error::runtime(e.to_string()))?;
    Ok((dir, v))
}

struct RankProgress<'a> {
    seq: u64,
    coord: Option<&'a Coordinator>,
    member: Option<&'a Member>,
    echo: Option<Box<dyn Progress>>,
    phases: bool,
}

impl Progress for RankProgress<'_> {
    fn phase(&mut self, text: &str) {
        if let Some(e) = &mut self.echo {
            e.phase(text);
        } else if self.phases {
            eprintln!("mailbench: rank 0: {text}");
        }
    }
    fn interval(&mut self, p: &LiveFigures) {
        self.seq += 1;
        if let Some(e) = &mut self.echo {
            e.interval(p);
        }
        let m = LiveMsg::from_live(self.seq, p);
        if let Some(c) = self.coord {
            c.local_interval(m);
        } else if let Some(m2) = self.member {
            m2.interval(m);
        }
    }
}

fn interval_hook(size: usize, quiet: bool) -> IntervalHook {
    Box::new(move |parts: &[LiveMsg]| {
        if quiet {
            return;
        }
        eprintln!("{}", LiveMsg::aggregate(parts).progress_line(Some(size)));
    })
}

/// Rank 0, the moment a rank fails: a Fail result naming the host (the job
/// may be killed soon after; a sweep's is written by the sweep), then stop
/// the local test.
fn failure_hook(
    top: PathBuf,
    cmd: Command,
    hosts: Vec<String>,
    interrupt: Interrupt,
) -> FailureHook {
    let written = Arc::new(Mutex::new(()));
    Box::new(move |f: &Failure, all: &[Failure]| {
        let _g = written.lock();
        eprintln!("mailbench: FAIL: {}", f.reason);
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
            mailbench_runner::output::write_failed(&top, &failed, Some(&summary));
        }
        interrupt.raise();
    })
}

/// Rank 0 itself failed: say so, stop the others, write the Fail result,
/// end the job.
fn rank0_failed(ctx: &Ctx, c: &Coordinator, e: &Error) {
    let msg = format!("rank 0 on host {} failed: {e}", ctx.host);
    eprintln!("mailbench: {msg}");
    c.stop_all(&msg);
    let f = Failure {
        rank: 0,
        host: ctx.host.clone(),
        reason: msg,
        at: mailbench_base::host::now_rfc3339(),
    };
    let mut all = c.failures();
    all.insert(0, f);
    let failed = RanksFailed::new(ctx.cmd.kind(), &ctx.hosts, &all);
    mailbench_runner::output::write_failed(&ctx.top, &failed, None);
    if ctx.size > 1 {
        ctx.t.abort(e.exit_status().code());
    }
}

/// After the rank's own part: gather to rank 0, which writes the aggregate.
pub(crate) fn finish(ctx: Ctx, own: Result<(RunDir, Value)>) -> Result<Outcome> {
    let (dir, value) = match own {
        Ok(o) => o,
        Err(e) => {
            if let Some(m) = &ctx.member {
                m.fail(&e.to_string());
            }
            if let Some(c) = &ctx.coord {
                rank0_failed(&ctx, c, &e);
            }
            return Err(e);
        }
    };
    let part = Part {
        rank: ctx.rank,
        host: ctx.host.clone(),
        result: std::fs::read_to_string(dir.file("result.json")).unwrap_or_default(),
        intervals: std::fs::read_to_string(dir.file("intervals.jsonl")).unwrap_or_default(),
    };
    if ctx.size == 1 {
        let summary = std::fs::read_to_string(dir.file("summary.txt")).unwrap_or_default();
        return Ok(Outcome::of_value(&value, dir.path, summary));
    }
    ctx.phase("the gathering of results");
    let bytes = serde_json::to_vec(&part).map_err(|e| Error::runtime(e.to_string()))?;
    let coord = ctx.coord.as_ref();
    let skip = || coord.map(|c| c.failed_ranks()).unwrap_or_default();
    // Rank 0 waits for every rank that has not failed; failures are skipped.
    let gathered = ctx.t.gather(&bytes, &skip, &mut || {
        if ctx.rank > 0 {
            interrupt_check(&ctx.interrupt)
        } else {
            Ok(())
        }
    })?;
    if let Some(m) = ctx.member {
        m.done();
        return Ok(Outcome::of_value(&value, dir.path, String::new()));
    }
    let Some(coord) = ctx.coord else {
        return Err(Error::runtime("rank 0 has no coordinator"));
    };
    let failures = coord.failures();
    let mut parts: Vec<Part> = Vec::new();
    for g in gathered.into_iter().flatten() {
        match serde_json::from_slice::<Part>(&g) {
            Ok(p) => parts.push(p),
            Err(e) => dir
                .log
                .line(format!("a rank's result could not be read: {e}")),
        }
    }
    let out = aggregate(&ctx.top, ctx.cmd, &ctx.hosts, &parts, &failures)?;
    coord.finish();
    if !failures.is_empty() {
        // The failed rank cannot take part in MPI_Finalize: end the job.
        eprintln!("{}", out.summary);
        eprintln!("Results: {}", out.dir.display());
        ctx.t.abort(ExitStatus::Fail.code());
    }
    Ok(out)
}

impl Outcome {
    fn new(verdict: Verdict, line: String, dir: PathBuf, summary: String) -> Outcome {
        Outcome {
            status: verdict.exit_status(),
            verdict,
            line,
            dir,
            summary,
        }
    }

    /// The outcome of a result of a known kind: its verdict and `--json` line.
    pub(crate) fn of_result(r: &AnyResult, dir: PathBuf, summary: String) -> Outcome {
        let line = mailbench_runner::output::json_line(r, &dir);
        Outcome::new(r.verdict().clone(), line, dir, summary)
    }

    /// The outcome of a result value: typed when it is a kind's result,
    /// else its verdict alone.
    fn of_value(v: &Value, dir: PathBuf, summary: String) -> Outcome {
        if let Ok(r) = AnyResult::from_value(v.clone()) {
            return Outcome::of_result(&r, dir, summary);
        }
        let verdict = v
            .get("verdict")
            .and_then(|x| serde_json::from_value::<Verdict>(x.clone()).ok())
            .unwrap_or(Verdict {
                status: Status::Error,
                reasons: vec!["the result has no verdict".into()],
            });
        let line = mailbench_runner::output::verdict_line(&verdict, &dir);
        Outcome::new(verdict, line, dir, summary)
    }
}
