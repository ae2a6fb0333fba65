//! The transaction log of one instance: records appended to 4 KiB blocks,
//! written sequentially to fixed-size generation files with O_DIRECT|O_DSYNC,
//! each file's blocks after its 4 KiB header ([`crate::log_header`], written
//! before any record of its generation),
//! one write in flight at a time (so one flush serves every commit that waited
//! for it: group commit), circular: files behind the checkpoint are reused or removed.

use crate::format::{self, LOG_BLOCK, LOG_BLOCK_HEADER, Record, UPDATE_HEADER};
use crate::log_header::{self, LOG_FILE_HEADER, LogFileHeader};
use mailbench_base::{Error, Result};
use mailbench_io::{AlignedBuf, BufPool};
use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The log's block size in `dir`: the profile's sector (`want`), or the
/// smallest write the folder's volume takes with O_DIRECT where that is
/// larger, as the 2007-era ESE log writes its volume's sectors
/// (`m_cbSecVolume`): tried with a probe file written and removed (without
/// O_DIRECT any size works).
pub fn log_sector(dir: &Path, want: u64, direct: bool) -> usize {
    let want = (want as usize).clamp(512, LOG_BLOCK);
    if !direct {
        return want;
    }
    let probe = dir.join(".mailbench-sector-probe");
    let size = mailbench_io::open_file(&probe, true, true, false)
        .ok()
        .and_then(|f| {
            use std::os::unix::fs::FileExt;
            let mut size = want;
            while size <= LOG_BLOCK {
                let buf = AlignedBuf::new(size);
                if f.write_at(buf.as_slice(), size as u64).is_ok() {
                    return Some(size);
                }
                size *= 2;
            }
            None
        })
        .unwrap_or(LOG_BLOCK);
    let _ = std::fs::remove_file(&probe);
    size
}

/// The log's LSNs only grow: each record ends past the one before it.
fn check_lsn_order(before: u64, after: u64, what: &str) {
    invariant!(
        after > before,
        "LSN not increasing: {what} ends at {after}, not past {before}"
    );
}

/// Blocks a new staging buffer has room for (it doubles when a flush in flight
/// lets more accumulate).
const SEGMENT_BLOCKS: usize = 64;
/// Staging buffers kept for reuse per size.
const BUFFERS_KEPT: usize = 4;

/// Where a file made ready comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A log file behind a checkpoint, renamed.
    Reused,
    /// A new file written with zeros ahead of the log (no file was free).
    Formatted,
}

/// Log files made ready ahead for generations not begun yet, as ESE makes its
/// next log file (`edbtmp`) ready: an old log file taken back under circular
/// logging, or a new one filled before use. The checkpoint thread renames the
/// files behind a checkpoint to the next generations' names, or, when none is
/// free, writes new files with zeros ahead of the log; it makes the names
/// durable, and the log opens the files when it reaches those generations. A
/// log write then lands in blocks already written once, not in freshly
/// allocated ones that the file system must convert (and, for `O_DSYNC`,
/// journal) on every write.
#[derive(Debug, Default)]
pub struct Ready {
    /// Generations whose files are ready, their names durable.
    generations: BTreeMap<u64, Origin>,
    /// The newest generation whose file the log opened: names above are free.
    opened: u64,
    /// The run is ending: no more files are formatted ahead.
    closing: bool,
}

impl Ready {
    /// The first generation name free for a file made ready now.
    pub fn next_free(&self) -> u64 {
        self.opened
            .max(self.generations.last_key_value().map_or(0, |(g, _)| *g))
            + 1
    }

    /// Records files made ready (those the log passed meanwhile are left out:
    /// it opened or created its own under those names).
    pub fn add(&mut self, gens: &[u64], origin: Origin) {
        let opened = self.opened;
        self.generations
            .extend(gens.iter().filter(|g| **g > opened).map(|g| (*g, origin)));
    }

    /// How many files are ready.
    pub fn count(&self) -> usize {
        self.generations.len()
    }

    pub fn opened(&self) -> u64 {
        self.opened
    }

    /// Whether the run is ending (no file is to be formatted ahead).
    pub fn closing(&self) -> bool {
        self.closing
    }

    pub fn close(&mut self) {
        self.closing = true;
    }

    /// A log that opened generations up to `opened` and has no file ready.
    #[cfg(test)]
    pub(crate) fn opened_up_to(opened: u64) -> Ready {
        Ready {
            opened,
            ..Ready::default()
        }
    }
}

/// Appended blocks of one generation not yet handed to a write, laid out as
/// they go to disk: each block has room for its header, then its data.
struct Segment {
    generation: u64,
    first_block: u32,
    /// Blocks begun (the last one may be partial).
    blocks: usize,
    /// Data bytes in the last block.
    last_len: usize,
    buf: AlignedBuf,
}

/// What a log flush writes: everything appended (a commit, a page write or
/// the stop waits for it), or only the whole blocks (the log buffer is half
/// full, nobody waits: the partial block waits for more records), as ESE
/// writes its full sectors and the partial one only when someone waits for
/// it (`LOG_WRITE_BUFFER::ErrLGIWriteLog`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushKind {
    All,
    WholeBlocks,
}

/// After one write of a flush completed: the next one to submit, or the LSN
/// durable now that the flush is done.
#[derive(Debug)]
pub enum Next {
    Write(LogWrite),
    Durable(u64),
}

