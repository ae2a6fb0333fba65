//! io_uring engine: one ring, requests kept in a slab until their completion.

use crate::buf::Region;
use crate::{AlignedBuf, IoCompletion, IoEngine, IoRequest, OpKind};
use io_uring::{IoUring, opcode, squeue, types};
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Regions (of [`AlignedBuf::carve`]) registered as fixed buffers at most: the
/// kernel pins a registered region once instead of the pages of every I/O.
const FIXED_SLOTS: u32 = 512;

/// Whether this process can create an io_uring.
pub fn available() -> bool {
    if let Ok(v) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        && v.trim() == "2"
    {
        return false;
    }
    IoUring::new(2).is_ok()
}

struct InFlight {
    req: IoRequest,
    submitted: Instant,
    /// A vectored request's iovecs, read by the kernel until its completion.
    _iov: Iovecs,
}

/// The iovecs of a vectored request (none for a plain one).
struct Iovecs(Vec<libc::iovec>);

// The iovecs point into the buffers of the request they travel with.
unsafe impl Send for Iovecs {}

pub struct UringEngine {
    ring: IoUring,
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    in_flight: usize,
    /// Entries pushed to the SQ but not yet submitted.
    unsubmitted: usize,
    /// Completions delivered early (from a full-queue submit).
    ready: Vec<IoCompletion>,
    /// Fixed-buffer index of each region seen, by start address (None: the
    /// kernel refused to register it, e.g. over the locked-memory limit);
    /// `fixed_ok` false once registering is unavailable (old kernel).
    fixed: HashMap<usize, Option<u16>>,
    fixed_ok: bool,
    /// Whether the kernel has READV_FIXED and WRITEV_FIXED (Linux 6.15+).
    vectored_fixed: bool,
    /// The registered regions, kept mapped until the ring (dropped first) is gone.
    fixed_regions: Vec<Arc<Region>>,
}

impl UringEngine {
    /// A ring for `depth` requests in flight. Plain setup (CQSIZE only):
    /// COOP_TASKRUN, SINGLE_ISSUER + DEFER_TASKRUN (with TASKRUN_FLAG, the ring
    /// enabled on its using thread) and registered files were measured and saved
    /// no CPU per I/O here, on `storage run` paced or not nor on io-bench
    /// (docs/ARCHITECTURE.md, "Performance notes", fifth and seventh rounds).
    pub fn new(depth: usize) -> std::io::Result<UringEngine> {
        let entries = depth.clamp(2, 4096).next_power_of_two() as u32;
        let ring = IoUring::builder()
            .setup_cqsize(entries * 2)
            .build(entries)?;
        let fixed_ok = ring
            .submitter()
            .register_buffers_sparse(FIXED_SLOTS)
            .is_ok();
        let mut probe = io_uring::Probe::new();
        let vectored_fixed = fixed_ok
            && ring.submitter().register_probe(&mut probe).is_ok()
            && probe.is_supported(opcode::ReadvFixed::CODE)
            && probe.is_supported(opcode::WritevFixed::CODE);
        Ok(UringEngine {
            ring,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            unsubmitted: 0,
            ready: Vec::new(),
            fixed: HashMap::new(),
            fixed_ok,
            vectored_fixed,
            fixed_regions: Vec::new(),
        })
    }

    /// The fixed-buffer index for `buf`'s region, registering the region on its
    /// first use. None: not carved from a region, registering is unavailable,
    /// or the kernel refused this region (it is not asked again; smaller
    /// regions may still fit under the locked-memory limit).
    fn fixed_index(&mut self, buf: &AlignedBuf) -> Option<u16> {
        let region = buf.region()?;
        let (base, len) = region.span();
        if let Some(&i) = self.fixed.get(&base) {
            return i;
        }
        if !self.fixed_ok || self.fixed_regions.len() >= FIXED_SLOTS as usize {
            return None;
        }
        let index = self.fixed_regions.len() as u16;
        let iov = libc::iovec {
            iov_base: base as *mut libc::c_void,
            iov_len: len,
        };
        // SAFETY: the region stays mapped while registered: `fixed_regions` holds
        // it until the ring, dropped before it, has unregistered everything.
        let registered = unsafe {
            self.ring
                .submitter()
                .register_buffers_update(u32::from(index), &[iov], None)
        };
        if let Err(e) = registered {
            record(len, Some(&e));
            // Out of locked memory: this region only; anything else: none.
            self.fixed_ok = e.raw_os_error() == Some(libc::ENOMEM);
            self.fixed.insert(base, None);
            return None;
        }
        record(len, None);
        self.fixed.insert(base, Some(index));
        self.fixed_regions.push(region.clone());
        Some(index)
    }

