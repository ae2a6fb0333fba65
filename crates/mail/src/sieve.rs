//! A minimal ManageSieve (RFC 5804) client: STARTTLS, AUTHENTICATE PLAIN,
//! PUTSCRIPT, SETACTIVE, DELETESCRIPT, LOGOUT. Server-side rules are Sieve scripts.

use crate::endpoint::{Endpoint, StartTls, Tls};
use crate::wire::{ErrorKind, OpResult, Wire};
use base64::Engine as _;
use std::time::Duration;
use tokio::time::Instant;

pub struct SieveConn {
    wire: Wire,
    pub op_timeout: Duration,
    pub commands: u64,
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

impl SieveConn {
    /// Connects in plain text and reads the capability greeting (ends with `OK`).
    pub async fn connect(host: &str, port: u16, op_timeout: Duration) -> OpResult<SieveConn> {
        let wire = Wire::connect(host, port, op_timeout).await?;
        let mut c = SieveConn {
            wire,
            op_timeout,
            commands: 0,
        };
        c.response("greeting", Instant::now() + op_timeout).await?;
        Ok(c)
    }

    /// Connects to `ep` and upgrades with STARTTLS when the greeting offers it
    /// (`auto`) or always (`require`). Fails (kind `tls`) when the connection
    /// could not carry a password safely.
    pub async fn open(
        ep: &Endpoint,
        tls: &Tls,
        starttls: StartTls,
        op_timeout: Duration,
    ) -> OpResult<SieveConn> {
        let wire = Wire::connect(&ep.host, ep.port, op_timeout).await?;
        let mut c = SieveConn {
            wire,
            op_timeout,
            commands: 0,
        };
        let (_, caps) = c
            .response_lines("greeting", Instant::now() + op_timeout)
            .await?;
        let offered = caps.iter().any(|l| l.eq_ignore_ascii_case("\"STARTTLS\""));
        if starttls != StartTls::Never
            && Tls::upgrade(starttls, offered, "ManageSieve", &c.wire.peer)?
        {
            c.command("STARTTLS", b"STARTTLS\r\n")
                .await
                .map_err(Tls::starttls_refused)?;
            let deadline = Instant::now() + op_timeout;
            tls.handshake(&mut c.wire, &ep.host, "STARTTLS", deadline)
                .await?;
            // The server lists its capabilities again over TLS (RFC 5804 2.2).
            c.response("capabilities after STARTTLS", Instant::now() + op_timeout)
                .await?;
        }
        tls.check_credentials_safe(&c.wire, "ManageSieve", "sieve:// with STARTTLS")?;
        Ok(c)
    }

    /// How the connection is protected: `None` = plain text.
    pub fn security(&self) -> Option<&str> {
        self.wire.security()
    }

    async fn response(&mut self, what: &str, deadline: Instant) -> OpResult<String> {
        self.response_lines(what, deadline).await.map(|(ok, _)| ok)
    }

    /// The final `OK` line and the lines before it.
    async fn response_lines(
        &mut self,
        what: &str,
        deadline: Instant,
    ) -> OpResult<(String, Vec<String>)> {
        let mut lines = Vec::new();
        loop {
            let u = self.wire.read_unit(deadline).await?;
            let text = String::from_utf8_lossy(&u).to_string();
            if text.starts_with("OK") {
                return Ok((text, lines));
            }
            if text.starts_with("NO") || text.starts_with("BYE") {
                let kind = if what == "AUTHENTICATE" {
                    ErrorKind::Auth
                } else {
                    ErrorKind::Rejected
                };
                return Err(self.wire.refused(kind, what, crate::wire::show(&u)));
            }
            if !(text.starts_with('"') || text.starts_with('{')) {
                return Err(self.wire.malformed("a line that is not ManageSieve", &u));
            }
            if lines.len() >= mailbench_base::limits::MAX_REPLY_LINES {
                return Err(self
                    .wire
                    .malformed("more lines than any ManageSieve answer", &u));
            }
            lines.push(text);
        }
    }

    async fn command(&mut self, what: &str, line: &[u8]) -> OpResult<String> {
        let deadline = Instant::now() + self.op_timeout;
        self.commands += 1;
        self.wire.write_all(line, deadline).await?;
        self.response(what, deadline).await
    }

    pub async fn auth(&mut self, user: &str, password: &str) -> OpResult<()> {
        let token =
            base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{password}"));
        self.command(
            "AUTHENTICATE",
            format!("AUTHENTICATE \"PLAIN\" \"{token}\"\r\n").as_bytes(),
        )
        .await?;
        Ok(())
    }

    pub async fn put_script(&mut self, name: &str, script: &str) -> OpResult<()> {
        let mut line = format!("PUTSCRIPT {} {{{}+}}\r\n", quote(name), script.len()).into_bytes();
        line.extend_from_slice(script.as_bytes());
        line.extend_from_slice(b"\r\n");
        self.command("PUTSCRIPT", &line).await?;
        Ok(())
    }

    pub async fn set_active(&mut self, name: &str) -> OpResult<()> {
        self.command(
            "SETACTIVE",
            format!("SETACTIVE {}\r\n", quote(name)).as_bytes(),
        )
        .await?;
        Ok(())
    }

    pub async fn delete_script(&mut self, name: &str) -> OpResult<()> {
        self.command(
            "DELETESCRIPT",
            format!("DELETESCRIPT {}\r\n", quote(name)).as_bytes(),
        )
        .await?;
        Ok(())
    }

    pub async fn logout(&mut self) {
        let _ = self.command("LOGOUT", b"LOGOUT\r\n").await;
    }
}

/// A Sieve script holding `rules` (one `if` per rule). Each rule files messages
/// carrying a header only mailbench's rule probes would carry, so the rules cost the
/// server their evaluation at every delivery but never divert the measured mail.
pub fn script(rules: &[String]) -> String {
    let mut s = String::from("require [\"fileinto\"];\n");
    for r in rules {
        s.push_str(&format!(
            "if header :contains \"X-Mailbench-Rule\" \"{r}\" {{ fileinto \"INBOX\"; stop; }}\n"
        ));
    }
    s
}
