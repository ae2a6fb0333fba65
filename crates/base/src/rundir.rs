//! Run folders: every run writes `DIR/<command>-<UTC timestamp>/` holding
//! `result.json`, `summary.txt`, `report.html`, `test.log` and interval data.
//! Also the ownership manifest that marks data folders mailbench created.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

    /// Writes `name` atomically (write to a temporary name, then rename).
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<PathBuf> {
        let path = self.file(name);
        write_atomic(&path, bytes)?;
        Ok(path)
    }

    /// Writes `items` as JSON lines (one object a line), atomically.
    pub fn write_jsonl<T: serde::Serialize>(&self, name: &str, items: &[T]) -> Result<PathBuf> {
        let mut text = Vec::new();
        for item in items {
            serde_json::to_writer(&mut text, item)
                .map_err(|e| Error::runtime(format!("cannot encode {name}: {e}")))?;
            text.push(b'\n');
        }
        self.write(name, &text)
    }

    pub fn write_json<T: serde::Serialize>(&self, name: &str, value: &T) -> Result<PathBuf> {
        let text = serde_json::to_vec_pretty(value)
            .map_err(|e| Error::runtime(format!("cannot encode {name}: {e}")))?;
        self.write(name, &text)
    }
}

/// Writes a file atomically: temporary name in the same folder, fsync, rename,
/// fsync of the folder (a rename is on disk only once its folder is: without
/// it, a crash could bring back the old file after its successor was used).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp-write");
    let folder = folder_of(path);
    let res = (|| -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(folder)?.sync_all()
    })();
    res.map_err(|e| Error::io("cannot write", path, e))
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
}

impl TestLog {
    pub fn open(path: &Path) -> Result<TestLog> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io("cannot open the test log", path, e))?;
        Ok(TestLog {
            inner: Arc::new(Mutex::new(LogInner {
                file: Some(file),
                echo: false,
            })),
        })
    }

    /// A log that writes nowhere (until a run folder exists).
    pub fn discard() -> TestLog {
        TestLog {
            inner: Arc::new(Mutex::new(LogInner {
                file: None,
                echo: false,
            })),
        }
    }

    pub fn set_echo(&self, echo: bool) {
        if let Ok(mut g) = self.inner.lock() {
            g.echo = echo;
        }
    }

    /// Appends `<RFC 3339 time> <message>`.
    pub fn line(&self, msg: impl AsRef<str>) {
        let now = humantime::format_rfc3339_millis(std::time::SystemTime::now());
        let line = format!("{now} {}\n", msg.as_ref());
        if let Ok(mut g) = self.inner.lock() {
            if let Some(f) = g.file.as_mut() {
                // A failing log write must not end the run; the result still carries it.
                let _ = f.write_all(line.as_bytes());
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
/// With `dry_run` nothing is created, only checked.
pub fn claim_folder(dir: &Path, dry_run: bool) -> Result<()> {
    if dir.join(MANIFEST).is_file() {
        return Ok(());
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
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(MANIFEST))
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Error::usage(format!("cannot write in folder {}: {e}", dir.display())))
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
