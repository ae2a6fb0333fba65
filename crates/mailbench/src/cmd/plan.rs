//! `mailbench plan` flags (owned by the planner work). Every flag has a key of the same
//! name (`-` -> `_`) in the `[plan]` section of `--config`; flags override the file.
use crate::Global;
use mailbench_base::config::ConfigFile;
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_plan::settings::{CountList, SizeValue, TextList, Word};
use mailbench_plan::{Rules, Settings, emit, render};
use std::path::PathBuf;

/// Sizing: mailboxes + profile -> target IOPS, capacity, disks, copy layout, a storage config.
///
/// Pure computation; writes nothing unless asked (--emit-config). See docs/planner.md.
#[derive(clap::Args, Debug, Default)]
pub struct PlanArgs {
    /// Boxed: the flags are many, and the command enum stays small.
    #[command(flatten)]
    pub flags: Box<PlanFlags>,
}

/// The flags of `mailbench plan`.
#[derive(clap::Args, Debug, Default)]
#[command(allow_negative_numbers = true)]
pub struct PlanFlags {
    /// Mailboxes to plan for (required).
    #[arg(long, value_name = "N")]
    pub mailboxes: Option<i64>,
    /// Messages sent + received per mailbox per day [default: 150].
    #[arg(long, value_name = "N")]
    pub messages_per_day: Option<f64>,
    /// Measured database IOPS per active mailbox (e.g. a mail sweep's
    /// server.per_mailbox_real_day), in place of the guidance's figure [default: the guidance].
    #[arg(long, value_name = "IOPS")]
    pub iops_per_mailbox: Option<f64>,
    /// Average message size [default: 75KiB, Microsoft's "75 KB"].
    #[arg(long, value_name = "SIZE")]
    pub message_size: Option<String>,
    /// Mailbox quota, e.g. 4GB (required).
    #[arg(long, value_name = "SIZE")]
    pub mailbox_quota: Option<String>,
    /// Copies of each database, counting the active one and any lagged ones [default: 1].
    #[arg(long, value_name = "N")]
    pub copies: Option<i64>,
    /// How many of the copies are lagged (never activated) [default: 0].
    #[arg(long, value_name = "N")]
    pub lagged_copies: Option<i64>,
    /// Replay lag of lagged copies, e.g. 7d [default: 7d].
    #[arg(long, value_name = "DURATION")]
    pub replay_lag: Option<String>,
    /// Groups of servers (database availability groups); mailboxes split evenly [default: 1].
    #[arg(long, value_name = "N")]
    pub groups: Option<i64>,
    /// Servers per group [default: the sum of --site-servers, else 1 per site].
    #[arg(long, value_name = "N")]
    pub servers: Option<i64>,
    /// Sites [default: 1, or the length of --site-servers].
    #[arg(long, value_name = "N")]
    pub sites: Option<i64>,
    /// Servers per site, e.g. 8,4 (the first site holds the active copies) [default: even split].
    #[arg(long, value_name = "LIST")]
    pub site_servers: Option<String>,
    /// Copies per site, e.g. 2,1 [default: even split, first sites first].
    #[arg(long, value_name = "LIST")]
    pub site_copies: Option<String>,
    /// Databases per group [default: from --databases-per-server or the database size advice].
    #[arg(long, value_name = "N")]
    pub databases: Option<i64>,
    /// Database copies (active + passive) per server; databases = servers x N / copies.
    #[arg(long, value_name = "N")]
    pub databases_per_server: Option<i64>,
    /// Largest database when the count is derived [default: 200GiB stand-alone, 2TiB with copies].
    #[arg(long, value_name = "SIZE")]
    pub max_database_size: Option<String>,
    /// Failure to survive: none, servers:N or site [default: servers:1 with copies, else none].
    #[arg(long, value_name = "FAILURE")]
    pub failure: Option<String>,
    /// I/O headroom added to the guidance IOPS [default: 20%].
    #[arg(long, value_name = "PCT")]
    pub headroom: Option<String>,
    /// Guidance version: 2013 (also 2016/2019) or 2010 [default: 2013].
    #[arg(long, value_name = "VERSION")]
    pub guidance: Option<String>,
    /// Disk preset: nl-sas-7k2, sas-10k, sas-15k, ssd, nvme [default: nl-sas-7k2].
    #[arg(long, value_name = "PRESET")]
    pub disk: Option<String>,
    /// Override the preset's capacity per disk, e.g. 4TB.
    #[arg(long, value_name = "SIZE")]
    pub disk_capacity: Option<String>,
    /// Override the preset's random IOPS per disk.
    #[arg(long, value_name = "IOPS")]
    pub disk_iops: Option<f64>,
    /// RAID level: 1, 10, 5, 6 or jbod [default: 10].
    #[arg(long, value_name = "LEVEL")]
    pub raid: Option<String>,
    /// Disks per RAID group [default: 1 -> 2, 10 -> 4, 5 -> 5, 6 -> 6, jbod -> 1].
    #[arg(long, value_name = "N")]
    pub raid_group: Option<i64>,
    /// Disks each server has (check a given design instead of sizing one).
    #[arg(long, value_name = "N")]
    pub disks_per_server: Option<i64>,
    /// White space per mailbox [default: one day of mail].
    #[arg(long, value_name = "SIZE")]
    pub white_space: Option<String>,
    /// Dumpster (recoverable items) per mailbox [default: retention days of mail + 7 % of the quota].
    #[arg(long, value_name = "SIZE")]
    pub dumpster: Option<String>,
    /// Deleted item retention in days [default: 14].
    #[arg(long, value_name = "DAYS")]
    pub retention_days: Option<f64>,
    /// Growth reserve on the database volume [default: 20%].
    #[arg(long, value_name = "PCT")]
    pub growth: Option<String>,
    /// Content index as a share of the database [default: 0%].
    #[arg(long, value_name = "PCT")]
    pub content_index: Option<String>,
    /// Days of logs to keep room for [default: 3].
    #[arg(long, value_name = "DAYS")]
    pub log_days: Option<f64>,
    /// Extra log traffic from mailbox moves, as a share of the daily logs [default: 0%].
    #[arg(long, value_name = "PCT")]
    pub move_share: Option<String>,
    /// Add a restore volume (one database + its logs) per server.
    #[arg(long)]
    pub restore_volume: bool,
    /// Print the copy layout: which server holds each copy, and the actives after each failure.
    #[arg(long)]
    pub layout: bool,
    /// Print the report as Markdown.
    #[arg(long)]
    pub markdown: bool,
    /// Write the storage test for the most loaded server to FILE.toml.
    #[arg(long, value_name = "FILE.toml")]
    pub emit_config: Option<PathBuf>,
    /// Scale the emitted test's sizes for a lab, e.g. 0.01 [default: 1].
    #[arg(long, value_name = "SHARE")]
    pub scale: Option<f64>,
    /// Database folders of the emitted test, comma-separated [default: ./mailbench-data].
    #[arg(long, value_name = "LIST")]
    pub paths: Option<String>,
    /// Log folders of the emitted test, comma-separated.
    #[arg(long, value_name = "LIST")]
    pub log_paths: Option<String>,
    /// Measured window of the emitted test [default: 2h].
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
}

