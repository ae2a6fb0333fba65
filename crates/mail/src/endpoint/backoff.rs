//! Reconnection back-off: a user whose connection could not be made waits
//! before it tries again, 1 s after the first failure, doubling up to 30 s
//! (each wait drawn between half and all of that, so users that failed
//! together do not come back together). A task that comes due meanwhile
//! waits for the retry; its response time, measured from its intended start,
//! shows the wait. A success ends the back-off. The same waits space the
//! reconnections of a JMAP push stream that dropped (`jmap::push`).

use rand::Rng;
use std::time::Duration;
use tokio::time::Instant;

/// The wait after the first failed connection.
pub const FIRST: Duration = Duration::from_secs(1);
/// The longest wait.
pub const MOST: Duration = Duration::from_secs(30);

/// A user's reconnection state.
#[derive(Debug, Default)]
pub struct Backoff {
    /// Connections that failed in a row.
    failures: u32,
    retry_at: Option<Instant>,
}

impl Backoff {
    /// A connection failed at `now`: the next try waits.
    pub fn failed(&mut self, now: Instant, rng: &mut impl Rng) {
        self.failures = self.failures.saturating_add(1);
        self.retry_at = Some(now + wait(self.failures, rng.random::<f64>()));
    }

    /// A connection was made: no more waiting.
    pub fn succeeded(&mut self) {
        self.failures = 0;
        self.retry_at = None;
    }

    /// When the next try may be made, if that is after `now`.
    pub fn pending(&self, now: Instant) -> Option<Instant> {
        self.retry_at.filter(|t| *t > now)
    }
}

/// The wait after `failures` failures in a row, `jitter` in [0, 1) drawing
/// it between half and all of `FIRST x 2^(failures-1)` (at most `MOST`).
pub fn wait(failures: u32, jitter: f64) -> Duration {
    let full = FIRST
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(MOST);
    full.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn waits_double_up_to_the_most_and_end_at_a_success() {
        assert_eq!(wait(1, 1.0), FIRST);
        assert_eq!(wait(1, 0.0), FIRST / 2);
        assert_eq!(wait(3, 1.0), FIRST * 4);
        assert_eq!(wait(40, 1.0), MOST);
        assert_eq!(wait(40, 0.0), MOST / 2);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut b = Backoff::default();
        let now = Instant::now();
        assert_eq!(b.pending(now), None);
        b.failed(now, &mut rng);
        let t = b.pending(now).unwrap();
        assert!(t >= now + FIRST / 2 && t <= now + FIRST, "{:?}", t - now);
        assert_eq!(b.pending(now + FIRST), None);
        b.failed(now, &mut rng);
        assert!(b.pending(now + FIRST / 2).is_some());
        b.succeeded();
        assert_eq!(b.pending(now), None);
    }
}
