//! `storage init|run|verify|backup|recover` over MPI ranks (build with
//! `--features mpi`; needs `mpirun` from openmpi-bin): three ranks on this
//! machine, the aggregate equal to `report merge` of the rank results, a
//! killed rank failing the run by name, and ranks on two network namespaces
//! joined by a veth pair (root and `ip` needed; the test creates and deletes
//! them). `mail run` and `mail sweep` over ranks are in
//! `multihost_mail_mpi.rs`.
#![cfg(feature = "mpi")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod mpi_support;

use mpi_support::{
    exe, hostname, interrupt, mpirun, only_run_dir, pid_wrapper, rank_results, read_json,
    report_merge, run_job, serial, start_instant, start_job, text, wait, write_script,
};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Verdict limits no busy test machine misses: these tests are about the
/// distribution, not this VM's disk (one read over 100 ms fails a short run).
const LENIENT: &str = "[storage.thresholds]\ndb_read_avg_ms = 1000\ndb_read_max_ms = 10000\nlog_write_avg_ms = 1000\nlog_write_max_ms = 10000\n";

/// `LENIENT` written into `dir`, for `--config`.
fn lenient(dir: &Path) -> String {
    let p = dir.join("lenient.toml");
    std::fs::write(&p, LENIENT).unwrap();
    p.display().to_string()
}

const SMALL: &[&str] = &[
    "--quick",
    "--databases",
    "1",
    "--db-size",
    "8MiB",
    "--cache-size",
    "4MiB",
    "--threads",
    "2",
    "--warmup",
    "1s",
    "--duration",
    "3s",
    "--sample-interval",
    "1s",
];

/// `args` with the value of `--duration` replaced.
fn with_duration(args: &[&'static str], d: &'static str) -> Vec<&'static str> {
    let mut v = args.to_vec();
    if let Some(i) = v.iter().position(|a| *a == "--duration") {
        v[i + 1] = d;
    }
    v
}

/// `report merge` of the ranks' results must give the aggregate rank 0 wrote.
fn check_equals_merge(run: &Path, ranks: usize) -> Value {
    let agg = read_json(&run.join("result.json"));
    let m = report_merge(run, ranks);
    for key in [
        "total",
        "instances",
        "verdict",
        "window",
        "init",
        "verify",
        "disks",
    ] {
        assert_eq!(
            agg[key], m[key],
            "aggregate and report merge differ in {key}"
        );
    }
    let hosts = |v: &Value| -> Vec<Value> {
        v["merged"]["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| serde_json::json!([h["label"], h["total"], h["verdict"]]))
            .collect()
    };
    assert_eq!(hosts(&agg), hosts(&m));
    assert_eq!(hosts(&agg).len(), ranks);
    // Exact: histograms added, not percentiles averaged.
    assert_eq!(agg["total"]["histograms"], m["total"]["histograms"]);
    let total = agg["total"]["classes"]["db_read"]["ops"].as_u64().unwrap();
    let sum: u64 = rank_results(run, ranks)
        .iter()
        .map(|v| v["total"]["classes"]["db_read"]["ops"].as_u64().unwrap())
        .sum();
    assert_eq!(total, sum);
    agg
}

fn figures(agg: &Value) -> String {
    let row = |label: &str, v: &Value, status: &Value| {
        let lat = |class: &str, stat: &str| {
            v["total"]["classes"][class]["latency_ms"][stat]
                .as_f64()
                .unwrap()
        };
        format!(
            "  {label:<10} {:<5} IOPS {:>9.1}  db read avg {:.3} ms p99 {:.3}  log write avg {:.3} ms",
            status.as_str().unwrap(),
            v["total"]["transactional_iops"].as_f64().unwrap(),
            lat("db_read", "avg"),
            lat("db_read", "p99"),
            lat("log_write", "avg"),
        )
    };
    let mut lines: Vec<String> = agg["merged"]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| row(h["label"].as_str().unwrap(), h, &h["verdict"]["status"]))
        .collect();
    lines.push(row("aggregate", agg, &agg["verdict"]["status"]));
    lines.join("\n")
}

