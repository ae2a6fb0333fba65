//! `mailbench mail sweep`: a series of mail runs at growing user counts
//! against one server, provisioned once for the largest level; with
//! `--find-max`, a search for the largest count that passes every
//! criterion. Each level is an ordinary `mail run` with its own folder
//! inside the sweep's; the sweep writes one `mail-sweep` result.
use crate::Global;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::RunDir;
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_mail::options::Resolved;
use mailbench_mail::profile::{Profile, ProfileExt};
use mailbench_mail::sweep::{level_of, next_level};
use mailbench_results::mail::run::TargetInfo;
use mailbench_results::mail::sweep::{MailSweepResult, SweepLevel, SweepPlan, supported};
use mailbench_results::{AnyResult, RunHeader, Status, Verdict};
use std::path::{Path, PathBuf};

/// What the sweep was asked: the base options (users: the largest level),
/// the plan, and where to write.
pub struct Sweep {
    pub base: Resolved,
    pub plan: SweepPlan,
    pub out: mailbench_mail::Output,
}

/// The levels run so far and how the sweep ended.
struct Progress {
    levels: Vec<SweepLevel>,
    target: Option<TargetInfo>,
    interrupted: bool,
    /// A level that could not run (the server died, ...): its reason.
    broken: Option<String>,
}

pub fn run(s: Sweep, global: &Global) -> Result<ExitStatus> {
    let profile = Profile::load(&s.base.profile)?;
    let started = std::time::Instant::now();
    // Bad options (a foreign --local-dir, ...) are refused before the
    // sweep's folder exists.
    mailbench_mail::command::check(&s.base)?;
    let mut header = RunHeader::begin("mail-sweep");
    let dir = RunDir::create(&s.out.base, "mail-sweep")?;
    dir.log.set_echo(s.out.verbose);
    let intr = Interrupt::install()?;
    let mut base = s.base.clone();
    let made_local = provision(&mut base, &dir, &s.out, &intr)?;
    let p = run_levels(&base, &s.plan, &dir, &s.out, &intr);
    if let Some(d) = made_local {
        // The sweep's own local target: its mailboxes are not a result.
        let _ = std::fs::remove_dir_all(d);
    }
    header.finish(started.elapsed());
    let result = build(header, s.base, s.plan, profile, p);
    let r = AnyResult::MailSweep(Box::new(result));
    let text = format!(
        "{}\nresults: {}",
        mailbench_report::summary::render(&r),
        dir.path.display()
    );
    mailbench_runner::finish(&dir, &r, &crate::cmd::storage::out(global), Some(text))?;
    Ok(r.verdict().exit_status())
}

/// Provisions the largest level once (unless `--skip-setup`); every level
/// then runs with `--skip-setup`. A local target gets a folder of its own
/// inside the sweep's (unless `--local-dir` was given), returned to be
/// removed at the end.
fn provision(
    base: &mut Resolved,
    dir: &RunDir,
    out: &mailbench_mail::Output,
    intr: &Interrupt,
) -> Result<Option<PathBuf>> {
    let mut made = None;
    if base.target == "local" && base.local_dir.is_none() {
        let d = dir.path.join("local-target");
        base.local_dir = Some(d.clone());
        made = Some(d);
    }
    if !base.skip_setup && !intr.raised() {
        dir.log
            .line(format!("setup: provisioning {} users once", base.users));
        let setup_out = mailbench_mail::Output {
            base: dir.path.clone(),
            quiet: true,
            json: false,
            verbose: out.verbose,
        };
        let (sdir, r) = mailbench_mail::setup_command(base.clone(), &setup_out)?;
        let status = r.verdict.status;
        let reasons = r.verdict.reasons.join("; ");
        mailbench_runner::output::write_files(&sdir, &AnyResult::MailSetup(Box::new(r)))?;
        if status != Status::Pass {
            return Err(Error::runtime(format!(
                "provisioning {} users failed ({}): see {}",
                base.users,
                reasons,
                sdir.path.display()
            )));
        }
    }
    base.skip_setup = true;
    Ok(made)
}

/// Runs the levels: every level of the list, or the `--find-max` search.
fn run_levels(
    base: &Resolved,
    plan: &SweepPlan,
    dir: &RunDir,
    out: &mailbench_mail::Output,
    intr: &Interrupt,
) -> Progress {
    let mut p = Progress {
        levels: Vec::new(),
        target: None,
        interrupted: false,
        broken: None,
    };
    let first = plan.levels.first().copied().unwrap_or(1);
    let max = plan.levels.last().copied().unwrap_or(first);
    let mut queue = plan.levels.iter().copied();
    loop {
        let done: Vec<(u64, bool)> = p.levels.iter().map(|l| (l.users, l.passed())).collect();
        let next = if plan.find_max {
            next_level(&done, first, max, plan.resolution)
        } else {
            queue.next()
        };
        let Some(users) = next else { break };
        if intr.raised() {
            p.interrupted = true;
            break;
        }
        run_level(base, users, dir, out, intr, &mut p);
        if p.interrupted || p.broken.is_some() {
            break;
        }
    }
    p
}

fn level_dir(sweep: &Path, users: u64) -> PathBuf {
    sweep.join(format!("level-{users:06}-users"))
}

