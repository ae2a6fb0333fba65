//! `mailbench report render|merge|compare`. Keys of the `[report]` section of
//! `--config`: `tolerance` (compare) and `metrics_listen` (storage run).

use crate::Global;
use mailbench_base::config::ConfigFile;
use mailbench_base::rundir::{RunDir, write_text};
use mailbench_base::{Error, ExitStatus, Result, parse_percent};
use mailbench_report::load::{Doc, MailDoc, StorageDoc};
use mailbench_report::{ReportConfig, compare, mailmerge, merge};
use mailbench_results::AnyResult;
use mailbench_results::Merged;
use mailbench_results::Status;
use std::path::PathBuf;

#[derive(clap::Subcommand, Debug)]
pub enum ReportCommand {
    /// Re-render a result.json as report.html / summary.txt.
    Render(RenderArgs),
    /// Combine results from several hosts into one (exact histogram merge;
    /// storage-run or mail-run results).
    Merge(MergeArgs),
    /// Compare two results; fails (exit 1) on regression beyond a tolerance.
    Compare(CompareArgs),
}

#[derive(clap::Args, Debug)]
pub struct RenderArgs {
    /// result.json files or run folders; report.html (and summary.txt for
    /// storage-run and mail-run results) are written beside each.
    #[arg(required = true, value_name = "RESULT")]
    pub results: Vec<PathBuf>,
    /// Write the HTML to this file instead (one result only).
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The hosts' result.json files (or run folders) of the same test:
    /// storage-run results, or mail-run results of load generators that
    /// each drove a slice of the users.
    #[arg(required = true, num_args = 2.., value_name = "RESULT")]
    pub results: Vec<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// The baseline result.json (or run folder).
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// The result to judge against it.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// Allowed worsening before a figure counts as a regression [default: 5%].
    #[arg(long, value_parser = parse_percent, value_name = "PCT")]
    pub tolerance: Option<f64>,
}

fn config(global: &Global) -> Result<ReportConfig> {
    ConfigFile::load_optional(global.config.as_deref())?.section("report")
}

pub fn run(cmd: ReportCommand, global: &Global) -> Result<ExitStatus> {
    match cmd {
        ReportCommand::Render(a) => render(&a, global),
        ReportCommand::Merge(a) => merge_cmd(&a, global),
        ReportCommand::Compare(a) => compare_cmd(&a, global),
    }
}

fn render(a: &RenderArgs, global: &Global) -> Result<ExitStatus> {
    config(global)?;
    if a.html.is_some() && a.results.len() > 1 {
        return Err(Error::usage(
            "--html names one output file: give one result with it",
        ));
    }
    // Read everything first: a bad input writes nothing.
    let mut docs = Vec::new();
    for p in &a.results {
        docs.push(mailbench_report::load(p)?);
    }
    let mut written = Vec::new();
    for doc in &docs {
        let dir = doc
            .source()
            .parent()
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."));
        let html_path = a.html.clone().unwrap_or_else(|| dir.join("report.html"));
        write_text(&html_path, &mailbench_report::try_render_html(doc)?)?;
        written.push(html_path.display().to_string());
        if a.html.is_none() {
            let summary = match doc {
                Doc::Storage(d) => Some(storage_summary(d)),
                Doc::Mail(d) => Some(mailmerge::summary_text(d)?),
                Doc::Other(_) => None,
            };
            if let Some(text) = summary {
                let p = dir.join("summary.txt");
                write_text(&p, &text)?;
                written.push(p.display().to_string());
            }
        }
    }
    if global.json {
        #[derive(serde::Serialize)]
        struct Written<'a> {
            written: &'a [String],
        }
        let line = serde_json::to_string(&Written { written: &written });
        println!("{}", line.unwrap_or_default());
    } else if !global.quiet {
        for w in &written {
            println!("{w}");
        }
    }
    Ok(ExitStatus::Pass)
}

fn storage_summary(d: &StorageDoc) -> String {
    mailbench_report::summary::render(&AnyResult::StorageRun(Box::new(d.result.clone())))
}

