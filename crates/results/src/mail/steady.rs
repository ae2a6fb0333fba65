//! The steady window of a mail run as its result records it: the window
//! itself, the queue criterion over it, and the figures measured inside it
//! (the `steady` section of a mail-run result), computed as pure functions
//! of the interval figures: by `mail run` for its own intervals, and by
//! `report merge` for the added intervals of several generators.

use crate::mail::profile::{Profile, TaskKind};
use crate::mail::run::{LatencyFigures, MailInterval};
use mailbench_metrics::LatencyHist;
use mailbench_metrics::system::DiskRates;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The run's phases, in seconds since its start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Window {
    /// The day begins after the ramp-up.
    pub day_from_s: f64,
    pub day_to_s: f64,
    /// The measured steady window, inside the day.
    pub from_s: f64,
    pub to_s: f64,
}

impl Window {
    /// The phase at `t_s`: `ramp_up` (logons and the day before the window),
    /// `steady`, or `tail` (the rest of the day and the drain).
    pub fn phase(&self, t_s: f64) -> &'static str {
        if t_s < self.from_s {
            "ramp_up"
        } else if t_s <= self.to_s {
            "steady"
        } else {
            "tail"
        }
    }

    /// Whether the interval ending at `t_s`, `interval_s` long, belongs to the
    /// window: its middle lies inside.
    pub fn holds(&self, t_s: f64, interval_s: f64) -> bool {
        let mid = t_s - interval_s / 2.0;
        mid >= self.from_s && mid <= self.to_s
    }

    pub fn seconds(&self) -> f64 {
        self.to_s - self.from_s
    }

    /// The window's share of the day.
    pub fn share_of_day(&self) -> f64 {
        self.seconds() / (self.day_to_s - self.day_from_s).max(1e-9)
    }
}

/// How the server queue behaved over the steady window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueJudgement {
    pub samples: usize,
    /// Least-squares slope of the queue length, messages per hour (real time).
    pub slope_per_hour: f64,
    /// What that slope adds over the whole window, messages.
    pub rise: f64,
    /// The last sample in the window.
    pub last: f64,
    pub average: f64,
    pub max: f64,
    /// The limit both `rise` and `last` must stay within.
    pub limit: f64,
    pub holds: bool,
}

impl QueueJudgement {
    /// The verdict's sentence when the criterion fails.
    pub fn reason(&self) -> Option<String> {
        if self.holds {
            return None;
        }
        Some(if self.last > self.limit {
            format!(
                "the server queue did not return to near zero in the steady window: {:.0} messages at its end (limit {:.0})",
                self.last, self.limit
            )
        } else {
            format!(
                "the server queue grew through the steady window: +{:.0} messages over it ({:.0} per hour; limit {:.0})",
                self.rise, self.slope_per_hour, self.limit
            )
        })
    }
}

/// The `steady` section of a mail-run result: what was measured inside the
/// steady window (`--steady`, default the middle half of the day). The
/// verdict judges the response time and the queue from it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SteadySection {
    /// `--steady` as given (`25%-75%`, `2h-6h`).
    pub spec: String,
    pub window: Option<Window>,
    /// Sampling intervals inside the window.
    pub intervals: u64,
    /// Response time: Σ(weight × the task's 95th percentile) / Σweight over
    /// the tasks that completed inside the window, ms.
    pub response_time_ms: f64,
    /// The same weighting over the tasks' 50th percentiles, ms.
    pub response_time_p50_ms: f64,
    /// Per operation (tasks, `logon`, `new_mail`), inside the window.
    pub tasks: BTreeMap<String, LatencyFigures>,
    pub errors: u64,
    pub submitted: u64,
    pub delivered: u64,
    /// Per user per simulated day: the window's counts scaled to the day.
    pub submitted_per_user_per_day: f64,
    pub delivered_per_user_per_day: f64,
    /// The load generator's host CPU over the window (the server's too
    /// with the local target), %.
    pub host_cpu_busy_pct: f64,
    /// The local mail store's disk over the window (local targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskRates>,
    /// The queue criterion over the window (None: no queue sampled, or
    /// fewer than two samples inside the window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueJudgement>,
}

