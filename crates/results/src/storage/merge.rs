//! `report merge` of storage-run results: one result from several hosts'
//! results of the same test. Rates are summed, averages weighted by operation
//! counts, and percentiles come from added histograms (never averaged).
//! Per-host sections are kept (`merged.hosts`).

use crate::merged::{self, Merged, host_labels, merged_header, prefixed, weighted};
use crate::storage::init::InitSummary;
use crate::storage::run::{HostPerf, IntervalRecord, IoPath, StorageResult, Totals, Window};
use crate::storage::spec::Thresholds;
use crate::storage::stats::{ClassFigures, Counters, LatencyMs};
use crate::storage::verify::VerifySummary;
use crate::verdict::{RunHeader, Status, Verdict};
use mailbench_base::host::HostInfo;
use mailbench_base::{Error, Result};
use mailbench_metrics::LatencyHist;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One host's own figures inside a merged storage-run result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HostSection {
    /// Unique label; the host's instances, disks and errors are prefixed `label:`.
    pub label: String,
    pub source: String,
    pub host: HostInfo,
    pub started: String,
    pub ended: String,
    pub verdict: Verdict,
    pub window: Window,
    pub total: Totals,
    pub host_performance: HostPerf,
    pub io_engine: String,
    pub instances: Vec<String>,
}

/// The `merged` section of a merged storage-run result.
pub type StorageMerged = Merged<HostSection>;

/// One input of a merge: a storage-run result, where it came from, and its
/// intervals (intervals.jsonl beside it).
pub type MergeInput<'a> = merged::MergeInput<'a, StorageResult, IntervalRecord>;

/// The merged result (with `merged` set) and its aligned intervals.
pub type MergeOutput = merged::MergeOutput<StorageResult, IntervalRecord>;

impl MergeOutput {
    pub fn merged(&self) -> &StorageMerged {
        static EMPTY: Merged<HostSection> = Merged {
            sources: Vec::new(),
            hosts: Vec::new(),
        };
        self.result.merged.as_ref().unwrap_or(&EMPTY)
    }
}

fn severity(s: Status) -> u8 {
    match s {
        Status::Pass => 0,
        Status::Fail => 1,
        Status::Interrupted => 2,
        Status::Error => 3,
    }
}

/// Checks that the results are of the same test; the message names both files.
pub fn check_compatible(inputs: &[MergeInput]) -> Result<()> {
    let Some(first) = inputs.first() else {
        return Err(Error::usage("report merge needs at least two result files"));
    };
    let a = &first.result.spec;
    for d in &inputs[1..] {
        let b = &d.result.spec;
        let names = format!("{} and {}", first.source, d.source);
        let why = if a.test_type != b.test_type {
            format!(
                "different test types ({:?} vs {:?}); merge only results of the same test",
                a.test_type, b.test_type
            )
        } else if a.profile.name != b.profile.name {
            format!(
                "different profiles ({} vs {}); merge only results of the same test",
                a.profile.name, b.profile.name
            )
        } else if a.profile != b.profile {
            format!(
                "profile {} has different settings in each (overridden values); merge only results of the same test",
                a.profile.name
            )
        } else if a.thresholds != b.thresholds {
            "different verdict thresholds; merge only results judged the same way".to_string()
        } else {
            continue;
        };
        return Err(Error::usage(format!("cannot merge {names}: {why}")));
    }
    Ok(())
}

/// Aggregates one class: sums of rates, op-weighted averages, percentiles
/// from the added histogram.
pub fn merge_class(parts: &[&ClassFigures], hist: &LatencyHist) -> ClassFigures {
    let lat = LatencyMs::from(hist.summary());
    ClassFigures {
        ops: parts.iter().map(|c| c.ops).sum(),
        ops_per_s: parts.iter().map(|c| c.ops_per_s).sum(),
        avg_bytes: weighted(parts.iter().map(|c| (c.avg_bytes, c.ops))),
        mb_per_s: parts.iter().map(|c| c.mb_per_s).sum(),
        errors: parts.iter().map(|c| c.errors).sum(),
        latency_ms: LatencyMs {
            avg: weighted(parts.iter().map(|c| (c.latency_ms.avg, c.ops))),
            ..lat
        },
    }
}

