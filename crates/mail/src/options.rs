//! The options of `mail setup` and `mail run`: the `[mail]` section of the config
//! file and the flags (every flag has a key of the same name; flags win).

use crate::tls::StartTls;
use mailbench_base::{Error, Result, parse_duration, parse_percent};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// A duration written `90s`, `10m`, `8h` (flags) or as text or seconds (TOML).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Dur(#[serde(with = "mailbench_base::units::serde_duration")] pub Duration);

impl std::str::FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Dur, String> {
        parse_duration(s).map(Dur)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Dur, D::Error> {
        mailbench_base::units::serde_duration::deserialize(d).map(Dur)
    }
}

/// A percentage written `1%`, `0.5`, `2`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pct(pub f64);

impl std::str::FromStr for Pct {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Pct, String> {
        parse_percent(s).map(Pct)
    }
}

impl<'de> Deserialize<'de> for Pct {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Pct, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(f64),
            T(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) if n >= 0.0 => Ok(Pct(n)),
            Raw::N(n) => Err(serde::de::Error::custom(format!(
                "percentage {n} is negative"
            ))),
            Raw::T(t) => parse_percent(&t).map(Pct).map_err(serde::de::Error::custom),
        }
    }
}

/// Every option of `mail setup|run`; `None` = not given.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MailOptions {
    pub target: Option<String>,
    pub imap: Option<String>,
    pub submission: Option<String>,
    pub sieve: Option<String>,
    pub users: Option<usize>,
    pub first_user: Option<usize>,
    pub user_format: Option<String>,
    pub users_file: Option<PathBuf>,
    pub password_file: Option<PathBuf>,
    /// Distribution lists of a remote server: `list member member ...` lines.
    pub lists_file: Option<PathBuf>,
    /// Write every user's IMAP traffic (passwords redacted) into this folder.
    pub trace_imap: Option<PathBuf>,
    pub profile: Option<String>,
    pub local_dir: Option<PathBuf>,
    pub seed: Option<u64>,
    pub op_timeout: Option<Dur>,
    pub concurrency: Option<usize>,
    pub starttls: Option<StartTls>,
    pub ca_file: Option<PathBuf>,
    pub tls_insecure: Option<bool>,
    pub allow_cleartext_auth: Option<bool>,
    pub day_length: Option<Dur>,
    pub ramp_up: Option<Dur>,
    pub drain: Option<Dur>,
    pub interval: Option<Dur>,
    pub max_error_rate: Option<Pct>,
    /// The response-time limit (weighted p95 over the steady window), ms;
    /// `max_score_ms` is its older name, still read.
    #[serde(alias = "max_score_ms")]
    pub max_response_time_ms: Option<f64>,
    pub delivery_within: Option<Dur>,
    pub delivery_pct: Option<Pct>,
    pub skip_setup: Option<bool>,
    pub no_idle: Option<bool>,
    pub poll_interval: Option<Dur>,
    /// `mail run`: start the users at this wall-clock time (RFC 3339).
    pub start_at: Option<String>,
    /// Prometheus endpoints on the server host, scraped during the run.
    pub server_metrics: Option<Vec<String>>,
    /// The store volume's block devices on the server host (node exporter names).
    pub server_disk: Option<Vec<String>>,
    /// The measured steady window, FROM-TO (`25%-75%`, `2h-6h`).
    pub steady: Option<String>,
}

macro_rules! overlay {
    ($base:ident, $top:ident, $($f:ident),*) => {
        $( if $top.$f.is_some() { $base.$f = $top.$f; } )*
    };
}

impl MailOptions {
    /// `self` (the file) with every option given in `flags` replaced.
    pub fn overlay(mut self, flags: MailOptions) -> MailOptions {
        let base = &mut self;
        overlay!(
            base,
            flags,
            target,
            imap,
            submission,
            sieve,
            users,
            first_user,
            user_format,
            users_file,
            password_file,
            lists_file,
            trace_imap,
            profile,
            local_dir,
            seed,
            op_timeout,
            concurrency,
            starttls,
            ca_file,
            tls_insecure,
            allow_cleartext_auth,
            day_length,
            ramp_up,
            drain,
            interval,
            max_error_rate,
            max_response_time_ms,
            delivery_within,
            delivery_pct,
            skip_setup,
            no_idle,
            poll_interval,
            start_at,
            server_metrics,
            server_disk,
            steady
        );
        self
    }
}

