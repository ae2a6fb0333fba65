//! On-disk formats: database pages, the database header page, log blocks and
//! records, and the checkpoint file. All integers little-endian; all checksums
//! CRC32C. docs/storage.md ("The engine") and docs/storage-integrity.md describe
//! them; a log file's header is in [`crate::log_header`].
//!
//! LSN: a byte position in the log stream, `generation * log_file_size + offset
//! in that file`, so the distance between two LSNs is a size of log.

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

pub const PAGE_MAGIC: u32 = u32::from_le_bytes(*b"MBPG");
pub const DBHDR_MAGIC: u32 = u32::from_le_bytes(*b"MBDB");
pub const LOG_MAGIC: u32 = u32::from_le_bytes(*b"MBLG");
pub const CHK_MAGIC: u32 = u32::from_le_bytes(*b"MBCK");
pub const FORMAT_VERSION: u16 = 1;

/// Bytes of page header; the payload follows.
pub const PAGE_HEADER: usize = 64;
const CRC_AT: usize = 32;
/// Where a page's header holds its LSN (the fields before it are fixed per page).
const PAGE_LSN_AT: usize = 24;

/// The largest log block (the log's sector: 512 bytes to 4 KiB, per profile
/// and volume; a log of a database whose header names none has these) and
/// every block's header.
pub const LOG_BLOCK: usize = 4096;
pub const LOG_BLOCK_HEADER: usize = 32;
pub const LOG_BLOCK_DATA: usize = LOG_BLOCK - LOG_BLOCK_HEADER;

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(a)
}
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}
pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// CRC32C (Castagnoli, the iSCSI polynomial) of `b` without its four bytes at
/// `at`. crc-fast folds with carry-less multiplies (VPCLMULQDQ/PCLMULQDQ where the
/// CPU has them, detected at run time; tables elsewhere): 2–2.5× the speed of the
/// SSE4.2 `crc32` instruction, and a page is checked on every read (a page the
/// engine writes is resealed by patching its checksum: [`reseal_page`];
/// docs/ARCHITECTURE.md, "Performance notes").
pub(crate) fn crc_skipping(b: &[u8], at: usize) -> u32 {
    let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    d.update(&b[..at]);
    d.update(&b[at + 4..]);
    d.finalize() as u32
}

// ---------------------------------------------------------------- pages

/// Page header fields:
/// `0 magic u32 | 4 version u16 | 6 flags u16 | 8 db_id u64 | 16 page_no u64 |
///  24 lsn u64 | 32 crc32c u32 | 36..64 reserved | 64.. payload`.
/// The CRC covers the whole page except its own four bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    pub db_id: u64,
    pub page_no: u64,
    pub lsn: u64,
}

