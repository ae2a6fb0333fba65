//! `mailbench mail` usage errors and an unreachable server: no mail server needed.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mail_support.rs"]
mod support;
use support::*;

/// A remote target nothing listens on (port 1): its IMAP and submission URLs.
const NOWHERE: [&str; 4] = [
    "--imap",
    "imap://127.0.0.1:1",
    "--submission",
    "smtp://127.0.0.1:1",
];

#[test]
fn bad_flags_and_config_are_usage_errors() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    let cfg = out.path().join("c.toml");
    std::fs::write(&cfg, "[mail]\nuserz = 3\n").unwrap();
    let cfg = cfg.to_str().unwrap();
    // `mail run` with these flags (then `--output`), with or without a
    // password in the environment: exit 2, naming what is wrong.
    let cases: [(&[&str], bool, &str); 7] = [
        (&["--profile", "mmb9"], false, "mmb3"),
        (&["--config", cfg], false, "userz"),
        (&["--imap", "imap://127.0.0.1:1"], false, "--submission"),
        // No password anywhere: refused before anything is written.
        (&NOWHERE, false, "MAILBENCH_PASSWORD"),
        // Verifying against a CA and not verifying at all contradict each other.
        (
            &[
                "--imap",
                "imaps://h:993",
                "--submission",
                "smtp://h",
                "--tls-insecure",
                "--ca-file",
                "ca.pem",
            ],
            true,
            "--tls-insecure",
        ),
        // A server-metrics address that is no http(s) URL, a disk given as a path.
        (&["--server-metrics", "127.0.0.1:9100"], false, "http://"),
        (&["--server-disk", "/dev/sdb"], false, "device name"),
    ];
    for (args, password, says) in cases {
        let env: &[(&str, &str)] = if password {
            &[("MAILBENCH_PASSWORD", "x")]
        } else {
            &[]
        };
        let r = mailbench(&[&["mail", "run"], args, &["--output", o]].concat(), env);
        assert_exit_naming(&r, 2, says);
    }

    let r = mailbench(&["mail", "run", "--day-length", "soon", "--output", o], &[]);
    assert_eq!(r.status.code(), Some(2), "{}", text(&r));
    assert_no_run_folder(out.path());
}

#[test]
fn unreachable_target_exits_3_naming_the_address() {
    let port = free_port();
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
    assert_exit_naming(&r, 3, &format!("127.0.0.1:{port}"));
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
    let users = ["--users-file", f.to_str().unwrap(), "--users", "30"];
    let output = ["--output", o.to_str().unwrap()];
    let r = mailbench(
        &[&["mail", "run"], &NOWHERE[..], &users, &output].concat(),
        &[],
    );
    assert_exit_naming(&r, 2, "lists 20 users");
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

/// Out-of-range numbers are usage errors (exit 2) before anything is
/// written, each naming its flag; with a remote target and a password so
/// that nothing else refuses the run first.
#[test]
fn out_of_range_values_are_refused_before_anything_is_written() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path().join("results");
    let o = o.to_str().unwrap();
    for (flag, value) in [
        ("--max-response-time-ms", "-1"),
        ("--max-response-time-ms", "NaN"),
        ("--delivery-within", "0s"),
        ("--max-error-rate", "200"),
        ("--delivery-pct", "101%"),
        ("--concurrency", "0"),
        ("--poll-interval", "0s"),
        ("--day-length", "10000000000h"),
        ("--interval", "2h"),
    ] {
        for cmd in ["run", "setup"] {
            if cmd == "setup" && flag != "--concurrency" {
                continue;
            }
            let arg = format!("{flag}={value}");
            let args = [&["mail", cmd], &NOWHERE[..], &[&arg, "--output", o]].concat();
            let r = mailbench(&args, &[("MAILBENCH_PASSWORD", "x")]);
            assert_eq!(r.status.code(), Some(2), "{arg}: {}", text(&r));
            assert!(
                String::from_utf8_lossy(&r.stderr).contains(flag),
                "{arg}: {}",
                text(&r)
            );
            assert!(!std::path::Path::new(o).exists(), "{arg} wrote {o}");
        }
    }
}

/// The help shows the user-number placeholder as written, `{n}` (clap
/// reads `{n}` in help text as a line break).
#[test]
fn user_format_help_shows_the_placeholder() {
    for cmd in ["run", "setup"] {
        let r = mailbench(&["mail", cmd, "--help"], &[]);
        let out = String::from_utf8_lossy(&r.stdout).to_string();
        let line = out
            .lines()
            .skip_while(|l| !l.contains("--user-format"))
            .take(3)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(line.contains("user{n}@"), "{line}");
    }
}

