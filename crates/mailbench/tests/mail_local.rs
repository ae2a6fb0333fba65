//! The must-show test against the real local Dovecot+Postfix: setup of 100 users
//! (idempotent), then a compressed-day mmb3 run in which every task kind runs,
//! mail is actually delivered into the recipients' mailboxes, and every task has
//! its 95th percentile.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mail_support.rs"]
mod support;
use mailbench_mail::profile::TaskKind;
use support::*;

#[test]
fn setup_100_users_then_a_compressed_mmb3_day() {
    if !servers_available() {
        return;
    }
    let local = tempfile::tempdir().unwrap();
    let l = local.path().to_str().unwrap();
    setup_100_users(local.path());
    setup_again_appends_nothing(l);
    let out3 = tempfile::tempdir().unwrap();
    let v = compressed_day(l, out3.path());
    every_task_ran(&v);
    let delivered = mail_was_delivered(&v, local.path());
    steady_window_measured(&v);
    run_files(&v, out3.path(), delivered);
    // Nothing of the local target is left running.
    assert!(
        !std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| {
                std::fs::read_to_string(e.path().join("cmdline")).is_ok_and(|c| c.contains(l))
            }),
        "a server of {l} is still running"
    );
}

/// Setup of 100 users into the local target in `local`.
fn setup_100_users(local: &std::path::Path) {
    let out = tempfile::tempdir().unwrap();
    let (l, o) = (local.to_str().unwrap(), out.path().to_str().unwrap());
    let r = mailbench(
        &[
            "mail",
            "setup",
            "--users",
            "100",
            "--local-dir",
            l,
            "--output",
            o,
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let v = result(out.path(), "mail-setup");
    let s = &v["setup"];
    assert_eq!(s["users_ok"], 100, "{s}");
    // mmb3: 100 in Inbox + 1 Deleted Items + 25 appointments + 10 folders x 10.
    assert_eq!(s["messages_appended"], 100 * 226, "{s}");
    assert_eq!(v["topology"]["lists"].as_array().unwrap().len(), 10);
    assert!(!text(&r).contains(&std::fs::read_to_string(local.join("password")).unwrap()));
}

/// Idempotent: a second setup appends nothing and creates no folder.
fn setup_again_appends_nothing(l: &str) {
    let out2 = tempfile::tempdir().unwrap();
    let r = mailbench(
        &[
            "mail",
            "setup",
            "--users",
            "100",
            "--local-dir",
            l,
            "--output",
            out2.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let v = result(out2.path(), "mail-setup");
    assert_eq!(v["setup"]["messages_appended"], 0, "{}", v["setup"]);
    assert_eq!(v["setup"]["folders_created"], 0, "{}", v["setup"]);
}

/// A compressed mmb3 day of the 100 users (setup skipped); its result, which
/// the verdict may fail on response times on a busy machine, but with no
/// connection, protocol or delivery failure at all: no error but Dovecot's
/// known CREATE race (see mail_support.rs).
fn compressed_day(l: &str, out3: &std::path::Path) -> serde_json::Value {
    let r = mailbench(
        &[
            "mail",
            "run",
            "--users",
            "100",
            "--local-dir",
            l,
            "--day-length",
            "3m",
            "--ramp-up",
            "10s",
            // The drain ends when every delivery was seen; the margin is for
            // a machine busy with other work (the day queues ~117 deliveries/s).
            "--drain",
            "6m",
            "--skip-setup",
            "--output",
            out3.to_str().unwrap(),
        ],
        &[],
    );
    let v = result(out3, "mail-run");
    assert!(matches!(r.status.code(), Some(0) | Some(1)), "{}", text(&r));
    known_server_races(&v);
    v
}

/// Every task kind ran and has its 95th percentile.
fn every_task_ran(v: &serde_json::Value) {
    for k in TaskKind::ALL {
        let t = &v["tasks"][k.name()];
        assert!(
            t["count"].as_u64().unwrap_or(0) > 0,
            "{} never ran: {t}",
            k.name()
        );
        assert!(
            t["p95_ms"].as_f64().unwrap_or(0.0) > 0.0,
            "{} has no p95: {t}",
            k.name()
        );
        assert!(!t["hist"].as_str().unwrap_or("").is_empty());
    }
}

/// Every message was delivered, also by the server's count, and is really in the
/// recipients' Maildirs. Returns the deliveries.
fn mail_was_delivered(v: &serde_json::Value, local: &std::path::Path) -> u64 {
    let f = &v["mail_flow"];
    let submitted = f["submitted"].as_u64().unwrap();
    let delivered = f["delivered"].as_u64().unwrap();
    assert!(submitted > 100 * 80, "{f}");
    assert_eq!(delivered, f["expected_deliveries"].as_u64().unwrap(), "{f}");
    assert_eq!(f["server_deliveries"].as_u64(), Some(delivered), "{f}");
    // The messages are really in the recipients' Maildirs.
    let mut files = 0;
    for sub in ["new", "cur"] {
        let d = local
            .join("dovecot/mail/user1@example.test/Maildir")
            .join(sub);
        files += std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0);
    }
    assert!(files > 100, "user1's Inbox has only {files} messages");
    assert!(v["response_time"]["weighted_p95_ms"].as_f64().unwrap() > 0.0);
    delivered
}

/// The steady window (the middle half of the 3-minute day) is measured: its
/// response time and per-task figures, the flow scaled to the day, and the queue
/// judged over it (the local target's queue is sampled).
fn steady_window_measured(v: &serde_json::Value) {
    let st = &v["steady"];
    assert_eq!(st["spec"], "25%-75%", "{st}");
    assert_eq!(st["window"]["from_s"].as_f64(), Some(10.0 + 45.0), "{st}");
    assert_eq!(st["window"]["to_s"].as_f64(), Some(10.0 + 135.0), "{st}");
    assert!(st["intervals"].as_u64().unwrap() >= 10, "{st}");
    let rt = st["response_time_ms"].as_f64().unwrap();
    let p50 = st["response_time_p50_ms"].as_f64().unwrap();
    assert!(rt > 0.0 && p50 > 0.0 && p50 <= rt, "{st}");
    assert!(st["tasks"]["read"]["count"].as_u64().unwrap() > 0, "{st}");
    let per_day = st["submitted_per_user_per_day"].as_f64().unwrap();
    assert!(
        per_day > 40.0 && per_day < 170.0,
        "mmb3 submits 85 a day: {st}"
    );
    assert!(st["queue"]["samples"].as_u64().unwrap() >= 2, "{st}");
}

/// summary.txt speaks of the response time over the steady window; per-interval
/// histograms are recoverable; the run's files are there.
fn run_files(v: &serde_json::Value, out3: &std::path::Path, delivered: u64) {
    let summary = std::fs::read_to_string(
        std::fs::read_dir(out3)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join("summary.txt"),
    )
    .unwrap();
    assert!(
        summary.contains("Response time (weighted p95)"),
        "{summary}"
    );
    assert!(
        summary.contains("over the steady window 25%-75%"),
        "{summary}"
    );
    assert!(!summary.contains("score"), "{summary}");
    assert!(v["delivery_latency"]["summary"]["count"].as_u64().unwrap() == delivered);
    assert_eq!(v["queue"]["final"], 0);
    // Per-interval histograms are recoverable.
    let dir = std::fs::read_dir(out3)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let lines = std::fs::read_to_string(dir.join("intervals.jsonl")).unwrap();
    let first_day = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|l| l["phase"] == "day" && l["ops"]["read"]["hist"].is_string())
        .expect("an interval with reads");
    let h = mailbench_metrics::LatencyHist::from_base64(
        first_day["ops"]["read"]["hist"].as_str().unwrap(),
    )
    .unwrap();
    assert!(h.count() > 0);
    assert!(dir.join("summary.txt").is_file() && dir.join("test.log").is_file());
}

/// Processes (`PID STATE COMMAND LINE`) whose command line names `dir` or whose working folder is
/// inside it (Postfix's master works in its queue folder).
fn servers_of(dir: &std::path::Path) -> Vec<String> {
    let d = dir.to_str().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let cwd = std::fs::read_link(e.path().join("cwd")).unwrap_or_default();
            String::from_utf8_lossy(&cmd).contains(d) || cwd.starts_with(dir)
        })
        .map(|e| describe_process(&e.path()))
        .collect()
}

