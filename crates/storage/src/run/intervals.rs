//! The instances' intervals: collected until every running instance reported
//! one, sampled with the host's and the disks' figures, added to the window,
//! written to intervals.jsonl and shown as progress.

use super::load::Load;
use super::progress::{LiveFigures, Progress};
use crate::engine::Event;
use crate::spec::StorageSpec;
use mailbench_base::rundir::TestLog;
use mailbench_metrics::system::{CpuTimes, DiskCounters, Memory, device_of, process_cpu_s};
use mailbench_results::storage::run::{IntervalRecord, class_map};
use mailbench_results::storage::stats::{Class, Stats};
use std::collections::BTreeMap;
use std::io::Write;

/// One disk under the databases or logs, with its counters at the window's
/// start and at the latest interval.
pub(super) struct DiskProbe {
    pub(super) device: String,
    pub(super) paths: Vec<String>,
    pub(super) start: Option<DiskCounters>,
    pub(super) last: Option<DiskCounters>,
}

/// The disks under the databases' and logs' paths, each with the paths on it.
pub(super) fn disk_probes(spec: &StorageSpec) -> Vec<DiskProbe> {
    let mut disks: Vec<DiskProbe> = Vec::new();
    for inst in &spec.instances {
        for p in [&inst.db_path, &inst.log_dir] {
            if let Some((_, _, dev)) = device_of(p) {
                let ps = p.display().to_string();
                match disks.iter_mut().find(|d| d.device == dev) {
                    Some(d) => {
                        if !d.paths.contains(&ps) {
                            d.paths.push(ps)
                        }
                    }
                    None => disks.push(DiskProbe {
                        device: dev,
                        paths: vec![ps],
                        start: None,
                        last: None,
                    }),
                }
            }
        }
    }
    disks
}

/// One database's average database read and log write latency over one
/// sample interval, in ms (0 without such I/O): what the published tool's
/// latency counters show for that sample.
pub(super) fn sample_averages(p: &Stats) -> (f64, f64) {
    let avg = |c: Class| {
        let h = &p.class(c).latency;
        if h.count() == 0 {
            0.0
        } else {
            h.summary().mean_ms()
        }
    };
    (avg(Class::DbRead), avg(Class::LogWrite))
}

impl Load {
    /// One event from an instance.
    pub(super) fn event(
        &mut self,
        spec: &StorageSpec,
        log: &TestLog,
        ev: Event,
        progress: &mut dyn Progress,
    ) {
        match ev {
            Event::Error { instance, message } => {
                log.line(format!(
                    "error in {}: {message}",
                    spec.instances[instance].name
                ));
                progress.phase(&format!("error: {message}"));
                self.errors.push(message);
            }
            Event::Finished {
                instance,
                clean: c,
                log_files: f,
                ..
            } => {
                self.finished[instance] = true;
                self.clean[instance] = c;
                log.line(format!(
                    "{}: stopped, {}; log files: {} created, {} formatted ahead, {} reused from \
                     behind a checkpoint",
                    spec.instances[instance].name,
                    if c {
                        "shut down clean"
                    } else {
                        "left needing recovery"
                    },
                    f.created,
                    f.formatted,
                    f.reused
                ));
            }
            Event::Interval {
                instance,
                seq,
                end_s,
                stats,
            } => {
                let n = self.n;
                let e = self
                    .pending
                    .entry(seq)
                    .or_insert_with(|| (end_s, vec![None; n]));
                e.0 = e.0.max(end_s);
                e.1[instance] = Some(*stats);
                // An interval is complete when every running instance reported it.
                while let Some((_, (_, parts))) = self.pending.iter().next() {
                    let complete = parts
                        .iter()
                        .enumerate()
                        .all(|(i, p)| p.is_some() || self.finished[i]);
                    if !complete {
                        break;
                    }
                    let Some((s, (end, parts))) = self.pending.pop_first() else {
                        break;
                    };
                    let parts: Vec<Stats> =
                        parts.into_iter().map(|p| p.unwrap_or_default()).collect();
                    self.interval(spec, s, end, parts, progress);
                }
            }
        }
    }

