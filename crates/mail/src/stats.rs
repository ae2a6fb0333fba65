//! Run-time counters shared by all simulated users: per-operation latency
//! histograms (whole run and current interval), errors by kind, mail flow.

use crate::wire::{ErrorKind, OpError};
use mailbench_metrics::LatencyHist;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Operations measured: the 17 tasks plus logon and new-mail fetches.
pub type OpName = &'static str;

#[derive(Debug, Clone, Default)]
pub struct OpStats {
    pub hist: LatencyHist,
    pub interval: LatencyHist,
    pub count: u64,
    pub errors: u64,
    pub skipped: u64,
    pub interval_errors: u64,
    pub errors_by_kind: BTreeMap<ErrorKind, u64>,
    pub skip_reasons: BTreeMap<&'static str, u64>,
}

/// One operation over one protocol's users (the whole run only).
#[derive(Debug, Clone, Default)]
pub struct ProtocolOpStats {
    pub hist: LatencyHist,
    pub count: u64,
    pub errors: u64,
    pub skipped: u64,
}

pub use mailbench_results::mail::run::Protocol;

#[derive(Debug, Default)]
pub struct Stats {
    /// Every protocol together (the intervals, the score, the verdict).
    pub ops: BTreeMap<OpName, OpStats>,
    /// Each operation per protocol its users spoke.
    pub by_protocol: BTreeMap<(OpName, Protocol), ProtocolOpStats>,
    pub delivery: LatencyHist,
    pub delivery_interval: LatencyHist,
    pub sched_delay: LatencyHist,
    pub sched_delay_interval: LatencyHist,
    pub errors_by_kind: BTreeMap<ErrorKind, u64>,
    /// First errors, for the log and the result (never containing passwords).
    pub error_samples: Vec<String>,
    pub submitted: u64,
    pub addressed: u64,
    pub expected_deliveries: u64,
    pub delivered: u64,
    pub delivered_within: u64,
    /// Delivery latency limit counted in `delivered_within` (verdict).
    pub within: Duration,
    pub interval_submitted: u64,
    pub interval_delivered: u64,
}

const MAX_SAMPLES: usize = 50;

impl Stats {
    pub fn ok(&mut self, p: Protocol, op: OpName, latency: Duration) {
        let s = self.ops.entry(op).or_default();
        s.count += 1;
        s.hist.record(latency);
        s.interval.record(latency);
        let s = self.by_protocol.entry((op, p)).or_default();
        s.count += 1;
        s.hist.record(latency);
    }

    pub fn skipped(&mut self, p: Protocol, op: OpName, reason: &'static str) {
        let s = self.ops.entry(op).or_default();
        s.skipped += 1;
        *s.skip_reasons.entry(reason).or_default() += 1;
        self.by_protocol.entry((op, p)).or_default().skipped += 1;
    }

    pub fn error(&mut self, p: Protocol, op: OpName, user: &str, e: &OpError) {
        self.by_protocol.entry((op, p)).or_default().errors += 1;
        let s = self.ops.entry(op).or_default();
        s.errors += 1;
        s.interval_errors += 1;
        *s.errors_by_kind.entry(e.kind).or_default() += 1;
        *self.errors_by_kind.entry(e.kind).or_default() += 1;
        if self.error_samples.len() < MAX_SAMPLES {
            self.error_samples.push(format!("{op} ({user}): {e}"));
        }
    }

    pub fn not_delivered(&mut self, n: u64) {
        if n > 0 {
            *self
                .errors_by_kind
                .entry(ErrorKind::NotDelivered)
                .or_default() += n;
            if self.error_samples.len() < MAX_SAMPLES {
                self.error_samples.push(format!(
                    "delivery: {n} addressed deliveries were not seen by their recipients before the end"
                ));
            }
        }
    }

    pub fn delivered(&mut self, latency: Duration) {
        self.delivered += 1;
        self.interval_delivered += 1;
        if latency <= self.within {
            self.delivered_within += 1;
        }
        self.delivery.record(latency);
        self.delivery_interval.record(latency);
    }

    pub fn total_errors(&self) -> u64 {
        self.errors_by_kind.values().sum()
    }

