//! The replay's page cache: the pages of queued updates read ahead (neighbours
//! together), frames allocated and evicted (clean, unreferenced frames only),
//! pages checked on arrival, and the updates applied to pages older than them.

use super::{FState, Frame, REPLAY_DEPTH, Replay, T_MASK, T_READ};
use crate::format;
use crate::verify;
use mailbench_io::buf::REGION;
use mailbench_io::{AlignedBuf, IoRequest, OpKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError, sync_channel};

/// Regions of frame memory faulted in and waiting for their use (one more
/// may be in the making).
const MEMORY_AHEAD: usize = 4;

/// The replay cache's memory, faulted in ahead of use by a thread of its
/// own, a region (2 MiB) at a time and at most [`MEMORY_AHEAD`] regions
/// waiting: in a VM the kernel's zeroing of fresh memory is dear (about a
/// third of the replay's CPU for a 256 MiB cache), and paid on the replay's
/// thread it held back the next page reads. Its thread's CPU counts in the
/// replay's (`cpu_us`, updated after each region).
pub(super) struct FrameMemory {
    batches: Option<Receiver<Vec<AlignedBuf>>>,
    cpu_us: Arc<AtomicU64>,
}

impl FrameMemory {
    /// Memory for `frames` buffers of `size` bytes, made ready ahead.
    pub(super) fn start(frames: usize, size: usize) -> FrameMemory {
        let per_region = (REGION / size).max(1);
        let (tx, rx) = sync_channel(MEMORY_AHEAD);
        let cpu_us = Arc::new(AtomicU64::new(0));
        let cpu = Arc::clone(&cpu_us);
        let spawned = std::thread::Builder::new()
            .name("mb-replay-mem".into())
            .spawn(move || {
                let mut left = frames;
                while left > 0 {
                    let n = per_region.min(left);
                    let batch = AlignedBuf::carve_populated(n, size);
                    // A failed read is recorded by the replay's own CPU figure
                    // (the same /proc); this one then stays at its last value.
                    if let Ok(used) = mailbench_metrics::system::thread_cpu_s() {
                        cpu.store((used * 1e6) as u64, Ordering::Relaxed);
                    }
                    if tx.send(batch).is_err() {
                        break;
                    }
                    left -= n;
                }
            });
        FrameMemory {
            batches: spawned.ok().map(|_| rx),
            cpu_us,
        }
    }

    /// CPU seconds the memory thread has used so far.
    pub(super) fn cpu_s(&self) -> f64 {
        self.cpu_us.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// The next buffers (a region's worth): made ready by the thread, or
    /// carved here (at most `most` of them) when it could not run.
    fn next(&mut self, most: usize, size: usize) -> Vec<AlignedBuf> {
        if let Some(Ok(batch)) = self.batches.as_ref().map(Receiver::recv) {
            return batch;
        }
        let n = (REGION / size).max(1).min(most).max(1);
        AlignedBuf::carve_populated(n, size)
    }

    /// The next buffers if the thread has them ready now; None while it is
    /// still faulting them in (not when it has stopped: then [`Self::next`]
    /// carves them).
    fn ready(&mut self) -> Option<Vec<AlignedBuf>> {
        match self.batches.as_ref().map(Receiver::try_recv) {
            Some(Ok(batch)) => Some(batch),
            Some(Err(TryRecvError::Empty)) => None,
            Some(Err(TryRecvError::Disconnected)) | None => {
                self.batches = None;
                Some(Vec::new())
            }
        }
    }
}

impl Replay {
    fn allocate(&mut self, page: u64) -> Option<usize> {
        let f = match self.free.pop() {
            Some(f) => f,
            None if self.frames.len() < self.cap => {
                // While the memory thread is behind, a clean frame is used
                // again rather than waited for.
                let data = match self.frame_buffer_ready() {
                    Some(data) => data,
                    None => match self.evict(true) {
                        Some(f) => return Some(self.take_frame(f, page)),
                        None => self.frame_buffer(),
                    },
                };
                self.frames.push(Frame {
                    page: u64::MAX,
                    state: FState::Ready,
                    data,
                    lsn: 0,
                    dirty: false,
                    writing: false,
                    refs: 0,
                    referenced: false,
                });
                self.frames.len() - 1
            }
            None => self.evict(false)?,
        };
        Some(self.take_frame(f, page))
    }

