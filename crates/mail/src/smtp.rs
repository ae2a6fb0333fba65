//! A minimal SMTP submission client: EHLO, STARTTLS, AUTH PLAIN, MAIL/RCPT/DATA,
//! QUIT, one connection per message (as a client that submits and disconnects).

use crate::endpoint::{Endpoint, StartTls, Tls};
use crate::wire::{ErrorKind, OpError, OpResult, Wire};
use base64::Engine as _;
use std::time::Duration;
use tokio::time::Instant;

pub struct SmtpConn {
    wire: Wire,
    pub op_timeout: Duration,
    pub commands: u64,
    /// EHLO keywords of the server (upper case), once EHLO was answered.
    ehlo: Option<Vec<String>>,
}

/// A complete reply: code, joined text, and the text of each line.
struct Reply {
    code: u16,
    text: String,
    lines: Vec<String>,
}

impl SmtpConn {
    /// Connects to `ep` with TLS as its scheme and `starttls` say: implicit TLS
    /// for `submissions://`/`smtps://`; on `smtp://`/`submission://` EHLO, then
    /// STARTTLS when offered (`auto`) or always (`require`) and EHLO again. Fails
    /// (kind `tls`) when the connection could not carry a password safely.
    pub async fn open(
        ep: &Endpoint,
        tls: &Tls,
        starttls: StartTls,
        op_timeout: Duration,
    ) -> OpResult<SmtpConn> {
        let wire = tls.connect(ep, op_timeout).await?;
        let mut c = Self::from_wire(wire, op_timeout).await?;
        c.hello().await?;
        if !c.wire.is_tls()
            && starttls != StartTls::Never
            && Tls::upgrade(starttls, c.has_ext("STARTTLS"), "submission", &c.wire.peer)?
        {
            c.command("STARTTLS", b"STARTTLS\r\n", 220)
                .await
                .map_err(Tls::starttls_refused)?;
            let deadline = Instant::now() + op_timeout;
            tls.handshake(&mut c.wire, &ep.host, "STARTTLS", deadline)
                .await?;
            // Forget what the server said in plain text and ask again (RFC 3207).
            c.ehlo = None;
            c.hello().await?;
        }
        tls.check_credentials_safe(&c.wire, "submission", "submissions://")?;
        Ok(c)
    }

    /// How the connection is protected: `None` = plain text.
    pub fn security(&self) -> Option<&str> {
        self.wire.security()
    }

    /// Whether the server's EHLO answer listed `keyword`.
    pub fn has_ext(&self, keyword: &str) -> bool {
        self.ehlo
            .as_ref()
            .is_some_and(|v| v.iter().any(|k| k.eq_ignore_ascii_case(keyword)))
    }

    /// Connects in plain text and reads the greeting (no TLS, no policy).
    pub async fn connect(host: &str, port: u16, op_timeout: Duration) -> OpResult<SmtpConn> {
        let wire = Wire::connect(host, port, op_timeout).await?;
        Self::from_wire(wire, op_timeout).await
    }

    pub async fn from_wire(wire: Wire, op_timeout: Duration) -> OpResult<SmtpConn> {
        let mut c = SmtpConn {
            wire,
            op_timeout,
            commands: 0,
            ehlo: None,
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
        let mut lines = Vec::new();
        loop {
            let line = self.wire.read_line(deadline).await?;
            if line.len() < 3 || !line[..3].iter().all(|c| c.is_ascii_digit()) {
                return Err(self
                    .wire
                    .malformed("a line that is not an SMTP reply", &line));
            }
            let code: u16 = std::str::from_utf8(&line[..3])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if !text.is_empty() {
                text.push(' ');
            }
            let this = String::from_utf8_lossy(line.get(4..).unwrap_or(b""))
                .trim()
                .to_string();
            text.push_str(&this);
            lines.push(this);
            if lines.len() > mailbench_base::limits::MAX_REPLY_LINES {
                return Err(self.wire.malformed(
                    &format!(
                        "a reply of more than {} lines",
                        mailbench_base::limits::MAX_REPLY_LINES
                    ),
                    &line,
                ));
            }
            match line.get(3) {
                Some(b'-') => continue,
                None | Some(b' ') => return Ok(Reply { code, text, lines }),
                _ => {
                    return Err(self.wire.malformed("a malformed SMTP reply", &line));
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
            let answer = format!("{} {}", r.code, r.text);
            return Err(self.wire.refused(kind, what, answer));
        }
        Ok(r)
    }

    /// EHLO; keeps the keywords the server lists.
    pub async fn hello(&mut self) -> OpResult<()> {
        let r = self
            .command("EHLO", b"EHLO mailbench.localhost\r\n", 250)
            .await?;
        let keywords = r
            .lines
            .iter()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .map(|k| k.to_ascii_uppercase())
            .collect();
        self.ehlo = Some(keywords);
        Ok(())
    }

    /// EHLO (unless done) then AUTH PLAIN (when credentials are given).
    pub async fn hello_auth(&mut self, user: &str, password: &str) -> OpResult<()> {
        if self.ehlo.is_none() {
            self.hello().await?;
        }
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
            let answer = format!("{} {}", r.code, r.text);
            return Err(self.wire.refused(ErrorKind::Rejected, "message", answer));
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