#[test]
fn a_process_is_described_by_its_pid_state_and_command_line() {
    let me = std::path::PathBuf::from(format!("/proc/{}", std::process::id()));
    let d = describe_process(&me);
    let exe = std::env::current_exe().unwrap();
    let mut parts = d.splitn(3, ' ');
    assert_eq!(
        parts.next(),
        Some(std::process::id().to_string().as_str()),
        "{d}"
    );
    // The main thread waits for the test threads: sleeping, or running.
    assert!(matches!(parts.next(), Some("S" | "R")), "{d}");
    let cmd = parts.next().unwrap_or_default();
    assert!(cmd.starts_with(exe.to_str().unwrap()), "{d}");
}

/// `PID STATE COMMAND LINE` of the process at `/proc/PID`, for messages.
fn describe_process(proc_dir: &std::path::Path) -> String {
    let pid = proc_dir.file_name().unwrap().to_string_lossy().into_owned();
    let stat = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
    // The state is the field after the command name's closing parenthesis.
    let state = stat.rsplit_once(") ").map_or("?", |(_, rest)| &rest[..1]);
    let cmd = std::fs::read(proc_dir.join("cmdline")).unwrap_or_default();
    let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
    format!("{pid} {state} {}", cmd.trim_end())
}

/// Waits (bounded) until `path` holds `needle`.
fn wait_for(path: &std::path::Path, needle: &str, limit: std::time::Duration) -> bool {
    let end = std::time::Instant::now() + limit;
    while std::time::Instant::now() < end {
        if std::fs::read_to_string(path).is_ok_and(|t| t.contains(needle)) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

/// A sampling interval longer than the whole run does not hold the run up:
/// the end of the day and of the drain are watched on their own tick.
#[test]
fn a_long_interval_does_not_delay_the_end() {
    if !servers_available() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    let r = mailbench_within(
        &[
            "mail",
            "run",
            "--users",
            "3",
            "--day-length",
            "15s",
            "--ramp-up",
            "1s",
            "--drain",
            "10s",
            "--interval",
            "1h",
            "--output",
            o,
        ],
        &[],
        // The day, the drain and setup take ~30 s; the run's own hard limit
        // (day + drain + 2 x op-timeout + 30 s) is ~2 minutes.
        std::time::Duration::from_secs(100),
    );
    assert!(matches!(r.status.code(), Some(0) | Some(1)), "{}", text(&r));
    let v = result(out.path(), "mail-run");
    assert!(
        v["window"]["drain_s"].as_f64().unwrap() <= 11.5,
        "{}",
        v["window"]
    );
    assert!(
        !v["warnings"].to_string().contains("hard time limit"),
        "{}",
        v["warnings"]
    );
    // A clean run on the generated configuration: the servers log no error
    // (e.g. none about a system table outside the local folder).
    assert!(
        !v["warnings"].to_string().contains("servers logged errors"),
        "{}",
        v["warnings"]
    );
}

/// Sends SIGINT to `c` and waits at most 30 s for it to end.
fn interrupt_within_30s(c: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    use std::time::{Duration, Instant};
    let st = std::process::Command::new("kill")
        .args(["-INT", &c.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = c.kill();
            panic!("{what} still running 30 s after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The test.log of the first run folder in `out`, once it exists (at most 60 s).
fn first_test_log(out: &std::path::Path) -> std::path::PathBuf {
    use std::time::{Duration, Instant};
    let log = || {
        std::fs::read_dir(out)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.path().join("test.log"))
    };
    let end = Instant::now() + Duration::from_secs(60);
    while log().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    log().expect("no run folder within 60 s")
}

/// Starts `mailbench mail ARGS --local-dir WORK/local --output WORK/out`,
/// presses Ctrl-C once the first user has logged in, and checks it ends with
/// 130; returns the result of `kind` it wrote.
fn interrupt_while_provisioning(
    work: &std::path::Path,
    args: &[&str],
    kind: &str,
) -> serde_json::Value {
    use std::process::{Command, Stdio};
    use std::time::Duration;
    let out = work.join("out");
    let mut c = Command::new(env!("CARGO_BIN_EXE_mailbench"))
        .arg("mail")
        .args(args)
        .arg("--local-dir")
        .arg(work.join("local"))
        .arg("--output")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_for(
            &first_test_log(&out),
            "a user logged in",
            Duration::from_secs(60)
        ),
        "the local target did not start"
    );
    std::thread::sleep(Duration::from_secs(2));
    let status = interrupt_within_30s(&mut c, kind);
    assert_eq!(status.code(), Some(130));
    let v = result(&out, kind);
    assert_eq!(v["verdict"]["status"], "interrupted", "{}", v["verdict"]);
    v
}

/// Ctrl-C while `mail run` is still provisioning its users: exit 130 within
/// seconds, an interrupted mail-run result, the local servers stopped.
#[test]
fn ctrl_c_during_a_runs_setup_writes_an_interrupted_result() {
    if !servers_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let args = ["run", "--users", "400", "--day-length", "2m"];
    interrupt_while_provisioning(work.path(), &args, "mail-run");
    let local = work.path().join("local");
    assert!(servers_of(&local).is_empty(), "{:?}", servers_of(&local));
}

/// Ctrl-C during `mail setup` stops it within seconds with a partial,
/// interrupted result.json; a `mail run` killed with SIGKILL leaves no
/// server running, and the next run without --local-dir removes the
/// temporary folder it left.
#[test]
fn interrupted_setup_and_killed_run_leave_nothing_behind() {
    if !servers_available() {
        return;
    }
    use std::time::Duration;
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("local");
    let v = interrupt_while_provisioning(work.path(), &["setup", "--users", "400"], "mail-setup");
    assert!(
        v["setup"]["users_ok"].as_u64().unwrap() < 400,
        "{}",
        v["setup"]
    );
    assert!(servers_of(&local).is_empty(), "{:?}", servers_of(&local));

    // SIGKILL during a run (temporary local target).
    let out2 = work.path().join("out2");
    let tmp = kill_a_run_with_a_temporary_target(&out2);
    // The next run without --local-dir removes the folder the killed one left.
    assert!(tmp.is_dir());
    let r = mailbench_within(
        &[
            "mail",
            "setup",
            "--users",
            "2",
            "--output",
            out2.to_str().unwrap(),
        ],
        &[],
        Duration::from_secs(120),
    );
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    assert!(!tmp.exists(), "{} was left", tmp.display());
}

/// A `mail run` with a temporary local target, killed with SIGKILL once its
/// servers run: none of them is left running. Returns the temporary folder.
fn kill_a_run_with_a_temporary_target(out2: &std::path::Path) -> std::path::PathBuf {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let mut c = Command::new(env!("CARGO_BIN_EXE_mailbench"))
        .args([
            "mail",
            "run",
            "--users",
            "5",
            "--day-length",
            "2m",
            "--output",
        ])
        .arg(out2)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let prefix = format!("mailbench-local-{}-", c.id());
    let tmp_dir = || {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
    };
    let end = Instant::now() + Duration::from_secs(60);
    while tmp_dir().is_none_or(|d| !d.join("postfix/queue/pid/master.pid").is_file())
        && Instant::now() < end
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let tmp = tmp_dir().expect("the run's temporary local target");
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !servers_of(&tmp).is_empty(),
        "no server found for {}",
        tmp.display()
    );
    c.kill().unwrap();
    c.wait().unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    while !servers_of(&tmp).is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        servers_of(&tmp).is_empty(),
        "left running: {:?}",
        servers_of(&tmp)
    );
    tmp
}

/// Starts `mail run` on the local target in `work/local` (results in `out`),
/// waits until its load runs (the first interval line), then sends SIGINT
/// `times` times, 100 ms apart; the exit status and the run's folder.
fn interrupt_a_running_load(
    work: &std::path::Path,
    out: &std::path::Path,
    times: usize,
) -> (std::process::ExitStatus, std::path::PathBuf) {
    use std::process::{Command, Stdio};
    use std::time::Duration;
    let mut c = Command::new(env!("CARGO_BIN_EXE_mailbench"))
        .args(["mail", "run", "--users", "10", "--day-length", "2m"])
        .args(["--ramp-up", "1s", "--interval", "1s", "--local-dir"])
        .arg(work.join("local"))
        .arg("--output")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let log = first_test_log(out);
    let intervals = log.with_file_name("intervals.jsonl");
    assert!(
        wait_for(&intervals, "\"phase\"", Duration::from_secs(90)),
        "the load did not start"
    );
    for _ in 1..times {
        let mut kill = Command::new("kill");
        assert!(
            kill.args(["-INT", &c.id().to_string()])
                .status()
                .unwrap()
                .success()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let dir = log.parent().unwrap().to_path_buf();
    (interrupt_within_30s(&mut c, "mail run"), dir)
}

/// A second Ctrl-C aborts the users at once (no new grace) and the result so
/// far is still written; a third ends mailbench at once (130; the result is
/// on disk only if it was written before) and its servers do not outlive it. Whether a user is still in a
/// task when the second comes depends on timing: the unit tests of
/// `command::control` pin the decision itself.
#[test]
fn a_second_ctrl_c_aborts_the_users_and_a_third_exits() {
    if !servers_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let (status, dir) = interrupt_a_running_load(work.path(), &out, 2);
    assert_eq!(status.code(), Some(130));
    let log = std::fs::read_to_string(dir.join("test.log")).unwrap();
    // The second never restarts the users' grace; users still in a task then
    // (none, when every one ended before it came) are aborted at once.
    assert_eq!(
        log.matches("interrupted: stopping the users").count(),
        1,
        "{log}"
    );
    assert!(
        !log.contains("interrupted: users still in a task aborted"),
        "{log}"
    );
    let v = result(&out, "mail-run");
    assert_eq!(v["verdict"]["status"], "interrupted", "{}", v["verdict"]);
    result_written_before_the_servers_stopped(&dir, &log);
    let last = v["verdict"]["reasons"].as_array().unwrap().last().unwrap();
    assert!(last.as_str().unwrap().starts_with("not judged: "), "{last}");

    let out3 = work.path().join("out3");
    let (status, dir) = interrupt_a_running_load(work.path(), &out3, 3);
    assert_eq!(status.code(), Some(130));
    // The result is written before the servers stop, usually before the third
    // signal: either none, or the interrupted one, never a partial file.
    if dir.join("result.json").exists() {
        let v = result(&out3, "mail-run");
        assert_eq!(v["verdict"]["status"], "interrupted", "{}", v["verdict"]);
    }
    let local = work.path().join("local");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !servers_of(&local).is_empty() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(servers_of(&local).is_empty(), "{:?}", servers_of(&local));
}

/// result.json was on disk before the local servers began to stop (the log's
/// "postfix stopped", the first of them; its time is cut to the millisecond).
fn result_written_before_the_servers_stopped(dir: &std::path::Path, log: &str) {
    let line = log
        .lines()
        .find(|l| l.ends_with(" local target: postfix stopped"))
        .unwrap_or_else(|| panic!("no postfix stop in the log: {log}"));
    let at = line.split(' ').next().unwrap();
    let stopped = humantime::parse_rfc3339(at).unwrap();
    let written = std::fs::metadata(dir.join("result.json"))
        .unwrap()
        .modified()
        .unwrap();
    assert!(
        written <= stopped + std::time::Duration::from_millis(1),
        "result.json written at {} after the servers stopped ({line})",
        humantime::format_rfc3339_millis(written)
    );
}
