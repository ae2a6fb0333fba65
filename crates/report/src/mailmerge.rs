//! `report merge` of mail-run results: several load generators, each driving a
//! slice of the users (`mail run --first-user K --users N`), merged into the
//! result one generator driving all those users would have written.
//!
//! * per-task and per-operation histograms are **added** and every percentile
//!   is read from the sum (never averaged); counts, errors and skips are summed;
//! * the weighted 95th-percentile score and the verdict are recomputed with
//!   mailbench-mail's own rules (`mailbench_mail::judge`) and the inputs'
//!   thresholds (results judged differently are refused);
//! * mail-flow counts are summed and the per-user and per-hour figures
//!   recomputed from the sums (users summed; the real hours are the day, not a
//!   sum); the delivery-latency histogram is added and the share of
//!   deliveries in time recomputed from the summed counts;
//! * intervals are aligned by their index (`t_s` / `interval_s`) and added.
//!
//! The result has the shape of a mail-run result plus a `merged` section with
//! one row per generator. The inputs are read as JSON, generically, so that
//! additions to the mail result never break a merge.

use crate::load::MailDoc;
use crate::mailhtml::{at, fnum};
use mailbench_base::host::HostInfo;
use mailbench_base::{Error, Result, parse_duration};
use mailbench_mail::judge::{self, Criteria, Figures};
use mailbench_mail::profile::{Profile, TaskKind};
use mailbench_mail::stats::IntervalOp;
use mailbench_metrics::LatencyHist;
use mailbench_metrics::system::DiskRates;
use mailbench_results::merged::{common_or_mixed, merged_host};
use mailbench_results::{RunHeader, Status, Verdict};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Error samples kept in a merged result (as in one run).
const MAX_SAMPLES: usize = 50;

/// The `merged` section of a merged mail result.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct MailMerged {
    /// The result files merged, in order.
    pub sources: Vec<String>,
    /// One row per load generator (merged inputs contribute their rows).
    pub hosts: Vec<MailHost>,
}

/// One load generator's own figures inside a merged mail result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MailHost {
    /// Unique label (the hostname, `#2`... appended when it repeats); the
    /// generator's warnings and error samples are prefixed `label:`.
    pub label: String,
    pub source: String,
    pub hostname: String,
    pub started: String,
    pub ended: String,
    pub run_id: String,
    /// The IMAP server it drove.
    pub target: String,
    pub user_format: String,
    pub first_user: u64,
    pub users: u64,
    pub score_ms: f64,
    pub submitted: u64,
    pub expected_deliveries: u64,
    pub delivered: u64,
    pub within_pct: f64,
    pub errors: u64,
    pub error_rate_pct: f64,
    pub verdict: Verdict,
}

/// A merged mail result: result.json (with `merged`) and intervals.jsonl.
pub struct MailMergeOutput {
    pub result: Value,
    pub merged: MailMerged,
    pub intervals: Vec<Value>,
}

impl MailMergeOutput {
    pub fn verdict(&self) -> Verdict {
        verdict_of(&self.result)
    }
}

/// The verdict of a mail result (error when unreadable).
pub fn verdict_of(r: &Value) -> Verdict {
    r.get("verdict")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or(Verdict {
            status: Status::Error,
            reasons: vec!["The result has no readable verdict.".into()],
        })
}

fn u(v: &Value, path: &str) -> u64 {
    at(v, path).and_then(Value::as_u64).unwrap_or(0)
}

fn f(v: &Value, path: &str) -> f64 {
    fnum(v, path).unwrap_or(0.0)
}

fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or_default()
}

fn name(d: &MailDoc) -> String {
    d.source.display().to_string()
}

/// A histogram at `path` under `v` (missing or empty: an empty histogram).
fn hist(d: &MailDoc, v: &Value, path: &str, what: &str) -> Result<LatencyHist> {
    match at(v, path) {
        None | Some(Value::Null) => Ok(LatencyHist::new()),
        Some(Value::String(t)) => LatencyHist::from_base64(t)
            .map_err(|e| Error::usage(format!("{}: {what} {path}: {e}", name(d)))),
        Some(_) => Err(Error::usage(format!(
            "{}: {what} {path} is not a histogram string",
            name(d)
        ))),
    }
}

/// The same figures as `mail run` writes for a histogram (ms).
pub use mailbench_mail::command::summary_ms;

/// A duration recorded as text (`"1m"`) or seconds.
fn dur(v: Option<&Value>) -> Option<Duration> {
    match v? {
        Value::String(t) => parse_duration(t).ok(),
        Value::Number(n) => n
            .as_f64()
            .filter(|x| *x >= 0.0)
            .map(Duration::from_secs_f64),
        _ => None,
    }
}

