//! `--metrics-listen ADDR`: the latest figures of a run in the Prometheus text
//! format 0.0.4 (or OpenMetrics 1.0 when the scraper asks for it) at
//! `/metrics`.
//!
//! The exposition is written by `prometheus-client` (a collector over the
//! run's latest figures) and served by `hyper` on a one-thread tokio runtime.
//! Two things stay ours: the per-class latency summary (prometheus-client has
//! no summary type) and the 0.0.4 spelling of counter families (its text
//! encoder writes OpenMetrics only, where a counter family has no `_total`).

use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use mailbench_base::{Error, Result};
use mailbench_storage::run::{LiveFigures, Progress};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::{self, Write as _};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::oneshot;

pub const PHASES: [&str; 7] = [
    "init", "warmup", "measured", "stopping", "verify", "done", "error",
];

/// How long a scraper may take to send its request and read the answer.
const CONNECTION_LIMIT: Duration = Duration::from_secs(5);

#[derive(Debug, Default, Clone)]
struct State {
    phase: String,
    live: Option<LiveFigures>,
    ops_total: BTreeMap<String, u64>,
    latency_sum_s: BTreeMap<String, f64>,
    intervals: u64,
    run_errors: u64,
    verdict: Option<String>,
}

type Shared = Arc<Mutex<State>>;

/// The endpoint; stops when dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    shared: Shared,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

/// The `Progress` that feeds a `MetricsServer`.
pub struct MetricsProgress {
    shared: Shared,
}

impl MetricsServer {
    /// Binds `addr` (e.g. `127.0.0.1:9464`; port 0 picks a free port) and
    /// starts serving. A bad or busy address is a usage error.
    pub fn start(addr: &str) -> Result<MetricsServer> {
        let listener = std::net::TcpListener::bind(addr).map_err(|e| {
            Error::usage(format!(
                "--metrics-listen {addr}: cannot listen there: {e} (give HOST:PORT, e.g. 127.0.0.1:9464)"
            ))
        })?;
        let fail = |e: std::io::Error| Error::runtime(format!("--metrics-listen {addr}: {e}"));
        let local = listener.local_addr().map_err(fail)?;
        listener.set_nonblocking(true).map_err(fail)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(fail)?;
        let listener = {
            let _in_runtime = rt.enter();
            tokio::net::TcpListener::from_std(listener).map_err(fail)?
        };
        let shared: Shared = Arc::new(Mutex::new(State {
            phase: "init".into(),
            ..Default::default()
        }));
        let (stop, stopped) = oneshot::channel();
        let sh = shared.clone();
        let handle = std::thread::Builder::new()
            .name("mb-metrics".into())
            .spawn(move || rt.block_on(serve(listener, sh, stopped)))
            .map_err(|e| Error::runtime(format!("cannot start the metrics thread: {e}")))?;
        Ok(MetricsServer {
            addr: local,
            shared,
            stop: Some(stop),
            handle: Some(handle),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn progress(&self) -> MetricsProgress {
        MetricsProgress {
            shared: self.shared.clone(),
        }
    }

    /// Marks the run finished with its verdict (`pass`, `fail`, ...).
    pub fn finish(&self, verdict: &str) {
        if let Ok(mut s) = self.shared.lock() {
            s.phase = "done".into();
            s.verdict = Some(verdict.to_string());
        }
    }

    /// The current exposition (what a scrape returns).
    pub fn render(&self, openmetrics: bool) -> String {
        render(&self.shared, openmetrics)
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // The runtime, its listener and open connections end with the thread.
        if let Some(h) = self.handle.take() {
            mailbench_base::thread::join_or_warn(h, "metrics endpoint");
        }
    }
}

async fn serve(listener: tokio::net::TcpListener, shared: Shared, mut stop: oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            _ = &mut stop => break,
            conn = listener.accept() => {
                if let Ok((stream, _)) = conn {
                    tokio::spawn(connection(stream, shared.clone()));
                }
            }
        }
    }
}

/// One scrape: one request, answered, then the connection is closed.
async fn connection(stream: tokio::net::TcpStream, shared: Shared) {
    let service = service_fn(move |req: Request<Incoming>| {
        let answer = respond(&req, &shared);
        async move { Ok::<_, Infallible>(answer) }
    });
    let serving = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(CONNECTION_LIMIT)
        .keep_alive(false)
        .title_case_headers(true)
        .serve_connection(TokioIo::new(stream), service);
    let _ = tokio::time::timeout(CONNECTION_LIMIT, serving).await;
}

fn respond(req: &Request<Incoming>, shared: &Shared) -> Response<String> {
    const PLAIN: &str = "text/plain; charset=utf-8";
    let openmetrics = req.headers().get_all(ACCEPT).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.to_ascii_lowercase()
                .contains("application/openmetrics-text")
        })
    });
    let (status, ctype, body) = if req.method() != Method::GET && req.method() != Method::HEAD {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            "GET /metrics\n".to_string(),
        )
    } else if req.uri().path() == "/metrics" {
        let ctype = if openmetrics {
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        } else {
            "text/plain; version=0.0.4; charset=utf-8"
        };
        (StatusCode::OK, ctype, render(shared, openmetrics))
    } else if req.uri().path() == "/" {
        (
            StatusCode::OK,
            PLAIN,
            "mailbench: metrics at /metrics\n".to_string(),
        )
    } else {
        let body = "not found: metrics are at /metrics\n".to_string();
        (StatusCode::NOT_FOUND, PLAIN, body)
    };
    let mut answer = Response::new(body);
    *answer.status_mut() = status;
    answer
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    answer
}

