//! `mail run`'s controller: while the users run, one interval line per tick
//! (intervals.jsonl, the live line, the hooks), the host and the server queue
//! sampled, the end of the day and of the drain, the hard time limit, Ctrl-C.

use super::Output;
use crate::hooks::{IntervalView, OnInterval};
use crate::options::Resolved;
use crate::run::Shared;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::TestLog;
use mailbench_metrics::system::{CpuTimes, DiskCounters, DiskRates, Memory};
use mailbench_results::mail::run::{MailInterval, QueueSample};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::time::Instant;

/// What the controller measured.
#[derive(Default)]
pub(super) struct CtlResult {
    pub queue: Vec<QueueSample>,
    pub cpu_busy_pct: f64,
    pub cpu_iowait_pct: f64,
    pub mem_max_pct: f64,
    pub disk: Option<DiskRates>,
    pub drain_s: f64,
    /// The run reached its hard time limit and its users were aborted.
    pub hard_stopped: bool,
    /// The lines written to intervals.jsonl that the steady window holds
    /// (all of them when it cannot be resolved): the result's steady figures
    /// are made of them, and a whole real-time day's lines (some 17 KB each,
    /// their histograms) would grow the generator by tens of MB.
    pub intervals: Vec<MailInterval>,
    /// The generator's memory and how much of the day it drove.
    pub generator: crate::result::GenSamples,
    /// The first failure to write intervals.jsonl (the file is then
    /// incomplete: merges recompute from it).
    pub intervals_error: Option<String>,
}

/// How far into the day the resident set "at the day's start" is taken (a
/// tenth of a shorter day): once the day's first tasks have made what every
/// task needs (the operations' histograms, the buffers a task fills, the
/// allocator's arenas of the runtime's threads), so that the day's end over
/// its start measures what grew over the day, not the first task's needs.
pub(crate) const RSS_DAY_START_AFTER: Duration = Duration::from_secs(10);

/// When the resident set "at the day's start" is taken, for a day from
/// `day_start` to `day_end`.
fn rss_day_start_at(day_start: Instant, day_end: Instant) -> Instant {
    day_start + RSS_DAY_START_AFTER.min((day_end - day_start) / 10)
}

/// Takes one resident-set sample `rss` at `now` into `g` (`day_start`: see
/// [`rss_day_start_at`]).
fn sample_into(
    g: &mut crate::result::GenSamples,
    rss: u64,
    now: Instant,
    (day_start, day_end): (Instant, Instant),
    stopped: bool,
) {
    g.rss_max_bytes = g.rss_max_bytes.max(rss);
    if now >= day_start && g.rss_day_start_bytes == 0 {
        g.rss_day_start_bytes = rss;
    }
    if now <= day_end && !stopped {
        g.rss_day_end_bytes = rss;
    }
}

/// This process's resident set size (VmRSS), bytes.
pub(crate) fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Real seconds of the day (`day_start`..`day_end`) that passed before `stop`.
fn day_run_s(day_start: Instant, day_end: Instant, stop: Instant) -> f64 {
    stop.min(day_end)
        .saturating_duration_since(day_start)
        .as_secs_f64()
}

/// How often the controller checks the end of the day and of the drain and
/// the hard limit, whatever `--interval` is.
const CONTROL_TICK: Duration = Duration::from_secs(1);

/// How long the users get, once interrupted, to end the task they are in
/// (and log out) before they are aborted: the result must be written soon
/// after a SIGTERM (`mpirun` sends SIGKILL a second after it), whatever
/// operation a user waits on (each may take up to `--op-timeout`).
const INTERRUPT_GRACE: Duration = Duration::from_millis(500);

/// The local server's queue length (None: remote target or unreadable).
async fn sample_queue(queue_etc: &Option<PathBuf>) -> Option<u64> {
    let etc = queue_etc.clone()?;
    tokio::task::spawn_blocking(move || crate::local::queue_len(&etc))
        .await
        .ok()
        .flatten()
}

/// Whether the drain is over at `now` (after the day's end): every
/// delivery seen and the queue (if any) empty, or the drain limit passed.
fn drain_over(
    now: Instant,
    day_end: Instant,
    drain: Duration,
    delivered: u64,
    expected: u64,
    queue: Option<u64>,
) -> bool {
    (delivered >= expected && queue.unwrap_or(0) == 0) || now >= day_end + drain
}

/// What woke the controller.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Wake {
    Sample,
    Control,
    /// SIGINT or SIGTERM (also counted by the `Interrupt`).
    Signal,
}