    /// Frame `f` (free) given to `page`, to be read.
    fn take_frame(&mut self, f: usize, page: u64) -> usize {
        let fr = &mut self.frames[f];
        fr.page = page;
        fr.state = FState::Reading;
        fr.lsn = 0;
        fr.dirty = false;
        fr.writing = false;
        fr.refs = 0;
        fr.referenced = true;
        self.map.insert(page, f);
        f
    }

    /// A new frame's buffer if one is ready now (carved and faulted in
    /// ahead by [`FrameMemory`]'s thread).
    fn frame_buffer_ready(&mut self) -> Option<AlignedBuf> {
        if self.spare.is_empty() {
            self.spare = self.memory.ready()?;
        }
        self.spare.pop()
    }

    /// A new frame's buffer: carved with its neighbours a region at a time
    /// and faulted in (by [`FrameMemory`]'s thread), never more than the
    /// cache's maximum.
    fn frame_buffer(&mut self) -> AlignedBuf {
        if self.spare.is_empty() {
            self.spare = self.memory.next(self.cap - self.frames.len(), self.ps);
        }
        self.spare.pop().unwrap_or_else(|| AlignedBuf::new(self.ps))
    }

    /// A clean frame no read, write or prepared update holds, by the clock;
    /// `early` (the cache is not at its maximum yet, the memory thread is
    /// behind): only one whose page no queued update touches.
    fn evict(&mut self, early: bool) -> Option<usize> {
        let n = self.frames.len();
        for _ in 0..2 * n {
            let f = self.hand;
            self.hand = (self.hand + 1) % n;
            let fr = &mut self.frames[f];
            if fr.state == FState::Reading
                || fr.refs > 0
                || fr.dirty
                || fr.writing
                || (early && self.pending.contains_key(&fr.page))
            {
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
    pub(super) fn prepare(&mut self) -> bool {
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
            let mut run = self.runs_spare.pop().unwrap_or_default();
            // ESE's redo collects the pages a log file's records touch, sorts
            // them and pre-reads them in that order, and its I/O layer merges
            // neighbouring pages into one read of at most the largest
            // coalesced read (`LOG::ErrLGIPrereadPages` after
            // `LGPSortPages`, dev/ese/src/ese/_log/logread.cxx, and the
            // combinable pre-reads of `LogPrereader::ErrLGPIPrereadPage`):
            // the uncached neighbours, below and above, that updates of the
            // same log file touch are read in the same I/O.
            let file = self.queue[self.prepared].end_lsn / self.fs;
            let mut first = page;
            while run.len() + 1 < self.read_run_pages && first > 0 {
                let prev = first - 1;
                if self.map.contains_key(&prev) || !self.needed_in_file(prev, file) {
                    break;
                }
                match self.allocate(prev) {
                    Some(g) => {
                        run.push(g);
                        first = prev;
                    }
                    None => break,
                }
            }
            run.reverse();
            run.push(f);
            let mut next = page + 1;
            while run.len() < self.read_run_pages {
                if next >= self.header.page_count
                    || self.map.contains_key(&next)
                    || !self.needed_in_file(next, file)
                {
                    break;
                }
                match self.allocate(next) {
                    Some(g) => run.push(g),
                    None => break,
                }
                next += 1;
            }
            self.prepared += 1;
            self.submit_read(first, run);
            any = true;
        }
        any
    }

    /// Whether a queued update after the one being prepared, of log file
    /// `file`, touches `page` (the queue is in commit order: the search ends
    /// at the first update of a later log file).
    fn needed_in_file(&self, page: u64, file: u64) -> bool {
        self.queue
            .range(self.prepared + 1..)
            .take_while(|u| u.end_lsn / self.fs <= file)
            .any(|u| u.page == page && u.end_lsn / self.fs == file)
    }

    /// One read of the run of frames `run` (neighbouring pages from `page`),
    /// straight into the frames: each frame's buffer is lent to the read
    /// (one vectored read for a run) and given back when it completes.
    fn submit_read(&mut self, page: u64, run: Vec<usize>) {
        let mut bufs = run
            .iter()
            .map(|&f| std::mem::replace(&mut self.frames[f].data, AlignedBuf::empty()));
        let buf = bufs.next().unwrap_or_else(AlignedBuf::empty);
        let more: Vec<AlignedBuf> = bufs.collect();
        self.read_id += 1;
        let id = self.read_id;
        self.reads_meta.insert(id, run);
        self.reads += 1;
        self.io.submit(IoRequest {
            file: self.db.clone(),
            kind: OpKind::Read,
            offset: page * self.ps as u64,
            buf,
            tag: T_READ | id,
            more,
        });
    }

    pub(super) fn page_read_done(&mut self, c: mailbench_io::IoCompletion) {
        self.reads = self.reads.saturating_sub(1);
        let id = c.tag & !T_MASK;
        let Some(run) = self.reads_meta.remove(&id) else {
            return;
        };
        self.db_read.ops += 1;
        self.db_read.latency.record(c.latency());
        let full = c.full();
        let (offset, len) = (c.offset, c.len());
        // The frames get their buffers back, whatever the outcome.
        for (&f, buf) in run.iter().zip(std::iter::once(c.buf).chain(c.more)) {
            self.frames[f].data = buf;
        }
        if let Err(e) = full {
            self.db_read.errors += 1;
            self.error(format!(
                "I/O error reading database {} at offset {offset}: {}",
                self.db_path.display(),
                std::io::Error::from_raw_os_error(e)
            ));
            for &f in &run {
                self.frames[f].state = FState::Bad;
            }
            self.recycle_run(run);
        } else {
            self.db_read.bytes += len as u64;
            // Checked once the next reads are handed to the kernel.
            self.arrived.push(run);
        }
    }

    /// The pages read since the last turn, checked (after the next reads
    /// were handed over: the device is not kept waiting by the checks).
    pub(super) fn check_arrived(&mut self) -> bool {
        if self.arrived.is_empty() {
            return false;
        }
        let mut arrived = std::mem::take(&mut self.arrived);
        for run in arrived.drain(..) {
            self.pages_arrived(&run);
            self.recycle_run(run);
        }
        self.arrived = arrived;
        true
    }

    /// A completed read's frame list, kept for a later read.
    fn recycle_run(&mut self, mut run: Vec<usize>) {
        if self.runs_spare.len() < 2 * REPLAY_DEPTH {
            run.clear();
            self.runs_spare.push(run);
        }
    }

    /// Pages read for replay, in their frames: checked.
    fn pages_arrived(&mut self, run: &[usize]) {
        for &f in run {
            let fr = &mut self.frames[f];
            let page = fr.page;
            match format::check_page(fr.data.as_slice(), self.header.db_id, page) {
                Ok(h) => {
                    fr.lsn = h.lsn;
                    fr.state = FState::Ready;
                }
                Err(e) => {
                    fr.state = FState::Bad;
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
    pub(super) fn apply(&mut self) -> bool {
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
                        self.upd_bytes.copy_to(
                            u.at,
                            &mut fr.data.as_mut_slice()[u.offset..u.offset + u.len],
                        );
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
                self.queue_bytes -= u.len;
                self.upd_bytes.release(u.at + u.len as u64);
                self.page_updated(u.page, f);
            }
            self.prepared -= 1;
            any = true;
        }
        any
    }

    /// The page of frame `f` had one queued update fewer; once the whole
    /// log is decoded, after its last one a dirty page is final, and joins
    /// the final flush's list.
    fn page_updated(&mut self, page: u64, f: usize) {
        let Some(left) = self.pending.get_mut(&page) else {
            return;
        };
        *left -= 1;
        if *left == 0 {
            self.pending.remove(&page);
            if let Some((finals, _)) = &mut self.finals
                && self.frames[f].dirty
            {
                finals.push(page);
            }
        }
    }
}
