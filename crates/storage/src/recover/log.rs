//! The replay's log: log files read ahead in order from the checkpoint
//! (each file's header on its own, checked before its data is read, then
//! reads of the rest of the file up to the largest coalesced read,
//! `LOG_AHEAD` of them), their blocks checked, and the
//! records decoded into updates queued for applying once their transaction
//! commits. Replay stops reading at the end of the log, a torn tail or a
//! damaged block, and says where.

use super::{LOG_AHEAD, QUEUE_BYTES, Replay, T_LOG, T_MASK, Upd};
use crate::format::{self, LOG_BLOCK_HEADER, LogBlock, PAGE_HEADER, Record};
use crate::log_header::{self, LOG_FILE_HEADER, LogFileHeader};
use mailbench_io::{AlignedBuf, IoRequest, OpKind};
use std::collections::VecDeque;
use std::fs::File;
use std::sync::Arc;

impl Replay {
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

    pub(super) fn submit_log_reads(&mut self) -> bool {
        let mut any = false;
        // `chunks` holds every chunk read ahead: in flight (a placeholder) or
        // arrived and not yet decoded.
        while !self.log_done && !self.no_more_files && self.chunks.len() < LOG_AHEAD {
            if self.sub_off >= self.fs {
                self.sub_gen += 1;
                self.sub_off = 0;
            }
            let header = self.sub_off == 0;
            if !header && self.header_ok < Some(self.sub_gen) {
                // The file's data waits for its header to check.
                break;
            }
            let Some(file) = self.log_file(self.sub_gen) else {
                self.no_more_files = true;
                break;
            };
            let len = if header {
                LOG_FILE_HEADER
            } else {
                (self.log_read_size as u64).min(self.fs - self.sub_off) as usize
            };
            let buf = self.pool.get(len);
            self.io.submit(IoRequest {
                file,
                kind: OpKind::Read,
                offset: self.sub_off,
                buf,
                tag: T_LOG | self.sub_seq,
                more: Vec::new(),
            });
            // Remember where this chunk comes from.
            self.chunks_meta_insert(self.sub_seq, self.sub_gen, self.sub_off);
            self.sub_seq += 1;
            // After the first file's header, its data from the read holding
            // the start; after any other's, from the header's end.
            self.sub_off = match header {
                true => self.first_data_off.take().unwrap_or(len as u64),
                false => self.sub_off + len as u64,
            };
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

    pub(super) fn log_read_done(&mut self, c: mailbench_io::IoCompletion) {
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

    /// Decodes the next log chunk if it has arrived and the apply queue has
    /// room: one chunk per call, so that the replay's loop hands new page
    /// reads to the kernel between chunks.
    pub(super) fn consume_chunks(&mut self) -> bool {
        if self.log_done || self.queue_bytes >= QUEUE_BYTES {
            return false;
        }
        let Some(e) = self.chunks.get(&self.next_chunk) else {
            if self.no_more_files && self.log_in_flight == 0 {
                self.log_done = true;
                self.stopped = format!(
                    "end of the log: {} is the last log file",
                    format::log_file_name(self.sub_gen.saturating_sub(1))
                );
            }
            return false;
        };
        if e.3 == usize::MAX {
            return false;
        }
        let Some((g, off, buf, n)) = self.chunks.remove(&self.next_chunk) else {
            return false;
        };
        self.next_chunk += 1;
        self.consume_chunk(g, off, &buf.as_slice()[..n.min(buf.len())], buf.len());
        self.pool.put(buf);
        self.decode();
        true
    }

    /// Checks generation `g`'s header: its data is read next, or the log ends
    /// here (a crash before or while the header of the generation after the
    /// last one was written), or replay fails (any other fault).
    fn consume_header(&mut self, g: u64, bytes: &[u8]) {
        let name = format::log_file_name(g);
        let fault = match LogFileHeader::check(bytes, self.header.db_id, g, self.fs, self.log_block)
        {
            Ok(_) => {
                self.header_ok = Some(g);
                return;
            }
            Err(f) => f,
        };
        self.log_done = true;
        // The generation after a sound one, or the checkpoint's when replay
        // starts at its first record (the file never begun when the
        // checkpoint was taken at the end of the one before).
        let after_sound = match self.header_ok {
            Some(h) => g == h + 1,
            None => self.start_lsn <= log_header::first_lsn(g, self.fs),
        };
        if after_sound && fault.unwritten() && !self.first_block_written(g) {
            self.stopped = format!("end of the log: {name} was never begun ({fault})");
            return;
        }
        self.damaged = true;
        self.stopped = format!("log file {name} cannot be read: {fault}; replay stopped there");
        self.error(format!(
            "log file {}: {fault}",
            self.log_dir.join(&name).display()
        ));
    }

    /// Whether generation `g`'s first block is one of its own: then its
    /// header, which is written before any block of the generation, was
    /// damaged after it was written, not torn. One read of a block, counted
    /// with the log reads; a block that cannot be read counts as written
    /// (an error, not an end).
    fn first_block_written(&mut self, g: u64) -> bool {
        use std::os::unix::fs::FileExt;
        let Some(file) = self.log_file(g) else {
            return false;
        };
        let mut buf = AlignedBuf::new(self.log_block);
        let t = std::time::Instant::now();
        let read = file.read_exact_at(buf.as_mut_slice(), LOG_FILE_HEADER as u64);
        self.log_read.ops += 1;
        self.log_read.latency.record(t.elapsed());
        match read {
            Ok(()) => {
                self.log_read.bytes += self.log_block as u64;
                format::check_log_block(buf.as_slice(), self.header.db_id, g, 0) != LogBlock::End
            }
            Err(_) => {
                self.log_read.errors += 1;
                true
            }
        }
    }

    fn consume_chunk(&mut self, g: u64, off: u64, bytes: &[u8], asked: usize) {
        if off == 0 {
            self.consume_header(g, bytes);
            return;
        }
        let lb = self.log_block;
        let first_block = log_header::block_at(off, lb);
        let whole = bytes.len() / lb;
        for k in 0..whole {
            let b = first_block + k as u64;
            let block = &bytes[k * lb..(k + 1) * lb];
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
            let next = bytes.get((k + 1) * lb..(k + 2) * lb).unwrap_or(&[]);
            let checked = match format::shadow_rescue(block, next, self.header.db_id, g, b as u32) {
                // A torn rewrite of the last partial block: its shadow holds
                // what was durable, and the log ends with it.
                Some(data_len) => {
                    self.take_block(g, b, next, skip, data_len);
                    self.log_done = true;
                    self.stopped = format!(
                        "end of the log at {} block {b} (its shadow copy replayed: the block \
                         itself was torn)",
                        format::log_file_name(g)
                    );
                    return;
                }
                None => format::check_log_block(block, self.header.db_id, g, b as u32),
            };
            match checked {
                LogBlock::Valid { data_len } => self.take_block(g, b, block, skip, data_len),
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
        if !bytes.len().is_multiple_of(lb) {
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
        debug_assert!(first_block + whole as u64 <= self.blocks_per_file);
    }

    /// Adds the data of block `b` of generation `g` (its first `skip` bytes
    /// already replayed before the checkpoint) to the decoded stream.
    fn take_block(&mut self, g: u64, b: u64, block: &[u8], skip: usize, data_len: usize) {
        if self.gens_seen.last() != Some(&g) {
            self.gens_seen.push(g);
        }
        let s = skip.min(data_len);
        let data = &block[LOG_BLOCK_HEADER + s..LOG_BLOCK_HEADER + data_len];
        let lsn = g * self.fs
            + log_header::block_offset(b, self.log_block)
            + (LOG_BLOCK_HEADER + s) as u64;
        let stream_at = self.pend_base + self.pend.len() as u64;
        self.segs.push_back((stream_at, lsn, data.len()));
        self.pend.extend_from_slice(data);
        self.log_bytes += data.len() as u64;
        self.end_lsn = self.end_lsn.max(lsn + data.len() as u64);
    }

    /// The LSN of a position in the decoded byte stream (the segments are
    /// in stream order and do not overlap: a binary search).
    pub(super) fn lsn_of(&self, stream_pos: u64) -> u64 {
        let i = self
            .segs
            .partition_point(|(at, _, len)| at + *len as u64 <= stream_pos);
        match self.segs.get(i) {
            Some((at, lsn, _)) if stream_pos >= *at => lsn + (stream_pos - at),
            _ => self.end_lsn,
        }
    }

    /// [`Self::lsn_of`] for positions looked up in stream order (each record's
    /// end, as it is decoded): a cursor over the segments, moved forward.
    fn lsn_of_next(
        segs: &VecDeque<(u64, u64, usize)>,
        cursor: &mut usize,
        stream_pos: u64,
    ) -> Option<u64> {
        let mut i = *cursor;
        while let Some((at, lsn, len)) = segs.get(i) {
            if stream_pos < *at {
                break;
            }
            if stream_pos < at + *len as u64 {
                *cursor = i;
                return Some(lsn + (stream_pos - at));
            }
            i += 1;
        }
        None
    }

    fn decode(&mut self) {
        loop {
            let (rec, rec_len) = match Record::decode(&self.pend[self.pend_pos..]) {
                Ok(Some(x)) => x,
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
            let end_pos = self.pend_base + (self.pend_pos + rec_len) as u64;
            let end_lsn = match Self::lsn_of_next(&self.segs, &mut self.seg_cursor, end_pos - 1) {
                Some(lsn) => lsn,
                None => self.lsn_of(end_pos - 1),
            } + 1;
            self.records += 1;
            // A flag-delete or a version cleanup's delete changes no bytes of
            // the page: replayed as an update without an after-image (the
            // page's LSN moves on).
            let node = match rec {
                Record::Update {
                    txn,
                    page_no,
                    offset,
                    data,
                } => Some((txn, page_no, offset, data)),
                Record::FlagDelete {
                    txn,
                    page_no,
                    offset,
                }
                | Record::Delete {
                    txn,
                    page_no,
                    offset,
                } => Some((txn, page_no, offset, &[][..])),
                Record::Begin { .. } => None,
                Record::Commit { txn } => {
                    self.transactions += 1;
                    self.queue_committed(txn);
                    None
                }
            };
            if let Some((txn, page_no, offset, data)) = node {
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
                let spare = &mut self.open_spare;
                let t = self
                    .open
                    .entry(txn)
                    .or_insert_with(|| spare.pop().unwrap_or_default());
                let at = t.bytes.len() as u64;
                t.bytes.extend_from_slice(data);
                t.upds.push(Upd {
                    page: page_no,
                    offset: off,
                    at,
                    len: data.len(),
                    end_lsn,
                });
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
                    self.seg_cursor = self.seg_cursor.saturating_sub(1);
                } else {
                    break;
                }
            }
        }
    }

    /// Transaction `txn` committed: its updates join the apply queue, in
    /// the order they were logged, their after-images moved to the queue's
    /// ring.
    fn queue_committed(&mut self, txn: u64) {
        let Some(mut t) = self.open.remove(&txn) else {
            return;
        };
        for mut u in t.upds.drain(..) {
            let from = u.at as usize;
            u.at = self.upd_bytes.push(&t.bytes[from..from + u.len]);
            self.queue_bytes += u.len;
            *self.pending.entry(u.page).or_insert(0) += 1;
            self.queue.push_back(u);
        }
        t.bytes.clear();
        self.open_spare.push(t);
    }

    /// The updates of the transactions still open at the end of the log are
    /// dropped (their commit records never came).
    pub(super) fn drop_open(&mut self) {
        for (_, t) in self.open.drain() {
            self.dropped += t.upds.len() as u64;
        }
    }
}
