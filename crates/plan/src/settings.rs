//! The inputs of `mailbench plan` as users write them: flags and the `[plan]` section of a
//! `--config` file share this one type (flags override the file), and [`Settings::validate`]
//! checks every value, naming the input in its usage error (exit 2).

use crate::input::{DatabaseSpec, Disk, Failure, Input};
use crate::rules::{Rules, disk_presets};
use mailbench_base::limits::{Bound, Unit, check_options};
use mailbench_base::{ByteSize, Error, Result, parse_duration, parse_percent};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A size written as text (`"4GB"`) or as a number of bytes.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum SizeValue {
    Int(i64),
    Float(f64),
    Text(String),
}

impl From<String> for SizeValue {
    fn from(s: String) -> Self {
        SizeValue::Text(s)
    }
}

/// A number or a word (`2013`, `"jbod"`, `"20%"`, `"8,4"`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Word {
    Int(i64),
    Float(f64),
    Text(String),
}

impl From<String> for Word {
    fn from(s: String) -> Self {
        Word::Text(s)
    }
}

impl Word {
    fn text(&self) -> String {
        match self {
            Word::Int(i) => i.to_string(),
            Word::Float(f) => f.to_string(),
            Word::Text(t) => t.trim().to_string(),
        }
    }
}

/// A list of whole numbers: `[8, 4]` in TOML, `8,4` on the command line.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum CountList {
    List(Vec<i64>),
    Text(String),
}

impl From<String> for CountList {
    fn from(s: String) -> Self {
        CountList::Text(s)
    }
}

/// A list of strings: `["/a", "/b"]` in TOML, `/a,/b` on the command line.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum TextList {
    List(Vec<String>),
    Text(String),
}

impl From<String> for TextList {
    fn from(s: String) -> Self {
        TextList::Text(s)
    }
}

impl TextList {
    fn items(&self) -> Vec<String> {
        match self {
            TextList::List(v) => v.iter().map(|s| s.trim().to_string()).collect(),
            TextList::Text(t) => t
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        }
    }
}

