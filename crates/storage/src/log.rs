//! The transaction log of one instance: records appended to 4 KiB blocks,
//! written sequentially to fixed-size generation files with O_DIRECT|O_DSYNC,
//! one write in flight at a time (so one flush serves every commit that waited
//! for it: group commit), circular: files behind the checkpoint are removed.

use crate::format::{self, LOG_BLOCK, LOG_BLOCK_DATA, LOG_BLOCK_HEADER, Record};
use mailbench_base::{Error, Result};
use mailbench_io::AlignedBuf;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct LogWriter {
    dir: PathBuf,
    db_id: u64,
    file_size: u64,
    blocks_per_file: u32,
    direct: bool,
    files: BTreeMap<u64, Arc<File>>,
    /// Position of the block being filled.
    cur_gen: u64,
    cur_block: u32,
    cur: Vec<u8>,
    /// Full blocks not yet written: (generation, block, data).
    pending: Vec<(u64, u32, Vec<u8>)>,
    next_lsn: u64,
    durable_lsn: u64,
    /// End LSN of the write in flight and how many segment writes remain.
    in_flight: Option<(u64, usize)>,
    closed: Vec<u64>,
    scratch: Vec<u8>,
    pub bytes_appended: u64,
}

/// One log write to submit.
pub struct LogWrite {
    pub file: Arc<File>,
    pub offset: u64,
    pub buf: AlignedBuf,
}

impl LogWriter {
    /// Starts a log in `dir` at generation `first_gen` (a new, empty file).
    pub fn create(
        dir: &Path,
        db_id: u64,
        file_size: u64,
        first_gen: u64,
        direct: bool,
    ) -> Result<LogWriter> {
        let mut w = LogWriter {
            dir: dir.to_path_buf(),
            db_id,
            file_size,
            blocks_per_file: (file_size / LOG_BLOCK as u64) as u32,
            direct,
            files: BTreeMap::new(),
            cur_gen: first_gen,
            cur_block: 0,
            cur: Vec::with_capacity(LOG_BLOCK_DATA),
            pending: Vec::new(),
            next_lsn: 0,
            durable_lsn: 0,
            in_flight: None,
            closed: Vec::new(),
            scratch: Vec::new(),
            bytes_appended: 0,
        };
        w.open_gen(first_gen)?;
        w.open_gen(first_gen + 1)?;
        w.next_lsn = w.position(first_gen, 0, 0);
        w.durable_lsn = w.next_lsn;
        Ok(w)
    }

    fn position(&self, generation: u64, block: u32, data_off: usize) -> u64 {
        generation * self.file_size
            + block as u64 * LOG_BLOCK as u64
            + (LOG_BLOCK_HEADER + data_off) as u64
    }

    pub fn path_of(dir: &Path, generation: u64) -> PathBuf {
        dir.join(format::log_file_name(generation))
    }

