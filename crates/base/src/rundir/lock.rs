//! One owner per folder: a command that uses a folder mailbench owns (its
//! databases and logs, a backup's copies, a local target's or a trace's
//! folder) holds an advisory `flock` on the folder's ownership manifest
//! (`.mailbench-owned`, [`super::MANIFEST`]) for the rest of its life.
//! A second command on a held folder is refused (exit 2) before it writes
//! anything, naming the holder's PID and command line. The kernel drops the
//! lock when its holder ends, however it ends, so a killed command never
//! blocks the next.
//!
//! Taken by [`super::claim_folder`], the one check every folder
//! mailbench writes into goes through; held in a process-wide list (a folder
//! claimed twice by one command is held once).

use crate::error::{Error, Result};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

/// The folders this process holds: (device, inode) of each manifest and the
/// open file whose lock it is (closing it would drop the lock).
static HELD: Mutex<Vec<(u64, u64, File)>> = Mutex::new(Vec::new());

/// Longest command line quoted in a refusal.
const SHOWN_COMMAND: usize = 300;

/// Holds `dir`'s lock (its manifest must exist) until this process ends; a
/// folder another process holds is refused by name (exit 2).
pub fn hold(dir: &Path) -> Result<()> {
    let manifest = dir.join(super::MANIFEST);
    let file = super::open_read_nofollow(&manifest)
        .map_err(|e| Error::io("cannot open the ownership manifest", &manifest, e))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io("cannot inspect", &manifest, e))?;
    let key = (meta.dev(), meta.ino());
    let mut held = match HELD.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    if held.iter().any(|(d, i, _)| (*d, *i) == key) {
        return Ok(());
    }
    match file.try_lock() {
        Ok(()) => {
            held.push((key.0, key.1, file));
            Ok(())
        }
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::usage(format!(
            "{} is in use by another command ({}); wait for it to end, or give another folder",
            dir.display(),
            holder(key.0, key.1)
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io("cannot lock", &manifest, e)),
    }
}

/// Whether this process holds `dir`'s lock.
pub fn holds(dir: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(dir.join(super::MANIFEST)) else {
        return false;
    };
    let held = match HELD.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    held.iter()
        .any(|(d, i, _)| (*d, *i) == (meta.dev(), meta.ino()))
}

/// "PID n: its command line", from /proc/locks and /proc/PID/cmdline.
fn holder(dev: u64, ino: u64) -> String {
    let locks = crate::limits::read_text_capped(
        Path::new("/proc/locks"),
        crate::limits::MAX_PROC_FILE_BYTES,
        "/proc/locks",
    )
    .unwrap_or_default();
    match lock_holder(&locks, dev, ino) {
        Some(pid) => format!("PID {pid}: {}", command_line(pid)),
        None => "its PID is not in /proc/locks".into(),
    }
}

/// The PID holding a `flock` on file (`dev`, `ino`) in a /proc/locks text.
pub fn lock_holder(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let want = format!("{:02x}:{:02x}:{ino}", major(dev), minor(dev));
    locks.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // "1: FLOCK ADVISORY WRITE 1234 08:01:5678 0 EOF" ("->" marks a waiter).
        if f.len() >= 6 && f[1] == "FLOCK" && f[5] == want {
            f[4].parse().ok()
        } else {
            None
        }
    })
}

/// The device numbers as the kernel prints them (glibc's encoding of `dev_t`).
fn major(dev: u64) -> u64 {
    ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)
}

fn minor(dev: u64) -> u64 {
    (dev & 0xff) | ((dev >> 12) & !0xff)
}

fn command_line(pid: u32) -> String {
    let path = format!("/proc/{pid}/cmdline");
    let Ok(bytes) =
        crate::limits::read_capped(Path::new(&path), crate::limits::MAX_PROC_FILE_BYTES, &path)
    else {
        return "its command line is not readable".into();
    };
    let text: String = String::from_utf8_lossy(&bytes)
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let mut shown: String = text.chars().take(SHOWN_COMMAND).collect();
    if shown.len() < text.len() {
        shown.push_str(" ...");
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_found_in_proc_locks() {
        let locks = "1: POSIX  ADVISORY  WRITE 11 08:01:77 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 4242 08:01:5678 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 99 08:01:5678 0 EOF\n";
        let dev = (8 << 8) | 1;
        assert_eq!(lock_holder(locks, dev, 5678), Some(4242));
        assert_eq!(
            lock_holder(locks, dev, 77),
            None,
            "POSIX locks are not ours"
        );
        assert_eq!(lock_holder(locks, dev, 1), None);
        // Large device numbers (e.g. 259:65536 of an NVMe partition).
        let (maj, min) = (259u64, 65536u64);
        let big = (maj << 8) | (min & 0xff) | ((min & !0xff) << 12);
        assert_eq!((major(big), minor(big)), (259, 65536));
    }

    #[test]
    fn a_held_folder_is_refused_naming_the_holder_and_a_closed_lock_frees_it() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("db");
        crate::rundir::claim_folder(&dir, false).unwrap();
        assert!(holds(&dir), "claiming a folder holds it");
        // Held twice by this process: one lock.
        hold(&dir).unwrap();
        // Another holder (another open file, as another process would have).
        let other = t.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join(crate::rundir::MANIFEST), "x").unwrap();
        let theirs = File::open(other.join(crate::rundir::MANIFEST)).unwrap();
        theirs.lock().unwrap();
        let e = hold(&other).unwrap_err();
        assert_eq!(e.exit_status().code(), 2);
        let m = e.to_string();
        assert!(m.contains(&format!("PID {}", std::process::id())), "{m}");
        assert!(m.contains("other"), "{m}");
        drop(theirs);
        hold(&other).unwrap();
    }
}