mailbench_base::options_struct! {
    /// Every input of the planner; `None` means "not given here" (a lower layer or the
    /// default applies). Each field is both a flag (`--mailbox-quota`) and a key
    /// (`mailbox_quota`) of the `[plan]` section, defined here once: the field's doc line
    /// is the flag's help.
    #[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, clap::Args)]
    #[serde(deny_unknown_fields)]
    #[command(allow_negative_numbers = true)]
    pub struct Settings {
        /// Mailboxes to plan for (required).
        #[arg(long, value_name = "N")]
        pub mailboxes: Option<i64>,
        /// Messages sent + received per mailbox per day [default: 150].
        #[arg(long, value_name = "N")]
        pub messages_per_day: Option<f64>,
        /// Measured database IOPS per active mailbox (e.g. a mail sweep's
        /// server.per_mailbox_real_day), in place of the guidance's figure [default: the guidance].
        #[arg(long, value_name = "IOPS")]
        pub iops_per_mailbox: Option<f64>,
        /// Average message size [default: 75KiB, Microsoft's "75 KB"].
        #[arg(long, value_name = "SIZE")]
        pub message_size: Option<SizeValue>,
        /// Mailbox quota, e.g. 4GB (required).
        #[arg(long, value_name = "SIZE")]
        pub mailbox_quota: Option<SizeValue>,
        /// Copies of each database, counting the active one and any lagged ones [default: 1].
        #[arg(long, value_name = "N")]
        pub copies: Option<i64>,
        /// How many of the copies are lagged (never activated) [default: 0].
        #[arg(long, value_name = "N")]
        pub lagged_copies: Option<i64>,
        /// Replay lag of lagged copies, e.g. 7d [default: 7d].
        #[arg(long, value_name = "DURATION")]
        pub replay_lag: Option<Word>,
        /// Groups of servers (database availability groups); mailboxes split evenly [default: 1].
        #[arg(long, value_name = "N")]
        pub groups: Option<i64>,
        /// Servers per group [default: the sum of --site-servers, else 1 per site].
        #[arg(long, value_name = "N")]
        pub servers: Option<i64>,
        /// Sites [default: 1, or the length of --site-servers].
        #[arg(long, value_name = "N")]
        pub sites: Option<i64>,
        /// Servers per site, e.g. 8,4 (the first site holds the active copies) [default: even split].
        #[arg(long, value_name = "LIST")]
        pub site_servers: Option<CountList>,
        /// Copies per site, e.g. 2,1 [default: even split, first sites first].
        #[arg(long, value_name = "LIST")]
        pub site_copies: Option<CountList>,
        /// Databases per group [default: from --databases-per-server or the database size advice].
        #[arg(long, value_name = "N")]
        pub databases: Option<i64>,
        /// Database copies (active + passive) per server; databases = servers x N / copies.
        #[arg(long, value_name = "N")]
        pub databases_per_server: Option<i64>,
        /// Largest database when the count is derived [default: 200GiB stand-alone, 2TiB with copies].
        #[arg(long, value_name = "SIZE")]
        pub max_database_size: Option<SizeValue>,
        /// Failure to survive: none, servers:N or site [default: servers:1 with copies, else none].
        #[arg(long, value_name = "FAILURE")]
        pub failure: Option<Word>,
        /// I/O headroom added to the guidance IOPS [default: 20%].
        #[arg(long, value_name = "PCT")]
        pub headroom: Option<Word>,
        /// Guidance version: 2013 (also 2016/2019) or 2010 [default: 2013].
        #[arg(long, value_name = "VERSION")]
        pub guidance: Option<Word>,
        /// Disk preset: nl-sas-7k2, sas-10k, sas-15k, ssd, nvme [default: nl-sas-7k2].
        #[arg(long, value_name = "PRESET")]
        pub disk: Option<String>,
        /// Override the preset's capacity per disk, e.g. 4TB.
        #[arg(long, value_name = "SIZE")]
        pub disk_capacity: Option<SizeValue>,
        /// Override the preset's random IOPS per disk.
        #[arg(long, value_name = "IOPS")]
        pub disk_iops: Option<f64>,
        /// RAID level: 1, 10, 5, 6 or jbod [default: 10].
        #[arg(long, value_name = "LEVEL")]
        pub raid: Option<Word>,
        /// Disks per RAID group [default: 1 -> 2, 10 -> 4, 5 -> 5, 6 -> 6, jbod -> 1].
        #[arg(long, value_name = "N")]
        pub raid_group: Option<i64>,
        /// Disks each server has (check a given design instead of sizing one).
        #[arg(long, value_name = "N")]
        pub disks_per_server: Option<i64>,
        /// White space per mailbox [default: one day of mail].
        #[arg(long, value_name = "SIZE")]
        pub white_space: Option<SizeValue>,
        /// Dumpster (recoverable items) per mailbox [default: retention days of mail + 7 % of the quota].
        #[arg(long, value_name = "SIZE")]
        pub dumpster: Option<SizeValue>,
        /// Deleted item retention in days [default: 14].
        #[arg(long, value_name = "DAYS")]
        pub retention_days: Option<f64>,
        /// Growth reserve on the database volume [default: 20%].
        #[arg(long, value_name = "PCT")]
        pub growth: Option<Word>,
        /// Content index as a share of the database [default: 0%].
        #[arg(long, value_name = "PCT")]
        pub content_index: Option<Word>,
        /// Days of logs to keep room for [default: 3].
        #[arg(long, value_name = "DAYS")]
        pub log_days: Option<f64>,
        /// Mailboxes moved per week, as a share of all: their content passes through
        /// the target database's log [default: 1%].
        #[arg(long, value_name = "PCT")]
        pub mailbox_moves: Option<Word>,
        /// Add a restore volume (one database + its logs) per server.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub restore_volume: Option<bool>,
        /// Print the copy layout: which server holds each copy, and the actives after each failure.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub layout: Option<bool>,
        /// Print the report as Markdown.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub markdown: Option<bool>,
        /// Write the storage test for the most loaded server to FILE.toml.
        #[arg(long, value_name = "FILE.toml")]
        pub emit_config: Option<PathBuf>,
        /// Scale the emitted test's sizes for a lab, e.g. 0.01 [default: 1].
        #[arg(long, value_name = "SHARE")]
        pub scale: Option<f64>,
        /// Database folders of the emitted test, comma-separated [default: ./mailbench-data].
        #[arg(long, value_name = "LIST")]
        pub paths: Option<TextList>,
        /// Log folders of the emitted test, comma-separated.
        #[arg(long, value_name = "LIST")]
        pub log_paths: Option<TextList>,
        /// Measured window of the emitted test [default: 2h].
        #[arg(long, value_name = "DURATION")]
        pub duration: Option<String>,
    }
}

/// How an input is named in messages: the flag and the config key.
pub fn input_name(key: &str) -> String {
    format!("--{} ([plan] {key})", key.replace('_', "-"))
}

const TIB: f64 = (1u64 << 40) as f64;

