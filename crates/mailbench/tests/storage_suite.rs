//! `storage suite` on the real binary: the whole test program on small
//! databases — every stage's folder and result, the suite's result and its
//! solution report checked in headless Chromium's DOM, report.pdf's pages;
//! bad input refused before anything is written; Ctrl-C, then `--resume`;
//! a stage that fails at run time ends the suite with the stages before it
//! kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "storage_support.rs"]
mod storage_support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use storage_support::{
    bin, browse, chromium, interrupt_and_wait, lines, read_json, run_dirs_in, text, wait_line,
};

/// Small databases, short stages (the stress stage included).
const SMALL: &[&str] = &[
    "--quick",
    "--databases",
    "2",
    "--db-size",
    "16MiB",
    "--cache-size",
    "8MiB",
    "--threads",
    "2",
    "--warmup",
    "1s",
    "--duration",
    "3s",
    "--sample-interval",
    "1s",
    "--log-files",
    "2",
];

const STAGES: [&str; 6] = [
    "init",
    "performance",
    "stress",
    "backup",
    "recover",
    "verify",
];

/// `mailbench storage suite` on `dir/data` with results in `dir/out`: the
/// small shape, then `extra` (a `--duration` there replaces the shape's).
fn suite(dir: &Path, extra: &[&str]) -> Command {
    let mut shape: Vec<&str> = SMALL.to_vec();
    if extra.contains(&"--duration")
        && let Some(i) = shape.iter().position(|a| *a == "--duration")
    {
        shape.drain(i..i + 2);
    }
    let mut c = bin();
    c.current_dir(dir)
        .args(["storage", "suite", "--path"])
        .arg(dir.join("data"))
        .arg("--output")
        .arg(dir.join("out"))
        .args(shape)
        .args(extra);
    c
}

