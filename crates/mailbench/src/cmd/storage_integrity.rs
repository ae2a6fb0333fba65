//! `mailbench storage backup` and `mailbench storage recover`.
use super::storage::{StorageArgs, resolve};
use crate::Global;
use mailbench_base::config::ConfigFile;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::RunDir;
use mailbench_base::{ExitStatus, Result};
use mailbench_results::AnyResult;
use mailbench_storage::spec::{Space, StorageToml};

pub fn backup(args: &StorageArgs, cfg: &ConfigFile, global: &Global) -> Result<ExitStatus> {
    let (mut spec, output) = resolve(args, cfg, global, Space::None)?;
    let to = args
        .keys
        .backup_to
        .clone()
        .or(cfg.section::<StorageToml>("storage")?.backup_to);
    mailbench_storage::backup::preflight(&spec, to.as_deref())?;
    spec.lost_log_tail = super::storage::accepted_lost_log_tail(&spec, args, global)?;
    let interrupt = Interrupt::install()?;
    let dir = RunDir::create(&output, "storage-backup")?;
    dir.log.set_echo(global.verbose);
    if !global.quiet {
        eprintln!(
            "mailbench: backup read of {} databases{}",
            spec.instances.len(),
            to.as_ref()
                .map(|t| format!(", copying to {}", t.display()))
                .unwrap_or_default()
        );
    }
    let r = super::storage::logged(
        &dir,
        mailbench_storage::backup::run_backup(&spec, &dir, to.as_deref(), &interrupt),
    )?;
    let status = r.verdict.exit_status();
    let result = AnyResult::StorageBackup(Box::new(r));
    let text = results_text(&result, &dir);
    mailbench_runner::finish(&dir, &result, &super::storage::out(global), Some(text))?;
    Ok(status)
}

/// The summary and where the results are.
fn results_text(result: &AnyResult, dir: &RunDir) -> String {
    format!(
        "{}\nResults: {}",
        mailbench_report::summary::render(result),
        dir.path.display()
    )
}

pub fn recover(args: &StorageArgs, cfg: &ConfigFile, global: &Global) -> Result<ExitStatus> {
    let log_files = args
        .keys
        .log_files
        .or(cfg.section::<StorageToml>("storage")?.log_files)
        .unwrap_or(500);
    // Replaying what a crash left writes no new files: a full disk must not block it.
    let space = if log_files == 0 {
        Space::None
    } else {
        Space::Create
    };
    let (spec, output) = resolve(args, cfg, global, space)?;
    let interrupt = Interrupt::install()?;
    let dir = RunDir::create(&output, "storage-recover")?;
    dir.log.set_echo(global.verbose);
    let quiet = global.quiet;
    let mut phase = |t: &str| {
        if !quiet {
            eprintln!("mailbench: {t}");
        }
    };
    let mut r = super::storage::logged(
        &dir,
        mailbench_storage::recover::run_recover(&spec, &dir, log_files, &interrupt, &mut phase),
    )?;
    // Recovery is how a database comes to lose its log tail: it never refuses
    // one, its result names those that have (this replay's or an earlier one's).
    r.spec.lost_log_tail = mailbench_storage::init::check_lost_log_tail(&spec, true)?;
    let status = r.verdict.exit_status();
    let result = AnyResult::StorageRecover(Box::new(r));
    let text = results_text(&result, &dir);
    mailbench_runner::finish(&dir, &result, &super::storage::out(global), Some(text))?;
    Ok(status)
}
