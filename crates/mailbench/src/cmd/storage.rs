//! `mailbench storage` flags. Every flag has a key of the same name in the
//! `[storage]` section of `--config`; flags win. The commands run in the
//! driver (`mailbench_runner::storage`), on one host or over MPI ranks.

use crate::Global;
use mailbench_base::config::ConfigFile;
use mailbench_base::{ByteSize, ExitStatus, Result, parse_duration};
use mailbench_runner::storage::{StorageCommand as Command, StorageRequest};
use mailbench_runner::suite::SuiteRequest;
use mailbench_storage::spec::{StorageToml, SuiteToml};
use std::path::PathBuf;
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
    /// The whole published test program on the same databases (init, performance,
    /// stress, backup, recover, verify) -> one solution report.
    Suite(SuiteArgs),
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
    /// run: start the load (after the databases exist) at this wall-clock
    /// time, RFC 3339 (2026-07-10T14:00:00Z), on every host given the same
    /// time; then `mailbench report merge` the hosts' results.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
}

/// `storage suite`: every `storage run` flag, the `[suite]` keys, `--resume`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SuiteArgs {
    #[command(flatten)]
    pub storage: StorageArgs,
    #[command(flatten)]
    pub suite: SuiteToml,
    /// Continue the suite in DIR (a folder `storage suite` wrote): its finished
    /// stages are kept, the others run (give the same flags).
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
}

impl StorageArgs {
    /// The flags as a `[storage]` section.
    pub(super) fn to_toml(&self) -> StorageToml {
        StorageToml {
            start_at: self.start_at.clone(),
            ..self.keys.clone()
        }
    }
}

pub fn run(cmd: StorageCommand, global: &Global) -> Result<ExitStatus> {
    let (command, args) = match cmd {
        StorageCommand::IoBench(a) => return io_bench(&a),
        StorageCommand::Suite(a) => return suite(a, global),
        StorageCommand::Init(a) => (Command::Init, a),
        StorageCommand::Run(a) => (Command::Run, a),
        StorageCommand::Verify(a) => (Command::Verify, a),
        StorageCommand::Backup(a) => (Command::Backup, a),
        StorageCommand::Recover(a) => (Command::Recover, a),
    };
    let cfg = ConfigFile::load_optional(global.config.as_deref())?;
    let req = StorageRequest {
        command,
        flags: args.to_toml(),
        config: &cfg,
        accept_lost_log_tail: args.accept_lost_log_tail,
        metrics_listen: args.metrics_listen.clone(),
    };
    mailbench_runner::storage::storage(req, &global.common(&cfg))
}

/// `storage suite`: the driver runs the stages.
fn suite(a: SuiteArgs, global: &Global) -> Result<ExitStatus> {
    let cfg = ConfigFile::load_optional(global.config.as_deref())?;
    let req = SuiteRequest {
        storage: StorageRequest {
            command: Command::Run,
            flags: a.storage.to_toml(),
            config: &cfg,
            accept_lost_log_tail: a.storage.accept_lost_log_tail,
            metrics_listen: a.storage.metrics_listen.clone(),
        },
        suite: a.suite,
        resume: a.resume,
    };
    mailbench_runner::suite::suite(req, &global.common(&cfg))
}

/// `storage io-bench`: the I/O layer alone on one file (no config file).
fn io_bench(a: &IoBenchArgs) -> Result<ExitStatus> {
    let engine = a.io_engine.parse().map_err(mailbench_base::Error::usage)?;
    let r =
        mailbench_storage::iobench::run(&a.file, a.bs.0, a.qd, a.runtime, engine, a.sequential)?;
    println!("{}", serde_json::to_string(&r).unwrap_or_default());
    Ok(ExitStatus::Pass)
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
