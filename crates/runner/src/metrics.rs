//! `--metrics-listen ADDR`: the latest figures of a run in the Prometheus text
//! format (or OpenMetrics when the scraper asks for it), served by a small
//! std::net thread at `/metrics`.

use mailbench_base::{Error, Result};
use mailbench_storage::run::{LiveFigures, Progress};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub const PHASES: [&str; 7] = [
    "init", "warmup", "measured", "stopping", "verify", "done", "error",
];

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

struct Shared {
    state: Mutex<State>,
    stop: AtomicBool,
}

/// The endpoint; stops when dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

/// The `Progress` that feeds a `MetricsServer`.
pub struct MetricsProgress {
    shared: Arc<Shared>,
}

impl MetricsServer {
    /// Binds `addr` (e.g. `127.0.0.1:9464`; port 0 picks a free port) and
    /// starts serving. A bad or busy address is a usage error.
    pub fn start(addr: &str) -> Result<MetricsServer> {
        let listener = TcpListener::bind(addr).map_err(|e| {
            Error::usage(format!(
                "--metrics-listen {addr}: cannot listen there: {e} (give HOST:PORT, e.g. 127.0.0.1:9464)"
            ))
        })?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::runtime(format!("--metrics-listen {addr}: {e}")))?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                phase: "init".into(),
                ..Default::default()
            }),
            stop: AtomicBool::new(false),
        });
        let sh = shared.clone();
        let handle = std::thread::Builder::new()
            .name("mb-metrics".into())
            .spawn(move || serve(listener, sh))
            .map_err(|e| Error::runtime(format!("cannot start the metrics thread: {e}")))?;
        Ok(MetricsServer {
            addr: local,
            shared,
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
        if let Ok(mut s) = self.shared.state.lock() {
            s.phase = "done".into();
            s.verdict = Some(verdict.to_string());
        }
    }

    /// The current exposition (what a scrape returns).
    pub fn render(&self, openmetrics: bool) -> String {
        match self.shared.state.lock() {
            Ok(s) => render(&s, openmetrics),
            Err(_) => String::new(),
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_millis(500));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(listener: TcpListener, sh: Arc<Shared>) {
    for conn in listener.incoming() {
        if sh.stop.load(Ordering::SeqCst) {
            break;
        }
        if let Ok(c) = conn {
            let _ = handle(c, &sh);
        }
    }
}

fn handle(mut c: TcpStream, sh: &Shared) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
        let n = c.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let req = String::from_utf8_lossy(&buf);
    let mut lines = req.lines();
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or_default();
    let path = parts.next().unwrap_or_default();
    let openmetrics = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("accept:") && l.contains("application/openmetrics-text")
    });
    let (status, ctype, body) = if method != "GET" && method != "HEAD" {
        (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "GET /metrics\n".to_string(),
        )
    } else if path == "/metrics" || path.starts_with("/metrics?") {
        let body = match sh.state.lock() {
            Ok(s) => render(&s, openmetrics),
            Err(_) => String::new(),
        };
        (
            "200 OK",
            if openmetrics {
                "application/openmetrics-text; version=1.0.0; charset=utf-8"
            } else {
                "text/plain; version=0.0.4; charset=utf-8"
            },
            body,
        )
    } else if path == "/" {
        (
            "200 OK",
            "text/plain; charset=utf-8",
            "mailbench: metrics at /metrics\n".to_string(),
        )
    } else {
        (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found: metrics are at /metrics\n".to_string(),
        )
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes())?;
    if method != "HEAD" {
        c.write_all(body.as_bytes())?;
    }
    c.flush()
}

