//! A test over many ranks (hosts) as rank 0 writes it: the result of the
//! kind the ranks ran with the `multihost` section (every rank, what became
//! of it, the failures), the per-rank aggregate of the integrity and
//! creation commands (every rank's own result, one verdict, totals), and
//! the result written the moment a rank fails.
//!
//! These are the shapes rank 0 has always written; they are typed here so
//! that nothing builds them from JSON by hand.

use crate::kind::AnyResult;
use crate::verdict::{RunHeader, Verdict};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::rank_failure::RankFailure;

/// What became of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RankState {
    /// Its result reached rank 0.
    Gathered,
    /// It failed (see `failure`).
    Failed,
    /// Neither: its result never arrived.
    Missing,
}

/// One rank in the `multihost` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankEntry {
    pub rank: usize,
    pub host: Option<String>,
    /// Its result.json, relative to the run folder, when gathered.
    pub result: Option<String>,
    pub status: RankState,
    pub failure: Option<String>,
}

/// The `multihost` section of a result gathered from ranks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ranks {
    pub ranks: Vec<RankEntry>,
    pub failures: Vec<RankFailure>,
}

impl Ranks {
    /// Every rank of `hosts` (index = rank): gathered when its result is in
    /// `gathered`, failed when it is in `failures` (which wins).
    pub fn of(hosts: &[String], gathered: &[usize], failures: &[RankFailure]) -> Ranks {
        let ranks = (0..hosts.len())
            .map(|r| {
                let failed = failures.iter().find(|f| f.rank == r);
                let has = gathered.contains(&r);
                RankEntry {
                    rank: r,
                    host: hosts.get(r).cloned(),
                    result: has.then(|| format!("rank-{r}/result.json")),
                    status: match (failed, has) {
                        (Some(_), _) => RankState::Failed,
                        (None, true) => RankState::Gathered,
                        (None, false) => RankState::Missing,
                    },
                    failure: failed.map(|f| f.reason.clone()),
                }
            })
            .collect();
        Ranks {
            ranks,
            failures: failures.to_vec(),
        }
    }
}

/// A result with the ranks' section beside its own keys.
#[derive(Debug, Clone, Serialize)]
pub struct WithRanks<T> {
    #[serde(flatten)]
    pub result: T,
    pub multihost: Ranks,
}

/// One rank's own result in a per-rank aggregate.
#[derive(Debug, Clone, Serialize)]
pub struct RankResult {
    pub rank: usize,
    pub host: String,
    pub result: AnyResult,
}

/// `storage backup` over ranks: the ranks read at the same time, so the
/// rate is the total over the slowest rank's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BackupTotals {
    pub databases: usize,
    pub size_mb: f64,
    pub seconds: f64,
    pub total_mb_per_s: f64,
}

/// `storage recover` over ranks: log files replayed and their time, summed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecoverTotals {
    pub log_files_replayed: u64,
    pub seconds_sum: f64,
    pub seconds_per_log_file: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RankTotals {
    Backup(BackupTotals),
    Recover(RecoverTotals),
}

/// `storage init|verify|backup|recover` over ranks: every rank's own result
/// under `hosts`, one verdict from their reasons (failed ranks first),
/// totals for backup and recover.
#[derive(Debug, Clone, Serialize)]
pub struct PerRank {
    #[serde(flatten)]
    pub run: RunHeader,
    pub verdict: Verdict,
    pub hosts: Vec<RankResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub totals: Option<RankTotals>,
}

/// What rank 0 writes the moment a rank fails (the job may be killed soon
/// after): the command, a Fail verdict naming the failures, the hosts.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RanksFailed {
    #[serde(flatten)]
    pub run: RunHeader,
    /// The command the ranks ran (`storage-run`, `mail-run`, ...).
    pub command: String,
    pub verdict: Verdict,
    pub multihost: FailedRanks,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FailedRanks {
    pub hosts: Vec<String>,
    pub failures: Vec<RankFailure>,
}

impl RanksFailed {
    pub fn new(command: &str, hosts: &[String], failures: &[RankFailure]) -> RanksFailed {
        let mut run = RunHeader::begin("storage-multihost");
        run.finish(std::time::Duration::ZERO);
        RanksFailed {
            run,
            command: command.to_string(),
            verdict: Verdict {
                status: crate::Status::Fail,
                reasons: failures.iter().map(|f| f.reason.clone()).collect(),
            },
            multihost: FailedRanks {
                hosts: hosts.to_vec(),
                failures: failures.to_vec(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_name_each_rank_once_failure_first() {
        let hosts = vec!["a".to_string(), "b".into(), "c".into()];
        let f = RankFailure {
            rank: 1,
            host: "b".into(),
            reason: "rank 1 on host b stopped".into(),
            at: "2026-01-01T00:00:00Z".into(),
        };
        let r = Ranks::of(&hosts, &[0, 1], std::slice::from_ref(&f));
        let v = serde_json::to_value(&r).unwrap_or_default();
        assert_eq!(v["ranks"][0]["status"], "gathered");
        assert_eq!(v["ranks"][0]["result"], "rank-0/result.json");
        assert_eq!(v["ranks"][1]["status"], "failed");
        assert_eq!(v["ranks"][1]["failure"], "rank 1 on host b stopped");
        assert_eq!(v["ranks"][2]["status"], "missing");
        assert!(v["ranks"][2]["result"].is_null());
        assert!(v["ranks"][2]["failure"].is_null());
        assert_eq!(v["failures"][0]["host"], "b");
        let t = RankTotals::Recover(RecoverTotals {
            log_files_replayed: 6,
            seconds_sum: 1.5,
            seconds_per_log_file: 0.25,
        });
        let v = serde_json::to_value(&t).unwrap_or_default();
        assert_eq!(v["log_files_replayed"], 6);
        let failed = RanksFailed::new("storage-run", &hosts, &[f]);
        let v = serde_json::to_value(&failed).unwrap_or_default();
        assert_eq!(v["kind"], "storage-multihost");
        assert_eq!(v["command"], "storage-run");
        assert_eq!(v["verdict"]["status"], "fail");
        assert_eq!(v["multihost"]["hosts"][2], "c");
    }
}
