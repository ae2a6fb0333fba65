//! TLS for the protocol clients (rustls with the `ring` provider, passed
//! explicitly to every client configuration; no process-wide default is used).
//!
//! * Implicit TLS (`imaps://`, `submissions://`, `smtps://`): the handshake is
//!   the first thing on the connection.
//! * STARTTLS on `imap://`, `smtp://`/`submission://` and `sieve://`, by the
//!   `--starttls` policy: `auto` upgrades when the server offers it, `require`
//!   fails when it does not, `never` stays in plain text.
//! * Certificates are verified against the system's roots plus `--ca-file`;
//!   `--tls-insecure` turns verification off (handshake signatures are still
//!   checked) and the results say so.
//! * Passwords never cross a non-loopback connection in plain text unless the
//!   user passes `--allow-cleartext-auth`.

use crate::wire::{ErrorKind, OpError, OpResult, Wire};
use mailbench_base::{Error, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tokio::time::Instant;

/// What to do on a plain-text URL (defined with the results, which echo it).
pub use mailbench_results::mail::config::StartTls;

/// The schemes whose connections start with a TLS handshake.
pub fn is_implicit_tls(scheme: &str) -> bool {
    matches!(scheme, "imaps" | "submissions" | "smtps" | "https")
}

/// The TLS settings of a target. The client configuration (system roots) is
/// built on the first handshake, so plain-text targets never pay for it.
#[derive(Clone)]
pub struct Tls {
    pub starttls: StartTls,
    /// Certificates are verified (false with `--tls-insecure`).
    pub verify: bool,
    pub allow_cleartext_auth: bool,
    pub ca_file: Option<PathBuf>,
    extra_roots: Arc<Vec<CertificateDer<'static>>>,
    config: Arc<OnceLock<std::result::Result<Built, String>>>,
}

#[derive(Clone)]
struct Built {
    config: Arc<ClientConfig>,
    system_roots: usize,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("starttls", &self.starttls)
            .field("verify", &self.verify)
            .field("allow_cleartext_auth", &self.allow_cleartext_auth)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

impl Default for Tls {
    fn default() -> Tls {
        Tls {
            starttls: StartTls::Auto,
            verify: true,
            allow_cleartext_auth: false,
            ca_file: None,
            extra_roots: Arc::new(Vec::new()),
            config: Arc::new(OnceLock::new()),
        }
    }
}

impl Tls {
    /// Settings from the options; a CA file that cannot be read or holds no
    /// usable certificate is a usage error.
    pub fn new(
        starttls: StartTls,
        ca_file: Option<&Path>,
        insecure: bool,
        allow_cleartext_auth: bool,
    ) -> Result<Tls> {
        let extra = match ca_file {
            Some(p) => load_ca_file(p)?,
            None => Vec::new(),
        };
        Ok(Tls {
            starttls,
            verify: !insecure,
            allow_cleartext_auth,
            ca_file: ca_file.map(|p| p.to_path_buf()),
            extra_roots: Arc::new(extra),
            config: Arc::new(OnceLock::new()),
        })
    }

    /// How certificates are checked, in words (results and summary).
    pub fn verification(&self) -> String {
        if !self.verify {
            return "NOT verified (--tls-insecure)".into();
        }
        match &self.ca_file {
            Some(p) => format!("verified against the system roots and {}", p.display()),
            None => "verified against the system roots".into(),
        }
    }

    fn built(&self) -> OpResult<Built> {
        self.config
            .get_or_init(|| self.build())
            .clone()
            .map_err(|m| OpError::new(ErrorKind::Tls, m))
    }

    fn build(&self) -> std::result::Result<Built, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?;
        if !self.verify {
            let verifier = NoVerification(provider.signature_verification_algorithms);
            let config = builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth();
            return Ok(Built {
                config: Arc::new(config),
                system_roots: 0,
            });
        }
        let mut roots = RootCertStore::empty();
        // Unreadable system certificates are skipped: --ca-file may be all
        // that is needed, and a missing root shows as "not trusted" later.
        let native = rustls_native_certs::load_native_certs();
        let (system_roots, _) = roots.add_parsable_certificates(native.certs);
        for c in self.extra_roots.iter() {
            roots
                .add(c.clone())
                .map_err(|e| format!("--ca-file: unusable certificate: {e}"))?;
        }
        let config = builder.with_root_certificates(roots).with_no_client_auth();
        Ok(Built {
            config: Arc::new(config),
            system_roots,
        })
    }

    /// TCP connect to `ep`, with the TLS handshake at once when its scheme
    /// is implicit TLS (`imaps://`, `submissions://`, `smtps://`).
    pub async fn connect(
        &self,
        ep: &super::Endpoint,
        op_timeout: std::time::Duration,
    ) -> OpResult<Wire> {
        let mut wire = Wire::connect(&ep.host, ep.port, op_timeout).await?;
        if ep.implicit_tls() {
            let deadline = Instant::now() + op_timeout;
            self.handshake(&mut wire, &ep.host, "implicit TLS", deadline)
                .await?;
        }
        Ok(wire)
    }

    /// A STARTTLS command the server refused is a TLS failure, not a task's.
    pub fn starttls_refused(e: OpError) -> OpError {
        match e.kind {
            ErrorKind::Rejected => OpError::new(ErrorKind::Tls, e.msg()),
            _ => e,
        }
    }

    /// TLS handshake on `wire` for server name `host` (a DNS name or an IP
    /// address); `how` names the way in (`implicit TLS`, `STARTTLS`).
    pub async fn handshake(
        &self,
        wire: &mut Wire,
        host: &str,
        how: &str,
        deadline: Instant,
    ) -> OpResult<()> {
        if wire.has_buffered() {
            return Err(OpError::new(
                ErrorKind::Tls,
                format!(
                    "{} sent data ahead of the TLS handshake; refusing to go on (a confused server or an injection attempt)",
                    wire.peer
                ),
            ));
        }
        let built = self.built()?;
        let name = ServerName::try_from(host.to_string()).map_err(|e| {
            OpError::new(
                ErrorKind::Tls,
                format!("`{host}` cannot be a TLS server name: {e}"),
            )
        })?;
        let connector = tokio_rustls::TlsConnector::from(built.config.clone());
        let io = wire.take_io();
        match tokio::time::timeout_at(deadline, connector.connect(name, io)).await {
            Err(_) => Err(OpError::new(
                ErrorKind::Timeout,
                format!("TLS handshake with {} timed out", wire.peer),
            )),
            Ok(Err(e)) => Err(self.describe(&e, host, &wire.peer, built.system_roots)),
            Ok(Ok(s)) => {
                let (_, conn) = s.get_ref();
                let version = match conn.protocol_version() {
                    Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".to_string(),
                    Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".to_string(),
                    Some(v) => format!("{v:?}"),
                    None => "TLS".to_string(),
                };
                let suite = conn
                    .negotiated_cipher_suite()
                    .map(|s| format!(" {:?}", s.suite()))
                    .unwrap_or_default();
                wire.set_tls_io(Box::new(s), format!("{how} {version}{suite}"));
                Ok(())
            }
        }
    }

    /// A plain message for a failed handshake (certificate problems name the
    /// host and the way out).
    fn describe(&self, e: &std::io::Error, host: &str, peer: &str, system_roots: usize) -> OpError {
        let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
        let msg = match inner {
            Some(rustls::Error::InvalidCertificate(ce)) => {
                let why = match ce {
                    CertificateError::UnknownIssuer => {
                        let mut w = String::from("issued by an unknown certificate authority");
                        if system_roots == 0 && self.ca_file.is_none() {
                            w.push_str(
                                " (no system CA certificates were found: install ca-certificates)",
                            );
                        }
                        w
                    }
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. } => {
                        format!("it does not name {host}")
                    }
                    CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                        "it has expired".into()
                    }
                    CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                        "it is not valid yet".into()
                    }
                    CertificateError::InvalidPurpose
                    | CertificateError::InvalidPurposeContext { .. } => {
                        "it is not for TLS servers".into()
                    }
                    other => format!("{other:?}"),
                };
                format!(
                    "certificate of {peer} not trusted for host {host}: {why}; pass --ca-file FILE with the CA that issued it, or --tls-insecure to skip verification"
                )
            }
            Some(
                r @ (rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. }),
            ) => format!(
                "TLS handshake with {peer} failed: {r} (is it a TLS port? imaps:// and submissions:// expect TLS from the first byte)"
            ),
            Some(r) => format!("TLS handshake with {peer} (server name {host}) failed: {r}"),
            None if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                format!("{peer} closed the connection during the TLS handshake (is it a TLS port?)")
            }
            None => format!("TLS handshake with {peer} failed: {e}"),
        };
        OpError::new(ErrorKind::Tls, msg)
    }

    /// Whether a plain-text connection whose server does (or does not) offer
    /// STARTTLS is upgraded under `policy`; `require` without the offer is an
    /// error of kind `tls`.
    pub fn upgrade(policy: StartTls, offered: bool, what: &str, peer: &str) -> OpResult<bool> {
        match (policy, offered) {
            (StartTls::Never, _) => Ok(false),
            (_, true) => Ok(true),
            (StartTls::Require, false) => Err(OpError::new(
                ErrorKind::Tls,
                format!(
                    "{what} server {peer} does not offer STARTTLS (--starttls require); use its implicit-TLS port or --starttls auto"
                ),
            )),
            (StartTls::Auto, false) => Ok(false),
        }
    }

    /// Refuses to send a password over `wire` when it is plain text to a
    /// non-loopback address, unless `--allow-cleartext-auth`.
    pub fn check_credentials_safe(
        &self,
        wire: &Wire,
        what: &str,
        tls_scheme: &str,
    ) -> OpResult<()> {
        if cleartext_ok(wire.is_tls(), wire.loopback, self.allow_cleartext_auth) {
            return Ok(());
        }
        let how = if self.starttls == StartTls::Never {
            "STARTTLS is off (--starttls never)"
        } else {
            "it does not offer STARTTLS"
        };
        Err(OpError::new(
            ErrorKind::Tls,
            format!(
                "{what} server {} is not a loopback address and {how}: mailbench does not send passwords in clear text over the network; use {tls_scheme}, or pass --allow-cleartext-auth on a trusted network",
                wire.peer
            ),
        ))
    }
}

