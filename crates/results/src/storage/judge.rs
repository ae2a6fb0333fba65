//! The verdict of a storage run (docs/storage.md, "Verdict"): one plain sentence per
//! failed criterion, against the thresholds the result carries.

use crate::storage::run::{IoPath, Totals};
use crate::storage::spec::LatencyMax;
use crate::storage::spec::StorageSpec;
use crate::storage::verify::VerifySummary;
use crate::verdict::Verdict;

/// A latency maximum judged by `rule`: the highest sample average of any
/// database (`sampled`), or the slowest single I/O (`single`); the failure
/// in words, if any.
fn judge_max(
    what: &str,
    single: f64,
    sampled: f64,
    limit: f64,
    rule: LatencyMax,
) -> Option<String> {
    match rule {
        LatencyMax::Sampled => (sampled > limit).then(|| {
            format!(
                "The {what} latency of a database averaged {sampled:.1} ms over one sample \
                 interval, above the {limit:.0} ms maximum."
            )
        }),
        LatencyMax::SingleIo => (single > limit).then(|| {
            format!("The slowest {what} took {single:.1} ms, above the {limit:.0} ms limit.")
        }),
    }
}

/// The verdict (docs/storage.md, "Verdict"), one plain sentence per failure.
/// `io` is how the I/O reached the storage and whether O_DIRECT was on: a run
/// through the page cache without buffered I/O asked for cannot pass.
pub fn judge(
    spec: &StorageSpec,
    t: &Totals,
    verify: Option<&VerifySummary>,
    errors: &[String],
    measured_s: f64,
    io: Option<(&IoPath, bool)>,
) -> Verdict {
    let th = &spec.thresholds;
    let mut r = Vec::new();
    r.extend(io.and_then(|(p, o_direct)| p.unasked_page_cache(o_direct)));
    let rd = &t.classes["db_read"].latency_ms;
    let lw = &t.classes["log_write"].latency_ms;
    if measured_s <= 0.0 {
        r.push(
            "No interval of the measured window completed, so nothing was measured.".to_string(),
        );
    }
    if rd.avg > th.db_read_avg_ms {
        r.push(format!(
            "Database read latency averaged {:.2} ms, above the {:.0} ms limit.",
            rd.avg, th.db_read_avg_ms
        ));
    }
    r.extend(judge_max(
        "database read",
        rd.max,
        t.db_read_sample_max_ms,
        th.db_read_max_ms,
        th.latency_max,
    ));
    if lw.avg > th.log_write_avg_ms {
        r.push(format!(
            "Log write latency averaged {:.2} ms, above the {:.0} ms limit.",
            lw.avg, th.log_write_avg_ms
        ));
    }
    r.extend(judge_max(
        "log write",
        lw.max,
        t.log_write_sample_max_ms,
        th.log_write_max_ms,
        th.latency_max,
    ));
    if let Some(target) = t.target_iops
        && t.transactional_iops < target
    {
        r.push(format!(
            "Achieved {:.1} transactional IOPS, below the target of {:.1}.",
            t.transactional_iops, target
        ));
    }
    if t.page_fault_stalls_per_s > th.page_fault_stalls_per_s {
        r.push(format!(
            "Page-fault stalls averaged {:.2} per second, above the limit of {}.",
            t.page_fault_stalls_per_s, th.page_fault_stalls_per_s
        ));
    }
    if let Some(max) = th.page_fault_stalls_max_per_s
        && t.page_fault_stalls_max_per_s > max
    {
        r.push(format!(
            "A database had {:.2} page-fault stalls per second in one sample; the limit is {max} in every sample.",
            t.page_fault_stalls_max_per_s
        ));
    }
    if t.io_errors > 0 || !errors.is_empty() {
        let first = errors
            .first()
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default();
        r.push(format!(
            "{} I/O or data errors occurred{first}.",
            t.io_errors.max(errors.len() as u64)
        ));
    }
    if let Some(v) = verify {
        r.extend(v.reasons());
    }
    Verdict::from_reasons(r)
}
