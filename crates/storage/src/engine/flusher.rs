//! Getting changes to disk: log flushes (group commit), write-back of dirty
//! pages (write-ahead rule, neighbours coalesced) and checkpoints.

use super::{Instance, InstanceSetup, K_LOG_WRITE, K_PAGE_WRITE, K_SYNC, Slab, io_error_text, tag};
use crate::format;
use crate::log::{FlushKind, LogWrite, LogWriter, Next, Origin, Ready};
use mailbench_base::{Error, Result};
use mailbench_io::{AlignedBuf, IoCompletion, IoRequest, OpKind};
use mailbench_results::storage::stats::Class;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Page writes in flight at most per instance.
const MAX_WRITE_IOS: usize = 16;
/// Frames the scavenger's hand passes at most per turn (the rest next turn).
const SCAVENGE_SCAN: usize = 512;
/// The database is synced and the checkpoint advanced this often.
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);

pub(super) struct PageWrite {
    frames: Vec<usize>,
    /// The write goes straight from its frames' buffers (lent, not copied).
    lent: bool,
}

/// Write-back state: whether the available buffers fell under the start
/// threshold (and have not yet reached the stop threshold), writes in flight,
/// thresholds, and the log's capacity write.
pub(super) struct WriteBack {
    scavenging: bool,
    avail_start: usize,
    avail_stop: usize,
    write_ios: usize,
    writes: Slab<PageWrite>,
    last_log_flush: Instant,
    /// Unwritten log bytes that start a write of the log's whole blocks
    /// (half the log buffer).
    log_capacity: u64,
    /// The cold dirty frames the scavenger found (kept for its next pass).
    cold: Vec<usize>,
    /// A page to write waits for its log to be durable: the next log flush
    /// writes everything (cleared when a flush starts).
    wal_wanted: bool,
}

/// The flush thresholds in frames of an instance's cache of `max_frames`:
/// write-back of cold pages starts when fewer than `start_pct` of the frames
/// are available (hold no page) and stops once `stop_pct` are, as ESE keeps
/// its pool of available buffers between the start and stop thresholds
/// (`BFIMaintAvailPoolUpdateThresholds` in `dev/ese/src/ese/bf.cxx`:
/// `cbfCacheTargetOptimal / 100` and `/ 50` when the cache size is set and
/// the thresholds are not). At least one frame to start, one more to stop.
pub(crate) fn flush_thresholds(max_frames: usize, start_pct: f64, stop_pct: f64) -> (usize, usize) {
    let max = max_frames as f64;
    let start = ((max * start_pct / 100.0) as usize).max(1);
    let stop = ((max * stop_pct / 100.0) as usize).max(start + 1);
    (start, stop.min(max_frames.saturating_sub(1).max(start)))
}

/// The write-ahead rule at a page write's submission: the log holding the
/// page's last change is durable.
fn check_write_ahead(page: u64, page_lsn: u64, durable_lsn: u64) {
    invariant!(
        page_lsn <= durable_lsn,
        "write-ahead rule: page {page} (LSN {page_lsn}) written before its log is durable \
         (durable up to {durable_lsn})"
    );
}

/// Whether the scavenger runs after seeing `available` frames: it starts
/// under the start threshold, stops at or over the stop threshold, and
/// between them keeps doing what it did.
fn scavenging_after(scavenging: bool, available: usize, start: usize, stop: usize) -> bool {
    if available < start {
        true
    } else if available >= stop {
        false
    } else {
        scavenging
    }
}

impl WriteBack {
    pub(super) fn new(s: &InstanceSetup, log_block: usize, now: Instant) -> WriteBack {
        let (avail_start, avail_stop) = flush_thresholds(
            s.cache_max_frames,
            s.profile.flush_start_pct,
            s.profile.flush_stop_pct,
        );
        let data_share = (log_block - format::LOG_BLOCK_HEADER) as f64 / log_block as f64;
        WriteBack {
            scavenging: false,
            avail_start,
            avail_stop,
            write_ios: 0,
            writes: Slab::new(),
            last_log_flush: now,
            log_capacity: (s.profile.log_buffer_bytes() as f64 / 2.0 * data_share) as u64,
            cold: Vec::new(),
            wal_wanted: false,
        }
    }
}

