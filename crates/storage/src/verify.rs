//! Checksum verification of every database page and every log block: large
//! sequential O_DIRECT reads, several in flight, one thread per database.

use crate::format::{self, LOG_BLOCK, LogBlock, PageError};
use crate::init::read_header;
use crate::spec::{InstanceSpec, StorageSpec};
use mailbench_base::interrupt::Interrupt;
use mailbench_base::{Error, Result};
use mailbench_io::{AlignedBuf, IoEngine, IoRequest, OpKind};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHUNK: u64 = 1 << 20;
const DEPTH: usize = 4;
const FIRST_BAD_MAX: usize = 20;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VerifyDb {
    pub name: String,
    pub pages_seen: u64,
    pub bad_checksum_pages: u64,
    pub wrong_page_number_pages: u64,
    /// Pages whose LSN is beyond the end of the valid log: a write-ahead violation.
    pub newer_than_log_pages: u64,
    pub first_bad_pages: Vec<u64>,
    pub mb: f64,
    pub seconds: f64,
    pub log_files: u64,
    pub log_blocks_checked: u64,
    pub bad_log_blocks: u64,
    pub log_generation_gaps: u64,
    pub log_end_lsn: u64,
    pub io_errors: u64,
}

impl VerifyDb {
    pub fn bad(&self) -> u64 {
        self.bad_checksum_pages
            + self.wrong_page_number_pages
            + self.newer_than_log_pages
            + self.bad_log_blocks
            + self.log_generation_gaps
            + self.io_errors
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VerifySummary {
    pub databases: Vec<VerifyDb>,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub bad_total: u64,
}

pub fn verify_all(spec: &StorageSpec, interrupt: &Interrupt) -> Result<VerifySummary> {
    let t0 = Instant::now();
    let results: Vec<Result<VerifyDb>> = std::thread::scope(|scope| {
        let hs: Vec<_> = spec
            .instances
            .iter()
            .map(|i| scope.spawn(move || verify_one(spec, i, interrupt)))
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

/// The end of the valid log in `dir` and what the scan found.
pub struct LogScan {
    pub end_lsn: u64,
    pub files: u64,
    pub blocks: u64,
    pub bad_blocks: u64,
    pub gaps: u64,
}

pub fn scan_log(dir: &Path, db_id: u64, file_size: u64) -> LogScan {
    let mut gens: Vec<u64> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| format::parse_log_file_name(&e.file_name().to_string_lossy()))
                .collect()
        })
        .unwrap_or_default();
    gens.sort_unstable();
    let ckpt = std::fs::read(dir.join("checkpoint.chk"))
        .ok()
        .and_then(|b| format::Checkpoint::decode(&b).ok())
        .filter(|c| c.db_id == db_id);
    let mut scan = LogScan {
        end_lsn: ckpt.map(|c| c.checkpoint_lsn).unwrap_or(0),
        files: gens.len() as u64,
        blocks: 0,
        bad_blocks: 0,
        gaps: 0,
    };
    let mut ended = false;
    for (i, g) in gens.iter().enumerate() {
        if i > 0 && *g != gens[i - 1] + 1 {
            scan.gaps += 1;
        }
        let Ok(bytes) = std::fs::read(dir.join(format::log_file_name(*g))) else {
            scan.bad_blocks += 1;
            continue;
        };
        for (b, block) in bytes.chunks(LOG_BLOCK).enumerate() {
            if block.len() < LOG_BLOCK {
                break;
            }
            match format::check_log_block(block, db_id, *g, b as u32) {
                LogBlock::Valid { data_len } => {
                    scan.blocks += 1;
                    if !ended {
                        let end = g * file_size
                            + (b * LOG_BLOCK + format::LOG_BLOCK_HEADER + data_len) as u64;
                        scan.end_lsn = scan.end_lsn.max(end);
                    }
                }
                LogBlock::End => {
                    // The rest of this generation was never written.
                    break;
                }
                LogBlock::Corrupt => {
                    scan.blocks += 1;
                    scan.bad_blocks += 1;
                    ended = true;
                }
            }
        }
    }
    scan
}

fn verify_one(spec: &StorageSpec, inst: &InstanceSpec, interrupt: &Interrupt) -> Result<VerifyDb> {
    let t0 = Instant::now();
    let header = read_header(&inst.db_path)?;
    let ps = header.page_size as u64;
    let scan = scan_log(&inst.log_dir, header.db_id, header.log_file_size as u64);
    let caps = mailbench_io::probe(&inst.volume);
    let file = Arc::new(
        mailbench_io::open_file(&inst.db_path, false, caps.o_direct, false)
            .map_err(|e| Error::io("cannot open database", &inst.db_path, e))?,
    );
    let mut io: Box<dyn IoEngine> =
        mailbench_io::build(spec.engine_choice(), caps, DEPTH).map_err(Error::runtime)?;
    let mut r = VerifyDb {
        name: inst.name.clone(),
        log_files: scan.files,
        log_blocks_checked: scan.blocks,
        bad_log_blocks: scan.bad_blocks,
        log_generation_gaps: scan.gaps,
        log_end_lsn: scan.end_lsn,
        pages_seen: 1,
        ..Default::default()
    };
    let pages_per_chunk = (CHUNK / ps).max(1);
    let mut next = 1u64;
    let mut out = Vec::new();
    loop {
        while !interrupt.raised() && next < header.page_count && io.in_flight() < DEPTH {
            let n = pages_per_chunk.min(header.page_count - next);
            io.submit(IoRequest {
                file: file.clone(),
                kind: OpKind::Read,
                offset: next * ps,
                buf: AlignedBuf::new((n * ps) as usize),
                tag: next,
            });
            next += n;
        }
        if io.in_flight() == 0 {
            break;
        }
        out.clear();
        io.wait(1, Some(Duration::from_millis(500)), &mut out);
        for c in out.drain(..) {
            if c.full().is_err() {
                r.io_errors += 1;
                continue;
            }
            for (k, page) in c.buf.as_slice().chunks(ps as usize).enumerate() {
                let no = c.tag + k as u64;
                r.pages_seen += 1;
                let bad = match format::check_page(page, header.db_id, no) {
                    Ok(h) if h.lsn > scan.end_lsn => {
                        r.newer_than_log_pages += 1;
                        true
                    }
                    Ok(_) => false,
                    Err(PageError::WrongPageNumber(_)) => {
                        r.wrong_page_number_pages += 1;
                        true
                    }
                    Err(_) => {
                        r.bad_checksum_pages += 1;
                        true
                    }
                };
                if bad && r.first_bad_pages.len() < FIRST_BAD_MAX {
                    r.first_bad_pages.push(no);
                }
            }
        }
    }
    if interrupt.raised() {
        return Err(Error::Interrupted);
    }
    r.first_bad_pages.sort_unstable();
    r.mb = (r.pages_seen * ps) as f64 / 1e6;
    r.seconds = t0.elapsed().as_secs_f64();
    Ok(r)
}
