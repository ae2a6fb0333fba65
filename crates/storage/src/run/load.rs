//! The load's supervision: the warm-up's end and the measured window, the
//! stop, the shutdown's hard deadline, and the verification after it.

use super::intervals::{DiskProbe, disk_probes};
use super::progress::Progress;
use super::warmup::{WINDOW_LEAD, cache_lower_bound, warmup_min, warmup_over};
use crate::engine::{ABORT_DRAIN, Control, Event};
use crate::spec::StorageSpec;
use crate::verify;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::limits;
use mailbench_base::rundir::{RunDir, TestLog};
use mailbench_base::{Error, Result};
use mailbench_metrics::system::{CpuTimes, DiskCounters};
use mailbench_results::storage::run::Prerequisites;
use mailbench_results::storage::stats::Stats;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The load as the supervising thread sees it: the warm-up and the measured
/// window, the instances' intervals added up, the stop and the hard deadline.
pub(super) struct Load {
    pub(super) t0: Instant,
    pub(super) n: usize,
    pub(super) cache_bound: u64,
    pub(super) cache_max: u64,
    pub(super) warmup_min: Duration,
    /// The measured window, in seconds since `t0` (infinite until known).
    pub(super) measure_from: f64,
    pub(super) measure_to: f64,
    pub(super) prerequisites: Option<Prerequisites>,
    pub(super) intervals_file: std::fs::File,
    /// Intervals by sequence number, until every running instance reported it.
    pub(super) pending: BTreeMap<u64, (f64, Vec<Option<Stats>>)>,
    pub(super) inst_totals: Vec<Stats>,
    pub(super) total: Stats,
    pub(super) finished: Vec<bool>,
    pub(super) clean: Vec<bool>,
    pub(super) measured_s: f64,
    pub(super) intervals: u64,
    pub(super) stalls_max: f64,
    /// The highest sample averages of database read and log write latency
    /// of any instance in the window (ms).
    pub(super) sample_max: (f64, f64),
    /// Samples (one database, one interval) of the window with page-fault stalls.
    pub(super) stall_samples: u64,
    pub(super) cpu_prev: Option<CpuTimes>,
    pub(super) last_tick_s: f64,
    /// Host CPU busy, iowait, memory used (sums over the window's intervals), count.
    pub(super) host_sum: (f64, f64, f64, u64),
    pub(super) disks: Vec<DiskProbe>,
    pub(super) errors: Vec<String>,
    pub(super) interrupted: bool,
    pub(super) stop_sent: bool,
    pub(super) abort_at: Option<Instant>,
    pub(super) grace: Duration,
    /// The end of the measured window plus the shutdown grace: at it I/O stops
    /// (abort), whatever the shutdown still has to do.
    pub(super) hard_deadline: Instant,
    pub(super) ended_by_deadline: bool,
    /// Once I/O was told to stop: the latest the instances may take to report
    /// (their own drain, then a margin); past it the result is written without them.
    pub(super) give_up_at: Option<Instant>,
    pub(super) gave_up: bool,
    /// A write to intervals.jsonl failed (recorded once in `errors`).
    pub(super) intervals_broken: bool,
    pub(super) measuring: bool,
    /// This process's CPU: over the measured window (summed over its intervals,
    /// read as each completes).
    pub(super) self_cpu_tick: f64,
    pub(super) window_cpu: f64,
}

impl Load {
    pub(super) fn new(
        spec: &StorageSpec,
        dir: &RunDir,
        t0: Instant,
        self_cpu0: f64,
        errors: Vec<String>,
    ) -> Result<Load> {
        let n = spec.instances.len();
        let (cache_bound, cache_max) = cache_lower_bound(spec);
        let grace = spec
            .shutdown_grace
            .unwrap_or(limits::DEFAULT_SHUTDOWN_GRACE);
        let intervals_file = mailbench_base::rundir::create_new(&dir.file("intervals.jsonl"))
            .map_err(|e| Error::io("cannot create", &dir.file("intervals.jsonl"), e))?;
        Ok(Load {
            t0,
            n,
            cache_bound,
            cache_max,
            warmup_min: warmup_min(spec),
            measure_from: f64::INFINITY,
            measure_to: f64::INFINITY,
            prerequisites: None,
            intervals_file,
            pending: BTreeMap::new(),
            inst_totals: vec![Stats::default(); n],
            total: Stats::default(),
            finished: vec![false; n],
            clean: vec![false; n],
            measured_s: 0.0,
            intervals: 0,
            stalls_max: 0.0,
            sample_max: (0.0, 0.0),
            stall_samples: 0,
            cpu_prev: CpuTimes::read(),
            last_tick_s: 0.0,
            host_sum: (0.0, 0.0, 0.0, 0),
            disks: disk_probes(spec),
            errors,
            interrupted: false,
            stop_sent: false,
            abort_at: None,
            grace,
            hard_deadline: t0 + spec.warmup + WINDOW_LEAD + spec.duration + grace,
            ended_by_deadline: false,
            give_up_at: None,
            gave_up: false,
            intervals_broken: false,
            measuring: false,
            self_cpu_tick: self_cpu0,
            window_cpu: 0.0,
        })
    }

