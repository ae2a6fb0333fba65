//! `mail setup` and `mail run` end to end: resolve options, bring up the target,
//! provision, drive the users, sample the host and the server queue, and write
//! result.json, summary.txt, intervals.jsonl and test.log.

use crate::endpoint::{Credentials, Endpoint, IMAP_SCHEMES, SIEVE_SCHEMES, SUBMISSION_SCHEMES};
use crate::local::{LOCAL_DOMAIN, LocalServer};
use crate::message::Generator;
use crate::options::Resolved;
use crate::profile::{Profile, ProfileExt};
use crate::run::{RunParams, Shared};
use crate::setup::provision;
use crate::stats::Stats;
use crate::target::{Pinned, Security, Target};
use crate::topology::Topology;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::{RunDir, TestLog};
use mailbench_base::{Error, Result};
use mailbench_metrics::system::device_of;
use mailbench_results::mail::run::*;
use mailbench_results::verdict::{RunHeader, Verdict};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

mod control;

use control::{CtlResult, controller};

/// What the run prints while it lasts (from the common flags): its live
/// line per interval unless `quiet` or `json`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Output {
    pub json: bool,
    pub quiet: bool,
}

/// A prepared target: endpoints, credentials, and the local servers if any.
struct Prepared {
    target: Arc<Target>,
    /// How each connection was protected at start (set by `probe`).
    security: Option<Security>,
    topo: Arc<Topology>,
    local: Option<LocalServer>,
    /// The sink's process (`--target sink`), stopped when dropped.
    sink: Option<crate::sink::SinkProcess>,
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
    match o.target.as_str() {
        "local" => prepare_local(o, profile, log),
        "sink" => {
            let s = crate::sink::prepare(o, profile, log)?;
            Ok(Prepared {
                target: Arc::new(s.target),
                security: None,
                topo: Arc::new(s.topo),
                local: None,
                sink: Some(s.process),
                local_dir: None,
                temp_dir: false,
            })
        }
        _ => prepare_remote(o, profile),
    }
}

/// The local target: its folder claimed, the users and lists generated (their alias
/// table written), the servers started.
fn prepare_local(o: &Resolved, profile: &Profile, log: &TestLog) -> Result<Prepared> {
    crate::local::check_prerequisites(&o.server)?;
    let (dir, temp) = local_dir(o, log);
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
    )
    .with_logins(o.login_format.as_deref(), o.first_user);
    let pf_etc = dir.join("postfix").join("etc");
    std::fs::create_dir_all(&pf_etc).map_err(|e| Error::io("cannot create", &pf_etc, e))?;
    let aliases = LocalServer::aliases_path(&dir);
    mailbench_base::rundir::write_atomic(&aliases, topo.alias_table().as_bytes())?;
    log.line(format!(
        "local target in {} ({} users, {} distribution lists)",
        dir.display(),
        topo.users.len(),
        topo.lists.len()
    ));
    let cyrus = o
        .cyrus_root
        .as_ref()
        .map(|root| crate::local::CyrusOptions {
            root: root.clone(),
            logins: (0..topo.users.len())
                .map(|i| topo.login(i).to_string())
                .collect(),
        });
    let local = LocalServer::start_sized(&dir, log, o.users.max(o.concurrency), cyrus)?;
    let p = local.ports;
    let mut target = Target::on_loopback(
        "local",
        [p.imap, p.submission, p.sieve],
        local.password.clone(),
        o,
    )?;
    // The local Cyrus serves JMAP on its HTTP port (Dovecot: none).
    target.jmap = p
        .http
        .map(|h| format!("http://127.0.0.1:{h}/.well-known/jmap"));
    Ok(Prepared {
        target: Arc::new(target),
        security: None,
        topo: Arc::new(topo),
        local: Some(local),
        sink: None,
        local_dir: Some(dir),
        temp_dir: temp,
    })
}