pub struct LogWriter {
    dir: PathBuf,
    db_id: u64,
    file_size: u64,
    /// The log's block (its sector) and the record bytes one holds.
    block: usize,
    block_data: usize,
    blocks_per_file: u32,
    direct: bool,
    files: BTreeMap<u64, Arc<File>>,
    /// Position of the block being filled and its data bytes so far (0: not begun).
    cur_gen: u64,
    cur_block: u32,
    cur_len: usize,
    /// Appended and not yet written, one segment per generation; the current
    /// block stays here after a write of it while it is partial.
    pending: Vec<Segment>,
    /// Record bytes appended and not yet handed to a write.
    unwritten: u64,
    /// The partial block last written whole with its data bytes then:
    /// (generation, block, bytes).
    partial_on_disk: Option<(u64, u32, usize)>,
    /// The partial block whose shadow copy is on disk in the block after it.
    shadow: Option<(u64, u32)>,
    /// The 2007-era writer (log format 7): a flush's whole blocks after the
    /// shadowed one, its new partial block and that block's shadow in one
    /// write ([`LogWriter::set_legacy`]).
    legacy: bool,
    next_lsn: u64,
    durable_lsn: u64,
    /// End LSN of the flush in flight, and its writes still to submit (one
    /// at a time, in order: a write never overtakes the one before it).
    in_flight: Option<u64>,
    queued: VecDeque<LogWrite>,
    /// The last flush wrote to two generations.
    rolled: bool,
    /// The newest generation whose file header is written or queued: a
    /// flush's first write to a newer generation is its header.
    header_queued: u64,
    closed: Vec<u64>,
    pool: BufPool,
    pub bytes_appended: u64,
    ready: Arc<Mutex<Ready>>,
    /// Generation files opened, by where they came from.
    pub counts: LogFiles,
}

/// How the log came by its generation files in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogFiles {
    /// Created when the log reached them (allocated, never written).
    pub created: u64,
    /// Formatted ahead (written with zeros) by the checkpoint thread.
    pub formatted: u64,
    /// Files behind a checkpoint, renamed and reused.
    pub reused: u64,
}

/// One log write to submit; its buffer comes back through [`LogWriter::recycle`].
#[derive(Debug)]
pub struct LogWrite {
    pub file: Arc<File>,
    pub offset: u64,
    pub buf: AlignedBuf,
}

impl LogWriter {
    /// Starts a log in `dir` at generation `first_gen` (a new, empty file),
    /// written in blocks of `block` bytes (its sector: 512 B to 4 KiB).
    pub fn create(
        dir: &Path,
        db_id: u64,
        file_size: u64,
        block: usize,
        first_gen: u64,
        direct: bool,
    ) -> Result<LogWriter> {
        if !(512..=LOG_BLOCK).contains(&block) || !block.is_power_of_two() {
            return Err(Error::runtime(format!(
                "log sector of {block} bytes: must be a power of two from 512 to {LOG_BLOCK}"
            )));
        }
        let mut w = LogWriter {
            dir: dir.to_path_buf(),
            db_id,
            file_size,
            block,
            block_data: block - LOG_BLOCK_HEADER,
            blocks_per_file: log_header::blocks_per_file(file_size, block) as u32,
            direct,
            files: BTreeMap::new(),
            cur_gen: first_gen,
            cur_block: 0,
            cur_len: 0,
            pending: Vec::new(),
            unwritten: 0,
            partial_on_disk: None,
            shadow: None,
            legacy: false,
            next_lsn: 0,
            durable_lsn: 0,
            in_flight: None,
            queued: VecDeque::new(),
            rolled: false,
            header_queued: first_gen,
            closed: Vec::new(),
            pool: BufPool::new(BUFFERS_KEPT),
            bytes_appended: 0,
            ready: Arc::default(),
            counts: LogFiles::default(),
        };
        // The staging buffers' memory faulted in now, not on the first flushes.
        w.pool.prefill(SEGMENT_BLOCKS * block);
        w.open_gen(first_gen)?;
        w.open_gen(first_gen + 1)?;
        w.write_first_header(first_gen)?;
        w.next_lsn = w.position(first_gen, 0, 0);
        w.durable_lsn = w.next_lsn;
        Ok(w)
    }

    /// The LSN of byte `data_off` of block `block`'s records in `generation`:
    /// `generation * file_size +` its offset in the file (the blocks follow
    /// the file's header).
    fn position(&self, generation: u64, block: u32, data_off: usize) -> u64 {
        generation * self.file_size
            + log_header::block_offset(u64::from(block), self.block)
            + (LOG_BLOCK_HEADER + data_off) as u64
    }

    /// The header of `generation`'s file, in a buffer for its write.
    fn header_buf(&mut self, generation: u64) -> AlignedBuf {
        let mut buf = self.pool.get(LOG_FILE_HEADER);
        buf.set_len(LOG_FILE_HEADER);
        LogFileHeader {
            generation,
            db_id: self.db_id,
            file_size: self.file_size,
            log_block: self.block as u32,
            created_ms: (mailbench_base::host::unix_now() * 1e3) as u64,
        }
        .encode(buf.as_mut_slice());
        buf
    }

