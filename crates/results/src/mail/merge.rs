//! `report merge` of mail-run results: several load generators, each driving a
//! slice of the users (`mail run --first-user K --users N`), merged into the
//! result one generator driving all those users would have written.
//!
//! * per-task and per-operation histograms are **added** and every percentile
//!   is read from the sum (never averaged); counts, errors and skips are summed;
//! * the weighted 95th-percentile score and the verdict are recomputed with
//!   the mail rules (`judge.rs`) and the inputs' thresholds (results judged
//!   differently are refused);
//! * mail-flow counts are summed and the per-user and per-hour figures
//!   recomputed from the sums (users summed; the real hours are the day, not a
//!   sum); the delivery-latency histogram is added and the share of
//!   deliveries in time recomputed from the summed counts;
//! * intervals are aligned by their index (`t_s` / `interval_s`) and added;
//! * the steady window the runs used (`--steady`, the same in every input) is
//!   measured again over the added intervals, and the verdict judges its
//!   response time and queue, as `mail run` does.
//!
//! The result is a mail-run result with a `merged` section: one row per
//! generator.

use crate::mail::judge::{self, Criteria, Figures};
use crate::mail::profile::{Profile, TaskKind};
use crate::mail::run::*;
use crate::mail::steady::{QueueJudgement, SteadySection, Window, section};
use crate::merged::{MergeInput, MergeOutput, Merged, common_or_mixed, host_labels, merged_header};
use crate::verdict::{RunHeader, Status, Verdict};
use mailbench_base::{Error, Result};
use mailbench_metrics::LatencyHist;
use mailbench_metrics::system::DiskRates;
use std::collections::{BTreeMap, BTreeSet};

/// Error samples kept in a merged result (as in one run).
pub const MAX_SAMPLES: usize = 50;

/// One input of a merge: a mail-run result, where it came from, and its
/// intervals (intervals.jsonl beside it).
pub type MailMergeInput<'a> = MergeInput<'a, MailRunResult, MailInterval>;

/// A merged mail result (with `merged` set) and its intervals.
pub type MailMergeOutput = MergeOutput<MailRunResult, MailInterval>;

impl MailMergeOutput {
    pub fn merged(&self) -> &Merged<MailHost> {
        static EMPTY: Merged<MailHost> = Merged {
            sources: Vec::new(),
            hosts: Vec::new(),
        };
        self.result.merged.as_ref().unwrap_or(&EMPTY)
    }
}

/// Checks that the results are of the same test, judged the same way; the
/// message names both files (a usage error, exit 2).
pub fn check_compatible(inputs: &[MailMergeInput]) -> Result<()> {
    let Some(first) = inputs.first() else {
        return Err(Error::usage("report merge needs at least two result files"));
    };
    let a = first.result;
    for d in &inputs[1..] {
        let b = d.result;
        let names = format!("{} and {}", first.source, d.source);
        let (pa, pb) = (&a.profile.name, &b.profile.name);
        let why = if pa != pb {
            format!("different profiles ({pa} vs {pb}); merge only results of the same test")
        } else if a.profile != b.profile {
            format!(
                "profile {pa} has different settings in each (a changed profile file?); merge only results of the same test"
            )
        } else if a.config.criteria() != b.config.criteria() {
            format!(
                "different verdict thresholds ({}); merge only results judged the same way",
                criteria_diff(&a.config.criteria(), &b.config.criteria())
            )
        } else if a.config.steady != b.config.steady {
            format!(
                "different steady windows (--steady {} vs {}): they were judged over different parts of the day; merge only results judged the same way",
                a.config.steady, b.config.steady
            )
        } else if a.config.day_length != b.config.day_length {
            format!(
                "different day lengths ({} vs {}): the simulated day was compressed differently; merge only results of the same test",
                duration_text(a.config.day_length),
                duration_text(b.config.day_length)
            )
        } else {
            continue;
        };
        return Err(Error::usage(format!("cannot merge {names}: {why}")));
    }
    Ok(())
}

