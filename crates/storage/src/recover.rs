//! Soft recovery (log replay) and the `storage recover` test.
//!
//! Replay reads the log sequentially from the checkpoint (256 KiB reads, a few
//! ahead), decodes the records, and for every update reads the page it touches
//! (several reads in flight, ahead of the record being applied, neighbours read
//! together), applies the after-image if the page is older than the record
//! (record end LSN > page LSN), and keeps the page in a cache that is written
//! back only under pressure (every frame dirty; clean frames are evicted
//! first) and in one sorted flush at the end, before the checkpoint moves to
//! the end of the log. Its writes are thus the pages the crash left dirty.
//! Only committed transactions are
//! applied: the updates of a transaction whose commit record is missing at the
//! end of the log are dropped. Replay stops at the end of the log, at a torn
//! tail, or at a damaged block, and says where.
//!
//! The test: the transactional load runs with the checkpoint held until N new
//! log files exist per instance, stops as a crash would (log flushed, dirty pages
//! left unwritten), then every instance is replayed at once and verified.

use crate::engine::{Control, Event, Instance, InstanceSetup};
use crate::format::{self, DbHeader, LOG_BLOCK, LOG_BLOCK_HEADER, LogBlock, PAGE_HEADER, Record};
use crate::init::{self, read_header};
use crate::spec::{InstanceSpec, SpecExt, StorageSpec};
use crate::stats::ClassStats;
use crate::verify;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::{RunDir, TestLog};
use mailbench_base::{Error, Result};
use mailbench_io::{AlignedBuf, BufPool, EngineChoice, IoEngine, IoRequest, OpKind};
pub use mailbench_results::storage::recover::{GenerateResult, RecoverResult, ReplayResult};
use mailbench_results::{RunHeader, Status, Verdict};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Page reads in flight during replay.
pub const REPLAY_DEPTH: usize = 16;
/// Log read size during replay.
pub const LOG_READ: usize = 256 << 10;
const LOG_AHEAD: usize = 4;
const QUEUE_BYTES: usize = 16 << 20;
const READ_RUN_MAX: usize = 4;
const WRITE_DEPTH: usize = 16;
/// I/O buffers kept for reuse per size class.
const BUFFERS_KEPT: usize = 32;

const T_LOG: u64 = 1 << 60;
const T_READ: u64 = 2 << 60;
const T_WRITE: u64 = 3 << 60;
const T_MASK: u64 = 0xF << 60;

/// Replays the log of every instance at once.
pub fn replay_all(spec: &StorageSpec, interrupt: &Interrupt) -> Vec<ReplayResult> {
    let caps = mailbench_io::probe(&spec.volumes[0]);
    std::thread::scope(|scope| {
        let hs: Vec<_> = spec
            .instances
            .iter()
            .map(|i| {
                scope.spawn(move || {
                    let cache = (spec.cache_max_per_db / spec.profile.page_size.0).max(64) as usize;
                    replay_instance(i, spec.engine_choice(), caps.o_direct, cache, interrupt)
                })
            })
            .collect();
        hs.into_iter()
            .zip(spec.instances.iter())
            .map(|(h, i)| {
                h.join().unwrap_or_else(|_| ReplayResult {
                    name: i.name.clone(),
                    errors: vec!["replay thread failed".into()],
                    ..Default::default()
                })
            })
            .collect()
    })
}

/// Replays one instance's log into its database. Errors are recorded in the
/// result (the database is then left marked as needing recovery).
pub fn replay_instance(
    inst: &InstanceSpec,
    engine: EngineChoice,
    direct: bool,
    cache_pages: usize,
    interrupt: &Interrupt,
) -> ReplayResult {
    let mut r = ReplayResult {
        name: inst.name.clone(),
        ..Default::default()
    };
    let header = match read_header(&inst.db_path) {
        Ok(h) => h,
        Err(e) => {
            r.errors.push(e.to_string());
            return r;
        }
    };
    if header.clean {
        r.clean = true;
        r.stopped = "the database was shut down cleanly: nothing to replay".into();
        return r;
    }
    r.needed = true;
    match Replay::new(inst, header, engine, direct, cache_pages) {
        Ok(mut rp) => {
            rp.run(interrupt);
            rp.finish(&mut r);
        }
        Err(e) => r.errors.push(e.to_string()),
    }
    r
}

