//! `--target local --server cyrus` through the real binary: Cyrus IMAP 3.6
//! from Debian's packages unpacked with `dpkg -x` into the test's own folder
//! (they conflict with Dovecot's, so they are never installed; scripts/test
//! downloads them into target/debs), named with `--cyrus-root`. A compressed
//! mmb3 day over IMAP in which every task runs, nothing fails, and the mail
//! flow is the profile's; a login name the server refuses is named in the
//! error with the option that sets it; nothing outlives a run.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mail_support.rs"]
mod support;
use mailbench_mail::profile::TaskKind;
use std::path::PathBuf;
use support::*;

/// Debian packages of the local Cyrus, unpacked, never installed.
const CYRUS_DEBS: &[&str] = &["cyrus-common", "cyrus-imapd", "cyrus-caldav"];

/// The unpacked packages (`target/tmp/cyrus/root`): from the .debs that
/// scripts/test downloads into target/debs, else downloaded here with
/// `apt-get download`. None (skip; a failure in CI) when neither works or
/// Postfix is missing. Unpacked once for the tests of this binary.
fn cyrus_root() -> Option<PathBuf> {
    static ROOT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ROOT.get_or_init(unpack_cyrus).clone()
}

fn unpack_cyrus() -> Option<PathBuf> {
    let missing = mailbench_mail::local::missing_packages_for("cyrus");
    if !missing.is_empty() {
        if std::env::var_os("CI").is_some() {
            panic!("CI must install {missing:?} (scripts/packages/mail.txt)");
        }
        eprintln!("SKIPPED: Postfix is missing: {missing:?}");
        return None;
    }
    unpack_debs("cyrus", CYRUS_DEBS, "usr/lib/cyrus/bin/httpd")
}

/// Processes whose command line names `dir`.
fn running_in(dir: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(dir))
        .collect()
}

#[test]
fn a_compressed_mmb3_day_over_imap_on_cyrus() {
    compressed_day_on_cyrus("imap");
}

/// The same day with every user on JMAP (Cyrus's HTTP service): every task
/// mapped to JMAP methods runs, nothing fails, the flow is the profile's,
/// and no IMAP command is sent by the users.
#[test]
fn a_compressed_mmb3_day_over_jmap_on_cyrus() {
    compressed_day_on_cyrus("jmap");
}

