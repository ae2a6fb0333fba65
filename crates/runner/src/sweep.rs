//! `mail sweep`, written once for any number of ranks: a series of mail runs
//! at growing user counts against one server, provisioned once for the
//! largest level; with `--find-max`, a search for the largest count that
//! passes every criterion (the rules are `mail::sweep`'s). Every level runs
//! on every rank (a load generator), each driving its slice of the level's
//! users; the ranks start each level at one instant; rank 0 takes the
//! level's results (one rank's own, or the exact merge of several, judged as
//! one run), decides the next level and tells every rank, so all ranks run
//! the same levels. Rank 0 writes the one `mail-sweep` result.
//!
//! Folders: `<sweep>/level-000020-users/` holds the level's result (one
//! rank), or the merged result with `rank-N/` inside (each generator's own);
//! with several ranks `<sweep>/rank-N/` holds a rank's test.log, its
//! provisioning and, for the local target, its own server.
//!
//! Ctrl-C: Open MPI's `mpirun` does not pass SIGINT on; it waits
//! `odls_base_sigkill_timeout` (1 s), sends the ranks SIGTERM, waits as long
//! again and sends SIGKILL. One second is too short for a level to stop (a
//! local target's Dovecot alone takes about a second), be gathered and
//! merged, so rank 0 keeps a [`Net`]: the sweep as it stands, written the
//! moment the interrupt flag rises, then rewritten in full if the ranks get
//! that far.

use crate::mail::{hooks, local_dir_of, share_of};
use crate::output::Outcome;
use crate::world::{Command, Common, Place, Run, drive, new_run_folder};
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::{RunDir, TestLog, write_atomic};
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_mail::options::Resolved;
use mailbench_mail::profile::{Profile, ProfileExt};
use mailbench_mail::sweep::{
    Progress, build, level_dir_name, level_line, level_of, next_of, not_run,
};
use mailbench_multihost::watch::{Coordinator, Failure};
use mailbench_results::disclosure::DisclosureToml;
use mailbench_results::mail::run::{MailRunResult, TargetInfo};
use mailbench_results::mail::sweep::{SweepDisclosure, SweepGenerators, SweepLevel, SweepPlan};
use mailbench_results::ranks::{Ranks, WithRanks};
use mailbench_results::{AnyResult, RunHeader, Status, Verdict};
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a rank that was interrupted still waits for rank 0's word
/// (rank 0 gathers, merges and writes in that time).
const INTERRUPTED_GRACE: Duration = Duration::from_secs(60);

/// What a sweep writes besides its levels: the `[disclosure]` section (its
/// full disclosure) and whether report.pdf is printed too.
#[derive(Debug, Clone, Default)]
pub struct SweepDocument {
    pub declared: DisclosureToml,
    pub pdf: bool,
}

/// `mail sweep` on this rank of the world: `base` holds every option (its
/// users the largest level), `plan` the levels or the search.
pub fn sweep(
    base: Resolved,
    plan: SweepPlan,
    doc: SweepDocument,
    start: Option<&str>,
    common: &Common,
) -> Result<ExitStatus> {
    let at = crate::mail::start_at(start)?;
    let resolve = |p: &Place| {
        if at.is_some() && p.size == 1 {
            return Err(Error::usage(
                "--start-at in `mail sweep` is the first level's start over MPI ranks \
                 (`mpirun ... mailbench mail sweep`); on one host a sweep starts each \
                 level when the previous ends",
            ));
        }
        let o = base_for_rank(base.clone(), &plan, p.rank, p.size, p.host)?;
        mailbench_mail::command::check(&o)?;
        Ok(o)
    };
    drive(Command::MailSweep, common, at, &resolve, |run, o| {
        run_sweep(run, o, plan.clone(), &doc)
    })
}

