//! The test's log generation: the transactional load runs on every instance
//! with the checkpoint held until each has written the log files asked for,
//! then stops as a crash would (the log flushed, dirty pages left unwritten).

use super::GenerateResult;
use crate::engine::{Control, Event, Instance, InstanceSetup};
use crate::init::read_header;
use crate::spec::{InstanceSpec, StorageSpec};
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::TestLog;
use mailbench_base::{Error, Result};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Runs the load with the checkpoint held until every instance has written
/// `log_files` new generations, then stops as a crash would.
pub(super) fn generate(
    spec: &StorageSpec,
    log_files: u64,
    log: &TestLog,
    interrupt: &Interrupt,
) -> Result<(Vec<GenerateResult>, Vec<String>, bool)> {
    let caps = mailbench_io::probe(&spec.volumes[0]);
    let setups = (spec.instances.iter())
        .map(|inst| instance_setup(spec, inst, caps.o_direct))
        .collect::<Result<Vec<_>>>()?;
    // The engines first: opening an instance marks its database in use.
    let engines = crate::engine::engines(&setups, spec.io_threads).map_err(Error::runtime)?;
    let (tx, rx) = channel::<Event>();
    let ctl = Arc::new(Control::default());
    ctl.hold_checkpoint.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    let mut errors = Vec::new();
    let mut opened = Vec::new();
    for setup in setups {
        let name = setup.name.clone();
        match Instance::open(setup, ctl.clone(), tx.clone(), t0) {
            Ok(i) => opened.push(i),
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    drop(tx);
    let out: Vec<GenerateResult> = spec
        .instances
        .iter()
        .map(|i| GenerateResult {
            name: i.name.clone(),
            ..Default::default()
        })
        .collect();
    if !errors.is_empty() {
        ctl.abort.store(true, Ordering::Relaxed);
    }
    let handles = crate::engine::start(opened, engines).handles;
    let mut g = Generation {
        out,
        finished: vec![false; spec.instances.len()],
        errors,
        interrupted: false,
        last_note: Instant::now(),
        t0,
    };
    g.watch(&rx, &ctl, log_files, log, interrupt);
    for h in handles {
        if let Err(e) = mailbench_base::thread::join(h, "log generator") {
            g.errors.push(e);
        }
    }
    for r in &g.out {
        log.line(format!(
            "{}: {} log files, {} transactions in {:.1} s",
            r.name, r.log_files, r.transactions, r.seconds
        ));
    }
    Ok((g.out, g.errors, g.interrupted))
}

/// The load of one instance for the test: its database as it is, one copy,
/// the checkpoint held by the shared control.
fn instance_setup(spec: &StorageSpec, inst: &InstanceSpec, direct: bool) -> Result<InstanceSetup> {
    let h = read_header(&inst.db_path)?;
    Ok(InstanceSetup {
        copies: 1,
        sample_interval: Duration::from_millis(250),
        ..InstanceSetup::of(spec, inst, h, direct)
    })
}

/// The generation under way: log files and transactions per instance, the
/// instances finished, the errors met.
struct Generation {
    out: Vec<GenerateResult>,
    finished: Vec<bool>,
    errors: Vec<String>,
    interrupted: bool,
    last_note: Instant,
    t0: Instant,
}

impl Generation {
    /// Follows the instances' events until every instance has finished (or
    /// every sender is gone), stopping them as a crash would once each has
    /// written `log_files` log files, on an error, or when interrupted.
    fn watch(
        &mut self,
        rx: &Receiver<Event>,
        ctl: &Control,
        log_files: u64,
        log: &TestLog,
        interrupt: &Interrupt,
    ) {
        loop {
            if !ctl.abort.load(Ordering::Relaxed) {
                let enough = self.out.iter().all(|g| g.log_files >= log_files);
                if interrupt.raised() {
                    self.interrupted = true;
                }
                if enough || self.interrupted || !self.errors.is_empty() {
                    // A crash: stop now, the log flushed, dirty pages left unwritten.
                    ctl.abort.store(true, Ordering::Relaxed);
                }
            }
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(ev) => self.event(ev, log),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if self.last_note.elapsed() > Duration::from_secs(10) {
                self.last_note = Instant::now();
                log.line(format!(
                    "log files so far: {}",
                    self.out
                        .iter()
                        .map(|g| format!("{} {}", g.name, g.log_files))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if self.finished.iter().all(|f| *f) {
                break;
            }
        }
    }

    /// Takes in one event of an instance.
    fn event(&mut self, ev: Event, log: &TestLog) {
        match ev {
            Event::Interval {
                instance, stats, ..
            } => {
                if let Some(g) = self.out.get_mut(instance) {
                    g.log_files += stats.counters.log_generations;
                    g.transactions += stats.counters.transactions;
                    g.seconds = self.t0.elapsed().as_secs_f64();
                }
            }
            Event::Error { instance, message } => {
                log.line(format!("error in instance {instance}: {message}"));
                self.errors.push(message);
            }
            Event::Finished { instance, .. } => {
                if let Some(f) = self.finished.get_mut(instance) {
                    *f = true;
                }
            }
        }
    }
}
