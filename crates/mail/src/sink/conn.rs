//! One client connection of the sink: bounded, cancel-safe line reads (a
//! session waits for a line and for new mail at once), literals skipped
//! without holding them, and writes of whole answers.

use std::io;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Longest command line accepted (a longer one ends the connection).
pub const MAX_LINE: usize = 64 * 1024;
/// Read buffer of a connection.
const READ_BUF: usize = 4096;
/// An answer buffer larger than this is given back after it was sent.
const KEEP_OUT: usize = 64 * 1024;

pub struct Conn {
    rd: BufReader<OwnedReadHalf>,
    wr: OwnedWriteHalf,
    /// The line being read, then the last complete line (CRLF removed).
    line: Vec<u8>,
    complete: bool,
    /// The answer being built.
    pub out: Vec<u8>,
}

impl Conn {
    pub fn new(s: TcpStream) -> Conn {
        let _ = s.set_nodelay(true);
        let (r, w) = s.into_split();
        Conn {
            rd: BufReader::with_capacity(READ_BUF, r),
            wr: w,
            line: Vec::new(),
            complete: false,
            out: Vec::new(),
        }
    }

    /// Reads the next line; false at the end of the stream. Cancel-safe: a
    /// cancelled read keeps what it read for the next call.
    pub async fn next_line(&mut self) -> io::Result<bool> {
        if self.complete {
            self.line.clear();
            self.complete = false;
        }
        loop {
            let buf = self.rd.fill_buf().await?;
            if buf.is_empty() {
                return Ok(false);
            }
            if let Some(i) = buf.iter().position(|b| *b == b'\n') {
                self.line.extend_from_slice(&buf[..i]);
                self.rd.consume(i + 1);
                if self.line.last() == Some(&b'\r') {
                    self.line.pop();
                }
                self.complete = true;
                return Ok(true);
            }
            let n = buf.len();
            self.line.extend_from_slice(buf);
            self.rd.consume(n);
            if self.line.len() > MAX_LINE {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a line longer than 64 KiB",
                ));
            }
        }
    }

    /// The last complete line (without its CRLF), as text.
    pub fn line(&self) -> String {
        String::from_utf8_lossy(&self.line).into_owned()
    }

    /// Reads `n` bytes without keeping them.
    pub async fn skip(&mut self, mut n: u64) -> io::Result<()> {
        while n > 0 {
            let buf = self.rd.fill_buf().await?;
            if buf.is_empty() {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let k = buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
            self.rd.consume(k);
            n -= k as u64;
        }
        Ok(())
    }

    /// Sends `text` at once.
    pub async fn say(&mut self, text: &str) -> io::Result<()> {
        self.wr.write_all(text.as_bytes()).await
    }

    /// Sends the answer built in `out`, and empties it.
    pub async fn flush_out(&mut self) -> io::Result<()> {
        let r = self.wr.write_all(&self.out).await;
        self.out.clear();
        if self.out.capacity() > KEEP_OUT {
            self.out = Vec::new();
        }
        r
    }
}

/// `{n}` or `{n+}` at the end of a command line: the literal's size and
/// whether it is non-synchronizing (LITERAL+).
pub fn literal_at_end(line: &str) -> Option<(u64, bool)> {
    let l = line.strip_suffix('}')?;
    let open = l.rfind('{')?;
    let num = &l[open + 1..];
    let (num, plus) = match num.strip_suffix('+') {
        Some(n) => (n, true),
        None => (num, false),
    };
    if num.is_empty() || num.len() > 10 || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((num.parse().ok()?, plus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_at_the_end_of_a_line() {
        assert_eq!(literal_at_end("a APPEND x {12}"), Some((12, false)));
        assert_eq!(literal_at_end("a APPEND x (\\Seen) {3+}"), Some((3, true)));
        assert_eq!(literal_at_end("a NOOP"), None);
        assert_eq!(literal_at_end("a x {}"), None);
        assert_eq!(literal_at_end("a x {99999999999}"), None);
    }
}
