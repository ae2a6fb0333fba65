//! Many hosts (PRODUCT.md §5): `storage init|run|verify|backup|recover`,
//! `mail run` and `mail sweep` as one test over MPI ranks (build with `--features mpi`, launch
//! with mpirun/srun/an MPI operator), or `storage run|mail run --start-at
//! TIME` on each host and `report merge` afterwards. The work is in the
//! `mailbench-multihost` crate.

use super::storage::{StorageArgs, StorageCommand};
use crate::Global;
use mailbench_base::config::ConfigFile;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_mail::options::Resolved;
use mailbench_multihost::storage::{Command, Options, Outcome, Share, spec_for_rank};
use mailbench_results::mail::sweep::SweepPlan;
use mailbench_storage::spec::{Space, SpecExt, StorageSpec, StorageToml};
use std::path::{Path, PathBuf};

/// Flags of `storage` commands for tests over many hosts.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MultiArgs {
    /// run: start the load (after the databases exist) at this wall-clock
    /// time, RFC 3339 (2026-07-10T14:00:00Z), on every host given the same
    /// time; then `mailbench report merge` the hosts' results.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
}

/// `Some` when the command runs as ranks of a distributed test (started by
/// an MPI launcher, `mpi` feature) or with `--start-at`; `None` leaves it to
/// the single-host path.
pub fn storage(
    cmd: &StorageCommand,
    cfg: &ConfigFile,
    global: &Global,
) -> Option<Result<ExitStatus>> {
    let (c, args) = match cmd {
        StorageCommand::Init(a) => (Command::Init, a),
        StorageCommand::Run(a) => (Command::Run, a),
        StorageCommand::Verify(a) => (Command::Verify, a),
        StorageCommand::Backup(a) => (Command::Backup, a),
        StorageCommand::Recover(a) => (Command::Recover, a),
        _ => return None,
    };
    let distributed = distributed(global);
    if args.multihost.start_at.is_some() && c != Command::Run {
        return Some(Err(Error::usage(
            "--start-at applies to `storage run` (the load starts at that time)",
        )));
    }
    // `start_at` in the file applies to `storage run` only (the same file
    // serves init, verify, backup and recover).
    let start_at = match (&args.multihost.start_at, c) {
        (Some(t), _) => Some(t.clone()),
        (None, Command::Run) => match cfg.section::<StorageToml>("storage") {
            Ok(s) => s.start_at,
            Err(e) => return Some(Err(e)),
        },
        (None, _) => None,
    };
    if !distributed && start_at.is_none() {
        return None;
    }
    Some(run(c, args, cfg, start_at.as_deref(), global))
}

fn run(
    cmd: Command,
    args: &StorageArgs,
    cfg: &ConfigFile,
    start_at: Option<&str>,
    global: &Global,
) -> Result<ExitStatus> {
    let output = global
        .output
        .clone()
        .or(cfg.output.clone())
        .unwrap_or_else(|| PathBuf::from("./mailbench-results"));
    let section = cfg.section::<StorageToml>("storage")?;
    let log_files = args.keys.log_files.or(section.log_files).unwrap_or(500);
    let space = match cmd {
        Command::Verify | Command::Backup => Space::None,
        Command::Recover if log_files == 0 => Space::None,
        _ => Space::Create,
    };
    let toml = args.to_toml();
    let resolve = |rank: usize, host: &str, hosts: &[String]| -> Result<StorageSpec> {
        let default_data = if hosts.len() > 1 {
            "./mailbench-data/rank-{rank}"
        } else {
            "./mailbench-data"
        };
        let spec = StorageSpec::resolve_for_host(toml.clone(), cfg, Path::new(default_data), host)?;
        if spec.threads_auto && cmd == Command::Run {
            return Err(Error::usage(
                "--threads auto is not available for a test over several hosts or with \
                 --start-at (each host would tune alone): give a number of threads",
            ));
        }
        let mut spec = spec_for_rank(spec, rank, host, hosts)?;
        spec.check_paths(space)?;
        // A database that lost its log tail: refused by run, verify and backup
        // unless accepted; never by init and recover. Every result names it.
        let accept = args.accept_lost_log_tail || matches!(cmd, Command::Init | Command::Recover);
        spec.lost_log_tail = mailbench_storage::init::check_lost_log_tail(&spec, accept)?;
        Ok(spec)
    };
    let opts = Options {
        ack_stream: std::env::var_os("MAILBENCH_ACK_STREAM").is_some(),
        backup_to: args.keys.backup_to.clone().or(section.backup_to.clone()),
        log_files,
        ..options(start_at, global)?
    };
    drive(cmd, Share::Storage(&resolve), &output, &opts, global)
}