/// This rank's options for a sweep over `size` generators: every level must
/// give every generator at least one user (the smallest is checked: the
/// search never goes below it), and `--local-dir` needs `{rank}` (each
/// generator starts its own local server), expanded here. The users stay
/// the largest level's; each level takes its slice ([`share_of`]).
pub fn base_for_rank(
    mut o: Resolved,
    plan: &SweepPlan,
    rank: usize,
    size: usize,
    host: &str,
) -> Result<Resolved> {
    if size <= 1 {
        return Ok(o);
    }
    let smallest = plan.levels.first().copied().unwrap_or(0);
    if smallest < size as u64 {
        return Err(Error::usage(format!(
            "--users {}: the level of {smallest} users cannot be split over {size} load \
             generators; give every level at least one user per generator",
            plan.users
        )));
    }
    o.local_dir = local_dir_of(&o, rank, host)?;
    Ok(o)
}

/// What a rank sends rank 0 after a level.
#[derive(Serialize, Deserialize)]
struct LevelPart {
    rank: usize,
    host: String,
    /// result.json and intervals.jsonl of the rank's run, as written.
    result: String,
    intervals: String,
    /// The run could not run (or was stopped before it measured).
    error: Option<String>,
    interrupted: bool,
}

/// Rank 0's word after each level: the next level, or the end with the
/// sweep's verdict.
#[derive(Serialize, Deserialize)]
enum Step {
    Level(u64),
    End(Verdict),
}

/// The sweep on this rank; rank 0 also writes the sweep's result.
fn run_sweep(run: Run, base: Resolved, plan: SweepPlan, doc: &SweepDocument) -> Result<Outcome> {
    let started = Instant::now();
    let header = RunHeader::begin("mail-sweep");
    let rdir = run.rank_dir()?;
    let profile = Profile::load(&base.profile)?;
    let config = base.clone();
    let mut base = base;
    let made_local = own_local_target(&mut base, &rdir);
    let remove_local = || {
        if let Some(d) = &made_local {
            // The sweep's own local target: its mailboxes are not a result.
            let _ = std::fs::remove_dir_all(d);
        }
    };
    if let Err(e) = provision(&run, &mut base, &rdir) {
        // Every rank knows (and says so): end together.
        remove_local();
        rdir.log.line(format!("the sweep ended: {e}"));
        run.close()?;
        return Err(e);
    }
    // The server host as its exporters report it, read once (rank 0).
    let disclosure = (run.rank == 0).then(|| SweepDisclosure {
        declared: doc.declared.clone(),
        servers: mailbench_mail::servermetrics::server_configs(&config),
    });
    let net = (run.rank == 0).then(|| {
        Net::new(Standing {
            disclosure: disclosure.clone(),
            header: header.clone(),
            started,
            config: config.clone(),
            plan: plan.clone(),
            profile: profile.clone(),
            hosts: run.hosts.clone(),
            levels: Vec::new(),
            target: None,
            running: None,
        })
    });
    let p = std::thread::scope(|s| {
        if let Some(n) = &net {
            let (coord, interrupt, top) = (run.coord.as_ref(), &run.interrupt, &run.top);
            s.spawn(move || n.watch(coord, interrupt, top));
        }
        let p = levels(&run, &base, &plan, &rdir, net.as_ref());
        if let Some(n) = &net {
            n.stop.store(true, Ordering::Relaxed);
        }
        p
    });
    remove_local();
    match p {
        Ok(p) if run.rank == 0 => {
            let written = Written {
                header,
                started,
                config,
                plan,
                profile,
                disclosure,
                pdf: doc.pdf,
            };
            conclude(run, written, p)
        }
        Ok(_) => end_of_member(run),
        Err(e) => {
            // This rank alone: tell the others to stop.
            rdir.log.line(format!("the sweep ended: {e}"));
            if let Some(m) = &run.member {
                m.fail(&e.to_string());
            }
            if let Some(c) = &run.coord {
                c.stop_all(&format!("rank 0 on host {}: {e}", run.host));
            }
            Err(e)
        }
    }
}

/// The local target without `--local-dir`: a folder of this rank's own
/// (`local-target` in its folder), so its mailboxes carry from level to
/// level; returned to be removed at the end.
fn own_local_target(base: &mut Resolved, rdir: &RunDir) -> Option<PathBuf> {
    if base.target != "local" || base.local_dir.is_some() {
        return None;
    }
    let d = rdir.path.join("local-target");
    base.local_dir = Some(d.clone());
    Some(d)
}