#[test]
fn three_ranks_init_run_verify_and_the_aggregate_equals_report_merge() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let data = format!("{}/data-{{rank}}", tmp.path().display());
    let out = tmp.path().join("out");
    let job = |sub: &str, extra: &[&str]| {
        let mut c = mpirun(3);
        c.arg(exe())
            .args(["--output"])
            .arg(&out)
            .args(["storage", sub, "--path", &data])
            .args(SMALL)
            .args(extra);
        run_job(c, Duration::from_secs(100))
    };
    // init: every rank creates its own databases, unique per rank.
    let o = job("init", &[]);
    assert!(o.status.success(), "{}", text(&o));
    let init = only_run_dir(&out, "storage-init");
    let v = read_json(&init.join("result.json"));
    assert_eq!(v["hosts"].as_array().unwrap().len(), 3, "{v}");
    for r in 0..3 {
        assert!(tmp.path().join(format!("data-{r}/DB01.mdb")).exists());
    }
    // run (opening the databases init made): one test, one aggregate.
    let o = job("run", &["--open", "--config", &lenient(tmp.path())]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("Per-Host Results"), "{stdout}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("3 ranks] IOPS"),
        "no live aggregate: {stderr}"
    );
    let run = only_run_dir(&out, "storage-run");
    let agg = check_equals_merge(&run, 3);
    assert_eq!(agg["verdict"]["status"], "pass", "{}", agg["verdict"]);
    // The ranks measured the same window: one start time for all.
    let starts: Vec<String> = (0..3)
        .map(|r| start_instant(&run.join(format!("rank-{r}/test.log"))))
        .collect();
    assert!(starts.windows(2).all(|w| w[0] == w[1]), "{starts:?}");
    eprintln!("3 ranks on one host:\n{}", figures(&agg));
    // verify: every rank checks its own databases.
    let o = job("verify", &[]);
    assert!(o.status.success(), "{}", text(&o));
    let v = read_json(&only_run_dir(&out, "storage-verify").join("result.json"));
    assert_eq!(v["verdict"]["status"], "pass");
    assert_eq!(v["hosts"].as_array().unwrap().len(), 3);
    // backup: every rank reads (and copies) its own databases at once.
    let to = format!("{}/backup-{{rank}}", tmp.path().display());
    let o = job("backup", &["--to", &to]);
    assert!(o.status.success(), "{}", text(&o));
    let v = read_json(&only_run_dir(&out, "storage-backup").join("result.json"));
    assert_eq!(v["verdict"]["status"], "pass", "{v}");
    assert_eq!(v["hosts"].as_array().unwrap().len(), 3);
    let per_rank: f64 = v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["result"]["databases"][0]["size_mb"].as_f64().unwrap())
        .sum();
    assert!((v["totals"]["size_mb"].as_f64().unwrap() - per_rank).abs() < 1e-6);
    for r in 0..3 {
        assert!(tmp.path().join(format!("backup-{r}")).is_dir());
    }
    eprintln!("backup over 3 ranks: {}", v["totals"]);
    // recover: every rank generates log files, crashes and replays them.
    let o = job("recover", &["--log-files", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    let v = read_json(&only_run_dir(&out, "storage-recover").join("result.json"));
    assert_eq!(v["verdict"]["status"], "pass", "{v}");
    assert!(
        v["totals"]["log_files_replayed"].as_u64().unwrap() >= 6,
        "{v}"
    );
    eprintln!("recover over 3 ranks: {}", v["totals"]);
}

#[test]
fn ranks_sharing_a_host_need_rank_in_the_path() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut c = mpirun(2);
    c.arg(exe())
        .arg("--output")
        .arg(tmp.path().join("out"))
        .args(["storage", "run", "--path"])
        .arg(tmp.path().join("same"))
        .args(SMALL);
    let o = run_job(c, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let all = text(&o);
    assert!(all.contains("put `{rank}` in"), "{all}");
    assert!(!tmp.path().join("same").exists(), "nothing may be written");
    assert!(
        !tmp.path().join("out").exists(),
        "no run folder may be made"
    );
}

/// Bad input on one rank only (its database folder holds someone else's
/// file) or on all (an unknown profile): every storage command over two
/// ranks exits 2 naming the refusing rank, and writes nothing: no run
/// folder, nothing in the foreign folder, no other rank's databases.
#[test]
fn a_refusal_on_any_rank_exits_2_before_any_folder_is_made() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let data = format!("{}/data-{{rank}}", tmp.path().display());
    std::fs::create_dir(tmp.path().join("data-1")).unwrap();
    std::fs::write(tmp.path().join("data-1/theirs.txt"), "x").unwrap();
    let out = tmp.path().join("out");
    for sub in ["init", "run", "verify", "backup", "recover"] {
        for extra in [&[][..], &["--profile", "exchange1997"][..]] {
            let mut c = mpirun(2);
            c.arg(exe())
                .arg("--output")
                .arg(&out)
                .args(["storage", sub, "--path", &data])
                .args(SMALL)
                .args(extra);
            let o = run_job(c, Duration::from_secs(60));
            let all = text(&o);
            assert_eq!(o.status.code(), Some(2), "{sub} {extra:?}: {all}");
            if extra.is_empty() && sub != "verify" && sub != "backup" {
                assert!(all.contains("rank 1 on host"), "{sub}: {all}");
            }
            assert!(!out.exists(), "{sub} {extra:?} made a run folder: {all}");
            assert!(!tmp.path().join("data-0").exists(), "{sub} {extra:?}");
            let n = std::fs::read_dir(tmp.path().join("data-1"))
                .unwrap()
                .count();
            assert_eq!(n, 1, "{sub} {extra:?} wrote into the foreign folder");
        }
    }
}

