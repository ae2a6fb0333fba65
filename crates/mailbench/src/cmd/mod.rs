//! One module per command group: flag definitions and the call into the driver.
pub mod mail;
#[cfg(test)]
mod option_keys;
pub mod plan;
pub mod report;
pub mod storage;
