//! The local Cyrus IMAP (`--server cyrus`): where its binaries are
//! (`--cyrus-root`), its generated `imapd.conf` and `cyrus.conf`, and its
//! users (a sasldb written with `db_load`). Cyrus IMAP 3.6 from Debian's
//! packages: `cyrus-common` (master, lmtpd, timsieved, the tools),
//! `cyrus-imapd` (imapd, idled) and `cyrus-caldav` (httpd, which serves
//! JMAP). `cyrus-imapd` conflicts with `dovecot-imapd` (both provide
//! `imap-server`), so the packages may be unpacked (`dpkg -x`) into a
//! folder of their own instead of installed: the binaries then run from
//! there with their libraries found through `LD_LIBRARY_PATH`.

use super::{LocalPorts, Sizing, chown, mkdir, write_file};
use mailbench_base::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The Cyrus programs the local target runs, below the root, with the
/// Debian package that ships each.
const PROGRAMS: &[(&str, &str)] = &[
    ("master", "cyrus-common"),
    ("lmtpd", "cyrus-common"),
    ("timsieved", "cyrus-common"),
    ("ctl_cyrusdb", "cyrus-common"),
    ("squatter", "cyrus-common"),
    ("imapd", "cyrus-imapd"),
    ("idled", "cyrus-imapd"),
    ("httpd", "cyrus-caldav"),
];

/// Where the programs are below the root (Debian's layout).
const BIN: &str = "usr/lib/cyrus/bin";
/// The libraries of an unpacked tree (libcyrus*.so).
const LIB: &str = "usr/lib/x86_64-linux-gnu";

/// Other files the Cyrus target needs on this host, with their packages:
/// `db_load` writes the users' sasldb, the SASL plugins read it (Cyrus and
/// Postfix's submission).
const HOST_FILES: &[(&str, &str)] = &[
    ("/usr/bin/db_load", "db-util"),
    (
        "/usr/lib/x86_64-linux-gnu/sasl2/libsasldb.so.2",
        "libsasl2-modules-db",
    ),
    (
        "/usr/lib/x86_64-linux-gnu/sasl2/libplain.so.2",
        "libsasl2-modules",
    ),
];

/// The mail domain's SASL realm (Cyrus's `servername`, Postfix's
/// `smtpd_sasl_local_domain`): the sasldb's keys carry it.
pub const REALM: &str = "mail.example.test";

/// The user a check logs in as at start.
pub const CHECK_LOGIN: &str = "mailbench-check";

/// The Cyrus root: `given` (`--cyrus-root`), else `/` when the packages are
/// installed. Its programs and this host's SASL files must be there, else
/// a usage error (exit 2) says what is missing and how to get it.
pub fn cyrus_root(given: Option<&Path>) -> Result<PathBuf> {
    let root = match given {
        Some(d) => {
            std::path::absolute(d).map_err(|e| Error::io("cannot resolve --cyrus-root", d, e))?
        }
        None => PathBuf::from("/"),
    };
    let missing: Vec<String> = PROGRAMS
        .iter()
        .filter(|(p, _)| !root.join(BIN).join(p).is_file())
        .map(|(p, pkg)| format!("{BIN}/{p} ({pkg})"))
        .collect();
    if !missing.is_empty() {
        let how = "Debian's cyrus-imapd conflicts with dovecot-imapd: unpack the packages instead, \
             e.g. `cd /var/tmp/debs && apt-get download cyrus-common cyrus-imapd cyrus-caldav && \
             for d in *.deb; do dpkg -x $d /opt/cyrus; done`, install the libraries they need \
             (scripts/packages/cyrus.txt) and give --cyrus-root /opt/cyrus";
        return Err(Error::usage(match given {
            Some(_) => format!(
                "--cyrus-root {}: {} missing. {how}",
                root.display(),
                missing.join(", ")
            ),
            None => {
                format!("--server cyrus: Cyrus IMAP is not installed (no /{BIN}/master). {how}")
            }
        }));
    }
    let host: Vec<&str> = HOST_FILES
        .iter()
        .filter(|(f, _)| !Path::new(f).exists())
        .map(|(_, pkg)| *pkg)
        .collect();
    if !host.is_empty() {
        return Err(Error::usage(format!(
            "--server cyrus needs Debian packages that are not installed: {m}. Install them with: \
             apt-get install --no-install-recommends {m}",
            m = host.join(" ")
        )));
    }
    Ok(root)
}

/// A program of the Cyrus root.
pub(super) fn program(root: &Path, name: &str) -> PathBuf {
    root.join(BIN).join(name)
}

/// `LD_LIBRARY_PATH` for an unpacked root (None for the installed one).
pub(super) fn library_path(root: &Path) -> Option<PathBuf> {
    (root != Path::new("/")).then(|| root.join(LIB))
}