fn share_pct(part: f64, of: f64) -> f64 {
    if of > 0.0 { 100.0 * part / of } else { 0.0 }
}

/// Aggregate totals of several hosts.
pub fn merge_totals(ts: &[&Totals]) -> Totals {
    let mut hists: BTreeMap<String, LatencyHist> = BTreeMap::new();
    for t in ts {
        for (k, h) in &t.histograms {
            hists.entry(k.clone()).or_default().add(h);
        }
    }
    let empty = LatencyHist::new();
    let names: BTreeSet<&String> = ts.iter().flat_map(|t| t.classes.keys()).collect();
    let classes: BTreeMap<String, ClassFigures> = names
        .into_iter()
        .map(|name| {
            let parts: Vec<&ClassFigures> = ts.iter().filter_map(|t| t.classes.get(name)).collect();
            let merged = merge_class(&parts, hists.get(name).unwrap_or(&empty));
            (name.clone(), merged)
        })
        .collect();
    let mut counters = Counters::default();
    for t in ts {
        counters.add(&t.counters);
    }
    let ops = |n: &str| classes.get(n).map(|c| c.ops).unwrap_or(0) as f64;
    let trans = ops("db_read") + ops("db_write");
    let targets: Vec<f64> = ts.iter().filter_map(|t| t.target_iops).collect();
    let tl = LatencyMs::from(hists.get("transaction").unwrap_or(&empty).summary());
    Totals {
        target_iops: (!targets.is_empty()).then(|| targets.iter().sum()),
        transactional_iops: ts.iter().map(|t| t.transactional_iops).sum(),
        db_read_share_pct: share_pct(ops("db_read"), trans),
        log_write_share_pct: share_pct(ops("log_write"), trans),
        transactions_per_s: ts.iter().map(|t| t.transactions_per_s).sum(),
        page_fault_stalls_per_s: ts.iter().map(|t| t.page_fault_stalls_per_s).sum(),
        page_fault_stalls_max_per_s: (ts.iter())
            .map(|t| t.page_fault_stalls_max_per_s)
            .fold(0.0, f64::max),
        db_read_sample_max_ms: (ts.iter())
            .map(|t| t.db_read_sample_max_ms)
            .fold(0.0, f64::max),
        log_write_sample_max_ms: (ts.iter())
            .map(|t| t.log_write_sample_max_ms)
            .fold(0.0, f64::max),
        io_errors: ts.iter().map(|t| t.io_errors).sum(),
        classes,
        counters,
        transaction_latency_ms: LatencyMs {
            avg: weighted(
                ts.iter()
                    .map(|t| (t.transaction_latency_ms.avg, t.counters.transactions)),
            ),
            ..tl
        },
        histograms: hists,
        thresholds: ts.first().map(|t| t.thresholds).unwrap_or(Thresholds {
            db_read_avg_ms: 0.0,
            db_read_max_ms: 0.0,
            log_write_avg_ms: 0.0,
            log_write_max_ms: 0.0,
            page_fault_stalls_per_s: 0.0,
            page_fault_stalls_max_per_s: None,
            latency_max: Default::default(),
        }),
    }
}

