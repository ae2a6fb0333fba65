//! The replay's page cache: the pages of queued updates read ahead (neighbours
//! together), frames allocated and evicted (clean, unreferenced frames only),
//! pages checked on arrival, and the updates applied to pages older than them.

use super::{FState, Frame, READ_RUN_MAX, REPLAY_DEPTH, Replay, T_MASK, T_READ};
use crate::format;
use crate::verify;
use mailbench_io::{AlignedBuf, IoRequest, OpKind};

impl Replay {
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
                more: Vec::new(),
            });
            any = true;
        }
        any
    }

    pub(super) fn page_read_done(&mut self, c: mailbench_io::IoCompletion) {
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
}
