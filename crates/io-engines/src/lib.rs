//! I/O engines behind one small trait (docs/storage.md, "The engine").
//!
//! * [`uring::UringEngine`]: io_uring, one ring per caller, O_DIRECT files.
//! * [`threads::ThreadPoolEngine`]: a pool of threads doing pread/pwrite; the
//!   portable fallback when io_uring or O_DIRECT is not available.
//! * [`faulty::FaultyEngine`]: wraps another engine and fails or delays a chosen
//!   share of operations (test-only switch `MAILBENCH_FAULTS`).
//!
//! Requests own their [`AlignedBuf`] and get it back in the completion, so no
//! buffer can be freed or reused while the kernel writes into it. This crate holds
//! the project's only `unsafe` code.

// A dependency declared but unused fails the build (dev-dependencies excepted).
#![cfg_attr(not(test), deny(unused_crate_dependencies))]
#![allow(unsafe_code)]

pub mod buf;
pub mod faulty;
pub mod threads;
pub mod uring;

pub use buf::{AlignedBuf, BufPool};

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Alignment of every buffer, offset and length under O_DIRECT.
pub const ALIGN: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Read,
    Write,
    /// fdatasync of the file; the buffer is empty.
    Sync,
}

/// One I/O. `tag` is the caller's, returned in the completion.
#[derive(Debug)]
pub struct IoRequest {
    pub file: Arc<File>,
    pub kind: OpKind,
    pub offset: u64,
    pub buf: AlignedBuf,
    /// Buffers for the file's bytes after `buf`'s, in order: one vectored read
    /// or write (readv/writev) of `buf` then these; empty for a plain I/O.
    pub more: Vec<AlignedBuf>,
    pub tag: u64,
}

impl IoRequest {
    /// Bytes the request transfers (all its buffers).
    pub fn len(&self) -> usize {
        total_len(&self.buf, &self.more)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The completion of this request with `result`, timed from `submitted`.
    pub fn complete(
        self,
        result: Result<usize, i32>,
        submitted: Instant,
        completed: Instant,
    ) -> IoCompletion {
        IoCompletion {
            tag: self.tag,
            kind: self.kind,
            offset: self.offset,
            buf: self.buf,
            more: self.more,
            result,
            submitted,
            completed,
        }
    }
}

/// A finished I/O: bytes transferred or an errno, with its timing.
#[derive(Debug)]
pub struct IoCompletion {
    pub tag: u64,
    pub kind: OpKind,
    pub offset: u64,
    pub buf: AlignedBuf,
    /// The request's further buffers (see [`IoRequest::more`]).
    pub more: Vec<AlignedBuf>,
    pub result: Result<usize, i32>,
    pub submitted: Instant,
    pub completed: Instant,
}

impl IoCompletion {
    pub fn latency(&self) -> Duration {
        self.completed.saturating_duration_since(self.submitted)
    }

    /// Bytes of all its buffers.
    pub fn len(&self) -> usize {
        total_len(&self.buf, &self.more)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ok only if the whole buffer was transferred (short transfers are errors
    /// for page-sized I/O: EIO).
    pub fn full(&self) -> Result<(), i32> {
        match self.result {
            Ok(n) if self.kind == OpKind::Sync || n == self.len() => Ok(()),
            Ok(_) => Err(libc::EIO),
            Err(e) => Err(e),
        }
    }
}

/// Bytes of a request's buffers: `buf`, then each of `more`.
fn total_len(buf: &AlignedBuf, more: &[AlignedBuf]) -> usize {
    buf.len() + more.iter().map(AlignedBuf::len).sum::<usize>()
}

/// The iovecs of a vectored request: `buf`, then each of `more`.
pub(crate) fn iovecs(req: &mut IoRequest) -> Vec<libc::iovec> {
    std::iter::once(&mut req.buf)
        .chain(req.more.iter_mut())
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect()
}

/// An asynchronous I/O engine, driven by one thread (the caller's).
pub trait IoEngine: Send {
    /// Short name for reports: `uring`, `threads`, `faulty(uring)`.
    fn name(&self) -> String;
    /// Queues one request; it is handed to the kernel or pool by the next `wait`
    /// (or at once when the queue is full).
    fn submit(&mut self, req: IoRequest);
    /// Hands queued requests over and collects completions into `out`: waits for
    /// at least `min` of them (bounded by `timeout`), then takes all that are ready.
    fn wait(&mut self, min: usize, timeout: Option<Duration>, out: &mut Vec<IoCompletion>);
    /// Requests submitted and not yet completed.
    fn in_flight(&self) -> usize;
    /// Requests queued by `submit` and not yet handed to the kernel (0 for an
    /// engine that hands each one over at once).
    fn queued(&self) -> usize {
        0
    }
    /// Collects the completions that are ready into `out` without handing the
    /// queued requests over (they go with the next `wait`). An engine without
    /// such a path hands them over: `wait` without waiting.
    fn poll(&mut self, out: &mut Vec<IoCompletion>) {
        self.wait(0, Some(Duration::ZERO), out);
    }
}

/// Which engine to use (`--io-engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineChoice {
    Auto,
    Uring,
    Threads,
}

impl std::str::FromStr for EngineChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(EngineChoice::Auto),
            "uring" | "io_uring" | "io-uring" => Ok(EngineChoice::Uring),
            "threads" | "psync" => Ok(EngineChoice::Threads),
            other => Err(format!(
                "unknown I/O engine `{other}` (use auto, uring or threads)"
            )),
        }
    }
}

