//! Errors and exit codes, decided in one place (README.md, exit codes).

use std::fmt;

/// The process exit statuses of the command-line contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    /// Ran and passed its criteria.
    Pass,
    /// Ran and failed its criteria.
    Fail,
    /// Usage or configuration error; nothing was written.
    Usage,
    /// Runtime error: I/O error, server unreachable, out of space.
    Runtime,
    /// Interrupted by Ctrl-C or SIGTERM.
    Interrupted,
}

impl ExitStatus {
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Pass => 0,
            ExitStatus::Fail => 1,
            ExitStatus::Usage => 2,
            ExitStatus::Runtime => 3,
            ExitStatus::Interrupted => 130,
        }
    }
}

/// An error that ends a command. The variant decides the exit code; the message
/// must name the file, key, path or address involved and say what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad flags or configuration, detected before anything was written (exit 2).
    #[error("{0}")]
    Usage(String),
    /// A fault of the system under test or of this machine (exit 3).
    #[error("{0}")]
    Runtime(String),
    /// The user asked us to stop (exit 130).
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    pub fn usage(msg: impl fmt::Display) -> Self {
        Error::Usage(msg.to_string())
    }
    pub fn runtime(msg: impl fmt::Display) -> Self {
        Error::Runtime(msg.to_string())
    }
    /// A runtime error about an I/O failure on `path`.
    pub fn io(what: &str, path: &std::path::Path, err: std::io::Error) -> Self {
        Error::Runtime(format!("{what} {}: {err}", path.display()))
    }
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            Error::Usage(_) => ExitStatus::Usage,
            Error::Runtime(_) => ExitStatus::Runtime,
            Error::Interrupted => ExitStatus::Interrupted,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_contract() {
        assert_eq!(ExitStatus::Pass.code(), 0);
        assert_eq!(ExitStatus::Fail.code(), 1);
        assert_eq!(Error::usage("x").exit_status().code(), 2);
        assert_eq!(Error::runtime("x").exit_status().code(), 3);
        assert_eq!(Error::Interrupted.exit_status().code(), 130);
    }
}
