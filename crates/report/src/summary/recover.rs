//! summary.txt of `storage recover`: the published Soft-Recovery Statistics.

use mailbench_results::storage::recover::{RecoverResult, ReplayResult};
use std::fmt::Write as _;

/// summary.txt of the recover test: the published Soft-Recovery Statistics
/// layout, the I/O during replay, then the checksum statistics.
pub fn render(r: &RecoverResult) -> String {
    let mut o = String::new();
    super::test_summary_head(&mut o, "mailbench storage recover test", &r.verdict, &r.run);
    super::version_and_times(&mut o, &r.run);
    super::lost_log_tail(&mut o, &r.spec.lost_log_tail);
    let _ = writeln!(
        o,
        "  Profile                 {} (page {}, log file {})",
        r.spec.profile.name, r.spec.profile.page_size, r.spec.profile.log_file_size
    );
    let _ = writeln!(o, "  Log files to replay     {}", r.log_files_wanted);
    let _ = writeln!(
        o,
        "  Command Line            {}",
        r.run.command_line.join(" ")
    );
    if !r.prior_recovery.is_empty() {
        let _ = writeln!(
            o,
            "\nRecovery of databases left unclean by an earlier crash"
        );
        o.push_str(&soft_recovery_table(&r.prior_recovery));
    }
    if !r.generation.is_empty() {
        let _ = writeln!(o, "\nLog Generation (checkpoint held)");
        for g in &r.generation {
            let _ = writeln!(
                o,
                "  {:<8} {:>6} log files  {:>9} transactions  {:>8.1} s",
                g.name, g.log_files, g.transactions, g.seconds
            );
        }
    }
    if !r.instances.is_empty() {
        let _ = writeln!(o, "\nSoft-Recovery Statistics");
        o.push_str(&soft_recovery_table(&r.instances));
    }
    if let Some(v) = &r.verify {
        o.push_str(&super::verify::render_checksum(v));
    }
    super::errors_text(&mut o, &r.errors);
    o
}

/// Instance, log files replayed, elapsed seconds (average and sum), then the
/// I/O during replay.
pub fn soft_recovery_table(rs: &[ReplayResult]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "  {:<8} {:>9} {:>9} {:>9}",
        "Instance", "log files", "elapsed s", "s/file"
    );
    for r in rs {
        let _ = writeln!(
            o,
            "  {:<8} {:>9} {:>9.3} {:>9.4}",
            r.name, r.log_files_replayed, r.seconds, r.seconds_per_log_file
        );
    }
    let n = rs.len().max(1) as f64;
    let files: u64 = rs.iter().map(|r| r.log_files_replayed).sum();
    let secs: f64 = rs.iter().map(|r| r.seconds).sum();
    let _ = writeln!(
        o,
        "  {:<8} {:>9.1} {:>9.3}",
        "Average",
        files as f64 / n,
        secs / n
    );
    let _ = writeln!(o, "  {:<8} {:>9} {:>9.3}", "Sum", files, secs);
    let _ = writeln!(
        o,
        "\n  I/O during replay: {:<8} {:>10} {:>9} {:>8} {:>10} {:>9} {:>9} {:>10}",
        "",
        "db reads/s",
        "avg bytes",
        "avg ms",
        "db writes/s",
        "avg bytes",
        "log rd/s",
        "avg bytes"
    );
    for r in rs {
        let _ = writeln!(
            o,
            "  {:<8} {:>19.1} {:>9.0} {:>8.2} {:>11.1} {:>9.0} {:>9.1} {:>10.0}",
            r.name,
            r.db_read.ops_per_s,
            r.db_read.avg_bytes,
            r.db_read.latency_ms.avg,
            r.db_write.ops_per_s,
            r.db_write.avg_bytes,
            r.log_read.ops_per_s,
            r.log_read.avg_bytes
        );
    }
    for r in rs {
        let _ = writeln!(
            o,
            "  {}: {} records, {} transactions, {} updates applied, {} already on the page, {} uncommitted dropped; {:.1} db reads per log file{}{}; CPU {:.2} s; {}",
            r.name,
            r.records,
            r.transactions,
            r.updates_applied,
            r.updates_skipped,
            r.uncommitted_updates_dropped,
            r.db_reads_per_log_file,
            if r.db_writes_per_read > 0.0 {
                format!(", {:.3} db writes per read", r.db_writes_per_read)
            } else {
                String::new()
            },
            if r.db_writes_at_checkpoint > 0 || r.db_writes_during_replay > 0 {
                format!(
                    " ({} during replay, {} in the final flush of {:.2} s)",
                    r.db_writes_during_replay, r.db_writes_at_checkpoint, r.checkpoint_seconds
                )
            } else {
                String::new()
            },
            r.cpu_seconds,
            r.stopped
        );
    }
    o
}
