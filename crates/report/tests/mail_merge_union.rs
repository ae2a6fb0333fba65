//! `report merge` of k load generators' mail-run results equals the result
//! one generator would have written for the union of their samples: task and
//! operation counts add up, every percentile and the weighted p95 score come
//! from the added histograms (equal to the histogram's own precision, 3
//! significant digits: here exactly, as HDR histograms add bucket by bucket),
//! the mail flow, deliveries in time, errors and the verdict are recomputed
//! from the sums, and intervals add up by index. Merging a merged result
//! again gives the same figures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mailbench_mail::judge::{self, Criteria, Figures};
use mailbench_mail::options::{MailOptions, ResolveExt, Resolved, RunOptions, SetupOptions};
use mailbench_mail::profile::{Profile, ProfileExt, TaskKind};
use mailbench_metrics::LatencyHist;
use mailbench_report::load::MailDoc;
use mailbench_report::mailmerge::{self, summary_ms};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

const OPS: usize = 19; // 17 tasks, logon, new_mail
const KINDS: [&str; 6] = [
    "connect",
    "auth",
    "timeout",
    "reset",
    "malformed",
    "rejected",
];
const WITHIN_US: u64 = 60_000_000;
const INTERVAL_S: f64 = 2.0;

fn op_name(i: usize) -> &'static str {
    match i {
        17 => "logon",
        18 => "new_mail",
        i => TaskKind::ALL[i].name(),
    }
}

/// What one generator observed: the raw samples.
#[derive(Debug, Clone, Default)]
struct Obs {
    users: usize,
    first_user: usize,
    /// (operation, interval index, µs)
    samples: Vec<(usize, i64, u64)>,
    /// (operation, error kind)
    errors: Vec<(usize, usize)>,
    skipped: Vec<usize>,
    /// (interval index, µs)
    deliveries: Vec<(i64, u64)>,
    submitted: u64,
    missing: u64,
    planned: u64,
    executed: u64,
}

impl Obs {
    fn add(&mut self, o: &Obs) {
        self.users += o.users;
        self.samples.extend(o.samples.iter().copied());
        self.errors.extend(o.errors.iter().copied());
        self.skipped.extend(o.skipped.iter().copied());
        self.deliveries.extend(o.deliveries.iter().copied());
        self.submitted += o.submitted;
        self.missing += o.missing;
        self.planned += o.planned;
        self.executed += o.executed;
    }
}

fn profile() -> Profile {
    Profile::load("mmb3").unwrap()
}

fn config(users: usize, first_user: usize) -> Resolved {
    let o = MailOptions {
        setup: SetupOptions {
            users: Some(users.into()),
            first_user: Some(first_user),
            imap: Some("imap://mail.example.org".into()),
            submission: Some("smtp://mail.example.org:587".into()),
            ..Default::default()
        },
        run: RunOptions {
            day_length: Some("10m".parse().unwrap()),
            interval: Some("2s".parse().unwrap()),
            ..Default::default()
        },
    };
    Resolved::resolve(&o, Duration::from_secs(8 * 3600)).unwrap()
}

/// A mail-run result as `mail run` builds it from its counters, with its
/// intervals (one line per interval index that saw anything).
/// What one generator recorded: histograms per operation (all and per interval),
/// deliveries, errors and skips.
struct Recorded {
    hists: Vec<LatencyHist>,
    ivs: BTreeMap<i64, (Vec<LatencyHist>, LatencyHist)>,
    delivery: LatencyHist,
    within: u64,
    errors: [u64; OPS],
    by_kind: BTreeMap<String, u64>,
    op_kinds: Vec<BTreeMap<String, u64>>,
    skipped: [u64; OPS],
}

