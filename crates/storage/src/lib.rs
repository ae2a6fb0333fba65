//! mailbench's storage half (docs/storage.md): a compact mailbox-database engine
//! (pages, buffer cache, transaction log, checkpoints, maintenance, replication)
//! and the storage tests built on it.

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

/// Asserts an invariant the engine relies on: in debug builds and with the
/// `invariants` feature (the test suite's release build); compiled out of
/// other release builds (the hot path pays nothing for it there).
macro_rules! invariant {
    ($cond:expr, $($arg:tt)+) => {
        if cfg!(any(debug_assertions, feature = "invariants")) {
            assert!($cond, $($arg)+);
        }
    };
}

pub mod backup;
pub mod bounds;
pub mod cache;
pub mod engine;
pub mod format;
pub mod init;
pub mod iobench;
pub mod log;
pub mod log_header;
pub mod profile;
pub mod recover;
pub mod run;
pub mod spec;
pub mod thresholds;
pub mod tune;
pub mod verify;
