//! `report compare` of two mail sweeps (a server before and after a
//! change): the change in supported users (gated), and per level both ran
//! the response time and the server CPU (context).

use super::{Better, Row, row};
use mailbench_base::{Error, Result};
use mailbench_results::mail::sweep::MailSweepResult;
use serde_json::Value;

fn typed(v: &Value) -> Result<MailSweepResult> {
    serde_json::from_value(v.clone())
        .map_err(|e| Error::usage(format!("not a readable mail-sweep result: {e}")))
}

/// The rows and notes of two sweeps.
pub fn rows(base: &Value, new: &Value, tol: f64) -> Result<(Vec<Row>, Vec<String>)> {
    let (a, b) = (typed(base)?, typed(new)?);
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let su = |r: &MailSweepResult| r.supported_users.unwrap_or(0) as f64;
    rows.push(row(
        "supported users",
        "users",
        su(&a),
        su(&b),
        Better::Higher,
        true,
        tol,
    ));
    notes.push(format!(
        "supported users: {} before, {} after",
        a.supported_users
            .map(|n| n.to_string())
            .unwrap_or_else(|| "none".into()),
        b.supported_users
            .map(|n| n.to_string())
            .unwrap_or_else(|| "none".into())
    ));
    let proto = |r: &MailSweepResult| r.config.protocol_text();
    if a.config.jmap_pct != b.config.jmap_pct {
        notes.push(format!(
            "the users read mail over {} in the base, over {} in the new one: the change is the protocol's",
            proto(&a),
            proto(&b)
        ));
    }
    if (a.compression - b.compression).abs() > 1e-6 * a.compression.abs().max(1.0) {
        notes.push(format!(
            "the days were compressed differently (×{:.0} and ×{:.0}): the user counts do not carry the same rate",
            a.compression, b.compression
        ));
    }
    for la in &a.levels {
        let Some(lb) = b.levels.iter().find(|l| l.users == la.users) else {
            continue;
        };
        rows.push(row(
            &format!("{} users: response time", la.users),
            "ms",
            la.response_time_ms,
            lb.response_time_ms,
            Better::Lower,
            false,
            tol,
        ));
        if let (Some(x), Some(y)) = (la.server_cpu_busy_pct, lb.server_cpu_busy_pct) {
            rows.push(row(
                &format!("{} users: server CPU", la.users),
                "%",
                x,
                y,
                Better::Lower,
                false,
                tol,
            ));
        }
    }
    Ok((rows, notes))
}
