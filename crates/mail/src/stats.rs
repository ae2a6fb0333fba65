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

#[derive(Debug, Default)]
pub struct Stats {
    pub ops: BTreeMap<OpName, OpStats>,
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
    pub fn ok(&mut self, op: OpName, latency: Duration) {
        let s = self.ops.entry(op).or_default();
        s.count += 1;
        s.hist.record(latency);
        s.interval.record(latency);
    }

    pub fn skipped(&mut self, op: OpName, reason: &'static str) {
        let s = self.ops.entry(op).or_default();
        s.skipped += 1;
        *s.skip_reasons.entry(reason).or_default() += 1;
    }

    pub fn error(&mut self, op: OpName, user: &str, e: &OpError) {
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
            let sum = s.interval.summary();
            ops.insert(
                name.to_string(),
                IntervalOp {
                    count: sum.count,
                    errors: s.interval_errors,
                    p50_ms: sum.p50_us as f64 / 1000.0,
                    p95_ms: sum.p95_us as f64 / 1000.0,
                    hist: s.interval.to_base64(),
                },
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

#[derive(Debug, Clone, Serialize)]
pub struct IntervalOp {
    pub count: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    /// HDR histogram (µs), base64 V2+DEFLATE.
    pub hist: String,
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
