//! `--target sink`: an IMAP + SMTP submission + ManageSieve endpoint of
//! mailbench's own on 127.0.0.1, so that what a run measures is mailbench
//! (like fio's null engine). It accepts any user with the run's password,
//! keeps the least state the profile's tasks need (mailboxes; per message
//! its UID, size, flags and tracking header; no bodies, `store`), delivers a
//! submitted message to its recipients' Inboxes before it answers (lists
//! expanded, IDLE sessions woken), and answers every command at once; a
//! fetch of a body gets a made-up message of the size received (`synth`).
//!
//! It runs beside the generator, in a child process of its own
//! (`mailbench mail sink`, started by [`SinkProcess::start`]): its CPU,
//! memory and file descriptors are not the generator's, so the generator's
//! figures and its file limit are its own. The child reads the run's
//! password and distribution lists on its standard input, answers its ports
//! on its standard output, and ends when its standard input closes (however
//! mailbench ended). Its state lives as long as the run: every run starts
//! with empty mailboxes.

mod conn;
mod imapd;
mod prepare;
mod process;
mod search;
mod sieved;
mod smtpd;
mod store;
mod synth;

pub use prepare::{SOFTWARE, SinkTarget, prepare};
pub use process::{SinkPorts, SinkProcess, child_main};
pub use store::{Store, parse_lists};

use mailbench_base::{Error, Result};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// The services of the sink.
#[derive(Clone, Copy, Debug)]
enum Service {
    Imap,
    Submission,
    Sieve,
}

/// Binds the three listeners on 127.0.0.1 (free ports) and serves them on
/// the current runtime until it ends.
async fn listen(store: Arc<Store>) -> Result<SinkPorts> {
    let bind = || async {
        TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| Error::runtime(format!("sink: cannot listen on 127.0.0.1: {e}")))
    };
    let (imap, submission, sieve) = (bind().await?, bind().await?, bind().await?);
    let port = |l: &TcpListener| {
        l.local_addr()
            .map(|a| a.port())
            .map_err(|e| Error::runtime(format!("sink: no local address: {e}")))
    };
    let ports = SinkPorts {
        imap: port(&imap)?,
        submission: port(&submission)?,
        sieve: port(&sieve)?,
    };
    for (l, s) in [
        (imap, Service::Imap),
        (submission, Service::Submission),
        (sieve, Service::Sieve),
    ] {
        tokio::spawn(accept_loop(l, store.clone(), s));
    }
    Ok(ports)
}

