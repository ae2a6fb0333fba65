//! Sections of the mail-run page read from typed parts of the result: the
//! steady window the verdict judges, and the server host's own figures
//! (node exporter, Postfix exporter, Dovecot, or the local target's /proc).
//! View models for templates/mail_sections.html.

use super::tpl::{Kv, Row, Table, kv, table, td, td_judged, td_t};
use crate::fmt::{fixed, ms, num};
use mailbench_metrics::server::{ServerSection, SourceFigures};
use mailbench_results::mail::steady::SteadySection;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The steady window and the server's figures (both None for results
/// without them).
#[derive(Debug, Default, Serialize)]
pub struct SteadyServer {
    pub steady: Option<Kv>,
    pub server: Option<ServerView>,
}

#[derive(Debug, Serialize)]
pub struct ServerView {
    pub from: String,
    pub to: String,
    pub table: Table,
    pub per_mailbox: Option<Kv>,
}

/// A typed section of the raw result, or None when absent or unreadable.
fn section<T: DeserializeOwned>(raw: &Value, key: &str) -> Option<T> {
    raw.get(key)
        .filter(|v| !v.is_null())
        .and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// The steady window and the server's figures (empty for results without them).
pub fn steady_and_server(raw: &Value) -> SteadyServer {
    SteadyServer {
        steady: section::<SteadySection>(raw, "steady").map(|st| steady_kv(&st)),
        server: section::<ServerSection>(raw, "server").map(|s| server_view(&s)),
    }
}

fn steady_kv(st: &SteadySection) -> Kv {
    let window = st.window.map_or_else(
        || "not measured".to_string(),
        |w| {
            format!(
                "{:.0}–{:.0} s of the run ({} % of the day, {} intervals)",
                w.from_s,
                w.to_s,
                fixed(100.0 * w.share_of_day(), 0),
                st.intervals
            )
        },
    );
    let mut rows = vec![
        ("Window", format!("{} — {window}", st.spec)),
        (
            "Response time (weighted p95 / p50)",
            format!(
                "{} / {} ms",
                ms(st.response_time_ms),
                ms(st.response_time_p50_ms)
            ),
        ),
        (
            "Submitted / delivered per user per day",
            format!(
                "{} / {}",
                fixed(st.submitted_per_user_per_day, 1),
                fixed(st.delivered_per_user_per_day, 1)
            ),
        ),
        ("Errors", num(st.errors as f64)),
        (
            "Host CPU busy",
            format!("{} %", fixed(st.host_cpu_busy_pct, 1)),
        ),
    ];
    if let Some(q) = &st.queue {
        rows.push((
            "Server queue",
            format!(
                "average {} · max {} · last {} · trend {:+.0} over the window (limit {}) — {}",
                fixed(q.average, 1),
                fixed(q.max, 0),
                fixed(q.last, 0),
                q.rise,
                fixed(q.limit, 0),
                if q.holds { "holds" } else { "FAILS" }
            ),
        ));
    }
    kv("steady-table", rows)
}

fn server_view(s: &ServerSection) -> ServerView {
    let rows: Vec<Row> = s.sources.iter().map(source_row).collect();
    let table = table(
        "server-table",
        &[("", 2), ("store", 6), ("", 1)],
        &[
            "source",
            "CPU busy %",
            "reads/s",
            "writes/s",
            "read ms",
            "write ms",
            "queue depth",
            "busy %",
            "mail queue avg / max",
        ],
        rows,
    );
    let per_mailbox = s.per_mailbox.map(|p| {
        let mut kvs = vec![(
            "Store IOPS per mailbox (as run)",
            format!(
                "{} (reads {} + writes {} per user per s, {} users)",
                fixed(p.iops_per_mailbox, 4),
                fixed(p.reads_per_user_per_s, 4),
                fixed(p.writes_per_user_per_s, 4),
                p.users
            ),
        )];
        if let Some(r) = s.per_mailbox_real_day.filter(|_| s.compression > 1.0) {
            kvs.push((
                "At the profile's real rate",
                format!(
                    "{} (day compressed ×{}) — mailbench plan --iops-per-mailbox {}",
                    fixed(r.iops_per_mailbox, 4),
                    fixed(s.compression, 1),
                    fixed(r.iops_per_mailbox, 4)
                ),
            ));
        }
        kv("server-per-mailbox-table", kvs)
    });
    ServerView {
        from: format!("{:.0}", s.from_s),
        to: format!("{:.0}", s.to_s),
        table,
        per_mailbox,
    }
}

/// One source's row; a source without figures says why.
fn source_row(src: &SourceFigures) -> Row {
    let name = if src.kinds.is_empty() {
        src.source.clone()
    } else {
        format!("{} [{}]", src.source, src.kinds.join(", "))
    };
    let none = || "–".to_string();
    let Some(f) = &src.figures else {
        let why = src
            .error
            .clone()
            .unwrap_or_else(|| "fewer than two readings in the window".into());
        let mut row = vec![td_t(&name), td_judged(&why, true)];
        row.extend((0..7).map(|_| td(&none())));
        return row;
    };
    let host = f.host.as_ref();
    let store = host.and_then(|h| h.store.as_ref()).map(|s| &s.rates);
    let cell = |v: Option<f64>, d: usize| td(&v.map_or_else(none, |x| fixed(x, d)));
    vec![
        td_t(&name),
        cell(host.map(|h| h.cpu_busy_pct), 1),
        cell(store.map(|r| r.reads_per_s), 1),
        cell(store.map(|r| r.writes_per_s), 1),
        cell(store.map(|r| r.read_latency_ms), 2),
        cell(store.map(|r| r.write_latency_ms), 2),
        cell(store.map(|r| r.queue_depth), 2),
        cell(store.map(|r| r.utilisation_pct), 0),
        td(&f.queue.as_ref().map_or_else(none, |q| {
            format!("{} / {}", fixed(q.average, 1), fixed(q.max, 0))
        })),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailbench_results::mail::steady::{QueueJudgement, Window};

    #[test]
    fn a_failing_queue_and_a_silent_source_are_shown_with_their_reasons() {
        let st = SteadySection {
            spec: "25%-75%".into(),
            window: Some(Window {
                day_from_s: 0.0,
                day_to_s: 100.0,
                from_s: 25.0,
                to_s: 75.0,
            }),
            intervals: 50,
            response_time_ms: 45.4,
            queue: Some(QueueJudgement {
                samples: 50,
                slope_per_hour: 900.0,
                rise: 12.5,
                last: 30.0,
                average: 14.0,
                max: 31.0,
                limit: 10.0,
                holds: false,
            }),
            ..Default::default()
        };
        let sv = ServerSection {
            sources: vec![SourceFigures {
                source: "http://127.0.0.1:9/metrics".into(),
                scrapes: 4,
                failures: 4,
                error: Some("connection refused <here>".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let raw = serde_json::json!({ "steady": st, "server": sv });
        let render = |raw: &Value| {
            super::super::tpl::render("mail_sections.html", &steady_and_server(raw))
                .unwrap_or_else(|e| format!("template error: {e:#}"))
        };
        let h = render(&raw);
        assert!(h.contains(r#"id="steady-table""#), "{h}");
        assert!(
            h.contains("25–75 s of the run (50 % of the day, 50 intervals)"),
            "{h}"
        );
        assert!(
            h.contains("trend +12 over the window (limit 10) — FAILS"),
            "{h}"
        );
        assert!(
            h.contains(r#"<td class="bad">connection refused &lt;here&gt;</td>"#),
            "{h}"
        );
        assert!(render(&serde_json::json!({ "steady": null })).is_empty());
    }
}
