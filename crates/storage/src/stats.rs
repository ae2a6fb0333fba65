//! What an instance measures (per I/O class counts, bytes, errors and latency
//! histograms, engine counters): defined with the results, which carry them.
pub use mailbench_results::storage::stats::*;
