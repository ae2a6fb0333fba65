//! The server host's own figures during a run: `--server-metrics URL` scrapes
//! Prometheus endpoints on the server (node exporter, Postfix exporter,
//! Dovecot's OpenMetrics `service stats`) on a schedule, and the local target
//! reads the same counters from /proc. Both become
//! [`mailbench_metrics::server::ServerSample`]s, so every target is judged from
//! the same figures (CPU per core, memory, the store volume's I/O, network, mail
//! queues, server-side command counts, disk IOPS per mailbox).
//!
//! Bounded: each scrape has a timeout and a body size cap; a URL that fails is
//! a warning (the run goes on without its figures); the scraper runs on its own
//! thread, away from the users' runtime, and ends when the run stops it.

use mailbench_base::rundir::TestLog;
use mailbench_base::{Error, Result};
use mailbench_metrics::server::{
    CoreSeconds, HostSample, MailServerSample, NetCounters, PerMailbox, ServerFigures,
    ServerSample, StoreDevices,
};
pub use mailbench_metrics::server::{ServerPoint, ServerSection, SourceFigures};
use mailbench_metrics::server_config::ConfigReader;
pub use mailbench_metrics::server_config::ServerConfig;
use mailbench_metrics::system::{DiskCounters, Memory};
use prometheus_parse::{Scrape, Value};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// At most this much of one response is read (a node exporter answers ~60 KB).
pub const MAX_BODY_BYTES: u64 = mailbench_base::limits::MAX_HTTP_BODY_BYTES;

/// Where server figures come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A Prometheus endpoint (`http://host:9100/metrics`).
    Url(String),
    /// This host's /proc (the local target runs here); the store volume is
    /// these devices.
    Proc(Vec<String>),
}

impl Source {
    pub fn name(&self) -> String {
        match self {
            Source::Url(u) => u.clone(),
            Source::Proc(_) => "/proc (local target)".into(),
        }
    }
}

// ---- the exposition format -> one sample ------------------------------------

/// What an endpoint turned out to be.
pub const KIND_NODE: &str = "node-exporter";
pub const KIND_POSTFIX: &str = "postfix-exporter";
pub const KIND_DOVECOT: &str = "dovecot";

/// A parsed scrape: the sample and the kinds of exporter recognised in it.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub sample: ServerSample,
    pub kinds: Vec<&'static str>,
}

/// Reads the series mailbench uses from a Prometheus text (or OpenMetrics)
/// exposition; everything else is ignored.
pub fn parse_exposition(text: &str, t_s: f64) -> Parsed {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    // The parser only fails on a failing line source, which a string is not.
    let scrape = Scrape::parse(lines).unwrap_or(Scrape {
        docs: Default::default(),
        samples: Vec::new(),
    });
    let mut host = HostSample::default();
    let mut mail = MailServerSample::default();
    let mut kinds = Vec::new();
    let mut saw_host = false;
    for s in &scrape.samples {
        let v = match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) if v.is_finite() => v,
            _ => continue,
        };
        let label = |k: &str| s.labels.get(k).unwrap_or("").to_string();
        let name = s.metric.as_str();
        if let Some(rest) = name.strip_prefix("node_") {
            saw_host |= node_series(&mut host, rest, &label, v);
        } else if name.starts_with("postfix_") {
            push_kind(&mut kinds, KIND_POSTFIX);
            postfix_series(&mut mail, name, &label, v);
        } else if name.starts_with("dovecot_") {
            push_kind(&mut kinds, KIND_DOVECOT);
            dovecot_series(&mut mail, name, s.labels.len(), &label, v);
        }
    }
    if saw_host {
        kinds.insert(0, KIND_NODE);
    }
    Parsed {
        sample: ServerSample {
            t_s,
            host: saw_host.then_some(host),
            mail,
        },
        kinds,
    }
}

fn push_kind(kinds: &mut Vec<&'static str>, k: &'static str) {
    if !kinds.contains(&k) {
        kinds.push(k);
    }
}