    /// A complete interval (every running instance's part): host and disk
    /// figures sampled, added to the window's totals if inside it, written to
    /// intervals.jsonl, shown as progress.
    fn interval(
        &mut self,
        spec: &StorageSpec,
        seq: u64,
        end: f64,
        parts: Vec<Stats>,
        progress: &mut dyn Progress,
    ) {
        let secs = (end - self.last_tick_s).max(1e-3);
        let start_s = self.last_tick_s;
        self.last_tick_s = end;
        // Intervals inside the window count (a short last interval too).
        let in_window = start_s >= self.measure_from - 1e-3 && start_s < self.measure_to;
        let cpu_now = CpuTimes::read();
        let (busy, iow) = match (&cpu_now, &self.cpu_prev) {
            (Some(a), Some(b)) => a.usage_since(b),
            _ => (0.0, 0.0),
        };
        self.cpu_prev = cpu_now;
        // A failed read was recorded at the start: the CPU figure stays unchanged.
        let self_cpu_now = process_cpu_s().unwrap_or(self.self_cpu_tick);
        if in_window {
            self.window_cpu += self_cpu_now - self.self_cpu_tick;
        }
        self.self_cpu_tick = self_cpu_now;
        let mem = Memory::read().map(|m| m.used_pct()).unwrap_or(0.0);
        let mut disk_rates = BTreeMap::new();
        for d in &mut self.disks {
            if let (Some(now), Some(prev)) = (DiskCounters::read(&d.device), d.last) {
                disk_rates.insert(d.device.clone(), now.rates_since(&prev, secs));
                d.last = Some(now);
            }
        }
        let mut sum = Stats::default();
        for p in &parts {
            sum.add(p);
        }
        if in_window {
            self.measured_s += secs;
            self.intervals += 1;
            for (t, p) in self.inst_totals.iter_mut().zip(parts.iter()) {
                t.add(p);
                self.stalls_max = self
                    .stalls_max
                    .max(p.counters.page_fault_stalls as f64 / secs);
                self.stall_samples += u64::from(p.counters.page_fault_stalls > 0);
                let (rd, lw) = sample_averages(p);
                self.sample_max.0 = self.sample_max.0.max(rd);
                self.sample_max.1 = self.sample_max.1.max(lw);
            }
            self.total.add(&sum);
            self.host_sum.0 += busy;
            self.host_sum.1 += iow;
            self.host_sum.2 += mem;
            self.host_sum.3 += 1;
        }
        let rec = IntervalRecord {
            seq,
            end_s: end,
            seconds: secs,
            phase: if in_window {
                "measured".into()
            } else if start_s < self.measure_from {
                "warmup".into()
            } else {
                "shutdown".into()
            },
            instances: parts,
            cpu_busy_pct: busy,
            cpu_iowait_pct: iow,
            memory_used_pct: mem,
            disks: disk_rates,
        };
        let written = serde_json::to_string(&rec)
            .map_err(|e| e.to_string())
            .and_then(|line| writeln!(self.intervals_file, "{line}").map_err(|e| e.to_string()));
        if let Err(e) = written
            && !self.intervals_broken
        {
            // Recorded once: merges recompute from this file, so it must be whole.
            self.intervals_broken = true;
            self.errors.push(format!(
                "intervals.jsonl: cannot write an interval ({e}); the file is incomplete and \
                 this result cannot be merged exactly: free space or fix the output folder"
            ));
        }
        if rec.phase != "shutdown" {
            progress.interval(&self.live(spec, &rec.phase, end, &sum, secs));
        }
    }

    /// The live figures of an interval (`sum` over its `secs`), for progress.
    fn live(
        &self,
        spec: &StorageSpec,
        phase: &str,
        end: f64,
        sum: &Stats,
        secs: f64,
    ) -> LiveFigures {
        let rd = sum.class(Class::DbRead).latency.summary();
        let lw = sum.class(Class::LogWrite).latency.summary();
        LiveFigures {
            phase: phase.to_string(),
            elapsed_s: end,
            remaining_s: if self.measure_to.is_finite() {
                self.measure_to - end
            } else {
                spec.duration.as_secs_f64() + (spec.warmup.as_secs_f64() - end).max(0.0)
            },
            transactional_iops: sum.transactional_ios() as f64 / secs,
            target_iops: spec.target_iops,
            db_read_avg_ms: rd.mean_ms(),
            log_write_avg_ms: lw.mean_ms(),
            db_read_limit_ms: spec.thresholds.db_read_avg_ms,
            log_write_limit_ms: spec.thresholds.log_write_avg_ms,
            errors: self.total.io_errors() + self.errors.len() as u64,
            passing: self.errors.is_empty()
                && rd.mean_ms() <= spec.thresholds.db_read_avg_ms
                && lw.mean_ms() <= spec.thresholds.log_write_avg_ms,
            classes: class_map(sum, secs),
            transactions_per_s: sum.counters.transactions as f64 / secs,
            transaction_latency_ms: sum.transaction_latency.summary().into(),
        }
    }
}
