//! The storage result model: what result.json holds (docs/result-schema.md).
//! Everything a report needs is here or in intervals.jsonl; overall histograms
//! are kept (HdrHistogram V2+DEFLATE, base64) so results merge exactly.

use crate::storage::init::InitSummary;
use crate::storage::spec::{StorageSpec, Thresholds};
use crate::storage::stats::{CLASS_NAMES, ClassFigures, Counters, LatencyMs, Stats};
use crate::storage::verify::VerifySummary;
use crate::verdict::{RunHeader, Verdict};
use mailbench_metrics::LatencyHist;
use mailbench_metrics::system::DiskRates;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StorageResult {
    #[serde(flatten)]
    pub run: RunHeader,
    pub verdict: Verdict,
    /// The resolved test: every value used, profile and thresholds included.
    pub spec: StorageSpec,
    pub io_engine: String,
    pub o_direct: bool,
    /// How the I/O reached the storage: the engine asked for, whether buffered
    /// I/O was asked for, why O_DIRECT is off and why `auto` fell back. Absent
    /// in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_path: Option<IoPath>,
    pub window: Window,
    pub init: Option<InitSummary>,
    pub instances: Vec<InstanceResult>,
    pub total: Totals,
    /// Key `host_performance`: the flattened run header already has `host`.
    #[serde(rename = "host_performance")]
    pub host: HostPerf,
    pub disks: Vec<DiskResult>,
    pub verify: Option<VerifySummary>,
    pub errors: Vec<String>,
    /// Per-interval histograms and counters, one JSON object a line.
    pub intervals_file: String,
    /// The steps of `--threads auto`, when it was used.
    #[serde(default)]
    pub tuning: Vec<TuningStep>,
    /// Set when this result is a `report merge` of several hosts' results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<crate::storage::merge::StorageMerged>,
}

