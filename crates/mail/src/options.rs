//! The options of `mail setup`, `mail run` and `mail sweep`, defined once:
//! each field of a group below is a key of the `[mail]` section of the config
//! file and a flag of the same name (`--` + the key with `-`), its doc line
//! the flag's help. Flags win over the file ([`MailOptions::overlay`]).
//!
//! The options come in groups by the commands that take them: `mail setup`
//! takes [`SetupOptions`], `mail run` and `mail sweep` every group
//! ([`MailOptions`]). The one `[mail]` section holds every group's keys; it is
//! read once, a key no group knows is refused by name, and each group takes
//! its own keys from it.

use crate::endpoint::StartTls;
use mailbench_base::limits::{Bound, MAX_USERS, Unit, check_options};
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

/// `--users` / `users`: one number of users; on `mail sweep`'s command line
/// the levels (`100,200,400`, `100..1000:100`), so the flag keeps its text
/// and is checked where it is used. The key is a whole number.
#[derive(Debug, Clone, PartialEq)]
pub struct Users(pub String);

impl Users {
    /// The one number of users (`mail setup`, `mail run`).
    pub fn count(&self) -> Result<usize> {
        self.0.trim().parse::<usize>().map_err(|_| {
            Error::usage(format!(
                "--users `{}`: give a whole number of users (levels are for `mail sweep`)",
                self.0
            ))
        })
    }
}

impl From<usize> for Users {
    fn from(n: usize) -> Users {
        Users(n.to_string())
    }
}

impl std::str::FromStr for Users {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Users, String> {
        Ok(Users(s.to_string()))
    }
}

impl Serialize for Users {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0.trim().parse::<u64>() {
            Ok(n) => s.serialize_u64(n),
            Err(_) => s.serialize_str(&self.0),
        }
    }
}

impl<'de> Deserialize<'de> for Users {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Users, D::Error> {
        usize::deserialize(d).map(Users::from)
    }
}

/// The help of `--user-format`. clap turns `{n}` in help text into a line
/// break; a style around the `n` keeps the placeholder as the user writes it
/// (the style is dropped when the help is not printed to a terminal).
fn user_format_help() -> clap::builder::StyledStr {
    let b = clap::builder::styling::Style::new().bold();
    let n = format!("{{{b}n{b:#}}}");
    format!("User address pattern, {n} = user number [default: user{n}@example.test]").into()
}

/// The help of `--login-format` (`{n}` kept as in `user_format_help`).
fn login_format_help() -> clap::builder::StyledStr {
    let b = clap::builder::styling::Style::new().bold();
    let n = format!("{{{b}n{b:#}}}");
    format!(
        "Login name pattern, {n} = user number, when it is not the address (load{n} for \
         servers that refuse user@domain logins) [default: the address; user{n} with --server cyrus]"
    )
    .into()
}

