//! Soft recovery (log replay) and the `storage recover` test.
//!
//! Replay reads the log sequentially from the checkpoint (a few reads ahead,
//! each the rest of the log file up to ESE's largest coalesced read, the
//! profile's `maintenance_read_size`), decodes the records, and for every
//! update reads the page it touches (several reads in flight, ahead of the
//! record being applied; the neighbouring pages the same log file's updates
//! touch read in the same I/O up to that size, as ESE's redo pre-reads a log
//! file's pages; straight into their cache frames), applies the after-image if the
//! page is older than the record (record end LSN > page LSN), and keeps the
//! page in a cache that is written back only under pressure (every frame
//! dirty; clean frames are evicted first; while the cache's memory is still
//! being faulted in, a clean page no queued update touches is evicted rather
//! than the memory waited for) and in a final flush (sorted),
//! before the checkpoint moves to the end of the log. That flush begins once
//! the whole log is decoded, with the pages no queued update touches any more
//! and then each page after its last queued update (8 writes in flight
//! beside the last reads), and ends with the rest (32 in flight). Its writes
//! are thus the pages the crash left dirty.
//! Only committed transactions are
//! applied: the updates of a transaction whose commit record is missing at the
//! end of the log are dropped. Replay stops at the end of the log, at a torn
//! tail, or at a damaged block, and says where.
//!
//! The test: the transactional load runs with the checkpoint held until N new
//! log files exist per instance, stops as a crash would (log flushed, dirty pages
//! left unwritten), then every instance is replayed at once and verified.
//!
//! The module, by phase:
//! - `mod.rs` (here): the public entry points (replay of every instance or of
//!   one), the replay's limits, and the replay state shared by its phases;
//! - `replay.rs`: setting a replay up (where the checkpoint says it starts) and
//!   its I/O loop;
//! - `log.rs`: reading the log ahead and decoding its records into committed
//!   updates;
//! - `pages.rs`: the replay's page cache (read-ahead of the pages updates touch,
//!   eviction) and applying the updates;
//! - `checkpoint.rs`: writing the pages back, and at the end the flush,
//!   checkpoint and clean mark;
//! - `figures.rs`: the figures of one instance's replay (its result);
//! - `generate.rs`: the test's log generation (the load with the checkpoint
//!   held, stopped as a crash would);
//! - `run.rs`: the whole `storage recover` test, its phases in order and its
//!   verdict.

mod checkpoint;
mod figures;
mod generate;
mod log;
mod pages;
mod replay;
mod run;

use crate::cache::PageMap;
use crate::format::DbHeader;
use crate::init::read_header;
use crate::spec::{InstanceSpec, SpecExt, StorageSpec};
use mailbench_base::interrupt::Interrupt;
use mailbench_io::{AlignedBuf, BufPool, EngineChoice, IoEngine};
pub use mailbench_results::storage::recover::{GenerateResult, RecoverResult, ReplayResult};
use mailbench_results::storage::stats::ClassStats;
pub use run::{PhaseFn, run_recover};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::sync::Arc;
use std::time::Instant;

