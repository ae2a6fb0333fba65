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