/// What an interrupt asks of the users.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Stop {
    No,
    /// The first interrupt: told to stop, aborted after [`INTERRUPT_GRACE`].
    Grace,
    /// A second interrupt (during the grace, or two before the controller
    /// woke): aborted now.
    AtOnce,
}

/// What to do about an interrupt at a wake: the first starts the grace (also
/// when the users were already stopping at the drain's end), a second aborts
/// the users at once. `signals`: the signals this controller was woken by
/// (the `Interrupt` counts them too, a moment later); a signal counts as the
/// first interrupt even where no handler raised the flag.
fn on_interrupt(
    intr: &Interrupt,
    wake: Wake,
    signals: u32,
    in_grace: bool,
    stopping: bool,
) -> Stop {
    if wake == Wake::Signal && !intr.raised() {
        intr.raise();
    }
    if intr.insisted() || signals >= 2 {
        Stop::AtOnce
    } else if intr.raised() && !in_grace && (wake == Wake::Signal || !stopping) {
        Stop::Grace
    } else {
        Stop::No
    }
}

/// Runs the users, writes one interval line per tick, samples the host and the
/// queue, ends the drain when every delivery arrived (or the drain limit passed),
/// and stops early on Ctrl-C / SIGTERM: the users get [`INTERRUPT_GRACE`] to
/// end their task, or none at a second Ctrl-C.
#[allow(clippy::too_many_arguments)]
pub(super) async fn controller<'h>(
    sh: Arc<Shared>,
    o: &Resolved,
    log: &TestLog,
    intervals: &mut std::fs::File,
    queue_etc: Option<PathBuf>,
    disk_dev: Option<String>,
    out: &Output,
    intr: Interrupt,
    on_interval: &mut Option<OnInterval<'h>>,
) -> CtlResult {
    use tokio::signal::unix::{SignalKind, signal};
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut users = tokio::spawn(crate::run::run_users(sh.clone(), stop_rx));
    let mut sigint = signal(SignalKind::interrupt()).ok();
    let mut sigterm = signal(SignalKind::terminate()).ok();
    let mut tick = tokio::time::interval(o.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    // The end of the day, the drain and the hard limit are watched on a
    // tick of their own: a long --interval only spaces the samples.
    let mut control = tokio::time::interval(CONTROL_TICK.min(o.interval));
    control.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    control.tick().await;
    let day_end = sh.day_end();
    let mut c = Control {
        host: HostSampler::start(disk_dev),
        res: CtlResult::default(),
        day_end,
        // Hard bound: nothing outlives the day + drain + a grace period.
        hard_end: day_end + o.drain + o.op_timeout * 2 + Duration::from_secs(30),
        stopping: false,
        stopped_at: None,
        stop_tx,
        steady: super::steady_window(o, &sh.profile).ok(),
        sh,
        o,
        log,
        queue_etc,
        out,
    };
    let mut grace: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    let mut signals = 0u32;
    loop {
        let wake = tokio::select! {
            _ = tick.tick() => Wake::Sample,
            _ = control.tick() => Wake::Control,
            _ = async { match sigint.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending::<()>().await } } => Wake::Signal,
            _ = async { match sigterm.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending::<()>().await } } => Wake::Signal,
            _ = &mut users => { break; }
            _ = async { match grace.as_mut() { Some(g) => g.as_mut().await, None => std::future::pending::<()>().await } } => {
                c.log.line("interrupted: users still in a task aborted");
                users.abort();
                break;
            }
        };
        signals += u32::from(wake == Wake::Signal);
        match on_interrupt(&intr, wake, signals, grace.is_some(), c.stopping) {
            Stop::No => {}
            Stop::Grace => {
                c.interrupted();
                grace = Some(Box::pin(tokio::time::sleep(INTERRUPT_GRACE)));
                continue;
            }
            Stop::AtOnce => {
                if grace.is_none() {
                    c.interrupted();
                }
                c.log
                    .line("interrupted again: users still in a task aborted at once");
                users.abort();
                break;
            }
        }
        let go_on = match wake {
            Wake::Sample => c.interval(intervals, on_interval).await,
            Wake::Control => c.control_tick().await,
            Wake::Signal => true,
        };
        if !go_on {
            users.abort();
            break;
        }
    }
    c.finish().await
}

