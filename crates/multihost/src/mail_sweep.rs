//! `mail sweep` as one test over ranks: every level runs on every rank (a
//! load generator), each driving its slice of the level's users against
//! the same server; the ranks start each level at one instant (a barrier,
//! then rank 0's start time); rank 0 gathers the level's results, merges
//! them exactly (as `report merge`), judges the merge as one run, takes
//! the `--find-max` decision and tells every rank the next level, so all
//! ranks run the same levels. Rank 0 writes the one `mail-sweep` result.
//!
//! Folders: `<sweep>/rank-N/` (the rank's test.log, its provisioning and,
//! for the local target, its own server), `<sweep>/level-000020-users/`
//! (the level's merged mail-run result) with `rank-N/` inside (each
//! generator's own result of the level).
//!
//! Ctrl-C: Open MPI's `mpirun` does not pass SIGINT on; it waits
//! `odls_base_sigkill_timeout` (1 s), sends the ranks SIGTERM, waits as long
//! again and sends SIGKILL. One second is too short for a level to stop (a
//! local target's Dovecot alone takes about a second), be gathered and
//! merged, so rank 0 keeps a [`Net`]: the sweep as it stands, written the
//! moment the interrupt flag rises, then rewritten in full if the ranks get
//! that far.

use crate::mail::{hooks, local_dir_of, share_of};
use crate::storage::{Ctx, Outcome};
use crate::watch::{Coordinator, Failure};
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::{RunDir, TestLog, write_atomic};
use mailbench_base::{Error, Result};
use mailbench_mail::options::Resolved;
use mailbench_mail::profile::{Profile, ProfileExt};
use mailbench_mail::sweep::{
    Progress, build, level_dir_name, level_line, level_of, next_of, not_run,
};
use mailbench_results::mail::run::TargetInfo;
use mailbench_results::mail::sweep::{SweepGenerators, SweepLevel, SweepPlan};
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
pub(crate) fn run(ctx: Ctx, base: Resolved, plan: SweepPlan) -> Result<Outcome> {
    let started = Instant::now();
    let header = RunHeader::begin("mail-sweep");
    let rdir = ctx.rank_dir()?;
    rdir.log.set_echo(ctx.opts.verbose);
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
    if let Err(e) = provision(&ctx, &mut base, &rdir) {
        // Every rank knows (and says so): end together.
        remove_local();
        rdir.log.line(format!("the sweep ended: {e}"));
        close(ctx)?;
        return Err(e);
    }
    let net = (ctx.rank == 0).then(|| {
        Net::new(Standing {
            header: header.clone(),
            started,
            config: config.clone(),
            plan: plan.clone(),
            profile: profile.clone(),
            hosts: ctx.hosts.clone(),
            levels: Vec::new(),
            target: None,
            running: None,
        })
    });
    let p = std::thread::scope(|s| {
        if let Some(n) = &net {
            let (coord, interrupt, top) = (ctx.coord.as_ref(), &ctx.interrupt, &ctx.top);
            s.spawn(move || n.watch(coord, interrupt, top));
        }
        let p = levels(&ctx, &base, &plan, &rdir, net.as_ref());
        if let Some(n) = &net {
            n.stop.store(true, Ordering::Relaxed);
        }
        p
    });
    remove_local();
    match p {
        Ok(p) if ctx.rank == 0 => conclude(ctx, header, started, config, plan, profile, p),
        Ok(_) => end_of_member(ctx),
        Err(e) => {
            // This rank alone: tell the others to stop.
            rdir.log.line(format!("the sweep ended: {e}"));
            if let Some(m) = &ctx.member {
                m.fail(&e.to_string());
            }
            if let Some(c) = &ctx.coord {
                c.stop_all(&format!("rank 0 on host {}: {e}", ctx.host));
            }
            Err(e)
        }
    }
}

/// The side channel closed on every rank: the others say they are done
/// before rank 0 stops listening, so no one takes the close for a failure.
fn close(ctx: Ctx) -> Result<()> {
    if let Some(m) = ctx.member {
        m.done();
    }
    ctx.t.barrier(&mut || Ok(()))?;
    if let Some(c) = ctx.coord {
        c.finish();
    }
    Ok(())
}