/// Options with defaults applied and checked: the `config` a mail result
/// echoes (its type lives with the results).
pub use mailbench_results::mail::config::MailConfig as Resolved;

/// Applying defaults to the options and checking them.
pub trait ResolveExt: Sized {
    /// Applies defaults (`profile_day` is the profile's simulated day) and checks.
    fn resolve(o: &MailOptions, profile_day: Duration) -> Result<Self>;
}

impl ResolveExt for Resolved {
    fn resolve(o: &MailOptions, profile_day: Duration) -> Result<Resolved> {
        let target = target_of(o)?;
        let tls_insecure = o.tls_insecure.unwrap_or(false);
        check_tls_options(o, &target, tls_insecure)?;
        let (first_user, users, user_format) = users_of(o)?;
        let day_length = o.day_length.map(|d| d.0).unwrap_or(profile_day);
        let ramp_up = o
            .ramp_up
            .map(|d| d.0)
            .unwrap_or_else(|| (day_length / 10).min(Duration::from_secs(600)));
        let interval = o.interval.map(|d| d.0).unwrap_or_else(|| {
            (day_length / 60).clamp(Duration::from_secs(1), Duration::from_secs(15))
        });
        let op_timeout = o.op_timeout.map(|d| d.0).unwrap_or(Duration::from_secs(30));
        let (server_metrics, server_disk) = server_sources(o)?;
        let delivery_pct = o.delivery_pct.map(|p| p.0).unwrap_or(95.0);
        check_ranges(o)?;
        let steady = o
            .steady
            .clone()
            .unwrap_or_else(mailbench_results::mail::config::default_steady);
        let spec: crate::steady::SteadySpec = steady.parse().map_err(Error::usage)?;
        spec.resolve(ramp_up, day_length, profile_day)?;
        Ok(Resolved {
            target,
            imap: o.imap.clone(),
            submission: o.submission.clone(),
            sieve: o.sieve.clone(),
            users,
            first_user,
            user_format,
            users_file: o.users_file.clone(),
            password_file: o.password_file.clone(),
            lists_file: o.lists_file.clone(),
            trace_imap: o.trace_imap.clone(),
            profile: o.profile.clone().unwrap_or_else(|| "mmb3".into()),
            local_dir: o.local_dir.clone(),
            seed: o.seed.unwrap_or(1),
            op_timeout,
            concurrency: o.concurrency.unwrap_or(16),
            starttls: o.starttls.unwrap_or_default(),
            ca_file: o.ca_file.clone(),
            tls_insecure,
            allow_cleartext_auth: o.allow_cleartext_auth.unwrap_or(false),
            day_length,
            ramp_up,
            drain: o.drain.map(|d| d.0).unwrap_or(Duration::from_secs(120)),
            interval,
            max_error_rate_pct: o.max_error_rate.map(|p| p.0).unwrap_or(0.0),
            max_score_ms: o.max_response_time_ms.unwrap_or(1000.0),
            delivery_within: o
                .delivery_within
                .map(|d| d.0)
                .unwrap_or(Duration::from_secs(60)),
            delivery_pct,
            skip_setup: o.skip_setup.unwrap_or(false),
            idle: !o.no_idle.unwrap_or(false),
            poll_interval: o
                .poll_interval
                .map(|d| d.0)
                .unwrap_or(Duration::from_secs(5)),
            server_metrics,
            server_disk,
            steady,
        })
    }
}

