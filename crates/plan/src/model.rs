//! The sizing computation: inputs + rules -> per mailbox, per database, per server, per
//! group and total figures, the copy layout under the declared failure, and warnings.

use crate::input::{DatabaseSpec, Disk, Failure, Input};
use crate::layout::{Layout, Load, site_letter};
use crate::rules::{GuidanceRules, RaidRule, Rules, raid_cost};
use mailbench_base::{ByteSize, Error, Result};
use serde::Serialize;

/// The most failure combinations a plan checks one by one.
pub const MAX_SCENARIOS: u64 = 200_000;

const MIB: f64 = 1_048_576.0;
const MB: f64 = 1_000_000.0;

#[derive(Debug, Clone, Serialize)]
pub struct GuidanceInfo {
    pub version: String,
    pub name: String,
    pub source: String,
    pub storage_profile: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DiskInfo {
    /// The disk model as the inputs give it.
    #[serde(flatten)]
    pub model: Disk,
    pub raid: String,
    pub raid_group: u32,
    pub write_penalty: u32,
    /// Database read share used for the RAID penalty.
    pub read_share: f64,
    /// Disk IOPS one host database IOPS costs: read share + write share x penalty.
    pub raid_cost: f64,
    /// Host database IOPS one disk gives: raw IOPS / raid_cost.
    pub functional_iops_per_disk: f64,
    /// Usable bytes of one RAID group.
    pub usable_per_group: u64,
}

/// Where a plan's IOPS per mailbox comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IopsSource {
    /// The guidance table for the messages per day, times the message size factor.
    Guidance,
    /// Given as `--iops-per-mailbox` (a measured figure).
    Measured,
}

