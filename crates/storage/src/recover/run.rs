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
    let mut t = Test {
        spec,
        log: &dir.log,
        interrupt,
        phase,
        res: RecoverResult {
            run: header.clone(),
            verdict: Verdict::from_reasons(Vec::new()),
            spec: spec.clone(),
            log_files_wanted: log_files,
            prior_recovery: Vec::new(),
            generation: Vec::new(),
            instances: Vec::new(),
            verify: None,
            errors: Vec::new(),
        },
        o: Outcome::default(),
    };
    t.create_databases()?;
    t.replay_earlier_crash();
    t.o.interrupted |= interrupt.raised();
    if log_files > 0 && !t.o.interrupted && t.o.errors.is_empty() {
        t.crash_and_replay(log_files)?;
    }
    t.o.interrupted |= interrupt.raised();
    let readable = spec
        .instances
        .iter()
        .all(|i| read_header(&i.db_path).is_ok());
    if !t.o.interrupted && readable {
        t.verify_after();
    }
    if let Some(note) = mailbench_io::uring::fixed_buffers_note() {
        t.log.line(format!("warning: {note}"));
    }
    let Test { mut res, o, .. } = t;
    res.verdict = verdict(&res, &o, log_files);
    res.errors = o.errors;
    header.finish(started.elapsed());
    res.run = header;
    Ok(res)
}

/// One `storage recover` test under way: what its phases read (the spec, the
/// test log, the stop switch, the progress lines) and what they fill in (the
/// result, the outcome so far).
struct Test<'a> {
    spec: &'a StorageSpec,
    log: &'a TestLog,
    interrupt: &'a Interrupt,
    phase: PhaseFn<'a>,
    res: RecoverResult,
    o: Outcome,
}

impl Test<'_> {
    /// The check of every page and log block after the replay, unless the
    /// user said `--no-verify` (`[storage] verify = false`), with
    /// `--log-files 0` too: then the log says so and the result has no
    /// checksum statistics.
    fn verify_after(&mut self) {
        if !self.spec.verify {
            self.log
                .line("verification skipped (--no-verify): pages and log blocks were not checked");
            return;
        }
        (self.phase)("verifying every page and log block");
        match verify::verify_all(self.spec, self.interrupt) {
            Ok(v) => self.res.verify = Some(v),
            Err(Error::Interrupted) => self.o.interrupted = true,
            Err(e) => self.o.errors.push(format!("verification: {e}")),
        }
    }

    /// Databases: existing ones (maybe unclean) are used as they are; missing
    /// or partly created ones are created (resumed).
    fn create_databases(&mut self) -> Result<()> {
        let insts = &self.spec.instances;
        let any_missing = insts.iter().any(|i| !i.db_path.exists());
        if any_missing || insts.iter().any(|i| init_incomplete(&i.db_path)) {
            (self.phase)("creating databases");
            match init::init_all(self.spec, self.log, self.interrupt) {
                Ok(_) => {}
                Err(Error::Interrupted) => self.o.interrupted = true,
                Err(Error::Runtime(m)) => self.o.errors.push(m),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Every instance's log replayed, each described in test.log, its errors
    /// (named by instance) added to the outcome.
    fn replay_logged(&mut self) -> Vec<ReplayResult> {
        let results = replay_all(self.spec, self.interrupt);
        for r in &results {
            self.log.line(describe(r));
            self.o
                .errors
                .extend(r.errors.iter().map(|e| format!("{}: {e}", r.name)));
        }
        results
    }

    /// Databases left unclean by an earlier crash: their logs replayed first.
    fn replay_earlier_crash(&mut self) {
        let unclean = !self.o.interrupted
            && self.o.errors.is_empty()
            && self
                .spec
                .instances
                .iter()
                .any(|i| read_header(&i.db_path).map(|h| !h.clean).unwrap_or(false));
        if unclean {
            (self.phase)("replaying the logs left by an earlier crash");
            self.log.line("phase: recovery of databases left unclean");
            self.res.prior_recovery = self.replay_logged();
        }
    }

    /// The test proper: `log_files` new log files generated per database with
    /// the checkpoint held, the load stopped as a crash would, then every
    /// instance replayed at once.
    fn crash_and_replay(&mut self, log_files: u64) -> Result<()> {
        (self.phase)(&format!(
            "generating {log_files} log files per database (checkpoint held), then stopping as a crash would"
        ));
        self.log.line("phase: log generation");
        match generate(self.spec, log_files, self.log, self.interrupt) {
            Ok((g, errs, intr)) => {
                self.res.generation = g;
                self.o.errors.extend(errs);
                self.o.interrupted |= intr;
            }
            Err(Error::Runtime(m)) => self.o.errors.push(m),
            Err(e) => return Err(e),
        }
        if !self.o.interrupted && self.o.errors.is_empty() {
            (self.phase)("replaying the logs (soft recovery)");
            self.log.line("phase: soft recovery");
            self.res.instances = self.replay_logged();
        }
        Ok(())
    }
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
