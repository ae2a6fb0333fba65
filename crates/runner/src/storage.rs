//! `storage init|run|verify|backup|recover`, written once for any number of
//! ranks. Every rank resolves its share (its databases: paths with
//! `{rank}`/`{host}` expanded, its own seed) and checks it before anything is
//! written; `storage run` creates the databases, waits at a barrier for the
//! other ranks and starts the load at one instant (rank 0 picks it, or
//! `--start-at`), so the windows begin and end together. One rank keeps its
//! result in the run folder; several keep theirs in `rank-N/` and rank 0
//! writes the aggregate beside them (`aggregate.rs`).

use crate::aggregate::finish;
use crate::progress::FanOut;
use crate::prometheus::MetricsServer;
use crate::world::{Command, Common, Place, Run, drive};
use mailbench_base::config::ConfigFile;
use mailbench_base::rundir::RunDir;
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_multihost::watch::{Coordinator, LiveMsg, Member};
use mailbench_results::disclosure::{Disclosure, DisclosureToml};
use mailbench_results::storage::init::{InitSummary, StorageInitResult};
use mailbench_results::storage::verify::StorageVerifyResult;
use mailbench_results::{AnyResult, RunHeader, Status, Verdict};
use mailbench_storage::run::{LiveFigures, Progress};
use mailbench_storage::spec::{Space, SpecExt, StorageSpec, StorageToml};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The storage commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageCommand {
    Init,
    Run,
    Verify,
    Backup,
    Recover,
}

impl StorageCommand {
    pub(crate) fn command(self) -> Command {
        match self {
            StorageCommand::Init => Command::StorageInit,
            StorageCommand::Run => Command::StorageRun,
            StorageCommand::Verify => Command::StorageVerify,
            StorageCommand::Backup => Command::StorageBackup,
            StorageCommand::Recover => Command::StorageRecover,
        }
    }
}

/// What the command line asks of a storage command.
pub struct StorageRequest<'a> {
    pub command: StorageCommand,
    /// The `[storage]` keys given as flags (they win over the file's).
    pub flags: StorageToml,
    /// `--config` (its `[storage]` and `[report]` sections).
    pub config: &'a ConfigFile,
    /// run, verify, backup: use databases that lost the tail of their log.
    pub accept_lost_log_tail: bool,
    /// run: `--metrics-listen` (else `[report] metrics_listen`).
    pub metrics_listen: Option<String>,
}

/// The `[report]` keys a storage command reads.
#[derive(Debug, Default, serde::Deserialize)]
struct ReportKeys {
    metrics_listen: Option<String>,
}

/// The command's options that are the same on every rank.
pub(crate) struct Asked<'a> {
    req: &'a StorageRequest<'a>,
    space: Space,
    log_files: u64,
    backup_to: Option<PathBuf>,
    metrics_listen: Option<String>,
    start_at: bool,
    /// `[disclosure]`: what the user states of the tested solution.
    declared: DisclosureToml,
}

/// One rank's share: its databases and what its part needs.
pub(crate) struct Share {
    pub(crate) spec: StorageSpec,
    /// backup: where this rank copies (templates expanded).
    pub(crate) backup_to: Option<PathBuf>,
    log_files: u64,
    /// run, rank 0: the Prometheus endpoint.
    metrics: Option<MetricsServer>,
    pub(crate) declared: DisclosureToml,
}

/// Runs a storage command on this rank of the world.
pub fn storage(req: StorageRequest, common: &Common) -> Result<ExitStatus> {
    let (asked, start_at) = asked(&req)?;
    let resolve = |p: &Place| resolve_share(&asked, p);
    drive(
        req.command.command(),
        common,
        start_at,
        &resolve,
        |run, share| {
            let own = part(&run, share);
            finish(run, own)
        },
    )
}