/// Defines one group of `[mail]` options: the struct (every field an
/// `Option`, a TOML key and a flag; `deny_unknown_fields`, so a group read
/// alone refuses what it does not know); `options_struct!` adds its
/// `overlay` (each field the flags give wins).
macro_rules! option_group {
    ($(#[$meta:meta])* pub struct $name:ident { $($body:tt)* }) => {
        mailbench_base::options_struct! {
            $(#[$meta])*
            #[derive(Debug, Clone, Default, Deserialize, Serialize, clap::Args)]
            #[serde(deny_unknown_fields)]
            pub struct $name { $($body)* }
        }
    };
}

option_group! {
    /// The options of `mail setup` (which `mail run` and `mail sweep` take too):
    /// the target, its users, the profile, TLS.
    pub struct SetupOptions {
        /// `local` (default): start a throwaway Dovecot+Postfix on 127.0.0.1; `sink`: mailbench's own
        /// endpoint that answers at once (measures the generator alone); `remote`: use --imap/--submission.
        #[arg(long, value_name = "local|sink|remote")]
        pub target: Option<String>,
        /// IMAP server of a remote target, e.g. imaps://mail.example.org (993) or imap://mail.example.org:143.
        #[arg(long, value_name = "URL")]
        pub imap: Option<String>,
        /// SMTP submission server of a remote target, e.g. submissions://mail.example.org (465) or smtp://mail.example.org:587.
        #[arg(long, value_name = "URL")]
        pub submission: Option<String>,
        /// ManageSieve server of a remote target (rules), e.g. sieve://mail.example.org:4190.
        #[arg(long, value_name = "URL")]
        pub sieve: Option<String>,
        /// JMAP server of a remote target: its session resource, e.g. https://mail.example.org/jmap/session,
        /// or the host whose /.well-known/jmap leads to it.
        #[arg(long, value_name = "URL")]
        pub jmap: Option<String>,
        /// The protocol every user reads mail with [default: imap].
        #[arg(long, value_name = "imap|jmap")]
        pub protocol: Option<String>,
        /// Users' protocols by share, e.g. imap=70,jmap=30 (shares add up to 100; each user keeps one
        /// protocol, assigned by user number).
        #[arg(long, value_name = "imap=PCT,jmap=PCT")]
        pub protocol_mix: Option<String>,
        /// Number of simulated users [default: 100]; `mail sweep`: the levels,
        /// 100,200,400 or 100..1000:100.
        #[arg(long, value_name = "N")]
        pub users: Option<Users>,
        /// Number of the first user [default: 1].
        #[arg(long)]
        pub first_user: Option<usize>,
        #[arg(long, value_name = "PATTERN", help = user_format_help())]
        pub user_format: Option<String>,
        #[arg(long, value_name = "PATTERN", help = login_format_help())]
        pub login_format: Option<String>,
        /// Remote users and passwords, one `address password` per line
        /// (`address login password` when the login name is not the address).
        #[arg(long, value_name = "FILE")]
        pub users_file: Option<PathBuf>,
        /// File whose first line is the password of every remote user (else $MAILBENCH_PASSWORD).
        #[arg(long, value_name = "FILE")]
        pub password_file: Option<PathBuf>,
        /// Distribution lists of a remote server, one `list@domain member member ...` a line, as the server defines them.
        #[arg(long, value_name = "FILE")]
        pub lists_file: Option<PathBuf>,
        /// Write every user's IMAP traffic into DIR, one file per user (passwords redacted).
        #[arg(long, value_name = "DIR")]
        pub trace_imap: Option<PathBuf>,
        /// mmb3 (default), loadsim-light, loadsim-medium (= mmb), loadsim-heavy, mmb, loadsim4-medium, or a profile .toml.
        #[arg(long, value_name = "NAME|FILE")]
        pub profile: Option<String>,
        /// Keep the local target's servers and mailboxes in DIR (reused by later runs) [default: a temporary folder].
        #[arg(long, value_name = "DIR")]
        pub local_dir: Option<PathBuf>,
        /// The local target's IMAP server: dovecot (default) or cyrus (Cyrus IMAP 3.6 with
        /// IMAP, LMTP, ManageSieve and JMAP over HTTP; Postfix in front of either).
        #[arg(long, value_name = "dovecot|cyrus")]
        pub server: Option<String>,
        /// Cyrus IMAP's files for --server cyrus: a folder Debian's cyrus-common, cyrus-imapd
        /// and cyrus-caldav were unpacked into (`dpkg -x`) [default: / when they are installed].
        #[arg(long, value_name = "DIR")]
        pub cyrus_root: Option<PathBuf>,
        /// Random seed (topology, schedules, messages) [default: 1].
        #[arg(long)]
        pub seed: Option<u64>,
        /// Per-operation timeout [default: 30s].
        #[arg(long, value_name = "DURATION")]
        pub op_timeout: Option<Dur>,
        /// Users provisioned at once by setup [default: 16].
        #[arg(long)]
        pub concurrency: Option<usize>,
        /// STARTTLS on imap://, smtp:// and sieve:// URLs: auto (upgrade when the server offers it), require, never [default: auto].
        #[arg(long, value_name = "auto|require|never")]
        pub starttls: Option<StartTls>,
        /// Also trust the CA certificates of this PEM file (besides the system's).
        #[arg(long, value_name = "PEM")]
        pub ca_file: Option<PathBuf>,
        /// Do not verify TLS certificates (recorded in the results as not verified).
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub tls_insecure: Option<bool>,
        /// Allow passwords in clear text to a server that is not on this machine and offers no TLS.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub allow_cleartext_auth: Option<bool>,
    }
}

option_group! {
    /// The options `mail run` and `mail sweep` take beside [`SetupOptions`]:
    /// the day, the limits the verdict judges, polling, server figures.
    pub struct RunOptions {
        /// Start the users at this wall-clock time, RFC 3339 (2026-07-10T14:00:00Z):
        /// give every load generator the same time, then `mailbench report merge`
        /// their results. Under MPI the generators start together anyway.
        #[arg(long, value_name = "TIME")]
        pub start_at: Option<String>,
        /// Real length of the simulated day, e.g. 8h or 10m [default: the profile's day].
        #[arg(long, value_name = "DURATION")]
        pub day_length: Option<Dur>,
        /// Logons are spread over this time before the day starts [default: day/10, at most 10m].
        #[arg(long, value_name = "DURATION")]
        pub ramp_up: Option<Dur>,
        /// Longest wait after the day for outstanding deliveries [default: 2m].
        #[arg(long, value_name = "DURATION")]
        pub drain: Option<Dur>,
        /// Sampling interval of intervals.jsonl [default: day/60 within 1s..15s].
        #[arg(long, value_name = "DURATION")]
        pub interval: Option<Dur>,
        /// Errors allowed, in % of operations [default: 0].
        #[arg(long, value_name = "PCT")]
        pub max_error_rate: Option<Pct>,
        /// Response-time limit in ms: the weighted 95th percentile over the
        /// steady window [default: 1000].
        // `--max-score-ms` / `max_score_ms`, the older name, stays accepted
        // (hidden from the help; both names at once are refused).
        #[serde(alias = "max_score_ms")]
        #[arg(long, value_name = "MS", alias = "max-score-ms")]
        pub max_response_time_ms: Option<f64>,
        /// Delivery latency limit [default: 60s].
        #[arg(long, value_name = "DURATION")]
        pub delivery_within: Option<Dur>,
        /// Share of deliveries that must arrive within --delivery-within [default: 95%].
        #[arg(long, value_name = "PCT")]
        pub delivery_pct: Option<Pct>,
        /// Do not provision users before the run.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub skip_setup: Option<bool>,
        /// Poll with NOOP instead of waiting in IDLE for new mail.
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub no_idle: Option<bool>,
        /// Polling interval with --no-idle [default: 5s].
        #[arg(long, value_name = "DURATION")]
        pub poll_interval: Option<Dur>,
        /// A Prometheus endpoint on the server host, scraped every --interval
        /// (node exporter, Postfix exporter, Dovecot's OpenMetrics); repeatable.
        #[arg(long, value_name = "URL")]
        pub server_metrics: Option<Vec<String>>,
        /// The mail store's block device on the server host, as the node exporter
        /// names it (sdb, nvme0n1, dm-2); repeatable [default: every whole disk].
        #[arg(long, value_name = "DEVICE")]
        pub server_disk: Option<Vec<String>>,
        /// The measured steady window, FROM-TO as shares of the day (25%-75%)
        /// or simulated times of day (2h-6h) [default: 25%-75%, the middle half].
        #[arg(long, value_name = "FROM-TO")]
        pub steady: Option<String>,
    }
}

/// The `[mail]` section: every group (`None` = not given). Also the flags of
/// `mail run` and `mail sweep`, which take every group.
#[derive(Debug, Clone, Default, Serialize, clap::Args)]
pub struct MailOptions {
    #[serde(flatten)]
    #[command(flatten)]
    pub setup: SetupOptions,
    #[serde(flatten)]
    #[command(flatten)]
    pub run: RunOptions,
}

impl MailOptions {
    /// `self` (the file) with every option given in `flags` replaced.
    pub fn overlay(mut self, flags: MailOptions) -> MailOptions {
        self.setup.overlay(flags.setup);
        self.run.overlay(flags.run);
        self
    }

    /// Every key of the section: the union of the groups' keys (serde's own
    /// field lists, aliases included), in the groups' order.
    pub fn keys() -> &'static [&'static str] {
        static KEYS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        KEYS.get_or_init(|| {
            let groups = [
                mailbench_base::config::accepted_keys::<SetupOptions>(),
                mailbench_base::config::accepted_keys::<RunOptions>(),
            ];
            // Leaked once: serde's unknown-key error takes a static list.
            groups
                .concat()
                .into_iter()
                .map(|k| &*Box::leak(k.into_boxed_str()))
                .collect()
        })
    }
}

/// The section is read once: a key no group knows is refused by name (with
/// the list of keys, as for every section), then each group takes its own
/// keys and reads them (serde cannot flatten groups that refuse unknown keys).
impl<'de> Deserialize<'de> for MailOptions {
    fn deserialize<D: serde::Deserializer<'de>>(
        d: D,
    ) -> std::result::Result<MailOptions, D::Error> {
        let mut table = toml::Table::deserialize(d)?;
        let keys = MailOptions::keys();
        if let Some(k) = table.keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(serde::de::Error::unknown_field(k, keys));
        }
        Ok(MailOptions {
            setup: take_group(&mut table)?,
            run: take_group(&mut table)?,
        })
    }
}

