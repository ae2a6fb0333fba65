//! `mailbench storage backup` and `mailbench storage recover`.
use super::storage::{StorageArgs, resolve};
use crate::Global;
use mailbench_base::config::ConfigFile;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::RunDir;
use mailbench_base::{ExitStatus, Result};
use mailbench_storage::spec::StorageToml;

pub fn backup(args: &StorageArgs, cfg: &ConfigFile, global: &Global) -> Result<ExitStatus> {
    let (spec, output) = resolve(args, cfg, global)?;
    let to = args
        .backup_to
        .clone()
        .or(cfg.section::<StorageToml>("storage")?.backup_to);
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
    let r = mailbench_storage::backup::run_backup(&spec, &dir, to.as_deref(), &interrupt)?;
    if global.json {
        let v = serde_json::json!({
            "verdict": r.verdict,
            "result_dir": dir.path,
            "total_mb_per_s": r.total_mb_per_s,
            "average_mb_per_s": r.average_mb_per_s,
            "databases": r.databases.iter().map(|d| serde_json::json!({
                "name": d.name, "size_mb": d.size_mb, "seconds": d.seconds,
                "mb_per_s": d.mb_per_s, "bad_pages": d.bad_pages, "io_errors": d.io_errors,
                "copy_bad_pages": d.copy_bad_pages,
            })).collect::<Vec<_>>(),
        });
        println!("{v}");
    } else if !global.quiet {
        println!("{}", mailbench_storage::backup::render(&r));
        println!("Results: {}", dir.path.display());
    }
    Ok(r.verdict.exit_status())
}

pub fn recover(args: &StorageArgs, cfg: &ConfigFile, global: &Global) -> Result<ExitStatus> {
    let (spec, output) = resolve(args, cfg, global)?;
    let log_files = args
        .log_files
        .or(cfg.section::<StorageToml>("storage")?.log_files)
        .unwrap_or(500);
    let interrupt = Interrupt::install()?;
    let dir = RunDir::create(&output, "storage-recover")?;
    dir.log.set_echo(global.verbose);
    let quiet = global.quiet;
    let mut phase = |t: &str| {
        if !quiet {
            eprintln!("mailbench: {t}");
        }
    };
    let r =
        mailbench_storage::recover::run_recover(&spec, &dir, log_files, &interrupt, &mut phase)?;
    if global.json {
        let per = |v: &[mailbench_storage::recover::ReplayResult]| {
            v.iter()
                .map(|i| {
                    serde_json::json!({
                        "name": i.name, "log_files_replayed": i.log_files_replayed,
                        "seconds": i.seconds, "seconds_per_log_file": i.seconds_per_log_file,
                        "end_lsn": i.end_lsn, "clean": i.clean, "stopped": i.stopped,
                        "log_damaged": i.log_damaged,
                    })
                })
                .collect::<Vec<_>>()
        };
        let v = serde_json::json!({
            "verdict": r.verdict,
            "result_dir": dir.path,
            "prior_recovery": per(&r.prior_recovery),
            "instances": per(&r.instances),
            "bad_total": r.verify.as_ref().map(|v| v.bad_total),
        });
        println!("{v}");
    } else if !global.quiet {
        println!("{}", mailbench_storage::recover::render(&r));
        println!("Results: {}", dir.path.display());
    }
    Ok(r.verdict.exit_status())
}
