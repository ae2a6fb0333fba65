//! summary.txt of a mail sweep: the LoadSim-style scaling table (users
//! against response time, CPU, mail flow, queue, store I/O and errors), the
//! supported users (the MMB3-style score) and what failed above them.

use mailbench_results::mail::sweep::{MailSweepResult, SweepGenerators, SweepLevel};
use std::fmt::Write as _;

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| format!("{x:.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

/// One row of the scaling table.
fn row(l: &SweepLevel) -> String {
    let queue = match (l.queue_average, l.queue_max) {
        (Some(a), Some(m)) => format!("{a:.1}/{m:.0}"),
        _ => "-".into(),
    };
    let result = match (&l.failed_criterion, l.passed()) {
        (_, true) => "PASS".to_string(),
        (Some(c), false) => format!("FAIL {c}"),
        (None, false) => format!("{:?}", l.status).to_uppercase(),
    };
    format!(
        "{:>7} {:>9.0} {:>9.1} {:>8.1} {:>7} {:>7} {:>8.1} {:>8.1} {:>9} {:>8} {:>8} {:>7} {:>8} {:>6}  {}",
        l.users,
        l.rate_equivalent_users,
        l.response_time_ms,
        l.response_time_p50_ms,
        opt(l.server_cpu_busy_pct, 1),
        opt(l.generator_cpu_pct, 1),
        l.submitted_per_user_per_day,
        l.delivered_per_user_per_day,
        queue,
        opt(l.store_reads_per_s, 1),
        opt(l.store_writes_per_s, 1),
        opt(l.store_latency_ms, 2),
        opt(l.iops_per_mailbox, 3),
        l.errors,
        result
    )
}

/// The scaling table with its header (also used by `report compare`).
pub fn table(levels: &[SweepLevel]) -> String {
    let mut s = String::new();
    s.push_str(
        "  Users  Rate-eq.  Resp p95 Resp p50 Srv CPU  mb CPU  Sub/u/d  Del/u/d Queue a/m  Store r/s     w/s  Lat ms IOPS/mbx Errors  Result\n",
    );
    s.push_str(
        "                         ms       ms       %       %                                                                               \n",
    );
    let mut sorted: Vec<&SweepLevel> = levels.iter().collect();
    sorted.sort_by_key(|l| l.users);
    for l in sorted {
        s.push_str(&row(l));
        s.push('\n');
    }
    s
}

/// The load generators of a sweep over MPI ranks, in words.
pub fn generators(g: &SweepGenerators) -> String {
    let mut hosts: Vec<&str> = Vec::new();
    for h in &g.hosts {
        if !hosts.contains(&h.as_str()) {
            hosts.push(h);
        }
    }
    let mut s = format!(
        "{} load generators (MPI ranks) on {}: each level's users split between them, \
         one start per level, the level's figures merged",
        g.count,
        hosts.join(", ")
    );
    for f in &g.failures {
        let _ = write!(s, "; FAILED: {}", f.reason);
    }
    s
}

/// summary.txt of a mail-sweep result.
pub fn mail_sweep(r: &MailSweepResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "mailbench mail sweep — {}\n", r.run.started);
    let t = &r.target;
    let _ = writeln!(
        s,
        "Target      {} IMAP {} submission {}",
        t.kind, t.imap, t.submission
    );
    let _ = writeln!(s, "Protocol    {}", r.config.protocol_text());
    let _ = writeln!(
        s,
        "Profile     {} — {}",
        r.profile.name, r.profile.description
    );
    let search = if r.plan.find_max {
        format!(
            "--find-max from {} up to {} users, resolution {} users",
            r.plan.levels.first().copied().unwrap_or(0),
            r.plan.levels.last().copied().unwrap_or(0),
            r.plan.resolution
        )
    } else {
        format!("levels {}", r.plan.users)
    };
    let _ = writeln!(s, "Sweep       {search}");
    if let Some(g) = &r.generators {
        let _ = writeln!(s, "Generators  {}", generators(g));
    }
    let _ = writeln!(
        s,
        "Day         {:.0} s real per level = {:.1} h simulated (x{:.0}), steady window {}, response time limit {:.0} ms\n",
        r.config.day_length.as_secs_f64(),
        r.profile.day.as_secs_f64() / 3600.0,
        r.compression,
        r.config.steady,
        r.config.max_score_ms
    );
    s.push_str(&table(&r.levels));
    s.push_str(
        "\nResp p95/p50: response time, the weighted 95th/50th percentile over the steady window. \
         Rate-eq.: users x compression.\nSrv CPU: the server host's. mb CPU: mailbench's own, \
         a share of the load generators' CPUs over the level's run.\n",
    );
    match r.supported_users {
        Some(n) => {
            let _ = writeln!(
                s,
                "\nSupported users   {n} (the largest level that passed every criterion; {:.0} rate-equivalent)",
                n as f64 * r.compression
            );
        }
        None => {
            let _ = writeln!(s, "\nSupported users   none (no level passed)");
        }
    }
    if let Some(f) = &r.failed_above {
        let _ = writeln!(
            s,
            "Failed above      {} users, first on {}: {}",
            f.users, f.criterion, f.reason
        );
    }
    disclosure(&mut s, r);
    if let Some(l) = r.levels.iter().find(|l| !l.result_dir.is_empty()) {
        let _ = writeln!(
            s,
            "Level results     {}/ ... (one folder per level)",
            l.result_dir
        );
    }
    for w in &r.warnings {
        let _ = writeln!(s, "Warning           {w}");
    }
    let _ = writeln!(s, "\nVerdict           {}", r.verdict.label());
    for reason in &r.verdict.reasons {
        let _ = writeln!(s, "  - {reason}");
    }
    s
}

