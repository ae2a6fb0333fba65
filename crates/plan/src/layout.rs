//! The copy layout of one group: which server holds the active and each passive copy of
//! every database, spread so that the copies activated after a failure land evenly on
//! the survivors.
//!
//! Servers are numbered site by site. Database `d` has its active copy in the first site
//! on server `a = d mod n1`, in round `r = d div n1`. The second, third, ... copies in the
//! first site sit at offsets `1 + ((r + j - 1) mod (n1 - 1))` from `a`: as `r` runs over
//! the databases of one server, the offsets cycle through every other server of the site,
//! so when that server fails its databases are activated round-robin on the survivors.
//! In every further site `s`, number the databases server by server (all of A1's, then all
//! of A2's, ...) as `i`; the first copy sits on `i mod ns` and further copies at offsets
//! `1 + ((i div ns + j - 1) mod (ns - 1))` from it. The databases of any one first-site
//! server have consecutive numbers, so they cycle over the site's servers, and so do all
//! databases after the loss of the first site.
//! Activation preference follows copy order (first site first); the last `lagged` copies
//! are lagged and never activated.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Layout {
    /// Servers per site.
    pub site_servers: Vec<u32>,
    /// Copies of each database per site.
    pub site_copies: Vec<u32>,
    /// Site of each server.
    pub server_site: Vec<usize>,
    /// Server names: site letter + number within the site (A1, A2, ..., B1, ...).
    pub names: Vec<String>,
    /// Per database, its servers in activation-preference order (copy 0 is the active).
    pub copies: Vec<Vec<usize>>,
    /// Per copy index, whether that copy is lagged.
    pub lagged: Vec<bool>,
}

/// What one server holds in a given state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Load {
    pub active: u32,
    pub passive: u32,
    pub lagged: u32,
}

impl Load {
    pub fn copies(&self) -> u32 {
        self.active + self.passive + self.lagged
    }
}

pub fn site_letter(site: usize) -> String {
    let mut s = String::new();
    let mut n = site;
    loop {
        s.insert(0, char::from(b'A' + (n % 26) as u8));
        if n < 26 {
            break;
        }
        n = n / 26 - 1;
    }
    s
}

impl Layout {
    /// Builds the layout. Requires `site_copies[s] <= site_servers[s]`, `site_copies[0] >= 1`,
    /// `lagged < sum(site_copies)` (checked by input validation).
    pub fn build(databases: u32, site_servers: &[u32], site_copies: &[u32], lagged: u32) -> Layout {
        let mut server_site = Vec::new();
        let mut names = Vec::new();
        let mut first = Vec::new();
        for (s, &n) in site_servers.iter().enumerate() {
            first.push(server_site.len());
            for i in 0..n {
                server_site.push(s);
                names.push(format!("{}{}", site_letter(s), i + 1));
            }
        }
        let n1 = u64::from(site_servers.first().copied().unwrap_or(1).max(1));
        let total_dbs = u64::from(databases);
        // Databases active on each first-site server, and their running sum: the
        // databases listed server by server (column by column) get consecutive numbers.
        let mut prefix = Vec::with_capacity(n1 as usize);
        let mut sum = 0;
        for a in 0..n1 {
            prefix.push(sum);
            sum += if a < total_dbs {
                (total_dbs - a).div_ceil(n1)
            } else {
                0
            };
        }
        let mut copies = Vec::with_capacity(databases as usize);
        for d in 0..total_dbs {
            let a = d % n1;
            let r = d / n1;
            let idx = prefix[a as usize] + r;
            let mut list = Vec::new();
            for (s, (&ns, &cs)) in site_servers.iter().zip(site_copies).enumerate() {
                let ns = u64::from(ns.max(1));
                let (base, round) = if s == 0 { (a, r) } else { (idx % ns, idx / ns) };
                for j in 0..u64::from(cs) {
                    let local = if j == 0 {
                        base
                    } else {
                        (base + 1 + ((round + j - 1) % (ns - 1).max(1))) % ns
                    };
                    list.push(first[s] + local as usize);
                }
            }
            copies.push(list);
        }
        let total: u32 = site_copies.iter().sum();
        let lagged = (0..total).map(|k| k >= total - lagged.min(total)).collect();
        Layout {
            site_servers: site_servers.to_vec(),
            site_copies: site_copies.to_vec(),
            server_site,
            names,
            copies,
            lagged,
        }
    }

