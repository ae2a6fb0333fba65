//! The steady window of a mail run as its result records it: the window
//! itself, the queue criterion over it, and the figures measured inside it
//! (the `steady` section of a mail-run result). The mail crate computes them
//! (`mailbench_mail::steady`).

use crate::mail::run::LatencyFigures;
use mailbench_metrics::system::DiskRates;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
