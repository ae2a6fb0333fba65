//! Sessions and their transactions: which pages a transaction touches, reading
//! the missing ones (straight into their cache frames), changing rows and
//! logging them, committing (lazily, or waiting for the log flush that covers
//! the commit), and the open-loop pacing of `--target-iops`.

use super::zipf::MailboxDraw;
use super::{Instance, InstanceSetup, K_PAGE_READ, Slab, io_error_text, tag};
use crate::cache::FrameState;
use crate::format::{self, PAGE_HEADER, Record, UPDATE_HEADER};
use mailbench_io::{IoCompletion, IoRequest, OpKind};
use mailbench_results::storage::stats::Class;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore};
use std::time::{Duration, Instant};

/// Pacing re-estimates the I/O per transaction this often...
const RATE_WINDOW: Duration = Duration::from_secs(1);
/// ...from at least this many transactions.
const RATE_MIN_TXNS: u64 = 20;
/// I/O per transaction assumed before the first estimate.
const RATE_FIRST_GUESS: f64 = 3.0;
/// I/O owed (or ahead) since the start is caught up over this many seconds...
const CATCH_UP_S: f64 = 5.0;
/// ...by at most this share of the target.
const CATCH_UP_MAX: f64 = 0.5;
/// A wake-up of the loop (a paced start's timer, an I/O completion) also starts
/// the paced transactions due within the next this many intervals between two
/// transactions, and no further ahead than [`PACE_AHEAD_MAX`]: one wake-up for
/// a few transactions instead of a timer wake-up each. A transaction started
/// before its intended time counts its latencies from its start.
const PACE_AHEAD_TXNS: f64 = 2.0;
const PACE_AHEAD_MAX: Duration = Duration::from_millis(4);
/// The first bytes of each row a transaction changes, prefetched before the
/// changes (the rest of a long row streams in behind its first lines as its
/// checksum reads it).
const ROW_AHEAD: usize = 512;

#[derive(Debug, Clone, Copy)]
pub(super) struct Touch {
    page: u64,
    /// Bytes this transaction changes on the page (0 = read only).
    modify: u32,
    /// The next touch is the following page: read both in one I/O if missing.
    run_with_next: bool,
    /// The page splits into its neighbour: its before image is logged first
    /// (profile `split_page_image`).
    split: bool,
    /// A node of the page is deleted: flagged deleted by the transaction,
    /// removed by version cleanup once it committed.
    delete: bool,
}

/// A transaction. Its vectors are reused by the session's next one.
pub(super) struct Txn {
    id: u64,
    /// When it was meant to start (paced), or started.
    intended: Instant,
    paced: bool,
    touches: Vec<Touch>,
    next: usize,
    frames: Vec<usize>,
    pending: u32,
    /// Operations still to run after the current one, before the commit.
    ops_left: u32,
    /// Whether an operation of it changed a row (only those commit durably).
    modified: bool,
    durable: bool,
    stalled_counted: bool,
    /// (page, end LSN of its update record), kept for the ACK stream only.
    logged: Vec<(u64, u64)>,
    /// Whether its begin record is logged (with its first change).
    begun: bool,
    /// The nodes it flagged deleted (page, offset), for version cleanup.
    deleted: Vec<(u64, u32)>,
    /// The rows it changes: (touch, offset in the page, payload seed).
    rows: Vec<(usize, usize, u64)>,
}

