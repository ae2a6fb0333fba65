//! Compatibility suite: `mail setup` and a short `mail run` of the mmb3 tasks
//! against servers mailbench was not built on, each with every task kind, no
//! error (but Dovecot 2.3's one known race), every delivery seen, and the
//! profile's mail flow within 5 % (distribution lists on every server: the
//! local target's own, or `--lists-file` naming the Postfix aliases the test
//! defines). Servers:
//!
//! * Dovecot, the local target as `mail run` starts it (Maildir, no prefix);
//! * Dovecot with personal mailboxes under `INBOX.` (`.` delimiter) and its
//!   own special-use Sent Messages, Trash, Junk and Drafts;
//! * Dovecot with mbox storage;
//! * Dovecot advertising neither IDLE, SORT, MOVE, CONDSTORE nor SPECIAL-USE;
//! * Courier IMAP from Debian, unpacked with `dpkg -x` (it conflicts with
//!   Dovecot's packages) and run in a private mount namespace so that its
//!   compiled-in /etc/courier, /run/courier and /usr/lib/courier-authlib
//!   paths are the test's own; it serves the Maildirs Dovecot's LMTP
//!   delivers to (Postfix and Dovecot's submission take the mail in), with
//!   gamin's gam_server for change notification (without it every command
//!   waits ~1.2 s for it).
//!
//! Each prints its row of the compatibility table (`--nocapture`).
//!
//! Bounded: the cases take turns (one set of servers at a time, `SERIAL`:
//! a 2-core machine cannot run five without timing out), each `mailbench`
//! invocation is killed after `SETUP_LIMIT` / `RUN_LIMIT` (its own process,
//! by its handle), and the servers are stopped by their handles only.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mail_support.rs"]
mod support;
use mailbench_base::rundir::TestLog;
use mailbench_mail::local::{LOCAL_DOMAIN, LocalOptions, LocalServer};
use mailbench_mail::profile::{Profile, ProfileExt, TaskKind};
use mailbench_mail::topology::Topology;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

const USERS: usize = 30;
const SEED: u64 = 1;
/// The run: a 20 s day after a 3 s ramp-up; the drain ends when every
/// delivery was seen (the margin is for a busy machine). The schedule is
/// drawn in simulated time, so the flow per user and day does not depend on
/// the day's length.
const RUN: [&str; 7] = [
    "--skip-setup",
    "--day-length",
    "20s",
    "--ramp-up",
    "3s",
    "--drain",
    "60s",
];
/// Wall-clock bounds of one `mail setup` and one `mail run` (the run's own
/// hard end is 23 s + 60 s drain + its grace).
const SETUP_LIMIT: Duration = Duration::from_secs(120);
const RUN_LIMIT: Duration = Duration::from_secs(240);

