//! The mail-run result from what the run counted: the typed result of
//! `mailbench_results::mail::run`, judged with the mail verdict rules.

use crate::options::Resolved;
use crate::profile::{Profile, TaskKind};
use crate::stats::{OpStats, ProtocolOpStats, Stats};
use crate::wire::ErrorKind;
use mailbench_metrics::server::ServerSection;
use mailbench_metrics::system::DiskRates;
use mailbench_results::RunHeader;
use mailbench_results::mail::judge::{self, Figures};
use mailbench_results::mail::run::*;
use std::collections::BTreeMap;

/// What the controller measured besides the counters.
pub(crate) struct Measured {
    pub queue: Vec<QueueSample>,
    /// Where the queue was sampled from (None: remote target).
    pub queue_local: bool,
    pub host: HostFigures,
    pub disk: Option<(Option<String>, DiskRates)>,
    pub drain_s: f64,
    pub server_deliveries: Option<u64>,
    /// This process's CPU seconds, or why /proc gave no figure (a warning of
    /// the result, the figure then 0).
    pub cpu_s: Result<f64, String>,
    /// Why intervals.jsonl is incomplete, when a write to it failed.
    pub intervals_error: Option<String>,
    /// IMAP, SMTP, ManageSieve commands sent, JMAP requests, method calls
    /// and push events.
    pub commands: Commands,
    pub planned_tasks: u64,
    /// The generator's memory and the part of the day it drove.
    pub generator: GenSamples,
    pub interrupted: bool,
    /// The hard time limit (day + drain + grace) ended the run.
    pub hard_stopped: bool,
    /// The local servers' own error lines (first few), if any.
    pub server_errors: Vec<String>,
    /// The server's own figures (`--server-metrics`, the local target's
    /// /proc) and the scraper's warnings.
    pub server: Option<(ServerSection, Vec<String>)>,
    /// The steady window's figures (None when interrupted).
    pub steady: Option<mailbench_results::mail::steady::SteadySection>,
}

/// The generator's resident set over the run, and the part of the day its
/// users were driven.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GenSamples {
    pub rss_max_bytes: u64,
    /// The first sample 10 s into the day (a tenth into a shorter one).
    pub rss_day_start_bytes: u64,
    /// The last sample before the day ended or the run was stopped.
    pub rss_day_end_bytes: u64,
    /// Real seconds of the day the users were driven: the whole day, or up
    /// to the interrupt.
    pub day_run_s: f64,
}

/// Who ran, against what.
pub(crate) struct Identity {
    pub header: RunHeader,
    pub target: TargetInfo,
    pub run_id: String,
    pub users: usize,
    pub lists: usize,
    pub setup: Option<SetupFigures>,
}

fn by_kind(m: &BTreeMap<ErrorKind, u64>) -> BTreeMap<String, u64> {
    m.iter().map(|(k, v)| (k.name().to_string(), *v)).collect()
}

/// One operation's figures over the users of `p` (`users` of them).
fn protocol_figures(s: &ProtocolOpStats, users: u64, task: bool) -> ProtocolFigures {
    ProtocolFigures {
        latency: s.hist.summary().into(),
        errors: s.errors,
        skipped: s.skipped,
        per_user_per_day: if task && users > 0 {
            (s.count + s.errors) as f64 / users as f64
        } else {
            0.0
        },
        hist: s.hist.clone(),
    }
}

/// An operation's figures per protocol, in a run of several protocols
/// (empty in a run of one: the result names the protocol once).
fn by_protocol(
    stats: &Stats,
    op: &str,
    protocols: &BTreeMap<Protocol, u64>,
    task: bool,
) -> BTreeMap<Protocol, ProtocolFigures> {
    if protocols.len() < 2 {
        return BTreeMap::new();
    }
    (stats.by_protocol.iter())
        .filter(|((o, _), _)| *o == op)
        .map(|((_, p), s)| {
            let users = protocols.get(p).copied().unwrap_or(0);
            (*p, protocol_figures(s, users, task))
        })
        .collect()
}

