//! The server under test: its endpoints (endpoint/), credentials and TLS
//! policy, and the connections the users make to it through the protocol
//! clients (IMAP, submission, ManageSieve), with the start-up probe.

use crate::endpoint::{Credentials, Endpoint, StartTls, Tls};
use crate::imap::ImapConn;
use crate::sieve::SieveConn;
use crate::smtp::SmtpConn;
use crate::wire::{ErrorKind, OpError, OpResult};
use mailbench_base::interrupt::Interrupt;
use mailbench_base::{Error, Result};
use serde::Serialize;
use std::time::Duration;

/// How often a wait that a signal must end looks at the interrupt flag.
pub const PROBE_TICK: Duration = Duration::from_millis(50);

/// Returns once `intr` is raised.
async fn raised(intr: &Interrupt) {
    while !intr.raised() {
        tokio::time::sleep(PROBE_TICK).await;
    }
}

/// Endpoints and credentials of the server under test.
#[derive(Debug, Clone)]
pub struct Target {
    /// `local` or `remote`.
    pub kind: String,
    pub imap: Endpoint,
    pub submission: Endpoint,
    pub sieve: Option<Endpoint>,
    pub creds: Credentials,
    pub op_timeout: Duration,
    pub tls: Tls,
    /// Servers that upgraded with STARTTLS at start: every later connection
    /// must upgrade too (a stripped STARTTLS offer fails instead of
    /// silently falling back to plain text).
    pub pinned: Pinned,
    /// `--trace-imap DIR`: every user's IMAP traffic.
    pub trace: Option<crate::trace::TraceDir>,
    /// The JMAP session's URL (or the host of `/.well-known/jmap`): `--jmap`,
    /// or the local Cyrus's HTTP service; `None` where no JMAP is served.
    pub jmap: Option<String>,
}

/// Which endpoints must use STARTTLS from now on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pinned {
    pub imap: bool,
    pub submission: bool,
    pub sieve: bool,
}

/// How each endpoint's connection was protected at start (for the results).
#[derive(Debug, Clone, Serialize)]
pub struct Security {
    pub imap: String,
    pub submission: String,
    pub sieve: Option<String>,
}

/// Whether a connection was upgraded with STARTTLS (its security text says so).
impl Target {
    /// A throwaway server of mailbench's own on 127.0.0.1 (`kind`: `local`
    /// or `sink`): its IMAP, submission and ManageSieve ports, one password
    /// for every user, the run's timeout, TLS policy and trace folder.
    pub fn on_loopback(
        kind: &str,
        [imap, submission, sieve]: [u16; 3],
        password: String,
        o: &crate::options::Resolved,
    ) -> Result<Target> {
        Ok(Target {
            kind: kind.into(),
            imap: Endpoint::local("imap", imap),
            submission: Endpoint::local("smtp", submission),
            sieve: Some(Endpoint::local("sieve", sieve)),
            creds: Credentials::shared(password),
            op_timeout: o.op_timeout,
            tls: crate::options::tls_of(o)?,
            pinned: Pinned::default(),
            trace: crate::options::trace_dir(o)?,
            jmap: None,
        })
    }
}

/// A refused login (`ErrorKind::Auth`) names the login name tried and where
/// it comes from; other errors pass as they are.
pub fn login_hint(e: OpError, address: &str, login: &str) -> OpError {
    if e.kind != ErrorKind::Auth {
        return e;
    }
    OpError::new(
        ErrorKind::Auth,
        format!(
            "{} (user {address} logged in as `{login}`; a server that wants another login name \
             takes it from --login-format, or from the login column of --users-file)",
            e.msg()
        ),
    )
}

fn upgraded(security: Option<&str>) -> bool {
    security.is_some_and(|s| s.starts_with("STARTTLS"))
}

fn describe(security: Option<&str>, starttls: StartTls) -> String {
    match security {
        Some(s) => s.to_string(),
        None if starttls == StartTls::Never => "plain text (--starttls never)".into(),
        None => "plain text (no STARTTLS offered)".into(),
    }
}

impl Target {
    fn policy(&self, pinned: bool) -> StartTls {
        if pinned {
            StartTls::Require
        } else {
            self.tls.starttls
        }
    }

    /// Connects to the IMAP server with the TLS policy, greeting read.
    pub async fn imap_connect(&self, timeout: Duration) -> OpResult<ImapConn> {
        self.imap_connect_traced(timeout, None).await
    }

