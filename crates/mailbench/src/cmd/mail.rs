//! `mailbench mail`: each command takes the groups of `[mail]` options it
//! uses (defined once, with their keys, in `mailbench_mail::options`); flags
//! win over the `[mail]` section of `--config`. The commands run in the
//! driver (`mailbench_runner::{mail, sweep}`), on one host or over MPI ranks.
use crate::Global;
use mailbench_base::config::ConfigFile;
use mailbench_base::{ExitStatus, Result};
use mailbench_mail::options::{MailOptions, ResolveExt, Resolved, SetupOptions, Users};
use mailbench_mail::profile::{Profile, ProfileExt};

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
    /// The sink of `--target sink` (started by a run, not by hand).
    #[command(hide = true)]
    Sink,
}

/// `mail setup`: the options of [`SetupOptions`].
#[derive(clap::Args, Debug, Clone)]
pub struct SetupArgs {
    #[command(flatten)]
    pub options: SetupOptions,
}

/// `mail run`: every option of the `[mail]` section.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub options: MailOptions,
}

/// `mail sweep`: every option of the `[mail]` section (`--users` the
/// levels) and the search, which is not a key.
#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    #[command(flatten)]
    pub options: MailOptions,
    /// Search for the largest count that passes every criterion: grow from
    /// the first level (x2) until one fails, at most the last, then bisect.
    #[arg(long)]
    pub find_max: bool,
    /// Precision of --find-max: users (10) or a share of the largest level (5%) [default: 5%].
    #[arg(long, value_name = "USERS|PCT")]
    pub resolution: Option<String>,
    /// Also write report.pdf with headless Chromium (the HTML is always written).
    #[arg(long)]
    pub pdf: bool,
}

pub fn run(cmd: MailCommand, global: &Global) -> Result<ExitStatus> {
    if let MailCommand::Sink = cmd {
        return mailbench_mail::sink::child_main().map(|()| ExitStatus::Pass);
    }
    let file = ConfigFile::load_optional(global.config.as_deref())?;
    let from_file: MailOptions = file.section("mail")?;
    let mut flags = match &cmd {
        MailCommand::Setup(a) => MailOptions {
            setup: a.options.clone(),
            ..Default::default()
        },
        MailCommand::Run(a) => a.options.clone(),
        MailCommand::Sweep(a) => a.options.clone(),
        MailCommand::Sink => MailOptions::default(),
    };
    let plan = match &cmd {
        // The sweep provisions and checks for its largest level.
        MailCommand::Sweep(a) => {
            let plan = sweep_levels(a, &from_file)?;
            flags.setup.users = plan.levels.last().map(|n| Users::from(*n as usize));
            // Its full disclosure: the [disclosure] section, checked first.
            let declared: mailbench_results::disclosure::DisclosureToml =
                file.section("disclosure")?;
            declared.validate()?;
            let doc = mailbench_runner::sweep::SweepDocument {
                declared,
                pdf: a.pdf,
            };
            Some((plan, doc))
        }
        // One number of users, checked before anything else.
        _ => {
            if let Some(u) = &flags.setup.users {
                u.count()?;
            }
            None
        }
    };
    let opts = from_file.clone().overlay(flags);
    let profile = Profile::load(opts.setup.profile.as_deref().unwrap_or("mmb3"))?;
    let resolved = Resolved::resolve(&opts, profile.day)?;
    let common = global.common(&file);
    let start_at = opts.run.start_at.as_deref();
    match (cmd, plan) {
        (MailCommand::Setup(_), _) => mailbench_runner::mail::setup(resolved, &common),
        (MailCommand::Sweep(_), Some((plan, doc))) => {
            mailbench_runner::sweep::sweep(resolved, plan, doc, start_at, &common)
        }
        _ => mailbench_runner::mail::run(resolved, start_at, &common),
    }
}

