//! The side channel from every rank to rank 0: one TCP connection per rank
//! carrying JSON lines (hello, a heartbeat every second, each interval's live
//! figures, a failure message, done) and, back from rank 0, `stop`.
//!
//! Rank 0 learns of a failed rank at once when its process dies (the kernel
//! closes the connection), when it reports an error, or when it has sent
//! nothing for the heartbeat timeout (a hung host, a broken network). MPI
//! itself cannot tell: a blocking collective would just wait.

use mailbench_base::interrupt::Interrupt;
use mailbench_base::{Error, Result};
pub use mailbench_results::live::{LiveMsg, MailLive};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum Msg {
    Hello { rank: usize, host: String },
    Heartbeat,
    Interval { live: Box<LiveMsg> },
    Fail { message: String },
    Done,
    Stop { reason: String },
}

/// Where the ranks reach rank 0 (sent to them over the transport).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Endpoint {
    pub port: u16,
    /// Candidate addresses of rank 0, tried in order.
    pub addrs: Vec<String>,
}

/// A rank that failed, in words that name it (the type of the result's
/// `multihost.failures`).
pub use mailbench_results::ranks::RankFailure as Failure;

#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// A rank that sent nothing for this long has failed.
    pub heartbeat_timeout: Duration,
    /// Every rank must connect within this time of rank 0 listening.
    pub connect_timeout: Duration,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            heartbeat_timeout: Duration::from_secs(15),
            connect_timeout: Duration::from_secs(60),
        }
    }
}

/// Called on rank 0 with the failure that just happened and every failure so far.
pub type FailureHook = Box<dyn Fn(&Failure, &[Failure]) + Send>;
/// Called on rank 0 with every rank's figures of one interval (failed
/// ranks left out), once all have arrived.
pub type IntervalHook = Box<dyn FnMut(&[LiveMsg]) + Send>;

struct State {
    hosts: Vec<String>,
    writers: Vec<Option<TcpStream>>,
    last_seen: Vec<Option<Instant>>,
    done: Vec<bool>,
    failures: Vec<Failure>,
    phase: String,
}

struct Shared {
    state: Mutex<State>,
    stop: AtomicBool,
}

/// Rank 0's end: accepts the ranks, watches them, aggregates live figures.
pub struct Coordinator {
    shared: Arc<Shared>,
    tx: Sender<(usize, Option<Msg>)>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn send_line(w: &mut TcpStream, m: &Msg) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(m).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line)
}