impl PlanFlags {
    fn settings(&self) -> Settings {
        let size = |v: &Option<String>| v.clone().map(SizeValue::Text);
        let word = |v: &Option<String>| v.clone().map(Word::Text);
        Settings {
            mailboxes: self.mailboxes,
            messages_per_day: self.messages_per_day,
            iops_per_mailbox: self.iops_per_mailbox,
            message_size: size(&self.message_size),
            mailbox_quota: size(&self.mailbox_quota),
            copies: self.copies,
            lagged_copies: self.lagged_copies,
            replay_lag: word(&self.replay_lag),
            groups: self.groups,
            servers: self.servers,
            sites: self.sites,
            site_servers: self.site_servers.clone().map(CountList::Text),
            site_copies: self.site_copies.clone().map(CountList::Text),
            databases: self.databases,
            databases_per_server: self.databases_per_server,
            max_database_size: size(&self.max_database_size),
            failure: word(&self.failure),
            headroom: word(&self.headroom),
            guidance: word(&self.guidance),
            disk: self.disk.clone(),
            disk_capacity: size(&self.disk_capacity),
            disk_iops: self.disk_iops,
            raid: word(&self.raid),
            raid_group: self.raid_group,
            disks_per_server: self.disks_per_server,
            white_space: size(&self.white_space),
            dumpster: size(&self.dumpster),
            retention_days: self.retention_days,
            growth: word(&self.growth),
            content_index: word(&self.content_index),
            log_days: self.log_days,
            move_share: word(&self.move_share),
            restore_volume: self.restore_volume.then_some(true),
            layout: self.layout.then_some(true),
            markdown: self.markdown.then_some(true),
            emit_config: self.emit_config.clone(),
            scale: self.scale,
            paths: self.paths.clone().map(TextList::Text),
            log_paths: self.log_paths.clone().map(TextList::Text),
            duration: self.duration.clone(),
        }
    }
}

pub fn run(args: PlanArgs, global: &Global) -> Result<ExitStatus> {
    let file: Settings = ConfigFile::load_optional(global.config.as_deref())?.section("plan")?;
    let settings = args.flags.settings().merge(file);
    let rules = Rules::builtin()?;
    let input = settings.validate(&rules)?;
    if let Some(path) = &input.emit_config {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => std::path::Path::new("."),
        };
        if !parent.is_dir() {
            return Err(Error::usage(format!(
                "--emit-config {}: the folder {} does not exist; create it or give another path",
                path.display(),
                parent.display()
            )));
        }
        if path.is_dir() {
            return Err(Error::usage(format!(
                "--emit-config {} is a folder: give a file name, e.g. {}/storage.toml",
                path.display(),
                path.display()
            )));
        }
    }
    let plan = mailbench_plan::plan(&input, &rules)?;

    if let Some(path) = &input.emit_config {
        let text = emit::storage_config(&plan)?;
        std::fs::write(path, text).map_err(|e| Error::io("cannot write", path, e))?;
    }
    if global.json {
        let text = serde_json::to_string_pretty(&plan)
            .map_err(|e| Error::runtime(format!("cannot encode the plan as JSON: {e}")))?;
        println!("{text}");
    } else if !global.quiet {
        let text = if input.markdown {
            render::markdown(&plan, input.layout)
        } else {
            render::text(&plan, input.layout)
        };
        print!("{text}");
        if let Some(path) = &input.emit_config {
            println!("\nwrote the storage test to {}", path.display());
        }
    }
    Ok(ExitStatus::Pass)
}
