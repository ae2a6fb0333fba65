//! `storage suite`: the published test program on the same databases —
//! creation, a performance run, an optional stress run, backup, soft
//! recovery, checksum — each stage an ordinary result in a folder of the
//! suite's, tied together here. The suite passes when every stage that ran
//! passed; every failure names its stage.

use crate::storage::backup::BackupResult;
use crate::storage::init::StorageInitResult;
use crate::storage::recover::RecoverResult;
use crate::storage::run::StorageResult;
use crate::storage::verify::StorageVerifyResult;
use crate::verdict::{RunHeader, Status, Verdict};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A stage of the test program, in the order the suite runs them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Database creation (or `--open`: the existing databases checked).
    Init,
    /// `storage run --type performance`.
    Performance,
    /// `storage run --type stress` (lenient maxima, long).
    Stress,
    /// Sequential reads of every database.
    Backup,
    /// Log files generated, a crash, their replay.
    Recover,
    /// Every page and log block checked.
    Verify,
}

impl Stage {
    pub const ALL: [Stage; 6] = [
        Stage::Init,
        Stage::Performance,
        Stage::Stress,
        Stage::Backup,
        Stage::Recover,
        Stage::Verify,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Init => "init",
            Stage::Performance => "performance",
            Stage::Stress => "stress",
            Stage::Backup => "backup",
            Stage::Recover => "recover",
            Stage::Verify => "verify",
        }
    }

    pub fn parse(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name.trim())
    }

    /// How the published documents title the stage.
    pub fn title(self) -> &'static str {
        match self {
            Stage::Init => "Database creation",
            Stage::Performance => "Performance test",
            Stage::Stress => "Stress test",
            Stage::Backup => "Database backup test",
            Stage::Recover => "Soft recovery test",
            Stage::Verify => "Database checksum",
        }
    }
}

/// The figures a solution report quotes of a stage (each stage's own
/// result.json, in its folder, has everything).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StageFigures {
    /// Hosts (ranks) the stage ran on.
    pub hosts: usize,
    pub databases: usize,
    /// init: megabytes written and the rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_mb: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_mb_per_s: Option<f64>,
    /// performance, stress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactional_iops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_iops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_read_avg_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_read_max_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_write_avg_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_write_max_ms: Option<f64>,
    /// backup: all databases together, and the mean of the databases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_mb_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_mb_per_s_per_db: Option<f64>,
    /// recover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_files_replayed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_per_log_file: Option<f64>,
    /// recover, verify, run: bad pages and log blocks found by the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_pages: Option<u64>,
}

/// One stage as the suite records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SuiteStage {
    pub stage: Stage,
    /// Its folder, relative to the suite's (`performance/`).
    pub dir: String,
    /// Its own verdict (error: it could not run to its end).
    pub verdict: Verdict,
    pub started: String,
    pub ended: String,
    pub duration_s: f64,
    pub figures: StageFigures,
}

impl SuiteStage {
    /// A stage that ran to its end (passed or failed its criteria): a
    /// resumed suite does not run it again.
    pub fn finished(&self) -> bool {
        matches!(self.verdict.status, Status::Pass | Status::Fail)
    }
}

/// What the suite was asked to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SuitePlan {
    /// The stages, in order.
    pub stages: Vec<Stage>,
    /// The performance run's measured window, seconds.
    pub performance_s: f64,
    /// The stress run's measured window, seconds (0: no stress stage).
    pub stress_s: f64,
    /// Log files generated and replayed per database by the recover stage.
    pub log_files: u64,
}

/// The simulated configuration: what the databases stand for (one host's
/// share; over several ranks each host has its own).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Simulated {
    pub profile: String,
    pub databases: usize,
    /// Each database's size (the first's: they are sized alike).
    pub database_bytes: u64,
    pub mailboxes: Option<u64>,
    pub iops_per_mailbox: Option<f64>,
    pub target_iops: Option<f64>,
    pub copies: u32,
    pub threads: u32,
    pub cache_max_per_db: u64,
    /// The database and log folders.
    pub volumes: Vec<String>,
    pub log_volumes: Vec<String>,
}

