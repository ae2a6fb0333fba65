//! `storage init`: databases created to size with large aligned O_DIRECT writes,
//! several in flight, every page formatted with unique random payload; resumable
//! (a progress file records the written prefix); `--open` attaches existing ones.

use crate::format::{self, DbHeader};
use crate::spec::{InstanceSpec, StorageSpec};
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::{TestLog, claim_folder, write_atomic};
use mailbench_base::{ByteSize, Error, Result};
use mailbench_io::{AlignedBuf, IoEngine, IoRequest, OpKind};
pub use mailbench_results::storage::init::{InitDb, InitSummary};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHUNK: usize = 1 << 20;
const DEPTH: usize = 8;
/// How often the written prefix is saved to the progress file (an fsync
/// each time): a resumed creation redoes at most this much writing.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Serialize, Deserialize)]
struct Progress {
    db_id: u64,
    pages: u64,
    pages_done: u64,
}

fn progress_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(".init");
    PathBuf::from(s)
}

/// What a command needs of its databases before it writes anything (its run
/// folder included): every database exists, is whole (not a creation left
/// half-way) and has a readable header. Exit 2 otherwise, naming the file.
pub fn check_existing(spec: &StorageSpec) -> Result<Vec<DbHeader>> {
    let mut out = Vec::new();
    for inst in &spec.instances {
        if !inst.db_path.exists() {
            return Err(Error::usage(format!(
                "{} does not exist: run `mailbench storage init` (same flags) first",
                inst.db_path.display()
            )));
        }
        if progress_path(&inst.db_path).exists() {
            return Err(Error::usage(format!(
                "{} was not fully created (its creation was stopped): run `mailbench storage \
                 init` (same flags) to finish it",
                inst.db_path.display()
            )));
        }
        out.push(read_header(&inst.db_path).map_err(|e| Error::usage(e.to_string()))?);
    }
    Ok(out)
}

/// `storage run` before anything is written: a database that exists and is
/// whole must have been shut down clean (else it needs its log replayed first).
pub fn check_clean(spec: &StorageSpec) -> Result<()> {
    for inst in &spec.instances {
        if !inst.db_path.exists() || progress_path(&inst.db_path).exists() {
            continue;
        }
        let h = read_header(&inst.db_path).map_err(|e| Error::usage(e.to_string()))?;
        if !h.clean {
            return Err(Error::usage(format!(
                "{} was not shut down cleanly (a crash or kill left it needing log replay); run \
                 `mailbench storage recover --log-files 0` (same flags) to replay its log, or give a new folder",
                inst.db_path.display()
            )));
        }
    }
    Ok(())
}

/// The flag that accepts databases which lost their log tail.
pub const ACCEPT_LOST_LOG_TAIL: &str = "--accept-lost-log-tail";

/// The databases of the spec whose header says they lost their log tail (a
/// replay stopped at a damaged log block), as paths. Without `accept` the first
/// of them refuses the command (a usage error: exit 2, before anything is
/// written). Databases that do not exist yet, are half-created or unreadable are
/// left to the other checks.
pub fn check_lost_log_tail(spec: &StorageSpec, accept: bool) -> Result<Vec<String>> {
    let mut lost = Vec::new();
    for inst in &spec.instances {
        if !inst.db_path.exists() || progress_path(&inst.db_path).exists() {
            continue;
        }
        let Ok(h) = read_header(&inst.db_path) else {
            continue;
        };
        if !h.lost_log_tail {
            continue;
        }
        if !accept {
            return Err(Error::usage(format!(
                "{} lost the tail of its log: a replay stopped at a damaged log block, so the \
                 transactions logged after it are gone. Pass {ACCEPT_LOST_LOG_TAIL} to use it \
                 anyway (every result will say so), or create new databases in another folder",
                inst.db_path.display()
            )));
        }
        lost.push(inst.db_path.display().to_string());
    }
    Ok(lost)
}

/// Reads the header of an existing database.
pub fn read_header(path: &Path) -> Result<DbHeader> {
    use std::io::Read;
    let mut f =
        std::fs::File::open(path).map_err(|e| Error::io("cannot open database", path, e))?;
    let mut buf = vec![0u8; 4096];
    f.read_exact(&mut buf)
        .map_err(|e| Error::io("cannot read the header of", path, e))?;
    // Headers are checked over the whole first page.
    let ps = format::get_u32(&buf, 16) as usize;
    if !(4096..=65536).contains(&ps) {
        return Err(Error::usage(format!(
            "{} is not a mailbench database",
            path.display()
        )));
    }
    let mut page = vec![0u8; ps];
    page[..4096].copy_from_slice(&buf);
    f.read_exact(&mut page[4096..])
        .map_err(|e| Error::io("cannot read the header of", path, e))?;
    let h =
        DbHeader::decode(&page).map_err(|e| Error::usage(format!("{}: {e}", path.display())))?;
    let len = f
        .metadata()
        .map_err(|e| Error::io("cannot read the size of", path, e))?
        .len();
    check_length(path, &h, len)?;
    Ok(h)
}

