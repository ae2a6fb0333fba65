//! The storage report's tables, one function per section, in the order and
//! with the names of the published storage-test reports.

use super::storage::Section;
use super::*;

pub(super) fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

pub(super) fn lat_cells(
    c: Option<&ClassFigures>,
    avg_lim: Option<f64>,
    max_lim: Option<f64>,
) -> Row {
    let Some(c) = c else {
        return vec![td("–"); 6];
    };
    let l = &c.latency_ms;
    vec![
        td_judged(&ms(l.avg), avg_lim.is_some_and(|x| l.avg > x)),
        td(&ms(l.p50)),
        td(&ms(l.p95)),
        td(&ms(l.p99)),
        td(&ms(l.p999)),
        td_judged(&ms(l.max), max_lim.is_some_and(|x| l.max > x)),
    ]
}

pub(super) const LAT_HEAD: [&str; 6] = ["avg", "p50", "p95", "p99", "p99.9", "max"];

/// The pass criteria: each limit, the measured figure and pass or fail.
pub(super) fn tables_criteria(d: &StorageDoc) -> Table {
    let r = &d.result;
    let t = &r.total;
    let th = &r.spec.thresholds;
    let cls = |n: &str| t.classes.get(n);
    let rd = cls("db_read").map(|c| c.latency_ms).unwrap_or_default();
    let lw = cls("log_write").map(|c| c.latency_ms).unwrap_or_default();
    let mut rows: Vec<Row> = Vec::new();
    let mut crit = |name: &str, measured: String, limit: String, bad: bool| {
        rows.push(vec![
            td_t(name),
            td(&measured),
            td(&limit),
            if bad {
                td_class("fail", "bad")
            } else {
                td_class("pass", "ok")
            },
        ]);
    };
    crit(
        "Database read latency, average",
        format!("{} ms", ms(rd.avg)),
        format!("≤ {} ms", short(th.db_read_avg_ms)),
        rd.avg > th.db_read_avg_ms,
    );
    crit(
        "Database read latency, slowest",
        format!("{} ms", ms(rd.max)),
        format!("≤ {} ms", short(th.db_read_max_ms)),
        rd.max > th.db_read_max_ms,
    );
    crit(
        "Log write latency, average",
        format!("{} ms", ms(lw.avg)),
        format!("≤ {} ms", short(th.log_write_avg_ms)),
        lw.avg > th.log_write_avg_ms,
    );
    crit(
        "Log write latency, slowest",
        format!("{} ms", ms(lw.max)),
        format!("≤ {} ms", short(th.log_write_max_ms)),
        lw.max > th.log_write_max_ms,
    );
    if let Some(target) = t.target_iops {
        crit(
            "Transactional IOPS",
            num(t.transactional_iops),
            format!("≥ {}", num(target)),
            t.transactional_iops < target,
        );
    }
    crit(
        "Page-fault stalls per second",
        fixed(t.page_fault_stalls_per_s, 3),
        format!("≤ {}", num(th.page_fault_stalls_per_s)),
        t.page_fault_stalls_per_s > th.page_fault_stalls_per_s,
    );
    if let Some(max) = th.page_fault_stalls_max_per_s {
        crit(
            "Page-fault stalls per second, highest sample of any database",
            fixed(t.page_fault_stalls_max_per_s, 3),
            format!("≤ {} in every sample", num(max)),
            t.page_fault_stalls_max_per_s > max,
        );
    }
    let errs = t.io_errors.max(r.errors.len() as u64);
    crit(
        "I/O and data errors",
        errs.to_string(),
        "0".into(),
        errs > 0,
    );
    if let Some(v) = &r.verify {
        crit(
            "Bad pages and log blocks after the run",
            v.bad_total.to_string(),
            "0".into(),
            v.bad_total > 0,
        );
    }
    table(
        "criteria-table",
        &[],
        &["criterion", "measured", "limit", "result"],
        rows,
    )
}