/// Page reads in flight during replay.
pub const REPLAY_DEPTH: usize = 16;
/// Log chunks read ahead during replay: in flight, or arrived and not yet decoded.
const LOG_AHEAD: usize = 4;
const QUEUE_BYTES: usize = 16 << 20;
/// Room the update ring starts with beyond a full apply queue (one log
/// read's worth and an open transaction; the ring grows beyond it).
const RING_SLACK: usize = 1 << 20;
/// Writes in flight under cache pressure (during replay).
const WRITE_DEPTH: usize = 16;
/// Writes in flight of the final flush begun while the last updates are
/// replayed, beside the reads. The pages the crash left dirty are those
/// changed last, so most become final during the drain of the queue: at 4
/// in flight only about a fifth of them (210-300 of 1,250-1,600, 50 log
/// files) were written by the last read, and the rest waited for it; at 8,
/// a third (470-590); at 16, two thirds, but the reads beside them slowed
/// more than the tail shrank.
const FINAL_DEPTH: usize = 8;
/// Writes in flight of the final flush once every page is read (nothing
/// else uses the device then).
const FLUSH_DEPTH: usize = 32;
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
                    let coalesce = spec.profile.maintenance_read_size.0 as usize;
                    replay_instance(
                        i,
                        spec.engine_choice(),
                        caps.o_direct,
                        cache,
                        coalesce,
                        interrupt,
                    )
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
/// `coalesce`: the largest read in bytes (ESE's `JET_paramMaxCoalesceReadSize`,
/// the profile's `maintenance_read_size`): the log's reads and the runs of
/// neighbouring pages read in one I/O are at most this.
pub fn replay_instance(
    inst: &InstanceSpec,
    engine: EngineChoice,
    direct: bool,
    cache_pages: usize,
    coalesce: usize,
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
    match Replay::new(inst, header, engine, direct, cache_pages, coalesce) {
        Ok(mut rp) => {
            rp.run(interrupt);
            rp.finish(&mut r);
        }
        Err(e) => r.errors.push(e.to_string()),
    }
    r
}

/// An update decoded from the log: its after-image is `len` bytes at `at` in
/// the replay's [`UpdBytes`].
struct Upd {
    page: u64,
    offset: usize,
    at: u64,
    len: usize,
    end_lsn: u64,
}

/// The updates of a transaction whose commit record is not decoded yet, with
/// their after-images (each update's `at` is its place in `bytes`): queued
/// when the commit comes, dropped if it never does.
#[derive(Default)]
struct OpenTxn {
    upds: Vec<Upd>,
    bytes: Vec<u8>,
}

/// The after-images of the queued updates decoded and not applied yet, in log
/// order (a transaction's join them when its commit record is decoded): one
/// ring buffer for all, so an update costs no allocation of its own (a buffer
/// per update was a tenth of the replay thread's CPU, most of it the allocator
/// growing and trimming its heap), and the ring's memory, sized for a full
/// apply queue, is faulted in once. Applied updates are released from the
/// front.
struct UpdBytes {
    ring: VecDeque<u8>,
    /// The position (among all bytes ever pushed) of the ring's front.
    base: u64,
}

impl Default for UpdBytes {
    fn default() -> Self {
        UpdBytes {
            // A full apply queue, one more log read's worth and an open
            // transaction: the ring grows only beyond that.
            ring: VecDeque::with_capacity(QUEUE_BYTES + RING_SLACK),
            base: 0,
        }
    }
}

impl UpdBytes {
    /// Appends `data`; returns its position.
    fn push(&mut self, data: &[u8]) -> u64 {
        let at = self.base + self.ring.len() as u64;
        self.ring.extend(data);
        at
    }

    /// Copies the bytes pushed at `at` (not released yet) into `to`, which
    /// has their length.
    fn copy_to(&self, at: u64, to: &mut [u8]) {
        let i = (at - self.base) as usize;
        let (a, b) = self.ring.as_slices();
        if i >= a.len() {
            let j = i - a.len();
            to.copy_from_slice(&b[j..j + to.len()]);
        } else {
            let n = (a.len() - i).min(to.len());
            let (to_a, to_b) = to.split_at_mut(n);
            to_a.copy_from_slice(&a[i..i + n]);
            to_b.copy_from_slice(&b[..to_b.len()]);
        }
    }