/// A node exporter series (name without `node_`); true when it is a host figure.
fn node_series(h: &mut HostSample, name: &str, label: &dyn Fn(&str) -> String, v: f64) -> bool {
    let secs_to_ms = |s: f64| (s * 1000.0).round() as u64;
    if name == "cpu_seconds_total" {
        let core: &mut CoreSeconds = h.cores.entry(label("cpu")).or_default();
        match label("mode").as_str() {
            "idle" => core.idle += v,
            "iowait" => core.iowait += v,
            _ => core.busy += v,
        }
        return true;
    }
    if let Some(m) = name.strip_prefix("memory_") {
        let mem = h.memory.get_or_insert(Memory::default());
        match m {
            "MemTotal_bytes" => mem.total_bytes = v as u64,
            "MemAvailable_bytes" => mem.available_bytes = v as u64,
            _ => return false,
        }
        return true;
    }
    if let Some(d) = name.strip_prefix("disk_") {
        let c: &mut DiskCounters = h.disks.entry(label("device")).or_default();
        match d {
            "reads_completed_total" => c.reads = v as u64,
            "read_bytes_total" => c.read_sectors = (v / 512.0) as u64,
            "read_time_seconds_total" => c.read_ms = secs_to_ms(v),
            "writes_completed_total" => c.writes = v as u64,
            "written_bytes_total" => c.write_sectors = (v / 512.0) as u64,
            "write_time_seconds_total" => c.write_ms = secs_to_ms(v),
            "io_now" => c.in_flight = v as u64,
            "io_time_seconds_total" => c.io_ms = secs_to_ms(v),
            "io_time_weighted_seconds_total" => c.weighted_ms = secs_to_ms(v),
            _ => return false,
        }
        return true;
    }
    if let Some(n) = name.strip_prefix("network_") {
        let c: &mut NetCounters = h.net.entry(label("device")).or_default();
        match n {
            "receive_bytes_total" => c.rx_bytes = v,
            "transmit_bytes_total" => c.tx_bytes = v,
            "receive_packets_total" => c.rx_packets = v,
            "transmit_packets_total" => c.tx_packets = v,
            _ => return false,
        }
        return true;
    }
    false
}

/// Postfix exporter: queue lengths from showq, messages through smtpd and qmgr.
fn postfix_series(m: &mut MailServerSample, name: &str, label: &dyn Fn(&str) -> String, v: f64) {
    match name {
        // The number of messages in each queue is the count of the showq size
        // histogram.
        "postfix_showq_message_size_bytes_count" => {
            m.queues.insert(label("queue"), v);
        }
        "postfix_smtpd_messages_processed_total" => {
            *m.commands
                .entry("postfix:smtpd_messages".into())
                .or_default() += v;
        }
        "postfix_qmgr_messages_removed_total" => {
            m.commands.insert("postfix:qmgr_messages_removed".into(), v);
        }
        _ => {}
    }
}

/// Dovecot's OpenMetrics (`metric` blocks): every counter of events, by command
/// where the metric groups by `cmd_name` (the first level of the grouping, which
/// Dovecot also breaks down by further labels), else as one count.
fn dovecot_series(
    m: &mut MailServerSample,
    name: &str,
    labels: usize,
    label: &dyn Fn(&str) -> String,
    v: f64,
) {
    let Some(stem) = name
        .strip_prefix("dovecot_")
        .and_then(|n| n.strip_suffix("_total"))
    else {
        return;
    };
    if stem.ends_with("_seconds") || stem.ends_with("_bytes") {
        return;
    }
    let proto = stem.strip_suffix("_command").unwrap_or(stem);
    let cmd = label("cmd_name");
    match (labels, cmd.is_empty()) {
        (1, false) => {
            m.commands.insert(format!("{proto}:{cmd}"), v);
        }
        (0, _) => {
            m.commands.insert(proto.to_string(), v);
        }
        _ => {}
    }
}

// ---- fetching ---------------------------------------------------------------

/// TLS settings for `https://` endpoints (the mail options' CA file and
/// `--tls-insecure` apply).
#[derive(Debug, Clone, Default)]
pub struct HttpTls {
    pub extra_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    pub insecure: bool,
}

