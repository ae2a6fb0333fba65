//! The result of `mail sweep` (kind `mail-sweep`): a series of mail runs at
//! growing user counts against one server, each judged as an ordinary run
//! over its steady window, and the largest count that passed every
//! criterion: the **supported users**, the MMB3-style score. The levels'
//! figures form the LoadSim-style scaling table.

use crate::mail::config::MailConfig;
use crate::mail::profile::Profile;
use crate::mail::run::TargetInfo;
use crate::verdict::{RunHeader, Status, Verdict};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// result.json of `mail sweep`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MailSweepResult {
    pub run: RunHeader,
    /// The options every level ran with (`users`: the largest level asked).
    pub config: MailConfig,
    pub target: TargetInfo,
    pub profile: Profile,
    pub plan: SweepPlan,
    /// The simulated day over the real one: each user's rate is that many
    /// times the profile's.
    pub compression: f64,
    /// The levels in the order they ran.
    pub levels: Vec<SweepLevel>,
    /// The largest level that passed every criterion (None: none passed).
    pub supported_users: Option<u64>,
    /// The smallest level above the supported users that failed, and why.
    pub failed_above: Option<FailedLevel>,
    pub warnings: Vec<String>,
    pub verdict: Verdict,
    /// Several load generators (MPI ranks) drove every level together, each
    /// its slice of the level's users; absent when one host ran the sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generators: Option<SweepGenerators>,
    /// What was tested (the full disclosure): the `[disclosure]` section
    /// and the server host as its exporters report it (absent in older
    /// results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disclosure: Option<SweepDisclosure>,
}

/// A sweep's disclosure: what the user states and what the server's
/// exporters report.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SweepDisclosure {
    pub declared: crate::disclosure::DisclosureToml,
    /// The server host per `--server-metrics` endpoint, read once before
    /// the first level; without one, a single entry whose facts are
    /// unknown with the reason.
    pub servers: Vec<mailbench_metrics::server_config::ServerConfig>,
}

/// The load generators of a sweep over MPI ranks.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SweepGenerators {
    /// How many generators (ranks) ran every level.
    pub count: usize,
    /// The host of each rank (index = rank).
    pub hosts: Vec<String>,
    /// Ranks that failed during the sweep (the sweep ended there).
    pub failures: Vec<crate::rank_failure::RankFailure>,
}

/// The levels asked for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SweepPlan {
    /// `--users` as given (`100,200,400`, `100..1000:100`).
    pub users: String,
    /// The levels it names, increasing.
    pub levels: Vec<u64>,
    /// `--find-max`: grow from the first level until one fails (at most
    /// the last), then bisect down to `resolution` users.
    pub find_max: bool,
    pub resolution: u64,
}

/// One level: an ordinary mail run, its figures over its steady window.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SweepLevel {
    pub users: u64,
    /// users × compression: the users at the profile's real rate that
    /// would make the same load (an approximation: sessions, logons and
    /// mailbox sizes do not scale so).
    pub rate_equivalent_users: f64,
    /// The weighted 95th and 50th percentiles over the steady window, ms.
    pub response_time_ms: f64,
    pub response_time_p50_ms: f64,
    /// The server host's CPU busy over the window (`--server-metrics` or
    /// the local target), %.
    pub server_cpu_busy_pct: Option<f64>,
    /// The load generator's host CPU over the window, % (the whole host:
    /// the server's too when both share it; mailbench's own is
    /// `generator_cpu_pct`).
    pub generator_cpu_busy_pct: f64,
    /// mailbench's own CPU over the level's run: seconds, and their share
    /// of the generators' CPUs (cpu_s / (run seconds x CPUs x generators)),
    /// %. Absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_cpu_pct: Option<f64>,
    pub submitted_per_user_per_day: f64,
    pub delivered_per_user_per_day: f64,
    /// Messages submitted and delivered inside the steady window, and its
    /// length, s (absent in older results and without a steady window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_submitted: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_delivered: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_s: Option<f64>,
    /// The server queue over the window.
    pub queue_average: Option<f64>,
    pub queue_max: Option<f64>,
    /// The store volume's reads and writes per second over the window, and
    /// their sum per mailbox.
    pub store_reads_per_s: Option<f64>,
    pub store_writes_per_s: Option<f64>,
    pub store_latency_ms: Option<f64>,
    pub iops_per_mailbox: Option<f64>,
    pub errors: u64,
    pub error_rate_pct: f64,
    /// The generator's own scheduling delay, 99th percentile, ms.
    pub sched_delay_p99_ms: f64,
    pub status: Status,
    /// The first failed criterion (`response_time`, `errors`, `delivery`,
    /// `queue`, `tasks`) and every reason.
    pub failed_criterion: Option<String>,
    pub reasons: Vec<String>,
    /// The level's own result folder (result.json of kind `mail-run`).
    pub result_dir: String,
}

