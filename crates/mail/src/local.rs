//! `--target local`: a throwaway Dovecot (IMAP, LMTP, submission, ManageSieve) and
//! Postfix (SMTP relay, virtual alias expansion, LMTP delivery to Dovecot) started
//! from Debian's packages with configs generated in a state folder, on 127.0.0.1
//! ports chosen free at start, with the limits that cap concurrency raised
//! (ecosystem.md §5). Both masters are our own children, stopped through their
//! handles when the `LocalServer` is dropped, so errors and Ctrl-C tear them
//! down too; they run out of the terminal's process group (Ctrl-C reaches
//! mailbench only, which stops them in order) with a parent-death SIGTERM
//! (`setpriv --pdeathsig`), so a killed mailbench leaves neither running.
//! Servers or temporary folders a killed run left behind are cleaned up at
//! the next start (`stop_stale`, `remove_stale_temp_dirs`), after checking
//! they belong to the folder. Plain text on loopback by default; the TLS
//! tests start it with a certificate (`LocalTls`).

use mailbench_base::rundir::TestLog;
use mailbench_base::{Error, Result};
use std::fmt::Write as _;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The mail domain of the local target.
pub const LOCAL_DOMAIN: &str = "example.test";

/// Files that must exist for the local target, with the Debian package that ships each.
const REQUIRED: &[(&str, &str)] = &[
    ("/usr/sbin/dovecot", "dovecot-core"),
    ("/usr/lib/dovecot/imap", "dovecot-imapd"),
    ("/usr/lib/dovecot/lmtp", "dovecot-lmtpd"),
    ("/usr/lib/dovecot/submission", "dovecot-submissiond"),
    ("/usr/lib/dovecot/managesieve", "dovecot-managesieved"),
    (
        "/usr/lib/dovecot/modules/lib90_sieve_plugin.so",
        "dovecot-sieve",
    ),
    ("/usr/sbin/postfix", "postfix"),
    ("/usr/sbin/postqueue", "postfix"),
];

/// Debian packages missing for `--target local` (empty when all are installed).
pub fn missing_packages() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (file, pkg) in REQUIRED {
        if !Path::new(file).exists() && !out.contains(pkg) {
            out.push(pkg);
        }
    }
    out
}

/// Checks that the local target can run here: packages installed, running as root.
pub fn check_prerequisites() -> Result<()> {
    let missing = missing_packages();
    if !missing.is_empty() {
        return Err(Error::usage(format!(
            "--target local needs Debian packages that are not installed: {m}. Install them with: \
             echo \"postfix postfix/main_mailer_type select No configuration\" | debconf-set-selections; \
             apt-get install --no-install-recommends {m} (or point --imap/--submission at a running server)",
            m = missing.join(" ")
        )));
    }
    if !is_root() {
        return Err(Error::usage(
            "--target local must run as root (Dovecot and Postfix switch to their own users); \
             run as root or point --imap/--submission at a running server",
        ));
    }
    Ok(())
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().nth(1).map(|s| s == "0"))
        })
        .unwrap_or(false)
}

/// The ports of a running local target (all on 127.0.0.1).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct LocalPorts {
    pub imap: u16,
    pub submission: u16,
    pub sieve: u16,
    pub lmtp: u16,
    pub smtp: u16,
    /// Implicit-TLS IMAP and submission (only with `LocalTls`).
    pub imaps: Option<u16>,
    pub submissions: Option<u16>,
}

