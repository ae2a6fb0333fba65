//! summary.txt of the mail results (the published-report layout in plain
//! text): `mail run` (merged or not) and `mail setup`.

use mailbench_results::mail::judge;
use mailbench_results::mail::profile::TaskKind;
use mailbench_results::mail::run::{
    Generator, MailHost, MailRunResult, MailSetupResult, Protocol, ProtocolFigures, Queue,
    TargetInfo,
};
use mailbench_results::merged::Merged;
use std::fmt::Write as _;

fn fmt_ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// The queue figures, or why there are none (a remote target's queue
/// cannot be read).
pub fn queue_text(q: &Queue) -> String {
    match (q.max, q.final_length) {
        (Some(max), Some(last)) => format!("max {max}  final {last}  ({})", q.source),
        _ => q.source.clone(),
    }
}

/// Whether an error sample is Dovecot 2.3's known CREATE race: a new folder's
/// CREATE answered `[ALREADYEXISTS]` while a delivery's list-index refresh
/// opened the half-created folder (docs/mail-load.md).
pub fn is_dovecot_create_race(sample: &str) -> bool {
    sample.contains("CREATE refused") && sample.contains("[ALREADYEXISTS]")
}

/// The first error samples (at most three), one line each, and a pointer to
/// the docs when one is Dovecot 2.3's known CREATE race.
pub fn error_samples_text(samples: &[String]) -> String {
    let mut s = String::new();
    for e in samples.iter().take(3) {
        let _ = writeln!(s, "  e.g. {e}");
    }
    if samples.iter().any(|x| is_dovecot_create_race(x)) {
        s.push_str(
            "  (CREATE of a new folder answered ALREADYEXISTS: a known Dovecot 2.3 race under load; \
             see docs/mail-load.md, \"Score, weights and verdict\")\n",
        );
    }
    s
}

/// One line: how each connection was protected and whether certificates
/// were verified.
pub fn security_line(target: &TargetInfo) -> String {
    let tls = &target.tls;
    let mut parts = Vec::new();
    if let Some(c) = &tls.connections {
        parts.push(format!("IMAP {}", c.imap));
        parts.push(format!("submission {}", c.submission));
        if let Some(s) = &c.sieve {
            parts.push(format!("ManageSieve {s}"));
        }
    }
    let uses_tls = parts.iter().any(|p| p.contains("TLS "));
    let mut line = format!("Security    {}", parts.join(", "));
    if uses_tls || !tls.certificates_verified {
        let _ = write!(line, "; certificates {}", tls.certificates);
    }
    line.push('\n');
    line
}

/// summary.txt of a mail-run result; a merged one ends with its
/// per-generator table.
pub fn mail_run(r: &MailRunResult) -> String {
    let mut s = String::new();
    let title = match &r.merged {
        Some(m) => format!(
            "mailbench mail run, merged from {} load generators",
            m.hosts.len()
        ),
        None => "mailbench mail run".to_string(),
    };
    let _ = writeln!(s, "{title} — {}\n", r.run.started);
    let t = &r.target;
    let _ = writeln!(
        s,
        "Target      {} IMAP {} submission {}",
        t.kind, t.imap, t.submission
    );
    s.push_str(&security_line(t));
    let _ = writeln!(s, "Protocol    {}", protocols_text(r));
    let _ = writeln!(
        s,
        "Profile     {} — {}",
        r.profile.name, r.profile.description
    );
    let w = &r.window;
    let _ = writeln!(
        s,
        "Users       {} (lists {}), day {:.0} s real = {:.1} h simulated (x{:.0}), ramp-up {:.0} s, drain {:.1} s\n",
        r.users,
        r.lists,
        w.day_s,
        w.simulated_day_s / 3600.0,
        w.compression,
        w.ramp_up_s,
        w.drain_s,
    );
    tasks_table(&mut s, r);
    response_time_lines(&mut s, r);
    flow_lines(&mut s, r);
    figures_lines(&mut s, r);
    let _ = writeln!(s, "\nVerdict           {}", r.verdict.label());
    for reason in &r.verdict.reasons {
        let _ = writeln!(s, "  - {reason}");
    }
    if let Some(m) = &r.merged {
        s.push_str(&hosts_text(m));
    }
    s
}