/// The range of every numeric input of the planner (flag and `[plan]` key),
/// checked by the one numeric validator before anything else: a plan's
/// tables grow with servers, sites, groups and databases, so each has a
/// ceiling a real design stays far below.
pub const BOUNDS: &[Bound] = &[
    Bound::new("mailboxes", 1.0, MAX_MAILBOXES, Unit::Count),
    Bound::new("messages_per_day", 0.0, MAX_MESSAGES_PER_DAY, Unit::Number),
    Bound::new("iops_per_mailbox", 0.0, MAX_IOPS_PER_MAILBOX, Unit::Number).with_hint(
        "no mailbox needs more; a compressed day's figure is too high by the compression: take a sweep's server.per_mailbox_real_day",
    ),
    Bound::new("message_size", 1.0, (1u64 << 30) as f64, Unit::Bytes),
    Bound::new("mailbox_quota", 1.0, 100.0 * TIB, Unit::Bytes),
    Bound::new("copies", 1.0, 16.0, Unit::Count),
    Bound::new("lagged_copies", 0.0, 16.0, Unit::Count),
    Bound::new("replay_lag", 0.0, MAX_DAYS, Unit::Number),
    Bound::new("groups", 1.0, 1000.0, Unit::Count),
    Bound::new("servers", 1.0, MAX_SERVERS, Unit::Count),
    Bound::new("sites", 1.0, 100.0, Unit::Count),
    Bound::new("site_servers.*", 0.0, MAX_SERVERS, Unit::Count),
    Bound::new("site_copies.*", 0.0, 16.0, Unit::Count),
    Bound::new("databases", 1.0, 100_000.0, Unit::Count),
    Bound::new("databases_per_server", 1.0, 10_000.0, Unit::Count),
    Bound::new("max_database_size", 1.0, 100.0 * TIB, Unit::Bytes),
    Bound::new("headroom", 0.0, MAX_PCT, Unit::Percent),
    Bound::new("disk_capacity", 1.0, 10_000.0 * TIB, Unit::Bytes),
    Bound::new("disk_iops", 0.001, 1e8, Unit::Number),
    Bound::new("raid_group", 1.0, 1000.0, Unit::Count),
    Bound::new("disks_per_server", 1.0, 100_000.0, Unit::Count),
    Bound::new("white_space", 0.0, 10_000.0 * TIB, Unit::Bytes),
    Bound::new("dumpster", 0.0, 10_000.0 * TIB, Unit::Bytes),
    Bound::new("retention_days", 0.0, MAX_DAYS, Unit::Number),
    Bound::new("growth", 0.0, MAX_PCT, Unit::Percent),
    Bound::new("content_index", 0.0, MAX_PCT, Unit::Percent),
    Bound::new("log_days", 0.0, MAX_DAYS, Unit::Number),
    Bound::new("move_share", 0.0, 100.0, Unit::Percent),
    Bound::new("mailbox_moves", 0.0, 100.0, Unit::Percent),
    Bound::new("scale", 0.000_001, 1.0, Unit::Number),
    Bound::new(
        "duration",
        1.0,
        mailbench_base::limits::MAX_RUN_DURATION.as_secs() as f64,
        Unit::Seconds,
    ),
];

/// Servers per group (and per site).
const MAX_SERVERS: f64 = 10_000.0;

/// Input maxima (see also `--scale`, at most 1).
const MAX_MAILBOXES: f64 = 1e9;
const MAX_MESSAGES_PER_DAY: f64 = 1e6;
/// Retention, log keeping and replay lag: ten years.
const MAX_DAYS: f64 = 3650.0;
/// Headroom, growth and content index shares.
const MAX_PCT: f64 = 1000.0;
/// A measured IOPS per mailbox: the heaviest published profiles need about 0.5; 10 is
/// far past any real mailbox and below a compressed day's figure (hundreds).
pub const MAX_IOPS_PER_MAILBOX: f64 = 10.0;

/// `--iops-per-mailbox`: a measured figure, positive, finite and at most
/// [`MAX_IOPS_PER_MAILBOX`].
fn measured_iops(v: Option<f64>) -> Result<Option<f64>> {
    let Some(x) = v else { return Ok(None) };
    let key = "iops_per_mailbox";
    if !x.is_finite() || x <= 0.0 {
        return Err(bad(
            key,
            x,
            "must be a positive number of IOPS per mailbox, e.g. a sweep's server.per_mailbox_real_day",
        ));
    }
    if x > MAX_IOPS_PER_MAILBOX {
        return Err(bad(
            key,
            x,
            format!(
                "must be at most {MAX_IOPS_PER_MAILBOX}: no mailbox needs that much; a compressed day's figure is too high by the compression, take a sweep's server.per_mailbox_real_day"
            ),
        ));
    }
    Ok(Some(x))
}

