//! `report merge` of N hosts' results equals one result built from the union
//! of their samples: operation counts and rates add up, averages are the
//! op-weighted ones, and percentiles are equal (the histograms add exactly, so
//! equality holds to the histogram's own precision, 3 significant digits).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mailbench_base::config::ConfigFile;
use mailbench_report::load::StorageDoc;
use mailbench_report::merge::merge;
use mailbench_results::storage::run::{
    HostPerf, InstanceResult, StorageResult, Totals, Window, class_map, hist_map,
};
use mailbench_results::storage::stats::{Class, Stats};
use mailbench_results::{RunHeader, Verdict};
use mailbench_storage::spec::{SpecExt, StorageSpec, StorageToml};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

const CLASSES: [Class; 5] = [
    Class::DbRead,
    Class::DbWrite,
    Class::LogWrite,
    Class::LogRead,
    Class::MaintRead,
];

fn spec() -> StorageSpec {
    StorageSpec::resolve(
        StorageToml {
            quick: Some(true),
            databases: Some(1),
            ..Default::default()
        },
        &ConfigFile::default(),
        Path::new("/nonexistent/mailbench-data"),
    )
    .unwrap()
}

/// Records one sample: class 0..5 are I/O classes, 5 is a transaction.
fn record(st: &mut Stats, class: usize, us: u64) {
    if class < 5 {
        let c = st.class_mut(CLASSES[class]);
        c.ops += 1;
        c.bytes += 4096 * (1 + us % 9);
        c.latency.record_us(us);
    } else {
        st.counters.transactions += 1;
        st.transaction_latency.record_us(us);
    }
}

/// A result as `storage run` builds it, from one instance's stats.
fn result(spec: &StorageSpec, host: &str, st: &Stats, secs: f64) -> StorageResult {
    let mut run = RunHeader::begin("storage-run");
    run.host.hostname = host.into();
    let trans = st.transactional_ios() as f64;
    let mut spec = spec.clone();
    spec.instances.truncate(1);
    StorageResult {
        run,
        verdict: Verdict::from_reasons(vec![]),
        spec: spec.clone(),
        io_engine: "threads".into(),
        o_direct: false,
        io_path: None,
        window: Window {
            warmup_s: 0.0,
            measured_s: secs,
            intervals: 1,
            interrupted: false,
            ended_by_deadline: false,
            prerequisites: None,
        },
        init: None,
        instances: vec![InstanceResult {
            name: "DB01".into(),
            db_path: "db".into(),
            log_dir: "log".into(),
            size_bytes: 1,
            sessions: 1,
            transactional_iops: trans / secs,
            classes: class_map(st, secs),
            counters: st.counters.clone(),
            transactions_per_s: st.counters.transactions as f64 / secs,
            page_fault_stalls_per_s: 0.0,
            clean_shutdown: true,
            histograms: hist_map(st),
        }],
        total: Totals {
            target_iops: None,
            transactional_iops: trans / secs,
            db_read_share_pct: if trans > 0.0 {
                100.0 * st.class(Class::DbRead).ops as f64 / trans
            } else {
                0.0
            },
            log_write_share_pct: if trans > 0.0 {
                100.0 * st.class(Class::LogWrite).ops as f64 / trans
            } else {
                0.0
            },
            transactions_per_s: st.counters.transactions as f64 / secs,
            page_fault_stalls_per_s: 0.0,
            page_fault_stalls_max_per_s: 0.0,
            db_read_sample_max_ms: 0.0,
            log_write_sample_max_ms: 0.0,
            io_errors: st.io_errors(),
            classes: class_map(st, secs),
            counters: st.counters.clone(),
            transaction_latency_ms: st.transaction_latency.summary().into(),
            histograms: hist_map(st),
            thresholds: spec.thresholds,
        },
        host: HostPerf::default(),
        disks: vec![],
        verify: None,
        errors: vec![],
        intervals_file: String::new(),
        tuning: vec![],
        merged: None,
    }
}