/// The one suite folder under `dir/out`.
fn suite_dir(dir: &Path) -> PathBuf {
    let dirs = run_dirs_in(&dir.join("out"));
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// The stages' names and statuses of a suite result.
fn stages(v: &Value) -> Vec<(String, String)> {
    (v["stages"].as_array().unwrap().iter())
        .map(|s| {
            (
                s["stage"].as_str().unwrap().to_string(),
                s["verdict"]["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_suite_runs_every_stage_and_writes_the_solution_report() {
    let t = tempfile::tempdir().unwrap();
    let cfg = t.path().join("suite.toml");
    std::fs::write(
        &cfg,
        "[disclosure]\nvendor = \"Contoso Storage\"\nraid_layout = \"RAID-10, 8 disks\"\n",
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let out = suite(
        t.path(),
        &["--stress-duration", "2s", "--pdf", "--config", cfg],
    )
    .output()
    .unwrap();
    // A stage may fail its latency limits on a busy machine; every stage runs.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    let dir = suite_dir(t.path());
    let v = read_json(&dir.join("result.json"));
    assert_eq!(v["kind"], "storage-suite");
    let ran = stages(&v);
    let names: Vec<&str> = ran.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, STAGES, "{v}");
    for (name, status) in &ran {
        assert!(status == "pass" || status == "fail", "{name}: {status}");
        let stage = read_json(&dir.join(name).join("result.json"));
        let kind = match name.as_str() {
            "performance" | "stress" => "storage-run",
            other => &format!("storage-{other}"),
        };
        assert_eq!(stage["kind"], kind, "{name}");
        assert_eq!(stage["verdict"]["status"], status.as_str(), "{name}");
        assert!(dir.join(name).join("report.html").is_file(), "{name}");
    }
    let perf = read_json(&dir.join("performance/result.json"));
    assert_eq!(perf["spec"]["test_type"], "performance");
    let stress = read_json(&dir.join("stress/result.json"));
    assert_eq!(stress["spec"]["test_type"], "stress");
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    for name in STAGES {
        assert!(
            summary.contains(&format!("\n  {name:<12} ")),
            "{name}: {summary}"
        );
    }
    what_was_tested_is_kept(t.path(), &dir, &v);
    the_report_shows_the_program(&dir, &v, &perf);
    the_pdf_has_a_page_per_appendix(&dir);
}

/// The disclosure in the suite's result and every stage's: the
/// `[disclosure]` keys as given, the database folder examined on this host.
fn what_was_tested_is_kept(work: &Path, dir: &Path, v: &Value) {
    let data = std::fs::canonicalize(work.join("data")).unwrap();
    let data = data.to_str().unwrap();
    let results = std::iter::once(v.clone()).chain(
        STAGES
            .iter()
            .map(|s| read_json(&dir.join(s).join("result.json"))),
    );
    for (r, name) in results.zip(std::iter::once("suite").chain(STAGES)) {
        let d = &r["disclosure"];
        assert_eq!(d["declared"]["vendor"], "Contoso Storage", "{name}: {d}");
        assert_eq!(d["declared"]["raid_layout"], "RAID-10, 8 disks", "{name}");
        let paths: Vec<&str> = (d["detected"]["paths"].as_array().unwrap().iter())
            .map(|p| p["path"].as_str().unwrap())
            .collect();
        assert!(paths.contains(&data), "{name}: {paths:?}");
        assert!(d["detected"]["kernel"].is_object(), "{name}: {d}");
    }
}

/// The solution report's DOM in Chromium: the verdict, a row per stage,
/// an appendix per stage, the performance run's IOPS in its tile.
fn the_report_shows_the_program(dir: &Path, v: &Value, perf: &Value) {
    let Some(chrome) = chromium() else { return };
    let (dom, err) = browse(chrome, &dir.join("report.html"), &["--dump-dom"]);
    assert!(dom.contains("</html>"), "no DOM: {err}");
    let status = v["verdict"]["status"].as_str().unwrap();
    assert!(
        dom.contains(&format!("id=\"verdict\" data-status=\"{status}\"")),
        "{status}"
    );
    let tested = dom
        .split("id=\"tested-configuration-table\"")
        .nth(1)
        .unwrap();
    let tested = &tested[..tested.find("</table>").unwrap()];
    assert!(tested.contains("Contoso Storage"), "{tested}");
    assert!(tested.contains("RAID-10, 8 disks"), "{tested}");
    let table = dom.split("id=\"stages-table\"").nth(1).unwrap();
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(table.matches("<tr>").count() - 1, 6, "{table}");
    for name in STAGES {
        assert!(dom.contains(&format!("id=\"appendix-{name}\"")), "{name}");
    }
    // The performance appendix is the run's own page, its ids prefixed.
    assert!(dom.contains("id=\"appendix-performance-criteria-table\""));
    let iops = perf["total"]["transactional_iops"].as_f64().unwrap();
    let tile = dom.split("id=\"fig-iops\"").nth(1).unwrap();
    let shown = format!("{}", iops.round() as u64);
    let digits: String = tile[..200]
        .split("<div class=\"v\">")
        .nth(1)
        .unwrap()
        .chars()
        .take_while(|c| *c != '<')
        .filter(char::is_ascii_digit)
        .collect();
    assert_eq!(digits, shown, "{}", &tile[..200]);
}

/// report.pdf: every appendix starts a page, so at least one page each.
fn the_pdf_has_a_page_per_appendix(dir: &Path) {
    if chromium().is_none() {
        return;
    }
    let pdf = dir.join("report.pdf");
    assert!(pdf.is_file(), "no report.pdf");
    let info = Command::new("pdfinfo").arg(&pdf).output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout).to_string();
    let pages: usize = (info.lines())
        .find_map(|l| l.strip_prefix("Pages:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("pdfinfo: {info}"));
    assert!(pages > STAGES.len(), "{pages} pages");
}

#[test]
fn bad_suite_input_writes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let not_a_suite = t.path().join("other");
    std::fs::create_dir_all(&not_a_suite).unwrap();
    std::fs::write(
        not_a_suite.join("result.json"),
        r#"{"kind":"storage-run","verdict":{"status":"pass","reasons":[]}}"#,
    )
    .unwrap();
    let bad_key = t.path().join("bad-key.toml");
    std::fs::write(&bad_key, "[disclosure]\nvendro = \"Contoso\"\n").unwrap();
    let bad_value = t.path().join("bad-value.toml");
    std::fs::write(&bad_value, "[disclosure]\nvendor = \"Con\\u0007toso\"\n").unwrap();
    let cases: [(&[&str], &str); 7] = [
        (&["--config", bad_key.to_str().unwrap()], "vendro"),
        (&["--config", bad_value.to_str().unwrap()], "vendor"),
        (&["--stages", "init,init"], "named twice"),
        (&["--stages", "init,checksum"], "not one of"),
        (&["--stages", "verify,init"], "program's order"),
        (
            &["--stages", "init,stress", "--stress-duration", "0s"],
            "--stress-duration",
        ),
        (&["--resume", not_a_suite.to_str().unwrap()], "--resume"),
    ];
    for (args, says) in cases {
        let out = suite(t.path(), args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!t.path().join("out").exists(), "{args:?} wrote results");
        assert!(!t.path().join("data").exists(), "{args:?} wrote databases");
    }
}

#[test]
fn an_interrupted_suite_resumes_where_it_stopped() {
    let t = tempfile::tempdir().unwrap();
    let long = ["--duration", "60s", "--stages", "init,performance,verify"];
    let mut child = suite(t.path(), &long)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = lines(child.stderr.take().unwrap());
    // Stopped in the performance stage's load.
    wait_line(&err, "suite stage performance", 120);
    wait_line(&err, "measured", 120);
    assert_eq!(interrupt_and_wait(&mut child), Some(130));
    let dir = suite_dir(t.path());
    let v = read_json(&dir.join("result.json"));
    assert_eq!(v["verdict"]["status"], "interrupted", "{v}");
    assert_eq!(
        stages(&v),
        [
            ("init".into(), "pass".into()),
            ("performance".into(), "interrupted".into())
        ]
    );
    // Resumed: init kept, the performance stage run again in its own folder.
    let short = ["--duration", "3s", "--stages", "init,performance,verify"];
    let dir_arg = dir.to_str().unwrap().to_string();
    let out = suite(t.path(), &[&short[..], &["--resume", &dir_arg]].concat())
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    assert_eq!(
        run_dirs_in(&t.path().join("out")).len(),
        1,
        "a new suite folder"
    );
    let v = read_json(&dir.join("result.json"));
    let names: Vec<(String, String)> = stages(&v);
    assert_eq!(names[0], ("init".into(), "pass".into()));
    assert_eq!(names.len(), 3, "{v}");
    let dirs: Vec<&str> = (v["stages"].as_array().unwrap().iter())
        .map(|s| s["dir"].as_str().unwrap())
        .collect();
    assert_eq!(dirs, ["init", "performance-2", "verify"]);
    assert!(!dir.join("init-2").exists(), "init ran again");
}

#[test]
fn a_stage_that_cannot_run_ends_the_suite_and_keeps_the_others() {
    let t = tempfile::tempdir().unwrap();
    // The backup's copies go to a 1 MiB tmpfs of a private mount namespace:
    // checked before the databases exist, too small once they do.
    let to = t.path().join("small");
    std::fs::create_dir_all(&to).unwrap();
    let args = [
        "--stages",
        "init,backup,verify",
        "--to",
        to.to_str().unwrap(),
    ];
    let c = suite(t.path(), &args);
    let mut line = format!("mount -t tmpfs -o size=1m tmpfs '{}' && exec", to.display());
    line.push_str(&format!(" '{}'", c.get_program().to_string_lossy()));
    for a in c.get_args() {
        line.push_str(&format!(" '{}'", a.to_string_lossy()));
    }
    let out = Command::new("unshare")
        .args(["--mount", "sh", "-c", &line])
        .current_dir(t.path())
        .output()
        .unwrap();
    if out.status.code() == Some(32) || String::from_utf8_lossy(&out.stderr).contains("mount:") {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must allow mounts: {}",
            text(&out)
        );
        eprintln!("SKIPPED: no private mounts here: {}", text(&out));
        return;
    }
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let v = read_json(&suite_dir(t.path()).join("result.json"));
    assert_eq!(v["verdict"]["status"], "error", "{v}");
    assert_eq!(
        stages(&v),
        [
            ("init".into(), "pass".into()),
            ("backup".into(), "error".into())
        ]
    );
    let reasons = v["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("backup: Database backup test could not run"),
        "{reasons}"
    );
}
