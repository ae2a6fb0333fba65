//! The storage report's charts: IOPS and latency over time, percentile curves,
//! per-database and per-host bars, host CPU and memory.

use super::*;

/// One measured interval: CPU busy, I/O wait, memory used, stalls/s, IOPS.
pub(super) type Sample = (f64, f64, f64, f64, f64);

/// Time series computed from intervals.jsonl.
#[derive(Default)]
pub(super) struct Series {
    t: Vec<f64>,
    ops: BTreeMap<&'static str, Vec<f64>>,
    trans: Vec<f64>,
    avg: BTreeMap<&'static str, Vec<f64>>,
    p99: BTreeMap<&'static str, Vec<f64>>,
    cpu: Vec<f64>,
    iowait: Vec<f64>,
    mem: Vec<f64>,
    /// Measured-window interval values for min/avg/max tables.
    pub(super) measured: Vec<Sample>,
    shutdown_from: Option<f64>,
}

pub(super) fn series(d: &StorageDoc) -> Series {
    let mut s = Series::default();
    // Shutdown intervals (short, after the window) are left out of the charts.
    for rec in d.intervals.iter().filter(|r| r.phase != "shutdown") {
        let mut sum = Stats::default();
        for i in &rec.instances {
            sum.add(i);
        }
        let secs = rec.seconds.max(1e-3);
        s.t.push(rec.end_s);
        for (idx, name) in CLASS_ORDER.iter().enumerate() {
            let c = &sum.classes[idx];
            s.ops.entry(name).or_default().push(c.ops as f64 / secs);
            let sm = c.latency.summary();
            s.avg.entry(name).or_default().push(sm.mean_us / 1000.0);
            s.p99
                .entry(name)
                .or_default()
                .push(sm.p99_us as f64 / 1000.0);
        }
        let trans = sum.transactional_ios() as f64 / secs;
        s.trans.push(trans);
        s.cpu.push(rec.cpu_busy_pct);
        s.iowait.push(rec.cpu_iowait_pct);
        s.mem.push(rec.memory_used_pct);
        if rec.phase == "measured" {
            s.measured.push((
                rec.cpu_busy_pct,
                rec.cpu_iowait_pct,
                rec.memory_used_pct,
                sum.counters.page_fault_stalls as f64 / secs,
                trans,
            ));
        }
        if rec.phase == "shutdown" && s.shutdown_from.is_none() {
            s.shutdown_from = Some(rec.end_s - rec.seconds);
        }
    }
    s
}

pub(super) fn pts(t: &[f64], v: &[f64], div: f64) -> Vec<(f64, f64)> {
    t.iter().zip(v.iter()).map(|(a, b)| (a / div, *b)).collect()
}

pub(super) fn storage_charts(d: &StorageDoc, s: &Series) -> Vec<Figure> {
    let r = &d.result;
    let max_t = s.t.iter().cloned().fold(0.0, f64::max);
    let ax = time_axis(max_t);
    let mut bands = vec![Band {
        label: "warm-up".into(),
        x0: 0.0,
        x1: r.window.warmup_s / ax.div,
    }];
    if let Some(sd) = s.shutdown_from {
        bands.push(Band {
            label: "shutdown".into(),
            x0: sd / ax.div,
            x1: max_t / ax.div,
        });
    }
    let mut o = Vec::new();

    charts_iops_and_latency(d, s, &ax, &bands, &mut o);
    charts_percentiles_and_instances(d, &mut o);
    charts_per_host(d, &mut o);
    charts_host(s, &ax, &bands, &mut o);
    o
}