    /// Writes the first generation's header when the log starts (before any
    /// record, nothing else in flight), so a log that never flushed still
    /// reads as one whose first file was begun. Later generations' headers
    /// are the first write of the flush that first reaches them.
    fn write_first_header(&mut self, generation: u64) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let path = Self::path_of(&self.dir, generation);
        let file = self.open_file(generation)?;
        let buf = self.header_buf(generation);
        let r = file.write_all_at(buf.as_slice(), 0);
        self.pool.put(buf);
        r.map_err(|e| Error::io("cannot write the header of log file", &path, e))
    }

    /// `generation`'s file, which the log opened before writing to it.
    fn open_file(&self, generation: u64) -> Result<Arc<File>> {
        self.file(generation)
            .ok_or_else(|| Error::runtime(format!("log generation {generation} has no open file")))
    }

    /// The write of `generation`'s header, when no earlier flush queued it.
    fn header_write(&mut self, generation: u64) -> Result<Option<LogWrite>> {
        if generation <= self.header_queued {
            return Ok(None);
        }
        let file = self.open_file(generation)?;
        self.header_queued = generation;
        let buf = self.header_buf(generation);
        Ok(Some(LogWrite {
            file,
            offset: 0,
            buf,
        }))
    }

    pub fn path_of(dir: &Path, generation: u64) -> PathBuf {
        dir.join(format::log_file_name(generation))
    }

    /// The log's block size (its sector).
    pub fn block(&self) -> usize {
        self.block
    }

    /// Cuts flushes into writes as the 2007-era ESE did (log format 7,
    /// `LRCHECKSUM` records; profile `log_writer = "legacy"`): when a flush
    /// rewrites the partial block whose shadow is on disk, that block alone
    /// first, then the rest of the flush — its whole blocks, the new partial
    /// block and its shadow, contiguous on disk — in one write; without a
    /// shadow to protect, the whole flush in one write. The legacy format's
    /// reader names these writes (`dev/ese/src/ese/_log/logread_legacy.cxx`
    /// of the published ESE source): a torn flush that replaced a shadowed
    /// sector "failed while trying to safely overwrite it using 2 I/Os
    /// (never made it to the second I/O)", one that had no shadow to replace
    /// "must have been in the middle of a single I/O" (`ErrLGCheckReadLastLogRecordFF`).
    /// The blocks on disk are the same as the current writer's; only the
    /// writes that carry them differ.
    pub fn set_legacy(&mut self, legacy: bool) {
        self.legacy = legacy;
    }
    fn open_gen(&mut self, generation: u64) -> Result<()> {
        if self.files.contains_key(&generation) {
            return Ok(());
        }
        let path = Self::path_of(&self.dir, generation);
        if let Some(origin) = self.take_ready(generation)
            && let Some(f) = self.open_ready(&path)
        {
            self.files.insert(generation, Arc::new(f));
            match origin {
                Origin::Reused => self.counts.reused += 1,
                Origin::Formatted => self.counts.formatted += 1,
            }
            return Ok(());
        }
        let f = self
            .create_own(&path)
            .map_err(|e| Error::io("cannot create log file", &path, e))?;
        mailbench_io::preallocate(&f, self.file_size)
            .map_err(|e| Error::io("cannot allocate log file", &path, e))?;
        self.files.insert(generation, Arc::new(f));
        self.counts.created += 1;
        Ok(())
    }

    /// Creates a new file at `path`, always one of its own: a leftover of that
    /// name (from an earlier run, or one the checkpoint thread made ready too
    /// late for this generation) is removed first, so its blocks cannot be
    /// mistaken for this run's and no other thread writes into the file.
    fn create_own(&self, path: &Path) -> std::io::Result<File> {
        let mut tries = 0;
        loop {
            match mailbench_io::create_new_file_with(path, self.direct, true) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 4 => {
                    tries += 1;
                    let _ = std::fs::remove_file(path);
                }
                r => return r,
            }
        }
    }

    /// Marks `generation` opened (no file is made ready under its name from
    /// now on) and says where its ready file came from, if one is ready.
    fn take_ready(&mut self, generation: u64) -> Option<Origin> {
        let mut r = self.ready.lock().ok()?;
        r.opened = r.opened.max(generation);
        r.generations.retain(|g, _| *g >= generation);
        r.generations.remove(&generation)
    }

    /// Opens a file made ready, if it is whole (else it is created anew).
    fn open_ready(&self, path: &Path) -> Option<File> {
        let f = mailbench_io::open_file(path, false, self.direct, true).ok()?;
        let len = f.metadata().ok()?.len();
        (len == self.file_size).then_some(f)
    }

    /// What the checkpoint thread shares with the log: the files made ready.
    pub fn ready(&self) -> Arc<Mutex<Ready>> {
        self.ready.clone()
    }

    /// Removes the files made ready and not used (at the end of a run).
    pub fn remove_ready(&mut self) {
        let gens = match self.ready.lock() {
            Ok(mut r) => std::mem::take(&mut r.generations),
            Err(_) => return,
        };
        for g in gens.into_keys() {
            let _ = std::fs::remove_file(Self::path_of(&self.dir, g));
        }
    }

    pub fn generation(&self) -> u64 {
        self.cur_gen
    }

    pub fn next_lsn(&self) -> u64 {
        self.next_lsn
    }

    pub fn durable_lsn(&self) -> u64 {
        self.durable_lsn
    }

    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// Whether the log's files are written with O_DIRECT.
    pub fn direct(&self) -> bool {
        self.direct
    }

    pub fn writing(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Log bytes appended and not yet handed to a write.
    pub fn unflushed(&self) -> u64 {
        self.unwritten
    }

    /// Whether the last flush wrote to two generations.
    pub fn rolled(&self) -> bool {
        self.rolled
    }

    /// Generations closed since the last call (all their blocks durable).
    pub fn take_closed(&mut self) -> Vec<u64> {
        let durable_gen = self.durable_lsn / self.file_size;
        let (ready, later): (Vec<u64>, Vec<u64>) =
            self.closed.iter().partition(|g| **g < durable_gen);
        self.closed = later;
        ready
    }

    pub fn file(&self, generation: u64) -> Option<Arc<File>> {
        self.files.get(&generation).cloned()
    }

    /// Appends a record; returns its LSN (the position just after it). The
    /// record is encoded straight into the block it goes to disk in.
    pub fn append(&mut self, rec: &Record<'_>) -> Result<u64> {
        let before = self.next_lsn;
        let mut h = [0u8; UPDATE_HEADER];
        let n = rec.encode_header(&mut h);
        self.put(&h[..n])?;
        if let Record::Update { data, .. } = rec {
            self.put(data)?;
        }
        self.bytes_appended += rec.encoded_len() as u64;
        if self.cur_len > 0 {
            self.next_lsn = self.position(self.cur_gen, self.cur_block, self.cur_len);
        }
        check_lsn_order(before, self.next_lsn, "appended record");
        Ok(self.next_lsn)
    }

    /// Copies record bytes into the current block, starting new blocks as they fill.
    fn put(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            if self.cur_len == 0 {
                self.begin_block();
            }
            let n = (self.block_data - self.cur_len).min(bytes.len());
            let block = self.block;
            let Some(seg) = self.pending.last_mut() else {
                return Err(Error::runtime("log block not begun (internal error)"));
            };
            let at = (seg.blocks - 1) * block + LOG_BLOCK_HEADER + self.cur_len;
            seg.buf.as_mut_slice()[at..at + n].copy_from_slice(&bytes[..n]);
            self.cur_len += n;
            self.unwritten += n as u64;
            seg.last_len = self.cur_len;
            bytes = &bytes[n..];
            if self.cur_len == self.block_data {
                self.next_lsn = self.position(self.cur_gen, self.cur_block, self.block_data);
                self.seal_current()?;
            }
        }
        Ok(())
    }

    /// Makes room for the block `cur_block` of `cur_gen` at the end of `pending`.
    fn begin_block(&mut self) {
        let same_gen = self
            .pending
            .last()
            .is_some_and(|s| s.generation == self.cur_gen);
        if !same_gen {
            let mut buf = self.pool.get(SEGMENT_BLOCKS * self.block);
            buf.set_len(buf.capacity());
            self.pending.push(Segment {
                generation: self.cur_gen,
                first_block: self.cur_block,
                blocks: 0,
                last_len: 0,
                buf,
            });
        }
        let block = self.block;
        let pool = &mut self.pool;
        let Some(seg) = self.pending.last_mut() else {
            return;
        };
        if (seg.blocks + 1) * block > seg.buf.len() {
            // A write in flight let more accumulate: a buffer twice the size.
            let mut bigger = pool.get(seg.buf.len() * 2);
            bigger.set_len(bigger.capacity());
            let used = seg.blocks * block;
            bigger.as_mut_slice()[..used].copy_from_slice(&seg.buf.as_slice()[..used]);
            pool.put(std::mem::replace(&mut seg.buf, bigger));
        }
        seg.blocks += 1;
        seg.last_len = 0;
    }

    /// Ends the current block and moves to the next one (the next generation
    /// after the last block of a file).
    fn seal_current(&mut self) -> Result<()> {
        self.cur_len = 0;
        self.cur_block += 1;
        if self.cur_block == self.blocks_per_file {
            self.closed.push(self.cur_gen);
            self.cur_gen += 1;
            self.cur_block = 0;
            self.open_gen(self.cur_gen)?;
            self.open_gen(self.cur_gen + 1)?;
        }
        Ok(())
    }

    /// Starts a flush of what is appended (`kind`): its writes are queued and
    /// the first is returned (the next ones come from [`Self::write_done`],
    /// one after the other). None if nothing is to write or a flush is in
    /// flight.
    ///
    /// The writes follow ESE's log writer (`ErrLGIWriteFullSectors`,
    /// `ErrLGIWritePartialSector` in `dev/ese/src/ese/_log/logwrite.cxx`):
    /// the whole blocks in one write, but when the first of them is the
    /// partial block written before (its shadow behind it), that block alone
    /// first and the rest after, so that the shadow outlives the block until
    /// the block is whole again (a second write of that block's copy over the
    /// shadow when it is the only whole block); then the partial block, if
    /// written, together with its shadow (a copy of it in the next block, read
    /// as the end of the log), or as two writes when a shadow of it is on
    /// disk already. A write of the partial block keeps it in the buffer: the
    /// next records fill it and it is written again.
    pub fn start_flush(&mut self, kind: FlushKind) -> Result<Option<LogWrite>> {
        if self.in_flight.is_some() || self.pending.is_empty() {
            return Ok(None);
        }
        let partial = self.cur_len > 0;
        let whole_blocks: usize =
            self.pending.iter().map(|s| s.blocks).sum::<usize>() - usize::from(partial);
        if kind == FlushKind::WholeBlocks && whole_blocks == 0 {
            return Ok(None);
        }
        let write_partial = partial && kind == FlushKind::All;
        let end_lsn = if partial && !write_partial {
            self.cur_gen * self.file_size
                + log_header::block_offset(u64::from(self.cur_block), self.block)
        } else {
            self.next_lsn
        };
        let segments = std::mem::take(&mut self.pending);
        self.rolled = segments.len() > 1;
        let last = segments.len() - 1;
        let mut writes = VecDeque::new();
        for (k, mut seg) in segments.into_iter().enumerate() {
            let seg_partial = k == last && partial;
            self.seal_segment(&mut seg, seg_partial);
            let mark = writes.len();
            if seg_partial && write_partial && self.legacy && seg.blocks > 1 {
                self.legacy_writes(&seg, &mut writes)?;
                self.keep_partial(&seg);
            } else {
                self.whole_block_writes(&seg, seg.blocks - usize::from(seg_partial), &mut writes)?;
                if seg_partial {
                    self.keep_partial(&seg);
                    if write_partial {
                        self.partial_block_writes(&seg, &mut writes)?;
                    }
                }
            }
            // A generation's header goes before its first blocks: durable
            // before any of its records is.
            if writes.len() > mark
                && let Some(h) = self.header_write(seg.generation)?
            {
                writes.insert(mark, h);
            }
            self.pool.put(seg.buf);
        }
        self.unwritten = match self.partial_on_disk {
            _ if write_partial || !partial => 0,
            Some((g, b, n)) if (g, b) == (self.cur_gen, self.cur_block) => {
                (self.cur_len - n) as u64
            }
            _ => self.cur_len as u64,
        };
        debug_assert!(
            end_lsn >= self.durable_lsn,
            "a flush never ends before what is durable"
        );
        let first = writes.pop_front();
        if first.is_some() {
            self.in_flight = Some(end_lsn);
            self.queued = writes;
        }
        Ok(first)
    }

    /// Seals the blocks of `seg` (the last one with its data so far if `partial`).
    fn seal_segment(&self, seg: &mut Segment, partial: bool) {
        let b = self.block;
        let blocks = seg.blocks;
        seg.buf.set_len(blocks * b);
        for (k, blk) in seg.buf.as_mut_slice().chunks_mut(b).enumerate() {
            let len = if k + 1 == blocks && partial {
                seg.last_len
            } else {
                self.block_data
            };
            if k + 1 == blocks && partial {
                // Zeros after the data (the buffer may hold older bytes).
                blk[LOG_BLOCK_HEADER + len..].fill(0);
            }
            let no = seg.first_block + k as u32;
            format::seal_log_block(blk, self.db_id, seg.generation, no, len);
        }
    }

    /// Queues the writes of the first `whole` blocks of `seg`.
    fn whole_block_writes(
        &mut self,
        seg: &Segment,
        whole: usize,
        out: &mut VecDeque<LogWrite>,
    ) -> Result<()> {
        if whole == 0 {
            return Ok(());
        }
        let g = seg.generation;
        let w0 = seg.first_block;
        if self.shadow == Some((g, w0)) {
            out.push_back(self.write_of(seg, 0..1, w0)?);
            if whole == 1 {
                if w0 + 1 < self.blocks_per_file {
                    out.push_back(self.write_of(seg, 0..1, w0 + 1)?);
                }
            } else {
                out.push_back(self.write_of(seg, 1..whole, w0 + 1)?);
            }
        } else {
            out.push_back(self.write_of(seg, 0..whole, w0)?);
        }
        self.shadow = None;
        Ok(())
    }

    /// The legacy writer's writes of `seg`, whose last block is partial and
    /// is written: its first block alone when that block's shadow is on
    /// disk, then the other blocks with a shadow of the partial one after
    /// them in one write (no shadow past the file's last block).
    fn legacy_writes(&mut self, seg: &Segment, out: &mut VecDeque<LogWrite>) -> Result<()> {
        let g = seg.generation;
        let w0 = seg.first_block;
        let k = seg.blocks - 1;
        let p = w0 + k as u32;
        let mut from = 0;
        if self.shadow == Some((g, w0)) {
            out.push_back(self.write_of(seg, 0..1, w0)?);
            from = 1;
        }
        let room = p + 1 < self.blocks_per_file;
        let mut w = self.write_of(seg, from..k + 1, w0 + from as u32)?;
        if room {
            let b = self.block;
            let n = w.buf.len();
            let mut with_shadow = self.pool.get(n + b);
            with_shadow.set_len(n + b);
            with_shadow.as_mut_slice()[..n].copy_from_slice(w.buf.as_slice());
            with_shadow.as_mut_slice()[n..].copy_from_slice(&w.buf.as_slice()[n - b..]);
            self.pool.put(std::mem::replace(&mut w.buf, with_shadow));
        }
        out.push_back(w);
        self.shadow = room.then_some((g, p));
        self.partial_on_disk = Some((g, p, seg.last_len));
        Ok(())
    }

    /// Queues the writes of the partial block (the last of `seg`) and its shadow.
    fn partial_block_writes(&mut self, seg: &Segment, out: &mut VecDeque<LogWrite>) -> Result<()> {
        let g = seg.generation;
        let k = seg.blocks - 1;
        let p = seg.first_block + k as u32;
        let room = p + 1 < self.blocks_per_file;
        if self.shadow == Some((g, p)) {
            out.push_back(self.write_of(seg, k..k + 1, p)?);
            out.push_back(self.write_of(seg, k..k + 1, p + 1)?);
        } else if room {
            let mut w = self.write_of(seg, k..k + 1, p)?;
            let b = self.block;
            let mut both = self.pool.get(2 * b);
            both.set_len(2 * b);
            both.as_mut_slice()[..b].copy_from_slice(w.buf.as_slice());
            both.as_mut_slice()[b..].copy_from_slice(w.buf.as_slice());
            self.pool.put(std::mem::replace(&mut w.buf, both));
            out.push_back(w);
        } else {
            out.push_back(self.write_of(seg, k..k + 1, p)?);
        }
        self.shadow = room.then_some((g, p));
        self.partial_on_disk = Some((g, p, seg.last_len));
        Ok(())
    }

    /// A write of blocks `range` of `seg` at block `at` of its generation.
    fn write_of(
        &mut self,
        seg: &Segment,
        range: std::ops::Range<usize>,
        at: u32,
    ) -> Result<LogWrite> {
        let b = self.block;
        let g = seg.generation;
        let file = self.open_file(g)?;
        let n = range.len() * b;
        let mut buf = self.pool.get(n);
        buf.set_len(n);
        buf.as_mut_slice()
            .copy_from_slice(&seg.buf.as_slice()[range.start * b..range.end * b]);
        Ok(LogWrite {
            file,
            offset: log_header::block_offset(u64::from(at), b),
            buf,
        })
    }

    /// The partial block (the last of `seg`) stays to be filled: a new
    /// segment begins with its bytes.
    fn keep_partial(&mut self, seg: &Segment) {
        let b = self.block;
        let k = seg.blocks - 1;
        let mut buf = self.pool.get(SEGMENT_BLOCKS * b);
        buf.set_len(buf.capacity());
        buf.as_mut_slice()[..b].copy_from_slice(&seg.buf.as_slice()[k * b..(k + 1) * b]);
        self.pending.push(Segment {
            generation: seg.generation,
            first_block: seg.first_block + k as u32,
            blocks: 1,
            last_len: seg.last_len,
            buf,
        });
    }

    /// A log write's buffer, back from its completion, for later flushes.
    pub fn recycle(&mut self, buf: AlignedBuf) {
        self.pool.put(buf);
    }

    /// One write of the flush in flight finished: the next write of the
    /// flush, or, when it was the last, the new durable LSN. None if no flush
    /// is in flight.
    pub fn write_done(&mut self) -> Option<Next> {
        let end = self.in_flight?;
        if let Some(w) = self.queued.pop_front() {
            return Some(Next::Write(w));
        }
        self.in_flight = None;
        invariant!(
            end >= self.durable_lsn,
            "the durable LSN going back from {} to {end}",
            self.durable_lsn
        );
        self.durable_lsn = end;
        Some(Next::Durable(self.durable_lsn))
    }

    /// Removes generation files older than `keep_from` (circular logging).
    pub fn remove_before(&mut self, keep_from: u64) -> usize {
        let old = self.take_before(keep_from);
        for path in &old {
            let _ = std::fs::remove_file(path);
        }
        old.len()
    }

    /// Forgets the generation files older than `keep_from` and returns their
    /// paths, for the caller to remove (an I/O in flight keeps its own handle).
    pub fn take_before(&mut self, keep_from: u64) -> Vec<PathBuf> {
        let old: Vec<u64> = self.files.range(..keep_from).map(|(g, _)| *g).collect();
        old.iter()
            .map(|g| {
                self.files.remove(g);
                Self::path_of(&self.dir, *g)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a flush to its end, each write applied to the files: the
    /// sizes of the writes, in order.
    fn flush(w: &mut LogWriter, kind: FlushKind) -> Vec<usize> {
        use std::os::unix::fs::FileExt;
        let mut sizes = Vec::new();
        let mut next = w.start_flush(kind).unwrap();
        while let Some(wr) = next {
            wr.file.write_at(wr.buf.as_slice(), wr.offset).unwrap();
            sizes.push(wr.buf.len());
            w.recycle(wr.buf);
            next = match w.write_done() {
                Some(Next::Write(x)) => Some(x),
                _ => None,
            };
        }
        sizes
    }

    /// Generation 1's file of log 9 with `b`-byte blocks read back: its
    /// bytes, the record bytes of its valid blocks, and how many blocks
    /// read as valid before the first that does not.
    fn read_back(dir: &Path, b: usize) -> (Vec<u8>, usize, usize) {
        let file = std::fs::read(LogWriter::path_of(dir, 1)).unwrap();
        let fs = file.len() as u64;
        assert!(
            LogFileHeader::check(&file, 9, 1, fs, b).is_ok(),
            "the header is written"
        );
        let bytes = file[LOG_FILE_HEADER..].to_vec();
        let mut data = 0;
        let mut k = 0;
        while let format::LogBlock::Valid { data_len } =
            format::check_log_block(&bytes[k * b..(k + 1) * b], 9, 1, k as u32)
        {
            data += data_len;
            k += 1;
        }
        (bytes, data, k)
    }

    fn update(w: &mut LogWriter, i: u64, len: usize) -> u64 {
        let data = vec![7u8; len];
        w.append(&Record::Update {
            txn: i,
            page_no: i,
            offset: 64,
            data: &data,
        })
        .unwrap()
    }

    #[test]
    #[cfg(any(debug_assertions, feature = "invariants"))]
    #[should_panic(expected = "LSN not increasing")]
    fn an_lsn_that_does_not_grow_breaks_an_invariant() {
        check_lsn_order(4096, 4096, "a record");
    }

    #[test]
    fn appends_flush_and_roll_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = LogWriter::create(dir.path(), 9, 64 * 1024, 4096, 1, false).unwrap();
        let mut last = 0;
        for i in 0..20u64 {
            let l = update(&mut w, i, 5000);
            assert!(l > last);
            last = l;
        }
        assert!(w.generation() >= 2, "20 x 5 KB spans 64 KiB files");
        let first = w.start_flush(FlushKind::All).unwrap().unwrap();
        assert!(w.rolled(), "the flush writes to two generations");
        assert!(
            w.start_flush(FlushKind::All).unwrap().is_none(),
            "one flush at a time"
        );
        let mut writes = 1;
        loop {
            match w.write_done() {
                Some(Next::Write(_)) => writes += 1,
                Some(Next::Durable(d)) => {
                    assert_eq!(d, last);
                    break;
                }
                None => panic!("the flush ended without a durable LSN"),
            }
        }
        assert!(writes >= 2, "one write per generation at least");
        drop(first);
        assert_eq!(w.durable_lsn(), last);
        assert_eq!(
            w.next_lsn(),
            last,
            "the next record goes on in the partial block"
        );
        let closed = w.take_closed();
        assert!(!closed.is_empty());
        assert_eq!(w.remove_before(closed[closed.len() - 1] + 1), closed.len());
    }

    /// ESE's log writes: a partial block goes with its shadow in one write;
    /// written again while partial, as itself and its shadow; when the whole
    /// blocks after it follow, the old partial block alone first, then the
    /// rest, then the new partial block with its shadow. A write of the
    /// whole blocks only leaves the partial one unwritten and durable up to
    /// its start.
    #[test]
    fn writes_follow_the_shadow_sector_protocol() {
        let dir = tempfile::tempdir().unwrap();
        let b = 512usize;
        let mut w = LogWriter::create(dir.path(), 9, 64 * 1024, b, 1, false).unwrap();
        let start = w.next_lsn();
        update(&mut w, 1, 100);
        assert_eq!(flush(&mut w, FlushKind::All), [2 * b], "partial + shadow");
        update(&mut w, 2, 100);
        assert_eq!(
            flush(&mut w, FlushKind::All),
            [b, b],
            "rewritten, shadow again"
        );
        let end = update(&mut w, 3, 1400);
        assert_eq!(
            flush(&mut w, FlushKind::All),
            [b, 2 * b, 2 * b],
            "old partial alone, the next whole blocks, the new partial with its shadow"
        );
        assert_eq!(w.durable_lsn(), end);
        update(&mut w, 4, 40);
        assert_eq!(
            flush(&mut w, FlushKind::WholeBlocks),
            Vec::<usize>::new(),
            "no whole block"
        );
        update(&mut w, 5, 700);
        let pos = w.next_lsn();
        assert_eq!(
            flush(&mut w, FlushKind::WholeBlocks),
            [b, b],
            "the partial block (its shadow behind it) alone, then the one after it"
        );
        assert!(
            w.durable_lsn() < pos && w.unflushed() > 0,
            "the partial block waits"
        );
        assert_eq!(
            w.durable_lsn() % b as u64,
            0,
            "durable up to a block's start"
        );
        assert_eq!(flush(&mut w, FlushKind::All), [2 * b]);
        // Read back: the stream is whole, the shadow after the last block reads as the end.
        let (bytes, data, k) = read_back(dir.path(), b);
        assert_eq!(
            (w.next_lsn() - start) as usize,
            data + (k - 1) * LOG_BLOCK_HEADER
        );
        assert_eq!(
            &bytes[k * b + 24..k * b + 28],
            &((k - 1) as u32).to_le_bytes(),
            "the shadow names the block before it"
        );
    }

    /// The 2007-era writer: a flush that rewrites the shadowed partial block
    /// writes it alone, then everything after it (whole blocks, the new
    /// partial block and its shadow) in one write; a flush with no shadow to
    /// protect is one write; a partial block rewritten alone is two writes
    /// (itself, then its shadow), as with the current writer. The blocks read
    /// back as the current writer's do: the same stream, the shadow after the
    /// last block.
    #[test]
    fn the_legacy_writer_writes_a_flush_in_at_most_two_writes() {
        let dir = tempfile::tempdir().unwrap();
        let b = 512usize;
        let mut w = LogWriter::create(dir.path(), 9, 64 * 1024, b, 1, false).unwrap();
        w.set_legacy(true);
        let start = w.next_lsn();
        update(&mut w, 1, 1300);
        assert_eq!(
            flush(&mut w, FlushKind::All),
            [4 * b],
            "no shadow on disk: whole blocks, the partial one and its shadow in one write"
        );
        update(&mut w, 2, 50);
        assert_eq!(
            flush(&mut w, FlushKind::All),
            [b, b],
            "rewritten, shadow again"
        );
        let end = update(&mut w, 3, 1400);
        assert_eq!(
            flush(&mut w, FlushKind::All),
            [b, 4 * b],
            "the shadowed block alone, then the rest with the new shadow"
        );
        assert_eq!(w.durable_lsn(), end);
        update(&mut w, 5, 700);
        assert_eq!(
            flush(&mut w, FlushKind::WholeBlocks),
            [b, b],
            "whole blocks only: as the current writer"
        );
        update(&mut w, 6, 30);
        assert_eq!(flush(&mut w, FlushKind::All), [2 * b]);
        let (bytes, data, k) = read_back(dir.path(), b);
        assert_eq!(
            (w.next_lsn() - start) as usize,
            data + (k - 1) * LOG_BLOCK_HEADER,
            "every record read back"
        );
        assert_eq!(
            &bytes[k * b + 24..k * b + 28],
            &((k - 1) as u32).to_le_bytes(),
            "the shadow names the block before it"
        );
    }

    /// A file left under a generation's name (an earlier run's) is replaced by
    /// a new, empty one; a missing one is created.
    #[test]
    fn leftover_log_files_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let fs = 64 * 1024u64;
        let old = LogWriter::path_of(dir.path(), 4);
        std::fs::write(&old, vec![0xA5u8; 3 * 4096]).unwrap();
        let w = LogWriter::create(dir.path(), 5, fs, 4096, 4, false).unwrap();
        for g in [4, 5] {
            let bytes = std::fs::read(LogWriter::path_of(dir.path(), g)).unwrap();
            assert_eq!(bytes.len() as u64, fs, "generation {g} preallocated");
            assert!(
                bytes[LOG_FILE_HEADER..].iter().all(|b| *b == 0),
                "generation {g} holds no old bytes"
            );
        }
        let first = std::fs::read(LogWriter::path_of(dir.path(), 4)).unwrap();
        let h = LogFileHeader::check(&first, 5, 4, fs, 4096).unwrap();
        assert_eq!(
            h.generation, 4,
            "the first generation's header is written at the start"
        );
        let next = std::fs::read(LogWriter::path_of(dir.path(), 5)).unwrap();
        assert_eq!(
            LogFileHeader::check(&next, 5, 5, fs, 4096),
            Err(log_header::HeaderFault::Blank),
            "the next one's waits for its first flush"
        );
        assert!(w.file(4).is_some() && w.file(5).is_some());
    }

    /// A file made ready for a generation is opened as it is (its old blocks
    /// kept: they belong to another generation, the end of the log when
    /// read) and counted by where it came from; a generation with none is
    /// created; a file made ready for a generation the log already opened is
    /// not handed over; the files made ready and never used go at the end.
    #[test]
    fn ready_files_are_opened_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let fs = 64 * 1024u64;
        let mut w = LogWriter::create(dir.path(), 5, fs, 4096, 1, false).unwrap();
        let counts = |created, formatted, reused| LogFiles {
            created,
            formatted,
            reused,
        };
        assert_eq!(w.counts, counts(2, 0, 0));
        let ready = w.ready();
        let mut r = ready.lock().unwrap();
        assert_eq!(r.next_free(), 3, "generations 1 and 2 are the log's");
        for g in [2, 3, 4, 5] {
            std::fs::write(LogWriter::path_of(dir.path(), g), vec![0xA5u8; fs as usize]).unwrap();
        }
        r.add(&[2, 3], Origin::Reused);
        r.add(&[4, 5], Origin::Formatted);
        assert_eq!(r.count(), 3, "generation 2 is the log's own");
        drop(r);
        let data = vec![7u8; 5000];
        while w.generation() < 3 {
            w.append(&Record::Update {
                txn: 1,
                page_no: 1,
                offset: 64,
                data: &data,
            })
            .unwrap();
        }
        assert_eq!(w.counts, counts(2, 1, 1), "3 reused, 4 formatted ahead");
        // Generation 3's header goes before its blocks, in the flush that
        // first writes to it; a reused file's old bytes are no header.
        let three = LogWriter::path_of(dir.path(), 3);
        assert!(LogFileHeader::decode(&std::fs::read(&three).unwrap()).is_err());
        let offsets: Vec<(u64, bool)> = {
            let mut v = Vec::new();
            let mut next = w.start_flush(FlushKind::All).unwrap();
            while let Some(wr) = next {
                use std::os::unix::fs::FileExt;
                wr.file.write_at(wr.buf.as_slice(), wr.offset).unwrap();
                v.push((wr.offset, Arc::ptr_eq(&wr.file, &w.file(3).unwrap())));
                w.recycle(wr.buf);
                next = match w.write_done() {
                    Some(Next::Write(x)) => Some(x),
                    _ => None,
                };
            }
            v
        };
        let first3 = offsets.iter().position(|(_, three)| *three).unwrap();
        assert_eq!(
            offsets[first3].0, 0,
            "generation 3's first write is its header"
        );
        assert_eq!(
            offsets.iter().filter(|(o, _)| *o == 0).count(),
            2,
            "one header each for generations 2 and 3"
        );
        assert!(LogFileHeader::check(&std::fs::read(&three).unwrap(), 5, 3, fs, 4096).is_ok());
        let kept = std::fs::read(LogWriter::path_of(dir.path(), 4)).unwrap();
        assert!(
            kept.iter().all(|b| *b == 0xA5),
            "generation 4's file was opened as it was"
        );
        assert_eq!(ready.lock().unwrap().next_free(), 6);
        w.remove_ready();
        assert!(!LogWriter::path_of(dir.path(), 5).exists());
        assert!(LogWriter::path_of(dir.path(), 4).exists());
    }

    /// Records laid straight into reused staging buffers read back as the same
    /// stream as encoding them one by one, with zero padding after each block's
    /// data (a reused buffer holds an earlier flush's bytes).
    #[test]
    fn blocks_hold_the_encoded_stream() {
        for block in [512, 4096] {
            for legacy in [false, true] {
                blocks_hold_the_encoded_stream_in(block, legacy);
            }
        }
    }

    fn blocks_hold_the_encoded_stream_in(lb: usize, legacy: bool) {
        use std::collections::HashMap;
        let dir = tempfile::tempdir().unwrap();
        let fs = 64 * 1024u64;
        let mut w = LogWriter::create(dir.path(), 5, fs, lb, 3, false).unwrap();
        w.set_legacy(legacy);
        let mut want: Vec<u8> = Vec::new();
        let mut disk: HashMap<u64, Vec<u8>> = HashMap::new();
        let flush = |w: &mut LogWriter, disk: &mut HashMap<u64, Vec<u8>>, kind| {
            let mut next = w.start_flush(kind).unwrap();
            while let Some(wr) = next {
                let g = (w
                    .files
                    .iter()
                    .find(|(_, f)| Arc::ptr_eq(f, &wr.file))
                    .unwrap())
                .0;
                let file = disk.entry(*g).or_insert_with(|| vec![0u8; fs as usize]);
                let at = wr.offset as usize;
                file[at..at + wr.buf.len()].copy_from_slice(wr.buf.as_slice());
                w.recycle(wr.buf);
                next = match w.write_done() {
                    Some(Next::Write(x)) => Some(x),
                    _ => None,
                };
            }
        };
        let mut x = 17u64;
        for i in 0..300u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let data: Vec<u8> = (0..(x >> 52) as usize)
                .map(|k| (k as u64 ^ x) as u8)
                .collect();
            let rec = if i % 4 == 3 {
                Record::Commit { txn: i }
            } else {
                Record::Update {
                    txn: i,
                    page_no: x >> 40,
                    offset: 64,
                    data: &data,
                }
            };
            w.append(&rec).unwrap();
            rec.encode(&mut want);
            if i % 37 == 0 {
                // The partial block is written, and written again later.
                flush(&mut w, &mut disk, FlushKind::All);
            } else if i % 11 == 0 {
                flush(&mut w, &mut disk, FlushKind::WholeBlocks);
            }
        }
        flush(&mut w, &mut disk, FlushKind::All);
        let mut got = Vec::new();
        let mut gens: Vec<u64> = disk.keys().copied().collect();
        gens.sort_unstable();
        assert!(gens.len() >= 3, "the records span several files");
        for g in gens {
            let file = &disk[&g];
            if g > 3 {
                assert_eq!(
                    LogFileHeader::check(file, 5, g, fs, lb).map(|h| h.generation),
                    Ok(g),
                    "generation {g}'s header written before its blocks"
                );
            }
            for (b, block) in file[LOG_FILE_HEADER..].chunks(lb).enumerate() {
                match format::check_log_block(block, 5, g, b as u32) {
                    format::LogBlock::Valid { data_len } => {
                        got.extend_from_slice(
                            &block[LOG_BLOCK_HEADER..LOG_BLOCK_HEADER + data_len],
                        );
                        assert!(block[LOG_BLOCK_HEADER + data_len..].iter().all(|b| *b == 0));
                    }
                    format::LogBlock::End => break,
                    format::LogBlock::Corrupt => panic!("corrupt block {g}/{b}"),
                }
            }
        }
        assert_eq!(got, want, "blocks of {lb} bytes, legacy writer {legacy}");
    }
}
