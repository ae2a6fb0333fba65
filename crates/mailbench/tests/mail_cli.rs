//! `mailbench mail` usage errors and an unreachable server: no mail server needed.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mail_support.rs"]
mod support;
use support::*;

#[test]
fn bad_flags_and_config_are_usage_errors() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    let r = mailbench(&["mail", "run", "--profile", "mmb9", "--output", o], &[]);
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    assert!(text(&r).contains("mmb3"), "{}", text(&r));

    let cfg = out.path().join("c.toml");
    std::fs::write(&cfg, "[mail]\nuserz = 3\n").unwrap();
    let r = mailbench(
        &[
            "mail",
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--output",
            o,
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    assert!(text(&r).contains("userz"), "{}", text(&r));

    let r = mailbench(
        &["mail", "run", "--imap", "imap://127.0.0.1:1", "--output", o],
        &[],
    );
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    assert!(text(&r).contains("--submission"), "{}", text(&r));

    // No password anywhere: refused before anything is written.
    let r = mailbench(
        &[
            "mail",
            "run",
            "--imap",
            "imap://127.0.0.1:1",
            "--submission",
            "smtp://127.0.0.1:1",
            "--output",
            o,
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    assert!(text(&r).contains("MAILBENCH_PASSWORD"), "{}", text(&r));

    let r = mailbench(
        &[
            "mail",
            "run",
            "--imap",
            "imaps://h:993",
            "--submission",
            "smtp://h",
            "--tls-insecure",
            "--ca-file",
            "ca.pem",
            "--output",
            o,
        ],
        &[("MAILBENCH_PASSWORD", "x")],
    );
    // Verifying against a CA and not verifying at all contradict each other.
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    assert!(text(&r).contains("--tls-insecure"), "{}", text(&r));

    // A server-metrics address that is no http(s) URL, a disk given as a path.
    let r = mailbench(
        &[
            "mail",
            "run",
            "--server-metrics",
            "127.0.0.1:9100",
            "--output",
            o,
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    assert!(text(&r).contains("http://"), "{}", text(&r));
    let r = mailbench(
        &["mail", "run", "--server-disk", "/dev/sdb", "--output", o],
        &[],
    );
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    assert!(text(&r).contains("device name"), "{}", text(&r));

    let r = mailbench(&["mail", "run", "--day-length", "soon", "--output", o], &[]);
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    assert!(
        std::fs::read_dir(out.path())
            .unwrap()
            .all(|e| !e.unwrap().path().is_dir()),
        "usage errors write nothing"
    );
}

#[test]
fn unreachable_target_exits_3_naming_the_address() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let out = tempfile::tempdir().unwrap();
    let imap = format!("imap://127.0.0.1:{port}");
    let r = mailbench(
        &[
            "mail",
            "run",
            "--imap",
            &imap,
            "--submission",
            &format!("smtp://127.0.0.1:{port}"),
            "--output",
            out.path().to_str().unwrap(),
        ],
        &[("MAILBENCH_PASSWORD", "secret-password")],
    );
    assert_eq!(r.status.code(), Some(3), "{}", text(&r));
    assert!(
        text(&r).contains(&format!("127.0.0.1:{port}")),
        "{}",
        text(&r)
    );
    assert!(
        !text(&r).contains("secret-password"),
        "passwords never appear"
    );
}

#[test]
fn more_users_than_the_users_file_lists_is_a_usage_error() {
    let out = tempfile::tempdir().unwrap();
    let f = out.path().join("users.txt");
    let lines: String = (1..=20).map(|i| format!("u{i}@x.test pw{i}\n")).collect();
    std::fs::write(&f, lines).unwrap();
    let o = out.path().join("results");
    let r = mailbench(
        &[
            "mail",
            "run",
            "--imap",
            "imap://127.0.0.1:1",
            "--submission",
            "smtp://127.0.0.1:1",
            "--users-file",
            f.to_str().unwrap(),
            "--users",
            "30",
            "--output",
            o.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    assert!(text(&r).contains("lists 20 users"), "{}", text(&r));
    assert!(!o.exists(), "usage errors write nothing");
}

#[test]
fn a_local_folder_the_servers_cannot_reach_is_a_usage_error() {
    if !servers_available() {
        return;
    }
    // A folder only its owner may enter, as `mktemp -d` makes.
    let private = tempfile::tempdir().unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let local = private.path().join("mb");
    let out = tempfile::tempdir().unwrap();
    let o = out.path().join("results");
    let r = mailbench(
        &[
            "mail",
            "setup",
            "--users",
            "2",
            "--local-dir",
            local.to_str().unwrap(),
            "--output",
            o.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    let t = text(&r);
    assert!(
        t.contains(&format!("cannot enter {}", private.path().display())),
        "{t}"
    );
    assert!(t.contains("chmod o+x"), "{t}");
    assert!(!local.exists() && !o.exists(), "nothing may be written");
}
