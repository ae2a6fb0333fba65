//! Ctrl-C / SIGTERM: a flag that long-running loops poll, so a run stops within a
//! sampling tick, writes its partial result and exits 130.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone, Debug, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// Registers SIGINT and SIGTERM handlers that raise the flag.
    pub fn install() -> crate::Result<Interrupt> {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, flag.clone()).map_err(|e| {
                crate::Error::runtime(format!("cannot install the signal handler: {e}"))
            })?;
        }
        Ok(Interrupt(flag))
    }

    /// A flag no signal raises (tests, libraries).
    pub fn never() -> Interrupt {
        Interrupt::default()
    }

    pub fn raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub fn raise(&self) {
        self.0.store(true, Ordering::Relaxed)
    }

    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}
