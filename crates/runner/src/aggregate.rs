//! Rank 0's side of the end of a test over several ranks: the ranks' result
//! files copied beside its own, and one result from them (the typed merge of
//! `storage run` and of `mail run`, the per-rank results of the other
//! commands with their totals), written through the one output path.

use crate::output::{Outcome, verdict_line, write_with};
use crate::world::{Command, Run, interrupt_check};
use mailbench_base::rundir::{RunDir, TestLog, write_atomic};
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_multihost::watch::Failure;
use mailbench_report::load::{Doc, MailDoc, StorageDoc};
use mailbench_results::ranks::{
    BackupTotals, PerRank, RankResult, RankTotals, Ranks, RanksFailed, RecoverTotals, WithRanks,
};
use mailbench_results::{AnyResult, Status, Verdict};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a rank sends rank 0 at the end of its part.
#[derive(Serialize, Deserialize)]
pub(crate) struct Part {
    pub(crate) rank: usize,
    pub(crate) host: String,
    /// result.json of the rank, as written.
    pub(crate) result: String,
    pub(crate) intervals: String,
}

/// What a rank's part became: the outcome to print, and the result rank 0
/// wrote (or this rank's own).
pub(crate) struct Gathered {
    pub(crate) outcome: Outcome,
    pub(crate) written: Written,
}

/// The result a part left in its folder, typed.
pub(crate) enum Written {
    /// A result of its kind (one rank's own, or the typed merge of several).
    One(AnyResult),
    /// Every rank's own result with totals.
    PerRank(Box<PerRank>),
    /// The ranks' failure result (no rank's result arrived).
    Failed,
}

/// After the rank's own part: one rank gives its result as it is; several
/// are gathered to rank 0, which writes the aggregate; then the side channel
/// is closed.
pub(crate) fn finish(run: Run, own: Result<(RunDir, AnyResult)>) -> Result<Outcome> {
    let g = gather(&run, own)?;
    run.end();
    Ok(g.outcome)
}

/// After the rank's own part: one rank gives its result as it is; several
/// are gathered to rank 0, which writes the aggregate (the side channel
/// stays open: a suite's next stage uses it).
pub(crate) fn gather(run: &Run, own: Result<(RunDir, AnyResult)>) -> Result<Gathered> {
    let (dir, result) = match own {
        Ok(o) => o,
        Err(e) => {
            // A command's error after its folder exists goes into its test.log too.
            if let Ok(d) = run.part_dir(&run.top) {
                d.log.line(format!("error: {e}"));
            }
            run.failed(&e);
            return Err(e);
        }
    };
    if run.size == 1 {
        return Ok(Gathered {
            outcome: Outcome::of_result(&result, dir.path),
            written: Written::One(result),
        });
    }
    let part = Part {
        rank: run.rank,
        host: run.host.clone(),
        result: read_own(&dir, "result.json")?,
        intervals: read_own_if_any(&dir, "intervals.jsonl")?,
    };
    run.phase("the gathering of results");
    let bytes = serde_json::to_vec(&part).map_err(|e| Error::runtime(e.to_string()))?;
    let skip = || run.failed_ranks();
    // Rank 0 waits for every rank that has not failed; failures are skipped.
    let gathered = run.t.gather(&bytes, &skip, &mut || {
        if run.rank > 0 {
            interrupt_check(&run.interrupt)
        } else {
            Ok(())
        }
    })?;
    if run.rank > 0 {
        return Ok(Gathered {
            outcome: Outcome::of_result(&result, dir.path),
            written: Written::One(result),
        });
    }
    let failures = run.failures();
    let parts = read_parts(&dir, gathered);
    let g = aggregate(&run.top, run.cmd, &run.hosts, &parts, &failures)?;
    if !failures.is_empty() {
        // The failed rank cannot take part in MPI_Finalize: end the job.
        crate::output::print_before_abort(&g.outcome);
        run.t.abort(ExitStatus::Fail.code());
    }
    Ok(g)
}

/// A file of this rank's part, as written (its absence is an error: the
/// part was written just before).
pub(crate) fn read_own(dir: &RunDir, name: &str) -> Result<String> {
    let f = dir.file(name);
    std::fs::read_to_string(&f).map_err(|e| Error::io("cannot read", &f, e))
}

/// A file a part may not write (intervals.jsonl of a command without
/// intervals): empty when absent; any other failure to read it is an error
/// naming it, never sent on as an empty file.
pub(crate) fn read_own_if_any(dir: &RunDir, name: &str) -> Result<String> {
    let f = dir.file(name);
    match std::fs::read_to_string(&f) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(Error::io("cannot read", &f, e)),
    }
}

/// The gathered parts rank 0 can read (an unreadable one is named in the
/// test log; the rank then counts as missing).
fn read_parts(dir: &RunDir, gathered: Vec<Option<Vec<u8>>>) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    for g in gathered.into_iter().flatten() {
        match serde_json::from_slice::<Part>(&g) {
            Ok(p) => parts.push(p),
            Err(e) => dir
                .log
                .line(format!("a rank's result could not be read: {e}")),
        }
    }
    parts
}

