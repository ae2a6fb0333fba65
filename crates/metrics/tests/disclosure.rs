//! Detection on this machine: the root filesystem, a tmpfs, and a loop device
//! on a file in a temporary folder (ext4 made on it and mounted). Each
//! detected fact is checked against what another tool or a different file
//! reports (stat, uname, getconf, /sys/class/block/<name>/dev).
//!
//! The loop case needs root (losetup, mkfs.ext4, mount): outside CI it is
//! skipped with a printed reason when they are not permitted; in CI (root on
//! Debian) their failure fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mailbench_metrics::disclosure::{DeviceKind, Fact, PathFacts, detect};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn print(rows: &[(String, String)]) {
    for (label, text) in rows {
        println!("{label:<40} {text}");
    }
}

/// `major:minor` of the filesystem holding `p`, from stat(2).
fn st_dev(p: &Path) -> String {
    let dev = std::fs::metadata(p).unwrap().dev();
    format!("{}:{}", libc::major(dev), libc::minor(dev))
}

fn output(cmd: &str, args: &[&str]) -> String {
    let o = Command::new(cmd).args(args).output().unwrap();
    assert!(o.status.success(), "{cmd} {args:?}: {o:?}");
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

/// The path's filesystem is the one stat(2) sees, and its first device is
/// the block device of that number (or the filesystem has none, and says so).
fn check_path(p: &PathFacts, on: &Path) {
    let fs = p.filesystem.known().unwrap_or_else(|| panic!("{p:#?}"));
    assert_eq!(fs.device_number, st_dev(on), "{p:#?}");
    if fs.device_number.starts_with("0:") {
        let why = p.devices.reason().unwrap_or_else(|| panic!("{p:#?}"));
        assert!(
            why.starts_with(&format!("{} has no block device", fs.fs_type)),
            "{why}"
        );
        return;
    }
    let devs = p.devices.known().unwrap_or_else(|| panic!("{p:#?}"));
    let top = &devs[0];
    let dev = std::fs::read_to_string(format!("/sys/class/block/{}/dev", top.name)).unwrap();
    assert_eq!(dev.trim(), fs.device_number);
    for d in devs {
        let size = std::fs::read_to_string(format!("/sys/class/block/{}/size", d.name)).unwrap();
        let size: u64 = size.trim().parse().unwrap();
        assert_eq!(d.size_bytes, Fact::Known(size * 512), "{d:#?}");
    }
    // The stack ends in devices with nothing beneath.
    let last = devs.last().unwrap();
    assert!(last.below.is_empty(), "{devs:#?}");
}

#[test]
fn this_machine_root_and_a_tmpfs() {
    let tmpfs = PathBuf::from("/dev/shm");
    let d = detect(&[PathBuf::from("/"), tmpfs.clone()], "test");
    print(&d.rows());
    assert_eq!(d.kernel, Fact::Known(output("uname", &["-r"])));
    let online: u64 = output("getconf", &["_NPROCESSORS_ONLN"]).parse().unwrap();
    assert_eq!(d.logical_cpus, Fact::Known(online));
    assert!(d.memory_bytes.known().is_some_and(|m| *m > 0));
    check_path(&d.paths[0], Path::new("/"));
    assert_eq!(d.paths[0].filesystem.known().unwrap().mount_point, "/");
    let shm = &d.paths[1];
    check_path(shm, &tmpfs);
    assert_eq!(shm.filesystem.known().unwrap().fs_type, "tmpfs");
    // Every row is labelled; an unknown one carries its reason.
    for (label, text) in d.rows() {
        assert!(!label.is_empty());
        assert!(
            text != "unknown ()" && !text.is_empty(),
            "{label}: {text:?}"
        );
    }
}

/// Runs a setup command; Err(reason) when it cannot run or fails.
fn try_run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let o = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// A loop device on a file with ext4 mounted on it; undone on drop.
struct LoopMount {
    device: String,
    mounted: Option<PathBuf>,
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        if let Some(m) = &self.mounted {
            let _ = Command::new("umount").arg(m).status();
        }
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

fn loop_mount(file: &Path, mnt: &Path) -> Result<LoopMount, String> {
    let f = file.to_str().unwrap();
    let device = try_run("losetup", &["--find", "--show", f])?;
    let mut lm = LoopMount {
        device,
        mounted: None,
    };
    try_run("mkfs.ext4", &["-q", "-F", &lm.device])?;
    std::fs::create_dir(mnt).unwrap();
    try_run("mount", &[&lm.device, mnt.to_str().unwrap()])?;
    lm.mounted = Some(mnt.to_path_buf());
    Ok(lm)
}

#[test]
fn a_loop_device_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("disk.img");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let mnt = dir.path().join("mnt");
    let lm = match loop_mount(&file, &mnt) {
        Ok(lm) => lm,
        Err(why) => {
            if std::env::var_os("CI").is_some() {
                panic!("CI runs as root: a loop device must be possible: {why}");
            }
            eprintln!("SKIPPED: loop device case: {why}");
            return;
        }
    };
    let db = mnt.join("db1");
    let d = detect(std::slice::from_ref(&db), "test");
    print(&d.rows());
    let p = &d.paths[0];
    assert!(!p.exists);
    assert_eq!(p.examined, Fact::Known(mnt.display().to_string()));
    check_path(p, &mnt);
    let devs = p.devices.known().unwrap();
    let lo = &devs[0];
    assert_eq!(lo.kind, DeviceKind::Loop);
    assert_eq!(Path::new("/dev").join(&lo.name), Path::new(&lm.device));
    let canonical = std::fs::canonicalize(&file).unwrap();
    assert_eq!(
        lo.backing_file,
        Some(Fact::Known(canonical.display().to_string()))
    );
    // Beneath the loop device: the device of the file's filesystem, if it
    // has one; otherwise a note says why not.
    let file_dev = st_dev(&file);
    if file_dev.starts_with("0:") {
        assert!(lo.below.is_empty());
        assert!(
            p.notes.iter().any(|n| n.contains("has no block device")),
            "{p:#?}"
        );
    } else {
        let below = std::fs::read_to_string(format!("/sys/class/block/{}/dev", lo.below[0]));
        assert_eq!(below.unwrap().trim(), file_dev);
    }
    drop(lm);
}