/// One compressed day at a time: the IMAP and the JMAP day each start their
/// own Cyrus, Postfix and 20 users, and run side by side on a small machine
/// they starved each other (JMAP users fell behind the day's plan and lost
/// their last tasks, so the flow came out 13 % short).
static ONE_DAY_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn compressed_day_on_cyrus(protocol: &str) {
    let Some(root) = cyrus_root() else {
        return;
    };
    let _day = ONE_DAY_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let local = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tempfile::tempdir().unwrap();
    let l = local.path().to_str().unwrap();
    let r = mailbench(
        &[
            "mail",
            "run",
            "--target",
            "local",
            "--server",
            "cyrus",
            "--cyrus-root",
            root.to_str().unwrap(),
            "--users",
            "20",
            "--day-length",
            "2m",
            "--ramp-up",
            "10s",
            "--drain",
            "4m",
            "--local-dir",
            l,
            "--protocol",
            protocol,
            "--output",
            out.path().to_str().unwrap(),
        ],
        &[],
    );
    // The verdict may fail on response times on a busy machine; nothing else.
    assert!(matches!(r.status.code(), Some(0) | Some(1)), "{}", text(&r));
    let v = result(out.path(), "mail-run");
    assert_eq!(v["config"]["server"], "cyrus");
    assert_eq!(v["config"]["login_format"], "user{n}");
    let software = v["target"]["server"]["software"].as_str().unwrap();
    assert!(software.starts_with("Cyrus IMAP 3.6"), "{software}");
    assert_eq!(v["errors"]["total"], 0, "{}", v["errors"]);
    for k in TaskKind::ALL {
        let t = &v["tasks"][k.name()];
        assert!(
            t["count"].as_u64().unwrap_or(0) > 0,
            "{} never ran: {t}",
            k.name()
        );
        assert!(
            t["p95_ms"].as_f64().unwrap_or(0.0) > 0.0,
            "{}: {t}",
            k.name()
        );
    }
    // The mail flow is the profile's (within 5 %), and every message was
    // delivered (Postfix logged as many LMTP deliveries to Cyrus).
    let f = &v["mail_flow"];
    let near = |what: &str, got: f64, want: f64| {
        assert!(
            (got - want).abs() <= 0.05 * want,
            "{what}: {got} per user per day, the profile {want}: {f}"
        );
    };
    let (day, profile) = (&f["per_user_per_day"], &f["profile_expects"]);
    near(
        "submitted",
        day["submitted"].as_f64().unwrap(),
        profile["submitted_per_day"].as_f64().unwrap(),
    );
    near(
        "delivered",
        day["delivered"].as_f64().unwrap(),
        profile["delivered_per_day"].as_f64().unwrap(),
    );
    let delivered = f["delivered"].as_u64().unwrap();
    assert_eq!(Some(delivered), f["expected_deliveries"].as_u64(), "{f}");
    assert_eq!(f["server_deliveries"].as_u64(), Some(delivered), "{f}");
    // New mail was heard of (IDLE with idled, or JMAP's changes).
    assert!(v["operations"]["new_mail"]["count"].as_u64().unwrap_or(0) > 0);
    // The protocol named once (no per-protocol rows in a run of one), and
    // what the users sent counted per protocol.
    assert_eq!(v["protocols"], serde_json::json!({ protocol: 20 }));
    assert!(v["tasks"]["read"].get("by_protocol").is_none());
    let g = &v["generator"];
    let n = |k: &str| g[k].as_u64().unwrap();
    // Every user's timer lateness is measured, whatever its protocol.
    let sched = g["sched_delay"]["count"].as_u64().unwrap_or(0);
    assert!(sched > 0, "no scheduling delay recorded: {g}");
    if protocol == "jmap" {
        assert_eq!(n("imap_commands"), 0, "JMAP users sent IMAP commands");
        assert_eq!(v["config"]["jmap_pct"], 100);
        assert!(n("jmap_requests") > 0, "{g}");
        assert!(n("jmap_method_calls") >= n("jmap_requests"), "{g}");
    } else {
        assert!(n("imap_commands") > 0);
        assert_eq!(n("jmap_requests") + n("jmap_method_calls"), 0, "{g}");
    }
    // The messages are in Cyrus's partition: one file per message.
    let inbox = local.path().join("cyrus/spool");
    assert!(inbox.is_dir());
    assert!(running_in(l).is_empty(), "{:?}", running_in(l));
}

/// A login name the server refuses (Cyrus without virtual domains refuses
/// `user@domain`) fails setup with an error naming the name tried and the
/// option that sets it.
#[test]
fn a_refused_login_names_the_login_and_the_option() {
    let Some(root) = cyrus_root() else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let r = mailbench(
        &[
            "mail",
            "setup",
            "--server",
            "cyrus",
            "--cyrus-root",
            root.to_str().unwrap(),
            "--users",
            "1",
            "--login-format",
            "user{n}@example.test",
            "--output",
            out.path().to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    let v = result(out.path(), "mail-setup");
    let e = v["setup"]["error_samples"][0].as_str().unwrap_or("");
    assert!(e.contains("logged in as `user1@example.test`"), "{e}");
    assert!(e.contains("--login-format"), "{e}");
}

#[test]
fn cyrus_options_are_checked_before_anything_is_written() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    let empty = tempfile::tempdir().unwrap();
    for (args, says) in [
        (
            vec!["--server", "courier"],
            "--server `courier`: write dovecot",
        ),
        (
            vec![
                "--server",
                "cyrus",
                "--cyrus-root",
                empty.path().to_str().unwrap(),
            ],
            "usr/lib/cyrus/bin/master (cyrus-common)",
        ),
        (
            vec!["--cyrus-root", "/"],
            "--cyrus-root is for --server cyrus",
        ),
        (vec!["--user-format", "load{n}"], "--login-format load{n}"),
    ] {
        let r = mailbench(
            &[&["mail", "run", "--users", "1", "--output", o][..], &args].concat(),
            &[],
        );
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", text(&r));
        assert!(text(&r).contains(says), "{args:?}: {}", text(&r));
    }
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}
