//! summary.txt of a storage run: the published storage-report layout in
//! plain text, with the percentile columns we add.

use mailbench_base::ByteSize;
use mailbench_results::storage::merge::StorageMerged;
use mailbench_results::storage::run::StorageResult;
use mailbench_results::storage::spec::ToolStyle;
use mailbench_results::storage::stats::ClassFigures;
use mailbench_results::storage::wording;
use std::fmt::Write;

fn lat(c: &ClassFigures) -> String {
    let l = &c.latency_ms;
    format!(
        "{:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9.3}",
        l.avg, l.p50, l.p95, l.p99, l.max
    )
}

pub fn render(r: &StorageResult) -> String {
    let mut o = String::new();
    let s = &r.spec;
    let title = format!(
        "mailbench storage {} test",
        format!("{:?}", s.test_type).to_lowercase()
    );
    super::test_summary_head(&mut o, &title, &r.verdict, &r.run);
    let _ = writeln!(
        o,
        "  Operating System        {} (kernel {})",
        r.run.host.os, r.run.host.kernel
    );
    super::version_and_times(&mut o, &r.run);
    super::lost_log_tail(&mut o, &s.lost_log_tail);
    let _ = writeln!(
        o,
        "  Measured Window         {:.0} s after {:.0} s warm-up ({} intervals){}",
        r.window.measured_s,
        r.window.warmup_s,
        r.window.intervals,
        if r.window.interrupted {
            ", INTERRUPTED"
        } else {
            ""
        }
    );
    prerequisites_text(r, &mut o);
    let _ = writeln!(
        o,
        "  Command Line            {}",
        r.run.command_line.join(" ")
    );

    sizing_text(r, &mut o);
    parameters_text(r, &mut o);
    transactional_text(r, &mut o);
    background_text(r, &mut o);
    host_text(r, &mut o);
    o
}

/// The warm-up ("attaining prerequisites"): the cache reached against its
/// lower bound, and the warning when the time limit ended it (absent in
/// results whose warm-up was a fixed time).
fn prerequisites_text(r: &StorageResult, o: &mut String) {
    let Some(p) = &r.window.prerequisites else {
        return;
    };
    let mb = |b: u64| b as f64 / 1048576.0;
    let _ = writeln!(
        o,
        "  Attaining Prerequisites {:.0} s: database cache {:.1} MB, lower bound {:.1} MB of {:.1} MB maximum, {}",
        p.seconds,
        mb(p.cache_reached_bytes),
        mb(p.cache_lower_bound_bytes),
        mb(p.cache_max_bytes),
        if p.attained {
            "reached".to_string()
        } else {
            format!("NOT reached within the {:.0} s limit", p.limit_s)
        }
    );
    if let Some(w) = &p.warning {
        let _ = writeln!(o, "  WARNING                 {w}");
    }
}

/// Database sizing and throughput, and the creation figures when the run created databases.
fn sizing_text(r: &StorageResult, o: &mut String) {
    let t = &r.total;
    let _ = writeln!(o, "\nDatabase Sizing and Throughput");
    let target = t
        .target_iops
        .map(|x| format!("{x:.2}"))
        .unwrap_or_else(|| "none".into());
    let _ = writeln!(
        o,
        "  Achieved Transactional I/O per Second   {:.2}",
        t.transactional_iops
    );
    let _ = writeln!(o, "  Target Transactional I/O per Second     {target}");
    let _ = writeln!(
        o,
        "  Database reads share of transactional   {:.1} %",
        t.db_read_share_pct
    );
    let _ = writeln!(
        o,
        "  Log writes per transactional I/O        {:.1} %",
        t.log_write_share_pct
    );
    let _ = writeln!(
        o,
        "  Transactions per second                 {:.1}",
        t.transactions_per_s
    );
    let _ = writeln!(
        o,
        "  Page-fault stalls per second            {:.3} (highest sample {:.3})",
        t.page_fault_stalls_per_s, t.page_fault_stalls_max_per_s
    );
    let rd = t.classes.get("db_read").map_or(0.0, |c| c.latency_ms.max);
    let lw = t.classes.get("log_write").map_or(0.0, |c| c.latency_ms.max);
    let _ = writeln!(
        o,
        "  Highest sample average (ms)             database read {:.1}, log write {:.1} (slowest single I/O {:.1} / {:.1})",
        t.db_read_sample_max_ms, t.log_write_sample_max_ms, rd, lw
    );
    if let Some(i) = &r.init {
        let total: u64 = i.databases.iter().map(|d| d.size_bytes).sum();
        let _ = writeln!(
            o,
            "  Initial database size (all)             {}",
            ByteSize(total)
        );
        if i.written_bytes > 0 {
            let _ = writeln!(
                o,
                "  Database creation                       {:.0} MB in {:.1} s ({:.0} MB/s)",
                i.written_bytes as f64 / 1e6,
                i.seconds,
                i.mb_per_s
            );
        }
    }
}

