//! Detection on fake /proc, /sys and /etc trees: a partition on a virtio
//! disk, LVM on md RAID1 of two disks, a loop device backed by a file, a
//! tmpfs path, a missing DMI, a slaves/ cycle, oversized files, limits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::fs;
use std::os::unix::fs::symlink;

/// A fake system root in a temporary folder.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let t = Tree {
            dir: tempfile::tempdir().unwrap(),
        };
        t.file("proc/sys/kernel/hostname", "mail01\n");
        t.file("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
        t.file(
            "etc/os-release",
            "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
        );
        t.file(
            "proc/meminfo",
            "MemTotal:       263921612 kB\nMemFree:         1000 kB\n",
        );
        t.file("proc/cpuinfo", &cpuinfo(2, 4, 2));
        t
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self, rel: &str, text: &str) {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn dir(&self, rel: &str) {
        fs::create_dir_all(self.root().join(rel)).unwrap();
    }

    fn link(&self, rel: &str, target: &str) {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, p).unwrap();
    }

    fn mounts(&self, lines: &[&str]) {
        self.file("proc/self/mountinfo", &(lines.join("\n") + "\n"));
    }

    fn dmi(&self) {
        self.file("sys/class/dmi/id/sys_vendor", "Dell Inc.\n");
        self.file("sys/class/dmi/id/product_name", "PowerEdge R750\n");
        self.file("sys/class/dmi/id/product_version", "\n");
    }

    /// A block device folder /sys/block/<name> (or under a disk for a
    /// partition) with its class and dev links and queue attributes.
    fn block(&self, name: &str, majmin: &str, sectors: u64) -> String {
        let folder = format!("sys/block/{name}");
        self.file(&format!("{folder}/size"), &format!("{sectors}\n"));
        self.file(&format!("{folder}/dev"), &format!("{majmin}\n"));
        self.file(&format!("{folder}/queue/rotational"), "0\n");
        self.file(
            &format!("{folder}/queue/scheduler"),
            "[none] mq-deadline kyber\n",
        );
        self.file(&format!("{folder}/queue/nr_requests"), "256\n");
        self.file(&format!("{folder}/queue/logical_block_size"), "512\n");
        self.file(&format!("{folder}/queue/physical_block_size"), "4096\n");
        self.dir(&format!("{folder}/slaves"));
        self.link(
            &format!("sys/class/block/{name}"),
            &format!("../../block/{name}"),
        );
        self.link(
            &format!("sys/dev/block/{majmin}"),
            &format!("../../block/{name}"),
        );
        folder
    }

    fn partition(&self, disk: &str, name: &str, majmin: &str) {
        let folder = format!("sys/block/{disk}/{name}");
        self.file(&format!("{folder}/partition"), "1\n");
        self.file(&format!("{folder}/size"), "2097152\n");
        self.link(
            &format!("sys/class/block/{name}"),
            &format!("../../block/{disk}/{name}"),
        );
        self.link(
            &format!("sys/dev/block/{majmin}"),
            &format!("../../block/{disk}/{name}"),
        );
    }

    fn virtio(&self, name: &str, majmin: &str) {
        let f = self.block(name, majmin, 20_971_520);
        self.file(&format!("{f}/device/vendor"), "0x1af4\n");
        self.file(&format!("{f}/queue/rotational"), "1\n");
        self.file(
            &format!("{f}/queue/scheduler"),
            "none [mq-deadline] kyber bfq\n",
        );
        self.dir("sys/bus/virtio/drivers/virtio_blk");
        self.link(
            &format!("{f}/device/driver"),
            "../../../bus/virtio/drivers/virtio_blk",
        );
    }

    fn scsi(&self, name: &str, majmin: &str, model: &str) {
        let f = self.block(name, majmin, 3_907_029_168);
        self.file(&format!("{f}/device/vendor"), "ATA     \n");
        self.file(&format!("{f}/device/model"), &format!("{model}\n"));
        self.file(&format!("{f}/device/queue_depth"), "32\n");
        self.file(&format!("{f}/queue/rotational"), "1\n");
    }

    fn slaves(&self, name: &str, of: &[&str]) {
        for s in of {
            self.link(
                &format!("sys/block/{name}/slaves/{s}"),
                &format!("../../{s}"),
            );
        }
    }

    fn dm(&self, name: &str, majmin: &str, dm_name: &str, uuid: &str, of: &[&str]) {
        let f = self.block(name, majmin, 1_000_000);
        self.file(&format!("{f}/dm/name"), &format!("{dm_name}\n"));
        self.file(&format!("{f}/dm/uuid"), &format!("{uuid}\n"));
        self.file(&format!("{f}/queue/scheduler"), "none\n");
        self.slaves(name, of);
    }
}

