//! The sink's child process: started by the generator with the run's
//! password and lists on its standard input, its ports read back from its
//! standard output, stopped when the run ends (or when the generator ends,
//! by whatever means: the child ends when its standard input closes).

use super::{Store, listen, parse_lists, workers};
use mailbench_base::rundir::TestLog;
use mailbench_base::{Error, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// The sink's ports on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkPorts {
    pub imap: u16,
    pub submission: u16,
    pub sieve: u16,
}

/// The line a started sink answers with.
const READY: &str = "mailbench-sink ports";
/// The line that ends the setup the sink reads.
const END: &str = ".";
/// Most setup bytes the child reads (password and lists).
const MAX_SETUP: u64 = 64 << 20;
/// How long the generator waits for the sink to answer its ports.
const START_WAIT: Duration = Duration::from_secs(20);

/// A running sink child.
pub struct SinkProcess {
    pub ports: SinkPorts,
    pub password: String,
    child: Child,
    /// Held open: the child ends when it closes.
    stdin: Option<ChildStdin>,
}

impl std::fmt::Debug for SinkProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SinkProcess(pid {}, {:?})", self.child.id(), self.ports)
    }
}

impl SinkProcess {
    /// Starts `mailbench mail sink` (this executable) outside the
    /// terminal's process group (Ctrl-C reaches mailbench only), gives it a
    /// new random password and the distribution lists (`aliases`, an alias
    /// table), and waits for its ports.
    pub fn start(aliases: &str, log: &TestLog) -> Result<SinkProcess> {
        let exe = std::env::current_exe().map_err(|e| {
            Error::runtime(format!("sink: cannot find mailbench's executable: {e}"))
        })?;
        let password = random_password()?;
        mailbench_base::secrets::register(&password);
        let mut child = Command::new(&exe)
            .args(["mail", "sink"])
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Error::runtime(format!("sink: cannot start {}: {e}", exe.display())))?;
        let mut stdin = child.stdin.take();
        let setup = format!("{password}\n{aliases}\n{END}\n");
        let written = stdin
            .as_mut()
            .map(|s| s.write_all(setup.as_bytes()).and_then(|()| s.flush()));
        let ports = match (written, child.stdout.take()) {
            (Some(Ok(())), Some(out)) => read_ports(out),
            _ => Err(Error::runtime("sink: cannot talk to the child process")),
        };
        let mut sink = SinkProcess {
            ports: SinkPorts {
                imap: 0,
                submission: 0,
                sieve: 0,
            },
            password,
            child,
            stdin,
        };
        // On failure `sink` is dropped here, which stops the child.
        sink.ports = ports?;
        log.line(format!(
            "sink: process {} answers on 127.0.0.1 (imap {}, submission {}, sieve {})",
            sink.child.id(),
            sink.ports.imap,
            sink.ports.submission,
            sink.ports.sieve
        ));
        Ok(sink)
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The CPU seconds the sink used so far (None once it has ended).
    pub fn cpu_s(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        mailbench_metrics::system::parse_cpu_s(&stat)
    }

