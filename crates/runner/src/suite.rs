//! `storage suite`: the published test program on the same databases, in
//! order — creation (or `--open`), a performance run, an optional stress
//! run, backup, soft recovery, checksum — each stage an ordinary run of its
//! command in a folder of the suite's (`performance/`, with `rank-N/` inside
//! over several ranks), tied together by one `storage-suite` result written
//! after every stage. A stage that fails its criteria does not stop the
//! suite (the published program reports every stage); a runtime error or an
//! interruption does, and `--resume DIR` continues where it stopped.

use crate::aggregate::{Gathered, Written, gather};
use crate::output::Outcome;
use crate::storage::{Share, StorageCommand, StorageRequest, asked, part, resolve_share};
use crate::world::{Command, Common, Folder, Place, Run, drive_in};
use mailbench_base::rundir::RunDir;
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_results::disclosure::DisclosureToml;
use mailbench_results::ranks::{PerRank, RankTotals};
use mailbench_results::storage::spec::TestType;
use mailbench_results::storage::suite::{
    Simulated, Stage, StageFigures, StorageSuiteResult, SuitePlan, SuiteStage,
};
use mailbench_results::{AnyResult, RunHeader, Status, Verdict};
use mailbench_storage::spec::{StorageToml, SuiteToml};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What the command line asks of `storage suite`.
pub struct SuiteRequest<'a> {
    /// The `[storage]` keys given as flags (the stages' own command is set
    /// per stage), `--config`, `--accept-lost-log-tail`, `--metrics-listen`.
    pub storage: StorageRequest<'a>,
    /// The `[suite]` keys given as flags.
    pub suite: SuiteToml,
    /// `--resume DIR`: the suite folder to continue.
    pub resume: Option<PathBuf>,
}

/// The suite as resolved before anything is written.
#[derive(Clone)]
struct Program {
    /// What the databases simulate (this rank's share).
    simulated: Simulated,
    /// This rank's folders and `[disclosure]`: what was tested.
    tested: (Vec<PathBuf>, DisclosureToml),
    plan: SuitePlan,
    /// The stages' flags: `[storage]` flags, each stage's command set.
    flags: StorageToml,
    stress: Duration,
    pdf: bool,
}

/// Runs `storage suite` on this rank of the world.
pub fn suite(req: SuiteRequest, common: &Common) -> Result<ExitStatus> {
    let program = program(&req)?;
    let folder = match &req.resume {
        Some(d) => Folder::Existing(d.clone()),
        None => Folder::New,
    };
    // Every rank checks the stages that create (init and the runs) before
    // anything is written; each stage's own checks run again at its start.
    let first = stage_request(&req.storage, &program, first_check(&program.plan));
    let (first_asked, start_at) = asked(&first)?;
    // Rank 0 reads the suite it resumes: the stages it keeps.
    let resolve = |p: &Place| {
        let share = resolve_share(&first_asked, p)?;
        let kept = match (&req.resume, p.rank) {
            (Some(d), 0) => resumable(d)?,
            _ => Vec::new(),
        };
        let tested = (
            crate::storage::tested_paths(&share.spec, share.backup_to.as_deref()),
            share.declared.clone(),
        );
        Ok((kept, Simulated::of(&share.spec), tested))
    };
    drive_in(
        &folder,
        Command::StorageSuite,
        common,
        start_at,
        &resolve,
        |run, (kept, simulated, tested)| {
            let program = Program {
                simulated,
                tested,
                ..program.clone()
            };
            run_suite(run, &req.storage, &program, kept)
        },
    )
}

/// The suite's plan and options, checked (exit 2 before anything is written).
fn program(req: &SuiteRequest) -> Result<Program> {
    let cfg = req.storage.config;
    let mut suite: SuiteToml = cfg.section("suite")?;
    suite.overlay(req.suite.clone());
    let mut flags: StorageToml = cfg.section("storage")?;
    flags.overlay(req.storage.flags.clone());
    let quick = flags.quick.unwrap_or(false);
    let stress = suite.stress(quick)?;
    let stages = suite.stages(stress)?;
    let performance =
        flags
            .duration
            .unwrap_or(Duration::from_secs(if quick { 60 } else { 2 * 3600 }));
    let log_files = flags.log_files.unwrap_or(if quick { 32 } else { 500 });
    Ok(Program {
        plan: SuitePlan {
            stages,
            performance_s: performance.as_secs_f64(),
            stress_s: stress.as_secs_f64(),
            log_files,
        },
        flags: req.storage.flags.clone(),
        stress,
        pdf: suite.pdf.unwrap_or(false),
        simulated: Simulated::default(),
        tested: Default::default(),
    })
}

