//! The server host's configuration as its Prometheus node exporter reports
//! it: `node_uname_info` (operating system, kernel release, host name,
//! machine), the CPUs (`node_cpu_seconds_total`'s cores), the memory
//! (`node_memory_MemTotal_bytes`), the disks (`node_disk_info`) and the
//! block-device filesystems (`node_filesystem_size_bytes`). Read once, for a
//! full disclosure; a fact the exporter does not report is unknown with the
//! reason, never guessed.

use crate::disclosure::Fact;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The most disks or filesystems one server's configuration lists.
pub const MAX_LISTED: usize = 64;

/// One disk the exporter lists (`node_disk_info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExporterDisk {
    pub device: String,
    /// The model label (empty labels are left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// One filesystem on a block device (`node_filesystem_size_bytes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExporterFilesystem {
    pub mountpoint: String,
    pub fstype: String,
    pub device: String,
    pub size_bytes: u64,
}

/// The server host as one exporter reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerConfig {
    /// The endpoint read (`http://server:9100/metrics`), or `none`.
    pub source: String,
    /// `node_uname_info`'s labels.
    pub sysname: Fact<String>,
    pub release: Fact<String>,
    pub nodename: Fact<String>,
    pub machine: Fact<String>,
    pub cpus: Fact<u64>,
    pub memory_bytes: Fact<u64>,
    /// Whole disks (partitions and stacked devices left out).
    pub disks: Fact<Vec<ExporterDisk>>,
    /// Filesystems on block devices (`/dev/...`).
    pub filesystems: Fact<Vec<ExporterFilesystem>>,
}

impl ServerConfig {
    /// Every fact unknown, for `why`.
    pub fn unknown(source: &str, why: &str) -> ServerConfig {
        ServerConfig {
            source: source.to_string(),
            sysname: Fact::unknown(why),
            release: Fact::unknown(why),
            nodename: Fact::unknown(why),
            machine: Fact::unknown(why),
            cpus: Fact::unknown(why),
            memory_bytes: Fact::unknown(why),
            disks: Fact::unknown(why),
            filesystems: Fact::unknown(why),
        }
    }

    /// One (label, text) row per fact, unknowns with their reason.
    pub fn rows(&self) -> Vec<(String, String)> {
        let gib = |b: &u64| format!("{:.1} GiB ({b} bytes)", *b as f64 / (1u64 << 30) as f64);
        let mut rows = vec![
            ("Server metrics source".into(), self.source.clone()),
            ("Server host name".into(), self.nodename.text()),
            ("Server operating system".into(), self.sysname.text()),
            ("Server kernel release".into(), self.release.text()),
            ("Server machine".into(), self.machine.text()),
            ("Server CPUs".into(), self.cpus.text()),
            ("Server memory".into(), self.memory_bytes.text_with(gib)),
        ];
        rows.push((
            "Server disks".into(),
            self.disks.text_with(|d| {
                let names: Vec<String> = (d.iter())
                    .map(|x| match &x.model {
                        Some(m) => format!("{} ({m})", x.device),
                        None => x.device.clone(),
                    })
                    .collect();
                if names.is_empty() {
                    "none listed".into()
                } else {
                    names.join(", ")
                }
            }),
        ));
        rows.push((
            "Server filesystems".into(),
            self.filesystems.text_with(|f| {
                let items: Vec<String> = (f.iter())
                    .map(|x| {
                        format!(
                            "{} {} on {} ({})",
                            x.mountpoint,
                            x.fstype,
                            x.device,
                            gib(&x.size_bytes)
                        )
                    })
                    .collect();
                if items.is_empty() {
                    "none on a block device".into()
                } else {
                    items.join("; ")
                }
            }),
        ));
        rows
    }
}

/// The series of one exposition a [`ServerConfig`] is made of, added one
/// sample at a time.
#[derive(Debug, Default)]
pub struct ConfigReader {
    uname: Option<BTreeMap<String, String>>,
    cores: BTreeSet<String>,
    memory: Option<u64>,
    disks: BTreeMap<String, Option<String>>,
    filesystems: BTreeMap<String, ExporterFilesystem>,
}

impl ConfigReader {
    /// One sample: its metric name, its label (by key; "" when absent) and
    /// value. Series other than the configuration's are ignored.
    pub fn add(&mut self, name: &str, label: &dyn Fn(&str) -> String, v: f64) {
        match name {
            "node_uname_info" => {
                let keys = ["sysname", "release", "nodename", "machine"];
                self.uname = Some(keys.iter().map(|k| (k.to_string(), label(k))).collect());
            }
            "node_cpu_seconds_total" => {
                self.cores.insert(label("cpu"));
            }
            "node_memory_MemTotal_bytes" if v.is_finite() && v >= 0.0 => {
                self.memory = Some(v as u64);
            }
            "node_disk_info" => {
                let device = label("device");
                if crate::server::is_whole_disk(&device) && self.disks.len() < MAX_LISTED {
                    let model = Some(label("model")).filter(|m| !m.trim().is_empty());
                    self.disks.insert(device, model);
                }
            }
            "node_filesystem_size_bytes" if v.is_finite() && v >= 0.0 => {
                let device = label("device");
                if device.starts_with("/dev/") && self.filesystems.len() < MAX_LISTED {
                    let mountpoint = label("mountpoint");
                    self.filesystems.insert(
                        mountpoint.clone(),
                        ExporterFilesystem {
                            mountpoint,
                            fstype: label("fstype"),
                            device,
                            size_bytes: v as u64,
                        },
                    );
                }
            }
            _ => {}
        }
    }