fn task_figures(s: &OpStats, profile: &Profile, k: TaskKind, users: f64) -> TaskFigures {
    TaskFigures {
        latency: s.hist.summary().into(),
        errors: s.errors,
        skipped: s.skipped,
        skip_reasons: (s.skip_reasons.iter())
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        errors_by_kind: by_kind(&s.errors_by_kind),
        weight: profile.weight(k),
        per_user_per_day: if users > 0.0 {
            (s.count + s.errors) as f64 / users
        } else {
            0.0
        },
        hist: s.hist.clone(),
        by_protocol: BTreeMap::new(),
    }
}

/// The setup figures as a result records them.
pub(crate) fn setup_figures(r: &crate::setup::SetupReport) -> SetupFigures {
    SetupFigures {
        users: r.users as u64,
        users_ok: r.users_ok as u64,
        lists: r.lists as u64,
        folders_created: r.folders_created,
        messages_appended: r.messages_appended,
        bytes_appended: r.bytes_appended,
        messages_present: r.messages_present,
        errors_by_kind: by_kind(&r.errors_by_kind),
        error_samples: r.error_samples.clone(),
        seconds: r.seconds,
        appends_per_s: r.appends_per_s,
        mailboxes: r.mailboxes.as_ref().map(|m| m.layout.clone()),
    }
}

fn flow(
    stats: &Stats,
    profile: &Profile,
    o: &Resolved,
    users: usize,
    lists: usize,
    server: Option<u64>,
) -> MailFlow {
    let sim_hours = profile.day.as_secs_f64() / 3600.0;
    let real_hours = o.day_length.as_secs_f64() / 3600.0;
    MailFlow {
        submitted: stats.submitted,
        recipients_addressed: stats.addressed,
        expected_deliveries: stats.expected_deliveries,
        delivered: stats.delivered,
        server_deliveries: server,
        profile_expects: profile.expected_flow(users),
        without_lists: (lists == 0).then(|| profile.expected_flow_without_lists(users)),
        ..MailFlow::default()
    }
    .with_rates(users as u64, real_hours, sim_hours)
}

/// The result of a finished run (the counters are final: deliveries still
/// missing were counted as not delivered unless interrupted).
pub(crate) fn build(
    id: Identity,
    o: &Resolved,
    profile: &Profile,
    stats: &Stats,
    m: Measured,
) -> MailRunResult {
    let users = id.users as f64;
    let (score, weights) = weighted_p95_ms(profile, stats);
    let generator = generator(&m, o, profile, stats, id.users);
    let mut warnings = run_warnings(&id, o, profile, stats, &m);
    if let Err(e) = &m.cpu_s {
        warnings.push(format!("the generator's CPU figure is missing: {e}"));
    }
    warnings.extend(m.intervals_error.clone());
    let server = m.server.map(|(section, w)| {
        warnings.extend(w);
        section
    });
    let kind = id.target.kind.clone();
    let protocols = Protocol::users(
        o.jmap_pct,
        o.first_user.saturating_sub(1) as u64,
        id.users as u64,
    );
    let mut r = MailRunResult {
        run: id.header,
        config: o.clone(),
        target: id.target,
        profile: profile.clone(),
        run_id: id.run_id,
        users: id.users as u64,
        lists: id.lists as u64,
        setup: id.setup,
        window: MailWindow {
            ramp_up_s: o.ramp_up.as_secs_f64(),
            day_s: o.day_length.as_secs_f64(),
            simulated_day_s: profile.day.as_secs_f64(),
            compression: profile.day.as_secs_f64() / o.day_length.as_secs_f64().max(1e-9),
            drain_s: m.drain_s,
        },
        tasks: tasks(stats, profile, users, &protocols),
        operations: operations(stats, &protocols),
        protocols,
        response_time: DayResponseTime {
            weighted_p95_ms: score,
            weights: weights
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            limit_ms: o.max_score_ms,
        },
        mail_flow: flow(stats, profile, o, id.users, id.lists, m.server_deliveries),
        delivery_latency: DeliveryLatency {
            summary: stats.delivery.summary().into(),
            within_s: o.delivery_within.as_secs_f64(),
            within_pct: judge::within_pct(stats.delivered_within, stats.expected_deliveries),
            delivered_within: Some(stats.delivered_within),
            hist: stats.delivery.clone(),
        },
        queue: queue(m.queue, m.queue_local, &kind),
        errors: errors(stats),
        host: m.host,
        server,
        steady: m.steady,
        disk: m
            .disk
            .map(|(dev, rates)| DiskPerUser::of(dev, rates, users)),
        generator,
        warnings,
        verdict: mailbench_results::Verdict::from_reasons(Vec::new()),
        merged: None,
    };
    r.verdict = judge::verdict(&figures(&r, m.interrupted), &o.criteria());
    r
}