/// How the I/O reached the storage (docs/result-schema.md, "io_path").
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IoPath {
    /// The engine asked for: `auto`, `uring` or `threads`.
    pub asked: String,
    /// Buffered I/O (the page cache) asked for with `--buffered-io`.
    pub buffered_asked: bool,
    /// Why O_DIRECT is off (the error of the O_DIRECT open, or buffered I/O
    /// asked for); None when O_DIRECT is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_off: Option<String>,
    /// Why `auto` did not use io_uring (unavailable, its setup failed, or no
    /// O_DIRECT); None when nothing fell back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

impl StorageResult {
    /// The I/O path in words, for the summary and the report: the engine,
    /// O_DIRECT, and why O_DIRECT is off or `auto` fell back when it did.
    pub fn io_path_text(&self) -> String {
        let mut t = format!(
            "{} (O_DIRECT {})",
            self.io_engine,
            if self.o_direct { "yes" } else { "no" }
        );
        if let Some(p) = &self.io_path {
            if !self.o_direct
                && let Some(why) = &p.direct_off
            {
                t.push_str(&format!("; no O_DIRECT: {why}"));
            }
            if let Some(why) = &p.fallback {
                t.push_str(&format!("; auto fell back: {why}"));
            }
        }
        t
    }
}

impl IoPath {
    /// The reason a run through the page cache cannot pass, when it went
    /// through it (`o_direct` false) without buffered I/O asked for.
    pub fn unasked_page_cache(&self, o_direct: bool) -> Option<String> {
        if o_direct || self.buffered_asked {
            return None;
        }
        let why = self
            .direct_off
            .as_deref()
            .unwrap_or("O_DIRECT was not used");
        Some(format!(
            "The I/O went through the page cache ({why}), so the latencies are the page \
             cache's, not the storage's; use a file system with O_DIRECT, or --buffered-io \
             to measure through the page cache on purpose."
        ))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Window {
    pub warmup_s: f64,
    pub measured_s: f64,
    pub intervals: u64,
    pub interrupted: bool,
    /// The run reached its hard deadline (end of the measured window plus the
    /// shutdown grace) before its shutdown finished: I/O was stopped, the
    /// databases were left for recovery, the result is partial.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended_by_deadline: bool,
    /// The warm-up ("attaining prerequisites"): the database cache the measured
    /// window waited for, and what was reached. Absent in results of versions
    /// whose warm-up was a fixed time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prerequisites: Option<Prerequisites>,
}

/// "Attaining prerequisites": the warm-up lasts until the database cache of all
/// instances together holds at least its lower bound, or until its time limit.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Prerequisites {
    /// The lower bound: `preload_cache_pct` of the maximum database cache (of
    /// each database's size where that is smaller), over all instances, bytes.
    pub cache_lower_bound_bytes: u64,
    /// The maximum database cache over all instances, bytes.
    pub cache_max_bytes: u64,
    /// The pages held in the database cache when the measured window started, bytes.
    pub cache_reached_bytes: u64,
    /// How long attaining the prerequisites took (the warm-up), seconds.
    pub seconds: f64,
    /// The time limit of the warm-up, seconds.
    pub limit_s: f64,
    /// Whether the lower bound was reached; false: the time limit ended the
    /// warm-up and the measured window started with a colder cache.
    pub attained: bool,
    /// What the summary and report say when the time limit ended the warm-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl Prerequisites {
    /// The warm-up's record; the warning when the time limit, not the cache,
    /// ended it.
    pub fn new(lower_bound: u64, max: u64, reached: u64, seconds: f64, limit_s: f64) -> Self {
        let attained = reached >= lower_bound;
        let mb = |b: u64| b as f64 / 1048576.0;
        let warning = (!attained).then(|| {
            format!(
                "The database cache held {:.1} MB, under its lower bound of {:.1} MB, when the \
                 {:.0} s warm-up limit ended the warm-up: the measured window started with a \
                 colder cache than the published test waits for. Give a longer `--warmup` (the \
                 limit) or a smaller `--cache-size`.",
                mb(reached),
                mb(lower_bound),
                limit_s
            )
        });
        Prerequisites {
            cache_lower_bound_bytes: lower_bound,
            cache_max_bytes: max,
            cache_reached_bytes: reached,
            seconds,
            limit_s,
            attained,
            warning,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct InstanceResult {
    pub name: String,
    pub db_path: String,
    pub log_dir: String,
    pub size_bytes: u64,
    pub sessions: usize,
    pub transactional_iops: f64,
    pub classes: BTreeMap<String, ClassFigures>,
    pub counters: Counters,
    pub transactions_per_s: f64,
    pub page_fault_stalls_per_s: f64,
    pub clean_shutdown: bool,
    /// Overall histograms of the measured window per class (for merge).
    pub histograms: BTreeMap<String, LatencyHist>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Totals {
    pub target_iops: Option<f64>,
    pub transactional_iops: f64,
    pub db_read_share_pct: f64,
    pub log_write_share_pct: f64,
    pub transactions_per_s: f64,
    pub page_fault_stalls_per_s: f64,
    /// The highest page-fault stall rate of any database in any sample
    /// interval of the measured window.
    #[serde(default)]
    pub page_fault_stalls_max_per_s: f64,
    /// The highest average database read latency of any database over any
    /// sample interval of the measured window, in ms (what a sampled maximum
    /// is judged on; 0 in older results).
    #[serde(default)]
    pub db_read_sample_max_ms: f64,
    /// The same for log writes.
    #[serde(default)]
    pub log_write_sample_max_ms: f64,
    pub io_errors: u64,
    pub classes: BTreeMap<String, ClassFigures>,
    pub counters: Counters,
    pub transaction_latency_ms: LatencyMs,
    pub histograms: BTreeMap<String, LatencyHist>,
    pub thresholds: Thresholds,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct HostPerf {
    pub cpu_busy_avg_pct: f64,
    pub cpu_iowait_avg_pct: f64,
    pub memory_used_avg_pct: f64,
    pub memory_total_bytes: u64,
    /// CPU seconds of the mailbench process over the measured window.
    pub mailbench_cpu_s: f64,
    /// CPU seconds of the mailbench process over the whole load: warm-up,
    /// measured window and shutdown (0 in results older than this field).
    #[serde(default)]
    pub mailbench_run_cpu_s: f64,
    /// Window CPU per I/O of any class done in the window, in µs (0 in older results).
    #[serde(default)]
    pub mailbench_cpu_us_per_io: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DiskResult {
    pub device: String,
    pub paths: Vec<String>,
    pub rates: DiskRates,
}

/// One step of `--threads auto`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TuningStep {
    pub threads: u32,
    pub passed: bool,
    pub transactional_iops: f64,
    pub db_read_avg_ms: f64,
    pub log_write_avg_ms: f64,
    pub reasons: Vec<String>,
}

/// One line of intervals.jsonl.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IntervalRecord {
    pub seq: u64,
    pub end_s: f64,
    pub seconds: f64,
    /// `warmup` or `measured`.
    pub phase: String,
    pub instances: Vec<Stats>,
    pub cpu_busy_pct: f64,
    pub cpu_iowait_pct: f64,
    pub memory_used_pct: f64,
    pub disks: BTreeMap<String, DiskRates>,
}

pub fn class_map(s: &Stats, secs: f64) -> BTreeMap<String, ClassFigures> {
    CLASS_NAMES
        .iter()
        .zip(s.classes.iter())
        .map(|(n, c)| (n.to_string(), ClassFigures::of(c, secs)))
        .collect()
}

pub fn hist_map(s: &Stats) -> BTreeMap<String, LatencyHist> {
    let mut m: BTreeMap<String, LatencyHist> = CLASS_NAMES
        .iter()
        .zip(s.classes.iter())
        .map(|(n, c)| (n.to_string(), c.latency.clone()))
        .collect();
    m.insert("transaction".into(), s.transaction_latency.clone());
    m
}

#[cfg(test)]
mod io_path_tests {
    use super::IoPath;

    /// Every combination of O_DIRECT and buffered I/O asked for: only a run
    /// through the page cache that nobody asked for is refused, and its reason
    /// says why O_DIRECT was off and what to do.
    #[test]
    fn a_run_through_the_page_cache_passes_only_when_asked_for() {
        for o_direct in [true, false] {
            for buffered_asked in [true, false] {
                let p = IoPath {
                    asked: "auto".into(),
                    buffered_asked,
                    direct_off: (!o_direct).then(|| "opening ... failed: EINVAL".into()),
                    fallback: None,
                };
                let r = p.unasked_page_cache(o_direct);
                assert_eq!(
                    r.is_some(),
                    !o_direct && !buffered_asked,
                    "{o_direct} {buffered_asked}"
                );
                if let Some(r) = r {
                    assert!(r.contains("page cache") && r.contains("EINVAL"), "{r}");
                    assert!(r.contains("--buffered-io"), "{r}");
                }
            }
        }
    }
}