    /// The configuration read from `source`.
    pub fn finish(self, source: &str) -> ServerConfig {
        let no_node = "the endpoint reports no node exporter series";
        let uname = |k: &str| -> Fact<String> {
            match &self.uname {
                None => Fact::unknown(format!("{source} reports no node_uname_info")),
                Some(m) => match m.get(k).filter(|v| !v.is_empty()) {
                    Some(v) => Fact::Known(v.clone()),
                    None => Fact::unknown(format!("node_uname_info has no {k} label")),
                },
            }
        };
        let any_node = self.uname.is_some() || !self.cores.is_empty() || self.memory.is_some();
        ServerConfig {
            source: source.to_string(),
            sysname: uname("sysname"),
            release: uname("release"),
            nodename: uname("nodename"),
            machine: uname("machine"),
            cpus: if self.cores.is_empty() {
                Fact::unknown(format!("{source} reports no node_cpu_seconds_total"))
            } else {
                Fact::Known(self.cores.len() as u64)
            },
            memory_bytes: match self.memory {
                Some(m) => Fact::Known(m),
                None => Fact::unknown(format!("{source} reports no node_memory_MemTotal_bytes")),
            },
            disks: if any_node || !self.disks.is_empty() {
                Fact::Known(
                    (self.disks.into_iter())
                        .map(|(device, model)| ExporterDisk { device, model })
                        .collect(),
                )
            } else {
                Fact::unknown(no_node)
            },
            filesystems: if any_node || !self.filesystems.is_empty() {
                Fact::Known(self.filesystems.into_values().collect())
            } else {
                Fact::unknown(no_node)
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample: metric name, labels, value.
    type Sample<'a> = (&'a str, &'a [(&'a str, &'a str)], f64);

    fn read(lines: &[Sample]) -> ServerConfig {
        let mut r = ConfigReader::default();
        for (name, labels, v) in lines {
            let label = |k: &str| {
                (labels.iter())
                    .find(|(a, _)| *a == k)
                    .map(|(_, b)| b.to_string())
                    .unwrap_or_default()
            };
            r.add(name, &label, *v);
        }
        r.finish("http://s:9100/metrics")
    }

    #[test]
    fn a_node_exporter_gives_every_fact() {
        let uname: &[(&str, &str)] = &[
            ("sysname", "Linux"),
            ("release", "6.1.0-18-amd64"),
            ("nodename", "mail1"),
            ("machine", "x86_64"),
        ];
        let c = read(&[
            ("node_uname_info", uname, 1.0),
            (
                "node_cpu_seconds_total",
                &[("cpu", "0"), ("mode", "idle")],
                5.0,
            ),
            (
                "node_cpu_seconds_total",
                &[("cpu", "0"), ("mode", "user")],
                5.0,
            ),
            (
                "node_cpu_seconds_total",
                &[("cpu", "1"), ("mode", "idle")],
                5.0,
            ),
            (
                "node_memory_MemTotal_bytes",
                &[],
                8.0 * 1024.0 * 1024.0 * 1024.0,
            ),
            ("node_disk_info", &[("device", "vda"), ("model", "")], 1.0),
            ("node_disk_info", &[("device", "vda1")], 1.0),
            (
                "node_disk_info",
                &[("device", "sdb"), ("model", "SSD 860")],
                1.0,
            ),
            (
                "node_filesystem_size_bytes",
                &[
                    ("device", "/dev/vda1"),
                    ("fstype", "ext4"),
                    ("mountpoint", "/"),
                ],
                1e9,
            ),
            (
                "node_filesystem_size_bytes",
                &[
                    ("device", "tmpfs"),
                    ("fstype", "tmpfs"),
                    ("mountpoint", "/run"),
                ],
                1e6,
            ),
        ]);
        assert_eq!(c.sysname, Fact::Known("Linux".into()));
        assert_eq!(c.release, Fact::Known("6.1.0-18-amd64".into()));
        assert_eq!(c.nodename, Fact::Known("mail1".into()));
        assert_eq!(c.machine, Fact::Known("x86_64".into()));
        assert_eq!(c.cpus, Fact::Known(2));
        assert_eq!(c.memory_bytes, Fact::Known(8 << 30));
        let disks = c.disks.known().unwrap();
        assert_eq!(disks.len(), 2, "the partition is left out: {disks:?}");
        assert_eq!(disks[0].model.as_deref(), Some("SSD 860"));
        assert_eq!(disks[1].model, None);
        let fs = c.filesystems.known().unwrap();
        assert_eq!(fs.len(), 1, "tmpfs is on no block device: {fs:?}");
        assert_eq!(fs[0].size_bytes, 1_000_000_000);
        let rows = c.rows();
        assert!(
            rows.iter()
                .any(|(k, v)| k == "Server memory" && v.starts_with("8.0 GiB"))
        );
    }

    #[test]
    fn what_the_exporter_does_not_report_is_unknown_with_the_reason() {
        let c = read(&[("node_memory_MemTotal_bytes", &[], 1024.0)]);
        assert!(c.sysname.reason().unwrap().contains("no node_uname_info"));
        assert!(c.cpus.reason().unwrap().contains("node_cpu_seconds_total"));
        assert_eq!(c.memory_bytes, Fact::Known(1024));
        let c = read(&[("postfix_up", &[], 1.0)]);
        assert!(c.disks.reason().is_some());
        let u = ServerConfig::unknown("none", "no exporter");
        assert!(
            u.rows()
                .iter()
                .skip(1)
                .all(|(_, v)| v == "unknown (no exporter)")
        );
    }
}
