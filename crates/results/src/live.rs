//! Live figures of a running test: the latest interval's figures a storage
//! run reports (the terminal line, the Prometheus endpoint), and what every
//! rank of a test over many hosts sends rank 0 each interval (storage or mail
//! figures), with the live aggregate rank 0 shows. The final result never
//! comes from these: it merges histograms exactly.

use crate::storage::stats::{ClassFigures, LatencyMs};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Figures of the latest interval, for live progress (also sent from every
/// rank of a multi-host run to rank 0, which aggregates them).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
    pub transaction_latency_ms: LatencyMs,
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

/// One rank's figures of one sampling interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LiveMsg {
    pub seq: u64,
    /// The storage figures (for a mail run: time, errors and passing only).
    pub figures: LiveFigures,
    /// A mail run's figures (absent for storage).
    #[serde(default)]
    pub mail: Option<MailLive>,
}

/// One rank's messaging-load figures of one sampling interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MailLive {
    pub users: u64,
    /// Length of the interval, seconds.
    pub interval_s: f64,
    /// Tasks completed (and failed) in the interval.
    pub tasks: u64,
    pub errors: u64,
    pub submitted: u64,
    pub delivered: u64,
    /// The slowest task's 95th percentile in the interval (an upper bound
    /// of the aggregate's; the final result merges histograms exactly).
    pub worst_task_p95_ms: f64,
}

impl MailLive {
    /// Counts summed, the worst p95 kept.
    pub fn aggregate(parts: &[LiveMsg]) -> MailLive {
        let mut out = MailLive::default();
        for m in parts.iter().filter_map(|p| p.mail.as_ref()) {
            out.users += m.users;
            out.interval_s = out.interval_s.max(m.interval_s);
            out.tasks += m.tasks;
            out.errors += m.errors;
            out.submitted += m.submitted;
            out.delivered += m.delivered;
            out.worst_task_p95_ms = out.worst_task_p95_ms.max(m.worst_task_p95_ms);
        }
        out
    }
}

impl LiveMsg {
    pub fn from_live(seq: u64, p: &LiveFigures) -> LiveMsg {
        LiveMsg {
            seq,
            figures: p.clone(),
            mail: None,
        }
    }

    /// The live aggregate of several ranks: rates and counts summed,
    /// averages weighted by operations. Live quantiles show the highest
    /// rank's (an upper bound); the final result merges histograms exactly.
    pub fn aggregate(msgs: &[LiveMsg]) -> LiveFigures {
        let parts: Vec<&LiveFigures> = msgs.iter().map(|m| &m.figures).collect();
        let ops = |p: &LiveFigures, c: &str| p.classes.get(c).map(|c| c.ops).unwrap_or(0);
        let weighted = |f: &dyn Fn(&LiveFigures) -> (f64, u64)| {
            let (mut s, mut n) = (0.0, 0u64);
            for p in &parts {
                let (v, w) = f(p);
                s += v * w as f64;
                n += w;
            }
            if n == 0 { 0.0 } else { s / n as f64 }
        };
        let mut classes: BTreeMap<String, ClassFigures> = BTreeMap::new();
        for p in &parts {
            for (k, c) in &p.classes {
                let e = classes.entry(k.clone()).or_default();
                let n = e.ops + c.ops;
                let avg = |a: f64, b: f64| {
                    if n == 0 {
                        0.0
                    } else {
                        (a * e.ops as f64 + b * c.ops as f64) / n as f64
                    }
                };
                let lat = LatencyMs {
                    avg: avg(e.latency_ms.avg, c.latency_ms.avg),
                    p50: e.latency_ms.p50.max(c.latency_ms.p50),
                    p95: e.latency_ms.p95.max(c.latency_ms.p95),
                    p99: e.latency_ms.p99.max(c.latency_ms.p99),
                    p999: e.latency_ms.p999.max(c.latency_ms.p999),
                    max: e.latency_ms.max.max(c.latency_ms.max),
                };
                *e = ClassFigures {
                    ops: n,
                    ops_per_s: e.ops_per_s + c.ops_per_s,
                    avg_bytes: avg(e.avg_bytes, c.avg_bytes),
                    mb_per_s: e.mb_per_s + c.mb_per_s,
                    errors: e.errors + c.errors,
                    latency_ms: lat,
                };
            }
        }
        let targets: Vec<f64> = parts.iter().filter_map(|p| p.target_iops).collect();
        let first = parts.first().copied().cloned().unwrap_or_default();
        LiveFigures {
            phase: first.phase.clone(),
            elapsed_s: parts.iter().map(|p| p.elapsed_s).fold(0.0, f64::max),
            remaining_s: parts.iter().map(|p| p.remaining_s).fold(f64::MAX, f64::min),
            transactional_iops: parts.iter().map(|p| p.transactional_iops).sum(),
            target_iops: if targets.is_empty() {
                None
            } else {
                Some(targets.iter().sum())
            },
            db_read_avg_ms: weighted(&|p| (p.db_read_avg_ms, ops(p, "db_read"))),
            log_write_avg_ms: weighted(&|p| (p.log_write_avg_ms, ops(p, "log_write"))),
            db_read_limit_ms: first.db_read_limit_ms,
            log_write_limit_ms: first.log_write_limit_ms,
            errors: parts.iter().map(|p| p.errors).sum(),
            passing: parts.iter().all(|p| p.passing),
            classes,
            transactions_per_s: parts.iter().map(|p| p.transactions_per_s).sum(),
            transaction_latency_ms: LatencyMs::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
