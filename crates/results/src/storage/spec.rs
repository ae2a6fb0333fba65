//! The resolved storage test as result.json echoes it (`spec`): every value
//! used, the profile and the verdict thresholds included. The storage crate
//! resolves and checks it (`mailbench_storage::spec`); this is its data.

use mailbench_base::ByteSize;
use mailbench_base::units::serde_duration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TestType {
    Performance,
    Stress,
}

impl std::str::FromStr for TestType {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "performance" => Ok(TestType::Performance),
            "stress" => Ok(TestType::Stress),
            o => Err(format!(
                "unknown test type `{o}` (use performance or stress)"
            )),
        }
    }
}

/// The limits a run is judged by. The shipped profiles carry those of the
/// anchor tool of their version (`[thresholds.performance]`,
/// `[thresholds.stress]`; docs/storage.md "Verdict").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Thresholds {
    pub db_read_avg_ms: f64,
    pub db_read_max_ms: f64,
    pub log_write_avg_ms: f64,
    pub log_write_max_ms: f64,
    /// Page-fault stalls per second, averaged over the measured window.
    pub page_fault_stalls_per_s: f64,
    /// Page-fault stalls per second of any database in any sample interval
    /// (the 2007-era rule: none in any sample); absent: not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_fault_stalls_max_per_s: Option<f64>,
    /// What the latency maxima are judged on: the highest average of one
    /// database over one sampling interval (the published tool's counters),
    /// or the slowest single I/O. Absent in older results, which were judged
    /// on the slowest single I/O.
    #[serde(default)]
    pub latency_max: LatencyMax,
}

/// What a latency maximum (`db_read_max_ms`, `log_write_max_ms`) is judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LatencyMax {
    /// The highest average latency of any database over any sampling
    /// interval (`--sample-interval`, 15 s by default), as the published
    /// tool reads its latency counters: each sample is the interval's average.
    #[default]
    Sampled,
    /// The slowest single I/O of the measured window (stricter).
    SingleIo,
}

impl LatencyMax {
    /// A few words for reports.
    pub fn words(self) -> &'static str {
        match self {
            LatencyMax::Sampled => "of any database's sample average",
            LatencyMax::SingleIo => "of any single I/O",
        }
    }
}

impl Thresholds {
    /// The Exchange 2013 tool's rules (Strict for performance, Lenient for
    /// stress): the default of a profile that states none.
    pub fn exchange2013(t: TestType) -> Thresholds {
        let max = match t {
            TestType::Performance => 100.0,
            TestType::Stress => 200.0,
        };
        Thresholds {
            db_read_avg_ms: 20.0,
            db_read_max_ms: max,
            log_write_avg_ms: 10.0,
            log_write_max_ms: max,
            page_fault_stalls_per_s: 1.0,
            page_fault_stalls_max_per_s: None,
            latency_max: LatencyMax::Sampled,
        }
    }

    /// One line for reports: every limit, the per-sample stall rule when judged.
    pub fn describe(&self) -> String {
        let stalls = match self.page_fault_stalls_max_per_s {
            Some(m) => format!(
                "page-fault stalls avg <= {}/s, <= {}/s in every sample",
                self.page_fault_stalls_per_s, m
            ),
            None => format!(
                "page-fault stalls avg <= {}/s",
                self.page_fault_stalls_per_s
            ),
        };
        format!(
            "db read avg <= {} ms, max <= {} ms; log write avg <= {} ms, max <= {} ms (maxima {}); {stalls}",
            self.db_read_avg_ms,
            self.db_read_max_ms,
            self.log_write_avg_ms,
            self.log_write_max_ms,
            self.latency_max.words()
        )
    }
}