/// The target (`local` or `remote`, from `--target` or the addresses given), with
/// the options that do not fit it refused.
fn target_of(o: &MailOptions) -> Result<String> {
    let remote = o.imap.is_some() || o.submission.is_some();
    let target = match o.target.as_deref() {
        None => if remote { "remote" } else { "local" }.to_string(),
        Some("local") => "local".into(),
        Some("remote") => "remote".into(),
        Some(other) => {
            return Err(Error::usage(format!(
                "--target `{other}`: write `local` (a throwaway Dovecot+Postfix) or `remote` with --imap and --submission URLs"
            )));
        }
    };
    if target == "local" && (remote || o.sieve.is_some()) {
        return Err(Error::usage(
            "--imap/--submission/--sieve address a running server: drop --target local (or write --target remote)",
        ));
    }
    if target == "remote" && (o.imap.is_none() || o.submission.is_none()) {
        return Err(Error::usage(
            "--target remote needs --imap imap://HOST:PORT and --submission smtp://HOST:PORT",
        ));
    }
    if target == "local" && o.users_file.is_some() {
        return Err(Error::usage(
            "--users-file is for remote servers; the local target creates its own users",
        ));
    }
    if target == "local" && o.password_file.is_some() {
        return Err(Error::usage(
            "--password-file is for remote servers; the local target makes its own users and passwords",
        ));
    }
    if target == "local" && o.lists_file.is_some() {
        return Err(Error::usage(
            "--lists-file is for remote servers; the local target defines its own distribution lists",
        ));
    }
    Ok(target)
}

/// TLS options: refused with the local target (plain text on loopback), and
/// `--ca-file` refused with `--tls-insecure`.
fn check_tls_options(o: &MailOptions, target: &str, tls_insecure: bool) -> Result<()> {
    if target == "local" {
        let mut given = Vec::new();
        if o.starttls == Some(StartTls::Require) {
            given.push("--starttls require");
        }
        if o.ca_file.is_some() {
            given.push("--ca-file");
        }
        if tls_insecure {
            given.push("--tls-insecure");
        }
        if o.allow_cleartext_auth == Some(true) {
            given.push("--allow-cleartext-auth");
        }
        if !given.is_empty() {
            return Err(Error::usage(format!(
                "{} are for remote servers; the local target speaks plain text on 127.0.0.1",
                given.join(", ")
            )));
        }
    }
    if tls_insecure && o.ca_file.is_some() {
        return Err(Error::usage(
            "--ca-file has no effect with --tls-insecure (nothing is verified): drop one of them",
        ));
    }
    Ok(())
}

/// The first user's number, how many users (`--users`, or those listed in
/// `--users-file` from the first on) and the address format.
fn users_of(o: &MailOptions) -> Result<(usize, usize, String)> {
    let first_user = o.first_user.unwrap_or(1);
    if first_user == 0 {
        return Err(Error::usage("--first-user counts from 1"));
    }
    let users = match &o.users_file {
        Some(f) => users_in_file(f, first_user, o.users)?,
        None => o.users.unwrap_or(100),
    };
    if users == 0 || users > 100_000 {
        return Err(Error::usage(format!(
            "--users {users}: give 1 to 100000 users"
        )));
    }
    let user_format = o
        .user_format
        .clone()
        .unwrap_or_else(|| format!("user{{n}}@{}", crate::local::LOCAL_DOMAIN));
    if !user_format.contains("{n}") {
        return Err(Error::usage(format!(
            "--user-format `{user_format}` has no {{n}} for the user number; write e.g. user{{n}}@example.org"
        )));
    }
    Ok((first_user, users, user_format))
}

/// `--server-metrics` endpoints and `--server-disk` device names, checked.
fn server_sources(o: &MailOptions) -> Result<(Vec<String>, Vec<String>)> {
    let server_metrics = o.server_metrics.clone().unwrap_or_default();
    for u in &server_metrics {
        crate::servermetrics::check_url(u)?;
    }
    let server_disk = o.server_disk.clone().unwrap_or_default();
    if let Some(bad) = server_disk.iter().find(|d| d.is_empty() || d.contains('/')) {
        return Err(Error::usage(format!(
            "--server-disk `{bad}`: give the kernel's device name as the node exporter reports it (sdb, nvme0n1, dm-2), not a path"
        )));
    }
    Ok((server_metrics, server_disk))
}

/// The range of every duration option (and `--max-response-time-ms`): flag, least
/// and most in milliseconds.
const DURATIONS: [(&str, u64, u64); 8] = [
    ("--day-length", 1_000, 7 * 86_400_000),
    ("--ramp-up", 0, 86_400_000),
    ("--drain", 0, 86_400_000),
    ("--interval", 100, 3_600_000),
    ("--op-timeout", 100, 3_600_000),
    ("--delivery-within", 1_000, 86_400_000),
    ("--poll-interval", 100, 3_600_000),
    ("--max-response-time-ms", 1, 3_600_000),
];