/// The options every distributed command shares: `--start-at`, output
/// switches, `MAILBENCH_COORDINATOR_LISTEN`; storage sets its own on top.
fn options(start_at: Option<&str>, global: &Global) -> Result<Options> {
    Ok(Options {
        start_at: start_at
            .map(mailbench_multihost::parse_start_at)
            .transpose()?,
        quiet: global.quiet,
        verbose: global.verbose,
        listen: std::env::var("MAILBENCH_COORDINATOR_LISTEN").ok(),
        watch: Default::default(),
        ack_stream: false,
        backup_to: None,
        log_files: 0,
    })
}

/// Runs `cmd` as this rank's share; rank 0 prints the outcome. The `--json`
/// line is the one a single-host run of the kind prints (the verdict, the
/// result folder, the host count and the kind's figures).
fn drive(
    cmd: Command,
    share: Share,
    output: &Path,
    opts: &Options,
    global: &Global,
) -> Result<ExitStatus> {
    let interrupt = Interrupt::install()?;
    let t = mailbench_multihost::world()?;
    let rank = t.rank();
    let out =
        mailbench_multihost::storage::command(t.as_ref(), cmd, share, output, interrupt, opts)?;
    drop(t);
    if rank > 0 {
        return Ok(out.status);
    }
    print_outcome(&out, global, cmd == Command::MailSweep);
    Ok(out.status)
}

/// Rank 0's output: the `--json` line, or the summary, verdict and folder
/// (a sweep's summary ends with its verdict already).
fn print_outcome(out: &Outcome, global: &Global, judged_in_summary: bool) {
    if global.json {
        println!("{}", out.line);
    } else if judged_in_summary && !global.quiet {
        println!("{}\nresults: {}", out.summary.trim_end(), out.dir.display());
    } else if !global.quiet {
        println!("{}", out.summary);
        println!("Verdict: {}", out.verdict.label());
        for r in &out.verdict.reasons {
            println!("  - {r}");
        }
        println!("Results: {}", out.dir.display());
    }
}

/// `mail run` as one test over MPI ranks (each rank a load generator with
/// its slice of the users), or with `--start-at`; `None` leaves it to the
/// single-generator path.
pub fn mail(
    resolved: &Resolved,
    start_at: Option<&str>,
    output: &Path,
    global: &Global,
) -> Option<Result<ExitStatus>> {
    let distributed = distributed(global);
    if !distributed && start_at.is_none() {
        return None;
    }
    Some(run_mail(resolved, start_at, output, global))
}

fn run_mail(
    resolved: &Resolved,
    start_at: Option<&str>,
    output: &Path,
    global: &Global,
) -> Result<ExitStatus> {
    let opts = options(start_at, global)?;
    let resolve = |rank: usize, size: usize, host: &str| {
        let o = mailbench_multihost::mail::for_rank(resolved.clone(), rank, size, host)?;
        mailbench_mail::command::check(&o)?;
        Ok(o)
    };
    drive(
        Command::MailRun,
        Share::Mail(&resolve),
        output,
        &opts,
        global,
    )
}

/// `mail sweep` over MPI ranks (every level on every rank, each its slice
/// of the level's users); `None` leaves it to the one-host sweep. Without
/// MPI `--start-at` is refused: the levels of separate generators could
/// not start together.
pub fn mail_sweep(
    resolved: &Resolved,
    plan: &SweepPlan,
    start_at: Option<&str>,
    output: &Path,
    global: &Global,
) -> Option<Result<ExitStatus>> {
    if !distributed(global) {
        return None;
    }
    Some(run_mail_sweep(resolved, plan, start_at, output, global))
}

fn run_mail_sweep(
    resolved: &Resolved,
    plan: &SweepPlan,
    start_at: Option<&str>,
    output: &Path,
    global: &Global,
) -> Result<ExitStatus> {
    let opts = options(start_at, global)?;
    let resolve = |rank: usize, size: usize, host: &str| {
        let o = mailbench_multihost::mail_sweep::base_for_rank(
            resolved.clone(),
            plan,
            rank,
            size,
            host,
        )?;
        mailbench_mail::command::check(&o)?;
        Ok(o)
    };
    drive(
        Command::MailSweep,
        Share::MailSweep(&resolve, plan),
        output,
        &opts,
        global,
    )
}

/// Whether this process is a rank of one test over MPI ranks (launched by an
/// MPI launcher and built with the `mpi` feature); warns when it was launched
/// as a rank but built without the feature.
fn distributed(global: &Global) -> bool {
    let mpi = mailbench_multihost::launched_by_mpi();
    warn_without_mpi(mpi, global);
    mpi && mailbench_multihost::MPI_BUILT
}

fn warn_without_mpi(mpi: bool, global: &Global) {
    if mpi
        && !mailbench_multihost::MPI_BUILT
        && mailbench_multihost::launcher_size().unwrap_or(1) > 1
        && !global.quiet
    {
        eprintln!(
            "mailbench: started as one of several MPI ranks, but this mailbench was built \
             without the `mpi` feature: this rank runs an independent test (build with \
             `cargo build --release --features mailbench/mpi` for one test over all ranks)"
        );
    }
}