    /// Everything before `end` is applied: released.
    fn release(&mut self, end: u64) {
        let n = ((end - self.base) as usize).min(self.ring.len());
        self.ring.drain(..n);
        self.base += n as u64;
    }
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
    /// The page; lent to its read while the frame is `Reading` (empty then).
    data: AlignedBuf,
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
    /// The log's block size (its sector, from the database header).
    log_block: usize,
    /// A log read: the rest of the log file, at most this (the largest
    /// coalesced read, whole log blocks).
    log_read_size: usize,
    /// Pages read in one I/O at most (the largest coalesced read).
    read_run_pages: usize,
    blocks_per_file: u64,
    db: Arc<File>,
    direct: bool,
    io: Box<dyn IoEngine>,
    /// Buffers of log reads, page reads and writes, reused.
    pool: BufPool,
    // Log reading.
    log_files: HashMap<u64, Arc<File>>,
    sub_gen: u64,
    /// The next offset to read in `sub_gen` (0: its header).
    sub_off: u64,
    /// Where the data reads of the first file begin (the read holding the
    /// checkpoint's block); taken once its header read is submitted.
    first_data_off: Option<u64>,
    /// The newest generation whose header checked: a file's data is read
    /// once its header checks.
    header_ok: Option<u64>,
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
    /// The segment of the last position `lsn_of_next` looked up.
    seg_cursor: usize,
    /// The transactions being decoded, by id (their commit records not
    /// seen yet): the sessions' transactions interleave in the log.
    open: HashMap<u64, OpenTxn>,
    /// Open-transaction buffers emptied, for the next transactions.
    open_spare: Vec<OpenTxn>,
    /// The after-images of the updates in `queue`.
    upd_bytes: UpdBytes,
    // Applying.
    queue: VecDeque<Upd>,
    queue_bytes: usize,
    prepared: usize,
    frames: Vec<Frame>,
    /// Frame buffers carved (a region at a time, faulted in) and not used yet.
    spare: Vec<AlignedBuf>,
    /// Where further frame buffers come from.
    memory: pages::FrameMemory,
    map: HashMap<u64, usize>,
    free: Vec<usize>,
    hand: usize,
    cap: usize,
    reads: usize,
    reads_meta: HashMap<u64, Vec<usize>>,
    /// Frame lists of completed reads, kept for the next reads.
    runs_spare: Vec<Vec<usize>>,
    /// The frames of reads completed and not checked yet (their frames
    /// still `Reading`).
    arrived: Vec<Vec<usize>>,
    read_id: u64,
    writes: usize,
    /// The frames of each write in flight, and whether their buffers are lent to it.
    writes_meta: HashMap<u64, (Vec<usize>, bool)>,
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
    /// The thread's CPU time at the start, or why /proc gave none.
    cpu0: std::result::Result<f64, String>,
    /// When the log was replayed and the final flush (checkpoint) began, and
    /// the page writes done before it (under cache pressure).
    flush_start: Option<(Instant, u64)>,
    /// Once the whole log is decoded: the dirty pages no queued update
    /// touches any more (first those at that moment, sorted, then each page
    /// after its last update), written while the rest is replayed, and how
    /// far those writes went.
    finals: Option<(Vec<u64>, usize)>,
    /// The queued updates per page (committed, decoded, not applied yet): a
    /// page with one is not evicted early, and once the whole log is decoded
    /// a dirty page without one is final.
    pending: PageMap<u32>,
}

#[cfg(test)]
mod tests {
    use super::UpdBytes;

    /// The after-images come back as pushed through releases and the ring's
    /// wrap-around.
    #[test]
    fn update_bytes_survive_release_and_wrap() {
        let mut b = UpdBytes::default();
        let cap = b.ring.capacity();
        let mut live = std::collections::VecDeque::new();
        let mut next = 0u8;
        let mut pushed = 0usize;
        for round in 0..60_000usize {
            let len = 1 + (round * 37) % 1500;
            let data: Vec<u8> = (0..len).map(|i| next.wrapping_add(i as u8)).collect();
            next = next.wrapping_add(1);
            let at = b.push(&data);
            pushed += len;
            live.push_back((at, data));
            if round % 3 == 0 {
                while live.len() > 10_000 {
                    let Some((at, data)) = live.pop_front() else {
                        break;
                    };
                    let mut to = vec![0u8; data.len()];
                    b.copy_to(at, &mut to);
                    assert_eq!(to, data);
                    b.release(at + data.len() as u64);
                }
            }
        }
        assert!(pushed > 2 * cap, "the ring never wrapped");
        for (at, data) in &live {
            let mut to = vec![0u8; data.len()];
            b.copy_to(*at, &mut to);
            assert_eq!(&to, data);
        }
    }
}