struct Upd {
    page: u64,
    offset: usize,
    data: Vec<u8>,
    end_lsn: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FState {
    Reading,
    Ready,
    Bad,
}

struct Frame {
    page: u64,
    state: FState,
    data: Vec<u8>,
    lsn: u64,
    dirty: bool,
    writing: bool,
    refs: u32,
    referenced: bool,
}

struct Replay {
    db_path: std::path::PathBuf,
    log_dir: std::path::PathBuf,
    header: DbHeader,
    ps: usize,
    fs: u64,
    blocks_per_file: u64,
    db: Arc<File>,
    direct: bool,
    io: Box<dyn IoEngine>,
    /// Buffers of log reads, page reads and writes, reused.
    pool: BufPool,
    // Log reading.
    log_files: HashMap<u64, Arc<File>>,
    sub_gen: u64,
    sub_off: u64,
    sub_seq: u64,
    no_more_files: bool,
    log_in_flight: usize,
    chunks: BTreeMap<u64, (u64, u64, AlignedBuf, usize)>,
    next_chunk: u64,
    skip_first: Option<(u64, u64, usize)>,
    log_done: bool,
    gens_seen: Vec<u64>,
    // Decoding.
    pend: Vec<u8>,
    pend_pos: usize,
    pend_base: u64,
    segs: VecDeque<(u64, u64, usize)>,
    cur_txn: Option<u64>,
    txn_buf: Vec<Upd>,
    // Applying.
    queue: VecDeque<Upd>,
    queue_bytes: usize,
    prepared: usize,
    frames: Vec<Frame>,
    map: HashMap<u64, usize>,
    free: Vec<usize>,
    hand: usize,
    cap: usize,
    reads: usize,
    reads_meta: HashMap<u64, Vec<usize>>,
    read_id: u64,
    writes: usize,
    writes_meta: HashMap<u64, Vec<usize>>,
    write_id: u64,
    blocked: bool,
    // Results.
    start_lsn: u64,
    end_lsn: u64,
    records: u64,
    transactions: u64,
    applied: u64,
    skipped: u64,
    dropped: u64,
    log_bytes: u64,
    db_read: ClassStats,
    db_write: ClassStats,
    log_read: ClassStats,
    stopped: String,
    damaged: bool,
    bad_pages: Vec<u64>,
    errors: Vec<String>,
    interrupted: bool,
    t0: Instant,
    cpu0: f64,
    /// When the log was replayed and the final flush (checkpoint) began, and
    /// the page writes done before it (under cache pressure).
    flush_start: Option<(Instant, u64)>,
}

impl Replay {
    #[allow(clippy::too_many_lines)] // longer than 100 lines: split when next changed
    fn new(
        inst: &InstanceSpec,
        header: DbHeader,
        engine: EngineChoice,
        direct: bool,
        cache_pages: usize,
    ) -> Result<Replay> {
        let t0 = Instant::now();
        let fs = header.log_file_size as u64;
        let ps = header.page_size as usize;
        let gens = verify::log_generations(&inst.log_dir);
        let ckpt = verify::read_checkpoint(&inst.log_dir, header.db_id);
        let start_lsn = match ckpt {
            Some(c) => c.checkpoint_lsn,
            None => match gens.first() {
                Some(g) => g * fs,
                None => {
                    return Err(Error::runtime(format!(
                        "{}: no checkpoint file and no log files in {}: nothing to replay from; the \
                         database cannot be recovered (re-create it with a new folder)",
                        inst.name,
                        inst.log_dir.display()
                    )));
                }
            },
        };
        let start_gen = start_lsn / fs;
        if !gens.contains(&start_gen) {
            return Err(Error::runtime(format!(
                "{}: log file {} (where the checkpoint says replay starts) is missing from {}; \
                 the database cannot be recovered",
                inst.name,
                format::log_file_name(start_gen),
                inst.log_dir.display()
            )));
        }
        let in_file = start_lsn - start_gen * fs;
        let block = in_file / LOG_BLOCK as u64;
        let skip = ((in_file % LOG_BLOCK as u64) as usize).saturating_sub(LOG_BLOCK_HEADER);
        let caps = mailbench_io::Capabilities {
            o_direct: direct,
            uring: mailbench_io::uring::available(),
        };
        let io = mailbench_io::build(engine, caps, REPLAY_DEPTH + LOG_AHEAD + WRITE_DEPTH + 8)
            .map_err(Error::runtime)?;
        let db = mailbench_io::open_file(&inst.db_path, false, direct, false)
            .map_err(|e| Error::io("cannot open database", &inst.db_path, e))?;
        let chunk_start = block * LOG_BLOCK as u64 / LOG_READ as u64 * LOG_READ as u64;
        Ok(Replay {
            db_path: inst.db_path.clone(),
            log_dir: inst.log_dir.clone(),
            ps,
            fs,
            blocks_per_file: fs / LOG_BLOCK as u64,
            db: Arc::new(db),
            direct,
            io,
            pool: BufPool::new(BUFFERS_KEPT),
            log_files: HashMap::new(),
            sub_gen: start_gen,
            sub_off: chunk_start,
            sub_seq: 0,
            no_more_files: false,
            log_in_flight: 0,
            chunks: BTreeMap::new(),
            next_chunk: 0,
            skip_first: Some((start_gen, block, skip)),
            log_done: false,
            gens_seen: Vec::new(),
            pend: Vec::new(),
            pend_pos: 0,
            pend_base: 0,
            segs: VecDeque::new(),
            cur_txn: None,
            txn_buf: Vec::new(),
            queue: VecDeque::new(),
            queue_bytes: 0,
            prepared: 0,
            frames: Vec::new(),
            map: HashMap::new(),
            free: Vec::new(),
            hand: 0,
            cap: cache_pages.max(64),
            reads: 0,
            reads_meta: HashMap::new(),
            read_id: 0,
            writes: 0,
            writes_meta: HashMap::new(),
            write_id: 0,
            blocked: false,
            start_lsn,
            end_lsn: start_lsn,
            records: 0,
            transactions: 0,
            applied: 0,
            skipped: 0,
            dropped: 0,
            log_bytes: 0,
            db_read: ClassStats::default(),
            db_write: ClassStats::default(),
            log_read: ClassStats::default(),
            stopped: String::new(),
            damaged: false,
            bad_pages: Vec::new(),
            errors: Vec::new(),
            interrupted: false,
            t0,
            cpu0: mailbench_metrics::system::thread_cpu_s(),
            flush_start: None,
            header,
        })
    }

