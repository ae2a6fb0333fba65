//! The real `mailbench storage` binary against hostile conditions: slow
//! storage at shutdown, the hard deadline, foreign files in the folders it
//! writes into, full disks, values out of range.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "storage_support.rs"]
mod storage_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use storage_support::*;

/// One small database and a short run.
const ONE: &[&str] = &["--databases", "1", "--db-size", "64MiB", "--threads", "2"];

fn storage(dir: &Path, sub: &str, extra: &[&str], faults: Option<&str>) -> Output {
    let mut c = storage_cmd(dir, sub, ONE, extra);
    if let Some(f) = faults {
        c.env("MAILBENCH_FAULTS", f);
    }
    c.output().unwrap()
}

/// A run of `duration` with no warm-up, one-second samples and no verify,
/// then `extra`.
fn quick<'a>(duration: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--duration",
        duration,
        "--warmup",
        "0s",
        "--sample-interval",
        "1s",
        "--no-verify",
    ];
    v.extend_from_slice(extra);
    v
}

fn init(dir: &Path) {
    let o = storage(dir, "init", &[], None);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// With every I/O slow, the clean shutdown must not wait on background reads it
/// keeps submitting itself: it ends clean, well before its deadline.
#[test]
fn slow_storage_shuts_down_clean_instead_of_feeding_its_own_shutdown() {
    let t = tempfile::tempdir().unwrap();
    init(t.path());
    let o = storage(
        t.path(),
        "run",
        &quick("3s", &[]),
        Some("delay_ms=120,delay_share=1.0"),
    );
    let code = o.status.code().unwrap();
    assert!(code == 0 || code == 1, "{}", text(&o));
    let r = last_result(t.path());
    assert_eq!(
        r["window"].get("ended_by_deadline"),
        None,
        "{}",
        r["window"]
    );
    for i in r["instances"].as_array().unwrap() {
        assert_eq!(i["clean_shutdown"], true, "{}", text(&o));
    }
}

/// SIGTERM on slow storage (every I/O delayed) ends the run like Ctrl-C:
/// exit 130 with an interrupted result, not a run that ignores the signal.
#[test]
fn sigterm_on_slow_storage_ends_the_run_with_an_interrupted_result() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    init(dir);
    let mut run = storage_cmd(dir, "run", ONE, &quick("10m", &["--shutdown-grace", "5s"]));
    run.env("MAILBENCH_FAULTS", "delay_ms=120,delay_share=1.0");
    let mut child = spawn_quiet(run);
    wait_for_log(dir, "the measured window", "phase: measured window");
    assert_eq!(signal_and_wait(&mut child, "TERM"), Some(130));
    let r = last_result(dir);
    assert_eq!(r["kind"], "storage-run");
    assert_eq!(r["verdict"]["status"], "interrupted", "{}", r["verdict"]);
}

