//! The disclosure of a result: what was tested. The `[disclosure]` section a
//! user writes for what the tool cannot see (vendor, solution, storage model
//! and firmware, RAID layout, connectivity, best practices), beside what
//! mailbench detects on each host ([`Detected`], measured by
//! `mailbench_metrics::disclosure`, re-exported here). docs/disclosure.md
//! lists every key and every detected fact.

use mailbench_base::error::{Error, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use mailbench_metrics::disclosure::{
    BlockDevice, Detected, DeviceKind, Fact, Filesystem, PathFacts,
};

/// The longest one-line `[disclosure]` value, in bytes.
pub const MAX_DISCLOSURE_LINE_BYTES: usize = 4 << 10;
/// The longest `best_practices` or `notes` text, in bytes.
pub const MAX_DISCLOSURE_TEXT_BYTES: usize = 64 << 10;

/// The `[disclosure]` section: what the tested solution is, as its vendor
/// states it. Every key is optional; an unknown key is refused by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DisclosureToml {
    /// The storage vendor (`Contoso Storage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    /// The solution's name (`Contoso MailArray 5000, 10,000 mailboxes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solution: Option<String>,
    /// The storage system's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_model: Option<String>,
    /// The storage system's firmware version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_firmware: Option<String>,
    /// The RAID layout (`RAID-10, 24 × 1.2 TB 10k SAS, 2 hot spares`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid_layout: Option<String>,
    /// How the hosts reach the storage (`16 Gb FC, 2 paths`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connectivity: Option<String>,
    /// The best practices followed, as free text (lines kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_practices: Option<String>,
    /// Anything else to disclose, as free text (lines kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

impl DisclosureToml {
    /// (key, label, value, longest, multi-line) of every key, in the order
    /// a report lists them.
    fn keys(&self) -> [(&'static str, &'static str, &Option<String>, usize, bool); 8] {
        const LINE: usize = MAX_DISCLOSURE_LINE_BYTES;
        const TEXT: usize = MAX_DISCLOSURE_TEXT_BYTES;
        [
            ("vendor", "Vendor", &self.vendor, LINE, false),
            ("solution", "Solution", &self.solution, LINE, false),
            (
                "storage_model",
                "Storage model",
                &self.storage_model,
                LINE,
                false,
            ),
            (
                "storage_firmware",
                "Storage firmware",
                &self.storage_firmware,
                LINE,
                false,
            ),
            ("raid_layout", "RAID layout", &self.raid_layout, LINE, false),
            (
                "connectivity",
                "Connectivity",
                &self.connectivity,
                LINE,
                false,
            ),
            (
                "best_practices",
                "Best practices",
                &self.best_practices,
                TEXT,
                true,
            ),
            ("notes", "Notes", &self.notes, TEXT, true),
        ]
    }

    /// Refuses (exit 2) a value over its bound, or holding control
    /// characters (line breaks and tabs are allowed in `best_practices` and
    /// `notes`), naming the key.
    pub fn validate(&self) -> Result<()> {
        for (key, _, value, max, multi_line) in self.keys() {
            let Some(v) = value else { continue };
            if v.len() > max {
                return Err(Error::usage(format!(
                    "[disclosure] {key} is {} bytes long: at most {max} bytes",
                    v.len()
                )));
            }
            let allowed = |c: char| multi_line && matches!(c, '\n' | '\r' | '\t');
            if let Some(c) = v.chars().find(|&c| c.is_control() && !allowed(c)) {
                let what = if multi_line {
                    "control characters other than line breaks and tabs"
                } else {
                    "control characters (it is one line)"
                };
                return Err(Error::usage(format!(
                    "[disclosure] {key} holds {c:?}: {what} are not accepted"
                )));
            }
        }
        Ok(())
    }

    /// Whether no key is given.
    pub fn is_empty(&self) -> bool {
        self.keys().iter().all(|k| k.2.is_none())
    }

    /// One (label, text) row per key, a key not given saying so.
    pub fn rows(&self) -> Vec<(String, String)> {
        (self.keys().iter())
            .map(|(key, label, value, _, _)| {
                let text = match value {
                    Some(v) => v.clone(),
                    None => format!("not stated (the [disclosure] key {key})"),
                };
                (label.to_string(), text)
            })
            .collect()
    }
}

/// What was tested on one host: the user's statement and what mailbench
/// detected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Disclosure {
    pub declared: DisclosureToml,
    pub detected: Detected,
}

impl Disclosure {
    /// The "tested configuration" table: the declared rows, then the
    /// detected ones (one row per fact, unknowns with their reason).
    pub fn rows(&self) -> Vec<(String, String)> {
        let mut rows = self.declared.rows();
        rows.extend(self.detected.rows());
        rows
    }
}

#[cfg(test)]
pub(crate) mod tests;
