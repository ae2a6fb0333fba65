//! The steady state of a mail run, as pure functions of its interval figures.
//!
//! A level of users has a ramp-up (logons, then the users settling into the
//! day), a measured **steady window** and a tail (the rest of the day and the
//! drain). MMB3 measured 4 hours of an 8-hour day (calibration.md §3); mailbench
//! measures the middle half of the day by default (`--steady 25%-75%`), or any
//! part of it given as shares of the day or as simulated times (`--steady
//! 2h-6h`). Per-task percentiles, the response time (weighted 95th percentile)
//! and its weighted 50th-percentile companion, the mail flow and the server's
//! figures are taken over that window; the queue criterion holds over the
//! whole window: no upward trend, and under a limit at its end.

use crate::profile::{Profile, TaskKind};
use mailbench_base::{Error, Result};
use mailbench_metrics::LatencyHist;
use mailbench_metrics::system::DiskRates;
use mailbench_results::mail::run::MailInterval;
use std::collections::BTreeMap;
use std::time::Duration;

pub use mailbench_results::mail::steady::{QueueJudgement, SteadySection, Window};

/// One end of the steady window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Point {
    /// A share of the day, 0..=1.
    Share(f64),
    /// A time of the simulated day (`2h` of an 8-hour day).
    Simulated(Duration),
}

/// `--steady FROM-TO`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadySpec {
    pub from: Point,
    pub to: Point,
}

impl Default for SteadySpec {
    /// The middle half of the day.
    fn default() -> SteadySpec {
        SteadySpec {
            from: Point::Share(0.25),
            to: Point::Share(0.75),
        }
    }
}

fn parse_point(s: &str) -> std::result::Result<Point, String> {
    let s = s.trim();
    if let Some(p) = s.strip_suffix('%') {
        let v: f64 = p
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not a percentage"))?;
        if !(0.0..=100.0).contains(&v) {
            return Err(format!("`{s}` is outside 0%..100%"));
        }
        return Ok(Point::Share(v / 100.0));
    }
    mailbench_base::units::parse_duration(s)
        .map(Point::Simulated)
        .map_err(|_| format!("`{s}` is neither a share of the day (25%) nor a time of day (2h)"))
}

impl std::str::FromStr for SteadySpec {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<SteadySpec, String> {
        let (a, b) = s
            .split_once('-')
            .ok_or_else(|| format!("--steady `{s}`: write FROM-TO, e.g. 25%-75% or 2h-6h"))?;
        let spec = SteadySpec {
            from: parse_point(a).map_err(|e| format!("--steady: {e}"))?,
            to: parse_point(b).map_err(|e| format!("--steady: {e}"))?,
        };
        Ok(spec)
    }
}

impl SteadySpec {
    /// The window of a run with this ramp-up and (real) day, whose simulated
    /// day is `simulated`; a usage error when it is empty or leaves the day.
    pub fn resolve(&self, ramp_up: Duration, day: Duration, simulated: Duration) -> Result<Window> {
        let share = |p: Point| match p {
            Point::Share(s) => s,
            Point::Simulated(d) => d.as_secs_f64() / simulated.as_secs_f64().max(1e-9),
        };
        let (a, b) = (share(self.from), share(self.to));
        if !(0.0..=1.0).contains(&a) || !(0.0..=1.0).contains(&b) || a >= b {
            return Err(Error::usage(format!(
                "--steady: the window must lie inside the {:?} simulated day and end after it starts (got {:.0}%-{:.0}% of the day)",
                simulated,
                100.0 * a,
                100.0 * b
            )));
        }
        let d0 = ramp_up.as_secs_f64();
        let len = day.as_secs_f64();
        Ok(Window {
            day_from_s: d0,
            day_to_s: d0 + len,
            from_s: d0 + a * len,
            to_s: d0 + b * len,
        })
    }
}

