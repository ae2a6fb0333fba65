//! Helpers every family of integration tests shares (included with `#[path]`
//! by `storage_support.rs`, `mail_support.rs` and `mpi_support/mod.rs`): a
//! command's output for assertion messages, and a JSON file read.
#![allow(dead_code)]

use std::path::Path;
use std::process::Output;

/// How a command ended, its stdout and its stderr, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A JSON file (a result.json) read and parsed; a panic names the file.
pub fn read_json(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