fn bad(key: &str, shown: impl std::fmt::Display, why: impl std::fmt::Display) -> Error {
    Error::usage(format!("{} = {shown}: {why}", input_name(key)))
}

fn count(key: &str, v: Option<i64>, default: i64, min: i64) -> Result<u32> {
    let n = v.unwrap_or(default);
    if n < min {
        let why = if n < 0 {
            "counts cannot be negative".to_string()
        } else {
            format!("must be at least {min}")
        };
        return Err(bad(key, n, why));
    }
    u32::try_from(n).map_err(|_| bad(key, n, "is too large"))
}

fn size(key: &str, v: &Option<SizeValue>) -> Result<Option<u64>> {
    match v {
        None => Ok(None),
        Some(SizeValue::Int(i)) if *i >= 0 => Ok(Some(*i as u64)),
        Some(SizeValue::Int(i)) => Err(bad(key, i, "sizes cannot be negative")),
        Some(SizeValue::Float(f)) if *f >= 0.0 && f.is_finite() => Ok(Some(f.round() as u64)),
        Some(SizeValue::Float(f)) => Err(bad(key, f, "sizes cannot be negative")),
        Some(SizeValue::Text(t)) => ByteSize::parse(t)
            .map(|b| Some(b.0))
            .map_err(|e| bad(key, format!("\"{t}\""), e)),
    }
}

fn percent(key: &str, v: &Option<Word>, default: f64) -> Result<f64> {
    match v {
        None => Ok(default),
        Some(Word::Int(i)) if *i >= 0 => Ok(*i as f64),
        Some(Word::Float(f)) if *f >= 0.0 && f.is_finite() => Ok(*f),
        Some(w) => {
            let t = w.text();
            // A bare number is a percentage here: `headroom = 20` is 20 %.
            if let Ok(f) = t.trim_end_matches('%').trim().parse::<f64>()
                && f >= 0.0
                && f.is_finite()
            {
                return Ok(f);
            }
            parse_percent(&t).map_err(|e| bad(key, format!("\"{t}\""), e))
        }
    }
}

fn positive(key: &str, v: Option<f64>, default: f64, allow_zero: bool) -> Result<f64> {
    let x = v.unwrap_or(default);
    if !x.is_finite() || x < 0.0 || (!allow_zero && x == 0.0) {
        let why = if x < 0.0 {
            "cannot be negative"
        } else {
            "must be a positive number"
        };
        return Err(bad(key, x, why));
    }
    Ok(x)
}

fn count_list(key: &str, v: &Option<CountList>) -> Result<Option<Vec<u32>>> {
    let raw: Vec<i64> = match v {
        None => return Ok(None),
        Some(CountList::List(l)) => l.clone(),
        Some(CountList::Text(t)) => {
            let mut out = Vec::new();
            for part in t.split([',', '+']).map(str::trim).filter(|s| !s.is_empty()) {
                out.push(part.parse::<i64>().map_err(|_| {
                    bad(
                        key,
                        format!("\"{t}\""),
                        format!("`{part}` is not a whole number; write e.g. 8,4"),
                    )
                })?);
            }
            out
        }
    };
    if raw.is_empty() {
        return Err(bad(key, "[]", "give one number per site, e.g. 8,4"));
    }
    raw.iter()
        .map(|&n| {
            if n < 0 {
                Err(bad(key, n, "counts cannot be negative"))
            } else {
                u32::try_from(n).map_err(|_| bad(key, n, "is too large"))
            }
        })
        .collect::<Result<Vec<u32>>>()
        .map(Some)
}

/// Default split of `total` over `parts`: as even as possible, the first parts larger.
pub fn even_split(total: u32, parts: u32) -> Vec<u32> {
    let parts = parts.max(1);
    (0..parts)
        .map(|i| total / parts + u32::from(i < total % parts))
        .collect()
}

impl Settings {
    /// `self` over `lower`: each value of `self` wins where given.
    pub fn merge(self, lower: Settings) -> Settings {
        let mut merged = lower;
        merged.overlay(self);
        merged
    }

