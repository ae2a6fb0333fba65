//! `report merge`: one result from several hosts' results of the same test.
//! Rates are summed, averages weighted by operation counts, and percentiles
//! come from added histograms (never averaged). Per-host sections are kept.

use crate::load::StorageDoc;
use mailbench_base::host::HostInfo;
use mailbench_base::{Error, Result, RunHeader, Status, Verdict};
use mailbench_metrics::LatencyHist;
use mailbench_storage::result::{
    DiskResult, HostPerf, InstanceResult, IntervalRecord, StorageResult, Totals, Window,
};
use mailbench_storage::stats::{ClassFigures, Counters, LatencyMs};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The `merged` section of a merged result.json.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Merged {
    /// The result files merged, in order.
    pub sources: Vec<String>,
    /// One section per host (merged inputs contribute their own host sections).
    pub hosts: Vec<HostSection>,
}

/// One host's own figures inside a merged result.
#[derive(Debug, Clone, Serialize, Deserialize)]
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

pub struct MergeOutput {
    pub result: StorageResult,
    pub merged: Merged,
    pub intervals: Vec<IntervalRecord>,
}

impl MergeOutput {
    /// The merged result.json value (the storage result plus `merged`).
    pub fn to_value(&self) -> Result<serde_json::Value> {
        let mut v = serde_json::to_value(&self.result)
            .map_err(|e| Error::runtime(format!("cannot encode the merged result: {e}")))?;
        let m = serde_json::to_value(&self.merged)
            .map_err(|e| Error::runtime(format!("cannot encode the merged result: {e}")))?;
        if let Some(o) = v.as_object_mut() {
            o.insert("merged".into(), m);
        }
        Ok(v)
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
pub fn check_compatible(docs: &[StorageDoc]) -> Result<()> {
    let Some(first) = docs.first() else {
        return Err(Error::usage("report merge needs at least two result files"));
    };
    let a = &first.result;
    for d in &docs[1..] {
        let b = &d.result;
        let names = format!("{} and {}", first.source.display(), d.source.display());
        if a.spec.test_type != b.spec.test_type {
            return Err(Error::usage(format!(
                "cannot merge {names}: different test types ({:?} vs {:?}); merge only results of the same test",
                a.spec.test_type, b.spec.test_type
            )));
        }
        if a.spec.profile.name != b.spec.profile.name {
            return Err(Error::usage(format!(
                "cannot merge {names}: different profiles ({} vs {}); merge only results of the same test",
                a.spec.profile.name, b.spec.profile.name
            )));
        }
        let pa = serde_json::to_value(&a.spec.profile).ok();
        let pb = serde_json::to_value(&b.spec.profile).ok();
        if pa != pb {
            return Err(Error::usage(format!(
                "cannot merge {names}: profile {} has different settings in each (overridden values); merge only results of the same test",
                a.spec.profile.name
            )));
        }
        if a.spec.thresholds != b.spec.thresholds {
            return Err(Error::usage(format!(
                "cannot merge {names}: different verdict thresholds; merge only results judged the same way"
            )));
        }
    }
    Ok(())
}

fn weighted(pairs: impl Iterator<Item = (f64, u64)>) -> f64 {
    let (mut s, mut n) = (0.0, 0u64);
    for (v, w) in pairs {
        s += v * w as f64;
        n += w;
    }
    if n == 0 { 0.0 } else { s / n as f64 }
}

/// Aggregates one class: sums of rates, op-weighted averages, percentiles
/// from the added histogram.
pub fn merge_class(parts: &[&ClassFigures], hist: &LatencyHist) -> ClassFigures {
    let ops: u64 = parts.iter().map(|c| c.ops).sum();
    let s = hist.summary();
    let lat = LatencyMs::from(s);
    ClassFigures {
        ops,
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

/// Aggregate totals of several hosts.
pub fn merge_totals(ts: &[&Totals]) -> Totals {
    let mut hists: BTreeMap<String, LatencyHist> = BTreeMap::new();
    for t in ts {
        for (k, h) in &t.histograms {
            hists.entry(k.clone()).or_default().add(h);
        }
    }
    let class_names: BTreeSet<String> = ts.iter().flat_map(|t| t.classes.keys().cloned()).collect();
    let mut classes = BTreeMap::new();
    let empty = LatencyHist::new();
    for name in &class_names {
        let parts: Vec<&ClassFigures> = ts.iter().filter_map(|t| t.classes.get(name)).collect();
        classes.insert(
            name.clone(),
            merge_class(&parts, hists.get(name).unwrap_or(&empty)),
        );
    }
    let mut counters = Counters::default();
    for t in ts {
        counters.add(&t.counters);
    }
    let ops = |n: &str| classes.get(n).map(|c: &ClassFigures| c.ops).unwrap_or(0) as f64;
    let trans = ops("db_read") + ops("db_write");
    let tl = hists.get("transaction").unwrap_or(&empty).summary();
    let targets: Vec<f64> = ts.iter().filter_map(|t| t.target_iops).collect();
    Totals {
        target_iops: if targets.is_empty() {
            None
        } else {
            Some(targets.iter().sum())
        },
        transactional_iops: ts.iter().map(|t| t.transactional_iops).sum(),
        db_read_share_pct: if trans > 0.0 {
            100.0 * ops("db_read") / trans
        } else {
            0.0
        },
        log_write_share_pct: if trans > 0.0 {
            100.0 * ops("log_write") / trans
        } else {
            0.0
        },
        transactions_per_s: ts.iter().map(|t| t.transactions_per_s).sum(),
        page_fault_stalls_per_s: ts.iter().map(|t| t.page_fault_stalls_per_s).sum(),
        page_fault_stalls_max_per_s: ts
            .iter()
            .map(|t| t.page_fault_stalls_max_per_s)
            .fold(0.0, f64::max),
        io_errors: ts.iter().map(|t| t.io_errors).sum(),
        classes,
        counters,
        transaction_latency_ms: LatencyMs {
            avg: weighted(
                ts.iter()
                    .map(|t| (t.transaction_latency_ms.avg, t.counters.transactions)),
            ),
            ..LatencyMs::from(tl)
        },
        histograms: hists,
        thresholds: ts.first().map(|t| t.thresholds).unwrap_or(
            mailbench_storage::spec::Thresholds {
                db_read_avg_ms: 0.0,
                db_read_max_ms: 0.0,
                log_write_avg_ms: 0.0,
                log_write_max_ms: 0.0,
                page_fault_stalls_per_s: 0.0,
                page_fault_stalls_max_per_s: None,
            },
        ),
    }
}

/// The one value all inputs share, else `mixed: a; b`.
pub(crate) fn common_or_mixed<'a>(vals: impl Iterator<Item = &'a str>) -> String {
    let set: BTreeSet<&str> = vals.collect();
    if set.len() == 1 {
        set.into_iter().next().unwrap_or_default().to_string()
    } else {
        format!("mixed: {}", set.into_iter().collect::<Vec<_>>().join("; "))
    }
}

/// The host of a merged result: every host's label, the common OS and
/// kernel (or `mixed: ...`), CPUs and memory summed.
pub(crate) fn merged_host<'a>(
    labels: impl Iterator<Item = &'a str>,
    hosts: &[HostInfo],
) -> HostInfo {
    HostInfo {
        hostname: labels.collect::<Vec<_>>().join(", "),
        os: common_or_mixed(hosts.iter().map(|h| h.os.as_str())),
        kernel: common_or_mixed(hosts.iter().map(|h| h.kernel.as_str())),
        cpus: hosts.iter().map(|h| h.cpus).sum(),
        memory_bytes: hosts.iter().map(|h| h.memory_bytes).sum(),
    }
}

/// Merges results of the same test from several hosts.
pub fn merge(docs: &[StorageDoc]) -> Result<MergeOutput> {
    if docs.len() < 2 {
        return Err(Error::usage(
            "report merge needs at least two result files (one per host)",
        ));
    }
    check_compatible(docs)?;
    // Labels: existing host sections keep theirs; plain results get the hostname.
    let mut used: BTreeSet<String> = BTreeSet::new();
    for d in docs {
        if let Some(m) = &d.merged {
            used.extend(m.hosts.iter().map(|h| h.label.clone()));
        }
    }
    let mut prefixes: Vec<Option<String>> = Vec::new();
    for d in docs {
        if d.merged.is_some() {
            prefixes.push(None);
            continue;
        }
        let base = if d.result.run.host.hostname.is_empty() {
            "host".to_string()
        } else {
            d.result.run.host.hostname.clone()
        };
        let mut label = base.clone();
        let mut n = 2;
        while used.contains(&label) {
            label = format!("{base}#{n}");
            n += 1;
        }
        used.insert(label.clone());
        prefixes.push(Some(label));
    }
    let pre = |p: &Option<String>, s: &str| match p {
        Some(l) => format!("{l}:{s}"),
        None => s.to_string(),
    };

    let mut merged = Merged::default();
    let mut instances: Vec<InstanceResult> = Vec::new();
    let mut spec = docs[0].result.spec.clone();
    spec.instances.clear();
    let mut disks: Vec<DiskResult> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    let mut reasons: Vec<String> = Vec::new();
    let mut status = Status::Pass;
    for (d, p) in docs.iter().zip(prefixes.iter()) {
        let r = &d.result;
        merged.sources.push(d.source.display().to_string());
        match (&d.merged, p) {
            (Some(m), _) => merged.hosts.extend(m.hosts.iter().cloned()),
            (None, Some(label)) => merged.hosts.push(HostSection {
                label: label.clone(),
                source: d.source.display().to_string(),
                host: r.run.host.clone(),
                started: r.run.started.clone(),
                ended: r.run.ended.clone(),
                verdict: r.verdict.clone(),
                window: r.window.clone(),
                total: r.total.clone(),
                host_performance: r.host.clone(),
                io_engine: r.io_engine.clone(),
                instances: r.instances.iter().map(|i| pre(p, &i.name)).collect(),
            }),
            (None, None) => {}
        }
        if severity(r.verdict.status) > severity(status) {
            status = r.verdict.status;
        }
        for reason in &r.verdict.reasons {
            reasons.push(match p {
                Some(l) => format!("{l}: {reason}"),
                None => reason.clone(),
            });
        }
        for i in &r.instances {
            let mut i = i.clone();
            i.name = pre(p, &i.name);
            instances.push(i);
        }
        for s in &r.spec.instances {
            let mut s = s.clone();
            s.name = pre(p, &s.name);
            s.index = spec.instances.len();
            spec.instances.push(s);
        }
        for dk in &r.disks {
            let mut dk = dk.clone();
            dk.device = pre(p, &dk.device);
            disks.push(dk);
        }
        errors.extend(r.errors.iter().map(|e| pre(p, e)));
    }
    let rs: Vec<&StorageResult> = docs.iter().map(|d| &d.result).collect();
    let totals = merge_totals(&rs.iter().map(|r| &r.total).collect::<Vec<_>>());
    spec.target_iops = totals.target_iops;
    spec.threads = rs.iter().map(|r| r.spec.threads).sum();
    spec.mailboxes = rs
        .iter()
        .map(|r| r.spec.mailboxes)
        .try_fold(0u64, |a, m| m.map(|m| a + m));

    let mut header = RunHeader::begin("storage-run");
    let hosts: Vec<HostInfo> = rs.iter().map(|r| r.run.host.clone()).collect();
    header.host = merged_host(merged.hosts.iter().map(|h| h.label.as_str()), &hosts);
    header.started = rs
        .iter()
        .map(|r| r.run.started.clone())
        .min()
        .unwrap_or_default();
    header.ended = rs
        .iter()
        .map(|r| r.run.ended.clone())
        .max()
        .unwrap_or_default();
    header.duration_s = rs.iter().map(|r| r.run.duration_s).fold(0.0, f64::max);

    let n = rs.len() as f64;
    let host = HostPerf {
        cpu_busy_avg_pct: rs.iter().map(|r| r.host.cpu_busy_avg_pct).sum::<f64>() / n,
        cpu_iowait_avg_pct: rs.iter().map(|r| r.host.cpu_iowait_avg_pct).sum::<f64>() / n,
        memory_used_avg_pct: rs.iter().map(|r| r.host.memory_used_avg_pct).sum::<f64>() / n,
        memory_total_bytes: rs.iter().map(|r| r.host.memory_total_bytes).sum(),
        mailbench_cpu_s: rs.iter().map(|r| r.host.mailbench_cpu_s).sum(),
    };
    let init = if rs.iter().all(|r| r.init.is_some()) {
        let mut out = mailbench_storage::init::InitSummary::default();
        for (r, p) in rs.iter().zip(prefixes.iter()) {
            if let Some(i) = &r.init {
                for db in &i.databases {
                    let mut db = db.clone();
                    db.name = pre(p, &db.name);
                    out.databases.push(db);
                }
                out.written_bytes += i.written_bytes;
                out.seconds = out.seconds.max(i.seconds);
                out.mb_per_s += i.mb_per_s;
                out.o_direct = i.o_direct;
                out.io_engine = i.io_engine.clone();
            }
        }
        Some(out)
    } else {
        None
    };
    let verify = if rs.iter().any(|r| r.verify.is_some()) {
        let mut out = mailbench_storage::verify::VerifySummary::default();
        for (r, p) in rs.iter().zip(prefixes.iter()) {
            if let Some(v) = &r.verify {
                for db in &v.databases {
                    let mut db = db.clone();
                    db.name = pre(p, &db.name);
                    out.databases.push(db);
                }
                out.seconds = out.seconds.max(v.seconds);
                out.mb_per_s += v.mb_per_s;
                out.bad_total += v.bad_total;
            }
        }
        Some(out)
    } else {
        None
    };
    let intervals = merge_intervals(docs, &prefixes);
    let engines: BTreeSet<&str> = rs.iter().map(|r| r.io_engine.as_str()).collect();
    let result = StorageResult {
        run: header,
        verdict: Verdict { status, reasons },
        spec,
        io_engine: engines.into_iter().collect::<Vec<_>>().join("/"),
        o_direct: rs.iter().all(|r| r.o_direct),
        window: Window {
            warmup_s: rs.iter().map(|r| r.window.warmup_s).fold(0.0, f64::max),
            measured_s: rs.iter().map(|r| r.window.measured_s).fold(0.0, f64::max),
            intervals: rs.iter().map(|r| r.window.intervals).max().unwrap_or(0),
            interrupted: rs.iter().any(|r| r.window.interrupted),
        },
        init,
        instances,
        total: totals,
        host,
        disks,
        verify,
        errors,
        intervals_file: if intervals.is_empty() {
            String::new()
        } else {
            "intervals.jsonl".into()
        },
        tuning: Vec::new(),
    };
    Ok(MergeOutput {
        result,
        merged,
        intervals,
    })
}

/// Intervals aligned by sequence number (hosts started together, same
/// sampling interval); only intervals every host has are kept.
fn merge_intervals(docs: &[StorageDoc], prefixes: &[Option<String>]) -> Vec<IntervalRecord> {
    let maps: Vec<BTreeMap<u64, &IntervalRecord>> = docs
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
        for (r, p) in recs.iter().zip(prefixes.iter()) {
            for (k, v) in &r.disks {
                let key = match p {
                    Some(l) => format!("{l}:{k}"),
                    None => k.clone(),
                };
                disks.insert(key, *v);
            }
        }
        out.push(IntervalRecord {
            seq: *seq,
            end_s: recs.iter().map(|r| r.end_s).fold(0.0, f64::max),
            seconds: recs.iter().map(|r| r.seconds).fold(0.0, f64::max),
            phase: recs[0].phase.clone(),
            instances: recs
                .iter()
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

/// The per-host part of summary.txt for a merged result.
pub fn hosts_text(m: &Merged) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "\nPer-Host Results (aggregate above)");
    let _ = writeln!(
        o,
        "  {:<20} {:<12} {:>11} {:>11} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "host", "verdict", "trans IOPS", "target", "rd avg", "rd p99", "lw avg", "lw p99", "errors"
    );
    for h in &m.hosts {
        let c = |n: &str| {
            h.total
                .classes
                .get(n)
                .map(|c| c.latency_ms)
                .unwrap_or_default()
        };
        let _ = writeln!(
            o,
            "  {:<20} {:<12} {:>11.2} {:>11} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>7}",
            h.label,
            h.verdict.label(),
            h.total.transactional_iops,
            h.total
                .target_iops
                .map(|t| format!("{t:.2}"))
                .unwrap_or_else(|| "none".into()),
            c("db_read").avg,
            c("db_read").p99,
            c("log_write").avg,
            c("log_write").p99,
            h.total.io_errors
        );
    }
    for (i, s) in m.sources.iter().enumerate() {
        let _ = writeln!(o, "  source {}: {s}", i + 1);
    }
    o
}
