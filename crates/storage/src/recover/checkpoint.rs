//! The replay's writes: dirty pages written back (under cache pressure, and
//! all of them in the final flush, neighbours together), then the checkpoint:
//! the database synced, the checkpoint moved to the end of the log, and the
//! database marked clean.

use super::ReplayResult;
use super::{FState, Replay, T_MASK, T_WRITE, WRITE_DEPTH};
use crate::format;
use mailbench_base::{Error, Result};
use mailbench_io::{AlignedBuf, IoRequest, OpKind};

impl Replay {
    /// Writes dirty unreferenced pages (all of them when `all`), neighbours together.
    pub(super) fn write_back(&mut self, all: bool) -> bool {
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
                more: Vec::new(),
            });
            any = true;
        }
        any
    }

    pub(super) fn page_write_done(&mut self, c: mailbench_io::IoCompletion) {
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
    pub(super) fn finish(&mut self, r: &mut ReplayResult) {
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
