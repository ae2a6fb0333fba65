//! test.log's lines in the wording of the published tool a profile follows
//! (`tool_style`): the cache settings, the flush thresholds, the latency
//! thresholds, the operation mix, the sampling, the prerequisites, and the
//! per-database latency and page-fault-stall lines of the end of a run. The
//! wording is that of the published test logs (docs/storage.md, "test.log").

use crate::storage::spec::{StorageSpec, Thresholds, ToolStyle};

const MIB: f64 = 1048576.0;

/// A cache size as the tool prints it: MB with one decimal, GB with one
/// decimal from 1 GB (1024 MB) on ("256.0 MB", "2.0 GB", "3.5 GB").
pub fn cache_size(bytes: u64) -> String {
    let mb = bytes as f64 / MIB;
    if mb >= 1024.0 {
        format!("{:.1} GB", mb / 1024.0)
    } else {
        format!("{mb:.1} MB")
    }
}

/// The whole cache's minimum and maximum over every database.
pub fn cache_totals(spec: &StorageSpec) -> (u64, u64) {
    let n = spec.instances.len() as u64;
    (spec.cache_min_per_db * n, spec.cache_max_per_db * n)
}

/// `Database cache settings: (minimum: 256.0 MB, maximum: 2.0 GB)`.
pub fn cache_settings_line(min_bytes: u64, max_bytes: u64) -> String {
    format!(
        "Database cache settings: (minimum: {}, maximum: {})",
        cache_size(min_bytes),
        cache_size(max_bytes)
    )
}

/// The flush thresholds over the whole cache in bytes: the start and stop
/// shares of its maximum in whole pages, as ESE computes its avail pool
/// thresholds (`cbfCacheTargetOptimal / 100`, `/ 50` at 1 % / 2 %).
pub fn flush_threshold_bytes(
    max_bytes: u64,
    page: u64,
    start_pct: f64,
    stop_pct: f64,
) -> (u64, u64) {
    let pages = (max_bytes / page.max(1)) as f64;
    let at = |pct: f64| (pages * pct / 100.0).floor() as u64 * page;
    (at(start_pct), at(stop_pct))
}

/// `Database flush thresholds: (start: 20.5 MB, stop: 41.0 MB)`.
pub fn flush_line(start_bytes: u64, stop_bytes: u64) -> String {
    format!(
        "Database flush thresholds: (start: {:.1} MB, stop: {:.1} MB)",
        start_bytes as f64 / MIB,
        stop_bytes as f64 / MIB
    )
}

/// The two latency threshold lines: in seconds for the 2007-era tool
/// ("average: 0.02 seconds/read"), in msec for the 2013 tool ("average: 20
/// msec/read").
pub fn latency_lines(style: ToolStyle, t: &Thresholds) -> [String; 2] {
    let (unit_r, unit_w, scale) = match style {
        ToolStyle::Jetstress2007 => ("seconds/read", "seconds/write", 1000.0),
        ToolStyle::Jetstress2013 => ("msec/read", "msec/write", 1.0),
    };
    [
        format!(
            "Database read latency thresholds: (average: {} {unit_r}, maximum: {} {unit_r}).",
            t.db_read_avg_ms / scale,
            t.db_read_max_ms / scale
        ),
        format!(
            "Log write latency thresholds: (average: {} {unit_w}, maximum: {} {unit_w}).",
            t.log_write_avg_ms / scale,
            t.log_write_max_ms / scale
        ),
    ]
}

/// `Operation mix: Sessions 7, Inserts 40%, ...`: the sessions of one
/// storage group for the 2007-era tool (its thread count is per storage
/// group), all of them for the 2013 tool (one global thread count).
pub fn operation_mix_line(spec: &StorageSpec) -> String {
    let p = &spec.profile;
    let sessions = match p.tool_style {
        ToolStyle::Jetstress2007 => spec.instances.first().map_or(0, |i| i.sessions as u64),
        ToolStyle::Jetstress2013 => u64::from(spec.threads),
    };
    format!(
        "Operation mix: Sessions {sessions}, Inserts {}%, Deletes {}%, Replaces {}%, Reads {}%, \
         Lazy Commits {}%.",
        p.insert_pct, p.delete_pct, p.replace_pct, p.read_pct, p.lazy_commit_pct
    )
}

