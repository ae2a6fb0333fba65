//! Storage profiles (docs/storage.md, "Profiles") as data: `profiles/storage/*.toml`, embedded
//! in the binary, every value overridable from `[storage.profile]`.

use crate::bounds::{MAX_LOG_BUFFERS, MAX_OPERATIONS_PER_TRANSACTION};
use crate::thresholds::{ThresholdsExt, ThresholdsToml};
use mailbench_base::{Error, Result};
use std::path::Path;

const BUILTIN: [(&str, &str); 3] = [
    (
        "exchange2013",
        include_str!("../../../profiles/storage/exchange2013.toml"),
    ),
    (
        "exchange2007",
        include_str!("../../../profiles/storage/exchange2007.toml"),
    ),
    (
        "exchange2003",
        include_str!("../../../profiles/storage/exchange2003.toml"),
    ),
];

pub use mailbench_results::storage::spec::{Profile, ProfileThresholds};

/// Loading and checking profiles ([`Profile`]'s data lives with the results,
/// which echo it).
pub trait ProfileExt: Sized {
    fn builtin_names() -> Vec<&'static str>;
    /// Loads a built-in profile by name, or a profile TOML file by path, then
    /// applies `overrides` (the `[storage.profile]` table) and validates.
    fn load(name_or_path: &str, overrides: Option<&toml::Table>) -> Result<Self>;
    /// Refuses impossible values, naming the key.
    fn validate(&self) -> Result<()>;
}

/// Refuses threshold limits that are not positive (stalls: negative),
/// naming the key.
fn validate_thresholds(t: &ProfileThresholds) -> Result<()> {
    for (name, th) in [("performance", t.performance), ("stress", t.stress)] {
        let o = ThresholdsToml {
            db_read_avg_ms: Some(th.db_read_avg_ms),
            db_read_max_ms: Some(th.db_read_max_ms),
            log_write_avg_ms: Some(th.log_write_avg_ms),
            log_write_max_ms: Some(th.log_write_max_ms),
            page_fault_stalls_per_s: Some(th.page_fault_stalls_per_s),
            page_fault_stalls_max_per_s: th.page_fault_stalls_max_per_s,
            latency_max: Some(th.latency_max),
        };
        th.with(&o, &format!("profile key thresholds.{name}"))?;
    }
    Ok(())
}

/// Background maintenance rate bounds (MB/s): below the minimum one read would
/// wait for hours, above the maximum no disk keeps up.
pub const MIN_MAINTENANCE_MB_PER_S: f64 = 0.001;
pub const MAX_MAINTENANCE_MB_PER_S: f64 = 100_000.0;
/// The longest a lazy commit waits for its log flush.
pub const MAX_LOG_FLUSH_INTERVAL_MS: u64 = 10_000;
/// Database copies at most (each adds a replication stream per instance).
pub const MAX_COPIES: u32 = 16;
/// The highest flush thresholds ESE allows, in % of the cache (bf.cxx:
/// "we never allow thresholds higher than 20%/25%").
pub const MAX_FLUSH_START_PCT: f64 = 20.0;
pub const MAX_FLUSH_STOP_PCT: f64 = 25.0;
/// The largest log sector (the log's blocks are read and written whole).
pub const MAX_LOG_SECTOR: u64 = crate::format::LOG_BLOCK as u64;