/// The group `G` read from its own keys, which leave `table`.
fn take_group<G: serde::de::DeserializeOwned, E: serde::de::Error>(
    table: &mut toml::Table,
) -> std::result::Result<G, E> {
    let mine: toml::Table = mailbench_base::config::accepted_keys::<G>()
        .iter()
        .filter_map(|k| table.remove_entry(k.as_str()))
        .collect();
    G::deserialize(toml::Value::Table(mine)).map_err(|e| E::custom(e.message()))
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
        check_ranges(o)?;
        let (s, r) = (&o.setup, &o.run);
        let target = target_of(s)?;
        let tls_insecure = s.tls_insecure.unwrap_or(false);
        check_tls_options(s, &target, tls_insecure)?;
        let (first_user, users, user_format) = users_of(s)?;
        let (server, cyrus_root) = local_server_of(s, &target)?;
        let login_format = login_format_of(s, &user_format, &server)?;
        let jmap_pct = jmap_share(s, &target, &server)?;
        let day_length = r.day_length.map(|d| d.0).unwrap_or(profile_day);
        let ramp_up = r
            .ramp_up
            .map(|d| d.0)
            .unwrap_or_else(|| (day_length / 10).min(Duration::from_secs(600)));
        let interval = r.interval.map(|d| d.0).unwrap_or_else(|| {
            (day_length / 60).clamp(Duration::from_secs(1), Duration::from_secs(15))
        });
        let op_timeout = s.op_timeout.map(|d| d.0).unwrap_or(Duration::from_secs(30));
        let (server_metrics, server_disk) = server_sources(r)?;
        let published = mailbench_results::mail::judge::Criteria::PUBLISHED;
        let delivery_pct = r
            .delivery_pct
            .map(|p| p.0)
            .unwrap_or(published.delivery_pct);
        let steady = r
            .steady
            .clone()
            .unwrap_or_else(mailbench_results::mail::config::default_steady);
        let spec: crate::steady::SteadySpec = steady.parse().map_err(Error::usage)?;
        spec.resolve(ramp_up, day_length, profile_day)?;
        Ok(Resolved {
            target,
            imap: s.imap.clone(),
            submission: s.submission.clone(),
            sieve: s.sieve.clone(),
            jmap: s.jmap.clone(),
            jmap_pct,
            users,
            first_user,
            user_format,
            login_format,
            users_file: s.users_file.clone(),
            password_file: s.password_file.clone(),
            lists_file: s.lists_file.clone(),
            trace_imap: s.trace_imap.clone(),
            profile: s.profile.clone().unwrap_or_else(|| "mmb3".into()),
            local_dir: s.local_dir.clone(),
            server,
            cyrus_root,
            seed: s.seed.unwrap_or(1),
            op_timeout,
            concurrency: s.concurrency.unwrap_or(16),
            starttls: s.starttls.unwrap_or_default(),
            ca_file: s.ca_file.clone(),
            tls_insecure,
            allow_cleartext_auth: s.allow_cleartext_auth.unwrap_or(false),
            day_length,
            ramp_up,
            drain: r.drain.map(|d| d.0).unwrap_or(Duration::from_secs(120)),
            interval,
            max_error_rate_pct: r
                .max_error_rate
                .map(|p| p.0)
                .unwrap_or(published.max_error_rate_pct),
            max_score_ms: r.max_response_time_ms.unwrap_or(published.max_score_ms),
            delivery_within: r
                .delivery_within
                .map(|d| d.0)
                .unwrap_or(published.delivery_within),
            delivery_pct,
            skip_setup: r.skip_setup.unwrap_or(false),
            idle: !r.no_idle.unwrap_or(false),
            poll_interval: r
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
fn target_of(s: &SetupOptions) -> Result<String> {
    let remote = s.imap.is_some() || s.submission.is_some();
    let target = match s.target.as_deref() {
        None => if remote { "remote" } else { "local" }.to_string(),
        Some("local") => "local".into(),
        Some("remote") => "remote".into(),
        Some("sink") => "sink".into(),
        Some(other) => {
            return Err(Error::usage(format!(
                "--target `{other}`: write `local` (a throwaway Dovecot+Postfix), `sink` (mailbench's own \
                 endpoint, to measure the generator alone) or `remote` with --imap and --submission URLs"
            )));
        }
    };
    if target != "remote" && (remote || s.sieve.is_some()) {
        return Err(Error::usage(format!(
            "--imap/--submission/--sieve address a running server: drop --target {target} (or write --target remote)"
        )));
    }
    if target == "sink" {
        return sink_options(s).map(|()| target);
    }
    if target == "remote" && (s.imap.is_none() || s.submission.is_none()) {
        return Err(Error::usage(
            "--target remote needs --imap imap://HOST:PORT and --submission smtp://HOST:PORT",
        ));
    }
    if target == "local" && s.users_file.is_some() {
        return Err(Error::usage(
            "--users-file is for remote servers; the local target creates its own users",
        ));
    }
    if target == "local" && s.password_file.is_some() {
        return Err(Error::usage(
            "--password-file is for remote servers; the local target makes its own users and passwords",
        ));
    }
    if target == "local" && s.lists_file.is_some() {
        return Err(Error::usage(
            "--lists-file is for remote servers; the local target defines its own distribution lists",
        ));
    }
    Ok(target)
}

/// The share of users (in %) on JMAP, from `--protocol` or `--protocol-mix`,
/// refused where no JMAP endpoint exists: the local target (Dovecot has no
/// JMAP), the sink (which speaks IMAP and SMTP only), a remote target without
/// `--jmap`.
fn jmap_share(s: &SetupOptions, target: &str, server: &str) -> Result<u32> {
    let pct = match (s.protocol.as_deref(), s.protocol_mix.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(Error::usage(
                "--protocol and --protocol-mix both given: write one (--protocol jmap is --protocol-mix jmap=100)",
            ));
        }
        (Some("imap"), None) | (None, None) => 0,
        (Some("jmap"), None) => 100,
        (Some(other), None) => {
            return Err(Error::usage(format!(
                "--protocol `{other}`: write `imap` or `jmap` (or --protocol-mix imap=70,jmap=30)"
            )));
        }
        (None, Some(mix)) => parse_mix(mix)?,
    };
    if s.jmap.is_some() && target != "remote" {
        return Err(Error::usage(format!(
            "--jmap addresses a running server: drop --target {target} (or write --target remote)"
        )));
    }
    if let Some(u) = &s.jmap {
        crate::jmap::session::session_url(u)?;
    }
    if pct == 0 {
        return Ok(0);
    }
    match target {
        "local" if server == "cyrus" => Ok(pct),
        "local" => Err(Error::usage(
            "JMAP users need a JMAP server: the local target's Dovecot serves IMAP only; \
             use --server cyrus, --target remote with --jmap URL, or --protocol imap",
        )),
        "sink" => Err(Error::usage(
            "JMAP users need a JMAP server: the sink answers IMAP and SMTP only; \
             use --target remote with --jmap URL, or --protocol imap",
        )),
        _ if s.jmap.is_none() => Err(Error::usage(
            "JMAP users on a remote target need --jmap URL (the session resource, or the host \
             whose /.well-known/jmap leads to it)",
        )),
        _ => Ok(pct),
    }
}

/// `imap=70,jmap=30`: the JMAP share; every protocol once, shares adding up to 100.
fn parse_mix(mix: &str) -> Result<u32> {
    let (mut imap, mut jmap) = (None, None);
    for part in mix.split(',').map(str::trim) {
        let bad = || {
            Error::usage(format!(
                "--protocol-mix `{mix}`: write shares in % that add up to 100, e.g. imap=70,jmap=30"
            ))
        };
        let (name, v) = part.split_once('=').ok_or_else(bad)?;
        let v: u32 = v.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
        let slot = match name.trim() {
            "imap" => &mut imap,
            "jmap" => &mut jmap,
            other => {
                return Err(Error::usage(format!(
                    "--protocol-mix `{mix}`: `{other}` is not a protocol; write imap and jmap"
                )));
            }
        };
        if slot.replace(v).is_some() {
            return Err(Error::usage(format!(
                "--protocol-mix `{mix}`: `{}` given twice",
                name.trim()
            )));
        }
    }
    let (i, j) = (imap.unwrap_or(0), jmap.unwrap_or(0));
    if i.checked_add(j) != Some(100) {
        return Err(Error::usage(format!(
            "--protocol-mix `{mix}`: the shares add up to {}%, not 100%",
            u64::from(i) + u64::from(j)
        )));
    }
    Ok(j)
}

/// The options the sink has no use for, refused: it makes its own users,
/// password and lists, keeps no folder, and speaks plain text on 127.0.0.1.
fn sink_options(s: &SetupOptions) -> Result<()> {
    let given: Vec<&str> = [
        (s.users_file.is_some(), "--users-file"),
        (s.password_file.is_some(), "--password-file"),
        (s.lists_file.is_some(), "--lists-file"),
        (s.local_dir.is_some(), "--local-dir"),
    ]
    .iter()
    .filter(|(g, _)| *g)
    .map(|(_, f)| *f)
    .collect();
    if given.is_empty() {
        return Ok(());
    }
    Err(Error::usage(format!(
        "{} {} not for the sink: it makes its own users, password and distribution lists and keeps no folder",
        given.join(", "),
        if given.len() == 1 { "is" } else { "are" }
    )))
}

/// TLS options: refused with the local target (plain text on loopback), and
/// `--ca-file` refused with `--tls-insecure`.
fn check_tls_options(s: &SetupOptions, target: &str, tls_insecure: bool) -> Result<()> {
    if target != "remote" {
        let mut given = Vec::new();
        if s.starttls == Some(StartTls::Require) {
            given.push("--starttls require");
        }
        if s.ca_file.is_some() {
            given.push("--ca-file");
        }
        if tls_insecure {
            given.push("--tls-insecure");
        }
        if s.allow_cleartext_auth == Some(true) {
            given.push("--allow-cleartext-auth");
        }
        if !given.is_empty() {
            return Err(Error::usage(format!(
                "{} are for remote servers; the {target} target speaks plain text on 127.0.0.1",
                given.join(", ")
            )));
        }
    }
    if tls_insecure && s.ca_file.is_some() {
        return Err(Error::usage(
            "--ca-file has no effect with --tls-insecure (nothing is verified): drop one of them",
        ));
    }
    Ok(())
}

/// The first user's number, how many users (`--users`, or those listed in
/// `--users-file` from the first on) and the address format.
fn users_of(s: &SetupOptions) -> Result<(usize, usize, String)> {
    let first_user = s.first_user.unwrap_or(1);
    let count = s.users.as_ref().map(Users::count).transpose()?;
    if first_user == 0 {
        return Err(Error::usage("--first-user counts from 1"));
    }
    let users = match &s.users_file {
        Some(f) => users_in_file(f, first_user, count)?,
        None => count.unwrap_or(100),
    };
    if users == 0 || users > 100_000 {
        return Err(Error::usage(format!(
            "--users {users}: give 1 to 100000 users"
        )));
    }
    let user_format = s
        .user_format
        .clone()
        .unwrap_or_else(|| format!("user{{n}}@{}", crate::local::LOCAL_DOMAIN));
    if !user_format.contains("{n}") {
        return Err(Error::usage(format!(
            "--user-format `{user_format}` has no {{n}} for the user number; write e.g. user{{n}}@example.org"
        )));
    }
    if s.users_file.is_none() && !has_domain(&user_format) {
        return Err(Error::usage(format!(
            "--user-format `{user_format}` is the users' address (their From, To and Cc) and has no \
             @domain; write e.g. {user_format}@example.org, and give the name they log in with as \
             --login-format {user_format}"
        )));
    }
    Ok((first_user, users, user_format))
}

/// Whether `address` is `local@domain` with both parts.
fn has_domain(address: &str) -> bool {
    address
        .split_once('@')
        .is_some_and(|(l, d)| !l.is_empty() && !d.is_empty())
}

/// `--server` and `--cyrus-root` (local target only): the server's name and,
/// for Cyrus, where its binaries are.
fn local_server_of(s: &SetupOptions, target: &str) -> Result<(String, Option<PathBuf>)> {
    if target != "local" && (s.server.is_some() || s.cyrus_root.is_some()) {
        return Err(Error::usage(format!(
            "--server and --cyrus-root choose the local target's server: drop them with --target {target}"
        )));
    }
    let server = s.server.clone().unwrap_or_else(|| "dovecot".into());
    match server.as_str() {
        "dovecot" if s.cyrus_root.is_some() => Err(Error::usage(
            "--cyrus-root is for --server cyrus: drop it, or add --server cyrus",
        )),
        "dovecot" => Ok((server, None)),
        "cyrus" => Ok((
            server,
            Some(crate::local::cyrus_root(s.cyrus_root.as_deref())?),
        )),
        other => Err(Error::usage(format!(
            "--server `{other}`: write dovecot (the default) or cyrus"
        ))),
    }
}

/// `--login-format`: None when users log in with their address. The local
/// Cyrus's default is the address's local part (Cyrus as Debian ships it
/// refuses `user@domain` logins: no virtual domains).
fn login_format_of(s: &SetupOptions, user_format: &str, server: &str) -> Result<Option<String>> {
    let Some(f) = s.login_format.clone() else {
        return Ok((server == "cyrus").then(|| {
            user_format
                .split('@')
                .next()
                .unwrap_or(user_format)
                .to_string()
        }));
    };
    if s.users_file.is_some() {
        return Err(Error::usage(
            "--login-format names generated users; a users file gives each user's login name in \
             its own column (`address login password`)",
        ));
    }
    if !f.contains("{n}") || f.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::usage(format!(
            "--login-format `{f}`: write a pattern with {{n}} for the user number and no spaces, e.g. load{{n}}"
        )));
    }
    Ok(Some(f))
}

