//! Setting a replay up (where the checkpoint says it starts, the I/O engine,
//! the database) and its loop: submitting and completing the I/O of every
//! phase until the log is replayed and flushed, or replay fails.

use super::{
    BUFFERS_KEPT, FINAL_DEPTH, FLUSH_DEPTH, LOG_AHEAD, REPLAY_DEPTH, Replay, T_LOG, T_MASK, T_READ,
    T_WRITE, WRITE_DEPTH,
};
use crate::format::{self, DbHeader, LOG_BLOCK_HEADER};
use crate::log_header::{self, LOG_FILE_HEADER};
use crate::spec::InstanceSpec;
use crate::verify;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::{Error, Result};
use mailbench_io::{BufPool, EngineChoice};
use mailbench_results::storage::stats::ClassStats;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where replay starts: the checkpoint's LSN (or the first log file's start
/// without a checkpoint file), its log file, block and the bytes to skip in
/// that block.
struct Start {
    lsn: u64,
    generation: u64,
    block: u64,
    skip: usize,
}

impl Start {
    fn of(inst: &InstanceSpec, header: &DbHeader) -> Result<Start> {
        let fs = header.log_file_size as u64;
        let gens = verify::log_generations(&inst.log_dir);
        let ckpt = verify::read_checkpoint(&inst.log_dir, header.db_id)
            .map_err(|e| Error::runtime(format!("{}: {e}", inst.name)))?;
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
        // The blocks follow the file's header: a start inside the header
        // (the end of the previous file, or no checkpoint) is the first block's start.
        let in_data = (start_lsn - start_gen * fs).saturating_sub(LOG_FILE_HEADER as u64);
        let lb = header.log_block() as u64;
        let block = in_data / lb;
        let skip = ((in_data % lb) as usize).saturating_sub(LOG_BLOCK_HEADER);
        Ok(Start {
            lsn: start_lsn,
            generation: start_gen,
            block,
            skip,
        })
    }
}

/// The size of a log data read and the offset of the first file's first one
/// (the read holding the start's `block`). ESE's redo reads a log file's
/// header on its own (`ErrLGIReadFileHeader`, dev/ese/src/ese/_log/log.cxx),
/// then the data after it into a buffer the size of the file, at most
/// `JET_paramMaxCoalesceReadSize` at a time (`ErrReaderEnsureSector`,
/// dev/ese/src/ese/_log/logread.cxx); the same parameter sizes its background
/// maintenance reads (`DBMScanConfig::CpgBatch`, dbscan.cxx), which is where
/// the profile's value comes from.
fn log_reads(coalesce: usize, fs: u64, log_block: usize, block: u64) -> (usize, u64) {
    let data = fs - LOG_FILE_HEADER as u64;
    let size = (coalesce.min(data as usize) / log_block).max(1) * log_block;
    let per_read = (size / log_block) as u64;
    (
        size,
        log_header::block_offset(block / per_read * per_read, log_block),
    )
}

