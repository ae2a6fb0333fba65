//! The storage result's page: heading, verdict, identity, tiles, then the
//! charts and tables.

use super::*;

/// The view model of templates/storage.html.
#[derive(Serialize)]
struct StoragePage {
    title: String,
    data: String,
    test: String,
    host: String,
    verdict: VerdictView,
    identity: Vec<Ident>,
    tiles: Vec<Tile>,
    charts: Vec<Figure>,
    no_intervals: bool,
    bad_interval_lines: usize,
    criteria: Table,
    test_summary: Kv,
    sizing: Kv,
    system_parameters: Kv,
    tested: Option<Kv>,
    databases: Table,
    tuning: Option<Table>,
    transactional_io: Table,
    transactional_latency: Table,
    background: Vec<Section>,
    maintenance: bool,
    total_io: Table,
    host_performance: Table,
    memory_installed: String,
    mailbench_cpu_s: String,
    disks: Option<Table>,
    hosts: Option<Table>,
    init: Option<Table>,
    checksum: Option<Table>,
    errors: Vec<String>,
    test_log: Option<String>,
}

/// A section of one table under its own heading.
#[derive(Serialize)]
pub(super) struct Section {
    pub id: &'static str,
    pub title: &'static str,
    pub table: Table,
}

pub fn storage_page(d: &StorageDoc) -> Result<String, minijinja::Error> {
    let r = &d.result;
    let s = series(d);
    let test = format!("{:?}", r.spec.test_type).to_lowercase();
    let hostname = &r.run.host.hostname;
    let [transactional_io, transactional_latency] = tables_transactional_io(d);
    let page = StoragePage {
        title: format!(
            "mailbench storage {test} — {} — {}",
            hostname,
            r.verdict.label()
        ),
        data: page_data(&d.raw),
        verdict: verdict_view(&r.verdict, &crate::html::mail::what(&r.verdict)),
        identity: identity(identity_items(d, &test)),
        test,
        host: hostname.clone(),
        tiles: storage_tiles(d),
        charts: storage_charts(d, &s),
        no_intervals: d.intervals.is_empty(),
        bad_interval_lines: d.bad_interval_lines,
        criteria: tables_criteria(d),
        test_summary: tables_test_summary(d),
        sizing: tables_sizing(d),
        system_parameters: tables_system_parameters(d),
        tested: super::tpl::tested_configuration(&r.run),
        databases: tables_database_configuration(d),
        tuning: tables_tuning(d),
        transactional_io,
        transactional_latency,
        background: tables_background_io(d),
        maintenance: r.spec.profile.maintenance,
        total_io: tables_total_io(d),
        host_performance: tables_host_performance(&s),
        memory_installed: bytes(r.host.memory_total_bytes as f64),
        mailbench_cpu_s: fixed(r.host.mailbench_cpu_s, 1),
        disks: tables_disks(d),
        hosts: tables_per_host(d),
        init: tables_init(d),
        checksum: tables_checksum(d),
        errors: r.errors.iter().take(200).cloned().collect(),
        test_log: d.test_log.clone(),
    };
    tpl::render("storage.html", &page)
}

fn identity_items(d: &StorageDoc, test: &str) -> Vec<(&'static str, String)> {
    let r = &d.result;
    vec![
        ("Host", r.run.host.hostname.clone()),
        ("OS", r.run.host.os.clone()),
        ("Kernel", r.run.host.kernel.clone()),
        ("mailbench", r.run.tool_version.clone()),
        ("Profile", format!("{} ({test})", r.spec.profile.name)),
        ("Started", r.run.started.clone()),
        ("Ended", r.run.ended.clone()),
        ("Duration", duration(r.run.duration_s)),
        (
            "Measured",
            format!(
                "{} after {} warm-up",
                duration(r.window.measured_s),
                duration(r.window.warmup_s)
            ),
        ),
        ("Command", r.run.command_line.join(" ")),
    ]
}

/// The headline tiles: IOPS, read and log write latency, transactions, errors.
fn storage_tiles(d: &StorageDoc) -> Vec<Tile> {
    let r = &d.result;
    let t = &r.total;
    let th = &r.spec.thresholds;
    let rd = t
        .classes
        .get("db_read")
        .map(|c| c.latency_ms)
        .unwrap_or_default();
    let lw = t
        .classes
        .get("log_write")
        .map(|c| c.latency_ms)
        .unwrap_or_default();
    let rd_ops = t.classes.get("db_read").map(|c| c.ops).unwrap_or(0);
    let lw_ops = t.classes.get("log_write").map(|c| c.ops).unwrap_or(0);
    let mut b = Vec::new();
    b.push(tile(
        "fig-iops",
        "Transactional IOPS",
        num(t.transactional_iops),
        t.target_iops
            .map(|x| format!("target {}", num(x)))
            .unwrap_or_else(|| "no target set".into()),
        t.target_iops.map(|x| t.transactional_iops < x),
    ));
    b.push(tile(
        "fig-db-read",
        "Database read latency",
        format!("{} ms", ms(rd.avg)),
        format!(
            "avg · p99 {} · max {} ms · limit {} ms",
            ms(rd.p99),
            ms(rd.max),
            short(th.db_read_avg_ms)
        ),
        (rd_ops > 0).then_some(rd.avg > th.db_read_avg_ms || rd.max > th.db_read_max_ms),
    ));
    b.push(tile(
        "fig-log-write",
        "Log write latency",
        format!("{} ms", ms(lw.avg)),
        format!(
            "avg · p99 {} · max {} ms · limit {} ms",
            ms(lw.p99),
            ms(lw.max),
            short(th.log_write_avg_ms)
        ),
        (lw_ops > 0).then_some(lw.avg > th.log_write_avg_ms || lw.max > th.log_write_max_ms),
    ));
    b.push(tile(
        "fig-tps",
        "Transactions per second",
        num(t.transactions_per_s),
        format!("response p99 {} ms", ms(t.transaction_latency_ms.p99)),
        None,
    ));
    let errs = t.io_errors.max(r.errors.len() as u64)
        + r.verify.as_ref().map(|v| v.bad_total).unwrap_or(0);
    b.push(tile(
        "fig-errors",
        "Errors",
        errs.to_string(),
        "I/O errors, data errors and bad pages",
        Some(errs > 0),
    ));
    b
}