    /// Checks every input and applies the defaults; errors are usage errors naming the input.
    pub fn validate(&self, rules: &Rules) -> Result<Input> {
        check_options("[plan]", self, BOUNDS)?;
        let load = self.load()?;
        let copies = self.copies(rules)?;
        let sites = self.sites(&copies)?;
        let (databases, max_database_size) = self.databases()?;
        let failure = self.failure(&copies, &sites)?;
        let headroom_pct = percent("headroom", &self.headroom, 20.0)?;
        let guidance = self.guidance(rules)?;
        let disk = self.disk()?;
        let raid = self.raid(rules)?;
        let cap = self.capacity(rules)?;
        let paths = self.paths.as_ref().map(TextList::items).unwrap_or_default();
        let log_paths = self
            .log_paths
            .as_ref()
            .map(TextList::items)
            .unwrap_or_default();
        let duration = match &self.duration {
            None => "2h".to_string(),
            Some(t) => {
                parse_duration(t).map_err(|e| bad("duration", format!("\"{t}\""), e))?;
                t.trim().to_string()
            }
        };
        // Upper bounds: past them the figures stop meaning anything (and the
        // model's arithmetic leaves the range it is exact in).
        for (key, x, max) in [
            ("mailboxes", load.mailboxes as f64, MAX_MAILBOXES),
            (
                "messages_per_day",
                load.messages_per_day,
                MAX_MESSAGES_PER_DAY,
            ),
            ("replay_lag", copies.replay_lag_days, MAX_DAYS),
            ("headroom", headroom_pct, MAX_PCT),
            ("retention_days", cap.retention_days, MAX_DAYS),
            ("growth", cap.growth_pct, MAX_PCT),
            ("content_index", cap.content_index_pct, MAX_PCT),
            ("log_days", cap.log_days, MAX_DAYS),
            ("mailbox_moves", cap.mailbox_moves_pct, 100.0),
        ] {
            if x.is_nan() || x > max {
                return Err(bad(key, x, format!("must be at most {max}")));
            }
        }
        Ok(Input {
            mailboxes: load.mailboxes,
            messages_per_day: load.messages_per_day,
            iops_per_mailbox: load.iops_per_mailbox,
            message_size: load.message_size,
            mailbox_quota: load.mailbox_quota,
            copies: copies.copies,
            lagged_copies: copies.lagged_copies,
            replay_lag_days: copies.replay_lag_days,
            groups: copies.groups,
            servers: sites.servers,
            site_servers: sites.site_servers,
            site_copies: sites.site_copies,
            databases,
            max_database_size,
            failure,
            headroom_pct,
            guidance,
            disk,
            raid: raid.level,
            raid_group: raid.group,
            disks_per_server: raid.disks_per_server,
            white_space: cap.white_space,
            dumpster: cap.dumpster,
            retention_days: cap.retention_days,
            growth_pct: cap.growth_pct,
            content_index_pct: cap.content_index_pct,
            log_days: cap.log_days,
            mailbox_moves_pct: cap.mailbox_moves_pct,
            restore_volume: self.restore_volume.unwrap_or(false),
            layout: self.layout.unwrap_or(false),
            markdown: self.markdown.unwrap_or(false),
            emit_config: self.emit_config.clone(),
            scale: cap.scale,
            paths,
            log_paths,
            duration,
        })
    }
}

/// The users' load: how many mailboxes, their traffic and sizes.
struct Load {
    mailboxes: u64,
    messages_per_day: f64,
    iops_per_mailbox: Option<f64>,
    message_size: u64,
    mailbox_quota: u64,
}

/// Database copies per group.
struct Copies {
    copies: u32,
    lagged_copies: u32,
    replay_lag_days: f64,
    groups: u32,
}

/// Servers and copies per site.
struct Sites {
    sites: u32,
    servers: u32,
    site_servers: Vec<u32>,
    site_copies: Vec<u32>,
}

/// The RAID level, its group size and the disks per server.
struct Raid {
    level: String,
    group: u32,
    disks_per_server: Option<u32>,
}

/// Space, retention and growth inputs.
struct Capacity {
    white_space: Option<u64>,
    dumpster: Option<u64>,
    retention_days: f64,
    growth_pct: f64,
    content_index_pct: f64,
    log_days: f64,
    mailbox_moves_pct: f64,
    scale: f64,
}