    /// Stops the sink: its standard input closed, then killed (it keeps
    /// nothing worth a clean end) and reaped.
    pub fn stop(&mut self) {
        self.stdin.take();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SinkProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A new password of 24 letters and digits (from /dev/urandom), for one run.
fn random_password() -> Result<String> {
    let mut raw = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .map_err(|e| Error::runtime(format!("sink: cannot read /dev/urandom: {e}")))?;
    const ALNUM: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    Ok(raw
        .iter()
        .map(|b| ALNUM[usize::from(*b) % ALNUM.len()] as char)
        .collect())
}

/// The ports the child answers with (within [`START_WAIT`]).
fn read_ports(out: std::process::ChildStdout) -> Result<SinkPorts> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("mb-sink-start".into())
        .spawn(move || {
            let mut line = String::new();
            let r = BufReader::new(out.take(4096)).read_line(&mut line);
            let _ = tx.send(r.map(|_| line));
        })
        .map_err(|e| Error::runtime(format!("sink: cannot start a thread: {e}")))?;
    let line = match rx.recv_timeout(START_WAIT) {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => return Err(Error::runtime(format!("sink: no answer: {e}"))),
        Err(_) => {
            return Err(Error::runtime(format!(
                "sink: no answer within {} s",
                START_WAIT.as_secs()
            )));
        }
    };
    parse_ports(line.trim()).ok_or_else(|| {
        Error::runtime(format!(
            "sink: did not start: {}",
            if line.trim().is_empty() {
                "it ended without a word"
            } else {
                line.trim()
            }
        ))
    })
}

fn parse_ports(line: &str) -> Option<SinkPorts> {
    let rest = line.strip_prefix(READY)?;
    let p: Vec<u16> = rest
        .split_whitespace()
        .map(str::parse)
        .collect::<std::result::Result<_, _>>()
        .ok()?;
    match p.as_slice() {
        [imap, submission, sieve] => Some(SinkPorts {
            imap: *imap,
            submission: *submission,
            sieve: *sieve,
        }),
        _ => None,
    }
}

/// The child (`mailbench mail sink`): reads its setup, serves until its
/// standard input closes. Its file limit is raised to the hard limit first.
pub fn child_main() -> Result<()> {
    let _ = crate::run::capacity::raise_file_limit();
    let (password, aliases) = {
        let mut input = BufReader::new(std::io::stdin().lock().take(MAX_SETUP));
        read_setup(&mut input)?
    };
    let store = Arc::new(Store::new(password, parse_lists(&aliases)));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers())
        .enable_all()
        .build()
        .map_err(|e| Error::runtime(format!("sink: cannot start its runtime: {e}")))?;
    let ports = match rt.block_on(listen(store)) {
        Ok(p) => p,
        Err(e) => {
            println!("{e}");
            return Err(e);
        }
    };
    let mut out = std::io::stdout();
    writeln!(
        out,
        "{READY} {} {} {}",
        ports.imap, ports.submission, ports.sieve
    )
    .and_then(|()| out.flush())
    .map_err(|e| Error::runtime(format!("sink: cannot answer: {e}")))?;
    // Serve until the generator closes our standard input (or is gone).
    let mut buf = [0u8; 256];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
    rt.shutdown_background();
    Ok(())
}

/// The password (first line) and the alias table (up to a line `.`).
fn read_setup(input: &mut impl BufRead) -> Result<(String, String)> {
    let bad = || {
        Error::usage(
            "mail sink: started without its setup (it is started by `mail run --target sink`)",
        )
    };
    let mut password = String::new();
    input.read_line(&mut password).map_err(|_| bad())?;
    let password = password.trim_end_matches(['\r', '\n']).to_string();
    if password.is_empty() {
        return Err(bad());
    }
    let mut aliases = String::new();
    loop {
        let mut line = String::new();
        if input.read_line(&mut line).map_err(|_| bad())? == 0 {
            return Err(bad());
        }
        if line.trim_end() == END {
            return Ok((password, aliases));
        }
        aliases.push_str(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_and_ports_lines() {
        let mut r = std::io::Cursor::new(b"pw\n# lists\nl@x a@x, b@x\n.\n".to_vec());
        let (pw, aliases) = read_setup(&mut r).unwrap();
        assert_eq!(pw, "pw");
        assert_eq!(aliases, "# lists\nl@x a@x, b@x\n");
        assert!(read_setup(&mut std::io::Cursor::new(b"pw\nno end\n".to_vec())).is_err());
        assert!(read_setup(&mut std::io::Cursor::new(b"\n.\n".to_vec())).is_err());
        assert_eq!(
            parse_ports("mailbench-sink ports 1 2 3"),
            Some(SinkPorts {
                imap: 1,
                submission: 2,
                sieve: 3
            })
        );
        assert_eq!(parse_ports("mailbench-sink ports 1 2"), None);
        assert_eq!(parse_ports("error"), None);
    }
}
