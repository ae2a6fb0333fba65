//! The local target sized from the run's users. Dovecot runs one `imap`
//! process per session (as deployed by default), so its IMAP process limit,
//! and the client limits of the services every process talks to (log,
//! anvil, auth, stats: `default_client_limit`), follow the users. A user
//! count this machine cannot hold is refused before anything starts (exit
//! 2), with the limit that bounds it: the memory of one `imap` process per
//! user, the kernel's process ids, or the processes one user may run.

use mailbench_base::{Error, Result};

/// IMAP sessions beyond the users: a user reconnecting while its old
/// session ends, the start-up check, mail setup's workers.
const IMAP_MARGIN: usize = 128;
/// The IMAP process limit never goes below Dovecot's default.
const MIN_IMAP_PROCESSES: usize = 1024;
/// Process limits of the other services that count towards the client
/// limits (submission and ManageSieve as configured, Dovecot's default for
/// LMTP and the login services, and the rest).
const OTHER_PROCESSES: usize = 1024 + 1024 + 100 + 3 * 100 + 64;
/// The client limit never goes below what a load test always had.
const MIN_CLIENT_LIMIT: usize = 8000;
/// Memory one `imap` process takes (measured: 1.55 MiB private per
/// process on Debian 12's Dovecot 2.3.19 under the mmb3 load, plus the
/// kernel's own per process), rounded up.
pub const IMAP_PROCESS_BYTES: u64 = 2 << 20;
/// Processes kept for everything else on the machine and for the mail
/// servers' own (Postfix, Dovecot's services).
const OTHER_PIDS: u64 = 2048;
/// Share of the available memory the IMAP processes may take.
const MEMORY_SHARE: f64 = 0.8;

/// Limits of the local servers for `sessions` IMAP sessions at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    /// Dovecot's `service imap { process_limit }`.
    pub imap_processes: usize,
    /// Dovecot's `default_client_limit`.
    pub client_limit: usize,
}

impl Sizing {
    /// For `sessions` IMAP sessions at once (the users, or setup's workers).
    pub fn for_sessions(sessions: usize) -> Sizing {
        let imap_processes = (sessions + IMAP_MARGIN).max(MIN_IMAP_PROCESSES);
        Sizing {
            imap_processes,
            client_limit: (imap_processes + OTHER_PROCESSES).max(MIN_CLIENT_LIMIT),
        }
    }
}

impl Default for Sizing {
    fn default() -> Sizing {
        Sizing::for_sessions(0)
    }
}

/// What bounds the sessions of a local target on this machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Machine {
    /// MemAvailable, bytes.
    pub mem_available: u64,
    /// kernel.pid_max and the processes (threads) running now.
    pub pid_max: u64,
    pub running: u64,
    /// RLIMIT_NPROC's hard limit (the mail processes all run as one user).
    pub nproc: Option<u64>,
}

impl Machine {
    pub fn read() -> Machine {
        let num = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
        };
        let mem_available = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| {
                let line = t.lines().find(|l| l.starts_with("MemAvailable:"))?;
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .map_or(u64::MAX, |kb| kb * 1024);
        let running = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|t| {
                let (_, all) = t.split_whitespace().nth(3)?.split_once('/')?;
                all.parse().ok()
            })
            .unwrap_or(0);
        let nproc = rustix::process::getrlimit(rustix::process::Resource::Nproc).maximum;
        Machine {
            mem_available,
            pid_max: num("/proc/sys/kernel/pid_max").unwrap_or(32_768),
            running,
            nproc,
        }
    }

    /// The most IMAP sessions this machine holds with `server` (`dovecot`
    /// or `cyrus`), and the reason.
    pub fn most(&self, server: &str) -> (u64, String) {
        let by_memory = (self.mem_available as f64 * MEMORY_SHARE) as u64 / IMAP_PROCESS_BYTES;
        let by_pids = self.pid_max.saturating_sub(self.running + OTHER_PIDS);
        let mut bounds = vec![
            (
                by_memory,
                format!(
                    "memory: one {} per user takes about {} MiB, and {} MiB \
                     are available ({}% of it allowed)",
                    process_per_user(server),
                    IMAP_PROCESS_BYTES >> 20,
                    self.mem_available >> 20,
                    (MEMORY_SHARE * 100.0) as u32
                ),
            ),
            (
                by_pids,
                format!(
                    "process ids: kernel.pid_max is {} and {} are in use ({OTHER_PIDS} kept)",
                    self.pid_max, self.running
                ),
            ),
        ];
        if let Some(n) = self.nproc {
            bounds.push((
                n.saturating_sub(OTHER_PIDS),
                format!(
                    "the process limit (RLIMIT_NPROC, `ulimit -u`) of {n}: the mail processes run as one user"
                ),
            ));
        }
        bounds
            .into_iter()
            .min_by_key(|b| b.0)
            .unwrap_or((u64::MAX, String::new()))
    }
}

/// The server process each user holds: Dovecot's imap, or Cyrus's imapd
/// (httpd for a JMAP user): one process per connection in both.
fn process_per_user(server: &str) -> &'static str {
    match server {
        "cyrus" => "Cyrus imapd process (httpd for a JMAP user)",
        _ => "Dovecot imap process",
    }
}

/// Refuses `sessions` (the users and setup's workers) the local target
/// running `server` cannot hold on `m`, naming the bound.
pub fn check(users: usize, sessions: usize, m: &Machine, server: &str) -> Result<()> {
    let (most, why) = m.most(server);
    let most_users =
        most.saturating_sub((sessions - users.min(sessions)) as u64 + IMAP_MARGIN as u64);
    if (sessions + IMAP_MARGIN) as u64 <= most {
        return Ok(());
    }
    Err(Error::usage(format!(
        "--users {users}: the local target runs one {} per user, and this machine \
         holds about {most_users} users: {why}. Give --users {most_users} or fewer, or point \
         --imap/--submission at a server on another machine",
        process_per_user(server)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(mem_gib: u64, pid_max: u64, nproc: Option<u64>) -> Machine {
        Machine {
            mem_available: mem_gib << 30,
            pid_max,
            running: 200,
            nproc,
        }
    }

    #[test]
    fn limits_follow_the_users() {
        assert_eq!(Sizing::for_sessions(100).imap_processes, 1024);
        let s = Sizing::for_sessions(5_032);
        assert_eq!(s.imap_processes, 5_160);
        assert!(s.client_limit >= s.imap_processes + 2048, "{s:?}");
        assert_eq!(Sizing::default().client_limit, 8000);
    }

    #[test]
    fn the_machine_bounds_the_users_with_a_reason() {
        let big = machine(22, 32_768, Some(96_365));
        assert!(check(5_000, 5_032, &big, "dovecot").is_ok());
        let e = check(20_000, 20_032, &big, "dovecot")
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory"), "{e}");
        assert!(e.contains("Dovecot imap process"), "{e}");
        let e = check(20_000, 20_032, &big, "cyrus")
            .unwrap_err()
            .to_string();
        assert!(e.contains("Cyrus imapd process"), "{e}");
        assert!(!e.contains("Dovecot"), "{e}");
        let e = check(20_000, 20_032, &machine(200, 16_384, None), "dovecot")
            .unwrap_err()
            .to_string();
        assert!(e.contains("kernel.pid_max"), "{e}");
        assert!(e.contains("holds about"), "{e}");
        let e = check(
            5_000,
            5_032,
            &machine(200, 4_000_000, Some(4096)),
            "dovecot",
        )
        .unwrap_err();
        assert!(e.to_string().contains("RLIMIT_NPROC"), "{e}");
    }
}
