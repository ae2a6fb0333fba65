//! `storage run`: init (or open) the databases, run the transactional load on
//! every instance through warm-up and the measured window, sample the host and
//! the disks, verify, judge, and write the results.

use crate::engine::{ABORT_DRAIN, Control, Event, Instance, InstanceSetup};
use crate::init::{self, read_header};
use crate::spec::StorageSpec;
use crate::stats::{Class, ClassFigures, Stats};
use crate::verify;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::limits;
use mailbench_base::rundir::{RunDir, TestLog};
use mailbench_base::{Error, Result};
use mailbench_metrics::system::{
    CpuTimes, DiskCounters, DiskRates, Memory, device_of, process_cpu_s,
};
pub use mailbench_results::storage::judge::judge;
use mailbench_results::storage::run::*;
use mailbench_results::{RunHeader, Status, Verdict};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// How the run reports its progress.
pub trait Progress {
    fn phase(&mut self, text: &str);
    fn interval(&mut self, p: &LiveFigures);
}

/// Figures of the latest interval, for live progress (also sent from every
/// rank of a multi-host run to rank 0, which aggregates them).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct LiveFigures {
    pub phase: String,
    pub elapsed_s: f64,
    pub remaining_s: f64,
    pub transactional_iops: f64,
    pub target_iops: Option<f64>,
    pub db_read_avg_ms: f64,
    pub log_write_avg_ms: f64,
    pub db_read_limit_ms: f64,
    pub log_write_limit_ms: f64,
    pub errors: u64,
    pub passing: bool,
    /// Per I/O class figures of the latest interval (rates, latency quantiles).
    pub classes: BTreeMap<String, ClassFigures>,
    pub transactions_per_s: f64,
    pub transaction_latency_ms: crate::stats::LatencyMs,
}

/// Progress lines on stderr: one compact line per interval (or nothing, `-q`).
pub struct LineProgress {
    pub quiet: bool,
}

impl Progress for LineProgress {
    fn phase(&mut self, text: &str) {
        if !self.quiet {
            eprintln!("mailbench: {text}");
        }
    }
    fn interval(&mut self, p: &LiveFigures) {
        if !self.quiet {
            eprintln!("{}", p.progress_line(None));
        }
    }
}

impl LiveFigures {
    /// The one-line progress report of an interval; `ranks` names how many
    /// ranks' figures a multi-host run's aggregate holds.
    pub fn progress_line(&self, ranks: Option<usize>) -> String {
        let target = self
            .target_iops
            .map(|t| format!(" / target {t:.0}"))
            .unwrap_or_default();
        let (who, w) = match ranks {
            Some(n) => (format!(" {n} ranks"), 9),
            None => (String::new(), 8),
        };
        format!(
            "[{:>6.0}s {:<8}{who}] IOPS {:>w$.1}{target} | db read {:>6.2} ms (<= {:.0}) | log write {:>6.2} ms (<= {:.0}) | errors {} | {} | {:.0}s left",
            self.elapsed_s,
            self.phase,
            self.transactional_iops,
            self.db_read_avg_ms,
            self.db_read_limit_ms,
            self.log_write_avg_ms,
            self.log_write_limit_ms,
            self.errors,
            if self.passing { "passing" } else { "FAILING" },
            self.remaining_s.max(0.0)
        )
    }
}

pub struct RunOutcome {
    pub result: StorageResult,
    pub dir: RunDir,
}

struct DiskProbe {
    device: String,
    paths: Vec<String>,
    start: Option<DiskCounters>,
    last: Option<DiskCounters>,
}

