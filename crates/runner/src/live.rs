//! Rank 0's live view of a test over several ranks: each interval's figures
//! of every rank, aggregated into one line on the terminal (storage or mail)
//! and, for storage, handed to the live slot (the Prometheus endpoint). The
//! result never comes from these: it merges histograms exactly.

use mailbench_multihost::watch::{IntervalHook, LiveMsg, MailLive};
use std::sync::{Arc, Mutex};

/// Rank 0's live aggregate of a test over several ranks goes here too (the
/// Prometheus endpoint of a storage run), besides the terminal.
pub(crate) type LiveSlot = Arc<Mutex<Option<Box<dyn mailbench_storage::run::Progress + Send>>>>;

/// Rank 0 printing each interval's aggregate of every rank (and handing it
/// to the live slot).
pub(crate) fn interval_hook(mail: bool, size: usize, quiet: bool, live: LiveSlot) -> IntervalHook {
    Box::new(move |parts: &[LiveMsg]| {
        if mail {
            if !quiet {
                print_mail(parts, size);
            }
            return;
        }
        let agg = LiveMsg::aggregate(parts);
        if !quiet {
            mailbench_base::secrets::warn(&agg.progress_line(Some(size)));
        }
        if let Ok(mut slot) = live.lock()
            && let Some(p) = slot.as_mut()
        {
            p.interval(&agg);
        }
    })
}

/// Rank 0's live line for a mail run over several generators.
fn print_mail(parts: &[LiveMsg], size: usize) {
    let m = MailLive::aggregate(parts);
    let elapsed = parts
        .iter()
        .map(|p| p.figures.elapsed_s)
        .fold(0.0, f64::max);
    let left = parts
        .iter()
        .map(|p| p.figures.remaining_s)
        .fold(f64::MAX, f64::min)
        .max(0.0);
    let per_s = |n: u64| {
        if m.interval_s > 0.0 {
            n as f64 / m.interval_s
        } else {
            0.0
        }
    };
    mailbench_base::secrets::warn(&format!(
        "[{elapsed:>6.0}s {size} generators, {} users] tasks {:>7.1}/s | submitted {:>6.1}/s | delivered {:>6.1}/s | slowest task p95 {:>7.1} ms | errors {} | {left:.0}s left",
        m.users,
        per_s(m.tasks),
        per_s(m.submitted),
        per_s(m.delivered),
        m.worst_task_p95_ms,
        m.errors
    ));
}