/// The finished stages of the suite in `dir` (`--resume`): its result.json
/// must be a suite's, else nothing is written (exit 2).
fn resumable(dir: &Path) -> Result<Vec<SuiteStage>> {
    let f = dir.join("result.json");
    let text = mailbench_base::limits::read_text_capped(
        &f,
        mailbench_base::limits::MAX_RESULT_FILE_BYTES,
        "suite result",
    )
    .map_err(|e| {
        Error::usage(format!(
            "--resume {}: not a suite's folder ({e}); give the folder a `storage suite` wrote",
            dir.display()
        ))
    })?;
    let r: StorageSuiteResult = serde_json::from_str(&text).map_err(|e| {
        Error::usage(format!(
            "--resume {}: {} is not a storage-suite result ({e})",
            dir.display(),
            f.display()
        ))
    })?;
    if r.run.kind != "storage-suite" {
        return Err(Error::usage(format!(
            "--resume {}: its result is a {} result, not a storage-suite's",
            dir.display(),
            r.run.kind
        )));
    }
    Ok(r.stages.into_iter().filter(|s| s.finished()).collect())
}

/// The stage whose checks stand for the suite's before anything is written:
/// the first run stage (free space for the databases and their logs), or
/// the first stage.
fn first_check(plan: &SuitePlan) -> Stage {
    (plan.stages.iter().copied())
        .find(|s| matches!(s, Stage::Performance | Stage::Stress))
        .or(plan.stages.first().copied())
        .unwrap_or(Stage::Init)
}

/// A stage's command and flags: the runs their test type and length.
fn stage_request<'a>(
    base: &StorageRequest<'a>,
    program: &Program,
    stage: Stage,
) -> StorageRequest<'a> {
    let mut flags = program.flags.clone();
    let command = match stage {
        Stage::Init => StorageCommand::Init,
        Stage::Performance => {
            flags.test_type = Some(TestType::Performance);
            StorageCommand::Run
        }
        Stage::Stress => {
            flags.test_type = Some(TestType::Stress);
            flags.duration = Some(program.stress);
            StorageCommand::Run
        }
        Stage::Backup => StorageCommand::Backup,
        Stage::Recover => {
            flags.log_files = Some(program.plan.log_files);
            StorageCommand::Recover
        }
        Stage::Verify => StorageCommand::Verify,
    };
    StorageRequest {
        command,
        flags,
        config: base.config,
        accept_lost_log_tail: base.accept_lost_log_tail,
        metrics_listen: base.metrics_listen.clone(),
    }
}

/// The stages on this rank; rank 0 writes the suite's result after each.
fn run_suite(
    mut run: Run,
    base: &StorageRequest,
    program: &Program,
    kept: Vec<SuiteStage>,
) -> Result<Outcome> {
    let started = Instant::now();
    let mut header = RunHeader::begin("storage-suite");
    let top = run.top.clone();
    let rdir = run.rank_dir()?;
    let mut stages = run.broadcast(&kept, "the stages kept")?;
    for stage in program.plan.stages.iter().copied() {
        if stages.iter().any(|s| s.stage == stage) {
            rdir.log
                .line(format!("{}: finished before, kept", stage.name()));
            continue;
        }
        if run.interrupt.raised() {
            break;
        }
        let s = run_stage(&mut run, base, program, stage, &top);
        run.top = top.clone();
        run.cmd = Command::StorageSuite;
        let stop = s.verdict.status != Status::Pass && s.verdict.status != Status::Fail;
        rdir.log
            .line(format!("{}: {}", stage.name(), s.verdict.label()));
        stages.push(s);
        written(&run, &mut header, started, program, &stages)?;
        if stop {
            break;
        }
    }
    let r = written(&run, &mut header, started, program, &stages)?;
    if program.pdf && run.rank == 0 {
        crate::pdf::print(&top, run.common);
    }
    run.end();
    Ok(Outcome::of_result(
        &AnyResult::StorageSuite(Box::new(r)),
        top,
    ))
}

/// The suite's result as it stands, written by rank 0 (the others only
/// compute it).
fn written(
    run: &Run,
    header: &mut RunHeader,
    started: Instant,
    program: &Program,
    stages: &[SuiteStage],
) -> Result<StorageSuiteResult> {
    header.finish(started.elapsed());
    if header.disclosure.is_none() && !stages.is_empty() {
        // Detected once the first stage made the folders.
        let (paths, declared) = &program.tested;
        header.disclosure = Some(Box::new(crate::storage::disclosure(
            paths,
            declared.clone(),
        )));
    }
    let interrupted = run.interrupt.raised()
        || stages
            .iter()
            .any(|s| s.verdict.status == Status::Interrupted);
    let r = StorageSuiteResult {
        run: header.clone(),
        verdict: StorageSuiteResult::judge(&program.plan, stages, interrupted),
        plan: program.plan.clone(),
        stages: stages.to_vec(),
        hosts: run.hosts.clone(),
        simulated: program.simulated.clone(),
    };
    if run.rank == 0 {
        let dir = RunDir::at(&run.top)?;
        crate::output::write_files(&dir, &AnyResult::StorageSuite(Box::new(r.clone())))?;
    }
    Ok(r)
}

