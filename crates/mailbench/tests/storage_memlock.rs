//! io_uring's registered buffers under a small locked-memory limit, on the real
//! binary without CAP_IPC_LOCK (as an unprivileged user would run it): the run
//! still passes, and its log and result say how much was not registered and
//! what the limit is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "storage_support.rs"]
mod storage_support;

use std::path::Path;
use std::process::Command;
use storage_support::*;

/// `capsh` drops CAP_IPC_LOCK (root's way past the limit), `prlimit` sets
/// an 8 MiB limit; None when either tool is missing.
fn unprivileged(dir: &Path) -> Option<Command> {
    let have = |p: &str| Path::new(p).is_file();
    if !(have("/usr/sbin/capsh") || have("/sbin/capsh")) || !have("/usr/bin/prlimit") {
        eprintln!("skipped: capsh or prlimit missing");
        return None;
    }
    let mut c = Command::new("capsh");
    c.current_dir(dir)
        .args(["--drop=cap_ipc_lock", "--", "-c"])
        .arg(r#"exec prlimit --memlock=8388608 -- "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_mailbench"));
    Some(c)
}

#[test]
fn buffers_over_the_locked_memory_limit_are_named_in_the_log_and_result() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let Some(mut c) = unprivileged(dir) else {
        return;
    };
    let o = c
        .args(["storage", "run", "--path"])
        .arg(dir.join("data"))
        .arg("--output")
        .arg(dir.join("results"))
        .args([
            "--databases",
            "2",
            "--db-size",
            "128MiB",
            "--cache-size",
            "64MiB",
        ])
        .args(["--threads", "4", "--warmup", "0s", "--duration", "2s"])
        .args(["--sample-interval", "1s", "--no-verify"])
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    let r = latest_result(dir, "storage-run");
    let engine = r["io_engine"].as_str().unwrap();
    if !engine.starts_with("uring") {
        eprintln!("skipped: no io_uring here ({engine})");
        return;
    }
    assert!(
        engine.starts_with("uring; ") && engine.contains("(RLIMIT_MEMLOCK 8 MiB)"),
        "{engine}"
    );
    let folder = run_dirs(dir).pop().unwrap();
    let log = std::fs::read_to_string(folder.join("test.log")).unwrap();
    assert!(log.contains("ulimit -l unlimited"), "{log}");
    // The regions that fit under the limit are still registered.
    assert!(!log.contains("warning: io_uring buffers: 0 of"), "{log}");
}
