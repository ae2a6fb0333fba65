//! Live progress of `storage run`: how the run reports its phases and each
//! interval's figures ([`LiveFigures`], from the result model).

pub use mailbench_results::live::LiveFigures;

/// How the run reports its progress.
pub trait Progress {
    fn phase(&mut self, text: &str);
    fn interval(&mut self, p: &LiveFigures);
}

/// Progress lines on stderr: one compact line per interval (or nothing, `-q`).
pub struct LineProgress {
    pub quiet: bool,
}

impl Progress for LineProgress {
    fn phase(&mut self, text: &str) {
        if !self.quiet {
            eprintln!("mailbench: {text}");
        }
    }
    fn interval(&mut self, p: &LiveFigures) {
        if !self.quiet {
            eprintln!("{}", p.progress_line(None));
        }
    }
}