    fn failed(&self) -> bool {
        !self.errors.is_empty() || self.interrupted
    }

    fn error(&mut self, msg: String) {
        if self.errors.len() < 20 {
            self.errors.push(msg);
        }
    }

    fn run(&mut self, interrupt: &Interrupt) {
        let mut done = Vec::new();
        let mut flushing = false;
        loop {
            if interrupt.raised() && !self.interrupted {
                self.interrupted = true;
                self.stopped = "interrupted".into();
            }
            let mut progressed = false;
            if !self.failed() {
                progressed |= self.submit_log_reads();
                progressed |= self.consume_chunks();
                progressed |= self.prepare();
                progressed |= self.apply();
                if self.blocked && self.writes < WRITE_DEPTH / 2 {
                    progressed |= self.write_back(false);
                }
                let replayed =
                    self.log_done && self.queue.is_empty() && self.reads == 0 && self.chunks_idle();
                if replayed && !flushing {
                    flushing = true;
                    self.flush_start =
                        Some((Instant::now(), self.db_write.ops + self.writes as u64));
                }
                if flushing {
                    progressed |= self.write_back(true);
                }
            }
            let in_flight = self.io.in_flight();
            if in_flight == 0 {
                if self.failed() {
                    break;
                }
                if flushing && self.frames.iter().all(|f| !f.dirty) {
                    break;
                }
                if !progressed {
                    // Nothing in flight and nothing could move: should not happen.
                    self.error("replay made no progress (internal error)".into());
                    break;
                }
            }
            done.clear();
            let (min, t) = if progressed || in_flight == 0 {
                (0, Duration::ZERO)
            } else {
                (1, Duration::from_millis(200))
            };
            self.io.wait(min, Some(t), &mut done);
            for c in done.drain(..) {
                match c.tag & T_MASK {
                    T_LOG => self.log_read_done(c),
                    T_READ => self.page_read_done(c),
                    T_WRITE => self.page_write_done(c),
                    _ => {}
                }
            }
        }
    }

    fn chunks_idle(&self) -> bool {
        self.log_in_flight == 0
    }

    // ------------------------------------------------------------ log

    fn log_file(&mut self, g: u64) -> Option<Arc<File>> {
        if let Some(f) = self.log_files.get(&g) {
            return Some(f.clone());
        }
        let path = self.log_dir.join(format::log_file_name(g));
        if !path.exists() {
            return None;
        }
        match mailbench_io::open_file(&path, false, self.direct, false) {
            Ok(f) => {
                let f = Arc::new(f);
                self.log_files.insert(g, f.clone());
                Some(f)
            }
            Err(e) => {
                self.error(format!("cannot open log file {}: {e}", path.display()));
                None
            }
        }
    }

    fn submit_log_reads(&mut self) -> bool {
        let mut any = false;
        while !self.log_done
            && !self.no_more_files
            && self.log_in_flight + self.chunks.len() < LOG_AHEAD
        {
            if self.sub_off >= self.fs {
                self.sub_gen += 1;
                self.sub_off = 0;
            }
            let Some(file) = self.log_file(self.sub_gen) else {
                self.no_more_files = true;
                break;
            };
            let len = (LOG_READ as u64).min(self.fs - self.sub_off) as usize;
            let buf = self.pool.get(len);
            self.io.submit(IoRequest {
                file,
                kind: OpKind::Read,
                offset: self.sub_off,
                buf,
                tag: T_LOG | self.sub_seq,
            });
            // Remember where this chunk comes from.
            self.chunks_meta_insert(self.sub_seq, self.sub_gen, self.sub_off);
            self.sub_seq += 1;
            self.sub_off += len as u64;
            self.log_in_flight += 1;
            any = true;
        }
        any
    }

    fn chunks_meta_insert(&mut self, seq: u64, g: u64, off: u64) {
        // A placeholder until the read completes (length 0 = not read yet).
        self.chunks
            .insert(seq, (g, off, AlignedBuf::empty(), usize::MAX));
    }

    fn log_read_done(&mut self, c: mailbench_io::IoCompletion) {
        self.log_in_flight = self.log_in_flight.saturating_sub(1);
        let seq = c.tag & !T_MASK;
        self.log_read.ops += 1;
        self.log_read.latency.record(c.latency());
        let n = match c.result {
            Ok(n) => n,
            Err(e) => {
                self.log_read.errors += 1;
                let g = self.chunks.get(&seq).map(|x| x.0).unwrap_or(0);
                self.error(format!(
                    "I/O error reading log file {} at offset {}: {}",
                    self.log_dir.join(format::log_file_name(g)).display(),
                    c.offset,
                    std::io::Error::from_raw_os_error(e)
                ));
                self.chunks.remove(&seq);
                return;
            }
        };
        self.log_read.bytes += n as u64;
        if let Some(e) = self.chunks.get_mut(&seq) {
            e.2 = c.buf;
            e.3 = n;
        }
    }

    /// Decodes completed log chunks in order while the apply queue has room.
    fn consume_chunks(&mut self) -> bool {
        let mut any = false;
        while !self.log_done && self.queue_bytes < QUEUE_BYTES {
            let Some(e) = self.chunks.get(&self.next_chunk) else {
                if self.no_more_files && self.log_in_flight == 0 {
                    self.log_done = true;
                    self.stopped = format!(
                        "end of the log: {} is the last log file",
                        format::log_file_name(self.sub_gen.saturating_sub(1))
                    );
                }
                break;
            };
            if e.3 == usize::MAX {
                break;
            }
            let Some((g, off, buf, n)) = self.chunks.remove(&self.next_chunk) else {
                break;
            };
            self.next_chunk += 1;
            any = true;
            self.consume_chunk(g, off, &buf.as_slice()[..n.min(buf.len())], buf.len());
            self.pool.put(buf);
            self.decode();
        }
        any
    }