impl Settings {
    fn load(&self) -> Result<Load> {
        let mailboxes = match self.mailboxes {
            None => {
                return Err(Error::usage(format!(
                    "{} is required: the number of mailboxes to plan for",
                    input_name("mailboxes")
                )));
            }
            Some(n) if n < 0 => return Err(bad("mailboxes", n, "counts cannot be negative")),
            Some(0) => return Err(bad("mailboxes", 0, "must be at least 1")),
            Some(n) => n as u64,
        };
        let messages_per_day = positive("messages_per_day", self.messages_per_day, 150.0, false)?;
        let iops_per_mailbox = measured_iops(self.iops_per_mailbox)?;
        let message_size = size("message_size", &self.message_size)?.unwrap_or(75 * 1024);
        if message_size == 0 {
            return Err(bad("message_size", 0, "must be larger than zero"));
        }
        let Some(mailbox_quota) = size("mailbox_quota", &self.mailbox_quota)? else {
            return Err(Error::usage(format!(
                "{} is required: the mailbox size limit, e.g. 4GB",
                input_name("mailbox_quota")
            )));
        };
        if mailbox_quota < message_size {
            return Err(bad(
                "mailbox_quota",
                ByteSize(mailbox_quota),
                format!(
                    "the quota is smaller than one average message ({}, --message-size)",
                    ByteSize(message_size)
                ),
            ));
        }
        Ok(Load {
            mailboxes,
            messages_per_day,
            iops_per_mailbox,
            message_size,
            mailbox_quota,
        })
    }

    fn copies(&self, rules: &Rules) -> Result<Copies> {
        let copies = count("copies", self.copies, 1, 1)?;
        let lagged_copies = count("lagged_copies", self.lagged_copies, 0, 0)?;
        if lagged_copies >= copies {
            return Err(bad(
                "lagged_copies",
                lagged_copies,
                format!(
                    "must be fewer than --copies ({copies}): copies count every copy, the active one and any lagged ones"
                ),
            ));
        }
        let replay_lag_days = match &self.replay_lag {
            None => rules.capacity.default_replay_lag_days,
            Some(Word::Int(s)) if *s >= 0 => *s as f64 / 86400.0,
            Some(Word::Float(s)) if *s >= 0.0 => *s / 86400.0,
            Some(w) => {
                let t = w.text();
                parse_duration(&t)
                    .map_err(|e| bad("replay_lag", format!("\"{t}\""), e))?
                    .as_secs_f64()
                    / 86400.0
            }
        };
        let replay_lag_days = if lagged_copies == 0 {
            0.0
        } else {
            replay_lag_days
        };
        let groups = count("groups", self.groups, 1, 1)?;
        Ok(Copies {
            copies,
            lagged_copies,
            replay_lag_days,
            groups,
        })
    }

    fn sites(&self, c: &Copies) -> Result<Sites> {
        let site_servers_given = count_list("site_servers", &self.site_servers)?;
        let site_copies_given = count_list("site_copies", &self.site_copies)?;
        let sites = match (self.sites, &site_servers_given, &site_copies_given) {
            (Some(_), _, _) => count("sites", self.sites, 1, 1)?,
            (None, Some(l), _) => l.len() as u32,
            (None, None, Some(l)) => l.len() as u32,
            (None, None, None) => 1,
        };
        let site_servers = self.site_servers(site_servers_given, sites)?;
        let servers: u32 = site_servers.iter().sum();
        if c.copies > servers {
            return Err(bad(
                "copies",
                c.copies,
                format!(
                    "more copies than servers per group ({servers}, --servers): each copy of a database needs its own server"
                ),
            ));
        }
        let site_copies = site_copies(site_copies_given, sites, c.copies)?;
        check_site_copies(&site_copies, &site_servers)?;
        Ok(Sites {
            sites,
            servers,
            site_servers,
            site_copies,
        })
    }

    /// Servers per site: as given (matching --sites and --servers), or
    /// --servers split evenly.
    fn site_servers(&self, given: Option<Vec<u32>>, sites: u32) -> Result<Vec<u32>> {
        let Some(l) = given else {
            let servers = count("servers", self.servers, i64::from(sites), 1)?;
            if servers < sites {
                return Err(bad(
                    "servers",
                    servers,
                    format!("fewer servers than sites ({sites}, --sites)"),
                ));
            }
            return Ok(even_split(servers, sites));
        };
        if l.len() as u32 != sites {
            return Err(bad(
                "site_servers",
                format!("{l:?}"),
                format!("gives {} sites but --sites is {sites}", l.len()),
            ));
        }
        if let Some(pos) = l.iter().position(|&n| n == 0) {
            return Err(bad(
                "site_servers",
                format!("{l:?}"),
                format!("site {} has no server", pos + 1),
            ));
        }
        let total: u32 = l.iter().sum();
        if let Some(s) = self.servers
            && s != i64::from(total)
        {
            return Err(bad(
                "servers",
                s,
                format!("differs from the sum of --site-servers {l:?} ({total})"),
            ));
        }
        Ok(l)
    }

