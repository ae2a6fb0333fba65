//! Messaging load: users, profiles and protocol drivers against real IMAP/SMTP
//! servers (`mailbench mail setup|run`). See docs/mail-load.md.

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod command;
pub mod endpoint;
pub mod hooks;
pub mod imap;
pub mod jmap;
pub mod judge;
pub mod local;
pub mod mailboxes;
pub mod message;
pub mod options;
pub mod profile;
mod result;
pub mod run;
pub mod servermetrics;
pub mod setup;
pub mod sieve;
pub mod sink;
pub mod smtp;
pub mod stats;
pub mod steady;
pub mod sweep;
pub mod target;
pub mod topology;
pub mod trace;
pub mod wire;

pub use command::{MailRun, Output};
pub use options::{MailOptions, Resolved};