/// The local target's folder: `--local-dir`, else a new temporary one (true), after
/// removing the temporary folders of killed runs.
fn local_dir(o: &Resolved, log: &TestLog) -> (PathBuf, bool) {
    if let Some(d) = &o.local_dir {
        return (d.clone(), false);
    }
    let tmp = std::env::temp_dir();
    for d in crate::local::remove_stale_temp_dirs(&tmp) {
        log.line(format!(
            "removed {} (left by a mailbench run that was killed)",
            d.display()
        ));
    }
    let d = tmp.join(format!(
        "{}{}-{}",
        crate::local::TEMP_PREFIX,
        std::process::id(),
        crate::message::unix_now()
    ));
    (d, true)
}

/// A remote target: its endpoints, credentials, users and lists.
fn prepare_remote(o: &Resolved, profile: &Profile) -> Result<Prepared> {
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
    let creds = remote_credentials(o, &imap)?;
    let topo = remote_topology(o, profile, &creds)?;
    Ok(Prepared {
        target: Arc::new(Target {
            kind: "remote".into(),
            imap,
            submission,
            sieve,
            creds,
            op_timeout: o.op_timeout,
            tls: crate::options::tls_of(o)?,
            pinned: Pinned::default(),
            trace: crate::options::trace_dir(o)?,
            jmap: o.jmap.clone(),
        }),
        security: None,
        topo: Arc::new(topo),
        local: None,
        sink: None,
        local_dir: None,
        temp_dir: false,
    })
}

/// The remote users' passwords (`--users-file`, `--password-file` or the environment);
/// none is a usage error.
fn remote_credentials(o: &Resolved, imap: &Endpoint) -> Result<Credentials> {
    let creds = Credentials::load(o.users_file.as_deref(), o.password_file.as_deref())?;
    if creds.is_empty() {
        return Err(Error::usage(format!(
            "no password for the users of {}: set {} or give --password-file FILE or --users-file FILE \
             (passwords are never taken from the command line)",
            imap.url(),
            crate::endpoint::PASSWORD_ENV
        )));
    }
    Ok(creds)
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
            logins: creds.listed_logins()[from..to].to_vec(),
            lists: Vec::new(),
        }
    } else {
        Topology::generate(&o.user_format, o.first_user, o.users, profile, None, o.seed)
            .with_logins(o.login_format.as_deref(), o.first_user)
    };
    if let Some(f) = &o.lists_file {
        topo.read_lists(f)?;
    }
    Ok(topo)
}

