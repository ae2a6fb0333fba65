//! `mail run` and `mail sweep` over MPI ranks (build with `--features mpi`;
//! needs `mpirun` from openmpi-bin, and Dovecot + Postfix for the local
//! server): load generators sharing one local server, each driving its own
//! slice of the users from one start instant, the aggregate equal to `report
//! merge` of the generators' results; a bad sweep refused on every rank;
//! Ctrl-C to mpirun mid-sweep leaves the sweep so far on disk.
#![cfg(feature = "mpi")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Both support modules include the shared `common` helpers.
#![allow(clippy::duplicate_mod)]

#[path = "mail_support.rs"]
mod mail_support;
mod mpi_support;

use mailbench_mail::local::LocalServer;
use mpi_support::{
    exe, interrupt, mpirun, only_run_dir, pid_wrapper, rank_results, read_json, report_merge,
    run_job, serial, start_instant, start_job, text, until, wait, write_script,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A local Dovecot + Postfix under `tmp/server`, or None (the test is
/// skipped) when they are not installed; in CI their absence is a failure.
fn local_server(tmp: &Path) -> Option<LocalServer> {
    if !mail_support::servers_available() {
        return None;
    }
    Some(
        LocalServer::start(
            &tmp.join("server"),
            &mailbench_base::rundir::TestLog::discard(),
        )
        .unwrap(),
    )
}

/// The server's IMAP and submission URLs.
fn urls(srv: &LocalServer) -> (String, String) {
    (
        format!("imap://127.0.0.1:{}", srv.ports.imap),
        format!("smtp://127.0.0.1:{}", srv.ports.submission),
    )
}

/// The generators' results add up to the aggregate's mail flow.
fn assert_flow_is_the_sum(agg: &Value, ranks: &[Value]) {
    for key in ["submitted", "delivered", "expected_deliveries"] {
        let sum: u64 = ranks
            .iter()
            .map(|v| v["mail_flow"][key].as_u64().unwrap())
            .sum();
        assert_eq!(agg["mail_flow"][key].as_u64().unwrap(), sum, "{key}");
    }
}

/// Three load generators against one server: disjoint user slices, one
/// start, the aggregate equal to `report merge` of the generators' results.
#[test]
fn three_generators_share_the_users_of_one_mail_server() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let Some(srv) = local_server(tmp.path()) else {
        return;
    };
    let (imap, sub) = urls(&srv);
    let common = [
        "--imap",
        imap.as_str(),
        "--submission",
        sub.as_str(),
        "--users",
        "12",
        "--profile",
        "loadsim-light",
    ];
    set_up_the_users(&srv, tmp.path(), &common);
    let run = run_three_generators(&srv, &tmp.path().join("out"), &common);
    let agg = read_json(&run.join("result.json"));
    assert_eq!(agg["verdict"]["status"], "pass", "{}", agg["verdict"]);
    assert_eq!(agg["users"], 12);
    let slices = check_three_slices(&agg);
    // Each generator's result equals its share; the sums are the aggregate's.
    assert_flow_is_the_sum(&agg, &rank_results(&run, 3));
    assert!(agg["mail_flow"]["delivered"].as_u64().unwrap() > 0);
    // And `report merge` of the three gives the same aggregate.
    let mv = report_merge(&run, 3);
    for key in [
        "tasks",
        "mail_flow",
        "response_time",
        "delivery_latency",
        "verdict",
        "users",
    ] {
        assert_eq!(
            agg[key], mv[key],
            "aggregate and report merge differ in {key}"
        );
    }
    // The generators started together.
    let starts: Vec<String> = (0..3)
        .map(|r| start_instant(&run.join(format!("rank-{r}/test.log"))))
        .collect();
    assert!(starts.windows(2).all(|w| w[0] == w[1]), "{starts:?}");
    eprintln!(
        "3 generators, 12 users: score {:.1} ms, submitted {}, delivered {}/{}, hosts {:?}",
        agg["response_time"]["weighted_p95_ms"].as_f64().unwrap(),
        agg["mail_flow"]["submitted"],
        agg["mail_flow"]["delivered"],
        agg["mail_flow"]["expected_deliveries"],
        slices
    );
}

/// `mail setup` of the users (once, outside MPI).
fn set_up_the_users(srv: &LocalServer, tmp: &Path, common: &[&str]) {
    let o = Command::new(exe())
        .args(["--quiet", "--output"])
        .arg(tmp.join("setup"))
        .args(["mail", "setup"])
        .args(common)
        .env("MAILBENCH_PASSWORD", &srv.password)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

/// `mail run` on three ranks; its run folder (the aggregate's), after the
/// live aggregate was seen on stderr.
fn run_three_generators(srv: &LocalServer, out: &Path, common: &[&str]) -> PathBuf {
    let mut c = mpirun(3);
    c.env("MAILBENCH_PASSWORD", &srv.password)
        .arg(exe())
        .arg("--output")
        .arg(out)
        .args(["mail", "run"])
        .args(common)
        .args([
            "--skip-setup",
            "--day-length",
            "20s",
            "--ramp-up",
            "2s",
            "--drain",
            "20s",
            "--interval",
            "2s",
            // The distribution is under test, not this machine's server.
            "--max-response-time-ms",
            "60000",
        ]);
    let o = run_job(c, Duration::from_secs(180));
    assert!(o.status.success(), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("3 generators, 12 users]"),
        "no live aggregate: {stderr}"
    );
    only_run_dir(out, "mail-run")
}

/// The aggregate's per-host rows: users 1–4, 5–8, 9–12. Returns the slices
/// (first user, users).
fn check_three_slices(agg: &Value) -> Vec<(u64, u64)> {
    let hosts = agg["merged"]["hosts"].as_array().unwrap();
    let slices: Vec<(u64, u64)> = hosts
        .iter()
        .map(|h| {
            (
                h["first_user"].as_u64().unwrap(),
                h["users"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(slices, vec![(1, 4), (5, 4), (9, 4)]);
    slices
}

/// `mail sweep` over two generators against one server: every level runs
/// on both ranks, each its slice of the level's users, both from one start
/// instant per level; the level's merged result is `report merge` of the
/// two, and the sweep's row of each level is the merged result's.
#[test]
fn a_sweep_over_two_generators_runs_every_level_on_both() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let Some(srv) = local_server(tmp.path()) else {
        return;
    };
    let t = Instant::now();
    let sweep = sweep_on_two_ranks(&srv, &tmp.path().join("out"));
    let took = t.elapsed();
    let v = read_json(&sweep.join("result.json"));
    check_the_sweep(&v);
    let summary = check_the_sweep_outputs(&sweep);
    let levels = v["levels"].as_array().unwrap();
    for (level, want) in levels.iter().zip([[(1, 2), (3, 2)], [(1, 4), (5, 4)]]) {
        check_a_level(&sweep, level, &want);
    }
    eprintln!(
        "sweep over 2 generators in {:.0} s:\n{summary}",
        took.as_secs_f64()
    );
}

/// `mail sweep` of 4 and 8 users on two ranks; its run folder.
fn sweep_on_two_ranks(srv: &LocalServer, out: &Path) -> PathBuf {
    let (imap, sub) = urls(srv);
    let mut c = mpirun(2);
    c.env("MAILBENCH_PASSWORD", &srv.password)
        .arg(exe())
        .arg("--output")
        .arg(out)
        .args(["mail", "sweep", "--imap", &imap, "--submission", &sub])
        // Two users per generator at least: a lone user has no one to write to.
        .args(["--users", "4,8", "--profile", "loadsim-light"])
        .args(["--day-length", "10s", "--ramp-up", "1s", "--drain", "15s"])
        .args(["--interval", "1s"])
        // The distribution is under test, not this machine's server.
        .args(["--max-response-time-ms", "60000"]);
    let o = run_job(c, Duration::from_secs(150));
    assert!(o.status.success(), "{}", text(&o));
    only_run_dir(out, "mail-sweep")
}

/// The sweep's result: passed with two generators, levels 4 and 8, 8 users
/// supported.
fn check_the_sweep(v: &Value) {
    assert_eq!(v["run"]["kind"], "mail-sweep", "{v}");
    assert_eq!(v["verdict"]["status"], "pass", "{}", v["verdict"]);
    assert_eq!(v["generators"]["count"], 2, "{}", v["generators"]);
    assert_eq!(v["generators"]["hosts"].as_array().unwrap().len(), 2);
    assert_eq!(v["supported_users"], 8);
    let users: Vec<u64> = v["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["users"].as_u64().unwrap())
        .collect();
    assert_eq!(users, vec![4, 8]);
    // Its disclosure: rank 0 read the server once (no exporter given: unknown,
    // saying so); every level has mailbench's own CPU over both generators.
    let server = &v["disclosure"]["servers"][0];
    assert_eq!(server["source"], "none", "{server}");
    assert!(server["cpus"]["unknown"].is_string(), "{server}");
    for l in v["levels"].as_array().unwrap() {
        let own = l["generator_cpu_pct"].as_f64().unwrap();
        assert!(own > 0.0 && own <= 100.0, "{l}");
    }
}

/// summary.txt and report.html name the generators; each rank provisioned
/// its slice of the largest level. Returns summary.txt.
fn check_the_sweep_outputs(sweep: &Path) -> String {
    let summary = std::fs::read_to_string(sweep.join("summary.txt")).unwrap();
    assert!(
        summary.contains("Generators  2 load generators"),
        "{summary}"
    );
    let html = std::fs::read_to_string(sweep.join("report.html")).unwrap();
    assert!(
        html.contains("2 load generators (MPI ranks)"),
        "report.html"
    );
    assert!(
        html.contains("<td>Load generators (ranks)</td><td>2</td>"),
        "report.html: the client configuration"
    );
    for r in 0..2 {
        assert!(only_run_dir(&sweep.join(format!("rank-{r}")), "mail-setup").is_dir());
    }
    summary
}

/// One level of the sweep: both ranks ran their slice (`want`) from one
/// start instant, the level's merged result is the ranks' sums and `report
/// merge`'s, and the sweep's row is the merged result's figures.
fn check_a_level(sweep: &Path, level: &Value, want: &[(u64, u64)]) {
    let n = level["users"].as_u64().unwrap();
    assert_eq!(level["status"], "pass", "{level}");
    let ldir = sweep.join(level["result_dir"].as_str().unwrap());
    let ranks = rank_results(&ldir, 2);
    let slices: Vec<(u64, u64)> = ranks
        .iter()
        .map(|x| {
            (
                x["config"]["first_user"].as_u64().unwrap(),
                x["users"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(slices, want.to_vec(), "level {n}");
    assert_eq!(slices.iter().map(|s| s.1).sum::<u64>(), n);
    // One start instant per level on both ranks.
    let starts: Vec<String> = (0..2)
        .map(|r| start_instant(&ldir.join(format!("rank-{r}/test.log"))))
        .collect();
    assert_eq!(starts[0], starts[1], "level {n}");
    let merged = read_json(&ldir.join("result.json"));
    check_the_level_sums(&merged, &ranks, level);
    let mv = report_merge(&ldir, 2);
    for key in ["tasks", "mail_flow", "response_time", "steady", "verdict"] {
        assert_eq!(merged[key], mv[key], "level {n}: merge differs in {key}");
    }
    // The sweep's row is the merged result's figures.
    let judged = merged["steady"]["response_time_ms"].as_f64().unwrap();
    assert_eq!(level["response_time_ms"].as_f64().unwrap(), judged);
    assert_eq!(
        level["submitted_per_user_per_day"],
        merged["steady"]["submitted_per_user_per_day"]
    );
}

/// The level's merged result: its users and hosts, and the ranks' sums of
/// mail flow, tasks and errors (the errors as the sweep's row has them).
fn check_the_level_sums(merged: &Value, ranks: &[Value], level: &Value) {
    let n = level["users"].as_u64().unwrap();
    assert_eq!(merged["users"], n);
    assert_eq!(merged["merged"]["hosts"].as_array().unwrap().len(), 2);
    assert_flow_is_the_sum(merged, ranks);
    let tasks = |x: &Value| -> u64 {
        x["tasks"]
            .as_object()
            .unwrap()
            .values()
            .map(|t| t["count"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(tasks(merged), ranks.iter().map(tasks).sum::<u64>());
    assert!(tasks(merged) > 0, "level {n} ran no task");
    let errors: u64 = ranks
        .iter()
        .map(|x| x["errors"]["total"].as_u64().unwrap())
        .sum();
    assert_eq!(level["errors"].as_u64().unwrap(), errors);
}

/// Bad levels or a level too small for the generators: every rank exits
/// 2 and nothing is written (no run folder).
#[test]
fn a_bad_sweep_under_mpirun_exits_2_on_every_rank() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let wrap = tmp.path().join("wrap.sh");
    write_script(
        &wrap,
        &format!(
            "#!/bin/sh\n{} \"$@\"\nc=$?\necho $c > {}/code-$OMPI_COMM_WORLD_RANK\nexit $c\n",
            exe(),
            tmp.path().display()
        ),
    );
    let out = tmp.path().join("out");
    let cases: [(&[&str], &str); 3] = [
        (&["--users", "4,2"], "must increase"),
        (
            &["--users", "1,4"],
            "cannot be split over 2 load generators",
        ),
        (
            &["--users", "2,4", "--local-dir", "/tmp/mb-no-rank"],
            "put `{rank}` in the folder",
        ),
    ];
    for (args, says) in cases {
        for r in 0..2 {
            let _ = std::fs::remove_file(tmp.path().join(format!("code-{r}")));
        }
        let mut c = mpirun(2);
        // Every rank runs to its own end (mpirun would kill the second
        // when the first exits non-zero).
        c.args(["--mca", "orte_abort_on_non_zero_status", "0"])
            .env("MAILBENCH_PASSWORD", "x")
            .arg(&wrap)
            .arg("--output")
            .arg(&out)
            .args(["mail", "sweep"])
            .args(args);
        if !args.contains(&"--local-dir") {
            c.args([
                "--imap",
                "imap://127.0.0.1:1",
                "--submission",
                "smtp://127.0.0.1:1",
            ]);
        }
        let o = run_job(c, Duration::from_secs(60));
        let all = text(&o);
        // mpirun's own status says nothing here (it does not abort on a
        // rank's exit code): each rank's code is checked.
        assert!(all.contains(says), "{args:?}: {all}");
        for r in 0..2 {
            let code = std::fs::read_to_string(tmp.path().join(format!("code-{r}"))).unwrap();
            assert_eq!(code.trim(), "2", "rank {r} of {args:?}: {all}");
        }
        assert!(!out.exists(), "{args:?} made a run folder: {all}");
    }
}

/// Ctrl-C to `mpirun` during the second level of a sweep over two
/// generators, each with its own local server. mpirun does not pass SIGINT
/// on: a second later it sends the ranks SIGTERM and a second after that
/// SIGKILL, before a level with a local server can stop (Dovecot alone
/// takes about a second to stop). The sweep's result is on disk all the
/// same: interrupted, the first level as measured, the second a row of its
/// own, interrupted. mpirun's own exit code is 1 (it decides it, whatever
/// the ranks return); result.json says what happened.
#[test]
fn ctrl_c_to_mpirun_mid_sweep_writes_the_sweep_so_far() {
    let _g = serial();
    if !mail_support::servers_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let child = a_local_sweep_of_4_and_8_users(Path::new(exe()), &out);
    let child = until_the_second_level_measures(child, &out);
    let signalled = Instant::now();
    interrupt(&child);
    let (o, _) = wait(child, Duration::from_secs(60));
    let took = signalled.elapsed();
    let sweep = only_run_dir(&out, "mail-sweep");
    let f = sweep.join("result.json");
    assert!(f.exists(), "no sweep result after Ctrl-C\n{}", text(&o));
    let v = read_json(&f);
    assert_eq!(v["run"]["kind"], "mail-sweep", "{v}");
    assert_eq!(v["verdict"]["status"], "interrupted", "{}", v["verdict"]);
    assert_eq!(v["generators"]["count"], 2, "{}", v["generators"]);
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{v}");
    assert_eq!(levels[0]["users"], 4, "{}", levels[0]);
    assert_eq!(levels[0]["status"], "pass", "{}", levels[0]);
    assert_eq!(levels[1]["users"], 8, "{}", levels[1]);
    assert_eq!(levels[1]["status"], "interrupted", "{}", levels[1]);
    assert_eq!(v["supported_users"], 4);
    assert!(sweep.join("summary.txt").exists() && sweep.join("report.html").exists());
    // mpirun's own code: it ends the job itself and says 1.
    assert!(!o.status.success(), "{}", text(&o));
    eprintln!(
        "Ctrl-C mid-sweep: mpirun ended {:.1} s later with {:?}; level 8: {}",
        took.as_secs_f64(),
        o.status.code(),
        levels[1]["reasons"][0]
    );
}

/// `mail sweep --target local --users 4,8` over two generators (each its
/// own local server), a 20 s day, started through `program`.
fn a_local_sweep_of_4_and_8_users(program: &Path, out: &Path) -> Child {
    let mut c = mpirun(2);
    c.arg(program)
        .arg("--output")
        .arg(out)
        .args(["mail", "sweep", "--target", "local"])
        .args(["--users", "4,8", "--profile", "loadsim-light"])
        .args(["--day-length", "20s", "--ramp-up", "1s", "--drain", "15s"])
        .args(["--interval", "1s", "--max-response-time-ms", "60000"]);
    start_job(&mut c)
}

/// A generator killed (SIGKILL) during the second level of a sweep: the
/// sweep's result is on disk, failed, naming the generator, with the first
/// level as measured and the second as an error; the job ends.
#[test]
fn a_generator_killed_mid_sweep_fails_the_sweep_keeping_the_levels_measured() {
    let _g = serial();
    if !mail_support::servers_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let wrap = pid_wrapper(tmp.path());
    let out = tmp.path().join("out");
    let child = a_local_sweep_of_4_and_8_users(&wrap, &out);
    let child = until_the_second_level_measures(child, &out);
    let pid = std::fs::read_to_string(tmp.path().join("pid-1")).unwrap();
    let kill = Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(kill.success());
    let (o, _) = wait(child, Duration::from_secs(60));
    assert!(!o.status.success(), "{}", text(&o));
    let sweep = only_run_dir(&out, "mail-sweep");
    let v = read_json(&sweep.join("result.json"));
    assert_eq!(v["run"]["kind"], "mail-sweep", "{v}");
    assert_eq!(v["verdict"]["status"], "fail", "{}", v["verdict"]);
    let failures = v["generators"]["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{}", v["generators"]);
    assert_eq!(failures[0]["rank"], 1);
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{v}");
    assert_eq!(levels[0]["status"], "pass", "{}", levels[0]);
    assert_eq!(levels[1]["users"], 8, "{}", levels[1]);
    assert_eq!(levels[1]["status"], "error", "{}", levels[1]);
    assert!(
        levels[1]["reasons"][0]
            .as_str()
            .unwrap()
            .contains("rank 1 on host"),
        "{}",
        levels[1]
    );
    assert_eq!(v["supported_users"], 4);
}

/// The first entry of the folder `out` (the job's run folder), if any yet.
fn first_entry(out: &Path) -> Option<PathBuf> {
    let entry = std::fs::read_dir(out).ok()?.next()?.ok()?;
    Some(entry.path())
}

/// Returns once the first level's merged result is written and rank 0 has
/// measured an interval of the second level (bounded; the job is killed
/// on the way out when it never gets there).
fn until_the_second_level_measures(child: Child, out: &Path) -> Child {
    let ready = || {
        let Some(sweep) = first_entry(out) else {
            return false;
        };
        let first = sweep.join("level-000004-users/result.json").exists();
        let f = sweep.join("level-000008-users/rank-0/intervals.jsonl");
        first && std::fs::metadata(f).is_ok_and(|m| m.len() > 0)
    };
    until(child, "the second level's first interval", ready)
}

/// Ctrl-C to `mpirun` during a `mail run` over two generators, each with
/// its own local server, with mpirun's default second between its SIGTERM
/// and its SIGKILL: every generator's result and rank 0's merge are on
/// disk, interrupted (each generator writes and the results are gathered
/// before its local server stops).
#[test]
fn ctrl_c_to_mpirun_mid_mail_run_writes_the_results_interrupted() {
    let _g = serial();
    if !mail_support::servers_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut c = mpirun(2);
    c.arg(exe())
        .arg("--output")
        .arg(&out)
        .args(["mail", "run", "--target", "local"])
        .args(["--users", "4", "--profile", "loadsim-light"])
        .args(["--day-length", "60s", "--ramp-up", "1s", "--drain", "15s"])
        .args(["--interval", "1s", "--max-response-time-ms", "60000"]);
    let child = start_job(&mut c);
    let child = until_rank_0_measures(child, &out);
    let signalled = Instant::now();
    interrupt(&child);
    let (o, _) = wait(child, Duration::from_secs(60));
    let took = signalled.elapsed();
    let run = only_run_dir(&out, "mail-run");
    all_interrupted(&run, &o);
    let merged = read_json(&run.join("result.json"));
    assert_eq!(merged["users"], 4, "{merged}");
    assert_eq!(merged["merged"]["hosts"].as_array().unwrap().len(), 2);
    assert!(!o.status.success(), "{}", text(&o));
    eprintln!(
        "Ctrl-C mid-run: mpirun ended {:.1} s later with {:?}",
        took.as_secs_f64(),
        o.status.code()
    );
}

/// Both generators' mail-run results and rank 0's merge in `run`, each
/// interrupted.
fn all_interrupted(run: &Path, o: &std::process::Output) {
    for f in [
        run.join("rank-0/result.json"),
        run.join("rank-1/result.json"),
        run.join("result.json"),
    ] {
        assert!(f.exists(), "no {} after Ctrl-C\n{}", f.display(), text(o));
        let v = read_json(&f);
        assert_eq!(v["run"]["kind"], "mail-run", "{}: {v}", f.display());
        let status = &v["verdict"]["status"];
        assert_eq!(status, "interrupted", "{}: {}", f.display(), v["verdict"]);
    }
}

/// Returns once rank 0 of a `mail run` has measured an interval (bounded;
/// the job is killed on the way out when it never gets there).
fn until_rank_0_measures(child: Child, out: &Path) -> Child {
    let ready = || {
        let Some(run) = first_entry(out) else {
            return false;
        };
        let f = run.join("rank-0/intervals.jsonl");
        std::fs::metadata(f).is_ok_and(|m| m.len() > 0)
    };
    until(child, "rank 0's first interval", ready)
}

/// Ctrl-C to `mpirun` while every user waits on an IMAP answer that does
/// not come (a proxy holds each connection once the server sent 2000
/// bytes; `--op-timeout 60s`): the users are aborted half a second after
/// the SIGTERM, so the generators' results and the merge are written
/// before mpirun's SIGKILL all the same, interrupted.
#[test]
fn ctrl_c_to_mpirun_with_users_stuck_in_an_operation_writes_the_results() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let Some(srv) = local_server(tmp.path()) else {
        return;
    };
    let (imap, sub) = urls(&srv);
    let common = ["--imap", &imap, "--submission", &sub, "--users", "4"];
    set_up_the_users(
        &srv,
        tmp.path(),
        &[&common[..], &["--profile", "loadsim-light"]].concat(),
    );
    let p = mail_support::Proxy::start(srv.ports.imap, mail_support::Fault::Stall, 1, 2000);
    let proxied = format!("imap://127.0.0.1:{}", p.port);
    let out = tmp.path().join("out");
    let mut c = mpirun(2);
    c.env("MAILBENCH_PASSWORD", &srv.password)
        .arg(exe())
        .arg("--output")
        .arg(&out)
        .args(["mail", "run", "--imap", &proxied, "--submission", &sub])
        .args(["--users", "4", "--profile", "loadsim-light", "--skip-setup"])
        .args(["--day-length", "60s", "--ramp-up", "1s", "--drain", "15s"])
        .args(["--interval", "1s", "--op-timeout", "60s"])
        .args(["--max-response-time-ms", "60000"]);
    let child = start_job(&mut c);
    let held = || p.faults.load(std::sync::atomic::Ordering::Relaxed) >= 4;
    let child = until(child, "every user held by the proxy", held);
    let child = until_rank_0_measures(child, &out);
    interrupt(&child);
    let (o, _) = wait(child, Duration::from_secs(60));
    all_interrupted(&only_run_dir(&out, "mail-run"), &o);
    drop(p);
}
