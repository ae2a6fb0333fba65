//! The `[storage]` section and the `storage` commands' flags ([`StorageToml`]),
//! the per-host values over it ([`HOST_KEYS`]) and `threads` (a number or `auto`).

use super::{TestType, ThresholdsToml};
use mailbench_base::units::serde_duration;
use mailbench_base::{ByteSize, Error, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// `threads = 16` or `threads = "auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    Auto,
    Fixed(u32),
}

impl Serialize for Threads {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Threads::Auto => s.serialize_str("auto"),
            Threads::Fixed(n) => s.serialize_u32(*n),
        }
    }
}

impl std::str::FromStr for Threads {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "auto" {
            return Ok(Threads::Auto);
        }
        match s.parse::<u32>() {
            Ok(n) if n > 0 && n <= 4096 => Ok(Threads::Fixed(n)),
            _ => Err(format!(
                "threads `{s}` must be a number from 1 to 4096, or auto"
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Threads {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(i64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => n.to_string().parse().map_err(serde::de::Error::custom),
            Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

mailbench_base::options_struct! {
    /// The `[storage]` section and the `storage` commands' flags, defined once:
    /// each field is a TOML key and a flag (`--` + the key with `-`; the
    /// exceptions are named on the field), its doc line the flag's help. Flags
    /// win over the file, a host's values over the section's
    /// ([`StorageToml::overlay`], written by `options_struct!` from the same fields).
    #[derive(Debug, Clone, Default, Deserialize, Serialize, clap::Args)]
    #[serde(deny_unknown_fields)]
    pub struct StorageToml {
        /// Small databases under ./mailbench-data and a short run (about two minutes).
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub quick: Option<bool>,
        /// performance (2 h default) or stress (24 h, lenient maxima).
        #[serde(rename = "type")]
        #[arg(long = "type", value_name = "TYPE")]
        pub test_type: Option<TestType>,
        /// exchange2013 (default), exchange2007, exchange2003, or a profile TOML file.
        #[arg(long)]
        pub profile: Option<String>,
        /// Database folders (repeat or comma-separate); databases are spread over them.
        #[arg(long = "path", value_delimiter = ',', value_name = "DIR")]
        pub paths: Option<Vec<PathBuf>>,
        /// Log folders (default: beside each database).
        #[arg(long = "log-path", value_delimiter = ',', value_name = "DIR")]
        pub log_paths: Option<Vec<PathBuf>>,
        /// Number of databases (instances).
        #[arg(long)]
        pub databases: Option<u32>,
        /// Mailboxes over all databases.
        #[arg(long)]
        pub mailboxes: Option<u64>,
        /// Mailbox quota (database size = mailboxes x quota / databases).
        #[arg(long, value_parser = ByteSize::parse)]
        pub mailbox_quota: Option<ByteSize>,
        /// Size of each database.
        #[arg(long, value_parser = ByteSize::parse)]
        pub db_size: Option<ByteSize>,
        /// Databases sized to this share of the free space.
        #[arg(long)]
        pub capacity_pct: Option<f64>,
        /// Target IOPS per mailbox (target = mailboxes x this).
        #[arg(long)]
        pub iops_per_mailbox: Option<f64>,
        /// Target transactional IOPS; the load is paced open-loop at it.
        #[arg(long)]
        pub target_iops: Option<f64>,
        /// Database copies (each extra copy adds log replication reads).
        #[arg(long)]
        pub copies: Option<u32>,
        /// Sessions over all databases, or `auto`.
        #[arg(long)]
        pub threads: Option<Threads>,
        /// Measured window (e.g. 2h, 90s).
        #[serde(default, with = "serde_duration::option")]
        #[arg(long, value_parser = mailbench_base::parse_duration)]
        pub duration: Option<Duration>,
        /// Longest warm-up: the measured window starts once the database cache
        /// holds its lower bound (profile `preload_cache_pct`), or after this
        /// (default 30m; 30s with --quick).
        #[serde(default, with = "serde_duration::option")]
        #[arg(long, value_parser = mailbench_base::parse_duration)]
        pub warmup: Option<Duration>,
        /// Sampling interval (default 15s).
        #[serde(default, with = "serde_duration::option")]
        #[arg(long, value_parser = mailbench_base::parse_duration)]
        pub sample_interval: Option<Duration>,
        /// run: how long the clean shutdown after the measured window may take
        /// before I/O is stopped and a partial result written (default 60s, 1s to 1h).
        #[serde(default, with = "serde_duration::option")]
        #[arg(long, value_parser = mailbench_base::parse_duration)]
        pub shutdown_grace: Option<Duration>,
        /// auto, uring or threads.
        #[arg(long)]
        pub io_engine: Option<String>,
        /// Go through the page cache on purpose (no O_DIRECT): a run's latencies are then
        /// the page cache's. Without it, a run that cannot use O_DIRECT cannot PASS.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub buffered_io: Option<bool>,
        /// I/O threads that run the databases, each serving its share of them
        /// over one I/O engine (default: one per CPU, at most one per database).
        #[arg(long)]
        pub io_threads: Option<u32>,
        /// Maximum database cache over all databases.
        #[arg(long, value_parser = ByteSize::parse)]
        pub cache_size: Option<ByteSize>,
        /// Skip the page and log verification after the run (storage run) or the replay
        /// (storage recover, also with --log-files 0).
        #[arg(long = "no-verify", num_args = 0, default_missing_value = "false")]
        pub verify: Option<bool>,
        /// Attach existing databases (checking their headers) instead of creating.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub open: Option<bool>,
        /// Random seed of the workload.
        #[arg(long)]
        pub seed: Option<u64>,
        /// Profile values over the chosen profile's (`[storage.profile_overrides]`; file only).
        #[arg(skip)]
        pub profile_overrides: Option<toml::Table>,
        /// Verdict thresholds over the profile's (`[storage.thresholds]`; file only).
        #[arg(skip)]
        pub thresholds: Option<ThresholdsToml>,
        /// recover: new log files per database to generate and replay (default 500;
        /// 0 = only replay what a crash left).
        #[serde(default)]
        #[arg(long)]
        pub log_files: Option<u64>,
        /// backup: also write the copy to this folder, then verify it.
        #[serde(default)]
        #[arg(long = "to", value_name = "DIR")]
        pub backup_to: Option<PathBuf>,
        /// `storage run`: start the load at this wall-clock time (RFC 3339);
        /// other commands ignore it, so one file serves them all (the flag is
        /// defined with the many-hosts flags).
        #[serde(default)]
        #[arg(skip)]
        pub start_at: Option<String>,
        /// Per-host values (`[storage.hosts."db07"]`) over the section's, under
        /// the flags: each host of a many-hosts test finds its own folders (file only).
        #[serde(default)]
        #[arg(skip)]
        pub hosts: Option<std::collections::BTreeMap<String, StorageToml>>,
    }
}

/// The keys a `[storage.hosts."NAME"]` table may set: what differs from host
/// to host (the other keys are the test's, the same everywhere).
pub const HOST_KEYS: [&str; 7] = [
    "paths",
    "log_paths",
    "databases",
    "mailboxes",
    "target_iops",
    "threads",
    "backup_to",
];

impl StorageToml {
    /// The section with `[storage.hosts."host"]` applied over it, if present;
    /// every host table is checked to set only [`HOST_KEYS`].
    pub fn for_host(mut self, host: &str) -> Result<StorageToml> {
        let hosts = self.hosts.take().unwrap_or_default();
        for (name, table) in &hosts {
            if let Some(field) = table.given().into_iter().find(|k| !HOST_KEYS.contains(k)) {
                // Named as the file writes it (the one field serde renames).
                let key = if field == "test_type" { "type" } else { field };
                return Err(Error::usage(format!(
                    "[storage.hosts.\"{name}\"]: `{key}` is the same on every host; \
                     a host table may set only {}",
                    HOST_KEYS.join(", ")
                )));
            }
        }
        if let Some(h) = hosts.get(host) {
            self.overlay(h.clone());
        }
        self.hosts = Some(hosts);
        Ok(self)
    }
}