    fn consume_chunk(&mut self, g: u64, off: u64, bytes: &[u8], asked: usize) {
        let first_block = off / LOG_BLOCK as u64;
        let whole = bytes.len() / LOG_BLOCK;
        for k in 0..whole {
            let b = first_block + k as u64;
            let block = &bytes[k * LOG_BLOCK..(k + 1) * LOG_BLOCK];
            let mut skip = 0usize;
            if let Some((sg, sb, s)) = self.skip_first {
                if g == sg && b < sb {
                    continue;
                }
                if g == sg && b == sb {
                    skip = s;
                    self.skip_first = None;
                }
            }
            match format::check_log_block(block, self.header.db_id, g, b as u32) {
                LogBlock::Valid { data_len } => {
                    if self.gens_seen.last() != Some(&g) {
                        self.gens_seen.push(g);
                    }
                    let s = skip.min(data_len);
                    let data = &block[LOG_BLOCK_HEADER + s..LOG_BLOCK_HEADER + data_len];
                    let lsn = g * self.fs + b * LOG_BLOCK as u64 + (LOG_BLOCK_HEADER + s) as u64;
                    let stream_at = self.pend_base + self.pend.len() as u64;
                    self.segs.push_back((stream_at, lsn, data.len()));
                    self.pend.extend_from_slice(data);
                    self.log_bytes += data.len() as u64;
                    self.end_lsn = self.end_lsn.max(lsn + data.len() as u64);
                }
                LogBlock::End => {
                    self.log_done = true;
                    self.stopped =
                        format!("end of the log at {} block {b}", format::log_file_name(g));
                    return;
                }
                LogBlock::Corrupt => {
                    self.log_done = true;
                    self.damaged = true;
                    self.stopped = format!(
                        "damaged log block at {} block {b}: replay stopped there, nothing after it \
                         was replayed",
                        format::log_file_name(g)
                    );
                    return;
                }
            }
        }
        if !bytes.len().is_multiple_of(LOG_BLOCK) {
            self.log_done = true;
            self.damaged = true;
            self.stopped = format!(
                "truncated log block at {} block {}: replay stopped there",
                format::log_file_name(g),
                first_block + whole as u64
            );
        } else if bytes.len() < asked {
            self.log_done = true;
            self.stopped = format!(
                "end of the log: {} ends at block {}",
                format::log_file_name(g),
                first_block + whole as u64
            );
        }
        let _ = self.blocks_per_file;
    }

    fn lsn_of(&self, stream_pos: u64) -> u64 {
        for (at, lsn, len) in &self.segs {
            if stream_pos >= *at && stream_pos < at + *len as u64 {
                return lsn + (stream_pos - at);
            }
        }
        self.end_lsn
    }

    fn decode(&mut self) {
        loop {
            let avail = &self.pend[self.pend_pos..];
            let (rec_len, end_lsn) = match Record::decode(avail) {
                Ok(Some((_, len))) => {
                    let end_pos = self.pend_base + (self.pend_pos + len) as u64;
                    (len, self.lsn_of(end_pos - 1) + 1)
                }
                Ok(None) => break,
                Err(e) => {
                    let at = self.lsn_of(self.pend_base + self.pend_pos as u64);
                    self.log_done = true;
                    self.damaged = true;
                    self.stopped =
                        format!("undecodable log record at LSN {at} ({e}): replay stopped there");
                    self.end_lsn = at;
                    break;
                }
            };
            let rec = match Record::decode(&self.pend[self.pend_pos..]) {
                Ok(Some((r, _))) => r,
                _ => break,
            };
            self.records += 1;
            match rec {
                Record::Update {
                    txn,
                    page_no,
                    offset,
                    data,
                } => {
                    let off = offset as usize;
                    if page_no == 0
                        || page_no >= self.header.page_count
                        || off < PAGE_HEADER
                        || off + data.len() > self.ps
                    {
                        let at = self.lsn_of(self.pend_base + self.pend_pos as u64);
                        self.log_done = true;
                        self.damaged = true;
                        self.stopped = format!(
                            "log record at LSN {at} names page {page_no} offset {off}, outside the \
                             database: replay stopped there"
                        );
                        break;
                    }
                    if self.cur_txn != Some(txn) {
                        self.dropped += self.txn_buf.len() as u64;
                        self.txn_buf.clear();
                        self.cur_txn = Some(txn);
                    }
                    self.txn_buf.push(Upd {
                        page: page_no,
                        offset: off,
                        data: data.to_vec(),
                        end_lsn,
                    });
                }
                Record::Commit { txn } => {
                    self.transactions += 1;
                    if self.cur_txn == Some(txn) {
                        for u in self.txn_buf.drain(..) {
                            self.queue_bytes += u.data.len();
                            self.queue.push_back(u);
                        }
                    } else {
                        self.dropped += self.txn_buf.len() as u64;
                        self.txn_buf.clear();
                    }
                    self.cur_txn = None;
                }
            }
            self.pend_pos += rec_len;
        }
        // Forget consumed bytes.
        if self.pend_pos > (1 << 20) || self.pend_pos == self.pend.len() {
            self.pend.drain(..self.pend_pos);
            self.pend_base += self.pend_pos as u64;
            self.pend_pos = 0;
            while let Some((at, _, len)) = self.segs.front() {
                if at + (*len as u64) <= self.pend_base {
                    self.segs.pop_front();
                } else {
                    break;
                }
            }
        }
    }

