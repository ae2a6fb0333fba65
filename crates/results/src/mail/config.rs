//! The options of a mail run as its result echoes them (`config`): every
//! option with its default applied. The mail crate resolves and checks them
//! from the flags and the `[mail]` section (`mailbench_mail::options`).

use crate::mail::judge::Criteria;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// What to do on a plain-text URL (`imap://`, `smtp://`, `sieve://`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StartTls {
    /// Upgrade when the server offers STARTTLS.
    #[default]
    Auto,
    /// Upgrade, and fail when the server does not offer STARTTLS.
    Require,
    /// Never upgrade.
    Never,
}

impl StartTls {
    pub fn name(self) -> &'static str {
        match self {
            StartTls::Auto => "auto",
            StartTls::Require => "require",
            StartTls::Never => "never",
        }
    }
}

impl std::str::FromStr for StartTls {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<StartTls, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(StartTls::Auto),
            "require" | "required" => Ok(StartTls::Require),
            "never" | "no" => Ok(StartTls::Never),
            _ => Err(format!(
                "`{s}`: write auto (upgrade when offered), require or never"
            )),
        }
    }
}

/// Options with defaults applied and checked.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct MailConfig {
    pub target: String,
    pub imap: Option<String>,
    pub submission: Option<String>,
    pub sieve: Option<String>,
    /// JMAP server of a remote target (`--jmap`; absent in older results).
    #[serde(default)]
    pub jmap: Option<String>,
    /// Share of the users, in %, on JMAP (`--protocol`, `--protocol-mix`);
    /// the others on IMAP (absent in older results: all IMAP).
    #[serde(default)]
    pub jmap_pct: u32,
    pub users: usize,
    pub first_user: usize,
    pub user_format: String,
    /// The users' login names (`--login-format`, `{n}` the user number);
    /// None: a user logs in with its address (absent in older results).
    #[serde(default)]
    pub login_format: Option<String>,
    pub users_file: Option<PathBuf>,
    pub password_file: Option<PathBuf>,
    /// Distribution lists of a remote server (`list member member ...` lines).
    pub lists_file: Option<PathBuf>,
    /// Folder of per-user IMAP traffic logs (credentials redacted).
    pub trace_imap: Option<PathBuf>,
    pub profile: String,
    pub local_dir: Option<PathBuf>,
    /// The local target's IMAP server: `dovecot` or `cyrus` (`--server`;
    /// absent in older results, which ran Dovecot).
    #[serde(default = "default_server")]
    pub server: String,
    /// Where the local Cyrus's binaries are (`--cyrus-root`: a folder the
    /// Debian packages were unpacked into, or `/` when they are installed).
    #[serde(default)]
    pub cyrus_root: Option<PathBuf>,
    pub seed: u64,
    #[serde(with = "mailbench_base::units::serde_duration")]
    #[schemars(with = "String")]
    pub op_timeout: Duration,
    pub concurrency: usize,
    /// STARTTLS policy on plain-text URLs.
    pub starttls: StartTls,
    /// Extra trusted CA certificates (PEM), besides the system's.
    pub ca_file: Option<PathBuf>,
    /// Certificates are NOT verified.
    pub tls_insecure: bool,
    /// Passwords may cross a non-loopback connection in plain text.
    pub allow_cleartext_auth: bool,
    #[serde(with = "mailbench_base::units::serde_duration")]
    #[schemars(with = "String")]
    pub day_length: Duration,
    #[serde(with = "mailbench_base::units::serde_duration")]
    #[schemars(with = "String")]
    pub ramp_up: Duration,
    #[serde(with = "mailbench_base::units::serde_duration")]
    #[schemars(with = "String")]
    pub drain: Duration,
    #[serde(with = "mailbench_base::units::serde_duration")]
    #[schemars(with = "String")]
    pub interval: Duration,
    pub max_error_rate_pct: f64,
    pub max_score_ms: f64,
    #[serde(with = "mailbench_base::units::serde_duration")]
    #[schemars(with = "String")]
    pub delivery_within: Duration,
    pub delivery_pct: f64,
    pub skip_setup: bool,
    pub idle: bool,
    #[serde(with = "mailbench_base::units::serde_duration")]
    #[schemars(with = "String")]
    pub poll_interval: Duration,
    /// Prometheus endpoints on the server host scraped for the server's own
    /// figures (`--server-metrics`; absent in older results).
    #[serde(default)]
    pub server_metrics: Vec<String>,
    /// The store volume's devices on the server host as the node exporter
    /// names them (`--server-disk`; empty: every whole disk).
    #[serde(default)]
    pub server_disk: Vec<String>,
    /// The measured steady window, FROM-TO as shares of the day (`25%-75%`)
    /// or simulated times (`2h-6h`) (`--steady`; absent in older results).
    #[serde(default = "default_steady")]
    pub steady: String,
}

/// The local target's default server.
pub fn default_server() -> String {
    "dovecot".into()
}

/// Whether the user of index `idx` (from 0) is on JMAP when `pct` % of the
/// users are: spread evenly, `pct` of every 100 by index, the same users on
/// every run.
pub fn jmap_user(pct: u32, idx: usize) -> bool {
    let p = u64::from(pct.min(100));
    let i = idx as u64;
    (i + 1) * p / 100 > i * p / 100
}

/// The middle half of the day.
pub fn default_steady() -> String {
    "25%-75%".into()
}

impl MailConfig {
    /// Whether the user of index `idx` (from 0) reads mail over JMAP.
    pub fn jmap_user(&self, idx: usize) -> bool {
        jmap_user(self.jmap_pct, idx)
    }

    /// The protocols the users read mail over, in words: `imap`, `jmap`,
    /// or the mix (`imap 70 %, jmap 30 %`).
    pub fn protocol_text(&self) -> String {
        match self.jmap_pct.min(100) {
            0 => "imap".into(),
            100 => "jmap".into(),
            p => format!("imap {} %, jmap {p} %", 100 - p),
        }
    }

    /// The verdict's thresholds.
    pub fn criteria(&self) -> Criteria {
        Criteria {
            max_score_ms: self.max_score_ms,
            max_error_rate_pct: self.max_error_rate_pct,
            delivery_pct: self.delivery_pct,
            delivery_within: self.delivery_within,
        }
    }
}
