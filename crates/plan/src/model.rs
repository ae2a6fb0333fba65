//! The sizing computation: inputs + rules -> per mailbox, per database, per server, per
//! group and total figures, the copy layout under the declared failure, and warnings.

use crate::input::{DatabaseSpec, Failure, Input};
use crate::layout::{Layout, Load, site_letter};
use crate::rules::{Rules, raid_cost};
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
    pub preset: String,
    pub description: String,
    pub source: String,
    pub capacity: u64,
    pub iops: f64,
    pub capacity_overridden: bool,
    pub iops_overridden: bool,
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
    /// Transaction logs (1 MiB) generated per mailbox per day, moves included.
    pub logs_per_day: f64,
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
    pub logs_per_day: f64,
    /// Database cache of the active copy (bytes).
    pub cache: u64,
    /// Database size: mailboxes x size on disk (bytes).
    pub size: u64,
    /// Database volume per copy: size + growth + content index.
    pub volume: u64,
    /// Log space per copy: logs/day x keep days.
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
#[allow(clippy::too_many_lines)] // longer than 100 lines: split when next changed
pub fn plan(input: &Input, rules: &Rules) -> Result<Plan> {
    let g = rules
        .guidance(&input.guidance)
        .ok_or_else(|| Error::usage(format!("unknown guidance {}", input.guidance)))?;
    let raid = rules
        .raid(&input.raid)
        .ok_or_else(|| Error::usage(format!("unknown RAID level {}", input.raid)))?;
    let mut warnings = Vec::new();

    // Per mailbox.
    let lookup = g.iops_per_mailbox(input.messages_per_day, input.copies);
    let size_factor = rules.iops_size_factor(input.message_size);
    let (iops, iops_source) = match input.iops_per_mailbox {
        Some(measured) => (measured, IopsSource::Measured),
        None => (lookup.value * size_factor, IopsSource::Guidance),
    };
    let headroom = 1.0 + input.headroom_pct / 100.0;
    let iops_h = iops * headroom;
    let passive_h = iops_h * g.passive_iops_share;
    let cache_pm = g.cache_per_mailbox(input.messages_per_day);
    let log_factor = rules.log_size_factor(input.message_size);
    let logs_pm = rules.logs.logs_per_message
        * input.messages_per_day
        * log_factor
        * (1.0 + input.move_share_pct / 100.0);
    let (on_disk, white, dumpster) = mailbox_on_disk(input, rules);
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
        passive_iops_with_headroom: passive_h,
        cache: cache_pm.value.round() as u64,
        log_size_factor: log_factor,
        logs_per_day: logs_pm,
        white_space: white,
        dumpster,
        size_on_disk: on_disk,
        extrapolated,
    };

    // Databases.
    let mailboxes_group = input.mailboxes.div_ceil(u64::from(input.groups));
    let n1 = u64::from(input.site_servers[0]);
    let advice = if input.copies >= 2 {
        rules.capacity.max_db_with_copies.0
    } else {
        rules.capacity.max_db_standalone.0
    };
    let (databases, chosen_by) = match input.databases {
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
    };
    let databases = databases.max(1);
    if databases > u64::from(u32::MAX) {
        return Err(Error::usage("too many databases per group"));
    }
    let mailboxes_db = mailboxes_group.div_ceil(databases);
    let db_active = mailboxes_db as f64 * iops_h;
    let db_passive = mailboxes_db as f64 * passive_h;
    let log_iops_copy = db_active * g.log_iops_per_db_iops;
    let read_share = g.read_share(input.copies);
    let logs_db = logs_pm * mailboxes_db as f64;
    let log_file = rules.logs.log_file_size.0 as f64;
    let db_size = mailboxes_db * on_disk;
    let growth = 1.0 + input.growth_pct / 100.0;
    let ci = 1.0 + input.content_index_pct / 100.0;
    let db_volume = (db_size as f64 * growth * ci).round() as u64;
    let log_space = (logs_db * log_file * input.log_days).round() as u64;
    let log_space_lagged =
        (logs_db * log_file * (input.log_days + input.replay_lag_days)).round() as u64;
    let per_database = PerDatabase {
        per_group: databases as u32,
        total: databases * u64::from(input.groups),
        chosen_by,
        mailboxes: mailboxes_db,
        active_iops: db_active,
        active_iops_without_headroom: mailboxes_db as f64 * iops,
        passive_iops: db_passive,
        log_iops: log_iops_copy,
        read_share,
        maintenance_mb_s: g.maintenance_mb_per_s_per_copy,
        logs_per_day: logs_db,
        cache: (cache_pm.value * mailboxes_db as f64).round() as u64,
        size: db_size,
        volume: db_volume,
        log_space,
        log_space_lagged,
        size_advice: advice,
    };
    if db_size > advice {
        warnings.push(format!(
            "database size {} is over the {} advice ({} {}); add databases (--databases, --max-database-size)",
            ByteSize(db_size),
            ByteSize(advice),
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

    // Layout and failure scenarios.
    let layout = Layout::build(
        databases as u32,
        &input.site_servers,
        &input.site_copies,
        input.lagged_copies,
    );
    let n = layout.servers();
    let (normal_loads, _) = layout.loads(&vec![false; n]);
    let scen = scenarios(&layout, input.failure)?;
    let load_iops = |l: &Load, act: f64, pas: f64| {
        f64::from(l.active) * act + f64::from(l.passive + l.lagged) * pas
    };
    let mut after: Vec<(Load, Option<String>, f64)> = normal_loads
        .iter()
        .map(|l| (*l, None, load_iops(l, db_active, db_passive)))
        .collect();
    let mut matrix = Vec::new();
    let mut max_actives = normal_loads.iter().map(|l| l.active).max().unwrap_or(0);
    for (label, mask) in &scen {
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
            let v = load_iops(l, db_active, db_passive);
            if v > after[s].2 + 1e-9 {
                after[s] = (*l, Some(label.clone()), v);
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

    // Servers.
    let penalty = raid.penalty;
    let cost = raid_cost(read_share, penalty);
    let functional = input.disk.iops / cost;
    let usable_group = (raid.data_disks(input.raid_group) * input.disk.capacity as f64) as u64;
    let group = u64::from(input.raid_group);
    let restore = if input.restore_volume {
        db_volume + log_space
    } else {
        0
    };
    let mut servers = Vec::with_capacity(n);
    for s in 0..n {
        let normal = normal_loads[s];
        let (aft, worst, iops_after) = after[s].clone();
        let copies = normal.copies();
        let iops_normal = load_iops(&normal, db_active, db_passive);
        let log_iops = f64::from(copies) * log_iops_copy;
        let maint = f64::from(copies) * g.maintenance_mb_per_s_per_copy;
        let logs_day = f64::from(copies) * logs_db;
        let log_mb_s = logs_day * log_file / 86400.0 / MB;
        let log_total = u64::from(normal.active + normal.passive) * log_space
            + u64::from(normal.lagged) * log_space_lagged;
        let db_total = u64::from(copies) * db_volume;
        let capacity = db_total + log_total + restore;
        let raw_after = iops_after * cost + log_iops * f64::from(penalty);
        let raw_normal = iops_normal * cost + log_iops * f64::from(penalty);
        let by_iops = round_up_to(ceil(raw_after / input.disk.iops), group);
        let by_cap = ceil(capacity as f64 / usable_group.max(1) as f64) * group;
        servers.push(ServerPlan {
            name: layout.names[s].clone(),
            site: site_letter(layout.server_site[s]),
            normal,
            after_failure: aft,
            worst_scenario: worst,
            iops_normal,
            iops_after_failure: iops_after,
            iops_after_failure_without_headroom: iops_after / headroom,
            log_iops,
            maintenance_mb_s: maint,
            log_mb_s,
            sequential_mb_s: maint + log_mb_s,
            cache_normal: (f64::from(normal.active) * mailboxes_db as f64 * cache_pm.value).round()
                as u64,
            cache_after_failure: (f64::from(aft.active) * mailboxes_db as f64 * cache_pm.value)
                .round() as u64,
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
        });
    }
    let needed = servers
        .iter()
        .map(|s| s.disks_by_iops.max(s.disks_by_capacity))
        .max()
        .unwrap_or(0)
        .max(input.raid_group);
    let disks_per_server = input.disks_per_server.unwrap_or(needed);
    for s in &mut servers {
        s.disks = disks_per_server;
        let raw = f64::from(disks_per_server) * input.disk.iops;
        let usable = f64::from(disks_per_server / input.raid_group) * usable_group as f64;
        s.iops_utilisation_normal /= raw.max(f64::MIN_POSITIVE);
        s.iops_utilisation_after_failure /= raw.max(f64::MIN_POSITIVE);
        s.capacity_utilisation /= usable.max(f64::MIN_POSITIVE);
    }
    if input.disks_per_server.is_some() {
        for s in &servers {
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
        let most = normal_loads.iter().map(Load::copies).max().unwrap_or(0);
        let least = normal_loads.iter().map(Load::copies).min().unwrap_or(0);
        if most != k || least != k {
            warnings.push(format!(
                "--databases-per-server {k}: the layout puts {least} to {most} database copies on a server (sites with different servers per copy)"
            ));
        }
    }
    if input.copies == 1 && input.groups * input.servers > 1 && input.failure == Failure::None {
        // Nothing to warn: stand-alone by choice.
    }
    let worst = servers
        .iter()
        .max_by(|a, b| a.iops_after_failure.total_cmp(&b.iops_after_failure));
    let failure = FailureSummary {
        failure: input.failure,
        scenarios: scen.len() as u64,
        worst_scenario: worst.and_then(|w| w.worst_scenario.clone()),
        worst_server: worst.map(|w| w.name.clone()),
        worst_server_iops: worst.map_or(0.0, |w| w.iops_after_failure),
        max_actives_after: max_actives,
        matrix,
    };

    // Group and total.
    let group_totals = {
        let worst_label = failure.worst_scenario.clone();
        let iops_after = match &worst_label {
            None => servers.iter().map(|s| s.iops_normal).sum(),
            Some(label) => {
                let mask = &scen
                    .iter()
                    .find(|(l, _)| l == label)
                    .map(|(_, m)| m.clone())
                    .unwrap_or_else(|| vec![false; n]);
                let (loads, _) = layout.loads(mask);
                loads
                    .iter()
                    .map(|l| load_iops(l, db_active, db_passive))
                    .sum()
            }
        };
        let disks = u64::from(disks_per_server) * n as u64;
        Totals {
            servers: n as u64,
            mailboxes: mailboxes_group,
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
            usable_capacity: disks / group * usable_group,
        }
    };
    let k = u64::from(input.groups);
    let kf = f64::from(input.groups);
    let t = &group_totals;
    let total = Totals {
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
    };

    Ok(Plan {
        schema: "mailbench.plan/1".into(),
        guidance: GuidanceInfo {
            version: g.version.clone(),
            name: g.name.clone(),
            source: g.source.clone(),
            storage_profile: g.storage_profile.clone(),
        },
        inputs: input.clone(),
        disk: DiskInfo {
            preset: input.disk.preset.clone(),
            description: input.disk.description.clone(),
            source: input.disk.source.clone(),
            capacity: input.disk.capacity,
            iops: input.disk.iops,
            capacity_overridden: input.disk.capacity_overridden,
            iops_overridden: input.disk.iops_overridden,
            raid: input.raid.clone(),
            raid_group: input.raid_group,
            write_penalty: penalty,
            read_share,
            raid_cost: cost,
            functional_iops_per_disk: functional,
            usable_per_group: usable_group,
        },
        per_mailbox,
        per_database,
        servers,
        disks_per_server,
        group: group_totals,
        total,
        failure,
        layout,
        warnings,
    })
}

/// Bytes as MiB, for the cache and log figures.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB
}
