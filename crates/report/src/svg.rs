//! A small SVG chart module: line charts (linear or logarithmic y, time or
//! "nines" percentile x), grouped vertical bars and horizontal bars, with axes,
//! units, legends and threshold lines. Output is inline SVG text: no scripts,
//! no fonts or images to fetch.

use std::fmt::Write;

/// Width and height of every chart's coordinate system (it scales to its box).
pub const W: f64 = 640.0;
pub const H: f64 = 300.0;
const FONT: f64 = 12.0;
const CHAR_W: f64 = 6.6;

pub const RED: &str = "#c62828";
pub const GREY: &str = "#57606a";

/// Escapes text for HTML and SVG (the redaction layer's escaper: one home).
pub use mailbench_base::secrets::html_escaped as esc;

/// One line of a line chart.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub color: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

impl Line {
    pub fn new(name: &str, color: &str, points: Vec<(f64, f64)>) -> Line {
        Line {
            name: name.to_string(),
            color: color.to_string(),
            points,
            dashed: false,
        }
    }
    pub fn dashed(mut self) -> Line {
        self.dashed = true;
        self
    }
}

/// A horizontal reference line (a threshold or a target).
#[derive(Debug, Clone)]
pub struct HLine {
    pub label: String,
    pub value: f64,
    pub color: String,
}