/// One interval's figures (a line of intervals.jsonl, decoded).
#[derive(Debug, Clone, Default)]
pub struct Interval {
    /// End of the interval, seconds since the start.
    pub t_s: f64,
    pub interval_s: f64,
    pub ops: BTreeMap<String, LatencyHist>,
    pub errors: BTreeMap<String, u64>,
    pub submitted: u64,
    pub delivered: u64,
    pub queue: Option<f64>,
    /// The generator's host CPU busy over the interval, %.
    pub cpu_busy_pct: f64,
    pub disk: Option<DiskRates>,
}

/// The steady window's figures.
#[derive(Debug, Clone, Default)]
pub struct Steady {
    pub window: Option<Window>,
    pub intervals: usize,
    /// Per operation: the window's histogram.
    pub hists: BTreeMap<String, LatencyHist>,
    pub errors: BTreeMap<String, u64>,
    /// Response time: the weighted 95th percentile of the tasks, ms.
    pub response_time_ms: f64,
    /// The same weighting over the tasks' 50th percentiles, ms.
    pub response_time_p50_ms: f64,
    pub submitted: u64,
    pub delivered: u64,
    /// Per user per simulated day, from the window scaled to the whole day.
    pub submitted_per_user_per_day: f64,
    pub delivered_per_user_per_day: f64,
    /// The generator's host CPU, averaged over the window's intervals, %.
    pub cpu_busy_pct: f64,
    /// The local store's disk, averaged over the window's intervals.
    pub disk: Option<DiskRates>,
}

/// Σ(weight × the task's `q` quantile) / Σweight over the tasks that ran: the
/// response time's weighting (judge.rs) at any percentile.
pub fn weighted_ms(profile: &Profile, hists: &BTreeMap<String, LatencyHist>, q: f64) -> f64 {
    crate::judge::weighted_p95_ms(profile, |k: TaskKind| {
        hists
            .get(k.name())
            .filter(|h| !h.is_empty())
            .map(|h| h.quantile_us(q))
    })
    .0
}

/// The figures of the intervals inside `w`, for `users` users.
pub fn steady(intervals: &[Interval], w: &Window, profile: &Profile, users: usize) -> Steady {
    let mut s = Steady {
        window: Some(*w),
        ..Default::default()
    };
    let mut disks = Vec::new();
    for iv in intervals.iter().filter(|i| w.holds(i.t_s, i.interval_s)) {
        s.intervals += 1;
        for (op, h) in &iv.ops {
            s.hists.entry(op.clone()).or_default().add(h);
        }
        for (op, e) in &iv.errors {
            *s.errors.entry(op.clone()).or_default() += e;
        }
        s.submitted += iv.submitted;
        s.delivered += iv.delivered;
        s.cpu_busy_pct += iv.cpu_busy_pct;
        if let Some(d) = &iv.disk {
            disks.push(*d);
        }
    }
    if s.intervals > 0 {
        s.cpu_busy_pct /= s.intervals as f64;
    }
    s.disk = mean_disk(&disks);
    s.response_time_ms = weighted_ms(profile, &s.hists, 0.95);
    s.response_time_p50_ms = weighted_ms(profile, &s.hists, 0.50);
    let per_day = |n: u64| {
        if users == 0 || s.intervals == 0 {
            0.0
        } else {
            n as f64 / users as f64 / w.share_of_day()
        }
    };
    s.submitted_per_user_per_day = per_day(s.submitted);
    s.delivered_per_user_per_day = per_day(s.delivered);
    s
}

fn mean_disk(d: &[DiskRates]) -> Option<DiskRates> {
    if d.is_empty() {
        return None;
    }
    let n = d.len() as f64;
    let avg = |f: fn(&DiskRates) -> f64| d.iter().map(f).sum::<f64>() / n;
    Some(DiskRates {
        reads_per_s: avg(|x| x.reads_per_s),
        writes_per_s: avg(|x| x.writes_per_s),
        read_bytes_per_s: avg(|x| x.read_bytes_per_s),
        write_bytes_per_s: avg(|x| x.write_bytes_per_s),
        read_latency_ms: avg(|x| x.read_latency_ms),
        write_latency_ms: avg(|x| x.write_latency_ms),
        utilisation_pct: avg(|x| x.utilisation_pct),
        queue_depth: avg(|x| x.queue_depth),
    })
}