    async fn imap_connect_traced(
        &self,
        timeout: Duration,
        trace: Option<crate::trace::Trace>,
    ) -> OpResult<ImapConn> {
        ImapConn::open(
            &self.imap,
            &self.tls,
            self.policy(self.pinned.imap),
            timeout,
            trace,
        )
        .await
    }

    pub async fn smtp_connect(&self, timeout: Duration) -> OpResult<SmtpConn> {
        SmtpConn::open(
            &self.submission,
            &self.tls,
            self.policy(self.pinned.submission),
            timeout,
        )
        .await
    }

    pub async fn sieve_connect(&self, ep: &Endpoint, timeout: Duration) -> OpResult<SieveConn> {
        SieveConn::open(ep, &self.tls, self.policy(self.pinned.sieve), timeout).await
    }

    /// Connects and logs the user `address` in as `login` (traced with
    /// `--trace-imap`; the password is the address's).
    pub async fn imap_login(&self, address: &str, login: &str) -> OpResult<ImapConn> {
        let trace = self.trace.as_ref().and_then(|t| t.open(address));
        let mut c = self.imap_connect_traced(self.op_timeout, trace).await?;
        c.login(login, self.creds.password(address).unwrap_or(""))
            .await
            .map_err(|e| login_hint(e, address, login))?;
        Ok(c)
    }

    pub async fn smtp_login(&self, address: &str, login: &str) -> OpResult<SmtpConn> {
        let mut c = self.smtp_connect(self.op_timeout).await?;
        c.hello_auth(login, self.creds.password(address).unwrap_or(""))
            .await
            .map_err(|e| login_hint(e, address, login))?;
        Ok(c)
    }

    pub async fn sieve_login(&self, address: &str, login: &str) -> Option<OpResult<SieveConn>> {
        let ep = self.sieve.as_ref()?;
        Some(
            async {
                let mut c = self.sieve_connect(ep, self.op_timeout).await?;
                c.auth(login, self.creds.password(address).unwrap_or(""))
                    .await
                    .map_err(|e| login_hint(e, address, login))?;
                Ok(c)
            }
            .await,
        )
    }

    /// Checks that every endpoint accepts a connection, greets, and sets up TLS
    /// as the policy asks (certificates verified); the error names the address
    /// tried (exit 3). Pins STARTTLS where it was used and returns how each
    /// connection was protected. Ctrl-C / SIGTERM (`intr`) ends it within
    /// [`PROBE_TICK`] with `Error::Interrupted`, whatever the servers do.
    pub async fn probe(&mut self, intr: &Interrupt) -> Result<Security> {
        tokio::select! {
            r = self.probe_endpoints() => r,
            () = raised(intr) => Err(Error::Interrupted),
        }
    }

    async fn probe_endpoints(&mut self) -> Result<Security> {
        let t = self.op_timeout.min(Duration::from_secs(10));
        let fail = |what: &str, ep: &Endpoint, e: OpError| {
            let hint = match (ep.implicit_tls(), ep.port) {
                (false, 993 | 465) if e.kind == ErrorKind::Timeout => {
                    " (that port usually speaks TLS from the first byte: write imaps:// or submissions://)"
                }
                _ => "",
            };
            if e.kind == ErrorKind::Tls {
                Error::runtime(format!("{what} server {}: {e}", ep.url()))
            } else {
                Error::runtime(format!("{what} server {} unreachable: {e}{hint}", ep.url()))
            }
        };
        let mut c = self
            .imap_connect(t)
            .await
            .map_err(|e| fail("IMAP", &self.imap, e))?;
        let imap = describe(c.security(), self.tls.starttls);
        self.pinned.imap = upgraded(c.security());
        c.logout().await;
        let mut c = self
            .smtp_connect(t)
            .await
            .map_err(|e| fail("submission", &self.submission, e))?;
        let submission = describe(c.security(), self.tls.starttls);
        self.pinned.submission = upgraded(c.security());
        c.quit().await;
        let mut sieve = None;
        if let Some(s) = self.sieve.clone() {
            let mut c = self
                .sieve_connect(&s, t)
                .await
                .map_err(|e| fail("ManageSieve", &s, e))?;
            sieve = Some(describe(c.security(), self.tls.starttls));
            self.pinned.sieve = upgraded(c.security());
            c.logout().await;
        }
        Ok(Security {
            imap,
            submission,
            sieve,
        })
    }
}
