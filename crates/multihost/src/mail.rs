//! `mail run` as one test over ranks: each rank (a load generator) drives its
//! own slice of the users against the same server, the users of every rank
//! start at one instant, rank 0 shows the live aggregate and writes one
//! result: the exact merge (`report merge`) of the generators' results.

use crate::storage::{Ctx, Outcome};
use crate::watch::{LiveMsg, MailLive};
use mailbench_base::rundir::{RunDir, TestLog};
use mailbench_base::{Error, Result};
use mailbench_mail::command::Servers;
use mailbench_mail::hooks::{IntervalView, RunHooks};
use mailbench_mail::options::Resolved;
use mailbench_results::AnyResult;
use mailbench_runner::files::{Doc, MailDoc};
use mailbench_storage::run::LiveFigures;
use serde_json::Value;
use std::cell::Cell;
use std::path::PathBuf;

/// This rank's options from `(rank, size, host)`: usually [`for_rank`].
pub type MailResolve<'a> = &'a dyn Fn(usize, usize, &str) -> Result<Resolved>;

/// The users `[first, first + count)` of rank `rank` of `size` when `users`
/// users numbered from `first` are split: contiguous, no overlap, sizes
/// differing by at most one.
pub fn slice(first: usize, users: usize, rank: usize, size: usize) -> (usize, usize) {
    let size = size.max(1);
    let base = users / size;
    let extra = users % size;
    let count = base + usize::from(rank < extra);
    let start = first + rank * base + rank.min(extra);
    (start, count)
}

/// The options of one rank: its slice of the users, its own seed (different
/// messages and schedules on every generator), `{rank}`/`{host}` expanded
/// in the local target's folder.
pub fn for_rank(o: Resolved, rank: usize, size: usize, host: &str) -> Result<Resolved> {
    if size <= 1 {
        return Ok(o);
    }
    let mut o = share_of(o, rank, size)?;
    o.local_dir = local_dir_of(&o, rank, host)?;
    Ok(o)
}

/// Rank `rank`'s slice of `o.users` and its own seed.
pub fn share_of(mut o: Resolved, rank: usize, size: usize) -> Result<Resolved> {
    if size <= 1 {
        return Ok(o);
    }
    if o.users < size {
        return Err(Error::usage(format!(
            "--users {} cannot be split over {size} load generators: give at least one user per rank",
            o.users
        )));
    }
    let (first, count) = slice(o.first_user, o.users, rank, size);
    o.first_user = first;
    o.users = count;
    o.seed = o
        .seed
        .wrapping_add((rank as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    Ok(o)
}

/// `--local-dir` of one of several generators: each starts its own local
/// server, so the folder must hold `{rank}`; expanded.
pub fn local_dir_of(o: &Resolved, rank: usize, host: &str) -> Result<Option<PathBuf>> {
    let Some(d) = &o.local_dir else {
        return Ok(None);
    };
    if !d.to_string_lossy().contains("{rank}") {
        return Err(Error::usage(format!(
            "--local-dir {}: with several load generators each starts its own local server; \
             put `{{rank}}` in the folder, e.g. /tmp/mailbench-local-{{rank}}",
            d.display()
        )));
    }
    Ok(Some(crate::expand_path(d, rank, host)))
}

/// This rank's `mail run` and the gathering: the rank's result written and
/// gathered (rank 0 merging) before its local server stops, so that an
/// interrupted job (mpirun's SIGTERM, its SIGKILL a second later) leaves
/// the results on disk; Dovecot alone takes about a second to stop.
pub(crate) fn run(ctx: Ctx, o: Resolved) -> Result<Outcome> {
    let (own, servers) = match rank_part(&ctx, o) {
        Ok((dir, v, servers)) => (Ok((dir, v)), Some(servers)),
        Err(e) => (Err(e), None),
    };
    let out = crate::storage::finish(ctx, own);
    if let Some(s) = servers {
        s.stop();
    }
    out
}

/// This rank's `mail run`, its result.json as written, its local server
/// still running.
fn rank_part(ctx: &Ctx, o: Resolved) -> Result<(RunDir, Value, Servers)> {
    let users = o.users;
    let dir = ctx.rank_dir()?;
    let out = mailbench_mail::Output {
        base: dir.path.clone(),
        json: false,
        // Rank 0 prints the phases, the live aggregate and the summary.
        quiet: true,
        verbose: ctx.opts.verbose,
    };
    ctx.phase("setup");
    if !ctx.opts.quiet && ctx.rank == 0 {
        eprintln!(
            "mailbench: {} load generator(s): checking the target and setting up users, then starting together",
            ctx.size
        );
    }
    let seq = Cell::new(0u64);
    let hooks = hooks(ctx, dir.path.clone(), users, &seq);
    let run = mailbench_mail::command::run_with(o, &out, hooks)?;
    let r = AnyResult::MailRun(Box::new(run.result));
    mailbench_runner::write_files(&run.dir, &r)?;
    let v = r.to_value().map_err(|e| Error::runtime(e.to_string()))?;
    Ok((dir, v, run.servers))
}

/// The hooks of one generator's run: its folder, the common start, its
/// interval figures to rank 0 (numbered from `seq`), the shared interrupt.
pub(crate) fn hooks<'a>(
    ctx: &'a Ctx,
    dir: PathBuf,
    users: usize,
    seq: &'a Cell<u64>,
) -> RunHooks<'a> {
    RunHooks {
        dir: Some(dir),
        before_load: Some(Box::new(|log: &TestLog| {
            ctx.start_together(log, "users ready")?;
            ctx.phase("the load");
            Ok(())
        })),
        on_interval: Some(Box::new(move |v: &IntervalView| {
            seq.set(seq.get() + 1);
            let m = live(seq.get(), users, v);
            if let Some(c) = &ctx.coord {
                c.local_interval(m);
            } else if let Some(mm) = &ctx.member {
                mm.interval(m);
            }
        })),
        interrupt: Some(ctx.interrupt.clone()),
    }
}

