//! Renderings of typed results (`mailbench-results`): summary.txt of every
//! kind (`summary/`), the self-contained report.html with inline SVG charts
//! (storage and mail results), `report merge` of loaded documents (the merges
//! themselves are typed, in `mailbench-results`) and `report compare`
//! (regression gate). Depends on base, metrics and results only.
//!
//! The report never needs a workload to run: everything comes from
//! result.json and the intervals.jsonl and test.log beside it.

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod compare;
pub mod fmt;
pub mod html;
pub mod load;
pub mod mailmerge;
pub mod merge;
pub mod summary;
pub mod svg;

pub use load::{Doc, load};

use mailbench_base::rundir::write_text;
use mailbench_base::{Error, Result};
use mailbench_results::storage::run::StorageResult;
use std::path::{Path, PathBuf};

/// Writes `dir/report.html` for a storage result just written to `dir`
/// (result.json, intervals.jsonl and test.log are read from there).
pub fn write_html(dir: &Path, result: &StorageResult) -> Result<PathBuf> {
    let v = serde_json::to_value(result)
        .map_err(|e| Error::runtime(format!("cannot encode the result: {e}")))?;
    write_html_value(dir, &v)
}

/// Writes `dir/report.html` for any result value (storage-run, mail-run or
/// another kind) whose files live in `dir`.
pub fn write_html_value(dir: &Path, result: &serde_json::Value) -> Result<PathBuf> {
    let doc = load::from_value(result.clone(), &dir.join("result.json"))?;
    let out = dir.join("report.html");
    write_text(&out, &try_render_html(&doc)?)?;
    Ok(out)
}

/// Renders a loaded result to HTML text.
pub fn try_render_html(doc: &Doc) -> Result<String> {
    html::render(doc).map_err(|e| {
        Error::runtime(format!(
            "cannot render report.html (a fault of mailbench's report templates; please report it): {e:#}"
        ))
    })
}

/// The `[report]` section of `--config` (every key has a flag of the same
/// name): `tolerance` for `report compare`, `metrics_listen` for runs.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportConfig {
    /// Compare tolerance: `"5%"` or a number of percent.
    pub tolerance: Option<Percent>,
    /// Address of the Prometheus endpoint during runs (`127.0.0.1:9464`).
    pub metrics_listen: Option<String>,
}

/// A percentage written as text (`"5%"`) or a number (`5`).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
pub enum Percent {
    Number(f64),
    Text(String),
}

impl Percent {
    pub fn value(&self) -> std::result::Result<f64, String> {
        match self {
            Percent::Number(n) => mailbench_base::parse_percent(&n.to_string()),
            Percent::Text(t) => mailbench_base::parse_percent(t),
        }
    }
}
