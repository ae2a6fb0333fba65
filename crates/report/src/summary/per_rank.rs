//! summary.txt of a per-rank aggregate (`storage init|verify|backup|recover`
//! and `mail setup` over several ranks): a line per rank's result, the totals
//! of backup and recover, the verdict.

use mailbench_results::AnyResult;
use mailbench_results::ranks::{PerRank, RankTotals};
use std::fmt::Write as _;

/// The per-rank summary (failed ranks are named ahead of it by the caller).
pub fn per_rank(r: &PerRank) -> String {
    let mut s = format!("mailbench {} over {} ranks\n", r.run.kind, r.hosts.len());
    for h in &r.hosts {
        s.push_str(&rank_lines(h.rank, &h.host, &h.result));
    }
    match &r.totals {
        Some(RankTotals::Backup(b)) => {
            let _ = writeln!(
                s,
                "  all ranks: {} databases, {:.0} MB in {:.1} s, {:.1} MB/s",
                b.databases, b.size_mb, b.seconds, b.total_mb_per_s
            );
        }
        Some(RankTotals::Recover(t)) => {
            let _ = writeln!(
                s,
                "  all ranks: {} log files replayed, {:.2} s in sum, {:.4} s per log file",
                t.log_files_replayed, t.seconds_sum, t.seconds_per_log_file
            );
        }
        None => {}
    }
    let _ = writeln!(s, "Verdict: {}", r.verdict.label());
    s
}

/// The summary lines of one rank's own result.
fn rank_lines(rank: usize, host: &str, r: &AnyResult) -> String {
    let mut s = String::new();
    match r {
        AnyResult::StorageInit(r) => {
            for d in &r.init.databases {
                let _ = writeln!(s, "  rank {rank} {host}: {}", d.line());
            }
        }
        AnyResult::StorageBackup(r) => {
            let mb = r.databases.iter().map(|d| d.size_mb).sum::<f64>();
            let _ = writeln!(
                s,
                "  rank {rank} {host}: {} databases, {mb:.0} MB in {:.1} s, {:.1} MB/s",
                r.databases.len(),
                r.seconds,
                r.total_mb_per_s
            );
        }
        AnyResult::StorageRecover(r) => {
            for i in &r.instances {
                let _ = writeln!(
                    s,
                    "  rank {rank} {host}: {} replayed {} log files in {:.2} s \
                     ({:.4} s per log file)",
                    i.name, i.log_files_replayed, i.seconds, i.seconds_per_log_file
                );
            }
        }
        AnyResult::StorageVerify(r) => {
            let _ = writeln!(
                s,
                "  rank {rank} {host}: {} databases, {} bad pages or log blocks",
                r.verify.databases.len(),
                r.verify.bad_total
            );
        }
        AnyResult::MailSetup(r) => {
            let _ = writeln!(
                s,
                "  rank {rank} {host}: {} of {} users provisioned, {} messages appended",
                r.setup.users_ok, r.setup.users, r.setup.messages_appended
            );
        }
        other => {
            let _ = writeln!(s, "  rank {rank} {host}: a {} result", other.kind());
        }
    }
    s
}
