//! A minimal SMTP submission client: EHLO, AUTH PLAIN, MAIL/RCPT/DATA, QUIT, one
//! connection per message (as a client that submits and disconnects).

use crate::wire::{ErrorKind, OpError, OpResult, Wire};
use base64::Engine as _;
use std::time::Duration;
use tokio::time::Instant;

pub struct SmtpConn {
    wire: Wire,
    pub op_timeout: Duration,
    pub commands: u64,
}

/// A complete reply: code and joined text.
struct Reply {
    code: u16,
    text: String,
}

impl SmtpConn {
    pub async fn connect(host: &str, port: u16, op_timeout: Duration) -> OpResult<SmtpConn> {
        let wire = Wire::connect(host, port, op_timeout).await?;
        Self::from_wire(wire, op_timeout).await
    }

    pub async fn from_wire(wire: Wire, op_timeout: Duration) -> OpResult<SmtpConn> {
        let mut c = SmtpConn {
            wire,
            op_timeout,
            commands: 0,
        };
        let r = c.reply(Instant::now() + op_timeout).await?;
        if r.code != 220 {
            return Err(OpError::new(
                if r.code >= 400 {
                    ErrorKind::Rejected
                } else {
                    ErrorKind::Malformed
                },
                format!("{} greeted with {} {}", c.wire.peer, r.code, r.text),
            ));
        }
        Ok(c)
    }

    async fn reply(&mut self, deadline: Instant) -> OpResult<Reply> {
        let mut text = String::new();
        loop {
            let line = self.wire.read_line(deadline).await?;
            if line.len() < 3 || !line[..3].iter().all(|c| c.is_ascii_digit()) {
                return Err(OpError::new(
                    ErrorKind::Malformed,
                    format!(
                        "{} sent a line that is not an SMTP reply: {}",
                        self.wire.peer,
                        crate::imap::show(&line)
                    ),
                ));
            }
            let code: u16 = std::str::from_utf8(&line[..3])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(String::from_utf8_lossy(line.get(4..).unwrap_or(b"")).trim());
            match line.get(3) {
                Some(b'-') => continue,
                None | Some(b' ') => return Ok(Reply { code, text }),
                _ => {
                    return Err(OpError::new(
                        ErrorKind::Malformed,
                        format!(
                            "{} sent a malformed SMTP reply: {}",
                            self.wire.peer,
                            crate::imap::show(&line)
                        ),
                    ));
                }
            }
        }
    }

    async fn command(&mut self, what: &str, line: &[u8], want: u16) -> OpResult<Reply> {
        let deadline = Instant::now() + self.op_timeout;
        self.commands += 1;
        self.wire.write_all(line, deadline).await?;
        let r = self.reply(deadline).await?;
        if r.code / 100 != want / 100 {
            let kind = if what == "AUTH" && r.code >= 500 {
                ErrorKind::Auth
            } else {
                ErrorKind::Rejected
            };
            return Err(OpError::new(
                kind,
                format!(
                    "{what} refused by {}: {} {}",
                    self.wire.peer, r.code, r.text
                ),
            ));
        }
        Ok(r)
    }

    /// EHLO then AUTH PLAIN (when credentials are given).
    pub async fn hello_auth(&mut self, user: &str, password: &str) -> OpResult<()> {
        self.command("EHLO", b"EHLO mailbench.localhost\r\n", 250)
            .await?;
        if !user.is_empty() {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{password}"));
            let line = format!("AUTH PLAIN {token}\r\n");
            self.command("AUTH", line.as_bytes(), 235).await?;
        }
        Ok(())
    }

    /// One message transaction; `msg` is a complete RFC 5322 message with CRLFs.
    pub async fn send(&mut self, from: &str, rcpts: &[String], msg: &[u8]) -> OpResult<()> {
        self.command(
            "MAIL FROM",
            format!("MAIL FROM:<{from}>\r\n").as_bytes(),
            250,
        )
        .await?;
        for r in rcpts {
            self.command("RCPT TO", format!("RCPT TO:<{r}>\r\n").as_bytes(), 250)
                .await?;
        }
        self.command("DATA", b"DATA\r\n", 354).await?;
        let data = dot_stuff(msg);
        self.commands += 1;
        let deadline = Instant::now() + self.op_timeout;
        self.wire.write_all(&data, deadline).await?;
        let r = self.reply(deadline).await?;
        if r.code != 250 {
            return Err(OpError::new(
                ErrorKind::Rejected,
                format!(
                    "message refused by {}: {} {}",
                    self.wire.peer, r.code, r.text
                ),
            ));
        }
        Ok(())
    }

    pub async fn quit(&mut self) {
        let _ = self.command("QUIT", b"QUIT\r\n", 221).await;
    }
}

/// Dot-stuffs a message and appends the terminating `.` line.
pub fn dot_stuff(msg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(msg.len() + 64);
    let mut at_line_start = true;
    for &b in msg {
        if at_line_start && b == b'.' {
            out.push(b'.');
        }
        out.push(b);
        at_line_start = b == b'\n';
    }
    if !out.ends_with(b"\r\n") {
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b".\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_are_stuffed() {
        assert_eq!(dot_stuff(b".a\r\nb\r\n.\r\n"), b"..a\r\nb\r\n..\r\n.\r\n");
        assert_eq!(dot_stuff(b"x"), b"x\r\n.\r\n");
    }
}
