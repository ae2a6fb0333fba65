pub mod format;
pub mod profile;
