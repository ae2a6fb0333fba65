//! `--threads auto`: find the highest concurrency that still passes, then run
//! the test at it. Each step runs the load with a transient window (warm-up, not
//! judged) and a stable window (judged on the latency thresholds and stalls; the
//! IOPS target is not a tuning goal). Threads double from one per database while
//! steps pass, then one bisection step between the last pass and the first fail.

use crate::run::{Progress, run};
use crate::spec::StorageSpec;
use mailbench_base::Result;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::RunDir;
use mailbench_results::Status;
use mailbench_results::storage::run::StorageResult;
pub use mailbench_results::storage::run::TuningStep;
use std::time::Duration;

/// Most threads tuning tries.
pub const THREADS_MAX: u32 = 256;

/// The windows of one tuning step: (transient, stable).
pub fn windows(spec: &StorageSpec) -> (Duration, Duration) {
    if spec.quick {
        (Duration::from_secs(3), Duration::from_secs(6))
    } else {
        (Duration::from_secs(30), Duration::from_secs(120))
    }
}

/// Where the tuning steps go: each step's folder (`folder(threads)`, made by
/// the driver) and its result written there through the one output path.
pub struct Steps<'a> {
    pub folder: &'a mut dyn FnMut(u32) -> Result<RunDir>,
    pub write: &'a mut dyn FnMut(&RunDir, &StorageResult) -> Result<()>,
}

/// Runs the tuning steps; returns the steps and the threads chosen.
pub fn tune(
    spec: &StorageSpec,
    dir: &RunDir,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
    out: &mut Steps,
) -> Result<(Vec<TuningStep>, u32)> {
    let (transient, stable) = windows(spec);
    let mut steps: Vec<TuningStep> = Vec::new();
    let n = spec.instances.len() as u32;
    let max_by_cache = (spec.cache_max_per_db / spec.profile.page_size.0 / 16) as u32 * n;
    let cap = THREADS_MAX.min(max_by_cache.max(n));
    let mut step = |threads: u32, steps: &mut Vec<TuningStep>| -> Result<bool> {
        let mut s = spec.clone();
        s.set_threads(threads);
        s.threads_auto = false;
        s.verify = false;
        s.target_iops = None;
        s.paced = false;
        s.warmup = transient;
        s.duration = stable;
        s.sample_interval = s.sample_interval.min(stable / 3);
        progress.phase(&format!("tuning: trying {threads} threads"));
        dir.log.line(format!("tuning: trying {threads} threads"));
        let sub = (out.folder)(threads)?;
        let r: StorageResult = run(&s, &sub, interrupt, progress, false)?;
        (out.write)(&sub, &r)?;
        let passed = r.verdict.status == Status::Pass;
        dir.log.line(format!(
            "tuning: {threads} threads {} at {:.0} IOPS",
            if passed { "passed" } else { "failed" },
            r.total.transactional_iops
        ));
        steps.push(TuningStep {
            threads,
            passed,
            transactional_iops: r.total.transactional_iops,
            db_read_avg_ms: r
                .total
                .classes
                .get("db_read")
                .map(|c| c.latency_ms.avg)
                .unwrap_or(0.0),
            log_write_avg_ms: r
                .total
                .classes
                .get("log_write")
                .map(|c| c.latency_ms.avg)
                .unwrap_or(0.0),
            reasons: r.verdict.reasons,
        });
        if r.verdict.status == Status::Interrupted || interrupt.raised() {
            return Err(mailbench_base::Error::Interrupted);
        }
        Ok(passed)
    };
    let mut last_pass = None;
    let mut first_fail = None;
    let mut t = n.max(1);
    while t <= cap {
        if step(t, &mut steps)? {
            last_pass = Some(t);
            t *= 2;
        } else {
            first_fail = Some(t);
            break;
        }
    }
    if let (Some(lo), Some(hi)) = (last_pass, first_fail) {
        let mid = (lo + hi) / 2;
        if mid > lo && mid < hi && step(mid, &mut steps)? {
            last_pass = Some(mid);
        }
    }
    let chosen = last_pass.unwrap_or(n.max(1));
    dir.log.line(format!("tuning: chose {chosen} threads"));
    Ok((steps, chosen))
}
