//! Sizing planner: mailbox profile to IOPS, capacity, disks and copy layout (`mailbench plan`).
//!
//! Pure computation. [`settings::Settings`] holds the inputs as users write them (flags
//! and the `[plan]` TOML section); [`settings::Settings::validate`] turns them into an
//! [`input::Input`] or a usage error naming the input; [`model::plan`] computes the
//! [`model::Plan`], which [`render`] prints as text or Markdown, serde as JSON, and
//! [`emit`] turns into a storage test config.

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod emit;
pub mod input;
pub mod layout;
pub mod model;
pub mod render;
pub mod rules;
pub mod settings;

pub use input::Input;
pub use model::{Plan, plan};
pub use rules::Rules;
pub use settings::Settings;

#[cfg(test)]
mod tests;
