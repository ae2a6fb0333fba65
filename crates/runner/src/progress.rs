//! Live progress while a storage run lasts: a status line redrawn in place on
//! a terminal by `indicatif` (phase, elapsed/remaining, IOPS vs target, latency vs limits, a
//! running verdict, errors), one compact line per interval otherwise, nothing
//! with `-q`. `FanOut` forwards to several `Progress` (e.g. the terminal and
//! the metrics endpoint).

use console::{Term, style};
use indicatif::{ProgressBar, ProgressState, ProgressStyle};
use mailbench_storage::run::{LineProgress, LiveFigures, Progress};
use std::fmt;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Forwards every call to each part in order.
#[derive(Default)]
pub struct FanOut<'a> {
    pub parts: Vec<Box<dyn Progress + 'a>>,
}

impl<'a> FanOut<'a> {
    pub fn push(&mut self, p: Box<dyn Progress + 'a>) {
        self.parts.push(p);
    }
}

impl Progress for FanOut<'_> {
    fn phase(&mut self, text: &str) {
        for p in &mut self.parts {
            p.phase(text);
        }
    }
    fn interval(&mut self, f: &LiveFigures) {
        for p in &mut self.parts {
            p.interval(f);
        }
    }
}

/// The progress for the terminal: in-place status line when stderr is a
/// terminal, one line per interval when it is not, nothing when `quiet`.
pub fn terminal(quiet: bool) -> Box<dyn Progress> {
    if !quiet
        && std::io::stderr().is_terminal()
        && std::env::var_os("TERM").is_some_and(|t| t != "dumb")
        && let Some(tty) = TtyProgress::start()
    {
        return Box::new(tty);
    }
    Box::new(LineProgress { quiet })
}

struct TtyState {
    started: Instant,
    phase: String,
    last: Option<(LiveFigures, Instant)>,
}

/// A status line redrawn in place twice a second by `indicatif` (the spinner,
/// the redraw and the lines printed above it); the figures are ours
/// ([`status_line`]).
pub struct TtyProgress {
    state: Arc<Mutex<TtyState>>,
    bar: ProgressBar,
}

impl TtyProgress {
    /// `None` when the terminal line cannot be set up (then the caller falls
    /// back to one line per interval).
    pub fn start() -> Option<TtyProgress> {
        let state = Arc::new(Mutex::new(TtyState {
            started: Instant::now(),
            phase: "starting".into(),
            last: None,
        }));
        let st = state.clone();
        let draw = move |_: &ProgressState, w: &mut dyn fmt::Write| {
            if let Ok(s) = st.lock() {
                let _ = w.write_str(&figures(&s));
            }
        };
        let style = ProgressStyle::with_template("{spinner} {figures}")
            .ok()?
            .tick_strings(&["|", "/", "-", "\\", " "])
            .with_key("figures", draw);
        let bar = ProgressBar::new_spinner().with_style(style);
        bar.enable_steady_tick(Duration::from_millis(500));
        Some(TtyProgress { state, bar })
    }
}

fn clock(s: f64) -> String {
    let t = s.max(0.0).round() as u64;
    if t >= 3600 {
        format!("{}:{:02}:{:02}", t / 3600, (t % 3600) / 60, t % 60)
    } else {
        format!("{:02}:{:02}", t / 60, t % 60)
    }
}

/// The status line without colour codes, and the verdict word.
pub fn status_line(
    phase: &str,
    live: Option<&LiveFigures>,
    since: f64,
    tick: usize,
) -> (String, String) {
    const SPIN: [char; 4] = ['|', '/', '-', '\\'];
    let spin = SPIN[tick % SPIN.len()];
    let (line, verdict) = figures_line(phase, live, since);
    (format!("{spin} {line}"), verdict)
}

/// The status line after the spinner, and the verdict word.
fn figures_line(phase: &str, live: Option<&LiveFigures>, since: f64) -> (String, String) {
    let Some(p) = live else {
        return (phase.to_string(), String::new());
    };
    let elapsed = p.elapsed_s + since;
    let remaining = (p.remaining_s - since).max(0.0);
    let total = (elapsed + remaining).max(1e-9);
    let filled = ((elapsed / total) * 20.0).round().clamp(0.0, 20.0) as usize;
    let bar = format!("{}{}", "#".repeat(filled), ".".repeat(20 - filled));
    let target = p
        .target_iops
        .map(|t| format!("/{t:.0}"))
        .unwrap_or_default();
    let verdict = if p.passing { "passing" } else { "FAILING" };
    (
        format!(
            "{verdict} {:<8} {} [{bar}] {} left | IOPS {:.0}{target} | db read {:.2} ms (<= {:.0}) | log write {:.2} ms (<= {:.0}) | errors {}",
            p.phase,
            clock(elapsed),
            clock(remaining),
            p.transactional_iops,
            p.db_read_avg_ms,
            p.db_read_limit_ms,
            p.log_write_avg_ms,
            p.log_write_limit_ms,
            p.errors
        ),
        verdict.to_string(),
    )
}

