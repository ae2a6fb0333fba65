//! `mailbench report` on results of real storage runs (passing, failing,
//! interrupted): report.html checked in headless Chromium (no console errors,
//! verdict and key figures in the DOM, non-empty charts, screenshots), merge of
//! three results against their histograms, compare exit codes, the metrics
//! endpoint scraped during a run, and the result JSON Schema.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "storage_support.rs"]
mod storage_support;

use mailbench_metrics::LatencyHist;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use storage_support::{
    bin, browse, chromium, interrupt_and_wait, lines, read_json, run_dirs_in, storage_at, text,
    wait_line,
};

const SMALL: &[&str] = &[
    "--databases",
    "2",
    "--db-size",
    "64MiB",
    "--cache-size",
    "16MiB",
    "--threads",
    "4",
    "--warmup",
    "2s",
    "--sample-interval",
    "1s",
];

struct Runs {
    root: PathBuf,
    pass: PathBuf,
    pass_code: i32,
    fail: PathBuf,
    intr: PathBuf,
    scrape: String,
    scrape_om: String,
}

/// The newest run folder in the results folder `results`.
fn run_dir(results: &Path) -> PathBuf {
    run_dirs_in(results).pop().unwrap()
}

fn scrape(addr: &str, accept: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        c,
        "GET /metrics HTTP/1.1\r\nHost: t\r\nAccept: {accept}\r\n\r\n"
    )
    .unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).unwrap();
    s
}

/// Spawns a storage run with stderr read line by line on a channel.
fn spawn(
    root: &Path,
    name: &str,
    extra: &[&str],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let (data, results) = (
        root.join(format!("data-{name}")),
        root.join(format!("results-{name}")),
    );
    let mut child = storage_at(&data, &results, "run", SMALL, extra)
        .current_dir(root)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines(child.stderr.take().unwrap());
    (child, rx)
}

/// Three real runs, made once for all the tests of this file.
fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-cli");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();

        // 1. A normal run, scraped while it runs.
        let (mut child, rx) = spawn(
            &root,
            "pass",
            &["--duration", "5s", "--metrics-listen", "127.0.0.1:0"],
        );
        let line = wait_line(&rx, "metrics at http://", 60);
        let addr = line
            .split("http://")
            .nth(1)
            .unwrap()
            .trim_end_matches("/metrics")
            .to_string();
        let deadline = Instant::now() + Duration::from_secs(60);
        let (scrape_text, scrape_om) = loop {
            let s = scrape(&addr, "text/plain");
            if s.contains("mailbench_phase{phase=\"measured\"} 1")
                && s.contains("mailbench_io_latency_seconds{class=\"db_read\"")
            {
                break (s, scrape(&addr, "application/openmetrics-text"));
            }
            assert!(Instant::now() < deadline, "never measured:\n{s}");
            std::thread::sleep(Duration::from_millis(200));
        };
        let status = child.wait().unwrap();
        let pass_code = status.code().unwrap();
        assert!(pass_code == 0 || pass_code == 1, "{status:?}");
        let pass = run_dir(&root.join("results-pass"));
        let _ = std::fs::remove_dir_all(root.join("data-pass"));

        // 2. A run that misses a target it cannot reach.
        let (data, results) = (root.join("data-fail"), root.join("results-fail"));
        let unreachable = ["-q", "--duration", "4s", "--target-iops", "1000000"];
        let o = storage_at(&data, &results, "run", SMALL, &unreachable)
            .current_dir(&root)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let fail = run_dir(&root.join("results-fail"));
        let _ = std::fs::remove_dir_all(root.join("data-fail"));

        // 3. A run interrupted in its measured window.
        let (mut child, rx) = spawn(&root, "intr", &["--duration", "10m"]);
        wait_line(&rx, "measured", 90);
        wait_line(&rx, "measured", 30);
        assert_eq!(interrupt_and_wait(&mut child), Some(130));
        let intr = run_dir(&root.join("results-intr"));
        let _ = std::fs::remove_dir_all(root.join("data-intr"));
        Runs {
            root,
            pass,
            pass_code,
            fail,
            intr,
            scrape: scrape_text,
            scrape_om,
        }
    })
}

fn result(dir: &Path) -> Value {
    read_json(&dir.join("result.json"))
}

fn console_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