/// Accepts connections for as long as the sink runs (it ends with its
/// process). A failed accept (no file descriptor left) waits 10 ms before
/// the next.
async fn accept_loop(l: TcpListener, store: Arc<Store>, s: Service) {
    loop {
        match l.accept().await {
            Ok((c, _)) => {
                tokio::spawn(serve(s, store.clone(), c));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

async fn serve(s: Service, store: Arc<Store>, c: TcpStream) {
    match s {
        Service::Imap => imapd::serve(store, c).await,
        Service::Submission => smtpd::serve(store, c).await,
        Service::Sieve => sieved::serve(store, c).await,
    }
}

/// Worker threads of the sink's runtime: half the CPUs (at least one), the
/// rest left to the generator beside it.
fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// A sink served by a runtime of this process (the protocol tests; a run
/// uses [`SinkProcess`]). It stops when dropped.
pub struct InProcess {
    pub ports: SinkPorts,
    pub store: Arc<Store>,
    rt: Option<tokio::runtime::Runtime>,
}

impl InProcess {
    pub fn start(password: &str, aliases: &str) -> Result<InProcess> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers())
            .enable_all()
            .build()
            .map_err(|e| Error::runtime(format!("sink: cannot start its runtime: {e}")))?;
        let store = Arc::new(Store::new(password.to_string(), parse_lists(aliases)));
        let ports = rt.block_on(listen(store.clone()))?;
        Ok(InProcess {
            ports,
            store,
            rt: Some(rt),
        })
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::imap::{ImapConn, list_names, parse_list};
    use crate::sieve::SieveConn;
    use crate::smtp::SmtpConn;

    const T: Duration = Duration::from_secs(10);

    /// The generator's own clients against the sink: a delivery to a list
    /// wakes its member's IDLE, its tracking header is found and fetched,
    /// the made-up body has the size sent, MOVE and ManageSieve work.
    #[test]
    fn the_clients_of_a_run_are_served() {
        let sink = InProcess::start("pw", "team@x u1@x, u2@x\n").unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let p = sink.ports;
            let mut bad = ImapConn::connect("127.0.0.1", p.imap, T).await.unwrap();
            assert!(bad.login("u1@x", "nope").await.is_err());
            let mut c = ImapConn::connect("127.0.0.1", p.imap, T).await.unwrap();
            c.login("u1@x", "pw").await.unwrap();
            assert!(c.has_cap("IDLE") && c.has_cap("MOVE") && c.has_cap("SPECIAL-USE"));
            c.cmd("CREATE", "CREATE \"Sent\" (USE (\\Sent))")
                .await
                .unwrap();
            let r = c
                .cmd("LIST", "LIST \"\" \"*\" RETURN (SPECIAL-USE)")
                .await
                .unwrap();
            let l = parse_list(&r.untagged);
            assert!(
                l.iter().any(|e| e.name == "Sent" && e.has_flag("\\Sent")),
                "{l:?}"
            );
            c.select("INBOX", false).await.unwrap();
            c.idle_start().await.unwrap();
            let mut msg =
                b"From: a@x\r\nX-Mailbench-Track: r9 1 2 0 1\r\nSubject: s\r\n\r\n.hi\r\n".to_vec();
            for _ in 0..60 {
                msg.extend_from_slice(&[b'x'; 70]);
                msg.extend_from_slice(b"\r\n");
            }
            let mut s = SmtpConn::connect("127.0.0.1", p.submission, T)
                .await
                .unwrap();
            s.hello_auth("u2@x", "pw").await.unwrap();
            s.send("u2@x", &["team@x".to_string()], &msg).await.unwrap();
            s.quit().await;
            assert!(c.idle_wait(tokio::time::Instant::now() + T).await.unwrap());
            c.idle_done().await.unwrap();
            assert_eq!(
                c.uid_search("SEARCH", "UID SEARCH HEADER X-Mailbench-Track \"r9\"")
                    .await
                    .unwrap(),
                vec![1]
            );
            let r = c
                .cmd(
                    "FETCH",
                    "UID FETCH 1:* (UID BODY.PEEK[HEADER.FIELDS (X-Mailbench-Track)])",
                )
                .await
                .unwrap();
            assert_eq!(
                crate::imap::header_value(&r.untagged[0], "X-Mailbench-Track").as_deref(),
                Some("r9 1 2 0 1")
            );
            let r = c.cmd("FETCH", "UID FETCH 1 (RFC822.SIZE)").await.unwrap();
            // The dot-stuffed line counts as sent, once.
            let size = format!("RFC822.SIZE {}", msg.len());
            assert!(String::from_utf8_lossy(&r.untagged[0]).contains(&size));
            c.cmd("MOVE", "UID MOVE 1 \"Sent\"").await.unwrap();
            assert_eq!(c.exists, 0);
            let r = c.cmd("LIST", "LIST \"\" \"S%\"").await.unwrap();
            assert_eq!(list_names(&r.untagged), vec!["Sent"]);
            c.logout().await;
            let mut v = SieveConn::connect("127.0.0.1", p.sieve, T).await.unwrap();
            v.auth("u1@x", "pw").await.unwrap();
            v.put_script("mailbench", "require \"fileinto\";\r\n")
                .await
                .unwrap();
            v.set_active("mailbench").await.unwrap();
            v.logout().await;
        });
        // Delivered to both members; u1 moved its copy.
        let u2 = sink.store.account("u2@x");
        assert_eq!(u2.lock().get("INBOX").map(|b| b.msgs.len()), Some(1));
    }
}
