//! Faults and bad input against a real local Dovecot+Postfix, through a
//! misbehaving proxy of our own: wrong password, connections reset mid-task, a
//! server that stops answering, garbage responses. Each is counted as errors by
//! kind, the run ends cleanly with a Fail verdict (exit 1), and nothing panics.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mail_support.rs"]
mod support;
use mailbench_base::rundir::TestLog;
use mailbench_mail::local::LocalServer;
use support::*;

fn run_remote(
    imap_port: u16,
    sub_port: u16,
    out: &std::path::Path,
    password: &str,
    extra: &[&str],
) -> std::process::Output {
    let imap = format!("imap://127.0.0.1:{imap_port}");
    let sub = format!("smtp://127.0.0.1:{sub_port}");
    let mut args = vec![
        "mail",
        "run",
        "--imap",
        &imap,
        "--submission",
        &sub,
        "--users",
        "6",
        "--day-length",
        "20s",
        "--ramp-up",
        "2s",
        "--drain",
        "10s",
        "--op-timeout",
        "2s",
        "--skip-setup",
        "--interval",
        "1s",
        "--output",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    mailbench(&args, &[("MAILBENCH_PASSWORD", password)])
}

fn errors_of(v: &serde_json::Value, kind: &str) -> u64 {
    v["errors"]["by_kind"][kind].as_u64().unwrap_or(0)
}

#[test]
fn faults_are_counted_by_kind_and_fail_cleanly() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let srv = LocalServer::start(dir.path(), &TestLog::discard()).unwrap();
    let (imap, sub) = (srv.ports.imap, srv.ports.submission);
    let pw = srv.password.clone();
    let out = tempfile::tempdir().unwrap();

    // Provision 6 users directly (folders and content), then check idempotence.
    let imap_url = format!("imap://127.0.0.1:{imap}");
    let sub_url = format!("smtp://127.0.0.1:{sub}");
    let setup_args = [
        "mail",
        "setup",
        "--imap",
        &imap_url,
        "--submission",
        &sub_url,
        "--users",
        "6",
        "--profile",
        "loadsim-light",
        "--output",
        out.path().to_str().unwrap(),
    ];
    let r = mailbench(&setup_args, &[("MAILBENCH_PASSWORD", &pw)]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let v = result(out.path(), "mail-setup");
    assert_eq!(v["setup"]["users_ok"], 6, "{v}");
    assert!(v["setup"]["messages_appended"].as_u64().unwrap() > 0);

    // Clean baseline through a proxy that injects nothing.
    let p = Proxy::start(imap, Fault::Reset, 0, 0);
    let o = tempfile::tempdir().unwrap();
    let r = run_remote(p.port, sub, o.path(), &pw, &["--profile", "loadsim-light"]);
    let v = result(o.path(), "mail-run");
    assert_clean_run(&r, &v);

    // Wrong password: every login refused.
    let o = tempfile::tempdir().unwrap();
    let r = run_remote(imap, sub, o.path(), "not-the-password", &[]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    let v = result(o.path(), "mail-run");
    assert!(errors_of(&v, "auth") > 0, "{}", v["errors"]);
    assert!(!text(&r).contains("not-the-password"));
    assert!(
        !std::fs::read_to_string(
            o.path()
                .read_dir()
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path()
                .join("test.log")
        )
        .unwrap()
        .contains("not-the-password")
    );

    for (fault, kind) in [
        (Fault::Reset, "reset"),
        (Fault::Stall, "timeout"),
        (Fault::Garbage, "malformed"),
    ] {
        let p = Proxy::start(imap, fault, 3, 1500);
        let o = tempfile::tempdir().unwrap();
        let r = run_remote(p.port, sub, o.path(), &pw, &[]);
        let all = text(&r);
        assert!(!all.contains("panicked"), "{all}");
        assert_eq!(r.status.code(), Some(1), "{kind}: {all}");
        let v = result(o.path(), "mail-run");
        assert!(
            p.faults.load(std::sync::atomic::Ordering::Relaxed) > 0,
            "{kind}: proxy injected nothing"
        );
        assert!(errors_of(&v, kind) > 0, "{kind}: {}", v["errors"]);
        assert_eq!(v["verdict"]["status"], "fail", "{kind}");
        // The run went on: tasks completed besides the failures.
        let done: u64 = v["tasks"]
            .as_object()
            .unwrap()
            .values()
            .map(|t| t["count"].as_u64().unwrap())
            .sum();
        assert!(done > 50, "{kind}: only {done} tasks completed");
    }
    drop(srv);
}