/// The local target without `--local-dir`: a folder of this rank's own
/// (`rank-N/local-target`), so its mailboxes carry from level to level;
/// returned to be removed at the end.
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
fn provision(ctx: &Ctx, base: &mut Resolved, rdir: &RunDir) -> Result<()> {
    let mine = if base.skip_setup || ctx.interrupt.raised() {
        Ok(())
    } else {
        ctx.phase("provisioning");
        provision_rank(ctx, base, rdir)
    };
    base.skip_setup = true;
    all_ok(ctx, "provisioning", mine)
}

fn provision_rank(ctx: &Ctx, base: &Resolved, rdir: &RunDir) -> Result<()> {
    let o = if base.target == "local" {
        base.clone()
    } else {
        share_of(base.clone(), ctx.rank, ctx.size)?
    };
    rdir.log.line(format!(
        "setup: provisioning users {}..{} once",
        o.first_user,
        o.first_user + o.users.saturating_sub(1)
    ));
    if !ctx.opts.quiet && ctx.rank == 0 {
        eprintln!(
            "mail sweep: {} load generator(s): provisioning {} users once",
            ctx.size, base.users
        );
    }
    let out = mailbench_mail::Output {
        base: rdir.path.clone(),
        quiet: true,
        json: false,
        verbose: ctx.opts.verbose,
    };
    let users = o.users;
    let (sdir, r) = mailbench_mail::setup_command(o, &out)?;
    let status = r.verdict.status;
    let reasons = r.verdict.reasons.join("; ");
    mailbench_runner::write_files(&sdir, &AnyResult::MailSetup(Box::new(r)))?;
    if status != Status::Pass && !ctx.interrupt.raised() {
        return Err(Error::runtime(format!(
            "provisioning {users} users failed ({reasons}): see {}",
            sdir.path.display()
        )));
    }
    Ok(())
}

/// Every rank's outcome of a step to rank 0, rank 0's verdict back to all:
/// an error on any rank is an error on every rank, naming each.
fn all_ok(ctx: &Ctx, what: &str, mine: Result<()>) -> Result<()> {
    let msg: Option<String> = mine.err().map(|e| e.to_string());
    let bytes = serde_json::to_vec(&msg).map_err(|e| Error::runtime(e.to_string()))?;
    let skip = || {
        ctx.coord
            .as_ref()
            .map(|c| c.failed_ranks())
            .unwrap_or_default()
    };
    let gathered = ctx.t.gather(&bytes, &skip, &mut || ctx.check())?;
    let joined: Option<String> = if ctx.rank == 0 {
        let errs: Vec<String> = (gathered.into_iter().enumerate())
            .filter_map(|(r, g)| {
                let m = serde_json::from_slice::<Option<String>>(&g?).ok()??;
                let h = ctx.hosts.get(r).map(String::as_str).unwrap_or("?");
                Some(format!("rank {r} on host {h}: {m}"))
            })
            .collect();
        (!errs.is_empty()).then(|| errs.join("; "))
    } else {
        None
    };
    let bytes = serde_json::to_vec(&joined).map_err(|e| Error::runtime(e.to_string()))?;
    let back: Option<String> =
        serde_json::from_slice(&ctx.t.broadcast(&bytes, &mut || ctx.check())?)
            .map_err(|e| Error::runtime(format!("{what} outcome from rank 0: {e}")))?;
    match back {
        Some(m) => Err(Error::runtime(format!("{what} failed: {m}"))),
        None => Ok(()),
    }
}

/// The levels, in lockstep: rank 0 names the next, every rank runs its
/// slice of it, rank 0 gathers and judges. Rank 0's progress is the sweep's.
fn levels(
    ctx: &Ctx,
    base: &Resolved,
    plan: &SweepPlan,
    rdir: &RunDir,
    net: Option<&Net>,
) -> Result<Progress> {
    let mut p = Progress::default();
    for index in 0u64.. {
        let step = if ctx.rank == 0 {
            decide(ctx, plan, &mut p)
        } else {
            None
        };
        let Some(users) = next(ctx, step)? else { break };
        if let Some(n) = net {
            n.update(&p, Some(users));
        }
        let part = run_level(ctx, base, users, index, rdir);
        let bytes = serde_json::to_vec(&part).map_err(|e| Error::runtime(e.to_string()))?;
        ctx.phase("the gathering of a level's results");
        let skip = || {
            ctx.coord
                .as_ref()
                .map(|c| c.failed_ranks())
                .unwrap_or_default()
        };
        // Rank 0 waits for every rank that has not failed; the others only send.
        let gathered = ctx.t.gather(&bytes, &skip, &mut || Ok(()))?;
        if ctx.rank == 0 {
            take_level(ctx, users, gathered, &mut p)?;
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
    levels: Vec<SweepLevel>,
    target: Option<TargetInfo>,
    /// The level the ranks are running (not yet gathered).
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
                    mailbench_runner::write_files(&dir, &r)?;
                    dir.log.line(format!(
                        "the sweep so far ({n} levels finished): {}",
                        r.verdict().label()
                    ));
                    Ok(())
                });
                if let Err(e) = written {
                    eprintln!("mailbench: the sweep so far could not be written: {e}");
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
        let generators = SweepGenerators {
            count: st.hosts.len(),
            hosts: st.hosts.clone(),
            failures,
        };
        let r = build(
            header,
            st.config.clone(),
            st.plan.clone(),
            st.profile.clone(),
            p,
            Some(generators),
        );
        (AnyResult::MailSweep(Box::new(r)), finished)
    }
}

