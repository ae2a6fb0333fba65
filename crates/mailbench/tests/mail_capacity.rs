//! A server of known capacity: the local Dovecot+Postfix behind a throttling
//! proxy of our own that carries LIMIT IMAP sessions at full speed and holds
//! every response back while more are open. A run at LIMIT users passes; a run
//! above it fails on the response time (and on nothing the proxy does not
//! cause), so a capacity search over this server must land on LIMIT.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mail_support.rs"]
mod support;
use mailbench_base::rundir::TestLog;
use mailbench_mail::local::LocalServer;
use std::time::Duration;
use support::*;

const LIMIT: usize = 6;

fn run_through(
    proxy: u16,
    sub: u16,
    users: usize,
    out: &std::path::Path,
    pw: &str,
) -> serde_json::Value {
    let imap = format!("imap://127.0.0.1:{proxy}");
    let sub = format!("smtp://127.0.0.1:{sub}");
    let users = users.to_string();
    let target = ["mail", "run", "--imap", &imap, "--submission", &sub];
    let args = [
        &target[..],
        &["--users", &users],
        &short_day("3s"),
        &["--output", out.to_str().unwrap()],
    ]
    .concat();
    let o = mailbench(&args, &[("MAILBENCH_PASSWORD", pw)]);
    assert!(matches!(o.status.code(), Some(0) | Some(1)), "{}", text(&o));
    result(out, "mail-run")
}

/// The day of every run through the throttling proxy: loadsim-light in 20 s
/// with a ramp-up of `ramp_up`, a 20 s drain, 1 s intervals, the users set up
/// before, quiet.
fn short_day(ramp_up: &str) -> [&str; 14] {
    [
        "--profile",
        "loadsim-light",
        "--day-length",
        "20s",
        "--ramp-up",
        ramp_up,
        "--drain",
        "20s",
        "--interval",
        "1s",
        "--skip-setup",
        // The local Dovecot's rare CREATE refusal under load is not under test.
        "--max-error-rate",
        "2%",
        "-q",
    ]
}