impl Progress for MetricsProgress {
    fn phase(&mut self, text: &str) {
        if let Ok(mut s) = self.shared.lock() {
            let t = text.to_ascii_lowercase();
            if t.starts_with("creating") {
                s.phase = "init".into();
            } else if t.starts_with("verifying") {
                s.phase = "verify".into();
            } else if t.starts_with("interrupted") {
                s.phase = "stopping".into();
            } else if t.starts_with("error") {
                s.run_errors += 1;
            }
        }
    }
    fn interval(&mut self, p: &LiveFigures) {
        if let Ok(mut s) = self.shared.lock() {
            s.phase = p.phase.clone();
            s.intervals += 1;
            for (k, c) in &p.classes {
                *s.ops_total.entry(k.clone()).or_default() += c.ops;
                *s.latency_sum_s.entry(k.clone()).or_default() +=
                    c.latency_ms.avg * c.ops as f64 / 1000.0;
            }
            s.live = Some(p.clone());
        }
    }
}

/// The exposition of the figures in `shared` at this moment.
fn render(shared: &Shared, openmetrics: bool) -> String {
    let Ok(state) = shared.lock().map(|s| s.clone()) else {
        return String::new();
    };
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot(state.clone())));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode_registry(&mut out, &registry);
    if let Some(live) = &state.live {
        latency_summary(&mut out, &state, live);
    }
    if openmetrics {
        let _ = encode_eof(&mut out);
        out
    } else {
        prometheus_text(&out)
    }
}

/// The run's figures at one scrape, encoded by prometheus-client.
#[derive(Debug)]
struct Snapshot(State);

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        status_families(&self.0, &mut enc)?;
        if let Some(live) = &self.0.live {
            live_families(&self.0, live, &mut enc)?;
        }
        Ok(())
    }
}

type Labels<'a> = Vec<(&'static str, &'a str)>;

/// A family of one unlabelled sample.
fn one(enc: &mut DescriptorEncoder, name: &str, help: &str, m: impl EncodeMetric) -> fmt::Result {
    m.encode(enc.encode_descriptor(name, help, None, m.metric_type())?)
}