impl SteadySection {
    /// The response time the verdict judges: None when no task completed
    /// inside the window (the whole day's figure is judged then).
    pub fn judged_ms(&self) -> Option<f64> {
        let ran = crate::mail::profile::TaskKind::ALL
            .iter()
            .any(|k| self.tasks.get(k.name()).is_some_and(|t| t.count > 0));
        (self.intervals > 0 && ran).then_some(self.response_time_ms)
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

/// Σ(weight × the task's `q` quantile) / Σweight over the tasks that ran: the
/// response time's weighting (judge.rs) at any percentile.
pub fn weighted_ms(profile: &Profile, hists: &BTreeMap<String, LatencyHist>, q: f64) -> f64 {
    crate::mail::judge::weighted_p95_ms(profile, |k: TaskKind| {
        hists
            .get(k.name())
            .filter(|h| !h.is_empty())
            .map(|h| h.quantile_us(q))
    })
    .0
}

/// The figures of the intervals inside `w`, for `users` users: the `steady`
/// section but its `--steady` text and queue criterion ([`section`] adds
/// them).
pub fn steady(
    intervals: &[Interval],
    w: &Window,
    profile: &Profile,
    users: usize,
) -> SteadySection {
    let mut acc = Steady::new(w);
    for iv in intervals.iter().filter(|i| w.holds(i.t_s, i.interval_s)) {
        acc.add(iv);
    }
    acc.finish(w, profile, users)
}

/// The window's figures, added up one interval at a time (so a whole day's
/// intervals need not be decoded at once).
struct Steady {
    s: SteadySection,
    /// Per operation: the window's histogram.
    hists: BTreeMap<String, LatencyHist>,
    disks: Vec<DiskRates>,
}

impl Steady {
    fn new(w: &Window) -> Steady {
        Steady {
            s: SteadySection {
                window: Some(*w),
                ..Default::default()
            },
            hists: BTreeMap::new(),
            disks: Vec::new(),
        }
    }

    /// Adds an interval inside the window.
    fn add(&mut self, iv: &Interval) {
        let s = &mut self.s;
        s.intervals += 1;
        for (op, h) in &iv.ops {
            self.hists.entry(op.clone()).or_default().add(h);
        }
        s.errors += iv.errors.values().sum::<u64>();
        s.submitted += iv.submitted;
        s.delivered += iv.delivered;
        s.host_cpu_busy_pct += iv.cpu_busy_pct;
        if let Some(d) = &iv.disk {
            self.disks.push(*d);
        }
    }

    fn finish(self, w: &Window, profile: &Profile, users: usize) -> SteadySection {
        let Steady {
            mut s,
            hists,
            disks,
        } = self;
        if s.intervals > 0 {
            s.host_cpu_busy_pct /= s.intervals as f64;
        }
        s.disk = mean_disk(&disks);
        s.response_time_ms = weighted_ms(profile, &hists, 0.95);
        s.response_time_p50_ms = weighted_ms(profile, &hists, 0.50);
        s.tasks = (hists.iter())
            .map(|(k, h)| (k.clone(), h.summary().into()))
            .collect();
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
    lines.iter().map(interval_of).collect()
}

/// One line of intervals.jsonl decoded.
fn interval_of(l: &MailInterval) -> Interval {
    Interval {
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
    }
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
    // One interval decoded at a time: a whole day's histograms at once
    // would take hundreds of MB.
    let mut acc = Steady::new(w);
    for l in lines.iter().filter(|l| w.holds(l.t_s, l.interval_s)) {
        acc.add(&interval_of(l));
    }
    let s = acc.finish(w, profile, users);
    let per_s = s.submitted as f64 / w.seconds().max(1e-9);
    let limit = default_queue_limit(per_s, delivery_within);
    SteadySection {
        spec: spec.to_string(),
        queue: judge_queue(queue, w, limit),
        ..s
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
