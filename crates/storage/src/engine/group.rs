//! The I/O threads: each runs the turns of its instances over one shared I/O
//! engine, and waits once for all of them. With more instances than CPUs, a
//! thread per instance meant a wake-up (and a context switch) per completion
//! per instance; a thread that serves several instances takes their completions
//! in one wait, and their requests to the kernel in one system call. ESE, too,
//! issues the I/O of all its instances and databases, and takes their
//! completions, on one I/O thread per process ("The IO Thread":
//! `ErrOSDiskIIOThreadInit` in dev/ese/src/os/osdisk.cxx of
//! microsoft/Extensible-Storage-Engine; docs/storage.md, "The engine").

use super::{Instance, InstanceSetup, Plan, TAG_SHIFT, io_depth};
use mailbench_io::{Capabilities, IoCompletion, IoEngine};
use std::thread::JoinHandle;
use std::time::Duration;

/// Requests one `io_uring_enter` must carry for the kernel to plug the block
/// layer (one doorbell for the batch instead of one per request).
const PLUG_MIN: usize = 3;
/// Where an instance's place on its thread sits in its requests' tags (the
/// byte under the kind, see [`super::tag`]).
const MEMBER_SHIFT: u64 = super::ID_BITS as u64;
const MEMBER_MASK: u64 = (1 << (TAG_SHIFT - MEMBER_SHIFT)) - 1;
/// Instances one thread serves at most (what the tag's byte can name).
const MEMBERS_MAX: usize = MEMBER_MASK as usize + 1;

/// The running I/O threads.
pub struct IoThreads {
    pub handles: Vec<JoinHandle<()>>,
    /// The engine's name for reports (`uring`, `threads`, ...).
    pub io_engine: String,
}

/// How many I/O threads serve `instances` instances on `cpus` CPUs: one per
/// instance up to one per CPU, and enough that none serves more than
/// [`MEMBERS_MAX`].
pub fn thread_count(instances: usize, cpus: usize) -> usize {
    instances
        .min(cpus.max(1))
        .max(instances.div_ceil(MEMBERS_MAX))
}

/// The I/O threads' engines, one per thread, set up before any instance
/// opens: opening marks a database in use, so an engine that cannot be set up
/// must stop the run before that. The second field is why `auto` fell back to
/// the thread pool, when it did (the first engine's reason: all are built alike).
pub struct IoEngines(Vec<Box<dyn IoEngine>>, Option<String>);

impl IoEngines {
    /// Why `auto` did not use io_uring, when it did not.
    pub fn fallback(&self) -> Option<&str> {
        self.1.as_deref()
    }
}

