//! report.html: one self-contained page (inline CSS and SVG, no scripts, no
//! network) for storage results, mail results and any other result kind.
//! The pages are minijinja templates (`crates/report/templates/`, see
//! `tpl`); the Rust side builds their view models and draws the charts.

use crate::fmt::{bytes, duration, fixed, ms, num, short};
use crate::load::{Doc, OtherDoc, StorageDoc};
use crate::svg::{self, Band, BarChart, Bars, HLine, Line, LineChart, RED, XAxis, YScale};
use mailbench_metrics::LatencyHist;
use mailbench_results::storage::stats::{ClassFigures, Stats};
use mailbench_results::{Status, Verdict};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use tpl::{
    Figure, Ident, Kv, Row, Table, Tile, VerdictView, figure, identity, kv, page_data, table, td,
    td_class, td_judged, td_t, tile, verdict_view,
};

pub mod mail;
pub(crate) mod mail_sections;
pub mod mail_sweep;
mod storage;
mod storage_charts;
mod storage_tables;
mod suite;
pub mod tpl;

pub use mail_sections::{SteadyServer, steady_and_server};
pub use storage::storage_page;
use storage_charts::*;
use storage_tables::*;

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
    let page = render_kind(doc)?;
    Ok(with_log_write_error(page, doc.raw()))
}

/// A page of a run whose test.log is incomplete says so above its footer
/// (`run.log_write_error`), whatever its kind.
fn with_log_write_error(page: String, raw: &serde_json::Value) -> String {
    let error = (raw.pointer("/run/log_write_error"))
        .or_else(|| raw.get("log_write_error"))
        .and_then(serde_json::Value::as_str);
    match (error, page.rfind("<footer>")) {
        (Some(e), Some(at)) => {
            let note = format!(
                "<p class=\"note\" id=\"log-write-error\">test.log is incomplete: {}</p>\n",
                crate::svg::esc(e)
            );
            let mut page = page;
            page.insert_str(at, &note);
            page
        }
        _ => page,
    }
}

fn render_kind(doc: &Doc) -> Result<String, minijinja::Error> {
    match doc {
        Doc::Storage(d) => storage_page(d),
        Doc::Mail(d) => mail::mail_page(d),
        Doc::Other(d) if d.kind == "mail-sweep" => {
            mail_sweep::sweep_page(d).unwrap_or_else(|| other_page(d))
        }
        Doc::Other(d) if d.kind == "storage-suite" => {
            suite::suite_page(d).unwrap_or_else(|| other_page(d))
        }
        Doc::Other(d) => other_page(d),
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

/// The view model of templates/other.html.
#[derive(Serialize)]
struct OtherPage<'a> {
    title: String,
    data: String,
    kind: &'a str,
    verdict: Option<VerdictView>,
    figures: Table,
    test_log: Option<&'a str>,
}

fn other_page(d: &OtherDoc) -> Result<String, minijinja::Error> {
    let verdict = d
        .raw
        .get("verdict")
        .and_then(|v| serde_json::from_value::<Verdict>(v.clone()).ok())
        .map(|v| verdict_view(&v, &d.kind));
    let mut rows = Vec::new();
    flatten("", &d.raw, &mut rows);
    let rows: Vec<Row> = rows
        .into_iter()
        .take(2000)
        .map(|(k, v)| vec![td_t(&k), td_t(&v)])
        .collect();
    let page = OtherPage {
        title: format!("mailbench {}", d.kind),
        data: page_data(&d.raw),
        kind: &d.kind,
        verdict,
        figures: table("figures-table", &[], &["key", "value"], rows),
        test_log: d.test_log.as_deref(),
    };
    tpl::render("other.html", &page)
}
