//! `mailbench mail` flags (owned by the mail-load work).
use crate::Global;
use mailbench_base::{Error, ExitStatus, Result};

#[derive(clap::Subcommand, Debug)]
pub enum MailCommand {
    /// Provision users, lists and initial mailbox content.
    Setup,
    /// Simulate users against the server.
    Run,
}

pub fn run(_cmd: MailCommand, _global: &Global) -> Result<ExitStatus> {
    Err(Error::usage("mailbench mail is not implemented yet"))
}
