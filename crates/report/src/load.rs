//! Reading result.json files (and the intervals.jsonl and test.log beside
//! them). Every failure names the file and is a usage error (exit 2).

use mailbench_base::{Error, Result};
use mailbench_results::SCHEMA_VERSION;
use mailbench_results::storage::run::{IntervalRecord, StorageResult};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The `merged` section of a merged mail result.
pub type MailMerged = mailbench_results::merged::Merged<mailbench_results::mail::run::MailHost>;

/// A loaded result of any kind.
#[derive(Debug)]
pub enum Doc {
    Storage(Box<StorageDoc>),
    Mail(Box<MailDoc>),
    /// Any other kind (storage-init, -verify, -backup, -recover...): rendered
    /// generically.
    Other(Box<OtherDoc>),
}

#[derive(Debug, Clone)]
pub struct StorageDoc {
    pub source: PathBuf,
    /// `result.merged` is set when it is a `report merge` of several hosts.
    pub result: StorageResult,
    pub intervals: Vec<IntervalRecord>,
    /// Lines of intervals.jsonl that could not be read.
    pub bad_interval_lines: usize,
    /// What is wrong with intervals.jsonl, naming it (None: it read whole).
    pub intervals_problem: Option<String>,
    pub test_log: Option<String>,
    pub raw: Value,
}

#[derive(Debug, Clone)]
pub struct MailDoc {
    pub source: PathBuf,
    pub raw: Value,
    /// Present when the result is a `report merge` of several load generators.
    pub merged: Option<MailMerged>,
    pub intervals: Vec<Value>,
    /// What is wrong with intervals.jsonl, naming it (None: it read whole).
    pub intervals_problem: Option<String>,
    pub test_log: Option<String>,
}

#[derive(Debug, Clone)]
pub struct OtherDoc {
    pub source: PathBuf,
    pub kind: String,
    pub raw: Value,
    pub test_log: Option<String>,
}

impl Doc {
    /// What is wrong with the intervals.jsonl beside the result, naming it
    /// (None: it read whole, or the kind keeps none).
    pub fn intervals_problem(&self) -> Option<&str> {
        match self {
            Doc::Storage(d) => d.intervals_problem.as_deref(),
            Doc::Mail(d) => d.intervals_problem.as_deref(),
            Doc::Other(_) => None,
        }
    }

    pub fn kind(&self) -> String {
        match self {
            Doc::Storage(d) => d.result.run.kind.clone(),
            Doc::Mail(_) => "mail-run".into(),
            Doc::Other(d) => d.kind.clone(),
        }
    }
    pub fn source(&self) -> &Path {
        match self {
            Doc::Storage(d) => &d.source,
            Doc::Mail(d) => &d.source,
            Doc::Other(d) => &d.source,
        }
    }
    pub fn raw(&self) -> &Value {
        match self {
            Doc::Storage(d) => &d.raw,
            Doc::Mail(d) => &d.raw,
            Doc::Other(d) => &d.raw,
        }
    }
}

/// The `kind` of a result: top level (storage) or in the `run` header (mail).
pub fn kind_of(v: &Value) -> Option<&str> {
    v.get("kind").and_then(Value::as_str).or_else(|| {
        v.get("run")
            .and_then(|r| r.get("kind"))
            .and_then(Value::as_str)
    })
}

/// The schema version: top level or in the `run` header.
pub fn schema_version_of(v: &Value) -> Option<u64> {
    v.get("schema_version").and_then(Value::as_u64).or_else(|| {
        v.get("run")
            .and_then(|r| r.get("schema_version"))
            .and_then(Value::as_u64)
    })
}

/// `path` is a result.json or a run folder holding one.
pub fn result_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("result.json")
    } else {
        path.to_path_buf()
    }
}

