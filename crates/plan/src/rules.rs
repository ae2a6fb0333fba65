//! The sizing rules as data: `profiles/plan/rules.toml` and `profiles/plan/disks.toml`,
//! embedded at build time. New guidance is a change to those files, not to the code.

use mailbench_base::{ByteSize, Error, Result};
use serde::Deserialize;

const RULES_TOML: &str = include_str!("../../../profiles/plan/rules.toml");
const DISKS_TOML: &str = include_str!("../../../profiles/plan/disks.toml");

/// Every rule the planner applies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// The message size the Microsoft tables were measured at (75 KB).
    pub reference_message_size: ByteSize,
    pub guidance: Vec<GuidanceRules>,
    pub logs: LogRules,
    pub capacity: CapacityRules,
    pub raid: Vec<RaidRule>,
}

/// One row of a mailbox profile table.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileRow {
    /// Messages sent + received per mailbox per day.
    pub messages: f64,
    /// Database IOPS per active mailbox (75 KB messages), when the guidance is a table.
    pub iops: Option<f64>,
    /// Database cache per mailbox.
    pub cache: ByteSize,
}

/// One guidance version (2013, 2010).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuidanceRules {
    pub version: String,
    pub name: String,
    pub source: String,
    pub profile: Vec<ProfileRow>,
    /// When set, IOPS per mailbox = messages x this (one copy) instead of the table.
    pub iops_per_message_standalone: Option<f64>,
    /// The same with two or more copies.
    pub iops_per_message_with_copies: Option<f64>,
    pub passive_iops_share: f64,
    pub maintenance_mb_per_s_per_copy: f64,
    pub read_share_standalone: f64,
    pub read_share_with_copies: f64,
    pub log_iops_per_db_iops: f64,
    /// Whether database IOPS grow with the average message size (2010: size /
    /// 75 KB; 2013: no).
    pub iops_scale_with_message_size: bool,
    pub storage_profile: String,
}

