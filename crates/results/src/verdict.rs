//! The verdict and the common head of every result.json, shared by storage and
//! mail results so reports, merge and compare read both the same way.

use mailbench_base::ExitStatus;
use mailbench_base::host::HostInfo;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Version of the result.json schema (docs/result-schema.md). Bump on any
/// incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    /// The run could not complete (I/O error outside the measured workload, server
    /// unreachable); partial figures are kept.
    Error,
    /// Stopped by Ctrl-C / SIGTERM; partial figures are kept.
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    pub status: Status,
    /// One plain sentence per failed criterion (empty when passed).
    pub reasons: Vec<String>,
}

impl Verdict {
    pub fn from_reasons(reasons: Vec<String>) -> Verdict {
        let status = if reasons.is_empty() {
            Status::Pass
        } else {
            Status::Fail
        };
        Verdict { status, reasons }
    }

    /// Fail with `failures` stated first (ahead of the verdict's own
    /// reasons); unchanged when there are none.
    pub fn with_failures_first(self, failures: &[String]) -> Verdict {
        if failures.is_empty() {
            return self;
        }
        let mut reasons = failures.to_vec();
        reasons.extend(self.reasons);
        Verdict {
            status: Status::Fail,
            reasons,
        }
    }

    pub fn exit_status(&self) -> ExitStatus {
        match self.status {
            Status::Pass => ExitStatus::Pass,
            Status::Fail => ExitStatus::Fail,
            Status::Error => ExitStatus::Runtime,
            Status::Interrupted => ExitStatus::Interrupted,
        }
    }

    pub fn label(&self) -> &'static str {
        match self.status {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Error => "ERROR",
            Status::Interrupted => "INTERRUPTED",
        }
    }
}

/// The identity of a run, first in every result.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunHeader {
    pub schema_version: u32,
    /// `storage-run`, `storage-init`, `storage-verify`, `mail-run`, ...
    pub kind: String,
    pub tool: String,
    pub tool_version: String,
    pub command_line: Vec<String>,
    pub host: HostInfo,
    /// RFC 3339 UTC.
    pub started: String,
    pub ended: String,
    pub duration_s: f64,
    /// What was tested on this host (storage commands): the `[disclosure]`
    /// section and the facts detected for the paths the command used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disclosure: Option<Box<crate::disclosure::Disclosure>>,
    /// Why test.log is incomplete: the first of its lines that could not be
    /// written (e.g. the volume was full) and the error; absent when every line
    /// was written. The run's figures do not depend on test.log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_write_error: Option<String>,
}

impl RunHeader {
    pub fn begin(kind: &str) -> RunHeader {
        RunHeader {
            schema_version: SCHEMA_VERSION,
            kind: kind.to_string(),
            tool: "mailbench".into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            command_line: std::env::args().collect(),
            host: HostInfo::collect(),
            started: mailbench_base::host::now_rfc3339(),
            ended: String::new(),
            duration_s: 0.0,
            disclosure: None,
            log_write_error: None,
        }
    }

    /// A header with nothing measured: the kind and version only (for
    /// results of older files that had none).
    pub fn empty(kind: &str) -> RunHeader {
        RunHeader {
            schema_version: SCHEMA_VERSION,
            kind: kind.to_string(),
            tool: "mailbench".into(),
            tool_version: String::new(),
            command_line: Vec::new(),
            host: HostInfo::default(),
            started: String::new(),
            ended: String::new(),
            duration_s: 0.0,
            disclosure: None,
            log_write_error: None,
        }
    }

    pub fn finish(&mut self, elapsed: std::time::Duration) {
        self.ended = mailbench_base::host::now_rfc3339();
        self.duration_s = elapsed.as_secs_f64();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_come_first_and_fail_the_verdict() {
        let pass = Verdict::from_reasons(Vec::new());
        assert_eq!(pass.clone().with_failures_first(&[]), pass);
        let v = Verdict::from_reasons(vec!["slow".into()])
            .with_failures_first(&["rank 1 on host b stopped".into()]);
        assert_eq!(v.status, Status::Fail);
        assert_eq!(v.reasons, vec!["rank 1 on host b stopped", "slow"]);
        let v = pass.with_failures_first(&["rank 2 failed".into()]);
        assert_eq!((v.status, v.reasons.len()), (Status::Fail, 1));
    }
}