impl Progress for MetricsProgress {
    fn phase(&mut self, text: &str) {
        if let Ok(mut s) = self.shared.state.lock() {
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
        if let Ok(mut s) = self.shared.state.lock() {
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

fn esc_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn num(v: f64) -> String {
    if v.is_finite() {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            return format!("{v:.0}");
        }
        // Nine decimals (nanoseconds for seconds), trailing zeros removed.
        let s = format!("{v:.9}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s.is_empty() || s == "-" || s == "-0" {
            "0".into()
        } else {
            s.to_string()
        }
    } else if v.is_nan() {
        "NaN".into()
    } else if v > 0.0 {
        "+Inf".into()
    } else {
        "-Inf".into()
    }
}

struct Out {
    o: String,
    om: bool,
}

impl Out {
    /// `# HELP` / `# TYPE` for a family; counters are named `<name>_total`
    /// in samples either way.
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let fam = if self.om && kind == "counter" {
            name.trim_end_matches("_total")
        } else {
            name
        };
        let _ = writeln!(self.o, "# HELP {fam} {help}");
        let _ = writeln!(self.o, "# TYPE {fam} {kind}");
    }
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        let _ = write!(self.o, "{name}");
        if !labels.is_empty() {
            let l: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", esc_label(v)))
                .collect();
            let _ = write!(self.o, "{{{}}}", l.join(","));
        }
        let _ = writeln!(self.o, " {}", num(v));
    }
}

fn render(s: &State, openmetrics: bool) -> String {
    let mut o = Out {
        o: String::new(),
        om: openmetrics,
    };
    o.family(
        "mailbench_up",
        "gauge",
        "1 while a mailbench run serves metrics.",
    );
    o.sample("mailbench_up", &[], 1.0);
    o.family(
        "mailbench_build_info",
        "gauge",
        "The mailbench version serving these metrics.",
    );
    o.sample(
        "mailbench_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
    o.family(
        "mailbench_phase",
        "gauge",
        "The run's current phase (1 for the current one).",
    );
    let mut phases: Vec<&str> = PHASES.to_vec();
    if !phases.contains(&s.phase.as_str()) {
        phases.push(&s.phase);
    }
    for p in phases {
        o.sample(
            "mailbench_phase",
            &[("phase", p)],
            if p == s.phase { 1.0 } else { 0.0 },
        );
    }
    o.family(
        "mailbench_intervals_total",
        "counter",
        "Sampling intervals completed.",
    );
    o.sample("mailbench_intervals_total", &[], s.intervals as f64);
    o.family(
        "mailbench_run_errors_total",
        "counter",
        "Errors reported by the run (besides I/O errors counted per class).",
    );
    o.sample("mailbench_run_errors_total", &[], s.run_errors as f64);
    if let Some(v) = &s.verdict {
        o.family(
            "mailbench_verdict",
            "gauge",
            "The final verdict once the run is done (1 for it).",
        );
        for st in ["pass", "fail", "interrupted", "error"] {
            o.sample(
                "mailbench_verdict",
                &[("status", st)],
                if v == st { 1.0 } else { 0.0 },
            );
        }
    }
    if let Some(p) = &s.live {
        o.family(
            "mailbench_elapsed_seconds",
            "gauge",
            "Seconds since the load started.",
        );
        o.sample("mailbench_elapsed_seconds", &[], p.elapsed_s);
        o.family(
            "mailbench_remaining_seconds",
            "gauge",
            "Seconds left until the measured window ends.",
        );
        o.sample("mailbench_remaining_seconds", &[], p.remaining_s.max(0.0));
        o.family(
            "mailbench_transactional_iops",
            "gauge",
            "Database reads and writes per second caused by transactions (latest interval).",
        );
        o.sample("mailbench_transactional_iops", &[], p.transactional_iops);
        if let Some(t) = p.target_iops {
            o.family(
                "mailbench_target_iops",
                "gauge",
                "The transactional IOPS target of the verdict.",
            );
            o.sample("mailbench_target_iops", &[], t);
        }
        o.family(
            "mailbench_transactions_per_second",
            "gauge",
            "Transactions per second (latest interval).",
        );
        o.sample(
            "mailbench_transactions_per_second",
            &[],
            p.transactions_per_s,
        );
        o.family(
            "mailbench_passing",
            "gauge",
            "1 while the running verdict passes (latency averages within limits, no errors).",
        );
        o.sample("mailbench_passing", &[], if p.passing { 1.0 } else { 0.0 });
        o.family("mailbench_io_errors", "gauge", "I/O and run errors so far.");
        o.sample("mailbench_io_errors", &[], p.errors as f64);
        o.family(
            "mailbench_latency_limit_seconds",
            "gauge",
            "The verdict's average latency limits.",
        );
        o.sample(
            "mailbench_latency_limit_seconds",
            &[("class", "db_read"), ("stat", "avg")],
            p.db_read_limit_ms / 1000.0,
        );
        o.sample(
            "mailbench_latency_limit_seconds",
            &[("class", "log_write"), ("stat", "avg")],
            p.log_write_limit_ms / 1000.0,
        );
        o.family(
            "mailbench_io_ops_per_second",
            "gauge",
            "Operations per second per I/O class (latest interval).",
        );
        for (k, c) in &p.classes {
            o.sample("mailbench_io_ops_per_second", &[("class", k)], c.ops_per_s);
        }
        o.family(
            "mailbench_io_bytes_per_second",
            "gauge",
            "Bytes per second per I/O class (latest interval).",
        );
        for (k, c) in &p.classes {
            o.sample(
                "mailbench_io_bytes_per_second",
                &[("class", k)],
                c.mb_per_s * 1e6,
            );
        }
        o.family(
            "mailbench_io_latency_seconds",
            "summary",
            "I/O latency per class: quantiles of the latest interval; sum and count since the start.",
        );
        for (k, c) in &p.classes {
            let l = &c.latency_ms;
            for (q, v) in [
                ("0.5", l.p50),
                ("0.95", l.p95),
                ("0.99", l.p99),
                ("0.999", l.p999),
                ("1", l.max),
            ] {
                o.sample(
                    "mailbench_io_latency_seconds",
                    &[("class", k), ("quantile", q)],
                    v / 1000.0,
                );
            }
            o.sample(
                "mailbench_io_latency_seconds_sum",
                &[("class", k)],
                s.latency_sum_s.get(k).copied().unwrap_or(0.0),
            );
            o.sample(
                "mailbench_io_latency_seconds_count",
                &[("class", k)],
                s.ops_total.get(k).copied().unwrap_or(0) as f64,
            );
        }
        o.family(
            "mailbench_io_latency_avg_seconds",
            "gauge",
            "Average I/O latency per class (latest interval).",
        );
        for (k, c) in &p.classes {
            o.sample(
                "mailbench_io_latency_avg_seconds",
                &[("class", k)],
                c.latency_ms.avg / 1000.0,
            );
        }
        o.family(
            "mailbench_io_operations_total",
            "counter",
            "Operations per I/O class since the load started.",
        );
        for (k, v) in &s.ops_total {
            o.sample("mailbench_io_operations_total", &[("class", k)], *v as f64);
        }
        o.family(
            "mailbench_io_class_errors_total",
            "counter",
            "I/O errors per class in reported intervals.",
        );
        for (k, c) in &p.classes {
            o.sample(
                "mailbench_io_class_errors_total",
                &[("class", k)],
                c.errors as f64,
            );
        }
        let tl = &p.transaction_latency_ms;
        o.family(
            "mailbench_transaction_latency_seconds",
            "gauge",
            "Transaction response time from intended start (latest interval).",
        );
        for (q, v) in [("avg", tl.avg), ("p99", tl.p99), ("max", tl.max)] {
            o.sample(
                "mailbench_transaction_latency_seconds",
                &[("stat", q)],
                v / 1000.0,
            );
        }
    }
    if openmetrics {
        o.o.push_str("# EOF\n");
    }
    o.o
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailbench_storage::stats::{ClassFigures, LatencyMs};

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
}
