//! Facts about the host a result was measured on.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct HostInfo {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub cpus: usize,
    pub memory_bytes: u64,
}

/// This machine's host name (from /proc; `unknown` if unreadable).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

impl HostInfo {
    pub fn collect() -> HostInfo {
        let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string());
        let hostname = hostname();
        let kernel = read("/proc/sys/kernel/osrelease").unwrap_or_else(|_| "unknown".into());
        let os = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| {
                    l.strip_prefix("MemTotal:")
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                })
            })
            .map(|kb| kb * 1024)
            .unwrap_or(0);
        HostInfo {
            hostname,
            os,
            kernel,
            cpus,
            memory_bytes,
        }
    }
}

/// The current time as RFC 3339 UTC with seconds (`2026-11-21T14:01:02Z`).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Seconds since the Unix epoch as a float.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
