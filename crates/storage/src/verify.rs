//! Checksum verification of every database page and every log block: large
//! sequential O_DIRECT reads, several in flight per database, all databases at
//! once, page checksums on every core (a small pool of checksum threads).
//!
//! The same page scanner serves `storage backup` (256 KiB reads, optional copy).

use crate::format::{self, DbHeader, LogBlock, PageError};
use crate::init::read_header;
use crate::log_header::{self, LOG_FILE_HEADER, LogFileHeader};
use crate::spec::{InstanceSpec, SpecExt, StorageSpec};
use mailbench_base::interrupt::Interrupt;
use mailbench_base::{Error, Result};
use mailbench_io::{AlignedBuf, IoCompletion, IoEngine, IoRequest, OpKind};
use mailbench_results::storage::stats::{ClassFigures, ClassStats};
pub use mailbench_results::storage::verify::{VerifyDb, VerifySummary};
use std::fs::File;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CHUNK: usize = 1 << 20;
const DEPTH: usize = 8;
pub const FIRST_BAD_MAX: usize = 20;

/// Verifies every instance of the spec, all at once.
pub fn verify_all(spec: &StorageSpec, interrupt: &Interrupt) -> Result<VerifySummary> {
    let t0 = Instant::now();
    let pool = Pool::new(pool_size());
    let pool = &pool;
    let results: Vec<Result<VerifyDb>> = std::thread::scope(|scope| {
        let hs: Vec<_> = spec
            .instances
            .iter()
            .map(|i| scope.spawn(move || verify_one(spec, i, pool, interrupt)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::runtime("verify thread failed")))
            })
            .collect()
    });
    let mut out = VerifySummary::default();
    for r in results {
        out.databases.push(r?);
    }
    out.seconds = t0.elapsed().as_secs_f64();
    let mb: f64 = out.databases.iter().map(|d| d.mb).sum();
    out.mb_per_s = if out.seconds > 0.0 {
        mb / out.seconds
    } else {
        0.0
    };
    out.bad_total = out.databases.iter().map(|d| d.bad()).sum();
    Ok(out)
}

pub fn pool_size() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 64)
}

// ---------------------------------------------------------------- the log

/// The end of the valid log in `dir` and what the scan found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogScan {
    /// The LSN after the last good block of the log read contiguously from the
    /// checkpoint (the checkpoint LSN if nothing follows it).
    pub end_lsn: u64,
    pub checkpoint_lsn: Option<u64>,
    pub files: u64,
    pub blocks: u64,
    pub bad_blocks: u64,
    pub first_bad: Vec<String>,
    pub gaps: u64,
    pub after_end: u64,
    pub bytes: u64,
}

/// Reads the checkpoint file of `dir` if it belongs to database `db_id`
/// (None: no checkpoint file, or one of another database). A file that cannot
/// be read or is damaged is an error naming it: replaying from a guess would
/// trust what mailbench can no longer read back.
pub fn read_checkpoint(dir: &Path, db_id: u64) -> Result<Option<format::Checkpoint>, String> {
    let path = dir.join("checkpoint.chk");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
    };
    let c = format::Checkpoint::decode(&bytes).map_err(|e| {
        format!(
            "{}: {e} ({} bytes): the checkpoint file mailbench wrote is damaged; the database \
             cannot be replayed from it: restore the database and its log from a backup or \
             create them again",
            path.display(),
            bytes.len()
        )
    })?;
    Ok((c.db_id == db_id).then_some(c))
}

/// Log generations present in `dir`, oldest first.
pub fn log_generations(dir: &Path) -> Vec<u64> {
    let mut gens: Vec<u64> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| format::parse_log_file_name(&e.file_name().to_string_lossy()))
                .collect()
        })
        .unwrap_or_default();
    gens.sort_unstable();
    gens
}

