//! The byte stream under every protocol client: connect with a deadline, a read
//! buffer that is safe to cancel (so a user can wait for IDLE notifications and its
//! next task at once), line and IMAP-literal framing, and the error kinds every
//! failure is counted under.

use std::fmt;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

/// Why an operation failed; results count errors by these names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// TCP connect refused or unreachable.
    Connect,
    /// The server refused the credentials.
    Auth,
    /// No complete answer within the per-operation timeout.
    Timeout,
    /// The connection was reset or closed mid-operation.
    Reset,
    /// The server sent something that is not the protocol.
    Malformed,
    /// The server answered NO/BAD (IMAP), 4xx/5xx (SMTP) or NO (ManageSieve).
    Rejected,
    /// TLS handshake or certificate failure.
    Tls,
    /// A message addressed to a user did not arrive before the run ended.
    NotDelivered,
}

impl ErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Auth => "auth",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Rejected => "rejected",
            ErrorKind::Tls => "tls",
            ErrorKind::NotDelivered => "not_delivered",
        }
    }
}

/// A failed protocol operation: the kind and a plain message, never a
/// password: the message is only set by `new`, which redacts every
/// registered credential by value (`secrets`), whatever the server echoed.
#[derive(Debug, Clone)]
pub struct OpError {
    pub kind: ErrorKind,
    msg: String,
}

impl OpError {
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> OpError {
        let msg: String = msg.into();
        let msg = match mailbench_base::secrets::redact(&msg) {
            std::borrow::Cow::Borrowed(_) => msg,
            std::borrow::Cow::Owned(m) => m,
        };
        OpError { kind, msg }
    }

    /// The message (redacted).
    pub fn msg(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.msg)
    }
}

pub type OpResult<T> = std::result::Result<T, OpError>;

pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Largest single response unit accepted (a line plus its literals).
const MAX_UNIT: usize = mailbench_base::limits::MAX_UNIT_BYTES;
/// Longest line without CRLF accepted before it is called garbage.
const MAX_LINE: usize = mailbench_base::limits::MAX_LINE_BYTES;

/// A connection's read buffer to begin with.
const INITIAL_BUF: usize = 4096;
/// The free room a read asks for (the buffer doubles when it has less).
const READ_ROOM: usize = 2048;
/// A read buffer grown past this (a large message) is given back once read.
const KEEP_BUF: usize = 8 * 1024;

pub struct Wire {
    io: Box<dyn Io>,
    buf: Vec<u8>,
    start: usize,
    /// How much of the unit at the head of the buffer is parsed (bytes from
    /// `start`: the start of its line still to read), so each read adds only
    /// the new bytes' work, never the whole unit's again.
    scan: usize,
    pub peer: String,
    /// The peer is a loopback address (as connected, not as named).
    pub loopback: bool,
    /// `None` on a plain-text stream, else how TLS was set up and what was
    /// negotiated (e.g. `STARTTLS TLSv1.3 TLS13_AES_256_GCM_SHA384`).
    security: Option<String>,
    /// Bytes read and written (generator efficiency figures).
    pub bytes_in: u64,
    pub bytes_out: u64,
}

impl Wire {
    /// The error of a command `what` the peer refused, with its answer.
    pub fn refused(&self, kind: ErrorKind, what: &str, answer: impl fmt::Display) -> OpError {
        OpError::new(kind, format!("{what} refused by {}: {answer}", self.peer))
    }

    /// The error of a line `unit` the peer sent that is not what the protocol
    /// allows there (`what`: "a line that is not ...").
    pub fn malformed(&self, what: &str, unit: &[u8]) -> OpError {
        OpError::new(
            ErrorKind::Malformed,
            format!("{} sent {what}: {}", self.peer, show(unit)),
        )
    }

