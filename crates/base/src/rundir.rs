//! Run folders: every run writes `DIR/<command>-<UTC timestamp>/` holding
//! `result.json`, `summary.txt`, `report.html`, `test.log` and interval data.
//! Also the ownership manifest that marks data folders mailbench created, and
//! the one way mailbench creates files: never through a symlink, never over a
//! file it did not make ([`create_new`], [`open_append`], [`write_atomic`] with
//! an unpredictable temporary name, then a rename).

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub mod lock;

/// A run's output folder and its test log.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub path: PathBuf,
    pub log: TestLog,
}

impl RunDir {
    /// Creates `base/<command>-<timestamp>` (with `-2`, `-3`... if it exists).
    /// `command` is e.g. `storage-run`.
    pub fn create(base: &Path, command: &str) -> Result<RunDir> {
        std::fs::create_dir_all(base).map_err(|e| {
            Error::runtime(format!(
                "cannot create the results folder {}: {e}",
                base.display()
            ))
        })?;
        let stamp = crate::host::now_rfc3339().replace([':', '-'], "");
        let mut path = base.join(format!("{command}-{stamp}"));
        let mut n = 2;
        while path.exists() {
            path = base.join(format!("{command}-{stamp}-{n}"));
            n += 1;
        }
        std::fs::create_dir(&path)
            .map_err(|e| Error::runtime(format!("cannot create {}: {e}", path.display())))?;
        let log = TestLog::open(&path.join("test.log"))?;
        Ok(RunDir { path, log })
    }

    /// Uses `path` as the run folder (created if missing), appending to its
    /// test.log: one host's part of a test whose folder another made.
    pub fn at(path: &Path) -> Result<RunDir> {
        std::fs::create_dir_all(path)
            .map_err(|e| Error::runtime(format!("cannot create {}: {e}", path.display())))?;
        let log = TestLog::open(&path.join("test.log"))?;
        Ok(RunDir {
            path: path.to_path_buf(),
            log,
        })
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes `name` atomically; a text (UTF-8) has its secrets redacted.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<PathBuf> {
        let path = self.file(name);
        match std::str::from_utf8(bytes) {
            Ok(text) => write_text(&path, text)?,
            Err(_) => write_atomic(&path, bytes)?,
        }
        Ok(path)
    }

    /// Writes `items` as JSON lines (one object a line), atomically, every
    /// string redacted.
    pub fn write_jsonl<T: serde::Serialize>(&self, name: &str, items: &[T]) -> Result<PathBuf> {
        let mut text = Vec::new();
        for item in items {
            let mut v = serde_json::to_value(item)
                .map_err(|e| Error::runtime(format!("cannot encode {name}: {e}")))?;
            crate::secrets::redact_json(&mut v);
            serde_json::to_writer(&mut text, &v)
                .map_err(|e| Error::runtime(format!("cannot encode {name}: {e}")))?;
            text.push(b'\n');
        }
        let path = self.file(name);
        write_atomic(&path, &text)?;
        Ok(path)
    }

    /// Writes `value` as pretty JSON, atomically, every string redacted.
    pub fn write_json<T: serde::Serialize>(&self, name: &str, value: &T) -> Result<PathBuf> {
        let path = self.file(name);
        write_json(&path, value)?;
        Ok(path)
    }
}

/// Writes a text file atomically with every registered secret redacted
/// ([`crate::secrets`]): summaries, reports, configurations.
pub fn write_text(path: &Path, text: &str) -> Result<()> {
    write_atomic(path, crate::secrets::redact(text).as_bytes())
}

/// Writes `value` as pretty JSON atomically, every string redacted.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let name = path.display();
    let mut v = serde_json::to_value(value)
        .map_err(|e| Error::runtime(format!("cannot encode {name}: {e}")))?;
    crate::secrets::redact_json(&mut v);
    let text = serde_json::to_vec_pretty(&v)
        .map_err(|e| Error::runtime(format!("cannot encode {name}: {e}")))?;
    write_atomic(path, &text)
}