/// Checks every log file's header and every block. The log is read on from
/// the checkpoint's generation: it ends at the first block never written (or
/// at a bad block), unless that generation is full and the next one goes on
/// with a sound header. A header never written (zeros, torn, or a reused
/// file's old one) on a file holding no block of its generation is a file
/// not begun: the end of the log, no damage; but at the checkpoint's
/// generation with records needed after its start, under blocks of its
/// generation, or any other fault, it is damage.
pub fn scan_log(dir: &Path, db_id: u64, file_size: u64, log_block: usize) -> LogScan {
    let gens = log_generations(dir);
    let (ckpt, damaged) = match read_checkpoint(dir, db_id) {
        Ok(c) => (c, None),
        Err(e) => (None, Some(e)),
    };
    let lb = log_block;
    let mut scan = LogScan {
        end_lsn: ckpt.map(|c| c.checkpoint_lsn).unwrap_or(0),
        checkpoint_lsn: ckpt.map(|c| c.checkpoint_lsn),
        files: gens.len() as u64,
        ..Default::default()
    };
    if let Some(e) = damaged {
        // Named as the checkpoint file's damage, not as a bad log block.
        scan.bad_blocks += 1;
        push_bad(&mut scan.first_bad, e);
    }
    let start_gen = ckpt
        .map(|c| c.checkpoint_lsn / file_size)
        .or(gens.first().copied())
        .unwrap_or(0);
    let geo = Geometry {
        db_id,
        file_size,
        lb,
        blocks_per_file: log_header::blocks_per_file(file_size, lb) as usize,
        start_gen,
    };
    // The generation the contiguous log continues in, while it does.
    let mut expect: Option<u64> = Some(start_gen);
    if let Some(first_after) = gens.iter().find(|g| **g >= start_gen)
        && *first_after > start_gen
        && ckpt.is_some()
    {
        // Log needed after the checkpoint is missing.
        scan.gaps += 1;
        expect = None;
    }
    for (i, g) in gens.iter().enumerate() {
        if i > 0 && *g != gens[i - 1] + 1 {
            scan.gaps += 1;
        }
        let path = dir.join(format::log_file_name(*g));
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(_) => {
                bad(&mut scan, format!("{} unreadable", path.display()));
                if expect == Some(*g) {
                    expect = None;
                }
                continue;
            }
        };
        scan.bytes += bytes.len() as u64;
        let header = LogFileHeader::check(&bytes, db_id, *g, file_size, lb);
        let in_log = expect == Some(*g) && header.is_ok();
        let data = bytes.get(LOG_FILE_HEADER..).unwrap_or(&[]);
        let (full, own_blocks) = scan_blocks(&mut scan, data, *g, in_log, &geo);
        if let Err(fault) = header {
            let needed = *g == start_gen
                && expect == Some(*g)
                && (scan.checkpoint_lsn).is_some_and(|c| c > log_header::first_lsn(*g, file_size));
            if !fault.unwritten() || own_blocks > 0 || needed {
                bad(
                    &mut scan,
                    format!("{} header: {fault}", format::log_file_name(*g)),
                );
            }
        }
        if expect == Some(*g) {
            expect = (in_log && full).then_some(g + 1);
        }
    }
    scan
}

/// What scanning a log file's blocks needs to know of the log.
struct Geometry {
    db_id: u64,
    file_size: u64,
    lb: usize,
    blocks_per_file: usize,
    start_gen: u64,
}

