//! What mailbench reads back is checked: each file it wrote and later trusts
//! (a database and its header, the creation progress file, the checkpoint
//! file, intervals.jsonl read by merges), spoilt (cut short, garbage, values
//! that cannot be), is refused naming the file, what is wrong and what to do,
//! never trusted nor blamed on the storage.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "storage_support.rs"]
mod storage_support;

use std::path::Path;
use std::process::Output;
use storage_support::*;

/// One database of 64 MiB: 2,048 pages of 32 KiB.
const ONE: &[&str] = &["--databases", "1", "--db-size", "64MiB", "--threads", "2"];
const SHORT: &[&str] = &[
    "--duration",
    "2s",
    "--warmup",
    "0s",
    "--sample-interval",
    "1s",
    "--no-verify",
];

fn storage(dir: &Path, sub: &str, extra: &[&str]) -> Output {
    storage_cmd(dir, sub, ONE, extra).output().unwrap()
}

fn ok(o: &Output) {
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(o));
}

/// One spoilt file: what to do to it, the command that reads it back, the
/// exit code and the words its message must hold.
struct Case {
    what: &'static str,
    spoil: fn(&Path),
    command: (&'static str, &'static [&'static str]),
    code: i32,
    says: &'static [&'static str],
}

fn cut_database(dir: &Path) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(db_path(dir, 0))
        .unwrap();
    f.set_len(800 * 32768).unwrap();
}

fn garbage_header(dir: &Path) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(db_path(dir, 0))
        .unwrap();
    f.write_all_at(&[0x5a; 4096], 0).unwrap();
}

fn progress(dir: &Path, text: &str) {
    let mut p = db_path(dir, 0).into_os_string();
    p.push(".init");
    std::fs::write(p, text).unwrap();
}

fn checkpoint(dir: &Path, bytes: &[u8]) {
    std::fs::write(log_dir(dir, 0).join("checkpoint.chk"), bytes).unwrap();
}

const CASES: &[Case] = &[
    Case {
        what: "database cut short",
        spoil: cut_database,
        command: ("verify", &[]),
        code: 2,
        says: &["2,048 pages expected, file holds 800: pages 800..2047 missing"],
    },
    Case {
        what: "database cut short, run",
        spoil: cut_database,
        command: ("run", SHORT),
        code: 2,
        says: &["pages 800..2047 missing", "restore it from a backup"],
    },
    Case {
        what: "database cut short, recover",
        spoil: cut_database,
        command: ("recover", &["--log-files", "2"]),
        code: 2,
        says: &["pages 800..2047 missing"],
    },
    Case {
        what: "database cut short, backup",
        spoil: cut_database,
        command: ("backup", &[]),
        code: 2,
        says: &["pages 800..2047 missing"],
    },
    Case {
        what: "database header garbage",
        spoil: garbage_header,
        command: ("verify", &[]),
        code: 2,
        says: &["not a mailbench database"],
    },
    Case {
        what: "progress file garbage",
        spoil: |d| progress(d, "garbage"),
        command: ("init", &[]),
        code: 2,
        says: &[".init is damaged", "delete the folder"],
    },
    Case {
        what: "progress file past its end",
        spoil: |d| progress(d, r#"{"db_id":5,"pages":2048,"pages_done":99999}"#),
        command: ("init", &[]),
        code: 2,
        says: &[".init is damaged: 99999 pages done of 2048"],
    },
    Case {
        what: "checkpoint file garbage",
        spoil: |d| checkpoint(d, &[0x17; 100]),
        command: ("verify", &[]),
        code: 1,
        says: &["checkpoint.chk: not a mailbench checkpoint file", "damaged"],
    },
    Case {
        what: "checkpoint file cut short",
        spoil: |d| {
            let p = log_dir(d, 0).join("checkpoint.chk");
            let b = std::fs::read(&p).unwrap();
            checkpoint(d, &b[..b.len() / 2]);
        },
        command: ("verify", &[]),
        code: 1,
        says: &["checkpoint.chk", "damaged"],
    },
];

/// Every spoilt file is refused by the command that reads it back, naming it.
#[test]
fn each_spoilt_file_is_named() {
    let t = tempfile::tempdir().unwrap();
    let clean = t.path().join("clean");
    std::fs::create_dir(&clean).unwrap();
    // A database with a log and a checkpoint file: created, then run briefly.
    ok(&storage(&clean, "init", &[]));
    ok(&storage(&clean, "run", SHORT));
    for case in CASES {
        let dir = t.path().join(case.what.replace([' ', ','], "-"));
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(&clean)
            .arg(&dir)
            .status()
            .unwrap();
        assert!(copied.success());
        (case.spoil)(&dir);
        let runs = || std::fs::read_dir(dir.join("results")).unwrap().count();
        let before = runs();
        let (sub, extra) = case.command;
        let o = storage(&dir, sub, extra);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(case.code), "{}: {out}", case.what);
        if case.code == 2 {
            // Refused before anything is written: no run folder.
            assert_eq!(runs(), before, "{}: a run folder was made", case.what);
        }
        for needle in case.says {
            assert!(
                out.contains(needle),
                "{}: no {needle:?} in {out}",
                case.what
            );
        }
        assert!(!out.contains("Input/output error"), "{}: {out}", case.what);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A merge recomputes from intervals.jsonl: one cut short or missing is
/// refused (exit 2) naming it, and nothing is written.
#[test]
fn a_merge_refuses_a_damaged_intervals_file() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    ok(&storage(dir, "init", &[]));
    ok(&storage(dir, "run", SHORT));
    let run = run_dirs(dir).pop().unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    for to in [&a, &b] {
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(&run)
            .arg(to)
            .status()
            .unwrap();
        assert!(copied.success());
    }
    let merge = |out: &str| {
        bin()
            .args(["report", "merge"])
            .arg(&a)
            .arg(&b)
            .arg("--output")
            .arg(dir.join(out))
            .output()
            .unwrap()
    };
    let o = merge("whole");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let intervals = b.join("intervals.jsonl");
    let len = std::fs::metadata(&intervals).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&intervals)
        .unwrap();
    f.set_len(len - 40).unwrap();
    let o = merge("cut");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("intervals.jsonl: 1 line does not read"),
        "{}",
        text(&o)
    );
    assert!(!dir.join("cut").exists());
    std::fs::remove_file(&intervals).unwrap();
    let o = merge("missing");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("intervals.jsonl"), "{}", text(&o));
    assert!(!dir.join("missing").exists());
}