impl Simulated {
    pub fn of(spec: &crate::storage::spec::StorageSpec) -> Simulated {
        let show = |v: &[std::path::PathBuf]| v.iter().map(|p| p.display().to_string()).collect();
        Simulated {
            profile: spec.profile.name.clone(),
            databases: spec.instances.len(),
            database_bytes: spec.instances.first().map(|i| i.size_bytes).unwrap_or(0),
            mailboxes: spec.mailboxes,
            iops_per_mailbox: spec.iops_per_mailbox,
            target_iops: spec.target_iops,
            copies: spec.copies,
            threads: spec.threads,
            cache_max_per_db: spec.cache_max_per_db,
            volumes: show(&spec.volumes),
            log_volumes: show(&spec.log_volumes),
        }
    }
}

/// `storage-suite`: the stages of the test program and one verdict.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StorageSuiteResult {
    #[serde(flatten)]
    pub run: RunHeader,
    pub verdict: Verdict,
    pub plan: SuitePlan,
    /// The stages run so far, in order (a resumed suite adds to them).
    pub stages: Vec<SuiteStage>,
    /// The hosts (ranks) of the suite.
    pub hosts: Vec<String>,
    /// What the databases simulate (rank 0's share).
    pub simulated: Simulated,
}

impl StorageSuiteResult {
    /// The verdict of the stages: interrupted or an error when a stage did
    /// not finish (or stages are missing), failed when a stage failed its
    /// criteria, each reason named by its stage.
    pub fn judge(plan: &SuitePlan, stages: &[SuiteStage], interrupted: bool) -> Verdict {
        let mut reasons = Vec::new();
        let mut status = Status::Pass;
        for s in stages {
            for r in &s.verdict.reasons {
                reasons.push(format!("{}: {r}", s.stage.name()));
            }
            status = worse(status, s.verdict.status);
        }
        let missing: Vec<&str> = (plan.stages.iter())
            .filter(|p| !stages.iter().any(|s| s.stage == **p && s.finished()))
            .map(|p| p.name())
            .collect();
        if interrupted {
            status = Status::Interrupted;
            reasons.insert(
                0,
                format!(
                    "interrupted before the end of the suite (not run: {})",
                    missing.join(", ")
                ),
            );
        } else if !missing.is_empty() && status == Status::Pass {
            status = Status::Error;
            reasons.push(format!("stages not run: {}", missing.join(", ")));
        }
        Verdict { status, reasons }
    }
}

/// The worse of two statuses for a suite: an error or an interruption
/// outweighs a failure, which outweighs a pass.
fn worse(a: Status, b: Status) -> Status {
    let rank = |s: Status| match s {
        Status::Pass => 0,
        Status::Fail => 1,
        Status::Interrupted => 2,
        Status::Error => 3,
    };
    if rank(b) > rank(a) { b } else { a }
}

impl StageFigures {
    /// The figures of a creation.
    pub fn of_init(r: &StorageInitResult) -> StageFigures {
        StageFigures {
            hosts: 1,
            databases: r.init.databases.len(),
            created_mb: Some(r.init.written_bytes as f64 / 1e6),
            created_mb_per_s: Some(r.init.mb_per_s),
            ..Default::default()
        }
    }

    /// The figures of a run (one host's, or the typed merge of several).
    pub fn of_run(r: &StorageResult) -> StageFigures {
        let c = |n: &str| r.total.classes.get(n).map(|c| &c.latency_ms);
        StageFigures {
            hosts: r.merged.as_ref().map(|m| m.hosts.len()).unwrap_or(1),
            databases: r.instances.len(),
            transactional_iops: Some(r.total.transactional_iops),
            target_iops: r.total.target_iops,
            measured_s: Some(r.window.measured_s),
            db_read_avg_ms: c("db_read").map(|l| l.avg),
            db_read_max_ms: c("db_read").map(|l| l.max),
            log_write_avg_ms: c("log_write").map(|l| l.avg),
            log_write_max_ms: c("log_write").map(|l| l.max),
            bad_pages: r.verify.as_ref().map(|v| v.bad_total),
            ..Default::default()
        }
    }

    pub fn of_backup(r: &BackupResult) -> StageFigures {
        StageFigures {
            hosts: 1,
            databases: r.databases.len(),
            backup_mb_per_s: Some(r.total_mb_per_s),
            backup_mb_per_s_per_db: Some(r.average_mb_per_s),
            ..Default::default()
        }
    }

