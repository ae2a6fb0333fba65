//! `mail setup` and `mail run` end to end: resolve options, bring up the target,
//! provision, drive the users, sample the host and the server queue, and write
//! result.json, summary.txt, intervals.jsonl and test.log.

use crate::local::{LOCAL_DOMAIN, LocalServer};
use crate::message::Generator;
use crate::options::Resolved;
use crate::profile::{Profile, TaskKind};
use crate::run::{RunParams, Shared};
use crate::setup::{SetupReport, provision};
use crate::stats::Stats;
use crate::target::{
    Credentials, Endpoint, IMAP_SCHEMES, Pinned, SIEVE_SCHEMES, SUBMISSION_SCHEMES, Security,
    Target,
};
use crate::tls::Tls;
use crate::topology::Topology;
use mailbench_base::rundir::{RunDir, TestLog};
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_metrics::LatencySummary;
use mailbench_metrics::system::{CpuTimes, DiskCounters, Memory, device_of};
use mailbench_results::verdict::{RunHeader, Verdict};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Where and how to report (from the common flags).
#[derive(Debug, Clone)]
pub struct Output {
    pub base: PathBuf,
    pub json: bool,
    pub quiet: bool,
    pub verbose: bool,
}

/// A prepared target: endpoints, credentials, and the local servers if any.
struct Prepared {
    target: Arc<Target>,
    /// How each connection was protected at start (set by `probe`).
    security: Option<Security>,
    topo: Arc<Topology>,
    local: Option<LocalServer>,
    local_dir: Option<PathBuf>,
    temp_dir: bool,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        if let Some(mut l) = self.local.take() {
            l.stop();
        }
        if self.temp_dir
            && let Some(d) = &self.local_dir
        {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::runtime(format!("cannot start the async runtime: {e}")))
}

fn prepare(o: &Resolved, profile: &Profile, log: &TestLog) -> Result<Prepared> {
    if o.target == "local" {
        crate::local::check_prerequisites()?;
        let (dir, temp) = match &o.local_dir {
            Some(d) => (d.clone(), false),
            None => {
                let d = std::env::temp_dir().join(format!(
                    "mailbench-local-{}-{}",
                    std::process::id(),
                    crate::message::unix_now()
                ));
                (d, true)
            }
        };
        crate::local::make_reachable_dir(&dir)?;
        mailbench_base::rundir::claim_folder(&dir, false)?;
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        }
        let topo = Topology::generate(
            &o.user_format,
            o.first_user,
            o.users,
            profile,
            Some(LOCAL_DOMAIN),
            o.seed,
        );
        let pf_etc = dir.join("postfix").join("etc");
        std::fs::create_dir_all(&pf_etc).map_err(|e| Error::io("cannot create", &pf_etc, e))?;
        let aliases = LocalServer::aliases_path(&dir);
        std::fs::write(&aliases, topo.alias_table())
            .map_err(|e| Error::io("cannot write", &aliases, e))?;
        log.line(format!(
            "local target in {} ({} users, {} distribution lists)",
            dir.display(),
            topo.users.len(),
            topo.lists.len()
        ));
        let local = LocalServer::start(&dir, log)?;
        let p = local.ports;
        let target = Target {
            kind: "local".into(),
            imap: Endpoint::local("imap", p.imap),
            submission: Endpoint::local("smtp", p.submission),
            sieve: Some(Endpoint::local("sieve", p.sieve)),
            creds: Credentials::shared(local.password.clone()),
            op_timeout: o.op_timeout,
            tls: tls_of(o)?,
            pinned: Pinned::default(),
            trace: trace_dir(o)?,
        };
        Ok(Prepared {
            target: Arc::new(target),
            security: None,
            topo: Arc::new(topo),
            local: Some(local),
            local_dir: Some(dir),
            temp_dir: temp,
        })
    } else {
        let imap = Endpoint::parse(o.imap.as_deref().unwrap_or(""), "imap", IMAP_SCHEMES)?;
        let submission = Endpoint::parse(
            o.submission.as_deref().unwrap_or(""),
            "submission",
            SUBMISSION_SCHEMES,
        )?;
        let sieve = match &o.sieve {
            Some(s) => Some(Endpoint::parse(s, "sieve", SIEVE_SCHEMES)?),
            None => None,
        };
        let creds = Credentials::load(o.users_file.as_deref(), o.password_file.as_deref())?;
        if creds.is_empty() {
            return Err(Error::usage(format!(
                "no password for the users of {}: set {} or give --password-file FILE or --users-file FILE \
                 (passwords are never taken from the command line)",
                imap.url(),
                crate::target::PASSWORD_ENV
            )));
        }
        let topo = remote_topology(o, profile, &creds)?;
        Ok(Prepared {
            target: Arc::new(Target {
                kind: "remote".into(),
                imap,
                submission,
                sieve,
                creds,
                op_timeout: o.op_timeout,
                tls: tls_of(o)?,
                pinned: Pinned::default(),
                trace: trace_dir(o)?,
            }),
            security: None,
            topo: Arc::new(topo),
            local: None,
            local_dir: None,
            temp_dir: false,
        })
    }
}

/// The users of a remote target (`--users-file` from `--first-user` on, or
/// `--user-format`) and its distribution lists (`--lists-file`).
fn remote_topology(o: &Resolved, profile: &Profile, creds: &Credentials) -> Result<Topology> {
    let mut topo = if o.users_file.is_some() {
        let listed = creds.listed_users();
        let from = (o.first_user - 1).min(listed.len());
        let to = (from + o.users).min(listed.len());
        Topology {
            users: listed[from..to].to_vec(),
            lists: Vec::new(),
        }
    } else {
        Topology::generate(&o.user_format, o.first_user, o.users, profile, None, o.seed)
    };
    if let Some(f) = &o.lists_file {
        topo.read_lists(f)?;
    }
    Ok(topo)
}

