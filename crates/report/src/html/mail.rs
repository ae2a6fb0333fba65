//! The mail-run page of report.html (`kind` "mail-run"): the view model of
//! templates/mail_run.html. Read from the JSON generically so that additions
//! to the mail result never break it.

use crate::fmt::{duration, fixed, ms, num};
use crate::html::tpl::{
    Figure, Ident, Kv, Row, Table, Tile, VerdictView, figure, identity, kv, page_data, render,
    table, td, td_judged, td_t, tile, verdict_view,
};
use crate::html::{SteadyServer, TimeAxis, curve_ms, steady_and_server, time_axis};
use crate::load::MailDoc;
use crate::mailmerge::MailMerged;
use crate::svg::{self, HBarChart, HLine, Line, LineChart, RED, XAxis, YScale};
use mailbench_metrics::LatencyHist;
use mailbench_results::{Status, Verdict};
use serde::Serialize;
use serde_json::Value;

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

/// The view model of templates/mail_run.html.
#[derive(Serialize)]
struct MailPage {
    title: String,
    data: String,
    users: String,
    profile: String,
    host: String,
    verdict: VerdictView,
    identity: Vec<Ident>,
    tiles: Vec<Tile>,
    charts: Vec<Figure>,
    tasks: Table,
    score: String,
    limit: String,
    operations: Option<Table>,
    mail_flow: Kv,
    errors: Option<ErrorsView>,
    #[serde(flatten)]
    sections: SteadyServer,
    host_table: Kv,
    hosts: Option<Table>,
    warnings: Vec<String>,
    test_log: Option<String>,
}

#[derive(Serialize)]
struct ErrorsView {
    table: Table,
    samples: Option<Vec<String>>,
}

/// The figures several parts of the page judge against.
struct Judged {
    /// The steady window's response time when the result has one, else the
    /// whole run's weighted p95.
    score: f64,
    limit: f64,
    compression: f64,
    within_pct: Option<f64>,
    within_s: f64,
}

impl Judged {
    fn of(r: &Value) -> Judged {
        Judged {
            score: fnum(r, "steady.response_time_ms")
                .filter(|_| fnum(r, "steady.intervals").unwrap_or(0.0) > 0.0)
                .or_else(|| fnum(r, "response_time.weighted_p95_ms"))
                .unwrap_or(0.0),
            limit: fnum(r, "response_time.limit_ms").unwrap_or(1000.0),
            compression: fnum(r, "window.compression").unwrap_or(1.0).max(1e-9),
            within_pct: fnum(r, "delivery_latency.within_pct"),
            within_s: fnum(r, "delivery_latency.within_s").unwrap_or(60.0),
        }
    }
}

/// The mail-run page.
pub fn mail_page(d: &MailDoc) -> Result<String, minijinja::Error> {
    let r = &d.raw;
    let verdict: Verdict = r
        .get("verdict")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or(Verdict {
            status: Status::Error,
            reasons: vec!["The result has no readable verdict.".into()],
        });
    let host = text(r, "run.host.hostname");
    let j = Judged::of(r);
    let tasks: Vec<(String, &Value)> = r
        .get("tasks")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v)).collect())
        .unwrap_or_default();
    let page = MailPage {
        title: format!("mailbench mail load — {host} — {}", verdict.label()),
        data: page_data(r),
        users: text(r, "users"),
        profile: text(r, "profile.name"),
        verdict: verdict_view(&verdict, &what(&verdict)),
        identity: identity(identity_items(r)),
        host,
        tiles: tiles(r, &j),
        charts: charts(d, &tasks, &j),
        tasks: tasks_table(&tasks, j.limit),
        score: num(j.score),
        limit: num(j.limit),
        operations: operations_table(r),
        mail_flow: kv("mail-flow-table", mail_flow_rows(r)),
        errors: errors_view(r),
        sections: steady_and_server(r),
        host_table: kv("host-table", host_rows(r)),
        hosts: d.merged.as_ref().map(|m| hosts_table(m, j.limit)),
        warnings: strings(r.get("warnings")),
        test_log: d.test_log.clone(),
    };
    render("mail_run.html", &page)
}

/// The words after the verdict's label.
pub fn what(v: &Verdict) -> String {
    match v.status {
        Status::Pass => "all pass criteria were met".to_string(),
        Status::Fail => format!("{} criteria not met", v.reasons.len()),
        Status::Interrupted => "the run was interrupted; figures are partial".into(),
        Status::Error => "the run could not complete".into(),
    }
}

/// The texts of a JSON array of strings (empty when absent).
fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn identity_items(r: &Value) -> Vec<(&'static str, String)> {
    vec![
        ("Host", text(r, "run.host.hostname")),
        ("OS", text(r, "run.host.os")),
        ("Kernel", text(r, "run.host.kernel")),
        ("mailbench", text(r, "run.tool_version")),
        ("Profile", text(r, "profile.name")),
        ("Protocol", protocols(r)),
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
        ("Command", strings(at(r, "run.command_line")).join(" ")),
    ]
}

