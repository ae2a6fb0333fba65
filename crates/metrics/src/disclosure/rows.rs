//! The detected facts as (label, text) rows: the "tested configuration"
//! table of a report, one row per fact, unknowns with their reason.

use super::{BlockDevice, Detected, Fact, PathFacts};
use mailbench_base::units::ByteSize;

/// `256GiB (274877906944 bytes)`.
fn bytes(b: &u64) -> String {
    format!("{} ({b} bytes)", ByteSize(*b))
}

impl Detected {
    /// One (label, text) row per fact: the host first, then each path's
    /// filesystem and devices (labelled `<path>: <device>: <fact>`).
    pub fn rows(&self) -> Vec<(String, String)> {
        let mut rows: Vec<(String, String)> = vec![
            ("mailbench version".into(), self.mailbench_version.clone()),
            ("Host name".into(), self.hostname.text()),
            ("System vendor".into(), self.system_vendor.text()),
            ("System model".into(), self.system_model.text()),
            ("System version".into(), self.system_version.text()),
            ("CPU model".into(), self.cpu_model.text()),
            ("Logical CPUs".into(), self.logical_cpus.text()),
            ("CPU sockets".into(), self.sockets.text()),
            ("CPU cores".into(), self.cores.text()),
            ("Memory".into(), self.memory_bytes.text_with(bytes)),
            ("Kernel".into(), self.kernel.text()),
            ("Operating system".into(), self.os.text()),
        ];
        for p in &self.paths {
            p.rows_into(&mut rows);
        }
        rows
    }
}

impl PathFacts {
    fn rows_into(&self, rows: &mut Vec<(String, String)>) {
        let at = |what: &str| format!("{}: {what}", self.path);
        let examined = self.examined.text_with(|e| {
            if self.exists {
                e.clone()
            } else {
                format!("{e} (the nearest existing ancestor: the path does not exist yet)")
            }
        });
        rows.push((at("examined"), examined));
        rows.push((
            at("filesystem"),
            self.filesystem.text_with(|f| {
                format!(
                    "{} on {}, mounted at {}",
                    f.fs_type, f.source, f.mount_point
                )
            }),
        ));
        rows.push((
            at("mount options"),
            self.filesystem
                .text_with(|f| format!("{} (superblock: {})", f.mount_options, f.super_options)),
        ));
        match &self.devices {
            Fact::Known(devs) => devs.iter().for_each(|d| d.rows_into(&self.path, rows)),
            Fact::Unknown(why) => rows.push((at("block devices"), format!("unknown ({why})"))),
        }
        for (i, n) in self.notes.iter().enumerate() {
            let label = if i == 0 {
                at("note")
            } else {
                at(&format!("note {}", i + 1))
            };
            rows.push((label, n.clone()));
        }
    }
}

impl BlockDevice {
    fn rows_into(&self, path: &str, rows: &mut Vec<(String, String)>) {
        let at = |what: &str| format!("{path}: {}: {what}", self.name);
        let mut what = format!("{}, layer {}", self.kind.name(), self.depth);
        for (label, f) in [
            ("name", &self.dm_name),
            ("level", &self.raid),
            ("backing file", &self.backing_file),
        ] {
            if let Some(f) = f {
                what.push_str(&format!(", {label} {}", f.text()));
            }
        }
        if !self.below.is_empty() {
            what.push_str(&format!(", on {}", self.below.join(", ")));
        }
        rows.push((format!("{path}: {}", self.name), what));
        rows.push((at("model"), self.model.text()));
        rows.push((at("size"), self.size_bytes.text_with(bytes)));
        rows.push((
            at("rotational"),
            self.rotational
                .text_with(|r| if *r { "yes" } else { "no" }.into()),
        ));
        rows.push((at("scheduler"), self.scheduler.text()));
        rows.push((at("nr_requests"), self.nr_requests.text()));
        if let Some(q) = &self.queue_depth {
            rows.push((at("queue depth"), q.text()));
        }
        let (l, p) = (&self.logical_block_size, &self.physical_block_size);
        let sizes = match (l.reason(), p.reason()) {
            (Some(a), Some(b)) if a == b => l.text(),
            _ => format!("logical {}, physical {}", l.text(), p.text()),
        };
        rows.push((at("block size"), sizes));
    }
}
