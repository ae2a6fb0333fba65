//! `report compare`: key figures of two results side by side, with deltas and
//! regressions (throughput down or latency up beyond a tolerance).

use crate::html::mail::fnum;
use crate::load::Doc;
use mailbench_base::{Error, Result};
use mailbench_results::Status;
use serde::Serialize;
use serde_json::Value;

mod sweep;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub figure: String,
    pub unit: String,
    pub base: f64,
    pub new: f64,
    /// Relative change in percent (None when the base is zero).
    pub delta_pct: Option<f64>,
    pub better: Better,
    /// Only gated figures can be regressions; the others are shown for context.
    pub gated: bool,
    pub regression: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub base: String,
    pub new: String,
    pub kind: String,
    pub tolerance_pct: f64,
    pub base_verdict: String,
    pub new_verdict: String,
    pub notes: Vec<String>,
    pub rows: Vec<Row>,
    pub regressions: usize,
}

pub(crate) fn row(
    figure: &str,
    unit: &str,
    base: f64,
    new: f64,
    better: Better,
    gated: bool,
    tol: f64,
) -> Row {
    let delta_pct = if base != 0.0 {
        Some(100.0 * (new - base) / base.abs())
    } else {
        None
    };
    let worse = match better {
        Better::Higher => new < base,
        Better::Lower => new > base,
    };
    let beyond = match delta_pct {
        Some(d) => d.abs() > tol,
        // From zero: any worsening counts (e.g. errors appear).
        None => worse,
    };
    Row {
        figure: figure.into(),
        unit: unit.into(),
        base,
        new,
        delta_pct,
        better,
        gated,
        regression: gated && worse && beyond,
    }
}

fn status_of(v: &Value) -> String {
    v.get("verdict")
        .and_then(|x| x.get("status"))
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string()
}

/// The storage-run rows (throughput, latencies, errors) and notes on differing tests.
fn storage_rows(
    a: &crate::load::StorageDoc,
    b: &crate::load::StorageDoc,
    tol: f64,
) -> (Vec<Row>, Vec<String>) {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let (a, b) = (&a.result, &b.result);
    if a.spec.test_type != b.spec.test_type || a.spec.profile.name != b.spec.profile.name {
        notes.push(format!(
            "the tests differ: {:?}/{} vs {:?}/{}",
            a.spec.test_type, a.spec.profile.name, b.spec.test_type, b.spec.profile.name
        ));
    }
    if a.spec.target_iops != b.spec.target_iops {
        notes.push(format!(
            "target IOPS differ: {:?} vs {:?}",
            a.spec.target_iops, b.spec.target_iops
        ));
    }
    let (ta, tb) = (&a.total, &b.total);
    rows.push(row(
        "transactional IOPS",
        "IOPS",
        ta.transactional_iops,
        tb.transactional_iops,
        Better::Higher,
        true,
        tol,
    ));
    rows.push(row(
        "transactions per second",
        "/s",
        ta.transactions_per_s,
        tb.transactions_per_s,
        Better::Higher,
        true,
        tol,
    ));
    for (n, label) in [
        ("db_read", "database read"),
        ("log_write", "log write"),
        ("db_write", "database write"),
    ] {
        let (Some(ca), Some(cb)) = (ta.classes.get(n), tb.classes.get(n)) else {
            continue;
        };
        let (la, lb) = (&ca.latency_ms, &cb.latency_ms);
        let gated = n != "db_write";
        for (stat, x, y, g) in [
            ("avg", la.avg, lb.avg, gated),
            ("p95", la.p95, lb.p95, gated),
            ("p99", la.p99, lb.p99, gated),
            ("max", la.max, lb.max, false),
        ] {
            rows.push(row(
                &format!("{label} latency {stat}"),
                "ms",
                x,
                y,
                Better::Lower,
                g,
                tol,
            ));
        }
    }
    let (xa, xb) = (&ta.transaction_latency_ms, &tb.transaction_latency_ms);
    rows.push(row(
        "transaction response p99",
        "ms",
        xa.p99,
        xb.p99,
        Better::Lower,
        true,
        tol,
    ));
    rows.push(row(
        "page-fault stalls per second",
        "/s",
        ta.page_fault_stalls_per_s,
        tb.page_fault_stalls_per_s,
        Better::Lower,
        false,
        tol,
    ));
    rows.push(row(
        "I/O errors",
        "",
        ta.io_errors as f64,
        tb.io_errors as f64,
        Better::Lower,
        true,
        0.0,
    ));
    rows.push(row(
        "host CPU busy",
        "%",
        a.host.cpu_busy_avg_pct,
        b.host.cpu_busy_avg_pct,
        Better::Lower,
        false,
        tol,
    ));
    (rows, notes)
}

