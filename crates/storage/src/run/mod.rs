//! `storage run`: init (or open) the databases, run the transactional load on
//! every instance through warm-up and the measured window, sample the host and
//! the disks, verify, judge, and write the results.

mod intervals;
mod load;
mod progress;
mod result;
mod warmup;
use mailbench_results::storage::wording;

pub use progress::{LineProgress, LiveFigures, Progress};
pub use result::{judge, stopped_before_load};
pub use warmup::{QUICK_MIN_WARMUP, cache_lower_bound, warmup_min, warmup_over};

use crate::engine::{self, Control, Event, Instance, InstanceSetup};
use crate::init::{self, InitSummary, read_header};
use crate::spec::{SpecExt, StorageSpec};
use load::Load;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::{RunDir, TestLog};
use mailbench_base::{Error, Result};
use mailbench_metrics::system::process_cpu_s;
use mailbench_results::storage::run::{IoPath, StorageResult};
use mailbench_results::{RunHeader, Status};
use result::{Ended, finish_early};
use std::io::Write;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::thread::JoinHandle;
use std::time::Instant;
use warmup::announce_warmup;

pub struct RunOutcome {
    pub result: StorageResult,
    pub dir: RunDir,
}

/// Runs the whole `storage run` test. Bad input must have been refused before
/// (`StorageSpec::resolve` + `check_paths`); from here on faults end in a
/// result with a Fail/Error/Interrupted verdict.
pub fn run(
    spec: &StorageSpec,
    dir: &RunDir,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
    ack_stream: bool,
) -> Result<StorageResult> {
    let started = Instant::now();
    let header = RunHeader::begin("storage-run");
    let log = &dir.log;
    log.line(format!(
        "storage run: type {:?}, profile {}, {} databases of {} pages, {} threads, duration {:?}",
        spec.test_type,
        spec.profile.name,
        spec.instances.len(),
        spec.instances.first().map(|i| i.pages).unwrap_or(0),
        spec.threads,
        spec.duration
    ));

    // Phase 1: databases.
    let init = match create_databases(spec, log, interrupt, progress)? {
        Ok(init) => init,
        Err((why, status)) => {
            return finish_early(spec, dir, header, started, &why, status, None);
        }
    };
    let (caps, direct_off) = spec.capabilities(&spec.volumes[0]);
    if let Some(why) = &direct_off {
        log.line(format!("warning: no O_DIRECT: {why}"));
    }
    let setups = instance_setups(spec, caps, ack_stream)?;

    // Phase 2: the load. This process's CPU over the whole load is counted from
    // here: opening the instances maps their caches (faulted in at once).
    let self_cpu0 = process_cpu_s();
    let mut errors = Vec::new();
    let running = match start_instances(setups, log, caps.o_direct, spec.io_threads) {
        Ok(r) => r,
        Err(why) => return finish_early(spec, dir, header, started, &why, Status::Error, init),
    };
    announce_warmup(spec, log, progress, &running.io_engine);
    if let Some(why) = &running.fallback {
        log.line(format!("I/O engine fallback: {why}"));
    }
    let io_path = IoPath {
        asked: spec.io_engine.clone(),
        buffered_asked: spec.buffered_io,
        direct_off,
        fallback: running.fallback.clone(),
    };
    let self_cpu0 = match self_cpu0 {
        Ok(c) => c,
        Err(e) => {
            errors.push(e);
            0.0
        }
    };
    let mut load = Load::new(spec, dir, running.t0, self_cpu0, errors)?;
    load.supervise(spec, dir, &running.ctl, &running.rx, interrupt, progress);
    for h in running.handles {
        // A thread that did not stop in time is left behind (its I/O ends with
        // the process); joining it could wait forever.
        if (!load.gave_up || h.is_finished()) && h.join().is_err() {
            load.errors
                .push("an I/O thread panicked; its databases' figures are partial".into());
        }
    }
    if let Err(e) = load.intervals_file.flush() {
        (load.errors).push(format!(
            "intervals.jsonl: cannot write the last intervals: {e}"
        ));
    }
    let self_cpu = match process_cpu_s() {
        Ok(c) => c - self_cpu0,
        Err(e) => {
            load.errors.push(e);
            0.0
        }
    };
    let io_engine = with_buffer_note(running.io_engine, log);

    // Phase 3: verification.
    let verify_result = load.verify(spec, log, interrupt, progress);
    let ended = Ended {
        header,
        started,
        io_engine,
        o_direct: caps.o_direct,
        io_path,
        init,
        self_cpu,
        verify: verify_result,
    };
    let stall_samples = load.stall_samples;
    let result = load.into_result(spec, ended);
    report_lines(&result, stall_samples, log);
    Ok(result)
}

/// The end of test.log as the published tool ends it: each database's
/// average latencies, then the page-fault stall lines.
fn report_lines(r: &StorageResult, stall_samples: u64, log: &TestLog) {
    let style = r.spec.profile.tool_style;
    for i in &r.instances {
        let avg = |c: &str| i.classes.get(c).map_or(0.0, |x| x.latency_ms.avg);
        let log_read = i
            .classes
            .get("log_read")
            .filter(|x| x.ops > 0)
            .map(|x| x.latency_ms.avg);
        for l in wording::latency_report_lines(
            style,
            &i.name,
            avg("db_read"),
            avg("log_write"),
            log_read,
        ) {
            log.line(l);
        }
    }
    for l in wording::stall_lines(r.total.page_fault_stalls_max_per_s, stall_samples) {
        log.line(l);
    }
}

