//! The hot-mailbox draw: which mailbox a transaction works on, by Zipf's law
//! (the mailbox of rank k drawn with a probability proportional to k^-s) or
//! uniformly.
//!
//! Up to [`TABLE_MAX`] mailboxes the draw uses an alias table (Walker's
//! method, built by Vose's algorithm): one uniform column and one uniform
//! fraction per draw, where `rand_distr`'s Zipf sampler (rejection-inversion)
//! computes two to three `pow` per attempt, a tenth of a microsecond of the
//! engine's CPU per I/O (docs/ARCHITECTURE.md, "Performance notes"). Same
//! distribution: the table's probabilities are k^-s over their sum to within
//! floating-point rounding (a unit test rebuilds them from the table). More
//! mailboxes than that keep the sampler (the table would be larger than the
//! CPU's caches).

use rand::Rng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Zipf};

/// The most mailboxes drawn from an alias table (16 bytes each: 1 MiB).
const TABLE_MAX: u64 = 1 << 16;

/// How a mailbox's rank (0 = the hottest) is drawn.
pub(super) enum MailboxDraw {
    Uniform(u64),
    Table(AliasTable),
    Sampler(Zipf<f64>, u64),
}

impl MailboxDraw {
    /// Ranks `0..mailboxes`, skewed by `skew` (0: uniform).
    pub(super) fn new(mailboxes: u64, skew: f64) -> MailboxDraw {
        let m = mailboxes.max(1);
        // A skew of 0 (or not a number) draws uniformly.
        if skew.is_nan() || skew <= 0.0 || m == 1 {
            return MailboxDraw::Uniform(m);
        }
        if m <= TABLE_MAX {
            return MailboxDraw::Table(AliasTable::zipf(m as usize, skew));
        }
        match Zipf::new(m as f64, skew) {
            Ok(z) => MailboxDraw::Sampler(z, m),
            Err(_) => MailboxDraw::Uniform(m),
        }
    }

    /// A rank in `0..mailboxes`.
    pub(super) fn draw(&self, rng: &mut SmallRng) -> u64 {
        match self {
            MailboxDraw::Uniform(m) => rng.random_range(0..*m),
            MailboxDraw::Table(t) => t.draw(rng) as u64,
            MailboxDraw::Sampler(z, m) => (z.sample(rng) as u64).saturating_sub(1).min(m - 1),
        }
    }
}

/// Walker's alias table: column `i` is drawn uniformly, then kept with
/// probability `keep`, else its `alias` is taken.
pub(super) struct AliasTable {
    /// Each column's two fields side by side: a draw's column is out of the
    /// CPU's caches, and one line holds both.
    cols: Vec<Column>,
}

#[derive(Debug, Clone, Copy)]
struct Column {
    keep: f64,
    alias: u32,
}

impl AliasTable {
    /// The table of Zipf's law over ranks `0..n` (`n` ≤ [`TABLE_MAX`]):
    /// rank k with probability (k + 1)^-s over the sum of them all.
    fn zipf(n: usize, s: f64) -> AliasTable {
        let w: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-s)).collect();
        let sum: f64 = w.iter().sum();
        AliasTable::new(w.iter().map(|x| x * n as f64 / sum).collect())
    }

    /// Vose's algorithm over `scaled` probabilities (each times their count,
    /// so they average 1).
    fn new(mut scaled: Vec<f64>) -> AliasTable {
        let n = scaled.len();
        let mut keep = vec![1.0; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        while let (Some(&l), Some(&g)) = (small.last(), large.last()) {
            small.pop();
            keep[l] = scaled[l];
            alias[l] = g as u32;
            scaled[g] -= 1.0 - scaled[l];
            if scaled[g] < 1.0 {
                large.pop();
                small.push(g);
            }
        }
        // What is left is 1 up to rounding: kept whole.
        let cols = keep
            .into_iter()
            .zip(alias)
            .map(|(keep, alias)| Column { keep, alias })
            .collect();
        AliasTable { cols }
    }

    #[inline]
    fn draw(&self, rng: &mut SmallRng) -> usize {
        let i = rng.random_range(0..self.cols.len());
        let c = self.cols[i];
        if rng.random::<f64>() < c.keep {
            i
        } else {
            c.alias as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// The probability of each rank, rebuilt from the table.
    fn rebuilt(t: &AliasTable) -> Vec<f64> {
        let n = t.cols.len();
        let mut p = vec![0.0; n];
        for (i, c) in t.cols.iter().enumerate() {
            p[i] += c.keep / n as f64;
            p[c.alias as usize] += (1.0 - c.keep) / n as f64;
        }
        p
    }

    #[test]
    fn table_holds_zipfs_law() {
        for n in [2usize, 3, 64, 1000, TABLE_MAX as usize] {
            for s in [0.5, 0.9, 1.0, 2.5, 5.0] {
                let t = AliasTable::zipf(n, s);
                let sum: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
                for (k, p) in rebuilt(&t).iter().enumerate() {
                    let want = ((k + 1) as f64).powf(-s) / sum;
                    let err = (p - want).abs() / want;
                    assert!(err < 1e-9, "n {n}, s {s}, rank {k}: {p} against {want}");
                }
            }
        }
    }

    /// The table's draws and `rand_distr`'s sampler give the same shares of
    /// the hottest ranks and the same quantiles (fixed seeds; 400,000 draws
    /// each: a share's standard error is under 0.08 percentage points).
    #[test]
    fn draws_match_the_sampler() {
        let (m, s) = (500u64, 0.9);
        let draws = 400_000;
        let shares = |d: &MailboxDraw, seed: u64| {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut counts = vec![0u64; m as usize];
            for _ in 0..draws {
                counts[d.draw(&mut rng) as usize] += 1;
            }
            counts
        };
        let table = shares(&MailboxDraw::new(m, s), 1);
        let z = Zipf::new(m as f64, s).unwrap();
        let sampler = shares(&MailboxDraw::Sampler(z, m), 2);
        let cum = |c: &[u64], k: usize| c[..k].iter().sum::<u64>() as f64 / draws as f64;
        for k in [1, 2, 5, 10, 50, 100, 250, 499] {
            let (a, b) = (cum(&table, k), cum(&sampler, k));
            assert!(
                (a - b).abs() < 0.005,
                "share of the {k} hottest: {a} against {b}"
            );
        }
        assert_eq!(table.iter().sum::<u64>(), draws);
        assert!(table.iter().all(|&c| c > 0), "every mailbox drawn");
    }

    #[test]
    fn uniform_and_large_counts() {
        let mut rng = SmallRng::seed_from_u64(3);
        for d in [
            MailboxDraw::new(10, 0.0),
            MailboxDraw::new(1, 0.9),
            MailboxDraw::new(TABLE_MAX + 1, 0.9),
        ] {
            let m = match &d {
                MailboxDraw::Uniform(m) | MailboxDraw::Sampler(_, m) => *m,
                MailboxDraw::Table(_) => panic!("no table for these"),
            };
            for _ in 0..1000 {
                assert!(d.draw(&mut rng) < m);
            }
        }
    }
}
