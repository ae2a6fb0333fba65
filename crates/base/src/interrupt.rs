//! Ctrl-C / SIGTERM: a flag that long-running loops poll, so a run stops within a
//! sampling tick, writes its partial result and exits 130. A second signal asks
//! to stop at once ([`Interrupt::insisted`]: `mail run` aborts its users without
//! their grace; the results so far are still written). A third ends the process
//! at once with 130, without writing.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

#[derive(Clone, Debug, Default)]
pub struct Interrupt(Arc<State>);

#[derive(Debug, Default)]
struct State {
    /// Raised by the first signal (in the handler itself) or by `raise`.
    raised: Arc<AtomicBool>,
    /// Signals counted (by the counting thread, a moment after each).
    count: AtomicU32,
    /// Set at the second signal: the next one exits in the handler.
    armed: Arc<AtomicBool>,
}

/// The signals that end the process at once (the third).
pub const EXIT_AT: u32 = 3;

impl Interrupt {
    /// Registers SIGINT and SIGTERM handlers: the first raises the flag, the
    /// second is counted (`insisted`), the third exits with 130.
    pub fn install() -> crate::Result<Interrupt> {
        let state = Arc::new(State::default());
        let fail = |e: std::io::Error| {
            crate::Error::runtime(format!("cannot install the signal handler: {e}"))
        };
        let (mut read, write) = UnixStream::pair().map_err(fail)?;
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // In the order they run: exit when armed, count, raise.
            signal_hook::flag::register_conditional_shutdown(sig, 130, state.armed.clone())
                .map_err(fail)?;
            signal_hook::low_level::pipe::register(sig, write.try_clone().map_err(fail)?)
                .map_err(fail)?;
            signal_hook::flag::register(sig, state.raised.clone()).map_err(fail)?;
        }
        let counted = state.clone();
        std::thread::Builder::new()
            .name("mb-signals".into())
            .spawn(move || {
                let mut byte = [0u8; 1];
                while read.read_exact(&mut byte).is_ok() {
                    counted.count_one();
                }
            })
            .map_err(fail)?;
        Ok(Interrupt(state))
    }

    /// A flag no signal raises (tests, libraries).
    pub fn never() -> Interrupt {
        Interrupt::default()
    }

    /// Interrupted at least once: stop, write what was measured.
    pub fn raised(&self) -> bool {
        self.0.raised.load(Ordering::SeqCst) || self.0.count.load(Ordering::SeqCst) >= 1
    }

    /// Interrupted twice (or more): stop at once, without grace.
    pub fn insisted(&self) -> bool {
        self.0.count.load(Ordering::SeqCst) >= 2
    }

    /// Raises the flag as a first signal would (a no-op once raised).
    pub fn raise(&self) {
        self.0.raised.store(true, Ordering::SeqCst)
    }

    /// Counts one interrupt as a signal would (tests; the exit at the third
    /// only happens in the signal handler).
    pub fn count_one(&self) {
        self.0.count_one();
    }
}

impl State {
    fn count_one(&self) {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        self.raised.store(true, Ordering::SeqCst);
        if n == EXIT_AT - 1 {
            self.armed.store(true, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raise_is_one_interrupt_and_a_second_insists() {
        let i = Interrupt::never();
        assert!(!i.raised() && !i.insisted());
        i.raise();
        i.raise();
        assert!(
            i.raised() && !i.insisted(),
            "raise() is the first signal only"
        );
        let seen_by_a_clone = i.clone();
        i.count_one();
        assert!(!seen_by_a_clone.insisted());
        i.count_one();
        assert!(seen_by_a_clone.insisted());
        assert!(seen_by_a_clone.0.armed.load(Ordering::SeqCst));
    }
}
