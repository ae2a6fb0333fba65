//! The server host's own figures, whatever reads them: one sample type for the
//! counters a Prometheus node exporter (plus a Postfix exporter or Dovecot's
//! OpenMetrics endpoint) reports and for the same counters read from this
//! host's /proc, and the figures derived from two samples (CPU busy per core,
//! memory, the store volume's reads and writes, network, mail queues, server-side
//! command counts, disk IOPS per mailbox).
//!
//! Samples are cumulative counters at one instant; every figure is a difference
//! of two samples over the seconds between them, so a window's figures are exact
//! whatever the sampling interval.

use crate::system::{DiskCounters, DiskRates, Memory};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Seconds one CPU core spent, cumulative (node_cpu_seconds_total, or a `cpuN`
/// line of /proc/stat).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CoreSeconds {
    /// Every mode but idle and iowait (user, nice, system, irq, softirq, steal).
    pub busy: f64,
    pub idle: f64,
    pub iowait: f64,
}

impl CoreSeconds {
    fn add(&mut self, o: &CoreSeconds) {
        self.busy += o.busy;
        self.idle += o.idle;
        self.iowait += o.iowait;
    }

    /// Busy and iowait percentages between two readings of this core.
    pub fn usage_since(&self, earlier: &CoreSeconds) -> (f64, f64) {
        let d = |a: f64, b: f64| (a - b).max(0.0);
        crate::system::busy_iowait_pct(
            d(self.busy, earlier.busy),
            d(self.idle, earlier.idle),
            d(self.iowait, earlier.iowait),
        )
    }
}

/// Cumulative counters of one network device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NetCounters {
    pub rx_bytes: f64,
    pub tx_bytes: f64,
    pub rx_packets: f64,
    pub tx_packets: f64,
}

/// A network device's traffic over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NetRates {
    pub rx_bytes_per_s: f64,
    pub tx_bytes_per_s: f64,
    pub rx_packets_per_s: f64,
    pub tx_packets_per_s: f64,
}

/// The operating system's counters of the server host at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSample {
    /// Per core, by the exporter's name (`0`, `1`, ...).
    pub cores: BTreeMap<String, CoreSeconds>,
    pub memory: Option<Memory>,
    /// Per block device (`vda`, `nvme0n1`, `dm-0`).
    pub disks: BTreeMap<String, DiskCounters>,
    /// Per network device (`eth0`, `lo`).
    pub net: BTreeMap<String, NetCounters>,
}

/// The mail server's own view at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MailServerSample {
    /// Messages in each Postfix queue (`active`, `deferred`, `hold`, `incoming`,
    /// `maildrop`): a gauge.
    pub queues: BTreeMap<String, f64>,
    /// Commands the server answered, cumulative, by `protocol:COMMAND`
    /// (`imap:SELECT`, from Dovecot's `cmd_name` metrics).
    pub commands: BTreeMap<String, f64>,
}

impl MailServerSample {
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty() && self.commands.is_empty()
    }
}

/// One reading of one source (an exporter URL, or this host's /proc).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSample {
    /// Seconds since the run's start when the reading was taken.
    pub t_s: f64,
    /// None when the source reports no host counters (a Postfix exporter alone).
    pub host: Option<HostSample>,
    pub mail: MailServerSample,
}

/// Which block devices make up the mail store's volume.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StoreDevices {
    /// Every whole physical disk (no partitions, loop, RAM, optical, device-mapper
    /// or md devices, which would count the same I/O twice).
    #[default]
    WholeDisks,
    /// These devices, by their kernel name.
    Named(Vec<String>),
}

impl StoreDevices {
    /// The devices of `disks` this selection takes.
    pub fn pick<'a>(&self, disks: impl Iterator<Item = &'a String>) -> Vec<String> {
        match self {
            StoreDevices::WholeDisks => disks.filter(|d| is_whole_disk(d)).cloned().collect(),
            StoreDevices::Named(names) => {
                let have: Vec<&String> = disks.collect();
                names.iter().filter(|n| have.contains(n)).cloned().collect()
            }
        }
    }
}

/// True for a whole physical or virtual disk (`sda`, `vda`, `xvdb`, `nvme0n1`,
/// `mmcblk0`); false for partitions and stacked or pseudo devices.
pub fn is_whole_disk(name: &str) -> bool {
    const PSEUDO: [&str; 9] = [
        "loop", "ram", "zram", "sr", "fd", "dm-", "md", "nbd", "drbd",
    ];
    if PSEUDO.iter().any(|p| name.starts_with(p)) {
        return false;
    }
    let digits_tail = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    for prefix in ["sd", "vd", "hd", "xvd"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            // sda is whole, sda1 a partition.
            return digits_tail == 0 && !rest.is_empty();
        }
    }
    if name.starts_with("nvme") || name.starts_with("mmcblk") {
        // nvme0n1 / mmcblk0 are whole, nvme0n1p2 / mmcblk0p1 partitions.
        let body = name.trim_end_matches(|c: char| c.is_ascii_digit());
        return !body.ends_with('p');
    }
    true
}