/// Rank 0: the next level, or None when the sweep is over.
fn decide(ctx: &Ctx, plan: &SweepPlan, p: &mut Progress) -> Option<u64> {
    if p.broken.is_some() || p.interrupted {
        return None;
    }
    if ctx.interrupt.raised() {
        p.interrupted = true;
        return None;
    }
    next_of(plan, &p.levels)
}

/// Rank 0's next level to every rank (None: the sweep is over; the
/// verdict follows in [`conclude`]).
fn next(ctx: &Ctx, step: Option<u64>) -> Result<Option<u64>> {
    let msg = step
        .map(Step::Level)
        .unwrap_or(Step::End(Verdict::from_reasons(Vec::new())));
    match receive(ctx, &msg)? {
        Step::Level(n) => Ok(Some(n)),
        Step::End(_) => Ok(None),
    }
}

/// Rank 0's `msg` on every rank. A rank that was interrupted (Ctrl-C
/// reaches every rank) still waits a while for rank 0's word.
fn receive(ctx: &Ctx, msg: &Step) -> Result<Step> {
    let bytes = serde_json::to_vec(msg).map_err(|e| Error::runtime(e.to_string()))?;
    let mut since: Option<Instant> = None;
    let mut check = || match ctx.check() {
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
    let b = ctx.t.broadcast(&bytes, &mut check)?;
    serde_json::from_slice(&b).map_err(|e| Error::runtime(format!("word from rank 0: {e}")))
}

/// This rank's slice of one level: an ordinary mail run in
/// `level-…/rank-N/`, started with the others.
fn run_level(ctx: &Ctx, base: &Resolved, users: u64, index: u64, rdir: &RunDir) -> LevelPart {
    let name = level_dir_name(users);
    let dir = ctx.top.join(&name).join(format!("rank-{}", ctx.rank));
    let mut part = LevelPart {
        rank: ctx.rank,
        host: ctx.host.clone(),
        result: String::new(),
        intervals: String::new(),
        error: None,
        interrupted: false,
    };
    ctx.phase(&format!("the level of {users} users"));
    if !ctx.opts.quiet && ctx.rank == 0 {
        eprintln!(
            "mail sweep: level {users} users over {} load generator(s)",
            ctx.size
        );
    }
    let mut o = base.clone();
    o.users = users as usize;
    let run = share_of(o, ctx.rank, ctx.size).and_then(|o| {
        rdir.log.line(format!(
            "level {users} users: users {}..{} in {}",
            o.first_user,
            o.first_user + o.users.saturating_sub(1),
            dir.display()
        ));
        let out = mailbench_mail::Output {
            base: ctx.top.clone(),
            json: false,
            quiet: true,
            verbose: ctx.opts.verbose,
        };
        // Interval numbers distinct per level, so rank 0 never pairs
        // intervals of different levels.
        let seq = Cell::new(index * 1_000_000);
        let slice = o.users;
        let run = mailbench_mail::command::run_with(o, &out, hooks(ctx, dir.clone(), slice, &seq))?;
        let r = AnyResult::MailRun(Box::new(run.result));
        mailbench_runner::write_files(&run.dir, &r)?;
        Ok((run.dir, r.verdict().status))
    });
    match run {
        Ok((d, status)) => {
            part.result = std::fs::read_to_string(d.file("result.json")).unwrap_or_default();
            part.intervals = std::fs::read_to_string(d.file("intervals.jsonl")).unwrap_or_default();
            part.interrupted = status == Status::Interrupted;
        }
        Err(e) => {
            part.interrupted = matches!(e, Error::Interrupted) || ctx.interrupt.raised();
            rdir.log
                .line(format!("level {users} users could not run: {e}"));
            if !part.interrupted {
                // The others may wait at the level's start: stop them.
                let why = format!("the level of {users} users could not run: {e}");
                if let Some(m) = &ctx.member {
                    m.fail(&why);
                }
                if let Some(c) = &ctx.coord {
                    c.stop_all(&format!("rank 0 on host {}: {why}", ctx.host));
                }
            }
            part.error = Some(e.to_string());
        }
    }
    part
}

/// Rank 0: one level's parts — every rank's result beside the merge
/// (copied when the ranks do not share the results folder), the merged
/// mail-run result judged as one run, its row of the table.
fn take_level(
    ctx: &Ctx,
    users: u64,
    gathered: Vec<Option<Vec<u8>>>,
    p: &mut Progress,
) -> Result<()> {
    let name = level_dir_name(users);
    let dir = RunDir::at(&ctx.top.join(&name))?;
    let failures = ctx.coord.as_ref().map(|c| c.failures()).unwrap_or_default();
    let mut reasons: Vec<String> = failures.iter().map(|f| f.reason.clone()).collect();
    let mut files = Vec::new();
    let mut interrupted = ctx.interrupt.raised() && failures.is_empty();
    for g in gathered.into_iter().flatten() {
        let Ok(part) = serde_json::from_slice::<LevelPart>(&g) else {
            reasons.push("a generator's part of the level could not be read".into());
            continue;
        };
        interrupted |= part.interrupted;
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
    let mut level = None;
    if let Some((result, summary)) = crate::mail::aggregate(&dir, &files, &reasons)? {
        let gathered: Vec<usize> = files.iter().map(|f| f.0).collect();
        if let AnyResult::MailRun(r) = &result {
            level = Some(level_of(r, &name));
            p.target.get_or_insert_with(|| r.target.clone());
        }
        let with = WithRanks {
            result,
            multihost: Ranks::of(&ctx.hosts, &gathered, &failures),
        };
        mailbench_runner::output::write_with(&dir, &with, &summary, true)?;
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
    dir.log.line(level_line(&level));
    if !ctx.opts.quiet {
        eprintln!("mail sweep: {}", level_line(&level));
    }
    p.levels.push(level);
    Ok(())
}

/// Rank 0 after the last level: the sweep's result written, the verdict to
/// every rank, the side channel closed (or the job ended when a rank
/// failed: it cannot take part in MPI's finalisation).
fn conclude(
    ctx: Ctx,
    mut header: RunHeader,
    started: Instant,
    config: Resolved,
    plan: SweepPlan,
    profile: Profile,
    p: Progress,
) -> Result<Outcome> {
    header.finish(started.elapsed());
    let failures = ctx.coord.as_ref().map(|c| c.failures()).unwrap_or_default();
    let generators = SweepGenerators {
        count: ctx.size,
        hosts: ctx.hosts.clone(),
        failures: failures.clone(),
    };
    let r = AnyResult::MailSweep(Box::new(build(
        header,
        config,
        plan,
        profile,
        p,
        Some(generators),
    )));
    let dir = RunDir {
        path: ctx.top.clone(),
        log: TestLog::open(&ctx.top.join("test.log"))?,
    };
    mailbench_runner::write_files(&dir, &r)?;
    dir.log.line(format!("the sweep: {}", r.verdict().label()));
    let summary = mailbench_runner::files::summary(&r);
    let out = Outcome::of_result(&r, ctx.top.clone(), summary);
    if !failures.is_empty() {
        eprintln!("{}", out.summary);
        eprintln!("Results: {}", out.dir.display());
        ctx.t.abort(out.status.code());
    }
    receive(&ctx, &Step::End(r.verdict().clone()))?;
    close(ctx)?;
    Ok(out)
}

/// A rank other than 0 after the last level: the sweep's verdict from rank
/// 0 (so every rank exits with the same code), then done.
fn end_of_member(ctx: Ctx) -> Result<Outcome> {
    let verdict = match receive(&ctx, &Step::End(Verdict::from_reasons(Vec::new())))? {
        Step::End(v) => v,
        Step::Level(_) => {
            return Err(Error::runtime(
                "rank 0 named a level after the end of the sweep (a bug: please report it)",
            ));
        }
    };
    let top = ctx.top.clone();
    close(ctx)?;
    Ok(Outcome {
        status: verdict.exit_status(),
        line: mailbench_runner::output::verdict_line(&verdict, &top),
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