/// The observations as `mail run` counts them.
fn record(o: &Obs) -> Recorded {
    let mut hists: Vec<LatencyHist> = vec![LatencyHist::new(); OPS];
    let mut ivs: BTreeMap<i64, (Vec<LatencyHist>, LatencyHist)> = BTreeMap::new();
    for (op, iv, us) in &o.samples {
        hists[*op].record_us(*us);
        let e = ivs
            .entry(*iv)
            .or_insert_with(|| (vec![LatencyHist::new(); OPS], LatencyHist::new()));
        e.0[*op].record_us(*us);
    }
    let mut delivery = LatencyHist::new();
    let mut within = 0;
    for (iv, us) in &o.deliveries {
        delivery.record_us(*us);
        within += u64::from(*us <= WITHIN_US);
        ivs.entry(*iv)
            .or_insert_with(|| (vec![LatencyHist::new(); OPS], LatencyHist::new()))
            .1
            .record_us(*us);
    }
    let mut errors = [0u64; OPS];
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    let mut op_kinds: Vec<BTreeMap<String, u64>> = vec![BTreeMap::new(); OPS];
    for (op, k) in &o.errors {
        errors[*op] += 1;
        *by_kind.entry(KINDS[*k].into()).or_default() += 1;
        *op_kinds[*op].entry(KINDS[*k].into()).or_default() += 1;
    }
    if o.missing > 0 {
        by_kind.insert("not_delivered".into(), o.missing);
    }
    let mut skipped = [0u64; OPS];
    for op in &o.skipped {
        skipped[*op] += 1;
    }
    Recorded {
        hists,
        ivs,
        delivery,
        within,
        errors,
        by_kind,
        op_kinds,
        skipped,
    }
}

/// The `tasks` and `operations` sections.
fn task_sections(rec: &Recorded, p: &Profile, users: f64) -> (Value, Value) {
    let Recorded {
        hists,
        errors,
        skipped,
        op_kinds,
        ..
    } = rec;
    let mut tasks = serde_json::Map::new();
    for (i, k) in TaskKind::ALL.iter().enumerate() {
        if hists[i].is_empty() && errors[i] == 0 && skipped[i] == 0 {
            continue;
        }
        let mut v = summary_ms(&hists[i].summary());
        v["errors"] = json!(errors[i]);
        v["skipped"] = json!(skipped[i]);
        v["skip_reasons"] = if skipped[i] > 0 {
            json!({"nothing to do": skipped[i]})
        } else {
            json!({})
        };
        v["errors_by_kind"] = json!(op_kinds[i]);
        v["weight"] = json!(p.weight(*k));
        v["per_user_per_day"] = json!((hists[i].count() + errors[i]) as f64 / users);
        v["hist"] = json!(hists[i].to_base64());
        tasks.insert(k.name().into(), v);
    }
    let mut ops = serde_json::Map::new();
    for i in 17..OPS {
        if hists[i].is_empty() && errors[i] == 0 {
            continue;
        }
        let mut v = summary_ms(&hists[i].summary());
        v["errors"] = json!(errors[i]);
        v["hist"] = json!(hists[i].to_base64());
        ops.insert(op_name(i).into(), v);
    }
    (Value::Object(tasks), Value::Object(ops))
}