/// The store volume over a window: its devices' summed activity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StoreFigures {
    pub devices: Vec<String>,
    /// Rates of the summed counters (latency weighted by operations; utilisation
    /// is the busiest device's).
    pub rates: DiskRates,
}

/// Queue length over a window's samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueFigures {
    pub average: f64,
    pub max: f64,
    pub last: f64,
}

impl QueueFigures {
    pub fn of(values: &[f64]) -> Option<QueueFigures> {
        let last = *values.last()?;
        Some(QueueFigures {
            average: values.iter().sum::<f64>() / values.len() as f64,
            max: values.iter().copied().fold(f64::MIN, f64::max),
            last,
        })
    }
}

/// Server-side commands over a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommandFigures {
    pub count: f64,
    pub per_s: f64,
}

/// One source's figures over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerFigures {
    /// Seconds between the two samples the rates come from.
    pub seconds: f64,
    pub host: Option<HostFigures>,
    /// Messages in all Postfix queues together (sum of the queues per sample).
    pub queue: Option<QueueFigures>,
    pub queues: BTreeMap<String, QueueFigures>,
    pub commands: BTreeMap<String, CommandFigures>,
}

/// The host's figures over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostFigures {
    pub cores: usize,
    pub cpu_busy_pct: f64,
    pub cpu_iowait_pct: f64,
    pub cpu_busy_pct_per_core: BTreeMap<String, f64>,
    pub memory_total_bytes: Option<u64>,
    pub memory_used_pct_max: Option<f64>,
    pub store: Option<StoreFigures>,
    pub network: BTreeMap<String, NetRates>,
}

impl ServerFigures {
    /// Figures between the first and last of `samples` (in time order, one
    /// source); queue and memory figures from every sample in between. None with
    /// fewer than two samples or no time between them.
    pub fn of(samples: &[ServerSample], store: &StoreDevices) -> Option<ServerFigures> {
        let (a, b) = (samples.first()?, samples.last()?);
        let seconds = b.t_s - a.t_s;
        if samples.len() < 2 || seconds <= 0.0 {
            return None;
        }
        let host = match (&a.host, &b.host) {
            (Some(ha), Some(hb)) => Some(host_figures(ha, hb, samples, seconds, store)),
            _ => None,
        };
        let mut per_queue: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut totals = Vec::new();
        for s in samples.iter().filter(|s| !s.mail.queues.is_empty()) {
            for (q, n) in &s.mail.queues {
                per_queue.entry(q.clone()).or_default().push(*n);
            }
            totals.push(s.mail.queues.values().sum());
        }
        let commands = b
            .mail
            .commands
            .iter()
            .filter_map(|(k, end)| {
                let count = (end - a.mail.commands.get(k)?).max(0.0);
                Some((
                    k.clone(),
                    CommandFigures {
                        count,
                        per_s: count / seconds,
                    },
                ))
            })
            .collect();
        Some(ServerFigures {
            seconds,
            host,
            queue: QueueFigures::of(&totals),
            queues: per_queue
                .into_iter()
                .filter_map(|(q, v)| Some((q, QueueFigures::of(&v)?)))
                .collect(),
            commands,
        })
    }
}

fn host_figures(
    a: &HostSample,
    b: &HostSample,
    samples: &[ServerSample],
    seconds: f64,
    store: &StoreDevices,
) -> HostFigures {
    let mut all_a = CoreSeconds::default();
    let mut all_b = CoreSeconds::default();
    let mut per_core = BTreeMap::new();
    for (name, cb) in &b.cores {
        if let Some(ca) = a.cores.get(name) {
            all_a.add(ca);
            all_b.add(cb);
            per_core.insert(name.clone(), cb.usage_since(ca).0);
        }
    }
    let (busy, iowait) = all_b.usage_since(&all_a);
    let memory_used_pct_max = samples
        .iter()
        .filter_map(|s| s.host.as_ref()?.memory.map(|m| m.used_pct()))
        .reduce(f64::max);
    let network = b
        .net
        .iter()
        .filter_map(|(dev, nb)| {
            let na = a.net.get(dev)?;
            let r = |x: f64, y: f64| (x - y).max(0.0) / seconds;
            Some((
                dev.clone(),
                NetRates {
                    rx_bytes_per_s: r(nb.rx_bytes, na.rx_bytes),
                    tx_bytes_per_s: r(nb.tx_bytes, na.tx_bytes),
                    rx_packets_per_s: r(nb.rx_packets, na.rx_packets),
                    tx_packets_per_s: r(nb.tx_packets, na.tx_packets),
                },
            ))
        })
        .collect();
    HostFigures {
        cores: per_core.len(),
        cpu_busy_pct: busy,
        cpu_iowait_pct: iowait,
        cpu_busy_pct_per_core: per_core,
        memory_total_bytes: b.memory.map(|m| m.total_bytes),
        memory_used_pct_max,
        store: store_figures(a, b, seconds, store),
        network,
    }
}

