//! `storage backup`: every database read at once with sequential 256 KiB reads,
//! several in flight per database, pages checksummed on the way (as a streaming
//! backup does). `--to DIR` also writes the copy and then verifies it.

use crate::init::read_header;
use crate::spec::{InstanceSpec, SpecExt, StorageSpec};
use crate::verify::{self, Pool, ScanOpts};
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::RunDir;
use mailbench_base::{Error, Result};
use mailbench_io::IoEngine;
pub use mailbench_results::storage::backup::{BACKUP_DEPTH, BACKUP_READ, BackupDb, BackupResult};
use mailbench_results::{RunHeader, Status, Verdict};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// The whole backup test.
pub fn run_backup(
    spec: &StorageSpec,
    dir: &RunDir,
    to: Option<&Path>,
    interrupt: &Interrupt,
) -> Result<BackupResult> {
    let started = Instant::now();
    let mut header = RunHeader::begin("storage-backup");
    preflight(spec, to)?;
    if let Some(t) = to {
        // The same ownership rule as every folder mailbench writes into.
        mailbench_base::rundir::claim_folder(t, false)?;
    }
    dir.log.line(format!(
        "backup of {} databases, {} KiB reads, {} in flight each{}",
        spec.instances.len(),
        BACKUP_READ >> 10,
        BACKUP_DEPTH,
        to.map(|t| format!(", copy to {}", t.display()))
            .unwrap_or_default()
    ));
    let pool = Pool::new(verify::pool_size());
    let pool = &pool;
    let t0 = Instant::now();
    let results: Vec<Result<BackupDb>> = std::thread::scope(|scope| {
        let hs: Vec<_> = spec
            .instances
            .iter()
            .map(|i| scope.spawn(move || backup_one(spec, i, to, pool, interrupt)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::runtime("backup thread failed")))
            })
            .collect()
    });
    let seconds = t0.elapsed().as_secs_f64();
    let mut dbs = Vec::new();
    let mut errors = Vec::new();
    let mut interrupted = false;
    for (r, inst) in results.into_iter().zip(spec.instances.iter()) {
        match r {
            Ok(d) => dbs.push(d),
            Err(Error::Interrupted) => interrupted = true,
            Err(e) => errors.push(format!("{}: {e}", inst.name)),
        }
    }
    // Read the copies back.
    if let Some(t) = to
        && !interrupted
    {
        interrupted = verify_copies(spec, t, &mut dbs, pool, interrupt, &mut errors);
    }
    let mb: f64 = dbs.iter().map(|d| d.mb_read).sum();
    let mut reasons = reasons(&dbs);
    for e in &errors {
        reasons.push(format!("{e}."));
    }
    let verdict = if interrupted {
        Verdict {
            status: Status::Interrupted,
            reasons: vec!["The backup was interrupted; the figures are partial.".into()],
        }
    } else {
        Verdict::from_reasons(reasons)
    };
    header.finish(started.elapsed());
    let res = BackupResult {
        run: header,
        verdict,
        spec: spec.clone(),
        to: to.map(Path::to_path_buf),
        average_mb_per_s: if dbs.is_empty() {
            0.0
        } else {
            dbs.iter().map(|d| d.mb_per_s).sum::<f64>() / dbs.len() as f64
        },
        databases: dbs,
        seconds,
        total_mb_per_s: mb / seconds.max(1e-9),
        errors,
    };
    Ok(res)
}

/// Reads each copy under `to` back and counts its bad pages into its
/// database's figures; errors go to `errors`. True if interrupted.
fn verify_copies(
    spec: &StorageSpec,
    t: &Path,
    dbs: &mut [BackupDb],
    pool: &Pool,
    interrupt: &Interrupt,
    errors: &mut Vec<String>,
) -> bool {
    let mut interrupted = false;
    for d in dbs {
        let Some(inst) = spec.instances.iter().find(|i| i.name == d.name) else {
            continue;
        };
        let p = copy_path(t, inst);
        match verify::verify_db(
            &d.name,
            &p,
            &inst.log_dir,
            t,
            spec.engine_choice(),
            pool,
            interrupt,
        ) {
            Ok(v) => {
                d.copy_bad_pages =
                    Some(v.bad_checksum_pages + v.wrong_page_number_pages + v.io_errors)
            }
            Err(Error::Interrupted) => interrupted = true,
            Err(e) => errors.push(format!("verifying the copy {}: {e}", p.display())),
        }
    }
    interrupted
}

/// The verdict's reasons from the databases' figures: bad pages read, I/O
/// errors, bad pages in a copy read back.
fn reasons(dbs: &[BackupDb]) -> Vec<String> {
    let mut reasons = Vec::new();
    for d in dbs {
        if d.bad_pages > 0 {
            reasons.push(format!(
                "The backup of {} read {} bad pages (first: {:?}).",
                d.name, d.bad_pages, d.first_bad_pages
            ));
        }
        if d.io_errors > 0 {
            reasons.push(format!(
                "The backup of {} had {} I/O errors (first: {}).",
                d.name,
                d.io_errors,
                d.first_error.as_deref().unwrap_or("I/O error")
            ));
        }
        if let Some(n) = d.copy_bad_pages
            && n > 0
        {
            reasons.push(format!(
                "The copy of {} read back with {n} bad pages.",
                d.name
            ));
        }
    }
    reasons
}