/// A point of the log generation's message size curve.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizeFactor {
    pub size: ByteSize,
    pub factor: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogRules {
    pub source: String,
    pub logs_per_message: f64,
    pub log_file_size: ByteSize,
    pub keep_days: f64,
    /// Log generation against the average message size: linear between the
    /// points, the first factor below the first, the last above the last.
    pub size_factors: Vec<SizeFactor>,
    /// Mailboxes moved per week (% of all) when the input gives none.
    pub mailbox_moves_pct_per_week: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityRules {
    pub source: String,
    pub white_space_days: f64,
    pub retention_days: f64,
    pub single_item_recovery_pct: f64,
    pub calendar_logging_pct: f64,
    pub growth_pct: f64,
    pub max_db_standalone: ByteSize,
    pub max_db_with_copies: ByteSize,
    pub default_replay_lag_days: f64,
}

/// How a RAID group keeps its data safe, which decides its data disks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Redundancy {
    Mirror,
    Parity1,
    Parity2,
    None,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaidRule {
    pub level: String,
    pub penalty: u32,
    pub redundancy: Redundancy,
    pub group_default: u32,
    pub group_min: u32,
    pub group_max: Option<u32>,
    #[serde(default)]
    pub group_even: bool,
    pub group_advice_max: Option<u32>,
    pub min_copies: Option<u32>,
}

impl RaidRule {
    /// Disks of a group of `n` that hold data.
    pub fn data_disks(&self, n: u32) -> f64 {
        match self.redundancy {
            Redundancy::Mirror => f64::from(n) / 2.0,
            Redundancy::Parity1 => f64::from(n.saturating_sub(1)),
            Redundancy::Parity2 => f64::from(n.saturating_sub(2)),
            Redundancy::None => f64::from(n),
        }
    }
}

/// A disk model preset.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct DiskPreset {
    pub name: String,
    pub description: String,
    pub capacity: ByteSize,
    pub iops: f64,
    pub source: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiskFile {
    disk: Vec<DiskPreset>,
}

impl Rules {
    /// The embedded rules.
    pub fn builtin() -> Result<Rules> {
        let rules: Rules = toml::from_str(RULES_TOML)
            .map_err(|e| Error::runtime(format!("built-in profiles/plan/rules.toml: {e}")))?;
        for g in &rules.guidance {
            if g.profile.is_empty() {
                return Err(Error::runtime(format!(
                    "built-in rules: guidance {} has an empty profile table",
                    g.version
                )));
            }
            let per_message =
                g.iops_per_message_standalone.is_some() && g.iops_per_message_with_copies.is_some();
            if !per_message && g.profile.iter().any(|r| r.iops.is_none()) {
                return Err(Error::runtime(format!(
                    "built-in rules: guidance {} has neither IOPS per message nor IOPS in every table row",
                    g.version
                )));
            }
        }
        Ok(rules)
    }

    pub fn guidance(&self, version: &str) -> Option<&GuidanceRules> {
        self.guidance.iter().find(|g| g.version == version)
    }

    pub fn raid(&self, level: &str) -> Option<&RaidRule> {
        self.raid.iter().find(|r| r.level == level)
    }

    /// The multiplier of log generation for an average message of `size` bytes:
    /// linear between the curve's points (M5: x1.9 when the 75 KB message
    /// doubles to 150 KB), flat outside them.
    pub fn log_size_factor(&self, size: u64) -> f64 {
        let pts = &self.logs.size_factors;
        let Some(first) = pts.first() else {
            return 1.0;
        };
        if size <= first.size.0 {
            return first.factor;
        }
        for w in pts.windows(2) {
            let (a, b) = (w[0], w[1]);
            if size <= b.size.0 {
                let t = (size - a.size.0) as f64 / (b.size.0 - a.size.0).max(1) as f64;
                return a.factor + t * (b.factor - a.factor);
            }
        }
        pts.last().map_or(1.0, |p| p.factor)
    }

    /// The multiplier of database IOPS for an average message of `size` bytes
    /// under guidance `g`: size / reference size, never below 1, where the
    /// guidance scales IOPS with the message size; else 1.
    pub fn iops_size_factor(&self, g: &GuidanceRules, size: u64) -> f64 {
        if !g.iops_scale_with_message_size {
            return 1.0;
        }
        let reference = self.reference_message_size.0.max(1) as f64;
        (size as f64 / reference).max(1.0)
    }
}

/// Where a value was read from a profile table: inside, or extrapolated beyond it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lookup {
    pub value: f64,
    pub extrapolated: bool,
}

/// Linear interpolation in a table of (x, y) sorted by x. Below the first row the line
/// through the origin and the first row is used; above the last, the last segment's slope.
pub fn interpolate(points: &[(f64, f64)], x: f64) -> Lookup {
    let Some(&(x0, y0)) = points.first() else {
        return Lookup {
            value: 0.0,
            extrapolated: true,
        };
    };
    if x <= x0 {
        let value = if x0 > 0.0 { y0 * x / x0 } else { y0 };
        return Lookup {
            value,
            extrapolated: x < x0,
        };
    }
    for w in points.windows(2) {
        let (xa, ya) = w[0];
        let (xb, yb) = w[1];
        if x <= xb {
            let t = (x - xa) / (xb - xa);
            return Lookup {
                value: ya + t * (yb - ya),
                extrapolated: false,
            };
        }
    }
    let n = points.len();
    let (xb, yb) = points[n - 1];
    if n < 2 {
        return Lookup {
            value: yb * x / xb,
            extrapolated: true,
        };
    }
    let (xa, ya) = points[n - 2];
    let slope = (yb - ya) / (xb - xa);
    Lookup {
        value: yb + slope * (x - xb),
        extrapolated: true,
    }
}

impl GuidanceRules {
    /// Database IOPS per active mailbox at the reference message size, before headroom.
    pub fn iops_per_mailbox(&self, messages: f64, copies: u32) -> Lookup {
        if let (Some(one), Some(many)) = (
            self.iops_per_message_standalone,
            self.iops_per_message_with_copies,
        ) {
            let per = if copies >= 2 { many } else { one };
            let (lo, hi) = self.table_range();
            return Lookup {
                value: per * messages,
                extrapolated: messages < lo || messages > hi,
            };
        }
        let points: Vec<(f64, f64)> = self
            .profile
            .iter()
            .map(|r| (r.messages, r.iops.unwrap_or(0.0)))
            .collect();
        interpolate(&points, messages)
    }