impl Txn {
    fn empty() -> Txn {
        Txn {
            id: 0,
            intended: Instant::now(),
            paced: false,
            touches: Vec::new(),
            next: 0,
            frames: Vec::new(),
            pending: 0,
            ops_left: 0,
            modified: false,
            durable: false,
            stalled_counted: false,
            logged: Vec::new(),
            begun: false,
            deleted: Vec::new(),
            rows: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SState {
    Idle,
    Fetching,
    Stalled,
    Committing,
}

pub(super) struct Session {
    state: SState,
    /// Boxed: a transaction is taken out of its session and put back
    /// several times per I/O, and moving the box moves 8 bytes, not the
    /// transaction (a `memcpy` call each).
    txn: Option<Box<Txn>>,
    /// The last finished transaction, whose vectors the next one reuses.
    spare: Option<Box<Txn>>,
}

/// A page read in flight: one page read straight into its frame, or a page and
/// its neighbour read together into a pooled buffer.
pub(super) struct PageRead {
    frames: [usize; 2],
    count: usize,
    first_page: u64,
    intended: Option<Instant>,
}

/// The operation mix and row sizes of the profile, read once.
#[derive(Debug, Clone, Copy)]
struct Mix {
    insert_pct: f64,
    delete_pct: f64,
    replace_pct: f64,
    record: u32,
    index_record: u32,
    read_pages: u32,
    read_run_pct: f64,
    split_pct: f64,
    /// A split logs the split page's before image.
    split_image: bool,
    lazy_pct: f64,
    /// Operations per transaction (one commit for all of them).
    ops_per_txn: u32,
}

/// The transactional side of an instance.
pub(super) struct Workload {
    sessions: Vec<Session>,
    reads: Slab<PageRead>,
    /// (commit LSN, session) of durable commits waiting for the log.
    commit_waiters: Vec<(u64, usize)>,
    /// The hot-mailbox draw (Zipf's law, or uniform).
    draw: MailboxDraw,
    mailboxes: u64,
    pages_per_mailbox: u64,
    last_page: u64,
    next_txn: u64,
    mix: Mix,
}

impl Workload {
    pub(super) fn new(s: &InstanceSetup) -> Workload {
        let p = &s.profile;
        let data_pages = s.header.page_count.saturating_sub(1).max(1);
        let mailboxes = s.mailboxes.clamp(1, data_pages);
        let sessions = (0..s.sessions.max(1))
            .map(|_| Session {
                state: SState::Idle,
                txn: None,
                spare: None,
            })
            .collect();
        Workload {
            sessions,
            reads: Slab::new(),
            commit_waiters: Vec::new(),
            draw: MailboxDraw::new(mailboxes, p.hot_mailbox_skew),
            mailboxes,
            pages_per_mailbox: (data_pages / mailboxes).max(1),
            last_page: s.header.page_count - 1,
            next_txn: 1,
            mix: Mix {
                insert_pct: p.insert_pct,
                delete_pct: p.delete_pct,
                replace_pct: p.replace_pct,
                record: p.record_size.0 as u32,
                index_record: p.index_record_size.0 as u32,
                read_pages: p.read_pages,
                read_run_pct: p.read_run_pct,
                split_pct: p.split_pct,
                split_image: p.split_page_image,
                lazy_pct: p.lazy_commit_pct,
                ops_per_txn: p.operations_per_transaction.max(1),
            },
        }
    }
}

/// Open-loop pacing: transactions start at the rate that yields the target.
pub(super) struct Pacing {
    next_intended: Instant,
    txn_rate: Option<f64>,
    /// How far ahead of now a wake-up starts paced transactions.
    ahead: Duration,
    ios_per_txn: f64,
    rate_at: Instant,
    rate_ios: u64,
    rate_txns: u64,
}

impl Pacing {
    pub(super) fn new(t0: Instant, now: Instant) -> Pacing {
        Pacing {
            next_intended: t0,
            txn_rate: None,
            ahead: Duration::ZERO,
            ios_per_txn: RATE_FIRST_GUESS,
            rate_at: now,
            rate_ios: 0,
            rate_txns: 0,
        }
    }
}

/// The pages of one mailbox: its folder index page, then its data pages.
#[derive(Debug, Clone, Copy)]
struct Mailbox {
    index_page: u64,
    span: u64,
    last_page: u64,
}

impl Mailbox {
    fn data_page(&self, rng: &mut SmallRng) -> u64 {
        if self.span <= 1 {
            self.index_page
        } else {
            self.index_page + 1 + rng.random_range(0..self.span - 1)
        }
    }

    fn touch(touches: &mut Vec<Touch>, page: u64, modify: u32) {
        touches.push(Touch {
            page,
            modify,
            run_with_next: false,
            split: false,
            delete: false,
        });
    }

    /// A page on which a node is deleted.
    fn delete(touches: &mut Vec<Touch>, page: u64) {
        touches.push(Touch {
            page,
            modify: 0,
            run_with_next: false,
            split: false,
            delete: true,
        });
    }

    /// A page and its neighbour (read together if both are missing); `split`:
    /// the page splits into the neighbour.
    fn pair(&self, touches: &mut Vec<Touch>, page: u64, m1: u32, m2: u32, split: bool) {
        if page < self.last_page {
            touches.push(Touch {
                page,
                modify: m1,
                run_with_next: true,
                split,
                delete: false,
            });
            Self::touch(touches, page + 1, m2);
        } else {
            Self::touch(touches, page, m1);
        }
    }
}

/// A page touched twice in one transaction is acquired once (with the larger
/// change); a read run holds only if the next touch is the neighbour.
fn merge_touches(touches: &mut Vec<Touch>) {
    let mut kept = 0;
    for i in 0..touches.len() {
        let t = touches[i];
        if let Some(j) = touches[..kept].iter().position(|k| k.page == t.page) {
            touches[j].modify = touches[j].modify.max(t.modify);
            touches[j].split |= t.split;
            touches[j].delete |= t.delete;
            continue;
        }
        touches[kept] = t;
        kept += 1;
    }
    touches.truncate(kept);
    for i in 0..kept {
        let next_is_neighbour = touches
            .get(i + 1)
            .is_some_and(|n| n.page == touches[i].page + 1);
        touches[i].run_with_next &= next_is_neighbour;
    }
}

impl Instance {
    /// Re-estimates the paced transaction rate (at most once per [`RATE_WINDOW`]).
    fn update_pacing(&mut self, target: f64, now: Instant) {
        let p = &mut self.pacing;
        if p.txn_rate.is_some() && now.duration_since(p.rate_at) < RATE_WINDOW {
            return;
        }
        // I/O per transaction over the last window, smoothed: the cache warms
        // and write-back starts, so the early ratio must not rule for long.
        let dios = self.total_ios - p.rate_ios;
        let dtx = self.total_txns - p.rate_txns;
        if dtx >= RATE_MIN_TXNS {
            let recent = dios as f64 / dtx as f64;
            p.ios_per_txn = 0.5 * p.ios_per_txn + 0.5 * recent;
            p.rate_at = now;
            p.rate_ios = self.total_ios;
            p.rate_txns = self.total_txns;
        }
        // The estimate of I/O per transaction is never exact: catch up the I/O
        // owed since the start, within bounds.
        let owed = target * now.duration_since(self.t0).as_secs_f64() - self.total_ios as f64;
        let want =
            target + (owed / CATCH_UP_S).clamp(-CATCH_UP_MAX * target, CATCH_UP_MAX * target);
        let rate = (want / p.ios_per_txn.max(0.05)).max(0.1);
        p.txn_rate = Some(rate);
        p.ahead = Duration::from_secs_f64(PACE_AHEAD_TXNS / rate).min(PACE_AHEAD_MAX);
    }

    /// Starts a transaction on every idle session (paced: those that are due).
    pub(super) fn start_transactions(&mut self, now: Instant) -> bool {
        if let Some(target) = self.s.target_iops {
            self.update_pacing(target, now);
        }
        let mut started = false;
        for sid in 0..self.work.sessions.len() {
            if self.work.sessions[sid].state != SState::Idle {
                continue;
            }
            let (intended, paced) = match self.pacing.txn_rate {
                Some(rate) => {
                    if self.pacing.next_intended > now + self.pacing.ahead {
                        break;
                    }
                    let i = self.pacing.next_intended;
                    self.pacing.next_intended += Duration::from_secs_f64(1.0 / rate);
                    (i.min(now), true)
                }
                None => (now, false),
            };
            let mut txn = self.work.sessions[sid]
                .spare
                .take()
                .unwrap_or_else(|| Box::new(Txn::empty()));
            self.plan_transaction(intended, paced, &mut txn);
            self.work.sessions[sid].txn = Some(txn);
            self.acquire(sid);
            started = true;
        }
        started
    }

    /// Whether a transaction could start on an idle session right now (paced:
    /// one is due within the pacing's look-ahead).
    pub(super) fn can_start_now(&self, now: Instant) -> bool {
        match self.pacing.txn_rate {
            Some(_) => self
                .next_paced_start()
                .is_some_and(|at| at <= now + self.pacing.ahead),
            None => self.accepting() && self.work.sessions.iter().any(|s| s.state == SState::Idle),
        }
    }

    /// When the next paced transaction is due, if a session is free to run it.
    pub(super) fn next_paced_start(&self) -> Option<Instant> {
        self.pacing.txn_rate?;
        let idle = self.work.sessions.iter().any(|s| s.state == SState::Idle);
        (idle && self.accepting()).then_some(self.pacing.next_intended)
    }

    pub(super) fn any_session_busy(&self) -> bool {
        self.work.sessions.iter().any(|s| s.state != SState::Idle)
    }

    pub(super) fn any_stalled(&self) -> bool {
        self.work
            .sessions
            .iter()
            .any(|s| s.state == SState::Stalled)
    }

    pub(super) fn commits_waiting(&self) -> bool {
        !self.work.commit_waiters.is_empty()
    }

    fn pick_mailbox(&mut self) -> u64 {
        let m = self.work.mailboxes;
        let k = self.work.draw.draw(&mut self.rng);
        // Spread the hot mailboxes over the file (a fixed permutation).
        (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ self.s.header.db_id) % m
    }

    /// Fills `txn` with a new transaction: its first operation's pages and
    /// changes; the others follow, one after the other ([`Self::next_operation`]).
    fn plan_transaction(&mut self, intended: Instant, paced: bool, txn: &mut Txn) {
        txn.logged.clear();
        txn.deleted.clear();
        txn.begun = false;
        txn.modified = false;
        txn.durable = false;
        txn.ops_left = self.work.mix.ops_per_txn;
        txn.id = self.work.next_txn;
        self.work.next_txn += 1;
        txn.intended = intended;
        txn.paced = paced;
        txn.stalled_counted = false;
        self.plan_operation(txn);
    }

    /// Plans the transaction's next operation: a mailbox drawn, its pages.
    fn plan_operation(&mut self, txn: &mut Txn) {
        let mailbox = self.pick_mailbox();
        let w = &self.work;
        let first = 1 + mailbox * w.pages_per_mailbox;
        let mbx = Mailbox {
            index_page: first,
            span: w.pages_per_mailbox.min(w.last_page + 1 - first).max(1),
            last_page: w.last_page,
        };
        txn.touches.clear();
        txn.frames.clear();
        self.plan_touches(&mbx, &mut txn.touches);
        merge_touches(&mut txn.touches);
        txn.modified |= txn.touches.iter().any(|t| t.modify > 0 || t.delete);
        txn.next = 0;
        txn.pending = 0;
    }

    /// The pages an operation of the mix touches, by a roll of the dice.
    fn plan_touches(&mut self, mbx: &Mailbox, touches: &mut Vec<Touch>) {
        let m = self.work.mix;
        let rng = &mut self.rng;
        let roll: f64 = rng.random_range(0.0..100.0);
        if roll < m.insert_pct {
            // Insert a message row: the folder's index and a data page; sometimes
            // the data page splits into its neighbour.
            Mailbox::touch(touches, mbx.index_page, m.index_record);
            let d = mbx.data_page(rng);
            if rng.random_range(0.0..100.0) < m.split_pct {
                mbx.pair(
                    touches,
                    d,
                    m.record / 2 + 1,
                    m.record / 2 + 1,
                    m.split_image,
                );
            } else {
                Mailbox::touch(touches, d, m.record);
            }
        } else if roll < m.insert_pct + m.delete_pct {
            // Delete a message: its entry in the folder's index and its row
            // are flagged deleted (ESE's `ErrIsamDelete`: each index entry,
            // then the record, `dev/ese/src/ese/recupd.cxx`).
            Mailbox::delete(touches, mbx.index_page);
            let d = mbx.data_page(rng);
            Mailbox::delete(touches, d);
        } else if roll < m.insert_pct + m.delete_pct + m.replace_pct {
            let d = mbx.data_page(rng);
            Mailbox::touch(touches, d, m.record);
        } else {
            // Read a folder view: the index, then rows on data pages, some of them
            // on neighbouring pages read together.
            Mailbox::touch(touches, mbx.index_page, 0);
            for _ in 0..m.read_pages {
                let d = mbx.data_page(rng);
                if rng.random_range(0.0..100.0) < m.read_run_pct {
                    mbx.pair(touches, d, 0, 0, false);
                } else {
                    Mailbox::touch(touches, d, 0);
                }
            }
        }
    }

    /// Pins every page the session's transaction needs, reading the missing ones.
    fn acquire(&mut self, sid: usize) {
        let Some(mut txn) = self.work.sessions[sid].txn.take() else {
            return;
        };
        // The look-ups of every page still to acquire, together first: each
        // misses the CPU's caches (the page index, then the frame), and done
        // side by side the misses overlap instead of coming one page after
        // another in the loop below.
        for t in &txn.touches[txn.next..] {
            self.cache.touch_ahead(t.page);
        }
        while txn.next < txn.touches.len() {
            let t = txn.touches[txn.next];
            if let Some(f) = self.cache.lookup(t.page) {
                let fr = &mut self.cache.frames[f];
                fr.pins += 1;
                // A page whose buffer is lent to its write is changed only
                // after the write (it reads on as it is).
                let lent = fr.state == FrameState::Writing && fr.data.is_empty();
                if fr.state == FrameState::Reading || (lent && (t.modify > 0 || t.delete)) {
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
            let mut frames = [f, usize::MAX];
            let mut count = 1;
            if with_next {
                let Some(g) = self.cache.allocate(t.page + 1) else {
                    self.cache.discard(f);
                    self.stall(sid, txn);
                    return;
                };
                frames[1] = g;
                count = 2;
            }
            for &g in &frames[..count] {
                let fr = &mut self.cache.frames[g];
                fr.pins += 1;
                fr.waiters.push(sid as u32);
                txn.frames.push(g);
                txn.pending += 1;
                txn.next += 1;
            }
            self.interval.counters.cache_misses += count as u64;
            self.submit_page_read(PageRead {
                frames,
                count,
                first_page: t.page,
                intended: txn.paced.then_some(txn.intended),
            });
        }
        let ready = txn.pending == 0;
        self.work.sessions[sid].txn = Some(txn);
        if ready {
            self.apply(sid);
        } else {
            self.work.sessions[sid].state = SState::Fetching;
        }
    }

    fn stall(&mut self, sid: usize, mut txn: Box<Txn>) {
        if !txn.stalled_counted {
            txn.stalled_counted = true;
            self.interval.counters.page_fault_stalls += 1;
        }
        let s = &mut self.work.sessions[sid];
        s.txn = Some(txn);
        s.state = SState::Stalled;
    }

    pub(super) fn retry_stalled(&mut self) -> bool {
        let mut any = false;
        for sid in 0..self.work.sessions.len() {
            if self.work.sessions[sid].state == SState::Stalled {
                self.work.sessions[sid].state = SState::Fetching;
                self.acquire(sid);
                any |= self.work.sessions[sid].state != SState::Stalled;
            }
        }
        any
    }

    /// Reads one page straight into its frame, or a page and its neighbour
    /// into a pooled buffer (copied into their frames on completion).
    /// Reads the missing page(s) straight into their frames: one page into its
    /// frame's buffer, two neighbours with one vectored read into both.
    fn submit_page_read(&mut self, r: PageRead) {
        let buf = self.cache.lend_buf(r.frames[0]);
        let more = r.frames[1..r.count]
            .iter()
            .map(|&f| self.cache.lend_buf(f))
            .collect();
        let offset = r.first_page * self.ps as u64;
        let id = self.work.reads.insert(r);
        self.io.submit(IoRequest {
            file: self.db.clone(),
            kind: OpKind::Read,
            offset,
            buf,
            tag: tag(K_PAGE_READ, id),
            more,
        });
    }

    pub(super) fn page_read_done(&mut self, id: usize, c: IoCompletion) {
        let Some(r) = self.work.reads.remove(id) else {
            return;
        };
        // Paced: from the transaction's intended start.
        let latency = match r.intended {
            Some(i) => c.completed.saturating_duration_since(i.min(c.submitted)),
            None => c.latency(),
        };
        let result = c.full();
        let st = self.interval.class_mut(Class::DbRead);
        st.ops += 1;
        st.latency.record(latency);
        self.total_ios += 1;
        if result.is_ok() {
            st.bytes += c.len() as u64;
        } else {
            st.errors += 1;
        }
        let frames = &r.frames[..r.count];
        let offset = c.offset;
        for (&f, buf) in frames.iter().zip(std::iter::once(c.buf).chain(c.more)) {
            self.cache.restore_buf(f, buf);
        }
        if let Err(e) = result {
            let msg = io_error_text("reading database", &self.s.db_path, offset, e);
            for &f in frames {
                let waiters = std::mem::take(&mut self.cache.frames[f].waiters);
                self.cache.discard(f);
                for w in waiters {
                    self.abort_txn(w as usize);
                }
            }
            self.record_error(msg);
            return;
        }
        for (k, &f) in frames.iter().enumerate() {
            self.page_arrived(f, r.first_page + k as u64);
        }
    }

    /// A page is in its frame: check it, and resume the sessions waiting for it.
    fn page_arrived(&mut self, f: usize, page: u64) {
        match format::check_page(
            self.cache.frames[f].data.as_slice(),
            self.s.header.db_id,
            page,
        ) {
            Ok(h) => {
                let fr = &mut self.cache.frames[f];
                let page_bytes = fr.data.as_slice();
                fr.lsn = h.lsn;
                fr.hdr_lsn = h.lsn;
                fr.crc = format::header_is_sealed(page_bytes, self.s.header.db_id, page)
                    .then(|| format::page_crc(page_bytes));
            }
            Err(e) => {
                self.interval.counters.bad_pages += 1;
                self.record_error(format!(
                    "bad page {page} in {}: {e:?}",
                    self.s.db_path.display()
                ));
            }
        }
        self.cache.frames[f].state = FrameState::Clean;
        self.resume_waiters(f);
    }

    /// Frame `f`'s page is there again (read in, or back from its write): the
    /// sessions waiting for it go on.
    pub(super) fn resume_waiters(&mut self, f: usize) {
        let waiters = std::mem::take(&mut self.cache.frames[f].waiters);
        self.resume_taken(f, waiters);
    }

    /// The sessions of `waiters` (taken from frame `f`) go on. A session's
    /// next operation may evict and reuse any clean unpinned frame, so the
    /// waiters of several frames that became ready together are all taken
    /// before the first goes on: a frame reused meanwhile has new waiters,
    /// which must wait for its read.
    pub(super) fn resume_taken(&mut self, f: usize, waiters: Vec<u32>) {
        for &w in &waiters {
            let sid = w as usize;
            let ready = match self.work.sessions[sid].txn.as_mut() {
                Some(t) => {
                    t.pending = t.pending.saturating_sub(1);
                    t.pending == 0 && t.next == t.touches.len()
                }
                None => false,
            };
            if ready && self.work.sessions[sid].state == SState::Fetching {
                self.apply(sid);
            }
        }
        // Give the (emptied) waiter list back to the frame: no allocation next time.
        let fr = &mut self.cache.frames[f];
        if fr.waiters.is_empty() {
            fr.waiters = waiters;
            fr.waiters.clear();
        }
    }

    /// Every page of the operation is in: change the rows and log them; then
    /// the transaction's next operation, or its commit (lazily, or waiting
    /// for the log flush that covers the commit record).
    fn apply(&mut self, sid: usize) {
        let Some(mut txn) = self.work.sessions[sid].txn.take() else {
            return;
        };
        for &f in &txn.frames {
            invariant!(
                self.cache.frames[f].state != FrameState::Reading,
                "an operation applied while its page (frame {f}) is still being read"
            );
        }
        let ok = self.log_changes(&mut txn);
        for &f in &txn.frames {
            let fr = &mut self.cache.frames[f];
            fr.pins = fr.pins.saturating_sub(1);
        }
        txn.ops_left = txn.ops_left.saturating_sub(1);
        if ok && txn.ops_left > 0 {
            // The next operation of the same transaction (its pages released:
            // ESE latches a page for one operation, not for the transaction).
            self.plan_operation(&mut txn);
            self.work.sessions[sid].txn = Some(txn);
            self.acquire(sid);
            return;
        }
        txn.durable = txn.modified && self.rng.random_range(0.0..100.0) >= self.work.mix.lazy_pct;
        // A transaction that logged nothing logs no commit either: its begin
        // is still deferred (`ErrLGCommitTransaction` in
        // `dev/ese/src/ese/logapi.cxx`).
        let commit = if ok && txn.begun {
            self.log.append(&Record::Commit { txn: txn.id }).map(Some)
        } else {
            Ok(None)
        };
        self.interval.counters.transactions += 1;
        self.total_txns += 1;
        match commit {
            Ok(lsn) if ok => {
                if lsn.is_some() {
                    self.interval.counters.log_records += 1;
                    self.interval.counters.log_bytes += format::COMMIT_LEN as u64;
                    self.version_cleanup(&txn.deleted);
                }
                if let (true, Some(lsn)) = (txn.durable, lsn) {
                    self.work.commit_waiters.push((lsn, sid));
                    let s = &mut self.work.sessions[sid];
                    s.txn = Some(txn);
                    s.state = SState::Committing;
                    return;
                }
                self.interval.counters.lazy_commits += 1;
                self.record_txn_latency(&txn);
            }
            Ok(_) => self.interval.counters.failed_transactions += 1,
            Err(e) => {
                self.interval.counters.failed_transactions += 1;
                self.record_error(e.to_string());
            }
        }
        self.finish_txn(sid, txn);
    }

    /// Changes the transaction's rows in their cached pages (random bytes unique
    /// to this database) and appends an update record for each, its after-image
    /// copied straight from the page into the log. False if the log failed.
    /// Every row's place and seed are drawn first (in the order of the
    /// changes, as one pass drew them) and the rows' first bytes prefetched
    /// ([`ROW_AHEAD`]): a row's old bytes are read for the page's checksum,
    /// and the pages sat in memory untouched since their read.
    fn log_changes(&mut self, txn: &mut Txn) -> bool {
        let mut rows = std::mem::take(&mut txn.rows);
        rows.clear();
        for (i, t) in txn.touches.iter().enumerate() {
            if t.modify == 0 {
                continue;
            }
            let len = t.modify as usize;
            let room = self.ps - PAGE_HEADER - len;
            let offset = PAGE_HEADER + (self.rng.random_range(0..=room) & !7);
            let seed = self.rng.next_u64();
            let f = txn.frames[i];
            let ahead = len.min(ROW_AHEAD);
            mailbench_io::prefetch(&self.cache.frames[f].data.as_slice()[offset..offset + ahead]);
            rows.push((i, offset, seed));
        }
        let changes = !rows.is_empty() || txn.touches.iter().any(|t| t.split || t.delete);
        let mut ok = true;
        if changes && !txn.begun {
            ok = self.log_node_record(txn, None, &Record::Begin { txn: txn.id });
            txn.begun = ok;
        }
        for i in 0..txn.touches.len() {
            if ok && txn.touches[i].split {
                ok = self.log_page_image(txn, i);
            }
        }
        ok = ok
            && rows
                .iter()
                .all(|&(i, offset, seed)| self.log_change(txn, i, offset, seed));
        for i in 0..txn.touches.len() {
            if ok && txn.touches[i].delete {
                ok = self.log_flag_delete(txn, i);
            }
        }
        txn.rows = rows;
        ok
    }

    /// Flags a node of touch `i`'s page deleted: a record without an
    /// after-image (ESE's `LRFLAGDELETE`, `ErrNDFlagDelete` in
    /// `dev/ese/src/ese/node.cxx`); the node's bytes stay until version
    /// cleanup removes it ([`Self::version_cleanup`]). False if the log failed.
    fn log_flag_delete(&mut self, txn: &mut Txn, i: usize) -> bool {
        let t = txn.touches[i];
        let f = txn.frames[i];
        let room = self.ps - PAGE_HEADER - 8;
        let offset = (PAGE_HEADER + (self.rng.random_range(0..=room) & !7)) as u32;
        let rec = Record::FlagDelete {
            txn: txn.id,
            page_no: t.page,
            offset,
        };
        txn.deleted.push((t.page, offset));
        self.log_node_record(txn, Some(f), &rec)
    }

    /// Appends `rec`, a record without an after-image, for `txn`; a record
    /// that changes a page marks frame `page_frame` dirty. False if the log
    /// failed.
    fn log_node_record(
        &mut self,
        txn: &mut Txn,
        page_frame: Option<usize>,
        rec: &Record<'_>,
    ) -> bool {
        let begin = self.log.next_lsn();
        let appended = self.log.append(rec);
        let len = rec.encoded_len() as u64;
        self.appended(txn, page_frame.zip(rec.page()), begin, appended, len)
    }

    /// What follows appending a record of `len` bytes for `txn` that began at
    /// LSN `begin`: the page it changes (frame, page number) marked dirty up
    /// to its end and kept for the ACK stream, the log counters; a failed
    /// append recorded. False if the log failed.
    fn appended(
        &mut self,
        txn: &mut Txn,
        page: Option<(usize, u64)>,
        begin: u64,
        appended: mailbench_base::Result<u64>,
        len: u64,
    ) -> bool {
        match appended {
            Ok(lsn) => {
                if let Some((f, page)) = page {
                    self.cache.mark_dirty(f, begin, lsn);
                    if self.s.ack_stream {
                        txn.logged.push((page, lsn));
                    }
                }
                self.interval.counters.log_records += 1;
                self.interval.counters.log_bytes += len;
                true
            }
            Err(e) => {
                self.record_error(e.to_string());
                false
            }
        }
    }

    /// Version cleanup of a committed transaction's deletes: each node it
    /// flagged deleted is removed by a transaction of its own — a begin, a
    /// delete record without an after-image, a lazy commit (`ErrBTDelete` in
    /// `dev/ese/src/ese/bt.cxx`, run for each node by
    /// `DELETERECTASK::ErrExecuteDbTask` in `dev/ese/src/ese/dbtask.cxx`,
    /// posted by `VER::ErrVERIDelete` in `dev/ese/src/ese/ver.cxx` once the
    /// deleting transaction committed; the cleanup session commits with
    /// `JET_bitCommitLazyFlush`). ESE's cleanup runs in the background, a
    /// little later; here it runs right after the commit, on the pages still
    /// cached (a page evicted or being read again since is left alone).
    fn version_cleanup(&mut self, deleted: &[(u64, u32)]) {
        for &(page, offset) in deleted {
            let Some(f) = self.cache.frame_of(page) else {
                continue;
            };
            if self.cache.frames[f].state == FrameState::Reading {
                continue;
            }
            let id = self.work.next_txn;
            self.work.next_txn += 1;
            let mut cleanup = Txn::empty();
            cleanup.id = id;
            let recs = [
                Record::Begin { txn: id },
                Record::Delete {
                    txn: id,
                    page_no: page,
                    offset,
                },
                Record::Commit { txn: id },
            ];
            for rec in &recs {
                if !self.log_node_record(&mut cleanup, Some(f), rec) {
                    return;
                }
            }
        }
    }

    /// Logs the before image of touch `i`'s page, which splits into its
    /// neighbour: ESE logs the split page's image with the split when rows
    /// move to the new page (`lrtypSplit2`, `FBTISplitPageBeforeImageRequired`
    /// in `dev/ese/src/inc/btsplit.hxx`, `ErrLGSplit` in
    /// `dev/ese/src/ese/logapi.cxx`; docs/storage.md "The engine"). The image
    /// is the page's rows (its payload: a page splits when it is full), as an
    /// update record of the bytes the page holds, so that replay needs nothing
    /// new. False if the log failed.
    fn log_page_image(&mut self, txn: &mut Txn, i: usize) -> bool {
        let t = txn.touches[i];
        let f = txn.frames[i];
        let begin = self.log.next_lsn();
        let rec = Record::Update {
            txn: txn.id,
            page_no: t.page,
            offset: PAGE_HEADER as u32,
            data: &self.cache.frames[f].data.as_slice()[PAGE_HEADER..],
        };
        let len = rec.encoded_len() as u64;
        let appended = self.log.append(&rec);
        self.appended(txn, Some((f, t.page)), begin, appended, len)
    }

    /// Changes the row at `offset` of touch `i`'s page and logs it.
    fn log_change(&mut self, txn: &mut Txn, i: usize, offset: usize, seed: u64) -> bool {
        let t = txn.touches[i];
        let f = txn.frames[i];
        let len = t.modify as usize;
        let row = offset..offset + len;
        self.change_row(f, row.clone(), seed);
        let begin = self.log.next_lsn();
        let rec = Record::Update {
            txn: txn.id,
            page_no: t.page,
            offset: offset as u32,
            data: &self.cache.frames[f].data.as_slice()[row],
        };
        let appended = self.log.append(&rec);
        let len = (UPDATE_HEADER + len) as u64;
        self.appended(txn, Some((f, t.page)), begin, appended, len)
    }

    /// Fills `row` of frame `f`'s page with new random bytes (from `seed`)
    /// and patches the page's checksum, if known, by the row's change.
    fn change_row(&mut self, f: usize, row: std::ops::Range<usize>, seed: u64) {
        let fr = &mut self.cache.frames[f];
        let page = fr.data.as_mut_slice();
        let before = fr.crc.map(|_| format::crc32c(&page[row.clone()]));
        format::fill_random(&mut page[row.clone()], seed);
        if let (Some(crc), Some(before)) = (fr.crc, before) {
            let after = format::crc32c(&page[row.clone()]);
            fr.crc = Some(format::page_crc_after_row(
                crc,
                page.len(),
                row,
                before,
                after,
            ));
        }
    }

    fn record_txn_latency(&mut self, txn: &Txn) {
        self.interval
            .transaction_latency
            .record(txn.intended.elapsed());
    }

    /// The session is idle again; its transaction's vectors are kept for the next.
    fn finish_txn(&mut self, sid: usize, txn: Box<Txn>) {
        let s = &mut self.work.sessions[sid];
        s.spare = Some(txn);
        s.state = SState::Idle;
    }

    fn abort_txn(&mut self, sid: usize) {
        if let Some(txn) = self.work.sessions[sid].txn.take() {
            for &f in &txn.frames {
                let fr = &mut self.cache.frames[f];
                fr.pins = fr.pins.saturating_sub(1);
                fr.waiters.retain(|w| *w as usize != sid);
            }
            self.work.sessions[sid].spare = Some(txn);
        }
        self.interval.counters.failed_transactions += 1;
        self.work.sessions[sid].state = SState::Idle;
    }

    /// The log is durable up to `durable`: the commits it covers are served.
    pub(super) fn commits_durable(&mut self, durable: u64) {
        let mut i = 0;
        while i < self.work.commit_waiters.len() {
            let (lsn, sid) = self.work.commit_waiters[i];
            if lsn > durable {
                i += 1;
                continue;
            }
            self.work.commit_waiters.swap_remove(i);
            if let Some(txn) = self.work.sessions[sid].txn.take() {
                self.record_txn_latency(&txn);
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
                self.finish_txn(sid, txn);
            } else {
                self.work.sessions[sid].state = SState::Idle;
            }
        }
    }
}
