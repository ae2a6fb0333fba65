//! Live progress of `storage run`: the figures of the latest interval and
//! the one-line report of them.

use crate::stats::ClassFigures;
use std::collections::BTreeMap;

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
