//! report.html of a mail sweep (`kind` "mail-sweep"): the scaling table and
//! a chart of the response time and the CPU against the users, with the
//! response-time limit and the supported users marked. Read from the typed
//! result.

use crate::fmt::{fixed, num};
use crate::html::{
    figure, identity, page, table, td, td_judged, td_t, test_log, tile, verdict_banner,
};
use crate::load::OtherDoc;
use crate::svg::{self, HLine, Line, LineChart, RED, esc};
use mailbench_results::mail::sweep::{MailSweepResult, SweepLevel};
use std::fmt::Write;

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.filter(|x| x.is_finite())
        .map(f)
        .unwrap_or_else(|| "–".into())
}

fn rows(levels: &[SweepLevel], limit: f64) -> Vec<Vec<String>> {
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
fn chart(r: &MailSweepResult) -> String {
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
    let mut b = figure(
        svg::line_chart(&c),
        "The weighted 95th (solid) and 50th (dashed) percentile over each level's steady window; the red line is the limit, the green one the supported users.",
    );
    b.push_str(&figure(
        svg::line_chart(&cpu),
        "CPU busy over each level's steady window: the server host's (from --server-metrics or the local target) and the load generator's.",
    ));
    b
}

/// The page of a mail-sweep result; None when the result does not read as one.
pub fn sweep_page(d: &OtherDoc) -> Option<String> {
    let r: MailSweepResult = serde_json::from_value(d.raw.clone()).ok()?;
    let mut b = String::new();
    let _ = write!(b, "<h1>mailbench mail sweep</h1>");
    b.push_str(&verdict_banner(&r.verdict, "mail sweep"));
    b.push_str(&identity(&[
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
    ]));
    b.push_str(r#"<div class="tiles">"#);
    b.push_str(&tile(
        "fig-supported",
        "Supported users",
        &r.supported_users
            .map(|n| n.to_string())
            .unwrap_or_else(|| "none".into()),
        &format!(
            "{} rate-equivalent",
            num(r.supported_users.unwrap_or(0) as f64 * r.compression)
        ),
        Some(r.supported_users.is_none()),
    ));
    if let Some(f) = &r.failed_above {
        b.push_str(&tile(
            "fig-failed-above",
            "Failed above",
            &format!("{} users", f.users),
            &f.criterion,
            Some(true),
        ));
    }
    b.push_str("</div>");
    b.push_str(r#"<h2 id="scaling">Scaling table</h2>"#);
    b.push_str(&table(
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
        &rows(&r.levels, r.config.max_score_ms),
    ));
    if let Some(f) = &r.failed_above {
        let _ = write!(
            b,
            r#"<p class="note">Above the supported users, {} users failed first on {}: {}</p>"#,
            f.users,
            esc(&f.criterion),
            esc(&f.reason)
        );
    }
    for w in &r.warnings {
        let _ = write!(b, r#"<p class="note">{}</p>"#, esc(w));
    }
    b.push_str(r#"<h2 id="charts">Charts</h2>"#);
    b.push_str(&chart(&r));
    b.push_str(&test_log(d.test_log.as_deref()));
    Some(page("mailbench mail sweep", &b, &d.raw))
}