/// A shaded x range (e.g. the warm-up).
#[derive(Debug, Clone)]
pub struct Band {
    pub label: String,
    pub x0: f64,
    pub x1: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum XAxis {
    /// Plain numbers (e.g. seconds).
    Linear,
    /// Percentiles on a "nines" scale: x = -log10(1 - p/100).
    Nines,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum YScale {
    Linear,
    Log,
    /// Linear when the reference lines are near the data, else logarithmic
    /// (so a 20 ms limit and 0.3 ms latencies are both readable).
    Auto,
}

#[derive(Debug, Clone)]
pub struct LineChart {
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_axis: XAxis,
    pub y_scale: YScale,
    pub lines: Vec<Line>,
    pub hlines: Vec<HLine>,
    pub bands: Vec<Band>,
    /// Fixed top of a linear y axis (e.g. 100 for percentages).
    pub y_max: Option<f64>,
}

impl LineChart {
    pub fn new(id: &str, title: &str, x_label: &str, y_label: &str) -> LineChart {
        LineChart {
            id: id.into(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_axis: XAxis::Linear,
            y_scale: YScale::Linear,
            lines: Vec::new(),
            hlines: Vec::new(),
            bands: Vec::new(),
            y_max: None,
        }
    }
}

/// The plot rectangle inside the chart (after legend rows).
struct Frame {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
}

/// A "nice" tick step (1, 2 or 5 times a power of ten) for about `n` ticks.
pub fn nice_step(range: f64, n: usize) -> f64 {
    if !(range.is_finite() && range > 0.0) {
        return 1.0;
    }
    let raw = range / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f < 1.5 {
        1.0
    } else if f < 3.0 {
        2.0
    } else if f < 7.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// A number for an axis label: no needless decimals, k/M for large values.
pub fn tick_label(v: f64, step: f64) -> String {
    let a = v.abs();
    if a >= 1e6 && step >= 1e5 {
        return trim(format!("{:.1}", v / 1e6)) + "M";
    }
    if a >= 1e4 && step >= 1e3 {
        return trim(format!("{:.1}", v / 1e3)) + "k";
    }
    let dec = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    trim(format!("{v:.dec$}"))
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn f(v: f64) -> String {
    format!("{v:.1}")
}

/// Legend rows above the plot; returns the SVG and the height used.
fn legend(items: &[(String, String, bool)], x0: f64, y0: f64, width: f64) -> (String, f64) {
    let mut o = String::new();
    let mut x = x0;
    let mut y = y0;
    let row = 16.0;
    if items.is_empty() {
        return (o, 0.0);
    }
    let _ = write!(o, r#"<g class="legend" font-size="{FONT}">"#);
    for (name, color, dashed) in items {
        let w = 22.0 + name.chars().count() as f64 * CHAR_W + 14.0;
        if x + w > x0 + width && x > x0 {
            x = x0;
            y += row;
        }
        let dash = if *dashed {
            r#" stroke-dasharray="5 3""#
        } else {
            ""
        };
        let _ = write!(
            o,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="2.5"{dash}/><text x="{}" y="{}" fill="{GREY}">{}</text>"#,
            f(x),
            f(y - 4.0),
            f(x + 18.0),
            f(y - 4.0),
            esc(color),
            f(x + 22.0),
            f(y),
            esc(name)
        );
        x += w;
    }
    o.push_str("</g>");
    (o, y - y0 + row)
}

fn head(id: &str, title: &str) -> String {
    format!(
        r##"<svg class="chart" id="{}" viewBox="0 0 {W} {H}" role="img" aria-label="{}" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"><title>{}</title><rect class="bg" x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/><text x="12" y="20" font-size="14" font-weight="600" fill="#1f2328">{}</text>"##,
        esc(id),
        esc(title),
        esc(title),
        esc(title)
    )
}

fn no_data(o: &mut String, fr: &Frame) {
    let _ = write!(
        o,
        r##"<rect class="plot empty" x="{}" y="{}" width="{}" height="{}" fill="#f6f8fa" stroke="#d0d7de"/><text x="{}" y="{}" text-anchor="middle" font-size="13" fill="{GREY}">no data</text>"##,
        f(fr.x),
        f(fr.y),
        f(fr.w),
        f(fr.h),
        f(fr.x + fr.w / 2.0),
        f(fr.y + fr.h / 2.0)
    );
}

/// y axis mapping.
struct YMap {
    log: bool,
    lo: f64,
    hi: f64,
}

impl YMap {
    fn t(&self, v: f64) -> f64 {
        if self.log {
            let v = v.max(self.lo);
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }
    /// Ticks as (value, label).
    fn ticks(&self) -> Vec<(f64, String)> {
        if self.log {
            let mut out = Vec::new();
            let d0 = self.lo.log10().floor() as i32;
            let d1 = self.hi.log10().ceil() as i32;
            let decades = (d1 - d0).max(1);
            let mults: &[f64] = if decades <= 2 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            for d in d0..=d1 {
                for m in mults {
                    let v = m * 10f64.powi(d);
                    if v >= self.lo * 0.999 && v <= self.hi * 1.001 {
                        out.push((v, tick_label(v, v)));
                    }
                }
            }
            out
        } else {
            let step = nice_step(self.hi - self.lo, 5);
            let mut out = Vec::new();
            let mut v = (self.lo / step).ceil() * step;
            while v <= self.hi + step * 1e-6 {
                out.push((v, tick_label(v, step)));
                v += step;
            }
            out
        }
    }
}

fn y_range(values: &[f64], refs: &[f64], scale: YScale) -> YMap {
    let dmax = values.iter().cloned().fold(0.0f64, f64::max);
    let rmax = refs.iter().cloned().fold(0.0f64, f64::max);
    let log = match scale {
        YScale::Linear => false,
        YScale::Log => true,
        YScale::Auto => rmax > 0.0 && dmax > 0.0 && rmax > 4.0 * dmax,
    };
    if log {
        let pos = values
            .iter()
            .chain(refs.iter())
            .cloned()
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        let lo_v = if pos.is_finite() { pos } else { 0.001 };
        let hi_v = dmax.max(rmax).max(lo_v * 10.0);
        let lo = 10f64.powf(lo_v.log10().floor());
        let hi = 10f64.powf((hi_v * 1.05).log10().ceil());
        YMap { log, lo, hi }
    } else {
        let top = dmax.max(rmax);
        let top = if top > 0.0 { top * 1.08 } else { 1.0 };
        let step = nice_step(top, 5);
        YMap {
            log,
            lo: 0.0,
            hi: (top / step).ceil() * step,
        }
    }
}

/// Dashed reference lines with labels that do not overlap: a label close to
/// an earlier one moves to the left end, then to the middle.
fn thresholds(hl: &[HLine], fr: &Frame, py: &dyn Fn(f64) -> f64) -> String {
    let mut o = String::new();
    let mut placed: Vec<(f64, u8)> = Vec::new();
    for h in hl {
        let y = py(h.value);
        let slot = (0u8..3)
            .find(|s| {
                !placed
                    .iter()
                    .any(|(py, ps)| ps == s && (py - y).abs() < 13.0)
            })
            .unwrap_or(0);
        placed.push((y, slot));
        let (x, anchor) = match slot {
            0 => (fr.x + fr.w - 4.0, "end"),
            1 => (fr.x + 4.0, "start"),
            _ => (fr.x + fr.w / 2.0, "middle"),
        };
        // Above the line, unless that leaves the plot.
        let ty = if y - 4.0 < fr.y + 10.0 {
            y + 12.0
        } else {
            y - 4.0
        };
        let _ = write!(
            o,
            r##"<g class="threshold"><line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{}" y="{}" text-anchor="{anchor}" font-size="11" fill="{}" paint-order="stroke" stroke="#ffffff" stroke-width="3">{}</text></g>"##,
            f(fr.x),
            f(fr.x + fr.w),
            f(y),
            f(y),
            esc(&h.color),
            f(x),
            f(ty),
            esc(&h.color),
            esc(&h.label)
        );
    }
    o
}

fn nines(p: f64) -> f64 {
    let q = (1.0 - p / 100.0).max(1e-6);
    -q.log10()
}

/// The legend and the plot frame under it, for charts of the standard size.
fn legend_and_frame(o: &mut String, items: &[(String, String, bool)], bottom: f64) -> Frame {
    let (leg, leg_h) = legend(items, 60.0, 42.0, W - 80.0);
    o.push_str(&leg);
    let top = 30.0 + leg_h + 8.0;
    Frame {
        x: 62.0,
        y: top,
        w: W - 62.0 - 18.0,
        h: H - top - bottom,
    }
}

/// Legend items: the series (solid unless dashed), then the dashed reference lines.
fn legend_items<'a>(
    series: impl Iterator<Item = (&'a String, &'a String, bool)>,
    hlines: &[HLine],
) -> Vec<(String, String, bool)> {
    series
        .map(|(n, c, d)| (n.clone(), c.clone(), d))
        .chain(
            hlines
                .iter()
                .map(|h| (h.label.clone(), h.color.clone(), true)),
        )
        .collect()
}

/// The white plot rectangle.
fn plot_rect(o: &mut String, fr: &Frame) {
    let _ = write!(
        o,
        r##"<rect class="plot" x="{}" y="{}" width="{}" height="{}" fill="#ffffff" stroke="#d0d7de"/>"##,
        f(fr.x),
        f(fr.y),
        f(fr.w),
        f(fr.h)
    );
}

/// Horizontal grid lines with the y tick labels at the left.
fn y_grid(o: &mut String, ym: &YMap, fr: &Frame, py: &dyn Fn(f64) -> f64) {
    for (v, lab) in ym.ticks() {
        let y = py(v);
        let _ = write!(
            o,
            r##"<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#eaeef2"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            f(fr.x),
            f(fr.x + fr.w),
            f(y),
            f(y),
            f(fr.x - 6.0),
            f(y + 4.0),
            esc(&lab)
        );
    }
}

/// Vertical grid lines with labels under the plot, at positions `x`.
fn x_grid(o: &mut String, ticks: &[(f64, String)], fr: &Frame, x: &dyn Fn(f64) -> f64) {
    for (v, lab) in ticks {
        let x = x(*v);
        let _ = write!(
            o,
            r##"<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#eaeef2"/><text x="{}" y="{}" text-anchor="middle">{}</text>"##,
            f(x),
            f(x),
            f(fr.y),
            f(fr.y + fr.h),
            f(x),
            f(fr.y + fr.h + 15.0),
            esc(lab)
        );
    }
}

/// The rotated y axis title, marked when the scale is logarithmic.
fn y_title(o: &mut String, fr: &Frame, label: &str, log: bool) {
    let _ = write!(
        o,
        r##"<text transform="translate(16 {}) rotate(-90)" text-anchor="middle" font-size="12" fill="#1f2328">{}</text>"##,
        f(fr.y + fr.h / 2.0),
        esc(&format!(
            "{}{}",
            label,
            if log { " (log scale)" } else { "" }
        ))
    );
}

/// An axis title centred under the plot at height `y`.
fn x_title(o: &mut String, fr: &Frame, y: f64, label: &str) {
    let _ = write!(
        o,
        r##"<text x="{}" y="{}" text-anchor="middle" font-size="12" fill="#1f2328">{}</text>"##,
        f(fr.x + fr.w / 2.0),
        f(y),
        esc(label)
    );
}

/// The x range and ticks of a line chart.
struct XScale {
    lo: f64,
    hi: f64,
    ticks: Vec<(f64, String)>,
}

impl XScale {
    fn new(axis: XAxis, xs: &[f64]) -> XScale {
        match axis {
            XAxis::Linear => {
                let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min).min(0.0);
                let hi = xs
                    .iter()
                    .cloned()
                    .fold(f64::NEG_INFINITY, f64::max)
                    .max(lo + 1e-9);
                let step = nice_step(hi - lo, 8);
                let mut ticks = Vec::new();
                let mut v = (lo / step).ceil() * step;
                while v <= hi + step * 1e-6 {
                    ticks.push((v, tick_label(v, step)));
                    v += step;
                }
                XScale { lo, hi, ticks }
            }
            XAxis::Nines => {
                let hi_p = xs.iter().cloned().fold(0.0f64, f64::max);
                let hi = nines(hi_p).clamp(2.0, 6.0).ceil();
                let labels = ["0", "90", "99", "99.9", "99.99", "99.999", "99.9999"];
                let mut ticks: Vec<(f64, String)> = (0..=hi as usize)
                    .map(|i| (i as f64, labels.get(i).unwrap_or(&"").to_string()))
                    .collect();
                ticks.insert(1, (nines(50.0), "50".into()));
                XScale { lo: 0.0, hi, ticks }
            }
        }
    }

    /// Where an axis value (after the axis transform) falls in the frame.
    fn at(&self, fr: &Frame, v: f64) -> f64 {
        fr.x + (v - self.lo) / (self.hi - self.lo).max(1e-12) * fr.w
    }
}

/// Shaded x ranges (warm-up, shutdown), labelled where the label fits.
fn bands(o: &mut String, bands: &[Band], fr: &Frame, px: &dyn Fn(f64) -> f64) {
    for b in bands {
        let x0 = px(b.x0).clamp(fr.x, fr.x + fr.w);
        let x1 = px(b.x1).clamp(fr.x, fr.x + fr.w);
        if x1 > x0 + 1.0 {
            let _ = write!(
                o,
                r##"<rect class="band" x="{}" y="{}" width="{}" height="{}" fill="#eaeef2"/><text x="{}" y="{}" font-size="11" fill="{GREY}">{}</text>"##,
                f(x0),
                f(fr.y),
                f(x1 - x0),
                f(fr.h),
                f(x0 + 4.0),
                f(fr.y + 13.0),
                // A label only where it fits.
                if (x1 - x0) > b.label.chars().count() as f64 * 6.0 + 8.0 {
                    esc(&b.label)
                } else {
                    String::new()
                }
            );
        }
    }
}

/// One line as a path, with point markers when it has few points.
fn series(o: &mut String, l: &Line, px: &dyn Fn(f64) -> f64, py: &dyn Fn(f64) -> f64) {
    let pts: Vec<(f64, f64)> = l
        .points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .map(|(x, y)| (px(*x), py(*y)))
        .collect();
    if pts.is_empty() {
        return;
    }
    let mut d = String::new();
    for (i, (x, y)) in pts.iter().enumerate() {
        let _ = write!(d, "{}{} {}", if i == 0 { "M" } else { " L" }, f(*x), f(*y));
    }
    let dash = if l.dashed {
        r#" stroke-dasharray="5 3""#
    } else {
        ""
    };
    let _ = write!(
        o,
        r#"<g class="series" data-name="{}"><path d="{d}" fill="none" stroke="{}" stroke-width="2" stroke-linejoin="round"{dash}/>"#,
        esc(&l.name),
        esc(&l.color)
    );
    if pts.len() <= 40 {
        for (x, y) in &pts {
            let _ = write!(
                o,
                r#"<circle cx="{}" cy="{}" r="2.5" fill="{}"/>"#,
                f(*x),
                f(*y),
                esc(&l.color)
            );
        }
    }
    o.push_str("</g>");
}

/// The finite values of the lines' points, x (first) or y.
fn finite(lines: &[Line], pick: fn(&(f64, f64)) -> f64) -> Vec<f64> {
    lines
        .iter()
        .flat_map(|l| l.points.iter().map(pick))
        .filter(|v| v.is_finite())
        .collect()
}

/// Renders a line chart.
pub fn line_chart(c: &LineChart) -> String {
    let mut o = head(&c.id, &c.title);
    let items = legend_items(
        c.lines.iter().map(|l| (&l.name, &l.color, l.dashed)),
        &c.hlines,
    );
    let fr = legend_and_frame(&mut o, &items, 46.0);
    let xs = finite(&c.lines, |p| p.0);
    let ys = finite(&c.lines, |p| p.1);
    if xs.is_empty() {
        no_data(&mut o, &fr);
        o.push_str("</svg>");
        return o;
    }
    let tx = |x: f64| -> f64 {
        match c.x_axis {
            XAxis::Linear => x,
            XAxis::Nines => nines(x),
        }
    };
    let xsc = XScale::new(c.x_axis, &xs);
    let refs: Vec<f64> = c.hlines.iter().map(|h| h.value).collect();
    let mut ym = y_range(&ys, &refs, c.y_scale);
    if let Some(top) = c.y_max
        && !ym.log
    {
        ym.hi = top.max(ym.lo + 1e-9);
    }
    let px = |x: f64| xsc.at(&fr, tx(x));
    let py = |y: f64| fr.y + fr.h - ym.t(y).clamp(0.0, 1.0) * fr.h;
    plot_rect(&mut o, &fr);
    bands(&mut o, &c.bands, &fr, &px);
    o.push_str(r##"<g class="axis" font-size="11" fill="#57606a">"##);
    y_grid(&mut o, &ym, &fr, &py);
    x_grid(&mut o, &xsc.ticks, &fr, &|v| xsc.at(&fr, v));
    o.push_str("</g>");
    x_title(&mut o, &fr, H - 10.0, &c.x_label);
    y_title(&mut o, &fr, &c.y_label, ym.log);
    o.push_str(&thresholds(&c.hlines, &fr, &py));
    for l in &c.lines {
        series(&mut o, l, &px, &py);
    }
    o.push_str("</svg>");
    o
}

/// One group of bars (one colour) over the categories.
#[derive(Debug, Clone)]
pub struct Bars {
    pub name: String,
    pub color: String,
    pub values: Vec<f64>,
}

#[derive(Debug, Clone)]
pub struct BarChart {
    pub id: String,
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    pub groups: Vec<Bars>,
    pub hlines: Vec<HLine>,
    pub y_scale: YScale,
}

/// The category labels under the bars, shortened with an ellipsis to their slot.
fn category_labels(o: &mut String, categories: &[String], fr: &Frame, slot: f64) {
    let max_chars = ((slot / CHAR_W) as usize).max(3);
    for (i, cat) in categories.iter().enumerate() {
        let cx = fr.x + slot * (i as f64 + 0.5);
        let label: String = if cat.chars().count() > max_chars {
            cat.chars().take(max_chars - 1).collect::<String>() + "…"
        } else {
            cat.clone()
        };
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" text-anchor="middle"><title>{}</title>{}</text>"#,
            f(cx),
            f(fr.y + fr.h + 15.0),
            esc(cat),
            esc(&label)
        );
    }
}

/// Every group's bars, side by side within each category's slot.
fn bar_groups(o: &mut String, c: &BarChart, fr: &Frame, py: &dyn Fn(f64) -> f64) {
    let slot = fr.w / c.categories.len() as f64;
    let ng = c.groups.len().max(1) as f64;
    let bar_w = (slot * 0.8 / ng).min(48.0);
    let base = fr.y + fr.h;
    for (gi, g) in c.groups.iter().enumerate() {
        let _ = write!(
            o,
            r#"<g class="series bars" data-name="{}" fill="{}">"#,
            esc(&g.name),
            esc(&g.color)
        );
        for (i, v) in g.values.iter().enumerate().take(c.categories.len()) {
            if !v.is_finite() {
                continue;
            }
            let x = fr.x + slot * (i as f64 + 0.5) - bar_w * ng / 2.0 + bar_w * gi as f64;
            let y = py(*v);
            let h = (base - y).max(if *v > 0.0 { 1.0 } else { 0.0 });
            let _ = write!(
                o,
                r#"<rect x="{}" y="{}" width="{}" height="{}"><title>{}: {}</title></rect>"#,
                f(x + 1.0),
                f(base - h),
                f((bar_w - 2.0).max(1.0)),
                f(h),
                esc(&format!("{} {}", c.categories[i], g.name)),
                esc(&crate::fmt::num(*v))
            );
        }
        o.push_str("</g>");
    }
}

/// Grouped vertical bars (e.g. per instance).
pub fn bar_chart(c: &BarChart) -> String {
    let mut o = head(&c.id, &c.title);
    let items = legend_items(
        c.groups.iter().map(|g| (&g.name, &g.color, false)),
        &c.hlines,
    );
    let fr = legend_and_frame(&mut o, &items, 40.0);
    let vals: Vec<f64> = c
        .groups
        .iter()
        .flat_map(|g| g.values.iter().cloned())
        .filter(|v| v.is_finite())
        .collect();
    if c.categories.is_empty() || !vals.iter().any(|v| *v > 0.0) {
        no_data(&mut o, &fr);
        o.push_str("</svg>");
        return o;
    }
    let refs: Vec<f64> = c.hlines.iter().map(|h| h.value).collect();
    let ym = y_range(&vals, &refs, c.y_scale);
    let py = |y: f64| fr.y + fr.h - ym.t(y).clamp(0.0, 1.0) * fr.h;
    plot_rect(&mut o, &fr);
    o.push_str(r##"<g class="axis" font-size="11" fill="#57606a">"##);
    y_grid(&mut o, &ym, &fr, &py);
    category_labels(&mut o, &c.categories, &fr, fr.w / c.categories.len() as f64);
    o.push_str("</g>");
    y_title(&mut o, &fr, &c.y_label, ym.log);
    bar_groups(&mut o, c, &fr, &py);
    o.push_str(&thresholds(&c.hlines, &fr, &py));
    o.push_str("</svg>");
    o
}

/// Horizontal bars, one row per label, with an optional vertical limit line.
/// Bars beyond the limit are drawn in `over_color`.
pub struct HBarChart {
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub rows: Vec<(String, f64)>,
    pub color: String,
    pub over_color: String,
    pub limit: Option<(f64, String)>,
}

const HBAR_ROW: f64 = 18.0;

/// The SVG head of a horizontal bar chart, as tall as its rows need.
fn hbar_head(c: &HBarChart) -> String {
    let height = (40.0 + HBAR_ROW * c.rows.len().max(3) as f64 + 44.0).max(H);
    format!(
        r##"<svg class="chart" id="{}" viewBox="0 0 {W} {}" role="img" aria-label="{}" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"><title>{}</title><rect class="bg" x="0" y="0" width="{W}" height="{}" fill="#ffffff"/><text x="12" y="20" font-size="14" font-weight="600" fill="#1f2328">{}</text>"##,
        esc(&c.id),
        f(height),
        esc(&c.title),
        esc(&c.title),
        f(height),
        esc(&c.title)
    )
}

/// The plot frame right of the row labels.
fn hbar_frame(c: &HBarChart) -> Frame {
    let label_w = c
        .rows
        .iter()
        .map(|r| r.0.chars().count())
        .max()
        .unwrap_or(4) as f64
        * CHAR_W
        + 16.0;
    Frame {
        x: label_w.clamp(60.0, 220.0),
        y: 40.0,
        w: W - label_w.clamp(60.0, 220.0) - 24.0,
        h: HBAR_ROW * c.rows.len().max(3) as f64,
    }
}

/// One bar per row, drawn in `over_color` beyond the limit.
fn hbar_rows(o: &mut String, c: &HBarChart, fr: &Frame, px: &dyn Fn(f64) -> f64) {
    o.push_str(r#"<g class="series bars" data-name="values">"#);
    for (i, (lab, v)) in c.rows.iter().enumerate() {
        let over = c.limit.as_ref().is_some_and(|l| *v > l.0);
        let w = (px(*v) - fr.x).max(if *v > 0.0 { 1.0 } else { 0.0 });
        let _ = write!(
            o,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}: {}</title></rect>"#,
            f(fr.x),
            f(fr.y + HBAR_ROW * i as f64 + 3.0),
            f(w),
            f(HBAR_ROW - 6.0),
            esc(if over { &c.over_color } else { &c.color }),
            esc(lab),
            esc(&crate::fmt::num(*v))
        );
    }
    o.push_str("</g>");
}

/// The vertical limit line with its label above the plot.
fn hbar_limit(o: &mut String, fr: &Frame, x: f64, label: &str) {
    let _ = write!(
        o,
        r#"<g class="threshold"><line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{RED}" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{}" y="{}" text-anchor="end" font-size="11" fill="{RED}">{}</text></g>"#,
        f(x),
        f(x),
        f(fr.y - 4.0),
        f(fr.y + fr.h),
        f(x - 4.0),
        f(fr.y - 6.0),
        esc(label)
    );
}

pub fn hbar_chart(c: &HBarChart) -> String {
    let mut o = hbar_head(c);
    let fr = hbar_frame(c);
    if c.rows.is_empty() {
        no_data(&mut o, &fr);
        o.push_str("</svg>");
        return o;
    }
    let vals: Vec<f64> = c.rows.iter().map(|r| r.1).collect();
    let refs: Vec<f64> = c.limit.iter().map(|l| l.0).collect();
    let ym = y_range(&vals, &refs, YScale::Linear);
    let px = |v: f64| fr.x + ym.t(v).clamp(0.0, 1.0) * fr.w;
    plot_rect(&mut o, &fr);
    o.push_str(r##"<g class="axis" font-size="11" fill="#57606a">"##);
    let ticks = ym.ticks();
    x_grid(&mut o, &ticks, &fr, &px);
    for (i, (lab, _)) in c.rows.iter().enumerate() {
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            f(fr.x - 6.0),
            f(fr.y + HBAR_ROW * (i as f64 + 0.5) + 4.0),
            esc(lab)
        );
    }
    o.push_str("</g>");
    x_title(&mut o, &fr, fr.y + fr.h + 34.0, &c.x_label);
    hbar_rows(&mut o, c, &fr, &px);
    if let Some((v, lab)) = &c.limit {
        hbar_limit(&mut o, &fr, px(*v), lab);
    }
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(10.0, 5), 2.0);
        assert_eq!(nice_step(100.0, 5), 20.0);
        assert_eq!(nice_step(7.0, 5), 1.0);
        assert_eq!(nice_step(0.0, 5), 1.0);
        assert_eq!(tick_label(20000.0, 5000.0), "20k");
        assert_eq!(tick_label(0.25, 0.05), "0.25");
        assert_eq!(tick_label(3.0, 1.0), "3");
    }

    #[test]
    fn line_chart_has_paths_axes_and_thresholds() {
        let mut c = LineChart::new("t", "Latency <x>", "elapsed (s)", "ms");
        c.y_scale = YScale::Auto;
        c.lines.push(Line::new(
            "avg",
            "#1f77b4",
            vec![(0.0, 0.4), (10.0, 0.5), (20.0, 0.45)],
        ));
        c.hlines.push(HLine {
            label: "limit 20 ms".into(),
            value: 20.0,
            color: RED.into(),
        });
        let s = line_chart(&c);
        assert!(s.contains("Latency &lt;x&gt;"));
        assert!(s.contains(r#"class="series""#));
        assert!(s.contains("limit 20 ms"));
        assert!(s.contains("(log scale)"), "20 ms vs 0.5 ms goes log");
        assert!(!s.contains("NaN") && !s.contains("inf"));
        let empty = line_chart(&LineChart::new("e", "E", "x", "y"));
        assert!(empty.contains("no data"));
    }

    #[test]
    fn bars_and_hbars() {
        let s = bar_chart(&BarChart {
            id: "b".into(),
            title: "B".into(),
            y_label: "IOPS".into(),
            categories: vec!["DB01".into(), "DB02".into()],
            groups: vec![Bars {
                name: "reads".into(),
                color: "#000".into(),
                values: vec![10.0, 20.0],
            }],
            hlines: vec![],
            y_scale: YScale::Linear,
        });
        assert_eq!(s.matches("<rect x=").count(), 2);
        let h = hbar_chart(&HBarChart {
            id: "h".into(),
            title: "H".into(),
            x_label: "ms".into(),
            rows: vec![("Send".into(), 300.0), ("Read".into(), 1500.0)],
            color: "#1f77b4".into(),
            over_color: RED.into(),
            limit: Some((1000.0, "1000 ms".into())),
        });
        assert!(h.contains(RED) && h.contains("Send"));
    }
}
