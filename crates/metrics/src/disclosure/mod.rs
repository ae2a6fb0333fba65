//! What a host is, as the operating system reports it: the facts a published
//! report discloses about the tested configuration (host model, CPUs, memory,
//! kernel, OS) and, for every path a test uses, the filesystem holding it and
//! the block devices beneath that filesystem, walked through partitions,
//! device-mapper (LVM, dm-crypt, multipath), md RAID and loop devices down to
//! the disks (docs/disclosure.md).
//!
//! A detected fact is never guessed: it is a [`Fact`], either the value read
//! or `unknown` with the reason it could not be read. Every read is bounded
//! (file sizes, walk depth, devices per path); nothing the system returns
//! makes detection panic or loop.
//!
//! `mailbench_results::disclosure` re-exports these types beside the
//! `[disclosure]` section a user writes for what the tool cannot see.

mod devices;
mod host;
mod mounts;
mod read;
mod rows;
#[cfg(test)]
mod tests;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The most bytes read of one sysfs attribute or DMI field.
pub const MAX_ATTR_BYTES: u64 = 4096;
/// The most bytes read of /proc/cpuinfo, /proc/self/mountinfo, /proc/meminfo
/// or /etc/os-release.
pub const MAX_TABLE_BYTES: u64 = 4 << 20;
/// The most paths examined by one detection (the others are listed, unexamined).
pub const MAX_PATHS: usize = 256;
/// The most block devices recorded under one path.
pub const MAX_DEVICES_PER_PATH: usize = 64;
/// The deepest device stack walked (filesystem device = depth 0).
pub const MAX_DEPTH: u32 = 16;

/// One detected fact: the value read, or why it is unknown. Serialized as
/// `{"value": ...}` or `{"unknown": "reason"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Fact<T> {
    /// The value as the system reported it.
    #[serde(rename = "value")]
    Known(T),
    /// The value could not be read; the reason, in plain words.
    #[serde(rename = "unknown")]
    Unknown(String),
}

impl<T> Fact<T> {
    pub fn unknown(reason: impl Into<String>) -> Fact<T> {
        Fact::Unknown(reason.into())
    }

    /// The value, when known.
    pub fn known(&self) -> Option<&T> {
        match self {
            Fact::Known(v) => Some(v),
            Fact::Unknown(_) => None,
        }
    }

    /// The reason, when unknown.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Fact::Known(_) => None,
            Fact::Unknown(r) => Some(r),
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Fact<U> {
        match self {
            Fact::Known(v) => Fact::Known(f(v)),
            Fact::Unknown(r) => Fact::Unknown(r),
        }
    }

    pub fn and_then<U>(self, f: impl FnOnce(T) -> Fact<U>) -> Fact<U> {
        match self {
            Fact::Known(v) => f(v),
            Fact::Unknown(r) => Fact::Unknown(r),
        }
    }

    /// The fact as text: the value as `show` writes it, or `unknown (reason)`.
    pub fn text_with(&self, show: impl FnOnce(&T) -> String) -> String {
        match self {
            Fact::Known(v) => show(v),
            Fact::Unknown(r) => format!("unknown ({r})"),
        }
    }
}

impl<T: std::fmt::Display> Fact<T> {
    /// The fact as text: the value, or `unknown (reason)`.
    pub fn text(&self) -> String {
        self.text_with(|v| v.to_string())
    }
}

impl<T> From<Result<T, String>> for Fact<T> {
    fn from(r: Result<T, String>) -> Fact<T> {
        match r {
            Ok(v) => Fact::Known(v),
            Err(why) => Fact::Unknown(why),
        }
    }
}

/// What mailbench detects on one host (docs/disclosure.md lists where each
/// fact comes from).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Detected {
    /// The mailbench version that detected (and ran) this.
    pub mailbench_version: String,
    pub hostname: Fact<String>,
    /// DMI sys_vendor: the maker of the machine.
    pub system_vendor: Fact<String>,
    /// DMI product_name: the machine's model.
    pub system_model: Fact<String>,
    /// DMI product_version.
    pub system_version: Fact<String>,
    /// /proc/cpuinfo `model name` of the first CPU.
    pub cpu_model: Fact<String>,
    /// Logical CPUs (hardware threads) listed in /proc/cpuinfo.
    pub logical_cpus: Fact<u64>,
    /// Distinct `physical id`s in /proc/cpuinfo.
    pub sockets: Fact<u64>,
    /// Distinct (`physical id`, `core id`) pairs in /proc/cpuinfo.
    pub cores: Fact<u64>,
    /// MemTotal of /proc/meminfo.
    pub memory_bytes: Fact<u64>,
    /// The kernel release (/proc/sys/kernel/osrelease).
    pub kernel: Fact<String>,
    /// PRETTY_NAME of /etc/os-release.
    pub os: Fact<String>,
    /// One entry per path examined, in the order given.
    pub paths: Vec<PathFacts>,
}