/// The verdict thresholds of a mail result (its `config`).
pub fn criteria(d: &MailDoc) -> Result<Criteria> {
    let c = &d.raw["config"];
    let num = |k: &str| {
        c.get(k).and_then(Value::as_f64).ok_or_else(|| {
            Error::usage(format!(
                "{} is not a readable mail-run result: it has no config.{k}",
                name(d)
            ))
        })
    };
    Ok(Criteria {
        max_score_ms: num("max_score_ms")?,
        max_error_rate_pct: num("max_error_rate_pct")?,
        delivery_pct: num("delivery_pct")?,
        delivery_within: dur(c.get("delivery_within")).ok_or_else(|| {
            Error::usage(format!(
                "{} is not a readable mail-run result: it has no config.delivery_within",
                name(d)
            ))
        })?,
    })
}

/// Checks that the results are of the same test, judged the same way; the
/// message names both files (a usage error, exit 2).
pub fn check_compatible(docs: &[MailDoc]) -> Result<()> {
    let Some(first) = docs.first() else {
        return Err(Error::usage("report merge needs at least two result files"));
    };
    let ca = criteria(first)?;
    for d in &docs[1..] {
        let names = format!("{} and {}", name(first), name(d));
        let (a, b) = (&first.raw, &d.raw);
        let (pa, pb) = (s(a, "profile.name"), s(b, "profile.name"));
        if pa != pb {
            return Err(Error::usage(format!(
                "cannot merge {names}: different profiles ({pa} vs {pb}); merge only results of the same test"
            )));
        }
        if a.get("profile") != b.get("profile") {
            return Err(Error::usage(format!(
                "cannot merge {names}: profile {pa} has different settings in each (a changed profile file?); merge only results of the same test"
            )));
        }
        let cb = criteria(d)?;
        if ca != cb {
            let mut diff = Vec::new();
            if ca.max_score_ms != cb.max_score_ms {
                diff.push(format!(
                    "max score {} vs {} ms",
                    ca.max_score_ms, cb.max_score_ms
                ));
            }
            if ca.max_error_rate_pct != cb.max_error_rate_pct {
                diff.push(format!(
                    "max error rate {} vs {} %",
                    ca.max_error_rate_pct, cb.max_error_rate_pct
                ));
            }
            if ca.delivery_pct != cb.delivery_pct {
                diff.push(format!(
                    "deliveries in time {} vs {} %",
                    ca.delivery_pct, cb.delivery_pct
                ));
            }
            if ca.delivery_within != cb.delivery_within {
                diff.push(format!(
                    "delivery limit {:?} vs {:?}",
                    ca.delivery_within, cb.delivery_within
                ));
            }
            return Err(Error::usage(format!(
                "cannot merge {names}: different verdict thresholds ({}); merge only results judged the same way",
                diff.join(", ")
            )));
        }
        let (da, db) = (
            dur(at(a, "config.day_length")),
            dur(at(b, "config.day_length")),
        );
        if da != db {
            return Err(Error::usage(format!(
                "cannot merge {names}: different day lengths ({} vs {}): the simulated day was compressed differently; merge only results of the same test",
                s(a, "config.day_length"),
                s(b, "config.day_length")
            )));
        }
    }
    Ok(())
}

/// Adds the numbers of `b` into `a` key by key (maps of counts).
fn add_counts(a: &mut BTreeMap<String, u64>, b: Option<&Value>) {
    for (k, v) in b.and_then(Value::as_object).into_iter().flatten() {
        *a.entry(k.clone()).or_default() += v.as_u64().unwrap_or(0);
    }
}

/// Deliveries seen within the limit: recorded by newer results, else exactly
/// recoverable from the percentage and the expected count.
fn delivered_within(r: &Value) -> u64 {
    at(r, "delivery_latency.delivered_within")
        .and_then(Value::as_u64)
        .unwrap_or_else(|| {
            let exp = u(r, "mail_flow.expected_deliveries");
            if exp == 0 {
                0
            } else {
                (f(r, "delivery_latency.within_pct") * exp as f64 / 100.0).round() as u64
            }
        })
}

/// Operations attempted (the error rate's denominator), as `mail run` counts
/// them: tasks and other operations completed or failed, plus deliveries
/// that never arrived.
fn attempts(r: &Value) -> u64 {
    let mut n = 0;
    for sect in ["tasks", "operations"] {
        for t in r
            .get(sect)
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.values())
        {
            n += u(t, "count") + u(t, "errors");
        }
    }
    n + u(r, "mail_flow.expected_deliveries").saturating_sub(u(r, "mail_flow.delivered"))
}

fn disk_rates(v: Option<&Value>) -> Option<DiskRates> {
    v.filter(|x| !x.is_null())
        .and_then(|x| serde_json::from_value(x.clone()).ok())
}