    /// Database cache per mailbox in bytes.
    pub fn cache_per_mailbox(&self, messages: f64) -> Lookup {
        let points: Vec<(f64, f64)> = self
            .profile
            .iter()
            .map(|r| (r.messages, r.cache.0 as f64))
            .collect();
        interpolate(&points, messages)
    }

    pub fn table_range(&self) -> (f64, f64) {
        let lo = self.profile.first().map_or(0.0, |r| r.messages);
        let hi = self.profile.last().map_or(0.0, |r| r.messages);
        (lo, hi)
    }

    pub fn read_share(&self, copies: u32) -> f64 {
        if copies >= 2 {
            self.read_share_with_copies
        } else {
            self.read_share_standalone
        }
    }
}

/// The embedded disk presets.
pub fn disk_presets() -> Result<Vec<DiskPreset>> {
    let f: DiskFile = toml::from_str(DISKS_TOML)
        .map_err(|e| Error::runtime(format!("built-in profiles/plan/disks.toml: {e}")))?;
    Ok(f.disk)
}

/// RAID write penalty applied to a read/write mix: the raw disk IOPS one functional
/// (host) IOPS costs. Functional IOPS = raw / this.
pub fn raid_cost(read_share: f64, penalty: u32) -> f64 {
    read_share + (1.0 - read_share) * f64::from(penalty)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn builtin_rules_and_presets_parse() {
        let r = Rules::builtin().unwrap();
        assert!(r.guidance("2013").is_some());
        assert!(r.guidance("2010").is_some());
        for level in ["1", "10", "5", "6", "jbod"] {
            assert!(r.raid(level).is_some(), "{level}");
        }
        let d = disk_presets().unwrap();
        let names: Vec<_> = d.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["nl-sas-7k2", "sas-10k", "sas-15k", "ssd", "nvme"]);
        assert_eq!(d[0].capacity.0, 4_000_000_000_000);
    }

    #[test]
    fn exchange_2013_table_rows_and_interpolation() {
        let r = Rules::builtin().unwrap();
        let g = r.guidance("2013").unwrap();
        // 0.00067 per message a day: 150 -> 0.1005, 500 -> 0.335, 125 -> 0.08375.
        assert!(close(g.iops_per_mailbox(150.0, 3).value, 0.1005));
        assert!(close(g.iops_per_mailbox(500.0, 3).value, 0.335));
        assert!(close(g.iops_per_mailbox(125.0, 1).value, 0.08375));
        assert!(!g.iops_per_mailbox(160.0, 1).extrapolated);
        // Outside the table's rows the rate holds, flagged as extrapolated.
        let low = g.iops_per_mailbox(25.0, 1);
        assert!(close(low.value, 0.01675) && low.extrapolated);
        let high = g.iops_per_mailbox(550.0, 1);
        assert!(close(high.value, 0.3685) && high.extrapolated);
        // Cache 9 MiB at 150, 10.5 MiB at 175.
        assert!(close(g.cache_per_mailbox(150.0).value, 9.0 * 1048576.0));
        assert!(close(g.cache_per_mailbox(175.0).value, 10.5 * 1048576.0));
    }

    #[test]
    fn issue_figure_150_messages_with_20_pct_headroom_is_0_121() {
        let r = Rules::builtin().unwrap();
        let g = r.guidance("2013").unwrap();
        let with = g.iops_per_mailbox(150.0, 3).value * 1.2;
        assert!(close(with, 0.1206));
        assert_eq!(format!("{with:.3}"), "0.121");
    }

    #[test]
    fn exchange_2010_per_message_rule() {
        let r = Rules::builtin().unwrap();
        let g = r.guidance("2010").unwrap();
        assert!(close(g.iops_per_mailbox(50.0, 1).value, 0.06));
        assert!(close(g.iops_per_mailbox(50.0, 2).value, 0.05));
        assert!(close(g.iops_per_mailbox(300.0, 1).value, 0.36));
        assert!(close(g.iops_per_mailbox(300.0, 3).value, 0.30));
        assert!(close(g.cache_per_mailbox(300.0).value, 18.0 * 1048576.0));
        assert!(close(g.passive_iops_share, 1.0));
    }

    #[test]
    fn message_size_factors() {
        let r = Rules::builtin().unwrap();
        let g2010 = r.guidance("2010").unwrap();
        let g2013 = r.guidance("2013").unwrap();
        // 75 KB (decimal or binary) is the reference: factor 1.
        assert!(close(r.iops_size_factor(g2010, 75_000), 1.0));
        assert!(close(r.iops_size_factor(g2010, 75 * 1024), 1.0));
        // 150 KiB doubles the 2010 IOPS, not the 2013 ones.
        assert!(close(r.iops_size_factor(g2010, 150 * 1024), 2.0));
        assert!(close(r.iops_size_factor(g2013, 150 * 1024), 1.0));
        // Smaller messages do not lower it.
        assert!(close(r.iops_size_factor(g2010, 30_000), 1.0));
        // Logs: x1 up to 75 KB, then linear to x1.9 at 150 KB and x3.8 at 300 KB.
        assert!(close(r.log_size_factor(75_000), 1.0));
        assert!(close(r.log_size_factor(75 * 1024), 1.0));
        assert!(close(r.log_size_factor(100 * 1024), 1.3));
        assert!(close(r.log_size_factor(150 * 1024), 1.9));
        assert!(close(r.log_size_factor(225 * 1024), 2.85));
        assert!(close(r.log_size_factor(600 * 1024), 3.8));
    }

    /// Every row of the 2013 table is 0.00067 IOPS per message rounded to
    /// three places: the rate the planner uses.
    #[test]
    fn the_2013_table_rows_are_the_per_message_rate_rounded() {
        let r = Rules::builtin().unwrap();
        let g = r.guidance("2013").unwrap();
        for row in &g.profile {
            let rate = g.iops_per_mailbox(row.messages, 3).value;
            let printed = (rate * 1000.0 + 0.5 + 1e-9).floor() / 1000.0;
            assert!(
                close(printed, row.iops.unwrap()),
                "{} messages",
                row.messages
            );
        }
    }

    #[test]
    fn logs_per_day_150_messages_is_30() {
        let r = Rules::builtin().unwrap();
        assert!(close(r.logs.logs_per_message * 150.0, 30.0));
        assert_eq!(r.logs.log_file_size.0, 1 << 20);
    }

    #[test]
    fn raid_penalty_math() {
        let r = Rules::builtin().unwrap();
        let p = |l: &str| r.raid(l).unwrap().penalty;
        assert_eq!(
            (p("1"), p("10"), p("5"), p("6"), p("jbod")),
            (2, 2, 4, 6, 1)
        );
        // RAID-5, 60 % reads: one host IOPS costs 0.6 + 0.4 x 4 = 2.2 disk IOPS;
        // a 180-IOPS disk gives 180 / 2.2 = 81.8 functional IOPS.
        assert!(close(raid_cost(0.6, 4), 2.2));
        assert!(close(180.0 / raid_cost(0.6, 4), 81.818_181_818_181_82));
        // RAID-1, 60 % reads: 1.4; RAID-6 at 50 %: 3.5; JBOD: 1.
        assert!(close(raid_cost(0.6, 2), 1.4));
        assert!(close(raid_cost(0.5, 6), 3.5));
        assert!(close(raid_cost(0.6, 1), 1.0));
        // Data disks: RAID-1 pair 1, RAID-10 of 8 -> 4, RAID-5 of 5 -> 4, RAID-6 of 6 -> 4.
        assert!(close(r.raid("1").unwrap().data_disks(2), 1.0));
        assert!(close(r.raid("10").unwrap().data_disks(8), 4.0));
        assert!(close(r.raid("5").unwrap().data_disks(5), 4.0));
        assert!(close(r.raid("6").unwrap().data_disks(6), 4.0));
        assert!(close(r.raid("jbod").unwrap().data_disks(1), 1.0));
    }
}
