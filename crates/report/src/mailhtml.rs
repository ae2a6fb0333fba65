//! The mail-load section of report.html (`kind` "mail-run"). Read from the
//! JSON generically so that additions to the mail result never break it.

use crate::fmt::{duration, fixed, ms, num};
use crate::html::{
    curve_ms, figure, identity, kv, page, table, td, td_judged, td_t, test_log, tile, time_axis,
    verdict_banner,
};
use crate::load::MailDoc;
use crate::mailmerge::MailMerged;
use crate::svg::{self, HBarChart, HLine, Line, LineChart, RED, XAxis, YScale, esc};
use mailbench_metrics::LatencyHist;
use mailbench_results::{Status, Verdict};
use serde_json::Value;
use std::fmt::Write;

/// `v` at a dotted path.
pub fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for k in path.split('.') {
        cur = cur.get(k)?;
    }
    Some(cur)
}

pub fn fnum(v: &Value, path: &str) -> Option<f64> {
    at(v, path).and_then(Value::as_f64)
}

pub fn text(v: &Value, path: &str) -> String {
    match at(v, path) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(x) => x.to_string(),
    }
}

fn hist(v: Option<&Value>) -> Option<LatencyHist> {
    v.and_then(Value::as_str)
        .and_then(|s| LatencyHist::from_base64(s).ok())
        .filter(|h| !h.is_empty())
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "–".into())
}

