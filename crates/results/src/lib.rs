//! The typed result model of mailbench: one serde type per result kind (what
//! result.json holds, docs/result-schema.md), the verdict and the common
//! header, the verdict rules beside the figures they judge, `report merge` of
//! results of the same kind, and a JSON Schema for every kind generated from
//! these types (schema/*.schema.json).
//!
//! Workloads (storage, mail) fill these types; `report` and the runner read
//! them. This crate depends only on `base` and `metrics`.

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod disclosure;
pub mod kind;
pub mod live;
pub mod mail;
pub mod merged;
pub mod rank_failure;
pub mod ranks;
pub mod storage;
pub mod verdict;

pub use kind::{AnyResult, Kind};
pub use merged::Merged;
pub use verdict::{RunHeader, SCHEMA_VERSION, Status, Verdict};
