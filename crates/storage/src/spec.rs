//! The storage test specification: the `[storage]` TOML section and the flags
//! (flags win), resolved and checked into a [`StorageSpec`] before anything is
//! written. Every bad value is refused with exit 2 and its key named.

use crate::profile::ProfileExt;
use mailbench_base::config::ConfigFile;
use mailbench_base::units::serde_duration;
use mailbench_base::{ByteSize, Error, Result, limits};
use mailbench_io::EngineChoice;
pub use mailbench_results::storage::spec::{
    InstanceSpec, Profile, ProfileThresholds, StorageSpec, TestType, Thresholds,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `threads = 16` or `threads = "auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Threads {
    Auto,
    Fixed(u32),
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

/// Verdict thresholds (PRODUCT.md §2.4); `[storage.thresholds]` over the
/// profile's own for the test type.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ThresholdsToml {
    pub db_read_avg_ms: Option<f64>,
    pub db_read_max_ms: Option<f64>,
    pub log_write_avg_ms: Option<f64>,
    pub log_write_max_ms: Option<f64>,
    pub page_fault_stalls_per_s: Option<f64>,
    pub page_fault_stalls_max_per_s: Option<f64>,
}

impl ThresholdsToml {
    /// `self` over `other`, key by key.
    fn over(self, o: ThresholdsToml) -> ThresholdsToml {
        ThresholdsToml {
            db_read_avg_ms: self.db_read_avg_ms.or(o.db_read_avg_ms),
            db_read_max_ms: self.db_read_max_ms.or(o.db_read_max_ms),
            log_write_avg_ms: self.log_write_avg_ms.or(o.log_write_avg_ms),
            log_write_max_ms: self.log_write_max_ms.or(o.log_write_max_ms),
            page_fault_stalls_per_s: self.page_fault_stalls_per_s.or(o.page_fault_stalls_per_s),
            page_fault_stalls_max_per_s: self
                .page_fault_stalls_max_per_s
                .or(o.page_fault_stalls_max_per_s),
        }
    }
}

/// Applying `[storage.thresholds]` to thresholds (whose type lives with
/// the results that echo them).
pub trait ThresholdsExt: Sized {
    /// These limits with the keys `o` gives replaced; every value must be a
    /// positive number (stall limits may be 0). `origin` names the table.
    fn with(self, o: &ThresholdsToml, origin: &str) -> Result<Self>;
}

impl ThresholdsExt for Thresholds {
    fn with(mut self, o: &ThresholdsToml, origin: &str) -> Result<Thresholds> {
        let check = |v: f64, k: &str, zero_ok: bool| -> Result<f64> {
            if v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0)) {
                Ok(v)
            } else {
                let need = if zero_ok { "0 or more" } else { "positive" };
                Err(Error::usage(format!(
                    "`{origin}.{k}` = {v}: must be {need}"
                )))
            }
        };
        let set = |dst: &mut f64, v: Option<f64>, k: &str, zero_ok: bool| -> Result<()> {
            if let Some(x) = v {
                *dst = check(x, k, zero_ok)?;
            }
            Ok(())
        };
        set(
            &mut self.db_read_avg_ms,
            o.db_read_avg_ms,
            "db_read_avg_ms",
            false,
        )?;
        set(
            &mut self.db_read_max_ms,
            o.db_read_max_ms,
            "db_read_max_ms",
            false,
        )?;
        set(
            &mut self.log_write_avg_ms,
            o.log_write_avg_ms,
            "log_write_avg_ms",
            false,
        )?;
        set(
            &mut self.log_write_max_ms,
            o.log_write_max_ms,
            "log_write_max_ms",
            false,
        )?;
        set(
            &mut self.page_fault_stalls_per_s,
            o.page_fault_stalls_per_s,
            "page_fault_stalls_per_s",
            true,
        )?;
        if let Some(x) = o.page_fault_stalls_max_per_s {
            self.page_fault_stalls_max_per_s = Some(check(x, "page_fault_stalls_max_per_s", true)?);
        }
        Ok(self)
    }
}

/// The `[storage]` section and the `storage` commands' flags, defined once:
/// each field is a TOML key and a flag (`--` + the key with `-`; the
/// exceptions are named on the field), its doc line the flag's help. Flags
/// win over the file ([`StorageToml::over`]).
#[derive(Debug, Clone, Default, Deserialize, clap::Args)]
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
    /// Maximum database cache over all databases.
    #[arg(long, value_parser = ByteSize::parse)]
    pub cache_size: Option<ByteSize>,
    /// Skip the page and log verification after the run.
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
    pub hosts: Option<std::collections::BTreeMap<String, HostToml>>,
}

/// `[storage.hosts."NAME"]`: what differs from host to host.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostToml {
    pub paths: Option<Vec<PathBuf>>,
    pub log_paths: Option<Vec<PathBuf>>,
    pub databases: Option<u32>,
    pub mailboxes: Option<u64>,
    pub target_iops: Option<f64>,
    pub threads: Option<Threads>,
    pub backup_to: Option<PathBuf>,
}

/// The longest the warm-up ("attaining prerequisites") may take by default,
/// and with `--quick`.
pub const WARMUP_LIMIT: Duration = Duration::from_secs(30 * 60);
pub const QUICK_WARMUP_LIMIT: Duration = Duration::from_secs(30);

impl StorageToml {
    /// The section with `[storage.hosts."host"]` applied over it, if present.
    pub fn for_host(mut self, host: &str) -> StorageToml {
        let Some(h) = self.hosts.as_ref().and_then(|m| m.get(host)).cloned() else {
            return self;
        };
        self.paths = h.paths.or(self.paths);
        self.log_paths = h.log_paths.or(self.log_paths);
        self.databases = h.databases.or(self.databases);
        self.mailboxes = h.mailboxes.or(self.mailboxes);
        self.target_iops = h.target_iops.or(self.target_iops);
        self.threads = h.threads.or(self.threads);
        self.backup_to = h.backup_to.or(self.backup_to);
        self
    }

    /// `self` (flags) over `file`.
    pub fn over(self, file: StorageToml) -> StorageToml {
        StorageToml {
            test_type: self.test_type.or(file.test_type),
            profile: self.profile.or(file.profile),
            paths: self.paths.or(file.paths),
            log_paths: self.log_paths.or(file.log_paths),
            databases: self.databases.or(file.databases),
            mailboxes: self.mailboxes.or(file.mailboxes),
            mailbox_quota: self.mailbox_quota.or(file.mailbox_quota),
            db_size: self.db_size.or(file.db_size),
            capacity_pct: self.capacity_pct.or(file.capacity_pct),
            iops_per_mailbox: self.iops_per_mailbox.or(file.iops_per_mailbox),
            target_iops: self.target_iops.or(file.target_iops),
            copies: self.copies.or(file.copies),
            threads: self.threads.or(file.threads),
            duration: self.duration.or(file.duration),
            warmup: self.warmup.or(file.warmup),
            sample_interval: self.sample_interval.or(file.sample_interval),
            shutdown_grace: self.shutdown_grace.or(file.shutdown_grace),
            io_engine: self.io_engine.or(file.io_engine),
            cache_size: self.cache_size.or(file.cache_size),
            verify: self.verify.or(file.verify),
            open: self.open.or(file.open),
            quick: self.quick.or(file.quick),
            seed: self.seed.or(file.seed),
            profile_overrides: self.profile_overrides.or(file.profile_overrides),
            log_files: self.log_files.or(file.log_files),
            backup_to: self.backup_to.or(file.backup_to),
            start_at: self.start_at.or(file.start_at),
            hosts: self.hosts.or(file.hosts),
            thresholds: match (self.thresholds, file.thresholds) {
                (Some(a), Some(b)) => Some(a.over(b)),
                (a, b) => a.or(b),
            },
        }
    }
}

/// What the storage crate adds to the resolved test ([`StorageSpec`], whose
/// data lives with the results that echo it): resolving it from the config
/// and flags, checking its paths, and the I/O engine it asks for.
pub trait SpecExt: Sized {
    /// Resolves flags over the config file. `default_data` is the folder used
    /// when no paths are given (`./mailbench-data`).
    fn resolve(flags: StorageToml, cfg: &ConfigFile, default_data: &Path) -> Result<Self>;
    /// [`SpecExt::resolve`] for a named host: its `[storage.hosts."host"]`
    /// values apply (between the flags and the section).
    fn resolve_for_host(
        flags: StorageToml,
        cfg: &ConfigFile,
        default_data: &Path,
        host: &str,
    ) -> Result<Self>;
    /// Checks paths before anything is written: each folder is new, empty or
    /// ours; no block devices; enough free space for what `space` says the
    /// command still creates.
    fn check_paths(&self, space: Space) -> Result<()>;
    fn engine_choice(&self) -> EngineChoice;
}

impl SpecExt for StorageSpec {
    fn engine_choice(&self) -> EngineChoice {
        self.io_engine.parse().unwrap_or(EngineChoice::Auto)
    }

    fn resolve(flags: StorageToml, cfg: &ConfigFile, default_data: &Path) -> Result<StorageSpec> {
        let host = mailbench_base::host::hostname();
        Self::resolve_for_host(flags, cfg, default_data, &host)
    }

    fn resolve_for_host(
        flags: StorageToml,
        cfg: &ConfigFile,
        default_data: &Path,
        host: &str,
    ) -> Result<StorageSpec> {
        let file: StorageToml = cfg.section("storage")?;
        let t = flags.over(file.for_host(host));
        let quick = t.quick.unwrap_or(false);
        let test_type = t.test_type.unwrap_or(TestType::Performance);
        let profile_name = t.profile.clone().unwrap_or_else(|| "exchange2013".into());
        let profile = Profile::load(&profile_name, t.profile_overrides.as_ref())?;
        let ps = profile.page_size.0;

        let volumes = t
            .paths
            .clone()
            .unwrap_or_else(|| vec![default_data.to_path_buf()]);
        if volumes.is_empty() {
            return Err(Error::usage(
                "`paths` is empty: give at least one database folder",
            ));
        }
        let log_volumes = t.log_paths.clone().unwrap_or_default();
        let databases = t
            .databases
            .unwrap_or(if quick { 2 } else { volumes.len() as u32 });
        if databases == 0 || databases > 256 {
            return Err(Error::usage(format!(
                "`databases` = {databases}: use 1 to 256"
            )));
        }
        let copies = t.copies.unwrap_or(profile.copies);
        if copies == 0 || copies > 16 {
            return Err(Error::usage(format!("`copies` = {copies}: use 1 to 16")));
        }
        check_rates(&t)?;

        // Database size: per database, from mailboxes x quota, --db-size or --capacity-pct.
        let reserve_pct = profile.growth_reserve_pct;
        let db_bytes = db_size(&t, &volumes, databases, reserve_pct, quick)?;
        let pages = db_bytes / ps;
        if pages < 256 {
            return Err(Error::usage(format!(
                "databases of {} are too small: at least 256 pages of {} are needed",
                ByteSize(db_bytes),
                ByteSize(ps)
            )));
        }
        let (cache_max, cache_min) = cache_sizes(&t, &profile, databases, quick)?;
        let (threads, threads_auto) = threads(&t, databases, quick, (cache_max, ps))?;
        let mailboxes_total = t.mailboxes;
        let target_iops = target_iops(&t)?;
        let (duration, sample_interval, warmup, shutdown_grace) = durations(&t, quick, test_type)?;
        let io_engine = t.io_engine.clone().unwrap_or_else(|| "auto".into());
        io_engine
            .parse::<EngineChoice>()
            .map_err(|e| Error::usage(format!("`io_engine`: {e}")))?;

        let mut thresholds = profile.thresholds.for_type(test_type);
        if let Some(o) = t.thresholds {
            thresholds = thresholds.with(&o, "thresholds")?;
        }

        let mailboxes_per_db = match mailboxes_total {
            Some(m) => (m / databases as u64).max(1),
            // Without a mailbox count: 2 GiB mailboxes, at least 64 of them.
            None => (db_bytes / (2 << 30)).max(64),
        };
        let instances = instances(
            &volumes,
            &log_volumes,
            databases,
            threads,
            (pages, ps, mailboxes_per_db),
        );
        let log_space = 2 * profile.checkpoint_depth.0 + 4 * profile.log_file_size.0;
        Ok(StorageSpec {
            test_type,
            instances,
            volumes,
            log_volumes,
            mailboxes: mailboxes_total,
            iops_per_mailbox: t.iops_per_mailbox,
            target_iops,
            paced: t.target_iops.is_some(),
            copies,
            threads,
            threads_auto,
            duration,
            warmup,
            sample_interval,
            shutdown_grace: Some(shutdown_grace),
            io_engine,
            cache_max_per_db: cache_max,
            cache_min_per_db: cache_min,
            verify: t.verify.unwrap_or(true),
            open: t.open.unwrap_or(false),
            quick,
            seed: t.seed.unwrap_or(0x6d61_696c_6265_6e63),
            thresholds,
            growth_reserve_bytes: (pages * ps) as f64 as u64 * reserve_pct as u64 / 100,
            log_space_bytes: log_space,
            profile,
            lost_log_tail: Vec::new(),
        })
    }

    fn check_paths(&self, space: Space) -> Result<()> {
        use std::os::unix::fs::FileTypeExt;
        for v in self.volumes.iter().chain(self.log_volumes.iter()) {
            if let Ok(m) = std::fs::metadata(v)
                && (m.file_type().is_block_device() || m.file_type().is_char_device())
            {
                let kind = if m.file_type().is_block_device() {
                    "block device"
                } else {
                    "character device"
                };
                return Err(Error::usage(format!(
                    "{} is a {kind}: mailbench writes its databases into a folder; make a file \
                     system on the device, mount it and give a folder on it",
                    v.display()
                )));
            }
            mailbench_base::rundir::claim_folder(v, true)?;
            let anc = existing_ancestor(v);
            let meta = std::fs::metadata(anc)
                .map_err(|e| Error::usage(format!("path {} is not usable: {e}", v.display())))?;
            if meta.permissions().readonly() || !writable(anc) {
                return Err(Error::usage(format!(
                    "path {} is not writable",
                    v.display()
                )));
            }
        }
        if space == Space::None {
            return Ok(());
        }
        // Free space per file system (several folders may share one).
        use std::collections::BTreeMap;
        use std::os::unix::fs::MetadataExt;
        let mut need: BTreeMap<u64, (u64, PathBuf)> = BTreeMap::new();
        for i in &self.instances {
            let db_need = if i.db_path.exists() {
                0
            } else {
                i.size_bytes + self.growth_reserve_bytes
            };
            for (p, n) in [(&i.volume, db_need), (&i.log_dir, self.log_space_bytes)] {
                let anc = existing_ancestor(p);
                let dev = std::fs::metadata(anc).map(|m| m.dev()).unwrap_or(0);
                let e = need.entry(dev).or_insert((0, anc.to_path_buf()));
                e.0 += n;
            }
        }
        for (needed, path) in need.values() {
            let free = mailbench_io::free_space(path).map_err(|e| {
                Error::usage(format!("cannot read free space of {}: {e}", path.display()))
            })?;
            if *needed > free {
                return Err(Error::usage(format!(
                    "not enough free space on {}: the databases (with their {}% growth reserve) and logs \
                     need {}, {} is available; use fewer or smaller databases",
                    path.display(),
                    self.profile.growth_reserve_pct,
                    ByteSize(*needed),
                    ByteSize(free)
                )));
            }
        }
        Ok(())
    }
}

/// What a command still writes, for the free-space check of
/// [`SpecExt::check_paths`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// init, run, recover with new log files: the databases still to be
    /// created (with their growth reserve) and the log budget.
    Create,
    /// verify, backup (its copies are checked on their own folder), recover of
    /// what a crash left: nothing new on the database and log folders, so a
    /// full disk does not block them.
    None,
}

/// Whether this process may create files in `dir` (an existing folder),
/// asked of the kernel (`access(2)` with the effective ids), without
/// creating anything there.
fn writable(dir: &Path) -> bool {
    mailbench_io::writable(dir)
}

/// The nearest existing folder at or above `p`.
pub fn existing_ancestor(p: &Path) -> &Path {
    let mut cur = p;
    loop {
        if cur.exists() {
            return cur;
        }
        match cur.parent() {
            Some(par) if !par.as_os_str().is_empty() => cur = par,
            _ => return Path::new("."),
        }
    }
}

/// The threads (sessions over all databases) and whether `--threads auto`
/// tunes them; each database's cache (`cache_max` bytes of pages of `ps`) must hold 16 pages per
/// session.
fn threads(
    t: &StorageToml,
    databases: u32,
    quick: bool,
    (cache_max, ps): (u64, u64),
) -> Result<(u32, bool)> {
    let (threads, threads_auto) = match t.threads {
        Some(Threads::Fixed(n)) => (n, false),
        Some(Threads::Auto) => (databases.max(1), true),
        None => (if quick { 8 } else { 16.max(databases) }, false),
    };
    if cache_max / ps < (threads as u64).div_ceil(databases as u64) * 16 {
        return Err(Error::usage(format!(
            "the cache of {} per database is too small for {threads} threads: give a larger \
             `cache_size` or fewer `threads`",
            ByteSize(cache_max)
        )));
    }
    Ok((threads, threads_auto))
}

/// The transactional IOPS to reach: `target_iops`, or `mailboxes` ×
/// `iops_per_mailbox`; none without either.
fn target_iops(t: &StorageToml) -> Result<Option<f64>> {
    Ok(match (t.target_iops, t.mailboxes, t.iops_per_mailbox) {
        (Some(x), _, _) => Some(x),
        (None, Some(m), Some(i)) => Some(m as f64 * i),
        (None, Some(_), None) => {
            return Err(Error::usage(
                "`mailboxes` for a target needs `iops_per_mailbox` (or give `target_iops`)",
            ));
        }
        _ => None,
    })
}

/// The shares and rates asked for are in range: `capacity_pct` in (0, 100],
/// `iops_per_mailbox` and `target_iops` positive, `mailboxes` at least 1.
fn check_rates(t: &StorageToml) -> Result<()> {
    let pct = |k: &str, v: Option<f64>| -> Result<()> {
        match v {
            Some(x) if !(x > 0.0 && x <= 100.0) => Err(Error::usage(format!(
                "`{k}` = {x}: must be more than 0 and at most 100"
            ))),
            _ => Ok(()),
        }
    };
    pct("capacity_pct", t.capacity_pct)?;
    for (k, v) in [
        ("iops_per_mailbox", t.iops_per_mailbox),
        ("target_iops", t.target_iops),
    ] {
        if let Some(x) = v
            && !(x > 0.0 && x.is_finite())
        {
            return Err(Error::usage(format!(
                "`{k}` = {x}: must be a positive number"
            )));
        }
    }
    if t.mailboxes == Some(0) {
        return Err(Error::usage("`mailboxes` = 0: must be at least 1"));
    }
    Ok(())
}

/// The size of each database, from `mailboxes` × `mailbox_quota`, `db_size`
/// or `capacity_pct` of the free space (one of them; `--quick`: 768 MiB).
fn db_size(
    t: &StorageToml,
    volumes: &[PathBuf],
    databases: u32,
    reserve_pct: f64,
    quick: bool,
) -> Result<u64> {
    let ways = [
        t.db_size.is_some(),
        t.mailbox_quota.is_some(),
        t.capacity_pct.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if ways > 1 {
        return Err(Error::usage(
            "give only one of `db_size`, `mailbox_quota` (with `mailboxes`) and `capacity_pct`",
        ));
    }
    Ok(if let Some(s) = t.db_size {
        s.0
    } else if let Some(q) = t.mailbox_quota {
        let m = t
            .mailboxes
            .ok_or_else(|| Error::usage("`mailbox_quota` needs `mailboxes`"))?;
        (q.0 as u128 * m as u128 / databases as u128).min(u64::MAX as u128) as u64
    } else if let Some(p) = t.capacity_pct {
        let free = volumes
            .iter()
            .map(|v| mailbench_io::free_space(existing_ancestor(v)).unwrap_or(0))
            .min()
            .unwrap_or(0);
        let per_volume = databases.div_ceil(volumes.len() as u32) as u64;
        (free as f64 * p / 100.0 / (1.0 + reserve_pct / 100.0) / per_volume as f64) as u64
    } else if quick {
        768 << 20
    } else {
        return Err(Error::usage(
            "say how large the databases are: `--mailboxes N --mailbox-quota SIZE`, `--db-size SIZE` \
             or `--capacity-pct PCT` (or use --quick)",
        ));
    })
}

/// Each database's maximum and minimum cache: `cache_size` over the
/// databases (`--quick`: 48 MiB), else the profile's; the whole cache must fit
/// in memory and hold at least 64 pages per database.
fn cache_sizes(
    t: &StorageToml,
    profile: &Profile,
    databases: u32,
    quick: bool,
) -> Result<(u64, u64)> {
    let ps = profile.page_size.0;
    let mut cache_max = match t.cache_size {
        Some(c) => c.0 / databases as u64,
        None if quick => 48 << 20,
        None => profile.cache_max_per_db.0,
    };
    // The whole cache must fit in memory (allocated when the instances open,
    // after the databases were written: an abort on allocation would come
    // too late). The profile's default shrinks to fit; a size asked for is
    // refused.
    if let Some(mem) = mailbench_metrics::system::Memory::read() {
        let max = (mem.total_bytes as f64 * limits::MAX_CACHE_SHARE_OF_RAM) as u64;
        let total = cache_max.saturating_mul(databases as u64);
        if total > max && t.cache_size.is_none() {
            cache_max = max / databases as u64;
        } else if total > max {
            return Err(Error::usage(format!(
                "`cache_size` gives {} over all databases: at most {} (80% of this \
                 machine's {} of memory); give a smaller `cache_size`",
                ByteSize(total),
                ByteSize(max),
                ByteSize(mem.total_bytes)
            )));
        }
    }
    let cache_min = profile.cache_min_per_db.0.min(cache_max);
    if cache_max < 64 * ps {
        return Err(Error::usage(format!(
            "`cache_size` gives {} per database: at least 64 pages ({}) are needed",
            ByteSize(cache_max),
            ByteSize(64 * ps)
        )));
    }
    Ok((cache_max, cache_min))
}

/// The measured window, the sampling interval, the warm-up's limit and the
/// shutdown's grace, each checked.
fn durations(
    t: &StorageToml,
    quick: bool,
    test_type: TestType,
) -> Result<(Duration, Duration, Duration, Duration)> {
    let duration = t.duration.unwrap_or(match (quick, test_type) {
        (true, _) => Duration::from_secs(90),
        (false, TestType::Performance) => Duration::from_secs(2 * 3600),
        (false, TestType::Stress) => Duration::from_secs(24 * 3600),
    });
    let sample_interval = t.sample_interval.unwrap_or(if quick {
        Duration::from_secs(5)
    } else {
        Duration::from_secs(15)
    });
    if sample_interval < Duration::from_millis(200) || sample_interval > Duration::from_secs(3600) {
        return Err(Error::usage(
            "`sample_interval` must be between 200ms and 1h",
        ));
    }
    if duration < sample_interval {
        return Err(Error::usage(
            "`duration` must be at least one `sample_interval`",
        ));
    }
    // The warm-up lasts until the database cache holds its lower bound
    // (`preload_cache_pct`); `warmup` is the longest it may take.
    let warmup = t.warmup.unwrap_or(if quick {
        QUICK_WARMUP_LIMIT
    } else {
        WARMUP_LIMIT
    });
    limits::duration("duration", duration)?;
    limits::duration("warmup", warmup)?;
    let shutdown_grace = t.shutdown_grace.unwrap_or(limits::DEFAULT_SHUTDOWN_GRACE);
    if !(limits::MIN_SHUTDOWN_GRACE..=limits::MAX_SHUTDOWN_GRACE).contains(&shutdown_grace) {
        return Err(Error::usage(format!(
            "`shutdown_grace` = {}: use 1s to 1h",
            humantime::format_duration(shutdown_grace)
        )));
    }
    Ok((duration, sample_interval, warmup, shutdown_grace))
}

/// The database instances: names, files and log folders spread over the
/// volumes in turn, the threads shared out as sessions.
fn instances(
    volumes: &[PathBuf],
    log_volumes: &[PathBuf],
    databases: u32,
    threads: u32,
    (pages, ps, mailboxes_per_db): (u64, u64, u64),
) -> Vec<InstanceSpec> {
    let mut instances = Vec::new();
    for i in 0..databases as usize {
        let volume = volumes[i % volumes.len()].clone();
        let name = format!("DB{:02}", i + 1);
        let db_path = volume.join(format!("{name}.mdb"));
        let log_dir = if log_volumes.is_empty() {
            volume.join(format!("{name}-logs"))
        } else {
            log_volumes[i % log_volumes.len()].join(format!("{name}-logs"))
        };
        let base = threads as usize / databases as usize;
        let sessions = (base + usize::from(i < threads as usize % databases as usize)).max(1);
        instances.push(InstanceSpec {
            index: i,
            name,
            volume,
            db_path,
            log_dir,
            pages,
            size_bytes: pages * ps,
            mailboxes: mailboxes_per_db,
            sessions,
        });
    }
    instances
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> ConfigFile {
        ConfigFile::parse(text, Path::new("t.toml")).unwrap()
    }

    #[test]
    fn sizes_from_mailboxes_and_quota() {
        let c = cfg(
            "[storage]\nmailboxes = 100\nmailbox_quota = \"100MiB\"\ndatabases = 4\niops_per_mailbox = 0.5\n",
        );
        let s = StorageSpec::resolve(StorageToml::default(), &c, Path::new("/tmp/x")).unwrap();
        assert_eq!(s.instances.len(), 4);
        assert_eq!(s.instances[0].size_bytes, 25 * (100 << 20));
        assert_eq!(s.target_iops, Some(50.0));
        assert!(!s.paced);
        assert_eq!(s.instances[0].mailboxes, 25);
        assert_eq!(s.instances.iter().map(|i| i.sessions).sum::<usize>(), 16);
    }

    #[test]
    fn a_host_section_applies_to_its_host_only_and_flags_win() {
        let c = cfg(
            "[storage]\ndb_size = \"1GiB\"\npaths = [\"/data/a\"]\ndatabases = 2\n\
             [storage.hosts.db07]\npaths = [\"/srv/x\", \"/srv/y\"]\ndatabases = 4\n",
        );
        let d = Path::new("/tmp/x");
        let s = StorageSpec::resolve_for_host(StorageToml::default(), &c, d, "db07").unwrap();
        assert_eq!(
            s.volumes,
            vec![PathBuf::from("/srv/x"), PathBuf::from("/srv/y")]
        );
        assert_eq!(s.instances.len(), 4);
        let s = StorageSpec::resolve_for_host(StorageToml::default(), &c, d, "db08").unwrap();
        assert_eq!(s.volumes, vec![PathBuf::from("/data/a")]);
        assert_eq!(s.instances.len(), 2);
        let flags = StorageToml {
            databases: Some(1),
            ..Default::default()
        };
        let s = StorageSpec::resolve_for_host(flags, &c, d, "db07").unwrap();
        assert_eq!(s.instances.len(), 1);
        let bad = cfg("[storage]\ndb_size = \"1GiB\"\n[storage.hosts.db07]\npath = [\"/x\"]\n");
        let e = StorageSpec::resolve_for_host(StorageToml::default(), &bad, d, "db07")
            .unwrap_err()
            .to_string();
        assert!(e.contains("path"), "{e}");
    }

    #[test]
    fn thresholds_come_from_the_profile_and_the_test_type_and_keys_override_one_by_one() {
        let d = Path::new("/tmp/x");
        let th = |text: &str| {
            StorageSpec::resolve(StorageToml::default(), &cfg(text), d)
                .unwrap()
                .thresholds
        };
        let t = th("[storage]\ndb_size = \"1GiB\"\n");
        assert_eq!((t.db_read_max_ms, t.log_write_max_ms), (100.0, 100.0));
        assert_eq!(t.page_fault_stalls_per_s, 1.0);
        assert_eq!(t.page_fault_stalls_max_per_s, None);
        let t = th("[storage]\ndb_size = \"1GiB\"\ntype = \"stress\"\n");
        assert_eq!((t.db_read_max_ms, t.log_write_max_ms), (200.0, 200.0));
        // The 2007-era tool: 50 ms maxima, no stall in any sample; stress 100 ms.
        let t = th("[storage]\ndb_size = \"1GiB\"\nprofile = \"exchange2007\"\n");
        assert_eq!((t.db_read_avg_ms, t.db_read_max_ms), (20.0, 50.0));
        assert_eq!((t.log_write_avg_ms, t.log_write_max_ms), (10.0, 50.0));
        assert_eq!(t.page_fault_stalls_max_per_s, Some(0.0));
        let t =
            th("[storage]\ndb_size = \"1GiB\"\nprofile = \"exchange2003\"\ntype = \"stress\"\n");
        assert_eq!((t.db_read_max_ms, t.log_write_max_ms), (100.0, 100.0));
        // One key of [storage.thresholds] replaces that key only.
        let t = th(
            "[storage]\ndb_size = \"1GiB\"\nprofile = \"exchange2007\"\n\
                    [storage.thresholds]\ndb_read_max_ms = 75\npage_fault_stalls_max_per_s = 2\n",
        );
        assert_eq!((t.db_read_max_ms, t.log_write_max_ms), (75.0, 50.0));
        assert_eq!(t.page_fault_stalls_max_per_s, Some(2.0));
        for (text, key) in [
            ("db_read_max_ms = 0", "db_read_max_ms"),
            (
                "page_fault_stalls_max_per_s = -1",
                "page_fault_stalls_max_per_s",
            ),
        ] {
            let c = cfg(&format!(
                "[storage]\ndb_size = \"1GiB\"\n[storage.thresholds]\n{text}\n"
            ));
            let e = StorageSpec::resolve(StorageToml::default(), &c, d).unwrap_err();
            assert_eq!(e.exit_status().code(), 2);
            assert!(e.to_string().contains(key), "{e}");
        }
        let t = Thresholds::exchange2013(TestType::Performance);
        assert!(!t.describe().contains("every sample"));
        let t = Profile::load("exchange2007", None)
            .unwrap()
            .thresholds
            .performance;
        assert!(
            t.describe().contains("<= 0/s in every sample"),
            "{}",
            t.describe()
        );
    }

    #[test]
    fn flags_override_file_and_bad_values_name_their_key() {
        let c = cfg("[storage]\ndb_size = \"1GiB\"\nthreads = 4\n");
        let flags = StorageToml {
            threads: Some(Threads::Fixed(2)),
            ..Default::default()
        };
        let s = StorageSpec::resolve(flags, &c, Path::new("/tmp/x")).unwrap();
        assert_eq!(s.threads, 2);

        for (text, key) in [
            ("[storage]\ndb_size = \"1GiB\"\ncopies = 0\n", "copies"),
            (
                "[storage]\ndb_size = \"1GiB\"\ncapacity_pct = 50\n",
                "db_size",
            ),
            ("[storage]\ncapacity_pct = 150\n", "capacity_pct"),
            (
                "[storage]\ndb_size = \"1GiB\"\ntarget_iops = -3\n",
                "target_iops",
            ),
            (
                "[storage]\ndb_size = \"1GiB\"\nio_engine = \"spdk\"\n",
                "io_engine",
            ),
            ("[storage]\ndb_size = \"64KiB\"\n", "too small"),
            (
                "[storage]\ndb_size = \"1GiB\"\n[storage.profile_overrides]\nread_pct = 90\n",
                "sums to",
            ),
        ] {
            let e = StorageSpec::resolve(StorageToml::default(), &cfg(text), Path::new("/tmp/x"))
                .unwrap_err();
            assert_eq!(e.exit_status().code(), 2);
            assert!(e.to_string().contains(key), "{text}: {e}");
        }
        let e = cfg("[storage]\nthreads = \"many\"\n")
            .section::<StorageToml>("storage")
            .unwrap_err();
        assert!(e.to_string().contains("many"), "{e}");
        let e = cfg("[storage]\nmailbox_quota = \"-1GiB\"\n")
            .section::<StorageToml>("storage")
            .unwrap_err();
        assert!(e.to_string().contains("negative"), "{e}");
    }

    #[test]
    fn free_space_and_foreign_folders_are_checked_before_writing() {
        let t = tempfile::tempdir().unwrap();
        let c = cfg("[storage]\ndb_size = \"1000TiB\"\n");
        let flags = StorageToml {
            paths: Some(vec![t.path().join("db")]),
            ..Default::default()
        };
        let s = StorageSpec::resolve(flags, &c, Path::new("/tmp/x")).unwrap();
        let e = s.check_paths(Space::Create).unwrap_err().to_string();
        assert!(
            e.contains("not enough free space") && e.contains("available"),
            "{e}"
        );
        // What writes nothing new there (verify, backup, replay) is not blocked.
        s.check_paths(Space::None).unwrap();
        assert!(!t.path().join("db").exists(), "nothing written");

        std::fs::create_dir(t.path().join("mine")).unwrap();
        std::fs::write(t.path().join("mine/notes.txt"), "x").unwrap();
        let flags = StorageToml {
            paths: Some(vec![t.path().join("mine")]),
            ..Default::default()
        };
        let s = StorageSpec::resolve(
            flags,
            &cfg("[storage]\ndb_size = \"1GiB\"\n"),
            Path::new("/x"),
        )
        .unwrap();
        let e = s.check_paths(Space::None).unwrap_err().to_string();
        assert!(e.contains("notes.txt"), "{e}");
    }
}