/// Fills a fresh page: header plus a payload of pseudo-random bytes unique to
/// (database, page), so every database holds different, incompressible data.
pub fn format_page(buf: &mut [u8], db_id: u64, page_no: u64) {
    fill_random(
        &mut buf[PAGE_HEADER..],
        db_id ^ page_no.wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    buf[..PAGE_HEADER].fill(0);
    seal_page(buf, db_id, page_no, 0);
}

/// SplitMix64's output function: a seed spread over all 64 bits.
fn splitmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fills `buf` with pseudo-random bytes determined by `seed`: eight xorshift64
/// lanes (seeded by SplitMix64) of shifts and xors only, which the compiler runs
/// side by side in vector registers — about three times the speed of one serial
/// generator (1.5× four lanes), for payload that only has to be incompressible
/// and unique, not unpredictable. Database creation and every changed row go
/// through here.
pub fn fill_random(buf: &mut [u8], seed: u64) {
    const LANES: usize = 8;
    let mut lanes = [0u64; LANES];
    for (k, l) in lanes.iter_mut().enumerate() {
        // xorshift must not start at 0.
        *l = splitmix(seed.wrapping_add((k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))) | 1;
    }
    let mut chunks = buf.chunks_exact_mut(LANES * 8);
    for c in &mut chunks {
        for l in lanes.iter_mut() {
            *l ^= *l << 13;
            *l ^= *l >> 7;
            *l ^= *l << 17;
        }
        for (k, l) in lanes.iter().enumerate() {
            c[k * 8..k * 8 + 8].copy_from_slice(&l.to_le_bytes());
        }
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        for l in lanes.iter_mut() {
            *l ^= *l << 13;
            *l ^= *l >> 7;
            *l ^= *l << 17;
        }
        for (i, b) in rest.iter_mut().enumerate() {
            *b = (lanes[i / 8] >> (8 * (i % 8))) as u8;
        }
    }
}

/// Writes the header and checksum of a page whose payload is in place.
pub fn seal_page(buf: &mut [u8], db_id: u64, page_no: u64, lsn: u64) {
    put_page_header(buf, db_id, page_no, lsn);
    let crc = crc_skipping(buf, CRC_AT);
    put_u32(buf, CRC_AT, crc);
}

/// The header fields before the checksum (bytes `0..CRC_AT`).
fn put_page_header(buf: &mut [u8], db_id: u64, page_no: u64, lsn: u64) {
    put_u32(buf, 0, PAGE_MAGIC);
    put_u16(buf, 4, FORMAT_VERSION);
    put_u16(buf, 6, 0);
    put_u64(buf, 8, db_id);
    put_u64(buf, 16, page_no);
    put_u64(buf, PAGE_LSN_AT, lsn);
}

/// The checksum a page carries (valid once [`check_page`] accepted it).
pub fn page_crc(buf: &[u8]) -> u32 {
    get_u32(buf, CRC_AT)
}

/// [`seal_page`] of a page whose checksum `crc` (of its bytes as they are,
/// header included) is known and whose header is the one [`seal_page`] wrote
/// for `db_id`, `page_no` and `old_lsn` (flags zero: [`header_is_sealed`]):
/// the header's change is checksummed from copies on the stack, and the
/// checksum patched ([`crc_patch`]), so nothing of the page is read (a page
/// written back has mostly left the CPU's caches since its last change, and
/// reading its header cost a miss per page written). Writes the same bytes
/// as [`seal_page`]; returns the new checksum.
pub fn reseal_page(
    buf: &mut [u8],
    crc: u32,
    (db_id, page_no): (u64, u64),
    old_lsn: u64,
    lsn: u64,
) -> u32 {
    let mut h = [0u8; CRC_AT];
    put_page_header(&mut h, db_id, page_no, old_lsn);
    let before = crc32c(&h);
    put_page_header(&mut h, db_id, page_no, lsn);
    let after = crc32c(&h);
    // The header is the message's first CRC_AT bytes; the rest of the page
    // but the checksum's own four bytes follows it.
    let crc = crc_patch(crc, before ^ after, buf.len() - CRC_AT - 4);
    buf[..CRC_AT].copy_from_slice(&h);
    put_u32(buf, CRC_AT, crc);
    crc
}

/// Whether a page's header fields before its LSN are the ones [`seal_page`]
/// writes for `db_id` and `page_no` (magic, version, zero flags): what
/// [`reseal_page`] relies on.
pub fn header_is_sealed(buf: &[u8], db_id: u64, page_no: u64) -> bool {
    let mut h = [0u8; CRC_AT];
    put_page_header(&mut h, db_id, page_no, 0);
    buf.len() >= CRC_AT && buf[..PAGE_LSN_AT] == h[..PAGE_LSN_AT]
}

/// The checksum of a page after the payload bytes `row` changed, from the
/// page's checksum `crc` before, and the CRC32C of those bytes before
/// (`row_before`) and after (`row_after`).
pub fn page_crc_after_row(
    crc: u32,
    page_len: usize,
    row: std::ops::Range<usize>,
    row_before: u32,
    row_after: u32,
) -> u32 {
    debug_assert!(row.start >= CRC_AT + 4 && row.end <= page_len);
    crc_patch(crc, row_before ^ row_after, page_len - row.end)
}

// ---------------------------------------------------------------- checksum patches

/// CRC32C of `b`.
pub fn crc32c(b: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, b) as u32
}

/// CRC32C's polynomial, bit-reflected as the CRC register holds it (bit 31 is x^0).
const CRC32C_REFLECTED: u32 = 0x82F6_3B78;

/// `a · b` modulo CRC32C's polynomial, both reflected (zlib's `multmodp`,
/// without branches: its data-dependent ones mispredict).
const fn gf_mul(a: u32, mut b: u32) -> u32 {
    let mut p = 0;
    let mut i = 0;
    while i < 32 {
        // All ones when bit 31 - i of `a` (the coefficient of x^i) is set.
        p ^= b & ((((a << i) as i32) >> 31) as u32);
        b = (b >> 1) ^ (CRC32C_REFLECTED & (b & 1).wrapping_neg());
        i += 1;
    }
    p
}

/// `ZEROS[d][i]` = x^(8 · i · 256^d): the CRC register's change over
/// `i · 256^d` zero bytes.
const ZEROS: [[u32; 256]; 3] = zeros_tables();

const fn zeros_tables() -> [[u32; 256]; 3] {
    let mut t = [[0u32; 256]; 3];
    let mut step = 1u32 << 23; // x^8: one zero byte
    let mut d = 0;
    while d < 3 {
        let mut acc = 1u32 << 31; // x^0
        let mut i = 0;
        while i < 256 {
            t[d][i] = acc;
            acc = gf_mul(acc, step);
            i += 1;
        }
        step = acc;
        d += 1;
    }
    t
}

