//! summary.txt of `storage backup`: the published Database Backup Statistics.

use mailbench_results::storage::backup::{BACKUP_DEPTH, BACKUP_READ, BackupResult};
use std::fmt::Write as _;

/// summary.txt: the published Database Backup Statistics layout (instance, size
/// MB, elapsed, MB/s, average and sum) and the read I/O.
pub fn render(r: &BackupResult) -> String {
    let mut o = String::new();
    super::test_summary_head(&mut o, "mailbench storage backup test", &r.verdict, &r.run);
    super::version_and_times(&mut o, &r.run);
    super::lost_log_tail(&mut o, &r.spec.lost_log_tail);
    let _ = writeln!(
        o,
        "  Reads                   {} KiB sequential, {} in flight per database, all databases at once",
        BACKUP_READ >> 10,
        BACKUP_DEPTH
    );
    if let Some(t) = &r.to {
        let _ = writeln!(o, "  Copy written to         {}", t.display());
    }
    let _ = writeln!(
        o,
        "  Command Line            {}",
        r.run.command_line.join(" ")
    );
    let _ = writeln!(o, "\nDatabase Backup Statistics");
    let _ = writeln!(
        o,
        "  {:<8} {:>12} {:>10} {:>10} {:>9} {:>9} {:>10}",
        "Instance", "size MB", "elapsed s", "MB/s", "bad pages", "errors", "copy bad"
    );
    for d in &r.databases {
        let _ = writeln!(
            o,
            "  {:<8} {:>12.1} {:>10.2} {:>10.1} {:>9} {:>9} {:>10}",
            d.name,
            d.size_mb,
            d.seconds,
            d.mb_per_s,
            d.bad_pages,
            d.io_errors,
            d.copy_bad_pages
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into())
        );
    }
    let n = r.databases.len().max(1) as f64;
    let size: f64 = r.databases.iter().map(|d| d.size_mb).sum();
    let secs: f64 = r.databases.iter().map(|d| d.seconds).sum();
    let _ = writeln!(
        o,
        "  {:<8} {:>12.1} {:>10.2} {:>10.1}",
        "Average",
        size / n,
        secs / n,
        r.average_mb_per_s
    );
    let _ = writeln!(
        o,
        "  {:<8} {:>12.1} {:>10.2} {:>10.1}   (MB/s of all databases together, by wall time)",
        "Sum", size, r.seconds, r.total_mb_per_s
    );
    let _ = writeln!(
        o,
        "\n  Read I/O: {:<8} {:>9} {:>10}  latency ms: avg p50 p95 p99 max",
        "", "reads/s", "avg bytes"
    );
    for d in &r.databases {
        let l = &d.read.latency_ms;
        let _ = writeln!(
            o,
            "  {:<18} {:>9.1} {:>10.0}  {:.2} {:.2} {:.2} {:.2} {:.2}",
            d.name, d.read.ops_per_s, d.read.avg_bytes, l.avg, l.p50, l.p95, l.p99, l.max
        );
    }
    super::errors_text(&mut o, &r.errors);
    o
}
