//! The sink's SMTP submission service: EHLO, AUTH PLAIN (the run's
//! password), MAIL, RCPT, DATA, RSET, NOOP, QUIT. A message is read line by
//! line and not kept: its size and tracking header are delivered to every
//! recipient's Inbox (lists expanded) before the 250 reply.

use super::conn::Conn;
use super::store::Store;
use base64::Engine as _;
use std::io;
use std::sync::Arc;
use tokio::net::TcpStream;

/// Most recipients of one message.
const MAX_RCPTS: usize = 1000;
/// Longest tracking header kept.
const MAX_TRACK: usize = 4096;

const EHLO: &str = "250-sink.invalid\r\n250-PIPELINING\r\n250-8BITMIME\r\n\
                    250-ENHANCEDSTATUSCODES\r\n250-SIZE 268435456\r\n250 AUTH PLAIN\r\n";

#[derive(Default)]
struct Envelope {
    authed: bool,
    from: bool,
    rcpts: Vec<String>,
}

/// Serves one submission connection until QUIT or the client goes.
pub async fn serve(store: Arc<Store>, s: TcpStream) {
    let mut c = Conn::new(s);
    if c.say("220 sink.invalid ESMTP mailbench sink\r\n")
        .await
        .is_err()
    {
        return;
    }
    let mut env = Envelope::default();
    while let Ok(true) = c.next_line().await {
        match command(&store, &mut c, &mut env).await {
            Ok(true) => {}
            Ok(false) | Err(_) => return,
        }
    }
}

/// One command; false when the connection ends.
async fn command(store: &Store, c: &mut Conn, env: &mut Envelope) -> io::Result<bool> {
    let line = c.line();
    let up = line.to_ascii_uppercase();
    let reply: String = if up.starts_with("EHLO") {
        EHLO.into()
    } else if up.starts_with("HELO") {
        "250 sink.invalid\r\n".into()
    } else if up.starts_with("AUTH PLAIN") {
        auth(store, c, env, line.get(10..).unwrap_or("").trim()).await?
    } else if up.starts_with("MAIL FROM:") {
        if env.authed {
            env.from = true;
            env.rcpts.clear();
            "250 2.1.0 Ok\r\n".into()
        } else {
            "530 5.7.0 Authentication required\r\n".into()
        }
    } else if up.starts_with("RCPT TO:") {
        rcpt(env, &line[8..])
    } else if up == "DATA" {
        return data(store, c, env).await;
    } else if up == "RSET" {
        env.from = false;
        env.rcpts.clear();
        "250 2.0.0 Ok\r\n".into()
    } else if up == "NOOP" {
        "250 2.0.0 Ok\r\n".into()
    } else if up == "QUIT" {
        c.say("221 2.0.0 Bye\r\n").await?;
        return Ok(false);
    } else {
        "502 5.5.2 Command not recognized\r\n".into()
    };
    c.say(&reply).await?;
    Ok(true)
}

fn rcpt(env: &mut Envelope, arg: &str) -> String {
    if !env.from {
        return "503 5.5.1 MAIL first\r\n".into();
    }
    if env.rcpts.len() >= MAX_RCPTS {
        return "452 4.5.3 Too many recipients\r\n".into();
    }
    let addr = arg
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_matches(['<', '>']);
    env.rcpts.push(addr.to_string());
    "250 2.1.5 Ok\r\n".into()
}

/// AUTH PLAIN with the initial response (or after a `334`).
async fn auth(store: &Store, c: &mut Conn, env: &mut Envelope, token: &str) -> io::Result<String> {
    let token = if token.is_empty() {
        c.say("334 \r\n").await?;
        if !c.next_line().await? {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        c.line()
    } else {
        token.to_string()
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .unwrap_or_default();
    let pw = decoded.split(|b| *b == 0).nth(2).unwrap_or(b"");
    if store.password_ok(&String::from_utf8_lossy(pw)) {
        env.authed = true;
        Ok("235 2.7.0 Authentication successful\r\n".into())
    } else {
        Ok("535 5.7.8 Authentication credentials invalid\r\n".into())
    }
}

/// DATA: the message's lines up to the lone dot, counted (dot-stuffing
/// undone) and not kept; then delivered.
async fn data(store: &Store, c: &mut Conn, env: &mut Envelope) -> io::Result<bool> {
    if env.rcpts.is_empty() {
        c.say("554 5.5.1 No valid recipients\r\n").await?;
        return Ok(true);
    }
    c.say("354 End data with <CR><LF>.<CR><LF>\r\n").await?;
    let mut size: u64 = 0;
    let mut in_header = true;
    let mut track: Option<String> = None;
    let mut in_track = false;
    loop {
        if !c.next_line().await? {
            return Ok(false);
        }
        let line = c.line();
        if line == "." {
            break;
        }
        let line = line.strip_prefix('.').unwrap_or(&line);
        size += line.len() as u64 + 2;
        if !in_header {
            continue;
        }
        if line.is_empty() {
            in_header = false;
        } else if line.starts_with([' ', '\t']) {
            if in_track && let Some(t) = track.as_mut().filter(|t| t.len() < MAX_TRACK) {
                t.push(' ');
                t.push_str(line.trim());
            }
        } else {
            in_track = line
                .split_once(':')
                .is_some_and(|(h, _)| h.trim().eq_ignore_ascii_case("X-Mailbench-Track"));
            if in_track {
                let v = line.split_once(':').map_or("", |(_, v)| v.trim());
                track = Some(v.chars().take(MAX_TRACK).collect());
            }
        }
    }
    let size = u32::try_from(size).unwrap_or(u32::MAX);
    store.deliver(&env.rcpts, size, track.as_deref());
    env.from = false;
    env.rcpts.clear();
    c.say("250 2.0.0 Ok: delivered\r\n").await?;
    Ok(true)
}
