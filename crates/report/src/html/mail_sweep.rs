//! report.html of a mail sweep (`kind` "mail-sweep"): the messaging
//! benchmark's full disclosure — the executive summary (the supported users
//! and the figures at that level), the server's configuration (its
//! exporter's facts and the `[disclosure]` section), the client's — then
//! the scaling table (each level linking to its own report) and charts of
//! the response time and the CPU against the users, with the response-time
//! limit and the supported users marked. Read from the typed result.

use crate::fmt::{fixed, num};
use crate::html::tpl::{
    Figure, Ident, Kv, Row, Table, Tile, VerdictView, figure, identity, page_data, render, table,
    td, td_judged, td_link, td_t, tile, verdict_view,
};
use crate::load::OtherDoc;
use crate::svg::{self, HLine, Line, LineChart, RED, YScale};
use mailbench_results::mail::sweep::{FailedLevel, MailSweepResult, SweepLevel};
use serde::Serialize;
use std::borrow::Cow;

/// The view model of templates/mail_sweep.html.
#[derive(Serialize)]
struct SweepPage<'a> {
    title: &'static str,
    data: String,
    verdict: VerdictView,
    identity: Vec<Ident>,
    tiles: Vec<Tile>,
    summary: Kv,
    server: Kv,
    client: Kv,
    levels: Table,
    failed_above: Option<&'a FailedLevel>,
    warnings: &'a [String],
    charts: Vec<Figure>,
    test_log: Option<&'a str>,
}

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.filter(|x| x.is_finite())
        .map(f)
        .unwrap_or_else(|| "–".into())
}

/// Two figures in one cell: `a / b`.
fn pair(a: String, b: String) -> String {
    format!("{a} / {b}")
}

/// The link to a level's own report: its folder beside the sweep's page
/// (a plain folder name only; anything else is shown, not linked).
fn level_link(dir: &str) -> Option<String> {
    let plain =
        !dir.is_empty() && !dir.starts_with('.') && !dir.contains(['/', '\\', '?', '#', ':']);
    plain.then(|| format!("{dir}/report.html"))
}

fn rows(levels: &[SweepLevel], limit: f64) -> Vec<Row> {
    let mut sorted: Vec<&SweepLevel> = levels.iter().collect();
    sorted.sort_by_key(|l| l.users);
    sorted.iter().map(|l| row(l, limit)).collect()
}

/// One level's row of the scaling table.
fn row(l: &SweepLevel, limit: f64) -> Row {
    let result = match (&l.failed_criterion, l.passed()) {
        (_, true) => "PASS".to_string(),
        (Some(c), false) => format!("FAIL ({c})"),
        (None, false) => format!("{:?}", l.status).to_uppercase(),
    };
    let store = match (l.store_reads_per_s, l.store_writes_per_s) {
        (None, None) => "–".to_string(),
        (r, w) => pair(opt(r, |x| fixed(x, 1)), opt(w, |x| fixed(x, 1))),
    };
    let queue = match (l.queue_average, l.queue_max) {
        (None, None) => "–".to_string(),
        (a, m) => pair(opt(a, |x| fixed(x, 1)), opt(m, |x| fixed(x, 0))),
    };
    let link = match level_link(&l.result_dir) {
        Some(href) => td_link("report", &href),
        None => td_t(&l.result_dir),
    };
    vec![
        td(&l.users.to_string()),
        td_judged(&fixed(l.response_time_ms, 1), l.response_time_ms > limit),
        td(&fixed(l.response_time_p50_ms, 1)),
        td(&opt(l.server_cpu_busy_pct, |x| fixed(x, 1))),
        td(&opt(l.generator_cpu_pct, |x| fixed(x, 1))),
        td(&pair(
            fixed(l.submitted_per_user_per_day, 1),
            fixed(l.delivered_per_user_per_day, 1),
        )),
        td(&queue),
        td(&store),
        td(&opt(l.store_latency_ms, |x| fixed(x, 2))),
        td(&opt(l.iops_per_mailbox, |x| fixed(x, 3))),
        td_judged(&l.errors.to_string(), l.errors > 0),
        td_judged(&result, !l.passed()),
        link,
    ]
}