fn store_figures(
    a: &HostSample,
    b: &HostSample,
    seconds: f64,
    store: &StoreDevices,
) -> Option<StoreFigures> {
    let devices: Vec<String> = store
        .pick(b.disks.keys())
        .into_iter()
        .filter(|d| a.disks.contains_key(d))
        .collect();
    if devices.is_empty() {
        return None;
    }
    let sum = |h: &HostSample| {
        devices
            .iter()
            .filter_map(|d| h.disks.get(d))
            .fold(DiskCounters::default(), |acc, c| add_counters(&acc, c))
    };
    let mut rates = sum(b).rates_since(&sum(a), seconds);
    rates.utilisation_pct = devices
        .iter()
        .filter_map(|d| Some(b.disks.get(d)?.rates_since(a.disks.get(d)?, seconds)))
        .map(|r| r.utilisation_pct)
        .fold(0.0, f64::max);
    Some(StoreFigures { devices, rates })
}

fn add_counters(x: &DiskCounters, y: &DiskCounters) -> DiskCounters {
    DiskCounters {
        reads: x.reads + y.reads,
        read_sectors: x.read_sectors + y.read_sectors,
        read_ms: x.read_ms + y.read_ms,
        writes: x.writes + y.writes,
        write_sectors: x.write_sectors + y.write_sectors,
        write_ms: x.write_ms + y.write_ms,
        in_flight: x.in_flight + y.in_flight,
        io_ms: x.io_ms + y.io_ms,
        weighted_ms: x.weighted_ms + y.weighted_ms,
    }
}

/// The store's disk operations per mailbox: the planner's `--iops-per-mailbox`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PerMailbox {
    pub users: u64,
    /// (reads + writes) per second per mailbox.
    pub iops_per_mailbox: f64,
    pub reads_per_user_per_s: f64,
    pub writes_per_user_per_s: f64,
}

impl PerMailbox {
    /// Every rate multiplied by `k`.
    pub fn scaled(&self, k: f64) -> PerMailbox {
        PerMailbox {
            users: self.users,
            iops_per_mailbox: self.iops_per_mailbox * k,
            reads_per_user_per_s: self.reads_per_user_per_s * k,
            writes_per_user_per_s: self.writes_per_user_per_s * k,
        }
    }

    pub fn of(rates: &DiskRates, users: u64) -> Option<PerMailbox> {
        if users == 0 {
            return None;
        }
        let u = users as f64;
        Some(PerMailbox {
            users,
            iops_per_mailbox: (rates.reads_per_s + rates.writes_per_s) / u,
            reads_per_user_per_s: rates.reads_per_s / u,
            writes_per_user_per_s: rates.writes_per_s / u,
        })
    }
}

// ---- a run's server section ------------------------------------------------

/// One source's figures over a window of the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceFigures {
    pub source: String,
    pub kinds: Vec<String>,
    pub scrapes: u64,
    pub failures: u64,
    pub error: Option<String>,
    /// Over the window (None when fewer than two readings fell in it).
    pub figures: Option<ServerFigures>,
    /// The store's disk operations per mailbox over the window.
    pub per_mailbox: Option<PerMailbox>,
}

/// One reading-to-reading step, for charts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerPoint {
    pub t_s: f64,
    pub cpu_busy_pct: Option<f64>,
    pub store_iops: Option<f64>,
    pub queue: Option<f64>,
}

