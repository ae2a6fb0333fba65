//! `--emit-config FILE.toml`: the storage test that validates one server of the plan, in
//! the format of docs/storage-config.md: `[storage]` for `mailbench storage init` +
//! `storage run`, and `[suite]` (the published program's defaults) with an empty
//! `[disclosure]` for `mailbench storage suite`, which reads the same file.

use crate::model::{IopsSource, Plan, ServerPlan};
use crate::render::{num, num_auto, size};
use mailbench_base::{ByteSize, Error, Result};

const MIB: u64 = 1 << 20;

fn quoted(s: &str) -> String {
    // A TOML basic string: JSON string escapes are valid TOML escapes.
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.escape_default()))
}

/// Bytes scaled and rounded up to whole MiB from 1 GiB up, else to whole KiB (at least
/// 1 KiB), written with its unit; also returns the rounded bytes.
fn scaled_text(bytes: u64, scale: f64) -> (String, u64) {
    let scaled = (bytes as f64 * scale).max(0.0);
    if scaled >= (1u64 << 30) as f64 {
        let m = (scaled / MIB as f64).ceil() as u64;
        (format!("{m}MiB"), m * MIB)
    } else {
        let k = (scaled / 1024.0).ceil().max(1.0) as u64;
        (format!("{k}KiB"), k * 1024)
    }
}

/// The server the test is written for: the one with the most IOPS after the failure.
pub fn test_server(plan: &Plan) -> Option<&ServerPlan> {
    plan.servers
        .iter()
        .max_by(|a, b| a.iops_after_failure.total_cmp(&b.iops_after_failure))
}

/// The smallest database the storage test accepts: 256 pages of 32 KiB.
pub const MIN_TEST_DATABASE: u64 = 256 * 32 * 1024;

/// The storage test config for the heaviest server of the plan. Fails (usage) when
/// `--scale` makes the databases smaller than the storage test accepts.
pub fn storage_config(plan: &Plan) -> Result<String> {
    let i = &plan.inputs;
    let Some(s) = test_server(plan) else {
        return Err(Error::usage(
            "the plan has no server to write a storage test for",
        ));
    };
    let (quota_text, quota_bytes) = scaled_text(plan.per_mailbox.size_on_disk, i.scale);
    let scaled_db = quota_bytes * plan.per_database.mailboxes;
    if scaled_db < MIN_TEST_DATABASE {
        return Err(Error::usage(format!(
            "--scale {} ([plan] scale) makes each test database {}, smaller than the {} the storage test needs; use a larger scale",
            i.scale,
            ByteSize(scaled_db),
            ByteSize(MIN_TEST_DATABASE)
        )));
    }
    let mut o = header_comment(plan, s);
    o.push_str(&storage_section(plan, s, &quota_text));
    o.push_str(SUITE_AND_DISCLOSURE);
    Ok(o)
}

/// Whether `--scale` shrinks the sizes.
fn scaled(plan: &Plan) -> bool {
    (plan.inputs.scale - 1.0).abs() > f64::EPSILON
}

/// The comment lines above `[storage]`: the plan, the server tested, how to run it.
fn header_comment(plan: &Plan, s: &ServerPlan) -> String {
    let i = &plan.inputs;
    let mut o = String::new();
    o.push_str(&format!(
        "# Storage test written by `mailbench plan --emit-config` (mailbench {}).\n",
        env!("CARGO_PKG_VERSION")
    ));
    o.push_str(&format!(
        "# Plan: {} mailboxes, {} messages/day, {} average message, {} quota, {} copies, {} group(s) of {} servers,\n#   failure to survive: {}, I/O headroom {} %, {} guidance, disks {} in RAID {} groups of {}.\n",
        i.mailboxes,
        num_auto(i.messages_per_day, 1),
        size(i.message_size),
        size(i.mailbox_quota),
        i.copies,
        i.groups,
        i.servers,
        i.failure,
        num(i.headroom_pct, 0),
        plan.guidance.version,
        plan.disk.model.preset,
        plan.disk.raid,
        plan.disk.raid_group
    ));
    o.push_str(&format!(
        "# This file tests server {} (site {}), the most loaded after the failure{}: {} active + {} passive + {} lagged\n#   database copies of {} mailboxes each, tested as {} databases, as the anchor tool does.\n",
        s.name,
        s.site,
        s.worst_scenario
            .as_deref()
            .map_or(String::new(), |w| format!(" (loss of {w})")),
        s.after_failure.active,
        s.after_failure.passive,
        s.after_failure.lagged,
        plan.per_database.mailboxes,
        s.normal.copies()
    ));
    if scaled(plan) {
        o.push_str(&format!(
            "# Sizes are scaled by --scale {} for a lab; mailboxes and the IOPS target are not.\n",
            i.scale
        ));
    }
    o.push_str("# Run: mailbench storage init --config FILE.toml && mailbench storage run --config FILE.toml\n");
    o.push_str("#   or the whole published program, one solution report: mailbench storage suite --config FILE.toml\n\n");
    o
}