/// The system parameters: profile, threads, cache, flush, engine, thresholds.
fn parameters_text(r: &StorageResult, o: &mut String) {
    let s = &r.spec;
    let _ = writeln!(o, "\nSystem Parameters");
    let p = &s.profile;
    let _ = writeln!(
        o,
        "  Profile                 {} ({})",
        p.name, p.description
    );
    let _ = writeln!(
        o,
        "  Databases / threads     {} / {}{}",
        s.instances.len(),
        s.threads,
        if s.threads_auto { " (auto)" } else { "" }
    );
    let _ = writeln!(
        o,
        "  Page / log file size    {} / {}",
        p.page_size, p.log_file_size
    );
    let _ = writeln!(
        o,
        "  Operation mix           insert {} / delete {} / replace {} / read {} %",
        p.insert_pct, p.delete_pct, p.replace_pct, p.read_pct
    );
    let _ = writeln!(o, "  Lazy commits            {} %", p.lazy_commit_pct);
    let _ = writeln!(o, "  Database cache          {}", wording::cache_text(s));
    let _ = writeln!(o, "  Flush thresholds        {}", wording::flush_text(s));
    if p.tool_style == ToolStyle::Jetstress2007 {
        let _ = writeln!(
            o,
            "  Log buffers             {}",
            p.log_buffers
                .unwrap_or(mailbench_results::storage::spec::DEFAULT_LOG_BUFFERS)
        );
    }
    let _ = writeln!(o, "  Log                     {}", wording::log_text(s));
    let _ = writeln!(
        o,
        "  Background maintenance  {}",
        if p.maintenance {
            format!(
                "on, {} reads at {} MB/s",
                p.maintenance_read_size, p.maintenance_mb_per_s
            )
        } else {
            "off".into()
        }
    );
    let _ = writeln!(o, "  Database copies         {}", s.copies);
    let _ = writeln!(o, "  I/O engine              {}", r.io_path_text());
    let _ = writeln!(o, "  Thresholds              {}", s.thresholds.describe());
}

/// Transactional I/O per instance.
fn transactional_text(r: &StorageResult, o: &mut String) {
    let _ = writeln!(
        o,
        "\nTransactional I/O Performance (latency in ms: avg p50 p95 p99 max)"
    );
    let _ = writeln!(
        o,
        "  {:<6} {:>9} {:>9} {:>9} {:>9}  {:<44} {:>9} {:>9}  log write latency",
        "DB",
        "reads/s",
        "writes/s",
        "rd bytes",
        "wr bytes",
        "db read latency",
        "log wr/s",
        "log bytes"
    );
    for i in &r.instances {
        let rd = &i.classes["db_read"];
        let wr = &i.classes["db_write"];
        let lw = &i.classes["log_write"];
        let _ = writeln!(
            o,
            "  {:<6} {:>9.2} {:>9.2} {:>9.0} {:>9.0}  {} {:>9.2} {:>9.0}  {}",
            i.name,
            rd.ops_per_s,
            wr.ops_per_s,
            rd.avg_bytes,
            wr.avg_bytes,
            lat(rd),
            lw.ops_per_s,
            lw.avg_bytes,
            lat(lw)
        );
    }
    let _ = writeln!(
        o,
        "\n  Database write latency per instance (ms: avg p50 p95 p99 max)"
    );
    for i in &r.instances {
        let _ = writeln!(o, "  {:<6} {}", i.name, lat(&i.classes["db_write"]));
    }
}

