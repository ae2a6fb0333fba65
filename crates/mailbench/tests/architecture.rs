//! The dependency rule of docs/ARCHITECTURE.md, checked on the workspace as
//! Cargo sees it (`cargo metadata`): each crate depends (normal dependencies;
//! tests may use more) only on the crates below it, and only io-engines may
//! contain `unsafe`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Each crate of ours and the crates of ours it may depend on.
const RULE: &[(&str, &[&str])] = &[
    ("mailbench-base", &[]),
    ("mailbench-metrics", &["mailbench-base"]),
    ("mailbench-io", &[]),
    (
        "mailbench-results",
        &["mailbench-base", "mailbench-metrics"],
    ),
    (
        "mailbench-storage",
        &[
            "mailbench-base",
            "mailbench-metrics",
            "mailbench-results",
            "mailbench-io",
        ],
    ),
    (
        "mailbench-mail",
        &["mailbench-base", "mailbench-metrics", "mailbench-results"],
    ),
    (
        "mailbench-plan",
        &["mailbench-base", "mailbench-metrics", "mailbench-results"],
    ),
    (
        "mailbench-report",
        &["mailbench-base", "mailbench-metrics", "mailbench-results"],
    ),
    // The transport of a test over ranks: MPI or one process, and the side
    // channel; it knows nothing of commands.
    (
        "mailbench-multihost",
        &["mailbench-base", "mailbench-results"],
    ),
    // The driver: every command's run over the world, above the workloads
    // and the transport.
    (
        "mailbench-runner",
        &[
            "mailbench-base",
            "mailbench-results",
            "mailbench-storage",
            "mailbench-mail",
            "mailbench-report",
            "mailbench-multihost",
        ],
    ),
    // The binary: flags, dispatch, exit codes.
    (
        "mailbench",
        &[
            "mailbench-base",
            "mailbench-results",
            "mailbench-storage",
            "mailbench-mail",
            "mailbench-plan",
            "mailbench-report",
            "mailbench-runner",
        ],
    ),
];

/// The only crate that may use `unsafe` (aligned buffers, io_uring).
const UNSAFE_ALLOWED: &str = "mailbench-io";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (package name, its manifest folder, its normal dependencies of ours).
fn packages() -> Vec<(String, PathBuf, BTreeSet<String>)> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut v = Vec::new();
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap().to_string();
        let dir = Path::new(p["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap()
            .to_path_buf();
        let deps = (p["dependencies"].as_array().unwrap().iter())
            .filter(|d| d["kind"].is_null() && d["path"].is_string())
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect();
        v.push((name, dir, deps));
    }
    v
}

#[test]
fn every_crate_depends_only_on_the_crates_below_it() {
    let rule: BTreeMap<&str, &[&str]> = RULE.iter().copied().collect();
    let mut broken = Vec::new();
    for (name, _, deps) in packages() {
        let Some(allowed) = rule.get(name.as_str()) else {
            broken.push(format!(
                "{name} is not placed in the rule (tests/architecture.rs, docs/ARCHITECTURE.md)"
            ));
            continue;
        };
        for d in &deps {
            if !allowed.contains(&d.as_str()) {
                broken.push(format!("{name} depends on {d}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "the dependency rule is broken: {broken:#?}"
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn only_io_engines_holds_unsafe() {
    let mut found = Vec::new();
    for (name, dir, _) in packages() {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let src = dir.join("src");
        if name == UNSAFE_ALLOWED || !src.is_dir() {
            continue;
        }
        // The workspace lints (unsafe_code = "deny") must apply.
        if !manifest.contains("[lints]\nworkspace = true") {
            found.push(format!(
                "{name}: Cargo.toml does not take the workspace lints"
            ));
        }
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                let words: Vec<&str> = code
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .collect();
                if words.contains(&"unsafe") || code.contains("allow(unsafe_code)") {
                    found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "unsafe outside io-engines: {found:#?}");
}