    fn databases(&self) -> Result<(DatabaseSpec, Option<u64>)> {
        let databases = match (self.databases, self.databases_per_server) {
            (Some(_), Some(_)) => {
                return Err(Error::usage(format!(
                    "give either {} or {}, not both",
                    input_name("databases"),
                    input_name("databases_per_server")
                )));
            }
            (Some(_), None) => DatabaseSpec::Count(count("databases", self.databases, 1, 1)?),
            (None, Some(_)) => DatabaseSpec::PerServer(count(
                "databases_per_server",
                self.databases_per_server,
                1,
                1,
            )?),
            (None, None) => DatabaseSpec::FromMaxSize,
        };
        let max_database_size = size("max_database_size", &self.max_database_size)?;
        if max_database_size == Some(0) {
            return Err(bad("max_database_size", 0, "must be larger than zero"));
        }
        Ok((databases, max_database_size))
    }

    fn failure(&self, c: &Copies, s: &Sites) -> Result<Failure> {
        let failure = match &self.failure {
            None if c.copies >= 2 => Failure::Servers(1),
            None => Failure::None,
            Some(w) => Failure::parse(&w.text()).map_err(|e| bad("failure", w.text(), e))?,
        };
        let active_copies = c.copies - c.lagged_copies;
        match failure {
            Failure::None => {}
            Failure::Servers(0) => {
                return Err(bad("failure", "servers:0", "write `none` for no failure"));
            }
            Failure::Servers(n) => {
                if n >= active_copies {
                    return Err(bad(
                        "failure",
                        failure,
                        format!(
                            "losing {n} server(s) can take every one of the {active_copies} non-lagged copies of a database; survive it with at least {} copies (--copies, --lagged-copies)",
                            n + 1
                        ),
                    ));
                }
                if n >= s.servers {
                    return Err(bad(
                        "failure",
                        failure,
                        format!("there are only {} servers per group", s.servers),
                    ));
                }
            }
            Failure::Site => site_failure_survivable(c, s)?,
        }
        Ok(failure)
    }

    fn guidance(&self, rules: &Rules) -> Result<String> {
        let guidance = self
            .guidance
            .as_ref()
            .map_or("2013".to_string(), Word::text);
        if rules.guidance(&guidance).is_none() {
            let known: Vec<_> = rules.guidance.iter().map(|g| g.version.as_str()).collect();
            return Err(bad(
                "guidance",
                &guidance,
                format!("unknown guidance version; use one of {}", known.join(", ")),
            ));
        }
        Ok(guidance)
    }

    fn disk(&self) -> Result<Disk> {
        let presets = disk_presets()?;
        let preset_name = self.disk.clone().unwrap_or_else(|| "nl-sas-7k2".into());
        let Some(preset) = presets.iter().find(|p| p.name == preset_name) else {
            let known: Vec<_> = presets.iter().map(|p| p.name.as_str()).collect();
            return Err(bad(
                "disk",
                &preset_name,
                format!(
                    "unknown disk preset; use one of {} (and --disk-capacity, --disk-iops to change its figures)",
                    known.join(", ")
                ),
            ));
        };
        let capacity = size("disk_capacity", &self.disk_capacity)?;
        if capacity == Some(0) {
            return Err(bad("disk_capacity", 0, "must be larger than zero"));
        }
        let iops = match self.disk_iops {
            None => None,
            Some(x) => Some(positive("disk_iops", Some(x), 1.0, false)?),
        };
        Ok(Disk {
            preset: preset.name.clone(),
            description: preset.description.clone(),
            source: preset.source.clone(),
            capacity: capacity.unwrap_or(preset.capacity.0),
            iops: iops.unwrap_or(preset.iops),
            capacity_overridden: capacity.is_some(),
            iops_overridden: iops.is_some(),
        })
    }

    fn raid(&self, rules: &Rules) -> Result<Raid> {
        let raid = self.raid.as_ref().map_or("10".to_string(), |w| {
            w.text()
                .to_ascii_lowercase()
                .trim_start_matches("raid")
                .trim_start_matches('-')
                .to_string()
        });
        let Some(rule) = rules.raid(&raid) else {
            let known: Vec<_> = rules.raid.iter().map(|r| r.level.as_str()).collect();
            return Err(bad(
                "raid",
                &raid,
                format!("unknown RAID level; use one of {}", known.join(", ")),
            ));
        };
        let raid_group = count(
            "raid_group",
            self.raid_group,
            i64::from(rule.group_default),
            1,
        )?;
        if raid_group < rule.group_min
            || rule.group_max.is_some_and(|m| raid_group > m)
            || (rule.group_even && raid_group % 2 == 1)
        {
            let allowed = match (rule.group_max, rule.group_even) {
                (Some(m), _) if m == rule.group_min => format!("exactly {m} disks"),
                (Some(m), _) => format!("{} to {m} disks", rule.group_min),
                (None, true) => format!("an even number of disks, at least {}", rule.group_min),
                (None, false) => format!("at least {} disks", rule.group_min),
            };
            return Err(bad(
                "raid_group",
                raid_group,
                format!("a RAID-{raid} group has {allowed}"),
            ));
        }
        let disks_per_server = match self.disks_per_server {
            None => None,
            Some(_) => {
                let n = count("disks_per_server", self.disks_per_server, 1, 1)?;
                if n % raid_group != 0 {
                    return Err(bad(
                        "disks_per_server",
                        n,
                        format!(
                            "is not a whole number of RAID groups of {raid_group} (--raid-group)"
                        ),
                    ));
                }
                Some(n)
            }
        };
        Ok(Raid {
            level: raid,
            group: raid_group,
            disks_per_server,
        })
    }

