//! The storage test specification: the `[storage]` TOML section and the flags
//! (flags win), resolved and checked into a [`StorageSpec`] before anything is
//! written. Every bad value is refused with exit 2 and its key named.
//!
//! - `options.rs`: the section and the flags, defined once ([`StorageToml`]),
//!   and the keys a host table may set ([`HOST_KEYS`]);
//! - `resolve.rs`: the resolved [`StorageSpec`] and each value's checks;
//! - `paths.rs`: the folders' checks before anything is written;
//! - `suite.rs`: the `[suite]` section of `storage suite` ([`SuiteToml`]).

mod options;
mod paths;
mod resolve;
mod suite;

pub use crate::thresholds::{ThresholdsExt, ThresholdsToml};
pub use mailbench_results::storage::spec::{
    InstanceSpec, Profile, ProfileThresholds, StorageSpec, TestType, Thresholds,
};
pub use options::{HOST_KEYS, StorageToml, Threads};
pub use paths::{Space, existing_ancestor};
pub use resolve::{QUICK_WARMUP_LIMIT, SpecExt, WARMUP_LIMIT};
pub use suite::{MAX_STRESS, SuiteToml};

#[cfg(test)]
mod tests;
