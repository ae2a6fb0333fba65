//! `report merge` of real mail runs: two load generators, each driving its
//! own slice of the users (`--first-user`) against the local Dovecot+Postfix
//! (one throwaway server each), run at the same time by the real binary; then
//! `report merge` of both. The aggregate must equal the sums and the added
//! histograms of the two results, the response time (over the steady window the
//! runs used) and the verdict must be judged
//! again on the aggregate, and the merged result must render.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mail_support.rs"]
mod support;
use mailbench_mail::judge::{self, Criteria, Figures};
use mailbench_mail::profile::{Profile, ProfileExt, TaskKind};
use mailbench_mail::steady::{self, SteadySection, Window};
use mailbench_metrics::LatencyHist;
use mailbench_results::mail::run::MailInterval;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;

const USERS: u64 = 3;

/// `mailbench report merge FIRST SECOND --output OUT`.
fn report_merge(first: &Path, second: &Path, out: &Path) -> std::process::Output {
    mailbench(
        &[
            "report",
            "merge",
            first.to_str().unwrap(),
            second.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ],
        &[],
    )
}

fn hist(v: &Value) -> LatencyHist {
    LatencyHist::from_base64(v.as_str().unwrap_or("")).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn intervals(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("intervals.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Operations counted over all intervals, by name.
fn interval_counts(lines: &[Value]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for l in lines {
        for (k, v) in l["ops"].as_object().into_iter().flatten() {
            *out.entry(k.clone()).or_default() += u(&v["count"]);
        }
    }
    out
}

/// The merged result's `steady` section: the generators' own window (`a`'s;
/// both ran with the same options), and the figures `mail run` computes for
/// that window from the merged intervals and queue samples.
fn check_steady(m: &Value, a: &Value, dm: &Path, profile: &Profile) -> SteadySection {
    let got: SteadySection = serde_json::from_value(m["steady"].clone()).unwrap();
    assert_eq!(got.spec, "25%-75%");
    assert_eq!(m["steady"]["window"], a["steady"]["window"]);
    let w: Window = serde_json::from_value(a["steady"]["window"].clone()).unwrap();
    let lines: Vec<MailInterval> = (intervals(dm).into_iter())
        .map(|v| serde_json::from_value(v).unwrap())
        .collect();
    let queue: Vec<(f64, f64)> = (m["queue"]["samples"].as_array().unwrap().iter())
        .map(|q| (q["t_s"].as_f64().unwrap(), q["length"].as_f64().unwrap()))
        .collect();
    let want = steady::section(
        "25%-75%",
        &w,
        &lines,
        &queue,
        profile,
        (2 * USERS) as usize,
        std::time::Duration::from_secs(60),
    );
    // Compared as the file holds it (text, read back the same way).
    let want_text: Value = serde_json::from_str(&serde_json::to_string(&want).unwrap()).unwrap();
    assert_eq!(m["steady"], want_text);
    assert!(got.intervals >= 5, "{:#}", m["steady"]);
    assert!(
        got.judged_ms().is_some(),
        "no task in the window: {:#}",
        m["steady"]
    );
    // Fewer tasks inside the window than over the day: the window is judged.
    let day: u64 = (m["tasks"].as_object().unwrap().values())
        .map(|t| u(&t["count"]))
        .sum();
    let window: u64 = TaskKind::ALL
        .iter()
        .filter_map(|k| got.tasks.get(k.name()))
        .map(|t| t.count)
        .sum();
    assert!(window > 0 && window < day, "{window} of {day}");
    got
}

/// The two generators' results and their merge.
struct Runs {
    out: PathBuf,
    da: PathBuf,
    db: PathBuf,
    dm: PathBuf,
    a: Value,
    b: Value,
    m: Value,
}

impl Runs {
    /// The two generators' figures at `p`, added.
    fn sum(&self, p: &str) -> u64 {
        u(self.a.pointer(p).unwrap()) + u(self.b.pointer(p).unwrap())
    }
}

#[test]
fn two_generators_with_disjoint_users_merge_into_one_result() {
    if !servers_available() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let (da, db, a, b) = two_generators(out.path());
    let om = out.path().join("merged");
    let r = report_merge(&da.join("result.json"), &db, &om);
    let dm = run_folder(&om, "report-merge");
    let m = result(&om, "report-merge");
    let status = m["verdict"]["status"].as_str().unwrap().to_string();
    assert_eq!(
        r.status.code(),
        Some(if status == "pass" { 0 } else { 1 }),
        "{}",
        text(&r)
    );
    let runs = Runs {
        out: out.path().to_path_buf(),
        da,
        db,
        dm,
        a,
        b,
        m,
    };
    check_hosts(&runs);
    let merged_score = check_tasks(&runs);
    let expected = check_flow(&runs);
    let within_pct = check_delivery(&runs, expected);
    check_verdict(&runs, &status, merged_score, expected, within_pct);
    check_intervals(&runs);
    check_outputs(&runs, &r);
    refused_merges(&runs);
    print_figures(&runs, merged_score, within_pct, &status);
}

/// Two generators at once, users 1..3 and 4..6, each with its own server: their
/// run folders and results.
fn two_generators(out: &Path) -> (PathBuf, PathBuf, Value, Value) {
    let (oa, ob) = (out.join("gen-a"), out.join("gen-b"));
    let spawn = |first: &str, dir: &Path| {
        Command::new(env!("CARGO_BIN_EXE_mailbench"))
            .args([
                "mail",
                "run",
                "--users",
                &USERS.to_string(),
                "--first-user",
                first,
                "--day-length",
                "20s",
                "--ramp-up",
                "2s",
                "--drain",
                "10s",
                "-q",
                "--output",
                dir.to_str().unwrap(),
            ])
            .env_remove("MAILBENCH_PASSWORD")
            .spawn()
            .expect("start mailbench")
    };
    let (pa, pb) = (spawn("1", &oa), spawn("4", &ob));
    let (ra, rb) = (
        pa.wait_with_output().unwrap(),
        pb.wait_with_output().unwrap(),
    );
    assert!(matches!(ra.status.code(), Some(0 | 1)), "{}", text(&ra));
    assert!(matches!(rb.status.code(), Some(0 | 1)), "{}", text(&rb));
    let (da, db) = (run_folder(&oa, "mail-run"), run_folder(&ob, "mail-run"));
    let (a, b) = (result(&oa, "mail-run"), result(&ob, "mail-run"));
    assert_eq!(a["users"], USERS);
    assert_eq!(
        (
            a["config"]["first_user"].as_u64(),
            b["config"]["first_user"].as_u64()
        ),
        (Some(1), Some(4))
    );
    (da, db, a, b)
}

/// The merged result's header and its per-host table.
fn check_hosts(runs: &Runs) {
    let (m, a, b) = (&runs.m, &runs.a, &runs.b);
    assert_eq!(m["run"]["kind"], "mail-run");
    assert_eq!(m["users"], 2 * USERS);
    assert_eq!(m["config"]["users"], 2 * USERS);
    let hosts = m["merged"]["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 2);
    assert_ne!(hosts[0]["label"], hosts[1]["label"]);
    assert_eq!(
        (u(&hosts[0]["first_user"]), u(&hosts[1]["first_user"])),
        (1, 4)
    );
    assert_eq!(
        hosts[1]["response_time_ms"],
        b["response_time"]["weighted_p95_ms"]
    );
    assert_eq!(hosts[0]["verdict"], a["verdict"]);
}

/// Tasks and operations: counts add up, histograms are the sums, and every
/// percentile is read from the summed histogram; the merged score is the one of
/// the summed histograms. Returns the merged score.
fn check_tasks(runs: &Runs) -> f64 {
    let (m, a, b) = (&runs.m, &runs.a, &runs.b);
    let users = (2 * USERS) as f64;
    let mut p95 = BTreeMap::new();
    for sect in ["tasks", "operations"] {
        for (name, t) in m[sect].as_object().unwrap() {
            let (ta, tb) = (&a[sect][name], &b[sect][name]);
            let mut h = hist(&ta["hist"]);
            h.add(&hist(&tb["hist"]));
            let s = h.summary();
            assert_eq!(u(&t["count"]), u(&ta["count"]) + u(&tb["count"]), "{name}");
            assert_eq!(u(&t["count"]), s.count, "{name}");
            assert_eq!(
                u(&t["errors"]),
                u(&ta["errors"]) + u(&tb["errors"]),
                "{name}"
            );
            assert_eq!(hist(&t["hist"]).summary(), s, "{name}");
            assert_eq!(t["p95_ms"].as_f64().unwrap(), s.p95_us as f64 / 1000.0);
            assert_eq!(t["p99_ms"].as_f64().unwrap(), s.p99_us as f64 / 1000.0);
            assert_eq!(t["max_ms"].as_f64().unwrap(), s.max_us as f64 / 1000.0);
            if sect == "tasks" {
                assert_eq!(
                    u(&t["skipped"]),
                    u(&ta["skipped"]) + u(&tb["skipped"]),
                    "{name}"
                );
                let per = (s.count + u(&t["errors"])) as f64 / users;
                assert!(
                    close(t["per_user_per_day"].as_f64().unwrap(), per),
                    "{name}"
                );
                if s.count > 0 {
                    p95.insert(name.clone(), s.p95_us);
                }
            }
        }
    }
    assert!(p95.len() >= 10, "few tasks ran: {p95:?}");
    let profile = Profile::load("mmb3").unwrap();
    let (score, _) = judge::weighted_p95_ms(&profile, |k: TaskKind| p95.get(k.name()).copied());
    let merged_score = m["response_time"]["weighted_p95_ms"].as_f64().unwrap();
    assert!(close(merged_score, score), "{merged_score} vs {score}");

    merged_score
}

/// Mail flow: sums, and per-user / per-hour figures from the sums. Returns the
/// expected deliveries.
fn check_flow(runs: &Runs) -> u64 {
    let m = &runs.m;
    let users = (2 * USERS) as f64;
    let sum = |p: &str| runs.sum(p);
    let f = &m["mail_flow"];
    let submitted = sum("/mail_flow/submitted");
    let expected = sum("/mail_flow/expected_deliveries");
    let delivered = sum("/mail_flow/delivered");
    assert!(submitted > 0 && delivered > 0, "{f}");
    assert_eq!(u(&f["submitted"]), submitted);
    assert_eq!(u(&f["expected_deliveries"]), expected);
    assert_eq!(u(&f["delivered"]), delivered);
    assert_eq!(
        u(&f["recipients_addressed"]),
        sum("/mail_flow/recipients_addressed")
    );
    assert_eq!(
        u(&f["server_deliveries"]),
        sum("/mail_flow/server_deliveries")
    );
    assert!(close(
        f["per_user_per_day"]["submitted"].as_f64().unwrap(),
        submitted as f64 / users
    ));
    assert!(close(
        f["per_user_per_day"]["delivered"].as_f64().unwrap(),
        delivered as f64 / users
    ));
    assert!(close(
        f["per_hour_real"]["delivered"].as_f64().unwrap(),
        delivered as f64 / (20.0 / 3600.0)
    ));
    assert!(close(
        f["per_simulated_hour"]["submitted"].as_f64().unwrap(),
        submitted as f64 / 8.0
    ));

    expected
}

/// Delivery latency: the summed histogram; in time from the summed counts.
/// Returns the share delivered in time.
fn check_delivery(runs: &Runs, expected: u64) -> f64 {
    let (m, a, b) = (&runs.m, &runs.a, &runs.b);
    let dl = &m["delivery_latency"];
    let mut h = hist(&a["delivery_latency"]["hist"]);
    h.add(&hist(&b["delivery_latency"]["hist"]));
    assert_eq!(hist(&dl["hist"]).summary(), h.summary());
    assert_eq!(u(&dl["summary"]["count"]), h.count());
    let within_of = |r: &Value| {
        (r["delivery_latency"]["within_pct"].as_f64().unwrap()
            * u(&r["mail_flow"]["expected_deliveries"]) as f64
            / 100.0)
            .round() as u64
    };
    let within = within_of(a) + within_of(b);
    assert_eq!(u(&dl["delivered_within"]), within);
    let within_pct = judge::within_pct(within, expected);
    assert!(close(dl["within_pct"].as_f64().unwrap(), within_pct));

    within_pct
}

/// Errors and the verdict, judged again on the aggregate.
fn check_verdict(runs: &Runs, status: &str, merged_score: f64, expected: u64, within_pct: f64) {
    let (m, a, b, dm) = (&runs.m, &runs.a, &runs.b, &runs.dm);
    let sum = |p: &str| runs.sum(p);
    let profile = Profile::load("mmb3").unwrap();
    let total_errors = sum("/errors/total");
    assert_eq!(u(&m["errors"]["total"]), total_errors);
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    for r in [&a, &b] {
        for (k, v) in r["errors"]["by_kind"].as_object().unwrap() {
            *by_kind.entry(k.clone()).or_default() += u(v);
        }
    }
    assert_eq!(
        m["errors"]["by_kind"],
        serde_json::to_value(&by_kind).unwrap()
    );
    let queue_final = u(&a["queue"]["final"]) + u(&b["queue"]["final"]);
    assert_eq!(u(&m["queue"]["final"]), queue_final);
    let planned = sum("/generator/planned_tasks");
    let executed = sum("/generator/executed_tasks");
    assert_eq!(u(&m["generator"]["planned_tasks"]), planned);
    let c = &m["config"];
    let criteria = Criteria {
        max_score_ms: c["max_score_ms"].as_f64().unwrap(),
        max_error_rate_pct: c["max_error_rate_pct"].as_f64().unwrap(),
        delivery_pct: c["delivery_pct"].as_f64().unwrap(),
        delivery_within: std::time::Duration::from_secs(60),
    };
    // The steady window the runs used, measured again over the merged
    // intervals (not the whole day), and judged.
    let steady = check_steady(m, a, dm, &profile);
    let verdict = judge::verdict(
        &Figures {
            response_time_ms: steady.judged_ms().unwrap_or(merged_score),
            total_errors,
            error_rate_pct: m["errors"]["rate_pct"].as_f64().unwrap(),
            errors_by_kind: by_kind,
            expected_deliveries: expected,
            within_pct,
            queue_final: Some(queue_final),
            queue_steady: steady.queue.as_ref().and_then(|q| q.reason()),
            interrupted: false,
            planned_tasks: planned,
            executed_tasks: executed,
        },
        &criteria,
    );
    assert_eq!(m["verdict"], serde_json::to_value(&verdict).unwrap());
    if a["verdict"]["status"] == "pass" && b["verdict"]["status"] == "pass" {
        assert_eq!(status, "pass", "{}", m["verdict"]);
    }
}

/// Intervals aligned by index and added.
fn check_intervals(runs: &Runs) {
    let (da, db, dm) = (&runs.da, &runs.db, &runs.dm);
    let (ia, ib, im) = (intervals(da), intervals(db), intervals(dm));
    // Aligned by time (t_s / interval, rounded): two generators' ticks share a
    // slot unless one ran late by half an interval on a busy machine, so the
    // merged run has at least the longer run's intervals and at most both.
    assert!(
        (ia.len().max(ib.len())..=ia.len() + ib.len()).contains(&im.len()),
        "{} merged intervals from {} and {}",
        im.len(),
        ia.len(),
        ib.len()
    );
    let (ca, cb, cm) = (
        interval_counts(&ia),
        interval_counts(&ib),
        interval_counts(&im),
    );
    for (k, n) in &cm {
        assert_eq!(
            *n,
            ca.get(k).copied().unwrap_or(0) + cb.get(k).copied().unwrap_or(0),
            "{k}"
        );
    }
    assert!(cm.get("read").copied().unwrap_or(0) > 0, "{cm:?}");
}

/// summary.txt and report.html with the per-host table; render again.
fn check_outputs(runs: &Runs, r: &std::process::Output) {
    let dm = &runs.dm;
    let hosts = runs.m["merged"]["hosts"].as_array().unwrap();
    let summary = std::fs::read_to_string(dm.join("summary.txt")).unwrap();
    assert!(summary.contains("Per-Host Results"), "{summary}");
    assert!(
        summary.starts_with("mailbench mail run, merged from 2 load generators — "),
        "{summary}"
    );
    for h in hosts {
        assert!(summary.contains(h["label"].as_str().unwrap()), "{summary}");
    }
    assert!(text(r).contains("Per-Host Results"), "{}", text(r));
    let html = std::fs::read_to_string(dm.join("report.html")).unwrap();
    assert!(html.contains(r#"id="hosts-table""#));
    let r2 = mailbench(&["report", "render", dm.to_str().unwrap()], &[]);
    assert_eq!(r2.status.code(), Some(0), "{}", text(&r2));
    assert_eq!(
        std::fs::read_to_string(dm.join("summary.txt")).unwrap(),
        summary
    );
}

/// Results judged with other thresholds are refused, naming both files; so are
/// a mail and a storage result together.
fn refused_merges(runs: &Runs) {
    let (out, da, b) = (&runs.out, &runs.da, &runs.b);
    let odd = out.join("odd");
    std::fs::create_dir_all(&odd).unwrap();
    let mut v = b.clone();
    v["config"]["max_score_ms"] = serde_json::json!(250.0);
    std::fs::write(odd.join("result.json"), v.to_string()).unwrap();
    // A merge reads every interval: the altered result has whole ones beside it.
    std::fs::copy(da.join("intervals.jsonl"), odd.join("intervals.jsonl")).unwrap();
    let oo = out.join("refused");
    let r3 = report_merge(da, &odd, &oo);
    assert_eq!(r3.status.code(), Some(2), "{}", text(&r3));
    let err = String::from_utf8_lossy(&r3.stderr);
    assert!(
        err.contains("thresholds")
            && err.contains(odd.to_str().unwrap())
            && err.contains(da.to_str().unwrap()),
        "{err}"
    );
    assert!(!oo.exists(), "a refused merge wrote {}", oo.display());
    // So are a mail and a storage result together.
    let os = out.join("storage");
    let r4 = mailbench(
        &[
            "storage",
            "run",
            "--path",
            out.join("data").to_str().unwrap(),
            "--databases",
            "1",
            "--db-size",
            "32MiB",
            "--cache-size",
            "8MiB",
            "--threads",
            "2",
            "--warmup",
            "1s",
            "--sample-interval",
            "1s",
            "--duration",
            "2s",
            "-q",
            "--output",
            os.to_str().unwrap(),
        ],
        &[],
    );
    assert!(matches!(r4.status.code(), Some(0 | 1)), "{}", text(&r4));
    let ds = run_folder(&os, "storage-run");
    let r5 = report_merge(da, &ds, &oo);
    assert_eq!(r5.status.code(), Some(2), "{}", text(&r5));
    let err = String::from_utf8_lossy(&r5.stderr);
    assert!(
        err.contains("a mail-run result, the second a storage-run result")
            && err.contains(ds.to_str().unwrap()),
        "{err}"
    );
    assert!(!oo.exists(), "a refused merge wrote {}", oo.display());
}

/// The generators' and the merge's figures, for the test's output.
fn print_figures(runs: &Runs, merged_score: f64, within_pct: f64, status: &str) {
    let (m, a, b) = (&runs.m, &runs.a, &runs.b);
    let dl = &m["delivery_latency"];
    let submitted = runs.sum("/mail_flow/submitted");
    let expected = runs.sum("/mail_flow/expected_deliveries");
    let delivered = runs.sum("/mail_flow/delivered");
    let total_errors = runs.sum("/errors/total");
    for (name, g) in [("a", a), ("b", b)] {
        eprintln!(
            "generator {name}: {} users, score {:.1} ms, submitted {}, delivered {}/{}, errors {}, {}",
            g["users"],
            g["response_time"]["weighted_p95_ms"].as_f64().unwrap(),
            g["mail_flow"]["submitted"],
            g["mail_flow"]["delivered"],
            g["mail_flow"]["expected_deliveries"],
            g["errors"]["total"],
            g["verdict"]["status"]
        );
    }
    eprintln!(
        "merged: {} users, score {merged_score:.1} ms, submitted {submitted}, delivered {delivered}/{expected}, \
         {:.1} % within 60 s, delivery p95 {} ms, errors {total_errors}, verdict {status} {}",
        m["users"], within_pct, dl["summary"]["p95_ms"], m["verdict"]["reasons"]
    );
}