    fn capacity(&self, rules: &Rules) -> Result<Capacity> {
        let white_space = size("white_space", &self.white_space)?;
        let dumpster = size("dumpster", &self.dumpster)?;
        let retention_days = positive(
            "retention_days",
            self.retention_days,
            rules.capacity.retention_days,
            true,
        )?;
        let growth_pct = percent("growth", &self.growth, rules.capacity.growth_pct)?;
        let content_index_pct = percent("content_index", &self.content_index, 0.0)?;
        let log_days = positive("log_days", self.log_days, rules.logs.keep_days, false)?;
        let mailbox_moves_pct = percent(
            "mailbox_moves",
            &self.mailbox_moves,
            rules.logs.mailbox_moves_pct_per_week,
        )?;
        let scale = positive("scale", self.scale, 1.0, false)?;
        if scale > 1.0 {
            return Err(bad(
                "scale",
                scale,
                "scales sizes down for a lab: give a share from 0 to 1, e.g. 0.01",
            ));
        }
        Ok(Capacity {
            white_space,
            dumpster,
            retention_days,
            growth_pct,
            content_index_pct,
            log_days,
            mailbox_moves_pct,
            scale,
        })
    }
}

/// Copies per site: as given (adding up to --copies), or --copies split evenly.
fn site_copies(given: Option<Vec<u32>>, sites: u32, copies: u32) -> Result<Vec<u32>> {
    let Some(l) = given else {
        if copies < sites {
            return Err(bad(
                "copies",
                copies,
                format!(
                    "fewer copies than sites ({sites}): some site would hold no copy; add copies or fewer sites"
                ),
            ));
        }
        return Ok(even_split(copies, sites));
    };
    if l.len() as u32 != sites {
        return Err(bad(
            "site_copies",
            format!("{l:?}"),
            format!("gives {} sites but there are {sites}", l.len()),
        ));
    }
    let total: u32 = l.iter().sum();
    if total != copies {
        return Err(bad(
            "site_copies",
            format!("{l:?}"),
            format!("adds up to {total} copies but --copies is {copies}"),
        ));
    }
    Ok(l)
}

/// The first site holds the active copies; no site holds more copies than servers.
fn check_site_copies(site_copies: &[u32], site_servers: &[u32]) -> Result<()> {
    if site_copies.first() == Some(&0) {
        return Err(bad(
            "site_copies",
            format!("{site_copies:?}"),
            "the first site holds the active copies and needs at least one copy",
        ));
    }
    for (i, (&c, &n)) in site_copies.iter().zip(site_servers).enumerate() {
        if c > n {
            return Err(bad(
                "site_copies",
                format!("{site_copies:?}"),
                format!(
                    "site {} holds {c} copies of each database on {n} servers; each copy needs its own server",
                    i + 1
                ),
            ));
        }
    }
    Ok(())
}

/// Losing any one site must leave a non-lagged copy elsewhere (the lagged
/// copies are the last ones).
fn site_failure_survivable(c: &Copies, s: &Sites) -> Result<()> {
    if s.sites < 2 {
        return Err(bad(
            "failure",
            "site",
            "surviving a site needs two or more sites (--sites, --site-servers)",
        ));
    }
    let lagged_from = c.copies - c.lagged_copies;
    let mut idx = 0u32;
    for (n, &k_in_site) in s.site_copies.iter().enumerate() {
        let outside_active = (0..c.copies)
            .filter(|&k| k < lagged_from && !(k >= idx && k < idx + k_in_site))
            .count();
        if outside_active == 0 {
            return Err(bad(
                "failure",
                "site",
                format!(
                    "losing site {} leaves no non-lagged copy of its databases; put a copy in another site (--site-copies)",
                    n + 1
                ),
            ));
        }
        idx += k_in_site;
    }
    Ok(())
}