/// Most users' sessions opened at once by `mail setup`.
pub const MAX_CONCURRENCY: usize = 10_000;

/// Every numeric option within its range (`DURATIONS`, percentages 0–100,
/// `--concurrency` 1–`MAX_CONCURRENCY`), checked before anything is
/// written; the error names the flag and the range.
fn check_ranges(o: &MailOptions) -> Result<()> {
    let ms = |d: &Option<Dur>| d.map(|d| d.0.as_millis() as f64);
    let given: [Option<f64>; 8] = [
        ms(&o.day_length),
        ms(&o.ramp_up),
        ms(&o.drain),
        ms(&o.interval),
        ms(&o.op_timeout),
        ms(&o.delivery_within),
        ms(&o.poll_interval),
        o.max_response_time_ms,
    ];
    for ((flag, lo, hi), v) in DURATIONS.iter().zip(given) {
        let Some(v) = v else { continue };
        if !v.is_finite() || v < *lo as f64 || v > *hi as f64 {
            let show = |x: f64| {
                if *flag == "--max-response-time-ms" {
                    format!("{x}")
                } else {
                    Duration::from_millis(x as u64).as_secs_f64().to_string() + "s"
                }
            };
            return Err(Error::usage(format!(
                "{flag} {}: give {} to {}",
                show(v),
                show(*lo as f64),
                show(*hi as f64)
            )));
        }
    }
    for (flag, p) in [
        ("--max-error-rate", o.max_error_rate),
        ("--delivery-pct", o.delivery_pct),
    ] {
        if let Some(Pct(p)) = p
            && !(0.0..=100.0).contains(&p)
        {
            return Err(Error::usage(format!("{flag} {p}%: give 0% to 100%")));
        }
    }
    if let Some(c) = o.concurrency
        && !(1..=MAX_CONCURRENCY).contains(&c)
    {
        return Err(Error::usage(format!(
            "--concurrency {c}: give 1 to {MAX_CONCURRENCY} users set up at once"
        )));
    }
    Ok(())
}