/// The system user the Cyrus processes run as: Debian's `cyrus` when the
/// packages are installed, else `mail` (Cyrus refuses to run as root; its
/// master switches to this user at start).
pub(super) fn run_as() -> &'static str {
    let known = |u: &str| {
        Command::new("id")
            .args(["-u", u])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if known("cyrus") { "cyrus" } else { "mail" }
}

/// Where the Cyrus configuration files are.
pub(super) struct CyrusConfigs {
    pub imapd_conf: PathBuf,
    pub cyrus_conf: PathBuf,
    pub pid_file: PathBuf,
}

/// Creates Cyrus's folders in `dir/cyrus` (owned by `user`), writes its
/// configurations for `ports` and the users' sasldb (`logins`, every one
/// with `password`, plus the start-up check's user).
/// The folders of the Cyrus tree, owned by its user.
const SUBFOLDERS: [&str; 5] = ["config", "spool", "run", "sieve", "search"];

pub(super) fn write_cyrus(
    dir: &Path,
    root: &Path,
    ports: &LocalPorts,
    sizing: &Sizing,
    logins: &[String],
    password: &str,
) -> Result<CyrusConfigs> {
    let cy = dir.join("cyrus");
    for sub in SUBFOLDERS {
        mkdir(&cy.join(sub))?;
    }
    let user = run_as();
    let imapd_conf = cy.join("imapd.conf");
    write_file(&imapd_conf, &imapd_conf_text(&cy, user))?;
    let cyrus_conf = cy.join("cyrus.conf");
    write_file(
        &cyrus_conf,
        &cyrus_conf_text(root, &imapd_conf, ports, sizing),
    )?;
    write_sasldb(&cy, logins, password)?;
    for sub in SUBFOLDERS {
        chown_tree(&cy.join(sub), &format!("{user}:"))?;
    }
    // The sasldb: Cyrus (its user) and Postfix's submission (postfix) read it.
    chown(&sasldb_path(&cy), &format!("{user}:postfix"))?;
    Ok(CyrusConfigs {
        imapd_conf,
        cyrus_conf,
        pid_file: cy.join("run/master.pid"),
    })
}

fn chown_tree(path: &Path, owner: &str) -> Result<()> {
    let st = Command::new("chown")
        .arg("-R")
        .arg(owner)
        .arg(path)
        .status()
        .map_err(|e| Error::runtime(format!("cannot run chown: {e}")))?;
    if !st.success() {
        return Err(Error::runtime(format!(
            "chown -R {owner} {} failed",
            path.display()
        )));
    }
    Ok(())
}

/// The users' sasldb: `DIR/cyrus/sasldb2`.
pub(super) fn sasldb_path(cy: &Path) -> PathBuf {
    cy.join("sasldb2")
}

/// `imapd.conf`: folders below `cy`, the system user `user` the processes
/// run as, the SASL users of the sasldb
/// (plain-text passwords, allowed on loopback), INBOXes created at the
/// first login or delivery, JMAP on the HTTP service (it needs the
/// conversations database), `idled`'s socket so IDLE hears of new mail at
/// once.
pub(super) fn imapd_conf_text(cy: &Path, user: &str) -> String {
    let d = cy.display();
    format!(
        r#"# Generated by mailbench for --target local --server cyrus. Throwaway; do not edit.
configdirectory: {d}/config
partition-default: {d}/spool
defaultpartition: default
sievedir: {d}/sieve
servername: {REALM}
cyrus_user: {user}
# Users log in with their bare names: no virtual domains (as Debian ships it).
virtdomains: off
sasl_pwcheck_method: auxprop
sasl_auxprop_plugin: sasldb
sasl_sasldb_path: {d}/sasldb2
sasl_mech_list: PLAIN LOGIN
allowplaintext: yes
# A user's INBOX is made at its first login or delivery, with no quota.
autocreate_quota: 0
autocreate_post: yes
lmtp_downcase_rcpt: yes
idlesocket: {d}/run/idle
lmtpsocket: {d}/run/lmtp
notifysocket: {d}/run/notify
mboxname_lockpath: {d}/run/lock
proc_path: {d}/run/proc
httpmodules: jmap
conversations: yes
conversations_db: twoskip
statuscache: yes
# JMAP's text filters (Email/query `text`, `body`, `subject`) are Xapian
# searches in Cyrus (without an index they fail "serverFail"): new mail is
# indexed by the rolling squatter from the sync log.
search_engine: xapian
search_index_headers: no
defaultsearchtier: t1
t1searchpartition-default: {d}/search
sync_log: yes
sync_log_channels: squatter
"#
    )
}

