//! What an instance measures: per I/O class operation counts, bytes, errors and
//! latency histograms, plus engine counters. Intervals add up exactly.

use mailbench_metrics::{LatencyHist, LatencySummary};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The I/O classes (docs/storage.md, "Measurement").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    DbRead = 0,
    DbWrite = 1,
    LogWrite = 2,
    LogRead = 3,
    MaintRead = 4,
}

pub const CLASS_NAMES: [&str; 5] = [
    "db_read",
    "db_write",
    "log_write",
    "log_read",
    "maintenance_read",
];

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClassStats {
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    pub latency: LatencyHist,
}

impl ClassStats {
    pub fn add(&mut self, o: &ClassStats) {
        self.ops += o.ops;
        self.bytes += o.bytes;
        self.errors += o.errors;
        self.latency.add(&o.latency);
    }

    pub fn avg_bytes(&self) -> f64 {
        if self.ops == 0 {
            0.0
        } else {
            self.bytes as f64 / self.ops as f64
        }
    }
}

/// Engine counters (sums over an interval) and gauges (values at its end).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Counters {
    pub transactions: u64,
    pub durable_commits: u64,
    pub lazy_commits: u64,
    pub failed_transactions: u64,
    pub page_fault_stalls: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub log_records: u64,
    pub log_bytes: u64,
    pub log_flushes: u64,
    pub log_generations: u64,
    pub checkpoints: u64,
    pub bad_pages: u64,
    pub bad_log_blocks: u64,
    // Gauges at the end of the interval.
    pub cache_frames: u64,
    pub dirty_pages: u64,
    pub checkpoint_depth_bytes: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.transactions += o.transactions;
        self.durable_commits += o.durable_commits;
        self.lazy_commits += o.lazy_commits;
        self.failed_transactions += o.failed_transactions;
        self.page_fault_stalls += o.page_fault_stalls;
        self.cache_hits += o.cache_hits;
        self.cache_misses += o.cache_misses;
        self.log_records += o.log_records;
        self.log_bytes += o.log_bytes;
        self.log_flushes += o.log_flushes;
        self.log_generations += o.log_generations;
        self.checkpoints += o.checkpoints;
        self.bad_pages += o.bad_pages;
        self.bad_log_blocks += o.bad_log_blocks;
        self.cache_frames = self.cache_frames.max(o.cache_frames);
        self.dirty_pages = o.dirty_pages;
        self.checkpoint_depth_bytes = self.checkpoint_depth_bytes.max(o.checkpoint_depth_bytes);
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Stats {
    pub classes: [ClassStats; 5],
    pub counters: Counters,
    /// Transaction response time, from each transaction's intended start.
    pub transaction_latency: LatencyHist,
}

impl Stats {
    pub fn class(&self, c: Class) -> &ClassStats {
        &self.classes[c as usize]
    }

    pub fn class_mut(&mut self, c: Class) -> &mut ClassStats {
        &mut self.classes[c as usize]
    }

    pub fn add(&mut self, o: &Stats) {
        for (a, b) in self.classes.iter_mut().zip(o.classes.iter()) {
            a.add(b);
        }
        self.counters.add(&o.counters);
        self.transaction_latency.add(&o.transaction_latency);
    }

    pub fn io_errors(&self) -> u64 {
        self.classes.iter().map(|c| c.errors).sum()
    }

    /// Transactional I/O: database reads and writes caused by transactions.
    pub fn transactional_ios(&self) -> u64 {
        self.class(Class::DbRead).ops + self.class(Class::DbWrite).ops
    }
}

/// Figures of one class over a window, as reported.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ClassFigures {
    pub ops: u64,
    pub ops_per_s: f64,
    pub avg_bytes: f64,
    pub mb_per_s: f64,
    pub errors: u64,
    pub latency_ms: LatencyMs,
}

/// Latency figures in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LatencyMs {
    pub avg: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl From<LatencySummary> for LatencyMs {
    fn from(s: LatencySummary) -> Self {
        let ms = |us: u64| us as f64 / 1000.0;
        LatencyMs {
            avg: s.mean_us / 1000.0,
            p50: ms(s.p50_us),
            p95: ms(s.p95_us),
            p99: ms(s.p99_us),
            p999: ms(s.p999_us),
            max: ms(s.max_us),
        }
    }
}

impl ClassFigures {
    pub fn of(c: &ClassStats, secs: f64) -> ClassFigures {
        let secs = secs.max(1e-9);
        ClassFigures {
            ops: c.ops,
            ops_per_s: c.ops as f64 / secs,
            avg_bytes: c.avg_bytes(),
            mb_per_s: c.bytes as f64 / secs / 1e6,
            errors: c.errors,
            latency_ms: c.latency.summary().into(),
        }
    }
}