/// One case at a time: each starts its own Dovecot and Postfix (and Courier).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// mmb3's tasks and flow with a smaller initial mailbox (setup time).
fn profile_file(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles/mail/mmb3.toml");
    let text = std::fs::read_to_string(root).unwrap();
    let start = text.find("[initial]").unwrap();
    let end = start + text[start..].find("\n\n").unwrap();
    let text = format!(
        "{}[initial]\nfolders = 3\nmessages_per_folder = 3\ninbox = 20\ndeleted_items = 1\ncalendar = 5{}",
        &text[..start],
        &text[end..]
    )
    .replace("name = \"mmb3\"", "name = \"mmb3-small-mailbox\"");
    let p = dir.join("mmb3-small.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// The lists the local target would make for the users, as Postfix
/// aliases (written before the server starts) and as a `--lists-file`.
fn lists(local: &Path, work: &Path) -> PathBuf {
    let p = Profile::load("mmb3").unwrap();
    let topo = Topology::generate(
        &format!("user{{n}}@{LOCAL_DOMAIN}"),
        1,
        USERS,
        &p,
        Some(LOCAL_DOMAIN),
        SEED,
    );
    let etc = local.join("postfix/etc");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(LocalServer::aliases_path(local), topo.alias_table()).unwrap();
    let mut f = String::from("# the test's distribution lists (Postfix virtual aliases)\n");
    for l in &topo.lists {
        let m: Vec<&str> = l.members.iter().map(|i| topo.users[*i].as_str()).collect();
        f.push_str(&format!("{}: {}\n", l.address, m.join(", ")));
    }
    let path = work.join("lists.txt");
    std::fs::write(&path, f).unwrap();
    path
}

struct Endpoints {
    imap: String,
    submission: String,
    sieve: String,
    password: String,
    lists_file: PathBuf,
}

/// `mail setup` then `mail run` against `ep`; checks and prints the row.
fn setup_and_run(server: &str, ep: &Endpoints, profile: &Path, work: &Path) {
    let common = |cmd: &str, out: &Path| -> Vec<String> {
        let mut a: Vec<String> = [
            "mail",
            cmd,
            "--imap",
            &ep.imap,
            "--submission",
            &ep.submission,
            "--users",
            &USERS.to_string(),
            "--profile",
            profile.to_str().unwrap(),
            "--seed",
            &SEED.to_string(),
            "--lists-file",
            ep.lists_file.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if cmd == "run" {
            a.extend(["--sieve", &ep.sieve].map(String::from));
            a.extend(RUN.map(String::from));
        }
        a
    };
    let env = [("MAILBENCH_PASSWORD", ep.password.as_str())];
    let out = work.join(format!("setup-{}", server.replace(' ', "-")));
    let args = common("setup", &out);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = mailbench_within(&a, &env, SETUP_LIMIT);
    assert_eq!(r.status.code(), Some(0), "{server} setup: {}", text(&r));
    let s = result(&out, "mail-setup");
    assert_eq!(s["setup"]["users_ok"], USERS, "{server}: {}", s["setup"]);
    let out = work.join(format!("run-{}", server.replace(' ', "-")));
    let args = common("run", &out);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = mailbench_within(&a, &env, RUN_LIMIT);
    let v = result(&out, "mail-run");
    check_row(server, &r, &v, &s["setup"]["mailboxes"]);
}

/// The row's checks: every task kind ran, no error but the known race,
/// every delivery seen, flow within 5 % of the profile.
fn check_row(
    server: &str,
    r: &std::process::Output,
    v: &serde_json::Value,
    boxes: &serde_json::Value,
) {
    assert!(
        matches!(r.status.code(), Some(0) | Some(1)),
        "{server}: {}",
        text(r)
    );
    let races = known_server_races(v);
    let ran = TaskKind::ALL
        .iter()
        .filter(|k| v["tasks"][k.name()]["count"].as_u64().unwrap_or(0) > 0)
        .count();
    let f = &v["mail_flow"];
    let e = &f["profile_expects"];
    let ratio =
        |m: &str, p: &str| f["per_user_per_day"][m].as_f64().unwrap() / e[p].as_f64().unwrap();
    let (sub, del) = (
        ratio("submitted", "submitted_per_day"),
        ratio("delivered", "delivered_per_day"),
    );
    let d = &v["delivery_latency"];
    eprintln!(
        "COMPAT | {server:<34} | {ran:>2}/{} task kinds | errors {} (known Dovecot races {races}) | \
         submitted {:.1}/user/day ({:+.1} %) delivered {:.1}/user/day ({:+.1} %) {:.2} rcpt/msg | \
         delivered {}/{} | within 60 s {}/{} ({:.1} %) p95 {:.0} ms | mailboxes: prefix {:?} sent {} trash {}",
        TaskKind::ALL.len(),
        v["errors"]["total"],
        f["per_user_per_day"]["submitted"].as_f64().unwrap(),
        (sub - 1.0) * 100.0,
        f["per_user_per_day"]["delivered"].as_f64().unwrap(),
        (del - 1.0) * 100.0,
        f["recipients_per_message"].as_f64().unwrap(),
        f["delivered"],
        f["expected_deliveries"],
        d["delivered_within"],
        f["expected_deliveries"],
        d["within_pct"].as_f64().unwrap(),
        d["summary"]["p95_ms"].as_f64().unwrap_or(0.0),
        boxes["prefix"].as_str().unwrap_or(""),
        boxes["sent"],
        boxes["deleted_items"],
    );
    assert_eq!(ran, TaskKind::ALL.len(), "{server}: {}", v["tasks"]);
    assert_eq!(f["delivered"], f["expected_deliveries"], "{server}: {f}");
    assert!(
        (sub - 1.0).abs() < 0.05,
        "{server}: submitted {sub:.3} of the profile: {f}"
    );
    assert!(
        (del - 1.0).abs() < 0.05,
        "{server}: delivered {del:.3} of the profile: {f}"
    );
}

/// A remote-target case on the local Dovecot+Postfix started with `o`.
fn dovecot_variant(server: &str, o: LocalOptions) {
    if !servers_available() {
        return;
    }
    let _one = serial();
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("local");
    let lists_file = lists(&local, work.path());
    let srv = LocalServer::start_opts(&local, &TestLog::discard(), &o).unwrap();
    let ep = Endpoints {
        imap: format!("imap://127.0.0.1:{}", srv.ports.imap),
        submission: format!("smtp://127.0.0.1:{}", srv.ports.submission),
        sieve: format!("sieve://127.0.0.1:{}", srv.ports.sieve),
        password: srv.password.clone(),
        lists_file,
    };
    let profile = profile_file(work.path());
    setup_and_run(server, &ep, &profile, work.path());
    drop(srv);
}

#[test]
fn dovecot_local_target_default_layout() {
    if !servers_available() {
        return;
    }
    let _one = serial();
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("local");
    let profile = profile_file(work.path());
    let l = local.to_str().unwrap();
    let base = [
        "--users",
        &USERS.to_string(),
        "--profile",
        profile.to_str().unwrap(),
        "--seed",
        &SEED.to_string(),
        "--local-dir",
        l,
    ]
    .map(|s| s.to_string());
    let out = work.path().join("setup");
    let mut args: Vec<&str> = vec!["mail", "setup"];
    args.extend(base.iter().map(String::as_str));
    args.extend(["--output", out.to_str().unwrap()]);
    let r = mailbench_within(&args, &[], SETUP_LIMIT);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let s = result(&out, "mail-setup");
    let out = work.path().join("run");
    let mut args: Vec<&str> = vec!["mail", "run"];
    args.extend(base.iter().map(String::as_str));
    args.extend(RUN);
    args.extend(["--output", out.to_str().unwrap()]);
    let r = mailbench_within(&args, &[], RUN_LIMIT);
    let v = result(&out, "mail-run");
    check_row(
        "Dovecot 2.3 local target (Maildir)",
        &r,
        &v,
        &s["setup"]["mailboxes"],
    );
}

#[test]
fn dovecot_inbox_prefix_and_special_use() {
    dovecot_variant(
        "Dovecot INBOX. prefix, special-use",
        LocalOptions {
            dovecot_extra: r#"namespace inbox {
  inbox = yes
  prefix = INBOX.
  separator = .
  mailbox "Sent Messages" {
    special_use = \Sent
    auto = create
  }
  mailbox Trash {
    special_use = \Trash
    auto = create
  }
  mailbox Junk {
    special_use = \Junk
    auto = create
  }
  mailbox Drafts {
    special_use = \Drafts
    auto = create
  }
}"#
            .into(),
            ..Default::default()
        },
    );
}

#[test]
fn dovecot_mbox_storage() {
    dovecot_variant(
        "Dovecot mbox",
        LocalOptions {
            dovecot_extra: "mail_location = mbox:~/mail:INBOX=~/mbox".into(),
            ..Default::default()
        },
    );
}

#[test]
fn dovecot_without_idle_sort_move_special_use() {
    dovecot_variant(
        "Dovecot no IDLE/SORT/MOVE/SPECIAL-USE",
        LocalOptions {
            dovecot_extra: "imap_capability = IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE \
                            LITERAL+ NAMESPACE UIDPLUS CHILDREN UNSELECT"
                .into(),
            ..Default::default()
        },
    );
}

// ---- Courier IMAP ----------------------------------------------------------

/// Debian packages Courier IMAP needs, unpacked, never installed.
const COURIER_DEBS: &[&str] = &[
    "courier-imap",
    "courier-base",
    "courier-authlib",
    "courier-authdaemon",
    "courier-authlib-userdb",
    "libcourier-unicode4",
    "libgamin0",
    "gamin",
    "libidn12",
];

/// The unpacked packages (`target/tmp/courier/root`): from the .debs that
/// scripts/test downloads into target/debs, else downloaded here with
/// `apt-get download`. None (skip; a failure in CI) when neither works.
fn courier_root() -> Option<PathBuf> {
    unpack_debs("courier", COURIER_DEBS, "usr/bin/imapd")
}

/// Courier's imapd on 127.0.0.1 for `users` (userdb with one password),
/// their homes Dovecot's, in its own mount and PID namespaces (`unshare`):
/// killing `unshare` stops everything in it (couriertcpd, authdaemond,
/// imapd, gam_server).
struct Courier {
    unshare: Child,
    port: u16,
}

impl Drop for Courier {
    /// Kills `unshare` (our own child, by its handle): `--kill-child` gave
    /// the namespace's first process a parent-death SIGKILL, and the kernel
    /// kills every process of a PID namespace when its first one dies. No
    /// PID is read from anywhere: nothing outside the namespace is signalled.
    fn drop(&mut self) {
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

const COURIER_START: &str = r#"#!/bin/sh
# Private mount namespace: Courier's compiled-in paths (/etc/courier,
# /run/courier, /usr/lib/courier-authlib, /usr/libexec/gam_server) become the
# test's own, layered read-only over the system's.
set -e
X=$1; D=$2; PORT=$3
mount -t tmpfs tmpfs /run
mkdir -p /run/courier/authdaemon
mount -t overlay overlay -o lowerdir=$D/etc:/etc /etc
mount -t overlay overlay -o lowerdir=$X/usr/lib:/usr/lib /usr/lib
mount -t overlay overlay -o lowerdir=$X/usr/libexec:/usr/libexec /usr/libexec
export LD_LIBRARY_PATH=$X/usr/lib:$X/usr/lib/x86_64-linux-gnu
$X/usr/lib/courier/courier-authlib/authdaemond > $D/authdaemond.log 2>&1 &
# Debian's /etc/courier/imapd defaults, but IDLE looks every second (like the
# local Dovecot's mailbox_idle_check_interval) and no connection limits.
export IMAP_CAPABILITY="IMAP4rev1 UIDPLUS CHILDREN NAMESPACE THREAD=ORDEREDSUBJECT THREAD=REFERENCES SORT QUOTA IDLE"
export IMAP_IDLE_TIMEOUT=1 IMAP_USELOCKS=1 IMAP_ENHANCEDIDLE=0 IMAP_KEYWORDS=1 IMAP_ACL=1
export IMAP_UMASK=022 IMAP_ULIMITD=131072 IMAP_TRASHFOLDERNAME=Trash IMAP_MOVE_EXPUNGE_TO_TRASH=0
export IMAP_MAILBOX_SANITY_CHECK=1 MAILDIRPATH=Maildir
exec $X/usr/sbin/couriertcpd -address=127.0.0.1 -maxprocs=500 -maxperip=500 \
  -nodnslookup -noidentlookup $PORT $X/usr/lib/courier/courier/imaplogin $X/usr/bin/imapd Maildir
"#;

impl Courier {
    fn start(root: &Path, dir: &Path, mail: &Path, users: &[String], password: &str) -> Courier {
        let etc = dir.join("etc/courier");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(
            etc.join("authdaemonrc"),
            "authmodulelist=\"authuserdb\"\ndaemons=5\nauthdaemonvar=/run/courier/authdaemon\nDEBUG_LOGIN=0\nDEFAULTOPTIONS=\"\"\nLOGGEROPTS=\"\"\n",
        )
        .unwrap();
        let hash = Command::new("openssl")
            .args(["passwd", "-6", "-salt", "mailbenchcourier", password])
            .output()
            .unwrap();
        assert!(hash.status.success());
        let hash = String::from_utf8(hash.stdout).unwrap().trim().to_string();
        let (mut db, mut shadow) = (String::new(), String::new());
        for u in users {
            let home = mail.join(u);
            for sub in ["cur", "new", "tmp"] {
                std::fs::create_dir_all(home.join("Maildir").join(sub)).unwrap();
            }
            let st = Command::new("chown")
                .args(["-R", "65534:65534"])
                .arg(&home)
                .status()
                .unwrap();
            assert!(st.success());
            db.push_str(&format!(
                "{u}\tuid=65534|gid=65534|home={}|mail={}\n",
                home.display(),
                home.join("Maildir").display()
            ));
            shadow.push_str(&format!("{u}\tsystempw={hash}\n"));
        }
        let lib = format!(
            "{}:{}",
            root.join("usr/lib").display(),
            root.join("usr/lib/x86_64-linux-gnu").display()
        );
        for (name, text) in [("userdb", db), ("userdbshadow", shadow)] {
            let mut c = Command::new(root.join("usr/lib/courier/courier-authlib/makedatprog"))
                .arg("-")
                .arg(etc.join(format!("{name}.tmp")))
                .arg(etc.join(format!("{name}.dat")))
                .env("LD_LIBRARY_PATH", &lib)
                .stdin(Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(format!("{text}.\n").as_bytes())
                .unwrap();
            assert!(c.wait().unwrap().success(), "makedatprog {name}");
        }
        let script = dir.join("start.sh");
        std::fs::write(&script, COURIER_START).unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.join("courier.log")).unwrap();
        // Its own process group: couriertcpd's SIGTERM handler signals its
        // whole group, which would otherwise be the test harness's (and
        // cargo's, and CI's).
        let unshare = Command::new("unshare")
            .process_group(0)
            .args([
                "-m",
                "-p",
                "-f",
                "--kill-child",
                "--propagation",
                "private",
                "sh",
            ])
            .arg(&script)
            .arg(root)
            .arg(dir)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut c = Courier { unshare, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                drop(s);
                break;
            }
            if let Ok(Some(st)) = c.unshare.try_wait() {
                panic!(
                    "courier exited ({st}): {}",
                    std::fs::read_to_string(dir.join("courier.log")).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "Courier IMAP did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        c
    }
}

#[test]
fn courier_imap() {
    if !servers_available() {
        return;
    }
    let Some(root) = courier_root() else {
        return;
    };
    let _one = serial();
    let work = tempfile::tempdir().unwrap();
    let local = work.path().join("local");
    let lists_file = lists(&local, work.path());
    let srv = LocalServer::start(&local, &TestLog::discard()).unwrap();
    let users: Vec<String> = (1..=USERS)
        .map(|n| format!("user{n}@{LOCAL_DOMAIN}"))
        .collect();
    let cdir = work.path().join("courier");
    let courier = Courier::start(
        &root,
        &cdir,
        &LocalServer::mail_dir(&local),
        &users,
        &srv.password,
    );
    let ep = Endpoints {
        imap: format!("imap://127.0.0.1:{}", courier.port),
        submission: format!("smtp://127.0.0.1:{}", srv.ports.submission),
        sieve: format!("sieve://127.0.0.1:{}", srv.ports.sieve),
        password: srv.password.clone(),
        lists_file,
    };
    let profile = profile_file(work.path());
    setup_and_run(
        "Courier IMAP 5.0 (Debian, unpacked)",
        &ep,
        &profile,
        work.path(),
    );
    drop(courier);
    drop(srv);
}