/// The test summary: verdict, machine, what ran and when.
pub(super) fn tables_test_summary(d: &StorageDoc) -> Kv {
    let r = &d.result;
    let sp = &r.spec;
    let p = &sp.profile;
    let h = &r.run.host;
    kv(
        "test-summary-table",
        vec![
            ("Overall Test Result", r.verdict.label().to_string()),
            ("Machine Name", h.hostname.clone()),
            (
                "Test Description",
                format!(
                    "{} test, profile {}, {} databases, {} threads",
                    format!("{:?}", sp.test_type).to_lowercase(),
                    p.name,
                    sp.instances.len(),
                    sp.threads
                ),
            ),
            ("Test Start Time", r.run.started.clone()),
            ("Test End Time", r.run.ended.clone()),
            (
                "Measured Window",
                format!(
                    "{} after {} warm-up ({} intervals){}{}",
                    duration(r.window.measured_s),
                    duration(r.window.warmup_s),
                    r.window.intervals,
                    if r.window.interrupted {
                        ", interrupted"
                    } else {
                        ""
                    },
                    prerequisites_note(r.window.prerequisites.as_ref())
                ),
            ),
            ("mailbench Version", r.run.tool_version.clone()),
            (
                "Operating System",
                format!("{} (kernel {})", h.os, h.kernel),
            ),
            (
                "Processors / Memory",
                format!("{} CPUs, {}", h.cpus, bytes(h.memory_bytes as f64)),
            ),
            ("Command Line", r.run.command_line.join(" ")),
            ("Result File", d.source.display().to_string()),
        ],
    )
}

/// Database sizing and throughput.
pub(super) fn tables_sizing(d: &StorageDoc) -> Kv {
    let r = &d.result;
    let t = &r.total;
    let sp = &r.spec;
    let tl = &t.transaction_latency_ms;
    let mut rows = vec![
        (
            "Achieved Transactional I/O per Second",
            fixed(t.transactional_iops, 3),
        ),
        (
            "Target Transactional I/O per Second",
            t.target_iops
                .map(|x| fixed(x, 3))
                .unwrap_or_else(|| "none".into()),
        ),
        (
            "Database reads share of transactional I/O",
            format!("{} %", fixed(t.db_read_share_pct, 1)),
        ),
        (
            "Log writes per 100 transactional I/Os",
            fixed(t.log_write_share_pct, 1),
        ),
        ("Transactions per Second", fixed(t.transactions_per_s, 2)),
        (
            "Transaction Response (from intended start)",
            format!(
                "avg {} · p95 {} · p99 {} · max {} ms",
                ms(tl.avg),
                ms(tl.p95),
                ms(tl.p99),
                ms(tl.max)
            ),
        ),
        ("Database Files (Count)", sp.instances.len().to_string()),
        (
            "Database Size (all)",
            bytes(sp.instances.iter().map(|i| i.size_bytes as f64).sum()),
        ),
    ];
    if let Some(m) = sp.mailboxes {
        rows.push(("Mailboxes", m.to_string()));
    }
    if let Some(i) = &r.init
        && i.written_bytes > 0
    {
        rows.push((
            "Database Creation",
            format!(
                "{} written in {} ({} MB/s)",
                bytes(i.written_bytes as f64),
                duration(i.seconds),
                fixed(i.mb_per_s, 0)
            ),
        ));
    }
    rows.push(("Log Space Reserved", bytes(sp.log_space_bytes as f64)));
    kv("sizing-table", rows)
}

