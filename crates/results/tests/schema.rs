//! The JSON Schemas under schema/ are generated from the result types, and
//! real results (schema version 1 files written by mailbench, kept under
//! tests/fixtures/v1) load into the types, keep every key and value through a
//! read and write, and validate against their kind's schema.
//!
//! `MAILBENCH_WRITE_SCHEMAS=1 cargo test -p mailbench-results --test schema`
//! rewrites schema/ after a change of the types.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mailbench_results::{AnyResult, Kind};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn schema_path(k: Kind) -> PathBuf {
    repo()
        .join("schema")
        .join(format!("{}.schema.json", k.name()))
}

fn generated(k: Kind) -> String {
    let mut text = serde_json::to_string_pretty(&k.schema()).unwrap();
    text.push('\n');
    text
}

#[test]
fn committed_schemas_are_the_generated_ones() {
    let write = std::env::var_os("MAILBENCH_WRITE_SCHEMAS").is_some();
    let mut stale = Vec::new();
    for k in Kind::ALL {
        let path = schema_path(*k);
        let want = generated(*k);
        if write {
            std::fs::write(&path, &want).unwrap();
        }
        if std::fs::read_to_string(&path).ok().as_deref() != Some(want.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} differ from the result types: run \
         `MAILBENCH_WRITE_SCHEMAS=1 cargo test -p mailbench-results --test schema` and commit"
    );
}

/// Every fixture: (file, its kind).
fn fixtures() -> Vec<(PathBuf, Kind)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let name = mailbench_results::kind::kind_of(&v).unwrap().to_string();
            if let Some(k) = Kind::parse(&name) {
                out.push((p, k));
            }
        }
    }
    out.sort();
    assert!(out.len() >= 5, "fixtures missing in {}", dir.display());
    out
}

fn read(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The differences between two values, as paths (at most a few).
fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) => diff(v, w, &format!("{path}.{k}"), out),
                    None => out.push(format!("{path}.{k} lost")),
                }
            }
            for k in y.keys().filter(|k| !x.contains_key(*k)) {
                out.push(format!("{path}.{k} added"));
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                diff(v, w, &format!("{path}[{i}]"), out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} became {b}")),
        _ => {}
    }
}

#[test]
fn version_1_files_load_and_keep_every_key() {
    for (p, kind) in fixtures() {
        let raw = read(&p);
        let r =
            AnyResult::from_value(raw.clone()).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(r.kind(), kind);
        let back = r.to_value().unwrap();
        // Keys renamed since are expected under their new names, with their
        // values; nothing else may be lost or change its value.
        let mut expected = raw.clone();
        mailbench_results::kind::upgrade_v1(kind, &mut expected);
        let mut d = Vec::new();
        diff(&expected, &back, "", &mut d);
        // Fields added since (with their defaults) may appear.
        d.retain(|x| !x.ends_with(" added"));
        assert!(d.is_empty(), "{}: {d:?}", p.display());
    }
}

/// Version 1 mail-run files named the whole day's weighted p95 response time
/// `score` (and a merge's hosts `score_ms`): they load with the figure under
/// `response_time` (`response_time_ms`), the old key gone.
#[test]
fn the_mail_run_score_key_is_read_as_response_time() {
    let mut seen_hosts = 0;
    let mail_runs: Vec<_> = (fixtures().into_iter())
        .filter(|(_, k)| *k == Kind::MailRun)
        .collect();
    assert!(mail_runs.len() >= 2, "mail-run fixtures missing");
    for (p, kind) in mail_runs {
        let raw = read(&p);
        assert!(
            raw.get("score").is_some(),
            "{}: not an old file",
            p.display()
        );
        let back = AnyResult::from_value(raw.clone())
            .unwrap()
            .to_value()
            .unwrap();
        assert_eq!(back.get("score"), None, "{}", p.display());
        assert_eq!(back["response_time"], raw["score"], "{}", p.display());
        assert!(back["response_time"]["weighted_p95_ms"].as_f64().unwrap() > 0.0);
        let hosts = raw.pointer("/merged/hosts").and_then(Value::as_array);
        for (i, h) in hosts.into_iter().flatten().enumerate() {
            let b = &back["merged"]["hosts"][i];
            assert_eq!(b.get("score_ms"), None);
            assert_eq!(b["response_time_ms"], h["score_ms"]);
            seen_hosts += 1;
        }
        // A file already in today's shape is left as it is.
        let mut again = back.clone();
        mailbench_results::kind::upgrade_v1(kind, &mut again);
        assert_eq!(again, back);
    }
    assert!(seen_hosts >= 2, "the merged fixture has no hosts");
}

#[test]
fn real_results_validate_against_their_schema() {
    for (p, kind) in fixtures() {
        let mut raw = read(&p);
        mailbench_results::kind::upgrade_v1(kind, &mut raw);
        let errors = validate(kind, &raw);
        assert!(errors.is_empty(), "{}: {errors}", p.display());
    }
}

#[test]
fn the_schema_refuses_what_the_types_refuse() {
    let (p, kind) = fixtures()
        .into_iter()
        .find(|(_, k)| *k == Kind::StorageRun)
        .unwrap();
    let mut v = read(&p);
    v["verdict"]["status"] = "maybe".into();
    assert!(!validate(kind, &v).is_empty());
    assert!(AnyResult::from_value(v).is_err());
    let mut v = read(&p);
    v["total"]["surprise"] = 1.into();
    assert!(
        !validate(kind, &v).is_empty(),
        "a key the types do not name"
    );
    let mut v = read(&p);
    v.as_object_mut().unwrap().remove("total");
    assert!(!validate(kind, &v).is_empty());
    assert!(AnyResult::from_value(v).is_err());
}

/// Validation errors of `v` against the committed schema of `kind` ("" when valid).
fn validate(kind: Kind, v: &Value) -> String {
    let schema: Value = serde_json::from_str(&generated(kind)).unwrap();
    let mut schemas = boon::Schemas::new();
    let mut c = boon::Compiler::new();
    let url = format!("https://mailbench.invalid/{}.schema.json", kind.name());
    c.add_resource(&url, schema).unwrap();
    let id = c.compile(&url, &mut schemas).unwrap();
    match schemas.validate(v, id) {
        Ok(()) => String::new(),
        Err(e) => format!("{e:#}"),
    }
}