/// A shutdown that cannot finish stops at the hard deadline: I/O stops, the
/// partial result says so, the run exits 3.
#[test]
fn a_shutdown_past_its_grace_stops_at_the_hard_deadline_with_a_partial_result() {
    let t = tempfile::tempdir().unwrap();
    init(t.path());
    let o = storage(
        t.path(),
        "run",
        &quick("2s", &["--shutdown-grace", "1s"]),
        // Every I/O takes 4 s: the sessions' reads cannot finish within 1 s.
        Some("delay_ms=4000,delay_share=1.0"),
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let r = last_result(t.path());
    assert_eq!(r["window"]["ended_by_deadline"], true, "{}", r["window"]);
    assert_eq!(r["verdict"]["status"], "error");
    let reasons = r["verdict"]["reasons"].to_string();
    assert!(reasons.contains("grace"), "{reasons}");
    assert_eq!(r["instances"][0]["clean_shutdown"], false);
    assert_eq!(r["spec"]["shutdown_grace"], "1s");
}

#[test]
fn shutdown_grace_out_of_range_exits_2_before_writing() {
    let t = tempfile::tempdir().unwrap();
    for bad in ["0s", "2h"] {
        let o = storage(t.path(), "run", &["--shutdown-grace", bad], None);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
        assert!(text(&o).contains("shutdown_grace"), "{}", text(&o));
    }
    assert!(!t.path().join("data").exists());
    assert!(run_dirs(t.path()).is_empty());
}

/// `backup --to` follows the rule of every folder mailbench writes into: a
/// folder with foreign files is refused, a file of the copy's name that is a
/// symlink is replaced, never followed, and nothing outside is touched.
#[test]
fn backup_to_refuses_foreign_folders_and_never_follows_a_symlink() {
    let t = tempfile::tempdir().unwrap();
    init(t.path());
    let to = t.path().join("copies");
    std::fs::create_dir(&to).unwrap();
    std::fs::write(to.join("holiday.jpg"), b"mine").unwrap();
    // The copy's own name, already there as the user's file.
    std::fs::write(to.join("DB01-DB01.mdb"), b"user data").unwrap();
    let folders = run_dirs(t.path()).len();
    let to_arg = to.display().to_string();
    let o = storage(t.path(), "backup", &["--to", &to_arg], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("holiday.jpg"), "{}", text(&o));
    assert_eq!(
        std::fs::read(to.join("DB01-DB01.mdb")).unwrap(),
        b"user data"
    );
    assert_eq!(
        run_dirs(t.path()).len(),
        folders,
        "exit 2 writes no run folder"
    );

    // A folder mailbench claimed, where a symlink of the copy's name points out.
    let mine = t.path().join("mine");
    let outside = t.path().join("outside.txt");
    std::fs::write(&outside, b"precious").unwrap();
    let mine_arg = mine.display().to_string();
    let o = storage(t.path(), "backup", &["--to", &mine_arg], None);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(mine.join(".mailbench-owned").is_file());
    std::fs::remove_file(mine.join("DB01-DB01.mdb")).unwrap();
    std::os::unix::fs::symlink(&outside, mine.join("DB01-DB01.mdb")).unwrap();
    let o = storage(t.path(), "backup", &["--to", &mine_arg], None);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read(&outside).unwrap(), b"precious");
    let m = std::fs::symlink_metadata(mine.join("DB01-DB01.mdb")).unwrap();
    assert!(m.is_file(), "the symlink was replaced by the copy");

    // A device is not a folder: refused before anything is written.
    let before = run_dirs(t.path()).len();
    let o = storage(t.path(), "backup", &["--to", "/dev/null"], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(run_dirs(t.path()).len(), before);
}

/// A small file system of its own (tmpfs), unmounted when dropped.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(at: &Path, size: &str) -> Option<SmallFs> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallFs(at.to_path_buf()))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// After a full disk, verify, backup (no copy) and recover of what was left
/// must run: none of them writes new files on the database folder, so none
/// counts the log budget against the free space.
#[test]
fn a_full_disk_does_not_block_verify_backup_or_recovery() {
    let t = tempfile::tempdir().unwrap();
    let Some(fs) = SmallFs::mount(&t.path().join("small"), "400m") else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let data = fs.0.join("data");
    let results = t.path().join("results");
    let run = |sub: &str, extra: &[&str]| {
        storage_at(&data, &results, sub, ONE, extra)
            .current_dir(t.path())
            .output()
            .unwrap()
    };
    let o = run("init", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Fill what is left.
    let fill = fs.0.join("filler");
    let _ = Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", "status=none"])
        .arg(format!("of={}", fill.display()))
        .status();
    for (sub, extra) in [
        ("verify", &[][..]),
        ("backup", &[][..]),
        ("recover", &["--log-files", "0"][..]),
    ] {
        let o = run(sub, extra);
        assert_eq!(o.status.code(), Some(0), "{sub}: {}", text(&o));
    }
    // What creates files is still refused for space, naming it.
    let two = ["--databases", "2", "--db-size", "64MiB", "--threads", "2"];
    let o = storage_at(&data, &results, "init", &two, &[])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("free space"), "{}", text(&o));
    drop(fs);
}

/// Values that used to abort, panic or read forever exit 2 with the key named,
/// before anything is written.
#[test]
fn out_of_range_values_exit_2_before_anything_is_written() {
    let t = tempfile::tempdir().unwrap();
    let cfg = t.path().join("nan.toml");
    std::fs::write(
        &cfg,
        "[storage.profile_overrides]\nmaintenance_mb_per_s = nan\n",
    )
    .unwrap();
    let cfg_arg = cfg.display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--cache-size", "100TiB"], "cache_size"),
        (vec!["--config", &cfg_arg], "maintenance_mb_per_s"),
        (vec!["--config", "/dev/zero"], "larger than"),
        (vec!["--duration", "10000000000h"], "duration"),
        (vec!["--warmup", "400d"], "warmup"),
        (vec!["--allow-block-device"], "allow-block-device"),
    ];
    for (args, says) in cases {
        let o = storage(t.path(), "run", &args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
    assert!(!t.path().join("data").exists());
    assert!(run_dirs(t.path()).is_empty());
}

/// A command that refuses its databases leaves no run folder behind, and a
/// path that does not exist yet gets no probe file in its parent.
#[test]
fn refusals_leave_nothing_behind() {
    let t = tempfile::tempdir().unwrap();
    // verify of databases that were never created (or only half).
    let o = storage(t.path(), "verify", &[], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let data = t.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join(".mailbench-owned"), "x").unwrap();
    std::fs::write(data.join("DB01.mdb"), vec![0u8; 1 << 20]).unwrap();
    std::fs::write(data.join("DB01.mdb.init"), "{}").unwrap();
    let o = storage(t.path(), "verify", &[], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not fully created"), "{}", text(&o));
    let o = storage(t.path(), "backup", &[], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(run_dirs(t.path()).is_empty(), "{:?}", run_dirs(t.path()));

    // No probe file in the parent of a path that does not exist yet.
    let parent = t.path().join("parent");
    std::fs::create_dir(&parent).unwrap();
    let (new, results) = (parent.join("new"), t.path().join("results"));
    for (sub, extra) in [
        ("run", ["--cache-size", "100TiB"]),
        ("init", ["--db-size", "1000TiB"]),
    ] {
        let o = storage_at(&new, &results, sub, ONE, &extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{sub}: {}", text(&o));
    }
    assert_eq!(std::fs::read_dir(&parent).unwrap().count(), 0);
}

/// A database a crash left unclean is refused by `storage run` before its run
/// folder is created.
#[test]
fn run_refuses_an_unclean_database_before_creating_its_run_folder() {
    let t = tempfile::tempdir().unwrap();
    // The crash-consistency harness's way to leave a database unclean: kill -9.
    init(t.path());
    let mut child = bin()
        .current_dir(t.path())
        .args(["storage", "run", "--path"])
        .arg(t.path().join("data"))
        .arg("--output")
        .arg(t.path().join("killed"))
        .args(ONE)
        .args(quick("1h", &["-q"]))
        .env("MAILBENCH_ACK_STREAM", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first acknowledged commit: the load is running.
    use std::io::BufRead;
    let out = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(out).lines();
    let first = lines.next();
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.is_some_and(|l| l.is_ok_and(|l| l.starts_with("ACK"))));
    let o = storage(
        t.path(),
        "run",
        &["--duration", "2s", "--sample-interval", "1s"],
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not shut down cleanly"), "{}", text(&o));
    assert_eq!(run_dirs(t.path()).len(), 1, "only init's folder");
}

/// Ctrl-C during `storage init` (every write slowed so that creation cannot end
/// first): exit 130, an interrupted result.json, and a later init finishes the
/// database where it stopped.
#[test]
fn ctrl_c_during_init_writes_an_interrupted_result() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let mut init = storage_cmd(dir, "init", ONE, &[]);
    init.env("MAILBENCH_FAULTS", "delay_ms=500,delay_share=1.0");
    let mut child = spawn_quiet(init);
    // The progress file exists from the first write until the header is written.
    let progress = dir.join("data").join("DB01.mdb.init");
    wait_for("database creation", || progress.exists());
    assert_eq!(interrupt_and_wait(&mut child), Some(130));
    let r = last_result(dir);
    assert_eq!(r["kind"], "storage-init");
    assert_eq!(r["verdict"]["status"], "interrupted", "{r}");
    assert!(progress.exists(), "the creation stays resumable");
    let o = storage(dir, "init", &[], None);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        last_result(dir)["init"]["databases"][0]["action"],
        "resumed"
    );
}

/// Ctrl-C while `storage run` waits for `--start-at`: exit 130 and an
/// interrupted result.json with the databases it made ready.
#[test]
fn ctrl_c_while_waiting_for_the_start_time_writes_an_interrupted_result() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let at = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    let at = humantime::format_rfc3339_seconds(at).to_string();
    let wait = [
        "--duration",
        "5s",
        "--sample-interval",
        "1s",
        "--start-at",
        &at,
    ];
    let mut child = spawn_quiet(storage_cmd(dir, "run", ONE, &wait));
    wait_for_log(dir, "the wait for the start time", "the load starts at");
    assert_eq!(interrupt_and_wait(&mut child), Some(130));
    let r = last_result(dir);
    assert_eq!(r["kind"], "storage-run");
    assert_eq!(r["verdict"]["status"], "interrupted", "{r}");
    assert_eq!(r["window"]["interrupted"], true);
    assert_eq!(r["init"]["databases"][0]["name"], "DB01", "{r}");
}

/// Every command path, given a bad value, exits 2 and writes nothing: no
/// results folder, no database folder, nothing new in a foreign folder.
/// Covers the single-host paths, `--start-at` (storage and mail: the share
/// is resolved before the run folder exists) and the folders a command
/// makes before its first run (`mail sweep`).
#[test]
fn every_command_refuses_bad_input_before_writing() {
    let t = tempfile::tempdir().unwrap();
    let later = humantime::format_rfc3339_seconds(
        std::time::SystemTime::now() + std::time::Duration::from_secs(3600),
    )
    .to_string();
    let foreign = t.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("theirs.txt"), "not mailbench's").unwrap();
    std::fs::write(t.path().join("bad.json"), "{\"x\": 1}").unwrap();
    let f = foreign.to_str().unwrap();
    let small = ["--databases", "1", "--db-size", "64MiB"];
    let mut cases: Vec<Vec<&str>> = Vec::new();
    for sub in ["init", "run", "verify", "backup", "recover"] {
        cases.push(vec![
            "storage",
            sub,
            "--path",
            "data",
            "--profile",
            "exchange1997",
        ]);
    }
    let at = ["storage", "run", "--path", "data", "--start-at", &later];
    cases.push([&at[..], &["--profile", "exchange1997"]].concat());
    cases.push([&at[..], &small, &["--threads", "auto"]].concat());
    cases.push([&at[..], &["--db-size", "900TiB"]].concat());
    cases.push([&at[..], &small, &["--log-path", f]].concat());
    cases.push(vec![
        "storage",
        "init",
        "--path",
        "data",
        "--start-at",
        &later,
    ]);
    cases.push(vec!["mail", "setup", "--users", "2", "--local-dir", f]);
    cases.push(vec!["mail", "run", "--users", "2", "--local-dir", f]);
    cases.push(vec![
        "mail",
        "run",
        "--users",
        "2",
        "--local-dir",
        f,
        "--start-at",
        &later,
    ]);
    cases.push(vec!["mail", "sweep", "--users", "2,4", "--local-dir", f]);
    cases.push(vec!["mail", "run", "--users", "0"]);
    cases.push(vec!["plan", "--mailboxes", "0", "--mailbox-quota", "2GB"]);
    cases.push(vec!["report", "render", "bad.json"]);
    cases.push(vec!["report", "merge", "bad.json", "bad.json"]);
    cases.push(vec!["report", "compare", "bad.json", "bad.json"]);
    for args in &cases {
        let o = bin()
            .current_dir(t.path())
            .args(args)
            .args(["--output", "results"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            !t.path().join("results").exists() && !t.path().join("data").exists(),
            "{args:?} wrote a folder: {}",
            text(&o)
        );
        let theirs: Vec<_> = std::fs::read_dir(&foreign).unwrap().collect();
        assert_eq!(theirs.len(), 1, "{args:?} wrote into the foreign folder");
    }
}

/// The I/O path is recorded: `--buffered-io` goes through the page cache on
/// purpose, says so in the result and the summary, and may pass; a malformed
/// `MAILBENCH_FAULTS` is refused (exit 2) before anything is written.
#[test]
fn the_io_path_is_recorded_and_a_bad_fault_plan_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let o = storage(dir, "run", &quick("2s", &["--buffered-io"]), None);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    let r = latest_result(dir, "storage-run");
    assert_eq!(r["o_direct"], false, "{r}");
    assert_eq!(r["spec"]["buffered_io"], true);
    let p = &r["io_path"];
    assert_eq!(p["buffered_asked"], true, "{p}");
    assert!(
        p["direct_off"].as_str().unwrap().contains("--buffered-io"),
        "{p}"
    );
    let why = r["verdict"]["reasons"].to_string();
    assert!(!why.contains("page cache"), "{why}");
    let folder = run_dirs(dir).pop().unwrap();
    let summary = std::fs::read_to_string(folder.join("summary.txt")).unwrap();
    assert!(
        summary.contains("no O_DIRECT: buffered I/O asked for"),
        "{summary}"
    );

    let before = run_dirs(dir).len();
    let o = storage(dir, "run", &quick("2s", &[]), Some("read_fail=lots"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("MAILBENCH_FAULTS"), "{}", text(&o));
    assert_eq!(run_dirs(dir).len(), before);
}