/// `--server-metrics` endpoints and `--server-disk` device names, checked.
fn server_sources(r: &RunOptions) -> Result<(Vec<String>, Vec<String>)> {
    let server_metrics = r.server_metrics.clone().unwrap_or_default();
    for u in &server_metrics {
        check_url(u)?;
    }
    let server_disk = r.server_disk.clone().unwrap_or_default();
    if let Some(bad) = server_disk.iter().find(|d| d.is_empty() || d.contains('/')) {
        return Err(Error::usage(format!(
            "--server-disk `{bad}`: give the kernel's device name as the node exporter reports it (sdb, nvme0n1, dm-2), not a path"
        )));
    }
    Ok((server_metrics, server_disk))
}

/// Most users' sessions opened at once by `mail setup`.
pub const MAX_CONCURRENCY: usize = 10_000;

const DAY: f64 = 86_400.0;

/// The range of every numeric key of [`SetupOptions`] (and its flag).
pub const SETUP_BOUNDS: &[Bound] = &[
    Bound::new("users", 1.0, MAX_USERS as f64, Unit::Count),
    Bound::new("first_user", 1.0, 1e9, Unit::Count),
    Bound::new("seed", 0.0, 9.2e18, Unit::Count),
    Bound::new("op_timeout", 0.1, 3600.0, Unit::Seconds),
    Bound::new("concurrency", 1.0, MAX_CONCURRENCY as f64, Unit::Count),
];

