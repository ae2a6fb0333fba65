//! The transport of a test over ranks (docs/multihost.md): each rank is one
//! host's share of the test, launched by `mpirun`, Slurm's `srun` or an MPI
//! operator (cargo feature `mpi`), or this process alone ([`Single`], a world
//! of one). The driver (`mailbench-runner`) runs every command over a world;
//! this crate knows nothing of commands.
//!
//! Pieces:
//! - [`Transport`]: rank, size, host, barrier, broadcast and gather to rank 0,
//!   every wait polling a check so a failed rank never hangs the others; MPI
//!   behind the `mpi` feature, a single process otherwise;
//! - [`watch`]: a TCP side channel from every rank to rank 0 carrying
//!   heartbeats, live interval figures and failures, so a rank whose process
//!   dies is named within a second;
//! - the start instant (`--start-at`, [`wait_until`]) and path templates
//!   (`{rank}`, `{host}`).

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

#[cfg(feature = "mpi")]
mod mpi_transport;
pub mod watch;

use mailbench_base::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What a wait polls about every 20 ms: an `Err` ends the wait (a rank
/// failed, the user interrupted, a deadline passed).
pub type Check<'a> = &'a mut dyn FnMut() -> Result<()>;

/// How the ranks of one test talk to each other. Every call that waits for
/// other ranks polls `check`.
pub trait Transport {
    /// 0 .. size-1; rank 0 coordinates and writes the aggregate.
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// The host this rank runs on (MPI processor name or the hostname).
    fn host(&self) -> String;
    /// `mpi` or `single`.
    fn kind(&self) -> &'static str;
    /// Returns when every rank has entered the barrier.
    fn barrier(&self, check: Check) -> Result<()>;
    /// Rank 0's `data` on every rank (other ranks' `data` is ignored).
    fn broadcast(&self, data: &[u8], check: Check) -> Result<Vec<u8>>;
    /// Every rank's `data` on rank 0, one entry per rank in rank order;
    /// ranks that `skip` lists (failed ones) are not waited for and give
    /// `None`. Other ranks get an empty list.
    fn gather(
        &self,
        data: &[u8],
        skip: &dyn Fn() -> Vec<usize>,
        check: Check,
    ) -> Result<Vec<Option<Vec<u8>>>>;
    /// Ends every rank of the job (MPI_Abort) or this process.
    fn abort(&self, code: i32) -> !;
}

/// One process, rank 0 of 1.
pub struct Single {
    host: String,
}

impl Default for Single {
    fn default() -> Self {
        Single { host: hostname() }
    }
}

impl Transport for Single {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn host(&self) -> String {
        self.host.clone()
    }
    fn kind(&self) -> &'static str {
        "single"
    }
    fn barrier(&self, check: Check) -> Result<()> {
        check()
    }
    fn broadcast(&self, data: &[u8], check: Check) -> Result<Vec<u8>> {
        check()?;
        Ok(data.to_vec())
    }
    fn gather(
        &self,
        data: &[u8],
        _skip: &dyn Fn() -> Vec<usize>,
        check: Check,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        check()?;
        Ok(vec![Some(data.to_vec())])
    }
    fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }
}

pub use mailbench_base::host::hostname;

/// The number of ranks a launcher (mpirun, srun, an MPI operator) started,
/// from its environment; `None` when not launched as ranks.
pub fn launcher_size() -> Option<usize> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.trim().parse::<usize>().ok())
}

/// True when an MPI launcher started this process (Open MPI's mpirun, MPICH's
/// hydra, Slurm's srun with PMI/PMIx).
pub fn launched_by_mpi() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"]
        .iter()
        .any(|k| std::env::var_os(k).is_some())
}

/// True when this build can join an MPI job.
pub const MPI_BUILT: bool = cfg!(feature = "mpi");

/// The transport of this process: MPI when built with the `mpi` feature and
/// started by an MPI launcher, else a single process.
pub fn world() -> Result<Box<dyn Transport>> {
    #[cfg(feature = "mpi")]
    if launched_by_mpi() {
        return Ok(Box::new(mpi_transport::Mpi::init()?));
    }
    Ok(Box::new(Single::default()))
}

