//! `mailbench mail` flags (owned by the mail-load work). Every flag has a key of
//! the same name (with `_`) in the `[mail]` section of `--config`; flags win.
use crate::Global;
use mailbench_base::config::ConfigFile;
use mailbench_base::{ExitStatus, Result};
use mailbench_mail::options::{Dur, MailOptions, Pct, ResolveExt, Resolved};
use mailbench_mail::profile::{Profile, ProfileExt};
use mailbench_mail::tls::StartTls;
use mailbench_results::AnyResult;
use std::path::PathBuf;

// Parsed once per process: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand, Debug)]
pub enum MailCommand {
    /// Provision users, lists and initial mailbox content.
    Setup(SetupArgs),
    /// Simulate users against the server.
    Run(RunArgs),
    /// Run levels of users against one server (--users 100,200,400 or
    /// 100..1000:100), or search for the most it carries (--find-max).
    Sweep(SweepArgs),
}

/// The help of `--user-format`. clap turns `{n}` in help text into a line
/// break; a style around the `n` keeps the placeholder as the user writes it
/// (the style is dropped when the help is not printed to a terminal).
fn user_format_help() -> clap::builder::StyledStr {
    let b = clap::builder::styling::Style::new().bold();
    let n = format!("{{{b}n{b:#}}}");
    format!("User address pattern, {n} = user number [default: user{n}@example.test]").into()
}