/// Runs the whole `storage run` test. Bad input must have been refused before
/// (`StorageSpec::resolve` + `check_paths`); from here on faults end in a
/// result with a Fail/Error/Interrupted verdict.
pub fn run(
    spec: &StorageSpec,
    dir: &RunDir,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
    ack_stream: bool,
) -> Result<StorageResult> {
    let started = Instant::now();
    let header = RunHeader::begin("storage-run");
    let log = &dir.log;
    log.line(format!(
        "storage run: type {:?}, profile {}, {} databases of {} pages, {} threads, duration {:?}",
        spec.test_type,
        spec.profile.name,
        spec.instances.len(),
        spec.instances.first().map(|i| i.pages).unwrap_or(0),
        spec.threads,
        spec.duration
    ));

    // Phase 1: databases.
    progress.phase("creating databases");
    log.line("phase: database creation / attach");
    let init = match init::init_all(spec, log, interrupt) {
        Ok(s) => Some(s),
        Err(Error::Interrupted) => {
            return finish_early(
                spec,
                dir,
                header,
                started,
                "interrupted during database creation",
                Status::Interrupted,
                None,
            );
        }
        Err(Error::Runtime(m)) => {
            return finish_early(spec, dir, header, started, &m, Status::Error, None);
        }
        Err(e) => return Err(e),
    };
    if let Some(i) = &init
        && i.written_bytes > 0
    {
        log.line(format!(
            "created {:.0} MB in {:.1} s: {:.0} MB/s",
            i.written_bytes as f64 / 1e6,
            i.seconds,
            i.mb_per_s
        ));
    }
    let caps = mailbench_io::probe(&spec.volumes[0]);
    let setups = instance_setups(spec, caps, ack_stream)?;

    // Phase 2: the load. This process's CPU over the whole load is counted from
    // here: opening the instances maps their caches (faulted in at once).
    let self_cpu0 = process_cpu_s();
    let (tx, rx) = channel::<Event>();
    let ctl = Arc::new(Control::default());
    let t0 = Instant::now();
    let mut opened = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    for s in setups {
        let name = s.name.clone();
        match Instance::open(s, ctl.clone(), tx.clone(), t0) {
            Ok(i) => opened.push(i),
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    drop(tx);
    if !errors.is_empty() {
        drop(opened);
        let why = errors.join("; ");
        return finish_early(spec, dir, header, started, &why, Status::Error, init);
    }
    let io_engine = opened
        .first()
        .map(|i| i.io_engine_name())
        .unwrap_or_default();
    log.line(format!(
        "I/O engine {io_engine}, O_DIRECT {}",
        caps.o_direct
    ));
    let handles: Vec<_> = opened
        .into_iter()
        .map(|inst| {
            std::thread::Builder::new()
                .name("mb-instance".into())
                .spawn(move || inst.run())
        })
        .collect();
    announce_warmup(spec, log, progress, &io_engine);
    let mut load = Load::new(spec, dir, t0, self_cpu0, errors)?;
    load.supervise(spec, dir, &ctl, &rx, interrupt, progress);
    for h in handles.into_iter().flatten() {
        // A thread that did not stop in time is left behind (its I/O ends with
        // the process); joining it could wait forever.
        if !load.gave_up || h.is_finished() {
            let _ = h.join();
        }
    }
    let _ = load.intervals_file.flush();
    let self_cpu = process_cpu_s() - self_cpu0;

    // Phase 3: verification.
    let verify_result = load.verify(spec, log, interrupt, progress);
    let ended = Ended {
        header,
        started,
        io_engine,
        o_direct: caps.o_direct,
        init,
        self_cpu,
        verify: verify_result,
    };
    Ok(load.into_result(spec, ended))
}

/// Each instance's setup: its database header read (a database not shut down
/// cleanly is refused: it needs recovery first), its old log files removed.
fn instance_setups(
    spec: &StorageSpec,
    caps: mailbench_io::Capabilities,
    ack_stream: bool,
) -> Result<Vec<InstanceSetup>> {
    let mut setups = Vec::new();
    for inst in &spec.instances {
        let h = read_header(&inst.db_path)?;
        if !h.clean {
            return Err(Error::usage(format!(
                "{} was not shut down cleanly (a crash or kill left it needing log replay); run \
                 `mailbench storage recover --log-files 0` (same flags) to replay its log, or give a new folder",
                inst.db_path.display()
            )));
        }
        // A clean database needs none of its old logs.
        if let Ok(rd) = std::fs::read_dir(&inst.log_dir) {
            for e in rd.flatten() {
                if crate::format::parse_log_file_name(&e.file_name().to_string_lossy()).is_some() {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        setups.push(InstanceSetup {
            target_iops: if spec.paced {
                spec.target_iops.map(|t| t / spec.instances.len() as f64)
            } else {
                None
            },
            ack_stream,
            ..InstanceSetup::of(spec, inst, h, caps.o_direct)
        });
    }
    Ok(setups)
}

/// The disks under the databases' and logs' paths, each with the paths on it.
fn disk_probes(spec: &StorageSpec) -> Vec<DiskProbe> {
    let mut disks: Vec<DiskProbe> = Vec::new();
    for inst in &spec.instances {
        for p in [&inst.db_path, &inst.log_dir] {
            if let Some((_, _, dev)) = device_of(p) {
                let ps = p.display().to_string();
                match disks.iter_mut().find(|d| d.device == dev) {
                    Some(d) => {
                        if !d.paths.contains(&ps) {
                            d.paths.push(ps)
                        }
                    }
                    None => disks.push(DiskProbe {
                        device: dev,
                        paths: vec![ps],
                        start: None,
                        last: None,
                    }),
                }
            }
        }
    }
    disks
}

/// The progress and test.log lines of the warm-up's start.
fn announce_warmup(
    spec: &StorageSpec,
    log: &TestLog,
    progress: &mut dyn Progress,
    io_engine: &str,
) {
    let (cache_bound, cache_max) = cache_lower_bound(spec);
    progress.phase(&format!(
        "running {} for {:?} after attaining prerequisites (database cache {:.1} MB of {:.1} MB, \
         at most {:?}) ({} databases, {} threads, {io_engine})",
        spec.profile.name,
        spec.duration,
        mib(cache_bound),
        mib(cache_max),
        spec.warmup,
        spec.instances.len(),
        spec.threads
    ));
    log.line(format!(
        "Database cache settings: (minimum: {:.1} MB, maximum: {:.1} MB)",
        mib(spec.cache_min_per_db * spec.instances.len() as u64),
        mib(cache_max)
    ));
    log.line(format!(
        "phase: warm-up, attaining prerequisites: database cache size, lower bound {} bytes \
         ({} % of the maximum), limit {}",
        cache_bound,
        spec.profile.preload_cache_pct,
        humantime::format_duration(spec.warmup)
    ));
}

/// What is known once the load and the verification are over, besides the
/// load's own figures.
struct Ended {
    header: RunHeader,
    started: Instant,
    io_engine: String,
    o_direct: bool,
    init: Option<crate::init::InitSummary>,
    /// This process's CPU from the instances' opening to their end.
    self_cpu: f64,
    verify: Option<crate::verify::VerifySummary>,
}

/// The load as the supervising thread sees it: the warm-up and the measured
/// window, the instances' intervals added up, the stop and the hard deadline.
struct Load {
    t0: Instant,
    n: usize,
    cache_bound: u64,
    cache_max: u64,
    warmup_min: Duration,
    /// The measured window, in seconds since `t0` (infinite until known).
    measure_from: f64,
    measure_to: f64,
    prerequisites: Option<Prerequisites>,
    intervals_file: std::fs::File,
    /// Intervals by sequence number, until every running instance reported it.
    pending: BTreeMap<u64, (f64, Vec<Option<Stats>>)>,
    inst_totals: Vec<Stats>,
    total: Stats,
    finished: Vec<bool>,
    clean: Vec<bool>,
    measured_s: f64,
    intervals: u64,
    stalls_max: f64,
    cpu_prev: Option<CpuTimes>,
    last_tick_s: f64,
    /// Host CPU busy, iowait, memory used (sums over the window's intervals), count.
    host_sum: (f64, f64, f64, u64),
    disks: Vec<DiskProbe>,
    errors: Vec<String>,
    interrupted: bool,
    stop_sent: bool,
    abort_at: Option<Instant>,
    grace: Duration,
    /// The end of the measured window plus the shutdown grace: at it I/O stops
    /// (abort), whatever the shutdown still has to do.
    hard_deadline: Instant,
    ended_by_deadline: bool,
    /// Once I/O was told to stop: the latest the instances may take to report
    /// (their own drain, then a margin); past it the result is written without them.
    give_up_at: Option<Instant>,
    gave_up: bool,
    measuring: bool,
    /// This process's CPU: over the measured window (summed over its intervals,
    /// read as each completes).
    self_cpu_tick: f64,
    window_cpu: f64,
}

impl Load {
    fn new(
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
        let intervals_file = std::fs::File::create(dir.file("intervals.jsonl"))
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
            measuring: false,
            self_cpu_tick: self_cpu0,
            window_cpu: 0.0,
        })
    }

    /// Runs until every instance finished (or gave up on): starts the window
    /// once the prerequisites are attained, stops the load at its end (or on
    /// an interrupt or an error), aborts I/O at the hard deadline, and adds up
    /// the intervals the instances report.
    fn supervise(
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
        log.line(format!(
            "Attaining prerequisites: Database Cache Size, Last: {cached} (lower bound: \
             {}, upper bound: none){}",
            self.cache_bound,
            if p.attained {
                ""
            } else {
                "; the warm-up limit ended the warm-up"
            }
        ));
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

    /// One event from an instance.
    fn event(&mut self, spec: &StorageSpec, log: &TestLog, ev: Event, progress: &mut dyn Progress) {
        match ev {
            Event::Error { instance, message } => {
                log.line(format!(
                    "error in {}: {message}",
                    spec.instances[instance].name
                ));
                progress.phase(&format!("error: {message}"));
                self.errors.push(message);
            }
            Event::Finished {
                instance, clean: c, ..
            } => {
                self.finished[instance] = true;
                self.clean[instance] = c;
                log.line(format!(
                    "{}: stopped, {}",
                    spec.instances[instance].name,
                    if c {
                        "shut down clean"
                    } else {
                        "left needing recovery"
                    }
                ));
            }
            Event::Interval {
                instance,
                seq,
                end_s,
                stats,
            } => {
                let n = self.n;
                let e = self
                    .pending
                    .entry(seq)
                    .or_insert_with(|| (end_s, vec![None; n]));
                e.0 = e.0.max(end_s);
                e.1[instance] = Some(*stats);
                // An interval is complete when every running instance reported it.
                while let Some((_, (_, parts))) = self.pending.iter().next() {
                    let complete = parts
                        .iter()
                        .enumerate()
                        .all(|(i, p)| p.is_some() || self.finished[i]);
                    if !complete {
                        break;
                    }
                    let Some((s, (end, parts))) = self.pending.pop_first() else {
                        break;
                    };
                    let parts: Vec<Stats> =
                        parts.into_iter().map(|p| p.unwrap_or_default()).collect();
                    self.interval(spec, s, end, parts, progress);
                }
            }
        }
    }

    /// A complete interval (every running instance's part): host and disk
    /// figures sampled, added to the window's totals if inside it, written to
    /// intervals.jsonl, shown as progress.
    fn interval(
        &mut self,
        spec: &StorageSpec,
        seq: u64,
        end: f64,
        parts: Vec<Stats>,
        progress: &mut dyn Progress,
    ) {
        let secs = (end - self.last_tick_s).max(1e-3);
        let start_s = self.last_tick_s;
        self.last_tick_s = end;
        // Intervals inside the window count (a short last interval too).
        let in_window = start_s >= self.measure_from - 1e-3 && start_s < self.measure_to;
        let cpu_now = CpuTimes::read();
        let (busy, iow) = match (&cpu_now, &self.cpu_prev) {
            (Some(a), Some(b)) => a.usage_since(b),
            _ => (0.0, 0.0),
        };
        self.cpu_prev = cpu_now;
        let self_cpu_now = process_cpu_s();
        if in_window {
            self.window_cpu += self_cpu_now - self.self_cpu_tick;
        }
        self.self_cpu_tick = self_cpu_now;
        let mem = Memory::read().map(|m| m.used_pct()).unwrap_or(0.0);
        let mut disk_rates = BTreeMap::new();
        for d in &mut self.disks {
            if let (Some(now), Some(prev)) = (DiskCounters::read(&d.device), d.last) {
                disk_rates.insert(d.device.clone(), now.rates_since(&prev, secs));
                d.last = Some(now);
            }
        }
        let mut sum = Stats::default();
        for p in &parts {
            sum.add(p);
        }
        if in_window {
            self.measured_s += secs;
            self.intervals += 1;
            for (t, p) in self.inst_totals.iter_mut().zip(parts.iter()) {
                t.add(p);
                self.stalls_max = self
                    .stalls_max
                    .max(p.counters.page_fault_stalls as f64 / secs);
            }
            self.total.add(&sum);
            self.host_sum.0 += busy;
            self.host_sum.1 += iow;
            self.host_sum.2 += mem;
            self.host_sum.3 += 1;
        }
        let rec = IntervalRecord {
            seq,
            end_s: end,
            seconds: secs,
            phase: if in_window {
                "measured".into()
            } else if start_s < self.measure_from {
                "warmup".into()
            } else {
                "shutdown".into()
            },
            instances: parts,
            cpu_busy_pct: busy,
            cpu_iowait_pct: iow,
            memory_used_pct: mem,
            disks: disk_rates,
        };
        if let Ok(line) = serde_json::to_string(&rec) {
            let _ = writeln!(self.intervals_file, "{line}");
        }
        if rec.phase != "shutdown" {
            progress.interval(&self.live(spec, &rec.phase, end, &sum, secs));
        }
    }

    /// The live figures of an interval (`sum` over its `secs`), for progress.
    fn live(
        &self,
        spec: &StorageSpec,
        phase: &str,
        end: f64,
        sum: &Stats,
        secs: f64,
    ) -> LiveFigures {
        let rd = sum.class(Class::DbRead).latency.summary();
        let lw = sum.class(Class::LogWrite).latency.summary();
        LiveFigures {
            phase: phase.to_string(),
            elapsed_s: end,
            remaining_s: if self.measure_to.is_finite() {
                self.measure_to - end
            } else {
                spec.duration.as_secs_f64() + (spec.warmup.as_secs_f64() - end).max(0.0)
            },
            transactional_iops: sum.transactional_ios() as f64 / secs,
            target_iops: spec.target_iops,
            db_read_avg_ms: rd.mean_ms(),
            log_write_avg_ms: lw.mean_ms(),
            db_read_limit_ms: spec.thresholds.db_read_avg_ms,
            log_write_limit_ms: spec.thresholds.log_write_avg_ms,
            errors: self.total.io_errors() + self.errors.len() as u64,
            passing: self.errors.is_empty()
                && rd.mean_ms() <= spec.thresholds.db_read_avg_ms
                && lw.mean_ms() <= spec.thresholds.log_write_avg_ms,
            classes: class_map(sum, secs),
            transactions_per_s: sum.counters.transactions as f64 / secs,
            transaction_latency_ms: sum.transaction_latency.summary().into(),
        }
    }

    /// Every page and log block verified after a run that ended normally
    /// (with `verify`); an interrupt during it marks the run interrupted.
    fn verify(
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

    /// Each instance's figures over the window (`secs` long).
    fn instance_results(&self, spec: &StorageSpec, secs: f64) -> Vec<InstanceResult> {
        spec.instances
            .iter()
            .zip(self.inst_totals.iter())
            .enumerate()
            .map(|(i, (s, t))| InstanceResult {
                name: s.name.clone(),
                db_path: s.db_path.display().to_string(),
                log_dir: s.log_dir.display().to_string(),
                size_bytes: s.size_bytes,
                sessions: s.sessions,
                transactional_iops: t.transactional_ios() as f64 / secs,
                classes: class_map(t, secs),
                counters: t.counters.clone(),
                transactions_per_s: t.counters.transactions as f64 / secs,
                page_fault_stalls_per_s: t.counters.page_fault_stalls as f64 / secs,
                clean_shutdown: self.clean[i],
                histograms: hist_map(t),
            })
            .collect()
    }

    /// The figures over all instances and the window (`secs` long).
    fn totals(&self, spec: &StorageSpec, secs: f64) -> Totals {
        let total = &self.total;
        let trans = total.transactional_ios() as f64;
        let log_writes = total.class(Class::LogWrite).ops as f64;
        let share = |x: f64| if trans > 0.0 { 100.0 * x / trans } else { 0.0 };
        Totals {
            target_iops: spec.target_iops,
            transactional_iops: trans / secs,
            db_read_share_pct: share(total.class(Class::DbRead).ops as f64),
            log_write_share_pct: share(log_writes),
            transactions_per_s: total.counters.transactions as f64 / secs,
            page_fault_stalls_per_s: total.counters.page_fault_stalls as f64 / secs,
            page_fault_stalls_max_per_s: self.stalls_max,
            io_errors: total.io_errors(),
            classes: class_map(total, secs),
            counters: total.counters.clone(),
            transaction_latency_ms: total.transaction_latency.summary().into(),
            histograms: hist_map(total),
            thresholds: spec.thresholds,
        }
    }

    /// The host's figures averaged over the window's intervals, and this
    /// process's CPU (over the window, per I/O of the window, and over the
    /// whole load: `self_cpu`).
    fn host(&self, self_cpu: f64) -> HostPerf {
        let avg = |x: f64| {
            if self.host_sum.3 > 0 {
                x / self.host_sum.3 as f64
            } else {
                0.0
            }
        };
        let ios: u64 = self.total.classes.iter().map(|c| c.ops).sum();
        HostPerf {
            cpu_busy_avg_pct: avg(self.host_sum.0),
            cpu_iowait_avg_pct: avg(self.host_sum.1),
            memory_used_avg_pct: avg(self.host_sum.2),
            memory_total_bytes: Memory::read().map(|m| m.total_bytes).unwrap_or(0),
            mailbench_cpu_s: self.window_cpu,
            mailbench_run_cpu_s: self_cpu,
            mailbench_cpu_us_per_io: if ios > 0 {
                self.window_cpu * 1e6 / ios as f64
            } else {
                0.0
            },
        }
    }

    /// The run's result: figures, verdict, window.
    fn into_result(self, spec: &StorageSpec, e: Ended) -> StorageResult {
        let secs = self.measured_s.max(1e-9);
        let instances = self.instance_results(spec, secs);
        let totals = self.totals(spec, secs);
        let host = self.host(e.self_cpu);
        let disk_results = self
            .disks
            .iter()
            .map(|d| DiskResult {
                device: d.device.clone(),
                paths: d.paths.clone(),
                rates: match (d.last, d.start) {
                    (Some(a), Some(b)) => a.rates_since(&b, secs),
                    _ => DiskRates::default(),
                },
            })
            .collect();
        let mut verdict = judge(
            spec,
            &totals,
            e.verify.as_ref(),
            &self.errors,
            self.measured_s,
        );
        if self.interrupted {
            verdict = Verdict { status: Status::Interrupted, reasons: vec!["The run was interrupted before its measured window ended; the figures are partial.".into()] };
        } else if self.ended_by_deadline {
            verdict.status = Status::Error;
            verdict.reasons.push(format!(
                "The shutdown did not finish within its {} grace after the measured window: I/O was \
                 stopped and the databases were left needing recovery (`mailbench storage recover \
                 --log-files 0`, same flags); the result is partial.",
                humantime::format_duration(self.grace)
            ));
        }
        let mut header = e.header;
        header.finish(e.started.elapsed());
        let warmup_s = self
            .prerequisites
            .as_ref()
            .map_or(self.t0.elapsed().as_secs_f64(), |p| p.seconds);
        StorageResult {
            run: header,
            verdict,
            spec: spec.clone(),
            io_engine: e.io_engine,
            o_direct: e.o_direct,
            window: Window {
                warmup_s,
                measured_s: self.measured_s,
                intervals: self.intervals,
                interrupted: self.interrupted,
                ended_by_deadline: self.ended_by_deadline,
                prerequisites: self.prerequisites,
            },
            init: e.init,
            instances,
            total: totals,
            host,
            disks: disk_results,
            verify: e.verify,
            errors: self.errors,
            intervals_file: "intervals.jsonl".into(),
            tuning: Vec::new(),
            merged: None,
        }
    }
}

/// How long after the prerequisites are attained the measured window starts:
/// long enough for every instance to learn it and end an interval there.
const WINDOW_LEAD: Duration = Duration::from_millis(200);

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

/// The warm-up's lower bound and the maximum database cache over all
/// instances, in bytes: `preload_cache_pct` of each instance's maximum cache,
/// or of its database where that is smaller (a small database cannot fill a
/// larger cache).
pub fn cache_lower_bound(spec: &StorageSpec) -> (u64, u64) {
    let ps = spec.profile.page_size.0;
    let max_pages = (spec.cache_max_per_db / ps).max(64);
    let pct = spec.profile.preload_cache_pct.clamp(0.0, 100.0);
    let mut bound = 0u64;
    let mut max = 0u64;
    for inst in &spec.instances {
        let fillable = max_pages.min(inst.pages);
        bound += (fillable as f64 * pct / 100.0).ceil() as u64 * ps;
        max += max_pages * ps;
    }
    (bound, max)
}

/// The shortest warm-up of a `--quick` run (at most its `--warmup`): its small
/// databases' caches reach their lower bound almost at once, and a window
/// starting right after the databases were created measured their first
/// reads at the volume's coldest (one 110 ms read failed the 100 ms maximum).
pub const QUICK_MIN_WARMUP: Duration = Duration::from_secs(10);

/// The shortest warm-up of `spec`'s run: [`QUICK_MIN_WARMUP`] with `--quick`
/// (never longer than the warm-up's limit), none otherwise.
pub fn warmup_min(spec: &StorageSpec) -> Duration {
    if spec.quick {
        QUICK_MIN_WARMUP.min(spec.warmup)
    } else {
        Duration::ZERO
    }
}

/// Whether the warm-up ("attaining prerequisites") is over: the database
/// caches hold at least their lower bound and the shortest warm-up (`min`)
/// passed, or the warm-up's time limit passed.
pub fn warmup_over(
    cached: u64,
    lower_bound: u64,
    elapsed: Duration,
    (min, limit): (Duration, Duration),
) -> bool {
    (cached >= lower_bound && elapsed >= min) || elapsed >= limit
}

/// The partial result of a run interrupted while it waited for its start time
/// (`--start-at`): the databases ready, nothing measured.
pub fn interrupted_before_start(
    spec: &StorageSpec,
    dir: &RunDir,
    init: crate::init::InitSummary,
) -> Result<StorageResult> {
    finish_early(
        spec,
        dir,
        RunHeader::begin("storage-run"),
        Instant::now(),
        "interrupted while waiting for the start time",
        Status::Interrupted,
        Some(init),
    )
}

fn finish_early(
    spec: &StorageSpec,
    dir: &RunDir,
    mut header: RunHeader,
    started: Instant,
    why: &str,
    status: Status,
    init: Option<crate::init::InitSummary>,
) -> Result<StorageResult> {
    dir.log.line(format!("stopped: {why}"));
    header.finish(started.elapsed());
    let empty = Stats::default();
    let result = StorageResult {
        run: header,
        verdict: Verdict {
            status,
            reasons: vec![format!("The run stopped before measuring: {why}.")],
        },
        spec: spec.clone(),
        io_engine: String::new(),
        o_direct: false,
        window: Window {
            interrupted: status == Status::Interrupted,
            ..Default::default()
        },
        init,
        instances: Vec::new(),
        total: Totals {
            target_iops: spec.target_iops,
            transactional_iops: 0.0,
            db_read_share_pct: 0.0,
            log_write_share_pct: 0.0,
            transactions_per_s: 0.0,
            page_fault_stalls_per_s: 0.0,
            page_fault_stalls_max_per_s: 0.0,
            io_errors: 0,
            classes: class_map(&empty, 1.0),
            counters: Default::default(),
            transaction_latency_ms: Default::default(),
            histograms: hist_map(&empty),
            thresholds: spec.thresholds,
        },
        host: HostPerf::default(),
        disks: Vec::new(),
        verify: None,
        errors: vec![why.to_string()],
        intervals_file: String::new(),
        tuning: Vec::new(),
        merged: None,
    };
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{SpecExt, StorageToml, Thresholds};
    use mailbench_base::config::ConfigFile;
    use std::path::Path;

    fn spec(profile: &str) -> StorageSpec {
        let text = format!("[storage]\ndb_size = \"1GiB\"\nprofile = \"{profile}\"\n");
        let c = ConfigFile::parse(&text, Path::new("t.toml")).unwrap();
        StorageSpec::resolve(StorageToml::default(), &c, Path::new("/tmp/x")).unwrap()
    }

    #[test]
    fn the_progress_line_names_ranks_only_for_an_aggregate() {
        let f = LiveFigures {
            phase: "measured".into(),
            elapsed_s: 12.0,
            remaining_s: -1.0,
            transactional_iops: 1234.56,
            target_iops: Some(2000.0),
            passing: false,
            errors: 3,
            ..Default::default()
        };
        let one = f.progress_line(None);
        assert!(
            one.starts_with("[    12s measured] IOPS   1234.6 / target 2000 |"),
            "{one}"
        );
        assert!(one.ends_with("| errors 3 | FAILING | 0s left"), "{one}");
        let all = f.progress_line(Some(4));
        assert!(
            all.starts_with("[    12s measured 4 ranks] IOPS    1234.6 / target 2000 |"),
            "{all}"
        );
    }

    fn totals(stalls_avg: f64, stalls_max: f64) -> Totals {
        let empty = Stats::default();
        Totals {
            target_iops: None,
            transactional_iops: 100.0,
            db_read_share_pct: 60.0,
            log_write_share_pct: 8.0,
            transactions_per_s: 50.0,
            page_fault_stalls_per_s: stalls_avg,
            page_fault_stalls_max_per_s: stalls_max,
            io_errors: 0,
            classes: class_map(&empty, 1.0),
            counters: Default::default(),
            transaction_latency_ms: Default::default(),
            histograms: hist_map(&empty),
            thresholds: Thresholds::exchange2013(crate::spec::TestType::Performance),
        }
    }

    #[test]
    fn one_sample_with_stalls_fails_the_2007_rule_but_not_the_2013_average() {
        // 0.2 stalls/s on average, 1.5/s in one database's worst sample.
        let t = totals(0.2, 1.5);
        let v = judge(&spec("exchange2013"), &t, None, &[], 60.0);
        assert_eq!(v.status, Status::Pass, "{:?}", v.reasons);
        let v = judge(&spec("exchange2007"), &t, None, &[], 60.0);
        assert_eq!(v.status, Status::Fail);
        assert!(
            v.reasons.iter().any(|r| r.contains("in one sample")),
            "{:?}",
            v.reasons
        );
        let v = judge(&spec("exchange2007"), &totals(0.0, 0.0), None, &[], 60.0);
        assert_eq!(v.status, Status::Pass, "{:?}", v.reasons);
    }

    #[test]
    fn the_warm_up_ends_when_the_cache_holds_its_lower_bound_or_at_its_limit() {
        let limit = (Duration::ZERO, Duration::from_secs(30));
        let early = Duration::from_secs(1);
        assert!(
            !warmup_over(899, 900, early, limit),
            "under the bound, in time"
        );
        assert!(warmup_over(900, 900, early, limit), "at the bound");
        assert!(warmup_over(950, 900, early, limit), "over the bound");
        assert!(
            warmup_over(10, 900, limit.1, limit),
            "the limit ends it anyway"
        );
        let quick = (Duration::from_secs(10), Duration::from_secs(30));
        assert!(
            !warmup_over(950, 900, early, quick),
            "over the bound, before the shortest warm-up"
        );
        assert!(
            warmup_over(950, 900, Duration::from_secs(10), quick),
            "over the bound, after the shortest warm-up"
        );
        assert!(
            warmup_over(10, 900, quick.1, quick),
            "the limit still ends it"
        );
        let mut s = spec("exchange2013");
        assert_eq!(warmup_min(&s), Duration::ZERO, "only --quick has one");
        s.quick = true;
        s.warmup = Duration::from_secs(30);
        assert_eq!(warmup_min(&s), QUICK_MIN_WARMUP);
        s.warmup = Duration::from_secs(3);
        assert_eq!(
            warmup_min(&s),
            Duration::from_secs(3),
            "never past the limit"
        );
        assert!(
            warmup_over(0, 0, Duration::ZERO, limit),
            "no bound: at once"
        );
        let p = Prerequisites::new(900, 1000, 10, 30.0, 30.0);
        assert!(!p.attained);
        let w = p.warning.as_deref().unwrap_or_default();
        assert!(w.contains("lower bound") && w.contains("--warmup"), "{w}");
        let p = Prerequisites::new(900, 1000, 900, 3.0, 30.0);
        assert!(p.attained && p.warning.is_none());
    }

    #[test]
    fn the_lower_bound_is_the_profile_share_of_the_maximum_cache_or_of_a_smaller_database() {
        let mut s = spec("exchange2013");
        s.cache_max_per_db = 256 << 20;
        s.profile.preload_cache_pct = 90.0;
        let ps = s.profile.page_size.0;
        for i in &mut s.instances {
            i.pages = (1 << 30) / ps;
        }
        let n = s.instances.len() as u64;
        let (bound, max) = cache_lower_bound(&s);
        assert_eq!(max, n * (256 << 20));
        // 90 % of 8192 pages of 32 KiB, rounded up to a page.
        assert_eq!(bound, n * 7373 * ps);
        // A database of 1000 pages fills at most 900 of them.
        for i in &mut s.instances {
            i.pages = 1000;
        }
        assert_eq!(cache_lower_bound(&s).0, n * 900 * ps);
        s.profile.preload_cache_pct = 0.0;
        assert_eq!(cache_lower_bound(&s).0, 0);
    }
}