/// The checksum of a message after some of its bytes changed, from its
/// checksum `crc` before the change, `delta` = CRC32C of the changed bytes
/// before XOR CRC32C of them after, and `tail` = how many bytes of the message
/// follow them. CRC32C is linear: for messages of one length, crc(a) ^ crc(b)
/// is the pure polynomial remainder of a ^ b, which bytes of zeros before the
/// change leave alone and `tail` zero bytes after it multiply by x^(8·tail).
/// Messages up to 16 MiB.
pub(crate) fn crc_patch(crc: u32, delta: u32, tail: usize) -> u32 {
    debug_assert!(tail < 1 << 24, "checksum patches cover up to 16 MiB");
    let mut v = delta;
    for (d, table) in ZEROS.iter().enumerate() {
        let i = (tail >> (8 * d)) & 0xFF;
        if i != 0 {
            v = gf_mul(table[i], v);
        }
    }
    crc ^ v
}

/// Why a page is bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageError {
    /// Magic, version or checksum wrong (ESE -1018).
    BadChecksum,
    /// Checksum fine but another page's number (ESE -1019).
    WrongPageNumber(u64),
    /// Checksum fine but another database's page.
    WrongDatabase(u64),
}

/// Checks a page read from disk as page `page_no` of database `db_id`.
pub fn check_page(buf: &[u8], db_id: u64, page_no: u64) -> Result<PageHeader, PageError> {
    if buf.len() < PAGE_HEADER || get_u32(buf, 0) != PAGE_MAGIC || get_u16(buf, 4) != FORMAT_VERSION
    {
        return Err(PageError::BadChecksum);
    }
    if get_u32(buf, CRC_AT) != crc_skipping(buf, CRC_AT) {
        return Err(PageError::BadChecksum);
    }
    let h = PageHeader {
        db_id: get_u64(buf, 8),
        page_no: get_u64(buf, 16),
        lsn: get_u64(buf, PAGE_LSN_AT),
    };
    if h.db_id != db_id {
        return Err(PageError::WrongDatabase(h.db_id));
    }
    if h.page_no != page_no {
        return Err(PageError::WrongPageNumber(h.page_no));
    }
    Ok(h)
}

// ---------------------------------------------------------------- database header (page 0)

/// Header version of a database that lost its log tail. Its byte 37 says so;
/// the version is raised with it so that a mailbench older than the mark
/// refuses the database instead of using it silently. Headers without the mark
/// stay at [`FORMAT_VERSION`], readable by every version.
pub const DBHDR_VERSION_LOST_TAIL: u16 = 2;

/// Page 0 of every database: what it is and how it was left.
/// `0 magic | 4 version u16 | 8 db_id | 16 page_size u32 | 20 log_file_size u32 |
///  24 page_count u64 | 32 crc | 36 clean u8 | 37 lost_log_tail u8 |
///  40 profile name (32 bytes) | 72 created unix secs u64 | 80 log sector u32`
/// (0 in databases older than it: [`LOG_BLOCK`]), rest of the page
/// random. Version 1 (byte 37 zero) or 2 (byte 37 one, [`DBHDR_VERSION_LOST_TAIL`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbHeader {
    pub db_id: u64,
    pub page_size: u32,
    pub log_file_size: u32,
    pub page_count: u64,
    /// Shut down cleanly: every dirty page written, nothing to replay.
    pub clean: bool,
    /// A replay stopped at a damaged log block: the transactions logged after
    /// it are lost. Kept for the life of the database; `storage run`, verify
    /// and backup refuse it until the user accepts the loss.
    pub lost_log_tail: bool,
    pub profile: String,
    pub created: u64,
    /// The size of the log's blocks (its sector) the last run wrote; 0 (in
    /// older databases) reads as [`LOG_BLOCK`].
    pub log_sector: u32,
}

impl DbHeader {
    /// The log's block size for reading its log.
    pub fn log_block(&self) -> usize {
        match self.log_sector {
            0 => LOG_BLOCK,
            n => n as usize,
        }
    }

    pub fn encode(&self, buf: &mut [u8]) {
        let mut rng = SmallRng::seed_from_u64(self.db_id);
        rng.fill_bytes(buf);
        buf[..128].fill(0);
        put_u32(buf, 0, DBHDR_MAGIC);
        let version = if self.lost_log_tail {
            DBHDR_VERSION_LOST_TAIL
        } else {
            FORMAT_VERSION
        };
        put_u16(buf, 4, version);
        put_u64(buf, 8, self.db_id);
        put_u32(buf, 16, self.page_size);
        put_u32(buf, 20, self.log_file_size);
        put_u64(buf, 24, self.page_count);
        buf[36] = u8::from(self.clean);
        buf[37] = u8::from(self.lost_log_tail);
        let name = self.profile.as_bytes();
        let n = name.len().min(32);
        buf[40..40 + n].copy_from_slice(&name[..n]);
        put_u64(buf, 72, self.created);
        put_u32(buf, 80, self.log_sector);
        let crc = crc_skipping(buf, CRC_AT);
        put_u32(buf, CRC_AT, crc);
    }