    /// Runs until every instance finished (or gave up on): starts the window
    /// once the prerequisites are attained, stops the load at its end (or on
    /// an interrupt or an error), aborts I/O at the hard deadline, and adds up
    /// the intervals the instances report.
    pub(super) fn supervise(
        &mut self,
        spec: &StorageSpec,
        dir: &RunDir,
        ctl: &Control,
        rx: &Receiver<Event>,
        interrupt: &Interrupt,
        progress: &mut dyn Progress,
    ) {
        let log = &dir.log;
        while self.finished.iter().any(|f| !f) {
            let now = Instant::now();
            if !self.interrupted && interrupt.raised() {
                // Ctrl-C / SIGTERM, also during the shutdown: write back what fits
                // in a moment, then stop I/O.
                self.interrupted = true;
                log.line("interrupted: stopping");
                progress.phase("interrupted: stopping (a partial result is kept)");
                let soon = now + limits::INTERRUPT_WRITE_BACK;
                self.abort_at = Some(self.abort_at.map_or(soon, |a| a.min(soon)));
            }
            if self.prerequisites.is_none() && !self.stop_sent {
                self.check_warmup(spec, log, ctl, progress, now);
            }
            self.check_stop(log, ctl, progress, now);
            if let Some(g) = self.give_up_at
                && now >= g
            {
                self.gave_up = true;
                log.line("instances did not stop in time: writing the result without them");
                break;
            }
            if !self.measuring && self.t0.elapsed().as_secs_f64() >= self.measure_from {
                self.measuring = true;
                log.line("phase: measured window");
                for d in &mut self.disks {
                    d.start = DiskCounters::read(&d.device);
                    d.last = d.start;
                }
            }
            let ev = match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(ev) => ev,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            self.event(spec, log, ev, progress);
        }
    }

    /// Ends the warm-up once the caches hold their lower bound (after the
    /// shortest warm-up) or its limit passed: the window starts a moment later.
    fn check_warmup(
        &mut self,
        spec: &StorageSpec,
        log: &TestLog,
        ctl: &Control,
        progress: &mut dyn Progress,
        now: Instant,
    ) {
        let cached = ctl.cached_bytes.load(Ordering::Relaxed);
        let since = now.saturating_duration_since(self.t0);
        if !warmup_over(
            cached,
            self.cache_bound,
            since,
            (self.warmup_min, spec.warmup),
        ) {
            return;
        }
        let start = since + WINDOW_LEAD;
        ctl.start_window_at(start);
        self.measure_from = start.as_secs_f64();
        self.measure_to = self.measure_from + spec.duration.as_secs_f64();
        self.hard_deadline = self.t0 + start + spec.duration + self.grace;
        let p = Prerequisites::new(
            self.cache_bound,
            self.cache_max,
            cached,
            self.measure_from,
            spec.warmup.as_secs_f64(),
        );
        log.line(mailbench_results::storage::wording::prerequisites_line(
            cached,
            self.cache_bound,
        ));
        if !p.attained {
            log.line("the warm-up limit ended the warm-up before the cache held its lower bound");
        }
        if let Some(w) = &p.warning {
            progress.phase(&format!("warning: {w}"));
        }
        self.prerequisites = Some(p);
    }

    /// Tells the instances to stop at the window's end (or on an interrupt or
    /// an error), and to abort their I/O when the shutdown's time is up.
    fn check_stop(
        &mut self,
        log: &TestLog,
        ctl: &Control,
        progress: &mut dyn Progress,
        now: Instant,
    ) {
        if !self.stop_sent {
            let failing = !self.errors.is_empty();
            let elapsed = self.t0.elapsed().as_secs_f64();
            if self.interrupted || failing || elapsed >= self.measure_to {
                ctl.stop.store(true, Ordering::Relaxed);
                self.stop_sent = true;
                let by_deadline = (now + self.grace).min(self.hard_deadline);
                self.abort_at = Some(self.abort_at.map_or(by_deadline, |a| a.min(by_deadline)));
                log.line(if failing {
                    "phase: stopping after an error"
                } else {
                    "phase: shutdown (writing back dirty pages)"
                });
            }
        }
        if let Some(a) = self.abort_at
            && now >= a
            && !ctl.abort.load(Ordering::Relaxed)
        {
            ctl.abort.store(true, Ordering::Relaxed);
            self.give_up_at = Some(now + ABORT_DRAIN + limits::STOP_WAIT);
            if !self.interrupted {
                self.ended_by_deadline = true;
                log.line(format!(
                    "hard deadline: the shutdown did not finish within the {} grace; I/O stopped, \
                     databases left for recovery",
                    humantime::format_duration(self.grace)
                ));
                progress.phase("hard deadline reached: I/O stopped (a partial result is kept)");
            }
        }
    }

    /// Every page and log block verified after a run that ended normally
    /// (with `verify`); an interrupt during it marks the run interrupted.
    pub(super) fn verify(
        &mut self,
        spec: &StorageSpec,
        log: &TestLog,
        interrupt: &Interrupt,
        progress: &mut dyn Progress,
    ) -> Option<crate::verify::VerifySummary> {
        if !spec.verify || self.interrupted || self.ended_by_deadline {
            return None;
        }
        progress.phase("verifying every page and log block");
        log.line("phase: verification");
        match verify::verify_all(spec, interrupt) {
            Ok(v) => {
                log.line(format!(
                    "verified {} databases: {} bad, {:.0} MB/s",
                    v.databases.len(),
                    v.bad_total,
                    v.mb_per_s
                ));
                Some(v)
            }
            Err(Error::Interrupted) => {
                self.interrupted = true;
                None
            }
            Err(e) => {
                self.errors.push(format!("verification: {e}"));
                None
            }
        }
    }
}
