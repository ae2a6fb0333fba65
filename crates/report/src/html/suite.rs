//! report.html of a storage suite (`kind` "storage-suite"): the solution
//! report in the published documents' structure — overview, the test
//! program's results stage by stage against their limits, and each stage's
//! own report as an appendix (read from the stage's folder beside the
//! suite's result.json). Printable: each appendix starts a page.

use crate::fmt::{fixed, num};
use crate::html::tpl::{
    Ident, Kv, Row, Table, Tile, VerdictView, identity, kv, page_data, render, table, td,
    td_judged, td_t, tile, verdict_view,
};
use crate::load::OtherDoc;
use mailbench_results::Status;
use mailbench_results::storage::suite::{Stage, StorageSuiteResult, SuiteStage};
use serde::Serialize;
use std::path::Path;

/// The view model of templates/suite.html.
#[derive(Serialize)]
struct SuitePage<'a> {
    title: String,
    data: String,
    heading: String,
    verdict: VerdictView,
    identity: Vec<Ident>,
    tiles: Vec<Tile>,
    program: Kv,
    simulated: Kv,
    tested: Option<Kv>,
    stages: Table,
    appendices: Vec<Appendix>,
    test_log: Option<&'a str>,
}

/// A stage's own report, embedded.
#[derive(Serialize)]
struct Appendix {
    id: String,
    title: String,
    /// A run's report body (its ids prefixed), or why it is missing.
    body: String,
    /// The other stages' summary.txt (their published tables in text).
    text: Option<String>,
    missing: Option<String>,
}

/// The page of a storage-suite result; None when it does not read as one.
pub fn suite_page(d: &OtherDoc) -> Option<Result<String, minijinja::Error>> {
    let r: StorageSuiteResult = serde_json::from_value(d.raw.clone()).ok()?;
    let folder = d.source.parent().unwrap_or(Path::new("."));
    let host = if r.hosts.is_empty() {
        r.run.host.hostname.clone()
    } else {
        r.hosts.join(", ")
    };
    let page = SuitePage {
        title: format!(
            "mailbench storage solution report — {host} — {}",
            r.verdict.label()
        ),
        data: page_data(&d.raw),
        heading: format!("mailbench storage solution report — {host}"),
        verdict: verdict_view(&r.verdict, "storage test program"),
        identity: identity(identity_items(&r)),
        tiles: tiles(&r),
        program: program(&r),
        simulated: simulated(&r),
        tested: crate::html::tpl::tested_configuration(&r.run),
        stages: stages_table(&r),
        appendices: (r.stages.iter())
            .enumerate()
            .map(|(i, s)| appendix(folder, i, s))
            .collect(),
        test_log: d.test_log.as_deref(),
    };
    Some(render("suite.html", &page))
}

fn identity_items(r: &StorageSuiteResult) -> Vec<(&'static str, String)> {
    vec![
        ("Host", r.run.host.hostname.clone()),
        ("OS", r.run.host.os.clone()),
        ("Kernel", r.run.host.kernel.clone()),
        ("mailbench", r.run.tool_version.clone()),
        ("Started", r.run.started.clone()),
        ("Ended", r.run.ended.clone()),
        ("Duration", format!("{} s", num(r.run.duration_s))),
        ("Command", r.run.command_line.join(" ")),
    ]
}

fn stage(r: &StorageSuiteResult, s: Stage) -> Option<&SuiteStage> {
    r.stages.iter().rev().find(|x| x.stage == s)
}

/// The overview tiles: the figures a solution report leads with.
fn tiles(r: &StorageSuiteResult) -> Vec<Tile> {
    let mut out = Vec::new();
    if let Some(p) = stage(r, Stage::Performance) {
        let f = &p.figures;
        let iops = f.transactional_iops.map(num).unwrap_or_else(|| "–".into());
        let target = f
            .target_iops
            .map(|t| format!("target {}", num(t)))
            .unwrap_or_else(|| "no target set".into());
        let short = matches!((f.transactional_iops, f.target_iops), (Some(a), Some(t)) if a < t);
        out.push(tile(
            "fig-iops",
            "Achieved transactional IOPS",
            iops,
            target,
            Some(short),
        ));
        let bad = p.verdict.status != Status::Pass;
        let lat = |v: Option<f64>| {
            v.map(|x| format!("{} ms", fixed(x, 3)))
                .unwrap_or_else(|| "–".into())
        };
        out.push(tile(
            "fig-db-read",
            "Database read latency",
            lat(f.db_read_avg_ms),
            format!("avg · max {}", lat(f.db_read_max_ms)),
            Some(bad),
        ));
        out.push(tile(
            "fig-log-write",
            "Log write latency",
            lat(f.log_write_avg_ms),
            format!("avg · max {}", lat(f.log_write_max_ms)),
            Some(bad),
        ));
    }
    if let Some(b) = stage(r, Stage::Backup).and_then(|b| b.figures.backup_mb_per_s_per_db) {
        out.push(tile(
            "fig-backup",
            "Backup MB/s per database",
            fixed(b, 1),
            "sequential 256 KiB reads",
            None,
        ));
    }
    if let Some(s) = stage(r, Stage::Recover).and_then(|s| s.figures.seconds_per_log_file) {
        out.push(tile(
            "fig-replay",
            "Seconds per log file replayed",
            fixed(s, 4),
            "soft recovery",
            None,
        ));
    }
    let bad: u64 = r.stages.iter().filter_map(|s| s.figures.bad_pages).sum();
    out.push(tile(
        "fig-bad",
        "Bad pages and log blocks",
        bad.to_string(),
        "every check of the program",
        Some(bad > 0),
    ));
    out
}

