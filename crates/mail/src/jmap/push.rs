//! The push stream (RFC 8620 §7.3, EventSource): `state` events announce
//! new states of a user's e-mail; `ping` events keep the stream alive. A
//! stream that drops or cannot be opened is opened again after the
//! reconnection back-off (`endpoint::backoff`), every drop and reopening
//! counted; meanwhile the user polls with Email/changes, as it polls with
//! NOOP when IMAP IDLE is off. Lines are bounded (`MAX_LINE_BYTES`), and
//! `next` is safe to cancel (a user waits for push and its next task at once):
//! what was read stays in the buffer.

use super::Counts;
use super::http::{Http, next_data};
use super::proto::StateChange;
use crate::endpoint::backoff::Backoff;
use crate::wire::{ErrorKind, OpError};
use hyper::body::Incoming;
use mailbench_base::limits::MAX_LINE_BYTES;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::sync::Arc;
use tokio::time::Instant;
use url::Url;

pub struct Push {
    url: Url,
    http: Http,
    body: Option<Incoming>,
    buf: Vec<u8>,
    event: String,
    data: String,
    backoff: Backoff,
    rng: SmallRng,
    /// Streams opened (the first included).
    pub opened: u64,
    /// Streams that ended or broke under the user.
    pub drops: u64,
    /// Opening attempts that failed.
    pub failed: u64,
    /// The last failure, for the log.
    pub last_error: Option<OpError>,
    /// Where its events and reconnections are counted.
    counts: Arc<Counts>,
}

impl Push {
    pub fn new(url: Url, http: Http, seed: u64) -> Push {
        Push {
            url,
            http,
            body: None,
            buf: Vec::new(),
            event: String::new(),
            data: String::new(),
            backoff: Backoff::default(),
            rng: SmallRng::seed_from_u64(seed),
            opened: 0,
            drops: 0,
            failed: 0,
            last_error: None,
            counts: Arc::default(),
        }
    }

    /// Counts its `state` events and reconnections into `counts`.
    pub fn count_into(&mut self, counts: Arc<Counts>) {
        self.counts = counts;
    }

    /// The stream is open now (else the user polls).
    pub fn connected(&self) -> bool {
        self.body.is_some()
    }

    /// The next state change; runs until one comes (the caller bounds the
    /// wait), reopening the stream after each drop.
    pub async fn next(&mut self) -> StateChange {
        loop {
            if let Some(ev) = self.take_event() {
                return ev;
            }
            let Some(body) = self.body.as_mut() else {
                self.reopen().await;
                continue;
            };
            match next_data(body).await {
                Ok(Some(d)) => {
                    self.buf.extend_from_slice(&d);
                    if self.buf.len() > MAX_LINE_BYTES && !self.buf.contains(&b'\n') {
                        self.dropped(OpError::new(
                            ErrorKind::Malformed,
                            format!("{}: a push line over {MAX_LINE_BYTES} bytes", self.url),
                        ));
                    }
                }
                Ok(None) => self.dropped(OpError::new(
                    ErrorKind::Reset,
                    format!("{}: the push stream ended", self.url),
                )),
                Err(e) => self.dropped(e),
            }
        }
    }

    fn dropped(&mut self, e: OpError) {
        self.drops += 1;
        self.body = None;
        self.buf.clear();
        self.event.clear();
        self.data.clear();
        self.last_error = Some(e);
        self.backoff.failed(Instant::now(), &mut self.rng);
    }

    async fn reopen(&mut self) {
        if let Some(at) = self.backoff.pending(Instant::now()) {
            tokio::time::sleep_until(at).await;
        }
        match self.http.stream(&self.url).await {
            Ok(b) => {
                if self.drops + self.failed > 0 {
                    Counts::add(&self.counts.push_reconnects, 1);
                }
                self.opened += 1;
                self.body = Some(b);
            }
            Err(e) => {
                self.failed += 1;
                self.last_error = Some(e);
                self.backoff.failed(Instant::now(), &mut self.rng);
            }
        }
    }

    /// A whole `state` event from the buffer, if one is there.
    fn take_event(&mut self) -> Option<StateChange> {
        while let Some(nl) = self.buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                let (event, data) = (
                    std::mem::take(&mut self.event),
                    std::mem::take(&mut self.data),
                );
                if event == "state"
                    && let Ok(sc) = serde_json::from_str::<StateChange>(&data)
                {
                    self.backoff.succeeded();
                    Counts::add(&self.counts.push_events, 1);
                    return Some(sc);
                }
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => self.event = value.to_string(),
                "data" if self.data.len() < MAX_LINE_BYTES => {
                    if !self.data.is_empty() {
                        self.data.push('\n');
                    }
                    self.data.push_str(value);
                }
                _ => {}
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_events_are_taken_from_the_stream_text() {
        let url = Url::parse("http://127.0.0.1:1/es").unwrap();
        let http = Http::new(
            &url,
            &crate::endpoint::Tls::default(),
            std::time::Duration::from_secs(1),
            "u",
            "push-test-secret",
        )
        .unwrap();
        let mut p = Push::new(url, http, 1);
        p.buf.extend_from_slice(
            b": comment\r\nevent: ping\r\ndata: {\"interval\":30}\r\n\r\nevent: state\r\ndata: {\"@type\":\"StateChange\",\r\n",
        );
        assert!(p.take_event().is_none());
        p.buf
            .extend_from_slice(b"data: \"changed\":{\"a\":{\"Email\":\"s2\"}}}\n\n");
        let sc = p.take_event().unwrap();
        assert_eq!(sc.changed["a"]["Email"], "s2");
        assert!(p.take_event().is_none());
        assert!(p.buf.is_empty());
    }
}
