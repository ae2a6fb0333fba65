//! `storage init`: the databases created, resumed or opened.

use crate::verdict::{RunHeader, Verdict};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct InitDb {
    pub name: String,
    pub path: PathBuf,
    pub size_bytes: u64,
    /// `created`, `resumed` or `opened`.
    pub action: String,
    pub written_bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
}

impl InitDb {
    /// Its line in the printed summary: `db1 created /path (812 MB/s)`.
    pub fn line(&self) -> String {
        format!(
            "{} {} {} ({:.0} MB/s)",
            self.name,
            self.action,
            self.path.display(),
            self.mb_per_s
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
pub struct InitSummary {
    pub databases: Vec<InitDb>,
    pub written_bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub o_direct: bool,
    pub io_engine: String,
}

/// result.json of `storage init` (kind `storage-init`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StorageInitResult {
    #[serde(flatten)]
    pub run: RunHeader,
    pub verdict: Verdict,
    pub init: InitSummary,
    pub spec: crate::storage::spec::StorageSpec,
    /// The rank of a test over several hosts, in its per-rank result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
}
