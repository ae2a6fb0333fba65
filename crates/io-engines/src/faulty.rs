//! Fault injection (test-only switch): wraps an engine and fails a share of reads
//! or writes with an errno, or delays completions.
//!
//! `MAILBENCH_FAULTS="read_fail=0.01,write_fail=0.05,errno=EIO|ENOSPC,delay_ms=20,delay_share=0.1,after=1000,seed=7"`
//! `after` lets the first N operations through untouched (e.g. let init finish).

use crate::{AlignedBuf, IoCompletion, IoEngine, IoRequest, OpKind};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
pub struct FaultSpec {
    pub read_fail: f64,
    pub write_fail: f64,
    pub errno: i32,
    pub delay: Duration,
    pub delay_share: f64,
    pub after: u64,
    pub seed: u64,
}

impl FaultSpec {
    pub fn parse(text: &str) -> Result<FaultSpec, String> {
        let mut s = FaultSpec {
            read_fail: 0.0,
            write_fail: 0.0,
            errno: libc::EIO,
            delay: Duration::ZERO,
            delay_share: 1.0,
            after: 0,
            seed: 1,
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or(format!("fault `{part}` is not key=value"))?;
            let num = |v: &str| {
                v.parse::<f64>()
                    .map_err(|_| format!("fault {k}={v} is not a number"))
            };
            match k {
                "read_fail" => s.read_fail = num(v)?,
                "write_fail" => s.write_fail = num(v)?,
                "errno" => {
                    s.errno = match v {
                        "EIO" => libc::EIO,
                        "ENOSPC" => libc::ENOSPC,
                        other => other
                            .parse()
                            .map_err(|_| format!("unknown errno {other}"))?,
                    }
                }
                "delay_ms" => s.delay = Duration::from_secs_f64(num(v)? / 1000.0),
                "delay_share" => s.delay_share = num(v)?,
                "after" => s.after = num(v)? as u64,
                "seed" => s.seed = num(v)? as u64,
                other => return Err(format!("unknown fault key `{other}`")),
            }
        }
        Ok(s)
    }
}

/// Wraps `engine` when `MAILBENCH_FAULTS` is set and valid.
pub fn wrap_from_env(engine: Box<dyn IoEngine>) -> Result<Box<dyn IoEngine>, String> {
    Ok(match from_env()? {
        Some(spec) => Box::new(FaultyEngine::new(engine, spec)),
        None => engine,
    })
}

/// The fault plan `MAILBENCH_FAULTS` asks for (None: unset or blank); a value
/// that does not parse is an error naming the variable, never ignored.
pub fn from_env() -> Result<Option<FaultSpec>, String> {
    match std::env::var("MAILBENCH_FAULTS") {
        Ok(t) if !t.trim().is_empty() => FaultSpec::parse(&t)
            .map(Some)
            .map_err(|e| format!("MAILBENCH_FAULTS = {t:?}: {e}; fix or unset it")),
        Ok(_) => Ok(None),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err("MAILBENCH_FAULTS is not valid UTF-8; fix or unset it".into())
        }
    }
}

pub struct FaultyEngine {
    inner: Box<dyn IoEngine>,
    spec: FaultSpec,
    ops: u64,
    rng: u64,
    failed: Vec<IoCompletion>,
    delayed: Vec<(Instant, IoCompletion)>,
}

impl FaultyEngine {
    pub fn new(inner: Box<dyn IoEngine>, spec: FaultSpec) -> FaultyEngine {
        let rng = spec.seed.max(1);
        FaultyEngine {
            inner,
            spec,
            ops: 0,
            rng,
            failed: Vec::new(),
            delayed: Vec::new(),
        }
    }

    fn chance(&mut self) -> f64 {
        // xorshift64*: deterministic per seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545F4914F6CDD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl IoEngine for FaultyEngine {
    fn name(&self) -> String {
        format!("faulty({})", self.inner.name())
    }

    fn submit(&mut self, req: IoRequest) {
        self.ops += 1;
        let share = match req.kind {
            OpKind::Read => self.spec.read_fail,
            OpKind::Write | OpKind::Sync => self.spec.write_fail,
        };
        if self.ops > self.spec.after && share > 0.0 && self.chance() < share {
            let now = Instant::now();
            self.failed
                .push(req.complete(Err(self.spec.errno), now, now));
            return;
        }
        self.inner.submit(req);
    }

    fn wait(&mut self, min: usize, timeout: Option<Duration>, out: &mut Vec<IoCompletion>) {
        let mut got = self.failed.len();
        out.append(&mut self.failed);
        let mut inner_out = Vec::new();
        let want = min.saturating_sub(got);
        let timeout = if want > 0 && self.inner.in_flight() == 0 && !self.delayed.is_empty() {
            Some(Duration::from_millis(1))
        } else {
            timeout
        };
        self.inner.wait(want, timeout, &mut inner_out);
        for c in inner_out {
            if self.spec.delay > Duration::ZERO
                && self.ops > self.spec.after
                && self.chance() < self.spec.delay_share
            {
                self.delayed.push((c.completed + self.spec.delay, c));
            } else {
                out.push(c);
                got += 1;
            }
        }
        let now = Instant::now();
        let mut i = 0;
        while i < self.delayed.len() {
            if self.delayed[i].0 <= now {
                let (at, mut c) = self.delayed.swap_remove(i);
                c.completed = at;
                out.push(c);
                got += 1;
            } else {
                i += 1;
            }
        }
        let _ = got;
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.failed.len() + self.delayed.len()
    }
}

#[allow(dead_code)]
fn _unused(_: AlignedBuf) {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::ThreadPoolEngine;
    use std::sync::Arc;

    #[test]
    fn spec_parses_and_rejects() {
        let s = FaultSpec::parse("write_fail=0.5,errno=ENOSPC,after=10").unwrap();
        assert_eq!(s.write_fail, 0.5);
        assert_eq!(s.errno, libc::ENOSPC);
        assert_eq!(s.after, 10);
        assert!(
            FaultSpec::parse("explode=1")
                .unwrap_err()
                .contains("explode")
        );
    }

    #[test]
    fn fails_the_chosen_share() {
        let dir = tempfile::tempdir().unwrap();
        let file = Arc::new(crate::open_file(&dir.path().join("f"), true, false, false).unwrap());
        let spec = FaultSpec::parse("write_fail=1.0,after=5").unwrap();
        let mut e = FaultyEngine::new(Box::new(ThreadPoolEngine::new(2)), spec);
        for i in 0..10 {
            e.submit(IoRequest {
                file: file.clone(),
                kind: OpKind::Write,
                offset: i * 4096,
                buf: AlignedBuf::new(4096),
                tag: i,
                more: Vec::new(),
            });
        }
        let mut out = Vec::new();
        while out.len() < 10 {
            e.wait(10 - out.len(), Some(Duration::from_secs(5)), &mut out);
        }
        let failed = out.iter().filter(|c| c.result == Err(libc::EIO)).count();
        assert_eq!(failed, 5, "the first 5 pass, the rest fail");
    }
}