/// A mail-run result as `mail run` builds it from its counters, with its
/// intervals (one line per interval index that saw anything).
fn result(o: &Obs, host: &str) -> (Value, Vec<Value>) {
    let p = profile();
    let cfg = config(o.users, o.first_user);
    let rec = record(o);
    let (hists, errors, by_kind) = (&rec.hists, &rec.errors, &rec.by_kind);
    let (ivs, delivery, within) = (&rec.ivs, &rec.delivery, rec.within);
    let users = o.users as f64;
    let (tasks, ops) = task_sections(&rec, &p, users);
    let (score, weights) = judge::weighted_p95_ms(&p, |k| {
        let i = TaskKind::ALL.iter().position(|x| *x == k).unwrap();
        (!hists[i].is_empty()).then(|| hists[i].quantile_us(0.95))
    });
    let delivered = o.deliveries.len() as u64;
    let expected = delivered + o.missing;
    let total_errors = by_kind.values().sum::<u64>();
    let attempts =
        hists.iter().map(|h| h.count()).sum::<u64>() + errors.iter().sum::<u64>() + o.missing;
    let rate = judge::error_rate_pct(total_errors, attempts);
    let within_pct = judge::within_pct(within, expected);
    let verdict = judge::verdict(
        &Figures {
            response_time_ms: score,
            total_errors,
            error_rate_pct: rate,
            errors_by_kind: by_kind.clone(),
            expected_deliveries: expected,
            within_pct,
            queue_final: None,
            queue_steady: None,
            interrupted: false,
            planned_tasks: o.planned,
            executed_tasks: o.executed,
        },
        &Criteria {
            max_score_ms: cfg.max_score_ms,
            max_error_rate_pct: cfg.max_error_rate_pct,
            delivery_pct: cfg.delivery_pct,
            delivery_within: cfg.delivery_within,
        },
    );
    let mut run = mailbench_results::RunHeader::begin("mail-run");
    run.host.hostname = host.into();
    let real_h = 600.0 / 3600.0;
    let sim_h = 8.0;
    let r = json!({
        "run": run,
        "config": cfg,
        "target": {"kind": "remote", "imap": "imap://mail.example.org:143",
                   "submission": "smtp://mail.example.org:587", "sieve": null},
        "profile": p,
        "run_id": format!("id-{host}"),
        "users": o.users,
        "lists": 0,
        "setup": null,
        "window": {"ramp_up_s": 60.0, "day_s": 600.0, "simulated_day_s": 28800.0,
                   "compression": 48.0, "drain_s": 3.0},
        "tasks": tasks,
        "operations": ops,
        "response_time": {"weighted_p95_ms": score, "weights": weights, "limit_ms": cfg.max_score_ms},
        "mail_flow": {
            "submitted": o.submitted,
            "recipients_addressed": expected,
            "expected_deliveries": expected,
            "delivered": delivered,
            "server_deliveries": null,
            "per_user_per_day": {"submitted": o.submitted as f64 / users,
                                 "delivered": delivered as f64 / users},
            "per_hour_real": {"submitted": o.submitted as f64 / real_h,
                              "delivered": delivered as f64 / real_h},
            "per_simulated_hour": {"submitted": o.submitted as f64 / sim_h,
                                   "delivered": delivered as f64 / sim_h},
            "recipients_per_message": if o.submitted > 0 { delivered as f64 / o.submitted as f64 } else { 0.0 },
            "profile_expects": p.expected_flow(o.users),
        },
        "delivery_latency": {
            "summary": summary_ms(&delivery.summary()),
            "within_s": 60.0,
            "within_pct": within_pct,
            "hist": delivery.to_base64(),
        },
        "queue": {"source": "not available for remote targets", "samples": [], "max": null, "final": null},
        "errors": {"total": total_errors, "rate_pct": rate, "by_kind": by_kind, "samples": []},
        "host": {"cpu_busy_pct": 10.0, "cpu_iowait_pct": 1.0, "memory_used_pct_max": 30.0},
        "disk": null,
        "generator": {
            "cpu_s": 1.5, "imap_commands": 100, "smtp_commands": 50, "sieve_commands": 5,
            "sched_delay": summary_ms(&LatencyHist::new().summary()),
            "sched_delay_hist": LatencyHist::new().to_base64(),
            "planned_tasks": o.planned, "executed_tasks": o.executed,
        },
        "warnings": [],
        "verdict": verdict,
    });
    (r, interval_lines(ivs))
}

/// intervals.jsonl: one line per interval index that saw anything.
fn interval_lines(ivs: &BTreeMap<i64, (Vec<LatencyHist>, LatencyHist)>) -> Vec<Value> {
    ivs
        .iter()
        .map(|(iv, (hs, d))| {
            let mut ops = serde_json::Map::new();
            for (i, h) in hs.iter().enumerate() {
                if !h.is_empty() {
                    let s = h.summary();
                    ops.insert(
                        op_name(i).into(),
                        json!({"count": s.count, "errors": 0, "p50_ms": s.p50_us as f64 / 1000.0,
                               "p95_ms": s.p95_us as f64 / 1000.0, "hist": h.to_base64()}),
                    );
                }
            }
            json!({"t_s": *iv as f64 * INTERVAL_S + 0.003, "phase": "day", "interval_s": INTERVAL_S,
                   "ops": ops, "submitted": 0, "delivered": d.count(),
                   "delivery_p95_ms": d.quantile_us(0.95) as f64 / 1000.0,
                   "delivery_hist": d.to_base64(), "sched_delay_p99_ms": 0.0,
                   "sched_delay_hist": "", "queue_length": null,
                   "cpu_busy_pct": 5.0, "cpu_iowait_pct": 0.0, "memory_used_pct": 20.0, "disk": null})
        })
        .collect()
}

