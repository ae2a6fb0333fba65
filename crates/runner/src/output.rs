//! The one output path of a run: result.json -> summary.txt -> report.html ->
//! the stdout line (`--json`) or the text for a person. Every command, on one
//! host or many, writes its result through here, so every run folder holds
//! the same files.

use mailbench_base::rundir::{RunDir, write_json, write_text};
use mailbench_base::secrets::say;
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_results::AnyResult;
use mailbench_results::verdict::Verdict;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Writes the run's files into `dir`, in order: result.json, summary.txt,
/// report.html (from result.json and the intervals.jsonl and test.log beside
/// it). A report that cannot be rendered is said on stderr; the result stands.
/// A test.log line that could not be written is recorded in the result's
/// header (`run.log_write_error`) and said by the summary and the report.
pub fn write_files(dir: &RunDir, result: &AnyResult) -> Result<PathBuf> {
    let noted;
    let result = match dir.log.write_error() {
        Some(e) if result.header().log_write_error.is_none() => {
            let mut r = result.clone();
            r.header_mut().log_write_error = Some(e);
            noted = r;
            &noted
        }
        _ => result,
    };
    write_with(
        dir,
        result,
        &mailbench_report::summary::render(result),
        true,
    )
}

/// The same path for a result whose result.json holds more than its kind's
/// type or whose summary the caller words (a result gathered from ranks:
/// the ranks' section beside it, failed ranks named ahead of the summary):
/// result.json, summary.txt, and report.html when `html`.
pub fn write_with(
    dir: &RunDir,
    result: &impl Serialize,
    summary: &str,
    html: bool,
) -> Result<PathBuf> {
    let value = serde_json::to_value(result)
        .map_err(|e| Error::runtime(format!("cannot encode the result: {e}")))?;
    let path = dir.write_json("result.json", &value)?;
    dir.write("summary.txt", summary.as_bytes())?;
    if html && let Err(e) = mailbench_report::write_html_value(&dir.path, &value) {
        mailbench_base::secrets::warn(&format!("mailbench: report.html not written: {e}"));
    }
    Ok(path)
}

/// The files of a run that has just failed, written from a thread that has
/// no run folder open (a rank lost; the job may be killed next): result.json
/// and, when given, summary.txt in `top`, each replaced atomically; a file
/// that cannot be written is left as it was.
pub fn write_failed(top: &Path, result: &impl Serialize, summary: Option<&str>) {
    // No caller is left to return to: a file that cannot be written is said.
    let said = |what: &str, r: Result<()>| {
        if let Err(e) = r {
            mailbench_base::secrets::warn(&format!("mailbench: {what} not written: {e}"));
        }
    };
    said("result.json", write_json(&top.join("result.json"), result));
    if let Some(s) = summary {
        said("summary.txt", write_text(&top.join("summary.txt"), s));
    }
}

/// [`write_files`], then what the run says on stdout ([`print`]).
pub fn finish(dir: &RunDir, result: &AnyResult, common: &crate::Common) -> Result<()> {
    write_files(dir, result)?;
    print(&Outcome::of_result(result, dir.path.clone()), common);
    Ok(())
}

/// What a run hands back for stdout and the exit code: rank 0's aggregate or
/// this rank's own result.
pub struct Outcome {
    pub status: ExitStatus,
    pub dir: PathBuf,
    pub verdict: Verdict,
    /// The `--json` line.
    pub line: String,
    /// summary.txt.
    pub summary: String,
}

impl Outcome {
    pub fn new(verdict: Verdict, line: String, dir: PathBuf, summary: String) -> Outcome {
        Outcome {
            status: verdict.exit_status(),
            verdict,
            line,
            dir,
            summary,
        }
    }

    /// The outcome of a result of a known kind: its verdict, `--json` line
    /// and summary.
    pub fn of_result(r: &AnyResult, dir: PathBuf) -> Outcome {
        let line = json_line(r, &dir);
        let summary = mailbench_report::summary::render(r);
        Outcome::new(r.verdict().clone(), line, dir, summary)
    }
}

