//! One database instance at work: sessions running transactions through the
//! buffer cache and the log, write-back and checkpoints, background maintenance
//! and log replication reads — all driven by a loop over an asynchronous I/O
//! engine. Sessions are state machines, not threads: a session waits for its page
//! reads or its commit while the loop serves the others (as ESE's sessions do).
//! One I/O thread runs the loops of several instances over one shared engine
//! when there are more instances than CPUs ([`group`]).
//!
//! The I/O shape the run reports is not configured anywhere: it emerges from the
//! cache misses of the transactions, the write-back of dirty pages, the group
//! commits of the log and the maintenance and replication streams.
//!
//! * this file: the instance, one turn of its loop, I/O completions and measurement;
//! * [`group`]: the I/O threads, each running the turns of its instances;
//! * [`sessions`]: transactions — planning, page reads, changes, commits, pacing;
//! * [`flusher`]: the log flushes, write-back of dirty pages and checkpoints;
//! * [`maintenance`]: background maintenance reads and log replication reads;
//! * [`zipf`]: which mailbox a transaction works on (the hot-mailbox draw).
//!
//! The hot path allocates nothing per I/O: a missing page is read straight into
//! its cache frame, other I/O buffers come from a [`BufPool`] and go back to it
//! with their completions, and log records are encoded straight into the log's
//! blocks (docs/ARCHITECTURE.md, "Performance notes").

mod flusher;
mod group;
mod maintenance;
mod sessions;
mod zipf;

use crate::cache::Cache;
use crate::format::{self, DbHeader};
use crate::log::{LogFiles, LogWriter};
use crate::profile::Profile;
use mailbench_base::{Error, Result};
use mailbench_io::{AlignedBuf, BufPool, EngineChoice, IoCompletion, IoRequest};
use mailbench_results::storage::stats::Stats;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

pub use group::{IoEngines, IoThreads, engines, start};

/// Everything one instance needs to run.
#[derive(Debug, Clone)]
pub struct InstanceSetup {
    pub index: usize,
    pub name: String,
    pub db_path: PathBuf,
    pub log_dir: PathBuf,
    pub header: DbHeader,
    pub profile: Profile,
    pub cache_min_frames: usize,
    pub cache_max_frames: usize,
    pub sessions: usize,
    pub mailboxes: u64,
    pub copies: u32,
    /// Paced open loop at this many transactional IOPS for this instance.
    pub target_iops: Option<f64>,
    pub engine: EngineChoice,
    pub direct: bool,
    pub sample_interval: Duration,
    pub seed: u64,
    /// Print `ACK <instance> <txn> <lsn>` on stdout for each acknowledged durable
    /// commit (the crash-consistency harness reads it).
    pub ack_stream: bool,
}

impl InstanceSetup {
    /// Instance `inst` of `spec` as a run sets it up: the profile's cache in
    /// frames, the spec's copies and sampling interval, unpaced, no ack stream.
    pub fn of(
        spec: &crate::spec::StorageSpec,
        inst: &crate::spec::InstanceSpec,
        header: DbHeader,
        direct: bool,
    ) -> InstanceSetup {
        use crate::spec::SpecExt;
        let ps = spec.profile.page_size.0 as usize;
        let max_frames = (spec.cache_max_per_db as usize / ps).max(64);
        InstanceSetup {
            index: inst.index,
            name: inst.name.clone(),
            db_path: inst.db_path.clone(),
            log_dir: inst.log_dir.clone(),
            header,
            profile: spec.profile.clone(),
            cache_min_frames: (spec.cache_min_per_db as usize / ps).min(max_frames),
            cache_max_frames: max_frames,
            sessions: inst.sessions,
            mailboxes: inst.mailboxes,
            copies: spec.copies,
            target_iops: None,
            engine: spec.engine_choice(),
            direct,
            sample_interval: spec.sample_interval,
            seed: spec.seed.wrapping_add(inst.index as u64 * 7919),
            ack_stream: false,
        }
    }
}

/// Shared stop switches.
#[derive(Debug, Default)]
pub struct Control {
    /// Stop starting transactions, finish, write everything back, shut down clean.
    pub stop: AtomicBool,
    /// Stop now: finish in-flight I/O, flush the log, leave pages dirty (recovery needed).
    pub abort: AtomicBool,
    /// Soft-recovery test: keep the checkpoint where it is (no checkpoint file
    /// updates, no log files removed) so every new log file must be replayed.
    pub hold_checkpoint: AtomicBool,
    /// Bytes of pages the database caches of all instances hold (each instance
    /// adds its changes): what the warm-up waits for.
    pub cached_bytes: AtomicU64,
    /// When the measured window starts, in milliseconds after the run's start
    /// (0: not yet known). Every instance ends a sampling interval at that
    /// moment, so the window starts on an interval boundary.
    pub window_start_ms: AtomicU64,
}

