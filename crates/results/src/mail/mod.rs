//! Mail results: `mail run` (and its `report merge`) and `mail setup`, with
//! the options and the profile they echo and the verdict rules of a run.

pub mod config;
pub mod judge;
pub mod merge;
pub mod profile;
pub mod run;
pub mod steady;
pub mod sweep;
