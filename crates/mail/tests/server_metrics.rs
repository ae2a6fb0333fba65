//! The server-metrics scraper against a real `prometheus-node-exporter` that the
//! test starts on loopback, beside this host's /proc read directly: both read the
//! same kernel counters, so over the same window they must agree; endpoints that
//! do not answer, answer too much, or are closed are warnings, and the scraper
//! keeps reading the others.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mailbench_base::rundir::TestLog;
use mailbench_mail::servermetrics::{HttpTls, Scraper, Source, agent, fetch};
use mailbench_metrics::server::StoreDevices;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NODE_EXPORTER: &str = "/usr/bin/prometheus-node-exporter";

/// A node exporter on 127.0.0.1, stopped by PID when dropped.
struct NodeExporter {
    child: Child,
    url: String,
}

impl Drop for NodeExporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn node_exporter() -> Option<NodeExporter> {
    if !std::path::Path::new(NODE_EXPORTER).exists() {
        if std::env::var_os("CI").is_some() {
            panic!("CI must install prometheus-node-exporter (scripts/packages/mail.txt)");
        }
        eprintln!("SKIPPED: prometheus-node-exporter is not installed");
        return None;
    }
    let port = mailbench_mail::local::free_ports(1).unwrap()[0];
    let child = Command::new(NODE_EXPORTER)
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ne = NodeExporter {
        child,
        url: format!("http://127.0.0.1:{port}/metrics"),
    };
    let a = agent(Duration::from_secs(2), &HttpTls::default());
    let deadline = Instant::now() + Duration::from_secs(20);
    while fetch(&a, &ne.url, 1 << 24).is_err() {
        assert!(Instant::now() < deadline, "node exporter did not answer");
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(ne)
}

/// A listener that accepts and never answers (bounded by the test's life).
fn silent_listener() -> (String, TcpListener) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/metrics", l.local_addr().unwrap());
    (url, l)
}

/// An HTTP server answering every request with `size` bytes of a valid series.
fn oversized_server(size: usize) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/metrics", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for _ in 0..4 {
            let Ok((mut c, _)) = l.accept() else { return };
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let line = "node_load1 1\n";
            let body = line.repeat(size / line.len() + 1);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = c.write_all(head.as_bytes());
            let _ = c.write_all(body.as_bytes());
        }
    });
    url
}

#[test]
fn node_exporter_and_proc_agree_and_bad_endpoints_are_warnings() {
    let Some(ne) = node_exporter() else { return };
    let dir = tempfile::tempdir().unwrap();
    let device = mailbench_metrics::system::device_of(dir.path()).map(|d| d.2);
    let (silent_url, _silent) = silent_listener();
    let closed_url = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/metrics", l.local_addr().unwrap())
    };
    let sources = vec![
        Source::Url(ne.url.clone()),
        Source::Url(silent_url.clone()),
        Source::Url(closed_url.clone()),
        Source::Proc(device.clone().into_iter().collect()),
    ];
    let t0 = Instant::now();
    let scraper = Scraper::start(
        sources,
        Duration::from_millis(500),
        &HttpTls::default(),
        t0,
        t0 + Duration::from_secs(60),
        TestLog::discard(),
    )
    .unwrap();
    // Durable 4 KiB writes on the temp folder's device while the scraper reads.
    const WRITES: u64 = 150;
    let mut f = std::fs::File::create(dir.path().join("w")).unwrap();
    for _ in 0..WRITES {
        f.write_all(&[7u8; 4096]).unwrap();
        f.sync_data().unwrap();
    }
    std::thread::sleep(Duration::from_secs(3));
    let series = scraper.stop();
    let stopped = t0.elapsed().as_secs_f64();
    assert!(stopped < 30.0, "the scraper stopped late: {stopped:.1} s");

    let by = |u: &str| series.sources.iter().find(|s| s.source == u).unwrap();
    let node = by(&ne.url);
    assert_eq!(node.failures, 0, "{:?}", node.error);
    assert!(node.samples.len() >= 4, "{} readings", node.samples.len());
    assert_eq!(node.kinds, vec!["node-exporter"]);
    for bad in [&silent_url, &closed_url] {
        let s = by(bad);
        assert!(s.samples.is_empty());
        assert_eq!(s.failures, s.scrapes);
        assert!(s.error.is_some());
    }
    assert!(
        by(&silent_url)
            .error
            .as_deref()
            .unwrap()
            .contains("scrape timeout"),
        "{:?}",
        by(&silent_url).error
    );
    assert_eq!(series.warnings.len(), 2, "{:?}", series.warnings);

    let store = match &device {
        Some(d) => StoreDevices::Named(vec![d.clone()]),
        None => StoreDevices::WholeDisks,
    };
    let section = series.section(0.0, stopped + 1.0, &store, 50);
    let fig = |name: &str| {
        let s = section.sources.iter().find(|s| s.source == name).unwrap();
        s.figures.clone().unwrap().host.unwrap()
    };
    let (n, p) = (fig(&ne.url), fig("/proc (local target)"));
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(n.cores, cores);
    assert_eq!(p.cores, cores);
    assert!(
        (n.cpu_busy_pct - p.cpu_busy_pct).abs() < 15.0,
        "node exporter {:.1} % vs /proc {:.1} %",
        n.cpu_busy_pct,
        p.cpu_busy_pct
    );
    if device.is_some() {
        let secs = |h: &mailbench_metrics::server::HostFigures| {
            h.store.as_ref().unwrap().rates.writes_per_s
        };
        let node_secs = section.sources[0].figures.as_ref().unwrap().seconds;
        let writes = secs(&n) * node_secs;
        assert!(
            writes >= WRITES as f64,
            "{writes:.0} writes seen, {WRITES} made"
        );
        assert!(section.per_mailbox.unwrap().iops_per_mailbox > 0.0);
    }
}

#[test]
fn an_answer_over_the_cap_is_an_error_not_a_hang() {
    let url = oversized_server(64 * 1024);
    let a = agent(Duration::from_secs(5), &HttpTls::default());
    let e = fetch(&a, &url, 1000).unwrap_err();
    assert!(e.contains("larger than 1000 bytes"), "{e}");
    let ok = fetch(&a, &url, 1 << 20).unwrap();
    assert!(ok.len() > 64 * 1024);
}