/// What driving the users cost: CPU per 1000 commands and per 1000 of the
/// user-hours simulated (the users times the part of the day they were
/// driven, at the day's compression: an interrupted run counts what it
/// simulated, not its plan), memory, the file limit and the users it holds.
fn generator(
    m: &Measured,
    o: &Resolved,
    profile: &Profile,
    stats: &Stats,
    users: usize,
) -> Generator {
    let compression = profile.day.as_secs_f64() / o.day_length.as_secs_f64().max(1e-9);
    let user_hours = users as f64 * m.generator.day_run_s * compression / 3600.0;
    let mut g = Generator::of(
        m.cpu_s.clone().unwrap_or(0.0),
        m.commands,
        user_hours,
        stats.sched_delay.clone(),
        m.planned_tasks,
        executed_tasks(stats),
    );
    let limit = crate::run::capacity::raise_file_limit();
    let (max_users, _) = crate::run::capacity::capacity(limit, crate::run::capacity::local_ports());
    g.memory = GeneratorMemory {
        rss_max_bytes: m.generator.rss_max_bytes,
        rss_max_bytes_per_user: m.generator.rss_max_bytes as f64 / users.max(1) as f64,
        rss_day_start_bytes: m.generator.rss_day_start_bytes,
        rss_day_end_bytes: m.generator.rss_day_end_bytes,
        file_limit: limit.soft,
        max_users,
    };
    g
}

/// The figures of every task kind that ran.
fn tasks(
    stats: &Stats,
    profile: &Profile,
    users: f64,
    protocols: &BTreeMap<Protocol, u64>,
) -> BTreeMap<TaskKind, TaskFigures> {
    (TaskKind::ALL.iter())
        .filter_map(|k| {
            let mut f = task_figures(stats.ops.get(k.name())?, profile, *k, users);
            f.by_protocol = by_protocol(stats, k.name(), protocols, true);
            Some((*k, f))
        })
        .collect()
}

/// The figures of the operations that are not tasks (logon, new mail).
fn operations(stats: &Stats, protocols: &BTreeMap<Protocol, u64>) -> BTreeMap<String, OpFigures> {
    (["logon", "new_mail"].iter())
        .filter_map(|n| {
            let s = stats.ops.get(n)?;
            let f = OpFigures {
                latency: s.hist.summary().into(),
                errors: s.errors,
                hist: s.hist.clone(),
                by_protocol: by_protocol(stats, n, protocols, false),
            };
            Some((n.to_string(), f))
        })
        .collect()
}

/// Tasks run, failed or skipped.
fn executed_tasks(stats: &Stats) -> u64 {
    (TaskKind::ALL.iter())
        .filter_map(|k| stats.ops.get(k.name()))
        .map(|s| s.count + s.errors + s.skipped)
        .sum()
}

