//! `report merge` of storage-run results, from loaded documents: the merge
//! itself is typed in `mailbench_results::storage::merge`.

use crate::load::StorageDoc;
use mailbench_base::Result;
pub use mailbench_results::storage::merge::{
    HostSection, MergeInput, MergeOutput, StorageMerged as Merged, check_compatible, merge_class,
    merge_totals,
};

/// Merges loaded storage-run results of the same test from several hosts.
pub fn merge(docs: &[StorageDoc]) -> Result<MergeOutput> {
    let inputs: Vec<MergeInput> = docs
        .iter()
        .map(|d| MergeInput {
            source: d.source.display().to_string(),
            result: &d.result,
            intervals: &d.intervals,
        })
        .collect();
    mailbench_results::storage::merge::merge(&inputs)
}

/// The per-host part of summary.txt for a merged result.
pub fn hosts_text(m: &Merged) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "\nPer-Host Results (aggregate above)");
    let _ = writeln!(
        o,
        "  {:<20} {:<12} {:>11} {:>11} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "host", "verdict", "trans IOPS", "target", "rd avg", "rd p99", "lw avg", "lw p99", "errors"
    );
    for h in &m.hosts {
        let c = |n: &str| {
            h.total
                .classes
                .get(n)
                .map(|c| c.latency_ms)
                .unwrap_or_default()
        };
        let _ = writeln!(
            o,
            "  {:<20} {:<12} {:>11.2} {:>11} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>7}",
            h.label,
            h.verdict.label(),
            h.total.transactional_iops,
            h.total
                .target_iops
                .map(|t| format!("{t:.2}"))
                .unwrap_or_else(|| "none".into()),
            c("db_read").avg,
            c("db_read").p99,
            c("log_write").avg,
            c("log_write").p99,
            h.total.io_errors
        );
    }
    for (i, s) in m.sources.iter().enumerate() {
        let _ = writeln!(o, "  source {}: {s}", i + 1);
    }
    o
}