    pub fn servers(&self) -> usize {
        self.server_site.len()
    }

    /// The server each database is active on when the servers marked in `failed` are
    /// down: the first surviving non-lagged copy in preference order. `None` for a
    /// database that has lost every non-lagged copy.
    pub fn activate(&self, failed: &[bool]) -> Vec<Option<usize>> {
        self.copies
            .iter()
            .map(|list| {
                list.iter()
                    .enumerate()
                    .find(|(k, s)| !self.lagged[*k] && !failed[**s])
                    .map(|(_, s)| *s)
            })
            .collect()
    }

    /// What each server holds when `failed` servers are down (failed servers hold nothing).
    /// Also returns the number of databases left without a non-lagged copy.
    pub fn loads(&self, failed: &[bool]) -> (Vec<Load>, usize) {
        let mut loads = vec![Load::default(); self.servers()];
        let active = self.activate(failed);
        let mut lost = 0;
        for (list, act) in self.copies.iter().zip(&active) {
            if act.is_none() {
                lost += 1;
            }
            for (k, &s) in list.iter().enumerate() {
                if failed[s] {
                    continue;
                }
                if Some(s) == *act {
                    loads[s].active += 1;
                } else if self.lagged[k] {
                    loads[s].lagged += 1;
                } else {
                    loads[s].passive += 1;
                }
            }
        }
        (loads, lost)
    }