    /// The fixed-buffer index for a vectored request whose buffers all lie in
    /// one registered region (READV_FIXED and WRITEV_FIXED take one index for
    /// all their iovecs); None otherwise: a plain vectored request, whose pages
    /// the kernel pins per I/O.
    fn vectored_fixed_index(&mut self, req: &IoRequest) -> Option<u16> {
        if !self.vectored_fixed {
            return None;
        }
        let base = req.buf.region()?.span().0;
        if req
            .more
            .iter()
            .any(|b| b.region().map(|r| r.span().0) != Some(base))
        {
            return None;
        }
        self.fixed_index(&req.buf)
    }

    fn entry(
        slot: usize,
        req: &mut IoRequest,
        fixed: Option<u16>,
        iov: &[libc::iovec],
    ) -> squeue::Entry {
        let fd = types::Fd(req.file.as_raw_fd());
        let len = req.buf.len() as u32;
        let e = match (req.kind, fixed) {
            (OpKind::Read, Some(i)) if !iov.is_empty() => {
                opcode::ReadvFixed::new(fd, iov.as_ptr(), iov.len() as u32, i)
                    .offset(req.offset)
                    .build()
            }
            (OpKind::Write, Some(i)) if !iov.is_empty() => {
                opcode::WritevFixed::new(fd, iov.as_ptr(), iov.len() as u32, i)
                    .offset(req.offset)
                    .build()
            }
            (OpKind::Read, _) if !iov.is_empty() => {
                opcode::Readv::new(fd, iov.as_ptr(), iov.len() as u32)
                    .offset(req.offset)
                    .build()
            }
            (OpKind::Write, _) if !iov.is_empty() => {
                opcode::Writev::new(fd, iov.as_ptr(), iov.len() as u32)
                    .offset(req.offset)
                    .build()
            }
            (OpKind::Read, Some(i)) => opcode::ReadFixed::new(fd, req.buf.as_mut_ptr(), len, i)
                .offset(req.offset)
                .build(),
            (OpKind::Write, Some(i)) => opcode::WriteFixed::new(fd, req.buf.as_ptr(), len, i)
                .offset(req.offset)
                .build(),
            (OpKind::Read, None) => opcode::Read::new(fd, req.buf.as_mut_ptr(), len)
                .offset(req.offset)
                .build(),
            (OpKind::Write, None) => opcode::Write::new(fd, req.buf.as_ptr(), len)
                .offset(req.offset)
                .build(),
            (OpKind::Sync, _) => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
        };
        e.user_data(slot as u64)
    }

    fn submit_pending(&mut self, want: usize, timeout: Option<Duration>) {
        let ts;
        let res = match timeout {
            Some(t) if want > 0 => {
                ts = types::Timespec::new()
                    .sec(t.as_secs())
                    .nsec(t.subsec_nanos());
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
            _ => self.ring.submitter().submit_and_wait(want),
        };
        match res {
            Ok(n) => self.unsubmitted = self.unsubmitted.saturating_sub(n),
            // ETIME (timeout), EINTR, EBUSY (CQ overflow pending): reap and go on.
            Err(_) => {
                if self.ring.submission().is_empty() {
                    self.unsubmitted = 0;
                }
            }
        }
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>) -> usize {
        let now = Instant::now();
        let mut n = 0;
        // Fields borrowed apart: the completion queue and the slab.
        let (ring, slots, free) = (&mut self.ring, &mut self.slots, &mut self.free);
        for cqe in ring.completion() {
            let (slot, res) = (cqe.user_data() as usize, cqe.result());
            let Some(Some(f)) = slots.get_mut(slot).map(Option::take) else {
                continue;
            };
            free.push(slot);
            n += 1;
            let result = if res >= 0 {
                Ok(res as usize)
            } else {
                Err(-res)
            };
            out.push(f.req.complete(result, f.submitted, now));
        }
        self.in_flight -= n;
        n
    }
}

impl IoEngine for UringEngine {
    fn name(&self) -> String {
        "uring".into()
    }