/// The controller's state while the users run.
struct Control<'a> {
    sh: Arc<Shared>,
    o: &'a Resolved,
    log: &'a TestLog,
    out: &'a Output,
    /// The local Postfix's configuration folder (None: remote target).
    queue_etc: Option<PathBuf>,
    host: HostSampler,
    res: CtlResult,
    day_end: Instant,
    hard_end: Instant,
    /// The users were told to stop (drain over or interrupted).
    stopping: bool,
    /// When an interrupt stopped the users.
    stopped_at: Option<Instant>,
    stop_tx: tokio::sync::watch::Sender<bool>,
    /// The steady window, whose interval lines are kept.
    steady: Option<crate::steady::Window>,
}

impl Control<'_> {
    /// Ctrl-C / SIGTERM (or the coordinator's flag): the users are told to stop.
    fn interrupted(&mut self) {
        self.log.line("interrupted: stopping the users");
        self.stopped_at.get_or_insert_with(Instant::now);
        self.sample_rss(Instant::now());
        self.sh.interrupted.store(true, Ordering::Relaxed);
        let _ = self.stop_tx.send(true);
        self.stopping = true;
    }

    /// A control tick: after the day, ends the drain once it is over (the queue is
    /// asked only when every delivery was seen). False past the hard limit.
    async fn control_tick(&mut self) -> bool {
        let now = Instant::now();
        self.sample_rss(now);
        if !self.stopping && now >= self.day_end {
            let (_, expected, delivered) = self.sh.counts();
            // The queue is only asked once every delivery was seen.
            let queue = if delivered >= expected {
                sample_queue(&self.queue_etc).await
            } else {
                None
            };
            if drain_over(now, self.day_end, self.o.drain, delivered, expected, queue) {
                self.end_drain(now, delivered, expected);
            }
        }
        !self.past_hard_end(now)
    }

    /// One sampling interval: the caller's hook, the queue and the host sampled,
    /// the interval line written (intervals.jsonl, the live line), then the drain
    /// and the hard limit checked. False past the hard limit.
    async fn interval(
        &mut self,
        intervals: &mut std::fs::File,
        on_interval: &mut Option<OnInterval<'_>>,
    ) -> bool {
        let (sh, o, day_end) = (self.sh.clone(), self.o, self.day_end);
        let now = Instant::now();
        let t_s = now.saturating_duration_since(sh.t0).as_secs_f64();
        let snap = sh.take_interval();
        if let Some(f) = on_interval.as_mut() {
            f(&IntervalView {
                elapsed_s: t_s,
                remaining_s: day_end.saturating_duration_since(now).as_secs_f64(),
                interval_s: o.interval.as_secs_f64(),
                users: sh.topo.users.len(),
                ops: &snap,
            });
        }
        let queue = sample_queue(&self.queue_etc).await;
        if let Some(q) = queue {
            self.res.queue.push(QueueSample { t_s, length: q });
        }
        let host = self.host.sample(now, sh.day_start(), day_end);
        self.res.mem_max_pct = self.res.mem_max_pct.max(host.memory_used_pct);
        let (submitted, expected, delivered) = sh.counts();
        let phase = if now < sh.day_start() {
            "ramp_up"
        } else if now < day_end {
            "day"
        } else {
            "drain"
        };
        let line = MailInterval {
            t_s,
            phase: phase.into(),
            interval_s: o.interval.as_secs_f64(),
            ops: snap.ops.clone(),
            submitted: snap.submitted,
            delivered: snap.delivered,
            delivery_p95_ms: snap.delivery_p95_ms,
            delivery_hist: snap.delivery_hist.clone(),
            sched_delay_p99_ms: snap.sched_delay_p99_ms,
            sched_delay_hist: snap.sched_delay_hist.clone(),
            total_submitted: submitted,
            total_expected_deliveries: expected,
            total_delivered: delivered,
            queue_length: queue,
            cpu_busy_pct: host.cpu_busy_pct,
            cpu_iowait_pct: host.cpu_iowait_pct,
            memory_used_pct: host.memory_used_pct,
            disk: host.disk,
            rss_bytes: self.sample_rss(now),
            generators: None,
        };
        let written = serde_json::to_string(&line)
            .map_err(|e| e.to_string())
            .and_then(|text| writeln!(intervals, "{text}").map_err(|e| e.to_string()));
        if let Err(e) = written {
            self.res.intervals_error.get_or_insert(format!(
                "intervals.jsonl: cannot write an interval ({e}); the file is incomplete and \
                 this result cannot be merged exactly: free space or fix the output folder"
            ));
        }
        if (self.steady.as_ref()).is_none_or(|w| w.holds(line.t_s, line.interval_s)) {
            self.res.intervals.push(line);
        }
        if !self.out.quiet && !self.out.json {
            // One compact line per interval (live progress; -q silences it).
            let g = snap.glance();
            let left = day_end.saturating_duration_since(now).as_secs_f64();
            eprintln!(
                "[{t_s:>7.1}s {phase:<7}] tasks {:>7.1}/s | slowest task p95 {:>8.1} ms | submitted {submitted} delivered {delivered}/{expected} | queue {} | errors {} | {left:.0}s of the day left",
                g.tasks as f64 / o.interval.as_secs_f64().max(1e-9),
                g.worst_p95_ms,
                queue.map(|q| q.to_string()).unwrap_or_else(|| "-".into()),
                g.errors
            );
        }
        if !self.stopping
            && now >= day_end
            && drain_over(now, day_end, o.drain, delivered, expected, queue)
        {
            self.end_drain(now, delivered, expected);
        }
        !self.past_hard_end(now)
    }

    /// One sample of the generator's resident set; returns it.
    fn sample_rss(&mut self, now: Instant) -> Option<u64> {
        let rss = rss_bytes()?;
        let end = self.day_end;
        let start = rss_day_start_at(self.sh.day_start(), end);
        let stopped = self.stopped_at.is_some_and(|t| t < now);
        sample_into(&mut self.res.generator, rss, now, (start, end), stopped);
        Some(rss)
    }

    /// The drain is over: its length logged, the users told to stop.
    fn end_drain(&mut self, now: Instant, delivered: u64, expected: u64) {
        self.res.drain_s = now.saturating_duration_since(self.day_end).as_secs_f64();
        self.log.line(format!(
            "drain over after {:.1} s: {delivered}/{expected} deliveries seen",
            self.res.drain_s
        ));
        let _ = self.stop_tx.send(true);
        self.stopping = true;
    }

    /// Whether the hard time limit has passed (then logged and recorded: the caller
    /// aborts the users).
    fn past_hard_end(&mut self, now: Instant) -> bool {
        if now < self.hard_end {
            return false;
        }
        self.log
            .line("hard time limit reached: aborting the remaining users");
        self.res.hard_stopped = true;
        true
    }

    /// After the users: one last queue sample, the host's CPU and disk over the day.
    async fn finish(mut self) -> CtlResult {
        let now = Instant::now();
        self.sample_rss(now);
        let stop = self.stopped_at.unwrap_or(now);
        self.res.generator.day_run_s = day_run_s(self.sh.day_start(), self.day_end, stop);
        let slots = &self.sh.task_slots;
        self.log.line(format!(
            "generator: at most {} of its {} task slots held at once",
            slots.most_held(),
            slots.slots()
        ));
        if let Some(q) = sample_queue(&self.queue_etc).await {
            self.res.queue.push(QueueSample {
                t_s: Instant::now()
                    .saturating_duration_since(self.sh.t0)
                    .as_secs_f64(),
                length: q,
            });
        }
        self.host.over_day(&mut self.res);
        self.res
    }
}

