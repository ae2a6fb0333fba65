//! `mailbench report` flags (owned by the report work).
use crate::Global;
use mailbench_base::{Error, ExitStatus, Result};

#[derive(clap::Subcommand, Debug)]
pub enum ReportCommand {
    /// Re-render a result.json as report.html / summary.txt.
    Render,
    /// Combine results from several hosts into one.
    Merge,
    /// Compare two results; fails on regression beyond a tolerance.
    Compare,
}

pub fn run(_cmd: ReportCommand, _global: &Global) -> Result<ExitStatus> {
    Err(Error::usage("mailbench report is not implemented yet"))
}
