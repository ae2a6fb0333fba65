//! `mailbench plan` flags (owned by the planner work).
use crate::Global;
use mailbench_base::{Error, ExitStatus, Result};

#[derive(clap::Args, Debug)]
pub struct PlanArgs {}

pub fn run(_args: PlanArgs, _global: &Global) -> Result<ExitStatus> {
    Err(Error::usage("mailbench plan is not implemented yet"))
}
