//! A path's filesystem and the block device stack beneath it, walked through
//! /sys/class/block: partitions to their disk, device-mapper and md devices
//! to their `slaves/`, loop devices to the device holding their backing file.

use super::mounts::Mounts;
use super::read::{Sys, clip};
use super::{
    BlockDevice, DeviceKind, Fact, Filesystem, MAX_DEPTH, MAX_DEVICES_PER_PATH, PathFacts,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const CLASS: &str = "/sys/class/block";

/// The facts of one path given by the caller.
pub(crate) fn path_facts(sys: &Sys, mounts: &Mounts, p: &Path) -> PathFacts {
    let mut notes = Vec::new();
    let unknown = |why: &str| PathFacts {
        path: p.display().to_string(),
        examined: Fact::unknown(why),
        exists: false,
        filesystem: Fact::unknown(why),
        devices: Fact::unknown(why),
        notes: Vec::new(),
    };
    let (examined, exists) = match examine(sys, p) {
        Ok(x) => x,
        Err(why) => return unknown(&why),
    };
    if !exists {
        notes.push(format!(
            "{} does not exist yet: its nearest existing ancestor {} was examined",
            p.display(),
            examined.display()
        ));
    }
    let filesystem: Fact<Filesystem> = mounts.holding(&examined).into();
    let devices = match filesystem.known() {
        Some(fs) => match top_device(sys, fs) {
            Ok(name) => {
                let mut w = Walk::new(sys, mounts);
                w.visit(&name, 0, "");
                notes.append(&mut w.notes);
                Fact::Known(w.devices)
            }
            Err(why) => Fact::unknown(why),
        },
        None => Fact::unknown("the filesystem is unknown"),
    };
    PathFacts {
        path: p.display().to_string(),
        examined: Fact::Known(examined.display().to_string()),
        exists,
        filesystem,
        devices,
        notes,
    }
}

/// The canonical system path of `p`, or of its nearest existing ancestor
/// (false: `p` itself does not exist).
fn examine(sys: &Sys, p: &Path) -> Result<(PathBuf, bool), String> {
    let abs = std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))?;
    let mut cand = abs.as_path();
    loop {
        match std::fs::canonicalize(sys.at(cand)) {
            Ok(real) => {
                let shown = sys
                    .system_path(&real)
                    .ok_or_else(|| format!("{} leads outside the system root", cand.display()))?;
                return Ok((shown, cand == abs));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                cand = cand
                    .parent()
                    .ok_or_else(|| format!("no part of {} exists", p.display()))?;
            }
            Err(e) => return Err(format!("{}: {e}", cand.display())),
        }
    }
}

/// The kernel name of the block device a filesystem is on: its device
/// number through /sys/dev/block, or (for an anonymous device number, as
/// btrfs has) its `/dev/` source.
fn top_device(sys: &Sys, fs: &Filesystem) -> Result<String, String> {
    let anonymous = fs.device_number.starts_with("0:");
    if !anonymous {
        let link = Path::new("/sys/dev/block").join(&fs.device_number);
        let real = sys.canonical(&link)?;
        return name_of(&real).ok_or_else(|| format!("{} names no device", link.display()));
    }
    if fs.source.starts_with("/dev/")
        && let Ok(real) = sys.canonical(Path::new(&fs.source))
        && let Some(name) = name_of(&real)
        && sys.exists(&Path::new(CLASS).join(&name))
    {
        return Ok(name);
    }
    Err(format!(
        "{} has no block device: device number {}, source {}",
        fs.fs_type,
        fs.device_number,
        clip(&fs.source)
    ))
}

fn name_of(p: &Path) -> Option<String> {
    Some(p.file_name()?.to_string_lossy().into_owned())
}

/// A depth-first walk down one path's device stack, bounded in depth and
/// devices; a device met again is listed once, a cycle is noted and cut.
struct Walk<'a> {
    sys: &'a Sys,
    mounts: &'a Mounts,
    devices: Vec<BlockDevice>,
    seen: BTreeSet<String>,
    /// The devices from the top to the one being visited.
    trail: Vec<String>,
    notes: Vec<String>,
    full: bool,
}

