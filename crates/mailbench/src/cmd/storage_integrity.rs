//! `mailbench storage backup` and `mailbench storage recover` (issue 3 work).
use super::storage::StorageArgs;
use crate::Global;
use mailbench_base::{Error, ExitStatus, Result};

pub fn backup(_args: &StorageArgs, _global: &Global) -> Result<ExitStatus> {
    Err(Error::usage("storage backup is not implemented yet"))
}

pub fn recover(_args: &StorageArgs, _global: &Global) -> Result<ExitStatus> {
    Err(Error::usage("storage recover is not implemented yet"))
}