/// A database whose file holds fewer pages than its header says was cut
/// short after mailbench wrote it: named with the pages missing, never left
/// to fail later as an I/O error.
fn check_length(path: &Path, h: &DbHeader, len: u64) -> Result<()> {
    let ps = h.page_size as u64;
    let held = len / ps;
    if held >= h.page_count {
        return Ok(());
    }
    Err(Error::usage(format!(
        "{}: {} pages expected, file holds {}: pages {}..{} missing (the file was cut short \
         after it was created); restore it from a backup or create the databases again in a new folder",
        path.display(),
        thousands(h.page_count),
        thousands(held),
        held,
        h.page_count - 1
    )))
}

/// `n` with a comma every three digits (1,234).
fn thousands(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::with_capacity(d.len() + d.len() / 3);
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Creates (or resumes, or opens) every database of the spec, all at once.
/// The folders must have passed `StorageSpec::check_paths`.
pub fn init_all(spec: &StorageSpec, log: &TestLog, interrupt: &Interrupt) -> Result<InitSummary> {
    for v in spec.volumes.iter().chain(spec.log_volumes.iter()) {
        claim_folder(v, false)?;
    }
    let caps = mailbench_io::probe(&spec.volumes[0]);
    let t0 = Instant::now();
    let results: Vec<Result<(InitDb, String)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = spec
            .instances
            .iter()
            .map(|inst| scope.spawn(move || init_one(spec, inst, caps, log, interrupt)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::runtime("database creation thread failed")))
            })
            .collect()
    });
    let mut out = InitSummary {
        o_direct: caps.o_direct,
        ..Default::default()
    };
    let mut first_err = None;
    for r in results {
        match r {
            Ok((db, engine)) => {
                out.written_bytes += db.written_bytes;
                out.io_engine = engine;
                out.databases.push(db);
            }
            Err(e) => {
                if first_err.is_none() || matches!(e, Error::Runtime(_)) {
                    first_err = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    out.seconds = t0.elapsed().as_secs_f64();
    out.mb_per_s = if out.seconds > 0.0 {
        out.written_bytes as f64 / out.seconds / 1e6
    } else {
        0.0
    };
    Ok(out)
}

/// The sequential writer of one database's pages: `DEPTH` 1 MiB writes in
/// flight, up to `AHEAD` more chunks formatted ahead, so that a completion
/// is followed at once by the next write (its payload is already made) and
/// the payload of the following ones is made while the device writes.
struct Writer<'a> {
    file: Arc<std::fs::File>,
    ps: u64,
    pages: u64,
    db_id: u64,
    path: &'a Path,
    interrupt: &'a Interrupt,
}

/// Chunks formatted ahead of the writes in flight.
const AHEAD: usize = 2;

impl Writer<'_> {
    /// Writes pages `start..pages`; returns the written prefix (the first
    /// page not known written). `save` records the prefix (at most once per
    /// `PROGRESS_EVERY`, with the queue full).
    fn write(
        &self,
        io: &mut dyn IoEngine,
        start: u64,
        save: &dyn Fn(u64) -> Result<()>,
    ) -> Result<u64> {
        let ps = self.ps;
        let per_chunk = (CHUNK as u64 / ps).max(1);
        let chunk_bytes = (per_chunk * ps) as usize;
        // Buffers come back with their completions and are reused: a fresh
        // 1 MiB allocation per chunk costs a page fault per 4 KiB. Carved from
        // regions, they go to the kernel as registered buffers.
        let mut free: Vec<AlignedBuf> = AlignedBuf::carve(DEPTH + AHEAD, chunk_bytes);
        let mut ready: std::collections::VecDeque<(u64, AlignedBuf)> = Default::default();
        // Completed chunks may finish out of order: track the written prefix.
        let mut done: std::collections::BTreeSet<u64> = Default::default();
        let (mut next, mut prefix, mut last_saved) = (start, start, start);
        let mut last_save = Instant::now();
        let mut error: Option<Error> = None;
        let mut out = Vec::new();
        loop {
            let stopping = error.is_some() || self.interrupt.raised();
            if stopping {
                ready.clear();
            }
            let mut submitted = false;
            while io.in_flight() < DEPTH
                && let Some((page, buf)) = ready.pop_front()
            {
                io.submit(self.request(page, buf));
                submitted = true;
            }
            if submitted {
                // Hands the writes to the kernel now (and takes any completion).
                io.wait(0, Some(Duration::ZERO), &mut out);
            }
            if !stopping
                && next < self.pages
                && let Some(mut buf) = free.pop()
            {
                let n = per_chunk.min(self.pages - next);
                buf.set_len((n * ps) as usize);
                for k in 0..n {
                    let b = &mut buf.as_mut_slice()[(k * ps) as usize..((k + 1) * ps) as usize];
                    format::format_page(b, self.db_id, next + k);
                }
                ready.push_back((next, buf));
                next += n;
            } else if io.in_flight() == 0 && (ready.is_empty() || stopping) {
                break;
            } else if out.is_empty() {
                io.wait(1, Some(Duration::from_millis(200)), &mut out);
            }
            for c in out.drain(..) {
                if let Err(e) = c.full() {
                    error.get_or_insert_with(|| self.failed(c.offset, e));
                    continue;
                }
                done.insert(c.tag);
                free.push(c.buf);
            }
            while done.remove(&prefix) {
                prefix = (prefix + per_chunk).min(self.pages);
            }
            if prefix > last_saved && last_save.elapsed() >= PROGRESS_EVERY {
                save(prefix)?;
                last_saved = prefix;
                last_save = Instant::now();
            }
        }
        save(prefix)?;
        match error {
            Some(e) => Err(e),
            None => Ok(prefix),
        }
    }

    fn request(&self, page: u64, buf: AlignedBuf) -> IoRequest {
        IoRequest {
            file: self.file.clone(),
            kind: OpKind::Write,
            offset: page * self.ps,
            buf,
            more: Vec::new(),
            tag: page,
        }
    }

    fn failed(&self, offset: u64, errno: i32) -> Error {
        let err = std::io::Error::from_raw_os_error(errno);
        Error::runtime(format!(
            "writing {} at offset {offset} failed: {err}{}",
            self.path.display(),
            if errno == libc::ENOSPC {
                " (the volume is full)"
            } else {
                ""
            }
        ))
    }
}

/// Where an instance's creation starts: an existing database is opened as it
/// is; a creation left unfinished resumes at its last saved page; else a new
/// database is written from page 1.
enum Start {
    Opened(InitDb),
    Write(u64, u64, &'static str),
}

/// An unfinished creation's progress file, refused as damaged when it does
/// not read or says more pages are done than the database has.
fn read_progress(progress_file: &Path) -> Result<Progress> {
    let text = mailbench_base::limits::read_text_capped(
        progress_file,
        mailbench_base::limits::MAX_INPUT_FILE_BYTES,
        "the creation progress file",
    )?;
    let p: Progress = serde_json::from_str(&text).map_err(|e| {
        Error::usage(format!(
            "{} is damaged ({e}); delete the folder",
            progress_file.display()
        ))
    })?;
    if p.pages_done > p.pages {
        return Err(Error::usage(format!(
            "{} is damaged: {} pages done of {}; delete the folder",
            progress_file.display(),
            p.pages_done,
            p.pages
        )));
    }
    Ok(p)
}

/// Before the run folder is made (`storage init`, `recover`, `backup`): the
/// files mailbench wrote and reads back here (an unfinished creation's
/// progress file, a database's header and length) are whole; a damaged one
/// is named, exit 2, nothing written.
pub fn check_readable(spec: &StorageSpec) -> Result<()> {
    for inst in &spec.instances {
        let progress = progress_path(&inst.db_path);
        if progress.exists() {
            read_progress(&progress)?;
        } else if inst.db_path.exists() {
            read_header(&inst.db_path).map_err(|e| Error::usage(e.to_string()))?;
        }
    }
    Ok(())
}

/// Decides [`Start`] for `inst`, refusing a database or a creation of another
/// size, and `--open` of a database that does not exist.
fn start_of(
    spec: &StorageSpec,
    inst: &InstanceSpec,
    progress_file: &Path,
    log: &TestLog,
) -> Result<Start> {
    let ps = spec.profile.page_size.0;
    Ok(if progress_file.exists() {
        let p = read_progress(progress_file)?;
        if p.pages != inst.pages {
            return Err(Error::usage(format!(
                "{} was being created with {} pages, this test wants {}; delete it or use the same size",
                inst.db_path.display(),
                p.pages,
                inst.pages
            )));
        }
        log.line(format!(
            "{}: resuming creation at page {} of {}",
            inst.name, p.pages_done, p.pages
        ));
        Start::Write(p.db_id, p.pages_done.max(1), "resumed")
    } else if inst.db_path.exists() {
        let h = read_header(&inst.db_path)?;
        if h.page_size as u64 != ps || h.page_count != inst.pages {
            return Err(Error::usage(format!(
                "{} exists with {} pages of {} bytes; this test wants {} pages of {}: give the same size, or \
                 a new folder",
                inst.db_path.display(),
                h.page_count,
                h.page_size,
                inst.pages,
                ps
            )));
        }
        log.line(format!(
            "{}: opened existing database {}",
            inst.name,
            inst.db_path.display()
        ));
        let db = InitDb {
            name: inst.name.clone(),
            path: inst.db_path.clone(),
            size_bytes: inst.size_bytes,
            action: "opened".into(),
            written_bytes: 0,
            seconds: 0.0,
            mb_per_s: 0.0,
        };
        Start::Opened(db)
    } else {
        if spec.open {
            return Err(Error::usage(format!(
                "--open: {} does not exist; run `mailbench storage init` first",
                inst.db_path.display()
            )));
        }
        Start::Write(new_db_id(spec.seed, inst.index), 1, "created")
    })
}

fn init_one(
    spec: &StorageSpec,
    inst: &InstanceSpec,
    caps: mailbench_io::Capabilities,
    log: &TestLog,
    interrupt: &Interrupt,
) -> Result<(InitDb, String)> {
    let ps = spec.profile.page_size.0;
    std::fs::create_dir_all(&inst.log_dir)
        .map_err(|e| Error::io("cannot create log folder", &inst.log_dir, e))?;
    let progress_file = progress_path(&inst.db_path);
    let t0 = Instant::now();
    let (db_id, start_page, action) = match start_of(spec, inst, &progress_file, log)? {
        Start::Opened(db) => return Ok((db, String::new())),
        Start::Write(id, page, action) => (id, page, action),
    };
    let save = |done: u64| -> Result<()> {
        let p = Progress {
            db_id,
            pages: inst.pages,
            pages_done: done,
        };
        let text = serde_json::to_vec(&p).map_err(|e| Error::runtime(e.to_string()))?;
        write_atomic(&progress_file, &text)
    };
    save(start_page)?;
    let file = mailbench_io::open_file(&inst.db_path, true, caps.o_direct, false)
        .map_err(|e| Error::io("cannot create database", &inst.db_path, e))?;
    // The whole file allocated first (as fio lays out its files): writes then
    // land in allocated extents instead of extending the file, which on ext4
    // and XFS makes every O_DIRECT write wait for its metadata (io_uring
    // hands extending writes to its blocking workers).
    mailbench_io::preallocate(&file, inst.pages * ps).map_err(|e| {
        let full = e.raw_os_error() == Some(libc::ENOSPC);
        Error::runtime(format!(
            "cannot allocate {} for {}: {e}{}",
            ByteSize(inst.pages * ps),
            inst.db_path.display(),
            if full { " (the volume is full)" } else { "" }
        ))
    })?;
    let file = Arc::new(file);
    let mut io: Box<dyn IoEngine> =
        mailbench_io::build(mailbench_io::EngineChoice::Auto, caps, DEPTH)
            .map_err(Error::runtime)?
            .engine;
    let engine_name = io.name();
    let w = Writer {
        file: file.clone(),
        ps,
        pages: inst.pages,
        db_id,
        path: &inst.db_path,
        interrupt,
    };
    let prefix = w.write(io.as_mut(), start_page, &save)?;
    if interrupt.raised() {
        log.line(format!(
            "{}: creation interrupted at page {prefix} of {}",
            inst.name, inst.pages
        ));
        return Err(Error::Interrupted);
    }
    // The header last: a database without one is still being created.
    let header = DbHeader {
        db_id,
        page_size: ps as u32,
        log_file_size: spec.profile.log_file_size.0 as u32,
        page_count: inst.pages,
        clean: true,
        lost_log_tail: false,
        profile: spec.profile.name.clone(),
        created: mailbench_base::host::unix_now() as u64,
        // Set by the first run: its log's sector.
        log_sector: 0,
    };
    let mut buf = AlignedBuf::new(ps as usize);
    header.encode(buf.as_mut_slice());
    use std::os::unix::fs::FileExt;
    file.write_at(buf.as_slice(), 0)
        .and_then(|_| file.sync_all())
        .map_err(|e| Error::io("cannot write the header of", &inst.db_path, e))?;
    let _ = std::fs::remove_file(&progress_file);
    let written = (inst.pages - start_page + 1) * ps;
    let secs = t0.elapsed().as_secs_f64();
    log.line(format!(
        "{}: {action} {} in {:.1} s ({:.0} MB/s)",
        inst.name,
        ByteSize(inst.size_bytes),
        secs,
        written as f64 / secs.max(1e-9) / 1e6
    ));
    Ok((
        InitDb {
            name: inst.name.clone(),
            path: inst.db_path.clone(),
            size_bytes: inst.size_bytes,
            action: action.into(),
            written_bytes: written,
            seconds: secs,
            mb_per_s: written as f64 / secs.max(1e-9) / 1e6,
        },
        engine_name,
    ))
}

fn new_db_id(seed: u64, index: usize) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut x = seed
        ^ t
        ^ ((index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        ^ (std::process::id() as u64) << 32;
    // splitmix64 finaliser
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)).max(1)
}