/// Background maintenance, log replication and total I/O.
fn background_text(r: &StorageResult, o: &mut String) {
    let t = &r.total;
    class_per_instance(
        r,
        o,
        "Background Database Maintenance I/O Performance",
        "maintenance_read",
    );
    class_per_instance(r, o, "Log Replication I/O Performance", "log_read");

    let _ = writeln!(o, "\nTotal I/O Performance");
    let _ = writeln!(
        o,
        "  {:<18} {:>10} {:>10} {:>9} {:>7}  latency ms: avg p50 p95 p99 max",
        "class", "ops/s", "avg bytes", "MB/s", "errors"
    );
    for (name, c) in &t.classes {
        let _ = writeln!(
            o,
            "  {:<18} {:>10.2} {:>10.0} {:>9.2} {:>7}  {}",
            name,
            c.ops_per_s,
            c.avg_bytes,
            c.mb_per_s,
            c.errors,
            lat(c)
        );
    }
    let tl = &t.transaction_latency_ms;
    let _ = writeln!(
        o,
        "  transactions       {:>10.2}  response from intended start: avg {:.2} p95 {:.2} p99 {:.2} max {:.1} ms",
        t.transactions_per_s, tl.avg, tl.p95, tl.p99, tl.max
    );
}

/// A section of one I/O class per instance: reads/s, average bytes, latency.
fn class_per_instance(r: &StorageResult, o: &mut String, title: &str, class: &str) {
    let _ = writeln!(o, "\n{title}");
    let _ = writeln!(
        o,
        "  {:<6} {:>9} {:>10}  latency ms: avg p50 p95 p99 max",
        "DB", "reads/s", "avg bytes"
    );
    for i in &r.instances {
        let m = &i.classes[class];
        let _ = writeln!(
            o,
            "  {:<6} {:>9.2} {:>10.0}  {}",
            i.name,
            m.ops_per_s,
            m.avg_bytes,
            lat(m)
        );
    }
}

/// The host's CPU, memory and disks; checksums, errors and where the details are.
fn host_text(r: &StorageResult, o: &mut String) {
    let _ = writeln!(o, "\nHost System Performance");
    let _ = writeln!(
        o,
        "  CPU busy {:.1} % (I/O wait {:.1} %), memory used {:.1} % of {}; mailbench used {:.1} CPU s",
        r.host.cpu_busy_avg_pct,
        r.host.cpu_iowait_avg_pct,
        r.host.memory_used_avg_pct,
        ByteSize(r.host.memory_total_bytes),
        r.host.mailbench_cpu_s
    );
    for d in &r.disks {
        let x = &d.rates;
        let _ = writeln!(
            o,
            "  {:<8} reads {:.1}/s ({:.2} MB/s, {:.2} ms)  writes {:.1}/s ({:.2} MB/s, {:.2} ms)  util {:.0} %  qd {:.1}",
            d.device,
            x.reads_per_s,
            x.read_bytes_per_s / 1e6,
            x.read_latency_ms,
            x.writes_per_s,
            x.write_bytes_per_s / 1e6,
            x.write_latency_ms,
            x.utilisation_pct,
            x.queue_depth
        );
    }

    if let Some(v) = &r.verify {
        o.push_str(&super::verify::render_checksum(v));
    }
    super::errors_text(o, &r.errors);
    let _ = writeln!(
        o,
        "\nTest Log: test.log; per-interval histograms: {}",
        r.intervals_file
    );
}

/// The per-host part of summary.txt for a merged result.
pub fn hosts_text(m: &StorageMerged) -> String {
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
