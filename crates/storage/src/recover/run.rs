//! The whole `storage recover` test, its phases in order: databases created
//! (or resumed), an earlier crash's logs replayed, new log files generated
//! with the checkpoint held and the run stopped as a crash would, every
//! instance replayed at once, then verified; and the verdict.

use super::generate::generate;
use super::{RecoverResult, ReplayResult, replay_all};
use crate::init::{self, read_header};
use crate::spec::StorageSpec;
use crate::verify;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::{RunDir, TestLog};
use mailbench_base::{Error, Result};
use mailbench_results::{RunHeader, Status, Verdict};
use std::path::Path;
use std::time::Instant;

/// Progress lines for long phases.
pub type PhaseFn<'a> = &'a mut dyn FnMut(&str);

/// What the phases met so far: errors (the first decides the verdict's
/// reason), and whether the test was interrupted.
#[derive(Default)]
struct Outcome {
    errors: Vec<String>,
    interrupted: bool,
}

/// The whole `storage recover` test. With `log_files == 0`, only replays what
/// earlier runs left (recovery after a crash), then verifies.
pub fn run_recover(
    spec: &StorageSpec,
    dir: &RunDir,
    log_files: u64,
    interrupt: &Interrupt,
    phase: PhaseFn<'_>,
) -> Result<RecoverResult> {
    let started = Instant::now();
    let mut header = RunHeader::begin("storage-recover");
    let log = &dir.log;
    let mut res = RecoverResult {
        run: header.clone(),
        verdict: Verdict::from_reasons(Vec::new()),
        spec: spec.clone(),
        log_files_wanted: log_files,
        prior_recovery: Vec::new(),
        generation: Vec::new(),
        instances: Vec::new(),
        verify: None,
        errors: Vec::new(),
    };
    let mut o = Outcome::default();
    create_databases(spec, log, interrupt, phase, &mut o)?;
    replay_earlier_crash(spec, log, interrupt, phase, &mut res, &mut o);
    if interrupt.raised() {
        o.interrupted = true;
    }
    if log_files > 0 && !o.interrupted && o.errors.is_empty() {
        crash_and_replay(spec, log_files, log, interrupt, phase, &mut res, &mut o)?;
    }
    if interrupt.raised() {
        o.interrupted = true;
    }
    let readable = spec
        .instances
        .iter()
        .all(|i| read_header(&i.db_path).is_ok());
    if !o.interrupted && readable {
        verify_after(spec, log, interrupt, phase, &mut res, &mut o);
    }
    if let Some(note) = mailbench_io::uring::fixed_buffers_note() {
        log.line(format!("warning: {note}"));
    }
    res.verdict = verdict(&res, &o, log_files);
    res.errors = o.errors;
    header.finish(started.elapsed());
    res.run = header;
    Ok(res)
}

/// The check of every page and log block after the replay, unless the user
/// said `--no-verify` (`[storage] verify = false`), with `--log-files 0` too:
/// then the log says so and the result has no checksum statistics.
fn verify_after(
    spec: &StorageSpec,
    log: &TestLog,
    interrupt: &Interrupt,
    phase: PhaseFn<'_>,
    res: &mut RecoverResult,
    o: &mut Outcome,
) {
    if !spec.verify {
        log.line("verification skipped (--no-verify): pages and log blocks were not checked");
        return;
    }
    phase("verifying every page and log block");
    match verify::verify_all(spec, interrupt) {
        Ok(v) => res.verify = Some(v),
        Err(Error::Interrupted) => o.interrupted = true,
        Err(e) => o.errors.push(format!("verification: {e}")),
    }
}