impl Coordinator {
    /// Listens (on `listen`, default every address, a free port) and starts
    /// watching. `hosts[r]` names rank r.
    pub fn start(
        hosts: Vec<String>,
        listen: Option<&str>,
        opts: WatchOptions,
        on_failure: FailureHook,
        on_interval: IntervalHook,
    ) -> Result<(Coordinator, Endpoint)> {
        let size = hosts.len();
        let bind = listen.unwrap_or("0.0.0.0:0");
        let listener = TcpListener::bind(bind).map_err(|e| {
            Error::runtime(format!(
                "rank 0 cannot listen on {bind} for the other ranks: {e}"
            ))
        })?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::runtime(format!("listener address: {e}")))?;
        let addrs = if local.ip().is_unspecified() {
            local_ipv4_addrs()
        } else {
            vec![local.ip().to_string()]
        };
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::runtime(format!("listener: {e}")))?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                hosts,
                writers: (0..size).map(|_| None).collect(),
                last_seen: vec![None; size],
                done: vec![false; size],
                failures: Vec::new(),
                phase: "start".into(),
            }),
            stop: AtomicBool::new(false),
        });
        let (tx, rx) = channel::<(usize, Option<Msg>)>();
        let mut threads = Vec::new();
        {
            let shared = shared.clone();
            let tx = tx.clone();
            threads.push(std::thread::spawn(move || {
                accept_loop(listener, shared, tx)
            }));
        }
        {
            let shared = shared.clone();
            threads.push(std::thread::spawn(move || {
                monitor(rx, shared, opts, on_failure, on_interval)
            }));
        }
        // Rank 0 is connected to itself.
        if let Some(l) = lock(&shared.state).last_seen.get_mut(0) {
            *l = Some(Instant::now());
        }
        Ok((
            Coordinator {
                shared,
                tx,
                threads,
            },
            Endpoint {
                port: local.port(),
                addrs,
            },
        ))
    }

    /// Rank 0's own interval figures.
    pub fn local_interval(&self, live: LiveMsg) {
        let _ = self.tx.send((
            0,
            Some(Msg::Interval {
                live: Box::new(live),
            }),
        ));
    }

    pub fn set_phase(&self, phase: &str) {
        lock(&self.shared.state).phase = phase.to_string();
    }

    pub fn failures(&self) -> Vec<Failure> {
        lock(&self.shared.state).failures.clone()
    }

    pub fn failed_ranks(&self) -> Vec<usize> {
        lock(&self.shared.state)
            .failures
            .iter()
            .map(|f| f.rank)
            .collect()
    }

    /// Asks every rank still connected to stop its test now.
    pub fn stop_all(&self, reason: &str) {
        let mut st = lock(&self.shared.state);
        let m = Msg::Stop {
            reason: reason.to_string(),
        };
        for w in st.writers.iter_mut().flatten() {
            let _ = send_line(w, &m);
        }
    }

    /// Rank 0 has all it needs: later disconnects are not failures.
    pub fn finish(mut self) {
        {
            let mut st = lock(&self.shared.state);
            st.done.iter_mut().for_each(|d| *d = true);
        }
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            mailbench_base::thread::join_or_warn(t, "side channel");
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>, tx: Sender<(usize, Option<Msg>)>) {
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let shared = shared.clone();
                let tx = tx.clone();
                std::thread::spawn(move || reader(stream, shared, tx));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn reader(stream: TcpStream, shared: Arc<Shared>, tx: Sender<(usize, Option<Msg>)>) {
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    let _ = stream.set_nodelay(true);
    let Ok(w) = stream.try_clone() else {
        return;
    };
    let mut lines = BufReader::new(stream).lines();
    let rank = match lines.next() {
        Some(Ok(l)) => match serde_json::from_str::<Msg>(&l) {
            Ok(Msg::Hello { rank, .. }) => rank,
            _ => return,
        },
        _ => return,
    };
    {
        let mut st = lock(&shared.state);
        if rank == 0 || rank >= st.writers.len() {
            return;
        }
        st.writers[rank] = Some(w);
        st.last_seen[rank] = Some(Instant::now());
    }
    for l in lines {
        let Ok(l) = l else { break };
        match serde_json::from_str::<Msg>(&l) {
            Ok(m) => {
                if tx.send((rank, Some(m))).is_err() {
                    return;
                }
            }
            Err(_) => continue,
        }
    }
    let _ = tx.send((rank, None));
}

fn monitor(
    rx: Receiver<(usize, Option<Msg>)>,
    shared: Arc<Shared>,
    opts: WatchOptions,
    on_failure: FailureHook,
    mut on_interval: IntervalHook,
) {
    let started = Instant::now();
    let mut pending: BTreeMap<u64, Vec<Option<LiveMsg>>> = BTreeMap::new();
    let fail = |rank: usize, why: String| fail_rank(&shared, &on_failure, rank, why);
    while !shared.stop.load(Ordering::Relaxed) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok((rank, msg)) => {
                if let Some(l) = lock(&shared.state).last_seen.get_mut(rank) {
                    *l = Some(Instant::now());
                }
                match msg {
                    None => fail(
                        rank,
                        "stopped: its process ended or its connection to rank 0 broke".into(),
                    ),
                    Some(Msg::Fail { message }) => fail(rank, format!("failed: {message}")),
                    Some(Msg::Done) => {
                        if let Some(d) = lock(&shared.state).done.get_mut(rank) {
                            *d = true;
                        }
                    }
                    Some(Msg::Interval { live }) => {
                        interval_arrived(&shared, &mut pending, rank, *live, &mut on_interval);
                    }
                    Some(_) => {}
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        for (r, why) in silent_ranks(&shared, &opts, started) {
            fail(r, why);
        }
    }
}

/// Rank `rank` failed (`why`): recorded once (not after it said it was done), every
/// rank told to stop, the failure hook called.
fn fail_rank(shared: &Shared, on_failure: &FailureHook, rank: usize, why: String) {
    let mut st = lock(&shared.state);
    if st.failures.iter().any(|f| f.rank == rank) || st.done.get(rank) == Some(&true) {
        return;
    }
    let host = st.hosts.get(rank).cloned().unwrap_or_default();
    let f = Failure {
        rank,
        host: host.clone(),
        reason: format!("rank {rank} on host {host} {why} (during {})", st.phase),
        at: mailbench_base::host::now_rfc3339(),
    };
    st.failures.push(f.clone());
    let m = Msg::Stop {
        reason: f.reason.clone(),
    };
    for w in st.writers.iter_mut().flatten() {
        let _ = send_line(w, &m);
    }
    let all = st.failures.clone();
    drop(st);
    on_failure(&f, &all);
}

/// One rank's figures of an interval: kept until every rank that has not failed sent
/// that interval, then handed to `on_interval` in order (an interval still incomplete
/// when two later ones are pending is dropped).
fn interval_arrived(
    shared: &Shared,
    pending: &mut BTreeMap<u64, Vec<Option<LiveMsg>>>,
    rank: usize,
    live: LiveMsg,
    on_interval: &mut IntervalHook,
) {
    let (size, failed) = {
        let st = lock(&shared.state);
        let failed: Vec<usize> = st.failures.iter().map(|f| f.rank).collect();
        (st.hosts.len(), failed)
    };
    let e = pending.entry(live.seq).or_insert_with(|| vec![None; size]);
    if let Some(slot) = e.get_mut(rank) {
        *slot = Some(live);
    }
    while let Some((_, parts)) = pending.first_key_value() {
        let complete = parts
            .iter()
            .enumerate()
            .all(|(r, p)| p.is_some() || failed.contains(&r));
        // A later interval complete means earlier ones never will be.
        if !complete && pending.len() < 3 {
            break;
        }
        let Some((_, parts)) = pending.pop_first() else {
            break;
        };
        let parts: Vec<LiveMsg> = parts.into_iter().flatten().collect();
        if complete {
            on_interval(&parts);
        }
    }
}

/// Ranks neither done nor failed that fell silent past the heartbeat timeout, or
/// never connected within the connect timeout, with why.
fn silent_ranks(shared: &Shared, opts: &WatchOptions, started: Instant) -> Vec<(usize, String)> {
    let now = Instant::now();
    let mut late = Vec::new();
    let st = lock(&shared.state);
    for r in 1..st.hosts.len() {
        if st.done[r] || st.failures.iter().any(|f| f.rank == r) {
            continue;
        }
        match st.last_seen[r] {
            Some(t) if now.duration_since(t) > opts.heartbeat_timeout => late.push((
                r,
                format!(
                    "sent nothing for {:.0} s: it hung or its network failed",
                    now.duration_since(t).as_secs_f64()
                ),
            )),
            None if now.duration_since(started) > opts.connect_timeout => late.push((
                r,
                format!(
                    "never connected to rank 0 within {:.0} s",
                    opts.connect_timeout.as_secs_f64()
                ),
            )),
            _ => {}
        }
    }
    late
}

/// A rank's end of the side channel.
pub struct Member {
    writer: Arc<Mutex<TcpStream>>,
    closing: Arc<AtomicBool>,
}

impl Member {
    /// Connects to rank 0 (trying each of its addresses) and starts the
    /// heartbeat. A `stop` from rank 0, or rank 0 going away, raises
    /// `interrupt` so the local test ends at once.
    pub fn connect(ep: &Endpoint, rank: usize, host: &str, interrupt: Interrupt) -> Result<Member> {
        let mut last_err = String::from("no address");
        let mut stream = None;
        let deadline = Instant::now() + Duration::from_secs(30);
        while stream.is_none() && Instant::now() < deadline {
            for a in &ep.addrs {
                let Ok(ip) = a.parse::<IpAddr>() else {
                    continue;
                };
                let sa = SocketAddr::new(ip, ep.port);
                match TcpStream::connect_timeout(&sa, Duration::from_secs(2)) {
                    Ok(s) => {
                        stream = Some(s);
                        break;
                    }
                    Err(e) => last_err = format!("{sa}: {e}"),
                }
            }
            if stream.is_none() {
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        let Some(mut s) = stream else {
            return Err(Error::runtime(format!(
                "rank {rank} cannot reach rank 0 on any of {:?} port {} ({last_err})",
                ep.addrs, ep.port
            )));
        };
        let _ = s.set_nodelay(true);
        send_line(
            &mut s,
            &Msg::Hello {
                rank,
                host: host.to_string(),
            },
        )
        .map_err(|e| Error::runtime(format!("rank {rank}: hello to rank 0: {e}")))?;
        let reader = s
            .try_clone()
            .map_err(|e| Error::runtime(format!("socket: {e}")))?;
        let writer = Arc::new(Mutex::new(s));
        let closing = Arc::new(AtomicBool::new(false));
        {
            let writer = writer.clone();
            let closing = closing.clone();
            std::thread::spawn(move || {
                while !closing.load(Ordering::Relaxed) {
                    if let Ok(mut w) = writer.lock()
                        && send_line(&mut w, &Msg::Heartbeat).is_err()
                    {
                        break;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            });
        }
        {
            let closing = closing.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(reader).lines() {
                    let Ok(l) = l else { break };
                    if let Ok(Msg::Stop { reason }) = serde_json::from_str::<Msg>(&l) {
                        eprintln!("mailbench: rank 0 stops the test: {reason}");
                        interrupt.raise();
                    }
                }
                if !closing.load(Ordering::Relaxed) {
                    eprintln!("mailbench: lost the connection to rank 0: stopping");
                    interrupt.raise();
                }
            });
        }
        Ok(Member { writer, closing })
    }

    fn send(&self, m: &Msg) {
        if let Ok(mut w) = self.writer.lock() {
            let _ = send_line(&mut w, m);
        }
    }

    pub fn interval(&self, live: LiveMsg) {
        self.send(&Msg::Interval {
            live: Box::new(live),
        });
    }

    /// Tells rank 0 this rank failed and why.
    pub fn fail(&self, message: &str) {
        self.send(&Msg::Fail {
            message: message.to_string(),
        });
    }

    /// This rank's part is delivered: closing now is no failure.
    pub fn done(self) {
        self.closing.store(true, Ordering::Relaxed);
        self.send(&Msg::Done);
        if let Ok(w) = self.writer.lock() {
            let _ = w.shutdown(std::net::Shutdown::Write);
        }
    }
}

/// The IPv4 addresses of this host (its network namespace), loopback last;
/// from /proc/net/fib_trie, no system call needed.
pub fn local_ipv4_addrs() -> Vec<String> {
    let mut out: Vec<Ipv4Addr> = Vec::new();
    if let Ok(text) = std::fs::read_to_string("/proc/net/fib_trie") {
        let mut last: Option<Ipv4Addr> = None;
        for line in text.lines() {
            let t = line.trim();
            if let Some(ip) = t.strip_prefix("|-- ") {
                last = ip.trim().parse().ok();
            } else if t.contains("/32 host LOCAL")
                && let Some(ip) = last
                && !out.contains(&ip)
            {
                out.push(ip);
            }
        }
    }
    if let Ok(a) = std::env::var("MAILBENCH_COORDINATOR_ADDR") {
        // An explicit address goes first.
        if let Ok(ip) = a.trim().parse::<Ipv4Addr>() {
            out.retain(|x| *x != ip);
            out.insert(0, ip);
        }
    }
    out.sort_by_key(|ip| ip.is_loopback());
    if out.is_empty() {
        out.push(Ipv4Addr::LOCALHOST);
    }
    out.iter().map(|ip| ip.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailbench_results::live::LiveFigures;
    use mailbench_results::storage::stats::ClassFigures;
    use std::sync::mpsc;

    #[test]
    fn addresses_include_loopback_last() {
        let a = local_ipv4_addrs();
        assert!(!a.is_empty());
        assert!(a.iter().any(|x| x == "127.0.0.1"), "{a:?}");
        assert_eq!(a.last().map(String::as_str), Some("127.0.0.1"));
    }

    #[test]
    fn dead_member_is_named_at_once_and_live_figures_aggregate() {
        let (ftx, frx) = mpsc::channel::<Failure>();
        let (itx, irx) = mpsc::channel::<LiveFigures>();
        let ftx = Mutex::new(ftx);
        let (c, mut ep) = Coordinator::start(
            vec!["h0".into(), "h1".into(), "h2".into(), "h3".into()],
            Some("127.0.0.1:0"),
            WatchOptions::default(),
            Box::new(move |f, _| {
                let _ = ftx.lock().map(|t| t.send(f.clone()));
            }),
            Box::new(move |parts: &[LiveMsg]| {
                let _ = itx.send(LiveMsg::aggregate(parts));
            }),
        )
        .unwrap();
        ep.addrs = vec!["127.0.0.1".into()];
        let i1 = Interrupt::never();
        let m1 = Member::connect(&ep, 1, "h1", i1.clone()).unwrap();
        let m2 = Member::connect(&ep, 2, "h2", Interrupt::never()).unwrap();
        // Rank 3 speaks the protocol by hand so the test can kill its socket.
        let mut raw = TcpStream::connect(("127.0.0.1", ep.port)).unwrap();
        let hello = Msg::Hello {
            rank: 3,
            host: "h3".into(),
        };
        send_line(&mut raw, &hello).unwrap();
        let mut a = LiveMsg {
            figures: LiveFigures {
                transactional_iops: 100.0,
                db_read_avg_ms: 2.0,
                ..Default::default()
            },
            ..Default::default()
        };
        a.figures.classes.insert(
            "db_read".into(),
            ClassFigures {
                ops: 100,
                ..Default::default()
            },
        );
        let mut b = a.clone();
        b.figures.db_read_avg_ms = 5.0;
        b.figures.classes.insert(
            "db_read".into(),
            ClassFigures {
                ops: 200,
                ..Default::default()
            },
        );
        c.local_interval(a.clone());
        m1.interval(a.clone());
        m2.interval(b);
        send_line(
            &mut raw,
            &Msg::Interval {
                live: Box::new(a.clone()),
            },
        )
        .unwrap();
        let agg = irx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(agg.transactional_iops, 400.0);
        // Weighted by db_read operations: (100x2 + 100x2 + 200x5 + 100x2) / 500.
        assert!(
            (agg.db_read_avg_ms - 3.2).abs() < 1e-9,
            "{}",
            agg.db_read_avg_ms
        );
        assert_eq!(agg.classes["db_read"].ops, 500);
        // Rank 2 finishes properly; rank 3's process dies: its socket closes.
        m2.done();
        c.set_phase("run");
        let t = Instant::now();
        drop(raw);
        let f = frx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(f.rank, 3);
        assert!(f.reason.contains("host h3"), "{}", f.reason);
        assert!(f.reason.contains("during run"), "{}", f.reason);
        let t = Instant::now();
        while !i1.raised() {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "rank 1 was not told to stop"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(c.failed_ranks(), vec![3]);
        assert!(
            frx.recv_timeout(Duration::from_millis(300)).is_err(),
            "rank 2 finished cleanly"
        );
        m1.done();
        c.finish();
    }
}
