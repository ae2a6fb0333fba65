//! Starting, watching and stopping the local target's servers.

use super::config::write_configs;
use super::processes::{
    bound_to_us, postfix_cmd, postfix_guard, postfix_master, process_guard, stop_child, stop_stale,
};
use super::{
    LOCAL_DOMAIN, LocalOptions, LocalPorts, LocalServer, LocalTls, check_prerequisites, chown,
    local_password, prepare_dir, queue_len,
};
use mailbench_base::rundir::TestLog;
use mailbench_base::{Error, Result};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A server log line as a result quotes it: trimmed, redacted (before it
/// is cut: a secret across the cut is still found), at most `MAX_LOG_LINE`
/// characters (`…` marks a cut).
const MAX_LOG_LINE: usize = 300;

fn log_line(l: &str) -> String {
    let l = mailbench_base::secrets::redact(l.trim());
    match l.char_indices().nth(MAX_LOG_LINE) {
        Some((at, _)) => format!("{}…", &l[..at]),
        None => l.into_owned(),
    }
}

impl LocalServer {
    /// Mail store folder (Maildirs), for disk counters.
    pub fn mail_dir(dir: &Path) -> PathBuf {
        dir.join("dovecot").join("mail")
    }

    /// The Postfix virtual alias table (distribution lists), `texthash` format.
    pub fn aliases_path(dir: &Path) -> PathBuf {
        dir.join("postfix").join("etc").join("virtual")
    }

    /// Starts Dovecot and Postfix in `dir` (created if needed) and waits until
    /// every listener answers. The alias table must already be written.
    pub fn start(dir: &Path, log: &TestLog) -> Result<LocalServer> {
        Self::start_with(dir, log, None)
    }

    /// The mail store of the running server (Dovecot's Maildirs or Cyrus's
    /// partition), for disk counters.
    pub fn store_dir(&self) -> PathBuf {
        match self.server {
            "cyrus" => self.dir.join("cyrus").join("spool"),
            _ => Self::mail_dir(&self.dir),
        }
    }

    /// As `start`, with the limits sized for `sessions` IMAP sessions at
    /// once, and Cyrus instead of Dovecot with `cyrus`.
    pub fn start_sized(
        dir: &Path,
        log: &TestLog,
        sessions: usize,
        cyrus: Option<super::CyrusOptions>,
    ) -> Result<LocalServer> {
        let o = LocalOptions {
            sizing: super::Sizing::for_sessions(sessions),
            cyrus,
            ..Default::default()
        };
        log.line(format!(
            "local target: sized for {sessions} IMAP sessions (imap process_limit {}, default_client_limit {})",
            o.sizing.imap_processes, o.sizing.client_limit
        ));
        Self::start_opts(dir, log, &o)
    }

    /// As `start`, with TLS on Dovecot's listeners when `tls` is given.
    pub fn start_with(dir: &Path, log: &TestLog, tls: Option<&LocalTls>) -> Result<LocalServer> {
        let o = LocalOptions {
            tls: tls.cloned(),
            ..Default::default()
        };
        Self::start_opts(dir, log, &o)
    }

    /// As `start`, with `o`'s TLS and Dovecot settings.
    pub fn start_opts(dir: &Path, log: &TestLog, o: &LocalOptions) -> Result<LocalServer> {
        check_prerequisites(if o.cyrus.is_some() {
            "cyrus"
        } else {
            "dovecot"
        })?;
        let dir = prepare_dir(dir)?;
        let password = local_password(&dir)?;
        mailbench_base::secrets::register(&password);
        let ports = LocalPorts::free(o.tls.is_some(), o.cyrus.is_some())?;
        let configs = write_configs(&dir, &ports, &password, o)?;
        let mut server = LocalServer {
            dir,
            ports,
            password,
            server: if o.cyrus.is_some() {
                "cyrus"
            } else {
                "dovecot"
            },
            dovecot: None,
            cyrus: None,
            cyrus_guard: None,
            postfix: None,
            postfix_guard: None,
            log: log.clone(),
        };
        // A stale master from an earlier crashed run holds the pid files; stop it.
        server.stop_stale();
        if let Some(dconf) = &configs.dovecot_conf {
            server.start_dovecot(dconf)?;
        }
        if let (Some(c), Some(cy)) = (&configs.cyrus, &o.cyrus) {
            server.start_cyrus(&cy.root, c)?;
        }
        server.start_postfix(&configs.postfix_etc)?;
        server.wait_listeners()?;
        log.line("local target: all listeners answer");
        server.check_session()?;
        log.line("local target: a user logged in and opened its Inbox");
        if let Ok(n) = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances") {
            log.line(format!(
                "local target: fs.inotify.max_user_instances = {}; IMAP sessions beyond it look for new mail every second instead of being woken",
                n.trim()
            ));
        }
        Ok(server)
    }

    /// Starts Dovecot's master with the configuration `dconf`, out of the terminal's
    /// process group and bound to us (`bound_to_us`).
    fn start_dovecot(&mut self, dconf: &Path) -> Result<()> {
        let ports = self.ports;
        self.log.line(format!(
            "local target: starting dovecot (imap {}, submission {}, sieve {}, lmtp {})",
            ports.imap, ports.submission, ports.sieve, ports.lmtp
        ));
        let dv = self.dir.join("dovecot");
        let dlog = mailbench_base::rundir::create_replacing(&dv.join("dovecot.stderr"), 0o644)
            .map_err(|e| Error::io("cannot create", &dv.join("dovecot.stderr"), e))?;
        let child = bound_to_us("/usr/sbin/dovecot")
            .arg("-F")
            .arg("-c")
            .arg(dconf)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(dlog)
            .spawn()
            .map_err(|e| Error::runtime(format!("cannot start dovecot: {e}")))?;
        self.dovecot = Some(child);
        Ok(())
    }

    /// Starts Cyrus's master (`root`'s) with the configurations `c`, in the
    /// foreground, out of the terminal's process group, with its guard: the
    /// master switches to its user at once (a parent-death signal would be
    /// cleared), so the guard stops it when mailbench ends, if that PID is
    /// still this folder's master.
    fn start_cyrus(&mut self, root: &Path, c: &super::cyrus::CyrusConfigs) -> Result<()> {
        let ports = self.ports;
        self.log.line(format!(
            "local target: starting cyrus from {} (imap {}, lmtp {}, sieve {}, http {})",
            root.display(),
            ports.imap,
            ports.lmtp,
            ports.sieve,
            ports.http.unwrap_or(0)
        ));
        let cy = self.dir.join("cyrus");
        let err = mailbench_base::rundir::create_replacing(&cy.join("master.stderr"), 0o644)
            .map_err(|e| Error::io("cannot create", &cy.join("master.stderr"), e))?;
        let mut cmd = Command::new(super::cyrus::program(root, "master"));
        cmd.arg("-C")
            .arg(&c.imapd_conf)
            .arg("-M")
            .arg(&c.cyrus_conf)
            .arg("-p")
            .arg(&c.pid_file)
            // The listen queue: every user connects during the ramp-up.
            .args(["-l", "1024"])
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err);
        if let Some(lib) = super::cyrus::library_path(root) {
            cmd.env("LD_LIBRARY_PATH", lib);
        }
        let child = cmd
            .spawn()
            .map_err(|e| Error::runtime(format!("cannot start cyrus master: {e}")))?;
        self.cyrus_guard = process_guard(child.id(), &c.imapd_conf).ok();
        self.cyrus = Some(child);
        Ok(())
    }

    /// Checks the Postfix instance in `etc` and starts its master with its guard.
    fn start_postfix(&mut self, etc: &Path) -> Result<()> {
        let pf = self.dir.join("postfix");
        postfix_cmd(etc, &["check"])?;
        chown(&pf.join("data"), "postfix")?;
        self.log.line(format!(
            "local target: starting postfix (smtp {})",
            self.ports.smtp
        ));
        let plog = mailbench_base::rundir::create_replacing(&pf.join("postfix.stderr"), 0o644)
            .map_err(|e| Error::io("cannot create", &pf.join("postfix.stderr"), e))?;
        // Postfix's master itself (what `postfix start-fg` runs after the
        // checks above), so that it is our child (`start-fg` puts a shell in
        // between). It makes its own session; it drops a parent-death
        // signal when it changes its effective user, hence the guard below.
        let child = Command::new(postfix_master(etc))
            .arg("-c")
            .arg(etc)
            .arg("-s")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(plog)
            .spawn()
            .map_err(|e| Error::runtime(format!("cannot start postfix: {e}")))?;
        self.postfix_guard = postfix_guard(child.id(), &pf.join("queue")).ok();
        self.postfix = Some(child);
        Ok(())
    }

    /// Waits (30 s at most in all) until every listener answers.
    fn wait_listeners(&mut self) -> Result<()> {
        let ports = self.ports;
        let deadline = Instant::now() + Duration::from_secs(30);
        let imap_server = self.server;
        let submission = if self.server == "cyrus" {
            "postfix"
        } else {
            "dovecot"
        };
        for (name, port) in [
            (format!("{imap_server} IMAP"), ports.imap),
            (format!("{submission} submission"), ports.submission),
            (format!("{imap_server} ManageSieve"), ports.sieve),
            (format!("{imap_server} LMTP"), ports.lmtp),
            ("postfix SMTP".to_string(), ports.smtp),
        ] {
            self.wait_ready(&name, port, true, deadline)?;
        }
        if let Some(port) = ports.http {
            self.wait_ready("cyrus HTTP (JMAP)", port, false, deadline)?;
        }
        for (name, port) in [
            ("dovecot imaps", ports.imaps),
            ("dovecot submissions", ports.submissions),
        ] {
            if let Some(port) = port {
                self.wait_ready(name, port, false, deadline)?;
            }
        }
        Ok(())
    }

    /// Waits until `name` on `port` answers: its greeting when `greets`, a
    /// TCP accept otherwise (TLS listeners say nothing before the handshake).
    fn wait_ready(&mut self, name: &str, port: u16, greets: bool, deadline: Instant) -> Result<()> {
        use std::io::Read;
        loop {
            if let Some(msg) = self.exited() {
                return Err(Error::runtime(format!(
                    "local target: {msg} before {name} on 127.0.0.1:{port} answered; see {}",
                    self.dir.display()
                )));
            }
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                if !greets {
                    return Ok(());
                }
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 64];
                if matches!(s.read(&mut buf), Ok(n) if n > 0) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(Error::runtime(format!(
                    "local target: {name} on 127.0.0.1:{port} did not answer within 30 s; logs in {}",
                    self.dir.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Logs a user in over IMAP and opens its Inbox: the login service can
    /// answer while the processes behind it cannot start (a missing or
    /// broken `imap` binary), which would otherwise only show as timeouts
    /// during the run. On failure the error quotes Dovecot's own log.
    fn check_session(&mut self) -> Result<()> {
        let user = if self.server == "cyrus" {
            super::CHECK_LOGIN.to_string()
        } else {
            format!("{}@{LOCAL_DOMAIN}", super::CHECK_LOGIN)
        };
        match imap_session_check(self.ports.imap, &user, &self.password) {
            Ok(()) => Ok(()),
            Err(what) if self.server == "cyrus" => {
                let errors = self.log_errors(5);
                Err(Error::runtime(format!(
                    "local target: Cyrus accepts IMAP connections on 127.0.0.1:{} but {what} \
                     (Cyrus logs to syslog only; its start-up errors are in {}{})",
                    self.ports.imap,
                    self.dir.join("cyrus/master.stderr").display(),
                    if errors.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", errors.join(" | "))
                    }
                )))
            }
            Err(what) => {
                let errors = self.settled_log_errors();
                Err(Error::runtime(format!(
                    "local target: Dovecot accepts IMAP connections on 127.0.0.1:{} but {what}{}",
                    self.ports.imap,
                    if errors.is_empty() {
                        format!("; see {}", self.dir.join("dovecot/dovecot.log").display())
                    } else {
                        format!("; its log says: {}", errors.join(" | "))
                    }
                )))
            }
        }
    }

    /// [`log_errors`](Self::log_errors) once Dovecot's log has the cause:
    /// its log process writes a child's error (a failed `execv`, say) a
    /// moment after the master's own "command startup failed, throttling"
    /// line, so this reads again for up to a second while the master's
    /// notice is all there is (only on a failed start).
    fn settled_log_errors(&self) -> Vec<String> {
        let until = Instant::now() + Duration::from_secs(1);
        loop {
            let errors = self.log_errors(5);
            if errors.iter().any(|l| !l.contains("throttling")) || Instant::now() >= until {
                return errors;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The servers' own error lines (Dovecot's `Error:`/`Fatal:`/`Panic:`,
    /// Cyrus's error lines on its master's stderr (`cyrus::is_error_line`;
    /// Cyrus logs the rest to syslog only), Postfix's `fatal:`/`panic:`/
    /// `error:` and its deferred or bounced deliveries), at most `max`, the
    /// first ones, each cut to `MAX_LOG_LINE` characters and redacted.
    pub fn log_errors(&self, max: usize) -> Vec<String> {
        let dovecot = |l: &str| {
            [" Error: ", " Fatal: ", " Panic: "]
                .iter()
                .any(|m| l.contains(m))
        };
        let postfix = |l: &str| {
            [
                " fatal: ",
                " panic: ",
                " error: ",
                " status=deferred ",
                " status=bounced ",
            ]
            .iter()
            .any(|m| l.contains(m))
        };
        type IsError<'a> = &'a dyn Fn(&str) -> bool;
        let files: [(&str, IsError); 3] = [
            ("dovecot/dovecot.log", &dovecot),
            ("cyrus/master.stderr", &super::cyrus::is_error_line),
            ("postfix/maillog", &postfix),
        ];
        let mut out = Vec::new();
        for (file, is_error) in files {
            let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
            for l in text.lines() {
                if out.len() >= max {
                    return out;
                }
                if is_error(l) {
                    out.push(log_line(l));
                }
            }
        }
        out
    }

    /// A description of a server process that has exited, if one has.
    fn exited(&mut self) -> Option<String> {
        if let Some(c) = self.dovecot.as_mut()
            && let Ok(Some(st)) = c.try_wait()
        {
            let err = std::fs::read_to_string(self.dir.join("dovecot/dovecot.stderr"))
                .unwrap_or_default();
            return Some(format!("dovecot exited ({st}): {}", err.trim()));
        }
        if let Some(c) = self.cyrus.as_mut()
            && let Ok(Some(st)) = c.try_wait()
        {
            let err =
                std::fs::read_to_string(self.dir.join("cyrus/master.stderr")).unwrap_or_default();
            return Some(format!("cyrus master exited ({st}): {}", err.trim()));
        }
        if let Some(c) = self.postfix.as_mut()
            && let Ok(Some(st)) = c.try_wait()
        {
            let err = std::fs::read_to_string(self.dir.join("postfix/postfix.stderr"))
                .unwrap_or_default();
            let mlog =
                std::fs::read_to_string(self.dir.join("postfix/maillog")).unwrap_or_default();
            let tail: Vec<&str> = mlog.lines().rev().take(3).collect();
            return Some(format!(
                "postfix exited ({st}): {} {}",
                err.trim(),
                tail.join(" | ")
            ));
        }
        None
    }

    /// Whether both servers are still running.
    pub fn alive(&mut self) -> bool {
        self.exited().is_none()
    }

    fn stop_stale(&self) {
        stop_stale(&self.dir);
    }

    /// Postfix queue length (`postqueue -j`), or None when it cannot be read.
    pub fn queue_len(&self) -> Option<u64> {
        queue_len(&self.dir.join("postfix").join("etc"))
    }

    /// Recipients Postfix handed to Dovecot so far (`status=sent` in its log).
    pub fn deliveries_logged(&self) -> Option<u64> {
        let t = std::fs::read_to_string(self.dir.join("postfix/maillog")).ok()?;
        Some(t.lines().filter(|l| l.contains(" status=sent ")).count() as u64)
    }

    /// Stops both servers (our children, through their handles) and waits
    /// (bounded) for them to exit. Postfix's guard goes after Postfix: should
    /// mailbench die in between (a third Ctrl-C), the guard still stops a
    /// master that is running, and never signals one that has gone (it checks
    /// the PID's folder).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.postfix.take() {
            stop_child(&mut c, "postfix");
            self.log.line("local target: postfix stopped");
        }
        if let Some(mut g) = self.postfix_guard.take() {
            let _ = g.kill();
            let _ = g.wait();
        }
        if let Some(mut c) = self.dovecot.take() {
            stop_child(&mut c, "dovecot");
            self.log.line("local target: dovecot stopped");
        }
        if let Some(mut c) = self.cyrus.take() {
            stop_child(&mut c, "cyrus");
            let conf = self.dir.join("cyrus").join("imapd.conf");
            let left = super::processes::stop_leftovers(&conf);
            self.log.line(format!(
                "local target: cyrus stopped{}",
                if left > 0 {
                    format!(" ({left} of its processes outlived the master and were stopped)")
                } else {
                    String::new()
                }
            ));
        }
        if let Some(mut g) = self.cyrus_guard.take() {
            let _ = g.kill();
            let _ = g.wait();
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A plain IMAP session on 127.0.0.1:`port`: greeting, LOGIN, SELECT INBOX,
/// LOGOUT, each answered within 10 s. Err says what failed.
fn imap_session_check(port: u16, user: &str, password: &str) -> std::result::Result<(), String> {
    use std::io::{BufRead, BufReader, Write};
    let s = std::net::TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| format!("a new connection failed: {e}"))?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut w = s
        .try_clone()
        .map_err(|e| format!("a connection could not be used: {e}"))?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    let mut answer = |r: &mut BufReader<std::net::TcpStream>, tag: &str| {
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) => return Err("closed the connection".to_string()),
                Err(e) => return Err(format!("did not answer ({e})")),
                Ok(_) => {}
            }
            if let Some(rest) = line.strip_prefix(tag) {
                let rest = rest.trim();
                return if rest.starts_with("OK") {
                    Ok(())
                } else {
                    Err(format!("answered `{rest}`"))
                };
            }
        }
    };
    answer(&mut r, "* ").map_err(|e| format!("its greeting failed: {e}"))?;
    let quoted = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
    for (tag, cmd, what) in [
        (
            "c1",
            format!("LOGIN {} {}", quoted(user), quoted(password)),
            "a test login",
        ),
        (
            "c2",
            "SELECT INBOX".to_string(),
            "opening a test user's Inbox",
        ),
        ("c3", "LOGOUT".to_string(), "logging out"),
    ] {
        w.write_all(format!("{tag} {cmd}\r\n").as_bytes())
            .map_err(|e| format!("{what} failed: {e}"))?;
        answer(&mut r, &format!("{tag} ")).map_err(|e| format!("{what} failed: it {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_log_line_is_redacted_then_cut() {
        mailbench_base::secrets::register("log-line-secret-9f2e");
        let l = log_line("  auth failed for u1 (password log-line-secret-9f2e)  ");
        assert!(!l.contains("log-line-secret"), "{l}");
        assert!(l.starts_with("auth failed"), "{l}");
        let long = format!("error: {}", "é".repeat(2 * MAX_LOG_LINE));
        let cut = log_line(&long);
        assert_eq!(cut.chars().count(), MAX_LOG_LINE + 1, "{cut}");
        assert!(cut.ends_with('…'));
    }
}