/// The lines of intervals.jsonl as the window's inputs (a histogram that
/// does not decode counts as empty).
pub fn intervals_of(lines: &[MailInterval]) -> Vec<Interval> {
    lines
        .iter()
        .map(|l| Interval {
            t_s: l.t_s,
            interval_s: l.interval_s,
            ops: (l.ops.iter())
                .map(|(k, op)| {
                    let h = LatencyHist::from_base64(&op.hist).unwrap_or_default();
                    (k.clone(), h)
                })
                .collect(),
            errors: (l.ops.iter())
                .filter(|(_, op)| op.errors > 0)
                .map(|(k, op)| (k.clone(), op.errors))
                .collect(),
            submitted: l.submitted,
            delivered: l.delivered,
            queue: l.queue_length.map(|q| q as f64),
            cpu_busy_pct: l.cpu_busy_pct,
            disk: l.disk,
        })
        .collect()
}

/// The `steady` section of the result: the window's figures and the queue
/// criterion over it (`queue`: the run's samples, seconds and length).
pub fn section(
    spec: &str,
    w: &Window,
    lines: &[MailInterval],
    queue: &[(f64, f64)],
    profile: &Profile,
    users: usize,
    delivery_within: Duration,
) -> SteadySection {
    let s = steady(&intervals_of(lines), w, profile, users);
    let per_s = s.submitted as f64 / w.seconds().max(1e-9);
    let limit = default_queue_limit(per_s, delivery_within);
    SteadySection {
        spec: spec.to_string(),
        window: Some(*w),
        intervals: s.intervals as u64,
        response_time_ms: s.response_time_ms,
        response_time_p50_ms: s.response_time_p50_ms,
        tasks: (s.hists.iter())
            .map(|(k, h)| (k.clone(), h.summary().into()))
            .collect(),
        errors: s.errors.values().sum(),
        submitted: s.submitted,
        delivered: s.delivered,
        submitted_per_user_per_day: s.submitted_per_user_per_day,
        delivered_per_user_per_day: s.delivered_per_user_per_day,
        host_cpu_busy_pct: s.cpu_busy_pct,
        disk: s.disk,
        queue: judge_queue(queue, w, limit),
    }
}

// ---- the queue criterion --------------------------------------------------------

/// The queue limit by Little's law: a queue holding more than the messages
/// submitted in `delivery_within` means the average message waits longer than
/// the delivery criterion allows (at least 1 message).
pub fn default_queue_limit(submitted_per_s: f64, delivery_within: Duration) -> f64 {
    (submitted_per_s * delivery_within.as_secs_f64())
        .ceil()
        .max(1.0)
}

