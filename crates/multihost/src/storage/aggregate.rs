//! Rank 0's side of the end of a test over ranks: the ranks' result files copied
//! beside its own, and one result from them (the typed merge of `storage run`, the
//! per-rank results of the other storage commands with their totals, the mail run's
//! merge), written through the runner's output path.

use super::{Command, Outcome, Part};
use crate::watch::Failure;
use mailbench_base::rundir::{RunDir, TestLog, write_atomic};
use mailbench_base::{Error, Result};
use mailbench_results::ranks::{
    BackupTotals, PerRank, RankResult, RankTotals, Ranks, RanksFailed, RecoverTotals, WithRanks,
};
use mailbench_results::{AnyResult, Status, Verdict};
use mailbench_runner::files::{Doc, StorageDoc};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A gathered rank's result file: (rank, host, path).
type RankFile = (usize, String, PathBuf);

/// Rank 0: one result from the ranks' parts (with failures named first),
/// written through the runner's output path.
pub(super) fn aggregate(
    top: &Path,
    cmd: Command,
    hosts: &[String],
    parts: &[Part],
    failures: &[Failure],
) -> Result<Outcome> {
    let dir = RunDir {
        path: top.to_path_buf(),
        log: TestLog::open(&top.join("test.log"))?,
    };
    let files = copy_rank_files(&dir, parts)?;
    let fail_reasons: Vec<String> = failures.iter().map(|f| f.reason.clone()).collect();
    for r in &fail_reasons {
        dir.log.line(format!("FAIL: {r}"));
    }
    let gathered: Vec<usize> = parts.iter().map(|p| p.rank).collect();
    let multihost = Ranks::of(hosts, &gathered, failures);
    let failed_first = |summary: String| {
        if fail_reasons.is_empty() {
            summary
        } else {
            format!("FAIL: {}\n\n{summary}", fail_reasons.join("\nFAIL: "))
        }
    };
    match cmd {
        Command::Run => {
            let (result, summary) = aggregate_run(&dir, &files, &fail_reasons)?;
            let summary = failed_first(summary);
            let with = WithRanks { result, multihost };
            mailbench_runner::output::write_with(&dir, &with, &summary, true)?;
            Ok(Outcome::of_result(&with.result, dir.path, summary))
        }
        Command::MailRun => {
            let Some((result, summary)) = crate::mail::aggregate(&dir, &files, &fail_reasons)?
            else {
                // No generator's result arrived: the ranks' failure result.
                let failed = RanksFailed::new(cmd.kind(), hosts, failures);
                let summary = format!("FAIL: {}\n", fail_reasons.join("\nFAIL: "));
                mailbench_runner::output::write_with(&dir, &failed, &summary, false)?;
                let line = mailbench_runner::output::verdict_line(&failed.verdict, &dir.path);
                return Ok(Outcome::new(failed.verdict, line, dir.path, summary));
            };
            let summary = failed_first(summary);
            let with = WithRanks { result, multihost };
            mailbench_runner::output::write_with(&dir, &with, &summary, true)?;
            Ok(Outcome::of_result(&with.result, dir.path, summary))
        }
        Command::MailSweep => Err(Error::runtime(
            "a mail sweep gathers its results per level (a bug: please report it)",
        )),
        Command::Init | Command::Verify | Command::Backup | Command::Recover => {
            let (result, summary) = aggregate_per_rank(cmd, &files, &fail_reasons)?;
            let summary = failed_first(summary);
            let line = mailbench_runner::output::verdict_line(&result.verdict, &dir.path);
            let verdict = result.verdict.clone();
            let with = WithRanks { result, multihost };
            mailbench_runner::output::write_with(&dir, &with, &summary, false)?;
            Ok(Outcome::new(verdict, line, dir.path, summary))
        }
    }
}