/// IOPS by class, then read and write latency over time with the thresholds.
pub(super) fn charts_iops_and_latency(
    d: &StorageDoc,
    s: &Series,
    ax: &TimeAxis,
    bands: &[Band],
    o: &mut Vec<Figure>,
) {
    let r = &d.result;
    let th = &r.spec.thresholds;
    // 1. Transactional IOPS by class.
    let mut c = LineChart::new(
        "chart-iops",
        "Transactional IOPS over time",
        ax.label,
        "I/O per second",
    );
    c.y_scale = YScale::Auto;
    c.bands = bands.to_vec();
    c.lines.push(Line::new(
        "transactional (reads + writes)",
        "#1f2328",
        pts(&s.t, &s.trans, ax.div),
    ));
    for n in ["db_read", "db_write"] {
        if let Some(v) = s.ops.get(n) {
            c.lines.push(Line::new(
                &format!("{}s", class_title(n)),
                class_color(n),
                pts(&s.t, v, ax.div),
            ));
        }
    }
    if let Some(t) = r.total.target_iops {
        c.hlines.push(HLine {
            label: format!("target {}", num(t)),
            value: t,
            color: RED.into(),
        });
    }
    o.push(figure(
        svg::line_chart(&c),
        "Database reads and writes per second caused by transactions, per sampling interval; grey: warm-up and shutdown (not measured).",
    ));

    // 2-3. Latency over time with thresholds.
    for (n, id, avg_lim, max_lim) in [
        (
            "db_read",
            "chart-db-read-latency",
            th.db_read_avg_ms,
            th.db_read_max_ms,
        ),
        (
            "log_write",
            "chart-log-write-latency",
            th.log_write_avg_ms,
            th.log_write_max_ms,
        ),
    ] {
        let title = format!("{} latency over time", capitalize(class_title(n)));
        let mut c = LineChart::new(id, &title, ax.label, "latency (ms)");
        c.y_scale = YScale::Auto;
        c.bands = bands.to_vec();
        if let (Some(a), Some(p)) = (s.avg.get(n), s.p99.get(n)) {
            c.lines
                .push(Line::new("average", class_color(n), pts(&s.t, a, ax.div)));
            c.lines
                .push(Line::new("p99", class_color(n), pts(&s.t, p, ax.div)).dashed());
        }
        c.hlines.push(HLine {
            label: format!("average limit {} ms", short(avg_lim)),
            value: avg_lim,
            color: RED.into(),
        });
        c.hlines.push(HLine {
            label: format!("max limit {} ms", short(max_lim)),
            value: max_lim,
            color: "#82071e".into(),
        });
        o.push(figure(
            svg::line_chart(&c),
            &format!(
                "Average and 99th percentile of each interval; the verdict limits the average over the measured window and the slowest single {}.",
                class_title(n)
            ),
        ));
    }
}

/// Percentile curves and per-instance IOPS and latency bars.
pub(super) fn charts_percentiles_and_instances(d: &StorageDoc, o: &mut Vec<Figure>) {
    chart_percentiles(d, o);
    chart_instance_iops(d, o);
    chart_instance_latency(d, o);
}

/// The value of one class's figure for every instance (0 where it has none).
pub(super) fn per_instance(d: &StorageDoc, n: &str, f: &dyn Fn(&ClassFigures) -> f64) -> Vec<f64> {
    d.result
        .instances
        .iter()
        .map(|i| i.classes.get(n).map(f).unwrap_or(0.0))
        .collect()
}

/// Percentile curves of every I/O class over the measured window.
pub(super) fn chart_percentiles(d: &StorageDoc, o: &mut Vec<Figure>) {
    let r = &d.result;
    let mut c = LineChart::new(
        "chart-percentiles",
        "Latency percentiles by I/O class (measured window)",
        "percentile",
        "latency (ms)",
    );
    c.x_axis = XAxis::Nines;
    c.y_scale = YScale::Log;
    for n in CLASS_ORDER.iter().chain(["transaction"].iter()) {
        if let Some(h) = r.total.histograms.get(*n)
            && !h.is_empty()
        {
            let mut l = Line::new(class_title(n), class_color(n), curve_ms(h));
            if *n == "transaction" {
                l = l.dashed();
            }
            c.lines.push(l);
        }
    }
    o.push(figure(
        svg::line_chart(&c),
        "From the merged HDR histograms of the measured window (1 µs resolution, 0.1 % precision); the x axis spreads the tail (90, 99, 99.9 ...).",
    ));
}

/// Transactional reads, writes and log writes per second, per database.
pub(super) fn chart_instance_iops(d: &StorageDoc, o: &mut Vec<Figure>) {
    let cats: Vec<String> = d.result.instances.iter().map(|i| i.name.clone()).collect();
    let col = |n: &str, f: &dyn Fn(&ClassFigures) -> f64| per_instance(d, n, f);
    o.push(figure(
        svg::bar_chart(&BarChart {
            id: "chart-instance-iops".into(),
            title: "Transactional IOPS per database".into(),
            y_label: "I/O per second".into(),
            categories: cats,
            groups: vec![
                Bars {
                    name: "database reads/s".into(),
                    color: class_color("db_read").into(),
                    values: col("db_read", &|c| c.ops_per_s),
                },
                Bars {
                    name: "database writes/s".into(),
                    color: class_color("db_write").into(),
                    values: col("db_write", &|c| c.ops_per_s),
                },
                Bars {
                    name: "log writes/s".into(),
                    color: class_color("log_write").into(),
                    values: col("log_write", &|c| c.ops_per_s),
                },
            ],
            hlines: vec![],
            y_scale: YScale::Linear,
        }),
        "Measured-window averages per database instance.",
    ));
}