impl<'a> Walk<'a> {
    fn new(sys: &'a Sys, mounts: &'a Mounts) -> Walk<'a> {
        Walk {
            sys,
            mounts,
            devices: Vec::new(),
            seen: BTreeSet::new(),
            trail: Vec::new(),
            notes: Vec::new(),
            full: false,
        }
    }

    fn visit(&mut self, name: &str, depth: u32, above: &str) {
        if self.trail.iter().any(|t| t == name) {
            self.notes.push(format!(
                "{above} names {name} beneath it, which is above it: a cycle, not followed"
            ));
            return;
        }
        if self.seen.contains(name) {
            return; // listed already (two devices built on one)
        }
        if depth > MAX_DEPTH {
            self.notes.push(format!(
                "the device stack is deeper than {MAX_DEPTH} layers: not walked beneath {above}"
            ));
            return;
        }
        if self.devices.len() >= MAX_DEVICES_PER_PATH {
            if !self.full {
                self.full = true;
                self.notes.push(format!(
                    "more than {MAX_DEVICES_PER_PATH} devices: the others are not listed"
                ));
            }
            return;
        }
        let base = Path::new(CLASS).join(name);
        if !self.sys.exists(&base) {
            let at = if above.is_empty() {
                String::new()
            } else {
                format!(" (beneath {above})")
            };
            self.notes
                .push(format!("{name}{at} is not in {CLASS}: not described"));
            return;
        }
        self.seen.insert(name.to_string());
        let (dev, below) = self.describe(name, &base, depth);
        self.devices.push(dev);
        self.trail.push(name.to_string());
        for b in &below {
            self.visit(b, depth + 1, name);
        }
        self.trail.pop();
    }

    /// One device and the names of the devices beneath it.
    fn describe(&mut self, name: &str, base: &Path, depth: u32) -> (BlockDevice, Vec<String>) {
        let sys = self.sys;
        let kind = kind_of(sys, name, base);
        let below = match kind {
            DeviceKind::Partition => self.partition_disk(name, base).into_iter().collect(),
            DeviceKind::Loop => self.loop_backing(name, base).into_iter().collect(),
            _ => self.slaves(name, base, kind),
        };
        let dev = BlockDevice {
            name: name.to_string(),
            kind,
            depth,
            below: below.clone(),
            model: model(sys, base, kind),
            size_bytes: sys
                .number(&base.join("size"))
                .and_then(|s| {
                    s.checked_mul(512)
                        .ok_or_else(|| format!("{}/size is out of range", base.display()))
                })
                .into(),
            rotational: queue(sys, base, kind, "rotational", |t| match t {
                "0" => Ok(false),
                "1" => Ok(true),
                _ => Err(format!("reads {:?}, not 0 or 1", clip(t))),
            }),
            scheduler: queue(sys, base, kind, "scheduler", scheduler),
            nr_requests: queue(sys, base, kind, "nr_requests", number),
            queue_depth: (sys.exists(&base.join("device/queue_depth")))
                .then(|| sys.number(&base.join("device/queue_depth")).into()),
            logical_block_size: queue(sys, base, kind, "logical_block_size", number),
            physical_block_size: queue(sys, base, kind, "physical_block_size", number),
            dm_name: matches!(
                kind,
                DeviceKind::Lvm | DeviceKind::Crypt | DeviceKind::Multipath | DeviceKind::Dm
            )
            .then(|| sys.attr(&base.join("dm/name")).into()),
            raid: (kind == DeviceKind::Md).then(|| raid(sys, base)),
            backing_file: (kind == DeviceKind::Loop)
                .then(|| sys.attr(&base.join("loop/backing_file")).into()),
        };
        (dev, below)
    }

    /// The disk a partition is on: the folder above the partition's own in
    /// sysfs (/sys/devices/.../block/vda/vda1).
    fn partition_disk(&mut self, name: &str, base: &Path) -> Option<String> {
        let found = self.sys.canonical(base).and_then(|real| {
            (real.parent().and_then(name_of))
                .ok_or_else(|| format!("{} has no parent folder", real.display()))
        });
        found
            .map_err(|why| self.notes.push(format!("{name}'s disk: {why}")))
            .ok()
    }

    /// The devices a device-mapper or md device is built on (`slaves/`);
    /// other devices have none (an unreadable folder is noted for those
    /// that must have some).
    fn slaves(&mut self, name: &str, base: &Path, kind: DeviceKind) -> Vec<String> {
        let layered = matches!(
            kind,
            DeviceKind::Lvm
                | DeviceKind::Crypt
                | DeviceKind::Multipath
                | DeviceKind::Dm
                | DeviceKind::Md
        );
        match self.sys.list(&base.join("slaves"), MAX_DEVICES_PER_PATH) {
            Ok((v, more)) => {
                if more {
                    self.notes.push(format!(
                        "{name} is built on more than {MAX_DEVICES_PER_PATH} devices: \
                         the first {MAX_DEVICES_PER_PATH} by name are listed"
                    ));
                }
                v
            }
            Err(why) => {
                if layered {
                    self.notes.push(format!("{name}'s devices: {why}"));
                }
                Vec::new()
            }
        }
    }

    /// The device holding a loop device's backing file, if it has one
    /// (otherwise a note says why not).
    fn loop_backing(&mut self, name: &str, base: &Path) -> Option<String> {
        let file = self.sys.attr(&base.join("loop/backing_file")).ok()?;
        let file = file.strip_suffix(" (deleted)").unwrap_or(&file);
        let found = examine(self.sys, Path::new(file))
            .and_then(|(p, _)| self.mounts.holding(&p))
            .and_then(|fs| top_device(self.sys, &fs));
        match found {
            Ok(dev) => Some(dev),
            Err(why) => {
                self.notes
                    .push(format!("{name}'s backing file {}: {why}", clip(file)));
                None
            }
        }
    }
}

