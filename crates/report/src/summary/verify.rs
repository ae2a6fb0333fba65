//! summary.txt of `storage verify`: the published Checksum Statistics.

use mailbench_results::storage::verify::{StorageVerifyResult, VerifySummary};
use std::fmt::Write as _;

/// summary.txt of a storage-verify result.
pub fn storage_verify(r: &StorageVerifyResult) -> String {
    format!(
        "mailbench storage verify — {}\n{}",
        r.verdict.label(),
        render_checksum(&r.verify)
    )
}

/// The published "Checksum Statistics" table (seen pages, bad pages, wrong page
/// number pages, MB / seconds) plus our log columns.
pub fn render_checksum(v: &VerifySummary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\nChecksum Statistics");
    let _ = writeln!(
        o,
        "  {:<8} {:>10} {:>9} {:>11} {:>10} {:>9} {:>8} {:>8} {:>10} {:>8} {:>5}",
        "DB",
        "seen pages",
        "bad pages",
        "wrong page#",
        "newer log",
        "MB",
        "seconds",
        "MB/s",
        "log blocks",
        "bad blks",
        "gaps"
    );
    for d in &v.databases {
        let _ = writeln!(
            o,
            "  {:<8} {:>10} {:>9} {:>11} {:>10} {:>9.1} {:>8.2} {:>8.1} {:>10} {:>8} {:>5}",
            d.name,
            d.pages_seen,
            d.bad_checksum_pages,
            d.wrong_page_number_pages,
            d.newer_than_log_pages,
            d.mb,
            d.seconds,
            d.mb / d.seconds.max(1e-9),
            d.log_blocks_checked,
            d.bad_log_blocks,
            d.log_generation_gaps
        );
        if !d.first_bad_pages.is_empty() {
            let _ = writeln!(o, "           first bad pages: {:?}", d.first_bad_pages);
        }
        if !d.first_bad_log_blocks.is_empty() {
            let _ = writeln!(
                o,
                "           bad log blocks: {}",
                d.first_bad_log_blocks.join(", ")
            );
        }
        if let Some(e) = &d.first_error {
            let _ = writeln!(o, "           {} read errors; first: {e}", d.io_errors);
        }
        if d.lost_log_tail {
            let _ = writeln!(
                o,
                "           lost log tail: a replay stopped at a damaged log block; the \
                 transactions after it are gone"
            );
        }
    }
    let mb: f64 = v.databases.iter().map(|d| d.mb).sum();
    let _ = writeln!(
        o,
        "  {:<8} {:>10} {:>9} {:>11} {:>10} {:>9.1} {:>8.2} {:>8.1}",
        "total",
        v.databases.iter().map(|d| d.pages_seen).sum::<u64>(),
        v.databases
            .iter()
            .map(|d| d.bad_checksum_pages)
            .sum::<u64>(),
        v.databases
            .iter()
            .map(|d| d.wrong_page_number_pages)
            .sum::<u64>(),
        v.databases
            .iter()
            .map(|d| d.newer_than_log_pages)
            .sum::<u64>(),
        mb,
        v.seconds,
        v.mb_per_s
    );
    o
}