/// `--trace-imap DIR`, claimed (a folder of someone else's files is refused).
fn trace_dir(o: &Resolved) -> Result<Option<crate::trace::TraceDir>> {
    o.trace_imap
        .as_deref()
        .map(crate::trace::TraceDir::create)
        .transpose()
}

fn tls_of(o: &Resolved) -> Result<Tls> {
    Tls::new(
        o.starttls,
        o.ca_file.as_deref(),
        o.tls_insecure,
        o.allow_cleartext_auth,
    )
}

/// Connects to every endpoint once (TLS as the policy says) and keeps how each
/// connection was protected; STARTTLS used here is required from then on.
fn probe(rt: &tokio::runtime::Runtime, p: &mut Prepared, log: &TestLog) -> Result<()> {
    let mut t = (*p.target).clone();
    let sec = rt.block_on(t.probe())?;
    log.line(format!(
        "connections: IMAP {}; submission {}{}; certificates {}",
        sec.imap,
        sec.submission,
        sec.sieve
            .as_ref()
            .map(|s| format!("; ManageSieve {s}"))
            .unwrap_or_default(),
        t.tls.verification()
    ));
    p.target = Arc::new(t);
    p.security = Some(sec);
    Ok(())
}

/// Checks everything that can be checked before a run folder is written (exit 2).
fn validate(o: &Resolved, profile: &Profile) -> Result<()> {
    tls_of(o)?;
    if let Some(d) = &o.trace_imap {
        mailbench_base::rundir::claim_folder(d, true)?;
    }
    if o.target == "local" {
        crate::local::check_prerequisites()?;
        let dir = o
            .local_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("x"));
        return crate::local::check_dir_reachable(&dir);
    }
    let imap = Endpoint::parse(o.imap.as_deref().unwrap_or(""), "imap", IMAP_SCHEMES)?;
    Endpoint::parse(
        o.submission.as_deref().unwrap_or(""),
        "submission",
        SUBMISSION_SCHEMES,
    )?;
    if let Some(s) = &o.sieve {
        Endpoint::parse(s, "sieve", SIEVE_SCHEMES)?;
    }
    let creds = Credentials::load(o.users_file.as_deref(), o.password_file.as_deref())?;
    if creds.is_empty() {
        return Err(Error::usage(format!(
            "no password for the users of {}: set {} or give --password-file FILE or --users-file FILE \
             (passwords are never taken from the command line)",
            imap.url(),
            crate::target::PASSWORD_ENV
        )));
    }
    remote_topology(o, profile, &creds)?;
    Ok(())
}

fn target_json(p: &Prepared) -> Value {
    let tls = &p.target.tls;
    json!({
        "kind": p.target.kind,
        "imap": p.target.imap.url(),
        "submission": p.target.submission.url(),
        "sieve": p.target.sieve.as_ref().map(|s| s.url()),
        "tls": {
            "connections": p.security,
            "starttls": tls.starttls,
            "certificates_verified": tls.verify,
            "certificates": tls.verification(),
            "ca_file": tls.ca_file.as_ref().map(|f| f.display().to_string()),
            "cleartext_auth_allowed": tls.allow_cleartext_auth,
        },
        "local_dir": p.local_dir.as_ref().map(|d| d.display().to_string()),
        "server": if p.local.is_some() {
            json!({
                "software": "Dovecot 2.3 (imap, lmtp, submission, managesieve) + Postfix 3.7 (virtual aliases, LMTP delivery)",
                "fsync": "mail_fsync = optimized (Dovecot default)",
                "mail_location": "maildir",
            })
        } else { Value::Null },
    })
}

/// One summary line: how each connection was protected and whether
/// certificates were verified (from `target_json`).
fn security_line(target: &Value) -> String {
    let tls = &target["tls"];
    let c = &tls["connections"];
    let mut parts = Vec::new();
    for (name, key) in [
        ("IMAP", "imap"),
        ("submission", "submission"),
        ("ManageSieve", "sieve"),
    ] {
        if let Some(v) = c[key].as_str() {
            parts.push(format!("{name} {v}"));
        }
    }
    let uses_tls = parts.iter().any(|p| p.contains("TLS "));
    let mut line = format!("Security    {}", parts.join(", "));
    if uses_tls || tls["certificates_verified"] == json!(false) {
        line.push_str(&format!(
            "; certificates {}",
            tls["certificates"].as_str().unwrap_or("?")
        ));
    }
    line.push('\n');
    line
}

fn setup_json(r: &SetupReport) -> Value {
    let errors: BTreeMap<&str, u64> = r
        .errors_by_kind
        .iter()
        .map(|(k, v)| (k.name(), *v))
        .collect();
    json!({
        "users": r.users, "users_ok": r.users_ok, "lists": r.lists,
        "folders_created": r.folders_created, "messages_appended": r.messages_appended,
        "bytes_appended": r.bytes_appended, "messages_present": r.messages_present,
        "errors_by_kind": errors, "error_samples": r.error_samples,
        "seconds": r.seconds, "appends_per_s": r.appends_per_s,
        "mailboxes": r.mailboxes,
    })
}

fn say(out: &Output, text: &str) {
    if !out.quiet && !out.json {
        println!("{text}");
    }
}

