//! One database instance at work: sessions running transactions through the
//! buffer cache and the log, write-back and checkpoints, background maintenance
//! and log replication reads — all driven by one thread over an asynchronous I/O
//! engine. Sessions are state machines, not threads: a session waits for its page
//! reads or its commit while the loop serves the others (as ESE's sessions do).
//!
//! The I/O shape the run reports is not configured anywhere: it emerges from the
//! cache misses of the transactions, the write-back of dirty pages, the group
//! commits of the log and the maintenance and replication streams.

use crate::cache::{Cache, FrameState};
use crate::format::{self, DbHeader, PAGE_HEADER, Record};
use crate::log::LogWriter;
use crate::profile::Profile;
use crate::stats::{Class, Stats};
use mailbench_base::{Error, Result};
use mailbench_io::{AlignedBuf, EngineChoice, IoCompletion, IoEngine, IoRequest, OpKind};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use rand_distr::{Distribution, Zipf};
use std::collections::VecDeque;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

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
    },
}

const TAG_SHIFT: u64 = 56;
const K_PAGE_READ: u64 = 1;
const K_PAGE_WRITE: u64 = 2;
const K_LOG_WRITE: u64 = 3;
const K_REPL_READ: u64 = 4;
const K_MAINT_READ: u64 = 5;
const K_SYNC: u64 = 6;

fn tag(kind: u64, id: usize) -> u64 {
    (kind << TAG_SHIFT) | id as u64
}

/// A tiny slab: ids stay stable while an operation is in flight.
struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<usize>,
    len: usize,
}

impl<T> Slab<T> {
    fn new() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
    fn insert(&mut self, v: T) -> usize {
        self.len += 1;
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
            self.len -= 1;
        }
        v
    }
}

#[derive(Debug, Clone, Copy)]
struct Touch {
    page: u64,
    /// Bytes this transaction changes on the page (0 = read only).
    modify: u32,
    /// The next touch is the following page: read both in one I/O if missing.
    run_with_next: bool,
}

struct Txn {
    id: u64,
    intended: Instant,
    touches: Vec<Touch>,
    next: usize,
    frames: Vec<usize>,
    pending: u32,
    durable: bool,
    stalled_counted: bool,
    /// (page, end LSN of its update record), kept for the ACK stream only.
    logged: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SState {
    Idle,
    Fetching,
    Stalled,
    Committing,
}

struct Session {
    state: SState,
    txn: Option<Txn>,
}

struct PageRead {
    frames: Vec<usize>,
    first_page: u64,
    intended: Option<Instant>,
}

struct PageWrite {
    frames: Vec<usize>,
}

struct ReplStream {
    queue: VecDeque<u64>,
    current: Option<(u64, u64)>,
    in_flight: bool,
}

struct MaintRead {
    first_page: u64,
    pages: u64,
    write_seq: u64,
}

/// The instance: its files, cache, log, sessions and measurements.
pub struct Instance {
    s: InstanceSetup,
    ctl: Arc<Control>,
    events: Sender<Event>,
    io: Box<dyn IoEngine>,
    db: Arc<File>,
    ps: usize,
    cache: Cache,
    log: LogWriter,
    sessions: Vec<Session>,
    reads: Slab<PageRead>,
    writes: Slab<PageWrite>,
    commit_waiters: Vec<(u64, usize)>,
    rng: SmallRng,
    zipf: Option<Zipf<f64>>,
    pages_per_mailbox: u64,
    next_txn: u64,
    // Pacing.
    next_intended: Instant,
    txn_rate: Option<f64>,
    ios_per_txn: f64,
    rate_at: Instant,
    rate_ios: u64,
    rate_txns: u64,
    // Write-back.
    flushing: bool,
    flush_start: usize,
    flush_stop: usize,
    write_ios: usize,
    max_write_ios: usize,
    write_seq: u64,
    recent_writes: VecDeque<(u64, u64, u64)>,
    last_log_flush: Instant,
    log_write_started: Option<Instant>,
    // Checkpoint.
    sync_in_flight: Option<u64>,
    last_checkpoint: Instant,
    checkpoint_lsn: u64,
    // Background streams.
    maint_cursor: u64,
    maint_next: Instant,
    maint: Option<MaintRead>,
    repl: Vec<ReplStream>,
    // Measurement.
    interval: Stats,
    total_ios: u64,
    total_txns: u64,
    t0: Instant,
    next_tick: Instant,
    seq: u64,
    failed: bool,
    scratch: Vec<u8>,
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
        let caps = mailbench_io::Capabilities {
            o_direct: s.direct,
            uring: mailbench_io::uring::available(),
        };
        let depth = (s.sessions * 4 + 64).min(1024);
        let io = mailbench_io::build(s.engine, caps, depth).map_err(Error::runtime)?;
        let ps = s.profile.page_size.0 as usize;
        let start_gen = next_generation(&s.log_dir);
        let log = LogWriter::create(
            &s.log_dir,
            s.header.db_id,
            s.profile.log_file_size.0,
            start_gen,
            s.direct,
        )?;
        let cache = Cache::new(s.cache_min_frames, s.cache_max_frames, ps);
        let data_pages = s.header.page_count.saturating_sub(1).max(1);
        let mailboxes = s.mailboxes.clamp(1, data_pages);
        let zipf = if s.profile.hot_mailbox_skew > 0.0 && mailboxes > 1 {
            Zipf::new(mailboxes as f64, s.profile.hot_mailbox_skew).ok()
        } else {
            None
        };
        let max = s.cache_max_frames;
        let flush_start = ((max as f64) * s.profile.flush_start_pct / 100.0) as usize;
        let flush_stop = ((max as f64) * s.profile.flush_stop_pct / 100.0) as usize;
        let sessions = (0..s.sessions.max(1))
            .map(|_| Session {
                state: SState::Idle,
                txn: None,
            })
            .collect();
        let repl = (1..s.copies)
            .map(|_| ReplStream {
                queue: VecDeque::new(),
                current: None,
                in_flight: false,
            })
            .collect();
        let rng = SmallRng::seed_from_u64(s.seed);
        let now = Instant::now();
        let checkpoint_lsn = log.next_lsn();
        let mut inst = Instance {
            pages_per_mailbox: (data_pages / mailboxes).max(1),
            ps,
            db: Arc::new(db),
            io,
            cache,
            log,
            sessions,
            reads: Slab::new(),
            writes: Slab::new(),
            commit_waiters: Vec::new(),
            rng,
            zipf,
            next_txn: 1,
            next_intended: t0,
            txn_rate: None,
            ios_per_txn: 3.0,
            rate_at: now,
            rate_ios: 0,
            rate_txns: 0,
            flushing: false,
            flush_start: flush_start.max(1),
            flush_stop,
            write_ios: 0,
            max_write_ios: 16,
            write_seq: 0,
            recent_writes: VecDeque::new(),
            last_log_flush: now,
            log_write_started: None,
            sync_in_flight: None,
            last_checkpoint: now,
            checkpoint_lsn,
            maint_cursor: 1,
            maint_next: now,
            maint: None,
            repl,
            interval: Stats::default(),
            total_ios: 0,
            total_txns: 0,
            t0,
            next_tick: t0 + s.sample_interval,
            seq: 0,
            failed: false,
            scratch: Vec::new(),
            s,
            ctl,
            events,
        };
        // The checkpoint first (a crash before the header changes leaves a clean
        // database whose checkpoint is the new, empty log), then mark the database
        // in use: a crash from here on leaves it needing recovery.
        inst.write_checkpoint(checkpoint_lsn)?;
        inst.write_header(false)?;
        Ok(inst)
    }