    /// Takes the interval figures (and resets them).
    pub fn take_interval(&mut self) -> IntervalOps {
        let mut ops = BTreeMap::new();
        for (name, s) in self.ops.iter_mut() {
            if s.interval.is_empty() && s.interval_errors == 0 {
                continue;
            }
            ops.insert(
                name.to_string(),
                IntervalOp::of(&s.interval, s.interval_errors),
            );
            s.interval.reset();
            s.interval_errors = 0;
        }
        let d = self.delivery_interval.summary();
        let out = IntervalOps {
            ops,
            submitted: self.interval_submitted,
            delivered: self.interval_delivered,
            delivery_p95_ms: d.p95_us as f64 / 1000.0,
            delivery_hist: self.delivery_interval.to_base64(),
            sched_delay_p99_ms: self.sched_delay_interval.quantile_us(0.99) as f64 / 1000.0,
            sched_delay_hist: self.sched_delay_interval.to_base64(),
        };
        self.delivery_interval.reset();
        self.sched_delay_interval.reset();
        self.interval_submitted = 0;
        self.interval_delivered = 0;
        out
    }
}

pub use mailbench_results::mail::run::IntervalOp;

/// Whether `op` is one of the 17 tasks, not a logon or a new-mail fetch
/// (the operations measured besides them).
pub fn is_task(op: &str) -> bool {
    op != "logon" && op != "new_mail"
}

/// An interval's tasks at a glance (live progress lines).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TaskGlance {
    /// Tasks completed or failed.
    pub tasks: u64,
    /// Errors of every operation (tasks, logons, new-mail fetches).
    pub errors: u64,
    /// The slowest task's 95th percentile, ms.
    pub worst_p95_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct IntervalOps {
    pub ops: BTreeMap<String, IntervalOp>,
    pub submitted: u64,
    pub delivered: u64,
    pub delivery_p95_ms: f64,
    pub delivery_hist: String,
    pub sched_delay_p99_ms: f64,
    pub sched_delay_hist: String,
}

impl IntervalOps {
    pub fn glance(&self) -> TaskGlance {
        let tasks = || self.ops.iter().filter(|(k, _)| is_task(k)).map(|(_, o)| o);
        TaskGlance {
            tasks: tasks().map(|o| o.count + o.errors).sum(),
            errors: self.ops.values().map(|o| o.errors).sum(),
            worst_p95_ms: tasks().map(|o| o.p95_ms).fold(0.0, f64::max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ErrorKind, OpError};

    #[test]
    fn the_glance_counts_tasks_only_but_every_error() {
        let mut s = Stats::default();
        s.ok(Protocol::Imap, "read", Duration::from_millis(10));
        s.ok(Protocol::Jmap, "read", Duration::from_millis(30));
        s.ok(Protocol::Imap, "send", Duration::from_millis(200));
        s.ok(Protocol::Imap, "new_mail", Duration::from_millis(900));
        let e = OpError::new(ErrorKind::Auth, "no");
        s.error(Protocol::Jmap, "logon", "u1", &e);
        let g = s.take_interval().glance();
        assert_eq!((g.tasks, g.errors), (3, 1));
        // 200 ms within the histogram's 3 significant digits; new_mail's 900 ms is no task.
        assert!((g.worst_p95_ms - 200.0).abs() < 1.0, "{}", g.worst_p95_ms);
        assert_eq!(s.take_interval().glance(), TaskGlance::default());
    }

    #[test]
    fn each_protocol_is_counted_apart_and_in_the_total() {
        let mut s = Stats::default();
        s.ok(Protocol::Imap, "read", Duration::from_millis(10));
        s.ok(Protocol::Imap, "read", Duration::from_millis(12));
        s.ok(Protocol::Jmap, "read", Duration::from_millis(40));
        s.skipped(Protocol::Jmap, "read", "empty");
        s.error(
            Protocol::Jmap,
            "read",
            "u2",
            &OpError::new(ErrorKind::Timeout, "slow"),
        );
        let total = &s.ops["read"];
        assert_eq!((total.count, total.errors, total.skipped), (3, 1, 1));
        let imap = &s.by_protocol[&("read", Protocol::Imap)];
        assert_eq!((imap.count, imap.errors, imap.skipped), (2, 0, 0));
        assert!(
            imap.hist.quantile_us(1.0) < 13_000,
            "JMAP's 40 ms is not IMAP's"
        );
        let jmap = &s.by_protocol[&("read", Protocol::Jmap)];
        assert_eq!((jmap.count, jmap.errors, jmap.skipped), (1, 1, 1));
        assert!(jmap.hist.quantile_us(0.5) >= 39_000);
    }
}