#[test]
fn killing_a_rank_fails_the_run_naming_its_host_in_bounded_time() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let wrap = pid_wrapper(tmp.path());
    let out = tmp.path().join("out");
    let mut c = mpirun(3);
    let data = format!("{}/data-{{rank}}", tmp.path().display());
    c.arg(&wrap)
        .arg("--output")
        .arg(&out)
        .args(["storage", "run", "--path", &data])
        .args(with_duration(SMALL, "120s"));
    let mut child = start_job(&mut c);
    // Kill rank 1 once the load runs on it (its intervals file has lines).
    let t = Instant::now();
    let pid = loop {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the load never started"
        );
        std::thread::sleep(Duration::from_millis(100));
        if child.try_wait().unwrap().is_some() {
            panic!(
                "the job ended before the load: {}",
                text(&child.wait_with_output().unwrap())
            );
        }
        let Ok(dir) = std::fs::read_dir(&out) else {
            continue;
        };
        let Some(run) = dir.flatten().next() else {
            continue;
        };
        let iv = run.path().join("rank-1/intervals.jsonl");
        if std::fs::read_to_string(&iv).is_ok_and(|s| s.lines().count() >= 2)
            && let Ok(p) = std::fs::read_to_string(tmp.path().join("pid-1"))
        {
            break p.trim().to_string();
        }
    };
    let killed = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-9", &pid])
            .status()
            .unwrap()
            .success()
    );
    let (o, _) = wait(child, Duration::from_secs(60));
    let took = killed.elapsed();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let run = only_run_dir(&out, "storage-run");
    let v = read_json(&run.join("result.json"));
    assert_eq!(v["verdict"]["status"], "fail", "{v}");
    let first = v["verdict"]["reasons"][0].as_str().unwrap();
    let host = hostname();
    assert!(first.contains(&format!("rank 1 on host {host}")), "{first}");
    eprintln!(
        "killed rank 1 (pid {pid}); the job ended {:.1} s later (exit {:?}): {first}",
        took.as_secs_f64(),
        o.status.code()
    );
}

