//! The header at the start of every log generation file, and where a file's
//! log blocks begin after it.
//!
//! ESE begins each log file with a 4,096-byte header (`cbLogFileHeader` and
//! `LGFILEHDR` in `dev/ese/src/inc/log.hxx` of the published source: checksum,
//! generation, sector and file sizes, creation times, format version,
//! signature), padded to whole sectors (`m_csecHeader = (sizeof(LGFILEHDR) +
//! m_cbSec - 1) / m_cbSec`, `logstream.cxx`): 4 KiB whatever the log's sector
//! from 512 B to 4 KiB. It writes the header when it makes the next generation's
//! file (`LOG_STREAM::ErrLGIStartNewLogFile` → `ErrLGIWriteFileHdr`), before
//! any record of that generation, and reads it on its own, in one read, when it
//! opens a file (`ErrLGIReadFileHeader`, `_log/log.cxx`); the log data starts
//! after it (`ErrReaderEnsureSector` asserts `isec >= CSecHeader()`).
//!
//! Layout (little-endian): `0 crc32c u32 (of the 4 KiB without itself) |
//! 4 magic "MBLH" | 8 version u16 | 10 zero u16 | 12 log block u32 |
//! 16 generation u64 | 24 db_id u64 | 32 file size u64 | 40 created (ms since
//! the Unix epoch) u64 | 48.. zeros`.

use crate::format::{self, LOG_BLOCK, LOG_MAGIC, crc_skipping, get_u16, get_u32, get_u64};

/// Bytes of the header; a file's first log block starts here.
pub const LOG_FILE_HEADER: usize = 4096;
pub const LOG_HEADER_MAGIC: u32 = u32::from_le_bytes(*b"MBLH");
pub const LOG_HEADER_VERSION: u16 = 1;

const CRC_AT: usize = 0;

/// What a log file's header says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogFileHeader {
    pub generation: u64,
    pub db_id: u64,
    pub file_size: u64,
    /// The log's block (its sector).
    pub log_block: u32,
    pub created_ms: u64,
}

/// Why a header does not check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderFault {
    /// Zeros: never written (a file created or formatted ahead).
    Blank,
    /// The file begins with a log block: written by a version whose log files
    /// had no header.
    NoHeader,
    /// Neither a header nor a log block.
    NotALogFile,
    /// The magic is there and the checksum is wrong: torn or damaged.
    Checksum,
    /// A sound header of another generation (a file renamed for reuse whose
    /// new header was never written).
    OtherGeneration(u64),
    /// A sound header of another database's log.
    OtherDatabase(u64),
    /// A header format this version does not read.
    Version(u16),
    /// File or block size other than the database's.
    Geometry { file_size: u64, log_block: u32 },
}

impl std::fmt::Display for HeaderFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderFault::Blank => write!(f, "its header was never written (zeros)"),
            HeaderFault::NoHeader => write!(
                f,
                "it has no file header (it begins with a log block: an older mailbench's log \
                 format); recover it with the version that wrote it, or create the database again"
            ),
            HeaderFault::NotALogFile => write!(f, "it does not begin with a log file header"),
            HeaderFault::Checksum => write!(f, "its header's checksum is wrong (torn or damaged)"),
            HeaderFault::OtherGeneration(g) => write!(
                f,
                "its header names generation {g} (a reused file whose new header was not written)"
            ),
            HeaderFault::OtherDatabase(d) => {
                write!(f, "its header names another database's log (id {d:#x})")
            }
            HeaderFault::Version(v) => write!(
                f,
                "its header is of format version {v}; this version reads {LOG_HEADER_VERSION}"
            ),
            HeaderFault::Geometry {
                file_size,
                log_block,
            } => write!(
                f,
                "its header says {file_size}-byte files of {log_block}-byte blocks, not the \
                 database's"
            ),
        }
    }
}