/// Every rank's files beside rank 0's (copies when the ranks do not share
/// the results folder), so `report merge rank-*/` works here.
fn copy_rank_files(dir: &RunDir, parts: &[Part]) -> Result<Vec<RankFile>> {
    let mut files = Vec::new();
    for p in parts {
        let rd = dir.path.join(format!("rank-{}", p.rank));
        let _ = std::fs::create_dir_all(&rd);
        let f = rd.join("result.json");
        if !f.exists() {
            write_atomic(&f, p.result.as_bytes())?;
            if !p.intervals.is_empty() {
                write_atomic(&rd.join("intervals.jsonl"), p.intervals.as_bytes())?;
            }
        }
        files.push((p.rank, p.host.clone(), f));
        dir.log.line(format!(
            "rank {} on host {}: result gathered",
            p.rank, p.host
        ));
    }
    Ok(files)
}

/// The same as `report merge` of the ranks' result files.
fn aggregate_run(
    dir: &RunDir,
    files: &[RankFile],
    failures: &[String],
) -> Result<(AnyResult, String)> {
    let mut docs: Vec<StorageDoc> = Vec::new();
    for (_, _, f) in files {
        match mailbench_runner::files::load(f)? {
            Doc::Storage(d) => docs.push(*d),
            other => {
                return Err(Error::runtime(format!(
                    "{} is a {} result, not storage-run",
                    f.display(),
                    other.kind()
                )));
            }
        }
    }
    let judged = |r: &mut mailbench_storage::result::StorageResult| {
        r.verdict = std::mem::replace(&mut r.verdict, Verdict::from_reasons(Vec::new()))
            .with_failures_first(failures);
    };
    if docs.len() == 1 {
        let d = &mut docs[0];
        judged(&mut d.result);
        let r = AnyResult::StorageRun(Box::new(d.result.clone()));
        let _ = std::fs::copy(
            d.source.with_file_name("intervals.jsonl"),
            dir.file("intervals.jsonl"),
        );
        let text = mailbench_runner::files::summary(&r);
        return Ok((r, text));
    }
    let mut out = mailbench_runner::files::merge_storage(&docs)?;
    judged(&mut out.result);
    if !out.intervals.is_empty() {
        dir.write_jsonl("intervals.jsonl", &out.intervals)?;
    }
    let r = AnyResult::StorageRun(Box::new(out.result));
    let summary = mailbench_runner::files::summary(&r);
    Ok((r, summary))
}

/// A rank's own result file, typed.
fn rank_result(f: &Path) -> Result<AnyResult> {
    let text = std::fs::read_to_string(f)
        .map_err(|e| Error::runtime(format!("cannot read {}: {e}", f.display())))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| Error::runtime(format!("{}: {e}", f.display())))?;
    AnyResult::from_value(v).map_err(|e| Error::runtime(format!("{}: {e}", f.display())))
}

/// Sums of the ranks' backups and replays, for the totals line.
#[derive(Default)]
struct Sums {
    backup_mb: f64,
    backup_s: f64,
    backup_dbs: usize,
    replayed: u64,
    replay_s: f64,
}

/// The summary lines of one rank's own result; adds to `sums`.
fn rank_lines(rank: usize, host: &str, r: &AnyResult, sums: &mut Sums) -> String {
    let mut s = String::new();
    match r {
        AnyResult::StorageInit(r) => {
            for d in &r.init.databases {
                s.push_str(&format!("  rank {rank} {host}: {}\n", d.line()));
            }
        }
        AnyResult::StorageBackup(r) => {
            let mb = r.databases.iter().map(|d| d.size_mb).sum::<f64>();
            let (dbs, secs) = (r.databases.len(), r.seconds);
            sums.backup_mb += mb;
            sums.backup_s = sums.backup_s.max(secs);
            sums.backup_dbs += dbs;
            s.push_str(&format!(
                "  rank {rank} {host}: {dbs} databases, {mb:.0} MB in {secs:.1} s, {:.1} MB/s\n",
                r.total_mb_per_s
            ));
        }
        AnyResult::StorageRecover(r) => {
            for i in &r.instances {
                let (files, secs) = (i.log_files_replayed, i.seconds);
                sums.replayed += files;
                sums.replay_s += secs;
                s.push_str(&format!(
                    "  rank {rank} {host}: {} replayed {files} log files in {secs:.2} s \
                     ({:.4} s per log file)\n",
                    i.name, i.seconds_per_log_file
                ));
            }
        }
        AnyResult::StorageVerify(r) => {
            s.push_str(&format!(
                "  rank {rank} {host}: {} databases, {} bad pages or log blocks\n",
                r.verify.databases.len(),
                r.verify.bad_total
            ));
        }
        other => s.push_str(&format!(
            "  rank {rank} {host}: a {} result\n",
            other.kind()
        )),
    }
    s
}

