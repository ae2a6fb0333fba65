//! One module per command group: flag definitions and the call into the library.
pub mod mail;
pub mod multihost;
#[cfg(test)]
mod option_keys;
pub mod plan;
pub mod report;
pub mod storage;
pub mod storage_integrity;