impl Control {
    /// Schedules the measured window's start `at` after the run's start.
    pub fn start_window_at(&self, at: Duration) {
        let ms = u64::try_from(at.as_millis()).unwrap_or(u64::MAX).max(1);
        self.window_start_ms.store(ms, Ordering::Relaxed);
    }
}

/// Messages from an instance thread to the run's collector.
#[derive(Debug)]
pub enum Event {
    Interval {
        instance: usize,
        seq: u64,
        end_s: f64,
        stats: Box<Stats>,
    },
    Error {
        instance: usize,
        message: String,
    },
    Finished {
        instance: usize,
        clean: bool,
        io_engine: String,
        /// How the log came by its generation files.
        log_files: LogFiles,
    },
}

/// I/Os in flight at most: this many per session, plus room for write-back,
/// the log and the background streams, up to a ceiling.
const IO_DEPTH_PER_SESSION: usize = 4;
const IO_DEPTH_EXTRA: usize = 64;
const IO_DEPTH_MAX: usize = 1024;
/// How long an aborting instance may take to finish its I/O in flight.
pub const ABORT_DRAIN: Duration = Duration::from_millis(1500);
/// The longest the loop waits with nothing to do and no timer due (stop switches
/// are seen at least this often).
const IDLE_WAIT: Duration = Duration::from_millis(50);
/// I/O buffers kept for reuse per size class.
const BUFFERS_KEPT: usize = 32;

// The kind of an I/O in its tag's top byte; below it, a slab id or stream index
// (under bit 48: the byte between is the instance's place on its I/O thread).
const TAG_SHIFT: u64 = 56;
const ID_BITS: u32 = 48;
const K_PAGE_READ: u64 = 1;
const K_PAGE_WRITE: u64 = 2;
const K_LOG_WRITE: u64 = 3;
const K_REPL_READ: u64 = 4;
const K_MAINT_READ: u64 = 5;
const K_SYNC: u64 = 6;

fn tag(kind: u64, id: usize) -> u64 {
    debug_assert!(
        (id as u64) < 1 << ID_BITS,
        "I/O id {id} over {ID_BITS} bits"
    );
    (kind << TAG_SHIFT) | id as u64
}

/// An instance's side of its thread's shared I/O engine: the requests it queued
/// this turn (the thread hands them over after the turn) and how many of its
/// requests are queued or in flight.
struct Outbox {
    queued: Vec<IoRequest>,
    in_flight: usize,
    /// The most I/Os the instance may have in flight: its share of its
    /// thread's engine ([`io_depth`]).
    depth: usize,
}

impl Outbox {
    fn new(depth: usize) -> Outbox {
        Outbox {
            queued: Vec::new(),
            in_flight: 0,
            depth,
        }
    }

    fn submit(&mut self, req: IoRequest) {
        invariant!(
            self.in_flight < self.depth,
            "I/O in flight beyond the instance's depth of {}",
            self.depth
        );
        self.in_flight += 1;
        self.queued.push(req);
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }
}

/// What an instance's turn asks of its thread's wait: how many completions to
/// wait for (0 or 1), for how long at most, whether to turn again at once, and
/// whether it is aborting (its requests go at once, never held).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Plan {
    min: usize,
    timeout: Duration,
    at_once: bool,
    aborting: bool,
}

/// The I/Os an instance of `s` may have in flight at most: its share of its
/// thread's engine.
fn io_depth(s: &InstanceSetup) -> usize {
    (s.sessions * IO_DEPTH_PER_SESSION + IO_DEPTH_EXTRA).min(IO_DEPTH_MAX)
}

/// A tiny slab: ids stay stable while an operation is in flight.
struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Slab<T> {
    fn new() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
    fn insert(&mut self, v: T) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.items[i] = Some(v);
                i
            }
            None => {
                self.items.push(Some(v));
                self.items.len() - 1
            }
        }
    }
    fn remove(&mut self, i: usize) -> Option<T> {
        let v = self.items.get_mut(i)?.take();
        if v.is_some() {
            self.free.push(i);
        }
        v
    }
}

