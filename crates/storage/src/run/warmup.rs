//! The warm-up ("attaining prerequisites"): its lower bound, its shortest
//! length, when it is over, and its announcement.

use super::progress::Progress;
use crate::spec::StorageSpec;
use mailbench_base::rundir::TestLog;
use std::time::Duration;

/// The progress and test.log lines of the warm-up's start.
pub(super) fn announce_warmup(
    spec: &StorageSpec,
    log: &TestLog,
    progress: &mut dyn Progress,
    io_engine: &str,
) {
    let (cache_bound, cache_max) = cache_lower_bound(spec);
    progress.phase(&format!(
        "running {} for {:?} after attaining prerequisites (database cache {:.1} MB of {:.1} MB, \
         at most {:?}) ({} databases, {} threads, {io_engine})",
        spec.profile.name,
        spec.duration,
        mib(cache_bound),
        mib(cache_max),
        spec.warmup,
        spec.instances.len(),
        spec.threads
    ));
    let (min, max) = mailbench_results::storage::wording::cache_totals(spec);
    log.line(mailbench_results::storage::wording::cache_settings_line(
        min, max,
    ));
    let (start, stop) = mailbench_results::storage::wording::flush_threshold_bytes(
        max,
        spec.profile.page_size.0,
        spec.profile.flush_start_pct,
        spec.profile.flush_stop_pct,
    );
    log.line(mailbench_results::storage::wording::flush_line(start, stop));
    for l in mailbench_results::storage::wording::latency_lines(
        spec.profile.tool_style,
        &spec.thresholds,
    ) {
        log.line(l);
    }
    log.line(mailbench_results::storage::wording::operation_mix_line(
        spec,
    ));
    log.line(mailbench_results::storage::wording::logging_line(spec));
    log.line(format!(
        "phase: warm-up, attaining prerequisites: database cache size, lower bound {} bytes \
         ({} % of the maximum), limit {}",
        cache_bound,
        spec.profile.preload_cache_pct,
        humantime::format_duration(spec.warmup)
    ));
    log.line("Attaining prerequisites:");
}

/// How long after the prerequisites are attained the measured window starts:
/// long enough for every instance to learn it and end an interval there.
pub(super) const WINDOW_LEAD: Duration = Duration::from_millis(200);

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

/// The warm-up's lower bound and the maximum database cache over all
/// instances, in bytes: `preload_cache_pct` of each instance's maximum cache,
/// or of its database where that is smaller (a small database cannot fill a
/// larger cache).
pub fn cache_lower_bound(spec: &StorageSpec) -> (u64, u64) {
    let ps = spec.profile.page_size.0;
    let max_pages = (spec.cache_max_per_db / ps).max(64);
    let pct = spec.profile.preload_cache_pct.clamp(0.0, 100.0);
    let mut fillable = 0u64;
    let mut max = 0u64;
    for inst in &spec.instances {
        fillable += max_pages.min(inst.pages) * ps;
        max += max_pages * ps;
    }
    // A share of the whole cache in bytes, as the published tool's bound is
    // (0.9 x 2,048 MB printed as 1932735000.0).
    ((fillable as f64 * pct / 100.0).round() as u64, max)
}

/// The shortest warm-up of a `--quick` run (at most its `--warmup`): its small
/// databases' caches reach their lower bound almost at once, and a window
/// starting right after the databases were created measured their first
/// reads at the volume's coldest (one 110 ms read failed the 100 ms maximum).
pub const QUICK_MIN_WARMUP: Duration = Duration::from_secs(10);

/// The shortest warm-up of `spec`'s run: [`QUICK_MIN_WARMUP`] with `--quick`
/// (never longer than the warm-up's limit), none otherwise.
pub fn warmup_min(spec: &StorageSpec) -> Duration {
    if spec.quick {
        QUICK_MIN_WARMUP.min(spec.warmup)
    } else {
        Duration::ZERO
    }
}

/// Whether the warm-up ("attaining prerequisites") is over: the database
/// caches hold at least their lower bound and the shortest warm-up (`min`)
/// passed, or the warm-up's time limit passed.
pub fn warmup_over(
    cached: u64,
    lower_bound: u64,
    elapsed: Duration,
    (min, limit): (Duration, Duration),
) -> bool {
    (cached >= lower_bound && elapsed >= min) || elapsed >= limit
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::test_spec as spec;
    use mailbench_results::storage::run::Prerequisites;

    #[test]
    fn the_warm_up_ends_when_the_cache_holds_its_lower_bound_or_at_its_limit() {
        let limit = (Duration::ZERO, Duration::from_secs(30));
        let early = Duration::from_secs(1);
        assert!(
            !warmup_over(899, 900, early, limit),
            "under the bound, in time"
        );
        assert!(warmup_over(900, 900, early, limit), "at the bound");
        assert!(warmup_over(950, 900, early, limit), "over the bound");
        assert!(
            warmup_over(10, 900, limit.1, limit),
            "the limit ends it anyway"
        );
        let quick = (Duration::from_secs(10), Duration::from_secs(30));
        assert!(
            !warmup_over(950, 900, early, quick),
            "over the bound, before the shortest warm-up"
        );
        assert!(
            warmup_over(950, 900, Duration::from_secs(10), quick),
            "over the bound, after the shortest warm-up"
        );
        assert!(
            warmup_over(10, 900, quick.1, quick),
            "the limit still ends it"
        );
        let mut s = spec("exchange2013");
        assert_eq!(warmup_min(&s), Duration::ZERO, "only --quick has one");
        s.quick = true;
        s.warmup = Duration::from_secs(30);
        assert_eq!(warmup_min(&s), QUICK_MIN_WARMUP);
        s.warmup = Duration::from_secs(3);
        assert_eq!(
            warmup_min(&s),
            Duration::from_secs(3),
            "never past the limit"
        );
        assert!(
            warmup_over(0, 0, Duration::ZERO, limit),
            "no bound: at once"
        );
        let p = Prerequisites::new(900, 1000, 10, 30.0, 30.0);
        assert!(!p.attained);
        let w = p.warning.as_deref().unwrap_or_default();
        assert!(w.contains("lower bound") && w.contains("--warmup"), "{w}");
        let p = Prerequisites::new(900, 1000, 900, 3.0, 30.0);
        assert!(p.attained && p.warning.is_none());
    }

    #[test]
    fn the_lower_bound_is_the_profile_share_of_the_maximum_cache_or_of_a_smaller_database() {
        let mut s = spec("exchange2013");
        s.cache_max_per_db = 256 << 20;
        s.profile.preload_cache_pct = 90.0;
        let ps = s.profile.page_size.0;
        for i in &mut s.instances {
            i.pages = (1 << 30) / ps;
        }
        let n = s.instances.len() as u64;
        let (bound, max) = cache_lower_bound(&s);
        assert_eq!(max, n * (256 << 20));
        // 90 % of the whole cache's bytes.
        assert_eq!(bound, (0.9 * (n * (256 << 20)) as f64).round() as u64);
        // A database of 1000 pages fills at most 900 of them.
        for i in &mut s.instances {
            i.pages = 1000;
        }
        assert_eq!(cache_lower_bound(&s).0, n * 900 * ps);
        s.profile.preload_cache_pct = 0.0;
        assert_eq!(cache_lower_bound(&s).0, 0);
    }
}