/// Loads a result.json (or a run folder) with its intervals and test log.
pub fn load(path: &Path) -> Result<Doc> {
    let file = result_path(path);
    let text = mailbench_base::limits::read_text_capped(
        &file,
        mailbench_base::limits::MAX_RESULT_FILE_BYTES,
        "result",
    )?;
    let raw = parse_lenient(&text).map_err(|e| {
        Error::usage(format!(
            "{} is not a mailbench result.json: {e}",
            file.display()
        ))
    })?;
    from_value(raw, &file)
}

/// Interprets an already-parsed result. `file` is where it lives (its folder
/// holds intervals.jsonl and test.log).
pub fn from_value(raw: Value, file: &Path) -> Result<Doc> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let Some(kind) = kind_of(&raw).map(str::to_string) else {
        return Err(Error::usage(format!(
            "{} is not a mailbench result.json: it has no \"kind\"",
            file.display()
        )));
    };
    if let Some(v) = schema_version_of(&raw)
        && v > u64::from(SCHEMA_VERSION)
    {
        return Err(Error::usage(format!(
            "{} has result schema version {v}; this mailbench reads up to version {SCHEMA_VERSION}: \
             use a newer mailbench",
            file.display()
        )));
    }
    let test_log = read_tail(&dir.join("test.log"), 600);
    match kind.as_str() {
        "storage-run" => {
            let result: StorageResult = serde_json::from_value(raw.clone()).map_err(|e| {
                Error::usage(format!(
                    "{} is not a readable storage-run result: {e}",
                    file.display()
                ))
            })?;
            let (intervals, bad, intervals_problem) = if result.intervals_file.is_empty() {
                (Vec::new(), 0, None)
            } else {
                read_intervals::<IntervalRecord>(&dir.join(&result.intervals_file))
            };
            Ok(Doc::Storage(Box::new(StorageDoc {
                source: file.to_path_buf(),
                result,
                intervals,
                bad_interval_lines: bad,
                intervals_problem,
                test_log,
                raw,
            })))
        }
        "mail-run" => {
            let mut raw = raw;
            mailbench_results::kind::upgrade_v1(mailbench_results::Kind::MailRun, &mut raw);
            let (intervals, _, intervals_problem) =
                read_intervals::<Value>(&dir.join("intervals.jsonl"));
            let merged = match raw.get("merged") {
                Some(m) => Some(
                    serde_json::from_value::<MailMerged>(m.clone()).map_err(|e| {
                        Error::usage(format!(
                            "{}: its \"merged\" section is not readable: {e}",
                            file.display()
                        ))
                    })?,
                ),
                None => None,
            };
            Ok(Doc::Mail(Box::new(MailDoc {
                source: file.to_path_buf(),
                raw,
                merged,
                intervals,
                intervals_problem,
                test_log,
            })))
        }
        _ => Ok(Doc::Other(Box::new(OtherDoc {
            source: file.to_path_buf(),
            kind,
            raw,
            test_log,
        }))),
    }
}

/// Reads a JSON-lines file mailbench wrote: the records that read, how many
/// lines did not, and what is wrong with the file when anything is (missing,
/// unreadable, over its limit, lines that do not read: the first one named),
/// naming the file. A report shows what reads and says what did not; a merge,
/// which recomputes from these records, refuses such a file.
fn read_intervals<T: serde::de::DeserializeOwned>(path: &Path) -> (Vec<T>, usize, Option<String>) {
    let text = match mailbench_base::limits::read_text_capped(
        path,
        mailbench_base::limits::MAX_RESULT_FILE_BYTES,
        "intervals",
    ) {
        Ok(t) => t,
        // The error names the file.
        Err(e) => return (Vec::new(), 0, Some(e.to_string())),
    };
    let mut out = Vec::new();
    let mut bad = 0;
    let mut first_bad = None;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<T>(line) {
            Ok(r) => out.push(r),
            Err(e) => {
                bad += 1;
                first_bad.get_or_insert((n + 1, e.to_string()));
            }
        }
    }
    let problem = first_bad.map(|(line, e)| {
        format!(
            "{}: {bad} {} not read (first: line {line}: {e}); the file is truncated or damaged",
            path.display(),
            if bad == 1 { "line does" } else { "lines do" }
        )
    });
    (out, bad, problem)
}