/// The system parameters: profile, threads, cache, flush, engine.
pub(super) fn tables_system_parameters(d: &StorageDoc) -> Kv {
    let r = &d.result;
    let th = &r.spec.thresholds;
    let sp = &r.spec;
    let p = &sp.profile;
    kv(
        "system-parameters-table",
        vec![
            ("Test Type", format!("{:?}", sp.test_type).to_lowercase()),
            ("Profile", format!("{} — {}", p.name, p.description)),
            (
                "Thread Count",
                format!(
                    "{}{} over {} databases",
                    sp.threads,
                    if sp.threads_auto { " (auto)" } else { "" },
                    sp.instances.len()
                ),
            ),
            (
                "Page / Log File Size",
                format!(
                    "{} / {}",
                    bytes(p.page_size.0 as f64),
                    bytes(p.log_file_size.0 as f64)
                ),
            ),
            (
                "Insert / Delete / Replace / Read",
                format!(
                    "{} % / {} % / {} % / {} %",
                    p.insert_pct, p.delete_pct, p.replace_pct, p.read_pct
                ),
            ),
            ("Lazy Commits", format!("{} %", p.lazy_commit_pct)),
            (
                "Database Cache",
                mailbench_results::storage::wording::cache_text(sp),
            ),
            (
                "Flush Thresholds / Checkpoint Depth",
                mailbench_results::storage::wording::flush_text(sp),
            ),
            ("Log", mailbench_results::storage::wording::log_text(sp)),
            (
                "Run Background Database Maintenance",
                if p.maintenance {
                    format!(
                        "yes, {} reads at {} MB/s per database",
                        bytes(p.maintenance_read_size.0 as f64),
                        p.maintenance_mb_per_s
                    )
                } else {
                    "no".into()
                },
            ),
            ("Number of Copies per Database", sp.copies.to_string()),
            ("I/O Engine", r.io_path_text()),
            (
                "Sampling Interval",
                duration(sp.sample_interval.as_secs_f64()),
            ),
            ("Thresholds", th.describe()),
            ("Random Seed", sp.seed.to_string()),
        ],
    )
}

/// Each database's configuration.
pub(super) fn tables_database_configuration(d: &StorageDoc) -> Table {
    let sp = &d.result.spec;
    let rows: Vec<Row> = sp
        .instances
        .iter()
        .map(|i| {
            vec![
                td_t(&i.name),
                td(&i.sessions.to_string()),
                td(&bytes(i.size_bytes as f64)),
                td_t(&i.db_path.display().to_string()),
                td_t(&i.log_dir.display().to_string()),
            ]
        })
        .collect();
    table(
        "database-configuration-table",
        &[],
        &["instance", "sessions", "size", "database", "log folder"],
        rows,
    )
}

/// The thread tuning steps when `--threads auto` ran.
pub(super) fn tables_tuning(d: &StorageDoc) -> Option<Table> {
    let r = &d.result;
    if r.tuning.is_empty() {
        return None;
    }
    let rows: Vec<Row> = r
        .tuning
        .iter()
        .map(|t| {
            vec![
                td_t(&t.threads.to_string()),
                td(&fixed(t.transactional_iops, 1)),
                td(&ms(t.db_read_avg_ms)),
                td(&ms(t.log_write_avg_ms)),
                td_judged(if t.passed { "pass" } else { "fail" }, !t.passed),
                td_t(&t.reasons.join(" ")),
            ]
        })
        .collect();
    Some(table(
        "tuning-table",
        &[],
        &[
            "threads",
            "transactional IOPS",
            "db read avg ms",
            "log write avg ms",
            "result",
            "why",
        ],
        rows,
    ))
}