#[allow(clippy::too_many_lines)] // longer than 100 lines: split when next changed
pub fn mail_page(d: &MailDoc) -> String {
    let r = &d.raw;
    let verdict: Verdict = r
        .get("verdict")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or(Verdict {
            status: Status::Error,
            reasons: vec!["The result has no readable verdict.".into()],
        });
    let host = text(r, "run.host.hostname");
    let profile = text(r, "profile.name");
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>mailbench mail load — {} users, profile {} — {}</h1>",
        esc(&text(r, "users")),
        esc(&profile),
        esc(&host)
    );
    let what = match verdict.status {
        Status::Pass => "all pass criteria were met".to_string(),
        Status::Fail => format!("{} criteria not met", verdict.reasons.len()),
        Status::Interrupted => "the run was interrupted; figures are partial".into(),
        Status::Error => "the run could not complete".into(),
    };
    b.push_str(&verdict_banner(&verdict, &what));
    let cmd = at(r, "run.command_line")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().unwrap_or_default().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    b.push_str(&identity(&[
        ("Host", host.clone()),
        ("OS", text(r, "run.host.os")),
        ("Kernel", text(r, "run.host.kernel")),
        ("mailbench", text(r, "run.tool_version")),
        ("Profile", profile.clone()),
        ("Started", text(r, "run.started")),
        ("Ended", text(r, "run.ended")),
        ("Duration", opt(fnum(r, "run.duration_s"), duration)),
        (
            "Day",
            format!(
                "{} real for a {} simulated day (×{})",
                opt(fnum(r, "window.day_s"), duration),
                opt(fnum(r, "window.simulated_day_s"), duration),
                opt(fnum(r, "window.compression"), |x| fixed(x, 1))
            ),
        ),
        ("Command", cmd.clone()),
    ]));

    // The steady window's response time (judged) when the result has one.
    let score = fnum(r, "steady.response_time_ms")
        .filter(|_| fnum(r, "steady.intervals").unwrap_or(0.0) > 0.0)
        .or_else(|| fnum(r, "response_time.weighted_p95_ms"))
        .unwrap_or(0.0);
    let limit = fnum(r, "response_time.limit_ms").unwrap_or(1000.0);
    let compression = fnum(r, "window.compression").unwrap_or(1.0).max(1e-9);
    let within_pct = fnum(r, "delivery_latency.within_pct");
    let within_s = fnum(r, "delivery_latency.within_s").unwrap_or(60.0);
    let errors = fnum(r, "errors.total").unwrap_or(0.0);
    b.push_str(r#"<div class="tiles">"#);
    b.push_str(&tile(
        "fig-score",
        "Response time (weighted 95th percentile)",
        &format!("{} ms", num(score)),
        &format!("limit {} ms", num(limit)),
        Some(score > limit),
    ));
    b.push_str(&tile(
        "fig-delivered",
        "Messages delivered / simulated hour",
        &opt(fnum(r, "mail_flow.per_simulated_hour.delivered"), num),
        &format!(
            "submitted {} / simulated hour",
            opt(fnum(r, "mail_flow.per_simulated_hour.submitted"), num)
        ),
        None,
    ));
    b.push_str(&tile(
        "fig-delivery",
        "Delivered within time",
        &opt(within_pct, |x| {
            format!("{} %", mailbench_results::mail::judge::pct_down(x))
        }),
        &format!(
            "within {}; p95 {} ms",
            duration(within_s),
            opt(fnum(r, "delivery_latency.summary.p95_ms"), ms)
        ),
        within_pct.map(|x| x < 95.0),
    ));
    b.push_str(&tile(
        "fig-errors",
        "Errors",
        &num(errors),
        &format!(
            "{} of operations",
            opt(fnum(r, "errors.rate_pct"), |x| format!("{} %", fixed(x, 2)))
        ),
        Some(errors > 0.0),
    ));
    b.push_str("</div>");

    // Charts.
    b.push_str(r#"<h2 id="charts">Charts</h2><div class="charts">"#);
    let tasks: Vec<(String, &Value)> = r
        .get("tasks")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v)).collect())
        .unwrap_or_default();
    let rows: Vec<(String, f64)> = tasks
        .iter()
        .filter(|(_, v)| fnum(v, "count").unwrap_or(0.0) > 0.0)
        .map(|(k, v)| (k.clone(), fnum(v, "p95_ms").unwrap_or(0.0)))
        .collect();
    b.push_str(&figure(
        svg::hbar_chart(&HBarChart {
            id: "chart-task-p95".into(),
            title: "95th percentile time per task".into(),
            x_label: "milliseconds (from intended start)".into(),
            rows,
            color: "#1f6feb".into(),
            over_color: RED.into(),
            limit: Some((limit, format!("{} ms", crate::fmt::short(limit)))),
        }),
        "Each task's 95th percentile; bars over the line are drawn red. The verdict uses the weighted average of these.",
    ));
    let max_t = d
        .intervals
        .iter()
        .filter_map(|i| fnum(i, "t_s"))
        .fold(0.0, f64::max);
    let ax = time_axis(max_t);
    let per_hour = |key: &str| -> Vec<(f64, f64)> {
        d.intervals
            .iter()
            .filter_map(|i| {
                let t = fnum(i, "t_s")?;
                let secs = fnum(i, "interval_s")?.max(1e-3);
                let n = fnum(i, key)?;
                Some((t / ax.div, n * 3600.0 / secs / compression))
            })
            .collect()
    };
    let mut c = LineChart::new(
        "chart-mail-flow",
        "Messages per simulated hour over time",
        ax.label,
        "messages per simulated hour",
    );
    c.lines
        .push(Line::new("submitted", "#e36209", per_hour("submitted")));
    c.lines
        .push(Line::new("delivered", "#1a7f37", per_hour("delivered")));
    // The profile's deliveries per user per day, over all users, per simulated hour.
    let expected = fnum(r, "mail_flow.profile_expects.delivered_per_day")
        .zip(fnum(r, "users"))
        .zip(fnum(r, "window.simulated_day_s").filter(|d| *d > 0.0))
        .map(|((per_day, users), day_s)| per_day * users / (day_s / 3600.0));
    if let Some(exp) = expected {
        c.hlines.push(HLine {
            label: format!("profile expects {}", num(exp)),
            value: exp,
            color: "#57606a".into(),
        });
    }
    b.push_str(&figure(
        svg::line_chart(&c),
        &format!(
            "Per sampling interval, scaled to the simulated day (compression ×{}).",
            fixed(compression, 1)
        ),
    ));
    let mut c = LineChart::new(
        "chart-delivery",
        "End-to-end delivery latency distribution",
        "percentile",
        "latency (ms)",
    );
    c.x_axis = XAxis::Nines;
    c.y_scale = YScale::Auto;
    if let Some(h) = hist(at(r, "delivery_latency.hist")) {
        c.lines.push(Line::new("delivery", "#8250df", curve_ms(&h)));
    }
    c.hlines.push(HLine {
        label: format!("{} s", crate::fmt::short(within_s)),
        value: within_s * 1000.0,
        color: RED.into(),
    });
    b.push_str(&figure(
        svg::line_chart(&c),
        "From submission to arrival in each recipient's mailbox (HDR histogram).",
    ));
    let qs: Vec<(f64, f64)> = at(r, "queue.samples")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|q| Some((fnum(q, "t_s")? / ax.div, fnum(q, "length")?)))
                .collect()
        })
        .unwrap_or_default();
    if !qs.is_empty() {
        let mut c = LineChart::new("chart-queue", "Server queue length", ax.label, "messages");
        c.lines.push(Line::new("queued", "#57606a", qs));
        b.push_str(&figure(
            svg::line_chart(&c),
            "postqueue, per sampling interval.",
        ));
    }
    let series = |key: &str| -> Vec<(f64, f64)> {
        d.intervals
            .iter()
            .filter_map(|i| Some((fnum(i, "t_s")? / ax.div, fnum(i, key)?)))
            .collect()
    };
    let mut c = LineChart::new(
        "chart-host",
        "Host CPU and memory over time",
        ax.label,
        "percent",
    );
    c.y_max = Some(100.0);
    c.lines
        .push(Line::new("CPU busy %", "#cf222e", series("cpu_busy_pct")));
    c.lines
        .push(Line::new("CPU I/O wait %", "#bf8700", series("cpu_iowait_pct")).dashed());
    c.lines.push(Line::new(
        "memory used %",
        "#0969da",
        series("memory_used_pct"),
    ));
    b.push_str(&figure(
        svg::line_chart(&c),
        "Whole host, per sampling interval.",
    ));
    b.push_str("</div>");

    // Tables.
    b.push_str(r#"<h2 id="tasks">Task Response Times</h2>"#);
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|(k, v)| {
            let p95 = fnum(v, "p95_ms").unwrap_or(0.0);
            vec![
                td_t(k),
                td(&opt(fnum(v, "weight"), num)),
                td(&opt(fnum(v, "count"), |x| fixed(x, 0))),
                td_judged(
                    &opt(fnum(v, "errors"), |x| fixed(x, 0)),
                    fnum(v, "errors").unwrap_or(0.0) > 0.0,
                ),
                td(&opt(fnum(v, "skipped"), |x| fixed(x, 0))),
                td(&opt(fnum(v, "per_user_per_day"), |x| fixed(x, 2))),
                td(&opt(fnum(v, "mean_ms"), ms)),
                td(&opt(fnum(v, "p50_ms"), ms)),
                td_judged(&ms(p95), p95 > limit),
                td(&opt(fnum(v, "p99_ms"), ms)),
                td(&opt(fnum(v, "max_ms"), ms)),
            ]
        })
        .collect();
    b.push_str(&table(
        "tasks-table",
        &[("", 6), ("milliseconds", 5)],
        &[
            "task",
            "weight",
            "count",
            "errors",
            "skipped",
            "per user per day",
            "avg",
            "p50",
            "p95",
            "p99",
            "max",
        ],
        &rows,
    ));
    let _ = write!(
        b,
        r#"<p class="note">Response time (weighted 95th percentile): <b>{} ms</b> (limit {} ms).</p>"#,
        esc(&num(score)),
        esc(&num(limit))
    );
    if let Some(ops) = r.get("operations").and_then(Value::as_object)
        && !ops.is_empty()
    {
        let rows: Vec<Vec<String>> = ops
            .iter()
            .map(|(k, v)| {
                vec![
                    td_t(k),
                    td(&opt(fnum(v, "count"), |x| fixed(x, 0))),
                    td(&opt(fnum(v, "errors"), |x| fixed(x, 0))),
                    td(&opt(fnum(v, "mean_ms"), ms)),
                    td(&opt(fnum(v, "p95_ms"), ms)),
                    td(&opt(fnum(v, "p99_ms"), ms)),
                    td(&opt(fnum(v, "max_ms"), ms)),
                ]
            })
            .collect();
        b.push_str("<h3>Other operations</h3>");
        b.push_str(&table(
            "operations-table",
            &[],
            &[
                "operation",
                "count",
                "errors",
                "avg ms",
                "p95 ms",
                "p99 ms",
                "max ms",
            ],
            &rows,
        ));
    }
    b.push_str(r#"<h2 id="mail-flow">Mail Flow</h2>"#);
    b.push_str(&kv(
        "mail-flow-table",
        &[
            (
                "Users / lists",
                format!("{} / {}", text(r, "users"), text(r, "lists")),
            ),
            ("Messages submitted", text(r, "mail_flow.submitted")),
            (
                "Recipients addressed",
                text(r, "mail_flow.recipients_addressed"),
            ),
            (
                "Deliveries expected",
                text(r, "mail_flow.expected_deliveries"),
            ),
            ("Deliveries seen", text(r, "mail_flow.delivered")),
            (
                "Deliveries logged by the server",
                text(r, "mail_flow.server_deliveries"),
            ),
            (
                "Recipients per message",
                opt(fnum(r, "mail_flow.recipients_per_message"), |x| fixed(x, 2)),
            ),
            (
                "Submitted / delivered per user per day",
                format!(
                    "{} / {}",
                    opt(fnum(r, "mail_flow.per_user_per_day.submitted"), |x| fixed(
                        x, 1
                    )),
                    opt(fnum(r, "mail_flow.per_user_per_day.delivered"), |x| fixed(
                        x, 1
                    ))
                ),
            ),
            (
                "Submitted / delivered per real hour",
                format!(
                    "{} / {}",
                    opt(fnum(r, "mail_flow.per_hour_real.submitted"), num),
                    opt(fnum(r, "mail_flow.per_hour_real.delivered"), num)
                ),
            ),
            (
                "Delivery latency",
                format!(
                    "avg {} · p50 {} · p95 {} · p99 {} · max {} ms",
                    opt(fnum(r, "delivery_latency.summary.mean_ms"), ms),
                    opt(fnum(r, "delivery_latency.summary.p50_ms"), ms),
                    opt(fnum(r, "delivery_latency.summary.p95_ms"), ms),
                    opt(fnum(r, "delivery_latency.summary.p99_ms"), ms),
                    opt(fnum(r, "delivery_latency.summary.max_ms"), ms)
                ),
            ),
            (
                "Queue (max / at end)",
                match (fnum(r, "queue.max"), fnum(r, "queue.final")) {
                    (Some(_), Some(_)) => format!(
                        "{} / {} ({})",
                        text(r, "queue.max"),
                        text(r, "queue.final"),
                        text(r, "queue.source")
                    ),
                    _ => text(r, "queue.source"),
                },
            ),
        ],
    ));
    if let Some(by) = at(r, "errors.by_kind").and_then(Value::as_object)
        && !by.is_empty()
    {
        b.push_str(r#"<h2 id="errors">Errors</h2>"#);
        let rows: Vec<Vec<String>> = by
            .iter()
            .map(|(k, v)| vec![td_t(k), td(&v.to_string())])
            .collect();
        b.push_str(&table("errors-table", &[], &["kind", "count"], &rows));
        if let Some(s) = at(r, "errors.samples").and_then(Value::as_array) {
            b.push_str("<ul>");
            for x in s.iter().take(50) {
                let _ = write!(b, "<li>{}</li>", esc(x.as_str().unwrap_or_default()));
            }
            b.push_str("</ul>");
        }
    }
    b.push_str(&crate::html::steady_and_server(r));
    b.push_str(r#"<h2 id="host-performance">Host System Performance</h2>"#);
    let mut rows = vec![
        (
            "CPU busy",
            opt(fnum(r, "host.cpu_busy_pct"), |x| {
                format!("{} %", fixed(x, 1))
            }),
        ),
        (
            "CPU I/O wait",
            opt(fnum(r, "host.cpu_iowait_pct"), |x| {
                format!("{} %", fixed(x, 1))
            }),
        ),
        (
            "Memory used (max)",
            opt(fnum(r, "host.memory_used_pct_max"), |x| {
                format!("{} %", fixed(x, 1))
            }),
        ),
    ];
    if r.get("disk").is_some_and(|d| !d.is_null()) {
        rows.push(("Disk", text(r, "disk.device")));
        rows.push((
            "Disk IOPS per user",
            opt(fnum(r, "disk.iops_per_user"), |x| fixed(x, 4)),
        ));
    }
    rows.push((
        "Generator CPU",
        format!(
            "{} s ({} s per 1000 commands)",
            opt(fnum(r, "generator.cpu_s"), |x| fixed(x, 1)),
            opt(fnum(r, "generator.cpu_s_per_1000_commands"), |x| fixed(
                x, 3
            ))
        ),
    ));
    rows.push((
        "Tasks planned / executed",
        format!(
            "{} / {}",
            text(r, "generator.planned_tasks"),
            text(r, "generator.executed_tasks")
        ),
    ));
    b.push_str(&kv("host-table", &rows));
    if let Some(m) = &d.merged {
        b.push_str(&hosts_table(m, limit));
    }
    if let Some(w) = r.get("warnings").and_then(Value::as_array)
        && !w.is_empty()
    {
        b.push_str(r#"<h2 id="warnings">Warnings</h2><ul>"#);
        for x in w {
            let _ = write!(b, "<li>{}</li>", esc(x.as_str().unwrap_or_default()));
        }
        b.push_str("</ul>");
    }
    b.push_str(&test_log(d.test_log.as_deref()));
    page(
        &format!("mailbench mail load — {host} — {}", verdict.label()),
        &b,
        r,
    )
}

/// Per-Host Results of a merged mail result: one row per load generator.
fn hosts_table(m: &MailMerged, limit: f64) -> String {
    let mut b = String::from(r#"<h2 id="hosts">Per-Host Results</h2>"#);
    let rows: Vec<Vec<String>> = m
        .hosts
        .iter()
        .map(|h| {
            let last = (h.first_user + h.users).saturating_sub(1);
            vec![
                td_t(&h.label),
                td_judged(h.verdict.label(), h.verdict.status != Status::Pass),
                td(&h.users.to_string()),
                td(&format!("{}–{last}", h.first_user)),
                td_judged(&ms(h.response_time_ms), h.response_time_ms > limit),
                td(&fixed(h.submitted as f64, 0)),
                td(&fixed(h.expected_deliveries as f64, 0)),
                td(&fixed(h.delivered as f64, 0)),
                td(&format!(
                    "{} %",
                    mailbench_results::mail::judge::pct_down(h.within_pct)
                )),
                td_judged(&fixed(h.errors as f64, 0), h.errors > 0),
                td_t(&format!("{} → {}", h.started, h.ended)),
                td_t(&h.source),
            ]
        })
        .collect();
    b.push_str(&table(
        "hosts-table",
        &[("", 4), ("weighted p95", 1), ("mail flow", 4), ("", 3)],
        &[
            "host",
            "verdict",
            "users",
            "user numbers",
            "response time ms",
            "submitted",
            "expected",
            "delivered",
            "in time",
            "errors",
            "run",
            "source",
        ],
        &rows,
    ));
    b.push_str(r#"<p class="note">Aggregate figures above: the load generators' histograms are added (percentiles and the score come from the sums, never averages), counts are summed, per-user and per-hour figures are recomputed from the sums, and the verdict is judged again on the aggregate.</p>"#);
    b
}
