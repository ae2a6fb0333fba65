//! io_uring engine: one ring, requests kept in a slab until their completion.

use crate::{AlignedBuf, IoCompletion, IoEngine, IoRequest, OpKind};
use io_uring::{IoUring, opcode, squeue, types};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
}

pub struct UringEngine {
    ring: IoUring,
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    in_flight: usize,
    /// Entries pushed to the SQ but not yet submitted.
    unsubmitted: usize,
    /// Completions delivered early (from a full-queue submit).
    ready: Vec<IoCompletion>,
}

impl UringEngine {
    pub fn new(depth: usize) -> std::io::Result<UringEngine> {
        let entries = depth.clamp(2, 4096).next_power_of_two() as u32;
        let ring = IoUring::builder()
            .setup_cqsize(entries * 2)
            .build(entries)?;
        Ok(UringEngine {
            ring,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            unsubmitted: 0,
            ready: Vec::new(),
        })
    }

    fn entry(slot: usize, req: &mut IoRequest) -> squeue::Entry {
        let fd = types::Fd(req.file.as_raw_fd());
        let len = req.buf.len() as u32;
        let e = match req.kind {
            OpKind::Read => opcode::Read::new(fd, req.buf.as_mut_ptr(), len)
                .offset(req.offset)
                .build(),
            OpKind::Write => opcode::Write::new(fd, req.buf.as_ptr(), len)
                .offset(req.offset)
                .build(),
            OpKind::Sync => opcode::Fsync::new(fd)
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
            out.push(IoCompletion {
                tag: f.req.tag,
                kind: f.req.kind,
                offset: f.req.offset,
                buf: f.req.buf,
                result: if res >= 0 {
                    Ok(res as usize)
                } else {
                    Err(-res)
                },
                submitted: f.submitted,
                completed: now,
            });
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
        let entry = Self::entry(slot, &mut req);
        self.slots[slot] = Some(InFlight {
            req,
            submitted: Instant::now(),
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
        let deadline = timeout.map(|t| Instant::now() + t);
        if self.unsubmitted > 0 {
            self.submit_pending(0, None);
        }
        got += self.reap(out);
        while got < min.min(got + self.in_flight) && self.in_flight > 0 {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                break;
            }
            self.submit_pending(1, left);
            got += self.reap(out);
        }
        if min == 0
            && got == 0
            && self.in_flight == 0
            && let Some(d) = deadline
        {
            std::thread::sleep(d.saturating_duration_since(Instant::now()));
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
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
            }
        }
    }
}

#[allow(dead_code)]
fn _assert_send(_: &AlignedBuf, _: Arc<()>) {}
