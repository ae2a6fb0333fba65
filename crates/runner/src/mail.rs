//! `mail setup` and `mail run`, written once for any number of ranks: each
//! rank (a load generator) drives its own slice of the users against the
//! same server, the users of every rank start at one instant, rank 0 shows
//! the live aggregate and writes one result — the exact merge (`report
//! merge`) of the generators' results. One rank is one generator with every
//! user, its result in the run folder.

use crate::aggregate::finish;
use crate::world::{Command, Common, Place, Run, drive};
use mailbench_base::rundir::{RunDir, TestLog};
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_mail::hooks::{IntervalView, RunHooks};
use mailbench_mail::options::Resolved;
use mailbench_multihost::watch::{LiveMsg, MailLive};
use mailbench_results::AnyResult;
use mailbench_results::live::LiveFigures;
use std::cell::Cell;
use std::path::PathBuf;
use std::time::SystemTime;

/// `--start-at` of a mail command, parsed (RFC 3339).
pub(crate) fn start_at(text: Option<&str>) -> Result<Option<SystemTime>> {
    text.map(mailbench_multihost::parse_start_at).transpose()
}

/// `mail setup` on this rank of the world: its slice of the users.
pub fn setup(o: Resolved, common: &Common) -> Result<ExitStatus> {
    let resolve = |p: &Place| {
        let o = for_rank(o.clone(), p.rank, p.size, p.host)?;
        mailbench_mail::command::check(&o)?;
        Ok(o)
    };
    drive(Command::MailSetup, common, None, &resolve, |run, o| {
        let own = setup_part(&run, o);
        finish(run, own)
    })
}

fn setup_part(run: &Run, o: Resolved) -> Result<(RunDir, AnyResult)> {
    let dir = run.rank_dir()?;
    run.phase("setup");
    let r = mailbench_mail::command::setup(o, &dir, &run.interrupt)?;
    let r = AnyResult::MailSetup(Box::new(r));
    crate::output::write_files(&dir, &r)?;
    Ok((dir, r))
}

/// `mail run` on this rank of the world (`--start-at`: the users' start).
pub fn run(o: Resolved, start: Option<&str>, common: &Common) -> Result<ExitStatus> {
    let at = start_at(start)?;
    let resolve = |p: &Place| {
        let o = for_rank(o.clone(), p.rank, p.size, p.host)?;
        mailbench_mail::command::check(&o)?;
        Ok(o)
    };
    drive(Command::MailRun, common, at, &resolve, run_rank)
}

/// This rank's `mail run` and the gathering: the rank's result written and
/// gathered (rank 0 merging) before its local server stops, so that an
/// interrupted job (mpirun's SIGTERM, its SIGKILL a second later) leaves
/// the results on disk; Dovecot alone takes about a second to stop.
fn run_rank(run: Run, o: Resolved) -> Result<crate::output::Outcome> {
    let (own, servers) = match run_part(&run, o) {
        Ok((dir, r, servers)) => (Ok((dir, r)), Some(servers)),
        Err(e) => (Err(e), None),
    };
    let out = finish(run, own);
    if let Some(s) = servers {
        s.stop();
    }
    out
}

/// This rank's `mail run`, its result written, its local server still
/// running.
fn run_part(
    run: &Run,
    o: Resolved,
) -> Result<(RunDir, AnyResult, mailbench_mail::command::Servers)> {
    let users = o.users;
    let dir = run.rank_dir()?;
    run.phase("setup");
    if run.size > 1 {
        run.say(&format!(
            "mailbench: {} load generator(s): checking the target and setting up users, then \
             starting together",
            run.size
        ));
    }
    let seq = Cell::new(0u64);
    let m = mailbench_mail::command::run(o, &dir, &out(run), hooks(run, users, &seq))?;
    let r = AnyResult::MailRun(Box::new(m.result));
    crate::output::write_files(&dir, &r)?;
    Ok((dir, r, m.servers))
}

/// What the generator prints while it runs: its own live line with one
/// rank (rank 0 prints the aggregate with several).
pub(crate) fn out(run: &Run) -> mailbench_mail::Output {
    mailbench_mail::Output {
        json: run.common.json,
        quiet: run.common.quiet || run.size > 1,
    }
}

/// The hooks of one generator's run: the common start, its interval
/// figures to rank 0 (numbered from `seq`), the shared interrupt.
pub(crate) fn hooks<'a>(run: &'a Run, users: usize, seq: &'a Cell<u64>) -> RunHooks<'a> {
    RunHooks {
        before_load: Some(Box::new(|log: &TestLog| {
            if run.size == 1 && run.interrupt.raised() {
                // Stopped during setup: no common start to wait for; the
                // generator writes its interrupted result.
                return Ok(());
            }
            run.start_together(log, "users ready")?;
            run.phase("the load");
            Ok(())
        })),
        on_interval: Some(Box::new(move |v: &IntervalView| {
            seq.set(seq.get() + 1);
            let m = live(seq.get(), users, v);
            if let Some(c) = &run.coord {
                c.local_interval(m);
            } else if let Some(mm) = &run.member {
                mm.interval(m);
            }
        })),
        interrupt: run.interrupt.clone(),
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
    Ok(Some(mailbench_multihost::expand_path(d, rank, host)))
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
