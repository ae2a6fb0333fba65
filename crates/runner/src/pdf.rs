//! `--pdf`: report.html printed to report.pdf by headless Chromium (its
//! print stylesheet lays the pages out). Chromium is found on the PATH; when
//! it is not there, or fails, the HTML stands and stderr says why.

use crate::world::Common;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest a print may take.
const PRINT_LIMIT: Duration = Duration::from_secs(180);

/// The browsers tried, in order.
/// Headless Chromium without a sandbox, GPU, network chatter or first-run
/// pages: how mailbench (and its tests) run a browser on a page of its own.
pub const HEADLESS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
];

const BROWSERS: [&str; 4] = ["chromium", "chromium-browser", "google-chrome", "chrome"];

/// Prints `dir/report.html` to `dir/report.pdf`; says on stderr what went
/// wrong (the run's result does not depend on it).
pub fn print(dir: &Path, common: &Common) {
    match print_pdf(dir) {
        Ok(pdf) => {
            if !common.quiet {
                mailbench_base::secrets::warn(&format!("mailbench: wrote {}", pdf.display()));
            }
        }
        Err(e) => mailbench_base::secrets::warn(&format!("mailbench: report.pdf not written: {e}")),
    }
}

fn browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    BROWSERS.iter().find_map(|b| {
        std::env::split_paths(&path)
            .map(|d| d.join(b))
            .find(|p| p.is_file())
    })
}

/// Runs the browser on the page; the PDF's path.
pub fn print_pdf(dir: &Path) -> Result<PathBuf, String> {
    let html = dir.join("report.html");
    let html = html
        .canonicalize()
        .map_err(|e| format!("{}: {e}", html.display()))?;
    let pdf = dir.join("report.pdf");
    let Some(bin) = browser() else {
        return Err(format!(
            "no Chromium on the PATH (tried {}); install it (Debian: apt-get install chromium) \
             or print {} from a browser",
            BROWSERS.join(", "),
            html.display()
        ));
    };
    let profile = tempfile_dir(dir)?;
    let mut child = Command::new(&bin)
        .args(HEADLESS)
        .arg("--no-pdf-header-footer")
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--print-to-pdf={}", pdf.display()))
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if t0.elapsed() > PRINT_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_dir_all(&profile);
                return Err(format!("{} took over {PRINT_LIMIT:?}", bin.display()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("{}: {e}", bin.display())),
        }
    };
    let _ = std::fs::remove_dir_all(&profile);
    match std::fs::metadata(&pdf) {
        Ok(m) if status.success() && m.len() > 0 => Ok(pdf),
        _ => Err(format!("{} ended with {status} and no PDF", bin.display())),
    }
}

/// A fresh browser profile folder inside the run folder (removed after).
fn tempfile_dir(dir: &Path) -> Result<PathBuf, String> {
    let p = dir.join(format!(".chromium-profile-{}", std::process::id()));
    std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(p)
}