    /// TCP connect to `host:port` within `timeout`.
    pub async fn connect(host: &str, port: u16, timeout: Duration) -> OpResult<Wire> {
        let peer = format!("{host}:{port}");
        let s = match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host, port)))
            .await
        {
            Err(_) => {
                return Err(OpError::new(
                    ErrorKind::Timeout,
                    format!("connect to {peer} timed out"),
                ));
            }
            Ok(Err(e)) => {
                return Err(OpError::new(
                    ErrorKind::Connect,
                    format!("cannot connect to {peer}: {e}"),
                ));
            }
            Ok(Ok(s)) => s,
        };
        let _ = s.set_nodelay(true);
        let loopback = s
            .peer_addr()
            .map(|a| a.ip().to_canonical().is_loopback())
            .unwrap_or(false);
        let mut w = Wire::from_io(Box::new(s), peer);
        w.loopback = loopback;
        Ok(w)
    }

    /// A wire over any stream; not taken for loopback, plain text.
    pub fn from_io(io: Box<dyn Io>, peer: String) -> Wire {
        Wire {
            io,
            buf: Vec::with_capacity(INITIAL_BUF),
            start: 0,
            scan: 0,
            peer,
            loopback: false,
            security: None,
            bytes_in: 0,
            bytes_out: 0,
        }
    }

    /// Takes the stream out (for a TLS handshake), leaving a closed one behind.
    pub fn take_io(&mut self) -> Box<dyn Io> {
        std::mem::replace(&mut self.io, Box::new(tokio::io::empty()))
    }

    /// Puts an encrypted stream in place (after a TLS handshake).
    pub fn set_tls_io(&mut self, io: Box<dyn Io>, security: String) {
        self.io = io;
        self.security = Some(security);
    }

    /// How the stream is protected; `None` = plain text.
    pub fn security(&self) -> Option<&str> {
        self.security.as_deref()
    }

    pub fn is_tls(&self) -> bool {
        self.security.is_some()
    }

    /// Writes `data` and flushes it: over TLS, `write_all` alone can return
    /// with the last records still in the TLS layer's buffer (the socket was
    /// full for a moment), so the server never sees the command and the answer
    /// never comes. On plain TCP the flush does nothing.
    pub async fn write_all(&mut self, data: &[u8], deadline: Instant) -> OpResult<()> {
        let io = &mut self.io;
        let write = async move {
            io.write_all(data).await?;
            io.flush().await
        };
        match tokio::time::timeout_at(deadline, write).await {
            Err(_) => Err(OpError::new(
                ErrorKind::Timeout,
                format!("write to {} timed out", self.peer),
            )),
            Ok(Err(e)) => Err(io_error(&self.peer, e)),
            Ok(Ok(())) => {
                self.bytes_out += data.len() as u64;
                Ok(())
            }
        }
    }

    /// Reads more bytes into the buffer. Cancel-safe: a cancelled read loses
    /// nothing. `deadline` ends the whole exchange, not the wait for each
    /// read: a server that keeps sending without completing its answer meets
    /// it as one that sends nothing.
    async fn fill(&mut self, deadline: Instant) -> OpResult<()> {
        if Instant::now() >= deadline {
            return Err(self.timed_out());
        }
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
            // The room a large answer took is given back once it was read:
            // a connection waits with a small buffer whatever it fetched.
            if self.buf.capacity() > KEEP_BUF {
                self.buf = Vec::with_capacity(INITIAL_BUF);
            }
        } else if self.start > 65536 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        // Read straight into the buffer's free room (at least READ_ROOM):
        // no read buffer of its own in every waiting user's future.
        self.buf.reserve(READ_ROOM);
        match tokio::time::timeout_at(deadline, self.io.read_buf(&mut self.buf)).await {
            Err(_) => Err(self.timed_out()),
            Ok(Err(e)) => Err(io_error(&self.peer, e)),
            Ok(Ok(0)) => Err(OpError::new(
                ErrorKind::Reset,
                format!("{} closed the connection", self.peer),
            )),
            Ok(Ok(n)) => {
                self.bytes_in += n as u64;
                Ok(())
            }
        }
    }

    fn timed_out(&self) -> OpError {
        OpError::new(
            ErrorKind::Timeout,
            format!(
                "no complete answer from {} within the operation timeout",
                self.peer
            ),
        )
    }

    /// One CRLF-terminated line (without the CRLF).
    pub async fn read_line(&mut self, deadline: Instant) -> OpResult<Vec<u8>> {
        loop {
            let avail = &self.buf[self.start..];
            if let Some(pos) = find_crlf(avail) {
                let line = avail[..pos].to_vec();
                self.start += pos + 2;
                self.scan = 0;
                return Ok(line);
            }
            if avail.len() > MAX_LINE {
                return Err(OpError::new(
                    ErrorKind::Malformed,
                    format!("{} sent a line longer than 1 MiB", self.peer),
                ));
            }
            self.fill(deadline).await?;
        }
    }

    /// One IMAP/ManageSieve response unit: a line and any `{n}` literals it
    /// announces, joined (CRLFs inside are kept, the final CRLF is removed).
    pub async fn read_unit(&mut self, deadline: Instant) -> OpResult<Vec<u8>> {
        loop {
            match unit_scan(&self.buf[self.start..], self.scan) {
                Ok(Scan::Done(n)) => {
                    let unit = self.buf[self.start..self.start + n - 2].to_vec();
                    self.start += n;
                    self.scan = 0;
                    return Ok(unit);
                }
                Ok(Scan::More(at)) => self.scan = at,
                Err(m) => {
                    return Err(OpError::new(
                        ErrorKind::Malformed,
                        format!("{} sent {m}", self.peer),
                    ));
                }
            }
            self.fill(deadline).await?;
        }
    }

    /// Whether unread bytes are buffered.
    pub fn has_buffered(&self) -> bool {
        self.start < self.buf.len()
    }
}

