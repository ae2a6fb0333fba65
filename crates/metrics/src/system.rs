//! The operating system's view: host CPU and memory (/proc/stat, /proc/meminfo)
//! and block-device counters (/proc/diskstats) for the device under a path.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// Clock ticks per second of the CPU times in /proc (USER_HZ, from sysconf).
fn ticks_per_second() -> f64 {
    procfs::ticks_per_second().max(1) as f64
}

/// CPU seconds (user + system) from a /proc/<pid>/stat or
/// /proc/thread-self/stat text (parsed by procfs, which counts fields from
/// the last `)`, so a command name with spaces and parentheses cannot shift them).
pub fn parse_cpu_s(stat: &str) -> Option<f64> {
    use procfs::FromRead;
    let s = procfs::process::Stat::from_read(stat.as_bytes()).ok()?;
    Some((s.utime + s.stime) as f64 / ticks_per_second())
}

/// CPU seconds this process has used, from /proc/self/stat; the error names
/// the file and why it gave no figure (never read as 0).
pub fn process_cpu_s() -> Result<f64, String> {
    cpu_s_of("/proc/self/stat", "this process's")
}

/// CPU seconds the calling thread has used, from /proc/thread-self/stat; the
/// error names the file and why it gave no figure.
pub fn thread_cpu_s() -> Result<f64, String> {
    cpu_s_of("/proc/thread-self/stat", "this thread's")
}

fn cpu_s_of(path: &str, whose: &str) -> Result<f64, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{whose} CPU time could not be read from {path}: {e}"))?;
    parse_cpu_s(&text).ok_or_else(|| {
        format!("{whose} CPU time could not be read from {path}: the text does not parse")
    })
}

/// Cumulative CPU ticks (USER_HZ) of all CPUs or one, from /proc/stat.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    pub busy: u64,
    pub idle: u64,
    pub iowait: u64,
}

impl CpuTimes {
    pub fn read() -> Option<CpuTimes> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The all-CPU `cpu ` line of /proc/stat.
    pub fn parse(stat: &str) -> Option<CpuTimes> {
        cpu_lines(stat)?.into_iter().next().map(|(_, t)| t)
    }

    /// Busy and iowait percentages of all CPUs between two readings.
    pub fn usage_since(&self, earlier: &CpuTimes) -> (f64, f64) {
        let d = |a: u64, b: u64| a.saturating_sub(b) as f64;
        busy_iowait_pct(
            d(self.busy, earlier.busy),
            d(self.idle, earlier.idle),
            d(self.iowait, earlier.iowait),
        )
    }

    /// Busy is everything but idle and iowait: user, nice, system, irq,
    /// softirq and steal (guest time is inside user).
    fn of(t: &procfs::CpuTime) -> CpuTimes {
        let opt = |v: Option<u64>| v.unwrap_or(0);
        CpuTimes {
            busy: t.user + t.nice + t.system + opt(t.irq) + opt(t.softirq) + opt(t.steal),
            idle: t.idle,
            iowait: opt(t.iowait),
        }
    }
}

/// The `cpu…` lines of a /proc/stat text (parsed by procfs): `""` for all
/// CPUs first, then `"0"`, `"1"`, ... per core in the file's order; None when
/// the text is not a /proc/stat.
pub fn cpu_lines(stat: &str) -> Option<Vec<(String, CpuTimes)>> {
    use procfs::FromReadSI;
    let k = procfs::KernelStats::from_read(stat.as_bytes(), procfs::current_system_info()).ok()?;
    let cores = (k.cpu_time.iter().enumerate()).map(|(i, t)| (i.to_string(), CpuTimes::of(t)));
    Some(
        std::iter::once((String::new(), CpuTimes::of(&k.total)))
            .chain(cores)
            .collect(),
    )
}

/// Busy and iowait percentages of busy + idle + iowait time (0 without time).
pub fn busy_iowait_pct(busy: f64, idle: f64, iowait: f64) -> (f64, f64) {
    let total = busy + idle + iowait;
    if total <= 0.0 {
        (0.0, 0.0)
    } else {
        (100.0 * busy / total, 100.0 * iowait / total)
    }
}

/// Memory figures from /proc/meminfo, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub total_bytes: u64,
    pub available_bytes: u64,
}