/// What the probe found for a folder: whether O_DIRECT opens there and whether
/// io_uring rings can be created in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub o_direct: bool,
    pub uring: bool,
}

/// Probes `dir` (which must exist) for O_DIRECT and the kernel for io_uring.
pub fn probe(dir: &Path) -> Capabilities {
    probe_why(dir).0
}

/// [`probe`], with why O_DIRECT is off when it is: the error of opening a
/// probe file with O_DIRECT in `dir` (a file system without it, tmpfs for one).
pub fn probe_why(dir: &Path) -> (Capabilities, Option<String>) {
    let probe_file = dir.join(".mailbench-odirect-probe");
    let direct = open_file(&probe_file, true, true, false);
    // The probe file is ours and empty: a failed removal leaves a harmless file.
    let _ = std::fs::remove_file(&probe_file);
    let why = direct.err().map(|e| {
        format!(
            "opening a file with O_DIRECT in {} failed: {e}",
            dir.display()
        )
    });
    let caps = Capabilities {
        o_direct: why.is_none(),
        uring: uring::available(),
    };
    (caps, why)
}

/// Opens (or creates) a file for engine I/O. `direct` adds O_DIRECT, `dsync`
/// O_DSYNC (every write durable on completion).
pub fn open_file(path: &Path, create: bool, direct: bool, dsync: bool) -> std::io::Result<File> {
    // A file mailbench may create is never reached through a symlink.
    engine_options(create, direct, dsync)
        .create(create)
        .truncate(false)
        .open(path)
}

/// Read-write options for engine I/O: `O_NOFOLLOW` when `nofollow`, `O_DIRECT`
/// when `direct`, `O_DSYNC` when `dsync`.
fn engine_options(nofollow: bool, direct: bool, dsync: bool) -> std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = if nofollow { libc::O_NOFOLLOW } else { 0 };
    if direct {
        flags |= libc::O_DIRECT;
    }
    if dsync {
        flags |= libc::O_DSYNC;
    }
    let mut o = std::fs::OpenOptions::new();
    o.read(true).write(true).custom_flags(flags);
    o
}

/// Creates `path`, which must not exist (not even as a symlink): a file
/// mailbench writes never replaces or reaches through anything already there.
pub fn create_new_file(path: &Path, direct: bool) -> std::io::Result<File> {
    create_new_file_with(path, direct, false)
}

/// [`create_new_file`], opened with `O_DSYNC` too when `dsync` (every write
/// durable when it completes).
pub fn create_new_file_with(path: &Path, direct: bool, dsync: bool) -> std::io::Result<File> {
    engine_options(true, direct, dsync)
        .create_new(true)
        .open(path)
}

/// An engine built, and why it is not the one `auto` prefers when it is not.
pub struct Built {
    pub engine: Box<dyn IoEngine>,
    /// Why `auto` fell back to the thread pool (io_uring unavailable, its setup
    /// failed, or no O_DIRECT); None when nothing fell back.
    pub fallback: Option<String>,
}

