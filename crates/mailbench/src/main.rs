//! The `mailbench` command: parses flags, dispatches to the library crates and
//! turns their outcome into the exit code (0 pass, 1 fail, 2 usage, 3 runtime,
//! 130 interrupted). No workload logic lives here.

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

mod cmd;

use clap::{Parser, Subcommand};
use mailbench_base::{Error, ExitStatus};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "mailbench",
    version,
    about = "Size a mail system, prove its storage, drive its server."
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Options every command takes.
#[derive(clap::Args, Debug, Clone)]
pub struct Global {
    /// TOML file; every flag has a key in its command's section; flags override the file.
    #[arg(long, global = true, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Results folder; each run writes DIR/<command>-<UTC timestamp>/ [default: ./mailbench-results]
    #[arg(long, global = true, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print a machine-readable summary on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// Print nothing but errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Echo the test log on stderr.
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

impl Global {
    /// The common flags for the driver: `--output`, else the file's `output`
    /// key, else `./mailbench-results`.
    pub fn common(&self, cfg: &mailbench_base::config::ConfigFile) -> mailbench_runner::Common {
        mailbench_runner::Common {
            output: (self.output.clone())
                .or(cfg.output.clone())
                .unwrap_or_else(|| PathBuf::from("./mailbench-results")),
            json: self.json,
            quiet: self.quiet,
            verbose: self.verbose,
        }
    }
}

// Parsed once per process: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Sizing: mailboxes + profile -> target IOPS, capacity, disks, copy layout, a storage config.
    Plan(cmd::plan::PlanArgs),
    /// Storage validation with the mailbox-database engine.
    #[command(subcommand)]
    Storage(cmd::storage::StorageCommand),
    /// Messaging load against a real mail server.
    #[command(subcommand)]
    Mail(cmd::mail::MailCommand),
    /// Render, merge and compare results.
    #[command(subcommand)]
    Report(cmd::report::ReportCommand),
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            let code = match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => 0,
                _ => ExitStatus::Usage.code(),
            };
            std::process::exit(code);
        }
    };
    let outcome = match cli.command {
        Command::Plan(a) => cmd::plan::run(a, &cli.global),
        Command::Storage(c) => cmd::storage::run(c, &cli.global),
        Command::Mail(c) => cmd::mail::run(c, &cli.global),
        Command::Report(c) => cmd::report::run(c, &cli.global),
    };
    let status = match outcome {
        Ok(s) => s,
        Err(e) => {
            report_error(&e);
            e.exit_status()
        }
    };
    std::process::exit(status.code());
}

/// The error on stderr, secrets redacted (`mailbench_base::secrets`).
fn report_error(e: &Error) {
    let text = match e {
        Error::Usage(m) => format!("mailbench: error: {m}"),
        Error::Runtime(m) => format!("mailbench: runtime error: {m}"),
        Error::Interrupted => "mailbench: interrupted".into(),
    };
    mailbench_base::secrets::warn(&text);
}