    fn open_gen(&mut self, generation: u64) -> Result<()> {
        if self.files.contains_key(&generation) {
            return Ok(());
        }
        let path = Self::path_of(&self.dir, generation);
        // A leftover file of that name (from an earlier run) is truncated first so
        // its blocks cannot be mistaken for this run's.
        let _ = std::fs::remove_file(&path);
        let f = mailbench_io::open_file(&path, true, self.direct, true)
            .map_err(|e| Error::io("cannot create log file", &path, e))?;
        mailbench_io::preallocate(&f, self.file_size)
            .map_err(|e| Error::io("cannot allocate log file", &path, e))?;
        self.files.insert(generation, Arc::new(f));
        Ok(())
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

    pub fn writing(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Log bytes appended and not yet handed to a write.
    pub fn unflushed(&self) -> u64 {
        (self.pending.len() * LOG_BLOCK_DATA + self.cur.len()) as u64
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

    /// Appends a record; returns its LSN (the position just after it).
    pub fn append(&mut self, rec: &Record<'_>) -> Result<u64> {
        self.scratch.clear();
        rec.encode(&mut self.scratch);
        self.bytes_appended += self.scratch.len() as u64;
        let mut at = 0;
        let bytes = std::mem::take(&mut self.scratch);
        while at < bytes.len() {
            let room = LOG_BLOCK_DATA - self.cur.len();
            let n = room.min(bytes.len() - at);
            self.cur.extend_from_slice(&bytes[at..at + n]);
            at += n;
            if self.cur.len() == LOG_BLOCK_DATA {
                self.next_lsn = self.position(self.cur_gen, self.cur_block, LOG_BLOCK_DATA);
                self.seal_current()?;
            }
        }
        self.scratch = bytes;
        if !self.cur.is_empty() {
            self.next_lsn = self.position(self.cur_gen, self.cur_block, self.cur.len());
        }
        Ok(self.next_lsn)
    }

    /// Moves the current block to pending and starts the next one.
    fn seal_current(&mut self) -> Result<()> {
        let data = std::mem::replace(&mut self.cur, Vec::with_capacity(LOG_BLOCK_DATA));
        self.pending.push((self.cur_gen, self.cur_block, data));
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

    /// Takes everything appended (the partial block padded) as the writes of one
    /// flush, one per generation file touched. None if nothing to write or a
    /// write is already in flight.
    pub fn start_flush(&mut self) -> Result<Option<Vec<LogWrite>>> {
        if self.in_flight.is_some() || (self.pending.is_empty() && self.cur.is_empty()) {
            return Ok(None);
        }
        if !self.cur.is_empty() {
            self.seal_current()?;
        }
        let end_lsn = self.next_lsn;
        let blocks = std::mem::take(&mut self.pending);
        let mut writes = Vec::new();
        let mut i = 0;
        while i < blocks.len() {
            let g = blocks[i].0;
            let mut j = i;
            while j < blocks.len() && blocks[j].0 == g {
                j += 1;
            }
            let mut buf = AlignedBuf::new((j - i) * LOG_BLOCK);
            for (k, (generation, block_no, data)) in blocks[i..j].iter().enumerate() {
                let b = &mut buf.as_mut_slice()[k * LOG_BLOCK..(k + 1) * LOG_BLOCK];
                b[LOG_BLOCK_HEADER..LOG_BLOCK_HEADER + data.len()].copy_from_slice(data);
                format::seal_log_block(b, self.db_id, *generation, *block_no, data.len());
            }
            let file = self
                .file(g)
                .ok_or_else(|| Error::runtime(format!("log generation {g} has no open file")))?;
            writes.push(LogWrite {
                file,
                offset: blocks[i].1 as u64 * LOG_BLOCK as u64,
                buf,
            });
            i = j;
        }
        // The next record starts in a fresh block.
        self.next_lsn = self.position(self.cur_gen, self.cur_block, 0);
        self.in_flight = Some((end_lsn, writes.len()));
        Ok(Some(writes))
    }

    /// One segment write of the flush in flight finished. Returns the new durable
    /// LSN when the whole flush is done.
    pub fn flush_segment_done(&mut self) -> Option<u64> {
        let (end, left) = self.in_flight?;
        if left > 1 {
            self.in_flight = Some((end, left - 1));
            return None;
        }
        self.in_flight = None;
        self.durable_lsn = self.durable_lsn.max(end);
        Some(self.durable_lsn)
    }

    /// Removes generation files older than `keep_from` (circular logging).
    pub fn remove_before(&mut self, keep_from: u64) -> usize {
        let old: Vec<u64> = self.files.range(..keep_from).map(|(g, _)| *g).collect();
        for g in &old {
            self.files.remove(g);
            let _ = std::fs::remove_file(Self::path_of(&self.dir, *g));
        }
        old.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_flush_and_roll_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = LogWriter::create(dir.path(), 9, 64 * 1024, 1, false).unwrap();
        let data = vec![7u8; 5000];
        let mut last = 0;
        for i in 0..20u64 {
            let l = w
                .append(&Record::Update {
                    txn: i,
                    page_no: i,
                    offset: 64,
                    data: &data,
                })
                .unwrap();
            assert!(l > last);
            last = l;
        }
        assert!(w.generation() >= 2, "20 x 5 KB spans 64 KiB files");
        let writes = w.start_flush().unwrap().unwrap();
        assert!(w.start_flush().unwrap().is_none(), "one flush at a time");
        let n = writes.len();
        for (k, wr) in writes.into_iter().enumerate() {
            use std::os::unix::fs::FileExt;
            wr.file.write_at(wr.buf.as_slice(), wr.offset).unwrap();
            let done = w.flush_segment_done();
            assert_eq!(done.is_some(), k + 1 == n);
        }
        assert_eq!(w.durable_lsn(), last);
        assert!(w.next_lsn() > last, "next record starts in a fresh block");
        let closed = w.take_closed();
        assert!(!closed.is_empty());
        assert_eq!(w.remove_before(closed[closed.len() - 1] + 1), closed.len());
    }
}
