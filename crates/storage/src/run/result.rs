//! The run's result: the window's figures per instance and in total, the
//! host's, the verdict; and the result of a run that stopped before measuring.

use super::load::Load;
use crate::spec::StorageSpec;
use mailbench_base::Result;
use mailbench_base::rundir::RunDir;
use mailbench_metrics::system::{DiskRates, Memory};
pub use mailbench_results::storage::judge::judge;
use mailbench_results::storage::run::*;
use mailbench_results::storage::stats::{Class, Stats};
use mailbench_results::{RunHeader, Status, Verdict};
use std::time::Instant;

/// What is known once the load and the verification are over, besides the
/// load's own figures.
pub(super) struct Ended {
    pub(super) header: RunHeader,
    pub(super) started: Instant,
    pub(super) io_engine: String,
    pub(super) o_direct: bool,
    pub(super) io_path: IoPath,
    pub(super) init: Option<crate::init::InitSummary>,
    /// This process's CPU from the instances' opening to their end.
    pub(super) self_cpu: f64,
    pub(super) verify: Option<crate::verify::VerifySummary>,
}

impl Load {
    /// Each instance's figures over the window (`secs` long).
    fn instance_results(&self, spec: &StorageSpec, secs: f64) -> Vec<InstanceResult> {
        spec.instances
            .iter()
            .zip(self.inst_totals.iter())
            .enumerate()
            .map(|(i, (s, t))| InstanceResult {
                name: s.name.clone(),
                db_path: s.db_path.display().to_string(),
                log_dir: s.log_dir.display().to_string(),
                size_bytes: s.size_bytes,
                sessions: s.sessions,
                transactional_iops: t.transactional_ios() as f64 / secs,
                classes: class_map(t, secs),
                counters: t.counters.clone(),
                transactions_per_s: t.counters.transactions as f64 / secs,
                page_fault_stalls_per_s: t.counters.page_fault_stalls as f64 / secs,
                clean_shutdown: self.clean[i],
                histograms: hist_map(t),
            })
            .collect()
    }

    /// The figures over all instances and the window (`secs` long).
    fn totals(&self, spec: &StorageSpec, secs: f64) -> Totals {
        let total = &self.total;
        let trans = total.transactional_ios() as f64;
        let log_writes = total.class(Class::LogWrite).ops as f64;
        let share = |x: f64| if trans > 0.0 { 100.0 * x / trans } else { 0.0 };
        Totals {
            target_iops: spec.target_iops,
            transactional_iops: trans / secs,
            db_read_share_pct: share(total.class(Class::DbRead).ops as f64),
            log_write_share_pct: share(log_writes),
            transactions_per_s: total.counters.transactions as f64 / secs,
            page_fault_stalls_per_s: total.counters.page_fault_stalls as f64 / secs,
            page_fault_stalls_max_per_s: self.stalls_max,
            db_read_sample_max_ms: self.sample_max.0,
            log_write_sample_max_ms: self.sample_max.1,
            io_errors: total.io_errors(),
            classes: class_map(total, secs),
            counters: total.counters.clone(),
            transaction_latency_ms: total.transaction_latency.summary().into(),
            histograms: hist_map(total),
            thresholds: spec.thresholds,
        }
    }

    /// The host's figures averaged over the window's intervals, and this
    /// process's CPU (over the window, per I/O of the window, and over the
    /// whole load: `self_cpu`).
    fn host(&self, self_cpu: f64) -> HostPerf {
        let avg = |x: f64| {
            if self.host_sum.3 > 0 {
                x / self.host_sum.3 as f64
            } else {
                0.0
            }
        };
        let ios: u64 = self.total.classes.iter().map(|c| c.ops).sum();
        HostPerf {
            cpu_busy_avg_pct: avg(self.host_sum.0),
            cpu_iowait_avg_pct: avg(self.host_sum.1),
            memory_used_avg_pct: avg(self.host_sum.2),
            memory_total_bytes: Memory::read().map(|m| m.total_bytes).unwrap_or(0),
            mailbench_cpu_s: self.window_cpu,
            mailbench_run_cpu_s: self_cpu,
            mailbench_cpu_us_per_io: if ios > 0 {
                self.window_cpu * 1e6 / ios as f64
            } else {
                0.0
            },
        }
    }