/// The range of every numeric key of [`RunOptions`] (and its flag).
pub const RUN_BOUNDS: &[Bound] = &[
    Bound::new("day_length", 1.0, 7.0 * DAY, Unit::Seconds),
    Bound::new("ramp_up", 0.0, DAY, Unit::Seconds),
    Bound::new("drain", 0.0, DAY, Unit::Seconds),
    Bound::new("interval", 0.1, 3600.0, Unit::Seconds),
    Bound::new("max_error_rate", 0.0, 100.0, Unit::Percent),
    Bound::new("max_response_time_ms", 1.0, 3_600_000.0, Unit::Millis),
    Bound::new("delivery_within", 1.0, DAY, Unit::Seconds),
    Bound::new("delivery_pct", 0.0, 100.0, Unit::Percent),
    Bound::new("poll_interval", 0.1, 3600.0, Unit::Seconds),
];

/// Every numeric option within its range ([`SETUP_BOUNDS`], [`RUN_BOUNDS`]),
/// by the one numeric validator, before anything is written; the error
/// names the key and its flag and the range.
fn check_ranges(o: &MailOptions) -> Result<()> {
    check_options("[mail]", &o.setup, SETUP_BOUNDS)?;
    check_options("[mail]", &o.run, RUN_BOUNDS)
}