/// One path a test uses: the filesystem holding it and the devices beneath.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PathFacts {
    /// The path as given.
    pub path: String,
    /// The canonical path examined: the path itself, or its nearest existing
    /// ancestor when the path does not exist yet (`exists` false).
    pub examined: Fact<String>,
    /// Whether the given path itself exists.
    pub exists: bool,
    pub filesystem: Fact<Filesystem>,
    /// The device stack: the filesystem's device first (depth 0), then what
    /// it is built on, depth first.
    pub devices: Fact<Vec<BlockDevice>>,
    /// What the walk met and did not follow (cycles, limits, loop files on
    /// filesystems without a device), in plain words.
    pub notes: Vec<String>,
}

/// The filesystem holding a path: the /proc/self/mountinfo entry whose mount
/// point is the longest prefix of the canonical path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Filesystem {
    /// Filesystem type (`ext4`, `xfs`, `tmpfs`).
    pub fs_type: String,
    /// Mount source (`/dev/vda1`, `/dev/mapper/vg-mail`, `tmpfs`).
    pub source: String,
    pub mount_point: String,
    /// Per-mount options (`rw,noatime`).
    pub mount_options: String,
    /// Per-superblock options (`rw,discard,stripe=256`).
    pub super_options: String,
    /// The device number of the filesystem (`major:minor`).
    pub device_number: String,
}

/// What a block device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceKind {
    /// A disk on SCSI, SATA, SAS, USB ... (`sdX`).
    Disk,
    Nvme,
    /// A virtio disk of a virtual machine (`vdX`).
    Virtio,
    Partition,
    /// A device-mapper volume of LVM.
    Lvm,
    /// A device-mapper dm-crypt (LUKS) volume.
    Crypt,
    /// A device-mapper multipath device.
    Multipath,
    /// Another device-mapper device.
    Dm,
    /// An md software RAID array.
    Md,
    Loop,
    /// A block device without hardware beneath it (zram, ram, nbd ...).
    Virtual,
}

impl DeviceKind {
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Disk => "disk",
            DeviceKind::Nvme => "nvme",
            DeviceKind::Virtio => "virtio",
            DeviceKind::Partition => "partition",
            DeviceKind::Lvm => "lvm",
            DeviceKind::Crypt => "crypt",
            DeviceKind::Multipath => "multipath",
            DeviceKind::Dm => "dm",
            DeviceKind::Md => "md",
            DeviceKind::Loop => "loop",
            DeviceKind::Virtual => "virtual",
        }
    }
}

/// One block device of a path's stack, as /sys/class/block/<name> shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BlockDevice {
    /// The kernel's name (`vda1`, `dm-0`, `md0`, `loop3`).
    pub name: String,
    pub kind: DeviceKind,
    /// 0 for the filesystem's device, +1 for each layer beneath.
    pub depth: u32,
    /// The devices it is built on (its disk, slaves, or the device holding
    /// its backing file), by name.
    pub below: Vec<String>,
    /// device/model, with device/vendor when both exist (`vendor 0x1af4`
    /// when only the vendor is there).
    pub model: Fact<String>,
    /// size × 512.
    pub size_bytes: Fact<u64>,
    /// queue/rotational.
    pub rotational: Fact<bool>,
    /// The bracketed entry of queue/scheduler.
    pub scheduler: Fact<String>,
    /// queue/nr_requests.
    pub nr_requests: Fact<u64>,
    /// device/queue_depth (SCSI devices); absent when the device has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<Fact<u64>>,
    /// queue/logical_block_size.
    pub logical_block_size: Fact<u64>,
    /// queue/physical_block_size.
    pub physical_block_size: Fact<u64>,
    /// dm/name (device-mapper devices: `vg0-mail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dm_name: Option<Fact<String>>,
    /// md/level and md/raid_disks (`raid1, 2 devices`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid: Option<Fact<String>>,
    /// loop/backing_file (loop devices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backing_file: Option<Fact<String>>,
}

/// Detects this host's facts and those of every path in `paths`;
/// `tool_version` is the mailbench version to record.
pub fn detect(paths: &[PathBuf], tool_version: &str) -> Detected {
    detect_at(Path::new("/"), paths, tool_version)
}

/// [`detect`] with /proc, /sys and /etc (and the paths) read under `root`:
/// a fake tree in tests, `/` for the real system. `paths` are absolute paths
/// of the system under `root` (relative ones are taken from `/`).
pub fn detect_at(root: &Path, paths: &[PathBuf], tool_version: &str) -> Detected {
    let sys = read::Sys::new(root);
    let mounts = mounts::Mounts::read(&sys);
    let mut d = host::detect_host(&sys, tool_version);
    for (i, p) in paths.iter().enumerate() {
        if i >= MAX_PATHS {
            d.paths.push(PathFacts {
                path: p.display().to_string(),
                examined: Fact::unknown(format!(
                    "not examined: mailbench examines at most {MAX_PATHS} paths"
                )),
                exists: false,
                filesystem: Fact::unknown("not examined"),
                devices: Fact::unknown("not examined"),
                notes: Vec::new(),
            });
            continue;
        }
        d.paths.push(devices::path_facts(&sys, &mounts, p));
    }
    d
}