/// The last `max_lines` lines of a text file.
fn read_tail(path: &Path, max_lines: usize) -> Option<String> {
    let text = mailbench_base::limits::read_text_capped(
        path,
        mailbench_base::limits::MAX_RESULT_FILE_BYTES,
        "test log",
    )
    .ok()?;
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= max_lines {
        return Some(text);
    }
    let skipped = lines.len() - max_lines;
    Some(format!(
        "[… {skipped} earlier lines in test.log]\n{}\n",
        lines[skipped..].join("\n")
    ))
}

/// Parses JSON, keeping every top-level key: results written before schema
/// fix 489b1fb had two `host` keys (the run's host facts and the host
/// performance); the second is read as `host_performance`.
pub fn parse_lenient(text: &str) -> std::result::Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let entries = de.deserialize_any(EntriesVisitor)?;
    de.end()?;
    match entries {
        Top::Object(pairs) => {
            let mut m = Map::new();
            for (k, v) in pairs {
                let is_perf = v.get("cpu_busy_avg_pct").is_some() && v.get("hostname").is_none();
                if k == "host" && is_perf {
                    m.insert("host_performance".into(), v);
                } else {
                    m.insert(k, v);
                }
            }
            Ok(Value::Object(m))
        }
        Top::Other(v) => Ok(v),
    }
}

enum Top {
    Object(Vec<(String, Value)>),
    Other(Value),
}

struct EntriesVisitor;

impl<'de> Visitor<'de> for EntriesVisitor {
    type Value = Top;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> std::result::Result<Top, A::Error> {
        let mut v = Vec::new();
        while let Some((k, x)) = m.next_entry::<String, Value>()? {
            v.push((k, x));
        }
        Ok(Top::Object(v))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut s: A,
    ) -> std::result::Result<Top, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = s.next_element::<Value>()? {
            v.push(x);
        }
        Ok(Top::Other(Value::Array(v)))
    }
    fn visit_str<E>(self, s: &str) -> std::result::Result<Top, E> {
        Ok(Top::Other(Value::String(s.into())))
    }
    fn visit_bool<E>(self, b: bool) -> std::result::Result<Top, E> {
        Ok(Top::Other(Value::Bool(b)))
    }
    fn visit_i64<E>(self, n: i64) -> std::result::Result<Top, E> {
        Ok(Top::Other(Value::from(n)))
    }
    fn visit_u64<E>(self, n: u64) -> std::result::Result<Top, E> {
        Ok(Top::Other(Value::from(n)))
    }
    fn visit_f64<E>(self, n: f64) -> std::result::Result<Top, E> {
        Ok(Top::Other(Value::from(n)))
    }
    fn visit_unit<E>(self) -> std::result::Result<Top, E> {
        Ok(Top::Other(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_host_keys_are_split() {
        let v = parse_lenient(
            r#"{"kind":"storage-run","host":{"hostname":"a"},"x":1,"host":{"cpu_busy_avg_pct":3.0}}"#,
        )
        .unwrap();
        assert_eq!(v["host"]["hostname"], "a");
        assert_eq!(v["host_performance"]["cpu_busy_avg_pct"], 3.0);
        assert!(parse_lenient("[1,2]").unwrap().is_array());
        assert!(parse_lenient("{").is_err());
        assert!(parse_lenient("{} x").is_err());
    }

    #[test]
    fn kinds() {
        let v: Value = serde_json::json!({"run": {"kind": "mail-run", "schema_version": 1}});
        assert_eq!(kind_of(&v), Some("mail-run"));
        assert_eq!(schema_version_of(&v), Some(1));
        let e = from_value(serde_json::json!({"a": 1}), Path::new("/x/result.json")).unwrap_err();
        assert!(e.to_string().contains("/x/result.json"));
        let e = from_value(
            serde_json::json!({"kind": "storage-run", "schema_version": 99}),
            Path::new("r.json"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("version 99"), "{e}");
    }
}