/// Checks the blocks of generation `g` (`data`: its file after the header)
/// into `scan`, moving the log's end while `in_log`: whether the file is
/// full of valid blocks, and how many of its blocks are its generation's.
fn scan_blocks(
    scan: &mut LogScan,
    data: &[u8],
    g: u64,
    in_log: bool,
    geo: &Geometry,
) -> (bool, u64) {
    let lb = geo.lb;
    let mut full = true;
    let mut own_blocks = 0u64;
    for (b, block) in data.chunks(lb).enumerate().take(geo.blocks_per_file) {
        if block.len() < lb {
            // A file cut inside a block.
            scan.blocks += 1;
            bad(
                scan,
                format!("{} block {b} (truncated)", format::log_file_name(g)),
            );
            full = false;
            break;
        }
        let next = data.get((b + 1) * lb..(b + 2) * lb).unwrap_or(&[]);
        // A torn rewrite of the last partial block whose shadow is whole
        // is the log's end, not damage.
        let checked = match format::shadow_rescue(block, next, geo.db_id, g, b as u32) {
            Some(data_len) => LogBlock::Valid { data_len },
            None => format::check_log_block(block, geo.db_id, g, b as u32),
        };
        match checked {
            LogBlock::Valid { data_len } => {
                scan.blocks += 1;
                own_blocks += 1;
                if in_log && full {
                    let end = g * geo.file_size
                        + log_header::block_offset(b as u64, lb)
                        + (format::LOG_BLOCK_HEADER + data_len) as u64;
                    scan.end_lsn = scan.end_lsn.max(end);
                } else if g >= geo.start_gen {
                    scan.after_end += 1;
                }
            }
            LogBlock::End => {
                full = false;
            }
            LogBlock::Corrupt => {
                scan.blocks += 1;
                bad(scan, format!("{} block {b}", format::log_file_name(g)));
                full = false;
            }
        }
    }
    if data.len() < geo.blocks_per_file * lb {
        full = false;
    }
    (full, own_blocks)
}

/// A bad block (or header, or unreadable file), named.
fn bad(scan: &mut LogScan, what: String) {
    scan.bad_blocks += 1;
    push_bad(&mut scan.first_bad, what);
}

fn push_bad(v: &mut Vec<String>, s: String) {
    if v.len() < FIRST_BAD_MAX {
        v.push(s);
    }
}

// ---------------------------------------------------------------- checksum pool

/// Pages to check: `buf` holds pages `first_page..` of a database.
pub(crate) struct Job {
    pub first_page: u64,
    pub buf: AlignedBuf,
    pub ps: usize,
    pub db_id: u64,
    /// Pages with an LSN beyond this are write-ahead violations.
    pub end_lsn: Option<u64>,
    pub reply: Sender<Checked>,
}

pub(crate) struct Checked {
    pub first_page: u64,
    pub buf: AlignedBuf,
    pub pages: u64,
    pub bad_checksum: Vec<u64>,
    pub wrong_page_number: Vec<u64>,
    pub newer_than_log: Vec<u64>,
}

fn check_job(j: Job) {
    let mut c = Checked {
        first_page: j.first_page,
        pages: 0,
        bad_checksum: Vec::new(),
        wrong_page_number: Vec::new(),
        newer_than_log: Vec::new(),
        buf: AlignedBuf::new(0),
    };
    for (k, page) in j.buf.as_slice().chunks(j.ps).enumerate() {
        let no = j.first_page + k as u64;
        c.pages += 1;
        match format::check_page(page, j.db_id, no) {
            Ok(h) => {
                if j.end_lsn.is_some_and(|e| h.lsn > e) {
                    c.newer_than_log.push(no);
                }
            }
            Err(PageError::WrongPageNumber(_)) => c.wrong_page_number.push(no),
            Err(_) => c.bad_checksum.push(no),
        }
    }
    c.buf = j.buf;
    let _ = j.reply.send(c);
}