/// The queue criterion over the window: the queue "consistently returns to
/// near zero" when its trend does not rise by more than `limit` over the
/// window and its length at the window's end is within `limit`. None without
/// at least two samples in the window (nothing to judge).
pub fn judge_queue(samples: &[(f64, f64)], w: &Window, limit: f64) -> Option<QueueJudgement> {
    let inside: Vec<(f64, f64)> = samples
        .iter()
        .copied()
        .filter(|(t, q)| *t >= w.from_s && *t <= w.to_s && q.is_finite())
        .collect();
    if inside.len() < 2 {
        return None;
    }
    let n = inside.len() as f64;
    let mt = inside.iter().map(|x| x.0).sum::<f64>() / n;
    let mq = inside.iter().map(|x| x.1).sum::<f64>() / n;
    let sxx: f64 = inside.iter().map(|x| (x.0 - mt).powi(2)).sum();
    let sxy: f64 = inside.iter().map(|x| (x.0 - mt) * (x.1 - mq)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let rise = slope * w.seconds();
    let last = inside[inside.len() - 1].1;
    Some(QueueJudgement {
        samples: inside.len(),
        slope_per_hour: slope * 3600.0,
        rise,
        last,
        average: mq,
        max: inside.iter().map(|x| x.1).fold(f64::MIN, f64::max),
        limit,
        holds: rise <= limit && last <= limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ProfileExt;
    use mailbench_results::mail::run::IntervalOp;
    use proptest::prelude::*;

    fn window() -> Window {
        SteadySpec::default()
            .resolve(
                Duration::from_secs(10),
                Duration::from_secs(100),
                Duration::from_secs(8 * 3600),
            )
            .unwrap()
    }

    #[test]
    fn the_default_window_is_the_middle_half_of_the_day() {
        let w = window();
        assert_eq!((w.day_from_s, w.day_to_s), (10.0, 110.0));
        assert_eq!((w.from_s, w.to_s), (35.0, 85.0));
        assert_eq!(w.phase(20.0), "ramp_up");
        assert_eq!(w.phase(50.0), "steady");
        assert_eq!(w.phase(100.0), "tail");
        assert!((w.share_of_day() - 0.5).abs() < 1e-12);
        // MMB3's 4 measured hours of 8, written as simulated times.
        let mmb: SteadySpec = "2h-6h".parse().unwrap();
        let w2 = mmb
            .resolve(
                Duration::from_secs(10),
                Duration::from_secs(100),
                Duration::from_secs(8 * 3600),
            )
            .unwrap();
        assert_eq!(w2, w);
    }

    #[test]
    fn bad_windows_are_refused() {
        for bad in ["", "25%", "75%-25%", "10%-120%", "soon-later", "-5%-10%"] {
            let parsed: std::result::Result<SteadySpec, String> = bad.parse();
            let resolved = parsed.map(|s| {
                s.resolve(
                    Duration::from_secs(1),
                    Duration::from_secs(60),
                    Duration::from_secs(3600),
                )
            });
            assert!(matches!(resolved, Err(_) | Ok(Err(_))), "{bad}");
        }
        let past_the_day: SteadySpec = "1h-9h".parse().unwrap();
        assert!(
            past_the_day
                .resolve(
                    Duration::ZERO,
                    Duration::from_secs(60),
                    Duration::from_secs(8 * 3600)
                )
                .is_err()
        );
    }

    fn iv(t: f64, read_ms: u64, submitted: u64) -> Interval {
        let mut h = LatencyHist::new();
        for _ in 0..10 {
            h.record_us(read_ms * 1000);
        }
        Interval {
            t_s: t,
            interval_s: 5.0,
            ops: [("read".to_string(), h)].into(),
            errors: BTreeMap::new(),
            submitted,
            delivered: 2 * submitted,
            queue: Some(0.0),
            cpu_busy_pct: 50.0,
            disk: None,
        }
    }

    #[test]
    fn only_the_window_is_measured() {
        let p = Profile::load("mmb3").unwrap();
        // Slow during the ramp-up and the tail, fast in the window.
        let ivs: Vec<Interval> = (1..=22)
            .map(|k| {
                let t = 5.0 * k as f64;
                let slow = !(35.0..=85.0).contains(&(t - 2.5));
                iv(t, if slow { 5000 } else { 100 }, 3)
            })
            .collect();
        let s = steady(&ivs, &window(), &p, 10);
        assert_eq!(s.intervals, 10);
        assert!(
            (s.response_time_ms - 100.0).abs() < 1.0,
            "{}",
            s.response_time_ms
        );
        assert!((s.response_time_p50_ms - 100.0).abs() < 1.0);
        assert_eq!(s.submitted, 30);
        // 30 messages by 10 users in half the day: 6 per user per day.
        assert!((s.submitted_per_user_per_day - 6.0).abs() < 1e-9);
        assert!((s.delivered_per_user_per_day - 12.0).abs() < 1e-9);
    }

    #[test]
    fn the_queue_must_not_grow_and_must_end_low() {
        let w = window();
        let flat: Vec<(f64, f64)> = (0..30).map(|k| (35.0 + k as f64, (k % 3) as f64)).collect();
        let j = judge_queue(&flat, &w, 3.0).unwrap();
        assert!(j.holds, "{j:?}");
        assert!(j.reason().is_none());
        // Growing by one message a second: +49 over the window.
        let growing: Vec<(f64, f64)> = (0..50).map(|k| (35.0 + k as f64, k as f64)).collect();
        let j = judge_queue(&growing, &w, 60.0).unwrap();
        assert!(j.holds, "under a generous limit");
        let j = judge_queue(&growing, &w, 10.0).unwrap();
        assert!(!j.holds && j.reason().unwrap().contains("at its end"));
        // Flat but high at the end.
        let mut late = flat.clone();
        late.push((85.0, 40.0));
        let j = judge_queue(&late, &w, 10.0).unwrap();
        assert!(!j.holds);
        // Outside the window nothing counts; one sample judges nothing.
        assert!(judge_queue(&[(1.0, 500.0), (50.0, 0.0)], &w, 1.0).is_none());
        assert_eq!(default_queue_limit(0.5, Duration::from_secs(60)), 30.0);
        assert_eq!(default_queue_limit(0.0, Duration::from_secs(60)), 1.0);
    }

    #[test]
    fn the_section_judges_the_window_from_the_interval_lines() {
        let p = Profile::load("mmb3").unwrap();
        let lines: Vec<MailInterval> = (1..=22)
            .map(|k| {
                let t = 5.0 * k as f64;
                let slow = !(35.0..=85.0).contains(&(t - 2.5));
                let mut h = LatencyHist::new();
                h.record_us(if slow { 5_000_000 } else { 200_000 });
                MailInterval {
                    t_s: t,
                    interval_s: 5.0,
                    ops: [("read".to_string(), IntervalOp::of(&h, 0))].into(),
                    submitted: 2,
                    cpu_busy_pct: if slow { 90.0 } else { 30.0 },
                    ..Default::default()
                }
            })
            .collect();
        // The queue grows through the window: the criterion fails on it.
        let queue: Vec<(f64, f64)> = (0..22).map(|k| (5.0 * k as f64, 3.0 * k as f64)).collect();
        let s = section(
            "25%-75%",
            &window(),
            &lines,
            &queue,
            &p,
            10,
            Duration::from_secs(60),
        );
        assert_eq!(s.intervals, 10);
        assert!(
            (s.response_time_ms - 200.0).abs() < 2.0,
            "{}",
            s.response_time_ms
        );
        assert_eq!(s.judged_ms(), Some(s.response_time_ms));
        assert!((s.host_cpu_busy_pct - 30.0).abs() < 1e-9);
        assert_eq!(s.submitted, 20);
        let q = s.queue.unwrap();
        assert!(!q.holds && q.reason().is_some(), "{q:?}");
        // No task inside the window: nothing to judge there.
        let empty = section(
            "25%-75%",
            &window(),
            &[],
            &[],
            &p,
            10,
            Duration::from_secs(60),
        );
        assert_eq!(empty.judged_ms(), None);
        assert!(empty.queue.is_none());
    }

    proptest! {
        // A queue that only shrinks through the window never fails on its trend,
        // and ending within the limit is then enough.
        #[test]
        fn a_draining_queue_holds(start in 0.0f64..1000.0, step in 0.0f64..20.0, n in 2usize..60, limit in 1.0f64..50.0) {
            let w = window();
            let dt = w.seconds() / n as f64;
            let s: Vec<(f64, f64)> = (0..n).map(|k| (w.from_s + dt * k as f64, (start - step * k as f64).max(0.0))).collect();
            let j = judge_queue(&s, &w, limit).unwrap();
            prop_assert!(j.rise <= 1e-6);
            prop_assert_eq!(j.holds, j.last <= limit);
        }

        // The window's response time lies between its fastest and slowest task.
        #[test]
        fn the_response_time_is_a_weighted_mean(ms in proptest::collection::vec(1u64..5000, 1..17)) {
            let p = Profile::load("mmb3").unwrap();
            let mut hists = BTreeMap::new();
            for (k, v) in TaskKind::ALL.iter().zip(&ms) {
                let mut h = LatencyHist::new();
                h.record_us(v * 1000);
                hists.insert(k.name().to_string(), h);
            }
            let r = weighted_ms(&p, &hists, 0.95);
            let lo = *ms.iter().min().unwrap() as f64;
            let hi = *ms.iter().max().unwrap() as f64;
            prop_assert!(r >= lo * 0.99 && r <= hi * 1.01, "{r} not in {lo}..{hi}");
        }
    }
}