/// Transactional I/O per instance.
pub(super) fn tables_transactional_io(d: &StorageDoc) -> [Table; 2] {
    let r = &d.result;
    let th = &r.spec.thresholds;
    let inst_rows: Vec<Row> = r
        .instances
        .iter()
        .map(|i| {
            let g = |n: &str| i.classes.get(n);
            let f = |n: &str, fun: &dyn Fn(&ClassFigures) -> f64, dec: usize| {
                td(&g(n)
                    .map(|c| fixed(fun(c), dec))
                    .unwrap_or_else(|| "–".into()))
            };
            vec![
                td_t(&i.name),
                f("db_read", &|c| c.ops_per_s, 2),
                f("db_write", &|c| c.ops_per_s, 2),
                f("db_read", &|c| c.avg_bytes, 0),
                f("db_write", &|c| c.avg_bytes, 0),
                f("log_write", &|c| c.ops_per_s, 2),
                f("log_write", &|c| c.avg_bytes, 0),
                td(&fixed(i.transactional_iops, 2)),
                td(&fixed(i.transactions_per_s, 2)),
                td_judged(
                    &fixed(i.page_fault_stalls_per_s, 3),
                    i.page_fault_stalls_per_s > th.page_fault_stalls_per_s,
                ),
            ]
        })
        .collect();
    let io = table(
        "transactional-io-table",
        &[("", 1), ("database", 4), ("log", 2), ("totals", 3)],
        &[
            "instance",
            "reads/s",
            "writes/s",
            "read avg bytes",
            "write avg bytes",
            "writes/s",
            "write avg bytes",
            "transactional IOPS",
            "transactions/s",
            "page-fault stalls/s",
        ],
        inst_rows,
    );
    let lat_rows: Vec<Row> = r
        .instances
        .iter()
        .map(|i| {
            let mut row = vec![td_t(&i.name)];
            row.extend(lat_cells(
                i.classes.get("db_read"),
                Some(th.db_read_avg_ms),
                Some(th.db_read_max_ms),
            ));
            row.extend(lat_cells(i.classes.get("db_write"), None, None));
            row.extend(lat_cells(
                i.classes.get("log_write"),
                Some(th.log_write_avg_ms),
                Some(th.log_write_max_ms),
            ));
            row
        })
        .collect();
    let mut head = vec!["latency (ms)"];
    for _ in 0..3 {
        head.extend(LAT_HEAD);
    }
    let latency = table(
        "transactional-latency-table",
        &[
            ("", 1),
            ("database reads", 6),
            ("database writes", 6),
            ("log writes", 6),
        ],
        &head,
        lat_rows,
    );
    [io, latency]
}

/// Background maintenance and log replication I/O.
pub(super) fn tables_background_io(d: &StorageDoc) -> Vec<Section> {
    let r = &d.result;
    let mut o = Vec::new();
    for (n, id, title) in [
        (
            "maintenance_read",
            "maintenance-io",
            "Background Database Maintenance I/O Performance",
        ),
        (
            "log_read",
            "replication-io",
            "Log Replication I/O Performance",
        ),
    ] {
        let rows: Vec<Row> = r
            .instances
            .iter()
            .map(|i| {
                let c = i.classes.get(n);
                let mut row = vec![
                    td_t(&i.name),
                    td(&c.map(|c| fixed(c.ops_per_s, 2)).unwrap_or_default()),
                    td(&c.map(|c| fixed(c.avg_bytes, 0)).unwrap_or_default()),
                    td(&c.map(|c| fixed(c.mb_per_s, 2)).unwrap_or_default()),
                ];
                row.extend(lat_cells(c, None, None));
                row
            })
            .collect();
        let mut head = vec!["instance", "reads/s", "avg bytes", "MB/s"];
        head.extend(LAT_HEAD.iter().map(|h| match *h {
            "avg" => "latency avg (ms)",
            x => x,
        }));
        o.push(Section {
            id,
            title,
            table: table(&format!("{id}-table"), &[], &head, rows),
        });
    }
    o
}

/// Total I/O over all instances.
pub(super) fn tables_total_io(d: &StorageDoc) -> Table {
    let r = &d.result;
    let t = &r.total;
    let th = &r.spec.thresholds;
    let mut rows: Vec<Row> = Vec::new();
    for n in CLASS_ORDER {
        if let Some(c) = t.classes.get(n) {
            let (al, ml) = match n {
                "db_read" => (Some(th.db_read_avg_ms), Some(th.db_read_max_ms)),
                "log_write" => (Some(th.log_write_avg_ms), Some(th.log_write_max_ms)),
                _ => (None, None),
            };
            let mut row = vec![
                td_t(class_title(n)),
                td(&c.ops.to_string()),
                td(&fixed(c.ops_per_s, 2)),
                td(&fixed(c.avg_bytes, 0)),
                td(&fixed(c.mb_per_s, 2)),
                td_judged(&c.errors.to_string(), c.errors > 0),
            ];
            row.extend(lat_cells(Some(c), al, ml));
            rows.push(row);
        }
    }
    let tx = ClassFigures {
        ops: t.counters.transactions,
        ops_per_s: t.transactions_per_s,
        avg_bytes: f64::NAN,
        mb_per_s: f64::NAN,
        errors: t.counters.failed_transactions,
        latency_ms: t.transaction_latency_ms,
    };
    let mut row = vec![
        td_t("transactions (response)"),
        td(&tx.ops.to_string()),
        td(&fixed(tx.ops_per_s, 2)),
        td("–"),
        td("–"),
        td_judged(&tx.errors.to_string(), tx.errors > 0),
    ];
    row.extend(lat_cells(Some(&tx), None, None));
    rows.push(row);
    let mut head = vec![
        "I/O class",
        "operations",
        "ops/s",
        "avg bytes",
        "MB/s",
        "errors",
    ];
    head.extend(LAT_HEAD.iter().map(|h| match *h {
        "avg" => "latency avg (ms)",
        x => x,
    }));
    table("total-io-table", &[], &head, rows)
}