/// How many users a run takes from a users file: `--users` (which must not
/// exceed what the file lists from `--first-user` on), else all of them.
fn users_in_file(file: &std::path::Path, first_user: usize, users: Option<usize>) -> Result<usize> {
    let listed = crate::endpoint::read_users_file(file)?.len();
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

/// The TLS policy of every connection of the run (`--starttls`,
/// `--ca-file`, `--tls-insecure`, `--allow-cleartext-auth`).
pub fn tls_of(o: &Resolved) -> Result<crate::endpoint::Tls> {
    crate::endpoint::Tls::new(
        o.starttls,
        o.ca_file.as_deref(),
        o.tls_insecure,
        o.allow_cleartext_auth,
    )
}

/// `--trace-imap`'s folder, claimed, when given.
pub fn trace_dir(o: &Resolved) -> Result<Option<crate::trace::TraceDir>> {
    (o.trace_imap.as_deref())
        .map(crate::trace::TraceDir::create)
        .transpose()
}

/// Checks a `--server-metrics` URL before anything is written.
pub fn check_url(url: &str) -> Result<()> {
    mailbench_base::secrets::refuse_url_credentials("--server-metrics", url)?;
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') => Ok(()),
        _ => Err(Error::usage(format!(
            "--server-metrics `{url}`: give an http:// or https:// URL of a Prometheus endpoint, e.g. http://mail.example.org:9100/metrics"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(setup: SetupOptions) -> MailOptions {
        MailOptions {
            setup,
            ..Default::default()
        }
    }

    fn run(run: RunOptions) -> MailOptions {
        MailOptions {
            run,
            ..Default::default()
        }
    }

    /// Every `[mail]` key that takes a number has its range in the one table
    /// of its group, and every bounded key, spoiled (below, above, NaN,
    /// infinity), is refused with exit 2 naming the key and its flag.
    #[test]
    fn every_numeric_option_is_bounded_and_checked() {
        use mailbench_base::limits::{spoiled, unbounded_keys};
        for key in MailOptions::keys() {
            let Ok(o) = toml::from_str::<MailOptions>(&format!("{key} = 1")) else {
                continue;
            };
            let loose = [
                unbounded_keys(&o.setup, SETUP_BOUNDS),
                unbounded_keys(&o.run, RUN_BOUNDS),
            ]
            .concat();
            assert!(loose.is_empty(), "`{key}` takes a number but has no range");
        }
        let full = "users = 10\nfirst_user = 1\nseed = 3\nop_timeout = \"30s\"\nconcurrency = 4\n\
            day_length = \"10m\"\nramp_up = \"1m\"\ndrain = \"1m\"\ninterval = \"5s\"\n\
            max_error_rate = 1\nmax_response_time_ms = 1000\ndelivery_within = \"60s\"\n\
            delivery_pct = 95\npoll_interval = \"5s\"\n";
        let doc: toml::Value = toml::from_str(full).unwrap();
        let bounds = [SETUP_BOUNDS, RUN_BOUNDS].concat();
        let cases = spoiled(&doc, &bounds);
        assert!(cases.len() > 40, "{}", cases.len());
        for (key, bad) in cases {
            let Ok(o) = bad.try_into::<MailOptions>() else {
                continue; // a type the key cannot hold (NaN users): refused by serde
            };
            let e = Resolved::resolve(&o, Duration::from_secs(8 * 3600)).unwrap_err();
            assert_eq!(e.exit_status().code(), 2, "{key}: {e}");
            let flag = format!("--{}", key.replace('_', "-"));
            assert!(e.to_string().contains(&flag), "{key}: {e}");
        }
    }

    #[test]
    fn flags_override_the_file_and_defaults_apply() {
        let file: MailOptions =
            toml::from_str("users = 50\nday_length = \"10m\"\nmax_error_rate = \"1%\"\nstart_at = \"2026-12-01T09:00:00Z\"\n").unwrap();
        let flags = setup(SetupOptions {
            users: Some(7.into()),
            ..Default::default()
        });
        let o = file.clone().overlay(flags);
        assert_eq!(o.run.start_at.as_deref(), Some("2026-12-01T09:00:00Z"));
        let later = run(RunOptions {
            start_at: Some("2026-12-01T10:00:00Z".into()),
            ..Default::default()
        });
        let l = file.overlay(later);
        assert_eq!(l.run.start_at.as_deref(), Some("2026-12-01T10:00:00Z"));
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
        let bad = setup(SetupOptions {
            target: Some("cloud".into()),
            ..Default::default()
        });
        assert!(Resolved::resolve(&bad, Duration::from_secs(1)).is_err());
        let r = setup(SetupOptions {
            imap: Some("imap://h".into()),
            ..Default::default()
        });
        assert!(
            Resolved::resolve(&r, Duration::from_secs(1))
                .unwrap_err()
                .to_string()
                .contains("--submission")
        );
    }

    #[test]
    fn login_names_and_the_local_server() {
        let day = Duration::from_secs(60);
        let parse = |t: &str| Resolved::resolve(&toml::from_str(t).unwrap(), day);
        // Defaults: Dovecot, logins are the addresses.
        let r = parse("").unwrap();
        assert_eq!(
            (r.server.as_str(), r.login_format.clone()),
            ("dovecot", None)
        );
        let r = parse("imap = \"imap://h\"\nsubmission = \"smtp://h\"\nuser_format = \"load{n}@x.org\"\nlogin_format = \"load{n}\"\n").unwrap();
        assert_eq!(r.login_format.as_deref(), Some("load{n}"));
        let fails = |t: &str, says: &str| {
            let e = parse(t).unwrap_err();
            assert_eq!(e.exit_status().code(), 2, "{t}: {e}");
            assert!(e.to_string().contains(says), "{t}: {e}");
        };
        // An address without its domain, a login format without {n} or with spaces.
        fails("user_format = \"load{n}\"\n", "--login-format load{n}");
        fails("login_format = \"load\"\n", "--login-format `load`");
        fails("login_format = \"lo ad{n}\"\n", "no spaces");
        fails("server = \"exim\"\n", "write dovecot");
        fails(
            "cyrus_root = \"/opt/cyrus\"\n",
            "--cyrus-root is for --server cyrus",
        );
        fails(
            "imap = \"imap://h\"\nsubmission = \"smtp://h\"\nserver = \"cyrus\"\n",
            "drop them with --target remote",
        );
        let t = tempfile::tempdir().unwrap();
        fails(
            &format!(
                "server = \"cyrus\"\ncyrus_root = \"{}\"\n",
                t.path().display()
            ),
            "(cyrus-imapd)",
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
        let both = setup(SetupOptions {
            tls_insecure: Some(true),
            ..file.setup.clone()
        });
        assert!(Resolved::resolve(&both, Duration::from_secs(60)).is_err());
        // TLS options make no sense for the plain-text local target.
        let local = setup(SetupOptions {
            tls_insecure: Some(true),
            ..Default::default()
        });
        let e = Resolved::resolve(&local, Duration::from_secs(60)).unwrap_err();
        assert!(e.to_string().contains("--tls-insecure"), "{e}");
        // Nor a password file: the local target makes its own users.
        let local = setup(SetupOptions {
            password_file: Some("/nonexistent".into()),
            ..Default::default()
        });
        let e = Resolved::resolve(&local, Duration::from_secs(60)).unwrap_err();
        assert!(e.to_string().contains("--password-file"), "{e}");
        assert!(toml::from_str::<MailOptions>("starttls = \"maybe\"").is_err());
    }

    #[test]
    fn users_files_bound_the_user_count() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("users");
        let lines: String = (1..=20)
            .map(|i| format!("u{i}@x users-test-pw-{i}\n"))
            .collect();
        std::fs::write(&f, format!("# comment\n{lines}")).unwrap();
        let o = |users: Option<usize>, first: Option<usize>| {
            setup(SetupOptions {
                imap: Some("imap://h".into()),
                submission: Some("smtp://h".into()),
                users_file: Some(f.clone()),
                users: users.map(Users::from),
                first_user: first,
                ..Default::default()
            })
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
        std::fs::write(&f, "a@x twice-test-pw-1\na@x twice-test-pw-2\n").unwrap();
        let e = Resolved::resolve(&o(None, None), day).unwrap_err();
        assert!(e.to_string().contains("listed twice"), "{e}");
    }

    #[test]
    fn the_section_is_every_group_and_refuses_what_none_knows() {
        let setup = mailbench_base::config::accepted_keys::<SetupOptions>();
        let run = mailbench_base::config::accepted_keys::<RunOptions>();
        assert!(setup.len() > 10 && run.len() > 10, "{setup:?} {run:?}");
        // A key in two groups would be read by the first only.
        assert!(setup.iter().all(|k| !run.contains(k)), "{setup:?} {run:?}");
        assert_eq!(
            mailbench_base::config::accepted_keys::<MailOptions>(),
            [setup, run].concat()
        );
        let e = toml::from_str::<MailOptions>("users = 5\nday_lenght = \"1m\"\n").unwrap_err();
        assert!(
            e.message()
                .starts_with("unknown field `day_lenght`, expected one of `target`, `imap`"),
            "{e}"
        );
        // A group's own errors, as serde words them.
        let e = toml::from_str::<MailOptions>("users = \"x\"\n").unwrap_err();
        assert_eq!(e.message(), "invalid type: string \"x\", expected usize");
        let e = toml::from_str::<MailOptions>("max_score_ms = 1\nmax_response_time_ms = 2\n");
        assert!(e.unwrap_err().message().contains("duplicate field"));
        let o: MailOptions =
            toml::from_str("users = 5\nseed = 3\ndrain = \"1m\"\nmax_score_ms = 9\n").unwrap();
        assert_eq!(o.setup.users, Some(Users::from(5)));
        assert_eq!(
            (o.setup.seed, o.run.drain),
            (Some(3), Some(Dur(Duration::from_secs(60))))
        );
        assert_eq!(o.run.max_response_time_ms, Some(9.0));
        // `--users` of setup and run is one number; the levels are a sweep's.
        let levels = setup_users("100,200");
        let e = Resolved::resolve(&levels, Duration::from_secs(60)).unwrap_err();
        assert!(e.to_string().contains("levels are for `mail sweep`"), "{e}");
        assert_eq!(Users(" 12 ".into()).count().unwrap(), 12);
    }

    fn setup_users(text: &str) -> MailOptions {
        setup(SetupOptions {
            users: Some(Users(text.into())),
            ..Default::default()
        })
    }

    /// `--protocol`, `--protocol-mix` and `--jmap`: the JMAP share, refused
    /// with exit 2 where no JMAP endpoint exists or the mix is not one.
    #[test]
    fn protocols_and_their_refusals() {
        let remote = |protocol: Option<&str>, mix: Option<&str>, jmap: Option<&str>| {
            setup(SetupOptions {
                imap: Some("imap://mail.example.org".into()),
                submission: Some("smtp://mail.example.org:587".into()),
                jmap: jmap.map(Into::into),
                protocol: protocol.map(Into::into),
                protocol_mix: mix.map(Into::into),
                ..Default::default()
            })
        };
        let day = Duration::from_secs(600);
        let ok = |o: MailOptions| Resolved::resolve(&o, day).unwrap();
        let refused = |o: MailOptions, what: &str| {
            let e = Resolved::resolve(&o, day).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{e}");
            assert!(e.to_string().contains(what), "{what}: {e}");
        };
        let url = Some("https://mail.example.org");
        assert_eq!(ok(remote(None, None, None)).jmap_pct, 0);
        assert_eq!(ok(remote(Some("jmap"), None, url)).jmap_pct, 100);
        let mixed = ok(remote(None, Some("imap=70, jmap=30"), url));
        assert_eq!(mixed.jmap_pct, 30);
        // 30 of every 100 users by index, the same ones every time.
        assert_eq!((0..100).filter(|i| mixed.jmap_user(*i)).count(), 30);
        assert_eq!((0..1000).filter(|i| mixed.jmap_user(*i)).count(), 300);
        assert!(!ok(remote(None, None, url)).jmap_user(0));
        refused(remote(Some("jmap"), None, None), "need --jmap URL");
        refused(remote(Some("pop3"), None, url), "write `imap` or `jmap`");
        refused(remote(Some("jmap"), Some("jmap=100"), url), "both given");
        refused(remote(None, Some("imap=70,jmap=20"), url), "add up to 90%");
        refused(remote(None, Some("imap=70,pop=30"), url), "`pop` is not");
        refused(remote(None, Some("jmap=50,jmap=50"), url), "given twice");
        refused(remote(None, Some("imap70"), url), "e.g. imap=70,jmap=30");
        refused(
            remote(Some("jmap"), None, Some("imap://x")),
            "not http or https",
        );
        let local = |target: &str, jmap: Option<&str>| {
            setup(SetupOptions {
                target: Some(target.into()),
                protocol: Some("jmap".into()),
                jmap: jmap.map(Into::into),
                ..Default::default()
            })
        };
        refused(local("local", None), "Dovecot serves IMAP only");
        refused(local("sink", None), "the sink answers IMAP and SMTP only");
        refused(local("local", url), "--jmap addresses a running server");
    }
}
