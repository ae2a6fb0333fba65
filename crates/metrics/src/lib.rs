//! Measurement for every mailbench workload: HDR latency histograms at microsecond
//! resolution with exact merge and a compact text encoding, latency summaries,
//! and the operating system's view of the host (CPU, memory) and of block devices
//! (/proc/diskstats), and the server host's figures in one form whether a
//! Prometheus exporter or /proc reported them; and what a host is (its model,
//! CPUs, memory, kernel, and the filesystems and block devices under the paths
//! a test uses) for the disclosure of a published report.

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod disclosure;
pub mod hist;
pub mod server;
pub mod server_config;
pub mod system;

pub use hist::{LatencyHist, LatencySummary};