/// The host's CPU, memory and disks over the run.
pub(super) fn tables_host_performance(s: &Series) -> Table {
    let stat = |f: &dyn Fn(&Sample) -> f64| -> (String, String, String) {
        if s.measured.is_empty() {
            return ("–".into(), "–".into(), "–".into());
        }
        let v: Vec<f64> = s.measured.iter().map(f).collect();
        let avg = v.iter().sum::<f64>() / v.len() as f64;
        let mn = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let mx = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        (fixed(avg, 2), fixed(mn, 2), fixed(mx, 2))
    };
    let mut rows = Vec::new();
    for (name, f) in [
        (
            "% Processor Time (busy)",
            &(|m: &Sample| m.0) as &dyn Fn(&Sample) -> f64,
        ),
        ("% Processor I/O Wait", &|m| m.1),
        ("% Memory Used", &|m| m.2),
        ("Database Page Fault Stalls/sec", &|m| m.3),
        ("Transactional I/O per Second", &|m| m.4),
    ] {
        let (a, mn, mx) = stat(f);
        rows.push(vec![td_t(name), td(&a), td(&mn), td(&mx)]);
    }
    table(
        "host-performance-table",
        &[],
        &[
            "counter (measured intervals)",
            "average",
            "minimum",
            "maximum",
        ],
        rows,
    )
}

/// The volumes under the databases (operating system view).
pub(super) fn tables_disks(d: &StorageDoc) -> Option<Table> {
    let r = &d.result;
    if r.disks.is_empty() {
        return None;
    }
    let rows: Vec<Row> = r
        .disks
        .iter()
        .map(|dk| {
            let x = &dk.rates;
            vec![
                td_t(&dk.device),
                td_t(&dk.paths.join(", ")),
                td(&fixed(x.reads_per_s, 1)),
                td(&fixed(x.read_bytes_per_s / 1e6, 2)),
                td(&ms(x.read_latency_ms)),
                td(&fixed(x.writes_per_s, 1)),
                td(&fixed(x.write_bytes_per_s / 1e6, 2)),
                td(&ms(x.write_latency_ms)),
                td(&fixed(x.utilisation_pct, 1)),
                td(&fixed(x.queue_depth, 2)),
            ]
        })
        .collect();
    Some(table(
        "disks-table",
        &[],
        &[
            "device",
            "paths",
            "reads/s",
            "read MB/s",
            "read ms",
            "writes/s",
            "write MB/s",
            "write ms",
            "util %",
            "queue",
        ],
        rows,
    ))
}

