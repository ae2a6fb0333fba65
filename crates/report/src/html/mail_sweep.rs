//! report.html of a mail sweep (`kind` "mail-sweep"): the scaling table and
//! a chart of the response time and the CPU against the users, with the
//! response-time limit and the supported users marked. Read from the typed
//! result.

use crate::fmt::{fixed, num};
use crate::html::tpl::{
    Figure, Ident, Row, Table, Tile, VerdictView, figure, identity, page_data, render, table, td,
    td_judged, td_t, tile, verdict_view,
};
use crate::load::OtherDoc;
use crate::svg::{self, HLine, Line, LineChart, RED};
use mailbench_results::mail::sweep::{FailedLevel, MailSweepResult, SweepLevel};
use serde::Serialize;

/// The view model of templates/mail_sweep.html.
#[derive(Serialize)]
struct SweepPage<'a> {
    title: &'static str,
    data: String,
    verdict: VerdictView,
    identity: Vec<Ident>,
    tiles: Vec<Tile>,
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

fn rows(levels: &[SweepLevel], limit: f64) -> Vec<Row> {
    let mut sorted: Vec<&SweepLevel> = levels.iter().collect();
    sorted.sort_by_key(|l| l.users);
    sorted
        .iter()
        .map(|l| {
            let result = match (&l.failed_criterion, l.passed()) {
                (_, true) => "PASS".to_string(),
                (Some(c), false) => format!("FAIL ({c})"),
                (None, false) => format!("{:?}", l.status).to_uppercase(),
            };
            vec![
                td(&l.users.to_string()),
                td(&num(l.rate_equivalent_users)),
                td_judged(&fixed(l.response_time_ms, 1), l.response_time_ms > limit),
                td(&fixed(l.response_time_p50_ms, 1)),
                td(&opt(l.server_cpu_busy_pct, |x| fixed(x, 1))),
                td(&fixed(l.generator_cpu_busy_pct, 1)),
                td(&fixed(l.submitted_per_user_per_day, 1)),
                td(&fixed(l.delivered_per_user_per_day, 1)),
                td(&opt(l.queue_average, |x| fixed(x, 1))),
                td(&opt(l.queue_max, |x| fixed(x, 0))),
                td(&opt(l.store_reads_per_s, |x| fixed(x, 1))),
                td(&opt(l.store_writes_per_s, |x| fixed(x, 1))),
                td(&opt(l.store_latency_ms, |x| fixed(x, 2))),
                td(&opt(l.iops_per_mailbox, |x| fixed(x, 3))),
                td_judged(&l.errors.to_string(), l.errors > 0),
                td_judged(&result, !l.passed()),
                td_t(&l.result_dir),
            ]
        })
        .collect()
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
    let top = (sorted.iter())
        .map(|l| l.response_time_ms)
        .fold(limit, f64::max);
    if let Some(n) = r.supported_users {
        c.lines.push(
            Line::new(
                &format!("supported users: {n}"),
                "#1a7f37",
                vec![(n as f64, 0.0), (n as f64, top)],
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
    cpu.lines.push(
        Line::new(
            "load generator CPU",
            "#8250df",
            pts(&|l| Some(l.generator_cpu_busy_pct)),
        )
        .dashed(),
    );
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
            "CPU busy over each level's steady window: the server host's (from --server-metrics or the local target) and the load generator's.",
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
            "rate-equivalent",
            "resp. p95 ms",
            "resp. p50 ms",
            "server CPU %",
            "generator CPU %",
            "submitted /user/day",
            "delivered /user/day",
            "queue avg",
            "queue max",
            "store reads/s",
            "store writes/s",
            "store latency ms",
            "IOPS /mailbox",
            "errors",
            "result",
            "folder",
        ],
        rows(&r.levels, r.config.max_score_ms),
    )
}