    pub fn decode(buf: &[u8]) -> Result<DbHeader, String> {
        if buf.len() < 4096 || get_u32(buf, 0) != DBHDR_MAGIC {
            return Err("not a mailbench database (no header magic)".into());
        }
        let version = get_u16(buf, 4);
        if version != FORMAT_VERSION && version != DBHDR_VERSION_LOST_TAIL {
            return Err(format!(
                "database format version {} is not supported",
                get_u16(buf, 4)
            ));
        }
        if get_u32(buf, CRC_AT) != crc_skipping(buf, CRC_AT) {
            return Err("database header checksum is wrong".into());
        }
        let name = &buf[40..72];
        let end = name.iter().position(|b| *b == 0).unwrap_or(32);
        Ok(DbHeader {
            db_id: get_u64(buf, 8),
            page_size: get_u32(buf, 16),
            log_file_size: get_u32(buf, 20),
            page_count: get_u64(buf, 24),
            clean: buf[36] != 0,
            lost_log_tail: version == DBHDR_VERSION_LOST_TAIL || buf[37] != 0,
            profile: String::from_utf8_lossy(&name[..end]).into_owned(),
            created: get_u64(buf, 72),
            log_sector: get_u32(buf, 80),
        })
    }
}

// ---------------------------------------------------------------- log

/// Log block header:
/// `0 magic u32 | 4 version u16 | 6 data_len u16 | 8 db_id u64 | 16 generation u64 |
///  24 block_no u32 | 28 crc32c u32 | 32.. data`. The CRC covers the block except itself.
/// The log stream is the concatenation of each block's `data[..data_len]`.
pub fn seal_log_block(
    block: &mut [u8],
    db_id: u64,
    generation: u64,
    block_no: u32,
    data_len: usize,
) {
    put_u32(block, 0, LOG_MAGIC);
    put_u16(block, 4, FORMAT_VERSION);
    put_u16(block, 6, data_len as u16);
    put_u64(block, 8, db_id);
    put_u64(block, 16, generation);
    put_u32(block, 24, block_no);
    let crc = crc_skipping(block, 28);
    put_u32(block, 28, crc);
}

/// What a log block turned out to be when read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogBlock {
    /// A valid block of this generation with `data_len` bytes of records.
    Valid { data_len: usize },
    /// Never written in this generation (zeros, or left from an older use of the
    /// file): the end of the log.
    End,
    /// Written but damaged: bad checksum or impossible header.
    Corrupt,
}

pub fn check_log_block(block: &[u8], db_id: u64, generation: u64, block_no: u32) -> LogBlock {
    if get_u32(block, 0) != LOG_MAGIC {
        return if block.iter().all(|b| *b == 0) {
            LogBlock::End
        } else {
            LogBlock::Corrupt
        };
    }
    let crc_ok = get_u32(block, 28) == crc_skipping(block, 28);
    let same = get_u64(block, 8) == db_id
        && get_u64(block, 16) == generation
        && get_u32(block, 24) == block_no;
    if crc_ok && !same {
        return LogBlock::End;
    }
    let data_len = get_u16(block, 6) as usize;
    let room = block.len().saturating_sub(LOG_BLOCK_HEADER);
    if !crc_ok || data_len > room || get_u16(block, 4) != FORMAT_VERSION {
        return LogBlock::Corrupt;
    }
    LogBlock::Valid { data_len }
}

/// Block `block_no` read back damaged, with the block after it a valid copy
/// of it (the shadow the log writes after a partial block, as ESE writes a
/// shadow sector, so that a write torn while it rewrote the partial block
/// loses nothing that was durable): the shadow's length of data, which then
/// stands for the block (and the log ends after it). None otherwise.
pub fn shadow_rescue(
    block: &[u8],
    next: &[u8],
    db_id: u64,
    generation: u64,
    block_no: u32,
) -> Option<usize> {
    if check_log_block(block, db_id, generation, block_no) != LogBlock::Corrupt {
        return None;
    }
    match check_log_block(next, db_id, generation, block_no) {
        LogBlock::Valid { data_len } => Some(data_len),
        _ => None,
    }
}

