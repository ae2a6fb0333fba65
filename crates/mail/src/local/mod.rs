//! `--target local`: a throwaway Dovecot (IMAP, LMTP, submission, ManageSieve) and
//! Postfix (SMTP relay, virtual alias expansion, LMTP delivery to Dovecot) started
//! from Debian's packages with configs generated in a state folder, on 127.0.0.1
//! ports chosen free at start, with the limits that cap concurrency raised
//! (docs/mail-load.md, "Targets"). Both masters are our own children, stopped through their
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
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

mod config;
mod cyrus;
mod processes;
mod server;
mod sizing;

pub use cyrus::{CHECK_LOGIN, cyrus_root};
pub use processes::{TEMP_PREFIX, queue_len, remove_stale_temp_dirs, stop_stale};
pub use sizing::{IMAP_PROCESS_BYTES, Machine, Sizing};

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
    missing_packages_for("dovecot")
}

/// Debian packages missing for the local target with `server` (`dovecot`,
/// or `cyrus`: Postfix only; Cyrus's own files are checked by
/// [`cyrus_root`]).
pub fn missing_packages_for(server: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (file, pkg) in REQUIRED {
        if server == "cyrus" && !pkg.starts_with("postfix") {
            continue;
        }
        if !Path::new(file).exists() && !out.contains(pkg) {
            out.push(pkg);
        }
    }
    out
}

/// Checks that the local target with `server` (`dovecot` or `cyrus`) can
/// run here: packages installed, running as root.
pub fn check_prerequisites(server: &str) -> Result<()> {
    let missing = missing_packages_for(server);
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
            "--target local must run as root (the mail servers switch to their own users); \
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
    /// Cyrus's HTTP service (JMAP), with `--server cyrus` only.
    pub http: Option<u16>,
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
    /// Process and client limits for the sessions the run opens.
    pub sizing: Sizing,
    /// Cyrus IMAP instead of Dovecot (`--server cyrus`).
    pub cyrus: Option<CyrusOptions>,
}

/// The local Cyrus: where its programs are and who logs in.
#[derive(Debug, Clone, Default)]
pub struct CyrusOptions {
    /// The root its Debian packages are installed (`/`) or unpacked in.
    pub root: PathBuf,
    /// The users' login names (all with the local password).
    pub logins: Vec<String>,
}

/// Refuses (exit 2) `users` the local target cannot hold on this machine,
/// `sessions` being the IMAP sessions the run opens at once (the users, or
/// setup's workers if more), naming the bound; `server` is `dovecot` or
/// `cyrus` (`--server`).
pub fn check_capacity(users: usize, sessions: usize, server: &str) -> Result<()> {
    sizing::check(users, sessions.max(users), &Machine::read(), server)
}

/// A running Dovecot + Postfix pair.
#[derive(Debug)]
pub struct LocalServer {
    pub dir: PathBuf,
    pub ports: LocalPorts,
    pub password: String,
    /// Which IMAP server runs: `dovecot` or `cyrus`.
    pub server: &'static str,
    dovecot: Option<Child>,
    /// Cyrus's master (`--server cyrus`) and its guard (it changes its user,
    /// which clears a parent-death signal, as Postfix's master does).
    cyrus: Option<Child>,
    cyrus_guard: Option<Child>,
    postfix: Option<Child>,
    /// Stops Postfix's master if mailbench dies (`postfix_guard`).
    postfix_guard: Option<Child>,
    log: TestLog,
}

impl LocalPorts {
    /// Free ports for every listener; the implicit-TLS ones only with
    /// `tls`, the HTTP one only with `http`.
    fn free(tls: bool, http: bool) -> Result<LocalPorts> {
        let p = free_ports(8)?;
        Ok(LocalPorts {
            imap: p[0],
            submission: p[1],
            sieve: p[2],
            lmtp: p[3],
            smtp: p[4],
            imaps: tls.then_some(p[5]),
            submissions: tls.then_some(p[6]),
            http: http.then_some(p[7]),
        })
    }
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
    let mut f = mailbench_base::rundir::create_replacing(path, 0o600)
        .map_err(|e| Error::io("cannot write", path, e))?;
    f.write_all(bytes)
        .map_err(|e| Error::io("cannot write", path, e))
}

/// A server's configuration (it may hold the local target's password: not
/// redacted, never through a symlink).
fn write_file(path: &Path, text: &str) -> Result<()> {
    mailbench_base::rundir::write_atomic(path, text.as_bytes())
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

/// `dir` made absolute, checked reachable by the servers' users, created if needed and
/// opened to them (0755).
fn prepare_dir(dir: &Path) -> Result<PathBuf> {
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
    Ok(dir)
}