/// The levels of `mail sweep` (`--users`, else `users` in `[mail]`) and the
/// search, checked before anything is written.
fn sweep_levels(
    a: &SweepArgs,
    file: &MailOptions,
) -> Result<mailbench_results::mail::sweep::SweepPlan> {
    let text = match (&a.options.setup.users, &file.setup.users) {
        (Some(Users(u)), _) | (None, Some(Users(u))) => u.clone(),
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
            crate::Command::Mail(MailCommand::Run(a)) => a.options,
            crate::Command::Mail(MailCommand::Sweep(a)) => a.options,
            _ => panic!("not mail run or sweep"),
        }
    }

    #[test]
    fn the_response_time_limit_has_its_older_name_as_an_alias() {
        for cmd in [&["run"][..], &["sweep", "--users", "1,2"]] {
            let new = [cmd, &["--max-response-time-ms", "250"]].concat();
            let old = [cmd, &["--max-score-ms", "250"]].concat();
            assert_eq!(flags(&new).run.max_response_time_ms, Some(250.0), "{new:?}");
            assert_eq!(flags(&old).run.max_response_time_ms, Some(250.0), "{old:?}");
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
        assert_eq!(new.run.max_response_time_ms, Some(300.0));
        assert_eq!(old.run.max_response_time_ms, new.run.max_response_time_ms);
        let both = "[mail]\nmax_response_time_ms = 300\nmax_score_ms = 400\n";
        let e = ConfigFile::parse(both, std::path::Path::new("t.toml"))
            .and_then(|c| c.section::<MailOptions>("mail"));
        assert!(e.is_err(), "both keys given must be refused");
    }

    #[test]
    fn flags_fill_the_keys_they_name_and_nothing_else() {
        let none = serde_json::to_value(flags(&["run"])).unwrap_or_default();
        let set: Vec<_> = (none.as_object().into_iter().flatten())
            .filter(|(_, v)| !v.is_null())
            .collect();
        assert!(set.is_empty(), "{set:?}");
        let o = flags(&[
            "sweep",
            "--users",
            "100..400:100",
            "--tls-insecure",
            "--skip-setup",
            "--no-idle",
            "--server-metrics",
            "http://a:9100/metrics",
            "--server-metrics",
            "http://b:9100/metrics",
            "--day-length",
            "10m",
            "--starttls",
            "require",
            "--seed",
            "7",
        ]);
        let (s, r) = (&o.setup, &o.run);
        assert_eq!(s.users, Some(Users("100..400:100".into())));
        assert_eq!((s.tls_insecure, s.allow_cleartext_auth), (Some(true), None));
        assert_eq!((r.skip_setup, r.no_idle), (Some(true), Some(true)));
        assert_eq!(r.server_metrics.as_ref().map(Vec::len), Some(2));
        assert_eq!(r.server_disk, None);
        assert_eq!(r.day_length.map(|d| d.0.as_secs()), Some(600));
        assert_eq!(
            (s.seed, s.starttls),
            (Some(7), Some(mailbench_mail::endpoint::StartTls::Require))
        );
        let parse =
            |args: &[&str]| crate::Cli::try_parse_from(["mailbench", "mail"].iter().chain(args));
        // A switch takes no value; setup takes no option of a run.
        assert!(parse(&["run", "--tls-insecure=false"]).is_err());
        assert!(parse(&["setup", "--day-length", "1m"]).is_err());
        assert!(parse(&["setup", "--seed", "3"]).is_ok());
        // Flags win over the file, key by key.
        let file: MailOptions = ConfigFile::parse(
            "[mail]\nseed = 1\nusers = 5\nno_idle = false\n",
            std::path::Path::new("t.toml"),
        )
        .and_then(|c| c.section("mail"))
        .unwrap_or_else(|e| panic!("{e}"));
        let both = file.overlay(o);
        assert_eq!(both.setup.seed, Some(7));
        assert_eq!(both.run.no_idle, Some(true));
    }
}