/// An HTTP client for the scrapes: every call bounded by `timeout`, no proxy
/// from the environment, no redirects, status codes >= 400 are errors.
pub fn agent(timeout: Duration, tls: &HttpTls) -> ureq::Agent {
    use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};
    let mut roots: Vec<Certificate<'static>> = rustls_native_certs::load_native_certs()
        .certs
        .iter()
        .map(|c| Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    roots.extend(
        tls.extra_roots
            .iter()
            .map(|c| Certificate::from_der(c.as_ref()).to_owned()),
    );
    let tls_config = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .root_certs(RootCerts::Specific(Arc::new(roots)))
        .disable_verification(tls.insecure)
        .build();
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(true)
        .max_redirects(0)
        .proxy(None)
        .user_agent(format!("mailbench/{}", env!("CARGO_PKG_VERSION")))
        .accept("text/plain;version=0.0.4;q=1,*/*;q=0.1")
        .tls_config(tls_config)
        .build()
        .new_agent()
}

/// One GET of `url`, at most `cap` bytes of body.
pub fn fetch(agent: &ureq::Agent, url: &str, cap: u64) -> std::result::Result<String, String> {
    let mut resp = agent.get(url).call().map_err(|e| describe(&e))?;
    resp.body_mut()
        .with_config()
        .limit(cap)
        .read_to_string()
        .map_err(|e| describe(&e))
}

fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::StatusCode(c) => format!("HTTP status {c}"),
        ureq::Error::BodyExceedsLimit(n) => format!("the answer is larger than {n} bytes"),
        ureq::Error::Timeout(_) => "no answer within the scrape timeout".into(),
        other => other.to_string(),
    }
}

// ---- the scraper --------------------------------------------------------------

/// One source's readings over a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SourceSeries {
    pub source: String,
    /// What answered: node-exporter, postfix-exporter, dovecot, /proc.
    pub kinds: Vec<String>,
    pub scrapes: u64,
    pub failures: u64,
    /// The first failure's reason.
    pub error: Option<String>,
    /// The store volume's devices when the source names them (/proc of the
    /// local target; empty when the store is on no block device); None:
    /// `--server-disk` or every whole disk.
    pub store_devices: Option<Vec<String>>,
    pub samples: Vec<ServerSample>,
}

/// Everything the scraper read.
#[derive(Debug, Clone, Default)]
pub struct ServerSeries {
    pub sources: Vec<SourceSeries>,
    pub warnings: Vec<String>,
}

struct Scraping {
    sources: Vec<Source>,
    agent: ureq::Agent,
    t0: Instant,
    log: TestLog,
    series: Vec<SourceSeries>,
    warnings: Vec<String>,
}

impl Scraping {
    fn scrape_all(&mut self) {
        for i in 0..self.sources.len() {
            let t_s = self.t0.elapsed().as_secs_f64();
            let got = match &self.sources[i] {
                Source::Proc(_) => HostSample::from_proc()
                    .map(|h| Parsed {
                        sample: ServerSample {
                            t_s,
                            host: Some(h),
                            mail: MailServerSample::default(),
                        },
                        kinds: vec!["/proc"],
                    })
                    .ok_or_else(|| "cannot read /proc/stat".to_string()),
                Source::Url(u) => fetch(&self.agent, u, MAX_BODY_BYTES).and_then(|body| {
                    let p = parse_exposition(&body, t_s);
                    if p.sample.host.is_none() && p.sample.mail.is_empty() {
                        Err("no node, postfix or dovecot series in the answer".into())
                    } else {
                        Ok(p)
                    }
                }),
            };
            self.record(i, got);
        }
    }

    fn record(&mut self, i: usize, got: std::result::Result<Parsed, String>) {
        let s = &mut self.series[i];
        s.scrapes += 1;
        match got {
            Ok(p) => {
                for k in p.kinds {
                    if !s.kinds.iter().any(|x| x == k) {
                        s.kinds.push(k.to_string());
                    }
                }
                s.samples.push(p.sample);
            }
            Err(e) => {
                s.failures += 1;
                if s.error.is_none() {
                    let w = format!(
                        "server metrics: {} did not answer ({e}); the run goes on without its figures",
                        s.source
                    );
                    self.log.line(&w);
                    self.warnings.push(w);
                    s.error = Some(e);
                }
            }
        }
    }
}