/// Read and log write latency (average and p99) per database, against the limits.
pub(super) fn chart_instance_latency(d: &StorageDoc, o: &mut Vec<Figure>) {
    let th = &d.result.spec.thresholds;
    let cats: Vec<String> = d.result.instances.iter().map(|i| i.name.clone()).collect();
    let col = |n: &str, f: &dyn Fn(&ClassFigures) -> f64| per_instance(d, n, f);
    o.push(figure(
        svg::bar_chart(&BarChart {
            id: "chart-instance-latency".into(),
            title: "Latency per database".into(),
            y_label: "latency (ms)".into(),
            categories: cats,
            groups: vec![
                Bars {
                    name: "db read avg".into(),
                    color: class_color("db_read").into(),
                    values: col("db_read", &|c| c.latency_ms.avg),
                },
                Bars {
                    name: "db read p99".into(),
                    color: "#79a8f0".into(),
                    values: col("db_read", &|c| c.latency_ms.p99),
                },
                Bars {
                    name: "log write avg".into(),
                    color: class_color("log_write").into(),
                    values: col("log_write", &|c| c.latency_ms.avg),
                },
                Bars {
                    name: "log write p99".into(),
                    color: "#7cc98f".into(),
                    values: col("log_write", &|c| c.latency_ms.p99),
                },
            ],
            hlines: vec![
                HLine {
                    label: format!("db read avg limit {} ms", short(th.db_read_avg_ms)),
                    value: th.db_read_avg_ms,
                    color: RED.into(),
                },
                HLine {
                    label: format!("log write avg limit {} ms", short(th.log_write_avg_ms)),
                    value: th.log_write_avg_ms,
                    color: "#82071e".into(),
                },
            ],
            y_scale: YScale::Auto,
        }),
        "Average and 99th percentile per database over the measured window, against the average limits.",
    ));
}

/// Per-host bars of a merged result.
pub(super) fn charts_per_host(d: &StorageDoc, o: &mut Vec<Figure>) {
    // Per-host bars for merged results.
    if let Some(m) = &d.result.merged {
        o.push(figure(
            svg::bar_chart(&BarChart {
                id: "chart-host-iops".into(),
                title: "Transactional IOPS per host".into(),
                y_label: "I/O per second".into(),
                categories: m.hosts.iter().map(|h| h.label.clone()).collect(),
                groups: vec![
                    Bars {
                        name: "achieved".into(),
                        color: "#1f2328".into(),
                        values: m.hosts.iter().map(|h| h.total.transactional_iops).collect(),
                    },
                    Bars {
                        name: "target".into(),
                        color: "#afb8c1".into(),
                        values: m
                            .hosts
                            .iter()
                            .map(|h| h.total.target_iops.unwrap_or(f64::NAN))
                            .collect(),
                    },
                ],
                hlines: vec![],
                y_scale: YScale::Linear,
            }),
            "Each host's own transactional IOPS; the aggregate is their sum.",
        ));
    }
}

/// The host's CPU and memory over time.
pub(super) fn charts_host(s: &Series, ax: &TimeAxis, bands: &[Band], o: &mut Vec<Figure>) {
    // 6. Host CPU and memory.
    let mut c = LineChart::new(
        "chart-host",
        "Host CPU and memory over time",
        ax.label,
        "percent",
    );
    c.bands = bands.to_vec();
    c.y_max = Some(100.0);
    c.lines.push(Line::new(
        "CPU busy %",
        "#cf222e",
        pts(&s.t, &s.cpu, ax.div),
    ));
    c.lines
        .push(Line::new("CPU I/O wait %", "#bf8700", pts(&s.t, &s.iowait, ax.div)).dashed());
    c.lines.push(Line::new(
        "memory used %",
        "#0969da",
        pts(&s.t, &s.mem, ax.div),
    ));
    o.push(figure(
        svg::line_chart(&c),
        "Whole-host CPU (busy, and waiting for I/O) and memory in use, per interval.",
    ));
}