/// Through result.json text and back, as `report merge` reads them.
fn doc(r: &Value, intervals: Vec<Value>, i: usize) -> MailDoc {
    let raw: Value = serde_json::from_str(&r.to_string()).unwrap();
    let merged = raw
        .get("merged")
        .map(|m| serde_json::from_value(m.clone()).unwrap());
    MailDoc {
        source: PathBuf::from(format!("gen{i}/result.json")),
        raw,
        merged,
        intervals,
        intervals_problem: None,
        test_log: None,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The figures of `m` (merged) against `u` (one generator, all samples).
fn check(m: &Value, u: &Value) -> Result<(), String> {
    for sect in ["tasks", "operations"] {
        let (mo, uo) = (&m[sect], &u[sect]);
        let names: Vec<&String> = uo.as_object().unwrap().keys().collect();
        let mnames: Vec<&String> = mo.as_object().unwrap().keys().collect();
        if names != mnames {
            return Err(format!("{sect}: {mnames:?} vs {names:?}"));
        }
        for n in names {
            for k in [
                "count",
                "errors",
                "skipped",
                "p50_ms",
                "p95_ms",
                "p99_ms",
                "max_ms",
                "weight",
                "skip_reasons",
                "errors_by_kind",
            ] {
                if mo[n][k] != uo[n][k] {
                    return Err(format!("{sect}.{n}.{k}: {} vs {}", mo[n][k], uo[n][k]));
                }
            }
            for k in ["mean_ms", "per_user_per_day"] {
                let (a, b) = (mo[n][k].as_f64(), uo[n][k].as_f64());
                if a.is_some() != b.is_some() || !close(a.unwrap_or(0.0), b.unwrap_or(0.0)) {
                    return Err(format!("{sect}.{n}.{k}: {a:?} vs {b:?}"));
                }
            }
            let (hm, hu) = (
                LatencyHist::from_base64(mo[n]["hist"].as_str().unwrap()).unwrap(),
                LatencyHist::from_base64(uo[n]["hist"].as_str().unwrap()).unwrap(),
            );
            if hm.summary() != hu.summary() {
                return Err(format!("{sect}.{n}: histograms differ"));
            }
        }
    }
    for path in [
        "/response_time/weighted_p95_ms",
        "/mail_flow/per_user_per_day/submitted",
        "/mail_flow/per_user_per_day/delivered",
        "/mail_flow/per_hour_real/delivered",
        "/mail_flow/per_simulated_hour/submitted",
        "/mail_flow/recipients_per_message",
        "/delivery_latency/within_pct",
        "/delivery_latency/summary/mean_ms",
        "/errors/rate_pct",
    ] {
        let (a, b) = (m.pointer(path), u.pointer(path));
        let (Some(a), Some(b)) = (a.and_then(Value::as_f64), b.and_then(Value::as_f64)) else {
            return Err(format!("{path}: {a:?} vs {b:?}"));
        };
        if !close(a, b) {
            return Err(format!("{path}: {a} vs {b}"));
        }
    }
    for path in [
        "/users",
        "/response_time/weights",
        "/response_time/limit_ms",
        "/mail_flow/submitted",
        "/mail_flow/expected_deliveries",
        "/mail_flow/delivered",
        "/delivery_latency/summary/count",
        "/delivery_latency/summary/p50_ms",
        "/delivery_latency/summary/p95_ms",
        "/delivery_latency/summary/p99_ms",
        "/delivery_latency/summary/max_ms",
        "/errors/total",
        "/errors/by_kind",
        "/generator/planned_tasks",
        "/generator/executed_tasks",
        "/verdict",
    ] {
        if m.pointer(path) != u.pointer(path) {
            return Err(format!(
                "{path}: {:?} vs {:?}",
                m.pointer(path),
                u.pointer(path)
            ));
        }
    }
    Ok(())
}

/// Merged intervals against the union's, index by index.
fn check_intervals(m: &[Value], u: &[Value]) -> Result<(), String> {
    if m.len() != u.len() {
        return Err(format!("{} intervals vs {}", m.len(), u.len()));
    }
    for (a, b) in m.iter().zip(u) {
        let (oa, ob) = (a["ops"].as_object().unwrap(), b["ops"].as_object().unwrap());
        if oa.keys().collect::<Vec<_>>() != ob.keys().collect::<Vec<_>>() {
            return Err(format!("interval at {}: operations differ", b["t_s"]));
        }
        for (k, v) in ob {
            for f in ["count", "p50_ms", "p95_ms"] {
                if oa[k][f] != v[f] {
                    return Err(format!("interval at {} {k}.{f}", b["t_s"]));
                }
            }
        }
        for f in ["delivered", "delivery_p95_ms"] {
            if a[f] != b[f] {
                return Err(format!(
                    "interval at {} {f}: {} vs {}",
                    b["t_s"], a[f], b[f]
                ));
            }
        }
    }
    Ok(())
}

fn obs_strategy() -> impl Strategy<Value = Obs> {
    (
        1usize..20,
        proptest::collection::vec((0usize..OPS, 0i64..6, 1u64..5_000_000), 0..300),
        proptest::collection::vec((0usize..OPS, 0usize..KINDS.len()), 0..3),
        proptest::collection::vec(0usize..17, 0..3),
        proptest::collection::vec((0i64..6, 1u64..90_000_000), 0..80),
        (0u64..200, 0u64..2, 0u64..3),
    )
        .prop_map(
            |(users, samples, errors, skipped, deliveries, (submitted, missing, unrun))| {
                let tasks = samples.iter().filter(|s| s.0 < 17).count() as u64
                    + errors.iter().filter(|e| e.0 < 17).count() as u64
                    + skipped.len() as u64;
                Obs {
                    users,
                    first_user: 0,
                    samples,
                    errors,
                    skipped,
                    deliveries,
                    submitted,
                    missing,
                    planned: tasks + unrun,
                    executed: tasks,
                }
            },
        )
}

fn merged_of(parts: &[Obs]) -> (Obs, Vec<MailDoc>) {
    let mut union = Obs {
        first_user: 1,
        ..Default::default()
    };
    let mut docs = Vec::new();
    let mut next = 1;
    for (i, o) in parts.iter().enumerate() {
        let mut o = o.clone();
        o.first_user = next;
        next += o.users;
        union.add(&o);
        let (r, iv) = result(&o, "gen");
        docs.push(doc(&r, iv, i));
    }
    (union, docs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn mail_merge_equals_the_union_of_samples(
        parts in proptest::collection::vec(obs_strategy(), 2..5),
    ) {
        let (union, docs) = merged_of(&parts);
        let out = mailmerge::merge(&docs).unwrap();
        let (expect, expect_iv) = result(&union, "all");
        if let Err(e) = check(&out.result, &expect) {
            prop_assert!(false, "{}", e);
        }
        if let Err(e) = check_intervals(&out.intervals, &expect_iv) {
            prop_assert!(false, "{}", e);
        }
        // One row per generator; equal hostnames made unique.
        prop_assert_eq!(out.merged.hosts.len(), parts.len());
        prop_assert_eq!(&out.merged.hosts[1].label, "gen#2");
        prop_assert_eq!(out.merged.hosts[1].first_user, 1 + parts[0].users as u64);
        // Merged again with another generator: the same as all at once.
        if parts.len() >= 3 {
            let (head, tail) = docs.split_at(2);
            let m = mailmerge::merge(head).unwrap();
            let mut inputs = vec![doc(&m.result, m.intervals.clone(), 9)];
            inputs.extend(tail.iter().cloned());
            let again = mailmerge::merge(&inputs).unwrap();
            if let Err(e) = check(&again.result, &expect) {
                prop_assert!(false, "merged twice: {}", e);
            }
            if let Err(e) = check_intervals(&again.intervals, &expect_iv) {
                prop_assert!(false, "merged twice: {}", e);
            }
            let labels: Vec<&str> = again.merged.hosts.iter().map(|h| h.label.as_str()).collect();
            prop_assert_eq!(labels.len(), parts.len());
            prop_assert_eq!(labels[2], "gen#3");
        }
    }
}

#[test]
fn different_tests_are_refused_by_name() {
    let o = Obs {
        users: 2,
        first_user: 1,
        ..Default::default()
    };
    let (r, _) = result(&o, "a");
    let a = doc(&r, vec![], 0);
    let mut b = doc(&r, vec![], 1);
    b.raw["config"]["max_score_ms"] = json!(500.0);
    let e = mailmerge::merge(&[a.clone(), b]).err().unwrap();
    assert_eq!(e.exit_status().code(), 2);
    let msg = e.to_string();
    assert!(
        msg.contains("thresholds") && msg.contains("gen1/result.json") && msg.contains("500"),
        "{msg}"
    );
    let mut c = doc(&r, vec![], 2);
    c.raw["config"]["delivery_within"] = json!("2m");
    assert!(
        mailmerge::merge(&[a.clone(), c])
            .err()
            .unwrap()
            .to_string()
            .contains("delivery limit")
    );
    let mut d = doc(&r, vec![], 3);
    d.raw["profile"] = serde_json::to_value(Profile::load("mmb").unwrap()).unwrap();
    let msg = mailmerge::merge(&[a.clone(), d]).err().unwrap().to_string();
    assert!(msg.contains("different profiles (mmb3 vs mmb)"), "{msg}");
    let mut e = doc(&r, vec![], 4);
    e.raw["profile"]["tasks"]["send"]["weight"] = json!(99.0);
    let msg = mailmerge::merge(&[a.clone(), e]).err().unwrap().to_string();
    assert!(msg.contains("different settings"), "{msg}");
    let mut f = doc(&r, vec![], 5);
    f.raw["config"]["day_length"] = json!("20m");
    let msg = mailmerge::merge(&[a.clone(), f]).err().unwrap().to_string();
    assert!(msg.contains("day lengths"), "{msg}");
    assert!(mailmerge::merge(std::slice::from_ref(&a)).is_err());
}

/// An interrupted generator makes the aggregate interrupted, naming it; a
/// queue left on one local server fails the aggregate.
#[test]
fn interrupted_and_queue() {
    let o = Obs {
        users: 2,
        first_user: 1,
        samples: vec![(0, 1, 1000)],
        planned: 3,
        executed: 1,
        ..Default::default()
    };
    let (r, _) = result(&o, "a");
    let a = doc(&r, vec![], 0);
    let mut b = doc(&r, vec![], 1);
    b.raw["run"]["host"]["hostname"] = json!("b");
    b.raw["verdict"] =
        json!({"status": "interrupted", "reasons": ["interrupted before the end of the run"]});
    let m = mailmerge::merge(&[a.clone(), b]).unwrap();
    assert_eq!(m.result["verdict"]["status"], "interrupted");
    assert_eq!(
        m.result["verdict"]["reasons"][0],
        "interrupted before the end of the run (b)"
    );
    // Two local targets (each its own server): queues add up.
    let mut l1 = doc(&r, vec![], 2);
    let mut l2 = doc(&r, vec![], 3);
    for (d, q) in [(&mut l1, 0), (&mut l2, 3)] {
        d.raw["target"]["kind"] = json!("local");
        d.raw["queue"] = json!({"source": "postqueue -j", "samples": [{"t_s": 2.0, "length": 5}, {"t_s": 4.1, "length": q}], "max": 5, "final": q});
        d.raw["generator"]["planned_tasks"] = json!(1);
    }
    let m = mailmerge::merge(&[l1, l2]).unwrap();
    assert_eq!(m.result["queue"]["final"], 3);
    assert_eq!(m.result["queue"]["max"], 10);
    let reasons = m.result["verdict"]["reasons"].to_string();
    assert!(reasons.contains("3 messages still queued"), "{reasons}");
}

/// Two generators of one server driving the same users get a warning.
#[test]
fn overlapping_users_are_warned_about() {
    let mut docs = Vec::new();
    for (i, first) in [1, 3].into_iter().enumerate() {
        let o = Obs {
            users: 4,
            first_user: first,
            ..Default::default()
        };
        let (r, _) = result(&o, "g");
        docs.push(doc(&r, vec![], i));
    }
    let m = mailmerge::merge(&docs).unwrap();
    let w = m.result["warnings"].to_string();
    assert!(
        w.contains("users 3..4 of imap://mail.example.org:143 were driven by both g and g#2"),
        "{w}"
    );
    // Disjoint slices: no warning (but that these results, without a steady
    // window, are judged on the whole day).
    docs[1].raw["config"]["first_user"] = 5.into();
    let m = mailmerge::merge(&docs).unwrap();
    let w = m.result["warnings"].as_array().unwrap();
    assert!(
        (w.iter()).all(|x| x.as_str().unwrap().contains("no steady window")),
        "{w:?}"
    );
}

/// `report compare` of two mail-run results.
fn compare_mail(a: &MailDoc, b: &MailDoc) -> mailbench_report::compare::Comparison {
    let doc = |d: &MailDoc| mailbench_report::Doc::Mail(Box::new(d.clone()));
    mailbench_report::compare::compare(&doc(a), &doc(b), 5.0).unwrap()
}

/// A generator of IMAP users merged with one of JMAP users: the tasks hold
/// both together, and each protocol's figures by task and protocol (the
/// inputs' own); the summary names the protocol per task, `report compare`
/// matches tasks by name and protocol. Two IMAP generators stay one
/// protocol, named once.
#[test]
fn imap_and_jmap_generators_merge_by_task_and_protocol() {
    let read = TaskKind::ALL[0].name();
    let imap = Obs {
        users: 3,
        first_user: 1,
        samples: vec![(0, 0, 1_000), (0, 1, 1_200), (1, 1, 3_000)],
        planned: 3,
        executed: 3,
        ..Default::default()
    };
    let jmap = Obs {
        users: 2,
        first_user: 4,
        samples: vec![(0, 0, 50_000), (0, 2, 60_000)],
        errors: vec![(0, 3)],
        planned: 3,
        executed: 3,
        ..Default::default()
    };
    let (mut ra, iva) = result(&imap, "a");
    ra["protocols"] = json!({"imap": 3});
    let (mut rb, ivb) = result(&jmap, "b");
    rb["protocols"] = json!({"jmap": 2});
    let docs = [doc(&ra, iva.clone(), 0), doc(&rb, ivb, 1)];
    let out = mailmerge::merge(&docs).unwrap();
    let m = &out.result;
    assert_eq!(m["protocols"], json!({"imap": 3, "jmap": 2}));
    assert_eq!(m["tasks"][read]["count"], json!(4));
    let by = &m["tasks"][read]["by_protocol"];
    for f in ["count", "errors", "p50_ms", "p95_ms", "max_ms"] {
        assert_eq!(by["imap"][f], ra["tasks"][read][f], "imap {f}");
        assert_eq!(by["jmap"][f], rb["tasks"][read][f], "jmap {f}");
    }
    // Per user of its own protocol: 2 IMAP reads over 3 users, 2 JMAP reads
    // and an error over 2.
    assert!(close(
        by["imap"]["per_user_per_day"].as_f64().unwrap(),
        2.0 / 3.0
    ));
    assert!(close(by["jmap"]["per_user_per_day"].as_f64().unwrap(), 1.5));
    // Only IMAP users ran the second task.
    let second = TaskKind::ALL[1].name();
    let keys: Vec<&String> = m["tasks"][second]["by_protocol"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["imap"]);

    let md = doc(m, out.intervals.clone(), 7);
    let text = mailmerge::summary_text(&md).unwrap();
    assert!(
        text.contains("Protocol    imap 3 users, jmap 2 users"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("over jmap")),
        "{text}"
    );
    let html = mailbench_report::html::mail::mail_page(&md).unwrap();
    assert!(
        html.contains(&format!("{read} over jmap")),
        "the report's task rows"
    );

    // report compare: a mixed result against itself, task by task and protocol.
    let c = compare_mail;
    let mixed = c(&md, &md);
    let figures: Vec<&str> = mixed.rows.iter().map(|r| r.figure.as_str()).collect();
    assert!(
        figures.contains(&format!("{read} p95 (imap)").as_str()),
        "{figures:?}"
    );
    assert!(
        figures.contains(&format!("{read} p95 (jmap)").as_str()),
        "{figures:?}"
    );
    // One protocol each: task by task across the protocols, said in a note.
    let across = c(&docs[0], &docs[1]);
    let row = across
        .rows
        .iter()
        .find(|r| r.figure == format!("{read} p95"))
        .unwrap();
    assert_eq!(row.base, ra["tasks"][read]["p95_ms"].as_f64().unwrap());
    assert_eq!(row.new, rb["tasks"][read]["p95_ms"].as_f64().unwrap());
    assert!(
        across
            .notes
            .iter()
            .any(|n| n.contains("over imap") && n.contains("over jmap")),
        "{:?}",
        across.notes
    );

    // Two IMAP generators: one protocol, no per-protocol figures.
    let (mut rc, ivc) = result(&imap, "c");
    rc["protocols"] = json!({"imap": 3});
    let both = mailmerge::merge(&[doc(&ra, iva, 0), doc(&rc, ivc, 1)]).unwrap();
    assert_eq!(both.result["protocols"], json!({"imap": 6}));
    assert!(both.result["tasks"][read].get("by_protocol").is_none());
    let text = mailmerge::summary_text(&doc(&both.result, vec![], 8)).unwrap();
    assert!(text.contains("Protocol    imap (every user)"), "{text}");
    assert!(!text.contains("over imap"), "{text}");
}