/// TLS for the local Dovecot (the TLS tests): a PEM certificate (chain) and its
/// key. With it Dovecot also listens for imaps and submissions, and offers
/// STARTTLS on IMAP, submission and ManageSieve (plain text stays allowed).
#[derive(Debug, Clone)]
pub struct LocalTls {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// How to start the local servers besides the defaults (the TLS and
/// compatibility tests): TLS on Dovecot's listeners, and Dovecot settings
/// appended to its generated configuration (later settings win: e.g. another
/// `mail_location`, a `namespace inbox { prefix = INBOX. ... }`, or an
/// `imap_capability` list).
#[derive(Debug, Clone, Default)]
pub struct LocalOptions {
    pub tls: Option<LocalTls>,
    pub dovecot_extra: String,
}

/// A running Dovecot + Postfix pair.
#[derive(Debug)]
pub struct LocalServer {
    pub dir: PathBuf,
    pub ports: LocalPorts,
    pub password: String,
    dovecot: Option<Child>,
    postfix: Option<Child>,
    /// Stops Postfix's master if mailbench dies (`postfix_guard`).
    postfix_guard: Option<Child>,
    log: TestLog,
}

/// Picks `n` distinct free ports on 127.0.0.1 (bound together, then released).
pub fn free_ports(n: usize) -> Result<Vec<u16>> {
    let mut held = Vec::new();
    let mut ports = Vec::new();
    for _ in 0..n {
        let l = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| Error::runtime(format!("cannot find a free port on 127.0.0.1: {e}")))?;
        let p = l
            .local_addr()
            .map_err(|e| Error::runtime(format!("cannot find a free port: {e}")))?
            .port();
        ports.push(p);
        held.push(l);
    }
    Ok(ports)
}

/// Reads or creates the local target's password (`DIR/password`, mode 0600).
pub fn local_password(dir: &Path) -> Result<String> {
    let path = dir.join("password");
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim().to_string();
        if !t.is_empty() {
            return Ok(t);
        }
    }
    let mut raw = [0u8; 24];
    {
        use std::io::Read;
        let mut f = std::fs::File::open("/dev/urandom")
            .map_err(|e| Error::runtime(format!("cannot read /dev/urandom: {e}")))?;
        f.read_exact(&mut raw)
            .map_err(|e| Error::runtime(format!("cannot read /dev/urandom: {e}")))?;
    }
    let pw: String = raw
        .iter()
        .map(|b| {
            let c = b % 62;
            (match c {
                0..=9 => b'0' + c,
                10..=35 => b'a' + c - 10,
                _ => b'A' + c - 36,
            }) as char
        })
        .collect();
    write_private(&path, pw.as_bytes())?;
    Ok(pw)
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io("cannot write", path, e))?;
    f.write_all(bytes)
        .map_err(|e| Error::io("cannot write", path, e))
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io("cannot write", path, e))
}

fn mkdir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|e| Error::io("cannot create", path, e))
}

fn chown(path: &Path, owner: &str) -> Result<()> {
    let st = Command::new("chown")
        .arg(owner)
        .arg(path)
        .status()
        .map_err(|e| Error::runtime(format!("cannot run chown: {e}")))?;
    if !st.success() {
        return Err(Error::runtime(format!(
            "chown {owner} {} failed",
            path.display()
        )));
    }
    Ok(())
}

