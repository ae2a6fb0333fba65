//! The MPI transport (rsmpi over the system MPI). Every wait is a poll
//! (MPI_Test / MPI_Improbe) so `check` can end it: a rank that died never
//! hangs the others. All MPI calls happen on the thread that initialised MPI.

use crate::{Check, Transport};
use mailbench_base::{Error, Result};
use mpi::Tag;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::time::Duration;

const TAG_BCAST: Tag = 71;
const TAG_GATHER: Tag = 72;
const POLL: Duration = Duration::from_millis(20);

pub struct Mpi {
    // Dropping the universe finalises MPI.
    _universe: Universe,
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    host: String,
}

impl Mpi {
    pub fn init() -> Result<Mpi> {
        let (universe, _level) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or_else(|| Error::runtime("MPI was already initialised in this process"))?;
        let world = universe.world();
        let rank = world.rank().max(0) as usize;
        let size = world.size().max(1) as usize;
        let host = mpi::environment::processor_name()
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(crate::hostname);
        Ok(Mpi {
            _universe: universe,
            world,
            rank,
            size,
            host,
        })
    }

    fn receive(&self, from: usize, tag: Tag, check: Check) -> Result<Vec<u8>> {
        let src = self.world.process_at_rank(from as i32);
        loop {
            if let Some(m) = src.immediate_matched_probe_with_tag(tag) {
                let (v, _) = m.matched_receive_vec::<u8>();
                return Ok(v);
            }
            check()?;
            std::thread::sleep(POLL);
        }
    }
}

impl Transport for Mpi {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn host(&self) -> String {
        self.host.clone()
    }
    fn kind(&self) -> &'static str {
        "mpi"
    }

    fn barrier(&self, check: Check) -> Result<()> {
        let mut req = self.world.immediate_barrier();
        loop {
            match req.test() {
                Ok(_) => return Ok(()),
                Err(r) => req = r,
            }
            if let Err(e) = check() {
                // An unfinished request must not be dropped (rsmpi aborts);
                // the job ends soon after anyway.
                std::mem::forget(req);
                return Err(e);
            }
            std::thread::sleep(POLL);
        }
    }

    fn broadcast(&self, data: &[u8], check: Check) -> Result<Vec<u8>> {
        if self.rank == 0 {
            for r in 1..self.size {
                self.world
                    .process_at_rank(r as i32)
                    .send_with_tag(data, TAG_BCAST);
            }
            Ok(data.to_vec())
        } else {
            self.receive(0, TAG_BCAST, check)
        }
    }

    fn gather(
        &self,
        data: &[u8],
        skip: &dyn Fn() -> Vec<usize>,
        check: Check,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        if self.rank != 0 {
            self.world
                .process_at_rank(0)
                .send_with_tag(data, TAG_GATHER);
            return Ok(Vec::new());
        }
        let mut out: Vec<Option<Vec<u8>>> = vec![None; self.size];
        out[0] = Some(data.to_vec());
        let mut waiting: Vec<usize> = (1..self.size).collect();
        while !waiting.is_empty() {
            let skipped = skip();
            waiting.retain(|r| !skipped.contains(r));
            let mut got = None;
            for &r in &waiting {
                if let Some(m) = self
                    .world
                    .process_at_rank(r as i32)
                    .immediate_matched_probe_with_tag(TAG_GATHER)
                {
                    let (v, _) = m.matched_receive_vec::<u8>();
                    out[r] = Some(v);
                    got = Some(r);
                    break;
                }
            }
            match got {
                Some(r) => waiting.retain(|w| *w != r),
                None => {
                    if waiting.is_empty() {
                        break;
                    }
                    check()?;
                    std::thread::sleep(POLL);
                }
            }
        }
        Ok(out)
    }

    fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }
}
