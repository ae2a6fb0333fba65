//! Bounded reads of the system's files under a root (`/`, or a fake tree in
//! tests), with failures as plain reasons naming the system path.

use super::{MAX_ATTR_BYTES, MAX_TABLE_BYTES};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// The system's files, read under `root`.
pub(crate) struct Sys {
    root: PathBuf,
    /// The root with its links resolved (to map canonical paths back).
    canonical_root: PathBuf,
}

/// Why a file could not be read, in plain words.
fn io_reason(shown: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("{shown} is not present"),
        std::io::ErrorKind::PermissionDenied => format!("{shown}: permission denied"),
        _ => format!("{shown}: {e}"),
    }
}

impl Sys {
    pub(crate) fn new(root: &Path) -> Sys {
        Sys {
            root: root.to_path_buf(),
            canonical_root: std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()),
        }
    }

    /// The file of system path `sys_path` (`/proc/cpuinfo`) under the root.
    pub(crate) fn at(&self, sys_path: &Path) -> PathBuf {
        let rel: PathBuf = (sys_path.components())
            .filter(|c| !matches!(c, Component::RootDir | Component::Prefix(_)))
            .collect();
        self.root.join(rel)
    }

    /// The system path of a file under the root (the inverse of [`Sys::at`]);
    /// None when it lies outside the root.
    pub(crate) fn system_path(&self, p: &Path) -> Option<PathBuf> {
        let rel = p.strip_prefix(&self.canonical_root).ok()?;
        Some(Path::new("/").join(rel))
    }

    /// A file of at most `cap` bytes as text (invalid UTF-8 replaced).
    fn read_capped(&self, sys_path: &Path, cap: u64) -> Result<String, String> {
        let shown = sys_path.display().to_string();
        let f = std::fs::File::open(self.at(sys_path)).map_err(|e| io_reason(&shown, &e))?;
        let mut buf = Vec::new();
        (f.take(cap + 1).read_to_end(&mut buf)).map_err(|e| io_reason(&shown, &e))?;
        if buf.len() as u64 > cap {
            return Err(format!(
                "{shown} is larger than {cap} bytes: not read (a bound of mailbench)"
            ));
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// A table file (/proc/cpuinfo, mountinfo, os-release), at most
    /// [`MAX_TABLE_BYTES`].
    pub(crate) fn table(&self, sys_path: &str) -> Result<String, String> {
        self.read_capped(Path::new(sys_path), MAX_TABLE_BYTES)
    }

    /// One attribute (a sysfs or DMI file): at most [`MAX_ATTR_BYTES`], trimmed,
    /// control characters replaced by spaces; an empty one is a reason.
    pub(crate) fn attr(&self, sys_path: &Path) -> Result<String, String> {
        let text = self.read_capped(sys_path, MAX_ATTR_BYTES)?;
        let clean: String = (text.trim().chars())
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        if clean.is_empty() {
            return Err(format!("{} is empty", sys_path.display()));
        }
        Ok(clean)
    }

    /// An attribute that is a number.
    pub(crate) fn number(&self, sys_path: &Path) -> Result<u64, String> {
        let text = self.attr(sys_path)?;
        text.parse::<u64>().map_err(|_| {
            format!(
                "{} holds {:?}, not a number",
                sys_path.display(),
                clip(&text)
            )
        })
    }

    /// Whether a system path exists under the root (a dangling link counts).
    pub(crate) fn exists(&self, sys_path: &Path) -> bool {
        std::fs::symlink_metadata(self.at(sys_path)).is_ok()
    }

    /// The entries of a system folder, sorted by name: at most `cap` (true
    /// when there were more), or why the folder could not be listed.
    pub(crate) fn list(&self, sys_path: &Path, cap: usize) -> Result<(Vec<String>, bool), String> {
        let shown = sys_path.display().to_string();
        let rd = std::fs::read_dir(self.at(sys_path)).map_err(|e| io_reason(&shown, &e))?;
        let mut names: Vec<String> = rd
            .take(cap.saturating_mul(4))
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let more = names.len() > cap;
        names.truncate(cap);
        Ok((names, more))
    }

    /// The last component of the target of a symbolic link (a driver, a
    /// device's name).
    pub(crate) fn link_name(&self, sys_path: &Path) -> Option<String> {
        let target = std::fs::read_link(self.at(sys_path)).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }

    /// The canonical system path of a system path (links followed under
    /// the root).
    pub(crate) fn canonical(&self, sys_path: &Path) -> Result<PathBuf, String> {
        let shown = sys_path.display().to_string();
        let real = std::fs::canonicalize(self.at(sys_path)).map_err(|e| io_reason(&shown, &e))?;
        self.system_path(&real)
            .ok_or_else(|| format!("{shown} leads outside the system root"))
    }
}

/// A value cut to a length fit for a message.
pub(crate) fn clip(s: &str) -> String {
    const MAX: usize = 64;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(MAX).collect();
        t.push('…');
        t
    }
}
