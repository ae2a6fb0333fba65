//! `storage backup`: sequential reads of every database, MB/s per database
//! and in total, and the copy when one was written.

use crate::storage::spec::StorageSpec;
use crate::storage::stats::ClassFigures;
use crate::verdict::{RunHeader, Verdict};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Read size of the backup test (the published figure: 262,144 bytes).
pub const BACKUP_READ: usize = 256 << 10;
/// Reads in flight per database.
pub const BACKUP_DEPTH: usize = 4;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BackupDb {
    pub name: String,
    pub size_mb: f64,
    pub mb_read: f64,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub pages_seen: u64,
    pub bad_pages: u64,
    pub first_bad_pages: Vec<u64>,
    pub read: ClassFigures,
    pub io_errors: u64,
    pub first_error: Option<String>,
    /// Where the copy was written (`--to`).
    pub copy: Option<PathBuf>,
    pub copy_write: Option<ClassFigures>,
    /// Bad pages found when the copy was read back (None: not verified).
    pub copy_bad_pages: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct BackupResult {
    #[serde(flatten)]
    pub run: RunHeader,
    pub verdict: Verdict,
    pub spec: StorageSpec,
    pub to: Option<PathBuf>,
    pub databases: Vec<BackupDb>,
    pub seconds: f64,
    /// All databases together: bytes read / wall time.
    pub total_mb_per_s: f64,
    /// Mean of the per-database MB/s.
    pub average_mb_per_s: f64,
    pub errors: Vec<String>,
}