/// `postfix` commands fail silently without syslog; run them with their output
/// captured so failures can be reported.
fn postfix_cmd(etc: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("/usr/sbin/postfix")
        .arg("-c")
        .arg(etc)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::runtime(format!("cannot run postfix: {e}")))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(Error::runtime(format!(
            "postfix -c {} {} failed: {}",
            etc.display(),
            args.join(" "),
            text.trim()
        )));
    }
    Ok(text)
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

    /// As `start`, with TLS on Dovecot's listeners when `tls` is given.
    pub fn start_with(dir: &Path, log: &TestLog, tls: Option<&LocalTls>) -> Result<LocalServer> {
        let o = LocalOptions {
            tls: tls.cloned(),
            ..Default::default()
        };
        Self::start_opts(dir, log, &o)
    }

    /// As `start`, with `o`'s TLS and Dovecot settings.
    #[allow(clippy::too_many_lines)] // longer than 100 lines: split when next changed
    pub fn start_opts(dir: &Path, log: &TestLog, o: &LocalOptions) -> Result<LocalServer> {
        check_prerequisites()?;
        let tls = o.tls.as_ref();
        // Absolute: the servers' configs name their folders, and Postfix
        // refuses a relative `-c` folder (a relative --output or --local-dir).
        let dir = std::path::absolute(dir)
            .map_err(|e| Error::io("cannot resolve the local target folder", dir, e))?;
        check_dir_reachable(&dir)?;
        make_reachable_dir(&dir)?;
        {
            // The mail processes run as nobody and must reach their homes below.
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        }
        let password = local_password(&dir)?;
        crate::secrets::register(&password);
        let p = free_ports(7)?;
        let ports = LocalPorts {
            imap: p[0],
            submission: p[1],
            sieve: p[2],
            lmtp: p[3],
            smtp: p[4],
            imaps: tls.map(|_| p[5]),
            submissions: tls.map(|_| p[6]),
        };
        let dv = dir.join("dovecot");
        for sub in ["run", "state", "mail"] {
            mkdir(&dv.join(sub))?;
        }
        chown(&dv.join("mail"), "65534:65534")?;
        let dconf = dv.join("dovecot.conf");
        let mut conf = dovecot_conf(&dir, &ports, &password, tls);
        if !o.dovecot_extra.is_empty() {
            conf.push_str("# added for this run\n");
            conf.push_str(&o.dovecot_extra);
            conf.push('\n');
        }
        write_private(&dconf, conf.as_bytes())?;
        let pf = dir.join("postfix");
        for sub in ["etc", "queue", "data"] {
            mkdir(&pf.join(sub))?;
        }
        let etc = pf.join("etc");
        write_file(&etc.join("main.cf"), &postfix_main_cf(&dir, &ports))?;
        write_file(&etc.join("master.cf"), &postfix_master_cf(&ports))?;
        let aliases = Self::aliases_path(&dir);
        if !aliases.exists() {
            write_file(&aliases, "")?;
        }

        let mut server = LocalServer {
            dir: dir.clone(),
            ports,
            password,
            dovecot: None,
            postfix: None,
            postfix_guard: None,
            log: log.clone(),
        };
        // A stale master from an earlier crashed run holds the pid files; stop it.
        server.stop_stale();

        log.line(format!(
            "local target: starting dovecot (imap {}, submission {}, sieve {}, lmtp {})",
            ports.imap, ports.submission, ports.sieve, ports.lmtp
        ));
        let dlog = std::fs::File::create(dv.join("dovecot.stderr"))
            .map_err(|e| Error::io("cannot create", &dv.join("dovecot.stderr"), e))?;
        let child = bound_to_us("/usr/sbin/dovecot")
            .arg("-F")
            .arg("-c")
            .arg(&dconf)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(dlog)
            .spawn()
            .map_err(|e| Error::runtime(format!("cannot start dovecot: {e}")))?;
        server.dovecot = Some(child);

        postfix_cmd(&etc, &["check"])?;
        chown(&pf.join("data"), "postfix")?;
        log.line(format!(
            "local target: starting postfix (smtp {})",
            ports.smtp
        ));
        let plog = std::fs::File::create(pf.join("postfix.stderr"))
            .map_err(|e| Error::io("cannot create", &pf.join("postfix.stderr"), e))?;
        // Postfix's master itself (what `postfix start-fg` runs after the
        // checks above), so that it is our child (`start-fg` puts a shell in
        // between). It makes its own session; it drops a parent-death
        // signal when it changes its effective user, hence the guard below.
        let child = Command::new(postfix_master(&etc))
            .arg("-c")
            .arg(&etc)
            .arg("-s")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(plog)
            .spawn()
            .map_err(|e| Error::runtime(format!("cannot start postfix: {e}")))?;
        server.postfix_guard = postfix_guard(child.id(), &pf.join("queue")).ok();
        server.postfix = Some(child);

        let deadline = Instant::now() + Duration::from_secs(30);
        for (name, port) in [
            ("dovecot IMAP", ports.imap),
            ("dovecot submission", ports.submission),
            ("dovecot ManageSieve", ports.sieve),
            ("dovecot LMTP", ports.lmtp),
            ("postfix SMTP", ports.smtp),
        ] {
            server.wait_ready(name, port, true, deadline)?;
        }
        for (name, port) in [
            ("dovecot imaps", ports.imaps),
            ("dovecot submissions", ports.submissions),
        ] {
            if let Some(port) = port {
                server.wait_ready(name, port, false, deadline)?;
            }
        }
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
        let user = format!("mailbench-check@{LOCAL_DOMAIN}");
        match imap_session_check(self.ports.imap, &user, &self.password) {
            Ok(()) => Ok(()),
            Err(what) => {
                let errors = self.log_errors(5);
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

    /// The servers' own error lines (Dovecot's `Error:`/`Fatal:`/`Panic:`,
    /// Postfix's `fatal:`/`panic:`/`error:`), at most `max`, the first ones.
    pub fn log_errors(&self, max: usize) -> Vec<String> {
        let mut out = Vec::new();
        for (file, marks) in [
            (
                "dovecot/dovecot.log",
                &[" Error: ", " Fatal: ", " Panic: "][..],
            ),
            ("postfix/maillog", &[" fatal: ", " panic: ", " error: "][..]),
        ] {
            let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
            for l in text.lines() {
                if out.len() >= max {
                    return out;
                }
                if marks.iter().any(|m| l.contains(m)) {
                    out.push(crate::secrets::redact(l.trim()).into_owned());
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
    /// (bounded) for them to exit.
    pub fn stop(&mut self) {
        if let Some(mut g) = self.postfix_guard.take() {
            let _ = g.kill();
            let _ = g.wait();
        }
        if let Some(mut c) = self.postfix.take() {
            stop_child(&mut c, "postfix");
            self.log.line("local target: postfix stopped");
        }
        if let Some(mut c) = self.dovecot.take() {
            stop_child(&mut c, "dovecot");
            self.log.line("local target: dovecot stopped");
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

/// Checks that the mail servers' own users (Dovecot's `nobody` and
/// `dovenull`, Postfix's `postfix`) can reach `dir`: every existing folder
/// above it must let others search it (x). Folders mailbench creates are
/// made 0755. A 0700 home or a `mktemp -d` folder above `dir` fails here,
/// before anything is started (exit 2).
pub fn check_dir_reachable(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let abs = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| Error::usage(format!("cannot resolve {}: {e}", dir.display())))?
            .join(dir)
    };
    for a in abs.ancestors().skip(1) {
        let Ok(m) = std::fs::metadata(a) else {
            continue;
        };
        let mode = m.permissions().mode();
        if mode & 0o001 == 0 {
            return Err(Error::usage(format!(
                "local target folder {}: the mail servers run as their own users (Dovecot as nobody \
                 and dovenull, Postfix as postfix) and cannot enter {} (mode {:04o}, no search \
                 permission for others); choose a folder they can reach, e.g. under /var/tmp, or \
                 allow it with `chmod o+x {}`",
                abs.display(),
                a.display(),
                mode & 0o7777,
                a.display()
            )));
        }
    }
    Ok(())
}

/// Creates `dir` and the missing folders above it with mode 0755 (whatever
/// the umask), so the servers' own users can reach it.
pub fn make_reachable_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut missing: Vec<&Path> = dir.ancestors().take_while(|a| !a.exists()).collect();
    missing.reverse();
    for a in missing {
        std::fs::create_dir(a).map_err(|e| Error::io("cannot create", a, e))?;
        std::fs::set_permissions(a, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| Error::io("cannot set the permissions of", a, e))?;
    }
    Ok(())
}

fn is_process(pid: &str, name: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim() == name)
        .unwrap_or(false)
}

/// `program` started with a parent-death SIGTERM (`setpriv --pdeathsig`,
/// util-linux): if mailbench dies, even by SIGKILL, the server master gets
/// SIGTERM and stops its own processes. Without setpriv, the program as is
/// (the next start then cleans up, `stop_stale`).
fn bound_to_us(program: &str) -> Command {
    if Path::new(SETPRIV).is_file() {
        let mut c = Command::new(SETPRIV);
        c.args(["--pdeathsig", "TERM", "--", program]);
        c
    } else {
        Command::new(program)
    }
}

const SETPRIV: &str = "/usr/bin/setpriv";

/// The guard: waits for the end of its standard input, which only
/// mailbench holds (closed when mailbench exits, however it dies), then
/// sends SIGTERM to Postfix's master `$1` if that process still works in
/// the queue folder `$2` (so never to a process that reused the PID).
const GUARD: &str = r#"read _; [ "$(readlink /proc/$1/cwd)" = "$2" ] && kill -TERM "$1""#;

/// Starts the guard of Postfix's master `pid` (queue folder `queue`), in
/// its own process group (Ctrl-C does not reach it). Dropped first on a
/// normal stop (`LocalServer::stop`).
fn postfix_guard(pid: u32, queue: &Path) -> Result<Child> {
    let queue = queue
        .canonicalize()
        .map_err(|e| Error::io("cannot resolve", queue, e))?;
    Command::new("/bin/sh")
        .args(["-c", GUARD, "mailbench-postfix-guard", &pid.to_string()])
        .arg(queue)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::runtime(format!("cannot start /bin/sh: {e}")))
}

/// Postfix's master program (`daemon_directory` of the instance in `etc`).
fn postfix_master(etc: &Path) -> String {
    let dir = Command::new("/usr/sbin/postconf")
        .arg("-c")
        .arg(etc)
        .args(["-h", "daemon_directory"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/usr/lib/postfix/sbin".into());
    format!("{dir}/master")
}

/// Stops the servers an earlier run in `dir` left running (it was killed):
/// the PID in each pid file is signalled only when that process is this
/// folder's server (Dovecot started with this folder's config, Postfix's
/// master working in this folder's queue), never another one.
pub fn stop_stale(dir: &Path) {
    let conf = dir.join("dovecot/dovecot.conf");
    if let Ok(t) = std::fs::read_to_string(dir.join("dovecot/run/master.pid")) {
        let t = t.trim();
        if is_process(t, "dovecot") && cmdline_has(t, &conf) {
            let _ = Command::new("kill").arg(t).status();
            wait_gone(t);
        }
    }
    let queue = dir.join("postfix/queue");
    if let Ok(t) = std::fs::read_to_string(queue.join("pid/master.pid")) {
        let t = t.trim();
        if is_process(t, "master") && works_in(t, &queue) {
            let _ = Command::new("kill").arg(t).status();
            wait_gone(t);
        }
    }
}

/// Whether process `pid` was started with `path` among its arguments.
fn cmdline_has(pid: &str, path: &Path) -> bool {
    let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let want = path.as_os_str().as_encoded_bytes();
    c.split(|b| *b == 0).any(|a| a == want)
}

/// Whether process `pid`'s working folder is `dir`.
fn works_in(pid: &str, dir: &Path) -> bool {
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"));
    match (cwd, dir.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The prefix of the temporary folders of runs without `--local-dir`
/// (`mailbench-local-PID-TIME` in the system's temporary folder).
pub const TEMP_PREFIX: &str = "mailbench-local-";

/// Removes the temporary local-target folders of runs that were killed:
/// named `TEMP_PREFIX` + a PID that is no longer running, holding
/// mailbench's ownership marker; their servers are stopped first
/// (`stop_stale`). Returns the folders removed.
pub fn remove_stale_temp_dirs(tmp: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return removed;
    };
    for e in entries.flatten().take(10_000) {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix(TEMP_PREFIX)
            .and_then(|r| r.split('-').next())
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let path = e.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir())
            && path.join(mailbench_base::rundir::MANIFEST).is_file();
        if !ours || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        stop_stale(&path);
        if std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

fn wait_gone(pid: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM, then up to 10 s of waiting, then SIGKILL.
fn stop_child(c: &mut Child, _name: &str) {
    if let Ok(Some(_)) = c.try_wait() {
        return;
    }
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(c.id().to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
}

/// Queue length of the Postfix instance configured in `etc` (`postqueue -c etc -j`).
pub fn queue_len(etc: &Path) -> Option<u64> {
    let out = Command::new("/usr/sbin/postqueue")
        .arg("-c")
        .arg(etc)
        .arg("-j")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(
        out.stdout
            .split(|b| *b == b'\n')
            .filter(|l| l.starts_with(b"{"))
            .count() as u64,
    )
}

#[allow(clippy::too_many_lines)] // longer than 100 lines: split when next changed
fn dovecot_conf(dir: &Path, p: &LocalPorts, password: &str, tls: Option<&LocalTls>) -> String {
    let d = dir.join("dovecot");
    let d = d.display();
    let (ssl, imaps, submissions) = match (tls, p.imaps, p.submissions) {
        (Some(t), Some(imaps), Some(subs)) => (
            format!(
                "ssl = yes\nssl_cert = <{}\nssl_key = <{}\nssl_min_protocol = TLSv1.2",
                t.cert.display(),
                t.key.display()
            ),
            format!("address = 127.0.0.1\n    port = {imaps}\n    ssl = yes"),
            format!(
                "\n  inet_listener submissions {{\n    address = 127.0.0.1\n    port = {subs}\n    ssl = yes\n  }}"
            ),
        ),
        _ => (
            "ssl = no".to_string(),
            "port = 0".to_string(),
            String::new(),
        ),
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"# Generated by mailbench for --target local. Throwaway; do not edit.
base_dir = {d}/run
state_dir = {d}/state
instance_name = mailbench-dovecot
log_path = {d}/dovecot.log
info_log_path = {d}/dovecot.log
protocols = imap lmtp submission sieve
listen = 127.0.0.1
{ssl}
disable_plaintext_auth = no
auth_mechanisms = plain login
passdb {{
  driver = static
  args = password={password}
}}
userdb {{
  driver = static
  args = uid=65534 gid=65534 home={d}/mail/%u
}}
first_valid_uid = 1
mail_location = maildir:~/Maildir
# Every IMAP process (all run as one system user here) needs an inotify
# instance (fs.inotify.max_user_instances, often 128); past the limit Dovecot
# looks for new mail every mailbox_idle_check_interval (30 s by default),
# which would show up as delivery latency. Look every second instead.
mailbox_idle_check_interval = 1 secs
mail_privileged_group =
default_login_user = dovenull
default_internal_user = dovecot
hostname = localhost
submission_relay_host = 127.0.0.1
submission_relay_port = {smtp}
submission_relay_trusted = yes
lmtp_save_to_detail_mailbox = no
recipient_delimiter = +
service imap-login {{
  service_count = 0
  process_min_avail = 2
  client_limit = 4000
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap}
  }}
  inet_listener imaps {{
    {imaps}
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp}
  }}
}}
service submission-login {{
  service_count = 0
  process_min_avail = 1
  client_limit = 4000
  inet_listener submission {{
    address = 127.0.0.1
    port = {sub}
  }}{submissions}
}}
service submission {{
  process_limit = 1024
}}
service managesieve-login {{
  service_count = 0
  client_limit = 4000
  inet_listener sieve {{
    address = 127.0.0.1
    port = {sieve}
  }}
}}
service managesieve {{
  process_limit = 1024
}}
protocol lmtp {{
  mail_plugins = $mail_plugins sieve
}}
plugin {{
  sieve = file:~/sieve;active=~/.dovecot.sieve
}}
# load-test tuning (ecosystem.md §5.1)
default_client_limit = 8000
mail_max_userip_connections = 1000
auth_failure_delay = 0
service imap {{
  process_limit = 4096
}}
"#,
        smtp = p.smtp,
        imap = p.imap,
        lmtp = p.lmtp,
        sub = p.submission,
        sieve = p.sieve,
    );
    s
}

fn postfix_main_cf(dir: &Path, p: &LocalPorts) -> String {
    let root = dir.display();
    let pf = dir.join("postfix");
    let pf = pf.display();
    format!(
        r#"# Generated by mailbench for --target local. Throwaway; do not edit.
compatibility_level = 3.6
queue_directory = {pf}/queue
data_directory = {pf}/data
mail_owner = postfix
setgid_group = postdrop
myhostname = mail.{LOCAL_DOMAIN}
mydomain = {LOCAL_DOMAIN}
myorigin = $myhostname
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mydestination =
relay_domains =
mynetworks = 127.0.0.0/8
virtual_mailbox_domains = {LOCAL_DOMAIN}
virtual_alias_maps = texthash:{pf}/etc/virtual
virtual_transport = lmtp:inet:127.0.0.1:{lmtp}
# No local delivery: no system alias table (/etc/aliases.db may not exist)
alias_maps =
alias_database =
local_recipient_maps =
maillog_file = {pf}/maillog
maillog_file_prefixes = {root}
smtpd_banner = $myhostname ESMTP
biff = no
smtputf8_enable = no
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination
# load-test tuning
default_process_limit = 500
in_flow_delay = 0
lmtp_destination_concurrency_limit = 40
smtpd_client_connection_count_limit = 0
smtpd_client_message_rate_limit = 0
"#,
        lmtp = p.lmtp
    )
}

fn postfix_master_cf(p: &LocalPorts) -> String {
    format!(
        "# Generated by mailbench for --target local. Throwaway; do not edit.
127.0.0.1:{smtp} inet n  -       n       -       -       smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
local     unix  -       n       n       -       -       local
virtual   unix  -       n       n       -       -       virtual
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
",
        smtp = p.smtp
    )
}
