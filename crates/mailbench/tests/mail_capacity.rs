//! A server of known capacity: the local Dovecot+Postfix behind a throttling
//! proxy of our own that carries LIMIT IMAP sessions at full speed and holds
//! every response back while more are open. A run at LIMIT users passes; a run
//! above it fails on the response time (and on nothing the proxy does not
//! cause), so a capacity search over this server must land on LIMIT.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mail_support.rs"]
mod support;
use mailbench_base::rundir::TestLog;
use mailbench_mail::local::LocalServer;
use std::time::Duration;
use support::*;

const LIMIT: usize = 6;

fn run_through(
    proxy: u16,
    sub: u16,
    users: usize,
    out: &std::path::Path,
    pw: &str,
) -> serde_json::Value {
    let imap = format!("imap://127.0.0.1:{proxy}");
    let sub = format!("smtp://127.0.0.1:{sub}");
    let users = users.to_string();
    let args = [
        "mail",
        "run",
        "--imap",
        &imap,
        "--submission",
        &sub,
        "--users",
        &users,
        "--profile",
        "loadsim-light",
        "--day-length",
        "20s",
        "--ramp-up",
        "3s",
        "--drain",
        "20s",
        "--interval",
        "1s",
        "--skip-setup",
        // The local Dovecot's rare CREATE refusal under load is not under test.
        "--max-error-rate",
        "2%",
        "-q",
        "--output",
        out.to_str().unwrap(),
    ];
    let o = mailbench(&args, &[("MAILBENCH_PASSWORD", pw)]);
    assert!(matches!(o.status.code(), Some(0) | Some(1)), "{}", text(&o));
    result(out, "mail-run")
}

