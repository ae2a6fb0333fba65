//! The storage result's page: heading, verdict, identity, tiles, then the
//! charts and tables.

use super::*;

pub fn storage_page(d: &StorageDoc) -> String {
    let r = &d.result;
    let s = series(d);
    let mut b = String::new();
    let test = format!("{:?}", r.spec.test_type).to_lowercase();
    let hostname = &r.run.host.hostname;
    let _ = write!(
        b,
        "<h1>mailbench storage {} test — {}</h1>",
        esc(&test),
        esc(hostname)
    );
    let what = match r.verdict.status {
        Status::Pass => "all pass criteria were met".to_string(),
        Status::Fail => format!("{} criteria not met", r.verdict.reasons.len()),
        Status::Interrupted => "the run was interrupted; figures are partial".into(),
        Status::Error => "the run could not complete".into(),
    };
    b.push_str(&verdict_banner(&r.verdict, &what));
    b.push_str(&identity(&[
        ("Host", hostname.clone()),
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
    ]));
    storage_tiles(d, &mut b);
    b.push_str(r#"<h2 id="charts">Charts</h2>"#);
    b.push_str(&storage_charts(d, &s));
    b.push_str(&storage_tables(d, &s));
    b.push_str(&test_log(d.test_log.as_deref()));
    let title = format!(
        "mailbench storage {test} — {} — {}",
        hostname,
        r.verdict.label()
    );
    page(&title, &b, &d.raw)
}

/// The headline tiles: IOPS, read and log write latency, transactions, errors.
fn storage_tiles(d: &StorageDoc, b: &mut String) {
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
    b.push_str(r#"<div class="tiles">"#);
    b.push_str(&tile(
        "fig-iops",
        "Transactional IOPS",
        &num(t.transactional_iops),
        &t.target_iops
            .map(|x| format!("target {}", num(x)))
            .unwrap_or_else(|| "no target set".into()),
        t.target_iops.map(|x| t.transactional_iops < x),
    ));
    b.push_str(&tile(
        "fig-db-read",
        "Database read latency",
        &format!("{} ms", ms(rd.avg)),
        &format!(
            "avg · p99 {} · max {} ms · limit {} ms",
            ms(rd.p99),
            ms(rd.max),
            short(th.db_read_avg_ms)
        ),
        (rd_ops > 0).then_some(rd.avg > th.db_read_avg_ms || rd.max > th.db_read_max_ms),
    ));
    b.push_str(&tile(
        "fig-log-write",
        "Log write latency",
        &format!("{} ms", ms(lw.avg)),
        &format!(
            "avg · p99 {} · max {} ms · limit {} ms",
            ms(lw.p99),
            ms(lw.max),
            short(th.log_write_avg_ms)
        ),
        (lw_ops > 0).then_some(lw.avg > th.log_write_avg_ms || lw.max > th.log_write_max_ms),
    ));
    b.push_str(&tile(
        "fig-tps",
        "Transactions per second",
        &num(t.transactions_per_s),
        &format!("response p99 {} ms", ms(t.transaction_latency_ms.p99)),
        None,
    ));
    let errs = t.io_errors.max(r.errors.len() as u64)
        + r.verify.as_ref().map(|v| v.bad_total).unwrap_or(0);
    b.push_str(&tile(
        "fig-errors",
        "Errors",
        &errs.to_string(),
        "I/O errors, data errors and bad pages",
        Some(errs > 0),
    ));
    b.push_str("</div>");
}
