//! The background streams beside the transactions: database maintenance
//! (sequential reads at a fixed rate, every page checksummed) and the reads of
//! each extra database copy, which ships every closed log file.

use super::{Instance, K_MAINT_READ, K_REPL_READ, io_error_text, tag};
use crate::format;
use crate::log_header::{self, LOG_FILE_HEADER, LogFileHeader};
use mailbench_io::{IoCompletion, IoRequest, OpKind};
use mailbench_results::storage::stats::Class;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A maintenance schedule this far behind restarts from now (no burst to catch up).
const MAINT_MAX_BEHIND: Duration = Duration::from_secs(1);

/// One replica: the closed log generations it still has to read, and where it is.
struct ReplStream {
    queue: VecDeque<u64>,
    /// (generation, offset) being read.
    current: Option<(u64, u64)>,
    in_flight: bool,
}

struct MaintRead {
    first_page: u64,
    pages: u64,
    /// Page writes after this one may race the read: their pages are not checked.
    write_seq: u64,
}

pub(super) struct Background {
    maint_cursor: u64,
    maint_next: Instant,
    maint: Option<MaintRead>,
    repl: Vec<ReplStream>,
    /// Page writes submitted so far, and those since the maintenance read in
    /// flight started: (sequence, first page, pages).
    write_seq: u64,
    recent_writes: VecDeque<(u64, u64, u64)>,
}

impl Background {
    pub(super) fn new(copies: u32, now: Instant) -> Background {
        Background {
            maint_cursor: 1,
            maint_next: now,
            maint: None,
            repl: (1..copies)
                .map(|_| ReplStream {
                    queue: VecDeque::new(),
                    current: None,
                    in_flight: false,
                })
                .collect(),
            write_seq: 0,
            recent_writes: VecDeque::new(),
        }
    }

    /// A page write of `pages` pages from `first_page` was submitted.
    pub(super) fn note_write(&mut self, first_page: u64, pages: u64) {
        self.write_seq += 1;
        if self.maint.is_some() {
            self.recent_writes
                .push_back((self.write_seq, first_page, pages));
        }
    }

    fn raced(&self, m: &MaintRead, page: u64) -> bool {
        self.recent_writes
            .iter()
            .any(|(seq, first, n)| *seq > m.write_seq && page >= *first && page < first + n)
    }
}

impl Instance {
    /// When the next maintenance read is due (none while one is in flight).
    pub(super) fn next_maintenance_due(&self) -> Option<Instant> {
        let p = &self.s.profile;
        let on = p.maintenance && p.maintenance_mb_per_s > 0.0 && self.bg.maint.is_none();
        on.then_some(self.bg.maint_next)
    }

    /// The buffers of the maintenance and replication reads, faulted in at
    /// setup rather than on their first read during the load.
    pub(super) fn prefill_read_buffers(&mut self) {
        let p = &self.s.profile;
        if p.maintenance && p.maintenance_mb_per_s > 0.0 {
            let pages = (p.maintenance_read_size.0 / self.ps as u64).max(1);
            self.pool.prefill(pages as usize * self.ps);
        }
        if !self.bg.repl.is_empty() {
            let len = p.replication_read_size.0.min(self.log.file_size());
            self.pool.prefill(len as usize);
        }
    }

    /// Reads the next stretch of the database when the maintenance rate allows.
    pub(super) fn drive_maintenance(&mut self, now: Instant) {
        let p = &self.s.profile;
        if !p.maintenance
            || p.maintenance_mb_per_s <= 0.0
            || self.bg.maint.is_some()
            || now < self.bg.maint_next
        {
            return;
        }
        let size = p.maintenance_read_size.0;
        let per_read = Duration::from_secs_f64(size as f64 / (p.maintenance_mb_per_s * 1e6));
        let bg = &mut self.bg;
        bg.maint_next = if now.duration_since(bg.maint_next) > MAINT_MAX_BEHIND {
            now + per_read
        } else {
            bg.maint_next + per_read
        };
        let page_count = self.s.header.page_count;
        let pages = (size / self.ps as u64)
            .min(page_count - bg.maint_cursor)
            .max(1);
        let first = bg.maint_cursor;
        bg.maint_cursor += pages;
        if bg.maint_cursor >= page_count {
            bg.maint_cursor = 1;
        }
        bg.recent_writes.clear();
        bg.maint = Some(MaintRead {
            first_page: first,
            pages,
            write_seq: bg.write_seq,
        });
        let buf = self.pool.get(pages as usize * self.ps);
        self.io.submit(IoRequest {
            file: self.db.clone(),
            kind: OpKind::Read,
            offset: first * self.ps as u64,
            buf,
            tag: tag(K_MAINT_READ, 0),
            more: Vec::new(),
        });
    }

