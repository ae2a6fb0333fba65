//! Shared helpers of the mail integration tests (included with `#[path]`): a
//! misbehaving TCP proxy, running the binary, reading result.json.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

#[path = "common/mod.rs"]
mod common;
#[allow(unused_imports)]
pub use common::{browse, chromium, read_json, text};

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// True when Dovecot/Postfix are installed; in CI their absence is a failure.
pub fn servers_available() -> bool {
    let missing = mailbench_mail::local::missing_packages();
    if missing.is_empty() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("CI must install {missing:?} (scripts/packages/mail.txt)");
    }
    eprintln!("SKIPPED: Dovecot/Postfix packages missing: {missing:?} (apt-get install them)");
    false
}

pub fn mailbench(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mailbench"));
    c.args(args).env_remove("MAILBENCH_PASSWORD");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run mailbench")
}

/// As `mailbench`, killed (SIGKILL to this child, by its handle) when it
/// has not ended within `limit`; then the test fails with what it printed.
pub fn mailbench_within(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Output {
    use std::process::Stdio;
    let mut c = Command::new(env!("CARGO_BIN_EXE_mailbench"));
    c.args(args).env_remove("MAILBENCH_PASSWORD");
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mailbench");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let o = Output {
                status: child.wait().unwrap(),
                stdout: out.join().unwrap(),
                stderr: err.join().unwrap(),
            };
            panic!(
                "mailbench {args:?} still running after {limit:?}: {}",
                text(&o)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The only run folder `kind-*` under `out` (newest if several).
pub fn run_folder(out: &Path, kind: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .expect("results folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(kind))
        })
        .collect();
    dirs.sort();
    dirs.pop().expect("a run folder")
}

/// The result.json of the only run folder `kind-*` under `out` (newest if several).
pub fn result(out: &Path, kind: &str) -> serde_json::Value {
    read_json(&run_folder(out, kind).join("result.json"))
}

/// The summary.txt of the only run folder `kind-*` under `out` (newest if several).
pub fn summary(out: &Path, kind: &str) -> String {
    std::fs::read_to_string(run_folder(out, kind).join("summary.txt")).expect("summary.txt")
}

/// The first entry in the folder `out` (the one run folder a command made).
pub fn only_entry(out: &Path) -> PathBuf {
    std::fs::read_dir(out)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

/// A port on 127.0.0.1 free a moment ago (bound, then let go): nothing
/// listens there.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The command ended with exit `code` and its output names `needle`.
pub fn assert_exit_naming(r: &Output, code: i32, needle: &str) {
    assert_eq!(r.status.code(), Some(code), "{}", text(r));
    assert!(text(r).contains(needle), "{}", text(r));
}

/// No run folder under `out`: usage errors write nothing.
pub fn assert_no_run_folder(out: &Path) {
    assert!(
        std::fs::read_dir(out)
            .unwrap()
            .all(|e| !e.unwrap().path().is_dir()),
        "usage errors write nothing"
    );
}

#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Close both directions after `after` bytes from the server.
    Reset,
    /// Stop forwarding the server's bytes (the connection stays open).
    Stall,
    /// Send a line of garbage to the client, then keep forwarding.
    Garbage,
}

/// A TCP proxy to 127.0.0.1:`upstream` that injects `fault` into every `every`-th
/// connection once the server has sent `after` bytes on it.
pub struct Proxy {
    pub port: u16,
    stop: Arc<AtomicBool>,
    pub connections: Arc<AtomicUsize>,
    pub faults: Arc<AtomicUsize>,
}

impl Proxy {
    pub fn start(upstream: u16, fault: Fault, every: usize, after: usize) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        let faults = Arc::new(AtomicUsize::new(0));
        let (st, cn, fa) = (stop.clone(), connections.clone(), faults.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let n = cn.fetch_add(1, Ordering::Relaxed);
                        let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                            continue;
                        };
                        let inject = every > 0 && n % every == every - 1;
                        let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                        std::thread::spawn(move || pump(c2, s2, None, &AtomicUsize::new(0), st2()));
                        let fa = fa.clone();
                        let stop = st.clone();
                        std::thread::spawn(move || {
                            let f = inject.then_some((fault, after));
                            pump(server, client, f, &fa, stop)
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Proxy {
            port,
            stop,
            connections,
            faults,
        }
    }
}

fn st2() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    fault: Option<(Fault, usize)>,
    faults: &AtomicUsize,
    stop: Arc<AtomicBool>,
) {
    let mut buf = [0u8; 8192];
    let mut sent = 0usize;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some((f, after)) = fault
            && sent + n > after
        {
            faults.fetch_add(1, Ordering::Relaxed);
            match f {
                Fault::Reset => {
                    let _ = to.write_all(&buf[..after.saturating_sub(sent).min(n)]);
                    let _ = to.shutdown(Shutdown::Both);
                    let _ = from.shutdown(Shutdown::Both);
                    return;
                }
                Fault::Stall => {
                    // Hold the connection open without answering until the client
                    // gives up (bounded: 60 s or the proxy stops).
                    let deadline = Instant::now() + Duration::from_secs(60);
                    let _ = to.set_read_timeout(Some(Duration::from_millis(50)));
                    let mut b = [0u8; 1];
                    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                        match to.read(&mut b) {
                            Ok(0) => break,
                            _ => continue,
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                    let _ = from.shutdown(Shutdown::Both);
                    return;
                }
                Fault::Garbage => {
                    let _ = to.write_all(b"\x16\x03\x01garbage \xff\xfe not IMAP\r\n");
                    let _ = to.write_all(&buf[..n]);
                    sent += n;
                    // Only once per connection.
                    return pump_plain(from, to, sent);
                }
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        sent += n;
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn pump_plain(mut from: TcpStream, mut to: TcpStream, _sent: usize) {
    let mut buf = [0u8; 8192];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// Counts the errors of a mail run that are Dovecot 2.3's one known refusal
/// under load (or Courier's answer in the same place) (`is_dovecot_create_race`, explained in docs/mail-load.md), and
/// fails the test on any other error. mailbench rightly counts the refusal: the
/// user saw an error. Only Create Smart Folder creates folders in a run.
pub fn known_server_races(v: &serde_json::Value) -> u64 {
    let errors = &v["errors"];
    let total = errors["total"].as_u64().unwrap();
    if total == 0 {
        return 0;
    }
    let by_kind = errors["by_kind"].as_object().unwrap();
    assert!(
        by_kind.keys().all(|k| k == "rejected"),
        "errors other than server refusals: {errors}"
    );
    for (name, t) in v["tasks"].as_object().unwrap() {
        if name != "create_smart_folder" {
            assert_eq!(t["errors"].as_u64().unwrap_or(0), 0, "{name}: {t}");
        }
    }
    let samples = errors["samples"].as_array().unwrap();
    assert!(!samples.is_empty(), "{errors}");
    for s in samples {
        let s = s.as_str().unwrap();
        // Courier says the same with no response code: `NO Cannot create
        // this folder.` when its mkdir of the new folder fails (seen once
        // under a loaded machine, not reproduced alone).
        let courier = s.contains("CREATE refused") && s.contains("Cannot create this folder.");
        assert!(
            s.starts_with("create_smart_folder ")
                && (mailbench_report::summary::mail::is_dovecot_create_race(s) || courier),
            "not the known Dovecot CREATE race: {s}"
        );
    }
    total
}

/// A mail run that must be clean: no error but `known_server_races`, and the
/// exit code its verdict gives (1 only when such a race is what failed it).
pub fn assert_clean_run(o: &Output, v: &serde_json::Value) {
    let races = known_server_races(v);
    let reasons = v["verdict"]["reasons"].as_array().unwrap();
    if races == 0 {
        assert_eq!(o.status.code(), Some(0), "{}", text(o));
        assert!(reasons.is_empty(), "{}", v["verdict"]);
    } else {
        eprintln!("tolerated: {races} Dovecot CREATE race(s): {}", v["errors"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(o));
        assert_eq!(reasons.len(), 1, "{}", v["verdict"]);
        assert!(
            reasons[0].as_str().unwrap().contains(" rejected"),
            "{}",
            v["verdict"]
        );
    }
}

/// A server of known capacity for capacity tests: a TCP proxy to
/// 127.0.0.1:`upstream` that carries `limit` sessions at full speed and, while
/// more than `limit` are open through it, holds every chunk the server sends
/// back for `delay` (a server past its capacity: every response is slow). With
/// one IMAP session per user, the largest user count that passes a response
/// time limit under `delay` is `limit`.
pub struct ThrottleProxy {
    pub port: u16,
    stop: Arc<AtomicBool>,
    /// Sessions open now, and the most ever open at once.
    pub open: Arc<AtomicUsize>,
    pub peak: Arc<AtomicUsize>,
    /// Chunks held back.
    pub delayed: Arc<AtomicUsize>,
}

impl ThrottleProxy {
    pub fn start(upstream: u16, limit: usize, delay: Duration) -> ThrottleProxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let p = ThrottleProxy {
            port,
            stop: Arc::new(AtomicBool::new(false)),
            open: Arc::new(AtomicUsize::new(0)),
            peak: Arc::new(AtomicUsize::new(0)),
            delayed: Arc::new(AtomicUsize::new(0)),
        };
        let (stop, open, peak, delayed) = (
            p.stop.clone(),
            p.open.clone(),
            p.peak.clone(),
            p.delayed.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok((client, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || pump_plain(c2, s2, 0));
                let (open, delayed) = (open.clone(), delayed.clone());
                std::thread::spawn(move || {
                    pump_throttled(server, client, &open, limit, delay, &delayed);
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        p
    }
}

impl Drop for ThrottleProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn pump_throttled(
    mut from: TcpStream,
    mut to: TcpStream,
    open: &AtomicUsize,
    limit: usize,
    delay: Duration,
    delayed: &AtomicUsize,
) {
    let mut buf = [0u8; 16384];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if open.load(Ordering::SeqCst) > limit {
            delayed.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(delay);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// Debian packages that conflict with the installed servers, unpacked with
/// `dpkg -x` into `target/tmp/<name>/root` (once: a root holding `marker`
/// is reused): from the .debs that scripts/test downloads into target/debs,
/// else downloaded here with `apt-get download`. None (skip; a failure in
/// CI) when neither works.
pub fn unpack_debs(name: &str, debs: &[&str], marker: &str) -> Option<PathBuf> {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let root = tmp.join(name).join("root");
    if root.join(marker).is_file() {
        return Some(root);
    }
    let shared = tmp.join("../debs");
    let own = tmp.join(name).join("debs");
    std::fs::create_dir_all(&own).unwrap();
    let find = |pkg: &str| -> Option<PathBuf> {
        [&shared, &own].iter().find_map(|d| {
            std::fs::read_dir(d)
                .ok()?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{pkg}_")))
                })
        })
    };
    let missing: Vec<&str> = debs.iter().copied().filter(|p| find(p).is_none()).collect();
    if !missing.is_empty() {
        let ok = Command::new("apt-get")
            .arg("download")
            .args(&missing)
            .current_dir(&own)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            if std::env::var_os("CI").is_some() {
                panic!("CI must provide {missing:?} in target/debs (scripts/test downloads them)");
            }
            eprintln!("SKIPPED: cannot download the {name} packages {missing:?}");
            return None;
        }
    }
    let part = tmp.join(name).join("root.part");
    let _ = std::fs::remove_dir_all(&part);
    for p in debs {
        let deb = find(p).unwrap();
        let st = Command::new("dpkg")
            .arg("-x")
            .arg(&deb)
            .arg(&part)
            .status()
            .unwrap();
        assert!(st.success(), "dpkg -x {}", deb.display());
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&part, &root).unwrap();
    Some(root)
}