/// `mail setup` of `users` users (loadsim-light) straight to the server.
fn provision(srv: &LocalServer, users: usize, pw: &str) {
    let setup_out = tempfile::tempdir().unwrap();
    let imap = format!("imap://127.0.0.1:{}", srv.ports.imap);
    let sub = format!("smtp://127.0.0.1:{}", srv.ports.submission);
    let n = users.to_string();
    let o = mailbench(
        &[
            "mail",
            "setup",
            "--imap",
            &imap,
            "--submission",
            &sub,
            "--users",
            &n,
            "--profile",
            "loadsim-light",
            "-q",
            "--output",
            setup_out.path().to_str().unwrap(),
        ],
        &[("MAILBENCH_PASSWORD", pw)],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn the_throttled_server_carries_its_limit_and_not_more() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let srv = LocalServer::start(dir.path(), &TestLog::discard()).unwrap();
    let pw = srv.password.clone();
    let over = LIMIT + 3;
    // Provision the largest count once, straight to the server.
    provision(&srv, over, &pw);

    let proxy = ThrottleProxy::start(srv.ports.imap, LIMIT, Duration::from_millis(1500));
    let at = tempfile::tempdir().unwrap();
    let r = run_through(proxy.port, srv.ports.submission, LIMIT, at.path(), &pw);
    assert_eq!(r["verdict"]["status"], "pass", "{:#}", r["verdict"]);
    assert!(proxy.peak.load(std::sync::atomic::Ordering::SeqCst) <= LIMIT);

    let above = tempfile::tempdir().unwrap();
    let r = run_through(proxy.port, srv.ports.submission, over, above.path(), &pw);
    assert_eq!(r["verdict"]["status"], "fail");
    let reasons = r["verdict"]["reasons"].to_string();
    assert!(reasons.contains("response time"), "{reasons}");
    // Judged over the steady window (the middle half of the day).
    assert!(r["steady"]["response_time_ms"].as_f64().unwrap() > 1000.0);
    assert!(r["steady"]["intervals"].as_u64().unwrap() >= 5);
    assert!(proxy.delayed.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

/// `mail sweep --find-max` over the same server: it grows 2, 4, 8 (fails),
/// bisects to 6 and stops within its resolution of 2 users; the supported
/// users are the proxy's limit and the level above failed on the response
/// time. Each level's own mail-run result is in its folder.
#[test]
#[allow(clippy::too_many_lines)] // longer than 100 lines: split when next changed
fn find_max_lands_on_the_known_capacity() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let srv = LocalServer::start(dir.path(), &TestLog::discard()).unwrap();
    let pw = srv.password.clone();
    provision(&srv, 9, &pw);
    let proxy = ThrottleProxy::start(srv.ports.imap, LIMIT, Duration::from_millis(1500));
    let through = format!("imap://127.0.0.1:{}", proxy.port);
    let sub = format!("smtp://127.0.0.1:{}", srv.ports.submission);
    let out = tempfile::tempdir().unwrap();
    let o = mailbench_within(
        &[
            "mail",
            "sweep",
            "--imap",
            &through,
            "--submission",
            &sub,
            "--users",
            "2..9",
            "--find-max",
            "--resolution",
            "2",
            "--profile",
            "loadsim-light",
            "--day-length",
            "20s",
            "--ramp-up",
            "2s",
            "--drain",
            "20s",
            "--interval",
            "1s",
            "--skip-setup",
            "--max-error-rate",
            "2%",
            "-q",
            "--output",
            out.path().to_str().unwrap(),
        ],
        &[("MAILBENCH_PASSWORD", &pw)],
        Duration::from_secs(170),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = result(out.path(), "mail-sweep");
    assert_eq!(r["run"]["kind"], "mail-sweep");
    let users: Vec<u64> = (r["levels"].as_array().unwrap().iter())
        .map(|l| l["users"].as_u64().unwrap())
        .collect();
    assert_eq!(users, vec![2, 4, 8, 6], "{:#}", r["levels"]);
    let supported = r["supported_users"].as_u64().unwrap();
    assert!(
        supported <= LIMIT as u64 && LIMIT as u64 - supported < 2,
        "supported {supported}, capacity {LIMIT}"
    );
    assert_eq!(r["failed_above"]["users"], 8, "{:#}", r["failed_above"]);
    assert_eq!(r["failed_above"]["criterion"], "response_time");
    for l in r["levels"].as_array().unwrap() {
        let u = l["users"].as_u64().unwrap();
        assert_eq!(l["status"] == "pass", u <= LIMIT as u64, "{l:#}");
        // rate-equivalent users: users x (8 h / 20 s)
        let eq = l["rate_equivalent_users"].as_f64().unwrap();
        assert!((eq - u as f64 * 1440.0).abs() < 1.0, "{l:#}");
        // Each level is an ordinary mail run with its own result.
        let lr = out
            .path()
            .read_dir()
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join(l["result_dir"].as_str().unwrap())
            .join("result.json");
        let lv: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&lr).unwrap()).unwrap();
        assert_eq!(lv["run"]["kind"], "mail-run");
        assert_eq!(lv["users"].as_u64(), Some(u));
        assert_eq!(lv["verdict"]["status"], l["status"]);
    }
    let summary = std::fs::read_to_string(
        out.path()
            .read_dir()
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join("summary.txt"),
    )
    .unwrap();
    assert!(summary.contains("Supported users   6"), "{summary}");
    assert!(summary.contains("FAIL response_time"), "{summary}");
}

/// The default results folder is relative (`./mailbench-results`), and so is
/// the local target's folder inside a sweep's: the servers must still start
/// (Postfix refuses a relative configuration folder).
#[test]
fn a_sweep_into_a_relative_results_folder_starts_the_local_target() {
    if !servers_available() {
        return;
    }
    let cwd = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_mailbench"))
        .current_dir(cwd.path())
        .env_remove("MAILBENCH_PASSWORD")
        .args([
            "mail",
            "sweep",
            "--users",
            "2",
            "--day-length",
            "6s",
            "--ramp-up",
            "1s",
            "--drain",
            "5s",
            "--interval",
            "1s",
            "-q",
            "--output",
            "out",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = result(&cwd.path().join("out"), "mail-sweep");
    assert_eq!(v["levels"][0]["users"], 2, "{v}");
}