/// Writes a file atomically: a temporary file with an unpredictable name in
/// the same folder, created new (`O_EXCL`, so nothing planted there is
/// followed or reused), fsync, rename over `path` (which replaces a symlink
/// of that name rather than following it), fsync of the folder (a rename is
/// on disk only once its folder is: without it, a crash could bring back the
/// old file after its successor was used).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let folder = folder_of(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let res = (|| -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .permissions(std::fs::Permissions::from_mode(0o666))
            .tempfile_in(folder)?;
        tmp.write_all(bytes)?;
        tmp.as_file().sync_all()?;
        tmp.persist(path).map_err(|e| e.error)?;
        File::open(folder)?.sync_all()
    })();
    res.map_err(|e| Error::io("cannot write", path, e))
}

/// Creates `path` for writing; it must not exist (not even as a symlink).
pub fn create_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Creates `path` anew with permissions `mode` (less the umask): whatever file
/// or symlink has that name is unlinked first, never followed; a folder of
/// that name is an error. For files mailbench rewrites in a folder of its own
/// (the local target's configurations and logs).
pub fn create_replacing(path: &Path, mode: u32) -> std::io::Result<File> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "a folder has that name",
            ));
        }
        Ok(_) => std::fs::remove_file(path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Opens `path` to append (created if missing), never through a symlink.
pub fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Opens `path` to read, refusing a symlink (a file mailbench made itself).
pub fn open_read_nofollow(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// The folder a file named `path` is in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The timestamped test log (`test.log`). Cheap to clone; lines from several
/// threads interleave whole. Optionally echoes to stderr (`-v`).
#[derive(Debug, Clone)]
pub struct TestLog {
    inner: Arc<Mutex<LogInner>>,
}

#[derive(Debug)]
struct LogInner {
    file: Option<File>,
    echo: bool,
    /// The first write that failed (said once on stderr).
    failed: Option<String>,
}

impl TestLog {
    pub fn open(path: &Path) -> Result<TestLog> {
        let file = open_append(path).map_err(|e| Error::io("cannot open the test log", path, e))?;
        Ok(TestLog {
            inner: Arc::new(Mutex::new(LogInner {
                file: Some(file),
                echo: false,
                failed: None,
            })),
        })
    }

    /// A log that writes nowhere (until a run folder exists).
    pub fn discard() -> TestLog {
        TestLog {
            inner: Arc::new(Mutex::new(LogInner {
                file: None,
                echo: false,
                failed: None,
            })),
        }
    }

    pub fn set_echo(&self, echo: bool) {
        if let Ok(mut g) = self.inner.lock() {
            g.echo = echo;
        }
    }

    /// The first write of this log that failed, if one did.
    pub fn write_error(&self) -> Option<String> {
        self.inner.lock().ok().and_then(|g| g.failed.clone())
    }

    /// Appends `<RFC 3339 time> <message>`, secrets redacted.
    pub fn line(&self, msg: impl AsRef<str>) {
        let now = humantime::format_rfc3339_millis(std::time::SystemTime::now());
        let line = format!("{now} {}\n", crate::secrets::redact(msg.as_ref()));
        if let Ok(mut g) = self.inner.lock() {
            // A failing log write must not end the run: it is said once on
            // stderr and kept ([`TestLog::write_error`]): the output path records it
            // in the result (`run.log_write_error`).
            if let Some(Err(e)) = g.file.as_mut().map(|f| f.write_all(line.as_bytes()))
                && g.failed.is_none()
            {
                let e = format!("test.log: a line could not be written: {e}");
                crate::secrets::warn(&format!("mailbench: {e}"));
                g.failed = Some(e);
            }
            if g.echo {
                eprint!("{line}");
            }
        }
    }
}

/// The manifest file that marks a folder as mailbench's own.
pub const MANIFEST: &str = ".mailbench-owned";

/// Makes sure `dir` is ours to write: it does not exist (and is then created with
/// a manifest), or it is empty, or it holds our manifest. A folder holding files
/// mailbench did not create is refused (exit 2) before anything is written.
/// With `dry_run` nothing is created, only checked. A folder that holds our
/// manifest is then held by this process until it ends ([`lock`]): one
/// held by another command is refused (exit 2) naming it.
pub fn claim_folder(dir: &Path, dry_run: bool) -> Result<()> {
    let manifest = dir.join(MANIFEST);
    match std::fs::symlink_metadata(&manifest) {
        Ok(m) if m.is_file() => return lock::hold(dir),
        Ok(_) => {
            return Err(Error::usage(format!(
                "{} is not a file mailbench wrote (a symlink or a folder): refusing to use {}",
                manifest.display(),
                dir.display()
            )));
        }
        Err(_) => {}
    }
    if dir.exists() {
        if !dir.is_dir() {
            return Err(Error::usage(format!(
                "{} exists and is not a folder; give a folder path",
                dir.display()
            )));
        }
        let mut entries = std::fs::read_dir(dir)
            .map_err(|e| Error::usage(format!("cannot read folder {}: {e}", dir.display())))?;
        if let Some(Ok(first)) = entries.next() {
            return Err(Error::usage(format!(
                "refusing to use {}: it holds files mailbench did not create (e.g. {}); \
                 give an empty or new folder",
                dir.display(),
                first.file_name().to_string_lossy()
            )));
        }
    }
    if dry_run {
        return Ok(());
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::usage(format!("cannot create folder {}: {e}", dir.display())))?;
    let text = format!(
        "This folder was created by mailbench {} on {}.\nmailbench may delete or overwrite anything in it.\n",
        env!("CARGO_PKG_VERSION"),
        crate::host::now_rfc3339()
    );
    create_new(&manifest)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Error::usage(format!("cannot write in folder {}: {e}", dir.display())))?;
    lock::hold(dir)
}

/// Makes room for mailbench to create `name` in `dir`, a folder [`claim_folder`]
/// claimed: whatever has that name there (a file of an earlier run, or a
/// symlink, which is removed and never followed) goes; a folder of that name is
/// refused. The caller then creates the file new (`create_new`, `O_NOFOLLOW`),
/// so a write never lands outside the folder or in a file mailbench did not make.
pub fn make_room(dir: &Path, name: &str) -> Result<PathBuf> {
    if !dir.join(MANIFEST).is_file() {
        return Err(Error::runtime(format!(
            "{} is not a folder mailbench claimed (no {MANIFEST}); refusing to write {name} there",
            dir.display()
        )));
    }
    let path = dir.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_dir() => Err(Error::runtime(format!(
            "{} is a folder: remove it or give another folder",
            path.display()
        ))),
        Ok(_) => {
            std::fs::remove_file(&path).map_err(|e| Error::io("cannot replace", &path, e))?;
            Ok(path)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(path),
        Err(e) => Err(Error::io("cannot inspect", &path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test.log line that cannot be written is kept (and said), not lost.
    #[test]
    fn a_failing_test_log_write_is_kept() {
        let log = TestLog::open(Path::new("/dev/full")).unwrap();
        assert_eq!(log.write_error(), None);
        log.line("one");
        log.line("two");
        let e = log.write_error().unwrap();
        assert!(
            e.starts_with("test.log: a line could not be written"),
            "{e}"
        );
    }

    #[test]
    fn an_atomic_write_replaces_the_file_and_leaves_no_temporary() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("result.json");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(t.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert_eq!(folder_of(&p), t.path());
        assert_eq!(folder_of(Path::new("result.json")), Path::new("."));
    }

    /// Every way mailbench creates a file, against a symlink planted at the
    /// file's name and at every temporary name an earlier version used: the
    /// file outside the folder is never written.
    #[test]
    fn no_writer_follows_a_planted_link() {
        type Writer = fn(&Path) -> std::io::Result<()>;
        fn io(r: Result<()>) -> std::io::Result<()> {
            r.map_err(|e| std::io::Error::other(e.to_string()))
        }
        let writers: [(&str, Writer); 8] = [
            ("write_atomic", |p| io(write_atomic(p, b"new"))),
            ("write_text", |p| io(write_text(p, "new"))),
            ("write_json", |p| io(write_json(p, &"new"))),
            ("create_new", |p| {
                create_new(p).and_then(|mut f| f.write_all(b"new"))
            }),
            ("open_append", |p| {
                open_append(p).and_then(|mut f| f.write_all(b"new"))
            }),
            ("create_replacing", |p| {
                create_replacing(p, 0o600).and_then(|mut f| f.write_all(b"new"))
            }),
            ("TestLog::open", |p| {
                io(TestLog::open(p).map(|l| l.line("new")))
            }),
            ("RunDir::write", |p| {
                let d = RunDir {
                    path: folder_of(p).to_path_buf(),
                    log: TestLog::discard(),
                };
                let name = p.file_name().unwrap().to_str().unwrap();
                io(d.write(name, b"new").map(|_| ()))
            }),
        ];
        for (what, write) in writers {
            let t = tempfile::tempdir().unwrap();
            let victim = t.path().join("victim");
            std::fs::write(&victim, b"precious").unwrap();
            let dir = t.path().join("run");
            std::fs::create_dir(&dir).unwrap();
            let target = dir.join("report.html");
            for planted in ["report.html", "report.tmp-write", "report.html.tmp-write"] {
                std::os::unix::fs::symlink(&victim, dir.join(planted)).unwrap();
            }
            let _ = write(&target);
            assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "{what}");
        }
    }

    #[test]
    fn an_atomic_write_into_a_missing_folder_names_the_file() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("gone/result.json");
        let e = write_atomic(&p, b"x").unwrap_err().to_string();
        assert!(e.contains("gone/result.json"), "{e}");
    }

    #[test]
    fn run_folders_are_unique_and_logged() {
        let t = tempfile::tempdir().unwrap();
        let a = RunDir::create(t.path(), "storage-run").unwrap();
        let b = RunDir::create(t.path(), "storage-run").unwrap();
        assert_ne!(a.path, b.path);
        a.log.line("phase init");
        let text = std::fs::read_to_string(a.file("test.log")).unwrap();
        assert!(text.trim_end().ends_with("phase init"));
        assert!(text.starts_with("20"));
        a.write_json("result.json", &serde_json::json!({"a": 1}))
            .unwrap();
        assert!(a.file("result.json").is_file());
        a.write_jsonl(
            "intervals.jsonl",
            &[serde_json::json!({"t": 1}), serde_json::json!({"t": 2})],
        )
        .unwrap();
        let lines = std::fs::read_to_string(a.file("intervals.jsonl")).unwrap();
        assert_eq!(lines, "{\"t\":1}\n{\"t\":2}\n");
        // Another host's part of the test: the folder exists, the log goes on.
        let again = RunDir::at(&a.path).unwrap();
        again.log.line("rank 1 joins");
        let text = std::fs::read_to_string(a.file("test.log")).unwrap();
        assert!(text.contains("phase init") && text.contains("rank 1 joins"));
    }

    #[test]
    fn foreign_folders_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let mine = t.path().join("mine");
        claim_folder(&mine, false).unwrap();
        std::fs::write(mine.join("db.edb"), b"x").unwrap();
        claim_folder(&mine, false).unwrap();

        let foreign = t.path().join("foreign");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(foreign.join("thesis.doc"), b"x").unwrap();
        let err = claim_folder(&foreign, false).unwrap_err();
        assert_eq!(err.exit_status().code(), 2);
        assert!(err.to_string().contains("thesis.doc"));

        let empty = t.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        claim_folder(&empty, true).unwrap();
        assert!(!empty.join(MANIFEST).exists(), "dry run writes nothing");
    }
}
