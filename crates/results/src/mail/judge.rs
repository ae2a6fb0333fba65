//! The pass/fail rules of a mail run as pure functions of plain figures: the
//! weighted 95th-percentile score, the error rate, the share of deliveries in
//! time and the verdict. `mail run` judges its own figures with them, and
//! `report merge` judges the sums of several load generators' results with the
//! same code, so an aggregate is judged exactly as one generator driving all
//! the users would have been.

use crate::mail::profile::{Profile, TaskKind};
use crate::verdict::{Status, Verdict};
use std::collections::BTreeMap;
use std::time::Duration;

/// The error kinds (`mailbench_mail::wire::ErrorKind` names) in the order
/// the verdict lists them.
pub const KIND_ORDER: [&str; 8] = [
    "connect",
    "auth",
    "timeout",
    "reset",
    "malformed",
    "rejected",
    "tls",
    "not_delivered",
];

/// The verdict's thresholds (`--max-score-ms`, `--max-error-rate`,
/// `--delivery-pct`, `--delivery-within`; recorded in the result's `config`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Criteria {
    pub max_score_ms: f64,
    /// Percent of operations; 0 means any error fails.
    pub max_error_rate_pct: f64,
    /// Percent of expected deliveries that must arrive within `delivery_within`.
    pub delivery_pct: f64,
    pub delivery_within: Duration,
}

impl Criteria {
    /// The published rule's thresholds, the defaults of `mail run`: a
    /// weighted 95th percentile of at most 1,000 ms, no errors, 95 % of the
    /// deliveries within 60 s (docs/mail-load.md, "Score, weights and verdict").
    pub const PUBLISHED: Criteria = Criteria {
        max_score_ms: 1000.0,
        max_error_rate_pct: 0.0,
        delivery_pct: 95.0,
        delivery_within: Duration::from_secs(60),
    };
}

/// The figures a verdict is made from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Weighted 95th-percentile score (`weighted_p95_ms`).
    pub response_time_ms: f64,
    pub total_errors: u64,
    /// `error_rate_pct(total_errors, attempts)`.
    pub error_rate_pct: f64,
    /// Errors by kind name (`connect`, `auth`, ... `not_delivered`).
    pub errors_by_kind: BTreeMap<String, u64>,
    pub expected_deliveries: u64,
    /// `within_pct(delivered_within, expected_deliveries)`.
    pub within_pct: f64,
    /// The last server queue length sampled (None: no queue to sample).
    pub queue_final: Option<u64>,
    /// Why the queue criterion over the steady window failed (None: it
    /// held, or there was no queue to judge).
    pub queue_steady: Option<String>,
    pub interrupted: bool,
    pub planned_tasks: u64,
    /// Tasks completed, failed or skipped.
    pub executed_tasks: u64,
}

/// Weighted 95th-percentile score: Σ(weight × p95) / Σweight over the task
/// kinds that ran. `p95_us(kind)` is the kind's 95th percentile in µs from
/// every sample of the day, or None when it never completed. Returns the
/// score in ms and the weights (`response_time.weights`).
pub fn weighted_p95_ms(
    profile: &Profile,
    p95_us: impl Fn(TaskKind) -> Option<u64>,
) -> (f64, BTreeMap<&'static str, f64>) {
    let mut num = 0.0;
    let mut den = 0.0;
    let mut weights = BTreeMap::new();
    for k in TaskKind::ALL {
        let w = profile.weight(k);
        if w <= 0.0 {
            continue;
        }
        weights.insert(k.name(), w);
        if let Some(p) = p95_us(k) {
            num += w * p as f64 / 1000.0;
            den += w;
        }
    }
    (if den > 0.0 { num / den } else { 0.0 }, weights)
}

/// Errors in percent of operations attempted (0 when nothing was attempted).
pub fn error_rate_pct(total_errors: u64, attempts: u64) -> f64 {
    if attempts > 0 {
        100.0 * total_errors as f64 / attempts as f64
    } else {
        0.0
    }
}

/// Deliveries seen within the limit in percent of those expected (100 when
/// none was expected).
pub fn within_pct(delivered_within: u64, expected_deliveries: u64) -> f64 {
    if expected_deliveries > 0 {
        100.0 * delivered_within as f64 / expected_deliveries as f64
    } else {
        100.0
    }
}

/// A percentage with one decimal, rounded down: 8301 of 8305 is "99.9",
/// never "100.0" (nor 94.96 "95.0" against a 95 % criterion).
pub fn pct_down(pct: f64) -> String {
    if !pct.is_finite() {
        return "–".into();
    }
    // The small epsilon keeps exact values (e.g. 99.9 stored as 99.8999…) whole.
    format!("{:.1}", ((pct * 10.0) + 1e-9).floor() / 10.0)
}

/// "99.9 % (8301/8305)": deliveries in time, rounded down, with the counts.
pub fn within_text(delivered_within: u64, expected: u64) -> String {
    format!(
        "{} % ({delivered_within}/{expected})",
        pct_down(within_pct(delivered_within, expected))
    )
}

/// Where a kind name sorts in the verdict's list (unknown names last).
fn kind_rank(name: &str) -> usize {
    KIND_ORDER
        .iter()
        .position(|k| *k == name)
        .unwrap_or(KIND_ORDER.len())
}

/// The criteria of a mail run, in the order the verdict lists them.
pub const CRITERIA: [&str; 5] = ["response_time", "errors", "delivery", "queue", "tasks"];

