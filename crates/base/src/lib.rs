//! Shared foundations of mailbench: the error type and its exit codes, size and
//! duration units, TOML config files, run folders with their test log and the
//! one way files are created, the lock of a folder's owner, the redaction of
//! secrets from every output, named limits, host facts and the interrupt flag. (The verdict and the result header live in
//! `mailbench-results`, with the result types.) Every other crate depends on this one; it depends on none
//! of them.

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod config;
pub mod error;
pub mod host;
pub mod interrupt;
pub mod limits;
pub mod rundir;
pub mod secrets;
pub mod thread;
pub mod units;

pub use error::{Error, ExitStatus, Result};
pub use units::{ByteSize, parse_duration, parse_percent};
