//! What the driver plugs into `mail run` (crates/runner): a wait before the
//! users start (barrier + a common start time), each interval's figures (to
//! rank 0 of a test over several hosts), and the interrupt flag (Ctrl-C, or
//! the coordinator stopping every host).

use crate::stats::IntervalOps;
use mailbench_base::Result;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::TestLog;

/// One sampling interval, as a caller sees it.
pub struct IntervalView<'a> {
    /// Seconds since the users started.
    pub elapsed_s: f64,
    /// Seconds left of the simulated day (0 while draining).
    pub remaining_s: f64,
    pub interval_s: f64,
    pub users: usize,
    pub ops: &'a IntervalOps,
}

/// The wait before the users start.
pub type BeforeLoad<'a> = Box<dyn FnOnce(&TestLog) -> Result<()> + 'a>;
/// The callback of every sampling interval.
pub type OnInterval<'a> = Box<dyn FnMut(&IntervalView) + 'a>;

/// Hooks of `mail run`; the default waits for nothing and is never
/// interrupted.
#[derive(Default)]
pub struct RunHooks<'a> {
    /// Called once, after setup and the target check, right before the users
    /// start; an error ends the run (a runtime error, nothing measured).
    pub before_load: Option<BeforeLoad<'a>>,
    /// Called after every sampling interval.
    pub on_interval: Option<OnInterval<'a>>,
    /// Stops the run when raised (Ctrl-C / SIGTERM, or the coordinator).
    pub interrupt: Interrupt,
}