/// The scraper thread of one run.
pub struct Scraper {
    stop: mpsc::Sender<()>,
    handle: std::thread::JoinHandle<ServerSeries>,
}

impl Scraper {
    /// Scrapes every source at once and then every `interval` (measured from
    /// `t0`, the run's start, which the samples' `t_s` count from) until
    /// stopped, or at the latest at `until`.
    pub fn start(
        sources: Vec<Source>,
        interval: Duration,
        tls: &HttpTls,
        t0: Instant,
        until: Instant,
        log: TestLog,
    ) -> Result<Scraper> {
        assert!(
            interval > Duration::ZERO,
            "scrape interval must be positive"
        );
        let timeout = interval.clamp(Duration::from_millis(500), Duration::from_secs(5));
        let mut s = Scraping {
            series: sources
                .iter()
                .map(|src| SourceSeries {
                    source: src.name(),
                    store_devices: match src {
                        Source::Proc(d) => Some(d.clone()),
                        Source::Url(_) => None,
                    },
                    ..Default::default()
                })
                .collect(),
            sources,
            agent: agent(timeout, tls),
            t0,
            log,
            warnings: Vec::new(),
        };
        let (stop, rx) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("server-metrics".into())
            .spawn(move || {
                let mut k: u32 = 0;
                loop {
                    s.scrape_all();
                    k += 1;
                    let next = t0 + interval * k;
                    let now = Instant::now();
                    if now >= until {
                        break;
                    }
                    match rx.recv_timeout(next.saturating_duration_since(now)) {
                        Err(mpsc::RecvTimeoutError::Timeout) => continue,
                        // Stopped: one last reading closes the run.
                        _ => {
                            s.scrape_all();
                            break;
                        }
                    }
                }
                ServerSeries {
                    sources: s.series,
                    warnings: s.warnings,
                }
            })
            .map_err(|e| Error::Runtime(format!("cannot start the server-metrics thread: {e}")))?;
        Ok(Scraper { stop, handle })
    }

    /// Stops the scraper (after one last reading) and returns what it read.
    pub fn stop(self) -> ServerSeries {
        let _ = self.stop.send(());
        self.handle.join().unwrap_or_else(|_| ServerSeries {
            sources: Vec::new(),
            warnings: vec!["server metrics: the scraper thread failed; no server figures".into()],
        })
    }
}

// ---- figures for the result ---------------------------------------------------

impl ServerSeries {
    /// The figures over [`from_s`, `to_s`] for `users` mailboxes; `store` picks
    /// the store volume of URL sources (a /proc source names its own).
    pub fn section(
        &self,
        from_s: f64,
        to_s: f64,
        store: &StoreDevices,
        users: u64,
    ) -> ServerSection {
        let mut sources = Vec::new();
        // Store I/O summed over the exporters (several servers carry the users
        // between them); this host's /proc only when no exporter has a store
        // figure (with the local target both may read the same disk).
        let mut total = mailbench_metrics::system::DiskRates::default();
        let mut local = None;
        let mut any_store = false;
        let mut points = BTreeMap::new();
        for s in &self.sources {
            let pick = match &s.store_devices {
                Some(d) => StoreDevices::Named(d.clone()),
                None => store.clone(),
            };
            let inside: Vec<ServerSample> = s
                .samples
                .iter()
                .filter(|x| x.t_s >= from_s && x.t_s <= to_s)
                .cloned()
                .collect();
            let figures = ServerFigures::of(&inside, &pick);
            let rates = figures
                .as_ref()
                .and_then(|f| f.host.as_ref()?.store.as_ref())
                .map(|st| st.rates);
            match (rates, &s.store_devices) {
                (Some(r), None) => {
                    any_store = true;
                    total.reads_per_s += r.reads_per_s;
                    total.writes_per_s += r.writes_per_s;
                }
                (Some(r), Some(_)) => local = Some(r),
                _ => {}
            }
            points.insert(s.source.clone(), series_points(&s.samples, &pick));
            sources.push(SourceFigures {
                source: s.source.clone(),
                kinds: s.kinds.clone(),
                scrapes: s.scrapes,
                failures: s.failures,
                error: s.error.clone(),
                per_mailbox: rates.and_then(|r| PerMailbox::of(&r, users)),
                figures,
            });
        }
        ServerSection {
            from_s,
            to_s,
            sources,
            per_mailbox: if any_store {
                PerMailbox::of(&total, users)
            } else {
                local.and_then(|r| PerMailbox::of(&r, users))
            },
            compression: 1.0,
            per_mailbox_real_day: None,
            points,
        }
    }
}