/// Options shared by `mail setup` and `mail run`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CommonArgs {
    /// `local` (default): start a throwaway Dovecot+Postfix on 127.0.0.1; `remote`: use --imap/--submission.
    #[arg(long, value_name = "local|remote")]
    pub target: Option<String>,
    /// IMAP server of a remote target, e.g. imaps://mail.example.org (993) or imap://mail.example.org:143.
    #[arg(long, value_name = "URL")]
    pub imap: Option<String>,
    /// SMTP submission server of a remote target, e.g. submissions://mail.example.org (465) or smtp://mail.example.org:587.
    #[arg(long, value_name = "URL")]
    pub submission: Option<String>,
    /// ManageSieve server of a remote target (rules), e.g. sieve://mail.example.org:4190.
    #[arg(long, value_name = "URL")]
    pub sieve: Option<String>,
    /// Number of simulated users [default: 100]; `mail sweep`: the levels,
    /// 100,200,400 or 100..1000:100.
    #[arg(long, value_name = "N")]
    pub users: Option<String>,
    /// Number of the first user [default: 1].
    #[arg(long)]
    pub first_user: Option<usize>,
    #[arg(long, value_name = "PATTERN", help = user_format_help())]
    pub user_format: Option<String>,
    /// Remote users and passwords, one `address password` per line.
    #[arg(long, value_name = "FILE")]
    pub users_file: Option<PathBuf>,
    /// File whose first line is the password of every remote user (else $MAILBENCH_PASSWORD).
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    /// Distribution lists of a remote server, one `list@domain member member ...` a line, as the server defines them.
    #[arg(long, value_name = "FILE")]
    pub lists_file: Option<PathBuf>,
    /// Write every user's IMAP traffic into DIR, one file per user (passwords redacted).
    #[arg(long, value_name = "DIR")]
    pub trace_imap: Option<PathBuf>,
    /// mmb3 (default), loadsim-light, loadsim-medium (= mmb), loadsim-heavy, mmb, loadsim4-medium, or a profile .toml.
    #[arg(long, value_name = "NAME|FILE")]
    pub profile: Option<String>,
    /// Keep the local target's servers and mailboxes in DIR (reused by later runs) [default: a temporary folder].
    #[arg(long, value_name = "DIR")]
    pub local_dir: Option<PathBuf>,
    /// Random seed (topology, schedules, messages) [default: 1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Per-operation timeout [default: 30s].
    #[arg(long, value_name = "DURATION")]
    pub op_timeout: Option<Dur>,
    /// Users provisioned at once by setup [default: 16].
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// STARTTLS on imap://, smtp:// and sieve:// URLs: auto (upgrade when the server offers it), require, never [default: auto].
    #[arg(long, value_name = "auto|require|never")]
    pub starttls: Option<StartTls>,
    /// Also trust the CA certificates of this PEM file (besides the system's).
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// Do not verify TLS certificates (recorded in the results as not verified).
    #[arg(long)]
    pub tls_insecure: bool,
    /// Allow passwords in clear text to a server that is not on this machine and offers no TLS.
    #[arg(long)]
    pub allow_cleartext_auth: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct SetupArgs {
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Search for the largest count that passes every criterion: grow from
    /// the first level (x2) until one fails, at most the last, then bisect.
    #[arg(long)]
    pub find_max: bool,
    /// Precision of --find-max: users (10) or a share of the largest level (5%) [default: 5%].
    #[arg(long, value_name = "USERS|PCT")]
    pub resolution: Option<String>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Start the users at this wall-clock time, RFC 3339 (2026-07-10T14:00:00Z):
    /// give every load generator the same time, then `mailbench report merge`
    /// their results. Under MPI the generators start together anyway.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Real length of the simulated day, e.g. 8h or 10m [default: the profile's day].
    #[arg(long, value_name = "DURATION")]
    pub day_length: Option<Dur>,
    /// Logons are spread over this time before the day starts [default: day/10, at most 10m].
    #[arg(long, value_name = "DURATION")]
    pub ramp_up: Option<Dur>,
    /// Longest wait after the day for outstanding deliveries [default: 2m].
    #[arg(long, value_name = "DURATION")]
    pub drain: Option<Dur>,
    /// Sampling interval of intervals.jsonl [default: day/60 within 1s..15s].
    #[arg(long, value_name = "DURATION")]
    pub interval: Option<Dur>,
    /// Errors allowed, in % of operations [default: 0].
    #[arg(long, value_name = "PCT")]
    pub max_error_rate: Option<Pct>,
    /// Response-time limit in ms: the weighted 95th percentile over the
    /// steady window [default: 1000].
    // `--max-score-ms`, the older name, stays accepted (hidden).
    #[arg(long, value_name = "MS", alias = "max-score-ms")]
    pub max_response_time_ms: Option<f64>,
    /// Delivery latency limit [default: 60s].
    #[arg(long, value_name = "DURATION")]
    pub delivery_within: Option<Dur>,
    /// Share of deliveries that must arrive within --delivery-within [default: 95%].
    #[arg(long, value_name = "PCT")]
    pub delivery_pct: Option<Pct>,
    /// Do not provision users before the run.
    #[arg(long)]
    pub skip_setup: bool,
    /// Poll with NOOP instead of waiting in IDLE for new mail.
    #[arg(long)]
    pub no_idle: bool,
    /// Polling interval with --no-idle [default: 5s].
    #[arg(long, value_name = "DURATION")]
    pub poll_interval: Option<Dur>,
    /// A Prometheus endpoint on the server host, scraped every --interval
    /// (node exporter, Postfix exporter, Dovecot's OpenMetrics); repeatable.
    #[arg(long, value_name = "URL")]
    pub server_metrics: Vec<String>,
    /// The mail store's block device on the server host, as the node exporter
    /// names it (sdb, nvme0n1, dm-2); repeatable [default: every whole disk].
    #[arg(long, value_name = "DEVICE")]
    pub server_disk: Vec<String>,
    /// The measured steady window, FROM-TO as shares of the day (25%-75%)
    /// or simulated times of day (2h-6h) [default: 25%-75%, the middle half].
    #[arg(long, value_name = "FROM-TO")]
    pub steady: Option<String>,
}

/// `--users N` of `mail setup` and `mail run`: one whole number.
fn one_count(users: &Option<String>) -> Result<Option<usize>> {
    users
        .as_deref()
        .map(|u| {
            u.trim().parse::<usize>().map_err(|_| {
                mailbench_base::Error::usage(format!(
                    "--users `{u}`: give a whole number of users (levels are for `mail sweep`)"
                ))
            })
        })
        .transpose()
}