/// Ctrl-C during `storage init` over two ranks (mpirun passes the stop on
/// to the ranks): as on one host, every rank writes its interrupted init
/// result and rank 0 the aggregate, verdict interrupted; the creation then
/// resumes where it stopped.
#[test]
fn ctrl_c_during_a_multi_host_init_writes_an_interrupted_result() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let data = format!("{}/data-{{rank}}", tmp.path().display());
    let out = tmp.path().join("out");
    let shape = ["--databases", "1", "--db-size", "64MiB"];
    let mut c = mpirun(2);
    c.args(["-x", "MAILBENCH_FAULTS"])
        .env("MAILBENCH_FAULTS", "delay_ms=500,delay_share=1.0")
        .arg(exe())
        .arg("--output")
        .arg(&out)
        .args(["storage", "init", "--path", &data])
        .args(shape);
    let child = start_job(&mut c);
    // Both ranks are creating (their progress files exist), bounded.
    let t = Instant::now();
    let creating = |r: usize| tmp.path().join(format!("data-{r}/DB01.mdb.init")).exists();
    while !(creating(0) && creating(1)) {
        assert!(t.elapsed() < Duration::from_secs(60), "no creation started");
        std::thread::sleep(Duration::from_millis(50));
    }
    interrupt(&child);
    let (o, _) = wait(child, Duration::from_secs(60));
    let run = only_run_dir(&out, "storage-init");
    let v = read_json(&run.join("result.json"));
    assert_eq!(v["verdict"]["status"], "interrupted", "{v}\n{}", text(&o));
    assert_eq!(v["hosts"].as_array().unwrap().len(), 2, "{v}");
    for r in 0..2 {
        let rv = read_json(&run.join(format!("rank-{r}/result.json")));
        assert_eq!(rv["verdict"]["status"], "interrupted", "rank {r}: {rv}");
        assert!(creating(r), "rank {r}: the creation stays resumable");
    }
    let mut c = mpirun(2);
    c.arg(exe())
        .arg("--output")
        .arg(tmp.path().join("out2"))
        .args(["storage", "init", "--path", &data])
        .args(shape);
    let o = run_job(c, Duration::from_secs(100));
    assert!(o.status.success(), "{}", text(&o));
    let v = read_json(&only_run_dir(&tmp.path().join("out2"), "storage-init").join("result.json"));
    for h in v["hosts"].as_array().unwrap() {
        assert_eq!(
            h["result"]["init"]["databases"][0]["action"], "resumed",
            "{h}"
        );
    }
}

/// Two network namespaces joined by a veth pair; deleted on drop.
struct Netns {
    a: String,
    b: String,
}

