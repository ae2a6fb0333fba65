//! report.html: one self-contained page (inline CSS and SVG, no scripts, no
//! network) for storage results, mail results and any other result kind.

use crate::fmt::{bytes, duration, fixed, ms, num, short};
use crate::load::{Doc, OtherDoc, StorageDoc};
use crate::svg::{self, Band, BarChart, Bars, HLine, Line, LineChart, RED, XAxis, YScale, esc};
use mailbench_metrics::LatencyHist;
use mailbench_results::storage::stats::{ClassFigures, Stats};
use mailbench_results::{Status, Verdict};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

const CSS: &str = r#"
:root{--pass:#1a7f37;--fail:#c62828;--warn:#9a6700;--err:#82071e;--ink:#1f2328;--muted:#57606a;--line:#d0d7de;--bg:#f6f8fa}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);margin:0;background:#fff}
main{max-width:1360px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:22px;margin:0 0 12px}
h2{font-size:17px;margin:28px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:14px;margin:16px 0 6px}
.verdict{border-radius:8px;padding:14px 18px;color:#fff;margin-bottom:16px}
.verdict.pass{background:var(--pass)}.verdict.fail{background:var(--fail)}
.verdict.interrupted{background:var(--warn)}.verdict.error{background:var(--err)}
.verdict .label{font-size:24px;font-weight:700;letter-spacing:.5px}
.verdict .what{font-size:15px;margin-left:10px;opacity:.95}
.verdict ul{margin:8px 0 0 0;padding-left:22px;font-size:14px}
.identity{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:2px 24px;margin:0 0 12px}
.identity div{display:flex;gap:8px;padding:2px 0;border-bottom:1px dotted var(--line)}
.identity div.wide{grid-column:1/-1}.identity dt{color:var(--muted);min-width:110px}.identity dd{margin:0;word-break:break-all}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:12px;margin:12px 0}
.tile{border:1px solid var(--line);border-left:5px solid var(--pass);border-radius:6px;padding:10px 12px}
.tile.bad{border-left-color:var(--fail)}.tile.na{border-left-color:var(--line)}
.tile .k{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.4px}
.tile .v{font-size:24px;font-weight:650;font-variant-numeric:tabular-nums}
.tile .s{color:var(--muted);font-size:12px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:14px}
figure.chart{margin:0;border:1px solid var(--line);border-radius:6px;padding:4px;background:#fff}
figure.chart svg{width:100%;height:auto;display:block}
figure.chart figcaption{color:var(--muted);font-size:12px;padding:2px 8px 4px}
.tablewrap{overflow-x:auto}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:4px 0 8px;min-width:40%}
th,td{padding:3px 9px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{background:var(--bg);font-weight:600;font-size:12.5px}
th:first-child,td:first-child{text-align:left}
td.t,th.t{text-align:left;white-space:normal}
tr.group th{background:#eaeef2;text-align:center}
td.bad{color:var(--fail);font-weight:700}
td.ok{color:var(--pass);font-weight:600}
table.kv td:first-child{color:var(--muted);padding-right:24px;white-space:nowrap}
table.kv td{text-align:left;white-space:normal}
pre.log{max-height:420px;overflow:auto;background:var(--bg);border:1px solid var(--line);padding:8px 10px;font-size:12px;line-height:1.35}
.note{color:var(--muted);font-size:12.5px}
footer{margin-top:32px;color:var(--muted);font-size:12px}
@media print{.charts{grid-template-columns:1fr 1fr}pre.log{max-height:none}}
"#;

pub const CLASS_ORDER: [&str; 5] = [
    "db_read",
    "db_write",
    "log_write",
    "log_read",
    "maintenance_read",
];

pub fn class_title(c: &str) -> &str {
    match c {
        "db_read" => "database read",
        "db_write" => "database write",
        "log_write" => "log write",
        "log_read" => "log read (replication)",
        "maintenance_read" => "maintenance read",
        "transaction" => "transaction",
        other => other,
    }
}

pub fn class_color(c: &str) -> &'static str {
    match c {
        "db_read" => "#1f6feb",
        "db_write" => "#e36209",
        "log_write" => "#1a7f37",
        "log_read" => "#8250df",
        "maintenance_read" => "#8c564b",
        "transaction" => "#1f2328",
        _ => "#57606a",
    }
}

/// Renders any loaded result.
pub fn render(doc: &Doc) -> String {
    match doc {
        Doc::Storage(d) => storage_page(d),
        Doc::Mail(d) => crate::mailhtml::mail_page(d),
        Doc::Other(d) if d.kind == "mail-sweep" => {
            crate::mailhtml_sweep::sweep_page(d).unwrap_or_else(|| other_page(d))
        }
        Doc::Other(d) => other_page(d),
    }
}

/// The page shell: head with inline CSS, body, the result JSON as inert data.
pub fn page(title: &str, body: &str, raw: &Value) -> String {
    let data = serde_json::to_string(raw)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"mailbench {}\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n{body}\n<footer>Generated by mailbench {} from result.json. This page is self-contained: no scripts, no fonts or images to fetch, it opens from disk. The full result is embedded below as JSON data (<code>#mailbench-result</code>).</footer>\n</main>\n<script type=\"application/json\" id=\"mailbench-result\">{data}</script>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        esc(title),
        env!("CARGO_PKG_VERSION"),
    )
}

pub fn verdict_banner(v: &Verdict, what: &str) -> String {
    let (class, label) = match v.status {
        Status::Pass => ("pass", "PASS"),
        Status::Fail => ("fail", "FAIL"),
        Status::Interrupted => ("interrupted", "INTERRUPTED"),
        Status::Error => ("error", "ERROR"),
    };
    let mut o = format!(
        r#"<section class="verdict {class}" id="verdict" data-status="{class}"><span class="label">{label}</span><span class="what">{}</span>"#,
        esc(what)
    );
    if !v.reasons.is_empty() {
        o.push_str(r#"<ul class="reasons">"#);
        for r in &v.reasons {
            let _ = write!(o, "<li>{}</li>", esc(r));
        }
        o.push_str("</ul>");
    }
    o.push_str("</section>");
    o
}

pub fn identity(items: &[(&str, String)]) -> String {
    let mut o = String::from(r#"<dl class="identity" id="identity">"#);
    for (k, v) in items {
        let wide = if v.chars().count() > 40 {
            r#" class="wide""#
        } else {
            ""
        };
        let _ = write!(o, "<div{wide}><dt>{}</dt><dd>{}</dd></div>", esc(k), esc(v));
    }
    o.push_str("</dl>");
    o
}

/// A figure tile; `bad` None = not judged.
pub fn tile(id: &str, key: &str, value: &str, sub: &str, bad: Option<bool>) -> String {
    let class = match bad {
        Some(true) => "tile bad",
        Some(false) => "tile",
        None => "tile na",
    };
    format!(
        r#"<div class="{class}" id="{}"><div class="k">{}</div><div class="v">{}</div><div class="s">{}</div></div>"#,
        esc(id),
        esc(key),
        esc(value),
        esc(sub)
    )
}

pub fn figure(svg: String, caption: &str) -> String {
    format!(
        r#"<figure class="chart">{svg}<figcaption>{}</figcaption></figure>"#,
        esc(caption)
    )
}

/// A table cell: right-aligned number, optionally marked bad.
pub fn td(text: &str) -> String {
    format!("<td>{}</td>", esc(text))
}
pub fn td_t(text: &str) -> String {
    format!(r#"<td class="t">{}</td>"#, esc(text))
}
pub fn td_judged(text: &str, bad: bool) -> String {
    if bad {
        format!(r#"<td class="bad">{}</td>"#, esc(text))
    } else {
        td(text)
    }
}

/// A table: `groups` is an optional header row of (label, colspan).
pub fn table(id: &str, groups: &[(&str, usize)], head: &[&str], rows: &[Vec<String>]) -> String {
    let mut o = format!(r#"<div class="tablewrap"><table id="{}">"#, esc(id));
    o.push_str("<thead>");
    if !groups.is_empty() {
        o.push_str(r#"<tr class="group">"#);
        for (g, span) in groups {
            let _ = write!(o, r#"<th colspan="{span}">{}</th>"#, esc(g));
        }
        o.push_str("</tr>");
    }
    o.push_str("<tr>");
    let first = rows.first();
    for (i, h) in head.iter().enumerate() {
        let left = i == 0
            || first
                .and_then(|r| r.get(i))
                .is_some_and(|c| c.starts_with(r#"<td class="t""#));
        let _ = write!(
            o,
            "<th{}>{}</th>",
            if left { r#" class="t""# } else { "" },
            esc(h)
        );
    }
    o.push_str("</tr></thead><tbody>");
    for r in rows {
        o.push_str("<tr>");
        for c in r {
            o.push_str(c);
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table></div>");
    o
}

/// A two-column key/value table.
pub fn kv(id: &str, rows: &[(&str, String)]) -> String {
    let mut o = format!(
        r#"<div class="tablewrap"><table class="kv" id="{}"><tbody>"#,
        esc(id)
    );
    for (k, v) in rows {
        let _ = write!(o, "<tr><td>{}</td><td>{}</td></tr>", esc(k), esc(v));
    }
    o.push_str("</tbody></table></div>");
    o
}

pub fn test_log(log: Option<&str>) -> String {
    match log {
        Some(t) => format!(
            r#"<h2 id="test-log">Test Log</h2><pre class="log">{}</pre>"#,
            esc(t)
        ),
        None => r#"<h2 id="test-log">Test Log</h2><p class="note">test.log was not found beside result.json.</p>"#.into(),
    }
}

/// Percentile curve points (percentile, ms) of a histogram, up to 99.999.
pub fn curve_ms(h: &LatencyHist) -> Vec<(f64, f64)> {
    h.curve()
        .into_iter()
        .filter(|(p, _)| *p >= 10.0 && *p < 100.0)
        .map(|(p, us)| (p, us as f64 / 1000.0))
        .collect()
}

/// Time axis: seconds, or minutes for long runs.
pub struct TimeAxis {
    pub div: f64,
    pub label: &'static str,
}

pub fn time_axis(max_s: f64) -> TimeAxis {
    if max_s > 1200.0 {
        TimeAxis {
            div: 60.0,
            label: "elapsed (min)",
        }
    } else {
        TimeAxis {
            div: 1.0,
            label: "elapsed (s)",
        }
    }
}

// ---------------------------------------------------------------------------
// Storage.

/// One measured interval: CPU busy, I/O wait, memory used, stalls/s, IOPS.
type Sample = (f64, f64, f64, f64, f64);

/// Time series computed from intervals.jsonl.
#[derive(Default)]
struct Series {
    t: Vec<f64>,
    ops: BTreeMap<&'static str, Vec<f64>>,
    trans: Vec<f64>,
    avg: BTreeMap<&'static str, Vec<f64>>,
    p99: BTreeMap<&'static str, Vec<f64>>,
    cpu: Vec<f64>,
    iowait: Vec<f64>,
    mem: Vec<f64>,
    /// Measured-window interval values for min/avg/max tables.
    measured: Vec<Sample>,
    shutdown_from: Option<f64>,
}

fn series(d: &StorageDoc) -> Series {
    let mut s = Series::default();
    // Shutdown intervals (short, after the window) are left out of the charts.
    for rec in d.intervals.iter().filter(|r| r.phase != "shutdown") {
        let mut sum = Stats::default();
        for i in &rec.instances {
            sum.add(i);
        }
        let secs = rec.seconds.max(1e-3);
        s.t.push(rec.end_s);
        for (idx, name) in CLASS_ORDER.iter().enumerate() {
            let c = &sum.classes[idx];
            s.ops.entry(name).or_default().push(c.ops as f64 / secs);
            let sm = c.latency.summary();
            s.avg.entry(name).or_default().push(sm.mean_us / 1000.0);
            s.p99
                .entry(name)
                .or_default()
                .push(sm.p99_us as f64 / 1000.0);
        }
        let trans = sum.transactional_ios() as f64 / secs;
        s.trans.push(trans);
        s.cpu.push(rec.cpu_busy_pct);
        s.iowait.push(rec.cpu_iowait_pct);
        s.mem.push(rec.memory_used_pct);
        if rec.phase == "measured" {
            s.measured.push((
                rec.cpu_busy_pct,
                rec.cpu_iowait_pct,
                rec.memory_used_pct,
                sum.counters.page_fault_stalls as f64 / secs,
                trans,
            ));
        }
        if rec.phase == "shutdown" && s.shutdown_from.is_none() {
            s.shutdown_from = Some(rec.end_s - rec.seconds);
        }
    }
    s
}

fn pts(t: &[f64], v: &[f64], div: f64) -> Vec<(f64, f64)> {
    t.iter().zip(v.iter()).map(|(a, b)| (a / div, *b)).collect()
}

fn storage_charts(d: &StorageDoc, s: &Series) -> String {
    let r = &d.result;
    let max_t = s.t.iter().cloned().fold(0.0, f64::max);
    let ax = time_axis(max_t);
    let mut bands = vec![Band {
        label: "warm-up".into(),
        x0: 0.0,
        x1: r.window.warmup_s / ax.div,
    }];
    if let Some(sd) = s.shutdown_from {
        bands.push(Band {
            label: "shutdown".into(),
            x0: sd / ax.div,
            x1: max_t / ax.div,
        });
    }
    let mut o = String::from(r#"<div class="charts">"#);

    charts_iops_and_latency(d, s, &ax, &bands, &mut o);
    charts_percentiles_and_instances(d, &mut o);
    charts_per_host(d, &mut o);
    charts_host(s, &ax, &bands, &mut o);
    o.push_str("</div>");
    if d.intervals.is_empty() {
        o.push_str(r#"<p class="note">No interval data (intervals.jsonl missing or empty): the time charts are empty.</p>"#);
    }
    if d.bad_interval_lines > 0 {
        let _ = write!(
            o,
            r#"<p class="note">{} lines of intervals.jsonl could not be read and were skipped.</p>"#,
            d.bad_interval_lines
        );
    }
    o
}

/// IOPS by class, then read and write latency over time with the thresholds.
fn charts_iops_and_latency(
    d: &StorageDoc,
    s: &Series,
    ax: &TimeAxis,
    bands: &[Band],
    o: &mut String,
) {
    let r = &d.result;
    let th = &r.spec.thresholds;
    // 1. Transactional IOPS by class.
    let mut c = LineChart::new(
        "chart-iops",
        "Transactional IOPS over time",
        ax.label,
        "I/O per second",
    );
    c.y_scale = YScale::Auto;
    c.bands = bands.to_vec();
    c.lines.push(Line::new(
        "transactional (reads + writes)",
        "#1f2328",
        pts(&s.t, &s.trans, ax.div),
    ));
    for n in ["db_read", "db_write"] {
        if let Some(v) = s.ops.get(n) {
            c.lines.push(Line::new(
                &format!("{}s", class_title(n)),
                class_color(n),
                pts(&s.t, v, ax.div),
            ));
        }
    }
    if let Some(t) = r.total.target_iops {
        c.hlines.push(HLine {
            label: format!("target {}", num(t)),
            value: t,
            color: RED.into(),
        });
    }
    o.push_str(&figure(
        svg::line_chart(&c),
        "Database reads and writes per second caused by transactions, per sampling interval; grey: warm-up and shutdown (not measured).",
    ));

    // 2-3. Latency over time with thresholds.
    for (n, id, avg_lim, max_lim) in [
        (
            "db_read",
            "chart-db-read-latency",
            th.db_read_avg_ms,
            th.db_read_max_ms,
        ),
        (
            "log_write",
            "chart-log-write-latency",
            th.log_write_avg_ms,
            th.log_write_max_ms,
        ),
    ] {
        let title = format!("{} latency over time", capitalize(class_title(n)));
        let mut c = LineChart::new(id, &title, ax.label, "latency (ms)");
        c.y_scale = YScale::Auto;
        c.bands = bands.to_vec();
        if let (Some(a), Some(p)) = (s.avg.get(n), s.p99.get(n)) {
            c.lines
                .push(Line::new("average", class_color(n), pts(&s.t, a, ax.div)));
            c.lines
                .push(Line::new("p99", class_color(n), pts(&s.t, p, ax.div)).dashed());
        }
        c.hlines.push(HLine {
            label: format!("average limit {} ms", short(avg_lim)),
            value: avg_lim,
            color: RED.into(),
        });
        c.hlines.push(HLine {
            label: format!("max limit {} ms", short(max_lim)),
            value: max_lim,
            color: "#82071e".into(),
        });
        o.push_str(&figure(
            svg::line_chart(&c),
            &format!(
                "Average and 99th percentile of each interval; the verdict limits the average over the measured window and the slowest single {}.",
                class_title(n)
            ),
        ));
    }
}

/// Percentile curves and per-instance IOPS and latency bars.
fn charts_percentiles_and_instances(d: &StorageDoc, o: &mut String) {
    chart_percentiles(d, o);
    chart_instance_iops(d, o);
    chart_instance_latency(d, o);
}

/// The value of one class's figure for every instance (0 where it has none).
fn per_instance(d: &StorageDoc, n: &str, f: &dyn Fn(&ClassFigures) -> f64) -> Vec<f64> {
    d.result
        .instances
        .iter()
        .map(|i| i.classes.get(n).map(f).unwrap_or(0.0))
        .collect()
}

/// Percentile curves of every I/O class over the measured window.
fn chart_percentiles(d: &StorageDoc, o: &mut String) {
    let r = &d.result;
    let mut c = LineChart::new(
        "chart-percentiles",
        "Latency percentiles by I/O class (measured window)",
        "percentile",
        "latency (ms)",
    );
    c.x_axis = XAxis::Nines;
    c.y_scale = YScale::Log;
    for n in CLASS_ORDER.iter().chain(["transaction"].iter()) {
        if let Some(h) = r.total.histograms.get(*n)
            && !h.is_empty()
        {
            let mut l = Line::new(class_title(n), class_color(n), curve_ms(h));
            if *n == "transaction" {
                l = l.dashed();
            }
            c.lines.push(l);
        }
    }
    o.push_str(&figure(
        svg::line_chart(&c),
        "From the merged HDR histograms of the measured window (1 µs resolution, 0.1 % precision); the x axis spreads the tail (90, 99, 99.9 ...).",
    ));
}

/// Transactional reads, writes and log writes per second, per database.
fn chart_instance_iops(d: &StorageDoc, o: &mut String) {
    let cats: Vec<String> = d.result.instances.iter().map(|i| i.name.clone()).collect();
    let col = |n: &str, f: &dyn Fn(&ClassFigures) -> f64| per_instance(d, n, f);
    o.push_str(&figure(
        svg::bar_chart(&BarChart {
            id: "chart-instance-iops".into(),
            title: "Transactional IOPS per database".into(),
            y_label: "I/O per second".into(),
            categories: cats,
            groups: vec![
                Bars {
                    name: "database reads/s".into(),
                    color: class_color("db_read").into(),
                    values: col("db_read", &|c| c.ops_per_s),
                },
                Bars {
                    name: "database writes/s".into(),
                    color: class_color("db_write").into(),
                    values: col("db_write", &|c| c.ops_per_s),
                },
                Bars {
                    name: "log writes/s".into(),
                    color: class_color("log_write").into(),
                    values: col("log_write", &|c| c.ops_per_s),
                },
            ],
            hlines: vec![],
            y_scale: YScale::Linear,
        }),
        "Measured-window averages per database instance.",
    ));
}

/// Read and log write latency (average and p99) per database, against the limits.
fn chart_instance_latency(d: &StorageDoc, o: &mut String) {
    let th = &d.result.spec.thresholds;
    let cats: Vec<String> = d.result.instances.iter().map(|i| i.name.clone()).collect();
    let col = |n: &str, f: &dyn Fn(&ClassFigures) -> f64| per_instance(d, n, f);
    o.push_str(&figure(
        svg::bar_chart(&BarChart {
            id: "chart-instance-latency".into(),
            title: "Latency per database".into(),
            y_label: "latency (ms)".into(),
            categories: cats,
            groups: vec![
                Bars {
                    name: "db read avg".into(),
                    color: class_color("db_read").into(),
                    values: col("db_read", &|c| c.latency_ms.avg),
                },
                Bars {
                    name: "db read p99".into(),
                    color: "#79a8f0".into(),
                    values: col("db_read", &|c| c.latency_ms.p99),
                },
                Bars {
                    name: "log write avg".into(),
                    color: class_color("log_write").into(),
                    values: col("log_write", &|c| c.latency_ms.avg),
                },
                Bars {
                    name: "log write p99".into(),
                    color: "#7cc98f".into(),
                    values: col("log_write", &|c| c.latency_ms.p99),
                },
            ],
            hlines: vec![
                HLine {
                    label: format!("db read avg limit {} ms", short(th.db_read_avg_ms)),
                    value: th.db_read_avg_ms,
                    color: RED.into(),
                },
                HLine {
                    label: format!("log write avg limit {} ms", short(th.log_write_avg_ms)),
                    value: th.log_write_avg_ms,
                    color: "#82071e".into(),
                },
            ],
            y_scale: YScale::Auto,
        }),
        "Average and 99th percentile per database over the measured window, against the average limits.",
    ));
}

/// Per-host bars of a merged result.
fn charts_per_host(d: &StorageDoc, o: &mut String) {
    // Per-host bars for merged results.
    if let Some(m) = &d.result.merged {
        o.push_str(&figure(
            svg::bar_chart(&BarChart {
                id: "chart-host-iops".into(),
                title: "Transactional IOPS per host".into(),
                y_label: "I/O per second".into(),
                categories: m.hosts.iter().map(|h| h.label.clone()).collect(),
                groups: vec![
                    Bars {
                        name: "achieved".into(),
                        color: "#1f2328".into(),
                        values: m.hosts.iter().map(|h| h.total.transactional_iops).collect(),
                    },
                    Bars {
                        name: "target".into(),
                        color: "#afb8c1".into(),
                        values: m
                            .hosts
                            .iter()
                            .map(|h| h.total.target_iops.unwrap_or(f64::NAN))
                            .collect(),
                    },
                ],
                hlines: vec![],
                y_scale: YScale::Linear,
            }),
            "Each host's own transactional IOPS; the aggregate is their sum.",
        ));
    }
}

/// The host's CPU and memory over time.
fn charts_host(s: &Series, ax: &TimeAxis, bands: &[Band], o: &mut String) {
    // 6. Host CPU and memory.
    let mut c = LineChart::new(
        "chart-host",
        "Host CPU and memory over time",
        ax.label,
        "percent",
    );
    c.bands = bands.to_vec();
    c.y_max = Some(100.0);
    c.lines.push(Line::new(
        "CPU busy %",
        "#cf222e",
        pts(&s.t, &s.cpu, ax.div),
    ));
    c.lines
        .push(Line::new("CPU I/O wait %", "#bf8700", pts(&s.t, &s.iowait, ax.div)).dashed());
    c.lines.push(Line::new(
        "memory used %",
        "#0969da",
        pts(&s.t, &s.mem, ax.div),
    ));
    o.push_str(&figure(
        svg::line_chart(&c),
        "Whole-host CPU (busy, and waiting for I/O) and memory in use, per interval.",
    ));
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn lat_cells(c: Option<&ClassFigures>, avg_lim: Option<f64>, max_lim: Option<f64>) -> Vec<String> {
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

const LAT_HEAD: [&str; 6] = ["avg", "p50", "p95", "p99", "p99.9", "max"];

fn storage_tables(d: &StorageDoc, s: &Series) -> String {
    let mut o = String::new();
    tables_criteria(d, &mut o);
    tables_test_summary(d, &mut o);
    tables_sizing(d, &mut o);
    tables_system_parameters(d, &mut o);
    tables_database_configuration(d, &mut o);
    tables_transactional_io(d, &mut o);
    tables_background_io(d, &mut o);
    tables_total_io(d, &mut o);
    tables_host_performance(d, s, &mut o);
    tables_per_host(d, &mut o);
    tables_creation_and_checks(d, &mut o);
    o
}

/// The pass criteria: each limit, the measured figure and pass or fail.
fn tables_criteria(d: &StorageDoc, o: &mut String) {
    let r = &d.result;
    let t = &r.total;
    let th = &r.spec.thresholds;
    let cls = |n: &str| t.classes.get(n);
    let rd = cls("db_read").map(|c| c.latency_ms).unwrap_or_default();
    let lw = cls("log_write").map(|c| c.latency_ms).unwrap_or_default();
    o.push_str(r#"<h2 id="criteria">Pass Criteria</h2>"#);
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut crit = |name: &str, measured: String, limit: String, bad: bool| {
        rows.push(vec![
            td_t(name),
            td(&measured),
            td(&limit),
            if bad {
                r#"<td class="bad">fail</td>"#.into()
            } else {
                r#"<td class="ok">pass</td>"#.into()
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
    o.push_str(&table(
        "criteria-table",
        &[],
        &["criterion", "measured", "limit", "result"],
        &rows,
    ));
}

/// The test summary: verdict, machine, what ran and when.
fn tables_test_summary(d: &StorageDoc, o: &mut String) {
    let r = &d.result;
    let sp = &r.spec;
    let p = &sp.profile;
    o.push_str(r#"<h2 id="test-summary">Test Summary</h2>"#);
    let h = &r.run.host;
    o.push_str(&kv(
        "test-summary-table",
        &[
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
                    "{} after {} warm-up ({} intervals){}",
                    duration(r.window.measured_s),
                    duration(r.window.warmup_s),
                    r.window.intervals,
                    if r.window.interrupted {
                        ", interrupted"
                    } else {
                        ""
                    }
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
    ));
}

/// Database sizing and throughput.
fn tables_sizing(d: &StorageDoc, o: &mut String) {
    let r = &d.result;
    let t = &r.total;
    let sp = &r.spec;
    o.push_str(r#"<h2 id="sizing">Database Sizing and Throughput</h2>"#);
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
    o.push_str(&kv("sizing-table", &rows));
}

/// The system parameters: profile, threads, cache, flush, engine.
fn tables_system_parameters(d: &StorageDoc, o: &mut String) {
    let r = &d.result;
    let th = &r.spec.thresholds;
    let sp = &r.spec;
    let p = &sp.profile;
    o.push_str(r#"<h2 id="system-parameters">System Parameters</h2>"#);
    o.push_str(&kv(
        "system-parameters-table",
        &[
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
                "Database Cache per Database",
                format!(
                    "{} min, {} max",
                    bytes(sp.cache_min_per_db as f64),
                    bytes(sp.cache_max_per_db as f64)
                ),
            ),
            (
                "Flush Thresholds / Checkpoint Depth",
                format!(
                    "start {} %, stop {} % dirty / {}",
                    p.flush_start_pct,
                    p.flush_stop_pct,
                    bytes(p.checkpoint_depth.0 as f64)
                ),
            ),
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
            (
                "I/O Engine",
                format!(
                    "{} (O_DIRECT {})",
                    r.io_engine,
                    if r.o_direct { "yes" } else { "no" }
                ),
            ),
            (
                "Sampling Interval",
                duration(sp.sample_interval.as_secs_f64()),
            ),
            ("Thresholds", th.describe()),
            ("Random Seed", sp.seed.to_string()),
        ],
    ));
}

/// Each database's configuration, and the thread tuning steps when `--threads auto` ran.
fn tables_database_configuration(d: &StorageDoc, o: &mut String) {
    let r = &d.result;
    let sp = &r.spec;
    o.push_str("<h3>Database Configuration</h3>");
    let rows: Vec<Vec<String>> = sp
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
    o.push_str(&table(
        "database-configuration-table",
        &[],
        &["instance", "sessions", "size", "database", "log folder"],
        &rows,
    ));

    if !r.tuning.is_empty() {
        o.push_str("<h3>Thread Tuning (--threads auto)</h3>");
        let rows: Vec<Vec<String>> = r
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
        o.push_str(&table(
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
            &rows,
        ));
    }
}

/// Transactional I/O per instance.
fn tables_transactional_io(d: &StorageDoc, o: &mut String) {
    let r = &d.result;
    let th = &r.spec.thresholds;
    o.push_str(r#"<h2 id="transactional-io">Transactional I/O Performance</h2>"#);
    let inst_rows: Vec<Vec<String>> = r
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
    o.push_str(&table(
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
        &inst_rows,
    ));
    let lat_rows: Vec<Vec<String>> = r
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
    o.push_str(&table(
        "transactional-latency-table",
        &[
            ("", 1),
            ("database reads", 6),
            ("database writes", 6),
            ("log writes", 6),
        ],
        &head,
        &lat_rows,
    ));
}

/// Background maintenance and log replication I/O.
fn tables_background_io(d: &StorageDoc, o: &mut String) {
    let r = &d.result;
    let sp = &r.spec;
    let p = &sp.profile;
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
        let _ = write!(o, r#"<h2 id="{id}">{title}</h2>"#);
        let rows: Vec<Vec<String>> = r
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
        o.push_str(&table(&format!("{id}-table"), &[], &head, &rows));
    }
    if !p.maintenance {
        o.push_str(r#"<p class="note">Background maintenance is off in this profile.</p>"#);
    }
}

/// Total I/O over all instances.
fn tables_total_io(d: &StorageDoc, o: &mut String) {
    let r = &d.result;
    let t = &r.total;
    let th = &r.spec.thresholds;
    o.push_str(r#"<h2 id="total-io">Total I/O Performance</h2>"#);
    let mut rows: Vec<Vec<String>> = Vec::new();
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
    o.push_str(&table("total-io-table", &[], &head, &rows));
}

/// The host's CPU, memory and disks over the run.
fn tables_host_performance(d: &StorageDoc, s: &Series, o: &mut String) {
    let r = &d.result;
    o.push_str(r#"<h2 id="host-performance">Host System Performance</h2>"#);
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
    o.push_str(&table(
        "host-performance-table",
        &[],
        &[
            "counter (measured intervals)",
            "average",
            "minimum",
            "maximum",
        ],
        &rows,
    ));
    let _ = write!(
        o,
        r#"<p class="note">Memory installed {}; mailbench itself used {} s of CPU time.</p>"#,
        esc(&bytes(r.host.memory_total_bytes as f64)),
        esc(&fixed(r.host.mailbench_cpu_s, 1))
    );
    if !r.disks.is_empty() {
        o.push_str("<h3>Volumes (operating system view, /proc/diskstats)</h3>");
        let rows: Vec<Vec<String>> = r
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
        o.push_str(&table(
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
            &rows,
        ));
    }
}

/// One section per host of a merged result.
fn tables_per_host(d: &StorageDoc, o: &mut String) {
    if let Some(m) = &d.result.merged {
        o.push_str(r#"<h2 id="hosts">Per-Host Results</h2>"#);
        let rows: Vec<Vec<String>> = m
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
        o.push_str(&table(
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
            &rows,
        ));
        o.push_str(r#"<p class="note">Aggregate figures above: rates are sums over hosts, averages are weighted by operation counts, percentiles come from the hosts' added histograms.</p>"#);
    }
}

/// Creation, verification and the errors list.
fn tables_creation_and_checks(d: &StorageDoc, o: &mut String) {
    let r = &d.result;
    if let Some(i) = &r.init {
        o.push_str(r#"<h2 id="init">Database Creation</h2>"#);
        let rows: Vec<Vec<String>> = i
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
        o.push_str(&table(
            "init-table",
            &[],
            &["database", "action", "size", "written", "seconds", "MB/s"],
            &rows,
        ));
    }
    if let Some(v) = &r.verify {
        o.push_str(r#"<h2 id="checksum">Checksum Statistics</h2>"#);
        let rows: Vec<Vec<String>> = v
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
        o.push_str(&table(
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
            &rows,
        ));
    }
    if !r.errors.is_empty() {
        o.push_str(r#"<h2 id="errors">Errors</h2><ul class="errors">"#);
        for e in r.errors.iter().take(200) {
            let _ = write!(o, "<li>{}</li>", esc(e));
        }
        o.push_str("</ul>");
    }
}

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

// ---------------------------------------------------------------------------
// Any other kind.

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, x, out);
            }
        }
        Value::Array(a) => {
            if a.len() <= 50 {
                for (i, x) in a.iter().enumerate() {
                    flatten(&format!("{prefix}[{i}]"), x, out);
                }
            } else {
                out.push((prefix.to_string(), format!("[{} items]", a.len())));
            }
        }
        Value::String(s) if s.len() > 200 => {
            out.push((prefix.to_string(), format!("[{} characters]", s.len())))
        }
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

fn other_page(d: &OtherDoc) -> String {
    let mut b = String::new();
    let _ = write!(b, "<h1>mailbench {}</h1>", esc(&d.kind));
    if let Some(v) = d
        .raw
        .get("verdict")
        .and_then(|v| serde_json::from_value::<Verdict>(v.clone()).ok())
    {
        b.push_str(&verdict_banner(&v, &d.kind));
    }
    let mut rows = Vec::new();
    flatten("", &d.raw, &mut rows);
    b.push_str(r#"<h2 id="figures">Figures</h2>"#);
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .take(2000)
        .map(|(k, v)| vec![td_t(&k), td_t(&v)])
        .collect();
    b.push_str(&table("figures-table", &[], &["key", "value"], &rows));
    b.push_str(&test_log(d.test_log.as_deref()));
    page(&format!("mailbench {}", d.kind), &b, &d.raw)
}