/// A short printable excerpt of server output for error messages.
/// A server's response as shown in an error: credentials redacted (before
/// it is cut, so no part of one is left), control characters as `.`, at
/// most 120 characters.
pub fn show(u: &[u8]) -> String {
    mailbench_base::secrets::redact_bytes(&u[..u.len().min(SHOW_SCAN)])
        .chars()
        .take(120)
        .map(|c| if c.is_control() { '.' } else { c })
        .collect()
}

/// How much of a response `show` redacts before cutting it.
const SHOW_SCAN: usize = 4096;

fn io_error(peer: &str, e: std::io::Error) -> OpError {
    use std::io::ErrorKind as K;
    let kind = match e.kind() {
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => {
            ErrorKind::Reset
        }
        K::TimedOut => ErrorKind::Timeout,
        K::InvalidData => ErrorKind::Tls,
        _ => ErrorKind::Reset,
    };
    OpError::new(kind, format!("{peer}: {e}"))
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

/// Length of the complete unit at the head of `b` (including its final CRLF), None
/// if more bytes are needed, Err for garbage.
pub fn unit_len(b: &[u8]) -> Result<Option<usize>, String> {
    match unit_scan(b, 0)? {
        Scan::Done(n) => Ok(Some(n)),
        Scan::More(_) => Ok(None),
    }
}

/// How far [`unit_scan`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// The unit is complete: its length with the final CRLF.
    Done(usize),
    /// More bytes are needed; parsing resumes at this offset (the start of a
    /// line not yet complete, or of one whose literal is still arriving).
    More(usize),
}

/// Parses the unit at the head of `b` from `from` (an offset an earlier call
/// returned in [`Scan::More`], or 0): each byte is looked at about once
/// however the unit arrives, so a server streaming a unit without end costs
/// time in proportion to what it sent, and meets the limits.
pub fn unit_scan(b: &[u8], from: usize) -> Result<Scan, String> {
    let mut pos = from;
    loop {
        let Some(rel) = find_crlf(&b[pos..]) else {
            if b.len() - pos > MAX_LINE {
                return Err("a line longer than 1 MiB".into());
            }
            return Ok(Scan::More(pos));
        };
        let line = &b[pos..pos + rel];
        let end = pos + rel + 2;
        match literal_len(line) {
            Some(n) => {
                if n > MAX_UNIT || end + n > MAX_UNIT {
                    return Err(format!(
                        "a response over the {} MiB limit (a literal of {n} bytes)",
                        MAX_UNIT >> 20
                    ));
                }
                if b.len() < end + n {
                    return Ok(Scan::More(pos));
                }
                pos = end + n;
            }
            None => return Ok(Scan::Done(end)),
        }
    }
}

/// `{123}` or `{123+}` at the end of a line.
fn literal_len(line: &[u8]) -> Option<usize> {
    let l = line.strip_suffix(b"}")?;
    let open = l.iter().rposition(|c| *c == b'{')?;
    let num = &l[open + 1..];
    let num = num.strip_suffix(b"+").unwrap_or(num);
    if num.is_empty() || num.len() > 12 || !num.iter().all(|c| c.is_ascii_digit()) {
        return None;
    }
    std::str::from_utf8(num).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_join_literals() {
        assert_eq!(unit_len(b"* OK hi\r\n"), Ok(Some(9)));
        assert_eq!(unit_len(b"* OK hi\r"), Ok(None));
        let u = b"* 1 FETCH (BODY[] {5}\r\nab\r\nc)\r\nnext";
        assert_eq!(unit_len(u), Ok(Some(u.len() - 4)));
        assert_eq!(unit_len(b"* 1 FETCH (BODY[] {5}\r\nab"), Ok(None));
        assert_eq!(unit_len(b"x {3+}\r\nabc {2}\r\nde\r\n"), Ok(Some(21)));
        assert!(unit_len(b"* 1 FETCH {999999999999}\r\n").is_err());
        assert_eq!(literal_len(b"a {x}"), None);
    }

    /// A stream that, like a TLS layer, keeps written bytes until flushed.
    struct Buffering {
        pending: Vec<u8>,
        sent: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    }

    impl AsyncRead for Buffering {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Buffering {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            b: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.pending.extend_from_slice(b);
            std::task::Poll::Ready(Ok(b.len()))
        }
        fn poll_flush(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let p = std::mem::take(&mut self.pending);
            if let Ok(mut sent) = self.sent.lock() {
                sent.extend_from_slice(&p);
            }
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_write_reaches_the_peer_through_a_buffering_layer() {
        let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let io = Buffering {
            pending: Vec::new(),
            sent: sent.clone(),
        };
        let mut w = Wire::from_io(Box::new(io), "test".into());
        let deadline = Instant::now() + Duration::from_secs(5);
        w.write_all(b"DONE\r\n", deadline).await.unwrap();
        assert_eq!(sent.lock().unwrap().as_slice(), b"DONE\r\n");
        assert_eq!(w.bytes_out, 6);
    }
}
