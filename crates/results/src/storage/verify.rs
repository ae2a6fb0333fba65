//! `storage verify`: every page and log block checked, per database, and the
//! one verdict wording of a verification (single host and over ranks).

use crate::verdict::{RunHeader, Verdict};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct VerifyDb {
    pub name: String,
    pub pages_seen: u64,
    pub bad_checksum_pages: u64,
    pub wrong_page_number_pages: u64,
    /// Pages whose LSN is beyond the end of the valid log: a write-ahead violation.
    pub newer_than_log_pages: u64,
    /// The first bad pages by number (at most 20).
    pub first_bad_pages: Vec<u64>,
    pub mb: f64,
    pub seconds: f64,
    pub log_files: u64,
    pub log_blocks_checked: u64,
    pub bad_log_blocks: u64,
    pub log_generation_gaps: u64,
    /// End of the valid log (the LSN after its last good block from the checkpoint on).
    pub log_end_lsn: u64,
    /// The first bad log blocks, as `E00000003.log block 17`.
    #[serde(default)]
    pub first_bad_log_blocks: Vec<String>,
    /// Valid blocks found after the end of the log (a flush torn by a crash):
    /// never acknowledged, never replayed, not an error.
    #[serde(default)]
    pub blocks_after_log_end: u64,
    pub io_errors: u64,
    /// The first I/O error, in words.
    #[serde(default)]
    pub first_error: Option<String>,
    /// Whether the database header says it was shut down cleanly.
    #[serde(default)]
    pub clean: bool,
    /// The database header says a replay stopped at a damaged log block: what
    /// was logged after it is lost (absent when not, and in older results).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lost_log_tail: bool,
}

impl VerifyDb {
    pub fn bad(&self) -> u64 {
        self.bad_checksum_pages
            + self.wrong_page_number_pages
            + self.newer_than_log_pages
            + self.bad_log_blocks
            + self.log_generation_gaps
            + self.io_errors
    }

    /// One plain sentence on what is wrong, if anything.
    pub fn reason(&self) -> Option<String> {
        if self.bad() == 0 {
            return None;
        }
        let mut parts = Vec::new();
        if self.bad_checksum_pages > 0 {
            parts.push(format!("{} bad-checksum pages", self.bad_checksum_pages));
        }
        if self.wrong_page_number_pages > 0 {
            parts.push(format!(
                "{} wrong-page-number pages",
                self.wrong_page_number_pages
            ));
        }
        if self.newer_than_log_pages > 0 {
            parts.push(format!(
                "{} pages newer than the end of the log (write-ahead violations)",
                self.newer_than_log_pages
            ));
        }
        if self.bad_log_blocks > 0 {
            parts.push(format!(
                "{} bad log blocks (first: {})",
                self.bad_log_blocks,
                self.first_bad_log_blocks.join(", ")
            ));
        }
        if self.log_generation_gaps > 0 {
            parts.push(format!(
                "{} missing log generations",
                self.log_generation_gaps
            ));
        }
        if self.io_errors > 0 {
            parts.push(format!(
                "{} read errors ({})",
                self.io_errors,
                self.first_error.as_deref().unwrap_or("I/O error")
            ));
        }
        let pages = if self.first_bad_pages.is_empty() {
            String::new()
        } else {
            format!("; first bad pages: {:?}", self.first_bad_pages)
        };
        Some(format!(
            "Verification of {} found {}{pages}.",
            self.name,
            parts.join(", ")
        ))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct VerifySummary {
    pub databases: Vec<VerifyDb>,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub bad_total: u64,
}

impl VerifySummary {
    pub fn reasons(&self) -> Vec<String> {
        self.databases.iter().filter_map(|d| d.reason()).collect()
    }
}

/// result.json of `storage verify` (kind `storage-verify`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StorageVerifyResult {
    #[serde(flatten)]
    pub run: RunHeader,
    pub verdict: Verdict,
    pub verify: VerifySummary,
    /// The rank of a test over several hosts, in its per-rank result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
}

impl StorageVerifyResult {
    /// The result of a verification: Fail with one sentence per bad database.
    pub fn new(mut run: RunHeader, verify: VerifySummary, elapsed: std::time::Duration) -> Self {
        run.finish(elapsed);
        StorageVerifyResult {
            run,
            verdict: Verdict::from_reasons(verify.reasons()),
            verify,
            rank: None,
        }
    }
}