/// What an interrupted run is not judged on, in the verdict's words: it
/// stopped without waiting for the mail in flight to arrive, for the queue to
/// drain or for the rest of its tasks, so those figures say nothing.
pub const NOT_JUDGED_WHEN_INTERRUPTED: &str = "not judged: deliveries in time, the server queue \
     and the tasks left undone (the run stopped without waiting for the mail in flight to arrive \
     or for the queue to drain)";

/// Every failed criterion (a [`CRITERIA`] name) with its plain sentence, in
/// the verdict's order. An interrupted run is judged on what it measured (the
/// response time, the errors), never on what it did not wait for: the
/// deliveries, the queue and the planned tasks ([`NOT_JUDGED_WHEN_INTERRUPTED`]).
pub fn failures(f: &Figures, c: &Criteria) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if f.response_time_ms > c.max_score_ms {
        out.push((
            "response_time",
            format!(
                "the response time (weighted 95th percentile) is {:.0} ms, over the {:.0} ms limit",
                f.response_time_ms, c.max_score_ms
            ),
        ));
    }
    if f.error_rate_pct > c.max_error_rate_pct
        || (c.max_error_rate_pct == 0.0 && f.total_errors > 0)
    {
        let mut kinds: Vec<(&String, &u64)> = f.errors_by_kind.iter().collect();
        kinds.sort_by_key(|(k, _)| kind_rank(k));
        let kinds: Vec<String> = kinds.iter().map(|(k, v)| format!("{v} {k}")).collect();
        out.push((
            "errors",
            format!(
                "{} errors ({:.2} % of operations; allowed {} %): {}",
                f.total_errors,
                f.error_rate_pct,
                c.max_error_rate_pct,
                kinds.join(", ")
            ),
        ));
    }
    if f.interrupted {
        return out;
    }
    if f.expected_deliveries > 0 && f.within_pct < c.delivery_pct {
        out.push((
            "delivery",
            format!(
                "only {} % of deliveries arrived within {:?} (needed {} %)",
                pct_down(f.within_pct),
                c.delivery_within,
                c.delivery_pct
            ),
        ));
    }
    if let Some(r) = &f.queue_steady {
        out.push(("queue", r.clone()));
    }
    if let Some(q) = f.queue_final
        && q > 0
    {
        out.push((
            "queue",
            format!("the server queue did not drain: {q} messages still queued at the end"),
        ));
    }
    if f.executed_tasks < f.planned_tasks {
        out.push((
            "tasks",
            format!(
                "{} of {} planned tasks did not run",
                f.planned_tasks - f.executed_tasks,
                f.planned_tasks
            ),
        ));
    }
    out
}

/// The verdict (docs/mail-load.md, "Score, weights and verdict"): pass only if the response time, the error
/// rate, the deliveries in time, the queue and the planned tasks all hold;
/// otherwise one plain sentence per failed criterion ([`failures`]). An
/// interrupted run is `interrupted` whatever the figures: its reasons say so
/// first, then what it failed of what it measured, then what was not judged.
pub fn verdict(f: &Figures, c: &Criteria) -> Verdict {
    let reasons = failures(f, c).into_iter().map(|(_, r)| r).collect();
    let mut v = Verdict::from_reasons(reasons);
    if f.interrupted {
        v.status = Status::Interrupted;
        v.reasons
            .insert(0, "interrupted before the end of the run".into());
        v.reasons.push(NOT_JUDGED_WHEN_INTERRUPTED.into());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn criteria() -> Criteria {
        Criteria::PUBLISHED
    }

    /// A run stopped early: nothing arrived in time, the queue still holds
    /// mail, most tasks never ran.
    fn stopped_early() -> Figures {
        Figures {
            response_time_ms: 40.0,
            expected_deliveries: 120,
            within_pct: 0.0,
            queue_final: Some(7),
            queue_steady: Some("the queue grew over the steady window".into()),
            planned_tasks: 500,
            executed_tasks: 20,
            ..Figures::default()
        }
    }

    #[test]
    fn an_interrupted_run_is_not_judged_on_what_it_did_not_wait_for() {
        let f = Figures {
            interrupted: true,
            ..stopped_early()
        };
        let v = verdict(&f, &criteria());
        assert_eq!(v.status, Status::Interrupted);
        assert_eq!(
            v.reasons,
            vec![
                "interrupted before the end of the run".to_string(),
                NOT_JUDGED_WHEN_INTERRUPTED.to_string()
            ]
        );
        assert!(failures(&f, &criteria()).is_empty());
    }

    #[test]
    fn an_interrupted_run_is_still_judged_on_what_it_measured() {
        let f = Figures {
            interrupted: true,
            response_time_ms: 1500.0,
            total_errors: 3,
            error_rate_pct: 1.0,
            errors_by_kind: BTreeMap::from([("timeout".to_string(), 3)]),
            ..stopped_early()
        };
        let names: Vec<&str> = failures(&f, &criteria()).iter().map(|x| x.0).collect();
        assert_eq!(names, ["response_time", "errors"]);
        let v = verdict(&f, &criteria());
        assert_eq!(v.reasons.len(), 4, "{:?}", v.reasons);
        assert_eq!(v.reasons[3], NOT_JUDGED_WHEN_INTERRUPTED);
    }

    #[test]
    fn a_finished_run_is_judged_on_every_criterion() {
        let names: Vec<&str> = (failures(&stopped_early(), &criteria()).iter())
            .map(|x| x.0)
            .collect();
        assert_eq!(names, ["delivery", "queue", "queue", "tasks"]);
        let v = verdict(&stopped_early(), &criteria());
        assert_eq!(v.status, Status::Fail);
        assert!(!v.reasons.iter().any(|r| r.contains("not judged")));
    }
}