/// Log records. Layout: `0 len u32 (whole record) | 4 kind u8 | 5..8 pad | 8 txn u64 | ...`.
/// * Update: `16 page_no u64 | 24 offset u32 | 28 data_len u32 | 32.. after-image`.
/// * FlagDelete, Delete: `16 page_no u64 | 24 offset u32 | 28 zero u32`: the
///   update record's fixed part without an after-image (ESE's `LRFLAGDELETE`
///   and `LRDELETE`, `dev/ese/src/inc/logapi.hxx`, are its node header alone).
/// * Begin, Commit: nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    Update {
        txn: u64,
        page_no: u64,
        offset: u32,
        data: &'a [u8],
    },
    /// A transaction's first change is about to be logged (ESE's deferred
    /// `lrtypBegin0`, `ErrLGIDeferBeginTransaction` in
    /// `dev/ese/src/ese/logapi.cxx`).
    Begin {
        txn: u64,
    },
    /// The node at `offset` of the page is flagged deleted (a user delete,
    /// versioned: ESE's `ErrLGFlagDelete`); its bytes stay as they are.
    FlagDelete {
        txn: u64,
        page_no: u64,
        offset: u32,
    },
    /// Version cleanup removes the flag-deleted node at `offset` once the
    /// deleting transaction committed (ESE's `ErrLGDelete` from `ErrBTDelete`,
    /// run by `DELETERECTASK`); its bytes stay as they are.
    Delete {
        txn: u64,
        page_no: u64,
        offset: u32,
    },
    Commit {
        txn: u64,
    },
}

pub const RECORD_UPDATE: u8 = 1;
pub const RECORD_COMMIT: u8 = 2;
pub const RECORD_BEGIN: u8 = 3;
pub const RECORD_FLAG_DELETE: u8 = 4;
pub const RECORD_DELETE: u8 = 5;
pub const UPDATE_HEADER: usize = 32;
pub const COMMIT_LEN: usize = 16;
/// A begin record is as long as a commit record.
pub const BEGIN_LEN: usize = COMMIT_LEN;
/// A flag-delete or delete record: an update record's fixed part.
pub const NODE_DELETE_LEN: usize = UPDATE_HEADER;

impl Record<'_> {
    pub fn encoded_len(&self) -> usize {
        match self {
            Record::Update { data, .. } => UPDATE_HEADER + data.len(),
            Record::FlagDelete { .. } | Record::Delete { .. } => NODE_DELETE_LEN,
            Record::Begin { .. } => BEGIN_LEN,
            Record::Commit { .. } => COMMIT_LEN,
        }
    }

    /// The page the record changes, if it changes one.
    pub fn page(&self) -> Option<u64> {
        match self {
            Record::Update { page_no, .. }
            | Record::FlagDelete { page_no, .. }
            | Record::Delete { page_no, .. } => Some(*page_no),
            Record::Begin { .. } | Record::Commit { .. } => None,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut h = [0u8; UPDATE_HEADER];
        let n = self.encode_header(&mut h);
        out.extend_from_slice(&h[..n]);
        if let Record::Update { data, .. } = self {
            out.extend_from_slice(data);
        }
    }

    /// Writes the record's fixed part (everything but an update's after-image)
    /// into `h` and returns its length: the log appends the after-image straight
    /// from where it lies, without assembling the record first.
    pub fn encode_header(&self, h: &mut [u8; UPDATE_HEADER]) -> usize {
        h.fill(0);
        put_u32(h, 0, self.encoded_len() as u32);
        let (kind, txn, node) = match self {
            Record::Update {
                txn,
                page_no,
                offset,
                data,
            } => (
                RECORD_UPDATE,
                *txn,
                Some((*page_no, *offset, data.len() as u32)),
            ),
            Record::FlagDelete {
                txn,
                page_no,
                offset,
            } => (RECORD_FLAG_DELETE, *txn, Some((*page_no, *offset, 0))),
            Record::Delete {
                txn,
                page_no,
                offset,
            } => (RECORD_DELETE, *txn, Some((*page_no, *offset, 0))),
            Record::Begin { txn } => (RECORD_BEGIN, *txn, None),
            Record::Commit { txn } => (RECORD_COMMIT, *txn, None),
        };
        h[4] = kind;
        put_u64(h, 8, txn);
        match node {
            Some((page_no, offset, data_len)) => {
                put_u64(h, 16, page_no);
                put_u32(h, 24, offset);
                put_u32(h, 28, data_len);
                UPDATE_HEADER
            }
            None => COMMIT_LEN,
        }
    }

    /// Decodes the record at the start of `b`: Ok(None) if `b` holds only part
    /// of it (a torn tail), Err if it cannot be a record.
    pub fn decode(b: &[u8]) -> Result<Option<(Record<'_>, usize)>, String> {
        if b.len() < 4 {
            return Ok(None);
        }
        let len = get_u32(b, 0) as usize;
        if !(COMMIT_LEN..=(1 << 24)).contains(&len) {
            return Err(format!("record length {len} is impossible"));
        }
        if b.len() < len {
            return Ok(None);
        }
        let txn = get_u64(b, 8);
        let kind = b[4];
        let want = match kind {
            RECORD_UPDATE => None,
            RECORD_FLAG_DELETE | RECORD_DELETE => Some(NODE_DELETE_LEN),
            RECORD_BEGIN => Some(BEGIN_LEN),
            RECORD_COMMIT => Some(COMMIT_LEN),
            k => return Err(format!("unknown record kind {k}")),
        };
        if want.is_some_and(|w| w != len) {
            return Err(format!("record of kind {kind} is {len} bytes long"));
        }
        if len >= UPDATE_HEADER && kind != RECORD_UPDATE && get_u32(b, 28) != 0 {
            return Err(format!("record of kind {kind} names an after-image"));
        }
        let rec = match kind {
            RECORD_UPDATE => {
                if len < UPDATE_HEADER || get_u32(b, 28) as usize != len - UPDATE_HEADER {
                    return Err("update record lengths disagree".into());
                }
                Record::Update {
                    txn,
                    page_no: get_u64(b, 16),
                    offset: get_u32(b, 24),
                    data: &b[UPDATE_HEADER..len],
                }
            }
            RECORD_FLAG_DELETE => Record::FlagDelete {
                txn,
                page_no: get_u64(b, 16),
                offset: get_u32(b, 24),
            },
            RECORD_DELETE => Record::Delete {
                txn,
                page_no: get_u64(b, 16),
                offset: get_u32(b, 24),
            },
            RECORD_BEGIN => Record::Begin { txn },
            _ => Record::Commit { txn },
        };
        Ok(Some((rec, len)))
    }
}