/// `Performance logging begins (interval: 15000 ms).` (2007-era) or
/// `Performance logging started (interval: 15000 ms).` (2013).
pub fn logging_line(spec: &StorageSpec) -> String {
    let verb = match spec.profile.tool_style {
        ToolStyle::Jetstress2007 => "begins",
        ToolStyle::Jetstress2013 => "started",
    };
    format!(
        "Performance logging {verb} (interval: {} ms).",
        spec.sample_interval.as_millis()
    )
}

/// A counter value as the tool prints it: rounded to thousands, with one
/// decimal ("1932735000.0").
fn counter(bytes: u64) -> String {
    format!("{:.1}", (bytes as f64 / 1000.0).round() * 1000.0)
}

/// The line after `Attaining prerequisites:`: the database cache's size when
/// the warm-up ended and its lower bound.
pub fn prerequisites_line(cached: u64, lower_bound: u64) -> String {
    format!(
        "\\MSExchange Database(mailbench)\\Database Cache Size, Last: {} (lower bound: {}, upper \
         bound: none)",
        counter(cached),
        counter(lower_bound)
    )
}

/// The cache as summary.txt and the report state it: the published tool's
/// totals and each database's share.
pub fn cache_text(spec: &StorageSpec) -> String {
    let (min, max) = cache_totals(spec);
    format!(
        "minimum {}, maximum {} over {} databases ({} / {} each)",
        cache_size(min),
        cache_size(max),
        spec.instances.len(),
        cache_size(spec.cache_min_per_db),
        cache_size(spec.cache_max_per_db)
    )
}

/// The flush thresholds as summary.txt and the report state them.
pub fn flush_text(spec: &StorageSpec) -> String {
    let p = &spec.profile;
    let (_, max) = cache_totals(spec);
    let (start, stop) =
        flush_threshold_bytes(max, p.page_size.0, p.flush_start_pct, p.flush_stop_pct);
    format!(
        "start {:.1} MB, stop {:.1} MB of available buffers ({} % / {} % of the maximum cache); \
         checkpoint depth {}",
        start as f64 / MIB,
        stop as f64 / MIB,
        p.flush_start_pct,
        p.flush_stop_pct,
        mailbench_base::ByteSize(p.checkpoint_depth.0)
    )
}

/// The log's sector and buffer as summary.txt and the report state them
/// (with the 2007-era tool's "Log buffers" figure where it prints one).
pub fn log_text(spec: &StorageSpec) -> String {
    let p = &spec.profile;
    let buffers = p
        .log_buffers
        .map_or_else(|| "ESE's default".to_string(), |b| b.to_string());
    format!(
        "log buffers {buffers} ({} used), sector {}",
        mailbench_base::ByteSize(p.log_buffer_bytes()),
        mailbench_base::ByteSize(p.log_sector_size.0)
    )
}

/// One database's average latencies at the end of a run, as the tool reports
/// each volume (2007-era: seconds, four decimals) or instance (2013: ms).
pub fn latency_report_lines(
    style: ToolStyle,
    name: &str,
    db_read_ms: f64,
    log_write_ms: f64,
    log_read_ms: Option<f64>,
) -> Vec<String> {
    let mut out = Vec::new();
    match style {
        ToolStyle::Jetstress2007 => {
            out.push(format!(
                "Volume {name} (database): has {:.4} for Avg. Disk sec/Read.",
                db_read_ms / 1000.0
            ));
            out.push(format!(
                "Volume {name} (log): has {:.4} for Avg. Disk sec/Write.",
                log_write_ms / 1000.0
            ));
            if let Some(r) = log_read_ms {
                out.push(format!(
                    "Volume {name} (log): has {:.4} for Avg. Disk sec/Read.",
                    r / 1000.0
                ));
            }
        }
        ToolStyle::Jetstress2013 => {
            out.push(format!(
                "Instance {name} has {db_read_ms:.1} for I/O Database Reads Average Latency."
            ));
            out.push(format!(
                "Instance {name} has {log_write_ms:.1} for I/O Log Writes Average Latency."
            ));
            if let Some(r) = log_read_ms {
                out.push(format!(
                    "Instance {name} has {r:.1} for I/O Log Reads Average Latency."
                ));
            }
        }
    }
    out
}