/// A duration as the result writes it (`"20s"`).
fn duration_text(d: std::time::Duration) -> String {
    #[derive(serde::Serialize)]
    struct Text(#[serde(with = "mailbench_base::units::serde_duration")] std::time::Duration);
    let v = serde_json::to_value(Text(d)).unwrap_or_default();
    v.as_str().unwrap_or_default().to_string()
}

fn criteria_diff(ca: &Criteria, cb: &Criteria) -> String {
    let mut diff = Vec::new();
    if ca.max_score_ms != cb.max_score_ms {
        diff.push(format!(
            "response time limit {} vs {} ms",
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
    diff.join(", ")
}

/// Adds the counts of `b` into `a` key by key.
fn add_counts<K: Ord + Clone>(a: &mut BTreeMap<K, u64>, b: &BTreeMap<K, u64>) {
    for (k, v) in b {
        *a.entry(k.clone()).or_default() += v;
    }
}

/// Operations attempted (the error rate's denominator), as `mail run` counts
/// them: tasks and other operations completed or failed, plus deliveries
/// that never arrived.
pub fn attempts(r: &MailRunResult) -> u64 {
    let tasks: u64 = r.tasks.values().map(|t| t.latency.count + t.errors).sum();
    let ops: u64 = (r.operations.values())
        .map(|t| t.latency.count + t.errors)
        .sum();
    let f = &r.mail_flow;
    tasks + ops + f.expected_deliveries.saturating_sub(f.delivered)
}

/// Disk rates of several load generators' servers. The same device seen
/// from the same host (several generators on one machine, or their local
/// servers on one disk) counts once (its busiest reading); different devices
/// add up. Latencies are weighted by operations, utilisation is the highest.
pub fn combine_disks(parts: &[(String, DiskRates)]) -> Option<DiskRates> {
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
    d: &'a MailMergeInput<'a>,
    label: Option<String>,
    /// Server identity for the queue: generators of one remote server sampled
    /// the same queue; every local target is a server of its own.
    server: String,
    interval_s: f64,
}

impl Input<'_> {
    fn r(&self) -> &MailRunResult {
        self.d.result
    }
    fn prefix(&self, text: &str) -> String {
        match &self.label {
            Some(l) => format!("{l}: {text}"),
            None => text.to_string(),
        }
    }
    /// Disk key: the host(s) and the device.
    fn disk_key(&self) -> String {
        let dev = self.r().disk.as_ref().and_then(|d| d.device.clone());
        format!("{}|{}", self.r().run.host.hostname, dev.unwrap_or_default())
    }
}

fn host_row(i: &Input, label: &str) -> MailHost {
    let r = i.r();
    MailHost {
        label: label.to_string(),
        source: i.d.source.clone(),
        hostname: r.run.host.hostname.clone(),
        started: r.run.started.clone(),
        ended: r.run.ended.clone(),
        run_id: r.run_id.clone(),
        target: r.target.imap.clone(),
        user_format: r.config.user_format.clone(),
        first_user: r.config.first_user as u64,
        users: r.users,
        response_time_ms: r.response_time.weighted_p95_ms,
        submitted: r.mail_flow.submitted,
        expected_deliveries: r.mail_flow.expected_deliveries,
        delivered: r.mail_flow.delivered,
        within_pct: r.delivery_latency.within_pct,
        errors: r.errors.total,
        error_rate_pct: r.errors.rate_pct,
        verdict: r.verdict.clone(),
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

fn inputs<'a>(docs: &'a [MailMergeInput<'a>]) -> Vec<Input<'a>> {
    let labels = host_labels(
        &docs
            .iter()
            .map(|d| {
                let used = d.result.merged.as_ref();
                let used = used.map(|m| m.hosts.iter().map(|h| h.label.clone()).collect());
                (d.result.run.host.hostname.as_str(), used)
            })
            .collect::<Vec<_>>(),
    );
    docs.iter()
        .zip(labels)
        .enumerate()
        .map(|(n, (d, label))| {
            let r = d.result;
            let server = if r.target.kind == "local" || r.merged.is_some() {
                format!("#{n}")
            } else {
                format!("remote {}", r.target.imap)
            };
            let interval_s = Some(r.config.interval.as_secs_f64())
                .filter(|x| *x > 0.0)
                .or_else(|| d.intervals.first().map(|l| l.interval_s))
                .filter(|x| *x > 0.0)
                .unwrap_or(1.0);
            Input {
                d,
                label,
                server,
                interval_s,
            }
        })
        .collect()
}

/// Merges mail-run results of several load generators of the same test.
pub fn merge(docs: &[MailMergeInput]) -> Result<MailMergeOutput> {
    if docs.len() < 2 {
        return Err(Error::usage(
            "report merge needs at least two result files (one per load generator)",
        ));
    }
    check_compatible(docs)?;
    let inputs = inputs(docs);
    let first = docs[0].result;
    let mut merged = Merged::<MailHost>::default();
    for i in &inputs {
        merged.sources.push(i.d.source.clone());
        match (&i.r().merged, &i.label) {
            (Some(m), _) => merged.hosts.extend(m.hosts.iter().cloned()),
            (None, Some(l)) => merged.hosts.push(host_row(i, l)),
            (None, None) => {}
        }
    }
    let users: u64 = inputs.iter().map(|i| i.r().users).sum();
    let mut out = first.clone();
    out.users = users;
    out.lists = inputs.iter().map(|i| i.r().lists).sum();
    out.tasks = merge_tasks(&inputs, &first.profile, users);
    out.operations = merge_operations(&inputs);
    merge_protocols(&inputs, &mut out);
    let p95 = |k: TaskKind| {
        (out.tasks.get(&k))
            .filter(|t| t.latency.count > 0)
            .map(|t| t.hist.quantile_us(0.95))
    };
    let (score, weights) = judge::weighted_p95_ms(&first.profile, p95);
    out.response_time = DayResponseTime {
        weighted_p95_ms: score,
        weights: weights
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        limit_ms: first.config.max_score_ms,
    };
    out.mail_flow = merge_flow(&inputs, users);
    out.delivery_latency = merge_delivery(&inputs, &first.config.criteria());
    out.queue = merge_queue(&inputs);
    out.errors = merge_errors(&inputs);
    out.host = merge_host_figures(&inputs);
    out.disk = merge_disk(&inputs, users);
    out.generator = merge_generator(
        &inputs,
        users as f64 * first.window.simulated_day_s / 3600.0,
        users,
    );
    out.window = merge_window(&inputs);
    out.setup = merge_setup(&inputs);
    out.warnings = (inputs.iter())
        .flat_map(|i| i.r().warnings.iter().map(|w| i.prefix(w)))
        .collect();
    out.warnings.extend(overlap_warnings(&merged.hosts));
    let intervals = merge_intervals(&inputs, &mut out.warnings)?;
    let mut steady_warnings = Vec::new();
    out.steady = merge_steady(&inputs, &intervals, &out, &mut steady_warnings);
    out.warnings.extend(steady_warnings);
    out.verdict = merge_verdict(&inputs, &out);
    out.run = merge_header(&inputs, &merged);
    merge_identity(&inputs, &mut out);
    out.merged = Some(merged);
    Ok(MailMergeOutput {
        result: out,
        intervals,
    })
}

fn merge_tasks(inputs: &[Input], profile: &Profile, users: u64) -> BTreeMap<TaskKind, TaskFigures> {
    let mut tasks = BTreeMap::new();
    for k in TaskKind::ALL {
        let parts: Vec<&TaskFigures> = inputs.iter().filter_map(|i| i.r().tasks.get(&k)).collect();
        if parts.is_empty() {
            continue;
        }
        let mut h = LatencyHist::new();
        let (mut errors, mut skipped) = (0u64, 0u64);
        let (mut skip_reasons, mut by_kind) = (BTreeMap::new(), BTreeMap::new());
        for t in &parts {
            h.add(&t.hist);
            errors += t.errors;
            skipped += t.skipped;
            add_counts(&mut skip_reasons, &t.skip_reasons);
            add_counts(&mut by_kind, &t.errors_by_kind);
        }
        let latency = LatencyFigures::from(h.summary());
        let per_user_per_day = if users > 0 {
            (latency.count + errors) as f64 / users as f64
        } else {
            0.0
        };
        let weight = profile.weight(k);
        tasks.insert(
            k,
            TaskFigures {
                latency,
                errors,
                skipped,
                skip_reasons,
                errors_by_kind: by_kind,
                weight,
                per_user_per_day,
                hist: h,
                by_protocol: BTreeMap::new(),
            },
        );
    }
    tasks
}

/// The users per protocol summed and, when the merge holds several
/// protocols, each task's and operation's figures per protocol: the inputs'
/// own (a run of one protocol: its figures) added by task and protocol.
fn merge_protocols(inputs: &[Input], out: &mut MailRunResult) {
    let mut users: BTreeMap<Protocol, u64> = BTreeMap::new();
    for i in inputs {
        add_counts(&mut users, &i.r().user_protocols());
    }
    out.protocols = users.clone();
    for t in out.tasks.values_mut() {
        t.by_protocol.clear();
    }
    for o in out.operations.values_mut() {
        o.by_protocol.clear();
    }
    if users.len() < 2 {
        return;
    }
    let add = |to: &mut ProtocolFigures, f: &ProtocolFigures| {
        to.hist.add(&f.hist);
        to.errors += f.errors;
        to.skipped += f.skipped;
    };
    let finish = |f: &mut ProtocolFigures, n: Option<u64>| {
        f.latency = f.hist.summary().into();
        f.per_user_per_day = match n {
            Some(n) if n > 0 => (f.latency.count + f.errors) as f64 / n as f64,
            _ => 0.0,
        };
    };
    let mut tasks: BTreeMap<(TaskKind, Protocol), ProtocolFigures> = BTreeMap::new();
    let mut ops: BTreeMap<(String, Protocol), ProtocolFigures> = BTreeMap::new();
    for i in inputs {
        for (key, f) in i.r().tasks_by_protocol() {
            match tasks.get_mut(&key) {
                Some(to) => add(to, &f),
                None => {
                    tasks.insert(key, f);
                }
            }
        }
        for (key, f) in i.r().operations_by_protocol() {
            match ops.get_mut(&key) {
                Some(to) => add(to, &f),
                None => {
                    ops.insert(key, f);
                }
            }
        }
    }
    for ((k, p), mut f) in tasks {
        finish(&mut f, users.get(&p).copied());
        if let Some(t) = out.tasks.get_mut(&k) {
            t.by_protocol.insert(p, f);
        }
    }
    for ((n, p), mut f) in ops {
        finish(&mut f, None);
        if let Some(o) = out.operations.get_mut(&n) {
            o.by_protocol.insert(p, f);
        }
    }
}

fn merge_operations(inputs: &[Input]) -> BTreeMap<String, OpFigures> {
    let names: BTreeSet<&String> = inputs
        .iter()
        .flat_map(|i| i.r().operations.keys())
        .collect();
    names
        .into_iter()
        .map(|op| {
            let mut h = LatencyHist::new();
            let mut errors = 0;
            for t in inputs.iter().filter_map(|i| i.r().operations.get(op)) {
                h.add(&t.hist);
                errors += t.errors;
            }
            let f = OpFigures {
                latency: h.summary().into(),
                errors,
                hist: h,
                by_protocol: BTreeMap::new(),
            };
            (op.clone(), f)
        })
        .collect()
}

fn merge_flow(inputs: &[Input], users: u64) -> MailFlow {
    let first = inputs[0].r();
    let sum = |f: fn(&MailFlow) -> u64| inputs.iter().map(|i| f(&i.r().mail_flow)).sum::<u64>();
    let (submitted, delivered) = (sum(|f| f.submitted), sum(|f| f.delivered));
    let server: Option<Vec<u64>> = inputs
        .iter()
        .map(|i| i.r().mail_flow.server_deliveries)
        .collect();
    let sim_hours = first.window.simulated_day_s / 3600.0;
    let real_hours = first.window.day_s / 3600.0;
    // What the profile expects per user: the generators' expectations
    // (each for its own slice), weighted by their users.
    let wavg = |f: fn(&ExpectedFlowRef) -> f64| {
        let num: f64 = (inputs.iter())
            .map(|i| f(&i.r().mail_flow.profile_expects) * i.r().users as f64)
            .sum();
        if users > 0 { num / users as f64 } else { 0.0 }
    };
    let mut expects = first.mail_flow.profile_expects;
    expects.submitted_per_day = wavg(|e| e.submitted_per_day);
    expects.delivered_per_day = wavg(|e| e.delivered_per_day);
    expects.tasks_per_day = wavg(|e| e.tasks_per_day);
    expects.recipients_per_message = if expects.submitted_per_day > 0.0 {
        expects.delivered_per_day / expects.submitted_per_day
    } else {
        wavg(|e| e.recipients_per_message)
    };
    MailFlow {
        submitted,
        recipients_addressed: sum(|f| f.recipients_addressed),
        expected_deliveries: sum(|f| f.expected_deliveries),
        delivered,
        server_deliveries: server.map(|v| v.iter().sum()),
        profile_expects: expects,
        // Lighter only when no generator had lists (they share one target).
        without_lists: (inputs.iter())
            .all(|i| i.r().mail_flow.without_lists.is_some())
            .then_some(first.mail_flow.without_lists)
            .flatten(),
        ..MailFlow::default()
    }
    .with_rates(users, real_hours, sim_hours)
}

type ExpectedFlowRef = crate::mail::profile::ExpectedFlow;

fn merge_delivery(inputs: &[Input], crit: &Criteria) -> DeliveryLatency {
    let mut h = LatencyHist::new();
    let (mut within, mut expected) = (0, 0);
    for i in inputs {
        let r = i.r();
        h.add(&r.delivery_latency.hist);
        within += (r.delivery_latency).delivered_within(r.mail_flow.expected_deliveries);
        expected += r.mail_flow.expected_deliveries;
    }
    DeliveryLatency {
        summary: h.summary().into(),
        within_s: crit.delivery_within.as_secs_f64(),
        within_pct: judge::within_pct(within, expected),
        delivered_within: Some(within),
        hist: h,
    }
}

/// Queue samples bucketed by interval, each server's length counted once
/// (its highest in the bucket); the final length per server from the
/// generator that ended last.
fn merge_queue(inputs: &[Input]) -> Queue {
    let mut buckets: BTreeMap<i64, (f64, BTreeMap<&str, u64>)> = BTreeMap::new();
    for i in inputs {
        for q in &i.r().queue.samples {
            let b = (buckets.entry((q.t_s / i.interval_s).round() as i64))
                .or_insert((q.t_s, BTreeMap::new()));
            b.0 = b.0.max(q.t_s);
            let e = b.1.entry(i.server.as_str()).or_default();
            *e = (*e).max(q.length);
        }
    }
    let samples: Vec<QueueSample> = buckets
        .values()
        .map(|(t, per)| QueueSample {
            t_s: *t,
            length: per.values().sum(),
        })
        .collect();
    let mut last_of: BTreeMap<&str, &Input> = BTreeMap::new();
    for i in inputs {
        let e = last_of.entry(i.server.as_str()).or_insert(i);
        if i.r().run.ended > e.r().run.ended {
            *e = i;
        }
    }
    let finals: Vec<u64> = (last_of.values())
        .filter_map(|i| i.r().queue.final_length)
        .collect();
    let max = (samples.iter().map(|q| q.length).max())
        .or_else(|| inputs.iter().filter_map(|i| i.r().queue.max).max());
    Queue {
        source: common_or_mixed(inputs.iter().map(|i| i.r().queue.source.as_str())),
        samples,
        max,
        final_length: (!finals.is_empty()).then(|| finals.iter().sum()),
    }
}

fn merge_errors(inputs: &[Input]) -> Errors {
    let total: u64 = inputs.iter().map(|i| i.r().errors.total).sum();
    let attempted: u64 = inputs.iter().map(|i| attempts(i.r())).sum();
    let mut by_kind = BTreeMap::new();
    for i in inputs {
        add_counts(&mut by_kind, &i.r().errors.by_kind);
    }
    let samples = (inputs.iter())
        .flat_map(|i| i.r().errors.samples.iter().map(|x| i.prefix(x)))
        .take(MAX_SAMPLES)
        .collect();
    Errors {
        total,
        rate_pct: judge::error_rate_pct(total, attempted),
        by_kind,
        samples,
    }
}

fn merge_host_figures(inputs: &[Input]) -> HostFigures {
    let n = inputs.len() as f64;
    let mean = |f: fn(&HostFigures) -> f64| inputs.iter().map(|i| f(&i.r().host)).sum::<f64>() / n;
    HostFigures {
        cpu_busy_pct: mean(|h| h.cpu_busy_pct),
        cpu_iowait_pct: mean(|h| h.cpu_iowait_pct),
        memory_used_pct_max: (inputs.iter())
            .map(|i| i.r().host.memory_used_pct_max)
            .fold(0.0, f64::max),
    }
}

fn merge_disk(inputs: &[Input], users: u64) -> Option<DiskPerUser> {
    let with: Vec<&Input> = inputs.iter().filter(|i| i.r().disk.is_some()).collect();
    let parts: Vec<(String, DiskRates)> = (with.iter())
        .filter_map(|i| Some((i.disk_key(), i.r().disk.as_ref()?.rates)))
        .collect();
    let rates = combine_disks(&parts)?;
    let mut devices: Vec<String> = Vec::new();
    for i in with {
        let dev = (i.r().disk.as_ref()).and_then(|d| d.device.clone());
        let dev = i.prefix_colon(dev.as_deref().unwrap_or_default());
        if !devices.contains(&dev) {
            devices.push(dev);
        }
    }
    Some(DiskPerUser::of(
        Some(devices.join(", ")),
        rates,
        users as f64,
    ))
}

impl Input<'_> {
    fn prefix_colon(&self, text: &str) -> String {
        crate::merged::prefixed(&self.label, text)
    }
}

/// The generators' figures together. Simulated user-hours are the sum of
/// each generator's (what it simulated, less than its day when it was
/// interrupted); `user_hours` (users x day) stands in for results that
/// do not have them.
fn merge_generator(inputs: &[Input], user_hours: f64, users: u64) -> Generator {
    let g = |f: fn(&Generator) -> u64| inputs.iter().map(|i| f(&i.r().generator)).sum::<u64>();
    let mut sched = LatencyHist::new();
    for i in inputs {
        sched.add(&i.r().generator.sched_delay_hist);
    }
    let simulated: f64 = (inputs.iter())
        .map(|i| i.r().generator.simulated_user_hours)
        .sum();
    let mut out = Generator::of(
        inputs.iter().map(|i| i.r().generator.cpu_s).sum(),
        Commands::sum(inputs.iter().map(|i| i.r().generator.commands())),
        if simulated > 0.0 {
            simulated
        } else {
            user_hours
        },
        sched,
        g(|g| g.planned_tasks),
        g(|g| g.executed_tasks),
    );
    let memory: Vec<GeneratorMemory> = inputs.iter().map(|i| i.r().generator.memory).collect();
    out.memory = GeneratorMemory::sum(&memory, users);
    out
}

fn merge_window(inputs: &[Input]) -> MailWindow {
    let first = &inputs[0].r().window;
    let max =
        |f: fn(&MailWindow) -> f64| inputs.iter().map(|i| f(&i.r().window)).fold(0.0, f64::max);
    MailWindow {
        ramp_up_s: max(|w| w.ramp_up_s),
        drain_s: max(|w| w.drain_s),
        ..first.clone()
    }
}

/// Setup figures: counts summed, time the longest, rates summed (None when
/// no generator ran a setup).
fn merge_setup(inputs: &[Input]) -> Option<SetupFigures> {
    let parts: Vec<&SetupFigures> = inputs.iter().filter_map(|i| i.r().setup.as_ref()).collect();
    if parts.is_empty() {
        return None;
    }
    let mut out = SetupFigures::default();
    for p in parts {
        out.users += p.users;
        out.users_ok += p.users_ok;
        out.lists += p.lists;
        out.folders_created += p.folders_created;
        out.messages_appended += p.messages_appended;
        out.bytes_appended += p.bytes_appended;
        out.messages_present += p.messages_present;
        add_counts(&mut out.errors_by_kind, &p.errors_by_kind);
        out.error_samples.extend(p.error_samples.iter().cloned());
        out.seconds = out.seconds.max(p.seconds);
        out.appends_per_s += p.appends_per_s;
    }
    out.error_samples.truncate(MAX_SAMPLES);
    Some(out)
}

/// The verdict of the sums, with the inputs' own rules and thresholds; an
/// interrupted input is named; an input that ended in error makes it an error.
/// The aggregate's steady window: the window the runs were judged over (the
/// first's; every input ran with the same `--steady`, checked before), over
/// the added intervals and the merged queue samples. None, with a warning,
/// when an input has no steady window (a result of an older mailbench) or no
/// interval was merged: the aggregate is then judged on the whole day.
fn merge_steady(
    inputs: &[Input],
    intervals: &[MailInterval],
    out: &MailRunResult,
    warnings: &mut Vec<String>,
) -> Option<SteadySection> {
    let whole_day = "the aggregate is judged on the whole day";
    let windows: Vec<Option<Window>> = (inputs.iter())
        .map(|i| i.r().steady.as_ref().and_then(|s| s.window))
        .collect();
    if let Some(i) = inputs.iter().zip(&windows).find(|(_, w)| w.is_none()) {
        warnings.push(i.0.prefix(&format!(
            "no steady window in this result (an older mailbench): {whole_day}"
        )));
        return None;
    }
    let w = windows.first().copied().flatten()?;
    if intervals.is_empty() {
        warnings.push(format!("no intervals were merged: {whole_day}"));
        return None;
    }
    let off = (windows.iter().flatten())
        .map(|x| (x.from_s - w.from_s).abs().max((x.to_s - w.to_s).abs()))
        .fold(0.0, f64::max);
    let step = inputs.iter().map(|i| i.interval_s).fold(0.0, f64::max);
    if off > step {
        warnings.push(format!(
            "the generators' steady windows differ by up to {off:.1} s (different ramp-ups?); \
             the first's, {:.0}-{:.0} s after the start, is judged",
            w.from_s, w.to_s
        ));
    }
    let queue: Vec<(f64, f64)> = (out.queue.samples.iter())
        .map(|q| (q.t_s, q.length as f64))
        .collect();
    let spec = (inputs[0].r().steady.as_ref()).map_or(out.config.steady.as_str(), |s| &s.spec);
    Some(section(
        spec,
        &w,
        intervals,
        &queue,
        &out.profile,
        usize::try_from(out.users).unwrap_or(usize::MAX),
        out.config.delivery_within,
    ))
}

fn merge_verdict(inputs: &[Input], out: &MailRunResult) -> Verdict {
    let interrupted: Vec<&str> = (inputs.iter())
        .filter(|i| i.r().verdict.status == Status::Interrupted)
        .map(|i| i.label.as_deref().unwrap_or("merged input"))
        .collect();
    // Judged as `mail run` judges: the steady window's response time and
    // queue, the whole day's response time when no task ran inside it.
    let steady = out.steady.as_ref();
    let figures = Figures {
        response_time_ms: (steady.and_then(SteadySection::judged_ms))
            .unwrap_or(out.response_time.weighted_p95_ms),
        total_errors: out.errors.total,
        error_rate_pct: out.errors.rate_pct,
        errors_by_kind: out.errors.by_kind.clone(),
        expected_deliveries: out.mail_flow.expected_deliveries,
        within_pct: out.delivery_latency.within_pct,
        queue_final: out.queue.final_length,
        queue_steady: (steady.and_then(|s| s.queue.as_ref())).and_then(QueueJudgement::reason),
        interrupted: !interrupted.is_empty(),
        planned_tasks: out.generator.planned_tasks,
        executed_tasks: out.generator.executed_tasks,
    };
    let mut verdict = judge::verdict(&figures, &out.config.criteria());
    if let Some(first_reason) = verdict.reasons.first_mut()
        && !interrupted.is_empty()
    {
        *first_reason = format!("{first_reason} ({})", interrupted.join(", "));
    }
    for i in inputs
        .iter()
        .filter(|i| i.r().verdict.status == Status::Error)
    {
        verdict.status = Status::Error;
        (verdict.reasons).extend(i.r().verdict.reasons.iter().map(|r| i.prefix(r)));
    }
    verdict
}

fn merge_header(inputs: &[Input], merged: &Merged<MailHost>) -> RunHeader {
    let headers: Vec<&RunHeader> = inputs.iter().map(|i| &i.r().run).collect();
    merged_header(
        "mail-run",
        &headers,
        merged.hosts.iter().map(|h| h.label.as_str()),
    )
}

/// Config (users summed, the lowest first user), target (`mixed: ...` where
/// the generators' differ) and the run ids.
fn merge_identity(inputs: &[Input], out: &mut MailRunResult) {
    out.config.users = out.users as usize;
    if let Some(m) = inputs.iter().map(|i| i.r().config.first_user).min() {
        out.config.first_user = m;
    }
    let t0 = &inputs[0].r().target;
    if inputs.iter().any(|i| &i.r().target != t0) {
        let mixed = |f: fn(&TargetInfo) -> Option<&str>| {
            let vals: Vec<&str> = inputs.iter().filter_map(|i| f(&i.r().target)).collect();
            (!vals.is_empty()).then(|| common_or_mixed(vals.into_iter()))
        };
        let t = &mut out.target;
        t.kind = mixed(|t| Some(t.kind.as_str())).unwrap_or_default();
        t.imap = mixed(|t| Some(t.imap.as_str())).unwrap_or_default();
        t.submission = mixed(|t| Some(t.submission.as_str())).unwrap_or_default();
        t.sieve = mixed(|t| t.sieve.as_deref()).or(t.sieve.take());
        t.local_dir = mixed(|t| t.local_dir.as_deref()).or(t.local_dir.take());
    }
    out.run_id = (inputs.iter().map(|i| i.r().run_id.as_str()))
        .filter(|x| !x.is_empty())
        .collect::<Vec<_>>()
        .join(",");
}

/// Intervals aligned by index (`round(t_s / interval_s)`: the generators
/// sample every `interval_s` from the start of their users); the union of
/// the indices is kept, a generator that had already finished adding
/// nothing, so the intervals still add up to the totals. Histograms and
/// counts are added, running totals carried forward, CPU and memory
/// averaged over the generators present.
fn merge_intervals(inputs: &[Input], warnings: &mut Vec<String>) -> Result<Vec<MailInterval>> {
    if inputs.iter().all(|i| i.d.intervals.is_empty()) {
        return Ok(Vec::new());
    }
    let step = inputs.first().map(|i| i.interval_s).unwrap_or(1.0);
    if inputs.iter().any(|i| (i.interval_s - step).abs() > 1e-9) {
        warnings.push(
            "the generators sampled at different intervals (--interval): the merged result has no intervals"
                .into(),
        );
        return Ok(Vec::new());
    }
    let maps: Vec<BTreeMap<i64, &MailInterval>> = (inputs.iter())
        .map(|i| {
            (i.d.intervals.iter())
                .map(|l| ((l.t_s / step).round() as i64, l))
                .collect()
        })
        .collect();
    let keys: BTreeSet<i64> = maps.iter().flat_map(|m| m.keys().copied()).collect();
    let mut totals: Vec<[u64; 3]> = vec![[0; 3]; inputs.len()];
    let mut out = Vec::new();
    for key in keys {
        let present: Vec<(&Input, &MailInterval, usize)> = (inputs.iter().zip(&maps).enumerate())
            .filter_map(|(n, (i, m))| m.get(&key).map(|l| (i, *l, n)))
            .collect();
        for (_, l, n) in &present {
            totals[*n] = [
                l.total_submitted,
                l.total_expected_deliveries,
                l.total_delivered,
            ];
        }
        out.push(add_intervals(&present, &totals, step)?);
    }
    Ok(out)
}

/// An interval's histogram; a broken one names its file.
fn interval_hist(i: &Input, text: &str, what: &str) -> Result<LatencyHist> {
    if text.is_empty() {
        return Ok(LatencyHist::new());
    }
    LatencyHist::from_base64(text)
        .map_err(|e| Error::usage(format!("{}: interval {what}: {e}", i.d.source)))
}

/// One merged interval from the generators that had it.
fn add_intervals(
    present: &[(&Input, &MailInterval, usize)],
    totals: &[[u64; 3]],
    step: f64,
) -> Result<MailInterval> {
    let mut ops: BTreeMap<String, (u64, LatencyHist)> = BTreeMap::new();
    let (mut delivery, mut sched) = (LatencyHist::new(), LatencyHist::new());
    let mut queue: BTreeMap<&str, u64> = BTreeMap::new();
    let mut disks = Vec::new();
    let mut out = MailInterval {
        phase: present
            .first()
            .map(|p| p.1.phase.clone())
            .unwrap_or_default(),
        interval_s: step,
        generators: Some(present.len() as u64),
        ..Default::default()
    };
    for (i, l, _) in present {
        for (op, v) in &l.ops {
            let e = ops.entry(op.clone()).or_insert((0, LatencyHist::new()));
            e.0 += v.errors;
            e.1.add(&interval_hist(i, &v.hist, &format!("operation {op}"))?);
        }
        delivery.add(&interval_hist(i, &l.delivery_hist, "delivery_hist")?);
        sched.add(&interval_hist(i, &l.sched_delay_hist, "sched_delay_hist")?);
        out.t_s = out.t_s.max(l.t_s);
        out.submitted += l.submitted;
        out.delivered += l.delivered;
        if let Some(q) = l.queue_length {
            let e = queue.entry(i.server.as_str()).or_default();
            *e = (*e).max(q);
        }
        if let Some(d) = l.disk {
            disks.push((i.disk_key(), d));
        }
        out.cpu_busy_pct += l.cpu_busy_pct;
        out.cpu_iowait_pct += l.cpu_iowait_pct;
        out.memory_used_pct += l.memory_used_pct;
    }
    let np = present.len().max(1) as f64;
    out.cpu_busy_pct /= np;
    out.cpu_iowait_pct /= np;
    out.memory_used_pct /= np;
    out.ops = (ops.into_iter())
        .map(|(k, (errors, h))| (k, IntervalOp::of(&h, errors)))
        .collect();
    out.delivery_p95_ms = delivery.quantile_us(0.95) as f64 / 1000.0;
    out.delivery_hist = delivery.to_base64();
    out.sched_delay_p99_ms = sched.quantile_us(0.99) as f64 / 1000.0;
    out.sched_delay_hist = sched.to_base64();
    let tot = |k: usize| totals.iter().map(|t| t[k]).sum::<u64>();
    (
        out.total_submitted,
        out.total_expected_deliveries,
        out.total_delivered,
    ) = (tot(0), tot(1), tot(2));
    out.queue_length = (!queue.is_empty()).then(|| queue.values().sum());
    out.disk = combine_disks(&disks);
    Ok(out)
}