fn merge_cmd(a: &MergeArgs, global: &Global) -> Result<ExitStatus> {
    let cfg = ConfigFile::load_optional(global.config.as_deref())?;
    let _: ReportConfig = cfg.section("report")?;
    // Read everything first: a bad input writes nothing.
    let mut all: Vec<Doc> = Vec::new();
    for p in &a.results {
        let doc = mailbench_report::load(p)?;
        if !matches!(doc, Doc::Storage(_) | Doc::Mail(_)) {
            return Err(Error::usage(format!(
                "cannot merge {}: it is a {} result; report merge combines storage-run or mail-run results",
                doc.source().display(),
                doc.kind()
            )));
        }
        if let Some(first) = all.first()
            && first.kind() != doc.kind()
        {
            return Err(Error::usage(format!(
                "cannot merge {} and {}: the first is a {} result, the second a {} result; merge only results of the same test",
                first.source().display(),
                doc.source().display(),
                first.kind(),
                doc.kind()
            )));
        }
        all.push(doc);
    }
    // Results of different tests are named first, then a damaged intervals file.
    check_same_test(&all)?;
    for doc in &all {
        if let Some(problem) = doc.intervals_problem() {
            return Err(Error::usage(format!(
                "cannot merge {}: {problem}. A merge recomputes the figures from every interval: \
                 merge the results whose intervals.jsonl is whole, or run the test again",
                doc.source().display()
            )));
        }
    }
    let common = global.common(&cfg);
    let base = common.output.clone();
    if matches!(all.first(), Some(Doc::Mail(_))) {
        let docs: Vec<MailDoc> = all
            .into_iter()
            .filter_map(|d| match d {
                Doc::Mail(m) => Some(*m),
                _ => None,
            })
            .collect();
        return merge_mail(&docs, &base, &common);
    }
    let docs: Vec<StorageDoc> = all
        .into_iter()
        .filter_map(|d| match d {
            Doc::Storage(s) => Some(*s),
            _ => None,
        })
        .collect();
    let out = merge::merge(&docs)?;
    let dir = merge_dir(
        &base,
        out.merged(),
        ("results", "hosts"),
        &out.result.verdict,
        &out.intervals,
    )?;
    let status = pass_or_fail(&out.result.verdict);
    let result = AnyResult::StorageRun(Box::new(out.result));
    mailbench_runner::finish(&dir, &result, &common)?;
    Ok(status)
}

/// Refuses (exit 2) results that are not of the same test, before their
/// intervals are judged.
fn check_same_test(all: &[Doc]) -> Result<()> {
    if all.len() < 2 {
        return Ok(());
    }
    if matches!(all.first(), Some(Doc::Mail(_))) {
        let docs: Vec<&MailDoc> = (all.iter())
            .filter_map(|d| match d {
                Doc::Mail(m) => Some(&**m),
                _ => None,
            })
            .collect();
        return mailmerge::check_compatible(&docs);
    }
    let docs: Vec<&StorageDoc> = (all.iter())
        .filter_map(|d| match d {
            Doc::Storage(s) => Some(&**s),
            _ => None,
        })
        .collect();
    merge::check_compatible_docs(&docs)
}

/// The run folder of a merge: its test log names the sources, what was merged
/// (`what`: the results and where they came from) and the verdict; the merged
/// intervals go to intervals.jsonl.
fn merge_dir<H, I: serde::Serialize>(
    base: &std::path::Path,
    m: &Merged<H>,
    what: (&str, &str),
    verdict: &mailbench_results::Verdict,
    intervals: &[I],
) -> Result<RunDir> {
    let dir = mailbench_runner::new_run_folder(base, "report-merge")?;
    for (i, s) in m.sources.iter().enumerate() {
        dir.log.line(format!("merge: source {}: {s}", i + 1));
    }
    dir.log.line(format!(
        "merged {} {} from {} {}: {}",
        m.sources.len(),
        what.0,
        m.hosts.len(),
        what.1,
        verdict.label()
    ));
    if !intervals.is_empty() {
        dir.write_jsonl("intervals.jsonl", intervals)?;
    }
    Ok(dir)
}

/// A merge passes or fails (its inputs' errors and interruptions included).
fn pass_or_fail(v: &mailbench_results::Verdict) -> ExitStatus {
    if v.status == Status::Pass {
        ExitStatus::Pass
    } else {
        ExitStatus::Fail
    }
}

/// `report merge` of mail-run results (one per load generator).
fn merge_mail(
    docs: &[MailDoc],
    base: &std::path::Path,
    common: &mailbench_runner::Common,
) -> Result<ExitStatus> {
    let out = mailmerge::merge_typed(docs)?;
    let dir = merge_dir(
        base,
        out.merged(),
        ("mail results", "load generators"),
        &out.result.verdict,
        &out.intervals,
    )?;
    let status = pass_or_fail(&out.result.verdict);
    let result = AnyResult::MailRun(Box::new(out.result));
    mailbench_runner::finish(&dir, &result, common)?;
    Ok(status)
}

fn compare_cmd(a: &CompareArgs, global: &Global) -> Result<ExitStatus> {
    let cfg = config(global)?;
    let tol = match (a.tolerance, &cfg.tolerance) {
        (Some(t), _) => t,
        (None, Some(p)) => p
            .value()
            .map_err(|e| Error::usage(format!("config [report] tolerance: {e}")))?,
        (None, None) => 5.0,
    };
    let base = mailbench_report::load(&a.base)?;
    let new = mailbench_report::load(&a.new)?;
    let c = compare::compare(&base, &new, tol)?;
    if global.json {
        println!("{}", serde_json::to_string(&c).unwrap_or_default());
    } else if !global.quiet {
        print!("{}", compare::render_text(&c));
    }
    Ok(if c.regressions > 0 {
        ExitStatus::Fail
    } else {
        ExitStatus::Pass
    })
}
