//! `report merge` of mail-run results from loaded documents: the merge itself
//! is typed (`mailbench_results::mail::merge`); this reads the documents into
//! the types and gives the result back as result.json and intervals.jsonl
//! values.

use crate::load::MailDoc;
use mailbench_base::{Error, Result};
use mailbench_metrics::LatencySummary;
use mailbench_results::Verdict;
use mailbench_results::mail::merge::MailMergeInput;
pub use mailbench_results::mail::run::MailHost;
use mailbench_results::mail::run::{LatencyFigures, MailInterval, MailRunResult};
use mailbench_results::verdict::Status;
use serde_json::Value;

pub use crate::load::MailMerged;

/// A merged mail result: result.json (with `merged`) and intervals.jsonl.
pub struct MailMergeOutput {
    pub result: Value,
    pub merged: MailMerged,
    pub intervals: Vec<Value>,
}

impl MailMergeOutput {
    pub fn verdict(&self) -> Verdict {
        verdict_of(&self.result)
    }
}

/// The verdict of a mail result (error when unreadable).
pub fn verdict_of(r: &Value) -> Verdict {
    r.get("verdict")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or(Verdict {
            status: Status::Error,
            reasons: vec!["The result has no readable verdict.".into()],
        })
}

/// The same figures as `mail run` writes for a histogram (ms).
pub fn summary_ms(s: &LatencySummary) -> Value {
    serde_json::to_value(LatencyFigures::from(*s)).unwrap_or_default()
}

/// A loaded mail document as its type (a usage error naming the file when
/// it does not match).
pub fn typed(d: &MailDoc) -> Result<MailRunResult> {
    serde_json::from_value(d.raw.clone()).map_err(|e| {
        Error::usage(format!(
            "{} is not a readable mail-run result: {e}",
            d.source.display()
        ))
    })
}

fn intervals(d: &MailDoc) -> Result<Vec<MailInterval>> {
    (d.intervals.iter())
        .map(|l| {
            serde_json::from_value(l.clone()).map_err(|e| {
                Error::usage(format!(
                    "{}: an interval is not readable: {e}",
                    d.source.display()
                ))
            })
        })
        .collect()
}

fn value<T: serde::Serialize>(v: &T) -> Result<Value> {
    serde_json::to_value(v)
        .map_err(|e| Error::runtime(format!("cannot encode the merged result: {e}")))
}

/// Merges mail-run results of several load generators of the same test,
/// as result.json and intervals.jsonl values.
pub fn merge(docs: &[MailDoc]) -> Result<MailMergeOutput> {
    let out = merge_typed(docs)?;
    Ok(MailMergeOutput {
        result: value(&out.result)?,
        merged: out.merged().clone(),
        intervals: out.intervals.iter().map(value).collect::<Result<_>>()?,
    })
}

/// Whether loaded mail-run documents are results of the same test (their
/// intervals are not looked at): what a merge says first.
pub fn check_compatible(docs: &[&MailDoc]) -> Result<()> {
    let results: Vec<MailRunResult> = docs.iter().map(|d| typed(d)).collect::<Result<_>>()?;
    let inputs: Vec<MailMergeInput> = (docs.iter().zip(&results))
        .map(|(d, r)| MailMergeInput {
            source: d.source.display().to_string(),
            result: r,
            intervals: &[],
        })
        .collect();
    mailbench_results::mail::merge::check_compatible(&inputs)
}

/// The typed merge of loaded mail-run documents.
pub fn merge_typed(docs: &[MailDoc]) -> Result<mailbench_results::mail::merge::MailMergeOutput> {
    let results: Vec<MailRunResult> = docs.iter().map(typed).collect::<Result<_>>()?;
    let lines: Vec<Vec<MailInterval>> = docs.iter().map(intervals).collect::<Result<_>>()?;
    let inputs: Vec<MailMergeInput> = (docs.iter().zip(&results).zip(&lines))
        .map(|((d, r), l)| MailMergeInput {
            source: d.source.display().to_string(),
            result: r,
            intervals: l,
        })
        .collect();
    mailbench_results::mail::merge::merge(&inputs)
}

/// summary.txt of a mail-run result (merged or not).
pub fn summary_text(d: &MailDoc) -> Result<String> {
    Ok(crate::summary::mail::mail_run(&typed(d)?))
}