impl Netns {
    fn create(tag: &str) -> Option<Netns> {
        let ok = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let n = Netns {
            a: format!("mbmh-{tag}-a"),
            b: format!("mbmh-{tag}-b"),
        };
        let va = format!("mbv{tag}a");
        let vb = format!("mbv{tag}b");
        if !ok(&["netns", "add", &n.a]) {
            return None;
        }
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", &n.b],
            vec!["link", "add", &va, "type", "veth", "peer", "name", &vb],
            vec!["link", "set", &va, "netns", &n.a],
            vec!["link", "set", &vb, "netns", &n.b],
            vec!["-n", &n.a, "addr", "add", "10.231.77.1/24", "dev", &va],
            vec!["-n", &n.b, "addr", "add", "10.231.77.2/24", "dev", &vb],
            vec!["-n", &n.a, "link", "set", &va, "up"],
            vec!["-n", &n.b, "link", "set", &vb, "up"],
            vec!["-n", &n.a, "link", "set", "lo", "up"],
            vec!["-n", &n.b, "link", "set", "lo", "up"],
        ];
        for s in steps {
            assert!(ok(&s), "ip {s:?} failed");
        }
        Some(n)
    }

    fn tx_bytes(&self, ns: &str, dev: &str) -> u64 {
        let o = Command::new("ip")
            .args(["-n", ns, "-s", "-j", "link", "show", dev])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        v[0]["stats64"]["tx"]["bytes"].as_u64().unwrap_or(0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Ranks on two "hosts": mpirun and rank 0 in namespace A; the second host
/// is namespace B (own hostname), reached like ssh would through a launch
/// agent; MPI and mailbench's side channel use only the veth addresses.
#[test]
fn ranks_on_two_network_namespaces_over_veth() {
    let _g = serial();
    let tag = format!("{}", std::process::id() % 10000);
    let Some(ns) = Netns::create(&tag) else {
        eprintln!("SKIPPED: cannot create network namespaces (needs root and iproute2)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent.sh");
    write_script(
        &agent,
        &format!(
            "#!/bin/sh\n# plm_rsh_agent: [options] HOST COMMAND -> COMMAND in namespace B\n\
             while [ $# -gt 0 ]; do case \"$1\" in -*) shift;; *) break;; esac; done\n\
             shift\nexec ip netns exec {} unshare --uts sh -c \"hostname {}; $*\"\n",
            ns.b, ns.b
        ),
    );
    let hosts = tmp.path().join("hosts");
    std::fs::write(&hosts, "10.231.77.1 slots=2\n10.231.77.2 slots=2\n").unwrap();
    let vb = format!("mbv{tag}b");
    let tx0 = ns.tx_bytes(&ns.b, &vb);
    let out = tmp.path().join("out");
    let data = format!("{}/data-{{rank}}", tmp.path().display());
    let mut c = Command::new("ip");
    c.args([
        "netns",
        "exec",
        &ns.a,
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
    ])
    .arg("--hostfile")
    .arg(&hosts)
    .arg("--mca")
    .arg("plm_rsh_agent")
    .arg(&agent)
    .args(["--mca", "btl", "tcp,self"])
    .args(["--mca", "btl_tcp_if_include", "10.231.77.0/24"])
    .args(["--mca", "oob_tcp_if_include", "10.231.77.0/24"])
    .args(["--map-by", "node", "-np", "3"])
    .arg(exe())
    .arg("--output")
    .arg(&out)
    .args(["storage", "run", "--path", &data])
    .args(SMALL)
    .args(["--config", &lenient(tmp.path())]);
    let o = run_job(c, Duration::from_secs(100));
    assert!(o.status.success(), "{}", text(&o));
    let run = only_run_dir(&out, "storage-run");
    let agg = check_equals_merge(&run, 3);
    assert_eq!(agg["verdict"]["status"], "pass");
    let labels: Vec<&str> = agg["merged"]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["label"].as_str().unwrap())
        .collect();
    assert!(labels.contains(&ns.b.as_str()), "{labels:?}");
    // Rank 1 sat in namespace B: its result crossed the veth.
    let sent = ns.tx_bytes(&ns.b, &vb) - tx0;
    let rank1 = std::fs::metadata(run.join("rank-1/result.json"))
        .unwrap()
        .len();
    assert!(
        sent > rank1,
        "namespace B sent {sent} bytes, its result is {rank1}"
    );
    let log = std::fs::read_to_string(run.join("test.log")).unwrap();
    assert!(log.contains("10.231.77.1"), "{log}");
    eprintln!(
        "ranks over veth (namespace B sent {sent} bytes):\n{}",
        figures(&agg)
    );
}

/// `storage suite` over three ranks: every stage runs on every rank, each
/// stage folder holds the ranks' results and rank 0's aggregate (per-host
/// tables), and the suite's result counts the hosts.
#[test]
fn a_suite_over_three_ranks_runs_every_stage_on_every_rank() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let data = format!("{}/data-{{rank}}", tmp.path().display());
    let out = tmp.path().join("out");
    let mut c = mpirun(3);
    c.arg(exe())
        .arg("--output")
        .arg(&out)
        .arg("--config")
        .arg(lenient(tmp.path()))
        .args(["storage", "suite", "--path", &data])
        .args(SMALL)
        .args(["--log-files", "2"]);
    let o = run_job(c, Duration::from_secs(400));
    assert!(o.status.success(), "{}", text(&o));
    let run = only_run_dir(&out, "storage-suite");
    let v = read_json(&run.join("result.json"));
    assert_eq!(v["hosts"].as_array().unwrap().len(), 3, "{v}");
    let stages: Vec<&str> = (v["stages"].as_array().unwrap().iter())
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        ["init", "performance", "backup", "recover", "verify"]
    );
    for s in v["stages"].as_array().unwrap() {
        assert_eq!(s["verdict"]["status"], "pass", "{s}");
        assert_eq!(s["figures"]["hosts"], 3, "{s}");
        assert_eq!(s["figures"]["databases"], 3, "{s}");
        let dir = run.join(s["dir"].as_str().unwrap());
        for r in 0..3 {
            assert!(
                dir.join(format!("rank-{r}/result.json")).is_file(),
                "{s} rank {r}"
            );
        }
    }
    // The performance stage's aggregate is the merge, with its per-host table.
    let perf = read_json(&run.join("performance/result.json"));
    assert_eq!(perf["merged"]["hosts"].as_array().unwrap().len(), 3);
    let page = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        page.contains("id=\"appendix-performance-hosts\""),
        "no per-host table"
    );
    let summary = std::fs::read_to_string(run.join("summary.txt")).unwrap();
    assert!(summary.contains("3 hosts"), "{summary}");
}