impl Memory {
    pub fn read() -> Option<Memory> {
        Self::parse(&std::fs::read_to_string("/proc/meminfo").ok()?)
    }

    /// A /proc/meminfo text (parsed by procfs); None without MemAvailable.
    pub fn parse(text: &str) -> Option<Memory> {
        use procfs::FromRead;
        let m = procfs::Meminfo::from_read(text.as_bytes()).ok()?;
        Some(Memory {
            total_bytes: m.mem_total,
            available_bytes: m.mem_available?,
        })
    }

    pub fn used_pct(&self) -> f64 {
        if self.total_bytes == 0 {
            0.0
        } else {
            100.0 * (self.total_bytes - self.available_bytes.min(self.total_bytes)) as f64
                / self.total_bytes as f64
        }
    }
}

/// The block device holding `path`, as named in /proc/diskstats (`vda`, `loop0`),
/// or None for file systems without one (tmpfs, overlay).
pub fn device_of(path: &Path) -> Option<(u32, u32, String)> {
    use std::os::unix::fs::MetadataExt;
    let mut p = path.to_path_buf();
    let meta = loop {
        match std::fs::metadata(&p) {
            Ok(m) => break m,
            Err(_) => p = p.parent()?.to_path_buf(),
        }
    };
    let dev = meta.dev();
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    if maj == 0 {
        return None;
    }
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    DiskCounters::parse_all(&text)
        .into_iter()
        .find(|(ma, mi, _, _)| *ma == maj && *mi == min)
        .map(|(ma, mi, name, _)| (ma, mi, name))
}

/// Cumulative counters of one device from /proc/diskstats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskCounters {
    pub reads: u64,
    pub read_sectors: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub write_sectors: u64,
    pub write_ms: u64,
    pub in_flight: u64,
    pub io_ms: u64,
    pub weighted_ms: u64,
}

impl DiskCounters {
    /// Every device of a /proc/diskstats text (lines parsed by procfs; a
    /// line it refuses is passed over).
    pub fn parse_all(text: &str) -> Vec<(u32, u32, String, DiskCounters)> {
        (text
            .lines()
            .filter_map(|l| procfs::DiskStat::from_line(l).ok()))
        .filter_map(|d| {
            let c = DiskCounters {
                reads: d.reads,
                read_sectors: d.sectors_read,
                read_ms: d.time_reading,
                writes: d.writes,
                write_sectors: d.sectors_written,
                write_ms: d.time_writing,
                in_flight: d.in_progress,
                io_ms: d.time_in_progress,
                weighted_ms: d.weighted_time_in_progress,
            };
            Some((
                d.major.try_into().ok()?,
                d.minor.try_into().ok()?,
                d.name,
                c,
            ))
        })
        .collect()
    }

    pub fn read(device: &str) -> Option<DiskCounters> {
        let text = std::fs::read_to_string("/proc/diskstats").ok()?;
        Self::parse_all(&text)
            .into_iter()
            .find(|(_, _, n, _)| n == device)
            .map(|(_, _, _, c)| c)
    }

    /// Rates between two readings `secs` apart.
    pub fn rates_since(&self, earlier: &DiskCounters, secs: f64) -> DiskRates {
        let d = |a: u64, b: u64| a.saturating_sub(b) as f64;
        let reads = d(self.reads, earlier.reads);
        let writes = d(self.writes, earlier.writes);
        let secs = secs.max(1e-9);
        DiskRates {
            reads_per_s: reads / secs,
            writes_per_s: writes / secs,
            read_bytes_per_s: d(self.read_sectors, earlier.read_sectors) * 512.0 / secs,
            write_bytes_per_s: d(self.write_sectors, earlier.write_sectors) * 512.0 / secs,
            read_latency_ms: if reads > 0.0 {
                d(self.read_ms, earlier.read_ms) / reads
            } else {
                0.0
            },
            write_latency_ms: if writes > 0.0 {
                d(self.write_ms, earlier.write_ms) / writes
            } else {
                0.0
            },
            utilisation_pct: (100.0 * d(self.io_ms, earlier.io_ms) / (secs * 1000.0)).min(100.0),
            queue_depth: d(self.weighted_ms, earlier.weighted_ms) / (secs * 1000.0),
        }
    }
}

