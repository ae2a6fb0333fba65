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
/// The fewest tasks the users may run at once ([`TaskSlots`]).
pub const MIN_TASKS_IN_FLIGHT: usize = 256;
/// One slot for a task in flight per this many users, above the minimum.
pub const USERS_PER_TASK_SLOT: usize = 16;

/// The tasks `users` may run at once: at least [`MIN_TASKS_IN_FLIGHT`], one
/// per [`USERS_PER_TASK_SLOT`] users above that. A task holds its messages
/// (a forward: the original it fetched and the new one), so tasks that fall
/// behind together would otherwise hold the memory of the whole backlog. At
/// the real-time mmb3 rate (307 tasks a user per 8-hour day) `users / 16`
/// slots bind only when the mean task takes over 5.8 s.
pub fn tasks_in_flight(users: usize) -> usize {
    MIN_TASKS_IN_FLIGHT.max(users / USERS_PER_TASK_SLOT)
}

/// The slots the users' tasks take: a user waits for one before its task
/// starts (the wait counts in its scheduling delay and its latency, both
/// measured from the task's time) and gives it back when the task ends.
/// The most ever held at once is kept for the test log.
#[derive(Debug)]
pub struct TaskSlots {
    sem: tokio::sync::Semaphore,
    slots: usize,
    held: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
    /// Slots given so far (one a task).
    given: std::sync::atomic::AtomicU64,
}

/// A slot held by a task in flight (given back when dropped).
#[derive(Debug)]
pub struct TaskSlot<'a> {
    _permit: Option<tokio::sync::SemaphorePermit<'a>>,
    held: &'a std::sync::atomic::AtomicUsize,
}

impl TaskSlots {
    pub fn new(slots: usize) -> TaskSlots {
        assert!(slots > 0, "a run needs a slot for its tasks");
        TaskSlots {
            sem: tokio::sync::Semaphore::new(slots),
            slots,
            held: Default::default(),
            most: Default::default(),
            given: Default::default(),
        }
    }

    /// A free slot, if there is one now.
    pub fn try_take(&self) -> Option<TaskSlot<'_>> {
        let permit = self.sem.try_acquire().ok()?;
        Some(self.held(Some(permit)))
    }

    /// Waits for a free slot.
    pub async fn take(&self) -> TaskSlot<'_> {
        // `sem` is private and never closed: a permit is always given.
        let permit = self.sem.acquire().await.ok();
        self.held(permit)
    }

    fn held<'a>(&'a self, permit: Option<tokio::sync::SemaphorePermit<'a>>) -> TaskSlot<'a> {
        use std::sync::atomic::Ordering;
        let now = self.held.fetch_add(1, Ordering::AcqRel) + 1;
        debug_assert!(now <= self.slots, "{now} tasks hold {} slots", self.slots);
        self.most.fetch_max(now, Ordering::AcqRel);
        self.given.fetch_add(1, Ordering::AcqRel);
        TaskSlot {
            _permit: permit,
            held: &self.held,
        }
    }

    /// How many slots there are.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The most slots held at once so far.
    pub fn most_held(&self) -> usize {
        self.most.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The slots given so far.
    pub fn given(&self) -> u64 {
        self.given.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl Drop for TaskSlot<'_> {
    fn drop(&mut self) {
        // Before the permit (a field, dropped after this) is given back.
        self.held.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

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

    /// Ten tasks on three slots, each held on a slow path (a gate opened
    /// only once every task has tried): three get in, seven wait, and all
    /// end once the gate opens. No timing: a single-threaded runtime runs
    /// the tasks whenever the test yields.
    #[test]
    fn tasks_beyond_the_slots_wait_for_one() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let slots = Arc::new(TaskSlots::new(3));
            let (tried, inside, most_inside) = (
                Arc::new(AtomicUsize::new(0)),
                Arc::new(AtomicUsize::new(0)),
                Arc::new(AtomicUsize::new(0)),
            );
            let (gate, gate_rx) = tokio::sync::watch::channel(false);
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..10 {
                let (slots, tried, inside, most) = (
                    slots.clone(),
                    tried.clone(),
                    inside.clone(),
                    most_inside.clone(),
                );
                let mut gate_rx = gate_rx.clone();
                set.spawn(async move {
                    tried.fetch_add(1, Ordering::SeqCst);
                    let _slot = slots.take().await;
                    let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    let _ = gate_rx.wait_for(|open| *open).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                });
            }
            while tried.load(Ordering::SeqCst) < 10 {
                tokio::task::yield_now().await;
            }
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            assert_eq!(inside.load(Ordering::SeqCst), 3);
            assert!(slots.try_take().is_none());
            gate.send_replace(true);
            while set.join_next().await.is_some() {}
            assert_eq!(most_inside.load(Ordering::SeqCst), 3);
            assert_eq!(slots.most_held(), 3);
            // All given back.
            let all: Vec<_> = (0..3).filter_map(|_| slots.try_take()).collect();
            assert_eq!(all.len(), 3);
        });
        assert_eq!(tasks_in_flight(10), MIN_TASKS_IN_FLIGHT);
        assert_eq!(tasks_in_flight(19_900), 19_900 / USERS_PER_TASK_SLOT);
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
