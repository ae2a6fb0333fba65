//! summary.txt of `storage suite`: the test program's verdict and a line per
//! stage with the figures a solution report quotes (each stage's own
//! summary.txt is in its folder).

use mailbench_results::storage::suite::{Stage, StageFigures, StorageSuiteResult, SuiteStage};
use std::fmt::Write as _;

/// summary.txt of a storage-suite result.
pub fn storage_suite(r: &StorageSuiteResult) -> String {
    let mut o = String::new();
    super::test_summary_head(&mut o, "mailbench storage test program", &r.verdict, &r.run);
    super::version_and_times(&mut o, &r.run);
    if r.hosts.len() > 1 {
        let _ = writeln!(o, "  Hosts                   {}", r.hosts.join(", "));
    }
    let plan: Vec<&str> = r.plan.stages.iter().map(|s| s.name()).collect();
    let _ = writeln!(o, "  Stages                  {}", plan.join(", "));
    let _ = writeln!(o, "\nStages");
    let _ = writeln!(
        o,
        "  {:<12} {:<11} {:>10}  {:<22} figures",
        "stage", "result", "seconds", "folder"
    );
    for s in &r.stages {
        let _ = writeln!(
            o,
            "  {:<12} {:<11} {:>10.1}  {:<22} {}",
            s.stage.name(),
            s.verdict.label(),
            s.duration_s,
            s.dir,
            figures_text(s)
        );
    }
    for p in &r.plan.stages {
        if !r.stages.iter().any(|s| s.stage == *p) {
            let _ = writeln!(o, "  {:<12} {:<11}", p.name(), "not run");
        }
    }
    o
}

/// A stage's figures in one line.
pub fn figures_text(s: &SuiteStage) -> String {
    let f = &s.figures;
    let mut parts = Vec::new();
    match s.stage {
        Stage::Init => {
            if let (Some(mb), Some(rate)) = (f.created_mb, f.created_mb_per_s) {
                parts.push(format!(
                    "{} databases, {mb:.0} MB written at {rate:.0} MB/s",
                    f.databases
                ));
            } else {
                parts.push(format!("{} databases", f.databases));
            }
        }
        Stage::Performance | Stage::Stress => run_figures(f, &mut parts),
        Stage::Backup => {
            if let (Some(all), Some(per)) = (f.backup_mb_per_s, f.backup_mb_per_s_per_db) {
                parts.push(format!("{all:.1} MB/s in all, {per:.1} MB/s per database"));
            }
        }
        Stage::Recover => {
            if let Some(n) = f.log_files_replayed {
                let per = f.seconds_per_log_file.unwrap_or(0.0);
                parts.push(format!("{n} log files replayed, {per:.4} s per log file"));
            }
        }
        Stage::Verify => {}
    }
    if let Some(b) = f.bad_pages {
        parts.push(format!("{b} bad pages or log blocks"));
    }
    if f.hosts > 1 {
        parts.push(format!("{} hosts", f.hosts));
    }
    parts.join("; ")
}

fn run_figures(f: &StageFigures, parts: &mut Vec<String>) {
    if let Some(iops) = f.transactional_iops {
        let target = f
            .target_iops
            .map(|t| format!("{t:.0}"))
            .unwrap_or_else(|| "none".into());
        parts.push(format!("{iops:.0} transactional IOPS (target {target})"));
    }
    let ms = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "–".into());
    if f.db_read_avg_ms.is_some() || f.log_write_avg_ms.is_some() {
        parts.push(format!(
            "db read avg {} max {} ms, log write avg {} max {} ms",
            ms(f.db_read_avg_ms),
            ms(f.db_read_max_ms),
            ms(f.log_write_avg_ms),
            ms(f.log_write_max_ms)
        ));
    }
}
