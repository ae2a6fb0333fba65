//! summary.txt of every kind of result: the published-report layouts in
//! plain text, rendered from the typed result alone (one module per kind).

pub mod backup;
pub mod init;
pub mod mail;
pub mod mail_sweep;
pub mod per_rank;
pub mod recover;
pub mod server;
pub mod storage;
pub mod suite;
pub mod verify;

use mailbench_results::AnyResult;
use mailbench_results::verdict::{RunHeader, Verdict};
use std::fmt::Write as _;

/// The opening every storage summary shares: title, rule, "Test Summary",
/// the verdict with its reasons, and the machine's name.
fn test_summary_head(o: &mut String, title: &str, verdict: &Verdict, run: &RunHeader) {
    let _ = writeln!(o, "{title} — {}", verdict.label());
    let _ = writeln!(o, "{}", "=".repeat(78));
    let _ = writeln!(o, "\nTest Summary");
    let _ = writeln!(o, "  Overall Test Result     {}", verdict.label());
    for reason in &verdict.reasons {
        let _ = writeln!(o, "    - {reason}");
    }
    let _ = writeln!(o, "  Machine Name            {}", run.host.hostname);
}

/// The tool's version and the run's start and end, as every storage summary prints them.
fn version_and_times(o: &mut String, run: &RunHeader) {
    let _ = writeln!(o, "  mailbench Version       {}", run.tool_version);
    let _ = writeln!(
        o,
        "  Started / Ended         {} / {}",
        run.started, run.ended
    );
}

/// The databases used although they lost the tail of their log, one line each.
fn lost_log_tail(o: &mut String, dbs: &[String]) {
    for db in dbs {
        let _ = writeln!(
            o,
            "  Lost Log Tail           {db} (a replay stopped at a damaged log block; \
             the transactions after it are gone)"
        );
    }
}

/// The "Errors" section of a storage summary, one line per error (none
/// without errors).
fn errors_text(o: &mut String, errors: &[String]) {
    if errors.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nErrors");
    for e in errors {
        let _ = writeln!(o, "  {e}");
    }
}

/// summary.txt of a result of any kind.
pub fn render(r: &AnyResult) -> String {
    let mut s = render_kind(r);
    if let Some(e) = &r.header().log_write_error {
        let _ = writeln!(s, "\nWarning: test.log is incomplete: {e}");
    }
    s
}

fn render_kind(r: &AnyResult) -> String {
    match r {
        AnyResult::StorageRun(r) => {
            let mut s = storage::render(r);
            if let Some(m) = &r.merged {
                s.push_str(&storage::hosts_text(m));
            }
            s
        }
        AnyResult::StorageInit(r) => init::storage_init(r),
        AnyResult::StorageVerify(r) => verify::storage_verify(r),
        AnyResult::StorageBackup(r) => backup::render(r),
        AnyResult::StorageRecover(r) => recover::render(r),
        AnyResult::MailRun(r) => mail::mail_run(r),
        AnyResult::MailSetup(r) => mail::mail_setup(r),
        AnyResult::MailSweep(r) => mail_sweep::mail_sweep(r),
        AnyResult::StorageSuite(r) => suite::storage_suite(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// summary.txt rendered from the typed result is what the binary wrote
    /// before the results were typed (kept beside each version 1 fixture).
    #[test]
    fn summaries_of_real_results_are_unchanged() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../results/tests/fixtures/v1/");
        for name in [
            "storage-verify",
            "storage-backup",
            "storage-recover",
            "mail-run",
        ] {
            let json = std::fs::read_to_string(format!("{dir}{name}.json")).unwrap();
            let text = std::fs::read_to_string(format!("{dir}{name}.summary.txt")).unwrap();
            let r = AnyResult::from_value(serde_json::from_str(&json).unwrap()).unwrap();
            assert_eq!(render(&r), text, "{name}");
        }
    }
}