/// What a storage command asks, the same on every rank, and `--start-at`.
pub(crate) fn asked<'a>(req: &'a StorageRequest<'a>) -> Result<(Asked<'a>, Option<SystemTime>)> {
    let section: StorageToml = req.config.section("storage")?;
    let cmd = req.command;
    if req.flags.start_at.is_some() && cmd != StorageCommand::Run {
        return Err(Error::usage(
            "--start-at applies to `storage run` (the load starts at that time)",
        ));
    }
    // `start_at` in the file applies to `storage run` only (the same file
    // serves init, verify, backup and recover).
    let start_at = match cmd {
        StorageCommand::Run => req.flags.start_at.clone().or(section.start_at.clone()),
        _ => None,
    };
    let start_at = start_at
        .as_deref()
        .map(mailbench_multihost::parse_start_at)
        .transpose()?;
    let log_files = req.flags.log_files.or(section.log_files).unwrap_or(500);
    let report: ReportKeys = req.config.section("report")?;
    let declared: DisclosureToml = req.config.section("disclosure")?;
    declared.validate()?;
    let asked = Asked {
        declared,
        space: match cmd {
            StorageCommand::Verify | StorageCommand::Backup => Space::None,
            // Replaying what a crash left writes no new files: a full disk must not block it.
            StorageCommand::Recover if log_files == 0 => Space::None,
            _ => Space::Create,
        },
        log_files,
        backup_to: req.flags.backup_to.clone().or(section.backup_to),
        metrics_listen: req.metrics_listen.clone().or(report.metrics_listen),
        start_at: start_at.is_some(),
        req,
    };
    Ok((asked, start_at))
}

/// This rank's share, checked before anything is written.
pub(crate) fn resolve_share(a: &Asked, p: &Place) -> Result<Share> {
    let cmd = a.req.command;
    let default_data = if p.size > 1 {
        "./mailbench-data/rank-{rank}"
    } else {
        "./mailbench-data"
    };
    let spec = StorageSpec::resolve_for_host(
        a.req.flags.clone(),
        a.req.config,
        Path::new(default_data),
        p.host,
    )?;
    if spec.threads_auto && cmd == StorageCommand::Run && (p.size > 1 || a.start_at) {
        return Err(Error::usage(
            "--threads auto is not available for a test over several hosts or with \
             --start-at (each host would tune alone): give a number of threads",
        ));
    }
    let mut spec = spec_for_rank(spec, p.rank, p.host, p.hosts)?;
    spec.check_paths(a.space)?;
    match cmd {
        StorageCommand::Run => mailbench_storage::init::check_clean(&spec)?,
        StorageCommand::Verify => {
            mailbench_storage::init::check_existing(&spec)?;
        }
        StorageCommand::Init | StorageCommand::Recover | StorageCommand::Backup => {
            mailbench_storage::init::check_readable(&spec)?
        }
    }
    let backup_to = backup_target(a, p, &spec)?;
    // A database that lost its log tail: refused by run, verify and backup
    // unless accepted; never by init and recover. Every result names it.
    let accept =
        a.req.accept_lost_log_tail || matches!(cmd, StorageCommand::Init | StorageCommand::Recover);
    spec.lost_log_tail = mailbench_storage::init::check_lost_log_tail(&spec, accept)?;
    let metrics = match (&a.metrics_listen, cmd, p.rank) {
        (Some(addr), StorageCommand::Run, 0) => Some(MetricsServer::start(addr)?),
        _ => None,
    };
    Ok(Share {
        spec,
        backup_to,
        log_files: a.log_files,
        metrics,
        declared: a.declared.clone(),
    })
}

/// backup: this rank's `--to` (templates expanded; ranks sharing a host
/// need `{rank}` in it), checked against the databases.
fn backup_target(a: &Asked, p: &Place, spec: &StorageSpec) -> Result<Option<PathBuf>> {
    if a.req.command != StorageCommand::Backup {
        return Ok(None);
    }
    let Some(to) = &a.backup_to else {
        mailbench_storage::backup::preflight(spec, None)?;
        return Ok(None);
    };
    let sharing = p.hosts.iter().filter(|h| *h == p.host).count();
    if sharing > 1 && !to.to_string_lossy().contains("{rank}") {
        return Err(Error::usage(format!(
            "{sharing} ranks run on host {} and would copy into the same folder {}: \
             put `{{rank}}` in --to, e.g. --to /backup/mailbench-{{rank}}",
            p.host,
            to.display()
        )));
    }
    let to = mailbench_multihost::expand_path(to, p.rank, p.host);
    mailbench_storage::backup::preflight(spec, Some(&to))?;
    Ok(Some(to))
}

