//! `mail sweep` as pure functions: the levels of `--users`, the next level
//! of a `--find-max` search, and one level's row of the scaling table from
//! its mail-run result. The command (crates/mailbench) runs the levels.

use crate::options::Resolved;
use crate::profile::Profile;
use mailbench_base::{Error, Result};
use mailbench_results::mail::run::{MailRunResult, TargetInfo};
use mailbench_results::mail::sweep::{
    FailedLevel, MailSweepResult, SweepGenerators, SweepLevel, SweepPlan, supported,
};
use mailbench_results::{RunHeader, Status, Verdict};

/// Most users a level may have (as `mail run --users`).
pub const MAX_USERS: u64 = 100_000;

/// `--users 100,200,400` or `--users 100..1000:100` (FROM..TO:STEP, TO
/// included when the steps reach it; `FROM..TO` alone doubles). Levels must
/// be whole, non-zero and increasing.
pub fn parse_levels(s: &str) -> Result<Vec<u64>> {
    let bad = |why: &str| {
        Error::usage(format!(
            "--users `{s}`: {why}; write levels as 100,200,400 or 100..1000:100"
        ))
    };
    let num = |t: &str| -> Result<u64> {
        t.trim()
            .parse::<u64>()
            .map_err(|_| bad(&format!("`{}` is not a whole number of users", t.trim())))
    };
    let levels: Vec<u64> = if let Some((from, rest)) = s.split_once("..") {
        let (to, step) = match rest.split_once(':') {
            Some((t, st)) => (num(t)?, Some(num(st)?)),
            None => (num(rest)?, None),
        };
        let from = num(from)?;
        if step == Some(0) {
            return Err(bad("the step is zero"));
        }
        if from == 0 || to < from {
            return Err(bad(
                "the range must start above zero and end at or above its start",
            ));
        }
        let mut v = vec![from];
        loop {
            let last = v[v.len() - 1];
            let next = match step {
                Some(st) => last + st,
                None => last * 2,
            };
            if next > to || v.len() >= 1000 {
                break;
            }
            v.push(next);
        }
        if step.is_none() && v[v.len() - 1] != to {
            v.push(to);
        }
        v
    } else {
        s.split(',').map(num).collect::<Result<Vec<u64>>>()?
    };
    if levels.contains(&0) {
        return Err(bad("a level of zero users"));
    }
    if levels.windows(2).any(|w| w[1] <= w[0]) {
        return Err(bad("the levels must increase"));
    }
    if let Some(m) = levels.iter().find(|l| **l > MAX_USERS) {
        return Err(bad(&format!(
            "{m} users is over the {MAX_USERS} a run drives"
        )));
    }
    Ok(levels)
}

/// `--resolution`: users (`10`) or a share of the largest level (`5%`, the
/// default), at least 1.
pub fn parse_resolution(s: Option<&str>, largest: u64) -> Result<u64> {
    let s = s.unwrap_or("5%").trim();
    let r = match s.strip_suffix('%') {
        Some(p) => {
            let pct: f64 = p.trim().parse().map_err(|_| {
                Error::usage(format!(
                    "--resolution `{s}`: write users (10) or a share (5%)"
                ))
            })?;
            if !(pct > 0.0 && pct <= 100.0) {
                return Err(Error::usage(format!(
                    "--resolution `{s}`: give a share above 0% and at most 100%"
                )));
            }
            (largest as f64 * pct / 100.0).ceil() as u64
        }
        None => s.parse::<u64>().map_err(|_| {
            Error::usage(format!(
                "--resolution `{s}`: write users (10) or a share (5%)"
            ))
        })?,
    };
    if r == 0 {
        return Err(Error::usage("--resolution 0: give at least 1 user"));
    }
    Ok(r.max(1))
}