/// The totals of backup and recover over the ranks, and their line.
fn totals(cmd: Command, sums: &Sums) -> Option<(RankTotals, String)> {
    match cmd {
        Command::Backup => {
            // The ranks read at the same time: total MB/s over the slowest rank's time.
            let Sums {
                backup_mb,
                backup_s,
                backup_dbs,
                ..
            } = *sums;
            let mb_per_s = if backup_s > 0.0 {
                backup_mb / backup_s
            } else {
                0.0
            };
            Some((
                RankTotals::Backup(BackupTotals {
                    databases: backup_dbs,
                    size_mb: backup_mb,
                    seconds: backup_s,
                    total_mb_per_s: mb_per_s,
                }),
                format!(
                    "  all ranks: {backup_dbs} databases, {backup_mb:.0} MB in {backup_s:.1} s, \
                     {mb_per_s:.1} MB/s\n"
                ),
            ))
        }
        Command::Recover => {
            let (replayed, replay_s) = (sums.replayed, sums.replay_s);
            let per = if replayed > 0 {
                replay_s / replayed as f64
            } else {
                0.0
            };
            Some((
                RankTotals::Recover(RecoverTotals {
                    log_files_replayed: replayed,
                    seconds_sum: replay_s,
                    seconds_per_log_file: per,
                }),
                format!(
                    "  all ranks: {replayed} log files replayed, {replay_s:.2} s in sum, \
                     {per:.4} s per log file\n"
                ),
            ))
        }
        Command::Init | Command::Verify | Command::Run | Command::MailRun | Command::MailSweep => {
            None
        }
    }
}

/// Every rank's own result under `hosts`, one verdict from their reasons
/// (failed ranks first), totals for backup and recover.
fn aggregate_per_rank(
    cmd: Command,
    files: &[RankFile],
    failures: &[String],
) -> Result<(PerRank, String)> {
    let mut hosts = Vec::new();
    let mut reasons = Vec::new();
    let mut summary = format!("mailbench {} over {} ranks\n", cmd.kind(), files.len());
    let mut sums = Sums::default();
    for (rank, host, f) in files {
        let r = rank_result(f)?;
        for x in &r.verdict().reasons {
            reasons.push(format!("rank {rank} on host {host}: {x}"));
        }
        summary.push_str(&rank_lines(*rank, host, &r, &mut sums));
        hosts.push(RankResult {
            rank: *rank,
            host: host.clone(),
            result: r,
        });
    }
    let totals = totals(cmd, &sums).map(|(t, line)| {
        summary.push_str(&line);
        t
    });
    let mut verdict = Verdict::from_reasons(reasons).with_failures_first(failures);
    // Interrupted ranks (and no failed ones): the whole test was interrupted.
    if failures.is_empty()
        && hosts
            .iter()
            .any(|h| h.result.verdict().status == Status::Interrupted)
    {
        verdict.status = Status::Interrupted;
    }
    summary.push_str(&format!("Verdict: {}\n", verdict.label()));
    let mut run = mailbench_results::RunHeader::begin(cmd.kind());
    run.finish(Duration::ZERO);
    let result = PerRank {
        run,
        verdict,
        hosts,
        totals,
    };
    Ok((result, summary))
}