/// Disk rates of several load generators' servers. The same device seen
/// from the same host (several generators on one machine, or their local
/// servers on one disk) counts once (its busiest reading); different devices
/// add up. Latencies are weighted by operations, utilisation is the highest.
fn combine_disks(parts: &[(String, DiskRates)]) -> Option<DiskRates> {
    let mut by: BTreeMap<&str, DiskRates> = BTreeMap::new();
    for (key, r) in parts {
        let e = by.entry(key.as_str()).or_insert(*r);
        if r.reads_per_s + r.writes_per_s > e.reads_per_s + e.writes_per_s {
            *e = *r;
        }
    }
    if by.is_empty() {
        return None;
    }
    let mut t = DiskRates::default();
    let (mut rl, mut wl) = (0.0, 0.0);
    for r in by.values() {
        t.reads_per_s += r.reads_per_s;
        t.writes_per_s += r.writes_per_s;
        t.read_bytes_per_s += r.read_bytes_per_s;
        t.write_bytes_per_s += r.write_bytes_per_s;
        t.queue_depth += r.queue_depth;
        t.utilisation_pct = t.utilisation_pct.max(r.utilisation_pct);
        rl += r.read_latency_ms * r.reads_per_s;
        wl += r.write_latency_ms * r.writes_per_s;
    }
    t.read_latency_ms = if t.reads_per_s > 0.0 {
        rl / t.reads_per_s
    } else {
        0.0
    };
    t.write_latency_ms = if t.writes_per_s > 0.0 {
        wl / t.writes_per_s
    } else {
        0.0
    };
    Some(t)
}

/// One input with its label (None for merged inputs: their rows keep theirs).
struct Input<'a> {
    doc: &'a MailDoc,
    label: Option<String>,
    /// Server identity for the queue: generators of one remote server sampled
    /// the same queue; every local target is a server of its own.
    server: String,
    interval_s: f64,
}

impl Input<'_> {
    fn r(&self) -> &Value {
        &self.doc.raw
    }
    fn prefix(&self, text: &str) -> String {
        match &self.label {
            Some(l) => format!("{l}: {text}"),
            None => text.to_string(),
        }
    }
    /// Disk key: the host(s) and the device.
    fn disk_key(&self) -> String {
        format!(
            "{}|{}",
            s(self.r(), "run.host.hostname"),
            s(self.r(), "disk.device")
        )
    }
}

fn host_row(i: &Input, label: &str) -> MailHost {
    let r = i.r();
    MailHost {
        label: label.to_string(),
        source: name(i.doc),
        hostname: s(r, "run.host.hostname").to_string(),
        started: s(r, "run.started").to_string(),
        ended: s(r, "run.ended").to_string(),
        run_id: s(r, "run_id").to_string(),
        target: s(r, "target.imap").to_string(),
        user_format: s(r, "config.user_format").to_string(),
        first_user: u(r, "config.first_user"),
        users: u(r, "users"),
        score_ms: f(r, "score.weighted_p95_ms"),
        submitted: u(r, "mail_flow.submitted"),
        expected_deliveries: u(r, "mail_flow.expected_deliveries"),
        delivered: u(r, "mail_flow.delivered"),
        within_pct: f(r, "delivery_latency.within_pct"),
        errors: u(r, "errors.total"),
        error_rate_pct: f(r, "errors.rate_pct"),
        verdict: verdict_of(r),
    }
}

/// Users driven by two generators of the same server are counted twice.
fn overlap_warnings(hosts: &[MailHost]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, a) in hosts.iter().enumerate() {
        for b in &hosts[i + 1..] {
            // (Local targets are servers of their own, on ports of their own.)
            if a.target.is_empty() || a.target != b.target || a.user_format != b.user_format {
                continue;
            }
            let lo = a.first_user.max(b.first_user);
            let hi = (a.first_user + a.users).min(b.first_user + b.users);
            if lo < hi {
                out.push(format!(
                    "users {lo}..{} of {} were driven by both {} and {}: their figures are counted twice",
                    hi - 1,
                    a.target,
                    a.label,
                    b.label
                ));
            }
        }
    }
    out
}