/// What a device is, from what its sysfs folder holds.
fn kind_of(sys: &Sys, name: &str, base: &Path) -> DeviceKind {
    let has = |rel: &str| sys.exists(&base.join(rel));
    if has("partition") {
        DeviceKind::Partition
    } else if has("dm") {
        let uuid = sys.attr(&base.join("dm/uuid")).unwrap_or_default();
        match uuid.split_once('-').map(|(t, _)| t) {
            Some("LVM") => DeviceKind::Lvm,
            Some("CRYPT") => DeviceKind::Crypt,
            Some("mpath") => DeviceKind::Multipath,
            _ => DeviceKind::Dm,
        }
    } else if has("md") {
        DeviceKind::Md
    } else if has("loop") || name.starts_with("loop") {
        DeviceKind::Loop
    } else if name.starts_with("nvme") {
        DeviceKind::Nvme
    } else if name.starts_with("vd")
        || sys.link_name(&base.join("device/driver")).as_deref() == Some("virtio_blk")
    {
        DeviceKind::Virtio
    } else if has("device") {
        DeviceKind::Disk
    } else {
        DeviceKind::Virtual
    }
}

/// device/model (after device/vendor when both are there).
fn model(sys: &Sys, base: &Path, kind: DeviceKind) -> Fact<String> {
    let none = match kind {
        DeviceKind::Partition => Some("a partition: its disk is listed beneath it"),
        DeviceKind::Lvm | DeviceKind::Crypt | DeviceKind::Multipath | DeviceKind::Dm => {
            Some("a device-mapper device has no hardware model: the devices beneath it have")
        }
        DeviceKind::Md => Some("an md array has no hardware model: its members have"),
        DeviceKind::Loop => Some("a loop device has no hardware model: it is backed by a file"),
        _ => None,
    };
    if let Some(why) = none {
        return Fact::unknown(why);
    }
    let model = base.join("device/model");
    let v = sys.attr(&base.join("device/vendor"));
    if !sys.exists(&model) {
        // No model file (virtio): the vendor alone, if there is one.
        return match v {
            Ok(v) => Fact::Known(format!("vendor {v}")),
            Err(_) => Fact::unknown(format!("{} is not present", model.display())),
        };
    }
    match (sys.attr(&model), v) {
        (Ok(m), Ok(v)) => Fact::Known(format!("{v} {m}")),
        (Ok(m), Err(_)) => Fact::Known(m),
        (Err(why), _) => Fact::unknown(why),
    }
}

/// One queue/ attribute, read and converted (a partition has no queue/:
/// its disk's applies).
fn queue<T>(
    sys: &Sys,
    base: &Path,
    kind: DeviceKind,
    attr: &str,
    convert: impl Fn(&str) -> Result<T, String>,
) -> Fact<T> {
    if kind == DeviceKind::Partition {
        return Fact::unknown("a partition has no queue of its own: its disk's applies");
    }
    let p = base.join("queue").join(attr);
    (sys.attr(&p))
        .and_then(|t| convert(&t).map_err(|why| format!("{} {why}", p.display())))
        .into()
}

fn number(t: &str) -> Result<u64, String> {
    t.parse()
        .map_err(|_| format!("reads {:?}, not a number", clip(t)))
}

/// The active scheduler: the bracketed entry (`none [mq-deadline] kyber`), or
/// the only entry.
fn scheduler(t: &str) -> Result<String, String> {
    let words: Vec<&str> = t.split_whitespace().collect();
    let chosen = words
        .iter()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')));
    match (chosen, words.as_slice()) {
        (Some(c), _) => Ok(c.to_string()),
        (None, [only]) => Ok(only.to_string()),
        _ => Err(format!("reads {:?}: no entry is marked active", clip(t))),
    }
}

/// md/level and md/raid_disks: `raid1, 2 devices`.
fn raid(sys: &Sys, base: &Path) -> Fact<String> {
    let level = sys.attr(&base.join("md/level"));
    let disks = sys.number(&base.join("md/raid_disks"));
    match (level, disks) {
        (Ok(l), Ok(n)) => Fact::Known(format!("{l}, {n} devices")),
        (Ok(l), Err(_)) => Fact::Known(l),
        (Err(why), _) => Fact::unknown(why),
    }
}
