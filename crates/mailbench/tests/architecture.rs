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
            "mailbench-metrics",
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

/// The attribute every crate root carries: a declared dependency the crate
/// does not use fails its build (outside tests, where dev-dependencies are
/// linked too).
const UNUSED_DEPS_DENIED: &str = "#![cfg_attr(not(test), deny(unused_crate_dependencies))]";

#[test]
fn every_crate_denies_unused_dependencies() {
    let mut missing = Vec::new();
    for (name, dir, _) in packages() {
        let roots = ["src/lib.rs", "src/main.rs"].map(|r| dir.join(r));
        for root in roots.iter().filter(|r| r.is_file()) {
            if !std::fs::read_to_string(root)
                .unwrap()
                .contains(UNUSED_DEPS_DENIED)
            {
                missing.push(format!("{name}: {}", root.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "crate roots without `{UNUSED_DEPS_DENIED}`: {missing:#?}"
    );
}

/// Module circles still to break, as `crate: a,b,c` (sorted): the test fails
/// on a circle not listed here, and on a listed one that is gone (take it
/// off the list).
const CIRCLES_LEFT: &[&str] = &[];

/// The top-level modules of a crate's `src/` (a file, or a folder with its
/// files) and the files of each. A `tests.rs` is a module's
/// `#[cfg(test)] mod tests;` (test code, as a file's part after
/// `#[cfg(test)]` is): left out.
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut out: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let p = e.path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "lib" || name == "main" || name == "tests" {
            continue;
        }
        if p.is_dir() {
            let mut files = Vec::new();
            rust_files(&p, &mut files);
            files.retain(|f| f.file_name().is_some_and(|n| n != "tests.rs"));
            out.entry(name).or_default().extend(files);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.entry(name).or_default().push(p);
        }
    }
    out
}

/// The modules a file names (`crate::m`, and `super::m` from a top-level
/// file), its tests and comments left out.
fn named_modules(text: &str, top_level: bool) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let mut prefixes = vec!["crate::"];
        if top_level {
            prefixes.push("super::");
        }
        for prefix in prefixes {
            for (i, _) in line.match_indices(prefix) {
                let rest = &line[i + prefix.len()..];
                let m: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !m.is_empty() {
                    out.insert(m);
                }
            }
        }
    }
    out
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        for w in &t.g[v] {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.stack.contains(&w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_module_circles() {
    let mut found = BTreeSet::new();
    for (name, dir, _) in packages() {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let mods = modules(&src);
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (m, files) in &mods {
            let edges = graph.entry(m.clone()).or_default();
            for f in files {
                let top = f.parent() == Some(src.as_path());
                let text = std::fs::read_to_string(f).unwrap();
                for n in named_modules(&text, top) {
                    if &n != m && mods.contains_key(&n) {
                        edges.insert(n);
                    }
                }
            }
        }
        for c in circles(&graph) {
            found.insert(format!("{name}: {}", c.join(",")));
        }
    }
    let left: BTreeSet<String> = CIRCLES_LEFT.iter().map(|s| s.to_string()).collect();
    let new: Vec<&String> = found.difference(&left).collect();
    let gone: Vec<&String> = left.difference(&found).collect();
    assert!(new.is_empty(), "module circles: {new:#?}");
    assert!(
        gone.is_empty(),
        "broken circles still listed in CIRCLES_LEFT: {gone:#?}"
    );
}

#[test]
fn circles_are_found() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c"]),
        ("c", &["a"]),
        ("d", &["a"]),
        ("e", &[]),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
    .collect();
    assert_eq!(circles(&g), vec![vec!["a", "b", "c"]]);
    let named = named_modules("use crate::x::Y; // crate::z\nsuper::w();", true);
    assert_eq!(named, ["w", "x"].map(String::from).into());
}