fn series_points(samples: &[ServerSample], store: &StoreDevices) -> Vec<ServerPoint> {
    samples
        .windows(2)
        .map(|w| {
            let f = ServerFigures::of(w, store);
            let host = f.as_ref().and_then(|f| f.host.as_ref());
            ServerPoint {
                t_s: w[1].t_s,
                cpu_busy_pct: host.map(|h| h.cpu_busy_pct),
                store_iops: host
                    .and_then(|h| h.store.as_ref())
                    .map(|s| s.rates.reads_per_s + s.rates.writes_per_s),
                queue: (!w[1].mail.queues.is_empty()).then(|| w[1].mail.queues.values().sum()),
            }
        })
        .collect()
}

// ---- the server's configuration ----------------------------------------------

/// The server host's configuration from an exposition (`source` names it).
pub fn parse_config(text: &str, source: &str) -> ServerConfig {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = Scrape::parse(lines).unwrap_or(Scrape {
        docs: Default::default(),
        samples: Vec::new(),
    });
    let mut r = ConfigReader::default();
    for s in &scrape.samples {
        let v = match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
            _ => continue,
        };
        let label = |k: &str| s.labels.get(k).unwrap_or("").to_string();
        r.add(&s.metric, &label, v);
    }
    r.finish(source)
}

/// The server host's configuration, once per `--server-metrics` endpoint
/// (for a full disclosure); an endpoint that does not answer gives every
/// fact unknown with its reason. Without an endpoint, one entry saying so.
pub fn server_configs(o: &mailbench_results::mail::config::MailConfig) -> Vec<ServerConfig> {
    if o.server_metrics.is_empty() {
        let why = if o.target == "local" {
            "no --server-metrics endpoint: the local target runs on the load generator's host \
             (its configuration is the client's)"
        } else {
            "no --server-metrics endpoint (give the server's node exporter, \
             http://SERVER:9100/metrics)"
        };
        return vec![ServerConfig::unknown("none", why)];
    }
    let tls = match &o.ca_file {
        Some(p) => crate::endpoint::tls::load_ca_file(p).map(|extra_roots| HttpTls {
            extra_roots,
            insecure: o.tls_insecure,
        }),
        None => Ok(HttpTls {
            extra_roots: Vec::new(),
            insecure: o.tls_insecure,
        }),
    };
    let tls = match tls {
        Ok(t) => t,
        Err(e) => {
            let why = format!("the CA file could not be read: {e}");
            return (o.server_metrics.iter())
                .map(|u| ServerConfig::unknown(u, &why))
                .collect();
        }
    };
    let agent = agent(Duration::from_secs(5), &tls);
    (o.server_metrics.iter())
        .map(|u| match fetch(&agent, u, MAX_BODY_BYTES) {
            Ok(body) => parse_config(&body, u),
            Err(e) => ServerConfig::unknown(u, &format!("{u} did not answer: {e}")),
        })
        .collect()
}

// ---- one mail run -------------------------------------------------------------