impl HeaderFault {
    /// Whether the fault is what a crash leaves in a generation's file before
    /// or while its header is written (zeros, a torn write, the header of the
    /// file's earlier use): at the generation after the last sound one, the
    /// end of the log. Any other fault is an error.
    pub fn unwritten(&self) -> bool {
        matches!(
            self,
            HeaderFault::Blank | HeaderFault::Checksum | HeaderFault::OtherGeneration(_)
        )
    }
}

impl LogFileHeader {
    /// Writes the header into `buf` (at least [`LOG_FILE_HEADER`] bytes; the
    /// first [`LOG_FILE_HEADER`] are overwritten).
    pub fn encode(&self, buf: &mut [u8]) {
        let b = &mut buf[..LOG_FILE_HEADER];
        b.fill(0);
        b[4..8].copy_from_slice(&LOG_HEADER_MAGIC.to_le_bytes());
        b[8..10].copy_from_slice(&LOG_HEADER_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.log_block.to_le_bytes());
        b[16..24].copy_from_slice(&self.generation.to_le_bytes());
        b[24..32].copy_from_slice(&self.db_id.to_le_bytes());
        b[32..40].copy_from_slice(&self.file_size.to_le_bytes());
        b[40..48].copy_from_slice(&self.created_ms.to_le_bytes());
        let crc = crc_skipping(b, CRC_AT);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    }

    /// Reads a header from `buf` whatever it names (the checksum, magic and
    /// version checked).
    pub fn decode(buf: &[u8]) -> Result<LogFileHeader, HeaderFault> {
        if buf.len() < LOG_FILE_HEADER {
            return Err(HeaderFault::NotALogFile);
        }
        let b = &buf[..LOG_FILE_HEADER];
        if get_u32(b, 4) != LOG_HEADER_MAGIC {
            return Err(if b.iter().all(|x| *x == 0) {
                HeaderFault::Blank
            } else if get_u32(b, 0) == LOG_MAGIC {
                HeaderFault::NoHeader
            } else {
                HeaderFault::NotALogFile
            });
        }
        if get_u32(b, CRC_AT) != crc_skipping(b, CRC_AT) {
            return Err(HeaderFault::Checksum);
        }
        let version = get_u16(b, 8);
        if version != LOG_HEADER_VERSION {
            return Err(HeaderFault::Version(version));
        }
        Ok(LogFileHeader {
            log_block: get_u32(b, 12),
            generation: get_u64(b, 16),
            db_id: get_u64(b, 24),
            file_size: get_u64(b, 32),
            created_ms: get_u64(b, 40),
        })
    }

    /// The header of `generation`'s file of the log of `db_id` with files of
    /// `file_size` bytes and `log_block`-byte blocks, or why `buf` is not it.
    pub fn check(
        buf: &[u8],
        db_id: u64,
        generation: u64,
        file_size: u64,
        log_block: usize,
    ) -> Result<LogFileHeader, HeaderFault> {
        let h = LogFileHeader::decode(buf)?;
        if h.db_id != db_id {
            return Err(HeaderFault::OtherDatabase(h.db_id));
        }
        if h.generation != generation {
            return Err(HeaderFault::OtherGeneration(h.generation));
        }
        if h.file_size != file_size || h.log_block as usize != log_block {
            return Err(HeaderFault::Geometry {
                file_size: h.file_size,
                log_block: h.log_block,
            });
        }
        Ok(h)
    }
}

/// The offset in its file of log block `block` (`log_block` bytes each).
pub fn block_offset(block: u64, log_block: usize) -> u64 {
    LOG_FILE_HEADER as u64 + block * log_block as u64
}

/// The log block an offset at or after the header falls in.
pub fn block_at(offset: u64, log_block: usize) -> u64 {
    debug_assert!(
        offset >= LOG_FILE_HEADER as u64,
        "offset {offset} is in the header"
    );
    (offset - LOG_FILE_HEADER as u64) / log_block as u64
}

