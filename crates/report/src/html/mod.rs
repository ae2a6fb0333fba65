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

pub(crate) mod mail_sections;
mod storage;
mod storage_charts;
mod storage_tables;
pub mod tpl;

pub use mail_sections::{SteadyServer, steady_and_server};
pub use storage::storage_page;
use storage_charts::*;
use storage_tables::*;

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

/// Renders any loaded result; an error is a fault of the report's own
/// templates, never of the result.
pub fn render(doc: &Doc) -> Result<String, minijinja::Error> {
    match doc {
        Doc::Storage(d) => Ok(storage_page(d)),
        Doc::Mail(d) => crate::mailhtml::mail_page(d),
        Doc::Other(d) if d.kind == "mail-sweep" => {
            crate::mailhtml_sweep::sweep_page(d).unwrap_or_else(|| Ok(other_page(d)))
        }
        Doc::Other(d) => Ok(other_page(d)),
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