/// `mailbench mail setup`.
pub fn setup(o: Resolved, out: &Output) -> Result<ExitStatus> {
    let profile = Profile::load(&o.profile)?;
    let started = std::time::Instant::now();
    validate(&o, &profile)?;
    let intr = mailbench_base::interrupt::Interrupt::install()?;
    let mut header = RunHeader::begin("mail-setup");
    let run = RunDir::create(&out.base, "mail-setup")?;
    run.log.set_echo(out.verbose);
    run.log.line(format!(
        "mail setup: {} users, profile {}",
        o.users, profile.name
    ));
    let rt = runtime()?;
    let mut prepared = prepare(&o, &profile, &run.log)?;
    probe(&rt, &mut prepared, &run.log)?;
    let report = rt.block_on(provision(
        prepared.target.clone(),
        prepared.topo.clone(),
        Arc::new(profile.clone()),
        o.concurrency,
        true,
        o.seed,
        run.log.clone(),
        intr.clone(),
    ));
    if intr.raised() {
        return Err(Error::Interrupted);
    }
    header.finish(started.elapsed());
    let mut reasons = Vec::new();
    let failed = report.users - report.users_ok;
    if failed > 0 {
        reasons.push(format!(
            "{failed} of {} users could not be provisioned (first: {})",
            report.users,
            report.error_samples.first().cloned().unwrap_or_default()
        ));
    }
    let verdict = Verdict::from_reasons(reasons);
    let mut note = String::new();
    if prepared.temp_dir {
        note = "the local target was temporary and is gone; give --local-dir DIR to keep it for `mail run --local-dir DIR`".into();
    }
    let result = json!({
        "run": header,
        "config": o,
        "target": target_json(&prepared),
        "profile": profile,
        "topology": { "users": prepared.topo.users.len(), "lists": prepared.topo.lists.iter().map(|l| json!({"address": l.address, "size": l.members.len()})).collect::<Vec<_>>() },
        "setup": setup_json(&report),
        "note": note,
        "verdict": verdict,
    });
    run.write_json("result.json", &result)?;
    let summary = format!(
        "mailbench mail setup — {}\n\nTarget      {} ({})\n{}Profile     {}\nUsers       {} ({} ok)\nLists       {}\nFolders     {} created\nMessages    {} appended ({:.1} MB), {} already present\nRate        {:.0} appends/s over {:.1} s\nErrors      {}\n{}\nVerdict     {}{}\n",
        header.started,
        prepared.target.kind,
        prepared.target.imap.url(),
        security_line(&result["target"]),
        profile.name,
        report.users,
        report.users_ok,
        report.lists,
        report.folders_created,
        report.messages_appended,
        report.bytes_appended as f64 / 1e6,
        report.messages_present,
        report.appends_per_s,
        report.seconds,
        report.errors_by_kind.values().sum::<u64>(),
        if note.is_empty() {
            String::new()
        } else {
            format!("Note        {note}\n")
        },
        verdict.label(),
        verdict
            .reasons
            .iter()
            .map(|r| format!("\n  - {r}"))
            .collect::<String>(),
    );
    run.write("summary.txt", summary.as_bytes())?;
    run.log
        .line(format!("mail setup done: {}", verdict.label()));
    if out.json {
        println!(
            "{}",
            json!({"result": run.file("result.json"), "verdict": verdict})
        );
    } else {
        say(out, &summary);
        say(out, &format!("results: {}", run.path.display()));
    }
    drop(prepared);
    Ok(verdict.exit_status())
}