/// Log blocks a file of `file_size` bytes holds after its header.
pub fn blocks_per_file(file_size: u64, log_block: usize) -> u64 {
    file_size.saturating_sub(LOG_FILE_HEADER as u64) / log_block as u64
}

/// The first LSN of generation `g`'s records (after the header and the first
/// block's header).
pub fn first_lsn(generation: u64, file_size: u64) -> u64 {
    generation * file_size + (LOG_FILE_HEADER + format::LOG_BLOCK_HEADER) as u64
}

const _: () = assert!(LOG_FILE_HEADER >= LOG_BLOCK && LOG_FILE_HEADER.is_multiple_of(LOG_BLOCK));

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(generation: u64) -> LogFileHeader {
        LogFileHeader {
            generation,
            db_id: 0xD8,
            file_size: 1 << 20,
            log_block: 4096,
            created_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn a_blank_torn_reused_or_old_format_file_is_told_apart() {
        let mut b = vec![0u8; LOG_FILE_HEADER];
        let check = |b: &[u8]| LogFileHeader::check(b, 0xD8, 7, 1 << 20, 4096);
        assert_eq!(check(&b), Err(HeaderFault::Blank));
        header(7).encode(&mut b);
        assert_eq!(check(&b), Ok(header(7)));
        b[2000] ^= 0x10;
        assert_eq!(check(&b), Err(HeaderFault::Checksum));
        header(3).encode(&mut b);
        assert_eq!(check(&b), Err(HeaderFault::OtherGeneration(3)));
        assert_eq!(
            LogFileHeader::check(&b, 0xD9, 3, 1 << 20, 4096),
            Err(HeaderFault::OtherDatabase(0xD8))
        );
        assert!(matches!(
            LogFileHeader::check(&b, 0xD8, 3, 1 << 20, 512),
            Err(HeaderFault::Geometry { .. })
        ));
        // An older log file: a log block at offset 0.
        let mut old = vec![0u8; LOG_FILE_HEADER];
        format::seal_log_block(&mut old, 0xD8, 7, 0, 100);
        assert_eq!(check(&old), Err(HeaderFault::NoHeader));
        assert!(!HeaderFault::NoHeader.unwritten());
        old[4..8].copy_from_slice(b"XXXX");
        old[0] = 1;
        assert_eq!(check(&old), Err(HeaderFault::NotALogFile));
        let mut v = vec![0u8; LOG_FILE_HEADER];
        header(7).encode(&mut v);
        v[8] = 9;
        let crc = crc_skipping(&v, 0);
        v[..4].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(check(&v), Err(HeaderFault::Version(9)));
    }

    #[test]
    fn blocks_start_after_the_header() {
        assert_eq!(block_offset(0, 512), 4096);
        assert_eq!(block_at(4096 + 3 * 512 + 7, 512), 3);
        assert_eq!(blocks_per_file(1 << 20, 4096), 255);
        assert_eq!(blocks_per_file(1 << 20, 512), 2040);
    }

    proptest! {
        #[test]
        fn headers_round_trip_and_any_flipped_bit_is_caught(
            generation in any::<u64>(), db_id in any::<u64>(), fs in 16u64..=1 << 18,
            lb in 9u32..=12, created in any::<u64>(), bit in 0usize..LOG_FILE_HEADER * 8) {
            let h = LogFileHeader { generation, db_id, file_size: fs * 4096, log_block: 1 << lb,
                created_ms: created };
            let mut b = vec![0xA5u8; LOG_FILE_HEADER + 100];
            h.encode(&mut b);
            prop_assert_eq!(LogFileHeader::check(&b, db_id, generation, fs * 4096, 1 << lb), Ok(h));
            prop_assert!(b[LOG_FILE_HEADER..].iter().all(|x| *x == 0xA5), "nothing past the header");
            b[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(LogFileHeader::decode(&b).is_err());
        }
    }
}
