//! Shared helpers of the storage integration tests (included with `#[path]`):
//! running the binary, its run folders and results, the database files, and
//! waiting (bounded) for a phase and for the end after a signal.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

#[path = "common/mod.rs"]
mod common;
// Not every test that includes this module uses every helper.
#[allow(unused_imports)]
pub use common::{browse, chromium, read_json, text};

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mailbench"))
}

/// `mailbench storage SUB` on `DIR/data` with results in `DIR/results`, the
/// database shape `shape` (flags), then `extra`.
pub fn storage_cmd(dir: &Path, sub: &str, shape: &[&str], extra: &[&str]) -> Command {
    let mut c = storage_at(&dir.join("data"), &dir.join("results"), sub, shape, extra);
    c.current_dir(dir);
    c
}

/// `mailbench storage SUB --path DATA --output OUTPUT`, the database shape
/// `shape` (flags), then `extra`; run from the test's own folder.
pub fn storage_at(
    data: &Path,
    output: &Path,
    sub: &str,
    shape: &[&str],
    extra: &[&str],
) -> Command {
    let mut c = bin();
    c.args(["storage", sub, "--path"])
        .arg(data)
        .arg("--output")
        .arg(output)
        .args(shape)
        .args(extra);
    c
}

/// Starts `c` with its output thrown away (a run the test stops with a signal).
pub fn spawn_quiet(mut c: Command) -> Child {
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The run folders under `dir/results`, oldest first.
pub fn run_dirs(dir: &Path) -> Vec<PathBuf> {
    run_dirs_in(&dir.join("results"))
}

/// The run folders in the results folder `results`, oldest first.
pub fn run_dirs_in(results: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(results) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// The result.json of the newest run folder whose name starts with `kind`.
pub fn latest_result(dir: &Path, kind: &str) -> serde_json::Value {
    let p = run_dirs(dir)
        .into_iter()
        .rfind(|p| p.file_name().unwrap().to_string_lossy().starts_with(kind))
        .unwrap()
        .join("result.json");
    read_json(&p)
}

/// The result.json of the newest run folder of any kind.
pub fn last_result(dir: &Path) -> serde_json::Value {
    latest_result(dir, "")
}

pub fn db_path(dir: &Path, index: usize) -> PathBuf {
    dir.join("data").join(format!("DB{:02}.mdb", index + 1))
}

pub fn log_dir(dir: &Path, index: usize) -> PathBuf {
    dir.join("data").join(format!("DB{:02}-logs", index + 1))
}

/// Sends SIGINT to `child` and waits (bounded) for it to end; its exit code.
pub fn interrupt_and_wait(child: &mut Child) -> Option<i32> {
    signal_and_wait(child, "INT")
}

/// Sends `SIG<sig>` and waits (at most 20 s) for the exit; returns its code.
pub fn signal_and_wait(child: &mut Child, sig: &str) -> Option<i32> {
    let sent = Instant::now();
    assert!(
        Command::new("kill")
            .args([&format!("-{sig}"), &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        assert!(
            sent.elapsed() < Duration::from_secs(20),
            "did not stop within 20 s of SIG{sig}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded) until `cond` holds: the sign that a phase has begun.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "never saw {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded, as `wait_for`) until a run folder's test.log under
/// `dir/results` holds `needle`.
pub fn wait_for_log(dir: &Path, what: &str, needle: &str) {
    wait_for(what, || {
        run_dirs(dir).iter().any(|d| {
            std::fs::read_to_string(d.join("test.log"))
                .unwrap_or_default()
                .contains(needle)
        })
    });
}

/// A child's output lines, as they come, on a channel.
pub fn lines(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line from `rx` holding `what` (bounded by `secs`); the lines seen
/// before it name the failure.
pub fn wait_line(rx: &std::sync::mpsc::Receiver<String>, what: &str, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut seen = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no stderr line with {what:?}; saw:\n{seen}"
        );
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(what) => return l,
            Ok(l) => {
                seen.push_str(&l);
                seen.push('\n');
            }
            Err(_) => panic!("no stderr line with {what:?}; saw:\n{seen}"),
        }
    }
}