/// The next level of a `--find-max` search from the levels run so far
/// (users, passed): grow geometrically (×2) from `first` until a level fails
/// (never above `max`), then bisect between the largest pass and the
/// smallest failure until they are within `resolution`. None: done.
pub fn next_level(done: &[(u64, bool)], first: u64, max: u64, resolution: u64) -> Option<u64> {
    if done.is_empty() {
        return Some(first.min(max));
    }
    let fail = done.iter().filter(|d| !d.1).map(|d| d.0).min();
    let pass = done
        .iter()
        .filter(|d| d.1 && fail.is_none_or(|f| d.0 < f))
        .map(|d| d.0)
        .max();
    match (pass, fail) {
        (_, None) => {
            let top = done.iter().map(|d| d.0).max().unwrap_or(first);
            (top < max).then(|| (top * 2).min(max))
        }
        (None, Some(_)) => None,
        (Some(lo), Some(hi)) => {
            if hi - lo <= resolution {
                None
            } else {
                let mid = lo + (hi - lo) / 2;
                (mid > lo && mid < hi).then_some(mid)
            }
        }
    }
}

/// The next level to run after `done` (in the order they ran): the next
/// of the list, or the `--find-max` search's next step. None: the sweep
/// is over.
pub fn next_of(plan: &SweepPlan, done: &[SweepLevel]) -> Option<u64> {
    if !plan.find_max {
        return plan.levels.get(done.len()).copied();
    }
    let first = plan.levels.first().copied().unwrap_or(1);
    let max = plan.levels.last().copied().unwrap_or(first);
    let ran: Vec<(u64, bool)> = done.iter().map(|l| (l.users, l.passed())).collect();
    next_level(&ran, first, max, plan.resolution)
}

/// The name of a level's result folder inside the sweep's.
pub fn level_dir_name(users: u64) -> String {
    format!("level-{users:06}-users")
}

/// The row of a level that could not run (or was stopped before it
/// measured anything).
pub fn not_run(users: u64, reason: String, interrupted: bool, dir: &str) -> SweepLevel {
    SweepLevel {
        users,
        status: if interrupted {
            Status::Interrupted
        } else {
            Status::Error
        },
        failed_criterion: Some("error".into()),
        reasons: vec![reason],
        result_dir: dir.to_string(),
        ..Default::default()
    }
}

/// The line a sweep prints when a level ends: `level 20 users: PASS,
/// response time 31 ms` (and the first reason when it did not pass).
pub fn level_line(l: &SweepLevel) -> String {
    let label = match l.status {
        Status::Pass => "PASS",
        Status::Fail => "FAIL",
        Status::Error => "ERROR",
        Status::Interrupted => "INTERRUPTED",
    };
    format!(
        "level {} users: {label}, response time {:.0} ms{}",
        l.users,
        l.response_time_ms,
        l.reasons
            .first()
            .map(|x| format!(" ({x})"))
            .unwrap_or_default()
    )
}

/// The levels run so far and how the sweep ended.
#[derive(Debug, Default)]
pub struct Progress {
    pub levels: Vec<SweepLevel>,
    pub target: Option<TargetInfo>,
    pub interrupted: bool,
    /// A level that could not run (the server died, a generator failed):
    /// its reason.
    pub broken: Option<String>,
}

/// The sweep's result from its levels; `generators` when several load
/// generators (MPI ranks) ran every level together.
pub fn build(
    header: RunHeader,
    config: Resolved,
    plan: SweepPlan,
    profile: Profile,
    p: Progress,
    generators: Option<SweepGenerators>,
) -> MailSweepResult {
    let compression = profile.day.as_secs_f64() / config.day_length.as_secs_f64().max(1e-9);
    let (supported_users, failed_above) = supported(&p.levels);
    let warnings = warnings(compression, &p.levels);
    let verdict = sweep_verdict(&p, supported_users, &failed_above);
    MailSweepResult {
        run: header,
        target: p.target.clone().unwrap_or_else(|| TargetInfo {
            kind: config.target.clone(),
            imap: config.imap.clone().unwrap_or_default(),
            submission: config.submission.clone().unwrap_or_default(),
            sieve: config.sieve.clone(),
            tls: Default::default(),
            local_dir: None,
            server: None,
        }),
        config,
        profile,
        plan,
        compression,
        levels: p.levels,
        supported_users,
        failed_above,
        warnings,
        verdict,
        generators,
        disclosure: None,
    }
}