/// Replaces `{rank}` and `{host}` in a path.
pub fn expand_path(p: &Path, rank: usize, host: &str) -> PathBuf {
    let s = p.to_string_lossy();
    if !s.contains('{') {
        return p.to_path_buf();
    }
    PathBuf::from(
        s.replace("{rank}", &rank.to_string())
            .replace("{host}", host),
    )
}

/// Parses an RFC 3339 time (`2026-07-10T14:00:00Z`, `...+02:00`).
pub fn parse_start_at(text: &str) -> Result<SystemTime> {
    let t = text.trim();
    if let Ok(s) = humantime::parse_rfc3339_weak(t) {
        // `weak` accepts a missing zone (read as UTC) and a space for T.
        if !has_offset(t) {
            return Ok(s);
        }
    }
    if let Ok(s) = humantime::parse_rfc3339(t) {
        return Ok(s);
    }
    // humantime reads only `Z`; apply a numeric offset ourselves.
    if let Some((base, sign, h, m)) = split_offset(t)
        && let Ok(s) = humantime::parse_rfc3339_weak(base)
    {
        let off = Duration::from_secs(h * 3600 + m * 60);
        // local = UTC + offset, so UTC = local - offset.
        let utc = if sign > 0 {
            s.checked_sub(off)
        } else {
            s.checked_add(off)
        };
        if let Some(u) = utc {
            return Ok(u);
        }
    }
    Err(Error::usage(format!(
        "--start-at (or `start_at` in the config file) {text:?}: give an RFC 3339 time such as 2026-07-10T14:00:00Z or 2026-07-10T16:00:00+02:00"
    )))
}

fn has_offset(t: &str) -> bool {
    t.ends_with('Z') || t.ends_with('z') || split_offset(t).is_some()
}

fn split_offset(t: &str) -> Option<(&str, i32, u64, u64)> {
    if t.len() < 6 {
        return None;
    }
    let (base, off) = t.split_at(t.len() - 6);
    let b = off.as_bytes();
    let sign = match b[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    if b[3] != b':' || !base.contains('T') && !base.contains(' ') {
        return None;
    }
    let h: u64 = off.get(1..3)?.parse().ok()?;
    let m: u64 = off.get(4..6)?.parse().ok()?;
    (h < 24 && m < 60).then_some((base, sign, h, m))
}

/// Waits until `at` (wall clock), polling `check`. A time in the past
/// returns at once with how late it is.
pub fn wait_until(at: SystemTime, check: Check) -> Result<Duration> {
    loop {
        check()?;
        match at.duration_since(SystemTime::now()) {
            Ok(left) if left > Duration::ZERO => {
                std::thread::sleep(left.min(Duration::from_millis(20)));
            }
            Ok(_) => return Ok(Duration::ZERO),
            Err(e) => return Ok(e.duration()),
        }
    }
}

/// Seconds since the Unix epoch of a time (for messages between ranks).
pub fn to_unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub fn from_unix_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand() {
        assert_eq!(
            expand_path(Path::new("/data/{host}/r{rank}/db"), 3, "node7"),
            PathBuf::from("/data/node7/r3/db")
        );
        assert_eq!(
            expand_path(Path::new("/plain"), 1, "h"),
            PathBuf::from("/plain")
        );
    }

    #[test]
    fn start_at_forms() {
        let z = parse_start_at("2026-07-10T14:00:00Z").unwrap();
        assert_eq!(parse_start_at("2026-07-10T16:00:00+02:00").unwrap(), z);
        assert_eq!(parse_start_at("2026-07-10T09:30:00-04:30").unwrap(), z);
        assert_eq!(to_unix_ms(z), 1_783_692_000_000);
        assert!(parse_start_at("tomorrow").is_err());
        assert!(parse_start_at("2026-13-10T14:00:00Z").is_err());
    }

    #[test]
    fn single_transport() {
        let t = Single::default();
        let mut ok = || Ok(());
        assert_eq!(t.broadcast(b"x", &mut ok).unwrap(), b"x");
        let g = t.gather(b"y", &Vec::new, &mut ok).unwrap();
        assert_eq!(g, vec![Some(b"y".to_vec())]);
        let mut late = || Ok(());
        assert!(
            wait_until(SystemTime::now() - Duration::from_secs(1), &mut late).unwrap()
                > Duration::ZERO
        );
    }
}