impl Replay {
    /// Sets the replay of one instance up: where it starts, the I/O engine and
    /// the database opened; nothing read yet.
    pub(super) fn new(
        inst: &InstanceSpec,
        header: DbHeader,
        engine: EngineChoice,
        direct: bool,
        cache_pages: usize,
        coalesce: usize,
    ) -> Result<Replay> {
        let t0 = Instant::now();
        let fs = header.log_file_size as u64;
        let ps = header.page_size as usize;
        let Start {
            lsn: start_lsn,
            generation: start_gen,
            block,
            skip,
        } = Start::of(inst, &header)?;
        let caps = mailbench_io::Capabilities {
            o_direct: direct,
            uring: mailbench_io::uring::available(),
        };
        let writes = WRITE_DEPTH.max(FINAL_DEPTH).max(FLUSH_DEPTH);
        let io = mailbench_io::build(engine, caps, REPLAY_DEPTH + LOG_AHEAD + writes + 8)
            .map_err(Error::runtime)?
            .engine;
        let db = mailbench_io::open_file(&inst.db_path, false, direct, false)
            .map_err(|e| Error::io("cannot open database", &inst.db_path, e))?;
        let log_block = header.log_block();
        let (log_read_size, chunk_start) = log_reads(coalesce, fs, log_block, block);
        let read_run_pages = (coalesce / ps).max(1);
        Ok(Replay {
            db_path: inst.db_path.clone(),
            log_dir: inst.log_dir.clone(),
            ps,
            fs,
            log_block,
            log_read_size,
            read_run_pages,
            blocks_per_file: log_header::blocks_per_file(fs, log_block),
            db: Arc::new(db),
            direct,
            io,
            pool: BufPool::new(BUFFERS_KEPT),
            log_files: HashMap::new(),
            sub_gen: start_gen,
            sub_off: 0,
            first_data_off: Some(chunk_start),
            header_ok: None,
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
            seg_cursor: 0,
            open: HashMap::new(),
            open_spare: Vec::new(),
            upd_bytes: super::UpdBytes::default(),
            queue: VecDeque::new(),
            queue_bytes: 0,
            prepared: 0,
            frames: Vec::with_capacity(cache_pages.max(64)),
            spare: Vec::new(),
            memory: super::pages::FrameMemory::start(cache_pages.max(64), ps),
            map: HashMap::new(),
            free: Vec::new(),
            hand: 0,
            cap: cache_pages.max(64),
            reads: 0,
            reads_meta: HashMap::new(),
            runs_spare: Vec::new(),
            arrived: Vec::new(),
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
            finals: None,
            pending: crate::cache::PageMap::default(),
            header,
        })
    }

    pub(super) fn failed(&self) -> bool {
        !self.errors.is_empty() || self.interrupted
    }

    pub(super) fn error(&mut self, msg: String) {
        if self.errors.len() < 20 {
            self.errors.push(msg);
        }
    }

    /// The replay's loop. Each turn first hands the next page and log reads
    /// to the kernel (the slots of the reads that completed), and only then
    /// checks the pages that arrived, applies their updates and decodes (one
    /// log chunk a turn): the CPU work of checking, applying and decoding
    /// never holds back the reads that keep the device busy.
    pub(super) fn run(&mut self, interrupt: &Interrupt) {
        let mut done = Vec::new();
        let mut flushing = false;
        loop {
            if interrupt.raised() && !self.interrupted {
                self.interrupted = true;
                self.stopped = "interrupted".into();
            }
            let mut progressed = false;
            if !self.failed() {
                progressed |= self.prepare();
                progressed |= self.submit_log_reads();
                if self.blocked && self.writes < WRITE_DEPTH / 2 {
                    progressed |= self.write_back(false);
                }
                if progressed {
                    self.io.wait(0, Some(Duration::ZERO), &mut done);
                    self.complete(&mut done);
                }
                progressed |= self.check_arrived();
                progressed |= self.apply();
                progressed |= self.consume_chunks();
                if self.log_done && self.finals.is_none() {
                    // The final flush begins: pages no update will touch again.
                    self.finals = Some((self.final_pages(), 0));
                    self.flush_start =
                        Some((Instant::now(), self.db_write.ops + self.writes as u64));
                }
                progressed |= self.write_finals();
                let replayed =
                    self.log_done && self.queue.is_empty() && self.reads == 0 && self.chunks_idle();
                if replayed && !flushing {
                    flushing = true;
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
            let (min, t) = if progressed || in_flight == 0 {
                (0, Duration::ZERO)
            } else {
                (1, Duration::from_millis(200))
            };
            self.io.wait(min, Some(t), &mut done);
            self.complete(&mut done);
        }
    }

    /// Completions handed to their phase.
    fn complete(&mut self, done: &mut Vec<mailbench_io::IoCompletion>) {
        for c in done.drain(..) {
            match c.tag & T_MASK {
                T_LOG => self.log_read_done(c),
                T_READ => self.page_read_done(c),
                T_WRITE => self.page_write_done(c),
                _ => {}
            }
        }
    }

    fn chunks_idle(&self) -> bool {
        self.log_in_flight == 0
    }
}