/// A block device's activity over an interval, as the kernel counted it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiskRates {
    pub reads_per_s: f64,
    pub writes_per_s: f64,
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
    pub read_latency_ms: f64,
    pub write_latency_ms: f64,
    pub utilisation_pct: f64,
    pub queue_depth: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_of_a_stat_line_with_a_strange_name() {
        // A command name with spaces and parentheses must not shift the fields.
        // The kernel's 52 fields (fs/proc/array.c); utime and stime are 14 and 15.
        let tail = "0 0 20 0 1 0 2320066 3133440 414 18446744073709551615 1 2 3 0 0 0 0 0 0 0 \
                    0 0 17 1 0 0 0 0 0 4 5 6 7 8 9 10 0";
        let line = format!("42 (a) b (c) S 1 2 3 4 5 6 7 8 9 10 250 150 {tail}");
        assert_eq!(parse_cpu_s(&line), Some(4.0));
        let line = format!("4242 (mb (x) y) S 1 4242 4242 0 -1 4194560 9 0 0 0 250 130 {tail}");
        assert_eq!(parse_cpu_s(&line), Some(3.8));
        assert_eq!(parse_cpu_s("42 (x) S 1"), None);
        assert!(process_cpu_s().unwrap() >= 0.0 && thread_cpu_s().unwrap() >= 0.0);
    }

    /// A CPU time /proc cannot give is an error naming the file, never 0.
    #[test]
    fn an_unreadable_cpu_time_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("stat");
        std::fs::write(&garbage, "42 (x) S 1").unwrap();
        let missing = dir.path().join("missing");
        for path in [&missing, &garbage, &dir.path().to_path_buf()] {
            let p = path.to_str().unwrap();
            let e = cpu_s_of(p, "this process's").unwrap_err();
            assert!(e.contains(p) && e.contains("CPU time"), "{e}");
        }
    }

    #[test]
    fn parses_proc_stat_and_meminfo() {
        let rest = "intr 1\nctxt 9\nbtime 1700000000\nprocesses 42\nprocs_running 1\n";
        let a = CpuTimes::parse(&format!(
            "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3 4 0 0 0 0 0 0\n{rest}"
        ))
        .unwrap();
        let b = CpuTimes::parse(&format!("cpu  150 0 150 900 0 0 0 0 0 0\n{rest}")).unwrap();
        let (busy, iow) = b.usage_since(&a);
        assert!((busy - 50.0).abs() < 1e-9 && iow == 0.0);
        let m = Memory::parse(
            "MemTotal: 1000 kB\nMemFree: 10 kB\nMemAvailable: 250 kB\nBuffers: 1 kB\n\
             Cached: 1 kB\nSwapCached: 0 kB\nActive: 1 kB\nInactive: 1 kB\nSwapTotal: 0 kB\n\
             SwapFree: 0 kB\nDirty: 0 kB\nWriteback: 0 kB\nMapped: 0 kB\nSlab: 0 kB\n\
             CommitLimit: 0 kB\nCommitted_AS: 0 kB\nVmallocTotal: 0 kB\nVmallocUsed: 0 kB\n\
             VmallocChunk: 0 kB\n",
        )
        .unwrap();
        assert_eq!(m.total_bytes, 1_024_000);
        assert!((m.used_pct() - 75.0).abs() < 1e-9);
    }

    #[test]
    fn parses_diskstats_and_rates() {
        let t0 = " 254 0 vda 100 0 800 50 10 0 80 20 0 60 70 0 0 0 0";
        let t1 = " 254 0 vda 300 0 2400 250 20 0 160 40 1 1060 1070 0 0 0 0";
        let a = DiskCounters::parse_all(t0)[0].3;
        let b = DiskCounters::parse_all(t1)[0].3;
        let r = b.rates_since(&a, 2.0);
        assert_eq!(r.reads_per_s, 100.0);
        assert_eq!(r.writes_per_s, 5.0);
        assert_eq!(r.read_bytes_per_s, 1600.0 * 512.0 / 2.0);
        assert_eq!(r.read_latency_ms, 1.0);
        assert_eq!(r.utilisation_pct, 50.0);
    }

    #[test]
    fn finds_the_device_of_a_real_path() {
        // The root file system of a normal machine sits on a block device; a
        // container overlay does not. Either answer must be consistent.
        if let Some((_, _, name)) = device_of(Path::new("/")) {
            assert!(DiskCounters::read(&name).is_some());
        }
    }
}
