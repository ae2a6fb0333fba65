//! Measurement for every mailbench workload: HDR latency histograms at microsecond
//! resolution with exact merge and a compact text encoding, latency summaries,
//! and the operating system's view of the host (CPU, memory) and of block devices
//! (/proc/diskstats).

pub mod hist;
pub mod system;

pub use hist::{LatencyHist, LatencySummary};