/// Everything the backup checks before anything is written (the run folder
/// included): the databases exist and are whole, and `--to` is usable.
pub fn preflight(spec: &StorageSpec, to: Option<&Path>) -> Result<()> {
    crate::init::check_existing(spec)?;
    if let Some(t) = to {
        check_target(spec, t)?;
    }
    Ok(())
}

/// Checks `--to` before anything is written: a folder (new, empty or
/// mailbench's own; never a device or a file), not the databases' own files,
/// with room for the copies. Exit 2 otherwise.
pub fn check_target(spec: &StorageSpec, to: &Path) -> Result<()> {
    if let Ok(m) = std::fs::metadata(to)
        && !m.is_dir()
    {
        return Err(Error::usage(format!(
            "--to {}: not a folder (a file or a device); give a folder for the copies",
            to.display()
        )));
    }
    mailbench_base::rundir::claim_folder(to, true)
        .map_err(|e| Error::usage(format!("--to: {e}")))?;
    let mut need = 0u64;
    for inst in &spec.instances {
        if copy_path(to, inst) == inst.db_path {
            return Err(Error::usage(format!(
                "--to {} would overwrite the database itself: give another folder",
                to.display()
            )));
        }
        // An earlier copy in the folder is replaced: its space comes back.
        let old = std::fs::symlink_metadata(copy_path(to, inst))
            .map(|m| if m.is_file() { m.len() } else { 0 })
            .unwrap_or(0);
        let size = std::fs::metadata(&inst.db_path)
            .map(|m| m.len())
            .unwrap_or(0);
        need += size.saturating_sub(old);
    }
    let anc = crate::spec::existing_ancestor(to);
    let free = mailbench_io::free_space(anc)
        .map_err(|e| Error::usage(format!("cannot read free space of {}: {e}", anc.display())))?;
    if need > free {
        return Err(Error::usage(format!(
            "not enough free space for the copies in {}: they need {}, {} is available; give \
             another --to folder",
            to.display(),
            mailbench_base::ByteSize(need),
            mailbench_base::ByteSize(free)
        )));
    }
    Ok(())
}

fn copy_name(inst: &InstanceSpec) -> String {
    let file = inst
        .db_path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "db".into());
    format!("{}-{file}", inst.name)
}

fn copy_path(to: &Path, inst: &InstanceSpec) -> PathBuf {
    to.join(copy_name(inst))
}

fn backup_one(
    spec: &StorageSpec,
    inst: &InstanceSpec,
    to: Option<&Path>,
    pool: &Pool,
    interrupt: &Interrupt,
) -> Result<BackupDb> {
    let t0 = Instant::now();
    let header = read_header(&inst.db_path)?;
    let ps = header.page_size as u64;
    let caps = mailbench_io::probe(&inst.volume);
    let file = Arc::new(
        mailbench_io::open_file(&inst.db_path, false, caps.o_direct, false)
            .map_err(|e| Error::io("cannot open database", &inst.db_path, e))?,
    );
    let copy = match to {
        Some(t) => {
            let p = mailbench_base::rundir::make_room(t, &copy_name(inst))?;
            let direct = mailbench_io::probe(t).o_direct;
            let f = mailbench_io::create_new_file(&p, direct)
                .map_err(|e| Error::io("cannot create the copy", &p, e))?;
            mailbench_io::preallocate(&f, header.page_count * ps)
                .map_err(|e| Error::io("cannot allocate the copy", &p, e))?;
            // Page 0 (the header) is copied as it is.
            let mut page0 = mailbench_io::AlignedBuf::new(ps as usize);
            use std::os::unix::fs::FileExt;
            file.read_exact_at(page0.as_mut_slice(), 0)
                .and_then(|_| f.write_all_at(page0.as_slice(), 0))
                .map_err(|e| Error::io("cannot copy the header to", &p, e))?;
            Some((p, Arc::new(f)))
        }
        None => None,
    };
    let mut io: Box<dyn IoEngine> =
        mailbench_io::build(spec.engine_choice(), caps, BACKUP_DEPTH * 3)
            .map_err(Error::runtime)?
            .engine;
    let scan = verify::scan_pages(
        &inst.db_path,
        &file,
        &header,
        io.as_mut(),
        pool,
        &ScanOpts {
            chunk: BACKUP_READ,
            depth: BACKUP_DEPTH,
            end_lsn: None,
            copy_to: copy.as_ref().map(|c| c.1.clone()),
            submit_each: true,
        },
        interrupt,
    );
    if scan.interrupted {
        return Err(Error::Interrupted);
    }
    if let Some((p, f)) = &copy
        && let Err(e) = f.sync_data()
    {
        return Err(Error::io("cannot sync the copy", p, e));
    }
    let secs = t0.elapsed().as_secs_f64();
    let mb_read = scan.read.bytes as f64 / 1e6;
    Ok(BackupDb {
        name: inst.name.clone(),
        size_mb: (header.page_count * ps) as f64 / 1e6,
        mb_read,
        seconds: secs,
        mb_per_s: mb_read / secs.max(1e-9),
        pages_seen: scan.pages_seen,
        bad_pages: scan.bad_checksum + scan.wrong_page_number,
        first_bad_pages: scan.first_bad.clone(),
        read: verify::figures(&scan.read, secs),
        io_errors: scan.io_errors,
        first_error: scan.first_error.clone(),
        copy_write: copy.as_ref().map(|_| verify::figures(&scan.write, secs)),
        copy: copy.map(|c| c.0),
        copy_bad_pages: None,
    })
}