/// The chart: response time (p95, p50) and CPU against the users.
fn charts(r: &MailSweepResult) -> Vec<Figure> {
    let mut sorted: Vec<&SweepLevel> = r.levels.iter().collect();
    sorted.sort_by_key(|l| l.users);
    let pts = |f: &dyn Fn(&SweepLevel) -> Option<f64>| -> Vec<(f64, f64)> {
        sorted
            .iter()
            .filter_map(|l| Some((l.users as f64, f(l)?)))
            .collect()
    };
    let limit = r.config.max_score_ms;
    let mut c = LineChart::new(
        "chart-sweep-response",
        "Response time against users",
        "users",
        "response time (ms)",
    );
    // Logarithmic unless the limit is near the measured times: the curve
    // stays readable beside the 1,000 ms limit.
    c.y_scale = YScale::Auto;
    c.lines.push(Line::new(
        "response time p95",
        "#0969da",
        pts(&|l| Some(l.response_time_ms)),
    ));
    c.lines.push(
        Line::new(
            "response time p50",
            "#0969da",
            pts(&|l| Some(l.response_time_p50_ms)),
        )
        .dashed(),
    );
    c.hlines.push(HLine {
        label: format!("{} ms limit", num(limit)),
        value: limit,
        color: RED.into(),
    });
    // The marker spans the measured times only, so it does not pull a
    // linear axis up to the limit (which is drawn as its own line).
    let top = (sorted.iter())
        .map(|l| l.response_time_ms)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    // The marker's foot: the smallest time drawn (a log axis has no 0).
    let floor = (sorted.iter())
        .flat_map(|l| [l.response_time_p50_ms, l.response_time_ms])
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let floor = if floor.is_finite() { floor } else { 1.0 };
    if let Some(n) = r.supported_users {
        c.lines.push(
            Line::new(
                &format!("supported users: {n}"),
                "#1a7f37",
                vec![(n as f64, floor), (n as f64, top)],
            )
            .dashed(),
        );
    }
    let mut cpu = LineChart::new(
        "chart-sweep-cpu",
        "CPU against users",
        "users",
        "CPU busy (%)",
    );
    cpu.y_max = Some(100.0);
    cpu.lines.push(Line::new(
        "server CPU",
        "#e36209",
        pts(&|l| l.server_cpu_busy_pct),
    ));
    cpu.lines
        .push(Line::new("mailbench CPU", "#8250df", pts(&|l| l.generator_cpu_pct)).dashed());
    if let Some(n) = r.supported_users {
        cpu.lines.push(
            Line::new(
                &format!("supported users: {n}"),
                "#1a7f37",
                vec![(n as f64, 0.0), (n as f64, 100.0)],
            )
            .dashed(),
        );
    }
    vec![
        figure(
            svg::line_chart(&c),
            "The weighted 95th (solid) and 50th (dashed) percentile over each level's steady window; the red line is the limit, the green one the supported users.",
        ),
        figure(
            svg::line_chart(&cpu),
            "The server host's CPU busy over each level's steady window (from --server-metrics or the local target) and mailbench's own CPU over the level's run, as a share of the load generators' CPUs.",
        ),
    ]
}

/// The page of a mail-sweep result; None when the result does not read as one.
pub fn sweep_page(d: &OtherDoc) -> Option<Result<String, minijinja::Error>> {
    let r: MailSweepResult = serde_json::from_value(d.raw.clone()).ok()?;
    let page = SweepPage {
        title: "mailbench mail sweep",
        data: page_data(&d.raw),
        verdict: verdict_view(&r.verdict, "mail sweep"),
        identity: identity(identity_items(&r)),
        tiles: tiles(&r),
        summary: executive_summary(&r),
        server: server_configuration(&r),
        client: client_configuration(&r),
        levels: levels_table(&r),
        failed_above: r.failed_above.as_ref(),
        warnings: &r.warnings,
        charts: charts(&r),
        test_log: d.test_log.as_deref(),
    };
    Some(render("mail_sweep.html", &page))
}

fn identity_items(r: &MailSweepResult) -> Vec<(&'static str, String)> {
    let mut items = vec![
        ("Started", r.run.started.clone()),
        ("Target", format!("{} {}", r.target.kind, r.target.imap)),
        ("Profile", r.profile.name.clone()),
        ("Protocol", r.config.protocol_text()),
        (
            "Levels",
            if r.plan.find_max {
                format!(
                    "--find-max {} (resolution {} users)",
                    r.plan.users, r.plan.resolution
                )
            } else {
                r.plan.users.clone()
            },
        ),
        (
            "Day",
            format!(
                "{} s real per level (×{} compression), steady window {}",
                num(r.config.day_length.as_secs_f64()),
                num(r.compression),
                r.config.steady
            ),
        ),
    ];
    // A sweep over MPI ranks: its load generators, as summary.txt says.
    if let Some(g) = &r.generators {
        items.push(("Generators", crate::summary::mail_sweep::generators(g)));
    }
    items
}

fn tiles(r: &MailSweepResult) -> Vec<Tile> {
    let mut tiles = vec![tile(
        "fig-supported",
        "Supported users",
        r.supported_users
            .map(|n| n.to_string())
            .unwrap_or_else(|| "none".into()),
        format!(
            "{} rate-equivalent",
            num(r.supported_users.unwrap_or(0) as f64 * r.compression)
        ),
        Some(r.supported_users.is_none()),
    )];
    if let Some(f) = &r.failed_above {
        tiles.push(tile(
            "fig-failed-above",
            "Failed above",
            format!("{} users", f.users),
            f.criterion.clone(),
            Some(true),
        ));
    }
    tiles
}

fn levels_table(r: &MailSweepResult) -> Table {
    table(
        "sweep-table",
        &[],
        &[
            "users",
            "response p95 ms",
            "response p50 ms",
            "server CPU %",
            "mailbench CPU %",
            "submitted / delivered per user per day",
            "queue avg / max",
            "store reads / writes per s",
            "store latency ms",
            "IOPS per mailbox",
            "errors",
            "result",
            "level",
        ],
        rows(&r.levels, r.config.max_score_ms),
    )
}