fn tiles(r: &Value, j: &Judged) -> Vec<Tile> {
    let errors = fnum(r, "errors.total").unwrap_or(0.0);
    vec![
        tile(
            "fig-score",
            "Response time (weighted 95th percentile)",
            format!("{} ms", num(j.score)),
            format!("limit {} ms", num(j.limit)),
            Some(j.score > j.limit),
        ),
        tile(
            "fig-delivered",
            "Messages delivered / simulated hour",
            opt(fnum(r, "mail_flow.per_simulated_hour.delivered"), num),
            format!(
                "submitted {} / simulated hour",
                opt(fnum(r, "mail_flow.per_simulated_hour.submitted"), num)
            ),
            None,
        ),
        tile(
            "fig-delivery",
            "Delivered within time",
            opt(j.within_pct, |x| {
                format!("{} %", mailbench_results::mail::judge::pct_down(x))
            }),
            format!(
                "within {}; p95 {} ms",
                duration(j.within_s),
                opt(fnum(r, "delivery_latency.summary.p95_ms"), ms)
            ),
            j.within_pct.map(|x| x < 95.0),
        ),
        tile(
            "fig-errors",
            "Errors",
            num(errors),
            format!(
                "{} of operations",
                opt(fnum(r, "errors.rate_pct"), |x| format!("{} %", fixed(x, 2)))
            ),
            Some(errors > 0.0),
        ),
    ]
}

/// The charts: task p95, mail flow, delivery latency, queue, host.
fn charts(d: &MailDoc, tasks: &[(String, &Value)], j: &Judged) -> Vec<Figure> {
    let r = &d.raw;
    let rows: Vec<(String, f64)> = tasks
        .iter()
        .filter(|(_, v)| fnum(v, "count").unwrap_or(0.0) > 0.0)
        .map(|(k, v)| (k.clone(), fnum(v, "p95_ms").unwrap_or(0.0)))
        .collect();
    let mut out = vec![figure(
        svg::hbar_chart(&HBarChart {
            id: "chart-task-p95".into(),
            title: "95th percentile time per task".into(),
            x_label: "milliseconds (from intended start)".into(),
            rows,
            color: "#1f6feb".into(),
            over_color: RED.into(),
            limit: Some((j.limit, format!("{} ms", crate::fmt::short(j.limit)))),
        }),
        "Each task's 95th percentile; bars over the line are drawn red. The verdict uses the weighted average of these.",
    )];
    let max_t = d
        .intervals
        .iter()
        .filter_map(|i| fnum(i, "t_s"))
        .fold(0.0, f64::max);
    let ax = time_axis(max_t);
    out.push(flow_chart(d, &ax, j.compression));
    out.push(delivery_chart(r, j.within_s));
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
        out.push(figure(
            svg::line_chart(&c),
            "postqueue, per sampling interval.",
        ));
    }
    out.push(host_chart(d, &ax));
    out
}

/// Messages per simulated hour over time, with the profile's expectation.
fn flow_chart(d: &MailDoc, ax: &TimeAxis, compression: f64) -> Figure {
    let r = &d.raw;
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
    figure(
        svg::line_chart(&c),
        &format!(
            "Per sampling interval, scaled to the simulated day (compression ×{}).",
            fixed(compression, 1)
        ),
    )
}

fn delivery_chart(r: &Value, within_s: f64) -> Figure {
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
    figure(
        svg::line_chart(&c),
        "From submission to arrival in each recipient's mailbox (HDR histogram).",
    )
}

fn host_chart(d: &MailDoc, ax: &TimeAxis) -> Figure {
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
    figure(svg::line_chart(&c), "Whole host, per sampling interval.")
}

/// The protocols the users read mail over, from a result's `protocols`
/// (an older result without them: IMAP): `jmap (every user)`, or each with
/// its users.
fn protocols(r: &Value) -> String {
    let users = |v: &Value| v.as_u64().unwrap_or(0);
    match r.get("protocols").and_then(Value::as_object) {
        Some(m) if m.len() > 1 => (m.iter())
            .map(|(p, n)| format!("{p} {} users", users(n)))
            .collect::<Vec<_>>()
            .join(", "),
        Some(m) if m.len() == 1 => format!(
            "{} (every user)",
            m.keys().next().cloned().unwrap_or_default()
        ),
        _ => "imap (every user)".into(),
    }
}

/// A task's (or operation's) rows: its own, then in a run of several
/// protocols one per protocol (`read over jmap`).
fn with_protocols<'a>(k: &str, v: &'a Value) -> Vec<(String, &'a Value, bool)> {
    let mut out = vec![(k.to_string(), v, true)];
    if let Some(m) = v.get("by_protocol").and_then(Value::as_object) {
        out.extend(m.iter().map(|(p, f)| (format!("{k} over {p}"), f, false)));
    }
    out
}

