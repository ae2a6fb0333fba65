//! Where runs are driven from. Every command writes its result through one
//! path ([`output::finish`]): result.json, then summary.txt and report.html
//! rendered from it by `report`, then the stdout line (`--json`) or the text
//! for a person. Live progress on the terminal (`progress`) and the
//! Prometheus endpoint (`metrics`) of a running test are here too, beside the
//! commands that drive the workloads.

pub mod files;
pub mod metrics;
pub mod output;
pub mod progress;

pub use output::{Output, finish, write_files};