/// The response time (weighted 95th percentile): the steady window's, which
/// the verdict judges, beside the whole day's; older results have the day's.
fn response_time_lines(s: &mut String, r: &MailRunResult) {
    let Some(st) = r.steady.as_ref().filter(|st| st.judged_ms().is_some()) else {
        let _ = writeln!(
            s,
            "\nResponse time (weighted p95)     {} ms (limit {} ms)\n",
            fmt_ms(r.response_time.weighted_p95_ms),
            fmt_ms(r.response_time.limit_ms)
        );
        return;
    };
    let (from, to) = st.window.map(|w| (w.from_s, w.to_s)).unwrap_or_default();
    let _ = writeln!(
        s,
        "\nResponse time (weighted p95)     {} ms (limit {} ms), weighted p50 {} ms",
        fmt_ms(st.response_time_ms),
        fmt_ms(r.response_time.limit_ms),
        fmt_ms(st.response_time_p50_ms)
    );
    let _ = writeln!(
        s,
        "  over the steady window {} of the day ({from:.0}-{to:.0} s, {} intervals); the whole day {} ms",
        st.spec,
        st.intervals,
        fmt_ms(r.response_time.weighted_p95_ms)
    );
    let _ = writeln!(
        s,
        "  in the window: {:.1} submitted and {:.1} delivered per user per day, host CPU {:.1} %",
        st.submitted_per_user_per_day, st.delivered_per_user_per_day, st.host_cpu_busy_pct
    );
    if let Some(q) = &st.queue {
        let _ = writeln!(
            s,
            "  server queue in the window: average {:.1}, max {:.0}, at its end {:.0}, trend {:+.0} (limit {:.0}): {}",
            q.average,
            q.max,
            q.last,
            q.rise,
            q.limit,
            if q.holds { "holds" } else { "fails" }
        );
    }
    s.push('\n');
}