    pub fn of_recover(r: &RecoverResult) -> StageFigures {
        let files: u64 = r.instances.iter().map(|i| i.log_files_replayed).sum();
        let secs: f64 = r.instances.iter().map(|i| i.seconds).sum();
        StageFigures {
            hosts: 1,
            databases: r.instances.len(),
            log_files_replayed: Some(files),
            seconds_per_log_file: (files > 0).then(|| secs / files as f64),
            bad_pages: r.verify.as_ref().map(|v| v.bad_total),
            ..Default::default()
        }
    }

    pub fn of_verify(r: &StorageVerifyResult) -> StageFigures {
        StageFigures {
            hosts: 1,
            databases: r.verify.databases.len(),
            bad_pages: Some(r.verify.bad_total),
            ..Default::default()
        }
    }

    /// The figures of several hosts' own results of one stage: counts
    /// added; the rates are the caller's (from the ranks' totals).
    pub fn added(each: &[StageFigures]) -> StageFigures {
        let sum_u = |f: &dyn Fn(&StageFigures) -> Option<u64>| -> Option<u64> {
            each.iter().map(f).sum::<Option<u64>>()
        };
        let sum_f = |f: &dyn Fn(&StageFigures) -> Option<f64>| -> Option<f64> {
            each.iter().map(f).sum::<Option<f64>>()
        };
        let per_db: Vec<f64> = each
            .iter()
            .filter_map(|f| f.backup_mb_per_s_per_db)
            .collect();
        StageFigures {
            hosts: each.len(),
            databases: each.iter().map(|f| f.databases).sum(),
            created_mb: sum_f(&|f| f.created_mb),
            bad_pages: sum_u(&|f| f.bad_pages),
            log_files_replayed: sum_u(&|f| f.log_files_replayed),
            backup_mb_per_s_per_db: (!per_db.is_empty())
                .then(|| per_db.iter().sum::<f64>() / per_db.len() as f64),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(s: Stage, status: Status, reasons: &[&str]) -> SuiteStage {
        SuiteStage {
            stage: s,
            dir: s.name().into(),
            verdict: Verdict {
                status,
                reasons: reasons.iter().map(|r| r.to_string()).collect(),
            },
            started: String::new(),
            ended: String::new(),
            duration_s: 0.0,
            figures: StageFigures::default(),
        }
    }

    fn plan(stages: &[Stage]) -> SuitePlan {
        SuitePlan {
            stages: stages.to_vec(),
            performance_s: 60.0,
            stress_s: 0.0,
            log_files: 10,
        }
    }

    #[test]
    fn the_verdict_names_each_failing_stage() {
        let p = plan(&[Stage::Init, Stage::Performance, Stage::Backup]);
        let all = [
            stage(Stage::Init, Status::Pass, &[]),
            stage(Stage::Performance, Status::Fail, &["slow log writes"]),
            stage(Stage::Backup, Status::Pass, &[]),
        ];
        let v = StorageSuiteResult::judge(&p, &all, false);
        assert_eq!(v.status, Status::Fail);
        assert_eq!(v.reasons, vec!["performance: slow log writes"]);
        let ok = [
            stage(Stage::Init, Status::Pass, &[]),
            stage(Stage::Performance, Status::Pass, &[]),
            stage(Stage::Backup, Status::Pass, &[]),
        ];
        assert_eq!(
            StorageSuiteResult::judge(&p, &ok, false).status,
            Status::Pass
        );
    }

    #[test]
    fn missing_or_broken_stages_are_not_a_pass() {
        let p = plan(&[Stage::Init, Stage::Performance, Stage::Verify]);
        let some = [
            stage(Stage::Init, Status::Pass, &[]),
            stage(Stage::Performance, Status::Error, &["disk gone"]),
        ];
        let v = StorageSuiteResult::judge(&p, &some, false);
        assert_eq!(v.status, Status::Error);
        assert!(
            v.reasons.iter().any(|r| r == "performance: disk gone"),
            "{v:?}"
        );
        let v = StorageSuiteResult::judge(&p, &some[..1], true);
        assert_eq!(v.status, Status::Interrupted);
        assert!(v.reasons[0].contains("performance, verify"), "{v:?}");
        let v = StorageSuiteResult::judge(&p, &some[..1], false);
        assert_eq!(v.status, Status::Error, "{v:?}");
    }

    #[test]
    fn stage_names_round_trip() {
        for s in Stage::ALL {
            assert_eq!(Stage::parse(s.name()), Some(s));
        }
        assert_eq!(Stage::parse("checksum"), None);
    }
}