/// Every value that shapes the engine's workload. See the shipped profiles for
/// the meaning and source of each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub description: String,
    pub page_size: ByteSize,
    pub log_file_size: ByteSize,
    pub insert_pct: f64,
    pub delete_pct: f64,
    pub replace_pct: f64,
    pub read_pct: f64,
    pub lazy_commit_pct: f64,
    pub growth_reserve_pct: f64,
    pub cache_max_per_db: ByteSize,
    pub cache_min_per_db: ByteSize,
    /// Write-back of cold pages starts when the cache's available buffers
    /// (frames holding no page) fall under this share of its maximum, and
    /// stops once they reach `flush_stop_pct` (ESE's StartFlushThreshold and
    /// StopFlushThreshold; docs/storage.md "Database cache and flush
    /// thresholds"). Results written before this rule held the dirty share
    /// at which write-back started and stopped.
    pub flush_start_pct: f64,
    pub flush_stop_pct: f64,
    /// The warm-up ("attaining prerequisites") lasts until the database cache
    /// holds this share of its maximum (of the database's size where that is
    /// smaller); 0: the measured window starts at once. Absent in older
    /// results and profiles: 90, the Exchange 2013 tool's `PreloadJetCache` 0.9.
    #[serde(default = "default_preload_cache_pct")]
    pub preload_cache_pct: f64,
    pub checkpoint_depth: ByteSize,
    pub max_write_pages: u32,
    pub record_size: ByteSize,
    pub index_record_size: ByteSize,
    pub read_pages: u32,
    pub read_run_pct: f64,
    pub split_pct: f64,
    /// A page split logs the split page's before image (its used bytes), as
    /// ESE does since it stopped ordering page writes by dependencies (log
    /// format 7.3704.11, `lrtypSplit2`). Absent in older results: false.
    #[serde(default)]
    pub split_page_image: bool,
    pub hot_mailbox_skew: f64,
    /// The log's sector: the unit of its writes, rewritten in place while it
    /// is partial (with a shadow copy after it). 512 bytes in the 2007-era
    /// log format, 4 KiB since; never smaller than the log volume's
    /// direct-I/O sector. Absent in older results: 4 KiB.
    #[serde(default = "default_log_sector_size")]
    pub log_sector_size: ByteSize,
    /// How a log flush goes to disk: `"current"` (ESE's log writer since its
    /// 2010 log format: the rewritten partial sector, the whole sectors and
    /// the new partial sector with its shadow as up to three writes) or
    /// `"legacy"` (the log format 7 writer of the 2007-era ESE: the rewritten
    /// sector alone when a shadow protects it, everything after it in one
    /// write). Absent in older results and profiles: current.
    #[serde(default, skip_serializing_if = "LogWriterKind::is_default")]
    pub log_writer: LogWriterKind,
    /// The log buffer in 512-byte units (ESE's `JET_paramLogBuffers`): half
    /// of it filled starts a log write. Absent: ESE's default (126).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_buffers: Option<u32>,
    /// Older results: the unflushed log that started a log write, before the
    /// log buffer rule (kept so that they load; not used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_buffer_flush: Option<ByteSize>,
    /// The longest a lazy commit waits for a log write, in ms; 0: no such
    /// wait, as ESE writes lazy commits with the next write a durable commit,
    /// a full log buffer or a page write causes.
    pub log_flush_interval_ms: u64,
    /// Operations (insert, delete, replace, read) per transaction: one
    /// commit for all of them. Absent in older results: 1.
    #[serde(default = "default_operations_per_transaction")]
    pub operations_per_transaction: u32,
    /// Which published tool's wording test.log, summary and report follow
    /// (`"2013"`, or `"2007"` for the 2007-era tool). Absent: 2013.
    #[serde(default, skip_serializing_if = "ToolStyle::is_default")]
    pub tool_style: ToolStyle,
    pub maintenance: bool,
    pub maintenance_read_size: ByteSize,
    pub maintenance_mb_per_s: f64,
    pub replication_read_size: ByteSize,
    pub copies: u32,
    /// The verdict limits of this version's anchor tool; a profile without
    /// them is judged by the Exchange 2013 rules.
    #[serde(default)]
    pub thresholds: ProfileThresholds,
}

fn default_preload_cache_pct() -> f64 {
    90.0
}

fn default_operations_per_transaction() -> u32 {
    1
}

fn default_log_sector_size() -> ByteSize {
    ByteSize(4096)
}

/// The published tool whose wording a run's test.log, summary and report
/// follow: the Exchange 2013 tool (also 2016/2019) or the 2007-era tool (also
/// used for Exchange 2003).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum ToolStyle {
    #[default]
    #[serde(rename = "2013")]
    Jetstress2013,
    #[serde(rename = "2007")]
    Jetstress2007,
}

impl ToolStyle {
    pub fn is_default(&self) -> bool {
        *self == ToolStyle::Jetstress2013
    }
}

/// How a log flush is cut into writes (`log_writer`; docs/storage.md "The
/// engine").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum LogWriterKind {
    /// ESE's writer since the 2010 log format (`LGSEGHDR`): the partial
    /// sector written before, when a shadow follows it, alone; the whole
    /// sectors after it; the new partial sector with its shadow.
    #[default]
    #[serde(rename = "current")]
    Current,
    /// The writer of log format 7 (`LRCHECKSUM`, ESE of Exchange 2003 and
    /// 2007): the shadowed sector alone, then the rest of the flush, its new
    /// partial sector and that sector's shadow in one write.
    #[serde(rename = "legacy")]
    Legacy,
}