/// The full disclosure in brief: the figures at the supported level, the
/// server host as its exporters report it, the client.
fn disclosure(s: &mut String, r: &MailSweepResult) {
    let scored =
        (r.supported_users).and_then(|n| r.levels.iter().find(|l| l.users == n && l.passed()));
    if let Some(l) = scored {
        let count = |v: Option<u64>| v.map_or("-".to_string(), |n| n.to_string());
        let _ = writeln!(
            s,
            "At {} users      response time p95 {:.1} ms, p50 {:.1} ms; server CPU {} %; queue average {}; \
             submitted {}, delivered {} over the steady window ({} s)",
            l.users,
            l.response_time_ms,
            l.response_time_p50_ms,
            opt(l.server_cpu_busy_pct, 1),
            opt(l.queue_average, 1),
            count(l.steady_submitted),
            count(l.steady_delivered),
            opt(l.steady_s, 0)
        );
    }
    if let Some(d) = &r.disclosure {
        for c in &d.servers {
            // Nothing read (no endpoint): the reason once, not per fact.
            if let mailbench_metrics::disclosure::Fact::Unknown(why) = &c.sysname
                && [&c.release, &c.machine, &c.nodename]
                    .iter()
                    .all(|f| f.text() == c.sysname.text())
                && c.cpus.text() == c.sysname.text()
                && c.memory_bytes.text() == c.sysname.text()
            {
                let _ = writeln!(s, "Server host       {}: unknown ({why})", c.source);
                continue;
            }
            let _ = writeln!(
                s,
                "Server host       {}: {} {} {} on {}, {} CPUs, {} bytes of memory",
                c.source,
                c.sysname.text(),
                c.release.text(),
                c.machine.text(),
                c.nodename.text(),
                c.cpus.text(),
                c.memory_bytes.text()
            );
        }
        for (k, v) in d.declared.rows() {
            if !v.starts_with("not stated") {
                let _ = writeln!(s, "Declared          {k}: {}", v.replace('\n', " "));
            }
        }
    }
    let generators = r.generators.as_ref().map_or(1, |g| g.count);
    let own = scored.and_then(|l| l.generator_cpu_pct);
    let _ = writeln!(
        s,
        "Client            {} {}, {generators} load generator(s) on {}; mailbench CPU at the supported users {} %",
        r.run.tool,
        r.run.tool_version,
        r.run.host.hostname,
        opt(own, 1)
    );
}