/// What the program was asked to run.
fn program(r: &StorageSuiteResult) -> Kv {
    let p = &r.plan;
    let names: Vec<&str> = p.stages.iter().map(|s| s.name()).collect();
    let mut rows = vec![
        ("Stages", names.join(", ")),
        (
            "Performance test",
            format!("{} s measured", num(p.performance_s)),
        ),
    ];
    if p.stress_s > 0.0 {
        rows.push(("Stress test", format!("{} s measured", num(p.stress_s))));
    }
    rows.push((
        "Soft recovery",
        format!("{} log files per database", p.log_files),
    ));
    if r.hosts.len() > 1 {
        rows.push(("Hosts", r.hosts.join(", ")));
    }
    kv("program-table", rows)
}

/// What the databases simulate (the design the program validates).
fn simulated(r: &StorageSuiteResult) -> Kv {
    let s = &r.simulated;
    let per_host = if r.hosts.len() > 1 { " per host" } else { "" };
    let mut rows = vec![("Profile", s.profile.clone())];
    rows.push((
        "Databases",
        format!(
            "{}{per_host} of {}",
            s.databases,
            crate::fmt::bytes(s.database_bytes as f64)
        ),
    ));
    if let Some(m) = s.mailboxes {
        rows.push(("Mailboxes", format!("{}{per_host}", num(m as f64))));
    }
    if let Some(i) = s.iops_per_mailbox {
        rows.push(("IOPS per mailbox", fixed(i, 3)));
    }
    let target = s
        .target_iops
        .map(|t| format!("{}{per_host}", num(t)))
        .unwrap_or_else(|| "none (as fast as the storage goes)".into());
    rows.push(("Target transactional IOPS", target));
    rows.push(("Database copies", s.copies.to_string()));
    rows.push(("Threads", format!("{}{per_host}", s.threads)));
    rows.push((
        "Database cache",
        format!(
            "{} per database",
            crate::fmt::bytes(s.cache_max_per_db as f64)
        ),
    ));
    rows.push(("Database folders", s.volumes.join(", ")));
    if !s.log_volumes.is_empty() {
        rows.push(("Log folders", s.log_volumes.join(", ")));
    }
    kv("simulated-table", rows)
}

/// The stages against their criteria.
fn stages_table(r: &StorageSuiteResult) -> Table {
    let rows: Vec<Row> = (r.stages.iter())
        .map(|s| {
            let bad = s.verdict.status != Status::Pass;
            vec![
                td_t(s.stage.title()),
                td_judged(s.verdict.label(), bad),
                td(&fixed(s.duration_s, 1)),
                td_t(&crate::summary::suite::figures_text(s)),
                td_t(&s.verdict.reasons.join("; ")),
                td_t(&s.dir),
            ]
        })
        .collect();
    table(
        "stages-table",
        &[],
        &["stage", "result", "seconds", "figures", "reasons", "folder"],
        rows,
    )
}

/// A stage's own report: a run's page body (ids prefixed so they stay
/// unique), the other stages' summary.txt.
fn appendix(folder: &Path, i: usize, s: &SuiteStage) -> Appendix {
    let id = format!("appendix-{}", s.stage.name());
    let title = format!(
        "Appendix {}: {}",
        (b'A' + (i as u8 % 26)) as char,
        s.stage.title()
    );
    let dir = folder.join(&s.dir);
    let embedded = match s.stage {
        Stage::Performance | Stage::Stress => crate::load::load(&dir.join("result.json"))
            .map_err(|e| e.to_string())
            .and_then(|doc| crate::html::render(&doc).map_err(|e| e.to_string()))
            .and_then(|page| body_of(&page, &id).ok_or_else(|| "its page has no body".into()))
            .map(|b| (b, None)),
        _ => mailbench_base::limits::read_text_capped(
            &dir.join("summary.txt"),
            mailbench_base::limits::MAX_RESULT_FILE_BYTES,
            "summary",
        )
        .map(|t| (String::new(), Some(t)))
        .map_err(|e| e.to_string()),
    };
    match embedded {
        Ok((body, text)) => Appendix {
            id,
            title,
            body,
            text,
            missing: None,
        },
        Err(e) => Appendix {
            id,
            title,
            body: String::new(),
            text: None,
            missing: Some(format!(
                "The stage's report could not be read from {}: {e}",
                s.dir
            )),
        },
    }
}

/// The content of a page's `<main>` before its footer, every `id="x"` made
/// `id="{prefix}-x"` (and `href="#x"` to match).
fn body_of(page: &str, prefix: &str) -> Option<String> {
    let start = page.find("<main>")? + "<main>".len();
    let end = page[start..].find("<footer>")? + start;
    let body = &page[start..end];
    Some(
        body.replace(" id=\"", &format!(" id=\"{prefix}-"))
            .replace(" href=\"#", &format!(" href=\"#{prefix}-")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_body_is_cut_at_main_and_its_ids_prefixed() {
        let page =
            "<html><main>\n<h1 id=\"a\">x</h1><a href=\"#a\">y</a>\n<footer>f</footer></main>";
        let b = body_of(page, "p").unwrap();
        assert_eq!(b, "\n<h1 id=\"p-a\">x</h1><a href=\"#p-a\">y</a>\n");
        assert!(body_of("<html></html>", "p").is_none());
    }
}
