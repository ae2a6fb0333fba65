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
use mailbench_mail::sweep::{
    Progress, build, level_dir_name, level_line, level_of, next_of, not_run,
};
use mailbench_results::mail::sweep::SweepPlan;
use mailbench_results::{AnyResult, RunHeader, Status};
use std::path::PathBuf;

/// What the sweep was asked: the base options (users: the largest level),
/// the plan, and where to write.
pub struct Sweep {
    pub base: Resolved,
    pub plan: SweepPlan,
    pub out: mailbench_mail::Output,
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
    let result = build(header, s.base, s.plan, profile, p, None);
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
    let mut p = Progress::default();
    while let Some(users) = next_of(plan, &p.levels) {
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
    let name = level_dir_name(users);
    let ldir = dir.path.join(&name);
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
            dir.log.line(level_line(&level));
            if !out.quiet && !out.json {
                eprintln!("mail sweep: {}", level_line(&level));
            }
            p.interrupted = level.status == Status::Interrupted || intr.raised();
            p.levels.push(level);
        }
        Err(e) => {
            let reason = format!("the level of {users} users could not run: {e}");
            dir.log.line(&reason);
            p.interrupted = intr.raised();
            p.levels
                .push(not_run(users, reason.clone(), p.interrupted, &name));
            if !p.interrupted {
                p.broken = Some(reason);
            }
        }
    }
}