/// Builds an engine for `choice` given the probed capabilities; `depth` bounds the
/// requests in flight. Auto picks io_uring with O_DIRECT, else the thread pool,
/// and says why in [`Built::fallback`].
pub fn build(choice: EngineChoice, caps: Capabilities, depth: usize) -> Result<Built, String> {
    let pool =
        || -> Box<dyn IoEngine> { Box::new(threads::ThreadPoolEngine::new(depth.clamp(1, 64))) };
    let (engine, fallback): (Box<dyn IoEngine>, Option<String>) = match choice {
        EngineChoice::Uring => {
            if !caps.uring {
                return Err(
                    "io_uring is not available here (kernel too old, or disabled by \
                            /proc/sys/kernel/io_uring_disabled); use --io-engine threads"
                        .into(),
                );
            }
            let u = uring::UringEngine::new(depth).map_err(|e| format!("io_uring setup: {e}"))?;
            (Box::new(u), None)
        }
        EngineChoice::Threads => (pool(), None),
        EngineChoice::Auto => auto(caps, depth, pool),
    };
    Ok(Built {
        engine: faulty::wrap_from_env(engine)?,
        fallback,
    })
}

/// `auto`: io_uring when it is available and O_DIRECT is on, else the thread
/// pool (`pool`) and the reason.
fn auto(
    caps: Capabilities,
    depth: usize,
    pool: impl Fn() -> Box<dyn IoEngine>,
) -> (Box<dyn IoEngine>, Option<String>) {
    const POOL: &str = "the thread pool is used";
    if !caps.uring {
        let why = format!(
            "io_uring is not available here (kernel too old, or disabled by \
             /proc/sys/kernel/io_uring_disabled): {POOL}"
        );
        return (pool(), Some(why));
    }
    if !caps.o_direct {
        let why = format!("no O_DIRECT (auto uses io_uring only with O_DIRECT): {POOL}");
        return (pool(), Some(why));
    }
    match uring::UringEngine::new(depth) {
        Ok(u) => (Box::new(u), None),
        Err(e) => (pool(), Some(format!("io_uring setup failed ({e}): {POOL}"))),
    }
}

/// Free bytes for unprivileged users on the file system holding `path`.
pub fn free_space(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path, st a valid out-pointer.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Whether this process may create files in the folder `dir`, asked of the
/// kernel (`faccessat(2)` with the effective ids) without creating anything.
pub fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated path; no pointer is kept.
    let rc = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
    rc == 0
}

/// Allocates `len` bytes of disk for `file` (fallocate), so later writes cannot
/// fail for space and land in allocated extents.
pub fn preallocate(file: &File, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate on a valid open descriptor.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        // File systems without fallocate (tmpfs on old kernels): size it instead.
        if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
            return file.set_len(len);
        }
        return Err(e);
    }
    Ok(())
}