/// What a run says on stdout, the one place: the `--json` line, or the
/// summary (which states the verdict) and where the results are; nothing
/// with `-q`.
pub fn print(outcome: &Outcome, common: &crate::Common) {
    if common.json {
        say(&outcome.line);
    } else if !common.quiet {
        say(&text(outcome));
    }
}

/// What a job about to be ended (a rank lost) says, on stderr: the same
/// summary and folder, whatever `--json` or `-q` asked.
pub fn print_before_abort(outcome: &Outcome) {
    mailbench_base::secrets::warn(&text(outcome));
}

/// The summary and the results folder.
pub fn text(outcome: &Outcome) -> String {
    format!(
        "{}\nResults: {}",
        outcome.summary.trim_end(),
        outcome.dir.display()
    )
}

/// The `--json` line of a run: the verdict and the folder, and the figures a
/// script wants for its kind.
pub fn json_line(result: &AnyResult, dir: &Path) -> String {
    let head = Head {
        verdict: result.verdict(),
        result_dir: dir,
    };
    let text = match result {
        AnyResult::StorageRun(r) => {
            let c = |n: &str| r.total.classes.get(n).map(|c| c.latency_ms.avg);
            serde_json::to_string(&StorageRunLine {
                head,
                hosts: r.merged.as_ref().map(|m| m.hosts.len()),
                transactional_iops: r.total.transactional_iops,
                target_iops: r.total.target_iops,
                db_read_avg_ms: c("db_read"),
                log_write_avg_ms: c("log_write"),
            })
        }
        AnyResult::StorageBackup(r) => serde_json::to_string(&BackupLine {
            head,
            total_mb_per_s: r.total_mb_per_s,
            average_mb_per_s: r.average_mb_per_s,
            databases: r.databases.iter().map(BackupDbLine::of).collect(),
        }),
        AnyResult::StorageRecover(r) => serde_json::to_string(&RecoverLine {
            head,
            prior_recovery: r.prior_recovery.iter().map(ReplayLine::of).collect(),
            instances: r.instances.iter().map(ReplayLine::of).collect(),
            bad_total: r.verify.as_ref().map(|v| v.bad_total),
        }),
        AnyResult::MailRun(r) => serde_json::to_string(&MailRunLine {
            head,
            result: dir.join("result.json"),
            hosts: r.merged.as_ref().map(|m| m.hosts.len()),
            users: r.users,
            response_time_ms: (r.steady.as_ref())
                .and_then(|s| s.judged_ms())
                .unwrap_or(r.response_time.weighted_p95_ms),
            mail_flow: &r.mail_flow,
        }),
        AnyResult::MailSetup(_) => serde_json::to_string(&MailSetupLine {
            head,
            result: dir.join("result.json"),
        }),
        _ => serde_json::to_string(&head),
    };
    text.unwrap_or_default()
}

/// The `--json` line of a result that is not one kind's type (a test over
/// ranks that failed, a per-rank aggregate): the verdict and the folder.
pub fn verdict_line(verdict: &Verdict, dir: &Path) -> String {
    serde_json::to_string(&Head {
        verdict,
        result_dir: dir,
    })
    .unwrap_or_default()
}

#[derive(Serialize)]
struct Head<'a> {
    verdict: &'a Verdict,
    result_dir: &'a Path,
}

#[derive(Serialize)]
struct StorageRunLine<'a> {
    #[serde(flatten)]
    head: Head<'a>,
    /// Hosts of a merged result.
    #[serde(skip_serializing_if = "Option::is_none")]
    hosts: Option<usize>,
    transactional_iops: f64,
    target_iops: Option<f64>,
    db_read_avg_ms: Option<f64>,
    log_write_avg_ms: Option<f64>,
}