/// One interval's host figures.
struct HostSample {
    cpu_busy_pct: f64,
    cpu_iowait_pct: f64,
    memory_used_pct: f64,
    disk: Option<DiskRates>,
}

/// This host's CPU and disk counters: at the start, at the last interval, at the
/// start and the end of the measured day.
struct HostSampler {
    disk_dev: Option<String>,
    cpu0: Option<CpuTimes>,
    disk0: Option<DiskCounters>,
    t_disk0: std::time::Instant,
    cpu_prev: Option<CpuTimes>,
    disk_prev: Option<DiskCounters>,
    t_prev: std::time::Instant,
    cpu_day_start: Option<CpuTimes>,
    disk_day_start: Option<(DiskCounters, std::time::Instant)>,
    day_end: Option<(CpuTimes, Option<DiskCounters>, std::time::Instant)>,
}

impl HostSampler {
    fn start(disk_dev: Option<String>) -> HostSampler {
        let cpu0 = CpuTimes::read();
        let disk0 = disk_dev.as_deref().and_then(DiskCounters::read);
        let t_disk0 = std::time::Instant::now();
        HostSampler {
            disk_dev,
            cpu0,
            disk0,
            t_disk0,
            cpu_prev: cpu0,
            disk_prev: disk0,
            t_prev: t_disk0,
            cpu_day_start: None,
            disk_day_start: None,
            day_end: None,
        }
    }