/// Merges mail-run results of several load generators of the same test.
pub fn merge(docs: &[MailDoc]) -> Result<MailMergeOutput> {
    if docs.len() < 2 {
        return Err(Error::usage(
            "report merge needs at least two result files (one per load generator)",
        ));
    }
    check_compatible(docs)?;
    let first = &docs[0];
    let profile: Profile = serde_json::from_value(first.raw["profile"].clone()).map_err(|e| {
        Error::usage(format!(
            "{} is not a readable mail-run result: its profile: {e}",
            name(first)
        ))
    })?;
    let crit = criteria(first)?;

    // Labels: rows of merged inputs keep theirs; plain results get the hostname.
    let mut used: BTreeSet<String> = BTreeSet::new();
    for d in docs {
        if let Some(m) = &d.merged {
            used.extend(m.hosts.iter().map(|h| h.label.clone()));
        }
    }
    let mut inputs: Vec<Input> = Vec::new();
    for (n, d) in docs.iter().enumerate() {
        let label = if d.merged.is_some() {
            None
        } else {
            let base = match s(&d.raw, "run.host.hostname") {
                "" => "host".to_string(),
                h => h.to_string(),
            };
            let mut label = base.clone();
            let mut k = 2;
            while used.contains(&label) {
                label = format!("{base}#{k}");
                k += 1;
            }
            used.insert(label.clone());
            Some(label)
        };
        let local = s(&d.raw, "target.kind") == "local";
        let server = if local || d.merged.is_some() {
            format!("#{n}")
        } else {
            format!("remote {}", s(&d.raw, "target.imap"))
        };
        let interval_s = dur(at(&d.raw, "config.interval"))
            .map(|x| x.as_secs_f64())
            .filter(|x| *x > 0.0)
            .or_else(|| {
                d.intervals
                    .first()
                    .and_then(|l| fnum(l, "interval_s"))
                    .filter(|x| *x > 0.0)
            })
            .unwrap_or(1.0);
        inputs.push(Input {
            doc: d,
            label,
            server,
            interval_s,
        });
    }

    let mut merged = MailMerged::default();
    for i in &inputs {
        merged.sources.push(name(i.doc));
        match (&i.doc.merged, &i.label) {
            (Some(m), _) => merged.hosts.extend(m.hosts.iter().cloned()),
            (None, Some(l)) => merged.hosts.push(host_row(i, l)),
            (None, None) => {}
        }
    }

    let users: u64 = inputs.iter().map(|i| u(i.r(), "users")).sum();
    let users_f = users as f64;

    // ---- tasks and operations ----------------------------------------------
    let mut tasks = Map::new();
    let mut p95: BTreeMap<&'static str, u64> = BTreeMap::new();
    for k in TaskKind::ALL {
        let key = k.name();
        let parts: Vec<(&Input, &Value)> = inputs
            .iter()
            .filter_map(|i| {
                i.r()
                    .get("tasks")
                    .and_then(|t| t.get(key))
                    .filter(|t| !t.is_null())
                    .map(|t| (i, t))
            })
            .collect();
        if parts.is_empty() {
            continue;
        }
        let mut h = LatencyHist::new();
        let (mut errors, mut skipped) = (0u64, 0u64);
        let mut skip_reasons = BTreeMap::new();
        let mut by_kind = BTreeMap::new();
        for (i, t) in &parts {
            h.add(&hist(i.doc, t, "hist", &format!("task {key}"))?);
            errors += u(t, "errors");
            skipped += u(t, "skipped");
            add_counts(&mut skip_reasons, t.get("skip_reasons"));
            add_counts(&mut by_kind, t.get("errors_by_kind"));
        }
        let sum = h.summary();
        if sum.count > 0 {
            p95.insert(key, sum.p95_us);
        }
        let mut v = summary_ms(&sum);
        v["errors"] = json!(errors);
        v["skipped"] = json!(skipped);
        v["skip_reasons"] = json!(skip_reasons);
        v["errors_by_kind"] = json!(by_kind);
        v["weight"] = json!(profile.weight(k));
        v["per_user_per_day"] = json!(if users > 0 {
            (sum.count + errors) as f64 / users_f
        } else {
            0.0
        });
        v["hist"] = json!(h.to_base64());
        tasks.insert(key.to_string(), v);
    }
    let (score, weights) = judge::weighted_p95_ms(&profile, |k| p95.get(k.name()).copied());

    let op_names: BTreeSet<String> = inputs
        .iter()
        .filter_map(|i| i.r().get("operations").and_then(Value::as_object))
        .flat_map(|m| m.keys().cloned())
        .collect();
    let mut operations = Map::new();
    for op in &op_names {
        let mut h = LatencyHist::new();
        let mut errors = 0;
        for i in &inputs {
            if let Some(t) = i.r().get("operations").and_then(|o| o.get(op)) {
                h.add(&hist(i.doc, t, "hist", &format!("operation {op}"))?);
                errors += u(t, "errors");
            }
        }
        let mut v = summary_ms(&h.summary());
        v["errors"] = json!(errors);
        v["hist"] = json!(h.to_base64());
        operations.insert(op.clone(), v);
    }

    // ---- mail flow and delivery ----------------------------------------------
    let sum_u = |path: &str| -> u64 { inputs.iter().map(|i| u(i.r(), path)).sum() };
    let submitted = sum_u("mail_flow.submitted");
    let addressed = sum_u("mail_flow.recipients_addressed");
    let expected = sum_u("mail_flow.expected_deliveries");
    let delivered = sum_u("mail_flow.delivered");
    let server_deliveries = if inputs
        .iter()
        .all(|i| at(i.r(), "mail_flow.server_deliveries").is_some_and(Value::is_u64))
    {
        json!(sum_u("mail_flow.server_deliveries"))
    } else {
        Value::Null
    };
    let sim_hours = f(&first.raw, "window.simulated_day_s") / 3600.0;
    let real_hours = f(&first.raw, "window.day_s") / 3600.0;
    let per_user_day = |n: u64| {
        if users > 0 { n as f64 / users_f } else { 0.0 }
    };
    let rpm = if submitted > 0 {
        delivered as f64 / submitted as f64
    } else {
        0.0
    };
    // What the profile expects per user: the generators' expectations
    // (each for its own slice), weighted by their users.
    let mut expects = Map::new();
    if let Some(keys) = at(&first.raw, "mail_flow.profile_expects").and_then(Value::as_object) {
        for k in keys.keys() {
            let mut num = 0.0;
            for i in &inputs {
                num +=
                    f(i.r(), &format!("mail_flow.profile_expects.{k}")) * u(i.r(), "users") as f64;
            }
            expects.insert(
                k.clone(),
                json!(if users > 0 { num / users_f } else { 0.0 }),
            );
        }
        let (sd, dd) = (
            expects.get("submitted_per_day").and_then(Value::as_f64),
            expects.get("delivered_per_day").and_then(Value::as_f64),
        );
        if let (Some(sd), Some(dd), true) = (sd, dd, expects.contains_key("recipients_per_message"))
            && sd > 0.0
        {
            expects.insert("recipients_per_message".into(), json!(dd / sd));
        }
    }

    let mut delivery = LatencyHist::new();
    for i in &inputs {
        delivery.add(&hist(
            i.doc,
            i.r(),
            "delivery_latency.hist",
            "delivery latency",
        )?);
    }
    let within: u64 = inputs.iter().map(|i| delivered_within(i.r())).sum();
    let within_pct = judge::within_pct(within, expected);

    // ---- queue ---------------------------------------------------------------
    let mut buckets: BTreeMap<i64, (f64, BTreeMap<&str, u64>)> = BTreeMap::new();
    for i in &inputs {
        for q in at(i.r(), "queue.samples")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(t), Some(len)) = (fnum(q, "t_s"), q.get("length").and_then(Value::as_u64))
            else {
                continue;
            };
            let b = buckets
                .entry((t / i.interval_s).round() as i64)
                .or_insert((t, BTreeMap::new()));
            b.0 = b.0.max(t);
            let e = b.1.entry(i.server.as_str()).or_default();
            *e = (*e).max(len);
        }
    }
    let samples: Vec<Value> = buckets
        .values()
        .map(|(t, per)| json!({"t_s": t, "length": per.values().sum::<u64>()}))
        .collect();
    // The final length per server: from the generator that ended last.
    let mut last_of: BTreeMap<&str, &Input> = BTreeMap::new();
    for i in &inputs {
        let e = last_of.entry(i.server.as_str()).or_insert(i);
        if s(i.r(), "run.ended") > s(e.r(), "run.ended") {
            *e = i;
        }
    }
    let finals: Vec<u64> = last_of
        .values()
        .filter_map(|i| at(i.r(), "queue.final").and_then(Value::as_u64))
        .collect();
    let queue_final = (!finals.is_empty()).then(|| finals.iter().sum::<u64>());
    let queue_max = samples
        .iter()
        .filter_map(|q| q["length"].as_u64())
        .max()
        .or_else(|| {
            inputs
                .iter()
                .filter_map(|i| at(i.r(), "queue.max").and_then(Value::as_u64))
                .max()
        });

    // ---- errors ----------------------------------------------------------------
    let total_errors = sum_u("errors.total");
    let attempted: u64 = inputs.iter().map(|i| attempts(i.r())).sum();
    let error_rate = judge::error_rate_pct(total_errors, attempted);
    let mut by_kind = BTreeMap::new();
    for i in &inputs {
        add_counts(&mut by_kind, at(i.r(), "errors.by_kind"));
    }
    let mut error_samples = Vec::new();
    for i in &inputs {
        for x in at(i.r(), "errors.samples")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if error_samples.len() < MAX_SAMPLES {
                error_samples.push(json!(i.prefix(x.as_str().unwrap_or_default())));
            }
        }
    }

    // ---- host, disk, generator ---------------------------------------------------
    let n = inputs.len() as f64;
    let host = json!({
        "cpu_busy_pct": inputs.iter().map(|i| f(i.r(), "host.cpu_busy_pct")).sum::<f64>() / n,
        "cpu_iowait_pct": inputs.iter().map(|i| f(i.r(), "host.cpu_iowait_pct")).sum::<f64>() / n,
        "memory_used_pct_max": inputs.iter().map(|i| f(i.r(), "host.memory_used_pct_max")).fold(0.0, f64::max),
    });
    let disk_parts: Vec<(String, DiskRates)> = inputs
        .iter()
        .filter_map(|i| disk_rates(at(i.r(), "disk.rates")).map(|r| (i.disk_key(), r)))
        .collect();
    let disk = match combine_disks(&disk_parts) {
        None => Value::Null,
        Some(d) => {
            let mut devices: Vec<String> = Vec::new();
            for i in inputs
                .iter()
                .filter(|i| disk_rates(at(i.r(), "disk.rates")).is_some())
            {
                let dev = s(i.r(), "disk.device");
                let dev = match &i.label {
                    Some(l) => format!("{l}:{dev}"),
                    None => dev.to_string(),
                };
                if !devices.contains(&dev) {
                    devices.push(dev);
                }
            }
            let per = users_f.max(1.0);
            json!({
                "device": devices.join(", "),
                "rates": d,
                "reads_per_s_per_user": d.reads_per_s / per,
                "writes_per_s_per_user": d.writes_per_s / per,
                "iops_per_user": (d.reads_per_s + d.writes_per_s) / per,
            })
        }
    };
    let cpu_s: f64 = inputs.iter().map(|i| f(i.r(), "generator.cpu_s")).sum();
    let (imap_c, smtp_c, sieve_c) = (
        sum_u("generator.imap_commands"),
        sum_u("generator.smtp_commands"),
        sum_u("generator.sieve_commands"),
    );
    let all_cmds = imap_c + smtp_c + sieve_c;
    let user_hours = users_f * sim_hours;
    let mut sched = LatencyHist::new();
    for i in &inputs {
        sched.add(&hist(
            i.doc,
            i.r(),
            "generator.sched_delay_hist",
            "scheduling delay",
        )?);
    }
    let planned = sum_u("generator.planned_tasks");
    let executed = sum_u("generator.executed_tasks");

    // ---- warnings and verdict ------------------------------------------------------
    let mut warnings: Vec<Value> = Vec::new();
    for i in &inputs {
        for w in i
            .r()
            .get("warnings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            warnings.push(json!(i.prefix(w.as_str().unwrap_or_default())));
        }
    }
    warnings.extend(overlap_warnings(&merged.hosts).into_iter().map(Value::from));
    let intervals = merge_intervals(&inputs, &mut warnings)?;

    let statuses: Vec<(&Input, Verdict)> = inputs.iter().map(|i| (i, verdict_of(i.r()))).collect();
    let interrupted: Vec<&str> = statuses
        .iter()
        .filter(|(_, v)| v.status == Status::Interrupted)
        .map(|(i, _)| i.label.as_deref().unwrap_or("merged input"))
        .collect();
    let figures = Figures {
        score_ms: score,
        total_errors,
        error_rate_pct: error_rate,
        errors_by_kind: by_kind.clone(),
        expected_deliveries: expected,
        within_pct,
        queue_final,
        interrupted: !interrupted.is_empty(),
        planned_tasks: planned,
        executed_tasks: executed,
    };
    let mut verdict = judge::verdict(&figures, &crit);
    if let Some(first_reason) = verdict.reasons.first_mut()
        && !interrupted.is_empty()
    {
        *first_reason = format!("{first_reason} ({})", interrupted.join(", "));
    }
    for (i, v) in &statuses {
        if v.status == Status::Error {
            verdict.status = Status::Error;
            verdict
                .reasons
                .extend(v.reasons.iter().map(|r| i.prefix(r)));
        }
    }

    // ---- run header, config, target ------------------------------------------------
    let rs: Vec<&Value> = inputs.iter().map(|i| i.r()).collect();
    let mut header = RunHeader::begin("mail-run");
    let hosts: Vec<HostInfo> = rs
        .iter()
        .map(|r| serde_json::from_value(r["run"]["host"].clone()).unwrap_or_default())
        .collect();
    header.host = merged_host(merged.hosts.iter().map(|h| h.label.as_str()), &hosts);
    header.started = rs
        .iter()
        .map(|r| s(r, "run.started"))
        .filter(|x| !x.is_empty())
        .min()
        .unwrap_or_default()
        .to_string();
    header.ended = rs
        .iter()
        .map(|r| s(r, "run.ended"))
        .max()
        .unwrap_or_default()
        .to_string();
    header.duration_s = rs
        .iter()
        .map(|r| f(r, "run.duration_s"))
        .fold(0.0, f64::max);

    let mut config = first.raw.get("config").cloned().unwrap_or(Value::Null);
    if let Some(c) = config.as_object_mut() {
        c.insert("users".into(), json!(users));
        if let Some(m) = rs
            .iter()
            .filter_map(|r| at(r, "config.first_user")?.as_u64())
            .min()
        {
            c.insert("first_user".into(), json!(m));
        }
    }
    let mut target = first.raw.get("target").cloned().unwrap_or(Value::Null);
    if rs
        .iter()
        .any(|r| r.get("target") != first.raw.get("target"))
        && let Some(t) = target.as_object_mut()
    {
        for k in ["kind", "imap", "submission", "sieve", "local_dir"] {
            let vals: Vec<String> = rs
                .iter()
                .filter_map(|r| r.get("target")?.get(k)?.as_str().map(str::to_string))
                .collect();
            if !vals.is_empty() {
                t.insert(
                    k.into(),
                    json!(common_or_mixed(vals.iter().map(String::as_str))),
                );
            }
        }
    }
    let run_ids: Vec<&str> = rs
        .iter()
        .map(|r| s(r, "run_id"))
        .filter(|x| !x.is_empty())
        .collect();
    let setup = merge_setup(&rs);

    let result = json!({
        "run": header,
        "config": config,
        "target": target,
        "profile": first.raw.get("profile"),
        "run_id": run_ids.join(","),
        "users": users,
        "lists": sum_u("lists"),
        "setup": setup,
        "window": {
            "ramp_up_s": rs.iter().map(|r| f(r, "window.ramp_up_s")).fold(0.0, f64::max),
            "day_s": f(&first.raw, "window.day_s"),
            "simulated_day_s": f(&first.raw, "window.simulated_day_s"),
            "compression": f(&first.raw, "window.compression"),
            "drain_s": rs.iter().map(|r| f(r, "window.drain_s")).fold(0.0, f64::max),
        },
        "tasks": tasks,
        "operations": operations,
        "score": {
            "weighted_p95_ms": score,
            "weights": weights,
            "limit_ms": crit.max_score_ms,
        },
        "mail_flow": {
            "submitted": submitted,
            "recipients_addressed": addressed,
            "expected_deliveries": expected,
            "delivered": delivered,
            "server_deliveries": server_deliveries,
            "per_user_per_day": {
                "submitted": per_user_day(submitted),
                "delivered": per_user_day(delivered),
            },
            "per_hour_real": {
                "submitted": submitted as f64 / real_hours.max(1e-9),
                "delivered": delivered as f64 / real_hours.max(1e-9),
            },
            "per_simulated_hour": {
                "submitted": submitted as f64 / sim_hours.max(1e-9),
                "delivered": delivered as f64 / sim_hours.max(1e-9),
            },
            "recipients_per_message": rpm,
            "profile_expects": expects,
        },
        "delivery_latency": {
            "summary": summary_ms(&delivery.summary()),
            "within_s": crit.delivery_within.as_secs_f64(),
            "within_pct": within_pct,
            "delivered_within": within,
            "hist": delivery.to_base64(),
        },
        "queue": {
            "source": common_or_mixed(rs.iter().map(|r| s(r, "queue.source"))),
            "samples": samples,
            "max": queue_max,
            "final": queue_final,
        },
        "errors": {
            "total": total_errors,
            "rate_pct": error_rate,
            "by_kind": by_kind,
            "samples": error_samples,
        },
        "host": host,
        "disk": disk,
        "generator": {
            "cpu_s": cpu_s,
            "imap_commands": imap_c,
            "smtp_commands": smtp_c,
            "sieve_commands": sieve_c,
            "cpu_s_per_1000_commands": if all_cmds > 0 { 1000.0 * cpu_s / all_cmds as f64 } else { 0.0 },
            "simulated_user_hours": user_hours,
            "cpu_s_per_1000_user_hours": if user_hours > 0.0 { 1000.0 * cpu_s / user_hours } else { 0.0 },
            "sched_delay": summary_ms(&sched.summary()),
            "sched_delay_hist": sched.to_base64(),
            "planned_tasks": planned,
            "executed_tasks": executed,
        },
        "warnings": warnings,
        "verdict": verdict,
        "merged": merged,
    });
    Ok(MailMergeOutput {
        result,
        merged,
        intervals,
    })
}