/// `mail setup` of `users` users (loadsim-light) straight to the server.
fn provision(srv: &LocalServer, users: usize, pw: &str) {
    let setup_out = tempfile::tempdir().unwrap();
    let imap = format!("imap://127.0.0.1:{}", srv.ports.imap);
    let sub = format!("smtp://127.0.0.1:{}", srv.ports.submission);
    let n = users.to_string();
    let o = mailbench(
        &[
            "mail",
            "setup",
            "--imap",
            &imap,
            "--submission",
            &sub,
            "--users",
            &n,
            "--profile",
            "loadsim-light",
            "-q",
            "--output",
            setup_out.path().to_str().unwrap(),
        ],
        &[("MAILBENCH_PASSWORD", pw)],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn the_throttled_server_carries_its_limit_and_not_more() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let srv = LocalServer::start(dir.path(), &TestLog::discard()).unwrap();
    let pw = srv.password.clone();
    let over = LIMIT + 3;
    // Provision the largest count once, straight to the server.
    provision(&srv, over, &pw);

    let proxy = ThrottleProxy::start(srv.ports.imap, LIMIT, Duration::from_millis(1500));
    let at = tempfile::tempdir().unwrap();
    let r = run_through(proxy.port, srv.ports.submission, LIMIT, at.path(), &pw);
    assert_eq!(r["verdict"]["status"], "pass", "{:#}", r["verdict"]);
    assert!(proxy.peak.load(std::sync::atomic::Ordering::SeqCst) <= LIMIT);

    let above = tempfile::tempdir().unwrap();
    let r = run_through(proxy.port, srv.ports.submission, over, above.path(), &pw);
    assert_eq!(r["verdict"]["status"], "fail");
    let reasons = r["verdict"]["reasons"].to_string();
    assert!(reasons.contains("response time"), "{reasons}");
    // Judged over the steady window (the middle half of the day).
    assert!(r["steady"]["response_time_ms"].as_f64().unwrap() > 1000.0);
    assert!(r["steady"]["intervals"].as_u64().unwrap() >= 5);
    assert!(proxy.delayed.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

/// `mail sweep --find-max` over the same server: it grows 2, 4, 8 (fails),
/// bisects to 6 and stops within its resolution of 2 users; the supported
/// users are the proxy's limit and the level above failed on the response
/// time. Each level's own mail-run result is in its folder.
#[test]
fn find_max_lands_on_the_known_capacity() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let srv = LocalServer::start(dir.path(), &TestLog::discard()).unwrap();
    let pw = srv.password.clone();
    provision(&srv, 9, &pw);
    let proxy = ThrottleProxy::start(srv.ports.imap, LIMIT, Duration::from_millis(1500));
    let through = format!("imap://127.0.0.1:{}", proxy.port);
    let sub = format!("smtp://127.0.0.1:{}", srv.ports.submission);
    let out = tempfile::tempdir().unwrap();
    let target = ["mail", "sweep", "--imap", &through, "--submission", &sub];
    let find_max = ["--users", "2..9", "--find-max", "--resolution", "2"];
    let o = mailbench_within(
        &[
            &target[..],
            &find_max,
            &short_day("2s"),
            &["--output", out.path().to_str().unwrap()],
        ]
        .concat(),
        &[("MAILBENCH_PASSWORD", &pw)],
        Duration::from_secs(170),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = result(out.path(), "mail-sweep");
    assert_eq!(r["run"]["kind"], "mail-sweep");
    let users: Vec<u64> = (r["levels"].as_array().unwrap().iter())
        .map(|l| l["users"].as_u64().unwrap())
        .collect();
    assert_eq!(users, vec![2, 4, 8, 6], "{:#}", r["levels"]);
    let supported = r["supported_users"].as_u64().unwrap();
    assert!(
        supported <= LIMIT as u64 && LIMIT as u64 - supported < 2,
        "supported {supported}, capacity {LIMIT}"
    );
    assert_eq!(r["failed_above"]["users"], 8, "{:#}", r["failed_above"]);
    assert_eq!(r["failed_above"]["criterion"], "response_time");
    levels_are_mail_runs(out.path(), &r);
}

/// Each level passes exactly when it is within the capacity and is an ordinary mail
/// run with its own result; summary.txt names the supported users and the failure
/// above them.
fn levels_are_mail_runs(out: &std::path::Path, r: &serde_json::Value) {
    for l in r["levels"].as_array().unwrap() {
        let u = l["users"].as_u64().unwrap();
        assert_eq!(l["status"] == "pass", u <= LIMIT as u64, "{l:#}");
        // rate-equivalent users: users x (8 h / 20 s)
        let eq = l["rate_equivalent_users"].as_f64().unwrap();
        assert!((eq - u as f64 * 1440.0).abs() < 1.0, "{l:#}");
        // Each level is an ordinary mail run with its own result.
        let lv = read_json(
            &only_entry(out)
                .join(l["result_dir"].as_str().unwrap())
                .join("result.json"),
        );
        assert_eq!(lv["run"]["kind"], "mail-run");
        assert_eq!(lv["users"].as_u64(), Some(u));
        assert_eq!(lv["verdict"]["status"], l["status"]);
    }
    let summary = std::fs::read_to_string(only_entry(out).join("summary.txt")).unwrap();
    assert!(summary.contains("Supported users   6"), "{summary}");
    assert!(summary.contains("FAIL response_time"), "{summary}");
}

/// The default results folder is relative (`./mailbench-results`), and so is
/// the local target's folder inside a sweep's: the servers must still start
/// (Postfix refuses a relative configuration folder).
#[test]
fn a_sweep_into_a_relative_results_folder_starts_the_local_target() {
    if !servers_available() {
        return;
    }
    let cwd = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_mailbench"))
        .current_dir(cwd.path())
        .env_remove("MAILBENCH_PASSWORD")
        .args([
            "mail",
            "sweep",
            "--users",
            "2",
            "--day-length",
            "6s",
            "--ramp-up",
            "1s",
            "--drain",
            "5s",
            "--interval",
            "1s",
            "-q",
            "--output",
            "out",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = result(&cwd.path().join("out"), "mail-sweep");
    assert_eq!(v["levels"][0]["users"], 2, "{v}");
}

/// The run folder `kind-*` under `out`, once it exists.
fn run_dir(out: &std::path::Path, kind: &str) -> Option<std::path::PathBuf> {
    (std::fs::read_dir(out).ok()?)
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(kind))
        })
}

/// True once the level's intervals.jsonl has an interval of its day.
fn level_in_its_day(sweep: &std::path::Path, users: u64) -> bool {
    let file = sweep
        .join(format!("level-{users:06}-users"))
        .join("intervals.jsonl");
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|v| v["phase"] == "day")
}

/// The server dies during the second level of a sweep (2, 3, 4 users): the
/// first level keeps its figures, the second fails on what its users met,
/// the third cannot run and fails with the reason, the sweep stops there,
/// writes its result and exits 1.
#[test]
fn a_server_that_dies_mid_sweep_fails_that_level_and_keeps_the_others() {
    use std::process::{Command, Stdio};
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut srv = LocalServer::start(dir.path(), &TestLog::discard()).unwrap();
    let pw = srv.password.clone();
    provision(&srv, 4, &pw);
    let imap = format!("imap://127.0.0.1:{}", srv.ports.imap);
    let sub = format!("smtp://127.0.0.1:{}", srv.ports.submission);
    let out = tempfile::tempdir().unwrap();
    let log = std::fs::File::create(dir.path().join("sweep.out")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mailbench"))
        .args([
            "mail",
            "sweep",
            "--imap",
            &imap,
            "--submission",
            &sub,
            "--users",
            "2,3,4",
            "--profile",
            "loadsim-light",
            "--day-length",
            "8s",
            "--ramp-up",
            "1s",
            "--drain",
            "5s",
            "--interval",
            "1s",
            "--op-timeout",
            "5s",
            "--skip-setup",
            "-q",
            "--output",
            out.path().to_str().unwrap(),
        ])
        .env("MAILBENCH_PASSWORD", &pw)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let (status, killed) =
        stop_the_server_in_the_second_level(&mut child, &mut srv, out.path(), dir.path());
    let printed = std::fs::read_to_string(dir.path().join("sweep.out")).unwrap_or_default();
    assert!(killed, "the second level never reached its day: {printed}");
    assert_eq!(status.code(), Some(1), "{printed}");

    levels_before_and_after_the_death(out.path(), srv.ports.imap);
}

/// Stops the server once the second level is in its day (bounded wait); the
/// sweep's exit status and whether the server was stopped.
fn stop_the_server_in_the_second_level(
    child: &mut std::process::Child,
    srv: &mut LocalServer,
    out: &std::path::Path,
    dir: &std::path::Path,
) -> (std::process::ExitStatus, bool) {
    use std::time::Instant;
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut killed = false;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if !killed && run_dir(out, "mail-sweep").is_some_and(|d| level_in_its_day(&d, 3)) {
            srv.stop();
            killed = true;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the sweep did not end within 150 s (server stopped: {killed}): {}",
                std::fs::read_to_string(dir.join("sweep.out")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, killed)
}

/// The sweep's levels: the one before the server died keeps its figures, the one
/// it died in failed on what its users met, the next could not run (it names
/// the server's IMAP port), and the sweep stopped with its usual files.
fn levels_before_and_after_the_death(out: &std::path::Path, imap_port: u16) {
    let sweep = run_dir(out, "mail-sweep").unwrap();
    let r = result(out, "mail-sweep");
    let levels = r["levels"].as_array().unwrap();
    let users: Vec<u64> = levels
        .iter()
        .map(|l| l["users"].as_u64().unwrap())
        .collect();
    assert_eq!(users, vec![2, 3, 4], "{:#}", r["levels"]);
    // Measured before the server died: its figures are kept.
    assert!(matches!(
        levels[0]["status"].as_str(),
        Some("pass" | "fail")
    ));
    assert!(levels[0]["response_time_ms"].as_f64().unwrap() > 0.0);
    // The level it died in ran, and failed on what its users met.
    assert_eq!(levels[1]["status"], "fail", "{:#}", levels[1]);
    assert!(!levels[1]["reasons"].as_array().unwrap().is_empty());
    let l3 = read_json(&sweep.join("level-000003-users/result.json"));
    assert!(
        l3["errors"]["total"].as_u64().unwrap() > 0,
        "{:#}",
        l3["errors"]
    );
    // The next could not run: it fails with the reason, and the sweep stops.
    assert_eq!(levels[2]["status"], "error", "{:#}", levels[2]);
    assert_eq!(levels[2]["failed_criterion"], "error");
    let why = levels[2]["reasons"][0].as_str().unwrap();
    assert!(why.contains("4 users could not run"), "{why}");
    assert!(why.contains(&imap_port.to_string()), "{why}");
    assert_eq!(r["verdict"]["status"], "fail");
    let reasons = r["verdict"]["reasons"].to_string();
    assert!(reasons.contains("could not run"), "{reasons}");
    assert!(
        reasons.contains("the sweep reports the levels measured before it"),
        "{reasons}"
    );
    // The usual files are written.
    let summary = std::fs::read_to_string(sweep.join("summary.txt")).unwrap();
    assert!(summary.contains("FAIL error"), "{summary}");
    assert!(summary.contains("could not run"), "{summary}");
    assert!(sweep.join("report.html").is_file());
}

/// `prometheus-node-exporter` on a loopback port of its own, stopped (by its
/// handle) when dropped.
struct NodeExporter {
    child: std::process::Child,
    url: String,
}

impl NodeExporter {
    /// None (skipped) when the package is missing outside CI.
    fn start() -> Option<NodeExporter> {
        use std::io::{Read, Write};
        use std::process::{Command, Stdio};
        let bin = "/usr/bin/prometheus-node-exporter";
        if !std::path::Path::new(bin).exists() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must install prometheus-node-exporter (scripts/packages/mail.txt)"
            );
            eprintln!("SKIPPED: prometheus-node-exporter is not installed");
            return None;
        }
        let port = free_port();
        let child = Command::new(bin)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let ne = NodeExporter {
            child,
            url: format!("http://127.0.0.1:{port}/metrics"),
        };
        // Bounded wait until it serves its CPU counters.
        for _ in 0..100 {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
                let mut body = String::new();
                if s.write_all(req.as_bytes()).is_ok()
                    && s.read_to_string(&mut body).is_ok()
                    && body.contains("node_cpu_seconds_total")
                {
                    return Some(ne);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the node exporter did not answer on {}", ne.url);
    }
}

impl Drop for NodeExporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A sweep of a server addressed by its URLs (no local /proc sampling), with
/// the server host read from a node exporter started here: every level's row
/// carries the server CPU and the store's disk rates, and each level's own
/// result names the exporter as their source.
#[test]
fn a_sweep_reads_the_server_host_from_a_node_exporter() {
    if !servers_available() {
        return;
    }
    let Some(ne) = NodeExporter::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let srv = LocalServer::start(dir.path(), &TestLog::discard()).unwrap();
    let pw = srv.password.clone();
    provision(&srv, 4, &pw);
    let imap = format!("imap://127.0.0.1:{}", srv.ports.imap);
    let sub = format!("smtp://127.0.0.1:{}", srv.ports.submission);
    let out = tempfile::tempdir().unwrap();
    let o = mailbench_within(
        &[
            "mail",
            "sweep",
            "--imap",
            &imap,
            "--submission",
            &sub,
            "--users",
            "2,4",
            "--profile",
            "loadsim-light",
            "--day-length",
            "12s",
            "--ramp-up",
            "1s",
            "--drain",
            "10s",
            "--interval",
            "1s",
            "--skip-setup",
            "--max-error-rate",
            "2%",
            "--server-metrics",
            &ne.url,
            "-q",
            "--output",
            out.path().to_str().unwrap(),
        ],
        &[("MAILBENCH_PASSWORD", &pw)],
        Duration::from_secs(170),
    );
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    let r = result(out.path(), "mail-sweep");
    let sweep = run_dir(out.path(), "mail-sweep").unwrap();
    let levels = r["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{:#}", r["levels"]);
    for l in levels {
        let cpu = l["server_cpu_busy_pct"].as_f64();
        assert!(cpu.is_some_and(|c| (0.0..=100.0).contains(&c)), "{l:#}");
        for k in [
            "store_reads_per_s",
            "store_writes_per_s",
            "iops_per_mailbox",
        ] {
            assert!(l[k].as_f64().is_some_and(|x| x >= 0.0), "{k}: {l:#}");
        }
        let lr: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                sweep
                    .join(l["result_dir"].as_str().unwrap())
                    .join("result.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let sources = lr["server"]["sources"].as_array().unwrap();
        assert_eq!(sources.len(), 1, "{:#}", lr["server"]);
        let s = &sources[0];
        assert_eq!(s["source"], ne.url.as_str());
        assert!(s["kinds"].to_string().contains("node-exporter"), "{s:#}");
        assert!(s["scrapes"].as_u64().unwrap() >= 5, "{s:#}");
        let host = &s["figures"]["host"];
        assert_eq!(host["cpu_busy_pct"].as_f64(), cpu, "{s:#}");
        assert!(
            host["store"]["devices"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
        );
    }
    let summary = std::fs::read_to_string(sweep.join("summary.txt")).unwrap();
    assert!(summary.contains("Srv CPU"), "{summary}");
}

/// `{v:.1}` as the report writes figures under 1,000.
fn one(v: &serde_json::Value) -> String {
    let x = v.as_f64().unwrap();
    assert!(x < 1000.0, "{x}");
    format!("{x:.1}")
}

/// The row `label` of the key/value table `id` in a dumped DOM.
fn kv_value<'a>(dom: &'a str, id: &str, label: &str) -> &'a str {
    let table = &dom[dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no {id}"))..];
    let key = format!("<td>{label}</td><td>");
    let at = table
        .find(&key)
        .unwrap_or_else(|| panic!("{id} has no row {label}"))
        + key.len();
    &table[at..at + table[at..].find("</td>").unwrap()]
}

/// A test-only copy of the sweep page with a script that measures the scaling
/// table's box and the charts.
const SWEEP_PROBE: &str = r#"<script>
(function(){
  var t = document.getElementById('sweep-table');
  var wrap = t.parentElement;
  var charts = [];
  document.querySelectorAll('svg.chart').forEach(function(s){
    var r = s.getBoundingClientRect(); charts.push({id: s.id, w: r.width, h: r.height, top: r.top});
  });
  var main = document.querySelector('main').getBoundingClientRect();
  document.body.setAttribute('data-probe', JSON.stringify({
    scroll: wrap.scrollWidth, client: wrap.clientWidth, table: t.getBoundingClientRect().width,
    main: main.width, charts: charts}));
})();
</script></body>"#;

/// A sweep's full disclosure, with a node exporter of this host on loopback
/// as the server's: the result records the `[disclosure]` section, the
/// server's facts as the exporter reports them and mailbench's own CPU per
/// level; the page (in headless Chromium) shows the executive summary with
/// result.json's figures, the server and client configuration, links to each
/// level's report, a scaling table without a horizontal scrollbar and charts
/// at the storage page's size; report.pdf is printed.
#[test]
fn a_sweep_writes_its_full_disclosure() {
    if !servers_available() {
        return;
    }
    let Some(exporter) = NodeExporter::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (o, folder) = sweep_with_disclosure(dir.path(), &exporter.url);
    let v = read_json(&folder.join("result.json"));
    let cores = disclosure_in_the_result(&v, &exporter.url);

    let Some(chrome) = chromium() else { return };
    let (dom, _) = browse(chrome, &folder.join("report.html"), &["--dump-dom"]);
    let Some(n) = v["supported_users"].as_u64() else {
        // Nothing passed on a busy machine: the summary says so.
        assert!(kv_value(&dom, "executive-summary", "Supported users").starts_with("none"));
        eprintln!("NOTE: no level passed; the summary's figures were not compared");
        return;
    };
    let l = (v["levels"].as_array().unwrap().iter())
        .find(|l| l["users"] == n)
        .unwrap();
    summary_as_in_the_result(&dom, n, l);
    configuration_on_the_page(&dom, n, l, cores);
    // Each level links to its own report, relative to the page.
    for l in v["levels"].as_array().unwrap() {
        let href = format!("{}/report.html", l["result_dir"].as_str().unwrap());
        assert!(dom.contains(&format!("href=\"{href}\"")), "no link {href}");
        assert!(folder.join(&href).is_file(), "{href}");
    }
    layout_fits(chrome, &folder);
    assert!(folder.join("report.pdf").is_file(), "{}", text(&o));
}

/// A sweep of 1 and 2 users on the local target with `[disclosure]` in its
/// config, the node exporter at `url` and `--pdf`: its output and folder.
fn sweep_with_disclosure(
    dir: &std::path::Path,
    url: &str,
) -> (std::process::Output, std::path::PathBuf) {
    let cfg = dir.join("sweep.toml");
    std::fs::write(
        &cfg,
        "[disclosure]\nvendor = \"Contoso Mail\"\nsolution = \"Dovecot + Postfix, one host\"\n",
    )
    .unwrap();
    let out = dir.join("out");
    let o = mailbench_within(
        &[
            "mail",
            "sweep",
            "--config",
            cfg.to_str().unwrap(),
            "--users",
            "1,2",
            "--profile",
            "loadsim-light",
            "--day-length",
            "10s",
            "--ramp-up",
            "1s",
            "--drain",
            "10s",
            "--interval",
            "1s",
            "--max-error-rate",
            "2%",
            "--server-metrics",
            url,
            "--pdf",
            "-q",
            "--output",
            out.to_str().unwrap(),
        ],
        &[],
        Duration::from_secs(300),
    );
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    let folder = run_folder(&out, "mail-sweep");
    (o, folder)
}

/// The result: what was declared and what the exporter at `url` reports of
/// this host, mailbench's own CPU and the steady window's counts per level.
/// Returns this host's CPU count.
fn disclosure_in_the_result(v: &serde_json::Value, url: &str) -> usize {
    let d = &v["disclosure"];
    assert_eq!(d["declared"]["vendor"], "Contoso Mail", "{d}");
    let server = &d["servers"][0];
    assert_eq!(server["source"], url);
    assert_eq!(server["sysname"]["value"], "Linux", "{server}");
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(server["release"]["value"], release.trim());
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let cores = (stat.lines())
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .count();
    assert_eq!(server["cpus"]["value"], cores as u64, "{server}");
    assert!(server["memory_bytes"]["value"].as_u64().unwrap() > 0);
    for l in v["levels"].as_array().unwrap() {
        let own = l["generator_cpu_pct"].as_f64().unwrap();
        assert!(own > 0.0 && own <= 100.0, "{l}");
        assert!(l["generator_cpu_s"].as_f64().unwrap() > 0.0, "{l}");
        assert!(l["steady_submitted"].is_u64(), "{l}");
        assert!(l["steady_s"].as_f64().unwrap() > 0.0, "{l}");
    }
    cores
}

/// The executive summary shows the figures of the supported level `l` (`n`
/// users) as result.json holds them.
fn summary_as_in_the_result(dom: &str, n: u64, l: &serde_json::Value) {
    let sum = |label: &str| kv_value(dom, "executive-summary", label).to_string();
    let supported = sum("Supported users");
    assert!(supported.starts_with(&format!("{n} (")), "{supported}");
    let at = format!("at {n} users");
    let p95 = sum(&format!("Response time (weighted p95) {at}"));
    assert!(
        p95.starts_with(&format!("{} ms", one(&l["response_time_ms"]))),
        "{p95}"
    );
    assert_eq!(
        sum(&format!("Response time (weighted p50) {at}")),
        format!("{} ms", one(&l["response_time_p50_ms"]))
    );
    assert_eq!(
        sum(&format!("Server CPU {at}")),
        format!("{} %", one(&l["server_cpu_busy_pct"]))
    );
    let queue = sum(&format!("Average queue {at}"));
    match l["queue_average"].as_f64() {
        Some(_) => assert!(
            queue.starts_with(&format!("{} messages", one(&l["queue_average"]))),
            "{queue}"
        ),
        None => assert!(queue.starts_with("unknown"), "{queue}"),
    }
    let window = format!("{:.0}", l["steady_s"].as_f64().unwrap());
    assert_eq!(
        sum("Messages submitted over the steady window"),
        format!("{} in {window} s", l["steady_submitted"])
    );
    assert_eq!(
        sum("Messages delivered over the steady window"),
        format!("{} in {window} s", l["steady_delivered"])
    );
}

/// The server's configuration (declared and from the exporter) and the
/// client's (mailbench's own CPU at the supported level `l`).
fn configuration_on_the_page(dom: &str, n: u64, l: &serde_json::Value, cores: usize) {
    let srv = |label: &str| kv_value(dom, "server-configuration", label).to_string();
    assert_eq!(srv("Vendor"), "Contoso Mail");
    assert_eq!(srv("Server operating system"), "Linux");
    assert_eq!(srv("Server CPUs"), cores.to_string());
    assert!(srv("Storage model").starts_with("not stated"));
    let cli = |label: &str| kv_value(dom, "client-configuration", label).to_string();
    assert_eq!(cli("Load generators (ranks)"), "1");
    let own = cli(&format!("mailbench CPU at {n} users"));
    let want = format!("{} % of the generators", one(&l["generator_cpu_pct"]));
    assert!(own.contains(&want), "{own}");
}

/// Measured in Chromium at 1400 px: no scrollbar under the scaling table,
/// the two charts side by side, each under 60 % of the page's width.
fn layout_fits(chrome: &str, folder: &std::path::Path) {
    let html = std::fs::read_to_string(folder.join("report.html")).unwrap();
    let probe_page = folder.join("report-probe.html");
    std::fs::write(&probe_page, html.replace("</body>", SWEEP_PROBE)).unwrap();
    let (dom, _) = browse(
        chrome,
        &probe_page,
        &["--dump-dom", "--window-size=1400,3000"],
    );
    let start = dom.find("data-probe=\"").unwrap() + "data-probe=\"".len();
    let end = start + dom[start..].find('"').unwrap();
    let json = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    let p: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        p["scroll"].as_f64().unwrap() <= p["client"].as_f64().unwrap() + 1.0,
        "the scaling table overflows: {p}"
    );
    let charts = p["charts"].as_array().unwrap();
    assert_eq!(charts.len(), 2, "{p}");
    for c in charts {
        assert!(
            c["w"].as_f64().unwrap() < 0.6 * p["main"].as_f64().unwrap(),
            "{p}"
        );
    }
    assert_eq!(charts[0]["top"], charts[1]["top"], "side by side: {p}");
    let _ = std::fs::remove_file(&probe_page);
}