/// Starts the scraper of one mail run: every `--server-metrics` URL, plus this
/// host's /proc when the target is local (`local_store`: Some, with the mail
/// folder's block device when it has one). None when there is nothing to read.
pub fn start_for_run(
    o: &mailbench_results::mail::config::MailConfig,
    local_store: Option<Option<String>>,
    t0: Instant,
    until: Instant,
    log: &TestLog,
) -> Result<Option<Scraper>> {
    let mut sources: Vec<Source> = o.server_metrics.iter().cloned().map(Source::Url).collect();
    if let Some(dev) = local_store {
        sources.push(Source::Proc(dev.into_iter().collect()));
    }
    if sources.is_empty() {
        return Ok(None);
    }
    let tls = HttpTls {
        extra_roots: match &o.ca_file {
            Some(p) => crate::endpoint::tls::load_ca_file(p)?,
            None => Vec::new(),
        },
        insecure: o.tls_insecure,
    };
    for s in &sources {
        log.line(format!(
            "server metrics: reading {} every {:?}",
            s.name(),
            o.interval
        ));
    }
    Scraper::start(sources, o.interval, &tls, t0, until, log.clone()).map(Some)
}

/// One line of `server.jsonl`: a source's raw reading.
#[derive(Serialize)]
struct ServerLine<'a> {
    source: &'a str,
    sample: &'a ServerSample,
}