    // ------------------------------------------------------------ pages

    fn allocate(&mut self, page: u64) -> Option<usize> {
        let f = match self.free.pop() {
            Some(f) => f,
            None if self.frames.len() < self.cap => {
                self.frames.push(Frame {
                    page: u64::MAX,
                    state: FState::Ready,
                    data: vec![0u8; self.ps],
                    lsn: 0,
                    dirty: false,
                    writing: false,
                    refs: 0,
                    referenced: false,
                });
                self.frames.len() - 1
            }
            None => self.evict()?,
        };
        let fr = &mut self.frames[f];
        fr.page = page;
        fr.state = FState::Reading;
        fr.lsn = 0;
        fr.dirty = false;
        fr.writing = false;
        fr.refs = 0;
        fr.referenced = true;
        self.map.insert(page, f);
        Some(f)
    }

    fn evict(&mut self) -> Option<usize> {
        let n = self.frames.len();
        for _ in 0..2 * n {
            let f = self.hand;
            self.hand = (self.hand + 1) % n;
            let fr = &mut self.frames[f];
            if fr.state == FState::Reading || fr.refs > 0 || fr.dirty || fr.writing {
                continue;
            }
            if fr.referenced {
                fr.referenced = false;
                continue;
            }
            self.map.remove(&fr.page);
            fr.page = u64::MAX;
            return Some(f);
        }
        None
    }

    /// Reads ahead the pages of the queued updates.
    fn prepare(&mut self) -> bool {
        let mut any = false;
        self.blocked = false;
        while self.prepared < self.queue.len() && self.reads < REPLAY_DEPTH {
            let page = self.queue[self.prepared].page;
            if let Some(&f) = self.map.get(&page) {
                self.frames[f].refs += 1;
                self.frames[f].referenced = true;
                self.prepared += 1;
                any = true;
                continue;
            }
            let Some(f) = self.allocate(page) else {
                self.blocked = true;
                break;
            };
            self.frames[f].refs = 1;
            let mut run = vec![f];
            // Neighbours needed soon and not cached: read them in the same I/O.
            let soon: Vec<u64> = self
                .queue
                .iter()
                .skip(self.prepared + 1)
                .take(32)
                .map(|u| u.page)
                .collect();
            while run.len() < READ_RUN_MAX {
                let next = page + run.len() as u64;
                if next >= self.header.page_count
                    || self.map.contains_key(&next)
                    || !soon.contains(&next)
                {
                    break;
                }
                match self.allocate(next) {
                    Some(g) => run.push(g),
                    None => break,
                }
            }
            self.prepared += 1;
            self.read_id += 1;
            let id = self.read_id;
            let len = run.len() * self.ps;
            self.reads_meta.insert(id, run);
            self.reads += 1;
            let buf = self.pool.get(len);
            self.io.submit(IoRequest {
                file: self.db.clone(),
                kind: OpKind::Read,
                offset: page * self.ps as u64,
                buf,
                tag: T_READ | id,
            });
            any = true;
        }
        any
    }

    fn page_read_done(&mut self, c: mailbench_io::IoCompletion) {
        self.reads = self.reads.saturating_sub(1);
        let id = c.tag & !T_MASK;
        let Some(run) = self.reads_meta.remove(&id) else {
            return;
        };
        self.db_read.ops += 1;
        self.db_read.latency.record(c.latency());
        if let Err(e) = c.full() {
            self.db_read.errors += 1;
            self.error(format!(
                "I/O error reading database {} at offset {}: {}",
                self.db_path.display(),
                c.offset,
                std::io::Error::from_raw_os_error(e)
            ));
            for f in run {
                self.frames[f].state = FState::Bad;
            }
            self.pool.put(c.buf);
            return;
        }
        self.db_read.bytes += c.buf.len() as u64;
        self.pages_arrived(&run, &c.buf);
        self.pool.put(c.buf);
    }

    /// Pages read for replay: checked, then copied into their frames.
    fn pages_arrived(&mut self, run: &[usize], c: &AlignedBuf) {
        for (k, &f) in run.iter().enumerate() {
            let src = &c.as_slice()[k * self.ps..(k + 1) * self.ps];
            let page = self.frames[f].page;
            match format::check_page(src, self.header.db_id, page) {
                Ok(h) => {
                    let fr = &mut self.frames[f];
                    fr.data.copy_from_slice(src);
                    fr.lsn = h.lsn;
                    fr.state = FState::Ready;
                }
                Err(e) => {
                    self.frames[f].state = FState::Bad;
                    if self.bad_pages.len() < verify::FIRST_BAD_MAX {
                        self.bad_pages.push(page);
                    }
                    self.error(format!(
                        "page {page} of {} is damaged ({e:?}): its updates cannot be replayed",
                        self.db_path.display()
                    ));
                }
            }
        }
    }