/// The protocols the users read mail over: `imap` (one, named once), or
/// each with its users (`imap 7 users, jmap 3 users`).
pub fn protocols_text(r: &MailRunResult) -> String {
    let p = r.user_protocols();
    match r.single_protocol() {
        Some(one) => format!("{one} (every user)"),
        None => (p.iter())
            .map(|(p, n)| format!("{p} {n} users"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// One protocol's line under its task (a run of several protocols).
fn protocol_row(s: &mut String, p: Protocol, f: &ProtocolFigures, skipped: bool) {
    let _ = writeln!(
        s,
        "  {:<20} {:>6} {:>7} {:>7} {:>7} {:>7} {:>7}",
        format!("over {p}"),
        f.latency.count,
        f.errors,
        if skipped {
            f.skipped.to_string()
        } else {
            String::new()
        },
        fmt_ms(f.latency.p50_ms),
        fmt_ms(f.latency.p95_ms),
        fmt_ms(f.latency.p99_ms),
    );
}

fn tasks_table(s: &mut String, r: &MailRunResult) {
    s.push_str("Task                    count  errors skipped  p50 ms  p95 ms  p99 ms  weight\n");
    for k in TaskKind::ALL {
        let Some(t) = r.tasks.get(&k) else {
            continue;
        };
        let _ = writeln!(
            s,
            "{:<22} {:>6} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7.1}",
            k.name(),
            t.latency.count,
            t.errors,
            t.skipped,
            fmt_ms(t.latency.p50_ms),
            fmt_ms(t.latency.p95_ms),
            fmt_ms(t.latency.p99_ms),
            t.weight
        );
        for (p, f) in &t.by_protocol {
            protocol_row(s, *p, f, true);
        }
    }
    for (name, t) in &r.operations {
        let _ = writeln!(
            s,
            "({:<20}) {:>6} {:>7} {:>7} {:>7} {:>7} {:>7}",
            name,
            t.latency.count,
            t.errors,
            "",
            fmt_ms(t.latency.p50_ms),
            fmt_ms(t.latency.p95_ms),
            fmt_ms(t.latency.p99_ms)
        );
        for (p, f) in &t.by_protocol {
            protocol_row(s, *p, f, false);
        }
    }
}

/// What the users sent: the commands of each protocol and the JMAP
/// requests, method calls, push events and reconnections (when JMAP ran).
pub fn commands_text(g: &Generator) -> String {
    let mut t = format!(
        "IMAP {} commands, SMTP {}, ManageSieve {}",
        g.imap_commands, g.smtp_commands, g.sieve_commands
    );
    if g.jmap_requests + g.jmap_method_calls + g.jmap_push_events > 0 {
        let _ = write!(
            t,
            "; JMAP {} requests of {} method calls, {} push events, {} push reconnections",
            g.jmap_requests, g.jmap_method_calls, g.jmap_push_events, g.jmap_push_reconnects
        );
    }
    t
}

fn flow_lines(s: &mut String, r: &MailRunResult) {
    let f = &r.mail_flow;
    let e = &f.profile_expects;
    s.push_str("Mail flow                       measured   profile\n");
    let _ = writeln!(
        s,
        "  submitted per user per day    {:>8.2}  {:>8.2}\n  delivered per user per day    {:>8.2}  {:>8.2}\n  recipients per message        {:>8.3}  {:>8.3}",
        f.per_user_per_day.submitted,
        e.submitted_per_day,
        f.per_user_per_day.delivered,
        e.delivered_per_day,
        f.recipients_per_message,
        e.recipients_per_message,
    );
    if let Some(w) = f
        .without_lists
        .as_ref()
        .filter(|_| f.lighter_day().is_some())
    {
        let _ = writeln!(
            s,
            "  without lists (this server)   {:>8.2}  {:>8.2}  (delivered, recipients per message)",
            w.delivered_per_day, w.recipients_per_message
        );
    }
    let _ = writeln!(
        s,
        "  submitted {} messages, {} deliveries expected, {} seen by recipients, {} logged by the server",
        f.submitted,
        f.expected_deliveries,
        f.delivered,
        f.server_deliveries
            .map(|x| x.to_string())
            .unwrap_or_else(|| "-".into())
    );
    let _ = writeln!(
        s,
        "  per simulated hour: {:.1} submitted, {:.1} delivered\n",
        f.per_simulated_hour.submitted, f.per_simulated_hour.delivered
    );
}

fn figures_lines(s: &mut String, r: &MailRunResult) {
    let d = &r.delivery_latency;
    let expected = r.mail_flow.expected_deliveries;
    let _ = writeln!(
        s,
        "Delivery latency  p50 {} ms  p95 {} ms  p99 {} ms  max {} ms; {} within {:.0} s",
        fmt_ms(d.summary.p50_ms),
        fmt_ms(d.summary.p95_ms),
        fmt_ms(d.summary.p99_ms),
        fmt_ms(d.summary.max_ms),
        judge::within_text(d.delivered_within(expected), expected),
        d.within_s
    );
    let _ = writeln!(s, "Queue             {}", queue_text(&r.queue));
    let _ = writeln!(
        s,
        "Errors            {} ({:.2} %) {}",
        r.errors.total,
        r.errors.rate_pct,
        serde_json::to_string(&r.errors.by_kind).unwrap_or_default()
    );
    s.push_str(&error_samples_text(&r.errors.samples));
    let h = &r.host;
    let _ = writeln!(
        s,
        "Host              CPU busy {:.1} %, iowait {:.1} %, memory used max {:.1} %",
        h.cpu_busy_pct, h.cpu_iowait_pct, h.memory_used_pct_max
    );
    if let Some(d) = &r.disk {
        let _ = writeln!(
            s,
            "Mail store disk   {} : {:.3} IOPS per user ({:.1} reads/s, {:.1} writes/s)",
            d.device.as_deref().unwrap_or("?"),
            d.iops_per_user,
            d.rates.reads_per_s,
            d.rates.writes_per_s
        );
    }
    if let Some(server) = &r.server {
        s.push_str(&super::server::server_text(server));
    }
    let g = &r.generator;
    let _ = writeln!(
        s,
        "Generator         {:.2} CPU s; {:.3} CPU s per 1000 commands; {:.2} CPU s per 1000 user-hours; scheduling delay p99 {} ms",
        g.cpu_s,
        g.cpu_s_per_1000_commands,
        g.cpu_s_per_1000_user_hours,
        fmt_ms(g.sched_delay.p99_ms)
    );
    let _ = writeln!(
        s,
        "  sent            {} (CPU per 1000 commands counts JMAP method calls as commands)",
        commands_text(g)
    );
    for w in &r.warnings {
        let _ = writeln!(s, "Warning           {w}");
    }
}

/// The per-generator part of summary.txt for a merged mail result.
pub fn hosts_text(m: &Merged<MailHost>) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\nPer-Host Results (load generators; aggregate above)");
    let _ = writeln!(
        o,
        "  {:<20} {:>6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7}  verdict",
        "host",
        "users",
        "first",
        "resp ms",
        "submitted",
        "expected",
        "delivered",
        "in time",
        "errors",
    );
    for h in &m.hosts {
        let _ = writeln!(
            o,
            "  {:<20} {:>6} {:>7} {:>9.1} {:>9} {:>9} {:>9} {:>7}% {:>7}  {}",
            h.label,
            h.users,
            h.first_user,
            h.response_time_ms,
            h.submitted,
            h.expected_deliveries,
            h.delivered,
            judge::pct_down(h.within_pct),
            h.errors,
            h.verdict.label()
        );
    }
    for (i, s) in m.sources.iter().enumerate() {
        let _ = writeln!(o, "  source {}: {s}", i + 1);
    }
    o
}

/// summary.txt of a mail-setup result.
pub fn mail_setup(r: &MailSetupResult) -> String {
    let st = &r.setup;
    let mut s = format!(
        "mailbench mail setup — {}\n\nTarget      {} ({})\n{}Profile     {}\nUsers       {} ({} ok)\nLists       {}\nFolders     {} created\nMessages    {} appended ({:.1} MB), {} already present\nRate        {:.0} appends/s over {:.1} s\nErrors      {}\n",
        r.run.started,
        r.target.kind,
        r.target.imap,
        security_line(&r.target),
        r.profile.name,
        st.users,
        st.users_ok,
        st.lists,
        st.folders_created,
        st.messages_appended,
        st.bytes_appended as f64 / 1e6,
        st.messages_present,
        st.appends_per_s,
        st.seconds,
        st.errors_by_kind.values().sum::<u64>(),
    );
    if !r.note.is_empty() {
        let _ = writeln!(s, "Note        {}", r.note);
    }
    let _ = write!(s, "\nVerdict     {}", r.verdict.label());
    for reason in &r.verdict.reasons {
        let _ = write!(s, "\n  - {reason}");
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_show_three_error_samples_and_explain_the_dovecot_race() {
        let other: Vec<String> = (1..=5)
            .map(|i| format!("read (user{i}@x): reset: 127.0.0.1:143 closed the connection"))
            .collect();
        let t = error_samples_text(&other);
        assert_eq!(t.lines().count(), 3, "{t}");
        assert!(t.starts_with("  e.g. read (user1@x): reset"), "{t}");
        assert!(!t.contains("Dovecot"), "{t}");

        let race = "create_smart_folder (user5@x): rejected: CREATE refused by 127.0.0.1:143: \
                    [ALREADYEXISTS] Mailbox already exists (0.007 + 0.000 + 0.006 secs).";
        let t = error_samples_text(&[race.to_string()]);
        assert_eq!(t.lines().count(), 2, "{t}");
        assert!(t.contains("known Dovecot 2.3 race"), "{t}");
        assert_eq!(error_samples_text(&[]), "");
    }
}

#[cfg(test)]
mod fixture_tests {
    use super::*;

    fn fixture(name: &str) -> (serde_json::Value, String) {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../results/tests/fixtures/v1/");
        let json = std::fs::read_to_string(format!("{dir}{name}.json")).unwrap();
        let text = std::fs::read_to_string(format!("{dir}{name}.summary.txt")).unwrap();
        // Read as mailbench reads a version 1 file: older key names renamed.
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let kind = (mailbench_results::kind::kind_of(&v))
            .and_then(mailbench_results::Kind::parse)
            .unwrap();
        mailbench_results::kind::upgrade_v1(kind, &mut v);
        (v, text)
    }

    /// The typed renderers write what the binary wrote before the result
    /// was typed (summary.txt kept beside each version 1 fixture).
    #[test]
    fn summaries_of_real_results_are_unchanged() {
        for name in ["mail-run", "mail-run-merged"] {
            let (v, text) = fixture(name);
            let r: MailRunResult = serde_json::from_value(v).unwrap();
            assert_eq!(mail_run(&r), text, "{name}");
        }
        let (v, text) = fixture("mail-setup");
        let r: MailSetupResult = serde_json::from_value(v).unwrap();
        assert_eq!(mail_setup(&r), text);
    }

    /// Deliveries in time are rounded down with their count; a remote
    /// target's queue line says why there is none; a day without lists
    /// says how much lighter it is, in the result's warnings and here.
    #[test]
    fn delivery_queue_and_lighter_day_lines() {
        let (v, _) = fixture("mail-run");
        let mut r: MailRunResult = serde_json::from_value(v).unwrap();
        r.mail_flow.expected_deliveries = 8305;
        r.delivery_latency.delivered_within = Some(8301);
        r.delivery_latency.within_pct = judge::within_pct(8301, 8305);
        r.queue = Queue {
            source: "not available for remote targets".into(),
            samples: Vec::new(),
            max: None,
            final_length: None,
        };
        let mut w = r.mail_flow.profile_expects;
        w.delivered_per_day *= 0.8;
        w.recipients_per_message *= 0.8;
        r.mail_flow.without_lists = Some(w);
        let t = mail_run(&r);
        assert!(t.contains("; 99.9 % (8301/8305) within 60 s"), "{t}");
        assert!(
            t.contains("\nQueue             not available for remote targets\n"),
            "{t}"
        );
        assert!(!t.contains("null"), "{t}");
        assert!(t.contains("  without lists (this server)"), "{t}");
        let lighter = r.mail_flow.lighter_day().unwrap();
        assert!(lighter.contains("the day is 20.0 % lighter"), "{lighter}");
        assert_eq!(judge::pct_down(99.96), "99.9");
        assert_eq!(judge::pct_down(94.99), "94.9");
        assert_eq!(judge::pct_down(99.9), "99.9");
        assert_eq!(judge::pct_down(100.0), "100.0");
    }
}