/// One section per host of a merged result.
pub(super) fn tables_per_host(d: &StorageDoc) -> Option<Table> {
    let m = d.result.merged.as_ref()?;
    let rows: Vec<Row> = m
        .hosts
        .iter()
        .map(|h| {
            let c = |n: &str| {
                h.total
                    .classes
                    .get(n)
                    .map(|c| c.latency_ms)
                    .unwrap_or_default()
            };
            vec![
                td_t(&h.label),
                td_judged(h.verdict.label(), h.verdict.status != Status::Pass),
                td(&fixed(h.total.transactional_iops, 2)),
                td(&h
                    .total
                    .target_iops
                    .map(|x| fixed(x, 2))
                    .unwrap_or_else(|| "none".into())),
                td(&ms(c("db_read").avg)),
                td(&ms(c("db_read").p99)),
                td(&ms(c("db_read").max)),
                td(&ms(c("log_write").avg)),
                td(&ms(c("log_write").p99)),
                td(&ms(c("log_write").max)),
                td(&h.total.io_errors.to_string()),
                td(&fixed(h.host_performance.cpu_busy_avg_pct, 1)),
                td_t(&format!(
                    "{} ({})",
                    h.started,
                    duration(h.window.measured_s)
                )),
            ]
        })
        .collect();
    Some(table(
        "hosts-table",
        &[
            ("", 2),
            ("transactional IOPS", 2),
            ("db read ms", 3),
            ("log write ms", 3),
            ("", 3),
        ],
        &[
            "host",
            "verdict",
            "achieved",
            "target",
            "avg",
            "p99",
            "max",
            "avg",
            "p99",
            "max",
            "I/O errors",
            "CPU %",
            "started (measured)",
        ],
        rows,
    ))
}

/// Database creation.
pub(super) fn tables_init(d: &StorageDoc) -> Option<Table> {
    let i = d.result.init.as_ref()?;
    let rows: Vec<Row> = i
        .databases
        .iter()
        .map(|db| {
            vec![
                td_t(&db.name),
                td_t(&db.action),
                td(&bytes(db.size_bytes as f64)),
                td(&bytes(db.written_bytes as f64)),
                td(&fixed(db.seconds, 1)),
                td(&fixed(db.mb_per_s, 0)),
            ]
        })
        .collect();
    Some(table(
        "init-table",
        &[],
        &["database", "action", "size", "written", "seconds", "MB/s"],
        rows,
    ))
}

/// The checksum statistics of a verification.
pub(super) fn tables_checksum(d: &StorageDoc) -> Option<Table> {
    let v = d.result.verify.as_ref()?;
    let rows: Vec<Row> = v
        .databases
        .iter()
        .map(|db| {
            vec![
                td_t(&db.name),
                td(&db.pages_seen.to_string()),
                td_judged(
                    &db.bad_checksum_pages.to_string(),
                    db.bad_checksum_pages > 0,
                ),
                td_judged(
                    &db.wrong_page_number_pages.to_string(),
                    db.wrong_page_number_pages > 0,
                ),
                td_judged(
                    &db.newer_than_log_pages.to_string(),
                    db.newer_than_log_pages > 0,
                ),
                td(&db.log_files.to_string()),
                td(&db.log_blocks_checked.to_string()),
                td_judged(&db.bad_log_blocks.to_string(), db.bad_log_blocks > 0),
                td(&fixed(db.mb / db.seconds.max(1e-9), 0)),
                td(&fixed(db.seconds, 1)),
            ]
        })
        .collect();
    Some(table(
        "checksum-table",
        &[],
        &[
            "database",
            "pages seen",
            "bad checksum",
            "wrong page number",
            "newer than log",
            "log files",
            "log blocks",
            "bad log blocks",
            "MB/s",
            "seconds",
        ],
        rows,
    ))
}

/// The warm-up's cache against its lower bound, for the Measured Window row
/// (empty for results whose warm-up was a fixed time).
fn prerequisites_note(p: Option<&mailbench_results::storage::run::Prerequisites>) -> String {
    let Some(p) = p else {
        return String::new();
    };
    let mut s = format!(
        "; attaining prerequisites: database cache {} of its {} lower bound ({} maximum), {}",
        bytes(p.cache_reached_bytes as f64),
        bytes(p.cache_lower_bound_bytes as f64),
        bytes(p.cache_max_bytes as f64),
        if p.attained {
            "reached"
        } else {
            "NOT reached within the warm-up limit"
        }
    );
    if let Some(w) = &p.warning {
        s.push_str(". WARNING: ");
        s.push_str(w);
    }
    s
}