    /// Checksums every page of a maintenance read that no write touched while
    /// the read was in flight and that is not cached (the cache may be newer).
    pub(super) fn maintenance_done(&mut self, c: IoCompletion) {
        let Some(m) = self.bg.maint.take() else {
            self.pool.put(c.buf);
            return;
        };
        let st = self.interval.class_mut(Class::MaintRead);
        st.ops += 1;
        st.latency.record(c.latency());
        if let Err(e) = c.full() {
            st.errors += 1;
            self.pool.put(c.buf);
            let what = "reading database (maintenance)";
            self.record_error(io_error_text(what, &self.s.db_path, c.offset, e));
            return;
        }
        st.bytes += c.buf.len() as u64;
        for k in 0..m.pages {
            let page = m.first_page + k;
            if self.bg.raced(&m, page) || self.cache.contains(page) {
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
        self.bg.recent_writes.clear();
        self.pool.put(c.buf);
    }

    /// A log generation is closed and durable: every replica has to read it.
    pub(super) fn log_closed(&mut self, generation: u64) {
        for r in &mut self.bg.repl {
            r.queue.push_back(generation);
        }
    }

    /// The oldest log generation a replica still has to read, if older than `keep`.
    pub(super) fn replicas_need_from(&self, mut keep: u64) -> u64 {
        for r in &self.bg.repl {
            if let Some((g, _)) = r.current {
                keep = keep.min(g);
            }
            if let Some(g) = r.queue.front() {
                keep = keep.min(*g);
            }
        }
        keep
    }

    /// Each idle replica reads the next stretch of its log generation.
    pub(super) fn drive_replication(&mut self) {
        let size = self.s.profile.replication_read_size.0;
        let file_size = self.log.file_size();
        for i in 0..self.bg.repl.len() {
            let r = &mut self.bg.repl[i];
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
            let buf = self.pool.get(len);
            self.io.submit(IoRequest {
                file,
                kind: OpKind::Read,
                offset: off,
                buf,
                tag: tag(K_REPL_READ, i),
                more: Vec::new(),
            });
        }
    }

    /// A replica checks every log block it ships, then moves on.
    pub(super) fn replication_done(&mut self, i: usize, c: IoCompletion) {
        let file_size = self.log.file_size();
        let st = self.interval.class_mut(Class::LogRead);
        st.ops += 1;
        st.latency.record(c.latency());
        if let Err(e) = c.full() {
            st.errors += 1;
            self.pool.put(c.buf);
            let what = "reading log (replication)";
            self.record_error(io_error_text(what, &self.s.log_dir, c.offset, e));
            return;
        }
        st.bytes += c.buf.len() as u64;
        let db_id = self.s.header.db_id;
        let Some(r) = self.bg.repl.get_mut(i) else {
            self.pool.put(c.buf);
            return;
        };
        r.in_flight = false;
        let Some((g, off)) = r.current else {
            self.pool.put(c.buf);
            return;
        };
        let block = self.log.block();
        // The file's header, then its blocks.
        let bytes = c.buf.as_slice();
        let head = (LOG_FILE_HEADER as u64)
            .saturating_sub(off)
            .min(bytes.len() as u64) as usize;
        let mut bad = 0;
        if off == 0 && LogFileHeader::check(bytes, db_id, g, file_size, block).is_err() {
            bad += 1;
        }
        let first_block =
            log_header::block_at((off + head as u64).max(LOG_FILE_HEADER as u64), block) as u32;
        for (k, b) in bytes[head..].chunks(block).enumerate() {
            if format::check_log_block(b, db_id, g, first_block + k as u32)
                == format::LogBlock::Corrupt
            {
                bad += 1;
            }
        }
        let next = off + c.buf.len() as u64;
        r.current = (next < file_size).then_some((g, next));
        self.pool.put(c.buf);
        if bad > 0 {
            self.interval.counters.bad_log_blocks += bad;
            self.record_error(format!(
                "{bad} bad log blocks in generation {g} of {}",
                self.s.log_dir.display()
            ));
        }
    }
}