/// The `server` section of a mail run's result.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerSection {
    /// The window the figures cover, seconds since the run's start.
    pub from_s: f64,
    pub to_s: f64,
    pub sources: Vec<SourceFigures>,
    /// Every source's store I/O together per mailbox (several servers carry the
    /// users between them).
    pub per_mailbox: Option<PerMailbox>,
    /// The day's compression (simulated day / real day): the users' rates are
    /// that many times the profile's.
    pub compression: f64,
    /// `per_mailbox` divided by the compression: the figure at the profile's
    /// real rate, for `mailbench plan --iops-per-mailbox` (background I/O that
    /// does not scale with the users is divided too, so it is a lower bound).
    pub per_mailbox_real_day: Option<PerMailbox>,
    /// Per source, reading to reading over the whole run.
    pub points: BTreeMap<String, Vec<ServerPoint>>,
}

// ---- this host's /proc as the same sample ---------------------------------

/// Per-core seconds from the `cpuN` lines of /proc/stat.
pub fn parse_proc_cores(stat: &str) -> BTreeMap<String, CoreSeconds> {
    let hz = procfs::ticks_per_second().max(1) as f64;
    (crate::system::cpu_lines(stat)
        .unwrap_or_default()
        .into_iter())
    .filter(|(n, _)| !n.is_empty())
    .map(|(n, t)| {
        let secs = |ticks: u64| ticks as f64 / hz;
        (
            n,
            CoreSeconds {
                busy: secs(t.busy),
                idle: secs(t.idle),
                iowait: secs(t.iowait),
            },
        )
    })
    .collect()
}

/// Per-device counters from /proc/net/dev (parsed by procfs); empty when
/// the text is not a /proc/net/dev.
pub fn parse_proc_net(text: &str) -> BTreeMap<String, NetCounters> {
    use procfs::FromRead;
    let Ok(devs) = procfs::net::InterfaceDeviceStatus::from_read(text.as_bytes()) else {
        return BTreeMap::new();
    };
    (devs.0.into_iter())
        .map(|(name, d)| {
            let c = NetCounters {
                rx_bytes: d.recv_bytes as f64,
                rx_packets: d.recv_packets as f64,
                tx_bytes: d.sent_bytes as f64,
                tx_packets: d.sent_packets as f64,
            };
            (name, c)
        })
        .collect()
}

