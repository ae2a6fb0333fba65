//! The resolved test ([`StorageSpec`]): flags over the `[storage]` section
//! over its host's values, each value checked (sizes, caches, threads, rates,
//! durations) and the databases laid out over the folders.

use super::options::{StorageToml, Threads};
use super::paths::{Space, existing_ancestor};
use super::{InstanceSpec, Profile, StorageSpec, TestType, ThresholdsExt};
use crate::profile::ProfileExt;
use mailbench_base::config::ConfigFile;
use mailbench_base::{ByteSize, Error, Result, limits};
use mailbench_io::{Capabilities, EngineChoice};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest the warm-up ("attaining prerequisites") may take by default,
/// and with `--quick`.
pub const WARMUP_LIMIT: Duration = Duration::from_secs(30 * 60);
pub const QUICK_WARMUP_LIMIT: Duration = Duration::from_secs(30);

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
    /// What the I/O can use in `dir`, with why O_DIRECT is off when it is: the
    /// O_DIRECT open's error, or buffered I/O asked for (`--buffered-io`). The
    /// one place a command learns whether its I/O bypasses the page cache.
    fn capabilities(&self, dir: &Path) -> (Capabilities, Option<String>);
}

impl SpecExt for StorageSpec {
    fn engine_choice(&self) -> EngineChoice {
        self.io_engine.parse().unwrap_or(EngineChoice::Auto)
    }

    fn capabilities(&self, dir: &Path) -> (Capabilities, Option<String>) {
        let (mut caps, why) = mailbench_io::probe_why(dir);
        if self.buffered_io {
            caps.o_direct = false;
            return (caps, Some("buffered I/O asked for (--buffered-io)".into()));
        }
        (caps, why)
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
        let mut t = file.for_host(host)?;
        t.overlay(flags);
        mailbench_base::limits::check_options("[storage]", &t, crate::bounds::STORAGE)?;
        let quick = t.quick.unwrap_or(false);
        let test_type = t.test_type.unwrap_or(TestType::Performance);
        let profile_name = t.profile.clone().unwrap_or_else(|| "exchange2013".into());
        let profile = Profile::load(&profile_name, t.profile_overrides.as_ref())?;
        let ps = profile.page_size.0;

        let (volumes, log_volumes, databases) = folders(&t, default_data, quick)?;
        let copies = t.copies.unwrap_or(profile.copies);
        if copies == 0 || copies > 16 {
            return Err(Error::usage(format!("`copies` = {copies}: use 1 to 16")));
        }
        check_rates(&t)?;
        mailbench_io::faulty::from_env().map_err(Error::usage)?;

        // Database size: per database, from mailboxes x quota, --db-size or --capacity-pct.
        let reserve_pct = profile.growth_reserve_pct;
        let db_bytes = db_size(&t, &volumes, databases, reserve_pct, quick)?;
        let pages = pages(db_bytes, ps)?;
        let (cache_max, cache_min) = cache_sizes(&t, &profile, databases, quick)?;
        let (threads, threads_auto) = threads(&t, databases, quick, (cache_max, ps))?;
        let mailboxes_total = t.mailboxes;
        let target_iops = target_iops(&t)?;
        let (duration, sample_interval, warmup, shutdown_grace) = durations(&t, quick, test_type)?;
        let io_engine = io_engine(&t)?;
        let io_threads = io_threads(&t, databases)?;

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
            buffered_io: t.buffered_io.unwrap_or(false),
            io_threads,
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
        super::paths::check_paths(self, space)
    }
}

/// The database folders (`default_data` without `paths`), the log folders
/// and the number of databases (1 to 256; `--quick`: 2, else one a folder).
fn folders(
    t: &StorageToml,
    default_data: &Path,
    quick: bool,
) -> Result<(Vec<PathBuf>, Vec<PathBuf>, u32)> {
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
    Ok((volumes, log_volumes, databases))
}

/// The pages of a database of `db_bytes` (pages of `ps` bytes): at least 256.
fn pages(db_bytes: u64, ps: u64) -> Result<u64> {
    let pages = db_bytes / ps;
    if pages < 256 {
        return Err(Error::usage(format!(
            "databases of {} are too small: at least 256 pages of {} are needed",
            ByteSize(db_bytes),
            ByteSize(ps)
        )));
    }
    Ok(pages)
}

/// The I/O threads asked for, checked: at least one, at most one per database
/// (None: one per CPU, decided where the run starts).
fn io_threads(t: &StorageToml, databases: u32) -> Result<Option<u32>> {
    match t.io_threads {
        Some(n) if n == 0 || n > databases => Err(Error::usage(format!(
            "`io_threads` = {n}: give 1 to {databases} (at most one thread per database), or leave \
             it out for one per CPU"
        ))),
        n => Ok(n),
    }
}

/// The I/O engine asked for (`auto` by default), checked.
fn io_engine(t: &StorageToml) -> Result<String> {
    let io_engine = t.io_engine.clone().unwrap_or_else(|| "auto".into());
    io_engine
        .parse::<EngineChoice>()
        .map_err(|e| Error::usage(format!("`io_engine`: {e}")))?;
    Ok(io_engine)
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