fn kv_rows(id: &'static str, rows: Vec<(String, String)>) -> Kv {
    Kv {
        id,
        rows: rows.into_iter().map(|(k, v)| (Cow::Owned(k), v)).collect(),
    }
}

/// The level the score stands on.
fn scored_level(r: &MailSweepResult) -> Option<&SweepLevel> {
    let n = r.supported_users?;
    r.levels.iter().find(|l| l.users == n && l.passed())
}

/// The executive summary: the score and the figures measured at it, over
/// its steady window.
fn executive_summary(r: &MailSweepResult) -> Kv {
    let Some(l) = scored_level(r) else {
        let why = match &r.failed_above {
            Some(f) => format!("none: {} users failed first ({})", f.users, f.reason),
            None => "none: no level passed every criterion".to_string(),
        };
        return kv_rows("executive-summary", vec![("Supported users".into(), why)]);
    };
    let at = format!("at {} users", l.users);
    let steady = |v: Option<u64>| match (v, l.steady_s) {
        (Some(n), Some(s)) => format!("{n} in {} s", fixed(s, 0)),
        (Some(n), None) => n.to_string(),
        (None, _) => "unknown (no steady window in the level's result)".into(),
    };
    let queue = l.queue_average.map(|x| {
        let max = opt(l.queue_max, |m| fixed(m, 0));
        format!("{} messages (max {max})", fixed(x, 1))
    });
    let rows = vec![
        (
            "Supported users".to_string(),
            format!(
                "{} ({} rate-equivalent at ×{} compression)",
                l.users,
                num(l.rate_equivalent_users),
                num(r.compression)
            ),
        ),
        (
            format!("Response time (weighted p95) {at}"),
            format!(
                "{} ms (limit {} ms)",
                fixed(l.response_time_ms, 1),
                num(r.config.max_score_ms)
            ),
        ),
        (
            format!("Response time (weighted p50) {at}"),
            format!("{} ms", fixed(l.response_time_p50_ms, 1)),
        ),
        (
            format!("Server CPU {at}"),
            (l.server_cpu_busy_pct.map(|x| format!("{} %", fixed(x, 1))))
                .unwrap_or_else(|| "unknown (no server metrics: give --server-metrics)".into()),
        ),
        (
            format!("Average queue {at}"),
            queue.unwrap_or_else(|| "unknown (the server's queue was not sampled)".into()),
        ),
        (
            "Messages submitted over the steady window".to_string(),
            steady(l.steady_submitted),
        ),
        (
            "Messages delivered over the steady window".to_string(),
            steady(l.steady_delivered),
        ),
        ("Errors at that level".to_string(), l.errors.to_string()),
    ];
    kv_rows("executive-summary", rows)
}

/// The server: what the user states (`[disclosure]`) and what its
/// exporters report.
fn server_configuration(r: &MailSweepResult) -> Kv {
    let t = &r.target;
    let mut rows = vec![(
        "Server under test".to_string(),
        format!("{}: {} (submission {})", t.kind, t.imap, t.submission),
    )];
    match &r.disclosure {
        Some(d) => {
            rows.extend(d.declared.rows());
            for s in &d.servers {
                rows.extend(s.rows());
            }
        }
        None => rows.push((
            "Disclosure".into(),
            "unknown (a result written before sweeps recorded their disclosure)".into(),
        )),
    }
    kv_rows("server-configuration", rows)
}

/// The client: the load generators and what driving the users cost
/// mailbench.
fn client_configuration(r: &MailSweepResult) -> Kv {
    let h = &r.run.host;
    let (count, hosts) = match &r.generators {
        Some(g) => (g.count, g.hosts.join(", ")),
        None => (1, h.hostname.clone()),
    };
    let mut rows = vec![
        (
            "mailbench version".to_string(),
            format!("{} {}", r.run.tool, r.run.tool_version),
        ),
        ("Load generators (ranks)".to_string(), count.to_string()),
        ("Generator hosts".to_string(), hosts),
        (
            "Generator host (rank 0)".to_string(),
            format!(
                "{} CPUs, {} memory, {}, kernel {}",
                h.cpus,
                crate::fmt::bytes(h.memory_bytes as f64),
                h.os,
                h.kernel
            ),
        ),
        ("Profile".to_string(), r.profile.name.clone()),
    ];
    if let Some(l) = scored_level(r) {
        rows.push((
            format!("Users per generator at {} users", l.users),
            num(l.users as f64 / count.max(1) as f64),
        ));
        let cpu = match (l.generator_cpu_s, l.generator_cpu_pct) {
            (Some(s), Some(p)) => format!(
                "{} s of CPU, {} % of the generators' CPUs",
                fixed(s, 2),
                fixed(p, 1)
            ),
            (Some(s), None) => format!("{} s of CPU", fixed(s, 2)),
            _ => "unknown (a result written before sweeps recorded it)".into(),
        };
        rows.push((format!("mailbench CPU at {} users", l.users), cpu));
    }
    kv_rows("client-configuration", rows)
}
