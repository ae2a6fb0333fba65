//! The host's own facts: DMI, CPUs, memory, kernel, OS.

use super::read::Sys;
use super::{Detected, Fact};
use std::collections::BTreeSet;
use std::path::Path;

const DMI: &str = "/sys/class/dmi/id";

/// Every host fact (no paths yet).
pub(crate) fn detect_host(sys: &Sys, tool_version: &str) -> Detected {
    let cpus = Cpus::read(sys);
    Detected {
        mailbench_version: tool_version.to_string(),
        hostname: sys.attr(Path::new("/proc/sys/kernel/hostname")).into(),
        system_vendor: dmi(sys, "sys_vendor"),
        system_model: dmi(sys, "product_name"),
        system_version: dmi(sys, "product_version"),
        cpu_model: cpus.model,
        logical_cpus: cpus.logical,
        sockets: cpus.sockets,
        cores: cpus.cores,
        memory_bytes: memory(sys),
        kernel: sys.attr(Path::new("/proc/sys/kernel/osrelease")).into(),
        os: os(sys),
        paths: Vec::new(),
    }
}

/// One DMI field; a machine (or VM) without DMI says so.
fn dmi(sys: &Sys, field: &str) -> Fact<String> {
    if !sys.exists(Path::new(DMI)) {
        return Fact::unknown(format!(
            "{DMI} is not present: no DMI table on this machine or virtual machine"
        ));
    }
    sys.attr(&Path::new(DMI).join(field)).into()
}

/// The CPU facts of /proc/cpuinfo (parsed by procfs).
struct Cpus {
    model: Fact<String>,
    logical: Fact<u64>,
    sockets: Fact<u64>,
    cores: Fact<u64>,
}

impl Cpus {
    fn read(sys: &Sys) -> Cpus {
        match sys.table("/proc/cpuinfo").and_then(|t| Cpus::parse(&t)) {
            Ok(c) => c,
            Err(why) => Cpus {
                model: Fact::unknown(why.clone()),
                logical: Fact::unknown(why.clone()),
                sockets: Fact::unknown(why.clone()),
                cores: Fact::unknown(why),
            },
        }
    }

    fn parse(text: &str) -> Result<Cpus, String> {
        use procfs::FromRead;
        let info = procfs::CpuInfo::from_read(text.as_bytes())
            .map_err(|e| format!("/proc/cpuinfo could not be parsed: {e}"))?;
        let cpus: Vec<usize> = (0..info.cpus.len())
            .filter(|&i| info.get_field(i, "processor").is_some())
            .collect();
        if cpus.is_empty() {
            return Err("/proc/cpuinfo lists no processor".into());
        }
        let field = |i: usize, name: &str| info.get_field(i, name).map(str::to_string);
        let model = (cpus.first().and_then(|&i| field(i, "model name")))
            .ok_or_else(|| "/proc/cpuinfo has no \"model name\"".to_string());
        let packages: Option<BTreeSet<String>> =
            cpus.iter().map(|&i| field(i, "physical id")).collect();
        let cores: Option<BTreeSet<(String, String)>> = (cpus.iter())
            .map(|&i| Some((field(i, "physical id")?, field(i, "core id")?)))
            .collect();
        Ok(Cpus {
            model: model.into(),
            logical: Fact::Known(cpus.len() as u64),
            sockets: (packages.map(|s| s.len() as u64))
                .ok_or_else(|| "/proc/cpuinfo has no \"physical id\" for every CPU".to_string())
                .into(),
            cores: (cores.map(|s| s.len() as u64))
                .ok_or_else(|| {
                    "/proc/cpuinfo has no \"physical id\" and \"core id\" for every CPU".to_string()
                })
                .into(),
        })
    }
}

/// MemTotal of /proc/meminfo (`MemTotal:  24684096 kB`; the one field read,
/// so a file without the others still answers).
fn memory(sys: &Sys) -> Fact<u64> {
    sys.table("/proc/meminfo")
        .and_then(|t| mem_total(&t))
        .into()
}

fn mem_total(text: &str) -> Result<u64, String> {
    let line = (text.lines().find_map(|l| l.strip_prefix("MemTotal:")))
        .ok_or("/proc/meminfo has no MemTotal")?;
    let mut words = line.split_whitespace();
    let n = words.next().and_then(|w| w.parse::<u64>().ok());
    let bytes = match (n, words.next()) {
        (Some(n), Some("kB")) => n.checked_mul(1024),
        (Some(n), None) => Some(n),
        _ => None,
    };
    bytes.ok_or_else(|| {
        format!(
            "/proc/meminfo MemTotal reads {:?}",
            super::read::clip(line.trim())
        )
    })
}

/// PRETTY_NAME of /etc/os-release (or /usr/lib/os-release, its fallback).
fn os(sys: &Sys) -> Fact<String> {
    let text = match sys.table("/etc/os-release") {
        Ok(t) => t,
        Err(first) => match sys.table("/usr/lib/os-release") {
            Ok(t) => t,
            Err(_) => return Fact::unknown(first),
        },
    };
    let pretty = text.lines().find_map(|l| l.strip_prefix("PRETTY_NAME="));
    match pretty.map(|v| v.trim().trim_matches(|c| c == '"' || c == '\'')) {
        Some(v) if !v.is_empty() => Fact::Known(v.to_string()),
        _ => Fact::unknown("os-release has no PRETTY_NAME"),
    }
}
