//! `storage recover`: log generation, replay per instance and the check after.

use crate::storage::spec::StorageSpec;
use crate::storage::stats::ClassFigures;
use crate::storage::verify::VerifySummary;
use crate::verdict::{RunHeader, Verdict};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What replay did on one instance.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ReplayResult {
    pub name: String,
    /// Replay was needed (the database was not shut down cleanly).
    pub needed: bool,
    pub start_lsn: u64,
    pub end_lsn: u64,
    pub log_files_replayed: u64,
    pub log_bytes: u64,
    pub records: u64,
    pub transactions: u64,
    pub updates_applied: u64,
    /// Updates whose page already held them (page LSN >= record LSN).
    pub updates_skipped: u64,
    /// Updates of a transaction without a commit record at the end of the log.
    pub uncommitted_updates_dropped: u64,
    pub seconds: f64,
    /// CPU time of the replay: its thread (decoding, applying, checksums) and
    /// the thread faulting in its cache memory.
    #[serde(default)]
    pub cpu_seconds: f64,
    pub seconds_per_log_file: f64,
    pub db_reads_per_log_file: f64,
    /// Database write operations per database read operation during replay (the
    /// published soft-recovery shape is about 0.01). Absent in older results.
    #[serde(default)]
    pub db_writes_per_read: f64,
    /// Database writes issued while the log was being replayed (only when
    /// every cache frame held a dirty page). Absent in older results.
    #[serde(default)]
    pub db_writes_during_replay: u64,
    /// Database writes of the final flush that makes the replayed state
    /// durable before the checkpoint moves to the end of the log (the pages
    /// left dirty by the crash). Absent in older results.
    #[serde(default)]
    pub db_writes_at_checkpoint: u64,
    /// Seconds of that final flush, from the moment the whole log is decoded
    /// (it overlaps the last updates), included in `seconds`. Absent in older results.
    #[serde(default)]
    pub checkpoint_seconds: f64,
    pub db_read: ClassFigures,
    pub db_write: ClassFigures,
    pub log_read: ClassFigures,
    /// Where and why replay stopped, in words.
    pub stopped: String,
    /// The log was damaged (bad block or undecodable record) before its end.
    pub log_damaged: bool,
    pub bad_pages: Vec<u64>,
    pub errors: Vec<String>,
    /// The database was left consistent and marked clean.
    pub clean: bool,
}

/// Log generation before the replay, per instance.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct GenerateResult {
    pub name: String,
    pub log_files: u64,
    pub transactions: u64,
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RecoverResult {
    #[serde(flatten)]
    pub run: RunHeader,
    pub verdict: Verdict,
    pub spec: StorageSpec,
    pub log_files_wanted: u64,
    /// Recovery of databases that were already left unclean (a crash before this test).
    pub prior_recovery: Vec<ReplayResult>,
    pub generation: Vec<GenerateResult>,
    pub instances: Vec<ReplayResult>,
    pub verify: Option<VerifySummary>,
    pub errors: Vec<String>,
}