/// Setup figures: counts summed, time the longest, rates summed (null when no
/// generator ran a setup).
fn merge_setup(rs: &[&Value]) -> Value {
    let parts: Vec<&Value> = rs
        .iter()
        .filter_map(|r| r.get("setup").filter(|x| x.is_object()))
        .collect();
    if parts.is_empty() {
        return Value::Null;
    }
    let mut out = Map::new();
    let mut errors = BTreeMap::new();
    let mut samples = Vec::new();
    for p in &parts {
        for (k, v) in p.as_object().into_iter().flatten() {
            match k.as_str() {
                "errors_by_kind" => add_counts(&mut errors, Some(v)),
                "error_samples" => samples.extend(v.as_array().into_iter().flatten().cloned()),
                "seconds" => {
                    let cur = out.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                    out.insert(k.clone(), json!(cur.max(v.as_f64().unwrap_or(0.0))));
                }
                _ if v.is_u64() => {
                    let cur = out.get(k).and_then(Value::as_u64).unwrap_or(0);
                    out.insert(k.clone(), json!(cur + v.as_u64().unwrap_or(0)));
                }
                _ if v.is_number() => {
                    let cur = out.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                    out.insert(k.clone(), json!(cur + v.as_f64().unwrap_or(0.0)));
                }
                _ => {}
            }
        }
    }
    samples.truncate(MAX_SAMPLES);
    out.insert("errors_by_kind".into(), json!(errors));
    out.insert("error_samples".into(), json!(samples));
    Value::Object(out)
}