impl ProfileExt for Profile {
    fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|(n, _)| *n).collect()
    }

    fn load(name_or_path: &str, overrides: Option<&toml::Table>) -> Result<Profile> {
        let (origin, text) = match BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            Some((n, t)) => (format!("built-in profile {n}"), t.to_string()),
            None if Path::new(name_or_path).is_file() => {
                let t = mailbench_base::limits::read_text_capped(
                    Path::new(name_or_path),
                    mailbench_base::limits::MAX_CONFIG_FILE_BYTES,
                    "profile file",
                )?;
                (format!("profile file {name_or_path}"), t)
            }
            None => {
                return Err(Error::usage(format!(
                    "unknown profile `{name_or_path}`: use one of {} or a profile TOML file",
                    Self::builtin_names().join(", ")
                )));
            }
        };
        let mut table: toml::Table = toml::from_str(&text)
            .map_err(|e| Error::usage(format!("{origin}: {}", e.message())))?;
        if let Some(o) = overrides {
            for (k, v) in o {
                if !table.contains_key(k) {
                    return Err(Error::usage(format!(
                        "[storage.profile]: unknown key `{k}` (profile keys: {})",
                        table.keys().cloned().collect::<Vec<_>>().join(", ")
                    )));
                }
                table.insert(k.clone(), v.clone());
            }
        }
        // Read back from text, so that an error names the line of its key.
        let merged = toml::to_string(&table)
            .map_err(|e| Error::usage(format!("{origin} with [storage.profile]: {e}")))?;
        let p: Profile = toml::from_str(&merged).map_err(|e| {
            Error::usage(format!(
                "{origin} with [storage.profile]: {}",
                mailbench_base::config::toml_error(&e, &merged)
            ))
        })?;
        p.validate()?;
        Ok(p)
    }

    fn validate(&self) -> Result<()> {
        mailbench_base::limits::check_numbers(
            &format!("storage profile {}", self.name),
            self,
            crate::bounds::PROFILE,
        )?;
        let bad = |key: &str, why: &str| Err(Error::usage(format!("profile key `{key}`: {why}")));
        let mix = self.insert_pct + self.delete_pct + self.replace_pct + self.read_pct;
        for (k, v) in [
            ("insert_pct", self.insert_pct),
            ("delete_pct", self.delete_pct),
            ("replace_pct", self.replace_pct),
            ("read_pct", self.read_pct),
            ("lazy_commit_pct", self.lazy_commit_pct),
            ("read_run_pct", self.read_run_pct),
            ("split_pct", self.split_pct),
            ("flush_start_pct", self.flush_start_pct),
            ("flush_stop_pct", self.flush_stop_pct),
            ("preload_cache_pct", self.preload_cache_pct),
            ("growth_reserve_pct", self.growth_reserve_pct),
        ] {
            if !(0.0..=100.0).contains(&v) {
                return bad(k, &format!("{v} is outside 0..100"));
            }
        }
        if (mix - 100.0).abs() > 1e-6 {
            return bad(
                "insert_pct/delete_pct/replace_pct/read_pct",
                &format!("the operation mix sums to {mix}, it must sum to 100"),
            );
        }
        let ps = self.page_size.0;
        if !(4096..=65536).contains(&ps) || !ps.is_power_of_two() {
            return bad("page_size", "must be a power of two from 4KiB to 64KiB");
        }
        let lf = self.log_file_size.0;
        if lf < 65536 || !lf.is_multiple_of(4096) || lf > 1 << 30 {
            return bad(
                "log_file_size",
                "must be a multiple of 4KiB from 64KiB to 1GiB",
            );
        }
        if self.record_size.0 == 0 || self.record_size.0 > ps / 2 {
            return bad("record_size", "must be between 1 byte and half a page");
        }
        if self.index_record_size.0 == 0 || self.index_record_size.0 > ps / 2 {
            return bad(
                "index_record_size",
                "must be between 1 byte and half a page",
            );
        }
        if self.cache_min_per_db > self.cache_max_per_db {
            return bad("cache_min_per_db", "is larger than cache_max_per_db");
        }
        if self.cache_max_per_db.0 < 64 * ps {
            return bad("cache_max_per_db", "must hold at least 64 pages");
        }
        if self.read_pages == 0 || self.read_pages > 64 {
            return bad("read_pages", "must be 1..64");
        }
        if self.max_write_pages == 0 || self.max_write_pages > 64 {
            return bad("max_write_pages", "must be 1..64");
        }
        if !(0.0..=5.0).contains(&self.hot_mailbox_skew) {
            return bad("hot_mailbox_skew", "must be 0 (uniform) .. 5");
        }
        if !self.maintenance_read_size.0.is_multiple_of(4096) || self.maintenance_read_size.0 < ps {
            return bad(
                "maintenance_read_size",
                "must be a multiple of 4KiB and at least a page",
            );
        }
        if !self.replication_read_size.0.is_multiple_of(4096) || self.replication_read_size.0 == 0 {
            return bad("replication_read_size", "must be a multiple of 4KiB");
        }
        // NaN fails every comparison: ranges are written so that it is refused.
        let m = self.maintenance_mb_per_s;
        if !(m == 0.0 || (MIN_MAINTENANCE_MB_PER_S..=MAX_MAINTENANCE_MB_PER_S).contains(&m)) {
            return bad(
                "maintenance_mb_per_s",
                &format!(
                    "{m} must be 0 (off) or from {MIN_MAINTENANCE_MB_PER_S} to {MAX_MAINTENANCE_MB_PER_S}"
                ),
            );
        }
        if self.copies > MAX_COPIES {
            return bad("copies", &format!("must be at most {MAX_COPIES}"));
        }
        if self.copies == 0 {
            return bad("copies", "must be at least 1");
        }
        if self.checkpoint_depth.0 < 2 * lf {
            return bad("checkpoint_depth", "must be at least two log files");
        }
        validate_flush_and_log(self)?;
        validate_thresholds(&self.thresholds)
    }
}