/// Provisions once before the first level, then every level runs with
/// `--skip-setup`. A shared server: each rank sets up its slice of the
/// largest level (together they set up every user). The local target:
/// each rank's own server gets every user of the largest level. Every
/// rank learns whether all succeeded.
fn provision(run: &Run, base: &mut Resolved, rdir: &RunDir) -> Result<()> {
    let mine = if base.skip_setup || run.interrupt.raised() {
        Ok(())
    } else {
        run.phase("provisioning");
        provision_rank(run, base, rdir)
    };
    base.skip_setup = true;
    run.all_ok("provisioning", mine)
}

fn provision_rank(run: &Run, base: &Resolved, rdir: &RunDir) -> Result<()> {
    let o = if base.target == "local" {
        base.clone()
    } else {
        share_of(base.clone(), run.rank, run.size)?
    };
    rdir.log.line(format!(
        "setup: provisioning users {}..{} once",
        o.first_user,
        o.first_user + o.users.saturating_sub(1)
    ));
    if !run.common.json {
        run.say(&format!(
            "mail sweep: provisioning {} users once{}",
            base.users,
            run.over_generators()
        ));
    }
    let users = o.users;
    let sdir = new_run_folder(&rdir.path, "mail-setup")?;
    sdir.log.set_echo(run.common.verbose);
    let r = mailbench_mail::command::setup(o, &sdir, &run.interrupt)?;
    let status = r.verdict.status;
    let reasons = r.verdict.reasons.join("; ");
    crate::output::write_files(&sdir, &AnyResult::MailSetup(Box::new(r)))?;
    if status != Status::Pass && !run.interrupt.raised() {
        return Err(Error::runtime(format!(
            "provisioning {users} users failed ({reasons}): see {}",
            sdir.path.display()
        )));
    }
    Ok(())
}

/// The levels, in lockstep: rank 0 names the next, every rank runs its
/// slice of it, rank 0 takes it. Rank 0's progress is the sweep's.
fn levels(
    run: &Run,
    base: &Resolved,
    plan: &SweepPlan,
    rdir: &RunDir,
    net: Option<&Net>,
) -> Result<Progress> {
    let mut p = Progress::default();
    for index in 0u64.. {
        let step = if run.rank == 0 {
            decide(run, plan, &mut p)
        } else {
            None
        };
        let Some(users) = next(run, step)? else { break };
        if let Some(n) = net {
            n.update(&p, Some(users));
        }
        let (part, own) = run_level(run, base, users, index, rdir);
        if run.size == 1 {
            take_own(run, users, part, own, &mut p);
        } else {
            let bytes = serde_json::to_vec(&part).map_err(|e| Error::runtime(e.to_string()))?;
            run.phase("the gathering of a level's results");
            let skip = || run.failed_ranks();
            // Rank 0 waits for every rank that has not failed; the others only send.
            let gathered = run.t.gather(&bytes, &skip, &mut || Ok(()))?;
            if run.rank == 0 {
                take_level(run, users, gathered, &mut p)?;
            }
        }
        if let Some(n) = net {
            n.update(&p, None);
        }
    }
    Ok(p)
}

/// What rank 0 knows of the sweep between levels: enough to write it.
struct Standing {
    header: RunHeader,
    started: Instant,
    config: Resolved,
    plan: SweepPlan,
    profile: Profile,
    hosts: Vec<String>,
    disclosure: Option<SweepDisclosure>,
    levels: Vec<SweepLevel>,
    target: Option<TargetInfo>,
    /// The level the ranks are running (not yet taken).
    running: Option<u64>,
}

/// Rank 0's safety net: the sweep as it stands, written within a poll
/// (20 ms) of the interrupt flag rising — Ctrl-C or SIGTERM (mpirun's, a
/// second before its SIGKILL), or a generator that failed (the watch
/// raises the flag). The running level is a row of its own, interrupted
/// (or an error naming the failed generators). Written once; the sweep's
/// own end, if the ranks get there, writes the full result over it.
struct Net {
    standing: Mutex<Standing>,
    stop: AtomicBool,
}