    pub fn io_engine_name(&self) -> String {
        self.io.name()
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

    fn write_checkpoint(&mut self, lsn: u64) -> Result<()> {
        let c = format::Checkpoint {
            db_id: self.s.header.db_id,
            checkpoint_lsn: lsn,
            first_generation: lsn / self.log.file_size(),
            log_file_size: self.log.file_size(),
        };
        mailbench_base::rundir::write_atomic(&self.s.log_dir.join("checkpoint.chk"), &c.encode())?;
        self.checkpoint_lsn = lsn;
        Ok(())
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

    /// Runs until stopped; returns whether the database was shut down clean.
    pub fn run(mut self) -> bool {
        let mut done = Vec::with_capacity(256);
        let mut abort_deadline: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let aborting = self.ctl.abort.load(Ordering::Relaxed) || self.failed;
            if aborting && abort_deadline.is_none() {
                abort_deadline = Some(now + Duration::from_millis(1500));
            }
            let mut progressed = false;
            if self.accepting() {
                progressed |= self.start_transactions(now);
            }
            progressed |= self.retry_stalled();
            self.drive_log(now, aborting);
            if !aborting {
                self.drive_writeback();
                self.drive_checkpoint(now);
                self.drive_maintenance(now);
                self.drive_replication();
            }
            if now >= self.next_tick {
                self.emit_interval(now);
            }
            let busy_sessions = self.sessions.iter().any(|s| s.state != SState::Idle);
            if aborting {
                let quiet = self.io.in_flight() == 0 && !self.log.writing();
                if quiet || abort_deadline.is_some_and(|d| now >= d) {
                    break;
                }
            } else if !self.accepting() && !busy_sessions {
                // Clean shutdown once every transaction is finished and everything
                // appended is written back.
                if self.log.unflushed() == 0
                    && !self.log.writing()
                    && self.commit_waiters.is_empty()
                    && self.cache.dirty_count() == 0
                    && self.cache.writing_count() == 0
                    && self.io.in_flight() == 0
                {
                    break;
                }
            }
            let timeout = if progressed {
                Duration::ZERO
            } else {
                let mut t = self
                    .next_tick
                    .saturating_duration_since(now)
                    .min(Duration::from_millis(5));
                if self.txn_rate.is_some() && self.accepting() {
                    t = t.min(self.next_intended.saturating_duration_since(now));
                }
                t
            };
            let min = usize::from(!progressed && self.io.in_flight() > 0);
            done.clear();
            self.io.wait(min, Some(timeout), &mut done);
            for c in done.drain(..) {
                self.complete(c);
            }
        }
        let clean =
            !self.failed && !self.ctl.abort.load(Ordering::Relaxed) && self.shutdown_clean();
        self.emit_interval(Instant::now());
        let _ = self.events.send(Event::Finished {
            instance: self.s.index,
            clean,
            io_engine: self.io.name(),
        });
        clean
    }

    fn shutdown_clean(&mut self) -> bool {
        let lsn = self.log.durable_lsn();
        let r = self
            .db
            .sync_data()
            .map_err(|e| Error::io("cannot sync", &self.s.db_path, e));
        let r = r
            .and_then(|_| self.write_checkpoint(lsn))
            .and_then(|_| self.write_header(true));
        match r {
            Ok(()) => {
                self.log.remove_before(lsn / self.log.file_size());
                true
            }
            Err(e) => {
                self.record_error(e.to_string());
                false
            }
        }
    }

    // ------------------------------------------------------------ transactions

    fn start_transactions(&mut self, now: Instant) -> bool {
        let mut started = false;
        if let Some(target) = self.s.target_iops {
            // Open loop: transactions at the rate that yields the target IOPS, given
            // the I/O per transaction observed so far.
            // I/O per transaction over the last second, smoothed: the cache warms
            // and write-back starts, so the early ratio must not rule for long.
            if self.txn_rate.is_none() || now.duration_since(self.rate_at) >= Duration::from_secs(1)
            {
                let dios = self.total_ios - self.rate_ios;
                let dtx = self.total_txns - self.rate_txns;
                if dtx >= 20 {
                    let recent = dios as f64 / dtx as f64;
                    self.ios_per_txn = 0.5 * self.ios_per_txn + 0.5 * recent;
                    self.rate_at = now;
                    self.rate_ios = self.total_ios;
                    self.rate_txns = self.total_txns;
                }
                // The estimate of I/O per transaction is never exact: catch up the
                // I/O owed since the start over the next 5 s, by at most half the target.
                let owed =
                    target * now.duration_since(self.t0).as_secs_f64() - self.total_ios as f64;
                let want = target + (owed / 5.0).clamp(-0.5 * target, 0.5 * target);
                self.txn_rate = Some((want / self.ios_per_txn.max(0.05)).max(0.1));
            }
        }
        for sid in 0..self.sessions.len() {
            if self.sessions[sid].state != SState::Idle {
                continue;
            }
            let intended = match self.txn_rate {
                Some(rate) => {
                    if self.next_intended > now {
                        break;
                    }
                    let i = self.next_intended;
                    self.next_intended += Duration::from_secs_f64(1.0 / rate);
                    i
                }
                None => now,
            };
            let txn = self.plan_transaction(intended);
            self.sessions[sid].txn = Some(txn);
            self.acquire(sid);
            started = true;
        }
        started
    }

    fn pick_mailbox(&mut self) -> u64 {
        let m = self
            .s
            .mailboxes
            .clamp(1, self.s.header.page_count.saturating_sub(1).max(1));
        let k = match &self.zipf {
            Some(z) => (z.sample(&mut self.rng) as u64)
                .saturating_sub(1)
                .min(m - 1),
            None => self.rng.random_range(0..m),
        };
        // Spread the hot mailboxes over the file (a fixed permutation).
        (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ self.s.header.db_id) % m
    }

    fn plan_transaction(&mut self, intended: Instant) -> Txn {
        let mbx = self.pick_mailbox();
        let p = &self.s.profile;
        let last_page = self.s.header.page_count - 1;
        let first = 1 + mbx * self.pages_per_mailbox;
        let span = self.pages_per_mailbox.min(last_page + 1 - first).max(1);
        let index_page = first;
        let rec = p.record_size.0 as u32;
        let idx = p.index_record_size.0 as u32;
        let (ins, del, rep) = (p.insert_pct, p.delete_pct, p.replace_pct);
        let read_pages = p.read_pages;
        let run_pct = p.read_run_pct;
        let split_pct = p.split_pct;
        let lazy = p.lazy_commit_pct;
        let data_page = |rng: &mut SmallRng| -> u64 {
            if span <= 1 {
                index_page
            } else {
                first + 1 + rng.random_range(0..span - 1)
            }
        };
        let roll: f64 = self.rng.random_range(0.0..100.0);
        let mut touches = Vec::with_capacity(6);
        let push_pair = |touches: &mut Vec<Touch>, page: u64, m1: u32, m2: u32| {
            if page < last_page {
                touches.push(Touch {
                    page,
                    modify: m1,
                    run_with_next: true,
                });
                touches.push(Touch {
                    page: page + 1,
                    modify: m2,
                    run_with_next: false,
                });
            } else {
                touches.push(Touch {
                    page,
                    modify: m1,
                    run_with_next: false,
                });
            }
        };
        if roll < ins {
            // Insert a message row: the folder's index and a data page; sometimes
            // the data page splits into its neighbour.
            touches.push(Touch {
                page: index_page,
                modify: idx,
                run_with_next: false,
            });
            let d = data_page(&mut self.rng);
            if self.rng.random_range(0.0..100.0) < split_pct {
                push_pair(&mut touches, d, rec / 2 + 1, rec / 2 + 1);
            } else {
                touches.push(Touch {
                    page: d,
                    modify: rec,
                    run_with_next: false,
                });
            }
        } else if roll < ins + del {
            touches.push(Touch {
                page: index_page,
                modify: idx,
                run_with_next: false,
            });
            let d = data_page(&mut self.rng);
            touches.push(Touch {
                page: d,
                modify: idx,
                run_with_next: false,
            });
        } else if roll < ins + del + rep {
            let d = data_page(&mut self.rng);
            touches.push(Touch {
                page: d,
                modify: rec,
                run_with_next: false,
            });
        } else {
            // Read a folder view: the index, then rows on data pages, some of them
            // on neighbouring pages read together.
            touches.push(Touch {
                page: index_page,
                modify: 0,
                run_with_next: false,
            });
            for _ in 0..read_pages {
                let d = data_page(&mut self.rng);
                if self.rng.random_range(0.0..100.0) < run_pct {
                    push_pair(&mut touches, d, 0, 0);
                } else {
                    touches.push(Touch {
                        page: d,
                        modify: 0,
                        run_with_next: false,
                    });
                }
            }
        }
        // A page touched twice in one transaction is acquired once.
        let mut seen: Vec<u64> = Vec::with_capacity(touches.len());
        let mut merged: Vec<Touch> = Vec::with_capacity(touches.len());
        for t in touches {
            if let Some(i) = seen.iter().position(|p| *p == t.page) {
                merged[i].modify = merged[i].modify.max(t.modify);
                continue;
            }
            seen.push(t.page);
            merged.push(t);
        }
        for i in 0..merged.len() {
            let next_is_neighbour = merged
                .get(i + 1)
                .is_some_and(|n| n.page == merged[i].page + 1);
            merged[i].run_with_next &= next_is_neighbour;
        }
        let modifies = merged.iter().any(|t| t.modify > 0);
        let durable = modifies && self.rng.random_range(0.0..100.0) >= lazy;
        let id = self.next_txn;
        self.next_txn += 1;
        Txn {
            id,
            intended,
            touches: merged,
            next: 0,
            frames: Vec::new(),
            pending: 0,
            durable,
            stalled_counted: false,
            logged: Vec::new(),
        }
    }

    /// Pins every page the session's transaction needs, reading the missing ones.
    fn acquire(&mut self, sid: usize) {
        let Some(mut txn) = self.sessions[sid].txn.take() else {
            return;
        };
        let paced = self.txn_rate.is_some();
        while txn.next < txn.touches.len() {
            let t = txn.touches[txn.next];
            if let Some(f) = self.cache.lookup(t.page) {
                let fr = &mut self.cache.frames[f];
                fr.pins += 1;
                if fr.state == FrameState::Reading {
                    fr.waiters.push(sid as u32);
                    txn.pending += 1;
                }
                self.interval.counters.cache_hits += 1;
                txn.frames.push(f);
                txn.next += 1;
                continue;
            }
            let with_next = t.run_with_next && !self.cache.contains(t.page + 1);
            let Some(f) = self.cache.allocate(t.page) else {
                self.stall(sid, txn);
                return;
            };
            let mut frames = vec![f];
            if with_next {
                match self.cache.allocate(t.page + 1) {
                    Some(g) => frames.push(g),
                    None => {
                        self.cache.discard(f);
                        self.stall(sid, txn);
                        return;
                    }
                }
            }
            for &g in &frames {
                let fr = &mut self.cache.frames[g];
                fr.pins += 1;
                fr.waiters.push(sid as u32);
                txn.frames.push(g);
                txn.pending += 1;
                txn.next += 1;
            }
            self.interval.counters.cache_misses += frames.len() as u64;
            let intended = paced.then_some(txn.intended);
            self.submit_page_read(t.page, frames, intended);
        }
        let ready = txn.pending == 0;
        self.sessions[sid].txn = Some(txn);
        if ready {
            self.apply(sid);
        } else {
            self.sessions[sid].state = SState::Fetching;
        }
    }

    fn stall(&mut self, sid: usize, mut txn: Txn) {
        if !txn.stalled_counted {
            txn.stalled_counted = true;
            self.interval.counters.page_fault_stalls += 1;
        }
        self.sessions[sid].txn = Some(txn);
        self.sessions[sid].state = SState::Stalled;
    }

    fn retry_stalled(&mut self) -> bool {
        let mut any = false;
        for sid in 0..self.sessions.len() {
            if self.sessions[sid].state == SState::Stalled {
                self.sessions[sid].state = SState::Fetching;
                self.acquire(sid);
                any |= self.sessions[sid].state != SState::Stalled;
            }
        }
        any
    }

    fn submit_page_read(&mut self, first_page: u64, frames: Vec<usize>, intended: Option<Instant>) {
        let len = frames.len() * self.ps;
        let id = self.reads.insert(PageRead {
            frames,
            first_page,
            intended,
        });
        self.io.submit(IoRequest {
            file: self.db.clone(),
            kind: OpKind::Read,
            offset: first_page * self.ps as u64,
            buf: AlignedBuf::new(len),
            tag: tag(K_PAGE_READ, id),
        });
    }

    /// Every page is in: change the rows, log them, commit.
    fn apply(&mut self, sid: usize) {
        let Some(mut txn) = self.sessions[sid].txn.take() else {
            return;
        };
        let mut ok = true;
        for (i, t) in txn.touches.iter().enumerate() {
            if t.modify == 0 {
                continue;
            }
            let f = txn.frames[i];
            let len = t.modify as usize;
            let room = self.ps - PAGE_HEADER - len;
            let offset = PAGE_HEADER + (self.rng.random_range(0..=room) & !7);
            self.scratch.resize(len, 0);
            self.rng.fill_bytes(&mut self.scratch);
            self.cache.frames[f].data[offset..offset + len].copy_from_slice(&self.scratch);
            let begin = self.log.next_lsn();
            let rec = Record::Update {
                txn: txn.id,
                page_no: t.page,
                offset: offset as u32,
                data: &self.scratch,
            };
            match self.log.append(&rec) {
                Ok(lsn) => {
                    self.cache.mark_dirty(f, begin, lsn);
                    if self.s.ack_stream {
                        txn.logged.push((t.page, lsn));
                    }
                    self.interval.counters.log_records += 1;
                    self.interval.counters.log_bytes += rec.encoded_len() as u64;
                }
                Err(e) => {
                    ok = false;
                    self.record_error(e.to_string());
                    break;
                }
            }
        }
        let commit = if ok {
            self.log.append(&Record::Commit { txn: txn.id })
        } else {
            Ok(0)
        };
        for &f in &txn.frames {
            let fr = &mut self.cache.frames[f];
            fr.pins = fr.pins.saturating_sub(1);
        }
        self.interval.counters.transactions += 1;
        self.total_txns += 1;
        match commit {
            Ok(lsn) if ok => {
                self.interval.counters.log_records += 1;
                self.interval.counters.log_bytes += format::COMMIT_LEN as u64;
                if txn.durable {
                    self.commit_waiters.push((lsn, sid));
                    self.sessions[sid].txn = Some(txn);
                    self.sessions[sid].state = SState::Committing;
                    return;
                }
                self.interval.counters.lazy_commits += 1;
                self.interval
                    .transaction_latency
                    .record(txn.intended.elapsed());
            }
            Ok(_) => self.interval.counters.failed_transactions += 1,
            Err(e) => {
                self.interval.counters.failed_transactions += 1;
                self.record_error(e.to_string());
            }
        }
        self.sessions[sid].state = SState::Idle;
    }

    fn abort_txn(&mut self, sid: usize) {
        if let Some(txn) = self.sessions[sid].txn.take() {
            for &f in &txn.frames {
                let fr = &mut self.cache.frames[f];
                fr.pins = fr.pins.saturating_sub(1);
                fr.waiters.retain(|w| *w as usize != sid);
            }
        }
        self.interval.counters.failed_transactions += 1;
        self.sessions[sid].state = SState::Idle;
    }

    // ------------------------------------------------------------ log

    fn drive_log(&mut self, now: Instant, aborting: bool) {
        if self.log.writing() || self.log.unflushed() == 0 {
            return;
        }
        let p = &self.s.profile;
        let wal_blocked = self.cache.dirty_count() > 0
            && (self.flushing || self.any_stalled() || !self.accepting())
            && self.cache.writing_count() == 0;
        let due = !self.commit_waiters.is_empty()
            || self.log.unflushed() >= p.log_buffer_flush.0
            || now.duration_since(self.last_log_flush)
                >= Duration::from_millis(p.log_flush_interval_ms)
            || wal_blocked
            || aborting
            || !self.accepting();
        if !due {
            return;
        }
        match self.log.start_flush() {
            Ok(Some(writes)) => {
                if self.s.ack_stream && writes.len() > 1 {
                    // Test-only: this flush rolls over to a new log generation.
                    println!("ROLL {} {}", self.s.index, self.log.generation());
                }
                self.last_log_flush = now;
                self.log_write_started = Some(now);
                self.interval.counters.log_flushes += 1;
                for w in writes {
                    self.io.submit(IoRequest {
                        file: w.file,
                        kind: OpKind::Write,
                        offset: w.offset,
                        buf: w.buf,
                        tag: tag(K_LOG_WRITE, 0),
                    });
                }
            }
            Ok(None) => {}
            Err(e) => self.record_error(e.to_string()),
        }
    }

    fn any_stalled(&self) -> bool {
        self.sessions.iter().any(|s| s.state == SState::Stalled)
    }

    fn log_write_done(&mut self, c: &IoCompletion) {
        let st = self.interval.class_mut(Class::LogWrite);
        st.ops += 1;
        st.latency.record(c.latency());
        match c.full() {
            Ok(()) => st.bytes += c.buf.len() as u64,
            Err(e) => {
                st.errors += 1;
                self.record_error(io_error_text("writing log", &self.s.log_dir, c.offset, e));
                return;
            }
        }
        let before = self.log.generation();
        if let Some(durable) = self.log.flush_segment_done() {
            let mut i = 0;
            while i < self.commit_waiters.len() {
                let (lsn, sid) = self.commit_waiters[i];
                if lsn <= durable {
                    self.commit_waiters.swap_remove(i);
                    if let Some(txn) = self.sessions[sid].txn.take() {
                        self.interval
                            .transaction_latency
                            .record(txn.intended.elapsed());
                        self.interval.counters.durable_commits += 1;
                        if self.s.ack_stream {
                            // Test-only: `ACK <instance> <txn> <commit lsn> <page>:<lsn>,...`.
                            let pages: Vec<String> =
                                txn.logged.iter().map(|(p, l)| format!("{p}:{l}")).collect();
                            println!(
                                "ACK {} {} {} {}",
                                self.s.index,
                                txn.id,
                                lsn,
                                pages.join(",")
                            );
                        }
                    }
                    self.sessions[sid].state = SState::Idle;
                } else {
                    i += 1;
                }
            }
            for g in self.log.take_closed() {
                self.interval.counters.log_generations += 1;
                for r in &mut self.repl {
                    r.queue.push_back(g);
                }
            }
        }
        let _ = before;
    }

    // ------------------------------------------------------------ write-back

    fn drive_writeback(&mut self) {
        let dirty = self.cache.dirty_count();
        if dirty >= self.flush_start {
            self.flushing = true;
        } else if dirty <= self.flush_stop {
            self.flushing = false;
        }
        let depth_max = self.s.profile.checkpoint_depth.0;
        let shutting = !self.accepting();
        while self.write_ios < self.max_write_ios {
            let oldest = self
                .cache
                .oldest_unwritten_lsn()
                .unwrap_or(self.log.next_lsn());
            let depth = self.log.next_lsn().saturating_sub(oldest);
            let need = self.flushing || depth > depth_max || self.any_stalled() || shutting;
            if !need {
                break;
            }
            let max_pages = self.s.profile.max_write_pages as usize;
            let Some((first_page, frames)) =
                self.cache.take_write_run(self.log.durable_lsn(), max_pages)
            else {
                break;
            };
            let n = frames.len();
            let mut buf = AlignedBuf::new(n * self.ps);
            for (k, &f) in frames.iter().enumerate() {
                let fr = &mut self.cache.frames[f];
                format::seal_page(&mut fr.data, self.s.header.db_id, fr.page_no, fr.lsn);
                buf.as_mut_slice()[k * self.ps..(k + 1) * self.ps].copy_from_slice(&fr.data);
            }
            self.write_seq += 1;
            if self.maint.is_some() {
                self.recent_writes
                    .push_back((self.write_seq, first_page, n as u64));
            }
            let id = self.writes.insert(PageWrite { frames });
            self.write_ios += 1;
            self.io.submit(IoRequest {
                file: self.db.clone(),
                kind: OpKind::Write,
                offset: first_page * self.ps as u64,
                buf,
                tag: tag(K_PAGE_WRITE, id),
            });
        }
    }

    fn drive_checkpoint(&mut self, now: Instant) {
        if self.sync_in_flight.is_some()
            || now.duration_since(self.last_checkpoint) < Duration::from_secs(1)
        {
            return;
        }
        self.last_checkpoint = now;
        if self.ctl.hold_checkpoint.load(Ordering::Relaxed) {
            return;
        }
        let lsn = self
            .cache
            .oldest_unwritten_lsn()
            .unwrap_or(self.log.durable_lsn())
            .min(self.log.durable_lsn());
        if lsn <= self.checkpoint_lsn {
            return;
        }
        self.sync_in_flight = Some(lsn);
        if self.s.ack_stream {
            println!("CKPT {} {lsn}", self.s.index);
        }
        self.io.submit(IoRequest {
            file: self.db.clone(),
            kind: OpKind::Sync,
            offset: 0,
            buf: AlignedBuf::new(0),
            tag: tag(K_SYNC, 0),
        });
    }

    fn checkpoint_synced(&mut self, c: &IoCompletion) {
        let Some(lsn) = self.sync_in_flight.take() else {
            return;
        };
        if let Err(e) = c.full() {
            self.record_error(io_error_text("syncing database", &self.s.db_path, 0, e));
            return;
        }
        if let Err(e) = self.write_checkpoint(lsn) {
            self.record_error(e.to_string());
            return;
        }
        self.interval.counters.checkpoints += 1;
        // Circular logging: drop the files behind the checkpoint that no replica
        // still has to read.
        let mut keep = lsn / self.log.file_size();
        for r in &self.repl {
            if let Some((g, _)) = r.current {
                keep = keep.min(g);
            }
            if let Some(g) = r.queue.front() {
                keep = keep.min(*g);
            }
        }
        self.log.remove_before(keep);
    }

    // ------------------------------------------------------------ background streams

    fn drive_maintenance(&mut self, now: Instant) {
        let p = &self.s.profile;
        if !p.maintenance
            || p.maintenance_mb_per_s <= 0.0
            || self.maint.is_some()
            || now < self.maint_next
        {
            return;
        }
        let size = p.maintenance_read_size.0;
        let per_read = Duration::from_secs_f64(size as f64 / (p.maintenance_mb_per_s * 1e6));
        self.maint_next = if now.duration_since(self.maint_next) > Duration::from_secs(1) {
            now + per_read
        } else {
            self.maint_next + per_read
        };
        let page_count = self.s.header.page_count;
        let pages = (size / self.ps as u64)
            .min(page_count - self.maint_cursor)
            .max(1);
        let first = self.maint_cursor;
        self.maint_cursor += pages;
        if self.maint_cursor >= page_count {
            self.maint_cursor = 1;
        }
        self.recent_writes.clear();
        self.maint = Some(MaintRead {
            first_page: first,
            pages,
            write_seq: self.write_seq,
        });
        self.io.submit(IoRequest {
            file: self.db.clone(),
            kind: OpKind::Read,
            offset: first * self.ps as u64,
            buf: AlignedBuf::new(pages as usize * self.ps),
            tag: tag(K_MAINT_READ, 0),
        });
    }

    fn maintenance_done(&mut self, c: &IoCompletion) {
        let Some(m) = self.maint.take() else { return };
        let st = self.interval.class_mut(Class::MaintRead);
        st.ops += 1;
        st.latency.record(c.latency());
        if let Err(e) = c.full() {
            st.errors += 1;
            self.record_error(io_error_text(
                "reading database (maintenance)",
                &self.s.db_path,
                c.offset,
                e,
            ));
            return;
        }
        st.bytes += c.buf.len() as u64;
        // Checksum every page no write touched while the read was in flight.
        for k in 0..m.pages {
            let page = m.first_page + k;
            let raced = self
                .recent_writes
                .iter()
                .any(|(seq, first, n)| *seq > m.write_seq && page >= *first && page < first + n);
            if raced || self.cache.contains(page) {
                continue;
            }
            let b = &c.buf.as_slice()[k as usize * self.ps..(k as usize + 1) * self.ps];
            if format::check_page(b, self.s.header.db_id, page).is_err() {
                self.interval.counters.bad_pages += 1;
                self.record_error(format!(
                    "bad page {page} in {} found by background maintenance",
                    self.s.db_path.display()
                ));
            }
        }
        self.recent_writes.clear();
    }

    fn drive_replication(&mut self) {
        let size = self.s.profile.replication_read_size.0;
        let file_size = self.log.file_size();
        for i in 0..self.repl.len() {
            let r = &mut self.repl[i];
            if r.in_flight {
                continue;
            }
            if r.current.is_none() {
                r.current = r.queue.pop_front().map(|g| (g, 0));
            }
            let Some((g, off)) = r.current else { continue };
            let Some(file) = self.log.file(g) else {
                r.current = None;
                continue;
            };
            r.in_flight = true;
            let len = size.min(file_size - off) as usize;
            self.io.submit(IoRequest {
                file,
                kind: OpKind::Read,
                offset: off,
                buf: AlignedBuf::new(len),
                tag: tag(K_REPL_READ, i),
            });
        }
    }

    fn replication_done(&mut self, i: usize, c: &IoCompletion) {
        let file_size = self.log.file_size();
        let st = self.interval.class_mut(Class::LogRead);
        st.ops += 1;
        st.latency.record(c.latency());
        if let Err(e) = c.full() {
            st.errors += 1;
            self.record_error(io_error_text(
                "reading log (replication)",
                &self.s.log_dir,
                c.offset,
                e,
            ));
            return;
        }
        st.bytes += c.buf.len() as u64;
        let Some(r) = self.repl.get_mut(i) else {
            return;
        };
        r.in_flight = false;
        let Some((g, off)) = r.current else { return };
        // A replica checks every block it ships.
        let first_block = (off / format::LOG_BLOCK as u64) as u32;
        let mut bad = 0;
        for (k, b) in c.buf.as_slice().chunks(format::LOG_BLOCK).enumerate() {
            if format::check_log_block(b, self.s.header.db_id, g, first_block + k as u32)
                == format::LogBlock::Corrupt
            {
                bad += 1;
            }
        }
        let next = off + c.buf.len() as u64;
        r.current = if next >= file_size {
            None
        } else {
            Some((g, next))
        };
        if bad > 0 {
            self.interval.counters.bad_log_blocks += bad;
            self.record_error(format!(
                "{bad} bad log blocks in generation {g} of {}",
                self.s.log_dir.display()
            ));
        }
    }

    // ------------------------------------------------------------ completions

    fn complete(&mut self, c: IoCompletion) {
        let kind = c.tag >> TAG_SHIFT;
        let id = (c.tag & ((1 << TAG_SHIFT) - 1)) as usize;
        match kind {
            K_PAGE_READ => self.page_read_done(id, c),
            K_PAGE_WRITE => self.page_write_done(id, &c),
            K_LOG_WRITE => self.log_write_done(&c),
            K_REPL_READ => self.replication_done(id, &c),
            K_MAINT_READ => self.maintenance_done(&c),
            K_SYNC => self.checkpoint_synced(&c),
            _ => {}
        }
    }

    fn page_read_done(&mut self, id: usize, c: IoCompletion) {
        let Some(r) = self.reads.remove(id) else {
            return;
        };
        let latency = match r.intended {
            Some(i) => c.completed.saturating_duration_since(i.min(c.submitted)),
            None => c.latency(),
        };
        let st = self.interval.class_mut(Class::DbRead);
        st.ops += 1;
        st.latency.record(latency);
        self.total_ios += 1;
        if let Err(e) = c.full() {
            st.errors += 1;
            let msg = io_error_text("reading database", &self.s.db_path, c.offset, e);
            for f in r.frames {
                let waiters = std::mem::take(&mut self.cache.frames[f].waiters);
                self.cache.discard(f);
                for w in waiters {
                    self.abort_txn(w as usize);
                }
            }
            self.record_error(msg);
            return;
        }
        st.bytes += c.buf.len() as u64;
        for (k, f) in r.frames.into_iter().enumerate() {
            let page = r.first_page + k as u64;
            let src = &c.buf.as_slice()[k * self.ps..(k + 1) * self.ps];
            match format::check_page(src, self.s.header.db_id, page) {
                Ok(h) => self.cache.frames[f].lsn = h.lsn,
                Err(e) => {
                    self.interval.counters.bad_pages += 1;
                    self.record_error(format!(
                        "bad page {page} in {}: {e:?}",
                        self.s.db_path.display()
                    ));
                }
            }
            let fr = &mut self.cache.frames[f];
            fr.data.copy_from_slice(src);
            fr.state = FrameState::Clean;
            let waiters = std::mem::take(&mut fr.waiters);
            for w in waiters {
                let sid = w as usize;
                let ready = match self.sessions[sid].txn.as_mut() {
                    Some(t) => {
                        t.pending = t.pending.saturating_sub(1);
                        t.pending == 0 && t.next == t.touches.len()
                    }
                    None => false,
                };
                if ready && self.sessions[sid].state == SState::Fetching {
                    self.apply(sid);
                }
            }
        }
    }

    fn page_write_done(&mut self, id: usize, c: &IoCompletion) {
        let Some(w) = self.writes.remove(id) else {
            return;
        };
        self.write_ios -= 1;
        let st = self.interval.class_mut(Class::DbWrite);
        st.ops += 1;
        st.latency.record(c.latency());
        self.total_ios += 1;
        let ok = c.full().is_ok();
        if ok {
            st.bytes += c.buf.len() as u64;
        } else {
            st.errors += 1;
        }
        for f in w.frames {
            self.cache.write_done(f, ok);
        }
        if let Err(e) = c.full() {
            self.record_error(io_error_text(
                "writing database",
                &self.s.db_path,
                c.offset,
                e,
            ));
        }
    }

    fn emit_interval(&mut self, now: Instant) {
        self.seq += 1;
        let mut stats = std::mem::take(&mut self.interval);
        stats.counters.cache_frames = self.cache.len() as u64;
        stats.counters.dirty_pages = self.cache.dirty_count() as u64;
        let oldest = self
            .cache
            .oldest_unwritten_lsn()
            .unwrap_or(self.log.next_lsn());
        stats.counters.checkpoint_depth_bytes = self.log.next_lsn().saturating_sub(oldest);
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