/// `cyrus.conf`: the services on `p`'s loopback ports (IMAP, LMTP for
/// Postfix, ManageSieve, HTTP with JMAP), each program given the
/// configuration `conf`; IMAP and HTTP processes capped from `z` (one
/// process per connection, as Dovecot's imap); `idled` as a daemon;
/// the databases recovered at start and checkpointed every 30 minutes
/// (Debian's cyrus.conf).
pub(super) fn cyrus_conf_text(root: &Path, conf: &Path, p: &LocalPorts, z: &Sizing) -> String {
    let bin = root.join(BIN);
    let b = bin.display();
    let c = conf.display();
    let http = p.http.unwrap_or(0);
    format!(
        r#"# Generated by mailbench for --target local --server cyrus. Throwaway; do not edit.
START {{
  recover cmd="{b}/ctl_cyrusdb -C {c} -r"
}}
SERVICES {{
  imap cmd="{b}/imapd -C {c}" listen="127.0.0.1:{imap}" prefork=5 maxchild={imap_max}
  lmtp cmd="{b}/lmtpd -C {c} -a" listen="127.0.0.1:{lmtp}" prefork=1 maxchild=100
  sieve cmd="{b}/timsieved -C {c}" listen="127.0.0.1:{sieve}" prefork=0 maxchild=1024
  http cmd="{b}/httpd -C {c}" listen="127.0.0.1:{http}" prefork=1 maxchild={imap_max}
}}
EVENTS {{
  checkpoint cmd="{b}/ctl_cyrusdb -C {c} -c" period=30
}}
DAEMON {{
  idled cmd="{b}/idled -C {c}"
  squatter cmd="{b}/squatter -C {c} -R"
}}
"#,
        imap = p.imap,
        lmtp = p.lmtp,
        sieve = p.sieve,
        imap_max = z.imap_processes,
    )
}

/// The sasldb's records in `db_load`'s printable format: one
/// `login NUL realm NUL userPassword` key per user with the password as
/// its value (what `saslpasswd2 -c -u REALM login` writes), for every
/// login and the start-up check's user.
pub(super) fn sasldb_dump(logins: &[String], password: &str) -> String {
    let mut s = String::from("VERSION=3\nformat=print\ntype=hash\nHEADER=END\n");
    let mut seen = std::collections::HashSet::new();
    for login in logins.iter().map(String::as_str).chain([CHECK_LOGIN]) {
        if !seen.insert(login) {
            continue;
        }
        s.push(' ');
        s.push_str(&printable(&format!("{login}\0{REALM}\0userPassword")));
        s.push_str("\n ");
        s.push_str(&printable(password));
        s.push('\n');
    }
    s.push_str("DATA=END\n");
    s
}

/// `db_load -T`'s escaping: printable ASCII as is (a backslash doubled),
/// every other byte as `\xx` in hex.
fn printable(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:02x}")),
        }
    }
    out
}

/// Writes the sasldb with `db_load` (Berkeley DB, as libsasldb reads it)
/// into a new file, then renames it over the old one.
fn write_sasldb(cy: &Path, logins: &[String], password: &str) -> Result<()> {
    use std::io::Write;
    let db = sasldb_path(cy);
    let fresh = cy.join("sasldb2.new");
    let _ = std::fs::remove_file(&fresh);
    let mut child = Command::new("/usr/bin/db_load")
        .arg("-f")
        .arg("/dev/stdin")
        .arg(&fresh)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::runtime(format!("cannot run db_load: {e}")))?;
    let dump = sasldb_dump(logins, password);
    if let Some(mut w) = child.stdin.take() {
        w.write_all(dump.as_bytes())
            .map_err(|e| Error::runtime(format!("cannot feed db_load: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::runtime(format!("db_load failed: {e}")))?;
    if !out.status.success() {
        return Err(Error::runtime(format!(
            "db_load could not write the Cyrus users' sasldb {}: {}",
            fresh.display(),
            mailbench_base::secrets::redact(String::from_utf8_lossy(&out.stderr).trim())
        )));
    }
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o640))
            .map_err(|e| Error::io("cannot set the permissions of", &fresh, e))?;
    }
    std::fs::rename(&fresh, &db).map_err(|e| Error::io("cannot rename", &fresh, e))
}

/// Postfix's SASL configuration for its submission port (`smtpd.conf` in
/// `cyrus_sasl_config_path`): the same sasldb as Cyrus.
pub(super) fn postfix_sasl_conf(cy: &Path) -> String {
    format!(
        "pwcheck_method: auxprop\nauxprop_plugin: sasldb\nsasldb_path: {}\nmech_list: PLAIN LOGIN\n",
        sasldb_path(cy).display()
    )
}