/// The engines for the instances of `setups` on `threads` I/O threads (None:
/// [`thread_count`] for this machine's CPUs; instance `i` on thread `i % n`),
/// of the kind the setups chose, each as deep as its instances' shares. The
/// error says why one cannot be set up.
pub fn engines(setups: &[InstanceSetup], threads: Option<u32>) -> Result<IoEngines, String> {
    let Some(first) = setups.first() else {
        return Ok(IoEngines(Vec::new(), None));
    };
    let caps = Capabilities {
        o_direct: first.direct,
        uring: mailbench_io::uring::available(),
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = match threads {
        Some(t) => (t as usize).clamp(setups.len().div_ceil(MEMBERS_MAX), setups.len()),
        None => thread_count(setups.len(), cpus),
    };
    let mut fallback = None;
    let mut built = Vec::with_capacity(n);
    for t in 0..n {
        let depth = setups.iter().skip(t).step_by(n).map(io_depth).sum();
        let b = mailbench_io::build(first.engine, caps, depth)?;
        fallback = fallback.or(b.fallback);
        built.push(b.engine);
    }
    Ok(IoEngines(built, fallback))
}

/// Starts `instances` (opened from the setups `engines` was made for, in
/// their order) on the threads of `engines`.
pub fn start(instances: Vec<Instance>, engines: IoEngines) -> IoThreads {
    let engines = engines.0;
    let n = engines.len();
    assert!(
        n > 0 || instances.is_empty(),
        "instances to run without an I/O thread"
    );
    let mut groups: Vec<Vec<Instance>> = (0..n).map(|_| Vec::new()).collect();
    for (i, inst) in instances.into_iter().enumerate() {
        groups[i % n].push(inst);
    }
    let io_engine = engines.first().map(|e| e.name()).unwrap_or_default();
    let handles = groups
        .into_iter()
        .zip(engines)
        .filter_map(|(g, io)| {
            std::thread::Builder::new()
                .name("mb-instance".into())
                .spawn(move || run(g, io))
                .ok()
        })
        .collect();
    IoThreads { handles, io_engine }
}

/// The thread's loop: every instance takes its turn, their requests go to the
/// engine, one wait serves them all, and each instance gets its completions;
/// an instance that is done is finished while the others go on.
fn run(instances: Vec<Instance>, mut io: Box<dyn IoEngine>) {
    assert!(
        instances.len() <= MEMBERS_MAX,
        "too many instances on one thread"
    );
    let name = io.name();
    let mut members: Vec<Option<Instance>> = instances.into_iter().map(Some).collect();
    let mut mine: Vec<Vec<IoCompletion>> = members.iter().map(|_| Vec::new()).collect();
    let mut done = Vec::with_capacity(256);
    let mut held = false;
    loop {
        let mut plan: Option<Plan> = None;
        for (m, slot) in members.iter_mut().enumerate() {
            let Some(inst) = slot else { continue };
            // Each turn at its own time: the turns before it took theirs.
            match inst.turn(std::time::Instant::now()) {
                Some(p) => {
                    hand_over(inst, m, io.as_mut());
                    plan = Some(plan.map_or(p, |q| combine(q, p)));
                }
                None => {
                    if let Some(inst) = slot.take() {
                        inst.finish(&name);
                    }
                }
            }
        }
        let Some(plan) = plan else { break };
        done.clear();
        held = !held && plan.at_once && !plan.aborting && hold_requests(io.as_ref());
        if held {
            io.poll(&mut done);
        } else {
            io.wait(plan.min, Some(plan.timeout), &mut done);
        }
        deliver(&mut done, &mut members, &mut mine);
    }
}

/// The plan of a wait that serves two instances: at once if either must turn
/// again at once, else for a completion if either waits for one, until the
/// earlier of their timers.
fn combine(a: Plan, b: Plan) -> Plan {
    let at_once = a.at_once || b.at_once;
    Plan {
        min: if at_once { 0 } else { a.min.max(b.min) },
        timeout: if at_once {
            Duration::ZERO
        } else {
            a.timeout.min(b.timeout)
        },
        at_once,
        aborting: a.aborting || b.aborting,
    }
}

/// The instance's requests of this turn to the engine, its place in their tags.
fn hand_over(inst: &mut Instance, member: usize, io: &mut dyn IoEngine) {
    for mut req in inst.io.queued.drain(..) {
        assert_eq!(
            req.tag >> MEMBER_SHIFT & MEMBER_MASK,
            0,
            "an I/O tag uses the member byte"
        );
        req.tag |= (member as u64) << MEMBER_SHIFT;
        io.submit(req);
    }
}

/// Whether the requests queued this turn wait for the next turn's instead of a
/// system call of their own (asked only when the loop turns again at once
/// because a transaction can start now, never twice in a row): only one or two
/// of them — fewer than io_uring plugs the block layer for, so each would ring
/// the device's doorbell alone; with the next turn's they go as one batch,
/// started a turn's CPU time later (docs/ARCHITECTURE.md, "Performance notes",
/// ninth round).
fn hold_requests(io: &dyn IoEngine) -> bool {
    (1..PLUG_MIN).contains(&io.queued())
}

/// Each completion to its instance (its place cleared from the tag); those of
/// an instance already finished (an abort that stopped waiting) are dropped.
fn deliver(
    done: &mut Vec<IoCompletion>,
    members: &mut [Option<Instance>],
    mine: &mut [Vec<IoCompletion>],
) {
    for mut c in done.drain(..) {
        let m = (c.tag >> MEMBER_SHIFT & MEMBER_MASK) as usize;
        c.tag &= !(MEMBER_MASK << MEMBER_SHIFT);
        if let Some(v) = mine.get_mut(m) {
            v.push(c);
        }
    }
    for (slot, v) in members.iter_mut().zip(mine.iter_mut()) {
        match slot {
            Some(inst) if !v.is_empty() => inst.completed(v),
            _ => v.clear(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(min: usize, ms: u64, at_once: bool) -> Plan {
        Plan {
            min,
            timeout: Duration::from_millis(ms),
            at_once,
            aborting: false,
        }
    }

    #[test]
    fn one_thread_per_instance_up_to_the_cpus() {
        assert_eq!(thread_count(1, 16), 1);
        assert_eq!(thread_count(2, 2), 2);
        assert_eq!(thread_count(16, 2), 2);
        assert_eq!(thread_count(16, 32), 16);
        assert_eq!(thread_count(0, 4), 0);
        // No thread serves more instances than the tag can name.
        assert_eq!(thread_count(1000, 2), 4);
        assert!(1000usize.div_ceil(thread_count(1000, 2)) <= MEMBERS_MAX);
    }

    #[test]
    fn a_shared_wait_serves_the_most_urgent_instance() {
        // The earlier timer, a completion if either waits for one.
        assert_eq!(
            combine(plan(1, 50, false), plan(0, 4, false)),
            plan(1, 4, false)
        );
        assert_eq!(
            combine(plan(0, 7, false), plan(0, 9, false)),
            plan(0, 7, false)
        );
        // One instance that turns again at once: nobody blocks.
        assert_eq!(
            combine(plan(1, 50, false), plan(0, 0, true)),
            plan(0, 0, true)
        );
        let aborting = Plan {
            aborting: true,
            ..plan(1, 50, false)
        };
        assert!(combine(plan(0, 0, true), aborting).aborting);
    }

    #[test]
    fn member_bits_sit_between_the_kind_and_the_id() {
        let t = super::super::tag(super::super::K_SYNC, (1 << super::super::ID_BITS) - 1);
        assert_eq!(t >> MEMBER_SHIFT & MEMBER_MASK, 0);
        assert_eq!(MEMBERS_MAX, 256);
    }
}