/// Databases: existing ones (maybe unclean) are used as they are; missing or
/// partly created ones are created (resumed).
fn create_databases(
    spec: &StorageSpec,
    log: &TestLog,
    interrupt: &Interrupt,
    phase: PhaseFn<'_>,
    o: &mut Outcome,
) -> Result<()> {
    let any_missing = spec.instances.iter().any(|i| !i.db_path.exists());
    if any_missing || spec.instances.iter().any(|i| init_incomplete(&i.db_path)) {
        phase("creating databases");
        match init::init_all(spec, log, interrupt) {
            Ok(_) => {}
            Err(Error::Interrupted) => o.interrupted = true,
            Err(Error::Runtime(m)) => o.errors.push(m),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Every instance's log replayed, each described in test.log, its errors
/// (named by instance) added to the outcome.
fn replay_logged(
    spec: &StorageSpec,
    log: &TestLog,
    interrupt: &Interrupt,
    o: &mut Outcome,
) -> Vec<ReplayResult> {
    let results = replay_all(spec, interrupt);
    for r in &results {
        log.line(describe(r));
        o.errors
            .extend(r.errors.iter().map(|e| format!("{}: {e}", r.name)));
    }
    results
}

/// Databases left unclean by an earlier crash: their logs replayed first.
fn replay_earlier_crash(
    spec: &StorageSpec,
    log: &TestLog,
    interrupt: &Interrupt,
    phase: PhaseFn<'_>,
    res: &mut RecoverResult,
    o: &mut Outcome,
) {
    let unclean = !o.interrupted
        && o.errors.is_empty()
        && spec
            .instances
            .iter()
            .any(|i| read_header(&i.db_path).map(|h| !h.clean).unwrap_or(false));
    if unclean {
        phase("replaying the logs left by an earlier crash");
        log.line("phase: recovery of databases left unclean");
        res.prior_recovery = replay_logged(spec, log, interrupt, o);
    }
}

/// The test proper: `log_files` new log files generated per database with the
/// checkpoint held, the load stopped as a crash would, then every instance
/// replayed at once.
fn crash_and_replay(
    spec: &StorageSpec,
    log_files: u64,
    log: &TestLog,
    interrupt: &Interrupt,
    phase: PhaseFn<'_>,
    res: &mut RecoverResult,
    o: &mut Outcome,
) -> Result<()> {
    phase(&format!(
        "generating {log_files} log files per database (checkpoint held), then stopping as a crash would"
    ));
    log.line("phase: log generation");
    match generate(spec, log_files, log, interrupt) {
        Ok((g, errs, intr)) => {
            res.generation = g;
            o.errors.extend(errs);
            o.interrupted |= intr;
        }
        Err(Error::Runtime(m)) => o.errors.push(m),
        Err(e) => return Err(e),
    }
    if !o.interrupted && o.errors.is_empty() {
        phase("replaying the logs (soft recovery)");
        log.line("phase: soft recovery");
        res.instances = replay_logged(spec, log, interrupt, o);
    }
    Ok(())
}

/// The verdict: interrupted, or the reasons found in the replays (damaged
/// logs, databases not left consistent), the errors, the verification and the
/// generation (fewer log files than asked for).
fn verdict(res: &RecoverResult, o: &Outcome, log_files: u64) -> Verdict {
    let mut reasons = Vec::new();
    for r in res.prior_recovery.iter().chain(res.instances.iter()) {
        if r.log_damaged {
            reasons.push(format!(
                "The log of {} is damaged: {}. The database is marked as having lost its log \
                 tail: storage run, verify and backup use it only with {}.",
                r.name,
                r.stopped,
                init::ACCEPT_LOST_LOG_TAIL
            ));
        }
        if r.needed && !r.clean && r.errors.is_empty() {
            reasons.push(format!("{} was not left consistent by the replay.", r.name));
        }
    }
    if let Some(first) = o.errors.first() {
        reasons.push(format!(
            "{} errors occurred (first: {}).",
            o.errors.len(),
            first
        ));
    }
    if let Some(v) = &res.verify {
        reasons.extend(v.reasons());
    }
    for g in &res.generation {
        if g.log_files < log_files {
            reasons.push(format!(
                "{} generated only {} of the {log_files} log files.",
                g.name, g.log_files
            ));
        }
    }
    if o.interrupted {
        Verdict {
            status: Status::Interrupted,
            reasons: vec!["The test was interrupted; the figures are partial.".into()],
        }
    } else {
        Verdict::from_reasons(reasons)
    }
}

fn init_incomplete(db: &Path) -> bool {
    let mut s = db.as_os_str().to_owned();
    s.push(".init");
    Path::new(&s).exists()
}

fn describe(r: &ReplayResult) -> String {
    format!(
        "{}: replayed {} log files ({} records, {} updates applied, {} already on the page) in {:.2} s; {}",
        r.name,
        r.log_files_replayed,
        r.records,
        r.updates_applied,
        r.updates_skipped,
        r.seconds,
        r.stopped
    )
}