/// Passwords may cross a connection that is encrypted, or to a loopback
/// address, or anywhere when the user opted in.
pub fn cleartext_ok(encrypted: bool, loopback: bool, allowed: bool) -> bool {
    encrypted || loopback || allowed
}

/// Reads every certificate of a PEM file (usage error when there is none).
pub fn load_ca_file(p: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let bad = |m: String| Error::usage(format!("--ca-file {}: {m}", p.display()));
    let bytes = mailbench_base::limits::read_capped(
        p,
        mailbench_base::limits::MAX_INPUT_FILE_BYTES,
        "CA file (--ca-file)",
    )?;
    let iter = CertificateDer::pem_slice_iter(&bytes);
    let mut out = Vec::new();
    for c in iter {
        out.push(c.map_err(|e| bad(format!("not a PEM certificate file: {e}")))?);
    }
    if out.is_empty() {
        return Err(bad(
            "holds no certificate (expected -----BEGIN CERTIFICATE----- blocks)".into(),
        ));
    }
    let mut store = RootCertStore::empty();
    for (i, c) in out.iter().enumerate() {
        store
            .add(c.clone())
            .map_err(|e| bad(format!("certificate {} is not usable as a CA: {e}", i + 1)))?;
    }
    Ok(out)
}

/// `--tls-insecure`: any certificate is accepted, but the handshake signatures
/// are still checked with the provider's algorithms.
#[derive(Debug)]
struct NoVerification(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starttls_policy() {
        assert_eq!("AUTO".parse::<StartTls>(), Ok(StartTls::Auto));
        assert_eq!("require".parse::<StartTls>(), Ok(StartTls::Require));
        assert_eq!("never".parse::<StartTls>(), Ok(StartTls::Never));
        assert!("maybe".parse::<StartTls>().is_err());
        assert!(Tls::upgrade(StartTls::Auto, true, "IMAP", "h:143").unwrap());
        assert!(!Tls::upgrade(StartTls::Auto, false, "IMAP", "h:143").unwrap());
        assert!(!Tls::upgrade(StartTls::Never, true, "IMAP", "h:143").unwrap());
        assert!(Tls::upgrade(StartTls::Require, true, "IMAP", "h:143").unwrap());
        let e = Tls::upgrade(StartTls::Require, false, "IMAP", "h:143").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Tls);
        assert!(e.msg().contains("h:143"), "{}", e.msg());
        // Cleartext passwords: only encrypted, loopback, or opted in.
        assert!(cleartext_ok(true, false, false));
        assert!(cleartext_ok(false, true, false));
        assert!(cleartext_ok(false, false, true));
        assert!(!cleartext_ok(false, false, false));
    }

    #[test]
    fn schemes_and_ca_files() {
        assert!(is_implicit_tls("imaps"));
        assert!(is_implicit_tls("submissions"));
        assert!(is_implicit_tls("smtps"));
        assert!(!is_implicit_tls("imap"));
        assert!(!is_implicit_tls("smtp"));
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("none.pem");
        let e = Tls::new(StartTls::Auto, Some(&missing), false, false).unwrap_err();
        assert!(e.to_string().contains("none.pem"), "{e}");
        let empty = d.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = Tls::new(StartTls::Auto, Some(&empty), false, false).unwrap_err();
        assert!(e.to_string().contains("no certificate"), "{e}");
        let t = Tls::new(StartTls::Auto, None, true, false).unwrap();
        assert!(t.verification().contains("NOT verified"));
        assert!(Tls::default().verification().contains("system roots"));
    }

    #[tokio::test]
    async fn a_plain_server_on_a_tls_url_is_a_tls_error() {
        // A server that greets in plain text where TLS is expected.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            if let Ok((mut s, _)) = l.accept().await {
                let _ = s.write_all(b"* OK plain IMAP here\r\n").await;
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
        });
        let t = std::time::Duration::from_secs(5);
        let mut w = Wire::connect("127.0.0.1", port, t).await.unwrap();
        assert!(w.loopback);
        let deadline = Instant::now() + t;
        let e = Tls::default()
            .handshake(&mut w, "127.0.0.1", "implicit TLS", deadline)
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Tls, "{e}");
        assert!(e.msg().contains(&format!("127.0.0.1:{port}")), "{e}");
    }
}