/// The errors and their rate over every attempt (deliveries still missing count
/// as failed attempts).
fn errors(stats: &Stats) -> Errors {
    let missing = stats.expected_deliveries.saturating_sub(stats.delivered);
    let attempts: u64 = stats.ops.values().map(|s| s.count + s.errors).sum::<u64>() + missing;
    let total_errors = stats.total_errors();
    Errors {
        total: total_errors,
        rate_pct: judge::error_rate_pct(total_errors, attempts),
        by_kind: by_kind(&stats.errors_by_kind),
        samples: stats.error_samples.clone(),
    }
}

/// The server queue's samples, largest and last length.
fn queue(samples: Vec<QueueSample>, local: bool, kind: &str) -> Queue {
    Queue {
        source: if local {
            "postqueue -j"
        } else if kind == "sink" {
            "none: the sink delivers before it answers"
        } else {
            "not available for remote targets"
        }
        .into(),
        max: samples.iter().map(|q| q.length).max(),
        final_length: samples.last().map(|q| q.length),
        samples,
    }
}

/// Warnings on how the run went: a busy generator, a lighter day than the
/// profile's, the hard time limit, the local servers' own errors.
fn run_warnings(
    id: &Identity,
    o: &Resolved,
    profile: &Profile,
    stats: &Stats,
    m: &Measured,
) -> Vec<String> {
    let sched = stats.sched_delay.summary();
    let mut warnings = Vec::new();
    if sched.p99_us > 10_000 {
        warnings.push(format!(
            "the generator's own scheduling delay p99 was {:.1} ms (over 10 ms): this machine is too busy to drive {} users precisely",
            sched.p99_us as f64 / 1000.0,
            id.users
        ));
    }
    let lighter = flow(stats, profile, o, id.users, id.lists, None).lighter_day();
    warnings.extend(lighter);
    if m.hard_stopped {
        warnings.push(
            "the run reached its hard time limit (day, drain, twice --op-timeout and 30 s): \
             users still busy were stopped and their tasks are missing from the figures"
                .into(),
        );
    }
    // The local servers' own errors explain what the users only saw as
    // timeouts or refusals.
    if !m.server_errors.is_empty() {
        warnings.push(format!(
            "the local mail servers logged errors (first {}): {}",
            m.server_errors.len(),
            m.server_errors.join(" | ")
        ));
    }
    warnings
}

/// The figures the verdict is made from.
pub(crate) fn figures(r: &MailRunResult, interrupted: bool) -> Figures {
    Figures {
        response_time_ms: (r.steady.as_ref())
            .and_then(|s| s.judged_ms())
            .unwrap_or(r.response_time.weighted_p95_ms),
        total_errors: r.errors.total,
        error_rate_pct: r.errors.rate_pct,
        errors_by_kind: r.errors.by_kind.clone(),
        expected_deliveries: r.mail_flow.expected_deliveries,
        within_pct: r.delivery_latency.within_pct,
        queue_final: r.queue.final_length,
        queue_steady: (r.steady.as_ref())
            .and_then(|s| s.queue.as_ref())
            .and_then(|q| q.reason()),
        interrupted,
        planned_tasks: r.generator.planned_tasks,
        executed_tasks: r.generator.executed_tasks,
    }
}

/// The failed criteria of a finished run (name and sentence, in the
/// verdict's order); empty for a run that passed or was interrupted.
pub fn failures(r: &MailRunResult) -> Vec<(&'static str, String)> {
    if r.verdict.status == mailbench_results::Status::Interrupted {
        return Vec::new();
    }
    judge::failures(&figures(r, false), &r.config.criteria())
}

/// Weighted 95th-percentile score: Σ(weight × p95) / Σweight over tasks that
/// ran (`judge::weighted_p95_ms`, shared with `report merge`).
pub fn weighted_p95_ms(profile: &Profile, stats: &Stats) -> (f64, BTreeMap<&'static str, f64>) {
    crate::judge::weighted_p95_ms(profile, |k| {
        stats
            .ops
            .get(k.name())
            .filter(|s| s.count > 0)
            .map(|s| s.hist.quantile_us(0.95))
    })
}