    /// Applies queued updates whose page is in.
    fn apply(&mut self) -> bool {
        let mut any = false;
        while self.prepared > 0 {
            let Some(u) = self.queue.front() else { break };
            let Some(&f) = self.map.get(&u.page) else {
                break;
            };
            match self.frames[f].state {
                FState::Reading => break,
                FState::Bad => {}
                FState::Ready => {
                    let fr = &mut self.frames[f];
                    if u.end_lsn > fr.lsn {
                        fr.data[u.offset..u.offset + u.data.len()].copy_from_slice(&u.data);
                        fr.lsn = u.end_lsn;
                        fr.dirty = true;
                        self.applied += 1;
                    } else {
                        self.skipped += 1;
                    }
                }
            }
            self.frames[f].refs = self.frames[f].refs.saturating_sub(1);
            if let Some(u) = self.queue.pop_front() {
                self.queue_bytes -= u.data.len();
            }
            self.prepared -= 1;
            any = true;
        }
        any
    }

    /// Writes dirty unreferenced pages (all of them when `all`), neighbours together.
    fn write_back(&mut self, all: bool) -> bool {
        let mut any = false;
        let max_run = 32usize;
        let mut candidates: Vec<u64> = self
            .frames
            .iter()
            .filter(|f| f.dirty && !f.writing && (f.refs == 0 || all) && f.state == FState::Ready)
            .map(|f| f.page)
            .collect();
        candidates.sort_unstable();
        let mut i = 0;
        while i < candidates.len() && self.writes < WRITE_DEPTH {
            let first = candidates[i];
            let mut run = Vec::new();
            while i < candidates.len()
                && run.len() < max_run
                && candidates[i] == first + run.len() as u64
            {
                if let Some(&f) = self.map.get(&candidates[i]) {
                    run.push(f);
                }
                i += 1;
            }
            if run.is_empty() {
                continue;
            }
            let mut buf = self.pool.get(run.len() * self.ps);
            for (k, &f) in run.iter().enumerate() {
                let fr = &mut self.frames[f];
                format::seal_page(&mut fr.data, self.header.db_id, fr.page, fr.lsn);
                buf.as_mut_slice()[k * self.ps..(k + 1) * self.ps].copy_from_slice(&fr.data);
                fr.dirty = false;
                fr.writing = true;
            }
            self.write_id += 1;
            let id = self.write_id;
            self.writes_meta.insert(id, run);
            self.writes += 1;
            self.io.submit(IoRequest {
                file: self.db.clone(),
                kind: OpKind::Write,
                offset: first * self.ps as u64,
                buf,
                tag: T_WRITE | id,
            });
            any = true;
        }
        any
    }

    fn page_write_done(&mut self, c: mailbench_io::IoCompletion) {
        self.writes = self.writes.saturating_sub(1);
        let id = c.tag & !T_MASK;
        let Some(run) = self.writes_meta.remove(&id) else {
            return;
        };
        self.db_write.ops += 1;
        self.db_write.latency.record(c.latency());
        let ok = c.full().is_ok();
        for f in run {
            self.frames[f].writing = false;
            if !ok {
                self.frames[f].dirty = true;
            }
        }
        match c.full() {
            Ok(()) => self.db_write.bytes += c.buf.len() as u64,
            Err(e) => {
                self.db_write.errors += 1;
                self.error(format!(
                    "I/O error writing database {} at offset {}: {}",
                    self.db_path.display(),
                    c.offset,
                    std::io::Error::from_raw_os_error(e)
                ));
            }
        }
        self.pool.put(c.buf);
    }

