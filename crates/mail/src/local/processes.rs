//! The local target's processes: started bound to mailbench (parent-death signal,
//! Postfix's guard), stopped with a bounded wait, and the servers and temporary
//! folders a killed run left behind found and stopped (only when they are this
//! folder's).

use mailbench_base::{Error, Result};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `postfix` commands fail silently without syslog; run them with their output
/// captured so failures can be reported.
pub(super) fn postfix_cmd(etc: &Path, args: &[&str]) -> Result<String> {
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

fn is_process(pid: &str, name: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim() == name)
        .unwrap_or(false)
}

/// `program` started with a parent-death SIGTERM (`setpriv --pdeathsig`,
/// util-linux): if mailbench dies, even by SIGKILL, the server master gets
/// SIGTERM and stops its own processes. Without setpriv, the program as is
/// (the next start then cleans up, `stop_stale`).
pub(super) fn bound_to_us(program: &str) -> Command {
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
/// its own process group (Ctrl-C does not reach it). Stopped after Postfix
/// on a normal stop (`LocalServer::stop`).
pub(super) fn postfix_guard(pid: u32, queue: &Path) -> Result<Child> {
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

/// The guard of a master started with `$2` among its arguments (Cyrus's,
/// with its `imapd.conf`): as [`GUARD`], but the PID is signalled only when
/// its command line still holds that argument.
const ARG_GUARD: &str =
    r#"read _; tr '\0' '\n' < /proc/$1/cmdline | grep -qxF -- "$2" && kill -TERM "$1""#;

/// Starts the guard of the master `pid` started with the argument `arg`
/// (see [`ARG_GUARD`]), in its own process group.
pub(super) fn process_guard(pid: u32, arg: &Path) -> Result<Child> {
    Command::new("/bin/sh")
        .args(["-c", ARG_GUARD, "mailbench-guard", &pid.to_string()])
        .arg(arg)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::runtime(format!("cannot start /bin/sh: {e}")))
}

/// Postfix's master program (`daemon_directory` of the instance in `etc`).
pub(super) fn postfix_master(etc: &Path) -> String {
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
/// folder's server (Dovecot or Cyrus started with this folder's config,
/// Postfix's master working in this folder's queue), never another one.
pub fn stop_stale(dir: &Path) {
    for (pid_file, name, conf) in [
        ("dovecot/run/master.pid", "dovecot", "dovecot/dovecot.conf"),
        ("cyrus/run/master.pid", "master", "cyrus/imapd.conf"),
    ] {
        if let Ok(t) = std::fs::read_to_string(dir.join(pid_file)) {
            let t = t.trim();
            if is_process(t, name) && cmdline_has(t, &dir.join(conf)) {
                let _ = Command::new("kill").arg(t).status();
                wait_gone(t);
            }
        }
    }
    stop_leftovers(&dir.join("cyrus/imapd.conf"));
    let queue = dir.join("postfix/queue");
    if let Ok(t) = std::fs::read_to_string(queue.join("pid/master.pid")) {
        let t = t.trim();
        if is_process(t, "master") && works_in(t, &queue) {
            let _ = Command::new("kill").arg(t).status();
            wait_gone(t);
        }
    }
}

/// Stops every process still started with `conf` among its arguments (a
/// server's children its master left behind: Cyrus's `squatter -R` outlives
/// a stopped master): all signalled together, SIGTERM, then SIGKILL for those
/// still there after a bounded wait. Returns how many were found.
pub fn stop_leftovers(conf: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let pids: Vec<String> = entries
        .flatten()
        .take(1 << 22)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()) && cmdline_has(n, conf))
        .collect();
    if pids.is_empty() {
        return 0;
    }
    let _ = Command::new("kill").arg("-TERM").args(&pids).status();
    let deadline = Instant::now() + Duration::from_secs(5);
    let alive = |p: &String| Path::new(&format!("/proc/{p}")).exists() && cmdline_has(p, conf);
    while pids.iter().any(alive) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<&String> = pids.iter().filter(|p| alive(p)).collect();
    if !left.is_empty() {
        let _ = Command::new("kill").arg("-KILL").args(&left).status();
    }
    pids.len()
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
pub(super) fn stop_child(c: &mut Child, _name: &str) {
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