impl Default for SweepLevel {
    /// No figures yet, not passed.
    fn default() -> SweepLevel {
        SweepLevel {
            users: 0,
            rate_equivalent_users: 0.0,
            response_time_ms: 0.0,
            response_time_p50_ms: 0.0,
            server_cpu_busy_pct: None,
            generator_cpu_busy_pct: 0.0,
            generator_cpu_s: None,
            generator_cpu_pct: None,
            submitted_per_user_per_day: 0.0,
            delivered_per_user_per_day: 0.0,
            steady_submitted: None,
            steady_delivered: None,
            steady_s: None,
            queue_average: None,
            queue_max: None,
            store_reads_per_s: None,
            store_writes_per_s: None,
            store_latency_ms: None,
            iops_per_mailbox: None,
            errors: 0,
            error_rate_pct: 0.0,
            sched_delay_p99_ms: 0.0,
            status: Status::Fail,
            failed_criterion: None,
            reasons: Vec::new(),
            result_dir: String::new(),
        }
    }
}

impl SweepLevel {
    pub fn passed(&self) -> bool {
        self.status == Status::Pass
    }
}

/// The level that failed above the supported users.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct FailedLevel {
    pub users: u64,
    pub criterion: String,
    pub reason: String,
}

/// The supported users and the failure above them: the largest passing
/// level below the first failing one (levels after a failure do not raise
/// it), and that failing level.
pub fn supported(levels: &[SweepLevel]) -> (Option<u64>, Option<FailedLevel>) {
    let mut sorted: Vec<&SweepLevel> = levels
        .iter()
        .filter(|l| l.status != Status::Interrupted)
        .collect();
    sorted.sort_by_key(|l| l.users);
    let first_fail = sorted.iter().find(|l| !l.passed());
    let limit = first_fail.map(|f| f.users).unwrap_or(u64::MAX);
    let best = sorted
        .iter()
        .filter(|l| l.passed() && l.users < limit)
        .map(|l| l.users)
        .max();
    let failed = first_fail.map(|l| FailedLevel {
        users: l.users,
        criterion: l.failed_criterion.clone().unwrap_or_default(),
        reason: l.reasons.first().cloned().unwrap_or_default(),
    });
    (best, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(users: u64, pass: bool) -> SweepLevel {
        SweepLevel {
            users,
            status: if pass { Status::Pass } else { Status::Fail },
            failed_criterion: (!pass).then(|| "response_time".into()),
            reasons: if pass { vec![] } else { vec!["slow".into()] },
            ..Default::default()
        }
    }

    #[test]
    fn the_supported_users_stop_below_the_first_failure() {
        let ls = [
            level(10, true),
            level(20, true),
            level(40, false),
            level(30, true),
        ];
        let (s, f) = supported(&ls);
        assert_eq!(s, Some(30));
        assert_eq!(f.unwrap().users, 40);
        // A lucky pass above a failure does not count.
        let ls = [level(10, true), level(20, false), level(40, true)];
        assert_eq!(supported(&ls).0, Some(10));
        let (s, f) = supported(&[level(10, false)]);
        assert_eq!(
            (s, f.map(|f| f.criterion)),
            (None, Some("response_time".into()))
        );
        let (s, f) = supported(&[level(10, true), level(20, true)]);
        assert_eq!((s, f), (Some(20), None));
    }
}