/// The mail-run rows: response time, flow, delivery, errors and each task's
/// p95 (matched by task and protocol), and notes on differing protocols.
fn mail_rows(
    a: &crate::load::MailDoc,
    b: &crate::load::MailDoc,
    tol: f64,
) -> (Vec<Row>, Vec<String>) {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let (a, b) = (&a.raw, &b.raw);
    let g = |v: &Value, p: &str| fnum(v, p).unwrap_or(0.0);
    rows.push(row(
        "response time (weighted p95)",
        "ms",
        g(a, "response_time.weighted_p95_ms"),
        g(b, "response_time.weighted_p95_ms"),
        Better::Lower,
        true,
        tol,
    ));
    rows.push(row(
        "messages delivered per simulated hour",
        "/h",
        g(a, "mail_flow.per_simulated_hour.delivered"),
        g(b, "mail_flow.per_simulated_hour.delivered"),
        Better::Higher,
        true,
        tol,
    ));
    rows.push(row(
        "delivery latency p95",
        "ms",
        g(a, "delivery_latency.summary.p95_ms"),
        g(b, "delivery_latency.summary.p95_ms"),
        Better::Lower,
        true,
        tol,
    ));
    rows.push(row(
        "deliveries within time",
        "%",
        g(a, "delivery_latency.within_pct"),
        g(b, "delivery_latency.within_pct"),
        Better::Higher,
        true,
        tol,
    ));
    rows.push(row(
        "errors",
        "",
        g(a, "errors.total"),
        g(b, "errors.total"),
        Better::Lower,
        true,
        0.0,
    ));
    let (ta, tb) = (task_p95s(a), task_p95s(b));
    match (single_protocol(a), single_protocol(b)) {
        // One protocol each: task by task, whatever the protocols (IMAP
        // against JMAP compares the same day over each).
        (Some(pa), Some(pb)) => {
            for ((k, _), x) in &ta {
                if let Some(y) = tb.get(&(k.clone(), pb.clone())) {
                    rows.push(row(
                        &format!("{k} p95"),
                        "ms",
                        *x,
                        *y,
                        Better::Lower,
                        false,
                        tol,
                    ));
                }
            }
            if pa != pb {
                notes.push(format!(
                    "the base's users read mail over {pa}, the new one's over {pb}: each task is compared across the protocols"
                ));
            }
        }
        // Several protocols: a task is matched by its name and protocol.
        _ => {
            for ((k, p), x) in &ta {
                if let Some(y) = tb.get(&(k.clone(), p.clone())) {
                    rows.push(row(
                        &format!("{k} p95 ({p})"),
                        "ms",
                        *x,
                        *y,
                        Better::Lower,
                        false,
                        tol,
                    ));
                }
            }
        }
    }
    (rows, notes)
}

/// The protocol every user of a mail-run result spoke (`protocols`; an
/// older result without it: IMAP), None when several.
fn single_protocol(r: &Value) -> Option<String> {
    match r.get("protocols").and_then(Value::as_object) {
        Some(m) if m.len() > 1 => None,
        Some(m) if m.len() == 1 => m.keys().next().cloned(),
        _ => Some("imap".into()),
    }
}

/// Each task's p95 by task and protocol: a run of several protocols has
/// them under `by_protocol`; a run of one, its tasks are that protocol's.
fn task_p95s(r: &Value) -> std::collections::BTreeMap<(String, String), f64> {
    let mut out = std::collections::BTreeMap::new();
    let single = single_protocol(r);
    let Some(tasks) = r.get("tasks").and_then(Value::as_object) else {
        return out;
    };
    let p95 = |v: &Value| fnum(v, "p95_ms").unwrap_or(0.0);
    for (k, v) in tasks {
        let by = v.get("by_protocol").and_then(Value::as_object);
        match (&single, by) {
            (None, Some(by)) => {
                for (p, f) in by {
                    out.insert((k.clone(), p.clone()), p95(f));
                }
            }
            (Some(p), _) => {
                out.insert((k.clone(), p.clone()), p95(v));
            }
            (None, None) => {}
        }
    }
    out
}