/// The intervals.jsonl beside `source` copied into `dir` (none there: none
/// copied); a copy that fails is an error naming the files.
fn copy_intervals(source: &Path, dir: &RunDir) -> Result<()> {
    let from = source.with_file_name("intervals.jsonl");
    use mailbench_base::rundir::{create_new, open_read_nofollow};
    let mut src = match open_read_nofollow(&from) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("cannot copy", &from, e)),
    };
    let to = dir.file("intervals.jsonl");
    let mut dst = create_new(&to).map_err(|e| Error::io("cannot create", &to, e))?;
    std::io::copy(&mut src, &mut dst).map_err(|e| Error::io("cannot copy", &from, e))?;
    Ok(())
}

/// A gathered rank's result file: (rank, host, path).
pub(crate) type RankFile = (usize, String, PathBuf);

/// Rank 0: one result from the ranks' parts (with failures named first),
/// written through the one output path.
pub(crate) fn aggregate(
    top: &Path,
    cmd: Command,
    hosts: &[String],
    parts: &[Part],
    failures: &[Failure],
) -> Result<Gathered> {
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
    let merged = match cmd {
        Command::StorageRun => Some(storage_runs(&dir, &files, &fail_reasons)?),
        Command::MailRun => mail_runs(&dir, &files, &fail_reasons)?,
        Command::MailSweep => {
            return Err(Error::runtime(
                "a mail sweep gathers its results per level (a bug: please report it)",
            ));
        }
        _ => {
            let result = per_rank(cmd, &files, &fail_reasons)?;
            let summary = failed_first(mailbench_report::summary::per_rank::per_rank(&result));
            let line = verdict_line(&result.verdict, &dir.path);
            let verdict = result.verdict.clone();
            let with = WithRanks { result, multihost };
            write_with(&dir, &with, &summary, false)?;
            return Ok(Gathered {
                outcome: Outcome::new(verdict, line, dir.path, summary),
                written: Written::PerRank(Box::new(with.result)),
            });
        }
    };
    let Some((result, summary)) = merged else {
        // No generator's result arrived: the ranks' failure result.
        let failed = RanksFailed::new(cmd.kind(), hosts, failures);
        let summary = format!("FAIL: {}\n", fail_reasons.join("\nFAIL: "));
        write_with(&dir, &failed, &summary, false)?;
        let line = verdict_line(&failed.verdict, &dir.path);
        return Ok(Gathered {
            outcome: Outcome::new(failed.verdict, line, dir.path, summary),
            written: Written::Failed,
        });
    };
    let summary = failed_first(summary);
    let with = WithRanks { result, multihost };
    write_with(&dir, &with, &summary, true)?;
    let mut outcome = Outcome::of_result(&with.result, dir.path);
    outcome.summary = summary;
    Ok(Gathered {
        outcome,
        written: Written::One(with.result),
    })
}