/// A test-only copy of the report with a script that measures the charts.
const PROBE: &str = r#"<script>
(function(){
  var out = [];
  document.querySelectorAll('svg.chart').forEach(function(svg){
    var r = svg.getBoundingClientRect();
    var plot = svg.querySelector('rect.plot');
    var pr = plot ? plot.getBoundingClientRect() : {width:0,height:0};
    var drawn = 0;
    svg.querySelectorAll('g.series path, g.series rect').forEach(function(e){
      var b = e.getBBox(); if (b.width > 0 || b.height > 0) drawn++;
    });
    out.push({id: svg.id, w: r.width, h: r.height, pw: pr.width, ph: pr.height, drawn: drawn,
              empty: !!svg.querySelector('rect.plot.empty')});
  });
  var ext = [];
  document.querySelectorAll('[src],[href]').forEach(function(e){ ext.push(e.getAttribute('src') || e.getAttribute('href')); });
  document.body.setAttribute('data-probe', JSON.stringify({charts: out, external: ext, scripts: document.scripts.length}));
})();
</script></body>"#;

fn check_in_browser(chrome: &str, dir: &Path, name: &str) -> Value {
    let html_path = dir.join("report.html");
    let html = std::fs::read_to_string(&html_path).unwrap();
    // 1. The page itself: loads without console messages.
    let (dom, err) = browse(chrome, &html_path, &["--dump-dom"]);
    let console = console_lines(&err);
    assert!(console.is_empty(), "{name}: console output: {console:?}");
    let r = result(dir);
    let status = r["verdict"]["status"].as_str().unwrap();
    assert!(
        dom.contains(&format!(r#"id="verdict" data-status="{status}""#)),
        "{name}: verdict {status} not in the DOM"
    );
    for reason in r["verdict"]["reasons"].as_array().unwrap() {
        let reason = reason.as_str().unwrap();
        let escaped = reason
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(dom.contains(&escaped), "{name}: reason {reason:?} missing");
    }
    // Key figures as the tables print them.
    let iops = r["total"]["transactional_iops"].as_f64().unwrap();
    let shown = format!("{:.3}", iops);
    let (int, frac) = shown.split_once('.').unwrap();
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    assert!(
        dom.contains(&format!("{grouped}.{frac}")),
        "{name}: transactional IOPS {grouped}.{frac} not in the DOM"
    );
    assert!(dom.contains(r#"id="fig-db-read""#) && dom.contains(r#"id="fig-log-write""#));
    assert!(dom.contains(r#"id="total-io-table""#));
    assert!(dom.contains(r#"id="test-log""#));
    assert!(dom.contains(r["host"]["hostname"].as_str().unwrap()));
    // Self-contained: no scripts but the inert JSON data, no URLs to fetch.
    assert_eq!(
        html.matches("<script").count(),
        1,
        "{name}: scripts in page"
    );
    assert!(html.contains(r#"<script type="application/json" id="mailbench-result">"#));
    for bad in ["http://", "https://", "src=", "href=", "@import", "url("] {
        assert!(!html.contains(bad), "{name}: page references {bad}");
    }

    // 2. Measured charts (test-only copy with a probe script).
    let probe = probe(chrome, dir, &html, name);
    assert_eq!(probe["external"].as_array().unwrap().len(), 0, "{probe}");

    // 3. Screenshot, kept for people to look at.
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let png = shots.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&png);
    browse(
        chrome,
        &html_path,
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1400,3000",
            "--hide-scrollbars",
        ],
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // A blank 1400x3000 page compresses to about 15 kB; charts and tables do not.
    assert!(
        bytes.len() > 80_000,
        "{name}: screenshot looks blank ({} B)",
        bytes.len()
    );
    eprintln!("{name}: screenshot {}", png.display());
    probe
}

fn chart<'a>(probe: &'a Value, id: &str) -> &'a Value {
    probe["charts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no chart {id}: {probe}"))
}

/// Draws a test-only copy of the page `html` (in `dir`) with the probe script
/// in headless Chromium and returns what the probe measured; no console
/// messages allowed.
fn probe(chrome: &str, dir: &Path, html: &str, what: &str) -> Value {
    let probe_path = dir.join("report-probe.html");
    std::fs::write(&probe_path, html.replace("</body>", PROBE)).unwrap();
    let (dom, err) = browse(
        chrome,
        &probe_path,
        &["--dump-dom", "--window-size=1400,3000"],
    );
    assert!(console_lines(&err).is_empty(), "{what}: probe: {err}");
    let start = dom.find("data-probe=\"").unwrap() + "data-probe=\"".len();
    let end = start + dom[start..].find('"').unwrap();
    let probe: Value = serde_json::from_str(
        &dom[start..end]
            .replace("&quot;", "\"")
            .replace("&amp;", "&"),
    )
    .unwrap();
    let _ = std::fs::remove_file(&probe_path);
    probe
}

fn assert_drawn(probe: &Value, id: &str) {
    let c = chart(probe, id);
    assert!(c["w"].as_f64().unwrap() > 300.0, "{id}: {c}");
    assert!(
        c["pw"].as_f64().unwrap() > 200.0 && c["ph"].as_f64().unwrap() > 100.0,
        "{id}: {c}"
    );
    assert!(
        c["drawn"].as_u64().unwrap() > 0,
        "{id} has nothing drawn: {c}"
    );
    assert_eq!(c["empty"], false, "{id}");
}

#[test]
fn every_run_writes_a_report_that_renders_in_chromium() {
    let runs = runs();
    for d in [&runs.pass, &runs.fail, &runs.intr] {
        assert!(
            d.join("report.html").is_file(),
            "{} has no report.html",
            d.display()
        );
    }
    // Re-rendering gives the page again (and summary.txt), exit 0.
    let o = bin()
        .args(["report", "render"])
        .arg(&runs.fail)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("report.html"));

    let Some(chrome) = chromium() else { return };
    // The console check can fail: a page that logs is caught.
    let bad = runs.root.join("console.html");
    std::fs::write(
        &bad,
        "<html><body><script>console.error('boom')</script></body></html>",
    )
    .unwrap();
    let (_, err) = browse(chrome, &bad, &["--dump-dom"]);
    assert!(
        !console_lines(&err).is_empty(),
        "console capture does not work: {err}"
    );

    let all = [
        "chart-iops",
        "chart-db-read-latency",
        "chart-log-write-latency",
        "chart-percentiles",
        "chart-instance-iops",
        "chart-instance-latency",
        "chart-host",
    ];
    let name = if runs.pass_code == 0 {
        "storage-pass"
    } else {
        "storage-normal"
    };
    let p = check_in_browser(chrome, &runs.pass, name);
    for id in all {
        assert_drawn(&p, id);
    }
    let p = check_in_browser(chrome, &runs.fail, "storage-fail");
    for id in all {
        assert_drawn(&p, id);
    }
    let p = check_in_browser(chrome, &runs.intr, "storage-interrupted");
    for id in [
        "chart-iops",
        "chart-db-read-latency",
        "chart-percentiles",
        "chart-host",
    ] {
        assert_drawn(&p, id);
    }
}

#[test]
fn the_metrics_endpoint_served_live_figures() {
    let runs = runs();
    let s = &runs.scrape;
    assert!(s.starts_with("HTTP/1.1 200 OK"), "{s}");
    assert!(s.contains("Content-Type: text/plain; version=0.0.4"), "{s}");
    for want in [
        "# TYPE mailbench_phase gauge",
        "mailbench_up 1",
        "mailbench_phase{phase=\"measured\"} 1",
        "# TYPE mailbench_io_latency_seconds summary",
        "mailbench_io_latency_seconds{class=\"log_write\",quantile=\"0.99\"}",
        "mailbench_io_operations_total{class=\"db_read\"}",
        "mailbench_transactional_iops ",
        "mailbench_latency_limit_seconds{class=\"db_read\",stat=\"avg\"} 0.02",
        "mailbench_io_errors ",
    ] {
        assert!(s.contains(want), "missing {want}:\n{s}");
    }
    let iops: f64 = s
        .lines()
        .find_map(|l| l.strip_prefix("mailbench_transactional_iops "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(iops > 0.0, "{s}");
    assert!(runs.scrape_om.contains("application/openmetrics-text"));
    assert!(runs.scrape_om.trim_end().ends_with("# EOF"));
    eprintln!("scrape:\n{s}");
}

fn hist(v: &Value) -> LatencyHist {
    LatencyHist::from_base64(v.as_str().unwrap()).unwrap()
}

#[test]
fn merge_of_three_runs_sums_rates_and_adds_histograms() {
    let runs = runs();
    let out = runs.root.join("merged");
    let _ = std::fs::remove_dir_all(&out);
    let o = bin()
        .args(["report", "merge", "--json", "--output"])
        .arg(&out)
        .arg(runs.pass.join("result.json"))
        .arg(&runs.fail)
        .arg(runs.intr.join("result.json"))
        .output()
        .unwrap();
    // The failing and interrupted hosts make the merged verdict fail.
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["hosts"], 3);
    let dir = PathBuf::from(j["result_dir"].as_str().unwrap());
    let m = result(&dir);
    let inputs: Vec<Value> = [&runs.pass, &runs.fail, &runs.intr]
        .iter()
        .map(|d| result(d))
        .collect();
    // Rates are sums; operation counts add up.
    let sum = |p: &dyn Fn(&Value) -> f64| inputs.iter().map(p).sum::<f64>();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
    assert!(close(
        m["total"]["transactional_iops"].as_f64().unwrap(),
        sum(&|r| r["total"]["transactional_iops"].as_f64().unwrap())
    ));
    for class in ["db_read", "db_write", "log_write"] {
        let mc = &m["total"]["classes"][class];
        let ops = sum(&|r| r["total"]["classes"][class]["ops"].as_f64().unwrap());
        assert_eq!(mc["ops"].as_f64().unwrap(), ops);
        // Averages weighted by operations.
        let wavg = sum(&|r| {
            r["total"]["classes"][class]["latency_ms"]["avg"]
                .as_f64()
                .unwrap()
                * r["total"]["classes"][class]["ops"].as_f64().unwrap()
        }) / ops;
        assert!(close(mc["latency_ms"]["avg"].as_f64().unwrap(), wavg));
        // Percentiles from the added histograms, exactly.
        let mut h = LatencyHist::new();
        for r in &inputs {
            h.add(&hist(&r["total"]["histograms"][class]));
        }
        let s = h.summary();
        assert_eq!(
            mc["latency_ms"]["p99"].as_f64().unwrap(),
            s.p99_us as f64 / 1000.0
        );
        assert_eq!(
            mc["latency_ms"]["max"].as_f64().unwrap(),
            s.max_us as f64 / 1000.0
        );
        assert_eq!(hist(&m["total"]["histograms"][class]).summary(), s);
    }
    assert_eq!(m["merged"]["hosts"].as_array().unwrap().len(), 3);
    assert_eq!(
        m["instances"].as_array().unwrap().len(),
        inputs
            .iter()
            .map(|r| r["instances"].as_array().unwrap().len())
            .sum::<usize>()
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains(r#"id="hosts-table""#) && html.contains("chart-host-iops"));
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(summary.contains("Per-Host Results"), "{summary}");

    // Different test profiles are refused, naming both files, exit 2, before
    // a missing intervals file is.
    let other = runs.root.join("other-profile.json");
    let mut r = inputs[0].clone();
    r["spec"]["profile"]["name"] = "exchange2007".into();
    std::fs::write(&other, serde_json::to_vec(&r).unwrap()).unwrap();
    // It has no intervals.jsonl beside it: that the tests differ is said first.
    assert!(!other.with_file_name("intervals.jsonl").exists());
    let o = bin()
        .args(["report", "merge", "--output"])
        .arg(&out)
        .arg(runs.pass.join("result.json"))
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("different profiles") && e.contains("other-profile.json"),
        "{e}"
    );
    // One file is not a merge.
    let o = bin()
        .args(["report", "merge"])
        .arg(&runs.pass)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// `mailbench report compare A B`, then `extra`.
fn compare(a: &Path, b: &Path, extra: &[&str]) -> Output {
    bin()
        .args(["report", "compare"])
        .arg(a)
        .arg(b)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn compare_exits_1_on_regression_and_0_otherwise() {
    let runs = runs();
    let o = compare(&runs.pass, &runs.pass, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("No regression"));
    // The failing run: far lower IOPS and far higher latency than the normal one.
    let o = compare(&runs.pass, &runs.fail, &["--tolerance", "5%"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("REGRESSION"), "{out}");
    let o = compare(&runs.pass, &runs.fail, &["--json"]);
    assert_eq!(o.status.code(), Some(1));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(j["regressions"].as_u64().unwrap() > 0);
    // Bad input is a usage error naming the file.
    let o = compare(&runs.pass, Path::new("/nonexistent/result.json"), &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/result.json"));
    let o = compare(&runs.pass, &runs.pass, &["--tolerance", "lots"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn render_refuses_what_is_not_a_result() {
    let t = tempfile::tempdir().unwrap();
    let cases = [
        (
            "garbage.json",
            "this is not json",
            "not a mailbench result.json",
        ),
        ("nokind.json", r#"{"a": 1}"#, "no \"kind\""),
        (
            "future.json",
            r#"{"kind": "storage-run", "schema_version": 99}"#,
            "version 99",
        ),
        (
            "broken.json",
            r#"{"kind": "storage-run", "schema_version": 1}"#,
            "not a readable storage-run",
        ),
    ];
    for (name, body, want) in cases {
        let p = t.path().join(name);
        std::fs::write(&p, body).unwrap();
        let o = bin().args(["report", "render"]).arg(&p).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(name) && e.contains(want), "{name}: {e}");
    }
    assert!(!t.path().join("report.html").exists());
    let o = bin()
        .args(["report", "render", "/nonexistent"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

// ---------------------------------------------------------------------------
// The JSON Schema of storage results (schema/storage-run.schema.json, generated
// from the result types), checked against a real result with a small
// validator for the keywords the schema uses.

fn validate(schema: &Value, root: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").expect("local $ref");
        return validate(&root["$defs"][name], root, v, path, errs);
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        let ok = any.iter().any(|s| {
            let mut e = Vec::new();
            validate(s, root, v, path, &mut e);
            e.is_empty()
        });
        if !ok {
            errs.push(format!("{path}: matches none of anyOf"));
        }
        return;
    }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
        let matching = one
            .iter()
            .filter(|s| {
                let mut e = Vec::new();
                validate(s, root, v, path, &mut e);
                e.is_empty()
            })
            .count();
        if matching != 1 {
            errs.push(format!("{path}: matches {matching} of oneOf"));
        }
        return;
    }
    if let Some(c) = schema.get("const")
        && c != v
    {
        errs.push(format!("{path}: {v} is not {c}"));
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_u64() || v.is_i64(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        if !ok {
            errs.push(format!("{path}: expected {types:?}, got {v}"));
            return;
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        errs.push(format!("{path}: {v} not in {e:?}"));
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
        && v.as_f64().is_some_and(|x| x < min)
    {
        errs.push(format!("{path}: {v} < {min}"));
    }
    if let Some(o) = v.as_object() {
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for k in req.iter().filter_map(Value::as_str) {
                if !o.contains_key(k) {
                    errs.push(format!("{path}: missing {k}"));
                }
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, x) in o {
            let p = format!("{path}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(s) => validate(s, root, x, &p, errs),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => errs.push(format!("{p}: not in the schema")),
                    Some(s @ Value::Object(_)) => validate(s, root, x, &p, errs),
                    _ => {}
                },
            }
        }
    }
    if let (Some(a), Some(items)) = (v.as_array(), schema.get("items")) {
        for (i, x) in a.iter().enumerate() {
            validate(items, root, x, &format!("{path}[{i}]"), errs);
        }
    }
}

#[test]
fn real_results_match_the_json_schema() {
    let runs = runs();
    let schema: Value =
        serde_json::from_str(include_str!("../../../schema/storage-run.schema.json")).unwrap();
    for d in [&runs.pass, &runs.fail, &runs.intr] {
        let mut errs = Vec::new();
        validate(&schema, &schema, &result(d), "$", &mut errs);
        assert!(errs.is_empty(), "{}: {errs:#?}", d.display());
    }
    // The validator rejects what breaks the schema.
    let mut bad = result(&runs.pass);
    bad["verdict"]["status"] = "maybe".into();
    bad["total"]["transactional_iops"] = "fast".into();
    bad.as_object_mut().unwrap().remove("spec");
    let mut errs = Vec::new();
    validate(&schema, &schema, &bad, "$", &mut errs);
    assert_eq!(errs.len(), 3, "{errs:#?}");
}

/// A real `mail sweep` result (kept with the result fixtures) in a folder of
/// its own under `root`, changed by `edit`.
fn sweep_copy(root: &Path, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../results/tests/fixtures/v1/mail-sweep.json"
    );
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    edit(&mut v);
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("result.json"), v.to_string()).unwrap();
    dir
}

/// The rows of the table `id` in a page (header excluded).
fn table_rows<'a>(html: &'a str, id: &str) -> Vec<&'a str> {
    let start = html.find(&format!(r#"<table id="{id}">"#)).unwrap();
    let body = &html[start..];
    let body = &body[body.find("<tbody>").unwrap()..body.find("</tbody>").unwrap()];
    body.split("<tr>").skip(1).collect()
}

/// A sweep's report.html: one table row per level, both charts (response time
/// with its limit, CPU), the supported users marked in each and in a tile;
/// drawn in headless Chromium without console messages.
#[test]
fn a_sweep_report_has_its_table_charts_and_supported_users() {
    let root = tempfile::tempdir().unwrap();
    let dir = sweep_copy(root.path(), "sweep", |_| {});
    let o = bin()
        .args(["report", "render", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    let r = result(&dir);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let levels = r["levels"].as_array().unwrap();
    assert!(levels.len() >= 3, "the fixture has few levels");
    let rows = table_rows(&html, "sweep-table");
    assert_eq!(rows.len(), levels.len(), "{html}");
    for (row, l) in rows.iter().zip(levels) {
        let users = l["users"].as_u64().unwrap();
        assert!(row.contains(&format!(">{users}<")), "{row}");
        let status = if l["status"] == "pass" {
            "PASS"
        } else {
            "FAIL"
        };
        assert!(row.contains(status), "{row}");
    }
    let n = r["supported_users"].as_u64().unwrap();
    for id in ["chart-sweep-response", "chart-sweep-cpu"] {
        let at = html.find(&format!(r#"id="{id}""#)).unwrap();
        let svg = &html[at..at + html[at..].find("</svg>").unwrap()];
        assert!(svg.contains(&format!("supported users: {n}")), "{id}");
    }
    assert!(html.contains("1000 ms limit"));
    assert!(html.contains(r#"id="fig-supported""#));

    let Some(chrome) = chromium() else { return };
    let (dom, err) = browse(chrome, &dir.join("report.html"), &["--dump-dom"]);
    assert!(console_lines(&err).is_empty(), "{err}");
    assert!(dom.contains(r#"id="sweep-table""#));
    let probe = probe(chrome, &dir, &html, "sweep");
    assert_drawn(&probe, "chart-sweep-response");
    assert_drawn(&probe, "chart-sweep-cpu");
    // Nothing to fetch; the only links lead to each level's own report beside it.
    let external: Vec<&Value> = (probe["external"].as_array().unwrap().iter())
        .filter(|h| {
            !h.as_str()
                .is_some_and(|h| h.ends_with("/report.html") && !h.contains(':'))
        })
        .collect();
    assert!(external.is_empty(), "{probe}");
    for l in levels {
        let href = format!("{}/report.html", l["result_dir"].as_str().unwrap());
        assert!(
            dom.contains(&format!("href=\"{href}\"")),
            "no link to {href}"
        );
    }
    // A result written before sweeps recorded their disclosure says so.
    assert!(dom.contains(r#"id="executive-summary""#));
    assert!(dom.contains("a result written before sweeps recorded their disclosure"));
}

/// `report compare` of two sweeps (a server before and after a change): fewer
/// supported users after is a regression (exit 1) and the change is stated;
/// the other way round passes (exit 0).
#[test]
fn compare_of_two_sweeps_states_the_change_in_supported_users() {
    let root = tempfile::tempdir().unwrap();
    let before = sweep_copy(root.path(), "before", |_| {});
    let n = result(&before)["supported_users"].as_u64().unwrap();
    // After: the supported level failed, so the one below it is supported.
    let after = sweep_copy(root.path(), "after", |v| {
        let users: Vec<u64> = (v["levels"].as_array().unwrap().iter())
            .map(|l| l["users"].as_u64().unwrap())
            .collect();
        let below = users.iter().copied().filter(|u| *u < n).max().unwrap();
        for l in v["levels"].as_array_mut().unwrap() {
            if l["users"] == n {
                l["status"] = "fail".into();
                l["failed_criterion"] = "response_time".into();
            }
        }
        v["supported_users"] = below.into();
    });
    let below = result(&after)["supported_users"].as_u64().unwrap();
    let o = compare(&before, &after, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("supported users"), "{t}");
    assert!(
        t.contains(&format!("supported users: {n} before, {below} after")),
        "{t}"
    );
    let o = compare(&after, &before, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("supported users: {below} before, {n} after")),
        "{}",
        text(&o)
    );
}
