//! `mailbench plan` end to end: the real binary on the worked example of issue 4 and on
//! bad inputs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

const WORKED: &[&str] = &[
    "plan",
    "--mailboxes",
    "15000",
    "--messages-per-day",
    "150",
    "--message-size",
    "75KB",
    "--mailbox-quota",
    "4GB",
    "--copies",
    "3",
    "--site-servers",
    "8,4",
    "--site-copies",
    "2,1",
    "--databases-per-server",
    "14",
    "--failure",
    "site",
    "--headroom",
    "20%",
    "--disk",
    "nl-sas-7k2",
    "--raid",
    "1",
];

fn mailbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mailbench"))
        .args(args)
        .output()
        .expect("run mailbench")
}

fn with(extra: &[&str]) -> Vec<String> {
    WORKED
        .iter()
        .chain(extra)
        .map(|s| (*s).to_string())
        .collect()
}

fn run(args: &[String]) -> Output {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    mailbench(&a)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What `--json` printed.
fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The worked example at 1 % scale on the database paths `paths`, its
/// storage test written to `out`: it must succeed.
fn emit_small_storage_test(out: &std::path::Path, paths: &str) -> Output {
    let o = run(&with(&[
        "--emit-config",
        out.to_str().unwrap(),
        "--scale",
        "0.01",
        "--paths",
        paths,
        "--quiet",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    o
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn worked_example_text_report() {
    let o = run(&with(&["--layout"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t = stdout(&o);
    for needle in [
        "15,000 mailboxes",
        "IOPS with headroom",
        "0.1206 (+20 %)",
        "56 per group",
        "Per server",
        "Group and total",
        "Log, Disk Space, and IO Requirements",
        "User Transaction Logs Generated / Day                         8,040     56,280     450,000",
        "site A   -   -   -   -   -   -   -   -  14  14  14  14",
        "DB056",
        "Warnings",
    ] {
        assert!(t.contains(needle), "output lacks `{needle}`:\n{t}");
    }
}

#[test]
fn worked_example_json_is_internally_consistent() {
    let o = run(&with(&["--json"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let f = |p: &str| v.pointer(p).and_then(serde_json::Value::as_f64).unwrap();
    assert_eq!(v["schema"], "mailbench.plan/1");
    // 150 messages x 0.00067 = 0.1005, x 1.2 per active mailbox; 30 logs a day.
    assert!((f("/per_mailbox/iops_with_headroom") - 0.1206).abs() < 1e-9);
    assert!((f("/per_mailbox/logs_per_day") - 30.0).abs() < 1e-9);
    // 56 databases of 268 mailboxes, 168 copies over 12 servers of 14 copies each.
    assert_eq!(f("/per_database/per_group"), 56.0);
    assert_eq!(f("/per_database/mailboxes"), 268.0);
    assert_eq!(f("/group/copies"), 168.0);
    let servers = v["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 12);
    let mut copies = 0.0;
    let mut iops = 0.0;
    let mut actives = 0.0;
    for s in servers {
        let n = &s["normal"];
        let c = n["active"].as_f64().unwrap()
            + n["passive"].as_f64().unwrap()
            + n["lagged"].as_f64().unwrap();
        assert_eq!(c, 14.0, "{s}");
        copies += c;
        actives += n["active"].as_f64().unwrap();
        iops += s["iops_normal"].as_f64().unwrap();
        // Disks cover the server after the failure, in both IOPS and space.
        assert!(s["iops_utilisation_after_failure"].as_f64().unwrap() <= 1.0);
        assert!(s["capacity_utilisation"].as_f64().unwrap() <= 1.0);
        assert!(s["disks"].as_f64().unwrap() >= s["disks_by_iops"].as_f64().unwrap());
        assert!(s["disks"].as_f64().unwrap() >= s["disks_by_capacity"].as_f64().unwrap());
    }
    assert_eq!(copies, 168.0);
    assert_eq!(actives, 56.0);
    assert!((iops - f("/group/iops_normal")).abs() < 1e-6);
    // Group IOPS = 56 active copies x 268 x 0.1206 + 112 passive copies at half of that.
    let a = 268.0 * 0.1206;
    assert!((f("/group/iops_normal") - (56.0 * a + 112.0 * a / 2.0)).abs() < 1e-6);
    // After losing site A, each of the 4 B servers runs 14 actives.
    assert_eq!(v["failure"]["worst_scenario"], "site A");
    assert!((f("/failure/worst_server_iops") - 14.0 * a).abs() < 1e-6);
    assert_eq!(f("/failure/max_actives_after"), 14.0);
    // Total disks = servers x disks per server.
    assert_eq!(f("/total/disks"), 12.0 * f("/disks_per_server"));
    assert_eq!(v["disk"]["capacity"], 4_000_000_000_000u64);
    assert_eq!(v["warnings"].as_array().unwrap().len(), 0);
}

#[test]
fn markdown_report() {
    let o = run(&with(&["--markdown"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t = stdout(&o);
    assert!(t.starts_with("# mailbench plan"));
    assert!(t.contains("## Per server"));
    assert!(t.contains("|---|"));
}

#[test]
fn config_file_and_flag_override() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("plan.toml");
    std::fs::write(
        &cfg,
        "[plan]\nmailboxes = 15000\nmessages_per_day = 150\nmailbox_quota = \"4GB\"\ncopies = 3\n\
         site_servers = [8, 4]\nsite_copies = [2, 1]\ndatabases_per_server = 14\nfailure = \"site\"\n\
         raid = 1\nguidance = 2013\n",
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    let o = mailbench(&["plan", "--config", c, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["per_database"]["per_group"], 56);
    // A flag overrides the file.
    let o = mailbench(&["plan", "--config", c, "--json", "--headroom", "0"]);
    let v = json(&o);
    assert!((v["per_mailbox"]["iops_with_headroom"].as_f64().unwrap() - 0.1005).abs() < 1e-12);
    // Unknown keys are refused by name.
    std::fs::write(&cfg, "[plan]\nmailboxes = 10\nmailbox_qouta = \"4GB\"\n").unwrap();
    let o = mailbench(&["plan", "--config", c]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("mailbox_qouta"), "{}", stderr(&o));
}

#[test]
fn emit_config_writes_the_storage_test() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("storage.toml");
    let o = emit_small_storage_test(&out, "/mnt/db1,/mnt/db2");
    assert!(o.stdout.is_empty());
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("# Storage test written by `mailbench plan"));
    // It loads as a mailbench config file with only a [storage] section.
    let cfg = mailbench_base::config::ConfigFile::load(&out).unwrap();
    assert!(cfg.plan.is_none() && cfg.mail.is_none() && cfg.report.is_none());
    let st = cfg.storage.as_ref().unwrap();
    // Only keys of docs/storage-config.md.
    let allowed = documented_storage_keys();
    for k in st.keys() {
        assert!(
            allowed.contains(k),
            "key {k} is not in docs/storage-config.md"
        );
    }
    assert_eq!(st["databases"].as_integer(), Some(14));
    assert_eq!(st["profile"].as_str(), Some("exchange2013"));
    assert!((st["target_iops"].as_float().unwrap() - 452.49).abs() < 0.01);
}

/// The keys docs/storage-config.md shows in its example (`key = ...` or
/// `# key = ...` lines).
fn documented_storage_keys() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/storage-config.md");
    let text = std::fs::read_to_string(path).unwrap();
    let keys: Vec<String> = text
        .lines()
        .map(|l| l.trim_start_matches('#').trim_start())
        .filter_map(|l| l.split_once(" = ").map(|(k, _)| k.trim()))
        .filter(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .map(str::to_string)
        .collect();
    assert!(keys.contains(&"db_size".to_string()), "{keys:?}");
    keys
}

#[test]
fn plan_writes_nothing_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_mailbench"))
        .args(WORKED)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

fn assert_usage(args: &[&str], names: &[&str]) {
    let mut a = vec!["plan"];
    a.extend_from_slice(args);
    let o = mailbench(&a);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    let e = stderr(&o);
    for n in names {
        assert!(e.contains(n), "{args:?}: error does not name `{n}`: {e}");
    }
    assert!(o.stdout.is_empty(), "{args:?}");
}

#[test]
fn bad_inputs_exit_2_naming_the_input() {
    let base = ["--mailbox-quota", "4GB"];
    let b = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    };
    assert_usage(&b(&["--mailboxes", "-3"]), &["--mailboxes", "give 1 to"]);
    assert_usage(&b(&["--mailboxes", "100", "--copies", "-1"]), &["--copies"]);
    assert_usage(
        &b(&["--mailboxes", "100", "--copies", "4", "--servers", "3"]),
        &["--copies", "servers"],
    );
    assert_usage(
        &[
            "--mailboxes",
            "100",
            "--mailbox-quota",
            "50KB",
            "--message-size",
            "75KB",
        ],
        &["--mailbox-quota", "message"],
    );
    assert_usage(
        &b(&["--mailboxes", "100", "--disk", "floppy"]),
        &["--disk", "floppy", "nvme"],
    );
    assert_usage(&["--mailboxes", "100"], &["--mailbox-quota"]);
    assert_usage(&b(&[]), &["--mailboxes"]);
    assert_usage(&b(&["--mailboxes", "100", "--raid", "7"]), &["--raid"]);
    assert_usage(
        &b(&[
            "--mailboxes",
            "100",
            "--copies",
            "2",
            "--servers",
            "2",
            "--failure",
            "servers:2",
        ]),
        &["--failure"],
    );
    assert_usage(
        &b(&["--mailboxes", "100", "--failure", "site"]),
        &["--failure", "site"],
    );
    assert_usage(
        &b(&["--mailboxes", "100", "--headroom", "lots"]),
        &["--headroom"],
    );
    assert_usage(
        &b(&[
            "--mailboxes",
            "100",
            "--emit-config",
            "/nonexistent-mailbench-dir/storage.toml",
        ]),
        &[
            "--emit-config",
            "/nonexistent-mailbench-dir",
            "does not exist",
        ],
    );
    assert_usage(
        &b(&["--mailboxes", "100", "--guidance", "2007"]),
        &["--guidance"],
    );
    assert_usage(&b(&["--mailboxes", "abc"]), &["--mailboxes"]);
}

/// Every input has an upper bound from what a plan can mean: values past it are
/// refused (exit 2, the input and its maximum named), never computed.
#[test]
fn values_past_their_maxima_exit_2_naming_the_maximum() {
    let base = ["--mailbox-quota", "4GB", "--mailboxes", "1000"];
    for (extra, names) in [
        (
            &["--retention-days", "1e9"][..],
            &["--retention-days", "give 0 to 3650"][..],
        ),
        (&["--headroom", "1e30"][..], &["--headroom", "to 1000%"][..]),
        (
            &["--headroom", "1e30%"][..],
            &["--headroom", "to 1000%"][..],
        ),
        (&["--retention-days", "nan"][..], &["--retention-days"][..]),
    ] {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        assert_usage(&a, names);
    }
}

/// The contract with the storage engine: its own resolver accepts the emitted file unchanged.
#[test]
fn emitted_config_resolves_as_a_storage_test() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("storage.toml");
    let data = dir.path().join("data");
    emit_small_storage_test(&out, data.to_str().unwrap());
    let cfg = mailbench_base::config::ConfigFile::load(&out).unwrap();
    let spec = <mailbench_storage::spec::StorageSpec as mailbench_storage::spec::SpecExt>::resolve(
        Default::default(),
        &cfg,
        &data,
    )
    .unwrap();
    assert_eq!(spec.instances.len(), 14);
    assert_eq!(spec.mailboxes, Some(14 * 268));
    assert!((spec.target_iops.unwrap() - 452.49).abs() < 0.01);
    assert_eq!(spec.copies, 3);
    // 268 mailboxes x 43,445 KiB (1 % of 4.45 GB) per database, to whole pages.
    let want = 268 * 43445 * 1024u64;
    assert!(spec.instances[0].size_bytes <= want && spec.instances[0].size_bytes + 32768 > want);
}

/// A measured IOPS per mailbox (a mail sweep's `server.per_mailbox_real_day`) replaces the
/// guidance's figure everywhere: the text, the JSON, the emitted storage test; from a flag
/// or the `[plan]` key. Headroom still applies.
#[test]
fn a_measured_iops_per_mailbox_replaces_the_guidance() {
    let o = run(&with(&["--iops-per-mailbox", "0.14", "--json"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let f = |p: &str| v.pointer(p).and_then(serde_json::Value::as_f64).unwrap();
    assert_eq!(v["per_mailbox"]["iops_source"], "measured");
    assert!((f("/inputs/iops_per_mailbox") - 0.14).abs() < 1e-12);
    assert!((f("/per_mailbox/iops") - 0.14).abs() < 1e-12);
    assert!((f("/per_mailbox/iops_with_headroom") - 0.168).abs() < 1e-12);
    // The guidance's own figure is still reported, for comparison.
    assert!((f("/per_mailbox/guidance_iops") - 0.1005).abs() < 1e-12);
    let a = 268.0 * 0.168;
    assert!((f("/group/iops_normal") - (56.0 * a + 112.0 * a / 2.0)).abs() < 1e-6);
    assert!((f("/failure/worst_server_iops") - 14.0 * a).abs() < 1e-6);

    // Without it the source is the guidance.
    let o = run(&with(&["--json"]));
    let v = json(&o);
    assert_eq!(v["per_mailbox"]["iops_source"], "guidance");
    assert!(v["inputs"]["iops_per_mailbox"].is_null());

    // The text report names the source.
    let o = run(&with(&["--iops-per-mailbox", "0.14"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t = stdout(&o);
    for needle in [
        "IOPS per mailbox",
        "0.1400 (measured)",
        "measured (--iops-per-mailbox 0.1400), in place of the guidance's 0.1005",
        "0.1680 (+20 %)",
    ] {
        assert!(t.contains(needle), "missing `{needle}` in:\n{t}");
    }

    // The emitted storage test carries the measured target.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("storage.toml");
    let o = run(&with(&[
        "--iops-per-mailbox",
        "0.14",
        "--emit-config",
        out.to_str().unwrap(),
        "--quiet",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("measured (--iops-per-mailbox)"), "{text}");
    let cfg = mailbench_base::config::ConfigFile::load(&out).unwrap();
    let st = cfg.storage.as_ref().unwrap();
    assert!((st["target_iops"].as_float().unwrap() - 14.0 * a).abs() < 0.01);

    // The same from the [plan] key, and a flag overrides it.
    let cfg = dir.path().join("plan.toml");
    std::fs::write(
        &cfg,
        "[plan]\nmailboxes = 1000\nmailbox_quota = \"2GiB\"\niops_per_mailbox = 0.14\nheadroom = 0\n",
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    let o = mailbench(&["plan", "--config", c, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["per_mailbox"]["iops_source"], "measured");
    assert!((v["per_mailbox"]["iops_with_headroom"].as_f64().unwrap() - 0.14).abs() < 1e-12);
    let o = mailbench(&["plan", "--config", c, "--json", "--iops-per-mailbox", "0.5"]);
    let v = json(&o);
    assert!((v["per_mailbox"]["iops"].as_f64().unwrap() - 0.5).abs() < 1e-12);
}

/// Nonsense measured figures are refused (exit 2, the input named) before anything is
/// written: zero, negative, NaN, infinite, and past any mailbox (a compressed day's
/// figure taken by mistake); in the config file too.
#[test]
fn a_bad_iops_per_mailbox_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("storage.toml");
    let o_path = out.to_str().unwrap();
    for bad in ["0", "-0.1", "NaN", "inf", "190", "1e300"] {
        assert_usage(
            &[
                "--mailboxes",
                "1000",
                "--mailbox-quota",
                "2GiB",
                "--emit-config",
                o_path,
                "--iops-per-mailbox",
                bad,
            ],
            &["--iops-per-mailbox", "iops_per_mailbox"],
        );
        assert!(!out.exists(), "{bad}: the storage test was written");
    }
    let o = mailbench(&[
        "plan",
        "--mailboxes",
        "1000",
        "--mailbox-quota",
        "2GiB",
        "--iops-per-mailbox",
        "190",
    ]);
    assert!(
        stderr(&o).contains("(--iops-per-mailbox) = 190: give 0 to 10")
            && stderr(&o).contains("server.per_mailbox_real_day"),
        "{}",
        stderr(&o)
    );
    let cfg = dir.path().join("plan.toml");
    std::fs::write(
        &cfg,
        "[plan]\nmailboxes = 1000\nmailbox_quota = \"2GiB\"\niops_per_mailbox = -1\n",
    )
    .unwrap();
    let o = mailbench(&["plan", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("iops_per_mailbox"), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
}

/// The emitted file is also the whole test program's: the real loaders read its
/// `[suite]` (the program's defaults) and empty `[disclosure]`, and `storage suite
/// --config FILE` runs on it (a tiny shape given as flags over the file's sizes).
#[test]
fn emitted_config_runs_as_a_storage_suite() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("storage.toml");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    emit_small_storage_test(&out, data.to_str().unwrap());
    let cfg = mailbench_base::config::ConfigFile::load(&out).unwrap();
    let suite: mailbench_storage::spec::SuiteToml = cfg.section("suite").unwrap();
    let stress = suite.stress(false).unwrap();
    assert_eq!(stress, std::time::Duration::from_secs(24 * 3600));
    let stages: Vec<&str> = (suite.stages(stress).unwrap().iter())
        .map(|s| s.name())
        .collect();
    assert_eq!(
        stages,
        [
            "init",
            "performance",
            "stress",
            "backup",
            "recover",
            "verify"
        ]
    );
    assert_eq!(suite.pdf, Some(false));
    let declared: mailbench_results::disclosure::DisclosureToml =
        cfg.section("disclosure").unwrap();
    assert!(declared.is_empty());

    // The binary takes it: a short program of three stages on two small databases
    // (flags over the file's count and sizes).
    let results = dir.path().join("out");
    let o = mailbench(&[
        "storage",
        "suite",
        "--config",
        out.to_str().unwrap(),
        "--quick",
        "--databases",
        "2",
        "--mailboxes",
        "2",
        "--mailbox-quota",
        "16MiB",
        "--cache-size",
        "8MiB",
        "--threads",
        "2",
        "--warmup",
        "1s",
        "--duration",
        "2s",
        "--sample-interval",
        "1s",
        "--stages",
        "init,performance,verify",
        "--output",
        results.to_str().unwrap(),
    ]);
    // The small shape misses the plan's IOPS target (exit 1); it must run.
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let folder = (std::fs::read_dir(&results).unwrap())
        .map(|e| e.unwrap().path())
        .find(|p| p.join("result.json").is_file())
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("result.json")).unwrap()).unwrap();
    assert_eq!(v["kind"], "storage-suite", "{v}");
    let ran: Vec<&str> = (v["stages"].as_array().unwrap().iter())
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(ran, ["init", "performance", "verify"], "{v}");
}