/// Through result.json text and back, as `report merge` reads them.
fn doc(r: &StorageResult, i: usize) -> StorageDoc {
    let raw: serde_json::Value = serde_json::from_str(&serde_json::to_string(r).unwrap()).unwrap();
    let result: StorageResult = serde_json::from_value(raw.clone()).unwrap();
    StorageDoc {
        source: PathBuf::from(format!("host{i}/result.json")),
        result,
        intervals: vec![],
        bad_interval_lines: 0,
        intervals_problem: None,
        test_log: None,
        raw,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Checks merged against union; returns a description of the first mismatch.
fn check(merged: &Totals, union: &Totals) -> Result<(), String> {
    for (name, u) in &union.classes {
        let m = &merged.classes[name];
        if m.ops != u.ops {
            return Err(format!("{name} ops {} vs {}", m.ops, u.ops));
        }
        for (what, a, b) in [
            ("ops/s", m.ops_per_s, u.ops_per_s),
            ("MB/s", m.mb_per_s, u.mb_per_s),
            ("avg bytes", m.avg_bytes, u.avg_bytes),
            ("avg latency", m.latency_ms.avg, u.latency_ms.avg),
        ] {
            if !close(a, b) {
                return Err(format!("{name} {what} {a} vs {b}"));
            }
        }
        let (ml, ul) = (&m.latency_ms, &u.latency_ms);
        if (ml.p50, ml.p95, ml.p99, ml.p999, ml.max) != (ul.p50, ul.p95, ul.p99, ul.p999, ul.max) {
            return Err(format!("{name} percentiles {ml:?} vs {ul:?}"));
        }
        if merged.histograms[name].summary() != union.histograms[name].summary() {
            return Err(format!("{name} histogram differs"));
        }
    }
    let (mt, ut) = (
        &merged.transaction_latency_ms,
        &union.transaction_latency_ms,
    );
    if (mt.p50, mt.p99, mt.max) != (ut.p50, ut.p99, ut.max) || !close(mt.avg, ut.avg) {
        return Err(format!("transaction latency {mt:?} vs {ut:?}"));
    }
    for (what, a, b) in [
        (
            "transactional IOPS",
            merged.transactional_iops,
            union.transactional_iops,
        ),
        (
            "transactions/s",
            merged.transactions_per_s,
            union.transactions_per_s,
        ),
        (
            "db read share",
            merged.db_read_share_pct,
            union.db_read_share_pct,
        ),
    ] {
        if !close(a, b) {
            return Err(format!("{what} {a} vs {b}"));
        }
    }
    if merged.counters.transactions != union.counters.transactions {
        return Err("transactions".into());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn merge_equals_the_union_of_samples(
        hosts in proptest::collection::vec(
            proptest::collection::vec((0usize..6, 1u64..20_000_000), 0..400),
            2..6,
        ),
        secs in 1.0f64..7200.0,
    ) {
        let spec = spec();
        let mut union = Stats::default();
        let mut docs = Vec::new();
        for (i, samples) in hosts.iter().enumerate() {
            let mut st = Stats::default();
            for (c, us) in samples {
                record(&mut st, *c, *us);
            }
            union.add(&st);
            docs.push(doc(&result(&spec, &format!("host{i}"), &st, secs), i));
        }
        let merged = merge(&docs).unwrap();
        let expect = result(&spec, "union", &union, secs);
        prop_assert_eq!(merged.result.instances.len(), hosts.len());
        prop_assert_eq!(merged.merged().hosts.len(), hosts.len());
        if let Err(e) = check(&merged.result.total, &expect.total) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// A fixed three-host example whose figures are printed (`--nocapture`).
#[test]
fn three_hosts_merged_equal_their_union() {
    let spec = spec();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 11
    };
    let mut union = Stats::default();
    let mut docs = Vec::new();
    for (i, scale) in [300u64, 900, 5000].iter().enumerate() {
        let mut st = Stats::default();
        for _ in 0..50_000 {
            let class = (next() % 6) as usize;
            // A long-tailed latency: mostly near `scale` µs, sometimes 100x.
            let base = scale + next() % scale;
            let us = if next() % 100 == 0 { base * 100 } else { base };
            record(&mut st, class, us);
        }
        union.add(&st);
        docs.push(doc(&result(&spec, &format!("host{i}"), &st, 600.0), i));
    }
    let merged = merge(&docs).unwrap();
    let expect = result(&spec, "union", &union, 600.0);
    check(&merged.result.total, &expect.total).unwrap();
    let (m, u) = (
        &merged.result.total.classes["db_read"],
        &expect.total.classes["db_read"],
    );
    eprintln!(
        "db_read over 3 hosts: ops {} vs {}; IOPS {:.3} vs {:.3}",
        m.ops, u.ops, m.ops_per_s, u.ops_per_s
    );
    eprintln!(
        "  merged: avg {:.4} p50 {} p95 {} p99 {} p99.9 {} max {} ms",
        m.latency_ms.avg,
        m.latency_ms.p50,
        m.latency_ms.p95,
        m.latency_ms.p99,
        m.latency_ms.p999,
        m.latency_ms.max
    );
    eprintln!(
        "  union:  avg {:.4} p50 {} p95 {} p99 {} p99.9 {} max {} ms",
        u.latency_ms.avg,
        u.latency_ms.p50,
        u.latency_ms.p95,
        u.latency_ms.p99,
        u.latency_ms.p999,
        u.latency_ms.max
    );
    // Averaging the hosts' p99s would be wrong: show how far off it is.
    let naive: f64 = docs
        .iter()
        .map(|d| d.result.total.classes["db_read"].latency_ms.p99)
        .sum::<f64>()
        / 3.0;
    eprintln!("  (mean of the hosts' p99s would say {naive:.3} ms)");
    assert!((naive - u.latency_ms.p99).abs() > 0.01);
}

#[test]
fn different_tests_are_refused_by_name() {
    let spec = spec();
    let st = Stats::default();
    let a = doc(&result(&spec, "a", &st, 1.0), 0);
    let mut b = doc(&result(&spec, "b", &st, 1.0), 1);
    b.result.spec.test_type = mailbench_storage::spec::TestType::Stress;
    let e = merge(&[a.clone(), b]).err().unwrap();
    assert_eq!(e.exit_status().code(), 2);
    let msg = e.to_string();
    assert!(
        msg.contains("different test types") && msg.contains("host1/result.json"),
        "{msg}"
    );
    let mut c = doc(&result(&spec, "c", &st, 1.0), 2);
    c.result.spec.thresholds.db_read_avg_ms = 1.0;
    assert!(
        merge(&[a.clone(), c])
            .err()
            .unwrap()
            .to_string()
            .contains("thresholds")
    );
    assert!(merge(std::slice::from_ref(&a)).is_err());
}

#[test]
fn a_host_under_its_cache_bound_makes_the_merged_warm_up_unattained() {
    use mailbench_results::storage::run::Prerequisites;
    let spec = spec();
    let st = Stats::default();
    let with = |host: &str, i: usize, reached: u64| {
        let mut r = result(&spec, host, &st, 1.0);
        r.window.prerequisites = Some(Prerequisites::new(100, 200, reached, 5.0, 60.0));
        doc(&r, i)
    };
    // Together 210 of 200 bytes: the sums would say attained; host b is at 20 of 100.
    let merged = merge(&[with("a", 0, 190), with("b", 1, 20)]).unwrap();
    let p = merged.result.window.prerequisites.unwrap();
    assert!(!p.attained);
    let warning = p.warning.unwrap_or_default();
    assert!(warning.contains("1 of 2 hosts (b)"), "{warning}");
    let merged = merge(&[with("a", 0, 100), with("b", 1, 150)]).unwrap();
    let p = merged.result.window.prerequisites.unwrap();
    assert!(p.attained && p.warning.is_none(), "{p:?}");
}