#[cfg(test)]
mod tests {
    use mailbench_results::Status;
    use mailbench_results::mail::sweep::SweepLevel;

    fn level(users: u64, rt: f64, pass: bool) -> SweepLevel {
        SweepLevel {
            users,
            rate_equivalent_users: users as f64 * 1440.0,
            response_time_ms: rt,
            response_time_p50_ms: rt / 3.0,
            server_cpu_busy_pct: Some(users as f64),
            queue_average: Some(0.5),
            queue_max: Some(3.0),
            status: if pass { Status::Pass } else { Status::Fail },
            failed_criterion: (!pass).then(|| "response_time".into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_summary_states_the_full_disclosure() {
        use mailbench_metrics::disclosure::Fact;
        use mailbench_metrics::server_config::ServerConfig;
        use mailbench_results::mail::sweep::{MailSweepResult, SweepDisclosure};
        let text = include_str!("../../../results/tests/fixtures/v1/mail-sweep.json");
        let mut r: MailSweepResult = serde_json::from_str(text).unwrap();
        let n = r.supported_users.unwrap();
        for l in r.levels.iter_mut().filter(|l| l.users == n) {
            l.steady_submitted = Some(123);
            l.steady_delivered = Some(456);
            l.steady_s = Some(30.0);
            l.generator_cpu_pct = Some(4.34);
        }
        let mut server = ServerConfig::unknown("http://s:9100/metrics", "x");
        server.sysname = Fact::Known("Linux".into());
        server.cpus = Fact::Known(8);
        r.disclosure = Some(SweepDisclosure {
            declared: mailbench_results::disclosure::DisclosureToml {
                vendor: Some("Contoso".into()),
                ..Default::default()
            },
            servers: vec![server],
        });
        let s = super::mail_sweep(&r);
        assert!(s.contains(&format!("At {n} users")), "{s}");
        assert!(
            s.contains("submitted 123, delivered 456 over the steady window (30 s)"),
            "{s}"
        );
        assert!(
            s.contains("Server host       http://s:9100/metrics: Linux unknown (x)"),
            "{s}"
        );
        assert!(s.contains(", 8 CPUs,"), "{s}");
        assert!(s.contains("Declared          Vendor: Contoso"), "{s}");
        assert!(!s.contains("Storage model"), "only what was stated: {s}");
        assert!(
            s.contains("mailbench CPU at the supported users 4.3 %"),
            "{s}"
        );
    }

    #[test]
    fn a_server_host_not_read_says_why_once() {
        use mailbench_results::mail::sweep::{MailSweepResult, SweepDisclosure};
        let text = include_str!("../../../results/tests/fixtures/v1/mail-sweep.json");
        let mut r: MailSweepResult = serde_json::from_str(text).unwrap();
        let why = "no --server-metrics endpoint";
        r.disclosure = Some(SweepDisclosure {
            declared: Default::default(),
            servers: vec![mailbench_metrics::server_config::ServerConfig::unknown(
                "none", why,
            )],
        });
        let s = super::mail_sweep(&r);
        assert!(
            s.contains("Server host       none: unknown (no --server-metrics endpoint)\n"),
            "{s}"
        );
        assert_eq!(s.matches(why).count(), 1, "{s}");
    }

    #[test]
    fn the_table_has_one_sorted_row_per_level() {
        let t = super::table(&[level(8, 1600.0, false), level(4, 200.0, true)]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[2].trim_start().starts_with("4 "), "{t}");
        assert!(lines[2].ends_with("PASS"), "{t}");
        assert!(lines[3].ends_with("FAIL response_time"), "{t}");
        assert!(lines[3].contains("11520"), "rate-equivalent users: {t}");
        assert!(lines[3].contains("0.5/3"), "queue: {t}");
    }
}
