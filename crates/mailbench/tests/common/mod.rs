//! Helpers every family of integration tests shares (included with `#[path]`
//! by `storage_support.rs`, `mail_support.rs` and `mpi_support/mod.rs`): a
//! command's output for assertion messages, a JSON file read, and headless
//! Chromium on a report.
#![allow(dead_code)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// True when Chromium is installed; in CI its absence is a failure.
pub fn chromium() -> Option<&'static str> {
    for c in ["chromium", "chromium-browser"] {
        if Command::new(c)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            return Some(c);
        }
    }
    if std::env::var_os("CI").is_some() {
        panic!("CI must install chromium (scripts/packages/report.txt)");
    }
    eprintln!("SKIPPED: chromium is not installed (apt-get install chromium)");
    None
}

/// Runs headless Chromium on `page`; returns (stdout, stderr).
pub fn browse(chrome: &str, page: &Path, extra: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chrome)
        .args(mailbench_runner::pdf::HEADLESS)
        .args(["--enable-logging=stderr", "--v=0"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut s = String::new();
    out.read_to_string(&mut s).unwrap();
    // Bounded: Chromium exits by itself after the dump or screenshot.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (s, t.join().unwrap())
}