fn tasks_table(tasks: &[(String, &Value)], limit: f64) -> Table {
    let rows: Vec<Row> = tasks
        .iter()
        .flat_map(|(k, v)| with_protocols(k, v))
        .map(|(k, v, total)| {
            let p95 = fnum(v, "p95_ms").unwrap_or(0.0);
            let weight = if total {
                opt(fnum(v, "weight"), num)
            } else {
                String::new()
            };
            vec![
                td_t(&k),
                td(&weight),
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
    table(
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
        rows,
    )
}

fn operations_table(r: &Value) -> Option<Table> {
    let ops = r.get("operations").and_then(Value::as_object)?;
    if ops.is_empty() {
        return None;
    }
    let rows: Vec<Row> = ops
        .iter()
        .flat_map(|(k, v)| with_protocols(k, v))
        .map(|(k, v, _)| {
            vec![
                td_t(&k),
                td(&opt(fnum(v, "count"), |x| fixed(x, 0))),
                td(&opt(fnum(v, "errors"), |x| fixed(x, 0))),
                td(&opt(fnum(v, "mean_ms"), ms)),
                td(&opt(fnum(v, "p95_ms"), ms)),
                td(&opt(fnum(v, "p99_ms"), ms)),
                td(&opt(fnum(v, "max_ms"), ms)),
            ]
        })
        .collect();
    Some(table(
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
        rows,
    ))
}

fn mail_flow_rows(r: &Value) -> Vec<(&'static str, String)> {
    let pair = |a: &str, b: &str, f: fn(f64) -> String| {
        format!("{} / {}", opt(fnum(r, a), f), opt(fnum(r, b), f))
    };
    let lat = |p: &str| opt(fnum(r, &format!("delivery_latency.summary.{p}_ms")), ms);
    vec![
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
            pair(
                "mail_flow.per_user_per_day.submitted",
                "mail_flow.per_user_per_day.delivered",
                |x| fixed(x, 1),
            ),
        ),
        (
            "Submitted / delivered per real hour",
            pair(
                "mail_flow.per_hour_real.submitted",
                "mail_flow.per_hour_real.delivered",
                num,
            ),
        ),
        (
            "Delivery latency",
            format!(
                "avg {} · p50 {} · p95 {} · p99 {} · max {} ms",
                lat("mean"),
                lat("p50"),
                lat("p95"),
                lat("p99"),
                lat("max")
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
    ]
}

fn errors_view(r: &Value) -> Option<ErrorsView> {
    let by = at(r, "errors.by_kind").and_then(Value::as_object)?;
    if by.is_empty() {
        return None;
    }
    let rows: Vec<Row> = by
        .iter()
        .map(|(k, v)| vec![td_t(k), td(&v.to_string())])
        .collect();
    let samples = at(r, "errors.samples").and_then(Value::as_array).map(|s| {
        s.iter()
            .take(50)
            .map(|x| x.as_str().unwrap_or_default().to_string())
            .collect()
    });
    Some(ErrorsView {
        table: table("errors-table", &[], &["kind", "count"], rows),
        samples,
    })
}

fn host_rows(r: &Value) -> Vec<(&'static str, String)> {
    let pct = |x: f64| format!("{} %", fixed(x, 1));
    let mut rows = vec![
        ("CPU busy", opt(fnum(r, "host.cpu_busy_pct"), pct)),
        ("CPU I/O wait", opt(fnum(r, "host.cpu_iowait_pct"), pct)),
        (
            "Memory used (max)",
            opt(fnum(r, "host.memory_used_pct_max"), pct),
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
            "{} s ({} s per 1000 commands, JMAP method calls counted as commands)",
            opt(fnum(r, "generator.cpu_s"), |x| fixed(x, 1)),
            opt(fnum(r, "generator.cpu_s_per_1000_commands"), |x| fixed(
                x, 3
            ))
        ),
    ));
    let n = |p: &str| opt(fnum(r, p), |x| fixed(x, 0));
    rows.push((
        "Commands sent",
        format!(
            "IMAP {}, SMTP {}, ManageSieve {}",
            n("generator.imap_commands"),
            n("generator.smtp_commands"),
            n("generator.sieve_commands")
        ),
    ));
    if fnum(r, "generator.jmap_requests").unwrap_or(0.0) > 0.0 {
        rows.push((
            "JMAP",
            format!(
                "{} requests of {} method calls; {} push events, {} push reconnections",
                n("generator.jmap_requests"),
                n("generator.jmap_method_calls"),
                n("generator.jmap_push_events"),
                n("generator.jmap_push_reconnects")
            ),
        ));
    }
    rows.push((
        "Tasks planned / executed",
        format!(
            "{} / {}",
            text(r, "generator.planned_tasks"),
            text(r, "generator.executed_tasks")
        ),
    ));
    rows
}

/// Per-Host Results of a merged mail result: one row per load generator.
fn hosts_table(m: &MailMerged, limit: f64) -> Table {
    let rows: Vec<Row> = m
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
    table(
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
        rows,
    )
}
