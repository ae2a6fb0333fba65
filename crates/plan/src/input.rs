//! The validated inputs of a plan.

use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// The failure the design must survive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Nothing fails.
    None,
    /// Any N servers of a group fail at once (a server, or servers sharing an enclosure).
    Servers(u32),
    /// A whole site fails.
    Site,
}

impl Failure {
    pub fn parse(text: &str) -> Result<Failure, String> {
        let t = text.trim().to_ascii_lowercase();
        match t.as_str() {
            "none" => Ok(Failure::None),
            "site" => Ok(Failure::Site),
            "server" => Ok(Failure::Servers(1)),
            _ => {
                let n = t
                    .strip_prefix("servers:")
                    .or_else(|| t.strip_prefix("server:"));
                match n.map(|n| n.trim().parse::<i64>()) {
                    Some(Ok(n)) if n < 0 => Err("the number of servers cannot be negative".into()),
                    Some(Ok(n)) => u32::try_from(n)
                        .map(Failure::Servers)
                        .map_err(|_| "too many servers".into()),
                    _ => Err("use none, servers:N (e.g. servers:1) or site".into()),
                }
            }
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::None => write!(f, "none"),
            Failure::Servers(n) => write!(f, "servers:{n}"),
            Failure::Site => write!(f, "site"),
        }
    }
}

impl Serialize for Failure {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How the number of databases per group is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DatabaseSpec {
    /// `--databases N`: databases per group.
    Count(u32),
    /// `--databases-per-server N`: database copies per server.
    PerServer(u32),
    /// Derived from the maximum database size.
    FromMaxSize,
}

/// The disk model: a preset and its (possibly overridden) figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disk {
    pub preset: String,
    pub description: String,
    pub source: String,
    /// Bytes.
    pub capacity: u64,
    /// Random IOPS per disk.
    pub iops: f64,
    pub capacity_overridden: bool,
    pub iops_overridden: bool,
}

/// Validated inputs. Sizes are in bytes, shares in percent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Input {
    pub mailboxes: u64,
    pub messages_per_day: f64,
    /// A measured database IOPS per active mailbox (`--iops-per-mailbox`), used in place of
    /// the guidance's figure and its message size factor; headroom still applies.
    pub iops_per_mailbox: Option<f64>,
    pub message_size: u64,
    pub mailbox_quota: u64,
    pub copies: u32,
    pub lagged_copies: u32,
    pub replay_lag_days: f64,
    pub groups: u32,
    /// Servers per group.
    pub servers: u32,
    pub site_servers: Vec<u32>,
    pub site_copies: Vec<u32>,
    pub databases: DatabaseSpec,
    pub max_database_size: Option<u64>,
    pub failure: Failure,
    pub headroom_pct: f64,
    pub guidance: String,
    pub disk: Disk,
    pub raid: String,
    pub raid_group: u32,
    pub disks_per_server: Option<u32>,
    pub white_space: Option<u64>,
    pub dumpster: Option<u64>,
    pub retention_days: f64,
    pub growth_pct: f64,
    pub content_index_pct: f64,
    pub log_days: f64,
    pub mailbox_moves_pct: f64,
    pub restore_volume: bool,
    #[serde(skip)]
    pub layout: bool,
    #[serde(skip)]
    pub markdown: bool,
    #[serde(skip)]
    pub emit_config: Option<PathBuf>,
    pub scale: f64,
    #[serde(skip)]
    pub paths: Vec<String>,
    #[serde(skip)]
    pub log_paths: Vec<String>,
    #[serde(skip)]
    pub duration: String,
}