/// A TOML array of strings.
fn string_list(v: &[String]) -> String {
    format!(
        "[{}]",
        v.iter().map(|p| quoted(p)).collect::<Vec<_>>().join(", ")
    )
}

/// The `[storage]` section: one database per copy the server carries, its mailboxes, the
/// (scaled) mailbox size and the server's IOPS after the failure as the target.
fn storage_section(plan: &Plan, s: &ServerPlan, quota_text: &str) -> String {
    let i = &plan.inputs;
    let databases = s.normal.copies();
    let mailboxes = u64::from(databases) * plan.per_database.mailboxes;
    let paths = if i.paths.is_empty() {
        vec!["./mailbench-data".to_string()]
    } else {
        i.paths.clone()
    };
    let mut o = String::new();
    o.push_str("[storage]\n");
    o.push_str("type = \"performance\"\n");
    o.push_str(&format!(
        "profile = {}\n",
        quoted(&plan.guidance.storage_profile)
    ));
    o.push_str(&format!("paths = {}\n", string_list(&paths)));
    if !i.log_paths.is_empty() {
        o.push_str(&format!("log_paths = {}\n", string_list(&i.log_paths)));
    }
    o.push_str(&format!("databases = {databases}\n"));
    o.push_str(&format!(
        "mailboxes = {mailboxes}                    # {} per database copy x {databases}\n",
        plan.per_database.mailboxes
    ));
    o.push_str(&format!(
        "mailbox_quota = \"{}\"             # size of a mailbox on disk: quota + white space + dumpster ({}){}\n",
        quota_text,
        ByteSize(plan.per_mailbox.size_on_disk),
        if scaled(plan) {
            format!(" x {}", i.scale)
        } else {
            String::new()
        }
    ));
    o.push_str(&iops_lines(plan, s));
    o.push_str(&format!("copies = {}\n", i.copies));
    o.push_str("threads = \"auto\"\n");
    o.push_str(&format!("duration = {}\n", quoted(&i.duration)));
    o.push_str(&format!(
        "# Exchange would give this server {} of database cache; the test keeps the profile's smaller\n#   cache so that the I/O reaches the disks.\n",
        ByteSize(s.cache_after_failure)
    ));
    o
}

/// The thresholds' keys (commented: the profile's apply), the `[suite]` section with the
/// program's defaults and an empty `[disclosure]` to fill in.
const SUITE_AND_DISCLOSURE: &str = "\
# The verdict's thresholds are the profile's for each test type; to change one, uncomment
#   it under a [storage.thresholds] table (docs/storage-config.md):
# [storage.thresholds]
# db_read_avg_ms = ...
# db_read_max_ms = ...
# log_write_avg_ms = ...
# log_write_max_ms = ...
# page_fault_stalls_per_s = ...
# page_fault_stalls_max_per_s = ...
# latency_max = \"sampled\"     # the published tool's rule, or \"single_io\" (stricter)

# `mailbench storage suite`: the published test program on the databases above; the
#   performance stage is [storage] duration, the recover stage replays [storage] log_files.
[suite]
stages = [\"init\", \"performance\", \"stress\", \"backup\", \"recover\", \"verify\"]
stress_duration = \"24h\"       # 0s: no stress stage
pdf = false                    # true: also report.pdf through headless Chromium

# What the tool cannot see, stated for the solution report (every key optional):
[disclosure]
# vendor = \"\"
# solution = \"\"
# storage_model = \"\"
# storage_firmware = \"\"
# raid_layout = \"\"
# connectivity = \"\"
# best_practices = \"\"\"\"\"\"
# notes = \"\"\"\"\"\"
";

/// `target_iops` and the per-mailbox figure it comes from.
fn iops_lines(plan: &Plan, s: &ServerPlan) -> String {
    let pm = &plan.per_mailbox;
    let mut o = format!(
        "target_iops = {:.2}                # transactional IOPS of this server after the failure, with {} % headroom\n",
        s.iops_after_failure,
        num(plan.inputs.headroom_pct, 0)
    );
    o.push_str(&format!(
        "# iops_per_mailbox = {:.4}        # per active mailbox with headroom, {} (passive copies cost {} % of it)\n",
        pm.iops_with_headroom,
        match pm.iops_source {
            IopsSource::Measured => "measured (--iops-per-mailbox)",
            IopsSource::Guidance => "from the guidance",
        },
        num(pm.passive_iops_with_headroom / pm.iops_with_headroom.max(f64::MIN_POSITIVE) * 100.0, 0)
    ));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_up() {
        assert_eq!(scaled_text(3 << 30, 1.0).0, "3072MiB");
        assert_eq!(scaled_text((3 << 30) + 1, 1.0).0, "3073MiB");
        assert_eq!(scaled_text(100 * MIB, 0.01).0, "1024KiB");
        assert_eq!(scaled_text(1000, 0.5).0, "1KiB");
        assert_eq!(
            scaled_text(4_448_750_000, 0.01),
            ("43445KiB".to_string(), 43445 * 1024)
        );
        assert_eq!(quoted("a\"b"), "\"a\\\"b\"");
    }
}