/// A sweep's `[disclosure]` is checked before anything is written: an
/// unknown key, or a one-line value holding a line break, exits 2 naming it.
#[test]
fn a_bad_disclosure_section_stops_a_sweep_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let o = results.to_str().unwrap();
    let cases = [
        ("[disclosure]\nvendr = \"Contoso\"\n", "vendr"),
        ("[disclosure]\nvendor = \"Con\\ntoso\"\n", "vendor"),
    ];
    for (i, (toml, says)) in cases.into_iter().enumerate() {
        let cfg = dir.path().join(format!("sweep-{i}.toml"));
        std::fs::write(&cfg, toml).unwrap();
        let mut a = vec!["mail", "sweep", "--users", "1,2", "--config"];
        a.push(cfg.to_str().unwrap());
        a.extend_from_slice(&NOWHERE);
        a.extend_from_slice(&["--output", o]);
        let r = mailbench(&a, &[("MAILBENCH_PASSWORD", "x")]);
        assert_eq!(r.status.code(), Some(2), "{toml}: {}", text(&r));
        assert!(text(&r).contains(says), "{toml}: {}", text(&r));
        assert!(!results.exists(), "{toml} wrote");
    }
}

/// `mail sweep` refuses bad levels and a bad steady window with exit 2
/// before anything is written; `mail run` takes one count.
#[test]
fn bad_sweep_levels_are_refused_before_anything_is_written() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path().join("results");
    let o = o.to_str().unwrap();
    let cases: [(&[&str], &str); 9] = [
        (&["sweep", "--users", "100,50"], "must increase"),
        (
            &[
                "sweep",
                "--users",
                "5,10",
                "--start-at",
                "2026-12-01T09:00:00Z",
            ],
            "over MPI ranks",
        ),
        (&["sweep", "--users", "0,10"], "zero"),
        (&["sweep", "--users", "10..5"], "--users"),
        (&["sweep", "--users", "10,x"], "whole number"),
        (&["sweep"], "needs --users"),
        (
            &["sweep", "--users", "5,10", "--resolution", "2"],
            "--find-max",
        ),
        (&["run", "--users", "10,20"], "mail sweep"),
        (&["run", "--steady", "80%-20%"], "--steady"),
    ];
    for (args, says) in cases {
        let mut a = vec!["mail"];
        a.extend_from_slice(args);
        a.extend_from_slice(&NOWHERE);
        a.extend_from_slice(&["--output", o]);
        let r = mailbench(&a, &[("MAILBENCH_PASSWORD", "x")]);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {}", text(&r));
        assert!(text(&r).contains(says), "{args:?}: {}", text(&r));
        assert!(!out.path().join("results").exists(), "{args:?} wrote");
    }
}

/// A JMAP share where no JMAP endpoint exists (the local Dovecot, the sink,
/// a remote target without --jmap), or a mix that is not one, is refused with
/// exit 2 by `mail setup`, `mail run` and `mail sweep` before anything is
/// written.
#[test]
fn jmap_users_without_a_jmap_server_are_refused_before_anything_is_written() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path().join("results");
    let o = o.to_str().unwrap();
    let local: &[&str] = &["--target", "local"];
    let sink: &[&str] = &["--target", "sink"];
    for (target, protocol, says) in [
        (local, "--protocol=jmap", "Dovecot serves IMAP only"),
        (
            sink,
            "--protocol-mix=imap=50,jmap=50",
            "the sink answers IMAP and SMTP only",
        ),
        (&NOWHERE[..], "--protocol=jmap", "need --jmap URL"),
        (
            &NOWHERE[..],
            "--protocol-mix=imap=50,jmap=40",
            "add up to 90%",
        ),
    ] {
        for cmd in ["setup", "run", "sweep"] {
            let users = if cmd == "sweep" { "2,4" } else { "2" };
            let args = [
                &["mail", cmd],
                target,
                &[protocol, "--users", users, "--output", o],
            ]
            .concat();
            let r = mailbench(&args, &[("MAILBENCH_PASSWORD", "x")]);
            assert_eq!(r.status.code(), Some(2), "{args:?}: {}", text(&r));
            assert!(
                String::from_utf8_lossy(&r.stderr).contains(says),
                "{args:?}: {}",
                text(&r)
            );
            assert!(!std::path::Path::new(o).exists(), "{args:?} wrote {o}");
        }
    }
}