fn common_options(c: &CommonArgs) -> MailOptions {
    MailOptions {
        target: c.target.clone(),
        imap: c.imap.clone(),
        submission: c.submission.clone(),
        sieve: c.sieve.clone(),
        users: None,
        first_user: c.first_user,
        user_format: c.user_format.clone(),
        users_file: c.users_file.clone(),
        password_file: c.password_file.clone(),
        lists_file: c.lists_file.clone(),
        trace_imap: c.trace_imap.clone(),
        profile: c.profile.clone(),
        local_dir: c.local_dir.clone(),
        seed: c.seed,
        op_timeout: c.op_timeout,
        concurrency: c.concurrency,
        starttls: c.starttls,
        ca_file: c.ca_file.clone(),
        tls_insecure: c.tls_insecure.then_some(true),
        allow_cleartext_auth: c.allow_cleartext_auth.then_some(true),
        ..Default::default()
    }
}

fn run_options(r: &RunArgs) -> MailOptions {
    MailOptions {
        day_length: r.day_length,
        ramp_up: r.ramp_up,
        drain: r.drain,
        interval: r.interval,
        max_error_rate: r.max_error_rate,
        max_response_time_ms: r.max_response_time_ms,
        delivery_within: r.delivery_within,
        delivery_pct: r.delivery_pct,
        skip_setup: r.skip_setup.then_some(true),
        no_idle: r.no_idle.then_some(true),
        poll_interval: r.poll_interval,
        start_at: r.start_at.clone(),
        server_metrics: (!r.server_metrics.is_empty()).then(|| r.server_metrics.clone()),
        server_disk: (!r.server_disk.is_empty()).then(|| r.server_disk.clone()),
        steady: r.steady.clone(),
        ..common_options(&r.common)
    }
}

pub fn run(cmd: MailCommand, global: &Global) -> Result<ExitStatus> {
    let file = ConfigFile::load_optional(global.config.as_deref())?;
    let from_file: MailOptions = file.section("mail")?;
    let (mut flags, users) = match &cmd {
        MailCommand::Setup(a) => (common_options(&a.common), &a.common.users),
        MailCommand::Run(a) => (run_options(a), &a.common.users),
        MailCommand::Sweep(a) => (run_options(&a.run), &a.run.common.users),
    };
    let levels = match &cmd {
        MailCommand::Sweep(a) => Some(sweep_levels(a, &from_file)?),
        _ => {
            flags.users = one_count(users)?;
            None
        }
    };
    if let Some(l) = &levels {
        flags.users = l.levels.last().map(|n| *n as usize);
    }
    let opts = from_file.clone().overlay(flags);
    let profile = Profile::load(opts.profile.as_deref().unwrap_or("mmb3"))?;
    let resolved = Resolved::resolve(&opts, profile.day)?;
    let out = mailbench_mail::Output {
        base: mailbench_mail::command::default_output(
            global.output.as_deref(),
            file.output.as_deref(),
        ),
        json: global.json,
        quiet: global.quiet,
        verbose: global.verbose,
    };
    let (dir, result) = match cmd {
        MailCommand::Setup(_) => {
            let (dir, r) = mailbench_mail::setup_command(resolved, &out)?;
            (dir, AnyResult::MailSetup(Box::new(r)))
        }
        MailCommand::Run(_) => {
            if let Some(r) =
                super::multihost::mail(&resolved, opts.start_at.as_deref(), &out.base, global)
            {
                return r;
            }
            let run = mailbench_mail::run_command(resolved, &out)?;
            (run.dir, AnyResult::MailRun(Box::new(run.result)))
        }
        MailCommand::Sweep(a) => {
            let plan = sweep_levels(&a, &from_file)?;
            let start_at = a.run.start_at.as_deref().or(opts.start_at.as_deref());
            if let Some(r) =
                super::multihost::mail_sweep(&resolved, &plan, start_at, &out.base, global)
            {
                return r;
            }
            if a.run.start_at.is_some() {
                return Err(mailbench_base::Error::usage(
                    "--start-at in `mail sweep` is the first level's start over MPI ranks \
                     (`mpirun ... mailbench mail sweep`); on one host a sweep starts each \
                     level when the previous ends",
                ));
            }
            let s = sweep::Sweep {
                base: resolved,
                plan,
                out,
            };
            return sweep::run(s, global);
        }
    };
    let text = format!(
        "{}\nresults: {}",
        mailbench_report::summary::render(&result),
        dir.path.display()
    );
    mailbench_runner::finish(&dir, &result, &super::storage::out(global), Some(text))?;
    Ok(result.verdict().exit_status())
}