/// The two page-fault stall lines of the end of a run: the highest rate of
/// any database in any sample, and how many samples had any.
pub fn stall_lines(max_per_s: f64, samples_with_stalls: u64) -> [String; 2] {
    [
        format!("Test has {max_per_s} Maximum Database Page Fault Stalls/sec."),
        format!(
            "Test has {samples_with_stalls} Database Page Fault Stalls/sec samples higher than 0."
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::spec::TestType;

    /// The lines of the published test logs: 8 storage groups of the 2007-era
    /// tool (256 MB / 32 MB of 8 KiB pages each) and 14 databases of the 2013
    /// tool (256 MB / 32 MB of 32 KiB pages each).
    #[test]
    fn the_cache_and_flush_lines_read_as_the_published_logs() {
        let mib = 1u64 << 20;
        assert_eq!(
            cache_settings_line(8 * 32 * mib, 8 * 256 * mib),
            "Database cache settings: (minimum: 256.0 MB, maximum: 2.0 GB)"
        );
        assert_eq!(
            cache_settings_line(14 * 32 * mib, 14 * 256 * mib),
            "Database cache settings: (minimum: 448.0 MB, maximum: 3.5 GB)"
        );
        let (a, b) = flush_threshold_bytes(2048 * mib, 8192, 1.0, 2.0);
        assert_eq!(
            flush_line(a, b),
            "Database flush thresholds: (start: 20.5 MB, stop: 41.0 MB)"
        );
        let (a, b) = flush_threshold_bytes(3584 * mib, 32768, 1.0, 2.0);
        assert_eq!(
            flush_line(a, b),
            "Database flush thresholds: (start: 35.8 MB, stop: 71.7 MB)"
        );
        assert_eq!(
            prerequisites_line(1_933_337_123, (0.9 * (2048 * mib) as f64) as u64),
            "\\MSExchange Database(mailbench)\\Database Cache Size, Last: 1933337000.0 (lower \
             bound: 1932735000.0, upper bound: none)"
        );
    }

    #[test]
    fn latency_thresholds_are_worded_as_each_tool_words_them() {
        let mut t = Thresholds::exchange2013(TestType::Performance);
        assert_eq!(
            latency_lines(ToolStyle::Jetstress2013, &t),
            [
                "Database read latency thresholds: (average: 20 msec/read, maximum: 100 msec/read).",
                "Log write latency thresholds: (average: 10 msec/write, maximum: 100 msec/write).",
            ]
        );
        t.db_read_max_ms = 50.0;
        t.log_write_max_ms = 50.0;
        assert_eq!(
            latency_lines(ToolStyle::Jetstress2007, &t),
            [
                "Database read latency thresholds: (average: 0.02 seconds/read, maximum: 0.05 seconds/read).",
                "Log write latency thresholds: (average: 0.01 seconds/write, maximum: 0.05 seconds/write).",
            ]
        );
        assert_eq!(
            stall_lines(0.0, 0),
            [
                "Test has 0 Maximum Database Page Fault Stalls/sec.",
                "Test has 0 Database Page Fault Stalls/sec samples higher than 0.",
            ]
        );
        assert_eq!(
            latency_report_lines(ToolStyle::Jetstress2007, "db1", 12.8, 2.0, Some(3.0)),
            [
                "Volume db1 (database): has 0.0128 for Avg. Disk sec/Read.",
                "Volume db1 (log): has 0.0020 for Avg. Disk sec/Write.",
                "Volume db1 (log): has 0.0030 for Avg. Disk sec/Read.",
            ]
        );
    }
}