/// Whether a line of Cyrus's master.stderr reports an error. Cyrus logs to
/// syslog (which a throwaway instance has no reader of); what reaches its
/// master's stderr are the fatal errors of the master and of the services
/// it starts (`Fatal error: ...`), the libraries' `IOERROR`/`DBERROR`
/// lines and failures to start a service.
pub(super) fn is_error_line(l: &str) -> bool {
    let l = l.to_ascii_lowercase();
    [
        "error", "fatal", "panic", "failed", "critical", "can't", "cannot", "unable",
    ]
    .iter()
    .any(|m| l.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports() -> LocalPorts {
        LocalPorts {
            imap: 1143,
            submission: 1587,
            sieve: 14190,
            lmtp: 1024,
            smtp: 1025,
            imaps: None,
            submissions: None,
            http: Some(1080),
        }
    }

    #[test]
    fn the_services_listen_on_loopback_with_the_run_s_limits() {
        let conf = Path::new("/d/cyrus/imapd.conf");
        let t = cyrus_conf_text(
            Path::new("/opt/cy"),
            conf,
            &ports(),
            &Sizing::for_sessions(3000),
        );
        assert!(t.contains(
            r#"imap cmd="/opt/cy/usr/lib/cyrus/bin/imapd -C /d/cyrus/imapd.conf" listen="127.0.0.1:1143" prefork=5 maxchild=3128"#
        ), "{t}");
        assert!(
            t.contains(r#"lmtpd -C /d/cyrus/imapd.conf -a" listen="127.0.0.1:1024""#),
            "{t}"
        );
        assert!(t.contains(r#"listen="127.0.0.1:14190""#), "{t}");
        assert!(
            t.contains(r#"httpd -C /d/cyrus/imapd.conf" listen="127.0.0.1:1080""#),
            "{t}"
        );
        assert!(
            t.contains(r#"idled cmd="/opt/cy/usr/lib/cyrus/bin/idled -C /d/cyrus/imapd.conf""#),
            "{t}"
        );
        assert!(
            !t.contains("0.0.0.0") && !t.contains("listen=\"imap"),
            "{t}"
        );
    }

    #[test]
    fn imapd_conf_keeps_everything_in_the_folder_and_serves_jmap() {
        let t = imapd_conf_text(Path::new("/d/cyrus"), "mail");
        for line in [
            "configdirectory: /d/cyrus/config",
            "partition-default: /d/cyrus/spool",
            "sasl_sasldb_path: /d/cyrus/sasldb2",
            "idlesocket: /d/cyrus/run/idle",
            "httpmodules: jmap",
            "conversations: yes",
            "autocreate_post: yes",
            "virtdomains: off",
            "cyrus_user: mail",
        ] {
            assert!(t.lines().any(|l| l == line), "{line} missing in {t}");
        }
        // Every path option is below the folder.
        for l in t.lines().filter(|l| l.contains(": /")) {
            assert!(l.contains(": /d/cyrus/"), "{l}");
        }
    }

    #[test]
    fn the_sasldb_dump_has_one_key_per_login_and_escapes_nul() {
        let d = sasldb_dump(&["user1".into(), "user2".into(), "user1".into()], "pw\\x");
        assert!(
            d.starts_with("VERSION=3\nformat=print\ntype=hash\nHEADER=END\n"),
            "{d}"
        );
        assert!(
            d.contains(" user1\\00mail.example.test\\00userPassword\n pw\\\\x\n"),
            "{d}"
        );
        assert_eq!(d.matches("userPassword").count(), 3, "{d}");
        assert!(d.contains(&format!(" {CHECK_LOGIN}\\00")), "{d}");
        assert!(d.ends_with("DATA=END\n"));
        assert_eq!(printable("a\u{1}é"), "a\\01\\c3\\a9");
    }

    #[test]
    fn a_root_without_the_programs_is_a_usage_error_naming_them() {
        let t = tempfile::tempdir().unwrap();
        let e = cyrus_root(Some(t.path())).unwrap_err();
        assert_eq!(e.exit_status().code(), 2);
        let m = e.to_string();
        assert!(m.contains("usr/lib/cyrus/bin/imapd (cyrus-imapd)"), "{m}");
        assert!(m.contains("usr/lib/cyrus/bin/httpd (cyrus-caldav)"), "{m}");
        assert!(m.contains("dpkg -x"), "{m}");
    }

    #[test]
    fn error_lines_of_the_master_stderr_are_told_from_the_rest() {
        for l in [
            "Fatal error: couldn't lock /d/cyrus/lock/mailboxes.db",
            "IOERROR: opening /d/cyrus/spool/user/load1/cyrus.index: No such file",
            "DBERROR: opening /d/cyrus/db: Permission denied",
            "master[123]: can't bind to 127.0.0.1:1143: Address in use",
            "httpd: unable to open sasldb",
        ] {
            assert!(is_error_line(l), "{l}");
        }
        for l in ["", "master[123]: process started", "ready for work"] {
            assert!(!is_error_line(l), "{l}");
        }
    }
}