    /// Makes the replayed state durable and marks the database clean (only if
    /// every page was replayed and written) — and as having lost its log tail
    /// when replay stopped at damage — then fills the result.
    fn finish(&mut self, r: &mut ReplayResult) {
        if !self.txn_buf.is_empty() {
            self.dropped += self.txn_buf.len() as u64;
            self.txn_buf.clear();
        }
        // The log end is where decoding stopped: the last complete record.
        let end = if self.pend_pos < self.pend.len() {
            self.lsn_of(self.pend_base + self.pend_pos as u64)
        } else {
            self.end_lsn
        };
        if !self.failed() && self.frames.iter().all(|f| !f.dirty) {
            let res = self
                .db
                .sync_data()
                .map_err(|e| Error::io("cannot sync", &self.db_path, e))
                .and_then(|_| {
                    let c = format::Checkpoint {
                        db_id: self.header.db_id,
                        checkpoint_lsn: end,
                        first_generation: end / self.fs,
                        log_file_size: self.fs,
                    };
                    mailbench_base::rundir::write_atomic(
                        &self.log_dir.join("checkpoint.chk"),
                        &c.encode(),
                    )
                })
                .and_then(|_| {
                    let mut h = self.header.clone();
                    h.clean = true;
                    // What was logged after a damaged block is gone: the database
                    // keeps saying so (format::DbHeader::lost_log_tail).
                    h.lost_log_tail |= self.damaged;
                    let mut buf = AlignedBuf::new(self.ps);
                    h.encode(buf.as_mut_slice());
                    use std::os::unix::fs::FileExt;
                    self.db
                        .write_at(buf.as_slice(), 0)
                        .and_then(|_| self.db.sync_data())
                        .map_err(|e| Error::io("cannot write the header of", &self.db_path, e))
                });
            match res {
                Ok(()) => r.clean = true,
                Err(e) => self.error(e.to_string()),
            }
        }
        let secs = self.t0.elapsed().as_secs_f64();
        r.cpu_seconds = mailbench_metrics::system::thread_cpu_s() - self.cpu0;
        let files = self.gens_seen.len() as u64;
        r.start_lsn = self.start_lsn;
        r.end_lsn = end;
        r.log_files_replayed = files;
        r.log_bytes = self.log_bytes;
        r.records = self.records;
        r.transactions = self.transactions;
        r.updates_applied = self.applied;
        r.updates_skipped = self.skipped;
        r.uncommitted_updates_dropped = self.dropped;
        r.seconds = secs;
        r.seconds_per_log_file = if files > 0 { secs / files as f64 } else { 0.0 };
        r.db_reads_per_log_file = if files > 0 {
            self.db_read.ops as f64 / files as f64
        } else {
            0.0
        };
        r.db_writes_per_read = if self.db_read.ops > 0 {
            self.db_write.ops as f64 / self.db_read.ops as f64
        } else {
            0.0
        };
        let (t_flush, before) = self
            .flush_start
            .map(|(t, w)| (t.elapsed().as_secs_f64(), w))
            .unwrap_or((0.0, self.db_write.ops));
        r.db_writes_during_replay = before.min(self.db_write.ops);
        r.db_writes_at_checkpoint = self.db_write.ops - r.db_writes_during_replay;
        r.checkpoint_seconds = t_flush;
        r.db_read = verify::figures(&self.db_read, secs);
        r.db_write = verify::figures(&self.db_write, secs);
        r.log_read = verify::figures(&self.log_read, secs);
        r.stopped = std::mem::take(&mut self.stopped);
        if self.interrupted {
            r.stopped = "interrupted".into();
        }
        r.log_damaged = self.damaged;
        r.bad_pages = std::mem::take(&mut self.bad_pages);
        r.errors = std::mem::take(&mut self.errors);
    }
}

// ---------------------------------------------------------------- the test

/// Progress lines for long phases.
pub type PhaseFn<'a> = &'a mut dyn FnMut(&str);

/// The whole `storage recover` test. With `log_files == 0`, only replays what
/// earlier runs left (recovery after a crash), then verifies.
#[allow(clippy::too_many_lines)] // longer than 100 lines: split when next changed
pub fn run_recover(
    spec: &StorageSpec,
    dir: &RunDir,
    log_files: u64,
    interrupt: &Interrupt,
    phase: PhaseFn<'_>,
) -> Result<RecoverResult> {
    let started = Instant::now();
    let mut header = RunHeader::begin("storage-recover");
    let log = &dir.log;
    let mut errors: Vec<String> = Vec::new();
    let mut res = RecoverResult {
        run: header.clone(),
        verdict: Verdict::from_reasons(Vec::new()),
        spec: spec.clone(),
        log_files_wanted: log_files,
        prior_recovery: Vec::new(),
        generation: Vec::new(),
        instances: Vec::new(),
        verify: None,
        errors: Vec::new(),
    };
    let mut interrupted = false;

    // Databases: existing ones (maybe unclean) or new ones.
    let any_missing = spec.instances.iter().any(|i| !i.db_path.exists());
    if any_missing || spec.instances.iter().any(|i| init_incomplete(&i.db_path)) {
        phase("creating databases");
        match init::init_all(spec, log, interrupt) {
            Ok(_) => {}
            Err(Error::Interrupted) => interrupted = true,
            Err(Error::Runtime(m)) => errors.push(m),
            Err(e) => return Err(e),
        }
    }
    let unclean = !interrupted
        && errors.is_empty()
        && spec
            .instances
            .iter()
            .any(|i| read_header(&i.db_path).map(|h| !h.clean).unwrap_or(false));
    if unclean {
        phase("replaying the logs left by an earlier crash");
        log.line("phase: recovery of databases left unclean");
        res.prior_recovery = replay_all(spec, interrupt);
        for r in &res.prior_recovery {
            log.line(describe(r));
            errors.extend(r.errors.iter().map(|e| format!("{}: {e}", r.name)));
        }
    }
    if interrupt.raised() {
        interrupted = true;
    }

    if log_files > 0 && !interrupted && errors.is_empty() {
        phase(&format!(
            "generating {log_files} log files per database (checkpoint held), then stopping as a crash would"
        ));
        log.line("phase: log generation");
        match generate(spec, log_files, log, interrupt) {
            Ok((g, errs, intr)) => {
                res.generation = g;
                errors.extend(errs);
                interrupted |= intr;
            }
            Err(Error::Runtime(m)) => errors.push(m),
            Err(e) => return Err(e),
        }
        if !interrupted && errors.is_empty() {
            phase("replaying the logs (soft recovery)");
            log.line("phase: soft recovery");
            res.instances = replay_all(spec, interrupt);
            for r in &res.instances {
                log.line(describe(r));
                errors.extend(r.errors.iter().map(|e| format!("{}: {e}", r.name)));
            }
        }
    }
    if interrupt.raised() {
        interrupted = true;
    }
    let readable = spec
        .instances
        .iter()
        .all(|i| read_header(&i.db_path).is_ok());
    if !interrupted && readable && (spec.verify || log_files == 0) {
        phase("verifying every page and log block");
        match verify::verify_all(spec, interrupt) {
            Ok(v) => res.verify = Some(v),
            Err(Error::Interrupted) => interrupted = true,
            Err(e) => errors.push(format!("verification: {e}")),
        }
    }

    let mut reasons = Vec::new();
    for r in res.prior_recovery.iter().chain(res.instances.iter()) {
        if r.log_damaged {
            reasons.push(format!(
                "The log of {} is damaged: {}. The database is marked as having lost its log \
                 tail: storage run, verify and backup use it only with {}.",
                r.name,
                r.stopped,
                init::ACCEPT_LOST_LOG_TAIL
            ));
        }
        if r.needed && !r.clean && r.errors.is_empty() {
            reasons.push(format!("{} was not left consistent by the replay.", r.name));
        }
    }
    if !errors.is_empty() {
        reasons.push(format!(
            "{} errors occurred (first: {}).",
            errors.len(),
            errors[0]
        ));
    }
    if let Some(v) = &res.verify {
        reasons.extend(v.reasons());
    }
    for g in &res.generation {
        if g.log_files < log_files {
            reasons.push(format!(
                "{} generated only {} of the {log_files} log files.",
                g.name, g.log_files
            ));
        }
    }
    res.verdict = if interrupted {
        Verdict {
            status: Status::Interrupted,
            reasons: vec!["The test was interrupted; the figures are partial.".into()],
        }
    } else {
        Verdict::from_reasons(reasons)
    };
    res.errors = errors;
    header.finish(started.elapsed());
    res.run = header;
    Ok(res)
}

fn init_incomplete(db: &Path) -> bool {
    let mut s = db.as_os_str().to_owned();
    s.push(".init");
    Path::new(&s).exists()
}

fn describe(r: &ReplayResult) -> String {
    format!(
        "{}: replayed {} log files ({} records, {} updates applied, {} already on the page) in {:.2} s; {}",
        r.name,
        r.log_files_replayed,
        r.records,
        r.updates_applied,
        r.updates_skipped,
        r.seconds,
        r.stopped
    )
}

/// Runs the load with the checkpoint held until every instance has written
/// `log_files` new generations, then stops as a crash would.
#[allow(clippy::too_many_lines)] // longer than 100 lines: split when next changed
fn generate(
    spec: &StorageSpec,
    log_files: u64,
    log: &TestLog,
    interrupt: &Interrupt,
) -> Result<(Vec<GenerateResult>, Vec<String>, bool)> {
    let caps = mailbench_io::probe(&spec.volumes[0]);
    let (tx, rx) = channel::<Event>();
    let ctl = Arc::new(Control::default());
    ctl.hold_checkpoint.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    let mut errors = Vec::new();
    let mut opened = Vec::new();
    for inst in &spec.instances {
        let h = read_header(&inst.db_path)?;
        let ps = spec.profile.page_size.0 as usize;
        let max_frames = (spec.cache_max_per_db as usize / ps).max(64);
        let min_frames = (spec.cache_min_per_db as usize / ps).min(max_frames);
        let setup = InstanceSetup {
            index: inst.index,
            name: inst.name.clone(),
            db_path: inst.db_path.clone(),
            log_dir: inst.log_dir.clone(),
            header: h,
            profile: spec.profile.clone(),
            cache_min_frames: min_frames,
            cache_max_frames: max_frames,
            sessions: inst.sessions,
            mailboxes: inst.mailboxes,
            copies: 1,
            target_iops: None,
            engine: spec.engine_choice(),
            direct: caps.o_direct,
            sample_interval: Duration::from_millis(250),
            seed: spec.seed.wrapping_add(inst.index as u64 * 7919),
            ack_stream: false,
        };
        match Instance::open(setup, ctl.clone(), tx.clone(), t0) {
            Ok(i) => opened.push(i),
            Err(e) => errors.push(format!("{}: {e}", inst.name)),
        }
    }
    drop(tx);
    let n = spec.instances.len();
    let mut out: Vec<GenerateResult> = spec
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
    let handles: Vec<_> = opened
        .into_iter()
        .map(|inst| {
            std::thread::Builder::new()
                .name("mb-instance".into())
                .spawn(move || inst.run())
        })
        .collect();
    let mut finished = vec![false; n];
    let mut interrupted = false;
    let mut last_note = Instant::now();
    loop {
        if !ctl.abort.load(Ordering::Relaxed) {
            let enough = out.iter().all(|g| g.log_files >= log_files);
            if interrupt.raised() {
                interrupted = true;
            }
            if enough || interrupted || !errors.is_empty() {
                // A crash: stop now, the log flushed, dirty pages left unwritten.
                ctl.abort.store(true, Ordering::Relaxed);
            }
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Event::Interval {
                instance, stats, ..
            }) => {
                if let Some(g) = out.get_mut(instance) {
                    g.log_files += stats.counters.log_generations;
                    g.transactions += stats.counters.transactions;
                    g.seconds = t0.elapsed().as_secs_f64();
                }
            }
            Ok(Event::Error { instance, message }) => {
                log.line(format!("error in instance {instance}: {message}"));
                errors.push(message);
            }
            Ok(Event::Finished { instance, .. }) => {
                if let Some(f) = finished.get_mut(instance) {
                    *f = true;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if last_note.elapsed() > Duration::from_secs(10) {
            last_note = Instant::now();
            log.line(format!(
                "log files so far: {}",
                out.iter()
                    .map(|g| format!("{} {}", g.name, g.log_files))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if finished.iter().all(|f| *f) {
            break;
        }
    }
    for h in handles.into_iter().flatten() {
        let _ = h.join();
    }
    for g in &out {
        log.line(format!(
            "{}: {} log files, {} transactions in {:.1} s",
            g.name, g.log_files, g.transactions, g.seconds
        ));
    }
    Ok((out, errors, interrupted))
}
