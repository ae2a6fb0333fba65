//! `--trace-imap DIR`: the IMAP traffic of every simulated user, one file per
//! user (`DIR/<address>.imap.txt`, appended across reconnections), for
//! diagnosing a server. Passwords never reach the file: LOGIN is written with
//! the password replaced by `"***"`. Long responses and message literals are
//! cut to their first lines (the size is noted), so a trace stays readable.

use mailbench_base::Result;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Bytes of one response or command shown before it is cut.
const SHOWN: usize = 2048;

/// The folder traces go to; cheap to clone.
#[derive(Debug, Clone)]
pub struct TraceDir {
    dir: PathBuf,
}

impl TraceDir {
    /// Claims `dir` (created if needed; a folder holding files mailbench did
    /// not create is refused).
    pub fn create(dir: &Path) -> Result<TraceDir> {
        mailbench_base::rundir::claim_folder(dir, false)?;
        Ok(TraceDir {
            dir: dir.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The trace of `user`'s IMAP connections (None when the file cannot be
    /// opened: tracing never fails an operation).
    pub fn open(&self, user: &str) -> Option<Trace> {
        let name: String = user
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "@.-_+".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = self.dir.join(format!("{name}.imap.txt"));
        let f = mailbench_base::rundir::open_append(&path).ok()?;
        Some(Trace {
            file: Arc::new(Mutex::new(f)),
        })
    }
}

/// One user's trace file.
#[derive(Debug, Clone)]
pub struct Trace {
    file: Arc<Mutex<std::fs::File>>,
}

impl Trace {
    /// What the client sent (`C:`).
    pub fn client(&self, bytes: &[u8]) {
        self.write("C:", bytes);
    }

    /// What the server sent (`S:`), one response unit with its literals.
    pub fn server(&self, bytes: &[u8]) {
        self.write("S:", bytes);
    }

    /// A remark of mailbench's own (`--`), e.g. a TLS handshake.
    pub fn note(&self, text: &str) {
        self.write("--", text.as_bytes());
    }

    fn write(&self, who: &str, bytes: &[u8]) {
        let line = format_entry(unix_ms(), who, bytes);
        let mut f = match self.file.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let _ = f.write_all(line.as_bytes());
    }
}

fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// `<unix s.ms> C: line`, further lines of the unit indented; cut after
/// `SHOWN` bytes with the total size noted.
fn format_entry(ms: u128, who: &str, bytes: &[u8]) -> String {
    // Redacted before it is cut, so that no part of a password is left.
    let scan = mailbench_base::secrets::redact_bytes(&bytes[..bytes.len().min(SHOWN + 1024)]);
    let cut = scan
        .char_indices()
        .nth(SHOWN)
        .map_or(scan.as_str(), |(i, _)| &scan[..i]);
    let text = cut.trim_end_matches(['\r', '\n']);
    let mut out = String::with_capacity(text.len() + 32);
    for (i, l) in text.split("\r\n").enumerate() {
        if i == 0 {
            out.push_str(&format!("{}.{:03} {who} ", ms / 1000, ms % 1000));
        } else {
            out.push_str("               ");
        }
        out.push_str(l);
        out.push('\n');
    }
    if bytes.len() > SHOWN {
        out.push_str(&format!(
            "               [... cut: {} bytes in all]\n",
            bytes.len()
        ));
    }
    out
}

/// A LOGIN command (after the tag) as it may be traced: the password replaced.
pub fn redacted_login(user_quoted: &str) -> String {
    format!("LOGIN {user_quoted} \"***\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_cut_and_indented() {
        let e = format_entry(
            1_700_000_000_123,
            "S:",
            b"* 1 FETCH (BODY[] {5}\r\nab\r\nc)\r\n",
        );
        assert_eq!(
            e,
            "1700000000.123 S: * 1 FETCH (BODY[] {5}\n               ab\n               c)\n"
        );
        let big = vec![b'x'; 5000];
        let e = format_entry(0, "C:", &big);
        assert!(e.contains("[... cut: 5000 bytes in all]"), "{e}");
        assert!(e.len() < 2200);
        assert_eq!(redacted_login("\"u@x\""), "LOGIN \"u@x\" \"***\"");
    }
}