/// How many users a run takes from a users file: `--users` (which must not
/// exceed what the file lists from `--first-user` on), else all of them.
fn users_in_file(file: &std::path::Path, first_user: usize, users: Option<usize>) -> Result<usize> {
    let listed = crate::target::read_users_file(file)?.len();
    let left = listed.saturating_sub(first_user - 1);
    if left == 0 {
        return Err(Error::usage(format!(
            "users file {} lists {listed} users: --first-user {first_user} is past its end",
            file.display()
        )));
    }
    match users {
        Some(n) if n > left => Err(Error::usage(format!(
            "--users {n}: users file {} lists {listed} users{}; give --users {left} or fewer, \
             or add users to the file",
            file.display(),
            if first_user > 1 {
                format!(", {left} of them from --first-user {first_user} on")
            } else {
                String::new()
            }
        ))),
        Some(n) => Ok(n),
        None => Ok(left),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file_and_defaults_apply() {
        let file: MailOptions =
            toml::from_str("users = 50\nday_length = \"10m\"\nmax_error_rate = \"1%\"\nstart_at = \"2026-12-01T09:00:00Z\"\n").unwrap();
        let flags = MailOptions {
            users: Some(7),
            ..Default::default()
        };
        let o = file.clone().overlay(flags);
        assert_eq!(o.start_at.as_deref(), Some("2026-12-01T09:00:00Z"));
        let later = MailOptions {
            start_at: Some("2026-12-01T10:00:00Z".into()),
            ..Default::default()
        };
        let l = file.overlay(later);
        assert_eq!(l.start_at.as_deref(), Some("2026-12-01T10:00:00Z"));
        let r = Resolved::resolve(&o, Duration::from_secs(8 * 3600)).unwrap();
        assert_eq!(r.users, 7);
        assert_eq!(r.day_length, Duration::from_secs(600));
        assert_eq!(r.ramp_up, Duration::from_secs(60));
        assert_eq!(r.max_error_rate_pct, 1.0);
        assert_eq!(r.target, "local");
        assert!(
            toml::from_str::<MailOptions>("userz = 1")
                .unwrap_err()
                .to_string()
                .contains("userz")
        );
        let bad = MailOptions {
            target: Some("cloud".into()),
            ..Default::default()
        };
        assert!(Resolved::resolve(&bad, Duration::from_secs(1)).is_err());
        let r = MailOptions {
            imap: Some("imap://h".into()),
            ..Default::default()
        };
        assert!(
            Resolved::resolve(&r, Duration::from_secs(1))
                .unwrap_err()
                .to_string()
                .contains("--submission")
        );
    }

    #[test]
    fn tls_options() {
        let file: MailOptions = toml::from_str(
            "imap = \"imaps://h\"\nsubmission = \"smtp://h\"\nstarttls = \"require\"\nca_file = \"/x/ca.pem\"\nallow_cleartext_auth = true\n",
        )
        .unwrap();
        let r = Resolved::resolve(&file, Duration::from_secs(60)).unwrap();
        assert_eq!(r.starttls, StartTls::Require);
        assert_eq!(
            r.ca_file.as_deref(),
            Some(std::path::Path::new("/x/ca.pem"))
        );
        assert!(r.allow_cleartext_auth && !r.tls_insecure);
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["starttls"], "require");
        assert_eq!(j["tls_insecure"], false);
        // Defaults: auto, verified.
        let r = Resolved::resolve(&MailOptions::default(), Duration::from_secs(60)).unwrap();
        assert_eq!((r.starttls, r.tls_insecure), (StartTls::Auto, false));
        // --ca-file and --tls-insecure contradict each other.
        let both = MailOptions {
            tls_insecure: Some(true),
            ..file.clone()
        };
        assert!(Resolved::resolve(&both, Duration::from_secs(60)).is_err());
        // TLS options make no sense for the plain-text local target.
        let local = MailOptions {
            tls_insecure: Some(true),
            ..Default::default()
        };
        let e = Resolved::resolve(&local, Duration::from_secs(60)).unwrap_err();
        assert!(e.to_string().contains("--tls-insecure"), "{e}");
        // Nor a password file: the local target makes its own users.
        let local = MailOptions {
            password_file: Some("/nonexistent".into()),
            ..Default::default()
        };
        let e = Resolved::resolve(&local, Duration::from_secs(60)).unwrap_err();
        assert!(e.to_string().contains("--password-file"), "{e}");
        assert!(toml::from_str::<MailOptions>("starttls = \"maybe\"").is_err());
    }

    #[test]
    fn users_files_bound_the_user_count() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("users");
        let lines: String = (1..=20).map(|i| format!("u{i}@x pw{i}\n")).collect();
        std::fs::write(&f, format!("# comment\n{lines}")).unwrap();
        let o = |users: Option<usize>, first: Option<usize>| MailOptions {
            imap: Some("imap://h".into()),
            submission: Some("smtp://h".into()),
            users_file: Some(f.clone()),
            users,
            first_user: first,
            ..Default::default()
        };
        let day = Duration::from_secs(60);
        assert_eq!(Resolved::resolve(&o(None, None), day).unwrap().users, 20);
        assert_eq!(Resolved::resolve(&o(Some(7), None), day).unwrap().users, 7);
        assert_eq!(Resolved::resolve(&o(None, Some(16)), day).unwrap().users, 5);
        let e = Resolved::resolve(&o(Some(30), None), day).unwrap_err();
        assert_eq!(e.exit_status(), mailbench_base::ExitStatus::Usage);
        assert!(e.to_string().contains("lists 20 users"), "{e}");
        let e = Resolved::resolve(&o(Some(6), Some(16)), day).unwrap_err();
        assert!(
            e.to_string().contains("5 of them from --first-user 16"),
            "{e}"
        );
        assert!(Resolved::resolve(&o(None, Some(21)), day).is_err());
        std::fs::write(&f, "a@x 1\na@x 2\n").unwrap();
        let e = Resolved::resolve(&o(None, None), day).unwrap_err();
        assert!(e.to_string().contains("listed twice"), "{e}");
    }
}