impl HostSample {
    /// This host's counters from /proc (stat, meminfo, diskstats, net/dev); None
    /// when /proc/stat cannot be read.
    pub fn from_proc() -> Option<HostSample> {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let cores = parse_proc_cores(&read("/proc/stat")?);
        let disks = read("/proc/diskstats")
            .map(|t| {
                DiskCounters::parse_all(&t)
                    .into_iter()
                    .map(|(_, _, name, c)| (name, c))
                    .collect()
            })
            .unwrap_or_default();
        Some(HostSample {
            cores,
            memory: Memory::read(),
            disks,
            net: read("/proc/net/dev")
                .map(|t| parse_proc_net(&t))
                .unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn disk(reads: u64, writes: u64, ms: u64) -> DiskCounters {
        DiskCounters {
            reads,
            read_sectors: reads * 8,
            read_ms: ms,
            writes,
            write_sectors: writes * 8,
            write_ms: ms,
            io_ms: ms,
            weighted_ms: 2 * ms,
            in_flight: 0,
        }
    }

    fn sample(t: f64, busy: f64, reads: u64, queue: f64) -> ServerSample {
        let mut h = HostSample::default();
        for c in ["0", "1"] {
            h.cores.insert(
                c.into(),
                CoreSeconds {
                    busy,
                    idle: 2.0 * t - busy,
                    iowait: 0.0,
                },
            );
        }
        h.disks.insert("vda".into(), disk(reads, reads / 2, reads));
        h.disks.insert("vda1".into(), disk(reads, reads / 2, reads));
        h.disks.insert("sdb".into(), disk(reads, 0, 0));
        let mut m = MailServerSample::default();
        m.queues.insert("active".into(), queue);
        m.commands.insert("imap:SELECT".into(), 10.0 * t);
        ServerSample {
            t_s: t,
            host: Some(h),
            mail: m,
        }
    }

    #[test]
    fn whole_disks_exclude_partitions_and_pseudo_devices() {
        for d in ["sda", "vda", "xvdb", "nvme0n1", "mmcblk0", "hdc"] {
            assert!(is_whole_disk(d), "{d}");
        }
        for d in [
            "sda1",
            "vda2",
            "nvme0n1p1",
            "mmcblk0p2",
            "loop0",
            "zram0",
            "dm-0",
            "md127",
            "sr0",
            "ram1",
        ] {
            assert!(!is_whole_disk(d), "{d}");
        }
    }

    #[test]
    fn figures_between_two_samples() {
        let s = [
            sample(0.0, 0.0, 0, 0.0),
            sample(5.0, 2.0, 500, 4.0),
            sample(10.0, 5.0, 1000, 2.0),
        ];
        let f = ServerFigures::of(&s, &StoreDevices::WholeDisks).unwrap();
        assert_eq!(f.seconds, 10.0);
        let h = f.host.unwrap();
        assert_eq!(h.cores, 2);
        // 5 busy of 20 core-seconds per core.
        assert!((h.cpu_busy_pct - 25.0).abs() < 1e-9);
        let store = h.store.unwrap();
        assert_eq!(store.devices, vec!["sdb".to_string(), "vda".to_string()]);
        // vda 100 reads/s + sdb 100 reads/s; vda 50 writes/s.
        assert!((store.rates.reads_per_s - 200.0).abs() < 1e-9);
        assert!((store.rates.writes_per_s - 50.0).abs() < 1e-9);
        // Latency weighted by operations: vda 1000 ms over 1000 reads, sdb 0 ms.
        assert!((store.rates.read_latency_ms - 0.5).abs() < 1e-9);
        let q = f.queue.unwrap();
        assert_eq!((q.max, q.last), (4.0, 2.0));
        assert!((q.average - 2.0).abs() < 1e-9);
        assert_eq!(f.commands["imap:SELECT"].count, 100.0);
        assert_eq!(f.commands["imap:SELECT"].per_s, 10.0);
        let named = ServerFigures::of(&s, &StoreDevices::Named(vec!["vda1".into()])).unwrap();
        assert_eq!(named.host.unwrap().store.unwrap().devices, vec!["vda1"]);
        let pm = PerMailbox::of(&store.rates, 50).unwrap();
        assert!((pm.iops_per_mailbox - 5.0).abs() < 1e-9);
        assert!(PerMailbox::of(&store.rates, 0).is_none());
    }

    #[test]
    fn one_sample_gives_no_figures() {
        assert!(
            ServerFigures::of(&[sample(1.0, 0.0, 0, 0.0)], &StoreDevices::WholeDisks).is_none()
        );
        assert!(ServerFigures::of(&[], &StoreDevices::WholeDisks).is_none());
    }

    #[test]
    fn parses_proc_per_core_lines_and_net_dev() {
        let stat = "cpu  300 0 100 800 10 0 0 0 0 0\ncpu0 200 0 50 400 5 0 0 0 0 0\n\
                    cpu1 100 0 50 400 5 0 0 0 0 0\nintr 1\nctxt 9\nbtime 1700000000\n\
                    processes 42\nprocs_running 1\nprocs_blocked 0\n";
        let c = parse_proc_cores(stat);
        assert_eq!(c.len(), 2);
        assert!((c["0"].busy - 2.5).abs() < 1e-9 && (c["0"].idle - 4.0).abs() < 1e-9);
        let net = "Inter-|   Receive  |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets\n  lo: 100 2 0 0 0 0 0 0 300 4 0 0 0 0 0 0\n";
        let n = parse_proc_net(net);
        assert_eq!(n["lo"].rx_bytes, 100.0);
        assert_eq!(n["lo"].tx_packets, 4.0);
    }

    #[test]
    fn this_hosts_proc_reads() {
        let h = HostSample::from_proc().unwrap();
        assert!(!h.cores.is_empty());
        assert!(h.memory.is_some());
        assert!(h.net.contains_key("lo"));
    }

    proptest! {
        // Counters that only grow give figures within their bounds, and a
        // window's rates do not depend on how many samples lie inside it.
        #[test]
        fn rates_do_not_depend_on_the_samples_between(steps in proptest::collection::vec((1u64..1000, 0.0f64..1.0), 2..20)) {
            let mut t = 0.0;
            let (mut reads, mut busy) = (0u64, 0.0);
            let mut s = vec![sample(0.0, 0.0, 0, 0.0)];
            for (r, b) in &steps {
                t += 1.0;
                reads += r;
                busy += 2.0 * b;
                s.push(sample(t, busy.min(2.0 * t), reads, 0.0));
            }
            let all = ServerFigures::of(&s, &StoreDevices::WholeDisks).unwrap();
            let ends = [s[0].clone(), s[s.len() - 1].clone()];
            let two = ServerFigures::of(&ends, &StoreDevices::WholeDisks).unwrap();
            let (ha, hb) = (all.host.unwrap(), two.host.unwrap());
            prop_assert!((ha.cpu_busy_pct - hb.cpu_busy_pct).abs() < 1e-9);
            prop_assert!(ha.cpu_busy_pct >= 0.0 && ha.cpu_busy_pct <= 100.0);
            prop_assert_eq!(ha.store.unwrap().rates, hb.store.unwrap().rates);
        }
    }
}