/// A compressed day, and levels whose generator was late.
fn warnings(compression: f64, levels: &[SweepLevel]) -> Vec<String> {
    let mut warnings = Vec::new();
    if compression > 1.0 + 1e-9 {
        warnings.push(format!(
            "compressed day: each simulated user works {compression:.0} times the profile's rate; \
             the rate-equivalent users (users x {compression:.0}) carry the same message and \
             task rate, but not the same number of sessions, logons or mailboxes, so they \
             approximate a real day's users"
        ));
    }
    let late: Vec<String> = (levels.iter())
        .filter(|l| l.sched_delay_p99_ms > 10.0)
        .map(|l| format!("{} users ({:.1} ms)", l.users, l.sched_delay_p99_ms))
        .collect();
    if !late.is_empty() {
        warnings.push(format!(
            "the load generator's own scheduling delay p99 exceeded 10 ms at {}: there the \
             generator, not the server, may be the limit",
            late.join(", ")
        ));
    }
    warnings
}

/// Interrupted (exit 130) when stopped; failed when a level could not run
/// or no level passed; else passed, the supported users being the score.
fn sweep_verdict(
    p: &Progress,
    supported_users: Option<u64>,
    failed_above: &Option<FailedLevel>,
) -> Verdict {
    let mut reasons = Vec::new();
    if let Some(b) = &p.broken {
        reasons.push(format!(
            "{b}; the sweep reports the levels measured before it"
        ));
    }
    if supported_users.is_none() && p.broken.is_none() && !p.interrupted {
        let why = failed_above
            .as_ref()
            .map(|f| format!(": {} users failed ({})", f.users, f.reason))
            .unwrap_or_default();
        reasons.push(format!("no level passed every criterion{why}"));
    }
    let mut v = Verdict::from_reasons(reasons);
    if p.interrupted {
        v.status = Status::Interrupted;
        v.reasons
            .insert(0, "interrupted before the end of the sweep".into());
    }
    v
}

/// One level's row of the scaling table, from its mail-run result.
pub fn level_of(r: &MailRunResult, dir: &str) -> SweepLevel {
    let failures = crate::result::failures(r);
    let st = r.steady.as_ref();
    let server_host = (r.server.iter())
        .flat_map(|s| s.sources.iter())
        .find_map(|s| s.figures.as_ref()?.host.clone());
    let store = server_host.as_ref().and_then(|h| h.store.as_ref());
    let queue = st.and_then(|s| s.queue.as_ref());
    let local_disk = st.and_then(|s| s.disk);
    let reads = store
        .map(|s| s.rates.reads_per_s)
        .or(local_disk.map(|d| d.reads_per_s));
    let writes = (store.map(|s| s.rates.writes_per_s)).or(local_disk.map(|d| d.writes_per_s));
    let latency = (store.map(|s| &s.rates))
        .or(local_disk.as_ref())
        .map(|d| d.read_latency_ms.max(d.write_latency_ms));
    let users = r.users.max(1) as f64;
    SweepLevel {
        users: r.users,
        rate_equivalent_users: r.users as f64 * r.window.compression,
        response_time_ms: (st.and_then(|s| s.judged_ms()))
            .unwrap_or(r.response_time.weighted_p95_ms),
        response_time_p50_ms: st.map(|s| s.response_time_p50_ms).unwrap_or(0.0),
        server_cpu_busy_pct: server_host.as_ref().map(|h| h.cpu_busy_pct),
        generator_cpu_busy_pct: st
            .map(|s| s.host_cpu_busy_pct)
            .unwrap_or(r.host.cpu_busy_pct),
        generator_cpu_s: Some(r.generator.cpu_s),
        generator_cpu_pct: own_cpu_pct(r),
        submitted_per_user_per_day: (st.map(|s| s.submitted_per_user_per_day))
            .unwrap_or(r.mail_flow.per_user_per_day.submitted),
        delivered_per_user_per_day: (st.map(|s| s.delivered_per_user_per_day))
            .unwrap_or(r.mail_flow.per_user_per_day.delivered),
        steady_submitted: st.map(|s| s.submitted),
        steady_delivered: st.map(|s| s.delivered),
        steady_s: st.and_then(|s| s.window).map(|w| w.seconds()),
        queue_average: queue.map(|q| q.average),
        queue_max: queue.map(|q| q.max),
        store_reads_per_s: reads,
        store_writes_per_s: writes,
        store_latency_ms: latency,
        iops_per_mailbox: match (reads, writes) {
            (Some(a), Some(b)) => Some((a + b) / users),
            _ => None,
        },
        errors: r.errors.total,
        error_rate_pct: r.errors.rate_pct,
        sched_delay_p99_ms: r.generator.sched_delay.p99_ms,
        status: r.verdict.status,
        failed_criterion: failures.first().map(|f| f.0.to_string()),
        reasons: r.verdict.reasons.clone(),
        result_dir: dir.to_string(),
    }
}