/// CPU seconds this process has used (utime + stime from /proc/self/stat).
pub fn process_cpu_s() -> f64 {
    let Ok(t) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = t.rsplit(')').next() else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3; utime is field 14, stime 15 => index 11, 12.
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

#[derive(Debug, Clone, Serialize)]
struct QueueSample {
    t_s: f64,
    length: u64,
}

/// A histogram's figures as result.json writes them (ms).
pub fn summary_ms(s: &LatencySummary) -> Value {
    json!({
        "count": s.count,
        "mean_ms": s.mean_us / 1000.0,
        "p50_ms": s.p50_us as f64 / 1000.0,
        "p95_ms": s.p95_us as f64 / 1000.0,
        "p99_ms": s.p99_us as f64 / 1000.0,
        "max_ms": s.max_us as f64 / 1000.0,
    })
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

/// `mailbench mail run`.
pub fn run(o: Resolved, out: &Output) -> Result<ExitStatus> {
    run_with(o, out, crate::hooks::RunHooks::default())
}

/// `mail run` with hooks: one host's share of a test over several hosts.
pub fn run_with(
    o: Resolved,
    out: &Output,
    mut hooks: crate::hooks::RunHooks,
) -> Result<ExitStatus> {
    let profile = Profile::load(&o.profile)?;
    let started = std::time::Instant::now();
    validate(&o, &profile)?;
    let intr = match hooks.interrupt.take() {
        Some(i) => i,
        None => mailbench_base::interrupt::Interrupt::install()?,
    };
    let mut header = RunHeader::begin("mail-run");
    let run = match &hooks.dir {
        Some(d) => RunDir::at(d)?,
        None => RunDir::create(&out.base, "mail-run")?,
    };
    run.log.set_echo(out.verbose);
    run.log.line(format!(
        "mail run: {} users, profile {}, day {:?} (simulated {:?}), ramp-up {:?}",
        o.users, profile.name, o.day_length, profile.day, o.ramp_up
    ));
    let rt = runtime()?;
    let mut prepared = prepare(&o, &profile, &run.log)?;
    probe(&rt, &mut prepared, &run.log)?;
    run.log
        .line(format!("target answers: {}", prepared.target.imap.url()));

    let setup_report = if o.skip_setup {
        None
    } else {
        run.log.line("setup: provisioning users (idempotent)");
        let r = rt.block_on(provision(
            prepared.target.clone(),
            prepared.topo.clone(),
            Arc::new(profile.clone()),
            o.concurrency,
            true,
            o.seed,
            run.log.clone(),
            intr.clone(),
        ));
        if intr.raised() {
            return Err(Error::Interrupted);
        }
        run.log.line(format!(
            "setup: {} users ok, {} messages appended in {:.1} s",
            r.users_ok, r.messages_appended, r.seconds
        ));
        Some(r)
    };

    if let Some(wait) = hooks.before_load.take() {
        wait(&run.log)?;
    }
    let cpu_before = process_cpu_s();
    let params = RunParams {
        day_length: o.day_length,
        ramp_up: o.ramp_up,
        drain: o.drain,
        use_idle: o.idle,
        poll_interval: o.poll_interval,
        seed: o.seed,
    };
    let run_id = crate::run::new_run_id(o.seed);
    let stats = Stats {
        within: o.delivery_within,
        ..Default::default()
    };
    let shared = Arc::new(Shared {
        t0: tokio::time::Instant::now(),
        run_id: run_id.clone(),
        profile: profile.clone(),
        topo: (*prepared.topo).clone(),
        target: (*prepared.target).clone(),
        msggen: Generator::new(&profile.sizes, o.seed),
        params,
        stats: std::sync::Mutex::new(stats),
        msg_seq: AtomicU64::new(1),
        imap_cmds: AtomicU64::new(0),
        smtp_cmds: AtomicU64::new(0),
        sieve_cmds: AtomicU64::new(0),
        planned: AtomicU64::new(0),
        interrupted: Default::default(),
    });
    let mail_dir = prepared
        .local_dir
        .as_ref()
        .map(|d| LocalServer::mail_dir(d));
    let queue_etc = prepared
        .local_dir
        .as_ref()
        .map(|d| d.join("postfix").join("etc"));
    let disk_dev = mail_dir.as_deref().and_then(device_of).map(|(_, _, n)| n);
    let mut intervals = std::fs::File::create(run.file("intervals.jsonl"))
        .map_err(|e| Error::io("cannot create", &run.file("intervals.jsonl"), e))?;

    let ctl = rt.block_on(controller(
        shared.clone(),
        &o,
        &run.log,
        &mut intervals,
        queue_etc.clone(),
        disk_dev.clone(),
        out,
        intr.clone(),
        &mut hooks.on_interval,
    ));
    let cpu_used = process_cpu_s() - cpu_before;
    let server_deliveries = prepared.local.as_ref().and_then(|l| l.deliveries_logged());
    header.finish(started.elapsed());

    // ---- result -----------------------------------------------------------
    let mut stats = match shared.stats.lock() {
        Ok(mut g) => std::mem::take(&mut *g),
        Err(p) => std::mem::take(&mut *p.into_inner()),
    };
    let interrupted = shared.interrupted.load(Ordering::Relaxed);
    let missing = stats.expected_deliveries.saturating_sub(stats.delivered);
    if !interrupted {
        stats.not_delivered(missing);
    }
    let users = prepared.topo.users.len() as f64;
    let sim_days: f64 = 1.0;
    let sim_hours = profile.day.as_secs_f64() / 3600.0;
    let real_hours = o.day_length.as_secs_f64() / 3600.0;
    let (score, weights) = weighted_p95_ms(&profile, &stats);
    let mut tasks = serde_json::Map::new();
    for k in TaskKind::ALL {
        let Some(s) = stats.ops.get(k.name()) else {
            continue;
        };
        let mut v = summary_ms(&s.hist.summary());
        v["errors"] = json!(s.errors);
        v["skipped"] = json!(s.skipped);
        v["skip_reasons"] = json!(s.skip_reasons);
        v["errors_by_kind"] = json!(
            s.errors_by_kind
                .iter()
                .map(|(k, v)| (k.name(), *v))
                .collect::<BTreeMap<_, _>>()
        );
        v["weight"] = json!(profile.weight(k));
        v["per_user_per_day"] = json!(if users > 0.0 {
            (s.count + s.errors) as f64 / users
        } else {
            0.0
        });
        v["hist"] = json!(s.hist.to_base64());
        tasks.insert(k.name().to_string(), v);
    }
    let mut other_ops = serde_json::Map::new();
    for name in ["logon", "new_mail"] {
        if let Some(s) = stats.ops.get(name) {
            let mut v = summary_ms(&s.hist.summary());
            v["errors"] = json!(s.errors);
            v["hist"] = json!(s.hist.to_base64());
            other_ops.insert(name.to_string(), v);
        }
    }
    let expected = profile.expected_flow(prepared.topo.users.len());
    let per_user_day = |n: u64| {
        if users > 0.0 {
            n as f64 / users / sim_days.max(1e-9)
        } else {
            0.0
        }
    };
    let rpm = if stats.submitted > 0 {
        stats.delivered as f64 / stats.submitted as f64
    } else {
        0.0
    };
    let within_pct = crate::judge::within_pct(stats.delivered_within, stats.expected_deliveries);
    let total_errors = stats.total_errors();
    let attempts: u64 = stats.ops.values().map(|s| s.count + s.errors).sum::<u64>() + missing;
    let error_rate = crate::judge::error_rate_pct(total_errors, attempts);
    let planned = shared.planned.load(Ordering::Relaxed);
    let executed: u64 = TaskKind::ALL
        .iter()
        .filter_map(|k| stats.ops.get(k.name()))
        .map(|s| s.count + s.errors + s.skipped)
        .sum();
    let imap_cmds = shared.imap_cmds.load(Ordering::Relaxed);
    let smtp_cmds = shared.smtp_cmds.load(Ordering::Relaxed);
    let sieve_cmds = shared.sieve_cmds.load(Ordering::Relaxed);
    let all_cmds = imap_cmds + smtp_cmds + sieve_cmds;
    let sched = stats.sched_delay.summary();

    // ---- verdict (judge.rs: the same rules judge merged results) -----------
    let verdict = crate::judge::verdict(
        &crate::judge::Figures {
            score_ms: score,
            total_errors,
            error_rate_pct: error_rate,
            errors_by_kind: stats
                .errors_by_kind
                .iter()
                .map(|(k, v)| (k.name().to_string(), *v))
                .collect(),
            expected_deliveries: stats.expected_deliveries,
            within_pct,
            queue_final: ctl.queue.last().map(|q| q.length),
            interrupted,
            planned_tasks: planned,
            executed_tasks: executed,
        },
        &crate::judge::Criteria {
            max_score_ms: o.max_score_ms,
            max_error_rate_pct: o.max_error_rate_pct,
            delivery_pct: o.delivery_pct,
            delivery_within: o.delivery_within,
        },
    );
    let mut warnings = Vec::new();
    if sched.p99_us > 10_000 {
        warnings.push(format!(
            "the generator's own scheduling delay p99 was {:.1} ms (over 10 ms): this machine is too busy to drive {} users precisely",
            sched.p99_us as f64 / 1000.0,
            prepared.topo.users.len()
        ));
    }
    // The local servers' own errors explain what the users only saw as
    // timeouts or refusals.
    let server_errors = prepared
        .local
        .as_ref()
        .map(|l| l.log_errors(5))
        .unwrap_or_default();
    if !server_errors.is_empty() {
        warnings.push(format!(
            "the local mail servers logged errors (first {}): {}",
            server_errors.len(),
            server_errors.join(" | ")
        ));
    }
    let errors_by_kind: BTreeMap<&str, u64> = stats
        .errors_by_kind
        .iter()
        .map(|(k, v)| (k.name(), *v))
        .collect();
    let disk_per_user = ctl.disk.map(|d| {
        json!({
            "device": disk_dev,
            "rates": d,
            "reads_per_s_per_user": d.reads_per_s / users.max(1.0),
            "writes_per_s_per_user": d.writes_per_s / users.max(1.0),
            "iops_per_user": (d.reads_per_s + d.writes_per_s) / users.max(1.0),
        })
    });
    let result = json!({
        "run": header,
        "config": o,
        "target": target_json(&prepared),
        "profile": profile,
        "run_id": run_id,
        "users": prepared.topo.users.len(),
        "lists": prepared.topo.lists.len(),
        "setup": setup_report.as_ref().map(setup_json),
        "window": {
            "ramp_up_s": o.ramp_up.as_secs_f64(),
            "day_s": o.day_length.as_secs_f64(),
            "simulated_day_s": profile.day.as_secs_f64(),
            "compression": profile.day.as_secs_f64() / o.day_length.as_secs_f64().max(1e-9),
            "drain_s": ctl.drain_s,
        },
        "tasks": tasks,
        "operations": other_ops,
        "score": {
            "weighted_p95_ms": score,
            "weights": weights,
            "limit_ms": o.max_score_ms,
        },
        "mail_flow": {
            "submitted": stats.submitted,
            "recipients_addressed": stats.addressed,
            "expected_deliveries": stats.expected_deliveries,
            "delivered": stats.delivered,
            "server_deliveries": server_deliveries,
            "per_user_per_day": {
                "submitted": per_user_day(stats.submitted),
                "delivered": per_user_day(stats.delivered),
            },
            "per_hour_real": {
                "submitted": stats.submitted as f64 / real_hours.max(1e-9),
                "delivered": stats.delivered as f64 / real_hours.max(1e-9),
            },
            "per_simulated_hour": {
                "submitted": stats.submitted as f64 / sim_hours.max(1e-9),
                "delivered": stats.delivered as f64 / sim_hours.max(1e-9),
            },
            "recipients_per_message": rpm,
            "profile_expects": expected,
        },
        "delivery_latency": {
            "summary": summary_ms(&stats.delivery.summary()),
            "within_s": o.delivery_within.as_secs_f64(),
            "within_pct": within_pct,
            "delivered_within": stats.delivered_within,
            "hist": stats.delivery.to_base64(),
        },
        "queue": {
            "source": if queue_etc.is_some() { "postqueue -j" } else { "not available for remote targets" },
            "samples": ctl.queue,
            "max": ctl.queue.iter().map(|q| q.length).max(),
            "final": ctl.queue.last().map(|q| q.length),
        },
        "errors": {
            "total": total_errors,
            "rate_pct": error_rate,
            "by_kind": errors_by_kind,
            "samples": stats.error_samples,
        },
        "host": {
            "cpu_busy_pct": ctl.cpu_busy_pct,
            "cpu_iowait_pct": ctl.cpu_iowait_pct,
            "memory_used_pct_max": ctl.mem_max_pct,
        },
        "disk": disk_per_user,
        "generator": {
            "cpu_s": cpu_used,
            "imap_commands": imap_cmds,
            "smtp_commands": smtp_cmds,
            "sieve_commands": sieve_cmds,
            "cpu_s_per_1000_commands": if all_cmds > 0 { 1000.0 * cpu_used / all_cmds as f64 } else { 0.0 },
            "simulated_user_hours": users * sim_hours,
            "cpu_s_per_1000_user_hours": if users > 0.0 { 1000.0 * cpu_used / (users * sim_hours) } else { 0.0 },
            "sched_delay": summary_ms(&sched),
            "sched_delay_hist": stats.sched_delay.to_base64(),
            "planned_tasks": planned,
            "executed_tasks": executed,
        },
        "warnings": warnings,
        "verdict": verdict,
    });
    run.write_json("result.json", &result)?;
    let summary = render_summary(&result, &profile);
    run.write("summary.txt", summary.as_bytes())?;
    run.log.line(format!(
        "mail run done: {} (score {score:.0} ms)",
        verdict.label()
    ));
    if out.json {
        println!(
            "{}",
            json!({"result": run.file("result.json"), "verdict": verdict, "score_ms": score,
                   "mail_flow": result["mail_flow"]})
        );
    } else {
        say(out, &summary);
        say(out, &format!("results: {}", run.path.display()));
    }
    drop(prepared);
    Ok(verdict.exit_status())
}

struct CtlResult {
    queue: Vec<QueueSample>,
    cpu_busy_pct: f64,
    cpu_iowait_pct: f64,
    mem_max_pct: f64,
    disk: Option<mailbench_metrics::system::DiskRates>,
    drain_s: f64,
}

/// Runs the users, writes one interval line per tick, samples the host and the
/// queue, ends the drain when every delivery arrived (or the drain limit passed),
/// and stops early on Ctrl-C / SIGTERM.
#[allow(clippy::too_many_arguments)]
async fn controller<'h>(
    sh: Arc<Shared>,
    o: &Resolved,
    log: &TestLog,
    intervals: &mut std::fs::File,
    queue_etc: Option<PathBuf>,
    disk_dev: Option<String>,
    out: &Output,
    intr: mailbench_base::interrupt::Interrupt,
    on_interval: &mut Option<crate::hooks::OnInterval<'h>>,
) -> CtlResult {
    use tokio::signal::unix::{SignalKind, signal};
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let users = tokio::spawn(crate::run::run_users(sh.clone(), stop_rx));
    let mut sigint = signal(SignalKind::interrupt()).ok();
    let mut sigterm = signal(SignalKind::terminate()).ok();
    let mut tick = tokio::time::interval(o.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let cpu0 = CpuTimes::read();
    let mut cpu_prev = cpu0;
    let disk0 = disk_dev.as_deref().and_then(DiskCounters::read);
    let mut disk_prev = disk0;
    let t_disk0 = std::time::Instant::now();
    let mut t_prev = t_disk0;
    let mut res = CtlResult {
        queue: Vec::new(),
        cpu_busy_pct: 0.0,
        cpu_iowait_pct: 0.0,
        mem_max_pct: 0.0,
        disk: None,
        drain_s: 0.0,
    };
    let day_end = sh.day_end();
    // Hard bound: nothing outlives the day + drain + a grace period.
    let hard_end = day_end + o.drain + o.op_timeout * 2 + Duration::from_secs(30);
    let mut stopping = false;
    let mut users = users;
    let mut cpu_day_start: Option<CpuTimes> = None;
    let mut disk_day_start: Option<(DiskCounters, std::time::Instant)> = None;
    let mut stats_day_end: Option<(CpuTimes, Option<DiskCounters>, std::time::Instant)> = None;
    loop {
        let interrupted = tokio::select! {
            _ = tick.tick() => intr.raised() && !stopping,
            _ = async { match sigint.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending::<()>().await } } => true,
            _ = async { match sigterm.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending::<()>().await } } => true,
            _ = &mut users => { break; }
        };
        if interrupted {
            log.line("interrupted: stopping the users");
            sh.interrupted.store(true, Ordering::Relaxed);
            let _ = stop_tx.send(true);
            stopping = true;
            continue;
        }
        let now = tokio::time::Instant::now();
        let t_s = now.saturating_duration_since(sh.t0).as_secs_f64();
        let snap = sh.take_interval();
        if let Some(f) = on_interval.as_mut() {
            f(&crate::hooks::IntervalView {
                elapsed_s: t_s,
                remaining_s: day_end.saturating_duration_since(now).as_secs_f64(),
                interval_s: o.interval.as_secs_f64(),
                users: sh.topo.users.len(),
                ops: &snap,
            });
        }
        let queue = match &queue_etc {
            Some(etc) => {
                let etc = etc.clone();
                tokio::task::spawn_blocking(move || crate::local::queue_len(&etc))
                    .await
                    .ok()
                    .flatten()
            }
            None => None,
        };
        if let Some(q) = queue {
            res.queue.push(QueueSample { t_s, length: q });
        }
        let cpu = CpuTimes::read();
        let (busy, iow) = match (cpu, cpu_prev) {
            (Some(a), Some(b)) => a.usage_since(&b),
            _ => (0.0, 0.0),
        };
        cpu_prev = cpu;
        let mem = Memory::read().map(|m| m.used_pct()).unwrap_or(0.0);
        res.mem_max_pct = res.mem_max_pct.max(mem);
        let disk_now = disk_dev.as_deref().and_then(DiskCounters::read);
        let wall = std::time::Instant::now();
        let disk_rates = match (disk_now, disk_prev) {
            (Some(a), Some(b)) => {
                Some(a.rates_since(&b, wall.duration_since(t_prev).as_secs_f64()))
            }
            _ => None,
        };
        disk_prev = disk_now;
        t_prev = wall;
        if now >= sh.day_start() && cpu_day_start.is_none() {
            cpu_day_start = cpu;
            disk_day_start = disk_now.map(|d| (d, wall));
        }
        if now >= day_end
            && stats_day_end.is_none()
            && let Some(c) = cpu
        {
            stats_day_end = Some((c, disk_now, wall));
        }
        let (submitted, expected, delivered) = sh.counts();
        let phase = if now < sh.day_start() {
            "ramp_up"
        } else if now < day_end {
            "day"
        } else {
            "drain"
        };
        let line = json!({
            "t_s": t_s,
            "phase": phase,
            "interval_s": o.interval.as_secs_f64(),
            "ops": snap.ops,
            "submitted": snap.submitted,
            "delivered": snap.delivered,
            "delivery_p95_ms": snap.delivery_p95_ms,
            "delivery_hist": snap.delivery_hist,
            "sched_delay_p99_ms": snap.sched_delay_p99_ms,
            "sched_delay_hist": snap.sched_delay_hist,
            "total_submitted": submitted,
            "total_expected_deliveries": expected,
            "total_delivered": delivered,
            "queue_length": queue,
            "cpu_busy_pct": busy,
            "cpu_iowait_pct": iow,
            "memory_used_pct": mem,
            "disk": disk_rates,
        });
        let _ = writeln!(intervals, "{line}");
        if !out.quiet && !out.json {
            // One compact line per interval (live progress; -q silences it).
            let g = snap.glance();
            let left = day_end.saturating_duration_since(now).as_secs_f64();
            eprintln!(
                "[{t_s:>7.1}s {phase:<7}] tasks {:>7.1}/s | slowest task p95 {:>8.1} ms | submitted {submitted} delivered {delivered}/{expected} | queue {} | errors {} | {left:.0}s of the day left",
                g.tasks as f64 / o.interval.as_secs_f64().max(1e-9),
                g.worst_p95_ms,
                queue.map(|q| q.to_string()).unwrap_or_else(|| "-".into()),
                g.errors
            );
        }
        if !stopping && now >= day_end {
            let drained = delivered >= expected && queue.unwrap_or(0) == 0;
            if drained || now >= day_end + o.drain {
                res.drain_s = now.saturating_duration_since(day_end).as_secs_f64();
                log.line(format!(
                    "drain over after {:.1} s: {delivered}/{expected} deliveries seen",
                    res.drain_s
                ));
                let _ = stop_tx.send(true);
                stopping = true;
            }
        }
        if now >= hard_end {
            log.line("hard time limit reached: aborting the remaining users");
            users.abort();
            break;
        }
    }
    // One last queue sample after the users logged off.
    if let Some(etc) = &queue_etc {
        let etc = etc.clone();
        if let Ok(Some(q)) =
            tokio::task::spawn_blocking(move || crate::local::queue_len(&etc)).await
        {
            res.queue.push(QueueSample {
                t_s: tokio::time::Instant::now()
                    .saturating_duration_since(sh.t0)
                    .as_secs_f64(),
                length: q,
            });
        }
    }
    // Host CPU and disk over the measured day.
    let end = stats_day_end.or_else(|| {
        CpuTimes::read().map(|c| {
            (
                c,
                disk_dev.as_deref().and_then(DiskCounters::read),
                std::time::Instant::now(),
            )
        })
    });
    if let (Some(a), Some((b, dend, wend))) = (cpu_day_start.or(cpu0), end) {
        let (busy, iow) = b.usage_since(&a);
        res.cpu_busy_pct = busy;
        res.cpu_iowait_pct = iow;
        if let (Some((d0, w0)), Some(d1)) = (disk_day_start.or(disk0.map(|d| (d, t_disk0))), dend) {
            res.disk = Some(d1.rates_since(&d0, wend.duration_since(w0).as_secs_f64()));
        }
    }
    res
}