    /// For a failure of the servers in `failed`, how many of the failed servers' active
    /// databases each survivor takes over.
    pub fn taken(&self, failed: &[bool]) -> Vec<u32> {
        let normal = self.activate(&vec![false; self.servers()]);
        let after = self.activate(failed);
        let mut taken = vec![0; self.servers()];
        for (n, a) in normal.iter().zip(&after) {
            if let (Some(n), Some(a)) = (n, a)
                && failed[*n]
            {
                taken[*a] += 1;
            }
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mask(n: usize, down: &[usize]) -> Vec<bool> {
        (0..n).map(|i| down.contains(&i)).collect()
    }

    #[test]
    fn worked_example_layout_is_balanced() {
        // 56 databases, 3 copies: 2 over 8 servers in site A, 1 over 4 in site B.
        let l = Layout::build(56, &[8, 4], &[2, 1], 0);
        assert_eq!(l.names[0], "A1");
        assert_eq!(l.names[8], "B1");
        let (loads, lost) = l.loads(&[false; 12]);
        assert_eq!(lost, 0);
        let load = |active, passive| Load {
            active,
            passive,
            lagged: 0,
        };
        assert!(loads[..8].iter().all(|x| *x == load(7, 7)), "{loads:?}");
        assert!(loads[8..].iter().all(|x| *x == load(0, 14)), "{loads:?}");
        // Every copy of a database on a different server.
        for list in &l.copies {
            let mut v = list.clone();
            v.sort_unstable();
            v.dedup();
            assert_eq!(v.len(), 3);
        }
        // Lose A1: its 7 databases go one each to A2..A8.
        let (after, lost) = l.loads(&mask(12, &[0]));
        assert_eq!(lost, 0);
        assert!(after[1..8].iter().all(|x| x.active == 8), "{after:?}");
        // Lose site A: each B server runs 14 actives.
        let (after, lost) = l.loads(&mask(12, &[0, 1, 2, 3, 4, 5, 6, 7]));
        assert_eq!(lost, 0);
        assert!(after[8..].iter().all(|x| *x == load(14, 0)), "{after:?}");
    }

    #[test]
    fn lagged_copies_are_last_and_never_activated() {
        let l = Layout::build(6, &[3], &[3], 1);
        assert_eq!(l.lagged, vec![false, false, true]);
        // Lose the active and the second copy's server of database 0: it is lost.
        let d0 = l.copies[0].clone();
        let (_, lost) = l.loads(&mask(3, &[d0[0], d0[1]]));
        assert!(lost >= 1);
    }

    #[test]
    fn site_letters() {
        assert_eq!(site_letter(0), "A");
        assert_eq!(site_letter(25), "Z");
        assert_eq!(site_letter(26), "AA");
    }

    fn ceil_div(a: u32, b: u32) -> u32 {
        a.div_ceil(b)
    }

    proptest! {
        /// For every single-server failure, no survivor takes more than ceil(share) of the
        /// failed server's active databases, where the share divides them over the
        /// survivors of the site their next copy lives in.
        #[test]
        fn single_server_failures_spread_evenly(
            databases in 1u32..120,
            site_servers in prop::collection::vec(1u32..10, 1..4),
            copies_seed in prop::collection::vec(0u32..10, 3),
        ) {
            // Copies per site: 1..=n in the first site, 0..=n elsewhere, at least 2 in total.
            let mut site_copies: Vec<u32> = site_servers
                .iter()
                .zip(&copies_seed)
                .enumerate()
                .map(|(s, (&n, &seed))| if s == 0 { 1 + seed % n } else { seed % (n + 1) })
                .collect();
            let total: u32 = site_copies.iter().sum();
            if total < 2 {
                // Make it survivable: a second copy in site 1 if it has room, else in site 2.
                if site_servers[0] >= 2 {
                    site_copies[0] = 2;
                } else if site_servers.len() > 1 {
                    site_copies[1] = 1;
                } else {
                    return Ok(());
                }
            }
            let l = Layout::build(databases, &site_servers, &site_copies, 0);
            let n = l.servers();
            let normal = l.activate(&vec![false; n]);
            // Every copy of a database on its own server.
            for list in &l.copies {
                let mut v = list.clone();
                v.sort_unstable();
                v.dedup();
                prop_assert_eq!(v.len(), list.len());
            }
            for f in 0..n {
                let failed = mask(n, &[f]);
                let (_, lost) = l.loads(&failed);
                prop_assert_eq!(lost, 0);
                let had = normal.iter().filter(|a| **a == Some(f)).count() as u32;
                if had == 0 {
                    continue;
                }
                // The site the activated copies land in: the first site, after the failed
                // server's own, holding a second copy.
                let fsite = l.server_site[f];
                let target = if site_copies[fsite] >= 2 {
                    fsite
                } else {
                    (0..site_copies.len()).find(|&s| s != fsite && site_copies[s] >= 1).unwrap()
                };
                let eligible = site_servers[target] - u32::from(target == fsite);
                let taken = l.taken(&failed);
                let limit = ceil_div(had, eligible);
                for (s, &t) in taken.iter().enumerate() {
                    prop_assert!(t <= limit, "server {} took {} of {} (limit {})", s, t, had, limit);
                    if t > 0 {
                        prop_assert_eq!(l.server_site[s], target);
                    }
                }
                prop_assert_eq!(taken.iter().sum::<u32>(), had);
            }
        }

        /// When the databases divide evenly over the first site, every survivor of a
        /// single-server failure there ends with at most ceil(databases / survivors) actives.
        #[test]
        fn even_designs_stay_even_after_a_server_failure(
            n1 in 2u32..12,
            rounds in 1u32..10,
            second_site in 0u32..6,
        ) {
            let databases = n1 * rounds;
            let (servers, copies) = if second_site > 0 {
                (vec![n1, second_site], vec![2, 1])
            } else {
                (vec![n1], vec![2])
            };
            let l = Layout::build(databases, &servers, &copies, 0);
            for f in 0..n1 as usize {
                let (loads, _) = l.loads(&mask(l.servers(), &[f]));
                let max = loads.iter().map(|x| x.active).max().unwrap_or(0);
                prop_assert!(max <= databases.div_ceil(n1 - 1));
            }
            if second_site > 0 {
                let down: Vec<usize> = (0..n1 as usize).collect();
                let (loads, lost) = l.loads(&mask(l.servers(), &down));
                prop_assert_eq!(lost, 0);
                let max = loads.iter().map(|x| x.active).max().unwrap_or(0);
                prop_assert!(max <= databases.div_ceil(second_site));
            }
        }
    }
}