// ---------------------------------------------------------------- checkpoint

/// The checkpoint file (`checkpoint.chk` in the log folder): replay starts at
/// `checkpoint_lsn`; `first_generation` is the oldest log file still needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    pub db_id: u64,
    pub checkpoint_lsn: u64,
    pub first_generation: u64,
    pub log_file_size: u64,
}

impl Checkpoint {
    pub const LEN: usize = 48;

    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::LEN];
        put_u32(&mut b, 0, CHK_MAGIC);
        put_u16(&mut b, 4, FORMAT_VERSION);
        put_u64(&mut b, 8, self.db_id);
        put_u64(&mut b, 16, self.checkpoint_lsn);
        put_u64(&mut b, 24, self.first_generation);
        put_u64(&mut b, 32, self.log_file_size);
        let crc = crc_skipping(&b, 40);
        put_u32(&mut b, 40, crc);
        b
    }

    pub fn decode(b: &[u8]) -> Result<Checkpoint, String> {
        if b.len() < Self::LEN || get_u32(b, 0) != CHK_MAGIC {
            return Err("not a mailbench checkpoint file".into());
        }
        if get_u32(b, 40) != crc_skipping(&b[..Self::LEN], 40) {
            return Err("checkpoint file checksum is wrong".into());
        }
        Ok(Checkpoint {
            db_id: get_u64(b, 8),
            checkpoint_lsn: get_u64(b, 16),
            first_generation: get_u64(b, 24),
            log_file_size: get_u64(b, 32),
        })
    }
}

/// Name of log generation `g`: `E` + 8 hex digits + `.log`, like the anchor's.
pub fn log_file_name(generation: u64) -> String {
    format!("E{generation:08X}.log")
}