/// Every rank's files beside rank 0's (copies when the ranks do not share
/// the results folder), so `report merge rank-*/` works here.
fn copy_rank_files(dir: &RunDir, parts: &[Part]) -> Result<Vec<RankFile>> {
    let mut files = Vec::new();
    for p in parts {
        let rd = dir.path.join(format!("rank-{}", p.rank));
        std::fs::create_dir_all(&rd).map_err(|e| Error::io("cannot create", &rd, e))?;
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

/// The same as `report merge` of the ranks' storage-run results.
fn storage_runs(
    dir: &RunDir,
    files: &[RankFile],
    failures: &[String],
) -> Result<(AnyResult, String)> {
    let mut docs: Vec<StorageDoc> = Vec::new();
    for (_, _, f) in files {
        match mailbench_report::load(f)? {
            Doc::Storage(d) => docs.push(*d),
            other => return Err(not_kind(f, &other, "storage-run")),
        }
    }
    let judged = |r: &mut mailbench_results::storage::run::StorageResult| {
        r.verdict = std::mem::replace(&mut r.verdict, Verdict::from_reasons(Vec::new()))
            .with_failures_first(failures);
    };
    if docs.len() == 1 {
        let d = &mut docs[0];
        judged(&mut d.result);
        let r = AnyResult::StorageRun(Box::new(d.result.clone()));
        copy_intervals(&d.source, dir)?;
        let text = mailbench_report::summary::render(&r);
        return Ok((r, text));
    }
    let mut out = mailbench_report::merge::merge(&docs)?;
    judged(&mut out.result);
    if !out.intervals.is_empty() {
        dir.write_jsonl("intervals.jsonl", &out.intervals)?;
    }
    let r = AnyResult::StorageRun(Box::new(out.result));
    let summary = mailbench_report::summary::render(&r);
    Ok((r, summary))
}

fn not_kind(f: &Path, doc: &Doc, want: &str) -> Error {
    Error::runtime(format!(
        "{} is a {} result, not {want}",
        f.display(),
        doc.kind()
    ))
}

/// The generators' mail-run results merged exactly (as `report merge`
/// would), failures of ranks named first: the result and summary.txt, or
/// `None` when no generator's result arrived.
pub(crate) fn mail_runs(
    dir: &RunDir,
    files: &[RankFile],
    failures: &[String],
) -> Result<Option<(AnyResult, String)>> {
    let mut docs: Vec<MailDoc> = Vec::new();
    for (_, _, f) in files {
        match mailbench_report::load(f)? {
            Doc::Mail(d) => docs.push(*d),
            other => return Err(not_kind(f, &other, "mail-run")),
        }
    }
    if docs.is_empty() {
        return Ok(None);
    }
    let (mut result, intervals) = if docs.len() == 1 {
        let d = &docs[0];
        copy_intervals(&d.source, dir)?;
        (mailbench_report::mailmerge::typed(d)?, Vec::new())
    } else {
        let out = mailbench_report::mailmerge::merge_typed(&docs)?;
        (out.result, out.intervals)
    };
    if !failures.is_empty() {
        result.verdict = result.verdict.clone().with_failures_first(failures);
    }
    if !intervals.is_empty() {
        dir.write_jsonl("intervals.jsonl", &intervals)?;
    }
    let r = AnyResult::MailRun(Box::new(result));
    let summary = mailbench_report::summary::render(&r);
    Ok(Some((r, summary)))
}

/// A rank's own result file, typed.
fn rank_result(f: &Path) -> Result<AnyResult> {
    let text = std::fs::read_to_string(f).map_err(|e| Error::io("cannot read", f, e))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::runtime(format!("{}: {e}", f.display())))?;
    AnyResult::from_value(v).map_err(|e| Error::runtime(format!("{}: {e}", f.display())))
}

/// Every rank's own result under `hosts`, one verdict from their reasons
/// (failed ranks first), totals for backup and recover.
fn per_rank(cmd: Command, files: &[RankFile], failures: &[String]) -> Result<PerRank> {
    let mut hosts = Vec::new();
    let mut reasons = Vec::new();
    for (rank, host, f) in files {
        let r = rank_result(f)?;
        for x in &r.verdict().reasons {
            reasons.push(format!("rank {rank} on host {host}: {x}"));
        }
        hosts.push(RankResult {
            rank: *rank,
            host: host.clone(),
            result: r,
        });
    }
    let totals = totals(cmd, &hosts);
    let mut verdict = Verdict::from_reasons(reasons).with_failures_first(failures);
    // Interrupted ranks (and no failed ones): the whole test was interrupted.
    if failures.is_empty()
        && hosts
            .iter()
            .any(|h| h.result.verdict().status == Status::Interrupted)
    {
        verdict.status = Status::Interrupted;
    }
    let mut run = mailbench_results::RunHeader::begin(cmd.kind());
    run.finish(Duration::ZERO);
    Ok(PerRank {
        run,
        verdict,
        hosts,
        totals,
    })
}

/// The totals of backup and recover over the ranks.
fn totals(cmd: Command, hosts: &[RankResult]) -> Option<RankTotals> {
    match cmd {
        Command::StorageBackup => {
            // The ranks read at the same time: total MB/s over the slowest rank's time.
            let (mut databases, mut size_mb, mut seconds) = (0, 0.0, 0.0f64);
            for h in hosts {
                if let AnyResult::StorageBackup(r) = &h.result {
                    databases += r.databases.len();
                    size_mb += r.databases.iter().map(|d| d.size_mb).sum::<f64>();
                    seconds = seconds.max(r.seconds);
                }
            }
            let total_mb_per_s = if seconds > 0.0 {
                size_mb / seconds
            } else {
                0.0
            };
            Some(RankTotals::Backup(BackupTotals {
                databases,
                size_mb,
                seconds,
                total_mb_per_s,
            }))
        }
        Command::StorageRecover => {
            let (mut replayed, mut seconds_sum) = (0u64, 0.0);
            for h in hosts {
                if let AnyResult::StorageRecover(r) = &h.result {
                    for i in &r.instances {
                        replayed += i.log_files_replayed;
                        seconds_sum += i.seconds;
                    }
                }
            }
            let per = if replayed > 0 {
                seconds_sum / replayed as f64
            } else {
                0.0
            };
            Some(RankTotals::Recover(RecoverTotals {
                log_files_replayed: replayed,
                seconds_sum,
                seconds_per_log_file: per,
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part's file that is absent is empty; one that does not read is an
    /// error naming it, never sent on as an empty file.
    #[test]
    fn a_part_file_that_does_not_read_is_named() {
        let t = tempfile::tempdir().unwrap();
        let dir = RunDir {
            path: t.path().to_path_buf(),
            log: TestLog::open(&t.path().join("test.log")).unwrap(),
        };
        assert_eq!(read_own_if_any(&dir, "intervals.jsonl").unwrap(), "");
        assert!(read_own(&dir, "result.json").is_err());
        std::fs::create_dir(t.path().join("intervals.jsonl")).unwrap();
        let e = read_own_if_any(&dir, "intervals.jsonl")
            .unwrap_err()
            .to_string();
        assert!(e.contains("intervals.jsonl"), "{e}");
        std::fs::write(t.path().join("result.json"), "{}").unwrap();
        assert_eq!(read_own(&dir, "result.json").unwrap(), "{}");
    }
}