fn live(seq: u64, users: usize, v: &IntervalView) -> LiveMsg {
    let ops = v.ops;
    let g = ops.glance();
    LiveMsg {
        seq,
        figures: LiveFigures {
            phase: "measured".into(),
            elapsed_s: v.elapsed_s,
            remaining_s: v.remaining_s,
            errors: g.errors,
            passing: g.errors == 0,
            ..Default::default()
        },
        mail: Some(MailLive {
            users: users as u64,
            interval_s: v.interval_s,
            tasks: g.tasks,
            errors: g.errors,
            submitted: ops.submitted,
            delivered: ops.delivered,
            worst_task_p95_ms: g.worst_p95_ms,
        }),
    }
}

/// Rank 0's live line for a mail run.
pub(crate) fn print_live(parts: &[LiveMsg], size: usize) {
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
    eprintln!(
        "[{elapsed:>6.0}s {size} generators, {} users] tasks {:>7.1}/s | submitted {:>6.1}/s | delivered {:>6.1}/s | slowest task p95 {:>7.1} ms | errors {} | {left:.0}s left",
        m.users,
        per_s(m.tasks),
        per_s(m.submitted),
        per_s(m.delivered),
        m.worst_task_p95_ms,
        m.errors
    );
}

/// Rank 0: the generators' results merged exactly (as `report merge` would),
/// failures of ranks named first. Returns the result and summary.txt, or
/// `None` when no generator's result arrived (the caller writes the ranks'
/// failure result then: there is no mail-run to write).
pub(crate) fn aggregate(
    dir: &RunDir,
    files: &[(usize, String, PathBuf)],
    failures: &[String],
) -> Result<Option<(AnyResult, String)>> {
    let mut docs: Vec<MailDoc> = Vec::new();
    for (_, _, f) in files {
        match mailbench_runner::files::load(f)? {
            Doc::Mail(d) => docs.push(*d),
            other => {
                return Err(Error::runtime(format!(
                    "{} is a {} result, not mail-run",
                    f.display(),
                    other.kind()
                )));
            }
        }
    }
    if docs.is_empty() {
        return Ok(None);
    }
    let (mut result, intervals) = if docs.len() == 1 {
        let d = &docs[0];
        let _ = std::fs::copy(
            d.source.with_file_name("intervals.jsonl"),
            dir.file("intervals.jsonl"),
        );
        (mailbench_runner::files::mail_result(d)?, Vec::new())
    } else {
        let out = mailbench_runner::files::merge_mail(&docs)?;
        (out.result, out.intervals)
    };
    if !failures.is_empty() {
        result.verdict = result.verdict.clone().with_failures_first(failures);
    }
    if !intervals.is_empty() {
        dir.write_jsonl("intervals.jsonl", &intervals)?;
    }
    let r = AnyResult::MailRun(Box::new(result));
    let summary = mailbench_runner::files::summary(&r);
    Ok(Some((r, summary)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_every_user_once() {
        for users in [1usize, 2, 7, 10, 100, 1001] {
            for size in 1..=12usize {
                if users < size {
                    continue;
                }
                let mut next = 5;
                let mut counts = Vec::new();
                for r in 0..size {
                    let (first, n) = slice(5, users, r, size);
                    assert_eq!(first, next, "users {users} size {size} rank {r}");
                    next += n;
                    counts.push(n);
                }
                assert_eq!(next, 5 + users);
                let (lo, hi) = (counts.iter().min(), counts.iter().max());
                assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "{counts:?}");
            }
        }
    }
}