/// The instance: its files, cache, log, sessions and measurements.
pub struct Instance {
    s: InstanceSetup,
    ctl: Arc<Control>,
    events: Sender<Event>,
    io: Outbox,
    db: Arc<File>,
    ps: usize,
    cache: Cache,
    log: LogWriter,
    pool: BufPool,
    rng: SmallRng,
    work: sessions::Workload,
    pacing: sessions::Pacing,
    wb: flusher::WriteBack,
    ckpt: flusher::Checkpoints,
    bg: maintenance::Background,
    // Measurement.
    interval: Stats,
    total_ios: u64,
    total_txns: u64,
    t0: Instant,
    next_tick: Instant,
    seq: u64,
    failed: bool,
    /// Cached bytes last added to [`Control::cached_bytes`].
    published_cache: u64,
    /// The measured window's start, once known, and whether an interval
    /// ended there.
    window_at: Option<Instant>,
    window_cut: bool,
    /// When an aborting instance stops waiting for its I/O in flight.
    abort_deadline: Option<Instant>,
}

impl Instance {
    pub fn open(
        s: InstanceSetup,
        ctl: Arc<Control>,
        events: Sender<Event>,
        t0: Instant,
    ) -> Result<Instance> {
        let db = mailbench_io::open_file(&s.db_path, false, s.direct, false)
            .map_err(|e| Error::io("cannot open database", &s.db_path, e))?;
        let ps = s.profile.page_size.0 as usize;
        let start_gen = next_generation(&s.log_dir);
        let block = crate::log::log_sector(&s.log_dir, s.profile.log_sector_size.0, s.direct);
        let mut log = LogWriter::create(
            &s.log_dir,
            s.header.db_id,
            s.profile.log_file_size.0,
            block,
            start_gen,
            s.direct,
        )?;
        log.set_legacy(
            s.profile.log_writer == mailbench_results::storage::spec::LogWriterKind::Legacy,
        );
        let mut s = s;
        s.header.log_sector = block as u32;
        let now = Instant::now();
        let checkpoint_lsn = log.next_lsn();
        let ckpt = flusher::Checkpoints::new(now, checkpoint_lsn, &log, &s.log_dir);
        let mut inst = Instance {
            ps,
            db: Arc::new(db),
            io: Outbox::new(io_depth(&s)),
            cache: Cache::new(
                s.cache_min_frames,
                s.cache_max_frames,
                ps,
                s.header.page_count,
            ),
            log,
            pool: BufPool::new(BUFFERS_KEPT),
            rng: SmallRng::seed_from_u64(s.seed),
            work: sessions::Workload::new(&s),
            pacing: sessions::Pacing::new(t0, now),
            wb: flusher::WriteBack::new(&s, block, now),
            ckpt,
            bg: maintenance::Background::new(s.copies, now),
            interval: Stats::default(),
            total_ios: 0,
            total_txns: 0,
            t0,
            next_tick: t0 + s.sample_interval,
            seq: 0,
            failed: false,
            published_cache: 0,
            window_at: None,
            window_cut: false,
            abort_deadline: None,
            s,
            ctl,
            events,
        };
        // The checkpoint first (a crash before the header changes leaves a clean
        // database whose checkpoint is the new, empty log), then mark the database
        // in use: a crash from here on leaves it needing recovery.
        inst.write_checkpoint(checkpoint_lsn)?;
        inst.write_header(false)?;
        inst.prefill_write_buffers();
        inst.prefill_read_buffers();
        Ok(inst)
    }

    fn write_header(&mut self, clean: bool) -> Result<()> {
        let mut h = self.s.header.clone();
        h.clean = clean;
        let mut buf = AlignedBuf::new(self.ps);
        h.encode(buf.as_mut_slice());
        use std::os::unix::fs::FileExt;
        self.db
            .write_at(buf.as_slice(), 0)
            .and_then(|_| self.db.sync_data())
            .map_err(|e| Error::io("cannot write the header of", &self.s.db_path, e))
    }

    fn record_error(&mut self, message: String) {
        if !self.failed {
            let _ = self.events.send(Event::Error {
                instance: self.s.index,
                message,
            });
        }
        self.failed = true;
    }

    fn accepting(&self) -> bool {
        !self.failed
            && !self.ctl.stop.load(Ordering::Relaxed)
            && !self.ctl.abort.load(Ordering::Relaxed)
    }

    /// One turn of the loop: serves what is due, then says how its thread
    /// should wait; None once the instance is done (call [`Instance::finish`]).
    /// The requests the turn queued are in `self.io` for the thread to hand over.
    fn turn(&mut self, now: Instant) -> Option<Plan> {
        let aborting = self.ctl.abort.load(Ordering::Relaxed) || self.failed;
        if aborting && self.abort_deadline.is_none() {
            self.abort_deadline = Some(now + ABORT_DRAIN);
        }
        let progressed = self.step(now, aborting);
        let overdue = self.abort_deadline.is_some_and(|d| now >= d);
        if self.finished(aborting, overdue) {
            return None;
        }
        let (min, timeout, at_once) = self.wait_plan(now, progressed, aborting);
        Some(Plan {
            min,
            timeout,
            at_once,
            aborting,
        })
    }