/// Refuses impossible flush thresholds, log sector, log buffers, lazy commit
/// wait or operations per transaction, naming the key.
fn validate_flush_and_log(p: &Profile) -> Result<()> {
    let bad = |key: &str, why: &str| Err(Error::usage(format!("profile key `{key}`: {why}")));
    let s = p;
    // ESE: the stop threshold "must also always be greater than the
    // start threshold", at most 20 % / 25 % of the cache.
    if s.flush_stop_pct <= s.flush_start_pct {
        return bad(
            "flush_stop_pct",
            "must be greater than flush_start_pct (both are shares of the cache's available buffers)",
        );
    }
    if s.flush_start_pct > MAX_FLUSH_START_PCT || s.flush_stop_pct > MAX_FLUSH_STOP_PCT {
        return bad(
            "flush_start_pct/flush_stop_pct",
            &format!("at most {MAX_FLUSH_START_PCT} / {MAX_FLUSH_STOP_PCT} % of the cache"),
        );
    }
    if s.log_flush_interval_ms > MAX_LOG_FLUSH_INTERVAL_MS {
        return bad(
            "log_flush_interval_ms",
            &format!("must be at most {MAX_LOG_FLUSH_INTERVAL_MS}"),
        );
    }
    let sector = s.log_sector_size.0;
    if !(512..=MAX_LOG_SECTOR).contains(&sector) || !sector.is_power_of_two() {
        return bad(
            "log_sector_size",
            "must be a power of two from 512B to 4KiB",
        );
    }
    if s.log_buffers.is_some_and(|b| b == 0 || b > MAX_LOG_BUFFERS) {
        return bad(
            "log_buffers",
            &format!(
                "must be from 1 to {MAX_LOG_BUFFERS} (512-byte units; the buffer is at most one log file)"
            ),
        );
    }
    if s.log_buffer_flush.is_some() {
        return bad(
            "log_buffer_flush",
            "is replaced by log_buffers (512-byte units; half of them filled starts a log write)",
        );
    }
    if !(1..=MAX_OPERATIONS_PER_TRANSACTION).contains(&s.operations_per_transaction) {
        return bad(
            "operations_per_transaction",
            &format!("must be 1..{MAX_OPERATIONS_PER_TRANSACTION}"),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_profiles_load_and_differ() {
        let a = Profile::load("exchange2013", None).unwrap();
        let b = Profile::load("exchange2007", None).unwrap();
        let c = Profile::load("exchange2003", None).unwrap();
        assert_eq!(a.page_size.0, 32768);
        assert_eq!(b.page_size.0, 8192);
        assert_eq!(c.page_size.0, 4096);
        assert_eq!(c.log_file_size.0, 5 << 20);
        assert_eq!(
            (a.insert_pct, a.delete_pct, a.replace_pct, a.read_pct),
            (40.0, 20.0, 5.0, 35.0)
        );
        assert_eq!(
            (b.insert_pct, b.delete_pct, b.replace_pct, b.read_pct),
            (40.0, 30.0, 5.0, 25.0)
        );
        assert!(a.maintenance && !b.maintenance);
        use mailbench_results::storage::spec::LogWriterKind;
        assert_eq!(
            (a.log_writer, b.log_writer, c.log_writer),
            (
                LogWriterKind::Current,
                LogWriterKind::Legacy,
                LogWriterKind::Legacy
            ),
            "the 2007-era profiles write their log as the ESE of their time"
        );
    }

    #[test]
    fn the_log_writer_is_overridden_and_an_unknown_one_is_named() {
        let o: toml::Table = toml::from_str("log_writer = \"legacy\"").unwrap();
        let p = Profile::load("exchange2013", Some(&o)).unwrap();
        assert_eq!(
            p.log_writer,
            mailbench_results::storage::spec::LogWriterKind::Legacy
        );
        let o: toml::Table = toml::from_str("log_writer = \"fast\"").unwrap();
        let e = Profile::load("exchange2013", Some(&o))
            .unwrap_err()
            .to_string();
        assert!(e.contains("fast") && e.contains("legacy"), "{e}");
    }

    #[test]
    fn a_profile_file_without_thresholds_is_judged_by_the_2013_rules_and_bad_ones_are_named() {
        let dir = std::env::temp_dir().join(format!("mb-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = BUILTIN[1].1;
        let cut = text
            .find("\n# Verdict limits")
            .expect("exchange2007 states its thresholds");
        let plain = dir.join("plain.toml");
        std::fs::write(&plain, &text[..cut]).unwrap();
        let p = Profile::load(plain.to_str().unwrap(), None).unwrap();
        assert_eq!(p.thresholds, ProfileThresholds::default());
        assert_eq!(p.thresholds.performance.db_read_max_ms, 100.0);
        let bad = dir.join("bad.toml");
        std::fs::write(
            &bad,
            text.replace("db_read_max_ms = 50", "db_read_max_ms = -50"),
        )
        .unwrap();
        let e = Profile::load(bad.to_str().unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("thresholds.performance.db_read_max_ms"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn overrides_apply_and_are_checked() {
        let o: toml::Table = toml::from_str("lazy_commit_pct = 10\npage_size = \"8KiB\"").unwrap();
        let p = Profile::load("exchange2013", Some(&o)).unwrap();
        assert_eq!(p.lazy_commit_pct, 10.0);
        assert_eq!(p.page_size.0, 8192);

        let o: toml::Table = toml::from_str("read_pct = 50").unwrap();
        let e = Profile::load("exchange2013", Some(&o))
            .unwrap_err()
            .to_string();
        assert!(e.contains("sums to 115"), "{e}");

        let o: toml::Table = toml::from_str("pagesize = 1").unwrap();
        let e = Profile::load("exchange2013", Some(&o))
            .unwrap_err()
            .to_string();
        assert!(e.contains("pagesize"), "{e}");

        let o: toml::Table = toml::from_str("record_size = \"-5KiB\"").unwrap();
        let e = Profile::load("exchange2013", Some(&o))
            .unwrap_err()
            .to_string();
        assert!(e.contains("negative"), "{e}");

        let e = Profile::load("exchange2099", None).unwrap_err().to_string();
        assert!(
            e.contains("exchange2099") && e.contains("exchange2013"),
            "{e}"
        );
    }
}
