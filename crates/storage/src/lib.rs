pub mod cache;
pub mod format;
pub mod log;
pub mod profile;