/// `--trace-imap DIR`, claimed (a folder of someone else's files is refused).
/// Connects to every endpoint once (TLS as the policy says) and keeps how each
/// connection was protected; STARTTLS used here is required from then on.
/// Ctrl-C / SIGTERM during it: the check stops at once and the command goes
/// on to its interrupted result (no user starts).
fn probe(
    rt: &tokio::runtime::Runtime,
    p: &mut Prepared,
    log: &TestLog,
    intr: &mailbench_base::interrupt::Interrupt,
) -> Result<()> {
    let mut t = (*p.target).clone();
    let sec = match rt.block_on(t.probe(intr)) {
        Err(Error::Interrupted) => {
            log.line("interrupted while connecting to the servers");
            return Ok(());
        }
        r => r?,
    };
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

/// Checks everything `mail setup` and `mail run` with options `o` can check
/// before a run folder is written (exit 2): for callers that create folders
/// of their own first (`mail sweep`, a run over several hosts).
pub fn check(o: &Resolved) -> Result<()> {
    validate(o, &Profile::load(&o.profile)?)
}

/// Checks everything that can be checked before a run folder is written (exit 2).
fn validate(o: &Resolved, profile: &Profile) -> Result<()> {
    crate::run::capacity::check(o)?;
    crate::options::tls_of(o)?;
    if let Some(d) = &o.trace_imap {
        mailbench_base::rundir::claim_folder(d, true)?;
    }
    if o.target == "sink" {
        return Ok(());
    }
    if o.target == "local" {
        crate::local::check_prerequisites(&o.server)?;
        if let Some(d) = &o.local_dir {
            mailbench_base::rundir::claim_folder(d, true)?;
        }
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
    let creds = remote_credentials(o, &imap)?;
    remote_topology(o, profile, &creds)?;
    Ok(())
}

/// The target as the result records it.
fn target_info(p: &Prepared) -> TargetInfo {
    let tls = &p.target.tls;
    TargetInfo {
        kind: p.target.kind.clone(),
        imap: p.target.imap.url(),
        submission: p.target.submission.url(),
        sieve: p.target.sieve.as_ref().map(|s| s.url()),
        tls: TlsInfo {
            connections: p.security.as_ref().map(|s| Connections {
                imap: s.imap.clone(),
                submission: s.submission.clone(),
                sieve: s.sieve.clone(),
            }),
            starttls: tls.starttls,
            certificates_verified: tls.verify,
            certificates: tls.verification(),
            ca_file: tls.ca_file.as_ref().map(|f| f.display().to_string()),
            cleartext_auth_allowed: tls.allow_cleartext_auth,
        },
        local_dir: p.local_dir.as_ref().map(|d| d.display().to_string()),
        server: p.local.as_ref().map(|l| match l.server {
            "cyrus" => ServerInfo {
                software: "Cyrus IMAP 3.6 (imapd, lmtpd, timsieved, httpd with JMAP, idled) + Postfix 3.7 (virtual aliases, submission, LMTP delivery)".into(),
                fsync: "Cyrus defaults".into(),
                mail_location: "cyrus partition (one file per message, cyrus.index)".into(),
            },
            _ => ServerInfo {
                software: "Dovecot 2.3 (imap, lmtp, submission, managesieve) + Postfix 3.7 (virtual aliases, LMTP delivery)".into(),
                fsync: "mail_fsync = optimized (Dovecot default)".into(),
                mail_location: "maildir".into(),
            },
        }).or_else(|| p.sink.as_ref().map(|_| ServerInfo {
            software: crate::sink::SOFTWARE.into(),
            fsync: "none (nothing is stored)".into(),
            mail_location: "memory (sizes, flags and tracking headers only)".into(),
        })),
    }
}

/// `mailbench mail setup` in the run folder `run` (the driver's), stopped
/// when `intr` rises: the typed result, which the caller writes.
pub fn setup(o: Resolved, run: &RunDir, intr: &Interrupt) -> Result<MailSetupResult> {
    let profile = Profile::load(&o.profile)?;
    let started = std::time::Instant::now();
    validate(&o, &profile)?;
    let mut header = RunHeader::begin("mail-setup");
    run.log.line(format!(
        "mail setup: {} users, profile {}",
        o.users, profile.name
    ));
    let rt = runtime()?;
    let mut prepared = prepare(&o, &profile, &run.log)?;
    probe(&rt, &mut prepared, &run.log, intr)?;
    let report = provision_users(&rt, &o, &profile, &prepared, &run.log, intr);
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
    let verdict = if intr.raised() {
        run.log.line("interrupted: setup stopped");
        interrupted_verdict(format!(
            "interrupted during setup: {} of {} users done",
            report.users_ok, report.users
        ))
    } else {
        Verdict::from_reasons(reasons)
    };
    let mut note = String::new();
    if prepared.temp_dir {
        note = "the local target was temporary and is gone; give --local-dir DIR to keep it for `mail run --local-dir DIR`".into();
    }
    let result = MailSetupResult {
        run: header,
        config: o.clone(),
        target: target_info(&prepared),
        profile: profile.clone(),
        topology: TopologyInfo {
            users: prepared.topo.users.len() as u64,
            lists: (prepared.topo.lists.iter())
                .map(|l| ListInfo {
                    address: l.address.clone(),
                    size: l.members.len() as u64,
                })
                .collect(),
        },
        setup: crate::result::setup_figures(&report),
        note,
        verdict: verdict.clone(),
    };
    run.log
        .line(format!("mail setup done: {}", verdict.label()));
    drop(prepared);
    Ok(result)
}

/// The verdict of a run stopped by Ctrl-C / SIGTERM.
fn interrupted_verdict(reason: String) -> Verdict {
    Verdict {
        status: mailbench_results::verdict::Status::Interrupted,
        reasons: vec![reason],
    }
}

/// A finished `mail run` (test.log and intervals.jsonl written in its
/// folder): its typed result, which the caller writes.
pub struct MailRun {
    pub result: MailRunResult,
    /// The local target's servers, still running: they stop when this is
    /// dropped, after the caller wrote the result (Dovecot takes about a
    /// second to stop, and an interrupted run over MPI may have no more).
    pub servers: Servers,
}

/// A run's local servers (none for a remote target), stopped on drop.
pub struct Servers {
    _prepared: Prepared,
}

impl Servers {
    /// Stops the local servers now (the same as dropping).
    pub fn stop(self) {}
}

/// `mailbench mail run` in the run folder `run` (the driver's), with the
/// driver's hooks (the common start, each interval's figures, the interrupt).
pub fn run(
    o: Resolved,
    run: &RunDir,
    out: &Output,
    mut hooks: crate::hooks::RunHooks,
) -> Result<MailRun> {
    let profile = Profile::load(&o.profile)?;
    let started = std::time::Instant::now();
    validate(&o, &profile)?;
    let intr = hooks.interrupt.clone();
    let mut header = RunHeader::begin("mail-run");
    run.log.line(format!(
        "mail run: {} users, profile {}, day {:?} (simulated {:?}), ramp-up {:?}",
        o.users, profile.name, o.day_length, profile.day, o.ramp_up
    ));
    let rt = runtime()?;
    let mut prepared = prepare(&o, &profile, &run.log)?;
    probe(&rt, &mut prepared, &run.log, &intr)?;
    run.log
        .line(format!("target answers: {}", prepared.target.imap.url()));
    let setup_report = if o.skip_setup {
        None
    } else {
        // Idempotent: users already provisioned are checked, not doubled.
        run.log.line("setup: provisioning users (idempotent)");
        Some(provision_users(
            &rt, &o, &profile, &prepared, &run.log, &intr,
        ))
    };
    if let Some(wait) = hooks.before_load.take() {
        wait(&run.log)?;
    }
    let cpu_before = mailbench_metrics::system::process_cpu_s();
    let shared = shared_state(&o, &profile, &prepared);
    let mail_dir = prepared.local.as_ref().map(LocalServer::store_dir);
    let queue_etc = prepared
        .local_dir
        .as_ref()
        .map(|d| d.join("postfix").join("etc"));
    let disk_dev = mail_dir.as_deref().and_then(device_of).map(|(_, _, n)| n);
    let scraper = crate::servermetrics::start_for_run(
        &o,
        prepared.local_dir.is_some().then(|| disk_dev.clone()),
        shared.t0.into_std(),
        (shared.day_end() + o.drain + o.op_timeout * 2 + Duration::from_secs(60)).into_std(),
        &run.log,
    )?;
    let mut intervals = mailbench_base::rundir::create_new(&run.file("intervals.jsonl"))
        .map_err(|e| Error::io("cannot create", &run.file("intervals.jsonl"), e))?;
    let ctl = if intr.raised() {
        // Stopped during setup: no user starts; the result says so.
        run.log.line("interrupted before the load started");
        shared.interrupted.store(true, Ordering::Relaxed);
        CtlResult::default()
    } else {
        rt.block_on(controller(
            shared.clone(),
            &o,
            &run.log,
            &mut intervals,
            queue_etc.clone(),
            disk_dev.clone(),
            out,
            intr.clone(),
            &mut hooks.on_interval,
        ))
    };
    let load = LoadEnd {
        cpu_s: cpu_before.and_then(|b| Ok(mailbench_metrics::system::process_cpu_s()? - b)),
        server_series: scraper.map(|s| s.stop()),
        server_deliveries: prepared.local.as_ref().and_then(|l| l.deliveries_logged()),
        ctl,
        disk_dev,
        queue_local: queue_etc.is_some(),
    };
    header.finish(started.elapsed());
    let id = crate::result::Identity {
        header,
        target: target_info(&prepared),
        run_id: shared.run_id.clone(),
        users: prepared.topo.users.len(),
        lists: prepared.topo.lists.len(),
        setup: setup_report.as_ref().map(crate::result::setup_figures),
    };
    let result = run_result(&o, &profile, run, &prepared, &shared, id, load)?;
    log_done(&run.log, &result);
    Ok(MailRun {
        result,
        servers: Servers {
            _prepared: prepared,
        },
    })
}

/// The run's last line in the test log: its verdict and response time.
fn log_done(log: &TestLog, result: &MailRunResult) {
    log.line(format!(
        "mail run done: {} (response time {:.0} ms)",
        result.verdict.label(),
        result
            .steady
            .as_ref()
            .and_then(|s| s.judged_ms())
            .unwrap_or(result.response_time.weighted_p95_ms)
    ));
}

/// Every user of the prepared target provisioned with its content, as
/// `mail setup` does and `mail run` before its load (`--concurrency` users
/// at once, `--seed`'s messages); stops when `intr` is raised. The test log
/// gets the figures.
fn provision_users(
    rt: &tokio::runtime::Runtime,
    o: &Resolved,
    profile: &Profile,
    prepared: &Prepared,
    log: &TestLog,
    intr: &mailbench_base::interrupt::Interrupt,
) -> crate::setup::SetupReport {
    let r = rt.block_on(provision(
        prepared.target.clone(),
        prepared.topo.clone(),
        Arc::new(profile.clone()),
        o.concurrency,
        o.seed,
        log.clone(),
        intr.clone(),
    ));
    log.line(format!(
        "setup: {} users ok, {} messages appended in {:.1} s",
        r.users_ok, r.messages_appended, r.seconds
    ));
    r
}

/// What the users share: the run's parameters, profile, target, counters.
fn shared_state(o: &Resolved, profile: &Profile, prepared: &Prepared) -> Arc<Shared> {
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
    Arc::new(Shared {
        t0: tokio::time::Instant::now(),
        run_id,
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
        second_conns: tokio::sync::Semaphore::new(crate::run::capacity::SECOND_CONNECTIONS),
        task_slots: crate::run::capacity::TaskSlots::new(crate::run::capacity::tasks_in_flight(
            prepared.topo.users.len(),
        )),
        jmap: jmap_users(o, &prepared.target),
    })
}

/// What the users sent: IMAP, SMTP and ManageSieve commands, and the JMAP
/// users' requests, method calls and push events.
fn commands(sh: &crate::run::Shared) -> mailbench_results::mail::run::Commands {
    use crate::jmap::Counts;
    let n = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let j = sh.jmap.as_ref().map(|j| j.counts.as_ref());
    let jn =
        |f: fn(&Counts) -> &std::sync::atomic::AtomicU64| j.map(|c| Counts::get(f(c))).unwrap_or(0);
    mailbench_results::mail::run::Commands {
        imap: n(&sh.imap_cmds),
        smtp: n(&sh.smtp_cmds),
        sieve: n(&sh.sieve_cmds),
        jmap_requests: jn(|c| &c.requests),
        jmap_method_calls: jn(|c| &c.method_calls),
        jmap_push_events: jn(|c| &c.push_events),
        jmap_push_reconnects: jn(|c| &c.push_reconnects),
    }
}

/// Where the run's JMAP users connect (`None`: every user on IMAP).
fn jmap_users(o: &Resolved, target: &Target) -> Option<crate::run::jmap_user::JmapUsers> {
    let url = target.jmap.as_deref()?;
    // Checked when the options were resolved.
    let url = crate::jmap::session::session_url(url).ok()?;
    (o.jmap_pct > 0).then_some(crate::run::jmap_user::JmapUsers {
        url,
        pct: o.jmap_pct,
        first: o.first_user.saturating_sub(1),
        counts: std::sync::Arc::default(),
    })
}

/// What the load left for the result besides the users' counters.
struct LoadEnd {
    ctl: CtlResult,
    server_series: Option<crate::servermetrics::ServerSeries>,
    /// Deliveries the local Postfix logged.
    server_deliveries: Option<u64>,
    /// This process's CPU seconds during the load, or why /proc gave none.
    cpu_s: Result<f64, String>,
    /// The mail store's disk (local target).
    disk_dev: Option<String>,
    /// Whether the queue was sampled from the local Postfix.
    queue_local: bool,
}

/// The run's typed result from the final counters (deliveries still missing count as
/// not delivered unless interrupted), the steady window and the server's figures,
/// judged with the mail verdict rules.
fn run_result(
    o: &Resolved,
    profile: &Profile,
    run: &RunDir,
    prepared: &Prepared,
    shared: &Shared,
    id: crate::result::Identity,
    load: LoadEnd,
) -> Result<MailRunResult> {
    let mut stats = match shared.stats.lock() {
        Ok(mut g) => std::mem::take(&mut *g),
        Err(p) => std::mem::take(&mut *p.into_inner()),
    };
    let interrupted = shared.interrupted.load(Ordering::Relaxed);
    if !interrupted {
        stats.not_delivered(stats.expected_deliveries.saturating_sub(stats.delivered));
    }
    let ctl = load.ctl;
    let window = steady_window(o, profile)?;
    let steady = crate::steady::section(
        &o.steady,
        &window,
        &ctl.intervals,
        &(ctl.queue.iter())
            .map(|q| (q.t_s, q.length as f64))
            .collect::<Vec<_>>(),
        profile,
        prepared.topo.users.len(),
        o.delivery_within,
    );
    let server = match &load.server_series {
        Some(series) => {
            // The server's figures over the steady window.
            let day = (window.from_s, window.to_s);
            let compression = profile.day.as_secs_f64() / o.day_length.as_secs_f64().max(1e-9);
            let n = prepared.topo.users.len() as u64;
            let section = crate::servermetrics::finish(series, run, day, n, compression, o)?;
            Some((section, series.warnings.clone()))
        }
        None => None,
    };
    let measured = crate::result::Measured {
        server,
        steady: (!interrupted).then_some(steady),
        queue_local: load.queue_local,
        host: HostFigures {
            cpu_busy_pct: ctl.cpu_busy_pct,
            cpu_iowait_pct: ctl.cpu_iowait_pct,
            memory_used_pct_max: ctl.mem_max_pct,
        },
        disk: ctl.disk.map(|d| (load.disk_dev.clone(), d)),
        drain_s: ctl.drain_s,
        queue: ctl.queue,
        server_deliveries: load.server_deliveries,
        cpu_s: load.cpu_s,
        intervals_error: ctl.intervals_error.clone(),
        commands: commands(shared),
        planned_tasks: shared.planned.load(Ordering::Relaxed),
        generator: ctl.generator,
        interrupted,
        hard_stopped: ctl.hard_stopped,
        server_errors: prepared
            .local
            .as_ref()
            .map(|l| l.log_errors(5))
            .unwrap_or_default(),
    };
    Ok(crate::result::build(id, o, profile, &stats, measured))
}

/// The run's steady window (`--steady`, checked when the options were
/// resolved).
fn steady_window(o: &Resolved, profile: &Profile) -> Result<crate::steady::Window> {
    let spec: crate::steady::SteadySpec = o.steady.parse().map_err(Error::usage)?;
    spec.resolve(o.ramp_up, o.day_length, profile.day)
}