/// Intervals aligned by index (`round(t_s / interval_s)`: the generators
/// sample every `interval_s` from the start of their users); the union of
/// the indices is kept, a generator that had already finished adding
/// nothing, so the intervals still add up to the totals. Histograms and
/// counts are added, running totals carried forward, CPU and memory
/// averaged over the generators present.
fn merge_intervals(inputs: &[Input], warnings: &mut Vec<Value>) -> Result<Vec<Value>> {
    if inputs.iter().all(|i| i.doc.intervals.is_empty()) {
        return Ok(Vec::new());
    }
    let step = inputs.first().map(|i| i.interval_s).unwrap_or(1.0);
    if inputs.iter().any(|i| (i.interval_s - step).abs() > 1e-9) {
        warnings.push(json!(
            "the generators sampled at different intervals (--interval): the merged result has no intervals"
        ));
        return Ok(Vec::new());
    }
    let maps: Vec<BTreeMap<i64, &Value>> = inputs
        .iter()
        .map(|i| {
            i.doc
                .intervals
                .iter()
                .filter_map(|l| Some(((fnum(l, "t_s")? / step).round() as i64, l)))
                .collect()
        })
        .collect();
    let keys: BTreeSet<i64> = maps.iter().flat_map(|m| m.keys().copied()).collect();
    let mut out = Vec::new();
    let mut totals: Vec<[u64; 3]> = vec![[0; 3]; inputs.len()];
    const TOTALS: [&str; 3] = [
        "total_submitted",
        "total_expected_deliveries",
        "total_delivered",
    ];
    for key in keys {
        let present: Vec<(&Input, &Value, usize)> = inputs
            .iter()
            .zip(maps.iter())
            .enumerate()
            .filter_map(|(n, (i, m))| m.get(&key).map(|l| (i, *l, n)))
            .collect();
        let mut ops: BTreeMap<String, (u64, LatencyHist)> = BTreeMap::new();
        let mut delivery = LatencyHist::new();
        let mut sched = LatencyHist::new();
        let (mut submitted, mut delivered) = (0u64, 0u64);
        let mut queue: BTreeMap<&str, u64> = BTreeMap::new();
        let mut disks = Vec::new();
        let (mut cpu, mut iow, mut mem) = (0.0, 0.0, 0.0);
        for (i, l, n) in &present {
            for (op, v) in l
                .get("ops")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let e = ops.entry(op.clone()).or_insert((0, LatencyHist::new()));
                e.0 += u(v, "errors");
                e.1.add(&hist(
                    i.doc,
                    v,
                    "hist",
                    &format!("interval operation {op}"),
                )?);
            }
            delivery.add(&hist(i.doc, l, "delivery_hist", "interval")?);
            sched.add(&hist(i.doc, l, "sched_delay_hist", "interval")?);
            submitted += u(l, "submitted");
            delivered += u(l, "delivered");
            for (t, k) in totals[*n].iter_mut().zip(TOTALS) {
                if let Some(x) = l.get(k).and_then(Value::as_u64) {
                    *t = x;
                }
            }
            if let Some(q) = l.get("queue_length").and_then(Value::as_u64) {
                let e = queue.entry(i.server.as_str()).or_default();
                *e = (*e).max(q);
            }
            if let Some(d) = disk_rates(l.get("disk")) {
                disks.push((i.disk_key(), d));
            }
            cpu += f(l, "cpu_busy_pct");
            iow += f(l, "cpu_iowait_pct");
            mem += f(l, "memory_used_pct");
        }
        let np = present.len().max(1) as f64;
        let ops: BTreeMap<String, IntervalOp> = ops
            .into_iter()
            .map(|(k, (errors, h))| (k, IntervalOp::of(&h, errors)))
            .collect();
        let tot = |k: usize| totals.iter().map(|t| t[k]).sum::<u64>();
        let first = present.first().map(|p| p.1);
        out.push(json!({
            "t_s": present.iter().filter_map(|p| fnum(p.1, "t_s")).fold(0.0, f64::max),
            "phase": first.and_then(|l| l.get("phase")).cloned().unwrap_or(Value::Null),
            "interval_s": step,
            "ops": ops,
            "submitted": submitted,
            "delivered": delivered,
            "delivery_p95_ms": delivery.quantile_us(0.95) as f64 / 1000.0,
            "delivery_hist": delivery.to_base64(),
            "sched_delay_p99_ms": sched.quantile_us(0.99) as f64 / 1000.0,
            "sched_delay_hist": sched.to_base64(),
            "total_submitted": tot(0),
            "total_expected_deliveries": tot(1),
            "total_delivered": tot(2),
            "queue_length": if queue.is_empty() { Value::Null } else { json!(queue.values().sum::<u64>()) },
            "cpu_busy_pct": cpu / np,
            "cpu_iowait_pct": iow / np,
            "memory_used_pct": mem / np,
            "disk": combine_disks(&disks),
            "generators": present.len(),
        }));
    }
    Ok(out)
}

