//! HTTP/1.1 for JMAP: hyper's client connection (`hyper::client::conn::http1`:
//! framing, chunked bodies, keep-alive) on the endpoint's own TCP and TLS
//! stream (`endpoint::Tls::connect`, the same connect, certificates and
//! deadline as IMAP), one kept-alive connection per user and origin, as a
//! mail client holds one. Every answer is read within the operation timeout
//! and with a body cap (`limits::MAX_HTTP_BODY_BYTES`, or the caller's); the
//! status becomes an error kind (401 auth, 403/429/503 and RFC 7807 problems
//! refusals, naming the problem and the limit).

use super::proto::Problem;
use crate::endpoint::{Endpoint, Tls};
use crate::wire::{ErrorKind, OpError, OpResult};
use base64::Engine;
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, LOCATION, RETRY_AFTER};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use url::Url;

/// A request body sent in one frame.
pub struct Once(Option<Bytes>);

impl Body for Once {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.take().map(|b| Ok(Frame::data(b))))
    }
    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }
    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.as_ref().map_or(0, |b| b.len() as u64))
    }
}

/// A whole answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: Bytes,
    /// Where a redirect points (3xx).
    pub location: Option<String>,
}

/// The endpoint of an `http(s)://` URL.
pub fn endpoint_of(url: &Url) -> OpResult<Endpoint> {
    let bad = || {
        OpError::new(
            ErrorKind::Malformed,
            format!("{url}: not an http(s) URL with a host"),
        )
    };
    let host = url.host_str().ok_or_else(bad)?;
    let port = url.port_or_known_default().ok_or_else(bad)?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad());
    }
    Ok(Endpoint {
        scheme: url.scheme().into(),
        host: host.trim_start_matches('[').trim_end_matches(']').into(),
        port,
    })
}

/// One origin's connection (made on first use, made again after a failure).
pub struct Http {
    pub ep: Endpoint,
    host: HeaderValue,
    tls: Tls,
    timeout: Duration,
    auth: HeaderValue,
    login: String,
    sender: Option<SendRequest<Once>>,
    /// Requests sent (generator figures).
    pub requests: u64,
}

impl Http {
    pub fn new(url: &Url, tls: &Tls, timeout: Duration, login: &str, pw: &str) -> OpResult<Http> {
        let ep = endpoint_of(url)?;
        let host = url[url::Position::BeforeHost..url::Position::AfterPort].to_string();
        let host = HeaderValue::from_str(&host)
            .map_err(|_| OpError::new(ErrorKind::Malformed, format!("{url}: unusable host")))?;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{login}:{pw}"));
        mailbench_base::secrets::register(&token);
        let mut auth = HeaderValue::from_str(&format!("Basic {token}")).map_err(|_| {
            OpError::new(
                ErrorKind::Auth,
                "the credentials cannot travel in an HTTP header",
            )
        })?;
        auth.set_sensitive(true);
        Ok(Http {
            ep,
            host,
            tls: tls.clone(),
            timeout,
            auth,
            login: login.into(),
            sender: None,
            requests: 0,
        })
    }

    /// Whether `url` is served by this connection's origin.
    pub fn serves(&self, url: &Url) -> bool {
        endpoint_of(url).is_ok_and(|e| e == self.ep)
    }

    async fn connect(&mut self) -> OpResult<&mut SendRequest<Once>> {
        if self.sender.as_ref().is_some_and(|s| s.is_closed()) {
            self.sender = None;
        }
        if self.sender.is_none() {
            let mut wire = self.tls.connect(&self.ep, self.timeout).await?;
            let io = hyper_util::rt::TokioIo::new(wire.take_io());
            let (sender, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| http_error(&self.ep, &e))?;
            // Ends when the sender is dropped or the peer closes.
            tokio::spawn(async move {
                let _ = conn.await;
            });
            self.sender = Some(sender);
        }
        match self.sender.as_mut() {
            Some(s) => Ok(s),
            None => Err(OpError::new(ErrorKind::Connect, "no HTTP connection")),
        }
    }

    /// Sends a request and returns the response's head and body stream.
    async fn head(
        &mut self,
        method: &str,
        url: &Url,
        (ctype, accept): (Option<&str>, &str),
        body: Vec<u8>,
    ) -> OpResult<hyper::Response<Incoming>> {
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(&url[url::Position::BeforePath..])
            .header(HOST, self.host.clone())
            .header(AUTHORIZATION, self.auth.clone())
            .header("accept", accept);
        if let Some(c) = ctype {
            req = req.header(CONTENT_TYPE, c);
        }
        let req = req
            .body(Once((!body.is_empty()).then(|| Bytes::from(body))))
            .map_err(|e| OpError::new(ErrorKind::Malformed, format!("{url}: {e}")))?;
        let ep = self.ep.clone();
        let sender = self.connect().await?;
        sender.ready().await.map_err(|e| http_error(&ep, &e))?;
        self.requests += 1;
        let r = self.sender.as_mut().map(|s| s.send_request(req));
        let Some(r) = r else {
            return Err(OpError::new(ErrorKind::Connect, "no HTTP connection"));
        };
        r.await.map_err(|e| {
            self.sender = None;
            http_error(&ep, &e)
        })
    }