impl Net {
    fn new(standing: Standing) -> Net {
        Net {
            standing: Mutex::new(standing),
            stop: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Standing> {
        self.standing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The levels taken so far and the one now running.
    fn update(&self, p: &Progress, running: Option<u64>) {
        let mut st = self.lock();
        st.levels = p.levels.clone();
        st.target = p.target.clone();
        st.running = running;
    }

    /// Until the sweep's end: on the flag, the sweep so far written.
    fn watch(&self, coord: Option<&Coordinator>, interrupt: &Interrupt, top: &Path) {
        while !self.stop.load(Ordering::Relaxed) {
            if interrupt.raised() {
                let failures = coord.map(|c| c.failures()).unwrap_or_default();
                let (r, n) = self.sweep_so_far(failures);
                let written = TestLog::open(&top.join("test.log")).and_then(|log| {
                    let dir = RunDir {
                        path: top.to_path_buf(),
                        log,
                    };
                    crate::output::write_files(&dir, &r)?;
                    dir.log.line(format!(
                        "the sweep so far ({n} levels finished): {}",
                        r.verdict().label()
                    ));
                    Ok(())
                });
                if let Err(e) = written {
                    mailbench_base::secrets::warn(&format!(
                        "mailbench: the sweep so far could not be written: {e}"
                    ));
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The sweep's result from what rank 0 has taken, and the number of
    /// levels finished.
    fn sweep_so_far(&self, failures: Vec<Failure>) -> (AnyResult, usize) {
        let st = self.lock();
        let mut levels = st.levels.clone();
        let finished = levels.len();
        let broken = (!failures.is_empty()).then(|| {
            let why: Vec<&str> = failures.iter().map(|f| f.reason.as_str()).collect();
            why.join("; ")
        });
        if let Some(users) = st.running {
            let reason = match &broken {
                None => format!(
                    "the level of {users} users was interrupted before the generators' results \
                     of it were gathered"
                ),
                Some(b) => format!("the level of {users} users could not run: {b}"),
            };
            levels.push(not_run(
                users,
                reason,
                broken.is_none(),
                &level_dir_name(users),
            ));
        }
        let p = Progress {
            levels,
            target: st.target.clone(),
            interrupted: broken.is_none(),
            broken,
        };
        let mut header = st.header.clone();
        header.finish(st.started.elapsed());
        let generators = generators(&st.hosts, failures);
        let mut r = build(
            header,
            st.config.clone(),
            st.plan.clone(),
            st.profile.clone(),
            p,
            generators,
        );
        r.disclosure = st.disclosure.clone();
        (AnyResult::MailSweep(Box::new(r)), finished)
    }
}

/// The sweep's generators when several ran every level together (none for
/// one: its result is a one-generator sweep's).
fn generators(hosts: &[String], failures: Vec<Failure>) -> Option<SweepGenerators> {
    (hosts.len() > 1).then(|| SweepGenerators {
        count: hosts.len(),
        hosts: hosts.to_vec(),
        failures,
    })
}

/// Rank 0: the next level, or None when the sweep is over.
fn decide(run: &Run, plan: &SweepPlan, p: &mut Progress) -> Option<u64> {
    if p.broken.is_some() || p.interrupted {
        return None;
    }
    if run.interrupt.raised() {
        p.interrupted = true;
        return None;
    }
    next_of(plan, &p.levels)
}

/// Rank 0's next level to every rank (None: the sweep is over; the
/// verdict follows in [`conclude`]).
fn next(run: &Run, step: Option<u64>) -> Result<Option<u64>> {
    let msg = step
        .map(Step::Level)
        .unwrap_or(Step::End(Verdict::from_reasons(Vec::new())));
    match receive(run, &msg)? {
        Step::Level(n) => Ok(Some(n)),
        Step::End(_) => Ok(None),
    }
}

/// Rank 0's `msg` on every rank. A rank that was interrupted (Ctrl-C
/// reaches every rank) still waits a while for rank 0's word.
fn receive(run: &Run, msg: &Step) -> Result<Step> {
    let bytes = serde_json::to_vec(msg).map_err(|e| Error::runtime(e.to_string()))?;
    let mut since: Option<Instant> = None;
    let mut check = || match run.check() {
        Err(Error::Interrupted) => {
            let t = since.get_or_insert_with(Instant::now);
            if t.elapsed() > INTERRUPTED_GRACE {
                Err(Error::Interrupted)
            } else {
                Ok(())
            }
        }
        other => other,
    };
    let b = run.t.broadcast(&bytes, &mut check)?;
    serde_json::from_slice(&b).map_err(|e| Error::runtime(format!("word from rank 0: {e}")))
}

/// This rank's slice of one level: an ordinary mail run in its folder of
/// the level, started with the others; its part for rank 0 and its result.
fn run_level(
    run: &Run,
    base: &Resolved,
    users: u64,
    index: u64,
    rdir: &RunDir,
) -> (LevelPart, Option<MailRunResult>) {
    let name = level_dir_name(users);
    let mut part = LevelPart {
        rank: run.rank,
        host: run.host.clone(),
        result: String::new(),
        intervals: String::new(),
        error: None,
        interrupted: false,
    };
    run.phase(&format!("the level of {users} users"));
    if !run.common.json {
        run.say(&format!(
            "mail sweep: level {users} users{}",
            run.over_generators()
        ));
    }
    let mut o = base.clone();
    o.users = users as usize;
    let level = share_of(o, run.rank, run.size).and_then(|o| {
        let dir = run.part_dir(&run.top.join(&name))?;
        dir.log.set_echo(run.common.verbose);
        rdir.log.line(format!(
            "level {users} users: users {}..{} in {}",
            o.first_user,
            o.first_user + o.users.saturating_sub(1),
            dir.path.display()
        ));
        // Interval numbers distinct per level, so rank 0 never pairs
        // intervals of different levels.
        let seq = Cell::new(index * 1_000_000);
        let slice = o.users;
        let out = mailbench_mail::Output {
            json: false,
            // No live line per interval from inside a sweep.
            quiet: true,
        };
        let m = mailbench_mail::command::run(o, &dir, &out, hooks(run, slice, &seq))?;
        let r = AnyResult::MailRun(Box::new(m.result));
        crate::output::write_files(&dir, &r)?;
        Ok((dir, r))
    });
    match level {
        Ok((d, r)) => {
            // What rank 0 recomputes from: a file that does not read is this
            // rank's error, named, never sent on empty.
            let files = crate::aggregate::read_own(&d, "result.json").and_then(|res| {
                Ok((
                    res,
                    crate::aggregate::read_own_if_any(&d, "intervals.jsonl")?,
                ))
            });
            match files {
                Ok((res, intervals)) => (part.result, part.intervals) = (res, intervals),
                Err(e) => {
                    level_failed(run, users, rdir, &e, &mut part);
                    return (part, None);
                }
            }
            part.interrupted = r.verdict().status == Status::Interrupted;
            let own = match r {
                AnyResult::MailRun(m) => Some(*m),
                _ => None,
            };
            (part, own)
        }
        Err(e) => {
            level_failed(run, users, rdir, &e, &mut part);
            (part, None)
        }
    }
}

/// A level this rank could not run: named in its log, the others stopped
/// (they may wait at the level's start) unless it was interrupted.
fn level_failed(run: &Run, users: u64, rdir: &RunDir, e: &Error, part: &mut LevelPart) {
    part.interrupted = matches!(e, Error::Interrupted) || run.interrupt.raised();
    rdir.log
        .line(format!("level {users} users could not run: {e}"));
    if !part.interrupted {
        let why = format!("the level of {users} users could not run: {e}");
        if let Some(m) = &run.member {
            m.fail(&why);
        }
        if let Some(c) = &run.coord {
            c.stop_all(&format!("rank 0 on host {}: {why}", run.host));
        }
    }
    part.error = Some(e.to_string());
}

/// One rank: the level's row from its own result (written in the level's
/// folder), or the reason it could not run.
fn take_own(run: &Run, users: u64, part: LevelPart, own: Option<MailRunResult>, p: &mut Progress) {
    let name = level_dir_name(users);
    let level = match (own, part.error) {
        (Some(r), _) => {
            p.target.get_or_insert_with(|| r.target.clone());
            level_of(&r, &name)
        }
        (None, error) => {
            let why = error.unwrap_or_else(|| "no result".into());
            let reason = format!("the level of {users} users could not run: {why}");
            if !part.interrupted {
                p.broken = Some(reason.clone());
            }
            not_run(users, reason, part.interrupted, &name)
        }
    };
    let stopped = level.status == Status::Interrupted || run.interrupt.raised();
    p.interrupted |= stopped && p.broken.is_none();
    said_level(run, &level, None);
    p.levels.push(level);
}

/// A level's row in the sweep's test log and on stderr.
fn said_level(run: &Run, level: &SweepLevel, log: Option<&TestLog>) {
    let line = level_line(level);
    match log {
        Some(l) => l.line(&line),
        None => {
            if let Ok(l) = TestLog::open(&run.top.join("test.log")) {
                l.line(&line);
            }
        }
    }
    if !run.common.json {
        run.say(&format!("mail sweep: {line}"));
    }
}

/// Rank 0 over several ranks: one level's parts — every rank's result
/// beside the merge (copied when the ranks do not share the results
/// folder), the merged mail-run result judged as one run, its row of the
/// table.
fn take_level(
    run: &Run,
    users: u64,
    gathered: Vec<Option<Vec<u8>>>,
    p: &mut Progress,
) -> Result<()> {
    let name = level_dir_name(users);
    let dir = RunDir::at(&run.top.join(&name))?;
    let failures = run.failures();
    let mut reasons: Vec<String> = failures.iter().map(|f| f.reason.clone()).collect();
    let mut interrupted = run.interrupt.raised() && failures.is_empty();
    let files = level_files(&dir, gathered, &mut reasons, &mut interrupted)?;
    let mut level = None;
    if let Some((result, summary)) = crate::aggregate::mail_runs(&dir, &files, &reasons)? {
        let gathered: Vec<usize> = files.iter().map(|f| f.0).collect();
        if let AnyResult::MailRun(r) = &result {
            level = Some(level_of(r, &name));
            p.target.get_or_insert_with(|| r.target.clone());
        }
        let with = WithRanks {
            result,
            multihost: Ranks::of(&run.hosts, &gathered, &failures),
        };
        crate::output::write_with(&dir, &with, &summary, true)?;
    }
    let level = match level {
        Some(l) if reasons.is_empty() => l,
        _ => {
            let why = if reasons.is_empty() {
                "no generator's result arrived".to_string()
            } else {
                reasons.join("; ")
            };
            let stopped = interrupted && reasons.is_empty();
            let reason = if stopped {
                format!("the level of {users} users was interrupted before a generator measured it")
            } else {
                format!("the level of {users} users could not run: {why}")
            };
            if !stopped {
                p.broken = Some(reason.clone());
            }
            not_run(users, reason, stopped, &name)
        }
    };
    p.interrupted |= (interrupted || level.status == Status::Interrupted) && p.broken.is_none();
    said_level(run, &level, Some(&dir.log));
    p.levels.push(level);
    Ok(())
}

/// The gathered parts of a level: each generator's files in the level's
/// `rank-N/` (written when the ranks do not share the results folder), as
/// (rank, host, result file); errors and interruptions noted.
fn level_files(
    dir: &RunDir,
    gathered: Vec<Option<Vec<u8>>>,
    reasons: &mut Vec<String>,
    interrupted: &mut bool,
) -> Result<Vec<(usize, String, PathBuf)>> {
    let mut files = Vec::new();
    for g in gathered.into_iter().flatten() {
        let part = match serde_json::from_slice::<LevelPart>(&g) {
            Ok(p) => p,
            Err(e) => {
                reasons.push(format!(
                    "a generator's part of the level could not be read ({} bytes: {e})",
                    g.len()
                ));
                continue;
            }
        };
        *interrupted |= part.interrupted;
        if let Some(e) = &part.error {
            if !part.interrupted {
                reasons.push(format!("rank {} on host {}: {e}", part.rank, part.host));
            }
            continue;
        }
        let rd = dir.path.join(format!("rank-{}", part.rank));
        let f = rd.join("result.json");
        if !f.exists() {
            std::fs::create_dir_all(&rd).map_err(|e| Error::io("cannot create", &rd, e))?;
            write_atomic(&f, part.result.as_bytes())?;
            write_atomic(&rd.join("intervals.jsonl"), part.intervals.as_bytes())?;
        }
        files.push((part.rank, part.host, f));
    }
    Ok(files)
}

/// What rank 0 writes at the sweep's end besides the levels.
struct Written {
    header: RunHeader,
    started: Instant,
    config: Resolved,
    plan: SweepPlan,
    profile: Profile,
    disclosure: Option<SweepDisclosure>,
    pdf: bool,
}

/// Rank 0 after the last level: the sweep's result written (and printed to
/// PDF when asked), the verdict to every rank, the side channel closed (or
/// the job ended when a rank failed: it cannot take part in MPI's
/// finalisation).
fn conclude(run: Run, w: Written, p: Progress) -> Result<Outcome> {
    let mut header = w.header;
    header.finish(w.started.elapsed());
    let failures = run.failures();
    let generators = generators(&run.hosts, failures.clone());
    let mut sweep = build(header, w.config, w.plan, w.profile, p, generators);
    sweep.disclosure = w.disclosure;
    let r = AnyResult::MailSweep(Box::new(sweep));
    let dir = RunDir {
        path: run.top.clone(),
        log: TestLog::open(&run.top.join("test.log"))?,
    };
    crate::output::write_files(&dir, &r)?;
    dir.log.line(format!("the sweep: {}", r.verdict().label()));
    if w.pdf {
        crate::pdf::print(&run.top, run.common);
    }
    let out = Outcome::of_result(&r, run.top.clone());
    if !failures.is_empty() {
        crate::output::print_before_abort(&out);
        run.t.abort(out.status.code());
    }
    receive(&run, &Step::End(r.verdict().clone()))?;
    run.close()?;
    Ok(out)
}

/// A rank other than 0 after the last level: the sweep's verdict from rank
/// 0 (so every rank exits with the same code), then done.
fn end_of_member(run: Run) -> Result<Outcome> {
    let verdict = match receive(&run, &Step::End(Verdict::from_reasons(Vec::new())))? {
        Step::End(v) => v,
        Step::Level(_) => {
            return Err(Error::runtime(
                "rank 0 named a level after the end of the sweep (a bug: please report it)",
            ));
        }
    };
    let top = run.top.clone();
    run.close()?;
    Ok(Outcome {
        status: verdict.exit_status(),
        line: crate::output::verdict_line(&verdict, &top),
        dir: top,
        summary: String::new(),
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(levels: &[u64]) -> SweepPlan {
        SweepPlan {
            users: levels
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            levels: levels.to_vec(),
            find_max: false,
            resolution: 1,
        }
    }

    fn options() -> Resolved {
        use mailbench_mail::options::{MailOptions, ResolveExt};
        Resolved::resolve(&MailOptions::default(), Duration::from_secs(8 * 3600)).unwrap()
    }

    #[test]
    fn every_level_gives_every_generator_a_user() {
        let o = options();
        assert!(base_for_rank(o.clone(), &plan(&[2, 4]), 1, 2, "h").is_ok());
        let e = base_for_rank(o.clone(), &plan(&[1, 4]), 1, 2, "h").unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{e}");
        assert!(e.to_string().contains("level of 1 users"), "{e}");
        // One generator: any level.
        assert!(base_for_rank(o, &plan(&[1]), 0, 1, "h").is_ok());
    }

    #[test]
    fn the_local_folder_of_each_generator_holds_its_rank() {
        let mut o = options();
        o.local_dir = Some(PathBuf::from("/tmp/mb-local"));
        assert!(base_for_rank(o.clone(), &plan(&[4]), 0, 2, "h").is_err());
        o.local_dir = Some(PathBuf::from("/tmp/mb-local-{rank}"));
        let b = base_for_rank(o, &plan(&[4]), 1, 2, "h").unwrap();
        assert_eq!(b.local_dir, Some(PathBuf::from("/tmp/mb-local-1")));
        assert_eq!(b.users, options().users, "users stay the largest level's");
    }
}
