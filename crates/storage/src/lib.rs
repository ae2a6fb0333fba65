//! The mailbox-database engine.