/// The run's `server` section over [`from_s`, `to_s`] (seconds since the
/// start), with the per-mailbox figures also at the profile's real rate
/// (divided by the day's compression); the raw readings go to `server.jsonl`.
pub fn finish(
    series: &ServerSeries,
    run: &mailbench_base::rundir::RunDir,
    window: (f64, f64),
    users: u64,
    compression: f64,
    o: &mailbench_results::mail::config::MailConfig,
) -> Result<ServerSection> {
    let lines: Vec<ServerLine> = series
        .sources
        .iter()
        .flat_map(|s| {
            s.samples.iter().map(|x| ServerLine {
                source: &s.source,
                sample: x,
            })
        })
        .collect();
    run.write_jsonl("server.jsonl", &lines)?;
    let store = if o.server_disk.is_empty() {
        StoreDevices::WholeDisks
    } else {
        StoreDevices::Named(o.server_disk.clone())
    };
    let mut section = series.section(window.0, window.1, &store, users);
    section.compression = compression;
    section.per_mailbox_real_day = section
        .per_mailbox
        .map(|p| p.scaled(1.0 / compression.max(1e-9)));
    Ok(section)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE_A: &str = include_str!("../tests/data/node-exporter-1.5.0-a.txt");
    const NODE_B: &str = include_str!("../tests/data/node-exporter-1.5.0-b.txt");
    const POSTFIX: &str = include_str!("../tests/data/postfix-exporter-0.3.0.txt");
    const DOVECOT: &str = include_str!("../tests/data/dovecot-2.3.19.txt");

    #[test]
    fn the_server_configuration_comes_from_a_recorded_node_exporter() {
        let c = parse_config(NODE_A, "http://s:9100/metrics");
        assert_eq!(c.source, "http://s:9100/metrics");
        assert_eq!(c.memory_bytes.known(), Some(&25_276_514_304));
        assert!(c.cpus.known().is_some_and(|n| *n > 0), "{:?}", c.cpus);
        let disks = c.disks.known().unwrap();
        assert!(disks.iter().any(|d| d.device == "vda"), "{disks:?}");
        let fs = c.filesystems.known().unwrap();
        assert!(
            fs.iter()
                .any(|f| f.mountpoint == "/" && f.device == "/dev/vda")
        );
        // This recording has no uname collector: unknown, with the reason.
        assert!(c.sysname.reason().unwrap().contains("node_uname_info"));
        // A Postfix exporter alone reports no host.
        let p = parse_config(POSTFIX, "http://s:9154/metrics");
        assert!(p.cpus.reason().is_some() && p.disks.reason().is_some());
    }

    #[test]
    fn reads_a_recorded_node_exporter() {
        let p = parse_exposition(NODE_A, 0.0);
        assert_eq!(p.kinds, vec![KIND_NODE]);
        let h = p.sample.host.unwrap();
        assert_eq!(h.cores.len(), 2);
        // cpu 0: idle 99.27 iowait 25.87; the other six modes are busy (the
        // guest seconds, a separate series, are inside user already).
        let c0 = h.cores["0"];
        assert!((c0.idle - 99.27).abs() < 1e-6 && (c0.iowait - 25.87).abs() < 1e-6);
        assert!((c0.busy - (47.41 + 25.64 + 45.81 + 959.16 + 4018.22)).abs() < 1e-6);
        assert_eq!(h.memory.unwrap().total_bytes, 25_276_514_304);
        assert_eq!(h.disks["vda"].reads, 8_176_556);
        assert_eq!(h.disks["vda"].read_ms, 16_018_678);
        assert!(h.net.contains_key("lo") && h.net.contains_key("eth0"));
    }

    #[test]
    fn two_recorded_node_exporter_samples_give_rates() {
        let a = parse_exposition(NODE_A, 0.0).sample;
        let b = parse_exposition(NODE_B, 5.0).sample;
        let wa = a.host.as_ref().unwrap().disks["vda"].writes;
        let wb = b.host.as_ref().unwrap().disks["vda"].writes;
        let f = ServerFigures::of(&[a, b], &StoreDevices::WholeDisks).unwrap();
        let h = f.host.unwrap();
        let st = h.store.unwrap();
        // zram0 is not a whole disk: the store is vda alone.
        assert_eq!(st.devices, vec!["vda"]);
        assert!((st.rates.writes_per_s - (wb - wa) as f64 / 5.0).abs() < 1e-9);
        // 64 MiB were written between the two recordings.
        assert!(st.rates.write_bytes_per_s * 5.0 >= 64.0 * 1024.0 * 1024.0);
        assert!(h.cpu_busy_pct > 0.0 && h.cpu_busy_pct <= 100.0);
    }

    #[test]
    fn reads_postfix_queues_and_dovecot_commands() {
        let p = parse_exposition(POSTFIX, 0.0);
        assert_eq!(p.kinds, vec![KIND_POSTFIX]);
        assert!(p.sample.host.is_none());
        let q = &p.sample.mail.queues;
        assert_eq!(q["active"], 2.0);
        assert_eq!(q["deferred"], 0.0);
        assert_eq!(q.len(), 5);
        assert_eq!(p.sample.mail.commands["postfix:smtpd_messages"], 82.0);
        assert_eq!(
            p.sample.mail.commands["postfix:qmgr_messages_removed"],
            80.0
        );
        let d = parse_exposition(DOVECOT, 0.0);
        assert_eq!(d.kinds, vec![KIND_DOVECOT]);
        let c = &d.sample.mail.commands;
        assert_eq!(c["imap:SELECT"], 3.0);
        assert_eq!(c["imap:LOGOUT"], 6.0);
        assert_eq!(c["auth_success"], 6.0);
        // The breakdown by reply state and the durations are not commands.
        assert!(!c.keys().any(|k| k.contains("duration")));
        assert_eq!(c.keys().filter(|k| k.starts_with("imap:")).count(), 4);
    }

    #[test]
    fn garbage_and_odd_lines_are_ignored() {
        let text = "garbage\n\x00\x01\nnode_cpu_seconds_total{cpu=\"0\",mode=\"user\"} NaN\n\
                    node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} +Inf\n\
                    node_disk_reads_completed_total{device=\"sda\"} 12 1700000000000\n# EOF\n";
        let p = parse_exposition(text, 0.0);
        let h = p.sample.host.unwrap();
        assert_eq!(h.disks["sda"].reads, 12);
        // NaN and infinities are no counter readings.
        assert!(h.cores.is_empty());
        assert!(parse_exposition("", 0.0).sample.host.is_none());
    }

    #[test]
    fn urls_are_checked() {
        assert!(crate::options::check_url("http://127.0.0.1:9100/metrics").is_ok());
        assert!(crate::options::check_url("https://mail.example.org:9100/metrics").is_ok());
        for bad in [
            "ftp://x",
            "127.0.0.1:9100",
            "http://",
            "http:///metrics",
            "http://u:pw@h:9100/metrics",
        ] {
            assert!(crate::options::check_url(bad).is_err(), "{bad}");
        }
    }
}