/// The I/O engine's name, with a few words when io_uring could not register
/// every buffer region (the locked-memory limit); test.log gets the whole note.
fn with_buffer_note(io_engine: String, log: &TestLog) -> String {
    match mailbench_io::uring::fixed_buffers_note() {
        Some(note) => {
            log.line(format!("warning: {note}"));
            let short = mailbench_io::uring::fixed_buffers_short().unwrap_or_default();
            format!("{io_engine}; {short}")
        }
        None => io_engine,
    }
}

/// Creates the databases (or attaches to them): their summary, or why and how
/// the run stopped before its load (an interrupt or a runtime error).
fn create_databases(
    spec: &StorageSpec,
    log: &TestLog,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<std::result::Result<Option<InitSummary>, (String, Status)>> {
    progress.phase("creating databases");
    log.line("phase: database creation / attach");
    let init = match init::init_all(spec, log, interrupt) {
        Ok(s) => s,
        Err(Error::Interrupted) => {
            let why = "interrupted during database creation".to_string();
            return Ok(Err((why, Status::Interrupted)));
        }
        Err(Error::Runtime(m)) => return Ok(Err((m, Status::Error))),
        Err(e) => return Err(e),
    };
    if init.written_bytes > 0 {
        log.line(format!(
            "created {:.0} MB in {:.1} s: {:.0} MB/s",
            init.written_bytes as f64 / 1e6,
            init.seconds,
            init.mb_per_s
        ));
    }
    Ok(Ok(Some(init)))
}

/// The instances opened and running, each on its thread.
struct Running {
    ctl: Arc<Control>,
    rx: Receiver<Event>,
    /// When the instances were opened: the origin of their intervals.
    t0: Instant,
    handles: Vec<JoinHandle<()>>,
    io_engine: String,
    /// Why `auto` did not use io_uring, when it did not.
    fallback: Option<String>,
}

/// Sets the I/O threads' engines up, opens every instance and starts the
/// threads that run them; if an engine cannot be set up or an instance cannot
/// be opened, none runs and the error says why (an engine's before any
/// database is marked in use).
fn start_instances(
    setups: Vec<InstanceSetup>,
    log: &TestLog,
    o_direct: bool,
    io_threads: Option<u32>,
) -> std::result::Result<Running, String> {
    let engines = engine::engines(&setups, io_threads)?;
    let fallback = engines.fallback().map(str::to_string);
    let (tx, rx) = channel::<Event>();
    let ctl = Arc::new(Control::default());
    let t0 = Instant::now();
    let mut opened = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    for s in setups {
        let name = s.name.clone();
        match Instance::open(s, ctl.clone(), tx.clone(), t0) {
            Ok(i) => opened.push(i),
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    drop(tx);
    if !errors.is_empty() {
        drop(opened);
        return Err(errors.join("; "));
    }
    let databases = opened.len();
    let threads = engine::start(opened, engines);
    let n = threads.handles.len();
    log.line(format!(
        "I/O engine {}, O_DIRECT {o_direct}, {n} I/O thread{} for {databases} database{}",
        threads.io_engine,
        if n == 1 { "" } else { "s" },
        if databases == 1 { "" } else { "s" },
    ));
    let (handles, io_engine) = (threads.handles, threads.io_engine);
    Ok(Running {
        ctl,
        rx,
        t0,
        handles,
        io_engine,
        fallback,
    })
}

/// Each instance's setup: its database header read (a database not shut down
/// cleanly is refused: it needs recovery first), its old log files removed.
fn instance_setups(
    spec: &StorageSpec,
    caps: mailbench_io::Capabilities,
    ack_stream: bool,
) -> Result<Vec<InstanceSetup>> {
    let mut setups = Vec::new();
    for inst in &spec.instances {
        let h = read_header(&inst.db_path)?;
        if !h.clean {
            return Err(Error::usage(format!(
                "{} was not shut down cleanly (a crash or kill left it needing log replay); run \
                 `mailbench storage recover --log-files 0` (same flags) to replay its log, or give a new folder",
                inst.db_path.display()
            )));
        }
        // A clean database needs none of its old logs.
        if let Ok(rd) = std::fs::read_dir(&inst.log_dir) {
            for e in rd.flatten() {
                if crate::format::parse_log_file_name(&e.file_name().to_string_lossy()).is_some() {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        setups.push(InstanceSetup {
            target_iops: if spec.paced {
                spec.target_iops.map(|t| t / spec.instances.len() as f64)
            } else {
                None
            },
            ack_stream,
            ..InstanceSetup::of(spec, inst, h, caps.o_direct)
        });
    }
    Ok(setups)
}

/// A spec of one 1 GiB database of `profile`, for the tests.
#[cfg(test)]
fn test_spec(profile: &str) -> StorageSpec {
    use crate::spec::{SpecExt, StorageToml};
    use mailbench_base::config::ConfigFile;
    use std::path::Path;
    let text = format!("[storage]\ndb_size = \"1GiB\"\nprofile = \"{profile}\"\n");
    let c = ConfigFile::parse(&text, Path::new("t.toml")).unwrap();
    StorageSpec::resolve(StorageToml::default(), &c, Path::new("/tmp/x")).unwrap()
}
