//! `mailbench storage` flags. Every flag has a key of the same name in the
//! `[storage]` section of `--config`; flags win.

use crate::Global;
use mailbench_base::config::ConfigFile;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::RunDir;
use mailbench_base::{ByteSize, ExitStatus, Result, parse_duration};
use mailbench_results::storage::init::StorageInitResult;
use mailbench_results::storage::run::StorageResult;
use mailbench_results::storage::verify::StorageVerifyResult;
use mailbench_results::{AnyResult, RunHeader, Verdict};
use mailbench_storage::spec::{Space, SpecExt, StorageSpec, StorageToml, TestType, Threads};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Subcommand, Debug)]
pub enum StorageCommand {
    /// Create the test databases (or --open existing ones).
    Init(StorageArgs),
    /// Transactional workload: --type performance (default) | stress.
    Run(StorageArgs),
    /// Database backup read test.
    Backup(StorageArgs),
    /// Soft-recovery (log replay) test.
    Recover(StorageArgs),
    /// Checksum every database page and log block.
    Verify(StorageArgs),
    /// Raw reads through mailbench's I/O layer, for comparison with fio (bench/).
    #[command(hide = true)]
    IoBench(IoBenchArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct IoBenchArgs {
    /// An existing file to read.
    #[arg(long)]
    pub file: PathBuf,
    #[arg(long, value_parser = ByteSize::parse, default_value = "32KiB")]
    pub bs: ByteSize,
    #[arg(long, default_value_t = 16)]
    pub qd: usize,
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub runtime: Duration,
    #[arg(long, default_value = "auto")]
    pub io_engine: String,
    /// Sequential instead of random reads.
    #[arg(long)]
    pub sequential: bool,
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct StorageArgs {
    /// Small databases under ./mailbench-data and a short run (about two minutes).
    #[arg(long)]
    pub quick: bool,
    /// performance (2 h default) or stress (24 h, lenient maxima).
    #[arg(long = "type", value_name = "TYPE")]
    pub test_type: Option<TestType>,
    /// exchange2013 (default), exchange2007, exchange2003, or a profile TOML file.
    #[arg(long)]
    pub profile: Option<String>,
    /// Database folders (repeat or comma-separate); databases are spread over them.
    #[arg(long = "path", value_delimiter = ',', value_name = "DIR")]
    pub paths: Vec<PathBuf>,
    /// Log folders (default: beside each database).
    #[arg(long = "log-path", value_delimiter = ',', value_name = "DIR")]
    pub log_paths: Vec<PathBuf>,
    /// Number of databases (instances).
    #[arg(long)]
    pub databases: Option<u32>,
    /// Mailboxes over all databases.
    #[arg(long)]
    pub mailboxes: Option<u64>,
    /// Mailbox quota (database size = mailboxes x quota / databases).
    #[arg(long, value_parser = ByteSize::parse)]
    pub mailbox_quota: Option<ByteSize>,
    /// Size of each database.
    #[arg(long, value_parser = ByteSize::parse)]
    pub db_size: Option<ByteSize>,
    /// Databases sized to this share of the free space.
    #[arg(long)]
    pub capacity_pct: Option<f64>,
    /// Target IOPS per mailbox (target = mailboxes x this).
    #[arg(long)]
    pub iops_per_mailbox: Option<f64>,
    /// Target transactional IOPS; the load is paced open-loop at it.
    #[arg(long)]
    pub target_iops: Option<f64>,
    /// Database copies (each extra copy adds log replication reads).
    #[arg(long)]
    pub copies: Option<u32>,
    /// Sessions over all databases, or `auto`.
    #[arg(long)]
    pub threads: Option<Threads>,
    /// Measured window (e.g. 2h, 90s).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Longest warm-up: the measured window starts once the database cache
    /// holds its lower bound (profile `preload_cache_pct`), or after this
    /// (default 30m; 30s with --quick).
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Sampling interval (default 15s).
    #[arg(long, value_parser = parse_duration)]
    pub sample_interval: Option<Duration>,
    /// run: how long the clean shutdown after the measured window may take
    /// before I/O is stopped and a partial result written (default 60s, 1s to 1h).
    #[arg(long, value_parser = parse_duration)]
    pub shutdown_grace: Option<Duration>,
    /// auto, uring or threads.
    #[arg(long)]
    pub io_engine: Option<String>,
    /// Maximum database cache over all databases.
    #[arg(long, value_parser = ByteSize::parse)]
    pub cache_size: Option<ByteSize>,
    /// Skip the page and log verification after the run.
    #[arg(long)]
    pub no_verify: bool,
    /// Attach existing databases (checking their headers) instead of creating.
    #[arg(long)]
    pub open: bool,
    /// Random seed of the workload.
    #[arg(long)]
    pub seed: Option<u64>,
    /// run: serve live figures for Prometheus at http://HOST:PORT/metrics
    /// (`[report] metrics_listen`; port 0 picks a free port).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,
    /// recover: new log files per database to generate and replay (default 500;
    /// 0 = only replay what a crash left).
    #[arg(long)]
    pub log_files: Option<u64>,
    /// backup: also write the copy to this folder, then verify it.
    #[arg(long = "to", value_name = "DIR")]
    pub backup_to: Option<PathBuf>,
    /// run, verify, backup: use databases that lost the tail of their log (a
    /// replay stopped at a damaged log block); every result says so. Command
    /// line only: the loss is accepted per command.
    #[arg(long)]
    pub accept_lost_log_tail: bool,
    #[command(flatten)]
    pub multihost: super::multihost::MultiArgs,
}

impl StorageArgs {
    pub(super) fn to_toml(&self) -> StorageToml {
        let opt_vec = |v: &Vec<PathBuf>| if v.is_empty() { None } else { Some(v.clone()) };
        StorageToml {
            test_type: self.test_type,
            profile: self.profile.clone(),
            paths: opt_vec(&self.paths),
            log_paths: opt_vec(&self.log_paths),
            databases: self.databases,
            mailboxes: self.mailboxes,
            mailbox_quota: self.mailbox_quota,
            db_size: self.db_size,
            capacity_pct: self.capacity_pct,
            iops_per_mailbox: self.iops_per_mailbox,
            target_iops: self.target_iops,
            copies: self.copies,
            threads: self.threads,
            duration: self.duration,
            warmup: self.warmup,
            sample_interval: self.sample_interval,
            shutdown_grace: self.shutdown_grace,
            io_engine: self.io_engine.clone(),
            cache_size: self.cache_size,
            verify: self.no_verify.then_some(false),
            open: self.open.then_some(true),
            quick: self.quick.then_some(true),
            seed: self.seed,
            profile_overrides: None,
            thresholds: None,
            log_files: self.log_files,
            backup_to: self.backup_to.clone(),
            start_at: self.multihost.start_at.clone(),
            hosts: None,
        }
    }
}

pub fn resolve(
    args: &StorageArgs,
    cfg: &ConfigFile,
    global: &Global,
    space: Space,
) -> Result<(StorageSpec, PathBuf)> {
    let spec = StorageSpec::resolve(args.to_toml(), cfg, Path::new("./mailbench-data"))?;
    spec.check_paths(space)?;
    let output = global
        .output
        .clone()
        .or(cfg.output.clone())
        .unwrap_or_else(|| PathBuf::from("./mailbench-results"));
    Ok((spec, output))
}

pub fn run(cmd: StorageCommand, global: &Global) -> Result<ExitStatus> {
    if let StorageCommand::IoBench(a) = &cmd {
        return io_bench(a);
    }
    // Read once; every storage command below takes it from here.
    let cfg = ConfigFile::load_optional(global.config.as_deref())?;
    if let Some(outcome) = super::multihost::storage(&cmd, &cfg, global) {
        return outcome;
    }
    match cmd {
        StorageCommand::Run(a) => storage_run(&a, &cfg, global),
        StorageCommand::Init(a) => storage_init(&a, &cfg, global),
        StorageCommand::Verify(a) => storage_verify(&a, &cfg, global),
        StorageCommand::IoBench(a) => io_bench(&a),
        StorageCommand::Backup(a) => super::storage_integrity::backup(&a, &cfg, global),
        StorageCommand::Recover(a) => super::storage_integrity::recover(&a, &cfg, global),
    }
}

/// `storage io-bench`: the I/O layer alone on one file (no config file).
fn io_bench(a: &IoBenchArgs) -> Result<ExitStatus> {
    let engine = a.io_engine.parse().map_err(mailbench_base::Error::usage)?;
    let r =
        mailbench_storage::iobench::run(&a.file, a.bs.0, a.qd, a.runtime, engine, a.sequential)?;
    println!("{}", serde_json::to_string(&r).unwrap_or_default());
    Ok(ExitStatus::Pass)
}

fn storage_run(args: &StorageArgs, cfg: &ConfigFile, global: &Global) -> Result<ExitStatus> {
    let (spec, output) = resolve(args, cfg, global, Space::Create)?;
    let report_cfg: mailbench_report::ReportConfig = cfg.section("report")?;
    let mut progress = mailbench_runner::progress::FanOut::default();
    progress.push(mailbench_runner::progress::terminal(global.quiet));
    let metrics = match args
        .metrics_listen
        .as_ref()
        .or(report_cfg.metrics_listen.as_ref())
    {
        Some(addr) => {
            let m = mailbench_runner::metrics::MetricsServer::start(addr)?;
            if !global.quiet {
                eprintln!("mailbench: metrics at http://{}/metrics", m.local_addr());
            }
            progress.push(Box::new(m.progress()));
            Some(m)
        }
        None => None,
    };
    mailbench_storage::init::check_clean(&spec)?;
    let mut spec = spec;
    spec.lost_log_tail = accepted_lost_log_tail(&spec, args, global)?;
    let interrupt = Interrupt::install()?;
    let dir = RunDir::create(&output, "storage-run")?;
    dir.log.set_echo(global.verbose);
    let ack = std::env::var_os("MAILBENCH_ACK_STREAM").is_some();
    let mut tuning = Vec::new();
    if spec.threads_auto {
        let mut write = |d: &RunDir, r: &StorageResult| {
            mailbench_runner::write_files(d, &AnyResult::StorageRun(Box::new(r.clone())))
                .map(|_| ())
        };
        let (steps, chosen) =
            mailbench_storage::tune::tune(&spec, &dir, &interrupt, &mut progress, &mut write)?;
        spec.set_threads(chosen);
        spec.threads_auto = true;
        tuning = steps;
    }
    let mut result = logged(
        &dir,
        mailbench_storage::run::run(&spec, &dir, &interrupt, &mut progress, ack),
    )?;
    result.tuning = tuning;
    if let Some(m) = &metrics {
        m.finish(&format!("{:?}", result.verdict.status).to_lowercase());
    }
    drop(progress);
    let status = result.verdict.exit_status();
    mailbench_runner::finish(
        &dir,
        &AnyResult::StorageRun(Box::new(result)),
        &out(global),
        None,
    )?;
    Ok(status)
}

/// The databases that lost their log tail, when `--accept-lost-log-tail` is
/// given (said on stderr); without it, the refusal (exit 2, nothing written).
pub(super) fn accepted_lost_log_tail(
    spec: &StorageSpec,
    args: &StorageArgs,
    global: &Global,
) -> Result<Vec<String>> {
    let lost = mailbench_storage::init::check_lost_log_tail(spec, args.accept_lost_log_tail)?;
    if !global.quiet {
        for db in &lost {
            eprintln!(
                "mailbench: warning: {db} lost the tail of its log (accepted with \
                 {}); the result says so",
                mailbench_storage::init::ACCEPT_LOST_LOG_TAIL
            );
        }
    }
    Ok(lost)
}

/// A command's error after its run folder exists goes into its test.log too.
pub(super) fn logged<T>(dir: &RunDir, r: Result<T>) -> Result<T> {
    if let Err(e) = &r {
        dir.log.line(format!("error: {e}"));
    }
    r
}

/// What the common flags say about stdout.
pub(super) fn out(global: &Global) -> mailbench_runner::Output {
    mailbench_runner::Output {
        json: global.json,
        quiet: global.quiet,
    }
}

fn storage_init(args: &StorageArgs, cfg: &ConfigFile, global: &Global) -> Result<ExitStatus> {
    let (mut spec, output) = resolve(args, cfg, global, Space::Create)?;
    // init only opens existing databases: it reports a lost log tail, never refuses.
    spec.lost_log_tail = mailbench_storage::init::check_lost_log_tail(&spec, true)?;
    let interrupt = Interrupt::install()?;
    let dir = RunDir::create(&output, "storage-init")?;
    dir.log.set_echo(global.verbose);
    let started = std::time::Instant::now();
    let mut run = RunHeader::begin("storage-init");
    let (init, verdict) = match mailbench_storage::init::init_all(&spec, &dir.log, &interrupt) {
        // Ctrl-C: a partial result, and the creation resumes where it stopped.
        Err(mailbench_base::Error::Interrupted) => {
            dir.log.line("stopped: interrupted");
            let init = mailbench_results::storage::init::InitSummary {
                seconds: started.elapsed().as_secs_f64(),
                ..Default::default()
            };
            let verdict = Verdict {
                status: mailbench_results::Status::Interrupted,
                reasons: vec![
                    "Database creation was interrupted: run `mailbench storage init` again \
                     (same flags) to finish it where it stopped."
                        .into(),
                ],
            };
            (init, verdict)
        }
        r => (logged(&dir, r)?, Verdict::from_reasons(Vec::new())),
    };
    run.finish(started.elapsed());
    let mut text = String::new();
    for d in &init.databases {
        text.push_str(&d.line());
        text.push('\n');
    }
    text.push_str(&format!("Results: {}", dir.path.display()));
    let result = StorageInitResult {
        run,
        verdict,
        init,
        spec,
        rank: None,
    };
    let status = result.verdict.exit_status();
    let result = AnyResult::StorageInit(Box::new(result));
    mailbench_runner::finish(&dir, &result, &out(global), Some(text))?;
    Ok(status)
}

fn storage_verify(args: &StorageArgs, cfg: &ConfigFile, global: &Global) -> Result<ExitStatus> {
    let (spec, output) = resolve(args, cfg, global, Space::None)?;
    mailbench_storage::init::check_existing(&spec)?;
    accepted_lost_log_tail(&spec, args, global)?;
    let interrupt = Interrupt::install()?;
    let dir = RunDir::create(&output, "storage-verify")?;
    dir.log.set_echo(global.verbose);
    let started = std::time::Instant::now();
    let header = RunHeader::begin("storage-verify");
    dir.log.line(format!(
        "storage verify: {} databases, every page and log block",
        spec.instances.len()
    ));
    let v = logged(
        &dir,
        mailbench_storage::verify::verify_all(&spec, &interrupt),
    )?;
    for d in &v.databases {
        dir.log.line(format!(
            "{}: {} pages, {} bad checksum, {} wrong page number, {} bad log blocks",
            d.name, d.pages_seen, d.bad_checksum_pages, d.wrong_page_number_pages, d.bad_log_blocks
        ));
    }
    let result = StorageVerifyResult::new(header, v, started.elapsed());
    let mut text = String::new();
    for d in &result.verify.databases {
        text.push_str(&format!(
            "{}: {} pages, {} bad checksum, {} wrong page number, {} newer than log, {} bad log blocks; first bad {:?}\n",
            d.name,
            d.pages_seen,
            d.bad_checksum_pages,
            d.wrong_page_number_pages,
            d.newer_than_log_pages,
            d.bad_log_blocks,
            d.first_bad_pages
        ));
    }
    text.push_str(&format!("Results: {}", dir.path.display()));
    let status = result.verdict.exit_status();
    let result = AnyResult::StorageVerify(Box::new(result));
    mailbench_runner::finish(&dir, &result, &out(global), Some(text))?;
    Ok(status)
}
