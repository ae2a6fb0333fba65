//! TLS against the real local Dovecot, started by our own code with a throwaway
//! CA and a server certificate for 127.0.0.1 made with the `openssl` CLI:
//! implicit TLS (imaps://, submissions://) with --ca-file, the same without the
//! CA (exit 3, kind tls, the host named), --tls-insecure (works, and the results
//! say verification was off), and STARTTLS on IMAP, submission and ManageSieve.
//! Dovecot's own log must show every login of the test over TLS.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mail_support.rs"]
mod support;
use mailbench_base::rundir::TestLog;
use mailbench_mail::local::{LocalServer, LocalTls};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;

fn openssl_available() -> bool {
    if Command::new("openssl").arg("version").output().is_ok() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("CI must install openssl (scripts/packages/mail.txt)");
    }
    eprintln!("SKIPPED: the openssl command is missing (apt-get install openssl)");
    false
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a server certificate for IP 127.0.0.1 signed by it: (ca, cert, key).
fn make_pki(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend_from_slice(&ec);
    ca.extend_from_slice(&[
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=mailbench test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &ca);
    let mut csr = vec!["req"];
    csr.extend_from_slice(&ec);
    csr.extend_from_slice(&[
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(dir, &csr);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

/// `mail setup` of `users` users against `imap` and `submission`, extra flags.
fn setup(
    out: &Path,
    pw: &str,
    imap: &str,
    submission: &str,
    users: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "mail",
        "setup",
        "--imap",
        imap,
        "--submission",
        submission,
        "--users",
        users,
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--output", out.to_str().unwrap()]);
    mailbench(&args, &[("MAILBENCH_PASSWORD", pw)])
}

/// `mail run` against the local servers with the given URLs and extra flags.
fn run(out: &Path, pw: &str, urls: &[&str], extra: &[&str]) -> std::process::Output {
    let mut args = vec!["mail", "run"];
    args.extend_from_slice(urls);
    args.extend_from_slice(&[
        "--users",
        "6",
        "--day-length",
        "20s",
        "--ramp-up",
        "2s",
        "--drain",
        "20s",
        "--op-timeout",
        "10s",
        "--interval",
        "1s",
        "--skip-setup",
        // Not a performance test: a busy CI machine must not fail it on time.
        "--max-score-ms",
        "60000",
        "--output",
        out.to_str().unwrap(),
    ]);
    args.extend_from_slice(extra);
    mailbench(&args, &[("MAILBENCH_PASSWORD", pw)])
}

/// `mail setup` of 6 users over implicit TLS with `extra` flags: it must
/// pass and set up all six. Its result.
fn setup_six(t: &TlsTarget, out: &Path, extra: &[&str]) -> serde_json::Value {
    let r = setup(out, &t.pw, &t.imaps, &t.submissions, "6", extra);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let v = result(out, "mail-setup");
    assert_eq!(v["setup"]["users_ok"], 6, "{v}");
    v
}

fn completed_tasks(v: &serde_json::Value) -> u64 {
    v["tasks"]
        .as_object()
        .unwrap()
        .values()
        .map(|t| t["count"].as_u64().unwrap())
        .sum()
}

#[test]
fn tls_and_starttls_against_the_local_dovecot() {
    if !servers_available() || !openssl_available() {
        return;
    }
    let pki = tempfile::tempdir().unwrap();
    let (ca, cert, key) = make_pki(pki.path());
    let dir = tempfile::tempdir().unwrap();
    let srv = LocalServer::start_with(
        dir.path(),
        &TestLog::discard(),
        Some(&LocalTls { cert, key }),
    )
    .unwrap();
    let t = TlsTarget::of(&srv, &ca, dir.path());
    implicit_tls_with_the_ca(&t);
    refused_without_the_ca(&t);
    insecure_without_the_ca(&t);
    starttls_required(&t);
    tls_failing_mid_run(&t);
    every_login_over_tls(&t);
    drop(srv);
}

/// The local Dovecot with TLS as the steps reach it: its URLs, password, the test CA.
struct TlsTarget<'a> {
    ports: mailbench_mail::local::LocalPorts,
    pw: String,
    ca: String,
    imaps: String,
    submissions: String,
    smtps: String,
    imap: String,
    smtp: String,
    sieve: String,
    /// The local target's folder (Dovecot's log).
    dir: &'a Path,
}

impl<'a> TlsTarget<'a> {
    fn of(srv: &LocalServer, ca: &Path, dir: &'a Path) -> TlsTarget<'a> {
        let p = srv.ports;
        TlsTarget {
            ports: p,
            pw: srv.password.clone(),
            ca: ca.to_str().unwrap().to_string(),
            imaps: format!("imaps://127.0.0.1:{}", p.imaps.unwrap()),
            submissions: format!("submissions://127.0.0.1:{}", p.submissions.unwrap()),
            smtps: format!("smtps://127.0.0.1:{}", p.submissions.unwrap()),
            imap: format!("imap://127.0.0.1:{}", p.imap),
            smtp: format!("smtp://127.0.0.1:{}", p.submission),
            sieve: format!("sieve://127.0.0.1:{}", p.sieve),
            dir,
        }
    }
}

/// (1) Implicit TLS with the test CA: setup, then a run with ManageSieve upgraded by STARTTLS.
fn implicit_tls_with_the_ca(t: &TlsTarget) {
    let (pw, ca_s) = (t.pw.as_str(), t.ca.as_str());
    // (1) Implicit TLS with the test CA: setup, then a run with ManageSieve
    // upgraded by STARTTLS (auto: Dovecot offers it).
    let out = tempfile::tempdir().unwrap();
    let v = setup_six(t, out.path(), &["--ca-file", ca_s]);
    let tls = &v["target"]["tls"];
    assert!(
        tls["connections"]["imap"]
            .as_str()
            .unwrap()
            .starts_with("implicit TLS TLSv1."),
        "{tls}"
    );
    assert_eq!(tls["certificates_verified"], true, "{tls}");
    assert_eq!(v["config"]["ca_file"], ca_s);
    assert!(summary(out.path(), "mail-setup").contains("certificates verified"));

    let out = tempfile::tempdir().unwrap();
    let r = run(
        out.path(),
        pw,
        &[
            "--imap",
            &t.imaps,
            "--submission",
            &t.smtps,
            "--sieve",
            &t.sieve,
        ],
        &["--ca-file", ca_s],
    );
    let v = result(out.path(), "mail-run");
    assert_clean_run(&r, &v);
    assert!(completed_tasks(&v) > 50, "{}", v["tasks"]);
    assert!(v["mail_flow"]["delivered"].as_u64().unwrap() > 0);
    let c = &v["target"]["tls"]["connections"];
    assert!(
        c["imap"].as_str().unwrap().starts_with("implicit TLS"),
        "{c}"
    );
    assert!(
        c["submission"]
            .as_str()
            .unwrap()
            .starts_with("implicit TLS"),
        "{c}"
    );
    assert!(c["sieve"].as_str().unwrap().starts_with("STARTTLS"), "{c}");
    // Rules went over ManageSieve with STARTTLS.
    assert!(
        v["tasks"]["create_rule"]["count"].as_u64().unwrap() > 0,
        "{}",
        v["tasks"]["create_rule"]
    );
    let s = summary(out.path(), "mail-run");
    assert!(s.contains("Security    IMAP implicit TLS"), "{s}");
    assert!(!text(&r).contains(pw), "passwords never appear");
}

/// (2) Without the CA: refused at start, exit 3, naming the host; the same certificate under another name is refused for that name.
fn refused_without_the_ca(t: &TlsTarget) {
    let (pw, ca_s) = (t.pw.as_str(), t.ca.as_str());
    let (imaps, submissions) = (t.imaps.as_str(), t.submissions.as_str());
    let p = t.ports;
    // (2) Without the CA: refused at start, exit 3, naming the host; the same
    // certificate under another name is refused for that name.
    let out = tempfile::tempdir().unwrap();
    let r = setup(out.path(), pw, imaps, submissions, "1", &[]);
    assert_eq!(r.status.code(), Some(3), "{}", text(&r));
    let t = text(&r);
    assert!(t.contains("tls: certificate of 127.0.0.1:"), "{t}");
    assert!(t.contains("not trusted for host 127.0.0.1"), "{t}");
    assert!(t.contains("--ca-file"), "{t}");
    assert!(!t.contains(pw));
    let localhost = format!("imaps://localhost:{}", p.imaps.unwrap());
    let r = setup(
        out.path(),
        pw,
        &localhost,
        submissions,
        "1",
        &["--ca-file", ca_s],
    );
    assert_exit_naming(&r, 3, "does not name localhost");
}

/// (3) --tls-insecure: works without the CA, and says so.
fn insecure_without_the_ca(t: &TlsTarget) {
    // (3) --tls-insecure: works without the CA, and says so.
    let out = tempfile::tempdir().unwrap();
    let v = setup_six(t, out.path(), &["--tls-insecure"]);
    assert_eq!(v["config"]["tls_insecure"], true);
    assert_eq!(v["target"]["tls"]["certificates_verified"], false);
    let s = summary(out.path(), "mail-setup");
    assert!(
        s.contains("certificates NOT verified (--tls-insecure)"),
        "{s}"
    );
}

/// (4) STARTTLS required on IMAP and submission, with the CA.
fn starttls_required(t: &TlsTarget) {
    // (4) STARTTLS required on IMAP and submission, with the CA.
    let out = tempfile::tempdir().unwrap();
    let r = run(
        out.path(),
        &t.pw,
        &["--imap", &t.imap, "--submission", &t.smtp],
        &["--ca-file", &t.ca, "--starttls", "require"],
    );
    let v = result(out.path(), "mail-run");
    assert_clean_run(&r, &v);
    assert!(v["mail_flow"]["submitted"].as_u64().unwrap() > 0);
    let c = &v["target"]["tls"]["connections"];
    assert!(
        c["imap"].as_str().unwrap().starts_with("STARTTLS TLSv1."),
        "{c}"
    );
    assert!(
        c["submission"]
            .as_str()
            .unwrap()
            .starts_with("STARTTLS TLSv1."),
        "{c}"
    );
    assert_eq!(v["config"]["starttls"], "require");
}

/// (5) TLS failing mid-run is counted under the `tls` kind, and the run fails cleanly.
fn tls_failing_mid_run(t: &TlsTarget) {
    // (5) TLS failing mid-run (garbage injected into every third IMAP TLS
    // stream) is counted under the `tls` kind, and the run fails cleanly.
    let proxy = Proxy::start(t.ports.imaps.unwrap(), Fault::Garbage, 3, 1500);
    let via_proxy = format!("imaps://127.0.0.1:{}", proxy.port);
    let out = tempfile::tempdir().unwrap();
    let r = run(
        out.path(),
        &t.pw,
        &["--imap", &via_proxy, "--submission", &t.submissions],
        &["--ca-file", &t.ca],
    );
    assert!(!text(&r).contains("panicked"), "{}", text(&r));
    assert_eq!(r.status.code(), Some(1), "{}", text(&r));
    let v = result(out.path(), "mail-run");
    assert!(proxy.faults.load(std::sync::atomic::Ordering::Relaxed) > 0);
    assert!(
        v["errors"]["by_kind"]["tls"].as_u64().unwrap_or(0) > 0,
        "{}",
        v["errors"]
    );
    assert!(completed_tasks(&v) > 50, "{}", v["tasks"]);
    drop(proxy);
}

/// Dovecot saw every login of this test over TLS.
fn every_login_over_tls(t: &TlsTarget) {
    let log = std::fs::read_to_string(t.dir.join("dovecot/dovecot.log")).unwrap();
    // (Not the local target's own start-up check, plain text on 127.0.0.1.)
    let logins: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Login: user=") && !l.contains("user=<mailbench-check@"))
        .collect();
    assert!(logins.len() > 20, "{} logins:\n{log}", logins.len());
    for kind in ["imap-login", "submission-login", "managesieve-login"] {
        assert!(
            logins.iter().any(|l| l.contains(kind)),
            "no {kind} login:\n{log}"
        );
    }
    let plain: Vec<&&str> = logins.iter().filter(|l| !l.contains(", TLS")).collect();
    assert!(plain.is_empty(), "logins without TLS: {plain:?}");
}

/// TLS URLs and options at the command line, no server needed: the schemes are
/// accepted (an unreachable imaps:// server is exit 3 naming the address),
/// contradictory or unusable TLS options are usage errors (exit 2, nothing
/// written).
#[test]
fn tls_urls_and_options_at_the_command_line() {
    let port = free_port();
    let unreachable = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    let imaps = format!("imaps://127.0.0.1:{port}");
    let subs = format!("submissions://127.0.0.1:{port}");
    let pw = [("MAILBENCH_PASSWORD", "secret-password")];
    let r = mailbench(
        &[
            "mail",
            "run",
            "--imap",
            &imaps,
            "--submission",
            &subs,
            "--output",
            unreachable.path().to_str().unwrap(),
        ],
        &pw,
    );
    assert_exit_naming(&r, 3, &imaps);
    assert!(!text(&r).contains("secret-password"));

    let usage: &[(&[&str], &str)] = &[
        (&["--starttls", "maybe"], "maybe"),
        (&["--ca-file", "/nonexistent/ca.pem"], "/nonexistent/ca.pem"),
        (
            &["--ca-file", "/nonexistent/ca.pem", "--tls-insecure"],
            "--tls-insecure",
        ),
    ];
    for (extra, needle) in usage {
        let mut args = vec!["mail", "run", "--imap", &imaps, "--submission", &subs];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--output", o]);
        let r = mailbench(&args, &pw);
        assert_eq!(r.status.code(), Some(2), "{extra:?}: {}", text(&r));
        assert!(text(&r).contains(needle), "{extra:?}: {}", text(&r));
    }
    // TLS options mean nothing for the plain-text local target.
    let r = mailbench(&["mail", "run", "--tls-insecure", "--output", o], &[]);
    assert_exit_naming(&r, 2, "remote");
    let r = mailbench(
        &[
            "mail",
            "run",
            "--imap",
            "sieve://h",
            "--submission",
            &subs,
            "--output",
            o,
        ],
        &pw,
    );
    assert_exit_naming(&r, 2, "imaps");
    assert_no_run_folder(out.path());
}
