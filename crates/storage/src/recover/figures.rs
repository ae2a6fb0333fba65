//! The figures of one instance's replay: what it read, applied and wrote,
//! per log file and before/at the checkpoint, and where it stopped.

use super::{Replay, ReplayResult};
use crate::verify;

impl Replay {
    /// Fills the result of a finished replay; `end` is the end of the log (the
    /// last complete record).
    pub(super) fn figures(&mut self, r: &mut ReplayResult, end: u64) {
        let secs = self.t0.elapsed().as_secs_f64();
        let own = match (&self.cpu0, mailbench_metrics::system::thread_cpu_s()) {
            (Ok(a), Ok(b)) => b - a,
            (Err(e), _) => {
                let e = e.clone();
                self.errors
                    .push(format!("the replay's CPU figure is missing: {e}"));
                0.0
            }
            (_, Err(e)) => {
                self.errors
                    .push(format!("the replay's CPU figure is missing: {e}"));
                0.0
            }
        };
        r.cpu_seconds = own + self.memory.cpu_s();
        let files = self.gens_seen.len() as u64;
        r.start_lsn = self.start_lsn;
        r.end_lsn = end;
        r.log_files_replayed = files;
        r.log_bytes = self.log_bytes;
        r.records = self.records;
        r.transactions = self.transactions;
        r.updates_applied = self.applied;
        r.updates_skipped = self.skipped;
        r.uncommitted_updates_dropped = self.dropped;
        r.seconds = secs;
        r.seconds_per_log_file = if files > 0 { secs / files as f64 } else { 0.0 };
        r.db_reads_per_log_file = if files > 0 {
            self.db_read.ops as f64 / files as f64
        } else {
            0.0
        };
        r.db_writes_per_read = if self.db_read.ops > 0 {
            self.db_write.ops as f64 / self.db_read.ops as f64
        } else {
            0.0
        };
        let (t_flush, before) = self
            .flush_start
            .map(|(t, w)| (t.elapsed().as_secs_f64(), w))
            .unwrap_or((0.0, self.db_write.ops));
        r.db_writes_during_replay = before.min(self.db_write.ops);
        r.db_writes_at_checkpoint = self.db_write.ops - r.db_writes_during_replay;
        r.checkpoint_seconds = t_flush;
        r.db_read = verify::figures(&self.db_read, secs);
        r.db_write = verify::figures(&self.db_write, secs);
        r.log_read = verify::figures(&self.log_read, secs);
        r.stopped = std::mem::take(&mut self.stopped);
        if self.interrupted {
            r.stopped = "interrupted".into();
        }
        r.log_damaged = self.damaged;
        r.bad_pages = std::mem::take(&mut self.bad_pages);
        r.errors = std::mem::take(&mut self.errors);
    }
}
