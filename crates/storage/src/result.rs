//! The storage result model is defined in `mailbench-results`
//! (`mailbench_results::storage`); re-exported here for the storage tests.
pub use mailbench_results::storage::run::*;