#[path = "mail_sweep.rs"]
mod sweep;

/// The levels of `mail sweep` (`--users`, else `users` in `[mail]`) and the
/// search, checked before anything is written.
fn sweep_levels(
    a: &SweepArgs,
    file: &MailOptions,
) -> Result<mailbench_results::mail::sweep::SweepPlan> {
    let text = match (&a.run.common.users, file.users) {
        (Some(u), _) => u.clone(),
        (None, Some(n)) => n.to_string(),
        (None, None) => {
            return Err(mailbench_base::Error::usage(
                "mail sweep needs --users: levels as 100,200,400 or 100..1000:100",
            ));
        }
    };
    let levels = mailbench_mail::sweep::parse_levels(&text)?;
    let largest = levels.last().copied().unwrap_or(1);
    let resolution = mailbench_mail::sweep::parse_resolution(a.resolution.as_deref(), largest)?;
    if !a.find_max && a.resolution.is_some() {
        return Err(mailbench_base::Error::usage(
            "--resolution is the precision of --find-max: add --find-max or drop it",
        ));
    }
    Ok(mailbench_results::mail::sweep::SweepPlan {
        users: text,
        levels,
        find_max: a.find_max,
        resolution,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The `[mail]` options `mailbench mail <args>` gives (flags only).
    fn flags(args: &[&str]) -> MailOptions {
        let cli = crate::Cli::try_parse_from(["mailbench", "mail"].iter().chain(args))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        match cli.command {
            crate::Command::Mail(MailCommand::Run(a)) => run_options(&a),
            crate::Command::Mail(MailCommand::Sweep(a)) => run_options(&a.run),
            _ => panic!("not mail run or sweep"),
        }
    }

    #[test]
    fn the_response_time_limit_has_its_older_name_as_an_alias() {
        for cmd in [&["run"][..], &["sweep", "--users", "1,2"]] {
            let new = [cmd, &["--max-response-time-ms", "250"]].concat();
            let old = [cmd, &["--max-score-ms", "250"]].concat();
            assert_eq!(flags(&new).max_response_time_ms, Some(250.0), "{new:?}");
            assert_eq!(flags(&old).max_response_time_ms, Some(250.0), "{old:?}");
        }
        // Both names given: clap refuses the second as the same flag twice.
        let both = ["run", "--max-response-time-ms", "1", "--max-score-ms", "2"];
        assert!(crate::Cli::try_parse_from(["mailbench", "mail"].iter().chain(&both)).is_err());
        // The older name is not shown in the help.
        let mut cli = <crate::Cli as clap::CommandFactory>::command();
        let help = cli
            .find_subcommand_mut("mail")
            .and_then(|m| m.find_subcommand_mut("run"))
            .map(|r| r.render_long_help().to_string())
            .unwrap_or_default();
        assert!(help.contains("--max-response-time-ms"), "{help}");
        assert!(!help.contains("--max-score-ms"), "{help}");
        // The file's keys: the new one and the old one, read the same.
        let read = |text: &str| -> MailOptions {
            ConfigFile::parse(text, std::path::Path::new("t.toml"))
                .and_then(|c| c.section("mail"))
                .unwrap_or_else(|e| panic!("{text}: {e}"))
        };
        let new = read("[mail]\nmax_response_time_ms = 300\n");
        let old = read("[mail]\nmax_score_ms = 300\n");
        assert_eq!(new.max_response_time_ms, Some(300.0));
        assert_eq!(old.max_response_time_ms, new.max_response_time_ms);
        let both = "[mail]\nmax_response_time_ms = 300\nmax_score_ms = 400\n";
        let e = ConfigFile::parse(both, std::path::Path::new("t.toml"))
            .and_then(|c| c.section::<MailOptions>("mail"));
        assert!(e.is_err(), "both keys given must be refused");
    }
}
