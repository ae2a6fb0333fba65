//! The driver: where every run starts, is interrupted, gathers and ends.
//! One driver per command, whatever the number of hosts (`world`: a run is
//! a world of N ranks, N ≥ 1): `storage` (init, run, verify, backup,
//! recover), `mail` (setup, run) and `sweep` (mail sweep) are written once
//! and called with the world; rank 0 merges the ranks' parts (`aggregate`).
//! Every result goes out through one path (`output`: result.json ->
//! summary.txt -> report.html -> the stdout line). Live progress on the
//! terminal (`progress`) and the Prometheus endpoint of a running storage
//! test (`prometheus`) are here too.

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

mod aggregate;
mod live;
pub mod mail;
pub mod output;
pub mod pdf;
pub mod progress;
pub mod prometheus;
pub mod storage;
pub mod suite;
pub mod sweep;
pub mod world;

pub use output::{finish, write_files};
pub use world::{Common, new_run_folder};
