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
use mailbench_storage::spec::{Space, SpecExt, StorageSpec, StorageToml};
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

/// The flags of `storage init|run|verify|backup|recover`: the `[storage]`
/// keys (defined once, on [`StorageToml`]) and the few that are not keys.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct StorageArgs {
    #[command(flatten)]
    pub keys: StorageToml,
    /// run: serve live figures for Prometheus at http://HOST:PORT/metrics
    /// (`[report] metrics_listen`; port 0 picks a free port).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_listen: Option<String>,
    /// run, verify, backup: use databases that lost the tail of their log (a
    /// replay stopped at a damaged log block); every result says so. Command
    /// line only: the loss is accepted per command.
    #[arg(long)]
    pub accept_lost_log_tail: bool,
    #[command(flatten)]
    pub multihost: super::multihost::MultiArgs,
}

impl StorageArgs {
    /// The flags as a `[storage]` section (`--start-at` is defined with the
    /// many-hosts flags).
    pub(super) fn to_toml(&self) -> StorageToml {
        StorageToml {
            start_at: self.multihost.start_at.clone(),
            ..self.keys.clone()
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use mailbench_storage::spec::{TestType, Threads};

    /// The `[storage]` section `mailbench storage run <args>` gives (flags only).
    fn flags(args: &[&str]) -> StorageToml {
        let cli = crate::Cli::try_parse_from(["mailbench", "storage", "run"].iter().chain(args))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        match cli.command {
            crate::Command::Storage(StorageCommand::Run(a)) => a.to_toml(),
            _ => panic!("not storage run"),
        }
    }

    #[test]
    fn flags_fill_the_keys_they_name_and_nothing_else() {
        let none = flags(&[]);
        assert!(none.quick.is_none() && none.verify.is_none() && none.open.is_none());
        assert!(none.paths.is_none() && none.duration.is_none() && none.start_at.is_none());
        let t = flags(&[
            "--quick",
            "--no-verify",
            "--open",
            "--path",
            "/a,/b",
            "--path",
            "/c",
            "--duration",
            "90s",
            "--db-size",
            "1GiB",
            "--threads",
            "auto",
            "--type",
            "stress",
            "--to",
            "/bk",
            "--start-at",
            "2026-07-10T14:00:00Z",
        ]);
        assert_eq!(
            (t.quick, t.verify, t.open),
            (Some(true), Some(false), Some(true))
        );
        let paths: Vec<PathBuf> = ["/a", "/b", "/c"].iter().map(PathBuf::from).collect();
        assert_eq!(t.paths, Some(paths));
        assert_eq!(t.duration, Some(Duration::from_secs(90)));
        assert_eq!(t.db_size.map(|b| b.0), Some(1 << 30));
        assert_eq!(t.threads, Some(Threads::Auto));
        assert_eq!(t.test_type, Some(TestType::Stress));
        assert_eq!(t.backup_to, Some(PathBuf::from("/bk")));
        assert_eq!(t.start_at.as_deref(), Some("2026-07-10T14:00:00Z"));
        // A switch takes no value; file-only keys have no flag.
        assert!(
            crate::Cli::try_parse_from(["mailbench", "storage", "run", "--quick=false"]).is_err()
        );
        for key in ["--profile-overrides", "--thresholds", "--hosts", "--verify"] {
            assert!(
                crate::Cli::try_parse_from(["mailbench", "storage", "run", key, "x"]).is_err(),
                "{key}"
            );
        }
    }
}