pub fn parse_log_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix('E')?.strip_suffix(".log")?;
    if hex.len() != 8 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bit-at-a-time definition of CRC32C (reflected 0x82F63B78, init and
    /// final xor all ones): the reference every fast path must match.
    fn crc32c_bitwise(parts: &[&[u8]]) -> u32 {
        let mut c = !0u32;
        for p in parts {
            for &x in *p {
                c ^= u32::from(x);
                for _ in 0..8 {
                    c = if c & 1 == 1 {
                        (c >> 1) ^ 0x82F6_3B78
                    } else {
                        c >> 1
                    };
                }
            }
        }
        !c
    }

    /// The folding path (crc-fast), the SSE4.2 instruction path (crc32c crate) and
    /// the bitwise definition agree on every length (short tails, the folding
    /// blocks' edges, whole pages), at unaligned starts, skipping the CRC field.
    #[test]
    fn crc_paths_agree() {
        assert_eq!(crc32c_bitwise(&[b"123456789"]), 0xE306_9283);
        let mut data = vec![0u8; 70_000];
        fill_random(&mut data, 7);
        let mut lens: Vec<usize> = (0..300).collect();
        lens.extend([511, 512, 513, 1023, 1024, 4095, 4096, 4097, 32_768, 65_536]);
        for start in [0usize, 1, 3, 8, 13] {
            for &len in &lens {
                let b = &data[start..start + len];
                let want = crc32c_bitwise(&[b]);
                assert_eq!(crc32c::crc32c(b), want, "crc32c crate, len {len}");
                let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
                d.update(b);
                assert_eq!(d.finalize() as u32, want, "crc-fast, len {len} at {start}");
                if len >= 8 {
                    for at in [0, 4, len / 2, len - 4] {
                        let skip = crc32c_bitwise(&[&b[..at], &b[at + 4..]]);
                        assert_eq!(crc_skipping(b, at), skip, "len {len} skipping {at}");
                    }
                }
            }
        }
    }

    /// Payload is the same for a seed, differs between seeds, and looks random:
    /// no 8-byte word repeats in a page and every byte value occurs.
    #[test]
    fn random_fill_is_seeded_unique_and_spread() {
        let mut a = vec![0u8; 32768 - PAGE_HEADER + 5];
        let mut b = a.clone();
        fill_random(&mut a, 1);
        fill_random(&mut b, 1);
        assert_eq!(a, b);
        fill_random(&mut b, 2);
        assert_ne!(a[..64], b[..64]);
        let mut words: Vec<&[u8]> = a.chunks_exact(8).collect();
        let n = words.len();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), n, "no repeated 8-byte word");
        let mut seen = [0u32; 256];
        for x in &a {
            seen[*x as usize] += 1;
        }
        let expect = a.len() as u32 / 256;
        assert!(seen.iter().all(|c| *c > expect / 2 && *c < expect * 2));
        assert_ne!(
            a[a.len() - 5..],
            a[a.len() - 37..a.len() - 32],
            "tail is fresh"
        );
    }
    use proptest::prelude::*;

    #[test]
    fn pages_verify_and_detect_damage() {
        let mut p = vec![0u8; 32768];
        format_page(&mut p, 7, 42);
        assert_eq!(check_page(&p, 7, 42).unwrap().lsn, 0);
        let mut q = vec![0u8; 32768];
        format_page(&mut q, 8, 42);
        assert_ne!(
            p[PAGE_HEADER..],
            q[PAGE_HEADER..],
            "payload unique per database"
        );
        assert_eq!(check_page(&p, 7, 43), Err(PageError::WrongPageNumber(42)));
        assert_eq!(check_page(&p, 9, 42), Err(PageError::WrongDatabase(7)));
        p[20000] ^= 0x40;
        assert_eq!(check_page(&p, 7, 42), Err(PageError::BadChecksum));
        assert_eq!(
            check_page(&vec![0u8; 32768], 7, 42),
            Err(PageError::BadChecksum)
        );
    }

    /// A page whose rows change and which is resealed carries the checksum a
    /// full pass gives, byte for byte, at every page size, row size and place.
    #[test]
    fn patched_checksums_equal_full_ones() {
        let mut rng = 0x1234_5678_9ABC_DEF1u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for ps in [4096usize, 8192, 32768, 65536] {
            let mut p = vec![0u8; ps];
            format_page(&mut p, 3, 9);
            let mut crc = check_page(&p, 3, 9).map(|_| page_crc(&p)).unwrap();
            let mut lsn = 0;
            for k in 0..200u64 {
                let len = match k % 4 {
                    0 => 1 + (next() % 8) as usize,
                    1 => 160,
                    2 => 2049,
                    _ => 1 + (next() as usize) % (ps - PAGE_HEADER),
                };
                let room = ps - PAGE_HEADER - len;
                let at = PAGE_HEADER + (next() as usize % (room + 1));
                let row = at..at + len;
                let before = crc32c(&p[row.clone()]);
                fill_random(&mut p[row.clone()], next());
                let after = crc32c(&p[row.clone()]);
                crc = page_crc_after_row(crc, ps, row, before, after);
                assert_eq!(crc, crc_skipping(&p, CRC_AT), "page {ps}, change {k}");
                if k % 7 == 0 {
                    let mut full = p.clone();
                    seal_page(&mut full, 3, 9, k * 1000);
                    assert!(header_is_sealed(&p, 3, 9));
                    crc = reseal_page(&mut p, crc, (3, 9), lsn, k * 1000);
                    lsn = k * 1000;
                    assert_eq!(p, full, "resealed as sealed, page {ps}, change {k}");
                    assert_eq!(check_page(&p, 3, 9).unwrap().lsn, lsn);
                }
            }
        }
        let mut p = vec![0u8; 4096];
        format_page(&mut p, 3, 9);
        assert!(!header_is_sealed(&p, 3, 10) && !header_is_sealed(&p, 4, 9));
        p[6] = 1;
        assert!(!header_is_sealed(&p, 3, 9), "flags set");
        // Tails up to the 16 MiB bound: every table digit used.
        let mut m = vec![0u8; (1 << 20) + 4096];
        fill_random(&mut m, 5);
        let crc = crc32c(&m);
        for at in [0usize, 17, 4096, 65535, 1 << 19] {
            let mut n = m.clone();
            let before = crc32c(&n[at..at + 9]);
            fill_random(&mut n[at..at + 9], at as u64 + 1);
            let after = crc32c(&n[at..at + 9]);
            let tail = n.len() - at - 9;
            assert_eq!(crc_patch(crc, before ^ after, tail), crc32c(&n), "at {at}");
        }
    }

    #[test]
    fn header_and_checkpoint_round_trip() {
        let h = DbHeader {
            db_id: 5,
            page_size: 32768,
            log_file_size: 1 << 20,
            page_count: 99,
            clean: true,
            lost_log_tail: false,
            profile: "exchange2013".into(),
            created: 17,
            log_sector: 512,
        };
        let mut b = vec![0u8; 32768];
        h.encode(&mut b);
        assert_eq!(DbHeader::decode(&b).unwrap(), h);
        assert_eq!(
            (get_u16(&b, 4), b[37]),
            (FORMAT_VERSION, 0),
            "unmarked: version 1"
        );
        let marked = DbHeader {
            lost_log_tail: true,
            ..h.clone()
        };
        let mut m = vec![0u8; 32768];
        marked.encode(&mut m);
        assert_eq!(DbHeader::decode(&m).unwrap(), marked);
        assert_eq!(
            (get_u16(&m, 4), m[37]),
            (DBHDR_VERSION_LOST_TAIL, 1),
            "marked: version 2, so older readers refuse it"
        );
        b[36] = 0;
        assert!(DbHeader::decode(&b).unwrap_err().contains("checksum"));
        let c = Checkpoint {
            db_id: 5,
            checkpoint_lsn: 123456,
            first_generation: 3,
            log_file_size: 1 << 20,
        };
        assert_eq!(Checkpoint::decode(&c.encode()).unwrap(), c);
        let mut e = c.encode();
        e[17] ^= 1;
        assert!(Checkpoint::decode(&e).is_err());
    }

    #[test]
    fn log_blocks_tell_valid_end_and_corrupt() {
        let mut b = vec![0u8; LOG_BLOCK];
        assert_eq!(check_log_block(&b, 1, 2, 3), LogBlock::End);
        b[LOG_BLOCK_HEADER..LOG_BLOCK_HEADER + 10].fill(9);
        seal_log_block(&mut b, 1, 2, 3, 10);
        assert_eq!(
            check_log_block(&b, 1, 2, 3),
            LogBlock::Valid { data_len: 10 }
        );
        assert_eq!(
            check_log_block(&b, 1, 1, 3),
            LogBlock::End,
            "older generation's leftover"
        );
        b[100] ^= 1;
        assert_eq!(check_log_block(&b, 1, 2, 3), LogBlock::Corrupt);
    }

    #[test]
    fn log_file_names() {
        assert_eq!(log_file_name(26), "E0000001A.log");
        assert_eq!(parse_log_file_name("E0000001A.log"), Some(26));
        assert_eq!(parse_log_file_name("E1.log"), None);
    }

    /// One record of each kind, from the drawn fields.
    fn each_kind(txn: u64, page: u64, off: u32, data: &[u8]) -> [Record<'_>; 5] {
        [
            Record::Begin { txn },
            Record::Update {
                txn,
                page_no: page,
                offset: off,
                data,
            },
            Record::FlagDelete {
                txn,
                page_no: page,
                offset: off,
            },
            Record::Delete {
                txn,
                page_no: page,
                offset: off,
            },
            Record::Commit { txn },
        ]
    }

    #[test]
    fn records_of_another_kind_s_length_are_refused() {
        let mut out = Vec::new();
        Record::Begin { txn: 7 }.encode(&mut out);
        out[4] = RECORD_DELETE;
        assert!(Record::decode(&out).is_err(), "a 16-byte delete record");
        let mut out = Vec::new();
        Record::Delete {
            txn: 7,
            page_no: 3,
            offset: 64,
        }
        .encode(&mut out);
        out[28] = 1;
        assert!(
            Record::decode(&out).is_err(),
            "a delete record with an after-image"
        );
        out[28] = 0;
        out[4] = RECORD_COMMIT;
        assert!(Record::decode(&out).is_err(), "a 32-byte commit record");
    }

    proptest! {
        #[test]
        fn records_round_trip_and_torn_tails_are_partial(
            txn in any::<u64>(), page in any::<u64>(), off in 0u32..65536,
            data in proptest::collection::vec(any::<u8>(), 0..3000), cut in 0usize..3100,
            order in proptest::collection::vec(0usize..5, 1..8)) {
            let kinds = each_kind(txn, page, off, &data);
            let mut out = Vec::new();
            for &k in &order {
                let before = out.len();
                kinds[k].encode(&mut out);
                prop_assert_eq!(out.len() - before, kinds[k].encoded_len());
            }
            let mut at = 0;
            for &k in &order {
                let (r, n) = Record::decode(&out[at..]).unwrap().unwrap();
                prop_assert_eq!(&r, &kinds[k]);
                if cut < n {
                    prop_assert!(Record::decode(&out[at..at + cut]).unwrap().is_none());
                }
                at += n;
            }
            prop_assert_eq!(at, out.len());
        }
    }
}