    /// A whole exchange within the operation timeout, the body at most `max`
    /// bytes.
    pub async fn send(
        &mut self,
        method: &str,
        url: &Url,
        ctype: Option<&str>,
        body: Vec<u8>,
        max: u64,
    ) -> OpResult<Reply> {
        let t = self.timeout;
        let r = tokio::time::timeout(t, async {
            let resp = self
                .head(method, url, (ctype, "application/json"), body)
                .await?;
            let status = resp.status().as_u16();
            let header = |n| {
                resp.headers()
                    .get(n)
                    .and_then(|v: &HeaderValue| v.to_str().ok())
                    .map(str::to_string)
            };
            let content_type = header(CONTENT_TYPE).unwrap_or_default();
            let location = header(LOCATION);
            let retry = header(RETRY_AFTER);
            let body = read_capped(resp.into_body(), max, url).await?;
            let reply = Reply {
                status,
                content_type,
                body,
                location,
            };
            self.judge(url, reply, retry.as_deref())
        })
        .await;
        match r {
            Ok(r) => r,
            Err(_) => {
                self.sender = None;
                Err(OpError::new(
                    ErrorKind::Timeout,
                    format!("{method} {url}: no complete answer within {t:?}"),
                ))
            }
        }
    }

    /// The status of a reply as an error, else the reply.
    fn judge(&self, url: &Url, r: Reply, retry: Option<&str>) -> OpResult<Reply> {
        let s = r.status;
        if s < 300 || (300..400).contains(&s) {
            return Ok(r);
        }
        let retry = retry
            .map(|v| format!(" (Retry-After {v})"))
            .unwrap_or_default();
        let (kind, what) = match s {
            401 => (
                ErrorKind::Auth,
                format!(
                    "the server refused login name `{}` (--user-format, --users-file)",
                    self.login
                ),
            ),
            403 => (ErrorKind::Rejected, "forbidden".into()),
            429 => (ErrorKind::Rejected, format!("too many requests{retry}")),
            503 => (ErrorKind::Rejected, format!("service unavailable{retry}")),
            _ => match serde_json::from_slice::<Problem>(&r.body) {
                Ok(p) => (
                    ErrorKind::Rejected,
                    format!(
                        "request refused: {}{}{}",
                        p.kind,
                        p.limit.map(|l| format!(" ({l})")).unwrap_or_default(),
                        p.detail.map(|d| format!(": {d}")).unwrap_or_default()
                    ),
                ),
                Err(_) if r.content_type.starts_with("text/plain") => (
                    ErrorKind::Rejected,
                    String::from_utf8_lossy(&r.body).chars().take(200).collect(),
                ),
                Err(_) => (
                    ErrorKind::Rejected,
                    hyper::StatusCode::from_u16(s)
                        .ok()
                        .and_then(|c| c.canonical_reason())
                        .unwrap_or("refused")
                        .to_ascii_lowercase(),
                ),
            },
        };
        Err(OpError::new(kind, format!("HTTP {s} from {url}: {what}")))
    }

    /// Opens a streamed answer (the push stream): the head within the
    /// timeout, the body left to the caller.
    pub async fn stream(&mut self, url: &Url) -> OpResult<Incoming> {
        let t = self.timeout;
        let resp = tokio::time::timeout(
            t,
            self.head("GET", url, (None, "text/event-stream"), Vec::new()),
        )
        .await
        .map_err(|_| {
            OpError::new(
                ErrorKind::Timeout,
                format!("GET {url}: no answer within {t:?}"),
            )
        })??;
        let status = resp.status().as_u16();
        if status != 200 {
            let body = read_capped(resp.into_body(), 4096, url)
                .await
                .unwrap_or_default();
            let r = Reply {
                status,
                content_type: String::new(),
                body,
                location: None,
            };
            self.judge(url, r, None)?;
            return Err(OpError::new(
                ErrorKind::Malformed,
                format!("GET {url}: HTTP {status} for a push stream"),
            ));
        }
        Ok(resp.into_body())
    }
}

/// The next frame's data of a streamed body (`None` at its end).
pub async fn next_data(body: &mut Incoming) -> OpResult<Option<Bytes>> {
    loop {
        match std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await {
            None => return Ok(None),
            Some(Err(e)) => {
                return Err(OpError::new(ErrorKind::Reset, format!("stream broke: {e}")));
            }
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    return Ok(Some(d));
                }
            }
        }
    }
}

async fn read_capped(mut body: Incoming, max: u64, url: &Url) -> OpResult<Bytes> {
    if body.size_hint().lower() > max {
        return Err(too_big(url, max));
    }
    let mut out = Vec::new();
    while let Some(d) = next_data(&mut body).await? {
        if (out.len() + d.len()) as u64 > max {
            return Err(too_big(url, max));
        }
        out.extend_from_slice(&d);
    }
    Ok(Bytes::from(out))
}

fn too_big(url: &Url, max: u64) -> OpError {
    OpError::new(
        ErrorKind::Malformed,
        format!("{url}: answer larger than {max} bytes"),
    )
}

fn http_error(ep: &Endpoint, e: &hyper::Error) -> OpError {
    let kind = if e.is_parse() || e.is_parse_status() {
        ErrorKind::Malformed
    } else if e.is_timeout() {
        ErrorKind::Timeout
    } else {
        ErrorKind::Reset
    };
    OpError::new(kind, format!("HTTP to {}: {e}", ep.url()))
}
