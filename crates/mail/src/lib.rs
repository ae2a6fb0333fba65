//! Messaging load: users, profiles and protocol drivers against real IMAP/SMTP
//! servers (`mailbench mail setup|run`). See docs/mail-load.md.

pub mod imap;
pub mod local;
pub mod sieve;
pub mod smtp;
pub mod wire;
pub mod message;
pub mod profile;
pub mod topology;
pub mod run;
pub mod stats;
pub mod target;
pub mod command;
pub mod options;
pub mod setup;

pub use command::{Output, run as run_command, setup as setup_command};
pub use options::{MailOptions, Resolved};