    /// The run's result: figures, verdict, window.
    pub(super) fn into_result(self, spec: &StorageSpec, e: Ended) -> StorageResult {
        let secs = self.measured_s.max(1e-9);
        let instances = self.instance_results(spec, secs);
        let totals = self.totals(spec, secs);
        let host = self.host(e.self_cpu);
        let disk_results = self
            .disks
            .iter()
            .map(|d| DiskResult {
                device: d.device.clone(),
                paths: d.paths.clone(),
                rates: match (d.last, d.start) {
                    (Some(a), Some(b)) => a.rates_since(&b, secs),
                    _ => DiskRates::default(),
                },
            })
            .collect();
        let mut verdict = judge(
            spec,
            &totals,
            e.verify.as_ref(),
            &self.errors,
            self.measured_s,
            Some((&e.io_path, e.o_direct)),
        );
        if self.interrupted {
            verdict = Verdict { status: Status::Interrupted, reasons: vec!["The run was interrupted before its measured window ended; the figures are partial.".into()] };
        } else if self.ended_by_deadline {
            verdict.status = Status::Error;
            verdict.reasons.push(format!(
                "The shutdown did not finish within its {} grace after the measured window: I/O was \
                 stopped and the databases were left needing recovery (`mailbench storage recover \
                 --log-files 0`, same flags); the result is partial.",
                humantime::format_duration(self.grace)
            ));
        }
        let mut header = e.header;
        header.finish(e.started.elapsed());
        let warmup_s = self
            .prerequisites
            .as_ref()
            .map_or(self.t0.elapsed().as_secs_f64(), |p| p.seconds);
        StorageResult {
            run: header,
            verdict,
            spec: spec.clone(),
            io_engine: e.io_engine,
            o_direct: e.o_direct,
            io_path: Some(e.io_path),
            window: Window {
                warmup_s,
                measured_s: self.measured_s,
                intervals: self.intervals,
                interrupted: self.interrupted,
                ended_by_deadline: self.ended_by_deadline,
                prerequisites: self.prerequisites,
            },
            init: e.init,
            instances,
            total: totals,
            host,
            disks: disk_results,
            verify: e.verify,
            errors: self.errors,
            intervals_file: "intervals.jsonl".into(),
            tuning: Vec::new(),
            merged: None,
        }
    }
}

/// The result of a run that stopped before its load (`status`, `why`): its
/// databases could not be created, or it was interrupted while creating them
/// or waiting for its start time (`--start-at`; `init` then says what was
/// created). Nothing measured.
pub fn stopped_before_load(
    spec: &StorageSpec,
    dir: &RunDir,
    why: &str,
    status: Status,
    init: Option<crate::init::InitSummary>,
) -> Result<StorageResult> {
    finish_early(
        spec,
        dir,
        RunHeader::begin("storage-run"),
        Instant::now(),
        why,
        status,
        init,
    )
}

