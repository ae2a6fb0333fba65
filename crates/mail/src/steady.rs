//! The steady state of a mail run, as pure functions of its interval figures.
//!
//! A level of users has a ramp-up (logons, then the users settling into the
//! day), a measured **steady window** and a tail (the rest of the day and the
//! drain). MMB3 measured 4 hours of an 8-hour day (docs/mail-load.md, "Steady window and response time"); mailbench
//! measures the middle half of the day by default (`--steady 25%-75%`), or any
//! part of it given as shares of the day or as simulated times (`--steady
//! 2h-6h`). Per-task percentiles, the response time (weighted 95th percentile)
//! and its weighted 50th-percentile companion, the mail flow and the server's
//! figures are taken over that window; the queue criterion holds over the
//! whole window: no upward trend, and under a limit at its end.

use mailbench_base::{Error, Result};
use std::time::Duration;

pub use mailbench_results::mail::steady::{
    Interval, QueueJudgement, SteadySection, Window, default_queue_limit, intervals_of,
    judge_queue, section, steady, weighted_ms,
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Profile, ProfileExt, TaskKind};
    use mailbench_metrics::LatencyHist;
    use mailbench_results::mail::run::{IntervalOp, MailInterval};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

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