/// One stage: its folder (named by rank 0), its share resolved and agreed,
/// its part, the gathering; its row of the suite (a stage that could not
/// run to its end: an error or an interruption naming it).
fn run_stage(
    run: &mut Run,
    base: &StorageRequest,
    program: &Program,
    stage: Stage,
    top: &Path,
) -> SuiteStage {
    let at = mailbench_base::host::now_rfc3339();
    let t0 = Instant::now();
    let mut dir = stage.name().to_string();
    let done = stage_folder(run, top, stage).and_then(|name| {
        dir = name.clone();
        run.say(&format!(
            "mailbench: suite stage {}: {}",
            stage.name(),
            stage.title()
        ));
        run.top = top.join(&name);
        let req = stage_request(base, program, stage);
        run.cmd = req.command.command();
        stage_part(run, &req)
    });
    let (verdict, figures) = match done {
        Ok(g) => (g.outcome.verdict, figures(&g.written)),
        Err(e) => {
            let status = match e {
                Error::Interrupted => Status::Interrupted,
                _ => Status::Error,
            };
            let reasons = vec![format!("{} could not run: {e}", stage.title())];
            (Verdict { status, reasons }, StageFigures::default())
        }
    };
    SuiteStage {
        stage,
        dir,
        verdict,
        started: at,
        ended: mailbench_base::host::now_rfc3339(),
        duration_s: t0.elapsed().as_secs_f64(),
        figures,
    }
}

/// The stage's share on this rank (agreed by every rank), its part and the
/// gathering.
fn stage_part(run: &Run, req: &StorageRequest) -> Result<Gathered> {
    let (a, _) = asked(req)?;
    let place = Place {
        rank: run.rank,
        size: run.size,
        host: &run.host,
        hosts: &run.hosts,
    };
    let share: Result<Share> = resolve_share(&a, &place);
    run.agree(&share)?;
    let own = part(run, share?);
    gather(run, own)
}

/// The stage's folder in the suite's: its name, or `name-2`, `-3` ... when
/// a resumed suite runs it again (rank 0 names it for every rank).
fn stage_folder(run: &Run, top: &Path, stage: Stage) -> Result<String> {
    let mine = if run.rank == 0 {
        (1..1000)
            .map(|i| match i {
                1 => stage.name().to_string(),
                i => format!("{}-{i}", stage.name()),
            })
            .find(|n| !top.join(n).exists())
            .ok_or_else(|| {
                Error::runtime(format!(
                    "{}: too many {} folders",
                    top.display(),
                    stage.name()
                ))
            })?
    } else {
        String::new()
    };
    run.broadcast(&mine, "the stage's folder")
}

/// A stage's figures from what its part wrote.
fn figures(w: &Written) -> StageFigures {
    match w {
        Written::One(r) => of_result(r),
        Written::PerRank(p) => of_ranks(p),
        Written::Failed => StageFigures::default(),
    }
}

fn of_result(r: &AnyResult) -> StageFigures {
    match r {
        AnyResult::StorageInit(r) => StageFigures::of_init(r),
        AnyResult::StorageRun(r) => StageFigures::of_run(r),
        AnyResult::StorageBackup(r) => StageFigures::of_backup(r),
        AnyResult::StorageRecover(r) => StageFigures::of_recover(r),
        AnyResult::StorageVerify(r) => StageFigures::of_verify(r),
        _ => StageFigures::default(),
    }
}

/// Several ranks' own results of a stage: counts added, the rates over the
/// ranks' totals (they read and replayed at the same time).
fn of_ranks(p: &PerRank) -> StageFigures {
    let each: Vec<StageFigures> = p.hosts.iter().map(|h| of_result(&h.result)).collect();
    let mut out = StageFigures::added(&each);
    match &p.totals {
        Some(RankTotals::Backup(b)) => out.backup_mb_per_s = Some(b.total_mb_per_s),
        Some(RankTotals::Recover(t)) => out.seconds_per_log_file = Some(t.seconds_per_log_file),
        None => {
            let secs = (p.hosts.iter())
                .filter_map(|h| match &h.result {
                    AnyResult::StorageInit(i) => Some(i.init.seconds),
                    _ => None,
                })
                .fold(0.0, f64::max);
            out.created_mb_per_s = out.created_mb.filter(|_| secs > 0.0).map(|mb| mb / secs);
        }
    }
    out
}