    fn submit(&mut self, mut req: IoRequest) {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        let vectored = req.kind != OpKind::Sync && !req.more.is_empty();
        let fixed = if req.kind == OpKind::Sync {
            None
        } else if vectored {
            self.vectored_fixed_index(&req)
        } else {
            self.fixed_index(&req.buf)
        };
        // A vectored request's iovecs: their heap memory stays put when the
        // vector moves into the slot below.
        let iov = Iovecs(if vectored {
            crate::iovecs(&mut req)
        } else {
            Vec::new()
        });
        let entry = Self::entry(slot, &mut req, fixed, &iov.0);
        self.slots[slot] = Some(InFlight {
            req,
            submitted: Instant::now(),
            _iov: iov,
        });
        self.in_flight += 1;
        loop {
            // SAFETY: the buffer and file live in `self.slots` until the completion
            // for `slot` is reaped, so the kernel's pointers stay valid.
            let pushed = unsafe { self.ring.submission().push(&entry).is_ok() };
            if pushed {
                self.unsubmitted += 1;
                return;
            }
            // SQ full: hand it to the kernel, keeping completions for later.
            self.submit_pending(0, None);
            let mut early = Vec::new();
            self.reap(&mut early);
            self.ready.append(&mut early);
        }
    }

    fn wait(&mut self, min: usize, timeout: Option<Duration>, out: &mut Vec<IoCompletion>) {
        let mut got = self.ready.len();
        out.append(&mut self.ready);
        // Completions already posted need no system call; when more are wanted,
        // one io_uring_enter both hands the queued requests over and waits.
        got += self.reap(out);
        let want = min.min(got + self.in_flight);
        if got >= want || timeout == Some(Duration::ZERO) {
            if self.unsubmitted > 0 {
                self.submit_pending(0, None);
                got += self.reap(out);
            }
        } else {
            let deadline = timeout.map(|t| Instant::now() + t);
            while got < want && self.in_flight > 0 {
                let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                if left == Some(Duration::ZERO) {
                    break;
                }
                self.submit_pending(want - got, left);
                got += self.reap(out);
            }
        }
        if min == 0
            && got == 0
            && self.in_flight == 0
            && let Some(t) = timeout
        {
            std::thread::sleep(t);
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn queued(&self) -> usize {
        self.unsubmitted
    }

    fn poll(&mut self, out: &mut Vec<IoCompletion>) {
        out.append(&mut self.ready);
        self.reap(out);
    }
}

impl Drop for UringEngine {
    fn drop(&mut self) {
        // Buffers must outlive the kernel's use of them: drain what is in flight.
        let mut sink = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.in_flight > 0 && Instant::now() < deadline {
            self.submit_pending(1, Some(Duration::from_millis(100)));
            self.reap(&mut sink);
        }
        if self.in_flight > 0 {
            // Never free memory the kernel may still write: leak it instead.
            for s in self.slots.drain(..).flatten() {
                std::mem::forget(s.req.buf);
                std::mem::forget(s.req.more);
            }
        }
    }
}

/// Buffer regions registered with io_uring (fixed buffers) in this process,
/// and those the kernel refused.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FixedBuffers {
    pub registered: u64,
    pub registered_bytes: u64,
    pub refused: u64,
    pub refused_bytes: u64,
    /// The kernel's first refusal.
    pub first_error: Option<String>,
    /// Whether that refusal was ENOMEM (the locked-memory limit).
    pub out_of_locked_memory: bool,
}

static FIXED: Mutex<FixedBuffers> = Mutex::new(FixedBuffers {
    registered: 0,
    registered_bytes: 0,
    refused: 0,
    refused_bytes: 0,
    first_error: None,
    out_of_locked_memory: false,
});

/// Counts one region registered (`err` None) or refused.
fn record(len: usize, err: Option<&std::io::Error>) {
    let mut f = match FIXED.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    match err {
        None => {
            f.registered += 1;
            f.registered_bytes += len as u64;
        }
        Some(e) => {
            f.refused += 1;
            f.refused_bytes += len as u64;
            if f.first_error.is_none() {
                f.first_error = Some(e.to_string());
                f.out_of_locked_memory = e.raw_os_error() == Some(libc::ENOMEM);
            }
        }
    }
}

/// The fixed buffers of this process so far.
pub fn fixed_buffers() -> FixedBuffers {
    match FIXED.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    }
}

/// This process's locked-memory limit (soft, bytes; None: unlimited or unreadable).
pub fn memlock_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } == 0;
    (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// A sentence for the run's log when some buffer regions could not be
/// registered (None when every region was, or io_uring never tried).
pub fn fixed_buffers_note() -> Option<String> {
    note(&fixed_buffers(), memlock_limit())
}

/// The same in a few words, for the result's I/O engine: how much was not
/// registered and the limit (None as for [`fixed_buffers_note`]).
pub fn fixed_buffers_short() -> Option<String> {
    short(&fixed_buffers(), memlock_limit())
}

fn short(f: &FixedBuffers, memlock: Option<u64>) -> Option<String> {
    if f.refused == 0 {
        return None;
    }
    let mut s = format!(
        "{} of {} in buffers not registered",
        mib(f.refused_bytes),
        mib(f.registered_bytes + f.refused_bytes)
    );
    if f.out_of_locked_memory {
        s.push_str(&format!(
            " (RLIMIT_MEMLOCK {})",
            memlock.map_or("unlimited".into(), mib)
        ));
    }
    Some(s)
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
}

/// The note of [`fixed_buffers_note`] from the figures and the limit.
fn note(f: &FixedBuffers, memlock: Option<u64>) -> Option<String> {
    if f.refused == 0 {
        return None;
    }
    let why = f.first_error.as_deref().unwrap_or("refused");
    let limit = memlock.map_or("unlimited".into(), mib);
    let mut s = format!(
        "io_uring buffers: {} of {} regions registered ({} of {}); {} not ({why}), so the kernel \
         pins their pages on every I/O (more CPU per I/O)",
        f.registered,
        f.registered + f.refused,
        mib(f.registered_bytes),
        mib(f.registered_bytes + f.refused_bytes),
        mib(f.refused_bytes),
    );
    if f.out_of_locked_memory {
        s.push_str(&format!(
            ". The locked-memory limit (RLIMIT_MEMLOCK) is {limit}: raise it to the cache size \
             or more (`ulimit -l unlimited`, LimitMEMLOCK=infinity in a systemd unit, \
             `memlock` in /etc/security/limits.conf) or run with CAP_IPC_LOCK"
        ));
    }
    Some(s)
}

#[allow(dead_code)]
fn _assert_send(_: &AlignedBuf, _: Arc<()>) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_names_what_was_not_registered_and_how_to_raise_the_limit() {
        assert_eq!(note(&FixedBuffers::default(), Some(8 << 20)), None);
        let f = FixedBuffers {
            registered: 1,
            registered_bytes: 2 << 20,
            refused: 2,
            refused_bytes: 2 << 30,
            first_error: Some("Cannot allocate memory (os error 12)".into()),
            out_of_locked_memory: true,
        };
        let n = note(&f, Some(8 << 20)).unwrap();
        assert!(
            n.contains("1 of 3 regions registered (2 MiB of 2050 MiB)"),
            "{n}"
        );
        assert!(n.contains("2048 MiB not (Cannot allocate memory"), "{n}");
        assert!(n.contains("RLIMIT_MEMLOCK) is 8 MiB"), "{n}");
        assert!(n.contains("ulimit -l"), "{n}");
        let other = FixedBuffers {
            out_of_locked_memory: false,
            first_error: Some("Invalid argument (os error 22)".into()),
            ..f
        };
        assert!(!note(&other, None).unwrap().contains("RLIMIT_MEMLOCK"));
        assert_eq!(
            short(&f, Some(8 << 20)).as_deref(),
            Some("2048 MiB of 2050 MiB in buffers not registered (RLIMIT_MEMLOCK 8 MiB)")
        );
        assert_eq!(short(&FixedBuffers::default(), None), None);
    }
}