/// mailbench's own CPU over a level's run as a share of the generators'
/// CPUs, %: cpu_s / (run seconds x the host's CPUs x generators). None when
/// the run has no length or the host no CPU count.
fn own_cpu_pct(r: &MailRunResult) -> Option<f64> {
    let generators = r.merged.as_ref().map_or(1, |m| m.hosts.len().max(1));
    let capacity = r.run.duration_s * r.run.host.cpus as f64 * generators as f64;
    (capacity > 0.0 && r.generator.cpu_s.is_finite()).then(|| 100.0 * r.generator.cpu_s / capacity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_lists_or_ranges() {
        assert_eq!(parse_levels("100,200,400").unwrap(), vec![100, 200, 400]);
        assert_eq!(
            parse_levels("100..500:100").unwrap(),
            vec![100, 200, 300, 400, 500]
        );
        assert_eq!(
            parse_levels("100..450:100").unwrap(),
            vec![100, 200, 300, 400]
        );
        assert_eq!(
            parse_levels("25..400").unwrap(),
            vec![25, 50, 100, 200, 400]
        );
        assert_eq!(
            parse_levels("25..300").unwrap(),
            vec![25, 50, 100, 200, 300]
        );
        assert_eq!(parse_levels("7").unwrap(), vec![7]);
        for bad in [
            "",
            "0",
            "100,50",
            "100,100",
            "0..10",
            "10..5",
            "10..100:0",
            "a,b",
            "1,,2",
            "1..200000:1000",
        ] {
            let e = parse_levels(bad).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{bad}: {e}");
        }
    }

    #[test]
    fn the_resolution_is_users_or_a_share_of_the_largest_level() {
        assert_eq!(parse_resolution(None, 400).unwrap(), 20);
        assert_eq!(parse_resolution(None, 10).unwrap(), 1);
        assert_eq!(parse_resolution(Some("3"), 400).unwrap(), 3);
        for bad in ["0", "0%", "150%", "x"] {
            assert!(parse_resolution(Some(bad), 400).is_err(), "{bad}");
        }
    }

    /// A server that carries `cap` users: the search ends on the largest
    /// passing level within one resolution step of it.
    fn search(cap: u64, first: u64, max: u64, resolution: u64) -> (Vec<u64>, Option<u64>) {
        let mut done: Vec<(u64, bool)> = Vec::new();
        while let Some(n) = next_level(&done, first, max, resolution) {
            assert!(!done.iter().any(|d| d.0 == n), "{n} twice: {done:?}");
            done.push((n, n <= cap));
            assert!(done.len() < 64);
        }
        let best = (done.iter()).filter(|d| d.1).map(|d| d.0).max();
        (done.iter().map(|d| d.0).collect(), best)
    }

    #[test]
    fn find_max_grows_then_bisects() {
        let (order, best) = search(37, 5, 400, 2);
        assert_eq!(&order[..5], &[5, 10, 20, 40, 30]);
        let best = best.unwrap();
        assert!(best <= 37 && 37 - best < 2, "{best} {order:?}");
        for cap in 1..120 {
            let (_, best) = search(cap, 4, 100, 3);
            match best {
                None => assert!(cap < 4),
                Some(b) => assert!(b <= cap && (cap.min(100) - b) < 3, "cap {cap}: {b}"),
            }
        }
        // Everything passes: up to the largest level, then stop.
        assert_eq!(search(1000, 10, 50, 5).0, vec![10, 20, 40, 50]);
    }
}