/// The spec of rank `rank` of the world: templates expanded, a distinct
/// seed per rank (unique data on every host), and refusal when two ranks on
/// one host would share a folder.
pub fn spec_for_rank(
    mut spec: StorageSpec,
    rank: usize,
    host: &str,
    hosts: &[String],
) -> Result<StorageSpec> {
    let templated = spec
        .volumes
        .iter()
        .chain(spec.log_volumes.iter())
        .any(|p| p.to_string_lossy().contains("{rank}"));
    let sharing = hosts.iter().filter(|h| h.as_str() == host).count();
    if sharing > 1 && !templated {
        return Err(Error::usage(format!(
            "{sharing} ranks run on host {host} and would share the database folders {:?}: put \
             `{{rank}}` in --path (and --log-path), e.g. --path /data/mailbench-{{rank}}",
            spec.volumes
        )));
    }
    let x = |p: &Path| mailbench_multihost::expand_path(p, rank, host);
    spec.volumes = spec.volumes.iter().map(|p| x(p)).collect();
    spec.log_volumes = spec.log_volumes.iter().map(|p| x(p)).collect();
    for i in &mut spec.instances {
        i.volume = x(&i.volume);
        i.db_path = x(&i.db_path);
        i.log_dir = x(&i.log_dir);
    }
    spec.seed = spec
        .seed
        .wrapping_add((rank as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    Ok(spec)
}

/// This rank's own test: its result, written in its folder.
pub(crate) fn part(run: &Run, share: Share) -> Result<(RunDir, AnyResult)> {
    let dir = run.rank_dir()?;
    warn_lost_log_tail(run, &share.spec);
    let rank = (run.size > 1).then_some(run.rank);
    let paths = tested_paths(&share.spec, share.backup_to.as_deref());
    let declared = share.declared.clone();
    let mut result = match run.cmd {
        Command::StorageInit => init_part(run, share.spec, &dir, rank)?,
        Command::StorageVerify => verify_part(run, share.spec, &dir, rank)?,
        Command::StorageBackup => {
            run.phase("backup");
            let to = share.backup_to;
            if !run.common.quiet && run.rank == 0 {
                mailbench_base::secrets::warn(&format!(
                    "mailbench: backup read of {} databases{}",
                    share.spec.instances.len(),
                    to.as_ref()
                        .map(|t| format!(", copying to {}", t.display()))
                        .unwrap_or_default()
                ));
            }
            let r = mailbench_storage::backup::run_backup(
                &share.spec,
                &dir,
                to.as_deref(),
                &run.interrupt,
            )?;
            AnyResult::StorageBackup(Box::new(r))
        }
        Command::StorageRecover => recover_part(run, &share, &dir)?,
        Command::StorageRun => run_part(run, share, &dir)?,
        other => {
            return Err(Error::runtime(format!(
                "{} was given a storage share (a bug: please report it)",
                other.kind()
            )));
        }
    };
    result.header_mut().disclosure = Some(Box::new(disclosure(&paths, declared)));
    crate::output::write_files(&dir, &result)?;
    Ok((dir, result))
}

/// The folders a storage command used (databases, logs, a backup's copies),
/// each once, absolute.
pub(crate) fn tested_paths(spec: &StorageSpec, backup_to: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let all = (spec.volumes.iter().chain(&spec.log_volumes)).map(PathBuf::as_path);
    for p in all.chain(backup_to) {
        let abs = std::fs::canonicalize(p)
            .or_else(|_| std::path::absolute(p))
            .unwrap_or_else(|_| p.to_path_buf());
        if !out.contains(&abs) {
            out.push(abs);
        }
    }
    out
}

/// What was tested on this host: the user's `[disclosure]` and the facts
/// detected for `paths` (an unreadable fact is unknown, with its reason).
pub(crate) fn disclosure(paths: &[PathBuf], declared: DisclosureToml) -> Disclosure {
    Disclosure {
        declared,
        detected: mailbench_metrics::disclosure::detect(paths, env!("CARGO_PKG_VERSION")),
    }
}

/// The databases that lost their log tail and were accepted, said on stderr.
fn warn_lost_log_tail(run: &Run, spec: &StorageSpec) {
    if run.common.quiet || matches!(run.cmd, Command::StorageInit | Command::StorageRecover) {
        return;
    }
    for db in &spec.lost_log_tail {
        mailbench_base::secrets::warn(&format!(
            "mailbench: warning: {db} lost the tail of its log (accepted with {}); the result \
             says so",
            mailbench_storage::init::ACCEPT_LOST_LOG_TAIL
        ));
    }
}

/// `storage init` on this rank (interrupted: a partial result; the creation
/// resumes where it stopped).
fn init_part(
    run: &Run,
    mut spec: StorageSpec,
    dir: &RunDir,
    rank: Option<usize>,
) -> Result<AnyResult> {
    run.phase("database creation");
    let started = std::time::Instant::now();
    let mut header = RunHeader::begin("storage-init");
    let (init, verdict) = match mailbench_storage::init::init_all(&spec, &dir.log, &run.interrupt) {
        Err(Error::Interrupted) => {
            dir.log.line("stopped: interrupted");
            let init = InitSummary {
                seconds: started.elapsed().as_secs_f64(),
                ..Default::default()
            };
            (init, init_interrupted())
        }
        r => (r?, Verdict::from_reasons(Vec::new())),
    };
    header.finish(started.elapsed());
    // init only opens existing databases: it reports a lost log tail, never refuses.
    spec.lost_log_tail = mailbench_storage::init::check_lost_log_tail(&spec, true)?;
    Ok(AnyResult::StorageInit(Box::new(StorageInitResult {
        run: header,
        verdict,
        init,
        spec,
        rank,
    })))
}

/// The verdict of a database creation stopped by Ctrl-C / SIGTERM.
fn init_interrupted() -> Verdict {
    Verdict {
        status: Status::Interrupted,
        reasons: vec![
            "Database creation was interrupted: run `mailbench storage init` again \
             (same flags) to finish it where it stopped."
                .into(),
        ],
    }
}

/// `storage verify` on this rank: every page and log block.
fn verify_part(
    run: &Run,
    spec: StorageSpec,
    dir: &RunDir,
    rank: Option<usize>,
) -> Result<AnyResult> {
    run.phase("verification");
    let started = std::time::Instant::now();
    let header = RunHeader::begin("storage-verify");
    dir.log.line(format!(
        "storage verify: {} databases, every page and log block",
        spec.instances.len()
    ));
    let v = mailbench_storage::verify::verify_all(&spec, &run.interrupt)?;
    for d in &v.databases {
        dir.log.line(format!(
            "{}: {} pages, {} bad checksum, {} wrong page number, {} bad log blocks",
            d.name, d.pages_seen, d.bad_checksum_pages, d.wrong_page_number_pages, d.bad_log_blocks
        ));
    }
    let mut r = StorageVerifyResult::new(header, v, started.elapsed());
    r.rank = rank;
    Ok(AnyResult::StorageVerify(Box::new(r)))
}

/// `storage recover` on this rank (rank 0 names its phases).
fn recover_part(run: &Run, share: &Share, dir: &RunDir) -> Result<AnyResult> {
    run.phase("recovery");
    let prefix = if run.size > 1 { "rank 0: " } else { "" };
    let mut phase = |t: &str| run.say(&format!("mailbench: {prefix}{t}"));
    let mut r = mailbench_storage::recover::run_recover(
        &share.spec,
        dir,
        share.log_files,
        &run.interrupt,
        &mut phase,
    )?;
    // Recovery is how a database comes to lose its log tail: it never refuses
    // one, its result names those that have (this replay's or an earlier one's).
    r.spec.lost_log_tail = mailbench_storage::init::check_lost_log_tail(&share.spec, true)?;
    Ok(AnyResult::StorageRecover(Box::new(r)))
}

/// `storage run` on this rank: `--threads auto` (one rank), its databases
/// created, the start together with the other ranks, the load (live figures
/// on the terminal, the endpoint, and to rank 0).
fn run_part(run: &Run, share: Share, dir: &RunDir) -> Result<AnyResult> {
    let mut spec = share.spec;
    if let Some(m) = &share.metrics {
        run.say(&format!(
            "mailbench: metrics at http://{}/metrics",
            m.local_addr()
        ));
    }
    let mut progress = progress(run, share.metrics.as_ref());
    let tuning = if spec.threads_auto {
        let (steps, chosen) = tune(run, &spec, dir, &mut progress)?;
        spec.set_threads(chosen);
        spec.threads_auto = true;
        steps
    } else {
        Vec::new()
    };
    run.phase("database creation");
    if run.size > 1 {
        run.say(&format!(
            "mailbench: {} rank(s): creating databases, then starting together",
            run.size
        ));
    }
    let stopped = |why: &str, status: Status, init: Option<InitSummary>| {
        let r = mailbench_storage::run::stopped_before_load(&spec, dir, why, status, init)?;
        Ok(AnyResult::StorageRun(Box::new(r)))
    };
    // A creation that cannot finish (a full volume, an I/O error) or is
    // stopped is a result all the same: Error or Interrupted, as a run's.
    let init = match mailbench_storage::init::init_all(&spec, &dir.log, &run.interrupt) {
        Ok(init) => init,
        Err(Error::Interrupted) => {
            return stopped(
                "interrupted during database creation",
                Status::Interrupted,
                None,
            );
        }
        Err(Error::Runtime(m)) => return stopped(&m, Status::Error, None),
        Err(e) => return Err(e),
    };
    match run.start_together(&dir.log, "databases ready") {
        // Ctrl-C before the start: a partial result all the same.
        Err(Error::Interrupted) => {
            return stopped(
                "interrupted while waiting for the start time",
                Status::Interrupted,
                Some(init),
            );
        }
        other => other?,
    };
    run.phase("the load");
    let mut result = mailbench_storage::run::run(
        &spec,
        dir,
        &run.interrupt,
        &mut progress,
        crate::world::ack_stream(),
    )?;
    drop(progress);
    result.tuning = tuning;
    if result.init.as_ref().is_some_and(|i| i.written_bytes == 0) {
        result.init = Some(init);
    }
    if let Some(m) = &share.metrics {
        m.finish(&format!("{:?}", result.verdict.status).to_lowercase());
    }
    Ok(AnyResult::StorageRun(Box::new(result)))
}

/// `--threads auto`: the tuning steps in `tuning/threads-N/`, each written
/// through the one output path; the steps and the threads chosen.
fn tune(
    run: &Run,
    spec: &StorageSpec,
    dir: &RunDir,
    progress: &mut dyn Progress,
) -> Result<(Vec<mailbench_storage::tune::TuningStep>, u32)> {
    let mut step_dir = |threads: u32| {
        crate::world::new_run_folder(&dir.path.join("tuning"), &format!("threads-{threads}"))
    };
    let mut write = |d: &RunDir, r: &mailbench_results::storage::run::StorageResult| {
        crate::output::write_files(d, &AnyResult::StorageRun(Box::new(r.clone()))).map(|_| ())
    };
    let mut steps = mailbench_storage::tune::Steps {
        folder: &mut step_dir,
        write: &mut write,
    };
    mailbench_storage::tune::tune(spec, dir, &run.interrupt, progress, &mut steps)
}

/// The live figures of a storage run: the terminal and the endpoint with
/// one rank; with several, to rank 0 (whose aggregate goes to the terminal
/// and the endpoint).
fn progress<'a>(run: &'a Run, metrics: Option<&MetricsServer>) -> FanOut<'a> {
    let mut p = FanOut::default();
    if run.size == 1 {
        p.push(crate::progress::terminal(run.common.quiet));
        if let Some(m) = metrics {
            p.push(Box::new(m.progress()));
        }
        return p;
    }
    if let Some(m) = metrics
        && let Ok(mut slot) = run.live.lock()
    {
        *slot = Some(Box::new(m.progress()));
    }
    p.push(Box::new(ToRank0 {
        seq: 0,
        coord: run.coord.as_ref(),
        member: run.member.as_ref(),
        phases: run.rank == 0 && !run.common.quiet,
    }));
    p
}

/// A rank's interval figures to rank 0 over the side channel (rank 0 names
/// its phases on stderr).
struct ToRank0<'a> {
    seq: u64,
    coord: Option<&'a Coordinator>,
    member: Option<&'a Member>,
    phases: bool,
}

impl Progress for ToRank0<'_> {
    fn phase(&mut self, text: &str) {
        if self.phases {
            mailbench_base::secrets::warn(&format!("mailbench: rank 0: {text}"));
        }
    }
    fn interval(&mut self, p: &LiveFigures) {
        self.seq += 1;
        let m = LiveMsg::from_live(self.seq, p);
        if let Some(c) = self.coord {
            c.local_interval(m);
        } else if let Some(m2) = self.member {
            m2.interval(m);
        }
    }
}