    /// Serves a batch of this instance's completions (emptied).
    fn completed(&mut self, done: &mut Vec<IoCompletion>) {
        assert!(
            done.len() <= self.io.in_flight,
            "{}: {} completions for {} requests in flight",
            self.s.name,
            done.len(),
            self.io.in_flight
        );
        self.io.in_flight -= done.len();
        prefetch_pages_read(done);
        for c in done.drain(..) {
            self.complete(c);
        }
    }

    /// After the last turn: the checkpoint thread ends, the database is shut
    /// down (clean unless aborted or failed), and the collector hears of it.
    /// Returns whether the database was shut down clean.
    fn finish(mut self, io_engine: &str) -> bool {
        self.finish_checkpoint_files();
        let clean =
            !self.failed && !self.ctl.abort.load(Ordering::Relaxed) && self.shutdown_clean();
        self.emit_interval(Instant::now());
        let _ = self.events.send(Event::Finished {
            instance: self.s.index,
            clean,
            io_engine: io_engine.to_string(),
            log_files: self.log.counts,
        });
        clean
    }

    /// One turn of the loop: start and resume transactions, then everything
    /// that runs beside them. Returns whether a session moved on.
    fn step(&mut self, now: Instant, aborting: bool) -> bool {
        let mut progressed = false;
        if self.accepting() {
            progressed |= self.start_transactions(now);
        }
        progressed |= self.retry_stalled();
        self.drive_log(now, aborting);
        if !aborting {
            self.drive_writeback();
            self.drive_checkpoint(now);
        }
        // Background streams only while transactions run: a stopping instance
        // must not keep generating the I/O its shutdown waits to reach zero.
        if self.accepting() {
            self.drive_maintenance(now);
            self.drive_replication();
        }
        self.publish_cache();
        self.learn_window_start();
        if now >= self.next_tick {
            self.emit_interval(now);
        }
        progressed
    }

    /// Adds this instance's change of cached bytes to the run's total.
    fn publish_cache(&mut self) {
        let now = (self.cache.resident() * self.ps) as u64;
        if now != self.published_cache {
            if now > self.published_cache {
                self.ctl
                    .cached_bytes
                    .fetch_add(now - self.published_cache, Ordering::Relaxed);
            } else {
                self.ctl
                    .cached_bytes
                    .fetch_sub(self.published_cache - now, Ordering::Relaxed);
            }
            self.published_cache = now;
        }
    }

    /// Once the run scheduled the measured window, ends the current sampling
    /// interval at its start (the intervals after it follow from there).
    fn learn_window_start(&mut self) {
        if self.window_cut {
            return;
        }
        if self.window_at.is_none() {
            let ms = self.ctl.window_start_ms.load(Ordering::Relaxed);
            if ms == 0 {
                return;
            }
            self.window_at = Some(self.t0 + Duration::from_millis(ms));
        }
        if let Some(at) = self.window_at
            && at < self.next_tick
        {
            self.next_tick = at;
        }
    }

    /// Whether the loop is done: an abort once quiet (or out of time), a stop
    /// once every transaction is finished and everything appended is written back.
    fn finished(&self, aborting: bool, abort_overdue: bool) -> bool {
        if aborting {
            let quiet = self.io.in_flight() == 0 && !self.log.writing();
            return quiet || abort_overdue;
        }
        !self.accepting()
            && !self.any_session_busy()
            && self.log.unflushed() == 0
            && !self.log.writing()
            && !self.commits_waiting()
            && self.cache.dirty_count() == 0
            && self.cache.writing_count() == 0
            && self.io.in_flight() == 0
    }