/// A few threads checking page checksums for every database being read.
pub(crate) struct Pool {
    tx: Option<Sender<Job>>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Pool {
    pub fn new(threads: usize) -> Pool {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let handles = (0..threads.max(1))
            .filter_map(|_| {
                let rx = rx.clone();
                std::thread::Builder::new()
                    .name("mb-checksum".into())
                    .spawn(move || {
                        loop {
                            let job = match rx.lock() {
                                Ok(r) => r.recv(),
                                Err(_) => return,
                            };
                            match job {
                                Ok(j) => check_job(j),
                                Err(_) => return,
                            }
                        }
                    })
                    .ok()
            })
            .collect();
        Pool {
            tx: Some(tx),
            handles,
        }
    }

    /// Hands a job to the pool; checks it on this thread if the pool is gone.
    pub fn submit(&self, job: Job) {
        if self.handles.is_empty() {
            return check_job(job);
        }
        match &self.tx {
            Some(tx) => {
                if let Err(e) = tx.send(job) {
                    check_job(e.0);
                }
            }
            None => check_job(job),
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.tx = None;
        for h in self.handles.drain(..) {
            mailbench_base::thread::join_or_warn(h, "checksum reader");
        }
    }
}

// ---------------------------------------------------------------- the page scanner

pub(crate) struct ScanOpts {
    pub chunk: usize,
    pub depth: usize,
    pub end_lsn: Option<u64>,
    /// Write every chunk read to this file at the same offset (backup --to).
    pub copy_to: Option<Arc<File>>,
    /// Hand each read to the kernel on its own (one `io_uring_enter` per
    /// read), as fio does: reads handed over together are merged by the block
    /// layer into fewer, larger device requests (two to four 256 KiB reads
    /// into one), which changes the I/O shape the test stands for and leaves
    /// the device fewer requests in flight.
    pub submit_each: bool,
}

#[derive(Default)]
pub(crate) struct PageScan {
    pub pages_seen: u64,
    pub bad_checksum: u64,
    pub wrong_page_number: u64,
    pub newer_than_log: u64,
    pub first_bad: Vec<u64>,
    pub read: ClassStats,
    pub write: ClassStats,
    pub io_errors: u64,
    pub first_error: Option<String>,
    pub interrupted: bool,
}

impl PageScan {
    /// Counts a checked chunk's pages and its bad ones.
    fn count(&mut self, c: &Checked) {
        self.pages_seen += c.pages;
        self.bad_checksum += c.bad_checksum.len() as u64;
        self.wrong_page_number += c.wrong_page_number.len() as u64;
        self.newer_than_log += c.newer_than_log.len() as u64;
        for p in c
            .bad_checksum
            .iter()
            .chain(&c.wrong_page_number)
            .chain(&c.newer_than_log)
        {
            self.first_bad.push(*p);
        }
        self.first_bad.sort_unstable();
        self.first_bad.truncate(FIRST_BAD_MAX);
    }

    fn error(&mut self, what: &str, path: &Path, c: &IoCompletion, errno: i32) {
        self.io_errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(format!(
                "{what} {} at offset {}: {}",
                path.display(),
                c.offset,
                std::io::Error::from_raw_os_error(errno)
            ));
        }
    }
}

/// Reads pages 1.. of a database sequentially in `chunk`-sized reads, `depth` in
/// flight, checks every page on the pool, optionally copies. Never stops on an
/// I/O error: the pages of a failed read are counted as unread.
pub(crate) fn scan_pages(
    path: &Path,
    file: &Arc<File>,
    header: &DbHeader,
    io: &mut dyn IoEngine,
    pool: &Pool,
    opts: &ScanOpts,
    interrupt: &Interrupt,
) -> PageScan {
    let ps = header.page_size as usize;
    let per_chunk = (opts.chunk / ps).max(1) as u64;
    let (tx, rx): (Sender<Checked>, Receiver<Checked>) = channel();
    // Beyond the reads in flight, room for chunks waiting for or in the checksum
    // pool: on a busy machine its threads may run late, and a read must not
    // wait for a buffer meanwhile.
    let spare = opts.depth + 4 * pool_size() + 8;
    let mut ch = Chunks {
        free: AlignedBuf::carve(spare, per_chunk as usize * ps),
        ..Chunks::default()
    };
    let mut r = PageScan {
        pages_seen: 1,
        ..Default::default()
    };
    let mut next = 1u64;
    let mut done = Vec::new();
    loop {
        if interrupt.raised() {
            r.interrupted = true;
        }
        let mut submitted = false;
        while !r.interrupted && next < header.page_count && ch.reads < opts.depth {
            let Some(mut buf) = ch.free.pop() else { break };
            let n = per_chunk.min(header.page_count - next);
            buf.set_len(n as usize * ps);
            io.submit(IoRequest {
                file: file.clone(),
                kind: OpKind::Read,
                offset: next * ps as u64,
                buf,
                tag: READ | next,
                more: Vec::new(),
            });
            ch.reads += 1;
            next += n;
            submitted = true;
            if opts.submit_each {
                io.wait(0, Some(Duration::ZERO), &mut done);
            }
        }
        // The next reads go to the kernel before the checksums start: a woken
        // pool thread may take this CPU, and the disk must not wait for it.
        if submitted && !ch.ready.is_empty() {
            io.wait(0, Some(Duration::ZERO), &mut done);
        }
        for job in ch.ready.drain(..) {
            pool.submit(job);
        }
        if ch.reads == 0 && ch.writes == 0 && ch.jobs == 0 && done.is_empty() {
            break;
        }
        if ch.reads + ch.writes > 0 && done.is_empty() {
            // Block on the device (no spinning): checked chunks are collected after
            // each completion, or within a millisecond.
            let t = if ch.jobs == 0 {
                Duration::from_millis(500)
            } else {
                Duration::from_millis(1)
            };
            io.wait(1, Some(t), &mut done);
        }
        for c in done.drain(..) {
            scan_completion(c, &mut r, &mut ch, (path, header), opts, &tx);
        }
        // Checked chunks: count, then copy or reuse the buffer.
        let mut got = Vec::new();
        if ch.reads + ch.writes == 0 && ch.jobs > 0 && ch.ready.is_empty() {
            match rx.recv_timeout(Duration::from_millis(500)) {
                Ok(c) => got.push(c),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        while let Ok(c) = rx.try_recv() {
            got.push(c);
        }
        for c in got {
            ch.jobs -= 1;
            r.count(&c);
            match &opts.copy_to {
                Some(f) => {
                    ch.writes += 1;
                    io.submit(IoRequest {
                        file: f.clone(),
                        kind: OpKind::Write,
                        offset: c.first_page * ps as u64,
                        buf: c.buf,
                        tag: WRITE | c.first_page,
                        more: Vec::new(),
                    });
                }
                None => ch.free.push(c.buf),
            }
        }
    }
    r
}

/// Tags of a scan's reads and of its copy's writes (the low bits: the first page).
const READ: u64 = 1 << 62;
const WRITE: u64 = 1 << 61;

/// A scan's chunks: reads and writes in flight, chunks in the checksum pool,
/// free buffers, and chunks read but not yet handed to the pool.
#[derive(Default)]
struct Chunks {
    reads: usize,
    writes: usize,
    jobs: usize,
    free: Vec<AlignedBuf>,
    ready: Vec<Job>,
}

/// A scan's read or copy write completed: a chunk read goes to `ready` for
/// its checksums; a failed read's buffer, and a written copy's, go back free.
fn scan_completion(
    c: IoCompletion,
    r: &mut PageScan,
    ch: &mut Chunks,
    (path, header): (&Path, &DbHeader),
    opts: &ScanOpts,
    tx: &Sender<Checked>,
) {
    if c.tag & READ != 0 {
        ch.reads -= 1;
        r.read.ops += 1;
        r.read.latency.record(c.latency());
        match c.full() {
            Ok(()) => {
                r.read.bytes += c.buf.len() as u64;
                ch.jobs += 1;
                ch.ready.push(Job {
                    first_page: c.tag & !READ,
                    ps: header.page_size as usize,
                    db_id: header.db_id,
                    end_lsn: opts.end_lsn,
                    reply: tx.clone(),
                    buf: c.buf,
                });
            }
            Err(e) => {
                r.read.errors += 1;
                r.error("reading", path, &c, e);
                ch.free.push(c.buf);
            }
        }
    } else {
        ch.writes -= 1;
        r.write.ops += 1;
        r.write.latency.record(c.latency());
        match c.full() {
            Ok(()) => r.write.bytes += c.buf.len() as u64,
            Err(e) => {
                r.write.errors += 1;
                r.error("writing the copy of", path, &c, e);
            }
        }
        ch.free.push(c.buf);
    }
}

fn verify_one(
    spec: &StorageSpec,
    inst: &InstanceSpec,
    pool: &Pool,
    interrupt: &Interrupt,
) -> Result<VerifyDb> {
    verify_db(
        &inst.name,
        &inst.db_path,
        &inst.log_dir,
        &inst.volume,
        spec.engine_choice(),
        pool,
        interrupt,
    )
}

/// Verifies one database file and its log folder.
pub(crate) fn verify_db(
    name: &str,
    db_path: &Path,
    log_dir: &Path,
    volume: &Path,
    engine: mailbench_io::EngineChoice,
    pool: &Pool,
    interrupt: &Interrupt,
) -> Result<VerifyDb> {
    let t0 = Instant::now();
    let header = read_header(db_path)?;
    let ps = header.page_size as u64;
    let scan = scan_log(
        log_dir,
        header.db_id,
        header.log_file_size as u64,
        header.log_block(),
    );
    let caps = mailbench_io::probe(volume);
    let file = Arc::new(
        mailbench_io::open_file(db_path, false, caps.o_direct, false)
            .map_err(|e| Error::io("cannot open database", db_path, e))?,
    );
    let mut io: Box<dyn IoEngine> = mailbench_io::build(engine, caps, DEPTH * 2)
        .map_err(Error::runtime)?
        .engine;
    let pages = scan_pages(
        db_path,
        &file,
        &header,
        io.as_mut(),
        pool,
        &ScanOpts {
            chunk: CHUNK,
            depth: DEPTH,
            end_lsn: Some(scan.end_lsn),
            copy_to: None,
            submit_each: false,
        },
        interrupt,
    );
    if pages.interrupted {
        return Err(Error::Interrupted);
    }
    Ok(VerifyDb {
        name: name.to_string(),
        pages_seen: pages.pages_seen,
        bad_checksum_pages: pages.bad_checksum,
        wrong_page_number_pages: pages.wrong_page_number,
        newer_than_log_pages: pages.newer_than_log,
        first_bad_pages: pages.first_bad,
        mb: (pages.read.bytes + ps) as f64 / 1e6,
        seconds: t0.elapsed().as_secs_f64(),
        log_files: scan.files,
        log_blocks_checked: scan.blocks,
        bad_log_blocks: scan.bad_blocks,
        log_generation_gaps: scan.gaps,
        log_end_lsn: scan.end_lsn,
        first_bad_log_blocks: scan.first_bad,
        blocks_after_log_end: scan.after_end,
        io_errors: pages.io_errors,
        first_error: pages.first_error,
        clean: header.clean,
        lost_log_tail: header.lost_log_tail,
    })
}

/// Class figures over `secs` (for replay and backup I/O tables).
pub fn figures(c: &ClassStats, secs: f64) -> ClassFigures {
    ClassFigures::of(c, secs.max(1e-9))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{LOG_BLOCK, LOG_BLOCK_HEADER, seal_log_block};

    /// Log files of a header and four 4 KiB blocks.
    const FS: usize = LOG_FILE_HEADER + 4 * LOG_BLOCK;

    fn header(db_id: u64, g: u64) -> LogFileHeader {
        LogFileHeader {
            generation: g,
            db_id,
            file_size: FS as u64,
            log_block: LOG_BLOCK as u32,
            created_ms: 1,
        }
    }

    fn write_gen(dir: &Path, db_id: u64, g: u64, blocks: &[(u32, usize)]) {
        let mut f = vec![0u8; FS];
        header(db_id, g).encode(&mut f);
        for &(b, len) in blocks {
            let at = log_header::block_offset(u64::from(b), LOG_BLOCK) as usize;
            seal_log_block(&mut f[at..at + LOG_BLOCK], db_id, g, b, len);
        }
        std::fs::write(dir.join(format::log_file_name(g)), f).unwrap();
    }

    fn checkpoint(dir: &Path, lsn: u64) {
        let c = format::Checkpoint {
            db_id: 3,
            checkpoint_lsn: lsn,
            first_generation: lsn / FS as u64,
            log_file_size: FS as u64,
        };
        std::fs::write(dir.join("checkpoint.chk"), c.encode()).unwrap();
    }

    /// The LSN after `len` record bytes of block `b` of generation `g`.
    fn lsn(g: u64, b: u64, len: usize) -> u64 {
        g * FS as u64 + log_header::block_offset(b, LOG_BLOCK) + (LOG_BLOCK_HEADER + len) as u64
    }

    #[test]
    fn log_end_is_contiguous_from_the_checkpoint() {
        let d = tempfile::tempdir().unwrap();
        checkpoint(d.path(), lsn(2, 0, 8));
        write_gen(d.path(), 3, 2, &[(0, 100), (1, 100), (2, 100), (3, 50)]);
        write_gen(d.path(), 3, 3, &[(0, 10)]);
        // Gen 4 has a block after a hole: a torn flush, beyond the end.
        write_gen(d.path(), 3, 4, &[(1, 10)]);
        let s = scan_log(d.path(), 3, FS as u64, LOG_BLOCK);
        assert_eq!(s.end_lsn, lsn(3, 0, 10));
        assert_eq!((s.bad_blocks, s.gaps, s.after_end, s.blocks), (0, 0, 1, 6));
        // A damaged block ends the log and is reported.
        let p = d.path().join(format::log_file_name(2));
        let mut b = std::fs::read(&p).unwrap();
        b[LOG_FILE_HEADER + LOG_BLOCK + 200] ^= 1;
        std::fs::write(&p, b).unwrap();
        let s = scan_log(d.path(), 3, FS as u64, LOG_BLOCK);
        assert_eq!(s.bad_blocks, 1);
        assert_eq!(s.first_bad, vec!["E00000002.log block 1".to_string()]);
        assert_eq!(s.end_lsn, lsn(2, 0, 100));
        // A missing generation after the checkpoint is a gap.
        std::fs::remove_file(d.path().join(format::log_file_name(3))).unwrap();
        assert_eq!(scan_log(d.path(), 3, FS as u64, LOG_BLOCK).gaps, 1);
    }

    /// A generation whose header was never written (zeros, torn, a reused
    /// file's old one) and that holds none of its blocks ends the log where
    /// the generation before it ends; under blocks of its own, at the
    /// checkpoint's generation with records needed from it, or from an
    /// older format, the header is damage.
    #[test]
    fn a_header_never_written_ends_the_log_and_a_damaged_one_is_reported() {
        let d = tempfile::tempdir().unwrap();
        checkpoint(d.path(), lsn(2, 0, 0));
        write_gen(d.path(), 3, 2, &[(0, 100), (1, 100), (2, 100), (3, 50)]);
        let three = d.path().join(format::log_file_name(3));
        let scan = || scan_log(d.path(), 3, FS as u64, LOG_BLOCK);
        for torn in [
            vec![0u8; FS],
            {
                let mut f = vec![0u8; FS];
                header(3, 3).encode(&mut f);
                f[700] ^= 4;
                f
            },
            {
                let mut f = vec![0u8; FS];
                header(3, 1).encode(&mut f);
                f
            },
        ] {
            std::fs::write(&three, torn).unwrap();
            let s = scan();
            assert_eq!(
                (s.end_lsn, s.bad_blocks),
                (lsn(2, 3, 50), 0),
                "{:?}",
                s.first_bad
            );
        }
        // Blocks of generation 3 under a torn header: damage.
        write_gen(d.path(), 3, 3, &[(0, 10)]);
        let mut f = std::fs::read(&three).unwrap();
        f[700] ^= 4;
        std::fs::write(&three, &f).unwrap();
        let s = scan();
        assert_eq!((s.end_lsn, s.bad_blocks), (lsn(2, 3, 50), 1));
        assert!(s.first_bad[0].starts_with("E00000003.log header: its header's checksum"));
        // The checkpoint's generation: its records are needed.
        checkpoint(d.path(), lsn(3, 0, 4));
        std::fs::write(&three, vec![0u8; FS]).unwrap();
        assert_eq!(scan().bad_blocks, 1);
        // An older format: a log block where the header goes.
        let mut old = vec![0u8; FS];
        seal_log_block(&mut old[..LOG_BLOCK], 3, 3, 0, 10);
        std::fs::write(&three, old).unwrap();
        let s = scan();
        assert!(
            s.first_bad[0].contains("no file header"),
            "{:?}",
            s.first_bad
        );
    }
}