fn fmt_ms(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
        None => "-".into(),
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
fn error_samples_text(samples: &Value) -> String {
    let Some(v) = samples.as_array() else {
        return String::new();
    };
    let mut s = String::new();
    for e in v.iter().filter_map(Value::as_str).take(3) {
        s.push_str(&format!("  e.g. {e}\n"));
    }
    if v.iter()
        .filter_map(Value::as_str)
        .any(is_dovecot_create_race)
    {
        s.push_str(
            "  (CREATE of a new folder answered ALREADYEXISTS: a known Dovecot 2.3 race under load; \
             see docs/mail-load.md, \"Score, weights and verdict\")\n",
        );
    }
    s
}

/// The plain-text report (published-report layout).
pub fn render_summary(r: &Value, profile: &Profile) -> String {
    let mut s = String::new();
    let run = &r["run"];
    let title = match r["merged"]["hosts"].as_array() {
        Some(h) => format!(
            "mailbench mail run, merged from {} load generators",
            h.len()
        ),
        None => "mailbench mail run".to_string(),
    };
    s.push_str(&format!(
        "{title} — {}\n\n",
        run["started"].as_str().unwrap_or("")
    ));
    s.push_str(&format!(
        "Target      {} IMAP {} submission {}\n",
        r["target"]["kind"].as_str().unwrap_or(""),
        r["target"]["imap"].as_str().unwrap_or(""),
        r["target"]["submission"].as_str().unwrap_or("")
    ));
    s.push_str(&security_line(&r["target"]));
    s.push_str(&format!(
        "Profile     {} — {}\n",
        profile.name, profile.description
    ));
    s.push_str(&format!(
        "Users       {} (lists {}), day {:.0} s real = {:.1} h simulated (x{:.0}), ramp-up {:.0} s, drain {:.1} s\n\n",
        r["users"], r["lists"],
        r["window"]["day_s"].as_f64().unwrap_or(0.0),
        r["window"]["simulated_day_s"].as_f64().unwrap_or(0.0) / 3600.0,
        r["window"]["compression"].as_f64().unwrap_or(0.0),
        r["window"]["ramp_up_s"].as_f64().unwrap_or(0.0),
        r["window"]["drain_s"].as_f64().unwrap_or(0.0),
    ));
    s.push_str("Task                    count  errors skipped  p50 ms  p95 ms  p99 ms  weight\n");
    for k in TaskKind::ALL {
        let t = &r["tasks"][k.name()];
        if t.is_null() {
            continue;
        }
        s.push_str(&format!(
            "{:<22} {:>6} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7.1}\n",
            k.name(),
            t["count"].as_u64().unwrap_or(0),
            t["errors"].as_u64().unwrap_or(0),
            t["skipped"].as_u64().unwrap_or(0),
            fmt_ms(&t["p50_ms"]),
            fmt_ms(&t["p95_ms"]),
            fmt_ms(&t["p99_ms"]),
            t["weight"].as_f64().unwrap_or(0.0)
        ));
    }
    for (name, t) in r["operations"].as_object().into_iter().flatten() {
        s.push_str(&format!(
            "({:<20}) {:>6} {:>7} {:>7} {:>7} {:>7} {:>7}\n",
            name,
            t["count"].as_u64().unwrap_or(0),
            t["errors"].as_u64().unwrap_or(0),
            "",
            fmt_ms(&t["p50_ms"]),
            fmt_ms(&t["p95_ms"]),
            fmt_ms(&t["p99_ms"])
        ));
    }
    s.push_str(&format!(
        "\nWeighted 95th-percentile score   {} ms (limit {} ms)\n\n",
        fmt_ms(&r["score"]["weighted_p95_ms"]),
        fmt_ms(&r["score"]["limit_ms"])
    ));
    let f = &r["mail_flow"];
    let e = &f["profile_expects"];
    s.push_str("Mail flow                       measured   profile\n");
    s.push_str(&format!(
        "  submitted per user per day    {:>8.2}  {:>8.2}\n  delivered per user per day    {:>8.2}  {:>8.2}\n  recipients per message        {:>8.3}  {:>8.3}\n",
        f["per_user_per_day"]["submitted"].as_f64().unwrap_or(0.0),
        e["submitted_per_day"].as_f64().unwrap_or(0.0),
        f["per_user_per_day"]["delivered"].as_f64().unwrap_or(0.0),
        e["delivered_per_day"].as_f64().unwrap_or(0.0),
        f["recipients_per_message"].as_f64().unwrap_or(0.0),
        e["recipients_per_message"].as_f64().unwrap_or(0.0),
    ));
    s.push_str(&format!(
        "  submitted {} messages, {} deliveries expected, {} seen by recipients, {} logged by the server\n",
        f["submitted"], f["expected_deliveries"], f["delivered"],
        if f["server_deliveries"].is_null() { "-".to_string() } else { f["server_deliveries"].to_string() }
    ));
    s.push_str(&format!(
        "  per simulated hour: {:.1} submitted, {:.1} delivered\n\n",
        f["per_simulated_hour"]["submitted"].as_f64().unwrap_or(0.0),
        f["per_simulated_hour"]["delivered"].as_f64().unwrap_or(0.0)
    ));
    let d = &r["delivery_latency"];
    s.push_str(&format!(
        "Delivery latency  p50 {} ms  p95 {} ms  p99 {} ms  max {} ms; {:.1} % within {:.0} s\n",
        fmt_ms(&d["summary"]["p50_ms"]),
        fmt_ms(&d["summary"]["p95_ms"]),
        fmt_ms(&d["summary"]["p99_ms"]),
        fmt_ms(&d["summary"]["max_ms"]),
        d["within_pct"].as_f64().unwrap_or(0.0),
        d["within_s"].as_f64().unwrap_or(0.0)
    ));
    let q = &r["queue"];
    s.push_str(&format!(
        "Queue             max {}  final {}  ({})\n",
        q["max"],
        q["final"],
        q["source"].as_str().unwrap_or("")
    ));
    s.push_str(&format!(
        "Errors            {} ({:.2} %) {}\n",
        r["errors"]["total"],
        r["errors"]["rate_pct"].as_f64().unwrap_or(0.0),
        r["errors"]["by_kind"]
    ));
    s.push_str(&error_samples_text(&r["errors"]["samples"]));
    s.push_str(&format!(
        "Host              CPU busy {:.1} %, iowait {:.1} %, memory used max {:.1} %\n",
        r["host"]["cpu_busy_pct"].as_f64().unwrap_or(0.0),
        r["host"]["cpu_iowait_pct"].as_f64().unwrap_or(0.0),
        r["host"]["memory_used_pct_max"].as_f64().unwrap_or(0.0)
    ));
    if !r["disk"].is_null() {
        s.push_str(&format!(
            "Mail store disk   {} : {:.3} IOPS per user ({:.1} reads/s, {:.1} writes/s)\n",
            r["disk"]["device"].as_str().unwrap_or("?"),
            r["disk"]["iops_per_user"].as_f64().unwrap_or(0.0),
            r["disk"]["rates"]["reads_per_s"].as_f64().unwrap_or(0.0),
            r["disk"]["rates"]["writes_per_s"].as_f64().unwrap_or(0.0)
        ));
    }
    let g = &r["generator"];
    s.push_str(&format!(
        "Generator         {:.2} CPU s; {:.3} CPU s per 1000 commands; {:.2} CPU s per 1000 user-hours; scheduling delay p99 {} ms\n",
        g["cpu_s"].as_f64().unwrap_or(0.0),
        g["cpu_s_per_1000_commands"].as_f64().unwrap_or(0.0),
        g["cpu_s_per_1000_user_hours"].as_f64().unwrap_or(0.0),
        fmt_ms(&g["sched_delay"]["p99_ms"])
    ));
    for w in r["warnings"].as_array().into_iter().flatten() {
        s.push_str(&format!("Warning           {}\n", w.as_str().unwrap_or("")));
    }
    let v = &r["verdict"];
    s.push_str(&format!(
        "\nVerdict           {}\n",
        v["status"].as_str().unwrap_or("").to_uppercase()
    ));
    for reason in v["reasons"].as_array().into_iter().flatten() {
        s.push_str(&format!("  - {}\n", reason.as_str().unwrap_or("")));
    }
    s
}

/// Default results folder.
pub fn default_output(global: Option<&Path>, file: Option<&Path>) -> PathBuf {
    global
        .or(file)
        .map(|p| p.to_path_buf())
        .unwrap_or_else(|| PathBuf::from("./mailbench-results"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_show_three_error_samples_and_explain_the_dovecot_race() {
        let other: Vec<String> = (1..=5)
            .map(|i| format!("read (user{i}@x): reset: 127.0.0.1:143 closed the connection"))
            .collect();
        let t = error_samples_text(&serde_json::json!(other));
        assert_eq!(t.lines().count(), 3, "{t}");
        assert!(t.starts_with("  e.g. read (user1@x): reset"), "{t}");
        assert!(!t.contains("Dovecot"), "{t}");

        let race = "create_smart_folder (user5@x): rejected: CREATE refused by 127.0.0.1:143: \
                    [ALREADYEXISTS] Mailbox already exists (0.007 + 0.000 + 0.006 secs).";
        let t = error_samples_text(&serde_json::json!([race]));
        assert_eq!(t.lines().count(), 2, "{t}");
        assert!(t.contains("known Dovecot 2.3 race"), "{t}");
        assert_eq!(error_samples_text(&Value::Null), "");
    }
}
