//! Starts the local Dovecot+Postfix target and drives one message through
//! submission -> Postfix -> LMTP -> IMAP, plus a ManageSieve script.
use mailbench_base::rundir::TestLog;
use mailbench_mail::{imap::ImapConn, local, sieve::SieveConn, smtp::SmtpConn};
use std::time::Duration;

fn servers_available() -> bool {
    let missing = local::missing_packages();
    if missing.is_empty() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("CI must install {missing:?} (scripts/packages/mail.txt)");
    }
    eprintln!("SKIPPED: Dovecot/Postfix packages missing: {missing:?}");
    false
}

#[test]
fn local_target_delivers_a_message() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = TestLog::discard();
    log.set_echo(true);
    let mut srv = local::LocalServer::start(dir.path(), &log).unwrap();
    let p = srv.ports;
    let pw = srv.password.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let t = Duration::from_secs(10);
        let mut s = SmtpConn::connect("127.0.0.1", p.submission, t).await.unwrap();
        s.hello_auth("user1@example.test", &pw).await.unwrap();
        let msg = b"From: user1@example.test\r\nTo: user2@example.test\r\nSubject: hi\r\nX-Mailbench-Track: t1\r\n\r\nbody\r\n";
        s.send("user1@example.test", &["user2@example.test".to_string()], msg).await.unwrap();
        s.quit().await;

        let mut c = ImapConn::connect("127.0.0.1", p.imap, t).await.unwrap();
        assert!(c.login("user2@example.test", "wrong").await.is_err());
        c.login("user2@example.test", &pw).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            c.select("INBOX", true).await.unwrap();
            if c.exists > 0 { break; }
            assert!(std::time::Instant::now() < deadline, "message not delivered");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let r = c.cmd("FETCH", "UID FETCH 1:* (UID BODY.PEEK[HEADER.FIELDS (X-Mailbench-Track)])").await.unwrap();
        assert!(r.untagged.iter().any(|u| mailbench_mail::imap::header_value(u, "X-Mailbench-Track").as_deref() == Some("t1")));
        assert!(c.has_cap("MOVE"), "{:?}", c.caps);
        assert!(c.has_cap("SORT"), "{:?}", c.caps);
        c.logout().await;

        let mut sv = SieveConn::connect("127.0.0.1", p.sieve, t).await.unwrap();
        sv.auth("user2@example.test", &pw).await.unwrap();
        sv.put_script("mailbench", &mailbench_mail::sieve::script(&["r1".into()])).await.unwrap();
        sv.set_active("mailbench").await.unwrap();
        sv.logout().await;
    });
    assert!(srv.queue_len().is_some());
    srv.stop();
}

/// Dovecot answers on its IMAP port while the process behind the login cannot
/// start: the local target fails at start-up quoting Dovecot's own log,
/// instead of a run of timeouts.
#[test]
fn a_server_that_cannot_start_imap_processes_says_why() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Executable for Dovecot's start-up check, but execv() fails at login.
    let broken = dir.path().join("broken-imap");
    std::fs::write(&broken, "#!/nonexistent/mailbench-interpreter\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let o = local::LocalOptions {
        dovecot_extra: format!("service imap {{\n  executable = {}\n}}", broken.display()),
        ..Default::default()
    };
    let e = local::LocalServer::start_opts(&dir.path().join("local"), &TestLog::discard(), &o)
        .unwrap_err();
    assert_eq!(e.exit_status(), mailbench_base::ExitStatus::Runtime, "{e}");
    let m = e.to_string();
    eprintln!("{m}");
    assert!(m.contains("its log says"), "{m}");
    assert!(m.contains("execv(") && m.contains("broken-imap"), "{m}");
}