/// One level: an ordinary mail run with its own result folder.
fn run_level(
    base: &Resolved,
    users: u64,
    dir: &RunDir,
    out: &mailbench_mail::Output,
    intr: &Interrupt,
    p: &mut Progress,
) {
    let mut o = base.clone();
    o.users = users as usize;
    let ldir = level_dir(&dir.path, users);
    let name = ldir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    dir.log
        .line(format!("level {users} users: {}", ldir.display()));
    if !out.quiet && !out.json {
        eprintln!("mail sweep: level {users} users");
    }
    let hooks = mailbench_mail::hooks::RunHooks {
        dir: Some(ldir.clone()),
        interrupt: Some(intr.clone()),
        ..Default::default()
    };
    let level_out = mailbench_mail::Output {
        base: dir.path.clone(),
        // No live line per interval from inside a sweep.
        quiet: true,
        json: false,
        verbose: out.verbose,
    };
    match mailbench_mail::command::run_with(o, &level_out, hooks) {
        Ok(run) => {
            let level = level_of(&run.result, &name);
            p.target.get_or_insert_with(|| run.result.target.clone());
            let r = AnyResult::MailRun(Box::new(run.result));
            if let Err(e) = mailbench_runner::output::write_files(&run.dir, &r) {
                dir.log
                    .line(format!("level {users}: result not written: {e}"));
            }
            dir.log.line(format!(
                "level {users} users: {} (response time {:.0} ms)",
                r.verdict().label(),
                level.response_time_ms
            ));
            if !out.quiet && !out.json {
                eprintln!(
                    "mail sweep: level {users} users: {}, response time {:.0} ms{}",
                    r.verdict().label(),
                    level.response_time_ms,
                    level
                        .reasons
                        .first()
                        .map(|x| format!(" ({x})"))
                        .unwrap_or_default()
                );
            }
            p.interrupted = level.status == Status::Interrupted || intr.raised();
            p.levels.push(level);
        }
        Err(e) => {
            let reason = format!("the level of {users} users could not run: {e}");
            dir.log.line(&reason);
            p.interrupted = intr.raised();
            p.levels.push(SweepLevel {
                users,
                status: if p.interrupted {
                    Status::Interrupted
                } else {
                    Status::Error
                },
                failed_criterion: Some("error".into()),
                reasons: vec![reason.clone()],
                result_dir: name,
                ..Default::default()
            });
            if !p.interrupted {
                p.broken = Some(reason);
            }
        }
    }
}

/// The sweep's result from its levels.
fn build(
    header: RunHeader,
    config: Resolved,
    plan: SweepPlan,
    profile: Profile,
    p: Progress,
) -> MailSweepResult {
    let compression = profile.day.as_secs_f64() / config.day_length.as_secs_f64().max(1e-9);
    let (supported_users, failed_above) = supported(&p.levels);
    let mut warnings = Vec::new();
    if compression > 1.0 + 1e-9 {
        warnings.push(format!(
            "compressed day: each simulated user works {compression:.0} times the profile's rate; \
             the rate-equivalent users (users x {compression:.0}) carry the same message and \
             task rate, but not the same number of sessions, logons or mailboxes, so they \
             approximate a real day's users"
        ));
    }
    let late: Vec<String> = (p.levels.iter())
        .filter(|l| l.sched_delay_p99_ms > 10.0)
        .map(|l| format!("{} users ({:.1} ms)", l.users, l.sched_delay_p99_ms))
        .collect();
    if !late.is_empty() {
        warnings.push(format!(
            "the load generator's own scheduling delay p99 exceeded 10 ms at {}: there the \
             generator, not the server, may be the limit",
            late.join(", ")
        ));
    }
    let verdict = sweep_verdict(&p, supported_users, &failed_above);
    MailSweepResult {
        run: header,
        target: p.target.clone().unwrap_or_else(|| TargetInfo {
            kind: config.target.clone(),
            imap: config.imap.clone().unwrap_or_default(),
            submission: config.submission.clone().unwrap_or_default(),
            sieve: config.sieve.clone(),
            tls: Default::default(),
            local_dir: None,
            server: None,
        }),
        config,
        profile,
        plan,
        compression,
        levels: p.levels,
        supported_users,
        failed_above,
        warnings,
        verdict,
    }
}

/// Interrupted (exit 130) when stopped; failed when a level could not run
/// or no level passed; else passed, the supported users being the score.
fn sweep_verdict(
    p: &Progress,
    supported_users: Option<u64>,
    failed_above: &Option<mailbench_results::mail::sweep::FailedLevel>,
) -> Verdict {
    let mut reasons = Vec::new();
    if let Some(b) = &p.broken {
        reasons.push(format!(
            "{b}; the sweep reports the levels measured before it"
        ));
    }
    if supported_users.is_none() && p.broken.is_none() && !p.interrupted {
        let why = failed_above
            .as_ref()
            .map(|f| format!(": {} users failed ({})", f.users, f.reason))
            .unwrap_or_default();
        reasons.push(format!("no level passed every criterion{why}"));
    }
    let mut v = Verdict::from_reasons(reasons);
    if p.interrupted {
        v.status = Status::Interrupted;
        v.reasons
            .insert(0, "interrupted before the end of the sweep".into());
    }
    v
}
