//! How many users one generator process can hold. Each simulated user keeps
//! one IMAP connection open all day (a file descriptor, and a local port
//! towards the one IMAP address); its submissions and rule changes open a
//! connection more for a moment. The generator raises its file limit to the
//! hard limit at start, and refuses (exit 2, before anything is written) a
//! user count that does not fit in what it then has, saying how many do.

use mailbench_base::{Error, Result};

/// File descriptors kept for the generator's own use (runtime, files,
/// standard streams, the moments a user holds a second connection).
pub const RESERVED_FILES: u64 = 100;
/// Second connections (a submission, a ManageSieve session) open at once:
/// half the reserved files. When tasks fall behind, a burst of submissions
/// waits for a slot instead of failing on the file limit ("Too many open
/// files" at 19,900 users on a 20,000-file limit).
pub const SECOND_CONNECTIONS: usize = (RESERVED_FILES / 2) as usize;
/// Local ports kept for the connections opened besides the users' own.
pub const RESERVED_PORTS: u64 = 100;

/// The file limit (RLIMIT_NOFILE) after raising it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimit {
    /// What the process may open now (the soft limit).
    pub soft: u64,
    /// The most it could be raised to (the hard limit).
    pub hard: u64,
}

/// Raises this process's soft file limit to its hard limit (children, the
/// local servers included, inherit it) and returns both. An unlimited hard
/// limit is taken as the kernel's `fs.nr_open`.
pub fn raise_file_limit() -> FileLimit {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(1 << 20);
    let hard = now.maximum.unwrap_or(nr_open);
    let soft = now.current.unwrap_or(hard);
    if soft < hard {
        let raised = Rlimit {
            current: Some(hard),
            maximum: now.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return FileLimit { soft: hard, hard };
        }
    }
    FileLimit { soft, hard }
}

/// The local ports a process can connect from towards one address
/// (`net.ipv4.ip_local_port_range`; Linux's default when unreadable).
pub fn local_ports() -> u64 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| {
            let mut it = t.split_whitespace().map(|x| x.parse::<u64>().ok());
            let (lo, hi) = (it.next()??, it.next()??);
            Some(hi.saturating_sub(lo) + 1)
        })
        .unwrap_or(60_999 - 32_768 + 1)
}

/// The users one generator process can hold with `limit` and `ports`, and
/// what bounds it.
pub fn capacity(limit: FileLimit, ports: u64) -> (u64, Bound) {
    let by_files = limit.soft.saturating_sub(RESERVED_FILES);
    let by_ports = ports.saturating_sub(RESERVED_PORTS);
    if by_ports < by_files {
        (by_ports, Bound::Ports(ports))
    } else {
        (by_files, Bound::Files(limit))
    }
}

/// What bounds the users of one generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Files(FileLimit),
    /// The local port range's size.
    Ports(u64),
}

/// Refuses (usage error: nothing is written) a run of `o`'s users that this
/// generator, or the local target on this machine, cannot hold.
pub fn check(o: &crate::options::Resolved) -> Result<()> {
    check_users(o.users)?;
    if o.target == "local" {
        crate::local::check_capacity(o.users, o.concurrency, &o.server)?;
    }
    Ok(())
}

/// Raises the file limit and refuses `users` this process cannot hold
/// (usage error: nothing is written), naming what bounds it and how to get
/// more.
pub fn check_users(users: usize) -> Result<FileLimit> {
    let limit = raise_file_limit();
    let (most, bound) = capacity(limit, local_ports());
    if users as u64 <= most {
        return Ok(limit);
    }
    Err(Error::usage(refusal(users, most, bound)))
}

/// The refusal of `users` when `most` fit.
pub fn refusal(users: usize, most: u64, bound: Bound) -> String {
    let why = match bound {
        Bound::Files(l) => format!(
            "its file limit of {} open files (hard limit {}; {RESERVED_FILES} kept for its own files)",
            l.soft, l.hard
        ),
        Bound::Ports(p) => format!(
            "the {p} local ports it can connect from to one address \
             (net.ipv4.ip_local_port_range; {RESERVED_PORTS} kept)"
        ),
    };
    let raise = match bound {
        Bound::Files(_) => {
            "raise the hard limit (`ulimit -Hn`, LimitNOFILE=, /etc/security/limits.conf)"
        }
        Bound::Ports(_) => "widen net.ipv4.ip_local_port_range",
    };
    format!(
        "--users {users}: one generator holds one IMAP connection per user, and this one \
         can hold {most} users with {why}. Give --users {most} or fewer, {raise}, or spread \
         the users over several generators: MPI ranks (`mpirun -n N mailbench mail ...`) each \
         have their own limit, so N ranks on this host carry N x {most} users"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_limit_or_the_ports_bound_the_users() {
        let l = FileLimit {
            soft: 20_000,
            hard: 20_000,
        };
        assert_eq!(capacity(l, 28_232), (19_900, Bound::Files(l)));
        assert_eq!(capacity(l, 10_100), (10_000, Bound::Ports(10_100)));
        let small = FileLimit {
            soft: 50,
            hard: 1024,
        };
        assert_eq!(capacity(small, 28_232).0, 0);
        let m = refusal(
            20_000,
            924,
            Bound::Files(FileLimit {
                soft: 1024,
                hard: 1024,
            }),
        );
        assert!(m.contains("can hold 924 users"), "{m}");
        assert!(m.contains("MPI ranks"), "{m}");
        assert!(m.contains("N x 924"), "{m}");
    }

    #[test]
    fn raising_never_lowers_the_limit() {
        let before = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        let after = raise_file_limit();
        assert!(Some(after.soft) >= before.current || before.current.is_none());
        assert!(after.soft <= after.hard);
        assert!(local_ports() > 0);
    }
}
