//! The replay's writes: dirty pages written back (under cache pressure, and
//! all of them in the final flush, neighbours together), then the checkpoint:
//! the database synced, the checkpoint moved to the end of the log, and the
//! database marked clean.

use super::ReplayResult;
use super::{FINAL_DEPTH, FLUSH_DEPTH, FState, Replay, T_MASK, T_WRITE, WRITE_DEPTH};
use crate::format;
use mailbench_base::{Error, Result};
use mailbench_io::{AlignedBuf, IoRequest, OpKind};

impl Replay {
    /// Writes dirty unreferenced pages (all of them when `all`: the final
    /// flush, [`FLUSH_DEPTH`] writes in flight), neighbours together.
    pub(super) fn write_back(&mut self, all: bool) -> bool {
        let mut candidates: Vec<u64> = self
            .frames
            .iter()
            .filter(|f| f.dirty && !f.writing && (f.refs == 0 || all) && f.state == FState::Ready)
            .map(|f| f.page)
            .collect();
        candidates.sort_unstable();
        // In the final flush nothing changes the pages any more: their
        // frames are lent to the writes. Under pressure they are copied (an
        // update may change a page while it is written).
        let depth = if all { FLUSH_DEPTH } else { WRITE_DEPTH };
        self.write_runs(&candidates, depth, all) > 0
    }

    /// Once the whole log is decoded: the dirty pages no queued update
    /// touches (`pending`), sorted: nothing changes them any more. Pages join
    /// them as their last queued update is applied (`page_updated`).
    pub(super) fn final_pages(&mut self) -> Vec<u64> {
        let mut pages: Vec<u64> = self
            .frames
            .iter()
            .filter(|f| f.dirty && f.state == FState::Ready && !self.pending.contains_key(&f.page))
            .map(|f| f.page)
            .collect();
        pages.sort_unstable();
        pages
    }

    /// The final flush begun early: the final pages written while the rest of
    /// the queue is replayed, [`FINAL_DEPTH`] writes at a time (the page
    /// reads keep the device).
    pub(super) fn write_finals(&mut self) -> bool {
        let Some((pages, at)) = self.finals.take() else {
            return false;
        };
        let went = self.write_runs(&pages[at..], FINAL_DEPTH, true);
        self.finals = Some((pages, at + went));
        went > 0
    }

    /// Writes the pages of `pages` (sorted) that are still dirty, ready and
    /// not being written, neighbours together (runs of up to 32 pages), while
    /// fewer than `depth` writes are in flight; `lend`: straight from their
    /// frames (pages nothing changes any more). Returns how many of `pages`
    /// it went through.
    fn write_runs(&mut self, pages: &[u64], depth: usize, lend: bool) -> usize {
        let max_run = 32usize;
        let mut i = 0;
        while i < pages.len() && self.writes < depth {
            let first = pages[i];
            let mut run = Vec::new();
            while i < pages.len() && run.len() < max_run && pages[i] == first + run.len() as u64 {
                let f = self.map.get(&pages[i]).copied();
                i += 1;
                match f {
                    Some(f) if self.writable(f) => run.push(f),
                    _ => break,
                }
            }
            if !run.is_empty() {
                self.submit_write(first, run, lend);
            }
        }
        i
    }

    fn writable(&self, f: usize) -> bool {
        let fr = &self.frames[f];
        fr.dirty && !fr.writing && fr.state == FState::Ready
    }

    /// One write of a run of neighbouring frames from `first`, each sealed:
    /// the frames' buffers lent to it (`lend`, one vectored write), or the
    /// pages copied into one buffer.
    fn submit_write(&mut self, first: u64, run: Vec<usize>, lend: bool) {
        let (db_id, ps) = (self.header.db_id, self.ps);
        for &f in &run {
            let fr = &mut self.frames[f];
            format::seal_page(fr.data.as_mut_slice(), db_id, fr.page, fr.lsn);
            fr.dirty = false;
            fr.writing = true;
        }
        let (buf, more) = if lend {
            let mut bufs = run
                .iter()
                .map(|&f| std::mem::replace(&mut self.frames[f].data, AlignedBuf::empty()));
            let buf = bufs.next().unwrap_or_else(AlignedBuf::empty);
            (buf, bufs.collect())
        } else {
            let mut buf = self.pool.get(run.len() * ps);
            for (k, &f) in run.iter().enumerate() {
                buf.as_mut_slice()[k * ps..(k + 1) * ps]
                    .copy_from_slice(self.frames[f].data.as_slice());
            }
            (buf, Vec::new())
        };
        self.write_id += 1;
        let id = self.write_id;
        self.writes_meta.insert(id, (run, lend));
        self.writes += 1;
        self.io.submit(IoRequest {
            file: self.db.clone(),
            kind: OpKind::Write,
            offset: first * ps as u64,
            buf,
            tag: T_WRITE | id,
            more,
        });
    }

    pub(super) fn page_write_done(&mut self, c: mailbench_io::IoCompletion) {
        self.writes = self.writes.saturating_sub(1);
        let id = c.tag & !T_MASK;
        let Some((run, lent)) = self.writes_meta.remove(&id) else {
            return;
        };
        self.db_write.ops += 1;
        self.db_write.latency.record(c.latency());
        let full = c.full();
        let (offset, len) = (c.offset, c.len());
        if lent {
            // The frames get their buffers back, whatever the outcome.
            for (&f, buf) in run.iter().zip(std::iter::once(c.buf).chain(c.more)) {
                self.frames[f].data = buf;
            }
        } else {
            self.pool.put(c.buf);
        }
        for &f in &run {
            self.frames[f].writing = false;
            if full.is_err() {
                self.frames[f].dirty = true;
            }
        }
        match full {
            Ok(()) => self.db_write.bytes += len as u64,
            Err(e) => {
                self.db_write.errors += 1;
                self.error(format!(
                    "I/O error writing database {} at offset {offset}: {}",
                    self.db_path.display(),
                    std::io::Error::from_raw_os_error(e)
                ));
            }
        }
    }

    /// Makes the replayed state durable and marks the database clean (only if
    /// every page was replayed and written) — and as having lost its log tail
    /// when replay stopped at damage — then fills the result.
    pub(super) fn finish(&mut self, r: &mut ReplayResult) {
        self.drop_open();
        // The log end is where decoding stopped: the last complete record.
        let end = if self.pend_pos < self.pend.len() {
            self.lsn_of(self.pend_base + self.pend_pos as u64)
        } else {
            self.end_lsn
        };
        if !self.failed() && self.frames.iter().all(|f| !f.dirty) {
            match self.checkpoint(end) {
                Ok(()) => r.clean = true,
                Err(e) => self.error(e.to_string()),
            }
        }
        self.figures(r, end);
    }

    /// The final step of a replay that wrote every page: the database synced,
    /// the checkpoint moved to `end` (the end of the log), and the database
    /// header marked clean.
    fn checkpoint(&self, end: u64) -> Result<()> {
        self.db
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
            })
    }
}