#[derive(Serialize)]
struct BackupLine<'a> {
    #[serde(flatten)]
    head: Head<'a>,
    total_mb_per_s: f64,
    average_mb_per_s: f64,
    databases: Vec<BackupDbLine<'a>>,
}

#[derive(Serialize)]
struct BackupDbLine<'a> {
    name: &'a str,
    size_mb: f64,
    seconds: f64,
    mb_per_s: f64,
    bad_pages: u64,
    io_errors: u64,
    copy_bad_pages: Option<u64>,
}

impl<'a> BackupDbLine<'a> {
    fn of(d: &'a mailbench_results::storage::backup::BackupDb) -> Self {
        BackupDbLine {
            name: &d.name,
            size_mb: d.size_mb,
            seconds: d.seconds,
            mb_per_s: d.mb_per_s,
            bad_pages: d.bad_pages,
            io_errors: d.io_errors,
            copy_bad_pages: d.copy_bad_pages,
        }
    }
}

#[derive(Serialize)]
struct RecoverLine<'a> {
    #[serde(flatten)]
    head: Head<'a>,
    prior_recovery: Vec<ReplayLine<'a>>,
    instances: Vec<ReplayLine<'a>>,
    bad_total: Option<u64>,
}

#[derive(Serialize)]
struct ReplayLine<'a> {
    name: &'a str,
    log_files_replayed: u64,
    seconds: f64,
    seconds_per_log_file: f64,
    end_lsn: u64,
    clean: bool,
    stopped: &'a str,
    log_damaged: bool,
}

impl<'a> ReplayLine<'a> {
    fn of(i: &'a mailbench_results::storage::recover::ReplayResult) -> Self {
        ReplayLine {
            name: &i.name,
            log_files_replayed: i.log_files_replayed,
            seconds: i.seconds,
            seconds_per_log_file: i.seconds_per_log_file,
            end_lsn: i.end_lsn,
            clean: i.clean,
            stopped: &i.stopped,
            log_damaged: i.log_damaged,
        }
    }
}

#[derive(Serialize)]
struct MailRunLine<'a> {
    #[serde(flatten)]
    head: Head<'a>,
    result: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    hosts: Option<usize>,
    users: u64,
    /// The response time the verdict judged: the steady window's weighted p95, else
    /// the whole day's.
    response_time_ms: f64,
    mail_flow: &'a mailbench_results::mail::run::MailFlow,
}

#[derive(Serialize)]
struct MailSetupLine<'a> {
    #[serde(flatten)]
    head: Head<'a>,
    result: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailbench_base::rundir::TestLog;

    /// A test.log that cannot be written (a full volume: /dev/full) ends up in
    /// result.json's header, summary.txt and report.html; the run's files are
    /// still written.
    #[test]
    fn a_test_log_that_could_not_be_written_is_in_every_file() {
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../results/tests/fixtures/v1/storage-verify.json"
        );
        let json = std::fs::read_to_string(fixture).unwrap();
        let r = AnyResult::from_value(serde_json::from_str(&json).unwrap()).unwrap();
        assert!(r.header().log_write_error.is_none());
        let tmp = tempfile::tempdir().unwrap();
        let log = TestLog::open(Path::new("/dev/full")).unwrap();
        log.line("a line the full volume refuses");
        let dir = RunDir {
            path: tmp.path().to_path_buf(),
            log,
        };
        write_files(&dir, &r).unwrap();
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(tmp.path().join("result.json")).unwrap())
                .unwrap();
        let said = (written.pointer("/run/log_write_error"))
            .or_else(|| written.get("log_write_error"))
            .and_then(serde_json::Value::as_str)
            .unwrap();
        assert!(said.contains("test.log"), "{said}");
        let summary = std::fs::read_to_string(tmp.path().join("summary.txt")).unwrap();
        assert!(summary.contains("test.log is incomplete"), "{summary}");
        let html = std::fs::read_to_string(tmp.path().join("report.html")).unwrap();
        assert!(html.contains("id=\"log-write-error\""));
    }
}