/// Compares two results of the same kind.
pub fn compare(base: &Doc, new: &Doc, tolerance_pct: f64) -> Result<Comparison> {
    let (kb, kn) = (base.kind(), new.kind());
    if kb != kn {
        return Err(Error::usage(format!(
            "cannot compare {} ({kb}) with {} ({kn}): compare results of the same kind",
            base.source().display(),
            new.source().display()
        )));
    }
    let tol = tolerance_pct;
    let (rows, mut notes) = match (base, new) {
        (Doc::Storage(a), Doc::Storage(b)) => storage_rows(a, b, tol),
        (Doc::Mail(a), Doc::Mail(b)) => mail_rows(a, b, tol),
        (Doc::Other(a), Doc::Other(b)) if kb == "mail-sweep" => sweep::rows(&a.raw, &b.raw, tol)?,
        _ => {
            return Err(Error::usage(format!(
                "report compare reads storage-run, mail-run and mail-sweep results; {} is {kb}",
                base.source().display()
            )));
        }
    };
    let (sa, sb) = (status_of(base.raw()), status_of(new.raw()));
    let mut regressions = rows.iter().filter(|r| r.regression).count();
    let pass = serde_json::to_value(Status::Pass)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "pass".into());
    if sa == pass && sb != pass {
        notes.push(format!("the verdict went from {sa} to {sb}"));
        regressions += 1;
    }
    Ok(Comparison {
        base: base.source().display().to_string(),
        new: new.source().display().to_string(),
        kind: kb,
        tolerance_pct: tol,
        base_verdict: sa,
        new_verdict: sb,
        notes,
        rows,
        regressions,
    })
}

/// The comparison as a text table.
pub fn render_text(c: &Comparison) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "base: {} ({})", c.base, c.base_verdict);
    let _ = writeln!(o, "new:  {} ({})", c.new, c.new_verdict);
    let _ = writeln!(o, "tolerance: {} %\n", c.tolerance_pct);
    let _ = writeln!(
        o,
        "{:<40} {:>14} {:>14} {:>10}",
        "figure", "base", "new", "delta"
    );
    for r in &c.rows {
        let d = match r.delta_pct {
            Some(d) => format!("{d:+.1} %"),
            None if r.base == r.new => "0.0 %".into(),
            None => "new".into(),
        };
        let mark = if r.regression {
            "REGRESSION"
        } else if !r.gated {
            "(info)"
        } else {
            ""
        };
        let fig = if r.unit.is_empty() {
            r.figure.clone()
        } else {
            format!("{} ({})", r.figure, r.unit)
        };
        let _ = writeln!(
            o,
            "{:<40} {:>14} {:>14} {:>10}  {}",
            fig,
            crate::fmt::num(r.base),
            crate::fmt::num(r.new),
            d,
            mark
        );
    }
    for n in &c.notes {
        let _ = writeln!(o, "note: {n}");
    }
    let _ = writeln!(
        o,
        "\n{}",
        if c.regressions == 0 {
            "No regression beyond the tolerance.".to_string()
        } else {
            format!("{} regression(s) beyond the tolerance.", c.regressions)
        }
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_judge_direction_and_tolerance() {
        assert!(row("iops", "", 100.0, 90.0, Better::Higher, true, 5.0).regression);
        assert!(!row("iops", "", 100.0, 96.0, Better::Higher, true, 5.0).regression);
        assert!(!row("iops", "", 100.0, 200.0, Better::Higher, true, 5.0).regression);
        assert!(row("lat", "", 1.0, 1.2, Better::Lower, true, 5.0).regression);
        assert!(!row("lat", "", 1.0, 1.2, Better::Lower, false, 5.0).regression);
        assert!(row("err", "", 0.0, 1.0, Better::Lower, true, 0.0).regression);
        assert!(!row("err", "", 0.0, 0.0, Better::Lower, true, 0.0).regression);
    }
}
