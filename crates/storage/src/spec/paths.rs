//! The folders' checks before anything is written: no devices, each folder
//! new, empty or ours and writable, and the free space for what the command
//! still creates.

use super::StorageSpec;
use mailbench_base::{ByteSize, Error, Result};
use std::path::{Path, PathBuf};

/// [`super::SpecExt::check_paths`]: checks `spec`'s folders before anything is
/// written.
pub(super) fn check_paths(spec: &StorageSpec, space: Space) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    for v in spec.volumes.iter().chain(spec.log_volumes.iter()) {
        if let Ok(m) = std::fs::metadata(v)
            && (m.file_type().is_block_device() || m.file_type().is_char_device())
        {
            let kind = if m.file_type().is_block_device() {
                "block device"
            } else {
                "character device"
            };
            return Err(Error::usage(format!(
                "{} is a {kind}: mailbench writes its databases into a folder; make a file \
                 system on the device, mount it and give a folder on it",
                v.display()
            )));
        }
        mailbench_base::rundir::claim_folder(v, true)?;
        let anc = existing_ancestor(v);
        let meta = std::fs::metadata(anc)
            .map_err(|e| Error::usage(format!("path {} is not usable: {e}", v.display())))?;
        if meta.permissions().readonly() || !writable(anc) {
            return Err(Error::usage(format!(
                "path {} is not writable",
                v.display()
            )));
        }
    }
    if space == Space::None {
        return Ok(());
    }
    // Free space per file system (several folders may share one).
    use std::collections::BTreeMap;
    use std::os::unix::fs::MetadataExt;
    let mut need: BTreeMap<u64, (u64, PathBuf)> = BTreeMap::new();
    for i in &spec.instances {
        let db_need = if i.db_path.exists() {
            0
        } else {
            i.size_bytes + spec.growth_reserve_bytes
        };
        for (p, n) in [(&i.volume, db_need), (&i.log_dir, spec.log_space_bytes)] {
            let anc = existing_ancestor(p);
            let dev = std::fs::metadata(anc).map(|m| m.dev()).unwrap_or(0);
            let e = need.entry(dev).or_insert((0, anc.to_path_buf()));
            e.0 += n;
        }
    }
    for (needed, path) in need.values() {
        let free = mailbench_io::free_space(path).map_err(|e| {
            Error::usage(format!("cannot read free space of {}: {e}", path.display()))
        })?;
        if *needed > free {
            return Err(Error::usage(format!(
                "not enough free space on {}: the databases (with their {}% growth reserve) and logs \
                 need {}, {} is available; use fewer or smaller databases",
                path.display(),
                spec.profile.growth_reserve_pct,
                ByteSize(*needed),
                ByteSize(free)
            )));
        }
    }
    Ok(())
}

/// What a command still writes, for the free-space check of
/// [`super::SpecExt::check_paths`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// init, run, recover with new log files: the databases still to be
    /// created (with their growth reserve) and the log budget.
    Create,
    /// verify, backup (its copies are checked on their own folder), recover of
    /// what a crash left: nothing new on the database and log folders, so a
    /// full disk does not block them.
    None,
}

/// Whether this process may create files in `dir` (an existing folder),
/// asked of the kernel (`access(2)` with the effective ids), without
/// creating anything there.
fn writable(dir: &Path) -> bool {
    mailbench_io::writable(dir)
}

/// The nearest existing folder at or above `p`.
pub fn existing_ancestor(p: &Path) -> &Path {
    let mut cur = p;
    loop {
        if cur.exists() {
            return cur;
        }
        match cur.parent() {
            Some(par) if !par.as_os_str().is_empty() => cur = par,
            _ => return Path::new("."),
        }
    }
}