/// Merges results of the same test from several hosts.
pub fn merge(inputs: &[MergeInput]) -> Result<MergeOutput> {
    if inputs.len() < 2 {
        return Err(Error::usage(
            "report merge needs at least two result files (one per host)",
        ));
    }
    check_compatible(inputs)?;
    let labels = host_labels(
        &inputs
            .iter()
            .map(|d| {
                let used = d.result.merged.as_ref();
                let used = used.map(|m| m.hosts.iter().map(|h| h.label.clone()).collect());
                (d.result.run.host.hostname.as_str(), used)
            })
            .collect::<Vec<_>>(),
    );
    let mut result = gather(inputs, &labels);
    let rs: Vec<&StorageResult> = inputs.iter().map(|d| d.result).collect();
    result.total = merge_totals(&rs.iter().map(|r| &r.total).collect::<Vec<_>>());
    result.spec.target_iops = result.total.target_iops;
    result.spec.threads = rs.iter().map(|r| r.spec.threads).sum();
    result.spec.mailboxes = rs
        .iter()
        .map(|r| r.spec.mailboxes)
        .try_fold(0u64, |a, m| m.map(|m| a + m));
    result.run = storage_header(&rs, result.merged.as_ref());
    result.host = merged_host_perf(&rs);
    result.init = merged_init(&rs, &labels);
    result.verify = merged_verify(&rs, &labels);
    result.io_engine = (rs.iter().map(|r| r.io_engine.as_str()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join("/");
    result.o_direct = rs.iter().all(|r| r.o_direct);
    result.io_path = merged_io_path(&rs, &labels);
    result.window = Window {
        warmup_s: rs.iter().map(|r| r.window.warmup_s).fold(0.0, f64::max),
        measured_s: rs.iter().map(|r| r.window.measured_s).fold(0.0, f64::max),
        intervals: rs.iter().map(|r| r.window.intervals).max().unwrap_or(0),
        interrupted: rs.iter().any(|r| r.window.interrupted),
        ended_by_deadline: rs.iter().any(|r| r.window.ended_by_deadline),
        prerequisites: merge_prerequisites(&rs),
    };
    let intervals = merge_intervals(inputs, &labels);
    if !intervals.is_empty() {
        result.intervals_file = "intervals.jsonl".into();
    }
    Ok(MergeOutput { result, intervals })
}

/// The per-host parts put together under their labels: host sections,
/// instances, the spec's instances, disks, errors and the verdict (the
/// worst status, every reason prefixed by its host).
fn gather(inputs: &[MergeInput], labels: &[Option<String>]) -> StorageResult {
    let mut out = inputs[0].result.clone();
    out.spec.instances.clear();
    out.instances.clear();
    out.disks.clear();
    out.errors.clear();
    out.tuning.clear();
    out.intervals_file.clear();
    let mut merged = StorageMerged::default();
    let mut verdict = Verdict::from_reasons(Vec::new());
    for (d, p) in inputs.iter().zip(labels) {
        let r = d.result;
        merged.sources.push(d.source.clone());
        match (&r.merged, p) {
            (Some(m), _) => merged.hosts.extend(m.hosts.iter().cloned()),
            (None, Some(label)) => merged.hosts.push(host_section(label, d)),
            (None, None) => {}
        }
        if severity(r.verdict.status) > severity(verdict.status) {
            verdict.status = r.verdict.status;
        }
        (verdict.reasons).extend(r.verdict.reasons.iter().map(|x| prefixed(p, x)));
        for i in &r.instances {
            let mut i = i.clone();
            i.name = prefixed(p, &i.name);
            out.instances.push(i);
        }
        for s in &r.spec.instances {
            let mut s = s.clone();
            s.name = prefixed(p, &s.name);
            s.index = out.spec.instances.len();
            out.spec.instances.push(s);
        }
        for dk in &r.disks {
            let mut dk = dk.clone();
            dk.device = prefixed(p, &dk.device);
            out.disks.push(dk);
        }
        out.errors.extend(r.errors.iter().map(|e| prefixed(p, e)));
    }
    out.verdict = verdict;
    out.merged = Some(merged);
    out
}

fn host_section(label: &str, d: &MergeInput) -> HostSection {
    let r = d.result;
    HostSection {
        label: label.to_string(),
        source: d.source.clone(),
        host: r.run.host.clone(),
        started: r.run.started.clone(),
        ended: r.run.ended.clone(),
        verdict: r.verdict.clone(),
        window: r.window.clone(),
        total: r.total.clone(),
        host_performance: r.host.clone(),
        io_engine: r.io_engine.clone(),
        instances: (r.instances.iter())
            .map(|i| prefixed(&Some(label.to_string()), &i.name))
            .collect(),
    }
}

/// The header of the merged result: every host named, the earliest start,
/// the latest end, the longest duration.
fn storage_header(rs: &[&StorageResult], merged: Option<&StorageMerged>) -> RunHeader {
    let headers: Vec<&RunHeader> = rs.iter().map(|r| &r.run).collect();
    let labels = merged.into_iter().flat_map(|m| m.hosts.iter());
    merged_header("storage-run", &headers, labels.map(|h| h.label.as_str()))
}

fn merged_host_perf(rs: &[&StorageResult]) -> HostPerf {
    let n = rs.len() as f64;
    let mean = |f: fn(&HostPerf) -> f64| rs.iter().map(|r| f(&r.host)).sum::<f64>() / n;
    HostPerf {
        cpu_busy_avg_pct: mean(|h| h.cpu_busy_avg_pct),
        cpu_iowait_avg_pct: mean(|h| h.cpu_iowait_avg_pct),
        memory_used_avg_pct: mean(|h| h.memory_used_avg_pct),
        memory_total_bytes: rs.iter().map(|r| r.host.memory_total_bytes).sum(),
        mailbench_cpu_s: rs.iter().map(|r| r.host.mailbench_cpu_s).sum(),
        mailbench_run_cpu_s: rs.iter().map(|r| r.host.mailbench_run_cpu_s).sum(),
        mailbench_cpu_us_per_io: {
            let cpu: f64 = rs.iter().map(|r| r.host.mailbench_cpu_s).sum();
            let ios: u64 = rs
                .iter()
                .flat_map(|r| r.total.classes.values())
                .map(|c| c.ops)
                .sum();
            if ios > 0 { cpu * 1e6 / ios as f64 } else { 0.0 }
        },
    }
}

/// Every host's databases (when every host created or opened them).
fn merged_init(rs: &[&StorageResult], labels: &[Option<String>]) -> Option<InitSummary> {
    if !rs.iter().all(|r| r.init.is_some()) {
        return None;
    }
    let mut out = InitSummary::default();
    for (i, p) in rs.iter().filter_map(|r| r.init.as_ref()).zip(labels) {
        for db in &i.databases {
            let mut db = db.clone();
            db.name = prefixed(p, &db.name);
            out.databases.push(db);
        }
        out.written_bytes += i.written_bytes;
        out.seconds = out.seconds.max(i.seconds);
        out.mb_per_s += i.mb_per_s;
        out.o_direct = i.o_direct;
        out.io_engine = i.io_engine.clone();
    }
    Some(out)
}

/// Every host's I/O path: the engines asked for, buffered I/O asked for by
/// every host, and each host's reasons named by host.
fn merged_io_path(rs: &[&StorageResult], labels: &[Option<String>]) -> Option<IoPath> {
    let paths: Vec<(&IoPath, &Option<String>)> = rs
        .iter()
        .zip(labels)
        .filter_map(|(r, l)| r.io_path.as_ref().map(|p| (p, l)))
        .collect();
    if paths.is_empty() {
        return None;
    }
    let reasons = |f: fn(&IoPath) -> Option<&String>| {
        let all: Vec<String> = paths
            .iter()
            .filter_map(|(p, l)| f(p).map(|x| prefixed(l, x)))
            .collect();
        (!all.is_empty()).then(|| all.join("; "))
    };
    Some(IoPath {
        asked: (paths.iter().map(|(p, _)| p.asked.as_str()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
            .join("/"),
        buffered_asked: paths.iter().all(|(p, _)| p.buffered_asked),
        direct_off: reasons(|p| p.direct_off.as_ref()),
        fallback: reasons(|p| p.fallback.as_ref()),
    })
}

/// Every host's verification (when any host verified).
fn merged_verify(rs: &[&StorageResult], labels: &[Option<String>]) -> Option<VerifySummary> {
    if !rs.iter().any(|r| r.verify.is_some()) {
        return None;
    }
    let mut out = VerifySummary::default();
    for (r, p) in rs.iter().zip(labels) {
        if let Some(v) = &r.verify {
            for db in &v.databases {
                let mut db = db.clone();
                db.name = prefixed(p, &db.name);
                out.databases.push(db);
            }
            out.seconds = out.seconds.max(v.seconds);
            out.mb_per_s += v.mb_per_s;
            out.bad_total += v.bad_total;
        }
    }
    Some(out)
}

/// Intervals aligned by sequence number (hosts started together, same
/// sampling interval); only intervals every host has are kept.
fn merge_intervals(inputs: &[MergeInput], labels: &[Option<String>]) -> Vec<IntervalRecord> {
    let maps: Vec<BTreeMap<u64, &IntervalRecord>> = inputs
        .iter()
        .map(|d| d.intervals.iter().map(|r| (r.seq, r)).collect())
        .collect();
    let Some(first) = maps.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for seq in first.keys() {
        let recs: Vec<&IntervalRecord> = maps.iter().filter_map(|m| m.get(seq).copied()).collect();
        if recs.len() != maps.len() {
            continue;
        }
        let n = recs.len() as f64;
        let mut disks = BTreeMap::new();
        for (r, p) in recs.iter().zip(labels) {
            for (k, v) in &r.disks {
                disks.insert(prefixed(p, k), *v);
            }
        }
        out.push(IntervalRecord {
            seq: *seq,
            end_s: recs.iter().map(|r| r.end_s).fold(0.0, f64::max),
            seconds: recs.iter().map(|r| r.seconds).fold(0.0, f64::max),
            phase: recs[0].phase.clone(),
            instances: (recs.iter())
                .flat_map(|r| r.instances.iter().cloned())
                .collect(),
            cpu_busy_pct: recs.iter().map(|r| r.cpu_busy_pct).sum::<f64>() / n,
            cpu_iowait_pct: recs.iter().map(|r| r.cpu_iowait_pct).sum::<f64>() / n,
            memory_used_pct: recs.iter().map(|r| r.memory_used_pct).sum::<f64>() / n,
            disks,
        });
    }
    out
}

/// The hosts' warm-ups together: bounds and caches summed, the longest time,
/// attained only if every host attained it (None if any host's result has none).
fn merge_prerequisites(rs: &[&StorageResult]) -> Option<crate::storage::run::Prerequisites> {
    let all: Option<Vec<_>> = rs.iter().map(|r| r.window.prerequisites.as_ref()).collect();
    let all = all.filter(|a| !a.is_empty())?;
    let mut merged = crate::storage::run::Prerequisites::new(
        all.iter().map(|p| p.cache_lower_bound_bytes).sum(),
        all.iter().map(|p| p.cache_max_bytes).sum(),
        all.iter().map(|p| p.cache_reached_bytes).sum(),
        all.iter().map(|p| p.seconds).fold(0.0, f64::max),
        all.iter().map(|p| p.limit_s).fold(0.0, f64::max),
    );
    let missed: Vec<&str> = (rs.iter().zip(&all))
        .filter(|(_, p)| !p.attained)
        .map(|(r, _)| r.run.host.hostname.as_str())
        .collect();
    if merged.attained && !missed.is_empty() {
        // The sums can reach the bound while a host stayed under its own.
        merged.attained = false;
        merged.warning = Some(format!(
            "The warm-up limit ended the warm-up on {} of {} hosts ({}) before their database \
             cache reached its lower bound: their measured window started with a colder cache \
             than the published test waits for. Give a longer `--warmup` (the limit) or a \
             smaller `--cache-size`.",
            missed.len(),
            rs.len(),
            missed.join(", ")
        ));
    }
    Some(merged)
}
