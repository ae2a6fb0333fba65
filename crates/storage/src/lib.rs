//! mailbench's storage half (docs/storage.md): a compact mailbox-database engine
//! (pages, buffer cache, transaction log, checkpoints, maintenance, replication)
//! and the storage tests built on it.

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod backup;
pub mod cache;
pub mod engine;
pub mod format;
pub mod init;
pub mod iobench;
pub mod log;
pub mod profile;
pub mod recover;
pub mod result;
pub mod run;
pub mod spec;
pub mod stats;
pub mod thresholds;
pub mod tune;
pub mod verify;