/// The checkpoint: the database sync in flight (for the LSN it will make the
/// checkpoint), the checkpoint file being written, when the last one started,
/// and where replay would start now.
pub(super) struct Checkpoints {
    sync_in_flight: Option<u64>,
    last: Instant,
    lsn: u64,
    /// The thread that writes the checkpoint file (None: it could not be
    /// started, the instance's thread writes it).
    files: Option<CheckpointFiles>,
}

impl Checkpoints {
    pub(super) fn new(now: Instant, lsn: u64, log: &LogWriter, log_dir: &Path) -> Checkpoints {
        let ahead = Formatter::new(log_dir, log.file_size(), log.direct());
        let files = CheckpointFiles::start(log_dir.to_path_buf(), log.ready(), ahead);
        if let Some(f) = &files {
            f.want_log_files();
        }
        Checkpoints {
            sync_in_flight: None,
            last: now,
            lsn,
            files,
        }
    }
}

const CHECKPOINT_FILE: &str = "checkpoint.chk";

/// Files made ready ahead for the log, at most (each one a log file the folder
/// held before its checkpoint: the folder never grows by them).
const MAX_READY: usize = 32;

/// Files formatted ahead of the log, at most (ESE keeps one, `edbtmp`): made
/// only while no file behind a checkpoint is free, in the first seconds of a run.
const FORMAT_AHEAD: usize = 2;

/// What the checkpoint thread is given: a checkpoint, or a sign that the log
/// began a generation (a file may be wanted ahead).
enum Job {
    Checkpoint(CheckpointJob),
    LogFiles,
}

/// A checkpoint to make durable: its file's bytes, then the log files behind it
/// to reuse or remove.
struct CheckpointJob {
    lsn: u64,
    bytes: Vec<u8>,
    remove: Vec<PathBuf>,
}

/// Writes checkpoint files (write, fsync, rename) and reuses or removes the log
/// files behind them ([`retire`]) on a thread of its own, one checkpoint after
/// the other, as ESE does this file work beside its sessions: on the instance's
/// thread each took 1-7 ms of waiting for the file system's journal, with the
/// thread's I/O completions unserved meanwhile. The rules hold as before: a job
/// is given only after the database sync its LSN rests on completed, and its
/// log files are reused or removed only after its checkpoint file is written.
struct CheckpointFiles {
    jobs: Option<Sender<Job>>,
    /// The LSN written (or why it could not be), per job, in order.
    done: Receiver<std::result::Result<u64, String>>,
    thread: Option<JoinHandle<()>>,
    /// The LSN of the job given and not yet reported.
    writing: Option<u64>,
    ready: Arc<Mutex<Ready>>,
}