/// The figures as drawn now: the clock moves on between intervals, the line
/// fits the terminal, the verdict is coloured (unless `NO_COLOR`).
fn figures(s: &TtyState) -> String {
    let (line, verdict) = match &s.last {
        Some((f, at)) => figures_line(&s.phase, Some(f), at.elapsed().as_secs_f64()),
        None => {
            let (l, v) = figures_line(&s.phase, None, 0.0);
            (
                format!("{l} ({})", clock(s.started.elapsed().as_secs_f64())),
                v,
            )
        }
    };
    let width = usize::from(Term::stderr().size().1).clamp(40, 400);
    let line: String = line.chars().take(width - 3).collect();
    if verdict.is_empty() {
        return line;
    }
    let styled = style(&verdict).for_stderr();
    let styled = if verdict == "passing" {
        styled.green()
    } else {
        styled.red().bold()
    };
    line.replacen(&verdict, &styled.to_string(), 1)
}

impl Progress for TtyProgress {
    fn phase(&mut self, text: &str) {
        if let Ok(mut s) = self.state.lock() {
            // After the load (verification, stopping) the phase text replaces
            // the figures line; during it, messages just scroll above.
            if s.last.is_none() || text.starts_with("verifying") || text.starts_with("interrupted")
            {
                s.phase = text.to_string();
                s.last = None;
            }
        }
        // Drawing reads the state: its lock is released first.
        self.bar.println(format!("mailbench: {text}"));
    }
    fn interval(&mut self, p: &LiveFigures) {
        if let Ok(mut s) = self.state.lock() {
            s.phase = p.phase.clone();
            s.last = Some((p.clone(), Instant::now()));
        }
        self.bar.tick();
    }
}

impl Drop for TtyProgress {
    fn drop(&mut self) {
        // Leave the last figures on screen.
        let figures = self.state.lock().is_ok_and(|s| s.last.is_some());
        if figures {
            self.bar.abandon();
        } else {
            self.bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(Arc<Mutex<(usize, usize)>>);
    impl Progress for Count {
        fn phase(&mut self, _: &str) {
            if let Ok(mut g) = self.0.lock() {
                g.0 += 1;
            }
        }
        fn interval(&mut self, _: &LiveFigures) {
            if let Ok(mut g) = self.0.lock() {
                g.1 += 1;
            }
        }
    }

    #[test]
    fn fan_out_forwards_to_all() {
        let a = Arc::new(Mutex::new((0, 0)));
        let b = Arc::new(Mutex::new((0, 0)));
        let mut f = FanOut::default();
        f.push(Box::new(Count(a.clone())));
        f.push(Box::new(Count(b.clone())));
        f.phase("x");
        f.interval(&LiveFigures::default());
        f.interval(&LiveFigures::default());
        assert_eq!(*a.lock().unwrap(), (1, 2));
        assert_eq!(*b.lock().unwrap(), (1, 2));
    }

    #[test]
    fn status_line_shows_figures() {
        let f = LiveFigures {
            phase: "measured".into(),
            elapsed_s: 30.0,
            remaining_s: 30.0,
            transactional_iops: 1234.0,
            target_iops: Some(1000.0),
            db_read_avg_ms: 1.5,
            log_write_avg_ms: 0.5,
            db_read_limit_ms: 20.0,
            log_write_limit_ms: 10.0,
            errors: 0,
            passing: true,
            ..Default::default()
        };
        let (l, v) = status_line("x", Some(&f), 0.0, 0);
        assert_eq!(v, "passing");
        assert!(l.contains("00:30 [##########..........] 00:30 left"), "{l}");
        assert!(l.contains("IOPS 1234/1000"), "{l}");
        assert!(l.contains("db read 1.50 ms (<= 20)"), "{l}");
    }
}
