//! The range of every numeric key of `[storage]` (and its flags, and each
//! `[storage.hosts."NAME"]` table), of a storage profile (built-in, a file, or
//! `[storage.profile]` overrides) and of the verdict thresholds: one table
//! each, checked by the one numeric validator
//! (`mailbench_base::limits::check_numbers`) before anything is written. The
//! table tests (spec/tests.rs, profile.rs) fail when a numeric key has no row.

use mailbench_base::limits::{Bound, MAX_RUN_DURATION, Unit};

/// Operations per transaction at most.
pub const MAX_OPERATIONS_PER_TRANSACTION: u32 = 64;
/// The most log buffers a profile may ask for (512-byte units: 1 GiB; the
/// buffer used is at most one log file, as ESE caps it).
pub const MAX_LOG_BUFFERS: u32 = 1 << 21;

const TIB: f64 = (1u64 << 40) as f64;
const MAX_RUN_S: f64 = MAX_RUN_DURATION.as_secs() as f64;
const SEED_MAX: f64 = 9.2e18;

/// The keys of `[storage]` and its flags (`hosts.*.` the same for one host).
pub const STORAGE: &[Bound] = &[
    Bound::new("databases", 1.0, 256.0, Unit::Count),
    Bound::new("mailboxes", 1.0, 1e9, Unit::Count),
    Bound::new("mailbox_quota", 1.0, 1024.0 * TIB, Unit::Bytes),
    Bound::new("db_size", 1.0, 1024.0 * TIB, Unit::Bytes),
    Bound::new("capacity_pct", 0.001, 100.0, Unit::Percent),
    Bound::new("iops_per_mailbox", 0.000_001, 10.0, Unit::Number),
    Bound::new("target_iops", 0.001, 1e8, Unit::Number),
    Bound::new("copies", 1.0, 16.0, Unit::Count),
    Bound::new("threads", 1.0, 4096.0, Unit::Count),
    Bound::new("duration", 1.0, MAX_RUN_S, Unit::Seconds),
    Bound::new("warmup", 0.0, MAX_RUN_S, Unit::Seconds),
    Bound::new("sample_interval", 0.2, 3600.0, Unit::Seconds),
    Bound::new("shutdown_grace", 1.0, 3600.0, Unit::Seconds),
    Bound::new("io_threads", 1.0, 256.0, Unit::Count),
    Bound::new("cache_size", 1.0, 64.0 * TIB, Unit::Bytes),
    Bound::new("seed", 0.0, SEED_MAX, Unit::Count),
    Bound::new("log_files", 0.0, 1_000_000.0, Unit::Count),
    Bound::new("hosts.*.databases", 1.0, 256.0, Unit::Count),
    Bound::new("hosts.*.mailboxes", 1.0, 1e9, Unit::Count),
    Bound::new("hosts.*.target_iops", 0.001, 1e8, Unit::Number),
    Bound::new("hosts.*.threads", 1.0, 4096.0, Unit::Count),
    Bound::new("thresholds.*", 0.0, 3_600_000.0, Unit::Number),
    Bound::new("profile_overrides.*", f64::MIN, f64::MAX, Unit::Number),
];

/// The keys of a storage profile (the composed profile: built-in or file,
/// with `[storage.profile]` over it).
pub const PROFILE: &[Bound] = &[
    Bound::new("page_size", 4096.0, 65536.0, Unit::Bytes),
    Bound::new("log_file_size", 65536.0, (1u64 << 30) as f64, Unit::Bytes),
    Bound::new("insert_pct", 0.0, 100.0, Unit::Percent),
    Bound::new("delete_pct", 0.0, 100.0, Unit::Percent),
    Bound::new("replace_pct", 0.0, 100.0, Unit::Percent),
    Bound::new("read_pct", 0.0, 100.0, Unit::Percent),
    Bound::new("lazy_commit_pct", 0.0, 100.0, Unit::Percent),
    Bound::new("growth_reserve_pct", 0.0, 1000.0, Unit::Percent),
    Bound::new("cache_max_per_db", 1.0, 64.0 * TIB, Unit::Bytes),
    Bound::new("cache_min_per_db", 0.0, 64.0 * TIB, Unit::Bytes),
    Bound::new("flush_start_pct", 0.0, 100.0, Unit::Percent),
    Bound::new("flush_stop_pct", 0.0, 100.0, Unit::Percent),
    Bound::new("preload_cache_pct", 0.0, 100.0, Unit::Percent),
    Bound::new("checkpoint_depth", 1.0, 64.0 * TIB, Unit::Bytes),
    Bound::new("max_write_pages", 1.0, 64.0, Unit::Count),
    Bound::new("record_size", 1.0, 32768.0, Unit::Bytes),
    Bound::new("index_record_size", 1.0, 32768.0, Unit::Bytes),
    Bound::new("read_pages", 1.0, 64.0, Unit::Count),
    Bound::new("read_run_pct", 0.0, 100.0, Unit::Percent),
    Bound::new("split_pct", 0.0, 100.0, Unit::Percent),
    Bound::new("hot_mailbox_skew", 0.0, 5.0, Unit::Number),
    Bound::new("log_buffer_flush", 512.0, (1u64 << 30) as f64, Unit::Bytes),
    Bound::new("log_flush_interval_ms", 0.0, 10_000.0, Unit::Millis),
    Bound::new(
        "log_sector_size",
        512.0,
        crate::format::LOG_BLOCK as f64,
        Unit::Bytes,
    ),
    Bound::new("log_buffers", 1.0, MAX_LOG_BUFFERS as f64, Unit::Count),
    Bound::new(
        "operations_per_transaction",
        1.0,
        MAX_OPERATIONS_PER_TRANSACTION as f64,
        Unit::Count,
    ),
    Bound::new(
        "maintenance_read_size",
        4096.0,
        (1u64 << 30) as f64,
        Unit::Bytes,
    ),
    Bound::new("maintenance_mb_per_s", 0.0, 100_000.0, Unit::Number),
    Bound::new(
        "replication_read_size",
        4096.0,
        (1u64 << 30) as f64,
        Unit::Bytes,
    ),
    Bound::new("copies", 1.0, 16.0, Unit::Count),
    Bound::new("thresholds.*.*", 0.0, 3_600_000.0, Unit::Number),
];
