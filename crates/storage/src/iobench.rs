//! A raw I/O benchmark through mailbench's I/O layer (the same engines the
//! database engine uses), for comparing with fio on the same file
//! (`bench/storage-vs-fio.sh`).

use mailbench_base::{Error, Result};
use mailbench_io::{AlignedBuf, EngineChoice, IoRequest, OpKind};
use mailbench_metrics::LatencyHist;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize)]
pub struct IoBenchResult {
    pub engine: String,
    pub o_direct: bool,
    pub block_size: u64,
    pub queue_depth: usize,
    pub seconds: f64,
    pub ops: u64,
    pub iops: f64,
    pub mb_per_s: f64,
    pub errors: u64,
    pub lat_avg_us: f64,
    pub lat_p50_us: u64,
    pub lat_p99_us: u64,
}

/// Random reads (or sequential, `sequential`) of `bs` bytes at queue depth `qd`
/// over the existing file `path` for `runtime`.
pub fn run(
    path: &Path,
    bs: u64,
    qd: usize,
    runtime: Duration,
    engine: EngineChoice,
    sequential: bool,
) -> Result<IoBenchResult> {
    let len = std::fs::metadata(path)
        .map_err(|e| Error::io("cannot stat", path, e))?
        .len();
    if bs == 0 || !bs.is_multiple_of(4096) || len < bs {
        return Err(Error::usage(format!(
            "block size {bs} must be a multiple of 4096 and fit in {}",
            path.display()
        )));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let caps = mailbench_io::probe(dir);
    let file = Arc::new(
        mailbench_io::open_file(path, false, caps.o_direct, false)
            .map_err(|e| Error::io("cannot open", path, e))?,
    );
    let mut io = mailbench_io::build(engine, caps, qd)
        .map_err(Error::usage)?
        .engine;
    let blocks = len / bs;
    let mut rng = SmallRng::seed_from_u64(42);
    let mut next_seq = 0u64;
    let mut hist = LatencyHist::new();
    let (mut ops, mut errors) = (0u64, 0u64);
    // Buffers carved from regions, as the engine's cache and pools are (so the
    // kernel sees registered buffers where it can).
    let mut spare: Vec<AlignedBuf> = AlignedBuf::carve(qd, bs as usize);
    let mut done = Vec::with_capacity(qd);
    let t0 = Instant::now();
    let end = t0 + runtime;
    loop {
        let now = Instant::now();
        while now < end && io.in_flight() < qd {
            let Some(buf) = spare.pop() else { break };
            let b = if sequential {
                next_seq = (next_seq + 1) % blocks;
                next_seq
            } else {
                rng.random_range(0..blocks)
            };
            io.submit(IoRequest {
                file: file.clone(),
                kind: OpKind::Read,
                offset: b * bs,
                buf,
                tag: 0,
                more: Vec::new(),
            });
        }
        if io.in_flight() == 0 {
            break;
        }
        done.clear();
        io.wait(1, Some(Duration::from_millis(100)), &mut done);
        for c in done.drain(..) {
            if c.full().is_ok() {
                ops += 1;
                hist.record(c.latency());
            } else {
                errors += 1;
            }
            spare.push(c.buf);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let s = hist.summary();
    Ok(IoBenchResult {
        engine: io.name(),
        o_direct: caps.o_direct,
        block_size: bs,
        queue_depth: qd,
        seconds: secs,
        ops,
        iops: ops as f64 / secs,
        mb_per_s: (ops * bs) as f64 / secs / 1e6,
        errors,
        lat_avg_us: s.mean_us,
        lat_p50_us: s.p50_us,
        lat_p99_us: s.p99_us,
    })
}