/// The per-generator part of summary.txt for a merged mail result.
pub fn hosts_text(m: &MailMerged) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "\nPer-Host Results (load generators; aggregate above)");
    let _ = writeln!(
        o,
        "  {:<20} {:>6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7}  verdict",
        "host",
        "users",
        "first",
        "score ms",
        "submitted",
        "expected",
        "delivered",
        "in time",
        "errors",
    );
    for h in &m.hosts {
        let _ = writeln!(
            o,
            "  {:<20} {:>6} {:>7} {:>9.1} {:>9} {:>9} {:>9} {:>7.1}% {:>7}  {}",
            h.label,
            h.users,
            h.first_user,
            h.score_ms,
            h.submitted,
            h.expected_deliveries,
            h.delivered,
            h.within_pct,
            h.errors,
            h.verdict.label()
        );
    }
    for (i, s) in m.sources.iter().enumerate() {
        let _ = writeln!(o, "  source {}: {s}", i + 1);
    }
    o
}

/// summary.txt of a mail-run result (merged or not): `mail run`'s own text,
/// plus the per-generator table of a merged result.
pub fn summary_text(d: &MailDoc) -> Result<String> {
    let profile: Profile = serde_json::from_value(d.raw["profile"].clone()).map_err(|e| {
        Error::usage(format!(
            "{} is not a readable mail-run result: its profile: {e}",
            name(d)
        ))
    })?;
    let mut s = mailbench_mail::command::render_summary(&d.raw, &profile);
    if let Some(m) = &d.merged {
        s.push_str(&hosts_text(m));
    }
    Ok(s)
}