pub(super) fn finish_early(
    spec: &StorageSpec,
    dir: &RunDir,
    mut header: RunHeader,
    started: Instant,
    why: &str,
    status: Status,
    init: Option<crate::init::InitSummary>,
) -> Result<StorageResult> {
    dir.log.line(format!("stopped: {why}"));
    header.finish(started.elapsed());
    let empty = Stats::default();
    let result = StorageResult {
        run: header,
        verdict: Verdict {
            status,
            reasons: vec![format!("The run stopped before measuring: {why}.")],
        },
        spec: spec.clone(),
        io_engine: String::new(),
        o_direct: false,
        io_path: None,
        window: Window {
            interrupted: status == Status::Interrupted,
            ..Default::default()
        },
        init,
        instances: Vec::new(),
        total: Totals {
            target_iops: spec.target_iops,
            transactional_iops: 0.0,
            db_read_share_pct: 0.0,
            log_write_share_pct: 0.0,
            transactions_per_s: 0.0,
            page_fault_stalls_per_s: 0.0,
            page_fault_stalls_max_per_s: 0.0,
            db_read_sample_max_ms: 0.0,
            log_write_sample_max_ms: 0.0,
            io_errors: 0,
            classes: class_map(&empty, 1.0),
            counters: Default::default(),
            transaction_latency_ms: Default::default(),
            histograms: hist_map(&empty),
            thresholds: spec.thresholds,
        },
        host: HostPerf::default(),
        disks: Vec::new(),
        verify: None,
        errors: vec![why.to_string()],
        intervals_file: String::new(),
        tuning: Vec::new(),
        merged: None,
    };
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::test_spec as spec;
    use crate::spec::Thresholds;

    fn totals(stalls_avg: f64, stalls_max: f64) -> Totals {
        let empty = Stats::default();
        Totals {
            target_iops: None,
            transactional_iops: 100.0,
            db_read_share_pct: 60.0,
            log_write_share_pct: 8.0,
            transactions_per_s: 50.0,
            page_fault_stalls_per_s: stalls_avg,
            page_fault_stalls_max_per_s: stalls_max,
            db_read_sample_max_ms: 0.0,
            log_write_sample_max_ms: 0.0,
            io_errors: 0,
            classes: class_map(&empty, 1.0),
            counters: Default::default(),
            transaction_latency_ms: Default::default(),
            histograms: hist_map(&empty),
            thresholds: Thresholds::exchange2013(crate::spec::TestType::Performance),
        }
    }

    #[test]
    fn one_sample_with_stalls_fails_the_2007_rule_but_not_the_2013_average() {
        // 0.2 stalls/s on average, 1.5/s in one database's worst sample.
        let t = totals(0.2, 1.5);
        let v = judge(&spec("exchange2013"), &t, None, &[], 60.0, None);
        assert_eq!(v.status, Status::Pass, "{:?}", v.reasons);
        let v = judge(&spec("exchange2007"), &t, None, &[], 60.0, None);
        assert_eq!(v.status, Status::Fail);
        assert!(
            v.reasons.iter().any(|r| r.contains("in one sample")),
            "{:?}",
            v.reasons
        );
        let v = judge(
            &spec("exchange2007"),
            &totals(0.0, 0.0),
            None,
            &[],
            60.0,
            None,
        );
        assert_eq!(v.status, Status::Pass, "{:?}", v.reasons);
    }

    /// One slow I/O in an otherwise quick sample fails the stricter rule
    /// only; a slow sample fails both.
    #[test]
    fn latency_maxima_are_judged_on_sample_averages_unless_single_io_is_chosen() {
        let mut t = totals(0.0, 0.0);
        if let Some(rd) = t.classes.get_mut("db_read") {
            rd.latency_ms.max = 114.0;
        }
        t.db_read_sample_max_ms = 6.0;
        let s = spec("exchange2013");
        let v = judge(&s, &t, None, &[], 60.0, None);
        assert_eq!(v.status, Status::Pass, "{:?}", v.reasons);
        let mut strict = s.clone();
        strict.thresholds.latency_max = mailbench_results::storage::spec::LatencyMax::SingleIo;
        let v = judge(&strict, &t, None, &[], 60.0, None);
        assert_eq!(v.status, Status::Fail);
        assert!(
            v.reasons[0].contains("slowest database read took 114.0 ms"),
            "{:?}",
            v.reasons
        );
        t.log_write_sample_max_ms = 101.0;
        let v = judge(&s, &t, None, &[], 60.0, None);
        assert_eq!(v.status, Status::Fail);
        assert!(
            v.reasons[0].contains("log write latency of a database averaged 101.0 ms"),
            "{:?}",
            v.reasons
        );
    }
}