impl CheckpointFiles {
    fn start(
        dir: PathBuf,
        ready: Arc<Mutex<Ready>>,
        mut ahead: Formatter,
    ) -> Option<CheckpointFiles> {
        let (jobs, job_rx) = channel::<Job>();
        let (done_tx, done) = channel();
        let path = dir.join(CHECKPOINT_FILE);
        let shared = ready.clone();
        let thread = std::thread::Builder::new()
            .name("mb-checkpoint".into())
            .spawn(move || {
                for job in job_rx {
                    let job = match job {
                        Job::Checkpoint(job) => job,
                        Job::LogFiles => {
                            ahead.fill(&ready);
                            continue;
                        }
                    };
                    let r = mailbench_base::rundir::write_atomic(&path, &job.bytes)
                        .map(|()| {
                            retire(&dir, &job.remove, &ready);
                            job.lsn
                        })
                        .map_err(|e| e.to_string());
                    if done_tx.send(r).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(CheckpointFiles {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
            writing: None,
            ready: shared,
        })
    }

    /// Asks the thread to format log files ahead if too few are ready.
    fn want_log_files(&self) {
        if let Some(j) = &self.jobs {
            let _ = j.send(Job::LogFiles);
        }
    }

    /// Hands a checkpoint to the thread; false if it is gone.
    fn give(&mut self, job: CheckpointJob) -> bool {
        let lsn = job.lsn;
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|j| j.send(Job::Checkpoint(job)).is_ok());
        if sent {
            self.writing = Some(lsn);
        }
        sent
    }

    /// Waits for the job given (if any) and stops the thread; returns what the
    /// jobs not yet reported reported.
    fn finish(&mut self) -> Vec<std::result::Result<u64, String>> {
        if let Ok(mut r) = self.ready.lock() {
            r.close();
        }
        self.jobs = None;
        let joined = self
            .thread
            .take()
            .map(|t| mailbench_base::thread::join(t, "checkpoint"));
        self.writing = None;
        let mut reports: Vec<_> = self.done.try_iter().collect();
        if let Some(Err(e)) = joined {
            reports.push(Err(e));
        }
        reports
    }
}

/// The log files behind a written checkpoint: each renamed to the next free
/// generation's name and made ready for the log (up to [`MAX_READY`]), the
/// rest removed. The new names are made durable (one fsync of the folder)
/// before the log may use them: a file holding new log blocks must never come
/// back under its old name after a power loss. (The checkpoint file's rename
/// goes before these renames; a journaling file system keeps that order.)
fn retire(dir: &Path, old: &[PathBuf], ready: &Mutex<Ready>) {
    if old.is_empty() {
        return;
    }
    let mut made: Vec<u64> = Vec::new();
    for p in old {
        match reuse(dir, p, ready, &made) {
            Some(g) => made.push(g),
            None => {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    publish(dir, made, ready, Origin::Reused);
}

/// Makes the names of files made ready durable (one fsync of the folder), then
/// hands them to the log.
fn publish(dir: &Path, made: Vec<u64>, ready: &Mutex<Ready>, origin: Origin) {
    if made.is_empty() {
        return;
    }
    let synced = mailbench_io::sync_dir(dir).is_ok();
    let Ok(mut r) = ready.lock() else {
        return;
    };
    if synced {
        r.add(&made, origin);
        return;
    }
    // Names that may not survive a power loss are not used: removed, under
    // the lock, so the log cannot reach one of them meanwhile (a name it
    // passed already holds its own file).
    for g in made.into_iter().filter(|g| *g > r.opened()) {
        let _ = std::fs::remove_file(LogWriter::path_of(dir, g));
    }
}

/// Renames `old` to the first generation name above the log's and above the
/// files made ready (`made`: this checkpoint's, not yet handed over). None when
/// enough files are ready or the file system refuses the rename.
fn reuse(dir: &Path, old: &Path, ready: &Mutex<Ready>, made: &[u64]) -> Option<u64> {
    let mut g = {
        let r = ready.lock().ok()?;
        if r.count() + made.len() >= MAX_READY {
            return None;
        }
        r.next_free().max(made.last().map_or(0, |m| m + 1))
    };
    // A name taken meanwhile (the log created that generation itself) is
    // skipped; the log opens generations in order, so a few tries suffice.
    for _ in 0..8 {
        match mailbench_io::rename_noreplace(old, &LogWriter::path_of(dir, g)) {
            Ok(()) => return Some(g),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => g += 1,
            Err(_) => return None,
        }
    }
    None
}

/// Writes new log files with zeros ahead of the log while too few files are
/// ready, as ESE writes its next log file before use (`LGWriteTmpLog`): the
/// log's writes then land in written blocks from a run's first second, before
/// any checkpoint frees a file. A zeroed file reads as a new one does (a zero
/// block is the end of the log), so the crash rules are those of a new file.
pub(super) struct Formatter {
    dir: PathBuf,
    file_size: u64,
    direct: bool,
    /// Zeros to write from (allocated at the first file).
    zeros: AlignedBuf,
}

/// The bytes of one write of a file being formatted, at most.
const FORMAT_WRITE: u64 = 1 << 20;

impl Formatter {
    pub(super) fn new(dir: &Path, file_size: u64, direct: bool) -> Formatter {
        Formatter {
            dir: dir.to_path_buf(),
            file_size,
            direct,
            zeros: AlignedBuf::empty(),
        }
    }

    /// Formats files under the next free generation names until
    /// [`FORMAT_AHEAD`] are ready, then hands them over. Stops at the first
    /// failure (ENOSPC, EIO): the log then creates its files itself, and
    /// reports the error if it meets it too.
    fn fill(&mut self, ready: &Mutex<Ready>) {
        let mut made: Vec<u64> = Vec::new();
        // A name taken (by the log meanwhile, or by a file of another run) is
        // skipped; a few tries suffice.
        let mut above = 0;
        for _ in 0..FORMAT_AHEAD + 8 {
            let g = {
                let Ok(r) = ready.lock() else { return };
                if r.closing() || r.count() + made.len() >= FORMAT_AHEAD {
                    break;
                }
                r.next_free().max(above + 1)
            };
            above = g;
            match self.format(&LogWriter::path_of(&self.dir, g)) {
                Ok(()) => made.push(g),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(_) => break,
            }
        }
        publish(&self.dir, made, ready, Origin::Formatted);
    }

    /// Creates `path` (never over an existing file), allocates it whole, writes
    /// zeros over it and makes its blocks durable. Removed again on a failure.
    fn format(&mut self, path: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let f = mailbench_io::create_new_file_with(path, self.direct, false)?;
        let chunk = self.file_size.min(FORMAT_WRITE) as usize;
        if self.zeros.len() != chunk {
            self.zeros = AlignedBuf::new(chunk);
        }
        let r = (|| {
            mailbench_io::preallocate(&f, self.file_size)?;
            let mut at = 0;
            while at < self.file_size {
                let n = (self.file_size - at).min(chunk as u64) as usize;
                f.write_all_at(&self.zeros.as_slice()[..n], at)?;
                at += n as u64;
            }
            f.sync_data()
        })();
        if r.is_err() {
            let _ = std::fs::remove_file(path);
        }
        r
    }
}

impl Drop for CheckpointFiles {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Instance {
    // ------------------------------------------------------------ log

    /// Starts a log flush when one is due: everything appended when a commit
    /// waits, the flush interval passed, write-back waits on the write-ahead
    /// rule, or the instance is stopping; the whole blocks only when half the
    /// log buffer is filled (ESE's capacity write: "Signal write thread to
    /// write log buffer if at least (g_lLogBuffers / 2) disk sectors are
    /// ready", `LOG_WRITE_BUFFER::ErrLGLogRec`).
    pub(super) fn drive_log(&mut self, now: Instant, aborting: bool) {
        if self.log.writing() || self.log.unflushed() == 0 {
            return;
        }
        let p = &self.s.profile;
        // A page write waits for the log (ESE's `ErrPrepareLogWrite`): a cold
        // page the scavenger or the checkpoint depth wants to write is not
        // durable yet, or a session stalled or the instance stops with
        // nothing being written.
        let wal_blocked = self.wb.wal_wanted
            || (self.cache.dirty_count() > 0
                && (self.any_stalled() || !self.accepting())
                && self.cache.writing_count() == 0);
        let lazy_due = p.log_flush_interval_ms > 0
            && now.duration_since(self.wb.last_log_flush)
                >= Duration::from_millis(p.log_flush_interval_ms);
        let everything =
            self.commits_waiting() || lazy_due || wal_blocked || aborting || !self.accepting();
        let kind = if everything {
            FlushKind::All
        } else if self.log.unflushed() >= self.wb.log_capacity {
            FlushKind::WholeBlocks
        } else {
            return;
        };
        match self.log.start_flush(kind) {
            Ok(Some(first)) => {
                if kind == FlushKind::All {
                    self.wb.wal_wanted = false;
                }
                if self.s.ack_stream && self.log.rolled() {
                    // Test-only: this flush rolls over to a new log generation.
                    println!("ROLL {} {}", self.s.index, self.log.generation());
                }
                self.wb.last_log_flush = now;
                self.interval.counters.log_flushes += 1;
                self.submit_log_write(first);
            }
            Ok(None) => {}
            Err(e) => self.record_error(e.to_string()),
        }
    }

    fn submit_log_write(&mut self, w: LogWrite) {
        self.io.submit(IoRequest {
            file: w.file,
            kind: OpKind::Write,
            offset: w.offset,
            buf: w.buf,
            tag: tag(K_LOG_WRITE, 0),
            more: Vec::new(),
        });
    }

    /// When the log flush interval makes a flush of what is appended due.
    pub(super) fn next_log_flush_due(&self) -> Option<Instant> {
        let timer = self.s.profile.log_flush_interval_ms > 0;
        (timer && self.log.unflushed() > 0 && !self.log.writing()).then(|| {
            self.wb.last_log_flush + Duration::from_millis(self.s.profile.log_flush_interval_ms)
        })
    }

    pub(super) fn log_write_done(&mut self, c: IoCompletion) {
        let st = self.interval.class_mut(Class::LogWrite);
        st.ops += 1;
        st.latency.record(c.latency());
        let result = c.full();
        match result {
            Ok(()) => st.bytes += c.buf.len() as u64,
            Err(_) => st.errors += 1,
        }
        let offset = c.offset;
        self.log.recycle(c.buf);
        if let Err(e) = result {
            self.record_error(io_error_text("writing log", &self.s.log_dir, offset, e));
            return;
        }
        let durable = match self.log.write_done() {
            Some(Next::Write(w)) => {
                self.submit_log_write(w);
                return;
            }
            Some(Next::Durable(d)) => d,
            None => return,
        };
        self.commits_durable(durable);
        let closed = self.log.take_closed();
        if !closed.is_empty()
            && let Some(f) = &self.ckpt.files
        {
            f.want_log_files();
        }
        for g in closed {
            self.interval.counters.log_generations += 1;
            self.log_closed(g);
        }
    }

    // ------------------------------------------------------------ write-back

    /// How much log lies between the oldest change not yet on disk and the end.
    pub(super) fn checkpoint_depth(&self) -> u64 {
        let oldest = self
            .cache
            .oldest_unwritten_lsn()
            .unwrap_or(self.log.next_lsn());
        self.log.next_lsn().saturating_sub(oldest)
    }

    /// Writes dirty pages back: the cold ones the scavenger finds while the
    /// available buffers are short (under the start threshold, until the stop
    /// threshold) or a session stalled for a clean buffer, and the oldest
    /// changes first while the checkpoint is deeper than its limit or the
    /// instance is stopping (ESE's avail pool and checkpoint depth
    /// maintenance, `BFIMaintScavengeIScavengePages` and
    /// `BFIMaintCheckpointDepthIFlushPages` in `dev/ese/src/ese/bf.cxx`).
    pub(super) fn drive_writeback(&mut self) {
        self.wb.scavenging = scavenging_after(
            self.wb.scavenging,
            self.cache.available(),
            self.wb.avail_start,
            self.wb.avail_stop,
        );
        if self.wb.scavenging || self.any_stalled() {
            self.scavenge();
        }
        let depth_max = self.s.profile.checkpoint_depth.0;
        let stopping = !self.accepting();
        let max_pages = self.s.profile.max_write_pages as usize;
        while self.wb.write_ios < MAX_WRITE_IOS {
            if !stopping && self.checkpoint_depth() <= depth_max {
                break;
            }
            let Some((first_page, frames)) =
                self.cache.take_write_run(self.log.durable_lsn(), max_pages)
            else {
                // The oldest change is not durable yet: the log first.
                self.wb.wal_wanted |= self.cache.dirty_count() > 0;
                break;
            };
            self.submit_page_write(first_page, frames);
        }
    }

    /// One pass of the scavenger: cold clean pages become available frames,
    /// cold dirty pages (whose changes are durable) are written, so that
    /// they are clean for its next pass, until the available frames and the
    /// pages being written reach the stop threshold.
    fn scavenge(&mut self) {
        let durable = self.log.durable_lsn();
        let max_pages = self.s.profile.max_write_pages as usize;
        let mut cold = std::mem::take(&mut self.wb.cold);
        cold.clear();
        let want = self
            .wb
            .avail_stop
            .max(1)
            .saturating_sub(self.cache.available() + self.cache.writing_count());
        let room = MAX_WRITE_IOS.saturating_sub(self.wb.write_ios);
        let scan = self
            .cache
            .scavenge(want, durable, room, SCAVENGE_SCAN, &mut cold);
        self.wb.wal_wanted |= scan.not_durable > 0;
        for &f in &cold {
            if self.wb.write_ios >= MAX_WRITE_IOS {
                break;
            }
            if let Some((first_page, frames)) = self.cache.take_write_run_at(f, durable, max_pages)
            {
                self.submit_page_write(first_page, frames);
            }
        }
        self.wb.cold = cold;
    }

    /// Seals the pages (header and checksum: patched where the frame knows its
    /// page's checksum, a full pass else) and writes them. Pages no
    /// transaction holds go straight from their frames, whose buffers are lent
    /// to the write (one vectored write for a run of neighbours; a session that
    /// changes one of them meanwhile waits for the write); a run holding a page
    /// a transaction holds goes from a snapshot (that session may change the
    /// page again while its write is in flight).
    fn submit_page_write(&mut self, first_page: u64, frames: Vec<usize>) {
        let n = frames.len();
        let ps = self.ps;
        let db_id = self.s.header.db_id;
        let durable = self.log.durable_lsn();
        for &f in &frames {
            let fr = &mut self.cache.frames[f];
            check_write_ahead(fr.page_no, fr.lsn, durable);
            let page = fr.data.as_mut_slice();
            // A page whose checksum is known is resealed by patching it.
            let id = (db_id, fr.page_no);
            fr.crc = Some(match fr.crc {
                Some(crc) => format::reseal_page(page, crc, id, fr.hdr_lsn, fr.lsn),
                None => {
                    format::seal_page(page, db_id, fr.page_no, fr.lsn);
                    format::page_crc(page)
                }
            });
            fr.hdr_lsn = fr.lsn;
        }
        let lent = frames.iter().all(|&f| self.cache.frames[f].pins == 0);
        let (buf, more) = if lent {
            let more = frames[1..]
                .iter()
                .map(|&f| self.cache.lend_buf(f))
                .collect();
            (self.cache.lend_buf(frames[0]), more)
        } else {
            let mut buf = self.pool.get(n * ps);
            for (k, &f) in frames.iter().enumerate() {
                let src = self.cache.frames[f].data.as_slice();
                buf.as_mut_slice()[k * ps..(k + 1) * ps].copy_from_slice(src);
            }
            (buf, Vec::new())
        };
        self.bg.note_write(first_page, n as u64);
        let id = self.wb.writes.insert(PageWrite { frames, lent });
        self.wb.write_ios += 1;
        self.io.submit(IoRequest {
            file: self.db.clone(),
            kind: OpKind::Write,
            offset: first_page * ps as u64,
            buf,
            tag: tag(K_PAGE_WRITE, id),
            more,
        });
    }

    /// The buffers a write of a run of pages is copied into when one of its
    /// pages is held by a transaction (one size class per power of two up to
    /// the longest run), faulted in at setup rather than on their first use.
    pub(super) fn prefill_write_buffers(&mut self) {
        let max_pages = (self.s.profile.max_write_pages as usize).max(1);
        let mut pages = 1;
        while pages < 2 * max_pages {
            self.pool.prefill(pages.min(max_pages) * self.ps);
            pages *= 2;
        }
    }

    pub(super) fn page_write_done(&mut self, id: usize, c: IoCompletion) {
        let Some(w) = self.wb.writes.remove(id) else {
            return;
        };
        self.wb.write_ios -= 1;
        let st = self.interval.class_mut(Class::DbWrite);
        st.ops += 1;
        st.latency.record(c.latency());
        self.total_ios += 1;
        let result = c.full();
        match result {
            Ok(()) => st.bytes += c.len() as u64,
            Err(_) => st.errors += 1,
        }
        for &f in &w.frames {
            self.cache.write_done(f, result.is_ok());
        }
        let offset = c.offset;
        if w.lent {
            // Every buffer back before any waiting session goes on.
            for (&f, buf) in w.frames.iter().zip(std::iter::once(c.buf).chain(c.more)) {
                self.cache.restore_buf(f, buf);
            }
            let mut waiting: Vec<(usize, Vec<u32>)> = Vec::new();
            for &f in &w.frames {
                let list = &mut self.cache.frames[f].waiters;
                if !list.is_empty() {
                    waiting.push((f, std::mem::take(list)));
                }
            }
            for (f, waiters) in waiting {
                self.resume_taken(f, waiters);
            }
        } else {
            self.pool.put(c.buf);
        }
        if let Err(e) = result {
            self.record_error(io_error_text(
                "writing database",
                &self.s.db_path,
                offset,
                e,
            ));
        }
    }

    // ------------------------------------------------------------ checkpoints

    fn checkpoint_bytes(&self, lsn: u64) -> Vec<u8> {
        format::Checkpoint {
            db_id: self.s.header.db_id,
            checkpoint_lsn: lsn,
            first_generation: lsn / self.log.file_size(),
            log_file_size: self.log.file_size(),
        }
        .encode()
    }

    /// Writes the checkpoint file on this thread (at start and at shutdown).
    pub(super) fn write_checkpoint(&mut self, lsn: u64) -> Result<()> {
        let bytes = self.checkpoint_bytes(lsn);
        mailbench_base::rundir::write_atomic(&self.s.log_dir.join(CHECKPOINT_FILE), &bytes)?;
        self.ckpt.lsn = lsn;
        Ok(())
    }

    /// Whether a checkpoint is on its way: its database sync in flight or its
    /// file being written.
    fn checkpoint_busy(&self) -> bool {
        self.ckpt.sync_in_flight.is_some()
            || self
                .ckpt
                .files
                .as_ref()
                .is_some_and(|f| f.writing.is_some())
    }

    /// When the next checkpoint is due (none while one is on its way).
    pub(super) fn next_checkpoint_due(&self) -> Option<Instant> {
        (!self.checkpoint_busy()).then_some(self.ckpt.last + CHECKPOINT_INTERVAL)
    }

    /// Takes in what the checkpoint thread reported.
    fn checkpoint_reports(&mut self) {
        let Some(files) = self.ckpt.files.as_mut() else {
            return;
        };
        let reports: Vec<_> = files.done.try_iter().collect();
        if !reports.is_empty() {
            files.writing = None;
        }
        for r in reports {
            self.checkpoint_written(r);
        }
    }

    fn checkpoint_written(&mut self, r: std::result::Result<u64, String>) {
        match r {
            Ok(lsn) => {
                self.ckpt.lsn = self.ckpt.lsn.max(lsn);
                self.interval.counters.checkpoints += 1;
            }
            Err(e) => self.record_error(e),
        }
    }

    /// Waits for the checkpoint file being written, takes in its report and
    /// stops the checkpoint thread (before the instance writes the file itself,
    /// and before it finishes).
    pub(super) fn finish_checkpoint_files(&mut self) {
        let reports = self
            .ckpt
            .files
            .take()
            .map(|mut f| f.finish())
            .unwrap_or_default();
        for r in reports {
            self.checkpoint_written(r);
        }
    }

    /// Every [`CHECKPOINT_INTERVAL`]: syncs the database, then (on completion)
    /// moves the checkpoint to the oldest change not yet on disk.
    pub(super) fn drive_checkpoint(&mut self, now: Instant) {
        self.checkpoint_reports();
        if self.checkpoint_busy() || now.duration_since(self.ckpt.last) < CHECKPOINT_INTERVAL {
            return;
        }
        self.ckpt.last = now;
        if self.ctl.hold_checkpoint.load(Ordering::Relaxed) {
            return;
        }
        let lsn = self
            .cache
            .oldest_unwritten_lsn()
            .unwrap_or(self.log.durable_lsn())
            .min(self.log.durable_lsn());
        if lsn <= self.ckpt.lsn {
            return;
        }
        self.ckpt.sync_in_flight = Some(lsn);
        if self.s.ack_stream {
            println!("CKPT {} {lsn}", self.s.index);
        }
        self.io.submit(IoRequest {
            file: self.db.clone(),
            kind: OpKind::Sync,
            offset: 0,
            buf: AlignedBuf::empty(),
            tag: tag(K_SYNC, 0),
            more: Vec::new(),
        });
    }

    pub(super) fn checkpoint_synced(&mut self, c: &IoCompletion) {
        let Some(lsn) = self.ckpt.sync_in_flight.take() else {
            return;
        };
        if let Err(e) = c.full() {
            self.record_error(io_error_text("syncing database", &self.s.db_path, 0, e));
            return;
        }
        // Circular logging: the files behind the checkpoint that no replica
        // still has to read go once the checkpoint file is written.
        let keep = self.replicas_need_from(lsn / self.log.file_size());
        if self.ckpt.files.is_some() {
            let job = CheckpointJob {
                lsn,
                bytes: self.checkpoint_bytes(lsn),
                remove: self.log.take_before(keep),
            };
            if !self.ckpt.files.as_mut().is_some_and(|f| f.give(job)) {
                self.record_error("the checkpoint thread stopped (internal error)".into());
            }
            return;
        }
        if let Err(e) = self.write_checkpoint(lsn) {
            self.record_error(e.to_string());
            return;
        }
        self.interval.counters.checkpoints += 1;
        self.log.remove_before(keep);
    }

    /// After the last transaction: sync, move the checkpoint to the end of the
    /// log and mark the database clean.
    pub(super) fn shutdown_clean(&mut self) -> bool {
        self.finish_checkpoint_files();
        if self.failed {
            return false;
        }
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
                self.log.remove_ready();
                true
            }
            Err(e) => {
                self.record_error(e.to_string());
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_shares_of_the_maximum_cache_in_pages() {
        // The published 2013 tool's cache: 3,584 MB of 32 KiB pages over 14
        // databases, 8,192 frames each: 1 % / 2 % available.
        assert_eq!(flush_thresholds(8192, 1.0, 2.0), (81, 163));
        // The 2007 tool's: 256 MB of 8 KiB pages per storage group.
        assert_eq!(flush_thresholds(32768, 1.0, 2.0), (327, 655));
        // A tiny cache still starts at one frame and stops one later.
        assert_eq!(flush_thresholds(64, 0.0, 0.0), (1, 2));
    }

    #[test]
    #[cfg(any(debug_assertions, feature = "invariants"))]
    #[should_panic(expected = "write-ahead rule: page 7")]
    fn writing_a_page_before_its_log_is_durable_breaks_an_invariant() {
        check_write_ahead(7, 4096, 4096);
        check_write_ahead(7, 4097, 4096);
    }

    #[test]
    fn the_scavenger_starts_under_the_start_threshold_and_stops_at_the_stop_threshold() {
        let (start, stop) = (100, 200);
        let mut on = false;
        let mut seen = Vec::new();
        for available in [500, 150, 99, 150, 199, 200, 150, 100] {
            on = scavenging_after(on, available, start, stop);
            seen.push(on);
        }
        assert_eq!(
            seen,
            [false, false, true, true, true, false, false, false],
            "hysteresis between the thresholds"
        );
    }

    /// The files behind a checkpoint are renamed to the next free generations
    /// (skipping one the log created itself) and handed over; past the limit
    /// of files made ready, they are removed.
    #[test]
    fn retired_log_files_become_the_next_generations() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let name = |g| LogWriter::path_of(d, g);
        for g in [1, 2, 6] {
            std::fs::write(name(g), format!("generation {g}")).unwrap();
        }
        let ready = Mutex::new(Ready::opened_up_to(5));
        retire(d, &[name(1), name(2)], &ready);
        assert!(!name(1).exists() && !name(2).exists());
        assert_eq!(std::fs::read_to_string(name(6)).unwrap(), "generation 6");
        assert_eq!(std::fs::read_to_string(name(7)).unwrap(), "generation 1");
        assert_eq!(std::fs::read_to_string(name(8)).unwrap(), "generation 2");
        assert_eq!(ready.lock().unwrap().count(), 2);
        assert_eq!(ready.lock().unwrap().next_free(), 9);

        let full = Mutex::new(Ready::opened_up_to(100));
        full.lock().unwrap().add(
            &(101..101 + MAX_READY as u64).collect::<Vec<_>>(),
            Origin::Reused,
        );
        std::fs::write(name(3), "generation 3").unwrap();
        retire(d, &[name(3)], &full);
        assert!(!name(3).exists(), "removed, not reused");
        assert!(!name(101 + MAX_READY as u64).exists());
    }

    /// While too few files are ready, new ones are written with zeros, whole,
    /// under the next free names (a name taken by a file of another run is
    /// skipped, never overwritten) and handed over; none once the run is ending.
    #[test]
    fn log_files_are_formatted_ahead_while_too_few_are_ready() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let name = |g| LogWriter::path_of(d, g);
        let fs = 3 * FORMAT_WRITE / 2;
        std::fs::write(name(6), "another run's").unwrap();
        let ready = Mutex::new(Ready::opened_up_to(5));
        let mut f = Formatter::new(d, fs, false);
        f.fill(&ready);
        assert_eq!(std::fs::read_to_string(name(6)).unwrap(), "another run's");
        for g in [7, 8] {
            let bytes = std::fs::read(name(g)).unwrap();
            assert_eq!(bytes.len() as u64, fs, "generation {g} whole");
            assert!(bytes.iter().all(|b| *b == 0), "generation {g} zeroed");
        }
        assert!(!name(9).exists(), "{FORMAT_AHEAD} ahead at most");
        assert_eq!(ready.lock().unwrap().count(), FORMAT_AHEAD);
        assert_eq!(ready.lock().unwrap().next_free(), 9);
        f.fill(&ready);
        assert!(!name(9).exists(), "enough are ready");

        let closing = Mutex::new(Ready::opened_up_to(20));
        closing.lock().unwrap().close();
        f.fill(&closing);
        assert!(!name(21).exists(), "none once the run is ending");
    }
}