    /// The figures since the last sample; marks the day's start and end when `now`
    /// passed them.
    fn sample(&mut self, now: Instant, day_start: Instant, day_end: Instant) -> HostSample {
        let cpu = CpuTimes::read();
        let (busy, iow) = match (cpu, self.cpu_prev) {
            (Some(a), Some(b)) => a.usage_since(&b),
            _ => (0.0, 0.0),
        };
        self.cpu_prev = cpu;
        let mem = Memory::read().map(|m| m.used_pct()).unwrap_or(0.0);
        let disk_now = self.disk_dev.as_deref().and_then(DiskCounters::read);
        let wall = std::time::Instant::now();
        let disk = match (disk_now, self.disk_prev) {
            (Some(a), Some(b)) => {
                Some(a.rates_since(&b, wall.duration_since(self.t_prev).as_secs_f64()))
            }
            _ => None,
        };
        self.disk_prev = disk_now;
        self.t_prev = wall;
        if now >= day_start && self.cpu_day_start.is_none() {
            self.cpu_day_start = cpu;
            self.disk_day_start = disk_now.map(|d| (d, wall));
        }
        if now >= day_end
            && self.day_end.is_none()
            && let Some(c) = cpu
        {
            self.day_end = Some((c, disk_now, wall));
        }
        HostSample {
            cpu_busy_pct: busy,
            cpu_iowait_pct: iow,
            memory_used_pct: mem,
            disk,
        }
    }

    /// Host CPU and disk over the measured day (from the run's start when the day
    /// never started, to now when it never ended).
    fn over_day(&self, res: &mut CtlResult) {
        let end = self.day_end.or_else(|| {
            CpuTimes::read().map(|c| {
                (
                    c,
                    self.disk_dev.as_deref().and_then(DiskCounters::read),
                    std::time::Instant::now(),
                )
            })
        });
        if let (Some(a), Some((b, dend, wend))) = (self.cpu_day_start.or(self.cpu0), end) {
            let (busy, iow) = b.usage_since(&a);
            res.cpu_busy_pct = busy;
            res.cpu_iowait_pct = iow;
            let start = self
                .disk_day_start
                .or(self.disk0.map(|d| (d, self.t_disk0)));
            if let (Some((d0, w0)), Some(d1)) = (start, dend) {
                res.disk = Some(d1.rates_since(&d0, wend.duration_since(w0).as_secs_f64()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_day_start_resident_set_is_taken_after_the_first_tasks() {
        let t0 = Instant::now();
        let (start, end) = (t0 + Duration::from_secs(30), t0 + Duration::from_secs(330));
        let at = rss_day_start_at(start, end);
        assert_eq!(at, start + RSS_DAY_START_AFTER);
        // A short day: a tenth of it.
        let short = rss_day_start_at(start, start + Duration::from_secs(20));
        assert_eq!(short, start + Duration::from_secs(2));
        let mut g = crate::result::GenSamples::default();
        sample_into(&mut g, 100, start, (at, end), false);
        assert_eq!(g.rss_day_start_bytes, 0, "taken at the day's first second");
        sample_into(&mut g, 120, at, (at, end), false);
        sample_into(&mut g, 125, at + Duration::from_secs(1), (at, end), false);
        assert_eq!(g.rss_day_start_bytes, 120);
        sample_into(&mut g, 130, end, (at, end), false);
        sample_into(&mut g, 90, end + Duration::from_secs(1), (at, end), false);
        assert_eq!((g.rss_day_end_bytes, g.rss_max_bytes), (130, 130));
    }

    #[test]
    fn a_second_interrupt_aborts_the_users_at_once() {
        let intr = Interrupt::never();
        assert_eq!(on_interrupt(&intr, Wake::Sample, 0, false, false), Stop::No);
        // The first: the users get their grace, once.
        assert_eq!(
            on_interrupt(&intr, Wake::Signal, 1, false, false),
            Stop::Grace
        );
        assert!(
            intr.raised(),
            "a signal no handler counted is the first interrupt"
        );
        assert_eq!(on_interrupt(&intr, Wake::Control, 1, true, true), Stop::No);
        // The second signal, during the grace: no new grace, aborted now.
        assert_eq!(
            on_interrupt(&intr, Wake::Signal, 2, true, true),
            Stop::AtOnce
        );
    }

    #[test]
    fn two_counted_interrupts_abort_at_once_at_any_wake() {
        let intr = Interrupt::never();
        intr.count_one();
        assert_eq!(
            on_interrupt(&intr, Wake::Sample, 0, false, false),
            Stop::Grace
        );
        intr.count_one();
        assert_eq!(
            on_interrupt(&intr, Wake::Control, 0, true, true),
            Stop::AtOnce
        );
        // Raised by the coordinator while the drain already stops the users: no grace needed.
        let late = Interrupt::never();
        late.raise();
        assert_eq!(on_interrupt(&late, Wake::Control, 0, false, true), Stop::No);
    }
}
