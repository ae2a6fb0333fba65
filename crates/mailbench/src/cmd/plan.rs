//! `mailbench plan`: its flags are the `[plan]` keys (`Settings`, defined once in the plan
//! crate; `-` for `_`); flags override the file.
use crate::Global;
use mailbench_base::config::ConfigFile;
use mailbench_base::{Error, ExitStatus, Result};
use mailbench_plan::{Rules, Settings, emit, render};

/// Sizing: mailboxes + profile -> target IOPS, capacity, disks, copy layout, a storage config.
///
/// Pure computation; writes nothing unless asked (--emit-config). See docs/planner.md.
#[derive(clap::Args, Debug, Default)]
pub struct PlanArgs {
    /// The `[plan]` keys as flags (defined once, on [`Settings`]); boxed: the
    /// flags are many, and the command enum stays small.
    #[command(flatten)]
    pub flags: Box<Settings>,
}

pub fn run(args: PlanArgs, global: &Global) -> Result<ExitStatus> {
    let file: Settings = ConfigFile::load_optional(global.config.as_deref())?.section("plan")?;
    let settings = args.flags.merge(file);
    let rules = Rules::builtin()?;
    let input = settings.validate(&rules)?;
    if let Some(path) = &input.emit_config {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => std::path::Path::new("."),
        };
        if !parent.is_dir() {
            return Err(Error::usage(format!(
                "--emit-config {}: the folder {} does not exist; create it or give another path",
                path.display(),
                parent.display()
            )));
        }
        if path.is_dir() {
            return Err(Error::usage(format!(
                "--emit-config {} is a folder: give a file name, e.g. {}/storage.toml",
                path.display(),
                path.display()
            )));
        }
    }
    let plan = mailbench_plan::plan(&input, &rules)?;

    if let Some(path) = &input.emit_config {
        let text = emit::storage_config(&plan)?;
        mailbench_base::rundir::write_text(path, &text)?;
    }
    if global.json {
        let text = serde_json::to_string_pretty(&plan)
            .map_err(|e| Error::runtime(format!("cannot encode the plan as JSON: {e}")))?;
        println!("{text}");
    } else if !global.quiet {
        let text = if input.markdown {
            render::markdown(&plan, input.layout)
        } else {
            render::text(&plan, input.layout)
        };
        print!("{text}");
        if let Some(path) = &input.emit_config {
            println!("\nwrote the storage test to {}", path.display());
        }
    }
    Ok(ExitStatus::Pass)
}
