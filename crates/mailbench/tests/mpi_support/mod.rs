//! Shared helpers of the MPI tests (`multihost_mpi.rs`, `multihost_mail_mpi.rs`):
//! launching `mpirun` with a deadline, reading run folders and results, and
//! `report merge` of the ranks' results.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

#[path = "../common/mod.rs"]
mod common;
pub use common::{read_json, text};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One MPI job at a time (two cores).
pub static SERIAL: Mutex<()> = Mutex::new(());

/// Holds `SERIAL` for the test's length (a failed test's poison is ignored).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_mailbench")
}

pub fn mpirun(np: usize) -> Command {
    let mut c = Command::new("mpirun");
    c.args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(np.to_string());
    c
}

/// Waits for a child with a deadline; kills it (and fails) past it.
pub fn wait(mut child: Child, limit: Duration) -> (Output, Duration) {
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return (child.wait_with_output().unwrap(), t.elapsed());
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "no end within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn run_job(mut c: Command, limit: Duration) -> Output {
    wait(start_job(&mut c), limit).0
}

/// Starts the job `c` with its stdout and stderr piped (for `wait`).
pub fn start_job(c: &mut Command) -> Child {
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun (apt-get install openmpi-bin)")
}

/// Ctrl-C to the running `mpirun` (SIGINT to its process).
pub fn interrupt(child: &Child) {
    let int = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(int.success());
}

pub fn only_run_dir(out: &Path, prefix: &str) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// The start instant a run's test.log names (`the load starts at ...`).
pub fn start_instant(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap();
    let l = text
        .lines()
        .find(|l| l.contains("the load starts at"))
        .unwrap_or_else(|| panic!("{}: no start instant\n{text}", log.display()));
    l.split("the load starts at")
        .nth(1)
        .unwrap()
        .trim()
        .to_string()
}

/// Writes an executable shell script (a wrapper or launch agent) at `path`.
pub fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A wrapper script in `dir` that records each rank's process id in
/// `dir/pid-RANK`, then runs mailbench with the job's arguments.
pub fn pid_wrapper(dir: &Path) -> PathBuf {
    let wrap = dir.join("wrap.sh");
    let body = format!(
        "#!/bin/sh\necho $$ > {}/pid-$OMPI_COMM_WORLD_RANK\nexec {} \"$@\"\n",
        dir.display(),
        exe()
    );
    write_script(&wrap, &body);
    wrap
}

/// Returns the running job once `ready` holds (polled every 50 ms); past
/// 150 s, or when the job ends first, kills it and fails saying `what`
/// never happened.
pub fn until(mut child: Child, what: &str, ready: impl Fn() -> bool) -> Child {
    let t = Instant::now();
    while !ready() {
        if t.elapsed() > Duration::from_secs(150) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("{what} never happened\n{}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// The results every rank wrote under `dir` (`rank-{r}/result.json`).
pub fn rank_results(dir: &Path, ranks: usize) -> Vec<Value> {
    (0..ranks)
        .map(|r| read_json(&dir.join(format!("rank-{r}/result.json"))))
        .collect()
}

/// `report merge` of the results the ranks wrote under `dir`, written into
/// `dir/merge-check`: the merged result.
pub fn report_merge(dir: &Path, ranks: usize) -> Value {
    let merged_out = dir.join("merge-check");
    let mut c = Command::new(exe());
    c.args(["--quiet", "--output"]).arg(&merged_out);
    c.args(["report", "merge"]);
    for r in 0..ranks {
        c.arg(dir.join(format!("rank-{r}/result.json")));
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    read_json(&only_run_dir(&merged_out, "report-merge").join("result.json"))
}
