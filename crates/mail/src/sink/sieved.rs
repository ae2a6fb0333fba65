//! The sink's ManageSieve service (RFC 5804), as the rule tasks use it:
//! AUTHENTICATE PLAIN, PUTSCRIPT (the script read and not kept), SETACTIVE,
//! DELETESCRIPT, LISTSCRIPTS, CAPABILITY, NOOP, LOGOUT.

use super::conn::{Conn, literal_at_end};
use super::store::Store;
use base64::Engine as _;
use std::io;
use std::sync::Arc;
use tokio::net::TcpStream;

const CAPS: &str = "\"IMPLEMENTATION\" \"mailbench sink\"\r\n\"SASL\" \"PLAIN\"\r\n\
                    \"SIEVE\" \"fileinto reject envelope\"\r\n\"VERSION\" \"1.0\"\r\n";

/// Serves one ManageSieve connection until LOGOUT or the client goes.
pub async fn serve(store: Arc<Store>, s: TcpStream) {
    let mut c = Conn::new(s);
    if c.say(&format!("{CAPS}OK \"Ready.\"\r\n")).await.is_err() {
        return;
    }
    let mut authed = false;
    while let Ok(true) = c.next_line().await {
        match command(&store, &mut c, &mut authed).await {
            Ok(true) => {}
            Ok(false) | Err(_) => return,
        }
    }
}

/// One command; false when the connection ends.
async fn command(store: &Store, c: &mut Conn, authed: &mut bool) -> io::Result<bool> {
    let line = c.line();
    let words = super::imapd::words(&line);
    let verb = words
        .first()
        .map(|w| w.to_ascii_uppercase())
        .unwrap_or_default();
    if let Some((n, plus)) = literal_at_end(&line) {
        if !plus {
            c.say("NO \"Only non-synchronizing literals are taken here\"\r\n")
                .await?;
            return Ok(false);
        }
        c.skip(n).await?;
        if !c.next_line().await? {
            return Ok(false);
        }
    }
    let reply = match verb.as_str() {
        "AUTHENTICATE" => {
            let token = words.get(2).map_or("", String::as_str);
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(token)
                .unwrap_or_default();
            let pw = decoded.split(|b| *b == 0).nth(2).unwrap_or(b"");
            *authed = store.password_ok(&String::from_utf8_lossy(pw));
            if *authed {
                "OK \"Logged in.\"\r\n".to_string()
            } else {
                "NO \"Authentication failed.\"\r\n".to_string()
            }
        }
        "CAPABILITY" => format!("{CAPS}OK \"Capability completed.\"\r\n"),
        "NOOP" => "OK \"Done.\"\r\n".into(),
        "LOGOUT" => {
            c.say("OK \"Logout completed.\"\r\n").await?;
            return Ok(false);
        }
        "PUTSCRIPT" | "SETACTIVE" | "DELETESCRIPT" | "LISTSCRIPTS" | "HAVESPACE"
        | "CHECKSCRIPT"
            if *authed =>
        {
            "OK \"Done.\"\r\n".into()
        }
        _ if !*authed => "NO \"Log in first.\"\r\n".into(),
        _ => "NO \"Unsupported command.\"\r\n".into(),
    };
    c.say(&reply).await?;
    Ok(true)
}
