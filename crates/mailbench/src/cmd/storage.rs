//! `mailbench storage` flags.
use crate::Global;
use mailbench_base::{Error, ExitStatus, Result};

#[derive(clap::Subcommand, Debug)]
pub enum StorageCommand {
    /// Create the test databases (or --open existing ones).
    Init,
    /// Transactional workload: --type performance (default) | stress.
    Run,
    /// Database backup read test.
    Backup,
    /// Soft-recovery (log replay) test.
    Recover,
    /// Checksum every database page and log block.
    Verify,
}

pub fn run(_cmd: StorageCommand, _global: &Global) -> Result<ExitStatus> {
    Err(Error::usage("not implemented yet"))
}