/// Renames `from` to `to` only if `to` does not exist (`renameat2` with
/// `RENAME_NOREPLACE`): `AlreadyExists` when it does, and an error too on file
/// systems without that flag (callers then keep to plain creation and removal).
pub fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: f and t are valid NUL-terminated paths; no pointer is kept.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the names in folder `dir` durable (fsync of the folder itself): a
/// rename is on disk only once its folder is.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Asks the CPU to bring `bytes` into its caches ahead of their use (one hint
/// per 64-byte line; no effect on what the program computes). The storage
/// engine touches rows of pages that sat in memory untouched for seconds: a
/// hint given before other work hides part of the wait for them.
#[inline]
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        // SAFETY: a prefetch hint never faults nor dereferences: any address is
        // allowed, and this one lies inside a live slice.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `auto` names why it did not use io_uring in every case it does not,
    /// and never falls back silently.
    #[test]
    fn auto_names_every_fallback() {
        for (uring, o_direct, needle) in [
            (false, true, "io_uring is not available"),
            (false, false, "io_uring is not available"),
            (true, false, "no O_DIRECT"),
        ] {
            let b = build(EngineChoice::Auto, Capabilities { o_direct, uring }, 8).unwrap();
            assert!(
                b.engine.name().starts_with("threads"),
                "{}",
                b.engine.name()
            );
            let why = b.fallback.unwrap_or_default();
            assert!(why.contains(needle), "{uring} {o_direct}: {why}");
        }
        let none = Capabilities {
            o_direct: false,
            uring: false,
        };
        assert!(
            build(EngineChoice::Threads, none, 8)
                .unwrap()
                .fallback
                .is_none()
        );
        let caps = Capabilities {
            o_direct: true,
            uring: false,
        };
        assert!(build(EngineChoice::Uring, caps, 8).is_err());
    }

    /// Writes then reads back through an engine, checking bytes and timing.
    pub(crate) fn round_trip(engine: &mut dyn IoEngine, direct: bool) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = Arc::new(open_file(&path, true, direct, false).unwrap());
        file.set_len(1 << 20).unwrap();
        for i in 0..8u64 {
            let mut buf = AlignedBuf::new(32768);
            buf.as_mut_slice().fill(i as u8 + 1);
            engine.submit(IoRequest {
                file: file.clone(),
                kind: OpKind::Write,
                offset: i * 32768,
                buf,
                tag: i,
                more: Vec::new(),
            });
        }
        let mut out = Vec::new();
        while out.len() < 8 {
            engine.wait(1, Some(Duration::from_secs(5)), &mut out);
        }
        assert!(out.iter().all(|c| c.full().is_ok()));
        engine.submit(IoRequest {
            file: file.clone(),
            kind: OpKind::Sync,
            offset: 0,
            buf: AlignedBuf::new(0),
            tag: 99,
            more: Vec::new(),
        });
        for i in 0..8u64 {
            engine.submit(IoRequest {
                file: file.clone(),
                kind: OpKind::Read,
                offset: i * 32768,
                buf: AlignedBuf::new(32768),
                tag: 100 + i,
                more: Vec::new(),
            });
        }
        let mut out = Vec::new();
        while out.len() < 9 {
            engine.wait(1, Some(Duration::from_secs(5)), &mut out);
        }
        assert_eq!(engine.in_flight(), 0);
        for c in out {
            c.full().unwrap();
            if c.kind == OpKind::Read {
                let want = (c.tag - 100) as u8 + 1;
                assert!(c.buf.as_slice().iter().all(|b| *b == want), "tag {}", c.tag);
                assert!(c.completed >= c.submitted);
            }
        }
    }

    #[test]
    fn thread_pool_round_trip() {
        round_trip(&mut threads::ThreadPoolEngine::new(4), false);
    }

    #[test]
    fn uring_round_trip_when_available() {
        if !uring::available() {
            eprintln!("io_uring not available: skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let direct = probe(dir.path()).o_direct;
        round_trip(&mut uring::UringEngine::new(16).unwrap(), direct);
    }

    /// A file in a fresh temporary folder for the io_uring tests, opened
    /// O_DIRECT where the folder's file system allows it; None (the test is
    /// skipped) where this process cannot create a ring.
    fn uring_test_file() -> Option<(tempfile::TempDir, Arc<File>)> {
        if !uring::available() {
            eprintln!("io_uring not available: skipped");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let direct = probe(dir.path()).o_direct;
        let file = Arc::new(open_file(&dir.path().join("f"), true, direct, false).unwrap());
        Some((dir, file))
    }

    /// A deep batch (the ring's whole depth) queued at once on an idle ring:
    /// every request completes once, with its own data, and a wait for all of
    /// them returns all of them.
    #[test]
    fn uring_deep_batch_round_trip() {
        let Some((_dir, file)) = uring_test_file() else {
            return;
        };
        let mut engine = uring::UringEngine::new(64).unwrap();
        for (kind, min) in [(OpKind::Write, 1), (OpKind::Read, 64)] {
            for (i, mut buf) in AlignedBuf::carve(64, 4096).into_iter().enumerate() {
                if kind == OpKind::Write {
                    buf.as_mut_slice().fill(i as u8 + 1);
                }
                let (file, offset, tag) = (file.clone(), i as u64 * 4096, i as u64);
                let more = Vec::new();
                engine.submit(IoRequest {
                    file,
                    kind,
                    offset,
                    buf,
                    tag,
                    more,
                });
            }
            let mut out = Vec::new();
            for _ in 0..100 {
                if out.len() == 64 {
                    break;
                }
                engine.wait(min, Some(Duration::from_secs(5)), &mut out);
            }
            assert_eq!(engine.in_flight(), 0);
            let mut tags: Vec<u64> = out.iter().map(|c| c.tag).collect();
            tags.sort_unstable();
            assert_eq!(tags, (0..64).collect::<Vec<u64>>());
            for c in out {
                c.full().unwrap();
                let want = c.tag as u8 + 1;
                assert!(c.buf.as_slice().iter().all(|b| *b == want), "tag {}", c.tag);
            }
        }
    }

    /// Buffers carved from regions go through io_uring as registered (fixed)
    /// buffers: writes land and reads fill the right memory.
    #[test]
    fn uring_fixed_buffers_round_trip() {
        let Some((_dir, file)) = uring_test_file() else {
            return;
        };
        file.set_len(1 << 20).unwrap();
        let mut engine = uring::UringEngine::new(16).unwrap();
        // Eight 32 KiB I/Os of `kind` from carved buffers; their completions.
        let mut all = |kind: OpKind, fill: bool| {
            for (i, mut buf) in AlignedBuf::carve(8, 32768).into_iter().enumerate().rev() {
                if fill {
                    buf.as_mut_slice().fill(i as u8 + 10);
                }
                let (file, offset, tag) = (file.clone(), i as u64 * 32768, i as u64);
                engine.submit(IoRequest {
                    file,
                    kind,
                    offset,
                    buf,
                    tag,
                    more: Vec::new(),
                });
            }
            let mut out = Vec::new();
            while out.len() < 8 {
                engine.wait(1, Some(Duration::from_secs(5)), &mut out);
            }
            out
        };
        assert!(all(OpKind::Write, true).iter().all(|c| c.full().is_ok()));
        for c in all(OpKind::Read, false) {
            c.full().unwrap();
            assert!(c.buf.as_slice().iter().all(|b| *b == c.tag as u8 + 10));
        }
        // The same bytes through plain reads: the file holds what was written.
        use std::os::unix::fs::FileExt;
        let mut plain = AlignedBuf::new(32768);
        file.read_exact_at(plain.as_mut_slice(), 3 * 32768).unwrap();
        assert!(plain.as_slice().iter().all(|b| *b == 13));
    }

    /// A vectored write of three buffers lands as one run of bytes; a vectored
    /// read fills each buffer with its own part. `spread`: each buffer in a
    /// region of its own (io_uring: a plain READV/WRITEV; else the three share
    /// one registered region: READV_FIXED/WRITEV_FIXED where the kernel has them).
    fn vectored_round_trip(engine: &mut dyn IoEngine, direct: bool, spread: bool) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        let file = Arc::new(open_file(&path, true, direct, false).unwrap());
        file.set_len(1 << 20).unwrap();
        let parts = |fill: bool| -> (AlignedBuf, Vec<AlignedBuf>) {
            let mut bufs: Vec<AlignedBuf> = if spread {
                (0..3).flat_map(|_| AlignedBuf::carve(1, 8192)).collect()
            } else {
                AlignedBuf::carve(3, 8192)
            };
            for (i, b) in bufs.iter_mut().enumerate() {
                if fill {
                    b.as_mut_slice().fill(i as u8 + 20);
                }
            }
            let first = bufs.remove(0);
            (first, bufs)
        };
        let mut one = |kind: OpKind, fill: bool| {
            let (buf, more) = parts(fill);
            let req = IoRequest {
                file: file.clone(),
                kind,
                offset: 16384,
                buf,
                tag: 1,
                more,
            };
            assert_eq!(req.len(), 3 * 8192);
            engine.submit(req);
            let mut out = Vec::new();
            while out.is_empty() {
                engine.wait(1, Some(Duration::from_secs(5)), &mut out);
            }
            out.remove(0)
        };
        let w = one(OpKind::Write, true);
        assert_eq!(w.full(), Ok(()));
        assert_eq!(w.more.len(), 2, "the buffers come back");
        use std::os::unix::fs::FileExt;
        let mut plain = AlignedBuf::new(3 * 8192);
        file.read_exact_at(plain.as_mut_slice(), 16384).unwrap();
        for (i, chunk) in plain.as_slice().chunks(8192).enumerate() {
            assert!(chunk.iter().all(|b| *b == i as u8 + 20), "part {i}");
        }
        let r = one(OpKind::Read, false);
        assert_eq!(r.full(), Ok(()));
        for (i, b) in std::iter::once(&r.buf).chain(r.more.iter()).enumerate() {
            assert!(b.as_slice().iter().all(|x| *x == i as u8 + 20), "part {i}");
        }
    }

    #[test]
    fn vectored_round_trip_on_both_engines() {
        vectored_round_trip(&mut threads::ThreadPoolEngine::new(2), false, false);
        if !uring::available() {
            eprintln!("io_uring not available: skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let direct = probe(dir.path()).o_direct;
        vectored_round_trip(&mut uring::UringEngine::new(8).unwrap(), direct, false);
        vectored_round_trip(&mut uring::UringEngine::new(8).unwrap(), direct, true);
    }

    #[test]
    fn engine_choice_parses() {
        assert_eq!("uring".parse::<EngineChoice>(), Ok(EngineChoice::Uring));
        assert!("spdk".parse::<EngineChoice>().unwrap_err().contains("spdk"));
    }

    #[test]
    fn rename_noreplace_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        std::fs::write(&a, b"old").unwrap();
        std::fs::write(&b, b"live").unwrap();
        let e = rename_noreplace(&a, &b).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&b).unwrap(), b"live");
        rename_noreplace(&a, &c).unwrap();
        assert!(!a.exists());
        assert_eq!(std::fs::read(&c).unwrap(), b"old");
        sync_dir(dir.path()).unwrap();
    }
}
