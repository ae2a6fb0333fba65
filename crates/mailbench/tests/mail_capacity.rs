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
    let setup_out = tempfile::tempdir().unwrap();
    let imap = format!("imap://127.0.0.1:{}", srv.ports.imap);
    let sub = format!("smtp://127.0.0.1:{}", srv.ports.submission);
    let n = over.to_string();
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
        &[("MAILBENCH_PASSWORD", &pw)],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

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