/// A /proc/cpuinfo of `sockets` × `cores` × `threads` logical CPUs.
fn cpuinfo(sockets: u32, cores: u32, threads: u32) -> String {
    let mut s = String::new();
    let mut n = 0;
    for p in 0..sockets {
        for c in 0..cores {
            for _ in 0..threads {
                s.push_str(&format!(
                    "processor\t: {n}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\nphysical id\t: {p}\ncore id\t\t: {c}\n\n"
                ));
                n += 1;
            }
        }
    }
    s
}

const ROOT_MOUNT: &str = "1 0 252:1 / / rw,relatime - ext4 /dev/vda1 rw,errors=remount-ro";

fn detect_paths(t: &Tree, paths: &[&str]) -> Detected {
    let paths: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
    detect_at(t.root(), &paths, "0.1.0-test")
}

fn kinds(p: &PathFacts) -> Vec<(String, DeviceKind, u32, Vec<String>)> {
    let devs = p
        .devices
        .known()
        .unwrap_or_else(|| panic!("{:?}", p.devices));
    devs.iter()
        .map(|d| (d.name.clone(), d.kind, d.depth, d.below.clone()))
        .collect()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn host_facts_are_read_and_a_missing_dmi_is_unknown_with_its_reason() {
    let t = Tree::new();
    t.mounts(&[ROOT_MOUNT]);
    let d = detect_paths(&t, &[]);
    assert_eq!(d.mailbench_version, "0.1.0-test");
    assert_eq!(d.hostname, Fact::Known("mail01".into()));
    assert_eq!(d.kernel, Fact::Known("6.1.0-18-amd64".into()));
    assert_eq!(d.os, Fact::Known("Debian GNU/Linux 12 (bookworm)".into()));
    assert_eq!(d.memory_bytes, Fact::Known(263_921_612 * 1024));
    assert_eq!(
        d.cpu_model,
        Fact::Known("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz".into())
    );
    assert_eq!(d.logical_cpus, Fact::Known(16));
    assert_eq!(d.sockets, Fact::Known(2));
    assert_eq!(d.cores, Fact::Known(8));
    for f in [&d.system_vendor, &d.system_model, &d.system_version] {
        let why = f
            .reason()
            .unwrap_or_else(|| panic!("{f:?} should be unknown"));
        assert!(why.contains("/sys/class/dmi/id is not present"), "{why}");
    }
    assert!(
        d.system_model
            .text()
            .starts_with("unknown (/sys/class/dmi/id")
    );
}

#[test]
fn dmi_fields_are_read_and_an_empty_or_unreadable_one_says_why() {
    let t = Tree::new();
    t.mounts(&[ROOT_MOUNT]);
    t.dmi();
    fs::remove_file(t.root().join("sys/class/dmi/id/sys_vendor")).unwrap();
    t.dir("sys/class/dmi/id/sys_vendor"); // reading a folder fails
    let d = detect_paths(&t, &[]);
    assert_eq!(d.system_model, Fact::Known("PowerEdge R750".into()));
    let v = d.system_version.reason().unwrap();
    assert_eq!(v, "/sys/class/dmi/id/product_version is empty");
    let vendor = d.system_vendor.reason().unwrap();
    assert!(
        vendor.starts_with("/sys/class/dmi/id/sys_vendor: "),
        "{vendor}"
    );
}

#[test]
fn cpu_facts_without_topology_or_model_are_unknown_with_reasons() {
    let t = Tree::new();
    t.mounts(&[ROOT_MOUNT]);
    t.file(
        "proc/cpuinfo",
        "processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\nBogoMIPS\t: 50.00\n\n",
    );
    fs::remove_file(t.root().join("proc/meminfo")).unwrap();
    t.file("proc/meminfo", "MemFree: 3 kB\n");
    fs::remove_file(t.root().join("etc/os-release")).unwrap();
    let d = detect_paths(&t, &[]);
    assert_eq!(d.logical_cpus, Fact::Known(2));
    assert_eq!(
        d.cpu_model.reason(),
        Some("/proc/cpuinfo has no \"model name\"")
    );
    assert!(d.sockets.reason().unwrap().contains("physical id"));
    assert!(d.cores.reason().unwrap().contains("core id"));
    assert_eq!(
        d.memory_bytes.reason(),
        Some("/proc/meminfo has no MemTotal")
    );
    assert_eq!(d.os.reason(), Some("/etc/os-release is not present"));
}

#[test]
fn oversized_files_are_not_read_and_say_so() {
    let t = Tree::new();
    t.mounts(&[ROOT_MOUNT, "2 1 252:16 / /data rw - xfs /dev/sdb rw"]);
    t.dir("data");
    // A 5 MiB /proc/cpuinfo: over the bound of a table file.
    t.file("proc/cpuinfo", &"x".repeat((MAX_TABLE_BYTES + 1) as usize));
    t.scsi("sdb", "252:16", &"M".repeat(10_000));
    let d = detect_paths(&t, &["/data"]);
    for f in [&d.logical_cpus, &d.sockets] {
        let why = f.reason().unwrap();
        assert!(
            why.contains("/proc/cpuinfo is larger than 4194304 bytes"),
            "{why}"
        );
    }
    assert!(d.cpu_model.reason().is_some());
    let devs = d.paths[0].devices.known().unwrap();
    let why = devs[0].model.reason().unwrap();
    assert!(
        why.contains("/sys/class/block/sdb/device/model is larger than 4096 bytes"),
        "{why}"
    );
    // The other facts of the device are still read.
    assert_eq!(devs[0].size_bytes, Fact::Known(3_907_029_168 * 512));
}

#[test]
fn a_partition_on_a_virtio_disk() {
    let t = Tree::new();
    t.mounts(&[
        "1 0 252:0 / / rw - ext4 /dev/vda rw",
        "2 1 252:1 / /data rw,noatime - ext4 /dev/vda1 rw,discard",
    ]);
    t.virtio("vda", "252:0");
    t.partition("vda", "vda1", "252:1");
    t.dir("data/db");
    let d = detect_paths(&t, &["/data/db"]);
    let p = &d.paths[0];
    assert!(p.exists);
    assert_eq!(p.examined, Fact::Known("/data/db".into()));
    let fs = p.filesystem.known().unwrap();
    assert_eq!(
        (fs.fs_type.as_str(), fs.mount_point.as_str()),
        ("ext4", "/data")
    );
    assert_eq!(fs.mount_options, "rw,noatime");
    assert_eq!(fs.super_options, "rw,discard");
    assert_eq!(
        kinds(p),
        vec![
            ("vda1".into(), DeviceKind::Partition, 0, s(&["vda"])),
            ("vda".into(), DeviceKind::Virtio, 1, vec![]),
        ]
    );
    let devs = p.devices.known().unwrap();
    let (part, disk) = (&devs[0], &devs[1]);
    assert_eq!(part.size_bytes, Fact::Known(2_097_152 * 512));
    assert!(part.scheduler.reason().unwrap().contains("a partition"));
    assert_eq!(disk.model, Fact::Known("vendor 0x1af4".into()));
    assert_eq!(disk.size_bytes, Fact::Known(20_971_520 * 512));
    assert_eq!(disk.rotational, Fact::Known(true));
    assert_eq!(disk.scheduler, Fact::Known("mq-deadline".into()));
    assert_eq!(disk.nr_requests, Fact::Known(256));
    assert_eq!(disk.queue_depth, None);
    assert_eq!(disk.logical_block_size, Fact::Known(512));
    assert_eq!(disk.physical_block_size, Fact::Known(4096));
    assert!(p.notes.is_empty(), "{:?}", p.notes);
}

#[test]
fn lvm_on_md_raid1_of_two_disks() {
    let t = Tree::new();
    t.mounts(&[
        ROOT_MOUNT,
        "3 1 253:0 / /mail rw,noatime - xfs /dev/mapper/vg0-mail rw,attr2,inode64",
    ]);
    t.scsi("sda", "8:0", "Samsung SSD 870");
    t.scsi("sdb", "8:16", "Samsung SSD 870");
    let md = t.block("md0", "9:0", 3_907_000_000);
    t.file(&format!("{md}/md/level"), "raid1\n");
    t.file(&format!("{md}/md/raid_disks"), "2\n");
    t.slaves("md0", &["sdb", "sda"]);
    t.dm("dm-0", "253:0", "vg0-mail", "LVM-abcdef", &["md0"]);
    t.dir("mail");
    let d = detect_paths(&t, &["/mail"]);
    let p = &d.paths[0];
    assert_eq!(
        kinds(p),
        vec![
            ("dm-0".into(), DeviceKind::Lvm, 0, s(&["md0"])),
            ("md0".into(), DeviceKind::Md, 1, s(&["sda", "sdb"])),
            ("sda".into(), DeviceKind::Disk, 2, vec![]),
            ("sdb".into(), DeviceKind::Disk, 2, vec![]),
        ]
    );
    let devs = p.devices.known().unwrap();
    assert_eq!(devs[0].dm_name, Some(Fact::Known("vg0-mail".into())));
    assert_eq!(devs[0].scheduler, Fact::Known("none".into()));
    assert!(devs[0].model.reason().unwrap().contains("device-mapper"));
    assert_eq!(devs[1].raid, Some(Fact::Known("raid1, 2 devices".into())));
    assert_eq!(devs[2].model, Fact::Known("ATA Samsung SSD 870".into()));
    assert_eq!(devs[2].queue_depth, Some(Fact::Known(32)));
    assert_eq!(devs[2].size_bytes, Fact::Known(3_907_029_168 * 512));
    assert_eq!(devs[2].dm_name, None);
    assert!(p.notes.is_empty(), "{:?}", p.notes);
}

#[test]
fn a_loop_device_backed_by_a_file_leads_to_the_files_disk() {
    let t = Tree::new();
    t.mounts(&[
        "1 0 252:0 / / rw - ext4 /dev/vda rw",
        "2 1 252:1 / /images rw - ext4 /dev/vda1 rw",
        "3 1 7:0 / /mnt/loop rw - ext4 /dev/loop0 rw",
    ]);
    t.virtio("vda", "252:0");
    t.partition("vda", "vda1", "252:1");
    let lp = t.block("loop0", "7:0", 131_072);
    t.file(&format!("{lp}/loop/backing_file"), "/images/disk.img\n");
    t.file("images/disk.img", "");
    t.dir("mnt/loop/db");
    let d = detect_paths(&t, &["/mnt/loop/db"]);
    let p = &d.paths[0];
    assert_eq!(
        kinds(p),
        vec![
            ("loop0".into(), DeviceKind::Loop, 0, s(&["vda1"])),
            ("vda1".into(), DeviceKind::Partition, 1, s(&["vda"])),
            ("vda".into(), DeviceKind::Virtio, 2, vec![]),
        ]
    );
    let lo = &p.devices.known().unwrap()[0];
    assert_eq!(
        lo.backing_file,
        Some(Fact::Known("/images/disk.img".into()))
    );
    assert_eq!(lo.size_bytes, Fact::Known(131_072 * 512));
}

#[test]
fn a_tmpfs_path_has_no_block_device_and_a_loop_file_on_tmpfs_says_so() {
    let t = Tree::new();
    t.mounts(&[
        ROOT_MOUNT,
        "4 1 0:25 / /run rw,nosuid - tmpfs tmpfs rw,size=1024k",
        "5 1 7:1 / /mnt/l rw - ext4 /dev/loop1 rw",
    ]);
    t.dir("run/mailbench");
    let lp = t.block("loop1", "7:1", 2048);
    t.file(&format!("{lp}/loop/backing_file"), "/run/img (deleted)\n");
    t.dir("mnt/l");
    let d = detect_paths(&t, &["/run/mailbench", "/mnt/l"]);
    let p = &d.paths[0];
    assert_eq!(p.filesystem.known().unwrap().fs_type, "tmpfs");
    let why = p.devices.reason().unwrap();
    assert!(why.starts_with("tmpfs has no block device"), "{why}");
    let l = &d.paths[1];
    assert_eq!(
        kinds(l),
        vec![("loop1".into(), DeviceKind::Loop, 0, vec![])]
    );
    assert!(
        l.notes
            .iter()
            .any(|n| n.starts_with("loop1's backing file /run/img: tmpfs has no block device")),
        "{:?}",
        l.notes
    );
}

#[test]
fn a_slaves_cycle_is_cut_and_noted() {
    let t = Tree::new();
    t.mounts(&[ROOT_MOUNT, "2 1 253:1 / /x rw - ext4 /dev/dm-1 rw"]);
    t.dm("dm-1", "253:1", "a", "", &["dm-2"]);
    t.dm("dm-2", "253:2", "b", "CRYPT-LUKS2-x", &["dm-1"]);
    t.dir("x");
    let d = detect_paths(&t, &["/x"]);
    let p = &d.paths[0];
    assert_eq!(
        kinds(p),
        vec![
            ("dm-1".into(), DeviceKind::Dm, 0, s(&["dm-2"])),
            ("dm-2".into(), DeviceKind::Crypt, 1, s(&["dm-1"])),
        ]
    );
    assert_eq!(
        p.notes,
        vec!["dm-2 names dm-1 beneath it, which is above it: a cycle, not followed".to_string()]
    );
}

#[test]
fn the_walk_is_bounded_in_depth_and_devices() {
    let t = Tree::new();
    t.mounts(&[
        ROOT_MOUNT,
        "2 1 253:0 / /deep rw - ext4 /dev/dm-0 rw",
        "3 1 9:0 / /wide rw - ext4 /dev/md0 rw",
    ]);
    let n = MAX_DEPTH as usize + 5;
    for i in 0..n {
        let below = format!("dm-{}", i + 1);
        t.dm(&format!("dm-{i}"), &format!("253:{i}"), "x", "", &[&below]);
    }
    let members: Vec<String> = (0..100).map(|i| format!("sd{i}")).collect();
    for (i, m) in members.iter().enumerate() {
        t.scsi(m, &format!("8:{}", i * 16), "disk");
    }
    let md = t.block("md0", "9:0", 1);
    t.file(&format!("{md}/md/level"), "raid6\n");
    let refs: Vec<&str> = members.iter().map(String::as_str).collect();
    t.slaves("md0", &refs);
    t.dir("deep");
    t.dir("wide");
    let d = detect_paths(&t, &["/deep", "/wide"]);
    let deep = &d.paths[0];
    assert_eq!(deep.devices.known().unwrap().len(), MAX_DEPTH as usize + 1);
    assert!(
        deep.notes
            .iter()
            .any(|n| n.contains("deeper than 16 layers")),
        "{:?}",
        deep.notes
    );
    let labels: Vec<String> = d.rows().into_iter().map(|(l, _)| l).collect();
    assert!(labels.contains(&"/wide: note 2".to_string()), "{labels:#?}");
    let wide = &d.paths[1];
    assert_eq!(wide.devices.known().unwrap().len(), MAX_DEVICES_PER_PATH);
    assert!(
        wide.notes
            .iter()
            .any(|n| n.contains("more than 64 devices")),
        "{:?}",
        wide.notes
    );
    let md0 = &wide.devices.known().unwrap()[0];
    assert_eq!(md0.raid, Some(Fact::Known("raid6".into())));
}

#[test]
fn a_path_not_yet_created_is_examined_through_its_nearest_ancestor() {
    let t = Tree::new();
    t.mounts(&[ROOT_MOUNT]);
    t.virtio("vda", "252:0");
    t.partition("vda", "vda1", "252:1");
    t.dir("srv");
    let d = detect_paths(&t, &["/srv/mailbench/db1", "/etc/os-release/x"]);
    let p = &d.paths[0];
    assert!(!p.exists);
    assert_eq!(p.examined, Fact::Known("/srv".into()));
    assert_eq!(
        p.notes,
        vec!["/srv/mailbench/db1 does not exist yet: its nearest existing ancestor /srv was examined".to_string()]
    );
    assert_eq!(kinds(p)[0].0, "vda1");
    // Beneath a file: the file is the nearest existing ancestor.
    assert_eq!(d.paths[1].examined, Fact::Known("/etc/os-release".into()));
    let rows = d.rows();
    assert!(rows.iter().any(|(l, v)| l == "/srv/mailbench/db1: examined"
        && v == "/srv (the nearest existing ancestor: the path does not exist yet)"));
}

#[test]
fn without_a_mount_table_every_path_fact_says_why() {
    let t = Tree::new();
    t.dir("data");
    let d = detect_paths(&t, &["/data"]);
    let p = &d.paths[0];
    assert_eq!(
        p.filesystem.reason(),
        Some("/proc/self/mountinfo is not present")
    );
    assert_eq!(p.devices.reason(), Some("the filesystem is unknown"));
    let many: Vec<PathBuf> = (0..MAX_PATHS + 2).map(|_| PathBuf::from("/data")).collect();
    let d = detect_at(t.root(), &many, "v");
    assert_eq!(d.paths.len(), MAX_PATHS + 2);
    assert!(
        d.paths[MAX_PATHS]
            .examined
            .reason()
            .unwrap()
            .contains("at most 256 paths")
    );
}

#[test]
fn rows_give_one_line_per_fact_with_unknowns_and_their_reasons() {
    let t = Tree::new();
    t.mounts(&[
        "1 0 252:0 / / rw - ext4 /dev/vda rw",
        "2 1 252:1 / /data rw,noatime - ext4 /dev/vda1 rw,discard",
    ]);
    t.virtio("vda", "252:0");
    t.partition("vda", "vda1", "252:1");
    t.dir("data");
    let d = detect_paths(&t, &["/data"]);
    let rows = d.rows();
    let get = |label: &str| {
        rows.iter()
            .find(|(l, _)| l == label)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no row {label:?} in {rows:#?}"))
    };
    assert!(get("System model").starts_with("unknown (/sys/class/dmi/id is not present"));
    assert_eq!(get("Memory"), "251.70GiB (270255730688 bytes)");
    assert_eq!(
        get("/data: filesystem"),
        "ext4 on /dev/vda1, mounted at /data"
    );
    assert_eq!(
        get("/data: mount options"),
        "rw,noatime (superblock: rw,discard)"
    );
    assert_eq!(get("/data: vda1"), "partition, layer 0, on vda");
    assert_eq!(get("/data: vda"), "virtio, layer 1");
    assert_eq!(get("/data: vda: size"), "10GiB (10737418240 bytes)");
    assert_eq!(get("/data: vda: rotational"), "yes");
    assert_eq!(get("/data: vda: block size"), "logical 512, physical 4096");
    assert_eq!(
        get("/data: vda1: block size"),
        "unknown (a partition has no queue of its own: its disk's applies)"
    );
    let labels: BTreeSet<&String> = rows.iter().map(|(l, _)| l).collect();
    assert_eq!(labels.len(), rows.len(), "labels repeat: {rows:#?}");
}

use std::collections::BTreeSet;