    /// How long to wait for completions, and for how many: not at all after
    /// progress when a transaction could start at once (else the wait's system
    /// call also hands over what the step queued); else for one I/O if any is in flight, until the next timer is
    /// due — the interval, a paced transaction (if a session is free to run it),
    /// a log flush, a checkpoint, a maintenance read — or [`IDLE_WAIT`]. No
    /// polling: an idle or paced instance wakes only when it has work. An
    /// aborting instance only waits for its I/O in flight. The third value:
    /// the loop turns again at once (progress, and a transaction can start or
    /// the instance is aborting).
    fn wait_plan(&self, now: Instant, progressed: bool, aborting: bool) -> (usize, Duration, bool) {
        if progressed && (aborting || self.can_start_now(now)) {
            return (0, Duration::ZERO, true);
        }
        let timers = !aborting;
        let due = [
            Some(self.next_tick),
            self.next_paced_start(),
            self.next_log_flush_due().filter(|_| timers),
            self.next_checkpoint_due().filter(|_| timers),
            self.next_maintenance_due()
                .filter(|_| timers && self.accepting()),
        ];
        let t = due
            .into_iter()
            .flatten()
            .map(|at| at.saturating_duration_since(now))
            .fold(IDLE_WAIT, Duration::min);
        (usize::from(self.io.in_flight() > 0), t, false)
    }

    fn complete(&mut self, c: IoCompletion) {
        let kind = c.tag >> TAG_SHIFT;
        let id = (c.tag & ((1 << TAG_SHIFT) - 1)) as usize;
        match kind {
            K_PAGE_READ => self.page_read_done(id, c),
            K_PAGE_WRITE => self.page_write_done(id, c),
            K_LOG_WRITE => self.log_write_done(c),
            K_REPL_READ => self.replication_done(id, c),
            K_MAINT_READ => self.maintenance_done(c),
            K_SYNC => self.checkpoint_synced(&c),
            _ => {}
        }
    }

    fn emit_interval(&mut self, now: Instant) {
        self.seq += 1;
        let mut stats = std::mem::take(&mut self.interval);
        stats.counters.cache_frames = self.cache.len() as u64;
        stats.counters.dirty_pages = self.cache.dirty_count() as u64;
        stats.counters.checkpoint_depth_bytes = self.checkpoint_depth();
        if self.window_at.is_some_and(|at| now >= at) {
            self.window_cut = true;
        }
        let end_s = now.duration_since(self.t0).as_secs_f64();
        let _ = self.events.send(Event::Interval {
            instance: self.s.index,
            seq: self.seq,
            end_s,
            stats: Box::new(stats),
        });
        while self.next_tick <= now {
            self.next_tick += self.s.sample_interval;
        }
    }
}

/// The first bytes of each page read in a batch of completions, prefetched
/// before the batch is served: a page that arrived by DMA is not in the CPU's
/// caches, and its check's first reads stalled on it one page after another;
/// hinted together, the waits overlap (the rest of the page streams in behind).
fn prefetch_pages_read(done: &[IoCompletion]) {
    const AHEAD: usize = 1024;
    for c in done.iter().filter(|c| c.tag >> TAG_SHIFT == K_PAGE_READ) {
        for b in std::iter::once(&c.buf).chain(&c.more) {
            let b = b.as_slice();
            mailbench_io::prefetch(&b[..b.len().min(AHEAD)]);
        }
    }
}

fn io_error_text(what: &str, path: &std::path::Path, offset: u64, errno: i32) -> String {
    let e = std::io::Error::from_raw_os_error(errno);
    format!(
        "I/O error {what} {} at offset {offset}: {e}",
        path.display()
    )
}

/// The generation after the newest log file in `dir` and after the checkpoint's
/// (1 for an empty folder), so a new run never reuses the names, nor the LSNs,
/// of an earlier run's logs (pages keep the LSNs of earlier runs).
pub fn next_generation(dir: &std::path::Path) -> u64 {
    let ckpt = std::fs::read(dir.join("checkpoint.chk"))
        .ok()
        .and_then(|b| format::Checkpoint::decode(&b).ok())
        .map(|c| c.checkpoint_lsn / c.log_file_size.max(1) + 1)
        .unwrap_or(1);
    next_log_file(dir).max(ckpt)
}

fn next_log_file(dir: &std::path::Path) -> u64 {
    let newest = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| format::parse_log_file_name(&e.file_name().to_string_lossy()))
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    newest + 1
}

#[cfg(all(test, any(debug_assertions, feature = "invariants")))]
mod tests {
    use super::*;

    /// An instance never has more I/O in flight than its share of its
    /// thread's engine: a request past it breaks an invariant.
    #[test]
    #[should_panic(expected = "I/O in flight beyond the instance's depth of 1")]
    fn io_past_the_depth_breaks_an_invariant() {
        let f = Arc::new(tempfile::tempfile().unwrap());
        let req = || IoRequest {
            file: f.clone(),
            kind: mailbench_io::OpKind::Sync,
            offset: 0,
            buf: AlignedBuf::empty(),
            tag: 0,
            more: Vec::new(),
        };
        let mut o = Outbox::new(1);
        o.submit(req());
        o.submit(req());
    }
}