/// A family of labelled samples of one type.
fn labelled<'a, M: EncodeMetric + 'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    samples: impl IntoIterator<Item = (Labels<'a>, M)>,
) -> fmt::Result {
    let mut family = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, m) in samples {
        m.encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

fn flag(b: bool) -> ConstGauge<i64> {
    ConstGauge::new(i64::from(b))
}

fn status_families(s: &State, enc: &mut DescriptorEncoder) -> fmt::Result {
    one(
        enc,
        "mailbench_up",
        "1 while a mailbench run serves metrics.",
        flag(true),
    )?;
    let version = vec![("version", env!("CARGO_PKG_VERSION"))];
    let help = "The mailbench version serving these metrics.";
    labelled(
        enc,
        "mailbench_build_info",
        help,
        MetricType::Gauge,
        [(version, flag(true))],
    )?;
    let mut phases: Vec<&str> = PHASES.to_vec();
    if !phases.contains(&s.phase.as_str()) {
        phases.push(&s.phase);
    }
    let help = "The run's current phase (1 for the current one).";
    let samples = phases
        .into_iter()
        .map(|p| (vec![("phase", p)], flag(p == s.phase)));
    labelled(enc, "mailbench_phase", help, MetricType::Gauge, samples)?;
    let help = "Sampling intervals completed.";
    one(
        enc,
        "mailbench_intervals",
        help,
        ConstCounter::new(s.intervals),
    )?;
    let help = "Errors reported by the run (besides I/O errors counted per class).";
    one(
        enc,
        "mailbench_run_errors",
        help,
        ConstCounter::new(s.run_errors),
    )?;
    if let Some(v) = &s.verdict {
        let help = "The final verdict once the run is done (1 for it).";
        let samples = ["pass", "fail", "interrupted", "error"]
            .into_iter()
            .map(|st| (vec![("status", st)], flag(v == st)));
        labelled(enc, "mailbench_verdict", help, MetricType::Gauge, samples)?;
    }
    Ok(())
}

fn live_families(s: &State, p: &LiveFigures, enc: &mut DescriptorEncoder) -> fmt::Result {
    let g = ConstGauge::new;
    one(
        enc,
        "mailbench_elapsed_seconds",
        "Seconds since the load started.",
        g(p.elapsed_s),
    )?;
    let help = "Seconds left until the measured window ends.";
    one(
        enc,
        "mailbench_remaining_seconds",
        help,
        g(p.remaining_s.max(0.0)),
    )?;
    let help = "Database reads and writes per second caused by transactions (latest interval).";
    one(
        enc,
        "mailbench_transactional_iops",
        help,
        g(p.transactional_iops),
    )?;
    if let Some(t) = p.target_iops {
        let help = "The transactional IOPS target of the verdict.";
        one(enc, "mailbench_target_iops", help, g(t))?;
    }
    let help = "Transactions per second (latest interval).";
    one(
        enc,
        "mailbench_transactions_per_second",
        help,
        g(p.transactions_per_s),
    )?;
    let help = "1 while the running verdict passes (latency averages within limits, no errors).";
    one(enc, "mailbench_passing", help, flag(p.passing))?;
    let errors = ConstGauge::new(i64::try_from(p.errors).unwrap_or(i64::MAX));
    one(
        enc,
        "mailbench_io_errors",
        "I/O and run errors so far.",
        errors,
    )?;
    let help = "The verdict's average latency limits.";
    let limits = [
        ("db_read", p.db_read_limit_ms),
        ("log_write", p.log_write_limit_ms),
    ]
    .map(|(class, ms)| (vec![("class", class), ("stat", "avg")], g(ms / 1000.0)));
    labelled(
        enc,
        "mailbench_latency_limit_seconds",
        help,
        MetricType::Gauge,
        limits,
    )?;
    class_families(s, p, enc)?;
    let tl = &p.transaction_latency_ms;
    let help = "Transaction response time from intended start (latest interval).";
    let stats = [("avg", tl.avg), ("p99", tl.p99), ("max", tl.max)]
        .map(|(stat, ms)| (vec![("stat", stat)], g(ms / 1000.0)));
    labelled(
        enc,
        "mailbench_transaction_latency_seconds",
        help,
        MetricType::Gauge,
        stats,
    )
}

/// The per I/O class families (the latency summary aside).
fn class_families(s: &State, p: &LiveFigures, enc: &mut DescriptorEncoder) -> fmt::Result {
    let per_class = |f: &dyn Fn(&mailbench_results::storage::stats::ClassFigures) -> f64| {
        let v: Vec<_> = p
            .classes
            .iter()
            .map(|(k, c)| (vec![("class", k.as_str())], ConstGauge::new(f(c))))
            .collect();
        v
    };
    let gauge = MetricType::Gauge;
    let help = "Operations per second per I/O class (latest interval).";
    labelled(
        enc,
        "mailbench_io_ops_per_second",
        help,
        gauge,
        per_class(&|c| c.ops_per_s),
    )?;
    let help = "Bytes per second per I/O class (latest interval).";
    let bytes = per_class(&|c| c.mb_per_s * 1e6);
    labelled(enc, "mailbench_io_bytes_per_second", help, gauge, bytes)?;
    let help = "Average I/O latency per class (latest interval).";
    let avg = per_class(&|c| c.latency_ms.avg / 1000.0);
    labelled(enc, "mailbench_io_latency_avg_seconds", help, gauge, avg)?;
    let help = "Operations per I/O class since the load started.";
    let ops = s
        .ops_total
        .iter()
        .map(|(k, v)| (vec![("class", k.as_str())], ConstCounter::new(*v)));
    labelled(
        enc,
        "mailbench_io_operations",
        help,
        MetricType::Counter,
        ops,
    )?;
    let help = "I/O errors per class in reported intervals.";
    let errors = p
        .classes
        .iter()
        .map(|(k, c)| (vec![("class", k.as_str())], ConstCounter::new(c.errors)));
    labelled(
        enc,
        "mailbench_io_class_errors",
        help,
        MetricType::Counter,
        errors,
    )
}

/// `mailbench_io_latency_seconds`, a summary: quantiles of the latest
/// interval, sum and count since the start. Written by hand because
/// prometheus-client has no summary type.
fn latency_summary(out: &mut String, s: &State, p: &LiveFigures) {
    const NAME: &str = "mailbench_io_latency_seconds";
    let _ = writeln!(
        out,
        "# HELP {NAME} I/O latency per class: quantiles of the latest interval; sum and count since the start."
    );
    let _ = writeln!(out, "# TYPE {NAME} summary");
    for (k, c) in &p.classes {
        let l = &c.latency_ms;
        let class = escape_label(k);
        for (q, ms) in [
            ("0.5", l.p50),
            ("0.95", l.p95),
            ("0.99", l.p99),
            ("0.999", l.p999),
            ("1", l.max),
        ] {
            let v = number(ms / 1000.0);
            let _ = writeln!(out, "{NAME}{{class=\"{class}\",quantile=\"{q}\"}} {v}");
        }
        let sum = number(s.latency_sum_s.get(k).copied().unwrap_or(0.0));
        let _ = writeln!(out, "{NAME}_sum{{class=\"{class}\"}} {sum}");
        let count = s.ops_total.get(k).copied().unwrap_or(0);
        let _ = writeln!(out, "{NAME}_count{{class=\"{class}\"}} {count}");
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value as both formats spell it (shortest round-trip decimal).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// The Prometheus text format 0.0.4 from prometheus-client's OpenMetrics
/// text: the same samples, but a counter family is named like its samples
/// (`<name>_total`) and there is no `# EOF`.
fn prometheus_text(openmetrics: &str) -> String {
    let counter = |line: &str| {
        line.strip_prefix("# TYPE ")
            .and_then(|rest| rest.strip_suffix(" counter"))
            .map(str::to_string)
    };
    let lines: Vec<&str> = openmetrics.lines().collect();
    let mut out = String::with_capacity(openmetrics.len() + 256);
    for (i, line) in lines.iter().enumerate() {
        let next_counter = lines.get(i + 1).and_then(|l| counter(l));
        if let Some(name) = counter(line) {
            let _ = writeln!(out, "# TYPE {name}_total counter");
        } else if let (Some(name), Some(help)) = (
            next_counter,
            line.strip_prefix("# HELP ").and_then(|r| r.split_once(' ')),
        ) && help.0 == name
        {
            let _ = writeln!(out, "# HELP {name}_total {}", help.1);
        } else if *line != "# EOF" {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailbench_results::storage::stats::{ClassFigures, LatencyMs};
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn scrape(addr: SocketAddr, accept: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(
            c,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n"
        )
        .unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn serves_prometheus_and_openmetrics() {
        let srv = MetricsServer::start("127.0.0.1:0").unwrap();
        let addr = srv.local_addr();
        let first = scrape(addr, "text/plain");
        assert!(first.starts_with("HTTP/1.1 200 OK"), "{first}");
        assert!(
            first.contains("mailbench_phase{phase=\"init\"} 1"),
            "{first}"
        );
        let mut p = srv.progress();
        let mut classes = BTreeMap::new();
        classes.insert(
            "db_read".to_string(),
            ClassFigures {
                ops: 1000,
                ops_per_s: 500.0,
                avg_bytes: 32768.0,
                mb_per_s: 16.384,
                errors: 0,
                latency_ms: LatencyMs {
                    avg: 2.0,
                    p50: 1.5,
                    p95: 4.0,
                    p99: 8.0,
                    p999: 9.0,
                    max: 12.0,
                },
            },
        );
        let f = LiveFigures {
            phase: "measured".into(),
            elapsed_s: 10.0,
            remaining_s: 50.0,
            transactional_iops: 800.0,
            target_iops: Some(700.0),
            passing: true,
            db_read_limit_ms: 20.0,
            log_write_limit_ms: 10.0,
            classes,
            ..Default::default()
        };
        p.interval(&f);
        p.interval(&f);
        let body = scrape(addr, "text/plain");
        assert!(
            body.contains("Content-Type: text/plain; version=0.0.4"),
            "{body}"
        );
        for want in [
            "mailbench_phase{phase=\"measured\"} 1",
            "mailbench_transactional_iops 800",
            "mailbench_target_iops 700",
            "mailbench_io_latency_seconds{class=\"db_read\",quantile=\"0.99\"} 0.008",
            "mailbench_io_latency_seconds_count{class=\"db_read\"} 2000",
            "mailbench_io_latency_seconds_sum{class=\"db_read\"} 4",
            "mailbench_io_operations_total{class=\"db_read\"} 2000",
            "# TYPE mailbench_io_operations_total counter",
            "mailbench_passing 1",
        ] {
            assert!(body.contains(want), "missing {want}:\n{body}");
        }
        assert!(!body.contains("# EOF"));
        let om = scrape(addr, "application/openmetrics-text; version=1.0.0");
        assert!(om.contains("application/openmetrics-text"), "{om}");
        assert!(
            om.contains("# TYPE mailbench_io_operations counter"),
            "{om}"
        );
        assert!(om.trim_end().ends_with("# EOF"), "{om}");
        srv.finish("pass");
        let done = srv.render(false);
        assert!(done.contains("mailbench_phase{phase=\"done\"} 1"));
        assert!(done.contains("mailbench_verdict{status=\"pass\"} 1"));
        let mut c = TcpStream::connect(addr).unwrap();
        write!(c, "GET /nope HTTP/1.1\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        assert!(s.starts_with("HTTP/1.1 404"));
        drop(srv);
        assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_err());
    }

    #[test]
    fn busy_address_is_a_usage_error() {
        let a = MetricsServer::start("127.0.0.1:0").unwrap();
        let e = MetricsServer::start(&a.local_addr().to_string())
            .err()
            .unwrap();
        assert_eq!(e.exit_status().code(), 2);
        assert!(e.to_string().contains("--metrics-listen"));
        let e = MetricsServer::start("not an address").err().unwrap();
        assert_eq!(e.exit_status().code(), 2);
    }

    fn request(addr: SocketAddr, head: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(c, "{head}\r\nHost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn head_index_and_other_methods() {
        let srv = MetricsServer::start("127.0.0.1:0").unwrap();
        let addr = srv.local_addr();
        let head = request(addr, "HEAD /metrics HTTP/1.1");
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        let len = srv.render(false).len();
        assert!(head.contains(&format!("Content-Length: {len}")), "{head}");
        assert!(
            head.ends_with("\r\n\r\n"),
            "a HEAD answer has no body: {head}"
        );
        let post = request(addr, "POST /metrics HTTP/1.1");
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        let index = request(addr, "GET / HTTP/1.1");
        assert!(index.ends_with("metrics at /metrics\n"), "{index}");
    }

    #[test]
    fn counter_families_are_named_per_format() {
        let srv = MetricsServer::start("127.0.0.1:0").unwrap();
        let text = srv.render(false);
        assert!(
            text.contains("# HELP mailbench_intervals_total Sampling"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE mailbench_intervals_total counter"),
            "{text}"
        );
        assert!(text.contains("\nmailbench_intervals_total 0\n"), "{text}");
        let om = srv.render(true);
        assert!(om.contains("# TYPE mailbench_intervals counter"), "{om}");
        assert!(om.contains("\nmailbench_intervals_total 0\n"), "{om}");
        assert_eq!(om.matches("# EOF").count(), 1, "{om}");
    }
}