impl IopsSource {
    pub fn as_str(self) -> &'static str {
        match self {
            IopsSource::Guidance => "guidance",
            IopsSource::Measured => "measured",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PerMailbox {
    /// Database IOPS from the guidance at 75 KB messages.
    pub guidance_iops: f64,
    /// Multiplier for the average message size (of the guidance's figure).
    pub message_size_factor: f64,
    /// Where `iops` comes from: `guidance` (the table x the message size factor) or
    /// `measured` (`--iops-per-mailbox`, e.g. a mail sweep's figure).
    pub iops_source: IopsSource,
    /// Database IOPS of an active mailbox, without headroom.
    pub iops: f64,
    /// The same with the I/O headroom.
    pub iops_with_headroom: f64,
    /// A passive copy's IOPS per mailbox, with headroom.
    pub passive_iops_with_headroom: f64,
    /// Database cache per active mailbox (bytes).
    pub cache: u64,
    pub log_size_factor: f64,
    /// Transaction logs (1 MiB) the mailbox's own mail generates per day.
    pub logs_per_day: f64,
    /// Transaction logs of mailbox moves per mailbox per day, on average.
    pub move_logs_per_day: f64,
    pub white_space: u64,
    pub dumpster: u64,
    /// Quota + white space + dumpster.
    pub size_on_disk: u64,
    /// Whether messages/day lies outside the guidance table.
    pub extrapolated: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct PerDatabase {
    /// Databases per group and in total.
    pub per_group: u32,
    pub total: u64,
    /// How the count was chosen.
    pub chosen_by: String,
    /// Mailboxes in the fullest database (all figures below are for it).
    pub mailboxes: u64,
    pub active_iops: f64,
    pub active_iops_without_headroom: f64,
    pub passive_iops: f64,
    /// Log write IOPS of each copy.
    pub log_iops: f64,
    pub read_share: f64,
    /// Background maintenance per copy (MB/s).
    pub maintenance_mb_s: f64,
    /// The mailboxes' own transaction logs per day.
    pub logs_per_day: f64,
    /// Transaction logs of mailbox moves per day, on average.
    pub move_logs_per_day: f64,
    /// Database cache of the active copy (bytes).
    pub cache: u64,
    /// Database size: mailboxes x size on disk (bytes).
    pub size: u64,
    /// Database volume per copy: size + growth + content index.
    pub volume: u64,
    /// Log space per copy: logs/day x keep days, plus the logs of a week's
    /// mailbox moves.
    pub log_space: u64,
    /// Log space of a lagged copy: also keeps the replay lag.
    pub log_space_lagged: u64,
    /// The database size advice that applies.
    pub size_advice: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerPlan {
    pub name: String,
    pub site: String,
    pub normal: Load,
    /// The heaviest state of this server over the failure's scenarios.
    pub after_failure: Load,
    pub worst_scenario: Option<String>,
    pub iops_normal: f64,
    pub iops_after_failure: f64,
    pub iops_after_failure_without_headroom: f64,
    pub log_iops: f64,
    pub maintenance_mb_s: f64,
    pub log_mb_s: f64,
    /// Maintenance + average log write throughput.
    pub sequential_mb_s: f64,
    pub cache_normal: u64,
    pub cache_after_failure: u64,
    pub logs_per_day: f64,
    pub database_space: u64,
    pub log_space: u64,
    pub restore_space: u64,
    pub capacity: u64,
    /// Disk IOPS needed after the failure (database + log, RAID penalty applied).
    pub raw_iops_after_failure: f64,
    pub disks_by_iops: u32,
    pub disks_by_capacity: u32,
    pub disks: u32,
    pub iops_utilisation_normal: f64,
    pub iops_utilisation_after_failure: f64,
    pub capacity_utilisation: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    pub servers: u64,
    pub mailboxes: u64,
    pub databases: u64,
    pub copies: u64,
    pub iops_normal: f64,
    pub iops_after_failure: f64,
    pub log_iops: f64,
    pub maintenance_mb_s: f64,
    pub logs_per_day: f64,
    pub database_space: u64,
    pub log_space: u64,
    pub capacity: u64,
    pub disks: u64,
    pub raw_capacity: u64,
    pub usable_capacity: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FailureSummary {
    pub failure: Failure,
    pub scenarios: u64,
    /// The scenario that loads one server most, and that server.
    pub worst_scenario: Option<String>,
    pub worst_server: Option<String>,
    pub worst_server_iops: f64,
    pub max_actives_after: u32,
    /// Per scenario: label and actives per server (failed servers: None). Kept for up to
    /// 64 scenarios.
    pub matrix: Vec<ScenarioLoads>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScenarioLoads {
    pub label: String,
    pub active: Vec<Option<u32>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub schema: String,
    pub guidance: GuidanceInfo,
    pub inputs: Input,
    pub disk: DiskInfo,
    pub per_mailbox: PerMailbox,
    pub per_database: PerDatabase,
    /// The servers of one group (every group is the same).
    pub servers: Vec<ServerPlan>,
    /// Disks in each server (identical servers: the most any server needs).
    pub disks_per_server: u32,
    pub group: Totals,
    pub total: Totals,
    pub failure: FailureSummary,
    pub layout: Layout,
    pub warnings: Vec<String>,
}

/// Rounds up, ignoring float noise just above a whole number.
pub fn ceil(x: f64) -> u64 {
    if x <= 0.0 {
        return 0;
    }
    let r = x.round();
    if (x - r).abs() < 1e-9 {
        r as u64
    } else {
        x.ceil() as u64
    }
}

fn round_up_to(n: u64, multiple: u64) -> u64 {
    let m = multiple.max(1);
    n.div_ceil(m) * m
}

fn binomial(n: u64, k: u64) -> u64 {
    let k = k.min(n - k.min(n));
    let mut r: u128 = 1;
    for i in 0..k {
        r = r * u128::from(n - i) / u128::from(i + 1);
        if r > u128::from(u64::MAX) {
            return u64::MAX;
        }
    }
    r as u64
}

/// Mailbox size on disk: quota + white space + dumpster (bytes), with the two parts.
pub fn mailbox_on_disk(input: &Input, rules: &Rules) -> (u64, u64, u64) {
    let day_of_mail = input.messages_per_day * input.message_size as f64;
    let white = input
        .white_space
        .unwrap_or_else(|| (day_of_mail * rules.capacity.white_space_days).round() as u64);
    let quota = input.mailbox_quota as f64;
    let dumpster = input.dumpster.unwrap_or_else(|| {
        (day_of_mail * input.retention_days
            + quota
                * (rules.capacity.single_item_recovery_pct + rules.capacity.calendar_logging_pct)
                / 100.0)
            .round() as u64
    });
    (input.mailbox_quota + white + dumpster, white, dumpster)
}

fn scenarios(layout: &Layout, failure: Failure) -> Result<Vec<(String, Vec<bool>)>> {
    let n = layout.servers();
    match failure {
        Failure::None => Ok(Vec::new()),
        Failure::Site => Ok((0..layout.site_servers.len())
            .map(|s| {
                let mask = layout.server_site.iter().map(|&x| x == s).collect();
                (format!("site {}", site_letter(s)), mask)
            })
            .collect()),
        Failure::Servers(k) => {
            let k = k as usize;
            let combos = binomial(n as u64, k as u64);
            if combos > MAX_SCENARIOS {
                return Err(Error::usage(format!(
                    "--failure servers:{k} over {n} servers per group is {combos} combinations, more than the {MAX_SCENARIOS} the planner checks; use fewer servers per group or a smaller N"
                )));
            }
            let mut out = Vec::with_capacity(combos as usize);
            let mut idx: Vec<usize> = (0..k).collect();
            loop {
                let mut mask = vec![false; n];
                for &i in &idx {
                    mask[i] = true;
                }
                let label = idx
                    .iter()
                    .map(|&i| layout.names[i].clone())
                    .collect::<Vec<_>>()
                    .join("+");
                out.push((label, mask));
                // Next combination in lexicographic order.
                let mut i = k;
                loop {
                    if i == 0 {
                        return Ok(out);
                    }
                    i -= 1;
                    if idx[i] < n - k + i {
                        idx[i] += 1;
                        for j in i + 1..k {
                            idx[j] = idx[j - 1] + 1;
                        }
                        break;
                    }
                }
            }
        }
    }
}

/// Computes the plan.
pub fn plan(input: &Input, rules: &Rules) -> Result<Plan> {
    let g = rules
        .guidance(&input.guidance)
        .ok_or_else(|| Error::usage(format!("unknown guidance {}", input.guidance)))?;
    let raid = rules
        .raid(&input.raid)
        .ok_or_else(|| Error::usage(format!("unknown RAID level {}", input.raid)))?;
    let mut warnings = Vec::new();
    let (per_mailbox, cache_per_mailbox) = size_mailbox(input, rules, g, &mut warnings);
    let per_database = size_database(
        input,
        rules,
        g,
        &per_mailbox,
        cache_per_mailbox,
        &mut warnings,
    )?;
    let layout = Layout::build(
        per_database.per_group,
        &input.site_servers,
        &input.site_copies,
        input.lagged_copies,
    );
    let loads = FailureLoads::compute(input, &layout, &per_database)?;
    let disk = disk_info(input, raid, per_database.read_share);
    let basis = ServerBasis {
        input,
        guidance: g,
        log_file: rules.logs.log_file_size.0 as f64,
        cache_per_mailbox,
        db: &per_database,
        disk: &disk,
    };
    let mut servers: Vec<ServerPlan> = (0..layout.servers())
        .map(|s| basis.server(s, &layout, &loads))
        .collect();
    let disks_per_server = fit_disks(input, &disk, &mut servers);
    warn_disks(input, &servers, disks_per_server, &mut warnings);
    warn_raid_and_layout(input, raid, &loads.normal, &mut warnings);
    let failure = loads.summary(input, &servers);
    let group = group_totals(
        &basis,
        &layout,
        &loads,
        &servers,
        &failure,
        disks_per_server,
    );
    let total = all_groups(input, &group);
    Ok(Plan {
        schema: "mailbench.plan/1".into(),
        guidance: GuidanceInfo {
            version: g.version.clone(),
            name: g.name.clone(),
            source: g.source.clone(),
            storage_profile: g.storage_profile.clone(),
        },
        inputs: input.clone(),
        disk,
        per_mailbox,
        per_database,
        servers,
        disks_per_server,
        group,
        total,
        failure,
        layout,
        warnings,
    })
}

/// Per mailbox: IOPS (guidance or measured, with headroom), cache, logs and size on disk;
/// also the unrounded cache per mailbox the database and server figures are computed from.
fn size_mailbox(
    input: &Input,
    rules: &Rules,
    g: &GuidanceRules,
    warnings: &mut Vec<String>,
) -> (PerMailbox, f64) {
    let lookup = g.iops_per_mailbox(input.messages_per_day, input.copies);
    let size_factor = rules.iops_size_factor(g, input.message_size);
    let (iops, iops_source) = match input.iops_per_mailbox {
        Some(measured) => (measured, IopsSource::Measured),
        None => (lookup.value * size_factor, IopsSource::Guidance),
    };
    let iops_h = iops * headroom(input);
    let cache_pm = g.cache_per_mailbox(input.messages_per_day);
    let log_factor = rules.log_size_factor(input.message_size);
    let logs_pm = rules.logs.logs_per_message * input.messages_per_day * log_factor;
    let (on_disk, white, dumpster) = mailbox_on_disk(input, rules);
    // A moved mailbox's content passes through the target database's log
    // once: its size in log files, spread over the week's seven days.
    let move_logs_pm =
        input.mailbox_moves_pct / 100.0 * on_disk as f64 / rules.logs.log_file_size.0 as f64 / 7.0;
    let extrapolated =
        (lookup.extrapolated && iops_source == IopsSource::Guidance) || cache_pm.extrapolated;
    if extrapolated {
        let (lo, hi) = g.table_range();
        warnings.push(format!(
            "{} messages a day lies outside the {} guidance table ({lo}-{hi}); its figures are extrapolated",
            input.messages_per_day, g.version
        ));
    }
    let per_mailbox = PerMailbox {
        guidance_iops: lookup.value,
        message_size_factor: size_factor,
        iops_source,
        iops,
        iops_with_headroom: iops_h,
        passive_iops_with_headroom: iops_h * g.passive_iops_share,
        cache: cache_pm.value.round() as u64,
        log_size_factor: log_factor,
        logs_per_day: logs_pm,
        move_logs_per_day: move_logs_pm,
        white_space: white,
        dumpster,
        size_on_disk: on_disk,
        extrapolated,
    };
    (per_mailbox, cache_pm.value)
}

/// The I/O headroom as a factor.
fn headroom(input: &Input) -> f64 {
    1.0 + input.headroom_pct / 100.0
}

/// The database size advice that applies: with copies or stand-alone.
fn size_advice(input: &Input, rules: &Rules) -> u64 {
    if input.copies >= 2 {
        rules.capacity.max_db_with_copies.0
    } else {
        rules.capacity.max_db_standalone.0
    }
}

/// Per database: how many per group, and the figures of the fullest one.
fn size_database(
    input: &Input,
    rules: &Rules,
    g: &GuidanceRules,
    pm: &PerMailbox,
    cache_per_mailbox: f64,
    warnings: &mut Vec<String>,
) -> Result<PerDatabase> {
    let mailboxes_group = input.mailboxes.div_ceil(u64::from(input.groups));
    let advice = size_advice(input, rules);
    let (databases, chosen_by) = database_count(input, mailboxes_group, pm.size_on_disk, advice);
    let databases = databases.max(1);
    if databases > u64::from(u32::MAX) {
        return Err(Error::usage("too many databases per group"));
    }
    let mailboxes_db = mailboxes_group.div_ceil(databases);
    let db_active = mailboxes_db as f64 * pm.iops_with_headroom;
    let logs_db = pm.logs_per_day * mailboxes_db as f64;
    let move_logs_db = pm.move_logs_per_day * mailboxes_db as f64;
    let log_file = rules.logs.log_file_size.0 as f64;
    // M4: room for the days of logs the truncation may fail for, and for a
    // week's mailbox moves (their size).
    let moves = input.mailbox_moves_pct / 100.0 * (mailboxes_db * pm.size_on_disk) as f64;
    let db_size = mailboxes_db * pm.size_on_disk;
    let growth = 1.0 + input.growth_pct / 100.0;
    let ci = 1.0 + input.content_index_pct / 100.0;
    let per_database = PerDatabase {
        per_group: databases as u32,
        total: databases * u64::from(input.groups),
        chosen_by,
        mailboxes: mailboxes_db,
        active_iops: db_active,
        active_iops_without_headroom: mailboxes_db as f64 * pm.iops,
        passive_iops: mailboxes_db as f64 * pm.passive_iops_with_headroom,
        log_iops: db_active * g.log_iops_per_db_iops,
        read_share: g.read_share(input.copies),
        maintenance_mb_s: g.maintenance_mb_per_s_per_copy,
        logs_per_day: logs_db,
        move_logs_per_day: move_logs_db,
        cache: (cache_per_mailbox * mailboxes_db as f64).round() as u64,
        size: db_size,
        volume: (db_size as f64 * growth * ci).round() as u64,
        log_space: (logs_db * log_file * input.log_days + moves).round() as u64,
        log_space_lagged: (logs_db * log_file * (input.log_days + input.replay_lag_days) + moves)
            .round() as u64,
        size_advice: advice,
    };
    warn_database(input, &per_database, warnings);
    Ok(per_database)
}

/// Databases per group as the input asks for them, and how they were chosen.
fn database_count(input: &Input, mailboxes_group: u64, on_disk: u64, advice: u64) -> (u64, String) {
    let n1 = u64::from(input.site_servers[0]);
    match input.databases {
        DatabaseSpec::Count(n) => (u64::from(n), "--databases".to_string()),
        DatabaseSpec::PerServer(k) => (
            (u64::from(input.servers) * u64::from(k)).div_ceil(u64::from(input.copies)),
            format!(
                "--databases-per-server {k}: {} servers x {k} / {} copies",
                input.servers, input.copies
            ),
        ),
        DatabaseSpec::FromMaxSize => {
            let max = input.max_database_size.unwrap_or(advice).max(1);
            let mut d = round_up_to(
                ceil(mailboxes_group as f64 * on_disk as f64 / max as f64).max(1),
                n1,
            );
            while mailboxes_group.div_ceil(d) * on_disk > max && d < mailboxes_group {
                d += n1;
            }
            (
                d,
                format!(
                    "largest database {} ({}), rounded up to a multiple of the {n1} servers holding active copies",
                    ByteSize(max),
                    if input.max_database_size.is_some() {
                        "--max-database-size"
                    } else {
                        "size advice"
                    }
                ),
            )
        }
    }
}

/// Warnings on the databases: over the size advice, uneven over site A's servers.
fn warn_database(input: &Input, db: &PerDatabase, warnings: &mut Vec<String>) {
    let databases = u64::from(db.per_group);
    let n1 = u64::from(input.site_servers[0]);
    if db.size > db.size_advice {
        warnings.push(format!(
            "database size {} is over the {} advice ({} {}); add databases (--databases, --max-database-size)",
            ByteSize(db.size),
            ByteSize(db.size_advice),
            if input.copies >= 2 { "with" } else { "for" },
            if input.copies >= 2 {
                "two or more copies"
            } else {
                "a stand-alone database"
            }
        ));
    }
    if databases % n1 != 0 {
        warnings.push(format!(
            "{databases} databases do not divide evenly over the {n1} servers of site A: some servers carry one more active database"
        ));
    }
}

/// Database IOPS of a server carrying `l`: active copies at `active`, passive and lagged
/// ones at `passive`.
fn load_iops(l: &Load, active: f64, passive: f64) -> f64 {
    f64::from(l.active) * active + f64::from(l.passive + l.lagged) * passive
}

/// The servers' loads in normal operation and over the failure's scenarios.
struct FailureLoads {
    /// Each server's load with nothing failed.
    normal: Vec<Load>,
    /// Each scenario: its label and which servers it fails.
    scenarios: Vec<(String, Vec<bool>)>,
    /// Each server's heaviest state: its load, the scenario (None: normal operation) and
    /// its database IOPS.
    heaviest: Vec<(Load, Option<String>, f64)>,
    /// Actives per server of the first 64 scenarios.
    matrix: Vec<ScenarioLoads>,
    /// The most active copies any server carries, normal or after a failure.
    max_actives: u32,
}

impl FailureLoads {
    /// Goes through every scenario of the failure; a scenario that leaves a database
    /// without a non-lagged copy is a usage error.
    fn compute(input: &Input, layout: &Layout, db: &PerDatabase) -> Result<FailureLoads> {
        let (active, passive) = (db.active_iops, db.passive_iops);
        let (normal, _) = layout.loads(&vec![false; layout.servers()]);
        let scenarios = scenarios(layout, input.failure)?;
        let mut heaviest: Vec<(Load, Option<String>, f64)> = normal
            .iter()
            .map(|l| (*l, None, load_iops(l, active, passive)))
            .collect();
        let mut matrix = Vec::new();
        let mut max_actives = normal.iter().map(|l| l.active).max().unwrap_or(0);
        for (label, mask) in &scenarios {
            let (loads, lost) = layout.loads(mask);
            if lost > 0 {
                return Err(Error::usage(format!(
                    "--failure {}: losing {label} leaves {lost} database(s) without a non-lagged copy; add copies (--copies, --site-copies)",
                    input.failure
                )));
            }
            for (s, l) in loads.iter().enumerate() {
                if mask[s] {
                    continue;
                }
                let v = load_iops(l, active, passive);
                if v > heaviest[s].2 + 1e-9 {
                    heaviest[s] = (*l, Some(label.clone()), v);
                }
                max_actives = max_actives.max(l.active);
            }
            if matrix.len() < 64 {
                matrix.push(ScenarioLoads {
                    label: label.clone(),
                    active: loads
                        .iter()
                        .enumerate()
                        .map(|(s, l)| (!mask[s]).then_some(l.active))
                        .collect(),
                });
            }
        }
        Ok(FailureLoads {
            normal,
            scenarios,
            heaviest,
            matrix,
            max_actives,
        })
    }

    /// The failure section: the scenario and server loaded most.
    fn summary(&self, input: &Input, servers: &[ServerPlan]) -> FailureSummary {
        let worst = servers
            .iter()
            .max_by(|a, b| a.iops_after_failure.total_cmp(&b.iops_after_failure));
        FailureSummary {
            failure: input.failure,
            scenarios: self.scenarios.len() as u64,
            worst_scenario: worst.and_then(|w| w.worst_scenario.clone()),
            worst_server: worst.map(|w| w.name.clone()),
            worst_server_iops: worst.map_or(0.0, |w| w.iops_after_failure),
            max_actives_after: self.max_actives,
            matrix: self.matrix.clone(),
        }
    }
}

/// The disk, its RAID level and what one disk gives.
fn disk_info(input: &Input, raid: &RaidRule, read_share: f64) -> DiskInfo {
    let penalty = raid.penalty;
    let cost = raid_cost(read_share, penalty);
    DiskInfo {
        model: input.disk.clone(),
        raid: input.raid.clone(),
        raid_group: input.raid_group,
        write_penalty: penalty,
        read_share,
        raid_cost: cost,
        functional_iops_per_disk: input.disk.iops / cost,
        usable_per_group: (raid.data_disks(input.raid_group) * input.disk.capacity as f64) as u64,
    }
}

/// What every server's figures are computed from.
struct ServerBasis<'a> {
    input: &'a Input,
    guidance: &'a GuidanceRules,
    /// Bytes of one transaction log file.
    log_file: f64,
    /// Database cache per active mailbox, unrounded.
    cache_per_mailbox: f64,
    db: &'a PerDatabase,
    disk: &'a DiskInfo,
}

impl ServerBasis<'_> {
    /// Server `s` of a group: its loads, throughput, space and the disks it needs. The
    /// utilisations hold the disk IOPS and bytes needed until [`fit_disks`] divides them by
    /// what the chosen disks give.
    fn server(&self, s: usize, layout: &Layout, loads: &FailureLoads) -> ServerPlan {
        let (input, db) = (self.input, self.db);
        let normal = loads.normal[s];
        let (aft, worst, iops_after) = loads.heaviest[s].clone();
        let copies = normal.copies();
        let iops_normal = load_iops(&normal, db.active_iops, db.passive_iops);
        let log_iops = f64::from(copies) * db.log_iops;
        let maint = f64::from(copies) * self.guidance.maintenance_mb_per_s_per_copy;
        let logs_day = f64::from(copies) * db.logs_per_day;
        let log_mb_s = logs_day * self.log_file / 86400.0 / MB;
        let log_total = u64::from(normal.active + normal.passive) * db.log_space
            + u64::from(normal.lagged) * db.log_space_lagged;
        let db_total = u64::from(copies) * db.volume;
        let restore = self.restore_space();
        let capacity = db_total + log_total + restore;
        let (cost, penalty) = (self.disk.raid_cost, self.disk.write_penalty);
        let raw_after = iops_after * cost + log_iops * f64::from(penalty);
        let raw_normal = iops_normal * cost + log_iops * f64::from(penalty);
        let group = u64::from(input.raid_group);
        let by_iops = round_up_to(ceil(raw_after / input.disk.iops), group);
        let by_cap = ceil(capacity as f64 / self.disk.usable_per_group.max(1) as f64) * group;
        let cache = |actives: u32| {
            (f64::from(actives) * db.mailboxes as f64 * self.cache_per_mailbox).round() as u64
        };
        ServerPlan {
            name: layout.names[s].clone(),
            site: site_letter(layout.server_site[s]),
            normal,
            after_failure: aft,
            worst_scenario: worst,
            iops_normal,
            iops_after_failure: iops_after,
            iops_after_failure_without_headroom: iops_after / headroom(input),
            log_iops,
            maintenance_mb_s: maint,
            log_mb_s,
            sequential_mb_s: maint + log_mb_s,
            cache_normal: cache(normal.active),
            cache_after_failure: cache(aft.active),
            logs_per_day: logs_day,
            database_space: db_total,
            log_space: log_total,
            restore_space: restore,
            capacity,
            raw_iops_after_failure: raw_after,
            disks_by_iops: by_iops.max(if copies > 0 { group } else { 0 }) as u32,
            disks_by_capacity: by_cap as u32,
            disks: 0,
            iops_utilisation_normal: raw_normal,
            iops_utilisation_after_failure: raw_after,
            capacity_utilisation: capacity as f64,
        }
    }

    /// Space kept free on each server to restore a database and its logs (0 without
    /// `--restore-volume`).
    fn restore_space(&self) -> u64 {
        if self.input.restore_volume {
            self.db.volume + self.db.log_space
        } else {
            0
        }
    }
}

/// Disks per server (given, or the most any server needs), set on every server with its
/// utilisations.
fn fit_disks(input: &Input, disk: &DiskInfo, servers: &mut [ServerPlan]) -> u32 {
    let needed = servers
        .iter()
        .map(|s| s.disks_by_iops.max(s.disks_by_capacity))
        .max()
        .unwrap_or(0)
        .max(input.raid_group);
    let disks_per_server = input.disks_per_server.unwrap_or(needed);
    for s in servers {
        s.disks = disks_per_server;
        let raw = f64::from(disks_per_server) * input.disk.iops;
        let usable = f64::from(disks_per_server / input.raid_group) * disk.usable_per_group as f64;
        s.iops_utilisation_normal /= raw.max(f64::MIN_POSITIVE);
        s.iops_utilisation_after_failure /= raw.max(f64::MIN_POSITIVE);
        s.capacity_utilisation /= usable.max(f64::MIN_POSITIVE);
    }
    disks_per_server
}

/// Warnings when `--disks-per-server` gives a server fewer disks than it needs.
fn warn_disks(
    input: &Input,
    servers: &[ServerPlan],
    disks_per_server: u32,
    warnings: &mut Vec<String>,
) {
    if input.disks_per_server.is_none() {
        return;
    }
    for s in servers {
        if s.disks_by_iops > disks_per_server {
            warnings.push(format!(
                "server {} after {} needs {:.0} disk IOPS ({} disks) but has {disks_per_server} disks: the failure leaves it over its IOPS ({:.0} %)",
                s.name,
                s.worst_scenario.as_deref().map_or("the failure".to_string(), |w| format!("the loss of {w}")),
                s.raw_iops_after_failure,
                s.disks_by_iops,
                s.iops_utilisation_after_failure * 100.0
            ));
        }
        if s.disks_by_capacity > disks_per_server {
            warnings.push(format!(
                "server {} needs {} of space ({} disks) but has {disks_per_server} disks",
                s.name,
                ByteSize(s.capacity),
                s.disks_by_capacity
            ));
        }
    }
}

/// Warnings on the RAID level (copies, group size) and on a layout that cannot give every
/// server `--databases-per-server` copies.
fn warn_raid_and_layout(
    input: &Input,
    raid: &RaidRule,
    normal: &[Load],
    warnings: &mut Vec<String>,
) {
    if let Some(min) = raid.min_copies
        && input.copies - input.lagged_copies < min
    {
        warnings.push(format!(
            "RAID {} (no redundancy) with {} non-lagged copies: JBOD needs at least {min} highly available copies",
            input.raid,
            input.copies - input.lagged_copies
        ));
    }
    if let Some(max) = raid.group_advice_max
        && input.raid_group > max
    {
        warnings.push(format!(
            "RAID-{} groups of {} disks: the advice is at most {max}",
            input.raid, input.raid_group
        ));
    }
    if let DatabaseSpec::PerServer(k) = input.databases {
        let most = normal.iter().map(Load::copies).max().unwrap_or(0);
        let least = normal.iter().map(Load::copies).min().unwrap_or(0);
        if most != k || least != k {
            warnings.push(format!(
                "--databases-per-server {k}: the layout puts {least} to {most} database copies on a server (sites with different servers per copy)"
            ));
        }
    }
}

/// One group's totals; its IOPS after failure are those of the worst scenario's state.
fn group_totals(
    basis: &ServerBasis<'_>,
    layout: &Layout,
    loads: &FailureLoads,
    servers: &[ServerPlan],
    failure: &FailureSummary,
    disks_per_server: u32,
) -> Totals {
    let (input, db) = (basis.input, basis.db);
    let n = layout.servers();
    let iops_after = match &failure.worst_scenario {
        None => servers.iter().map(|s| s.iops_normal).sum(),
        Some(label) => {
            let mask = &loads
                .scenarios
                .iter()
                .find(|(l, _)| l == label)
                .map(|(_, m)| m.clone())
                .unwrap_or_else(|| vec![false; n]);
            let (after, _) = layout.loads(mask);
            after
                .iter()
                .map(|l| load_iops(l, db.active_iops, db.passive_iops))
                .sum()
        }
    };
    let disks = u64::from(disks_per_server) * n as u64;
    let databases = u64::from(db.per_group);
    Totals {
        servers: n as u64,
        mailboxes: input.mailboxes.div_ceil(u64::from(input.groups)),
        databases,
        copies: databases * u64::from(input.copies),
        iops_normal: servers.iter().map(|s| s.iops_normal).sum(),
        iops_after_failure: iops_after,
        log_iops: servers.iter().map(|s| s.log_iops).sum(),
        maintenance_mb_s: servers.iter().map(|s| s.maintenance_mb_s).sum(),
        logs_per_day: servers.iter().map(|s| s.logs_per_day).sum(),
        database_space: servers.iter().map(|s| s.database_space).sum(),
        log_space: servers.iter().map(|s| s.log_space).sum(),
        capacity: servers.iter().map(|s| s.capacity).sum(),
        disks,
        raw_capacity: disks * input.disk.capacity,
        usable_capacity: disks / u64::from(input.raid_group) * basis.disk.usable_per_group,
    }
}

/// The totals of every group (all groups are the same).
fn all_groups(input: &Input, t: &Totals) -> Totals {
    let k = u64::from(input.groups);
    let kf = f64::from(input.groups);
    Totals {
        servers: t.servers * k,
        mailboxes: input.mailboxes,
        databases: t.databases * k,
        copies: t.copies * k,
        iops_normal: t.iops_normal * kf,
        iops_after_failure: t.iops_after_failure * kf,
        log_iops: t.log_iops * kf,
        maintenance_mb_s: t.maintenance_mb_s * kf,
        logs_per_day: t.logs_per_day * kf,
        database_space: t.database_space * k,
        log_space: t.log_space * k,
        capacity: t.capacity * k,
        disks: t.disks * k,
        raw_capacity: t.raw_capacity * k,
        usable_capacity: t.usable_capacity * k,
    }
}

/// Bytes as MiB, for the cache and log figures.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB
}