impl LogWriterKind {
    pub fn is_default(&self) -> bool {
        *self == LogWriterKind::Current
    }
}

/// ESE's default log buffer (`JET_paramLogBuffers`, in 512-byte units).
pub const DEFAULT_LOG_BUFFERS: u32 = 126;

impl Profile {
    /// The log buffer in bytes as ESE sizes it: `log_buffers` 512-byte units
    /// rounded up to whole sectors, at least two pages and four sectors
    /// (`LOG_BUFFER::ErrLGInitLogBuffers`), at most a log file.
    pub fn log_buffer_bytes(&self) -> u64 {
        let sector = self.log_sector_size.0.max(512);
        let units = u64::from(self.log_buffers.unwrap_or(DEFAULT_LOG_BUFFERS));
        let sectors = (units * 512).div_ceil(sector);
        let floor = (2 * self.page_size.0) / sector + 4;
        (sectors.max(floor) * sector).min(self.log_file_size.0)
    }
}

/// `[thresholds.performance]` and `[thresholds.stress]` of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileThresholds {
    pub performance: Thresholds,
    pub stress: Thresholds,
}

impl Default for ProfileThresholds {
    fn default() -> Self {
        ProfileThresholds {
            performance: Thresholds::exchange2013(TestType::Performance),
            stress: Thresholds::exchange2013(TestType::Stress),
        }
    }
}

impl ProfileThresholds {
    pub fn for_type(&self, t: TestType) -> Thresholds {
        match t {
            TestType::Performance => self.performance,
            TestType::Stress => self.stress,
        }
    }
}

/// One database instance: its file, its log folder, its size.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct InstanceSpec {
    pub index: usize,
    pub name: String,
    /// The folder the user gave that holds this database.
    pub volume: PathBuf,
    pub db_path: PathBuf,
    pub log_dir: PathBuf,
    pub pages: u64,
    pub size_bytes: u64,
    pub mailboxes: u64,
    pub sessions: usize,
}

/// The resolved storage test.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StorageSpec {
    pub test_type: TestType,
    pub profile: Profile,
    pub instances: Vec<InstanceSpec>,
    pub volumes: Vec<PathBuf>,
    pub log_volumes: Vec<PathBuf>,
    pub mailboxes: Option<u64>,
    pub iops_per_mailbox: Option<f64>,
    /// Target transactional IOPS over all instances (verdict), if any.
    pub target_iops: Option<f64>,
    /// Pace the load open-loop at the target (`--target-iops` given).
    pub paced: bool,
    pub copies: u32,
    pub threads: u32,
    pub threads_auto: bool,
    #[serde(with = "serde_duration")]
    #[schemars(with = "String")]
    pub duration: Duration,
    #[serde(with = "serde_duration")]
    #[schemars(with = "String")]
    pub warmup: Duration,
    #[serde(with = "serde_duration")]
    #[schemars(with = "String")]
    pub sample_interval: Duration,
    /// `storage run`: the longest the clean shutdown may take after the measured
    /// window (absent in older results: 120 s then, 60 s by default now).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "mailbench_base::units::serde_duration::option"
    )]
    #[schemars(with = "Option<String>")]
    pub shutdown_grace: Option<Duration>,
    pub io_engine: String,
    /// Buffered I/O asked for (`--buffered-io`): no O_DIRECT, the page cache on
    /// purpose. Absent when not asked (and in older results).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub buffered_io: bool,
    /// I/O threads asked for (None: one per CPU, at most one per database).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_threads: Option<u32>,
    pub cache_max_per_db: u64,
    pub cache_min_per_db: u64,
    pub verify: bool,
    pub open: bool,
    pub quick: bool,
    pub seed: u64,
    pub thresholds: Thresholds,
    pub growth_reserve_bytes: u64,
    pub log_space_bytes: u64,
    /// The databases used although they lost their log tail (a replay stopped
    /// at a damaged log block: what was logged after it is gone), accepted with
    /// `--accept-lost-log-tail`. Absent when none (and in older results).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_log_tail: Vec<String>,
}

impl StorageSpec {
    /// Spreads `threads` sessions over the instances.
    pub fn set_threads(&mut self, threads: u32) {
        self.threads = threads;
        let n = self.instances.len().max(1);
        for (i, inst) in self.instances.iter_mut().enumerate() {
            let base = threads as usize / n;
            inst.sessions = (base + usize::from(i < threads as usize % n)).max(1);
        }
    }
}
