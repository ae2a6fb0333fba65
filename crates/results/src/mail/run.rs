//! The mail-run result (`mail run`, kind `mail-run`) and the mail-setup result
//! (`mail setup`, kind `mail-setup`): every key result.json holds, typed. The
//! mail crate fills them; `report merge` adds several into one (merge.rs).

use crate::mail::config::{MailConfig, StartTls};
use crate::mail::profile::{ExpectedFlow, Profile, TaskKind};
use crate::merged::Merged;
use crate::verdict::{RunHeader, Verdict};
use mailbench_metrics::server::ServerSection;
use mailbench_metrics::system::DiskRates;
use mailbench_metrics::{LatencyHist, LatencySummary};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// result.json of `mail run`. The run header is under `run` (storage results
/// carry it at the top level).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MailRunResult {
    pub run: RunHeader,
    /// The options of the run, defaults applied.
    pub config: MailConfig,
    pub target: TargetInfo,
    pub profile: Profile,
    pub run_id: String,
    pub users: u64,
    pub lists: u64,
    /// The provisioning done before the run (None with `--skip-setup`).
    pub setup: Option<SetupFigures>,
    pub window: MailWindow,
    /// The users per protocol they read mail over (`--protocol`,
    /// `--protocol-mix`); absent in older results, whose users all spoke
    /// IMAP: see [`MailRunResult::user_protocols`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub protocols: BTreeMap<Protocol, u64>,
    /// Per task kind that ran, every protocol together (a run of several
    /// protocols also has each protocol's figures in `by_protocol`).
    pub tasks: BTreeMap<TaskKind, TaskFigures>,
    /// The operations measured besides the tasks (`logon`, `new_mail`).
    pub operations: BTreeMap<String, OpFigures>,
    /// The whole day's weighted p95 response time (`score` in results
    /// written before; [`crate::kind::upgrade_v1`] renames it).
    pub response_time: DayResponseTime,
    pub mail_flow: MailFlow,
    pub delivery_latency: DeliveryLatency,
    pub queue: Queue,
    pub errors: Errors,
    /// The load generator's host over the day (the server's when local).
    pub host: HostFigures,
    /// The mail store's disk (local targets), per user.
    pub disk: Option<DiskPerUser>,
    /// The server host's own figures over the measured window
    /// (`--server-metrics`, or the local target's /proc; absent in older
    /// results and when nothing was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSection>,
    /// The figures of the steady window the verdict judges (absent in older
    /// results and in merges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<crate::mail::steady::SteadySection>,
    pub generator: Generator,
    pub warnings: Vec<String>,
    pub verdict: Verdict,
    /// Set when this result is a `report merge` of several load generators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<Merged<MailHost>>,
}

/// The protocol a user reads mail over (it sends over SMTP or JMAP
/// submission alike).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Imap,
    Jmap,
}

impl Protocol {
    pub const ALL: [Protocol; 2] = [Protocol::Imap, Protocol::Jmap];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Imap => "imap",
            Protocol::Jmap => "jmap",
        }
    }

    /// The protocol of the user of index `idx` when `jmap_pct` % of the
    /// users are on JMAP (`config::jmap_user`).
    pub fn of_user(jmap_pct: u32, idx: usize) -> Protocol {
        if crate::mail::config::jmap_user(jmap_pct, idx) {
            Protocol::Jmap
        } else {
            Protocol::Imap
        }
    }

    /// The users per protocol of `users` users from user number `first`
    /// (from 0: `--first-user` − 1), `jmap_pct` % on JMAP (protocols without
    /// users left out).
    pub fn users(jmap_pct: u32, first: u64, users: u64) -> BTreeMap<Protocol, u64> {
        let mut m = BTreeMap::new();
        for idx in first as usize..(first + users) as usize {
            *m.entry(Protocol::of_user(jmap_pct, idx)).or_default() += 1;
        }
        m
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl MailRunResult {
    /// The users per protocol; an older result without them: all on IMAP.
    pub fn user_protocols(&self) -> BTreeMap<Protocol, u64> {
        if self.protocols.is_empty() {
            BTreeMap::from([(Protocol::Imap, self.users)])
        } else {
            self.protocols.clone()
        }
    }

    /// The one protocol every user spoke, None in a run of several.
    pub fn single_protocol(&self) -> Option<Protocol> {
        let p = self.user_protocols();
        match p.len() {
            1 => p.keys().next().copied(),
            _ => None,
        }
    }

    /// Each task's figures per protocol: a run of several protocols has
    /// them in `by_protocol`; a run of one, its tasks are that protocol's.
    pub fn tasks_by_protocol(&self) -> BTreeMap<(TaskKind, Protocol), ProtocolFigures> {
        let single = self.single_protocol();
        let mut out = BTreeMap::new();
        for (k, t) in &self.tasks {
            match single {
                Some(p) if t.by_protocol.is_empty() => {
                    out.insert((*k, p), t.protocol_figures());
                }
                _ => {
                    for (p, f) in &t.by_protocol {
                        out.insert((*k, *p), f.clone());
                    }
                }
            }
        }
        out
    }

    /// Each operation's figures (logon, new mail) per protocol, as
    /// [`MailRunResult::tasks_by_protocol`].
    pub fn operations_by_protocol(&self) -> BTreeMap<(String, Protocol), ProtocolFigures> {
        let single = self.single_protocol();
        let mut out = BTreeMap::new();
        for (n, o) in &self.operations {
            match single {
                Some(p) if o.by_protocol.is_empty() => {
                    let f = ProtocolFigures {
                        latency: o.latency,
                        errors: o.errors,
                        skipped: 0,
                        per_user_per_day: 0.0,
                        hist: o.hist.clone(),
                    };
                    out.insert((n.clone(), p), f);
                }
                _ => {
                    for (p, f) in &o.by_protocol {
                        out.insert((n.clone(), *p), f.clone());
                    }
                }
            }
        }
        out
    }
}

/// A histogram's figures in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct LatencyFigures {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl From<LatencySummary> for LatencyFigures {
    fn from(s: LatencySummary) -> Self {
        let ms = |us: u64| us as f64 / 1000.0;
        LatencyFigures {
            count: s.count,
            mean_ms: s.mean_us / 1000.0,
            p50_ms: ms(s.p50_us),
            p95_ms: ms(s.p95_us),
            p99_ms: ms(s.p99_us),
            max_ms: ms(s.max_us),
        }
    }
}

/// One task kind over the run: latency from every sample, errors and skips.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TaskFigures {
    #[serde(flatten)]
    pub latency: LatencyFigures,
    pub errors: u64,
    pub skipped: u64,
    /// Why tasks were skipped (`no rule`, ...), with counts.
    pub skip_reasons: BTreeMap<String, u64>,
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Weight in the score.
    pub weight: f64,
    /// Completed or failed, per user per simulated day.
    pub per_user_per_day: f64,
    pub hist: LatencyHist,
    /// In a run whose users spoke several protocols: this task's figures
    /// per protocol (absent when one protocol ran: `protocols` names it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_protocol: BTreeMap<Protocol, ProtocolFigures>,
}

impl TaskFigures {
    /// The figures every protocol together, as one protocol's.
    pub fn protocol_figures(&self) -> ProtocolFigures {
        ProtocolFigures {
            latency: self.latency,
            errors: self.errors,
            skipped: self.skipped,
            per_user_per_day: self.per_user_per_day,
            hist: self.hist.clone(),
        }
    }
}

/// One task (or operation) over one protocol's users.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ProtocolFigures {
    #[serde(flatten)]
    pub latency: LatencyFigures,
    pub errors: u64,
    pub skipped: u64,
    /// Completed or failed, per user of this protocol per simulated day
    /// (0 for operations other than tasks).
    pub per_user_per_day: f64,
    pub hist: LatencyHist,
}

/// An operation measured besides the tasks.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OpFigures {
    #[serde(flatten)]
    pub latency: LatencyFigures,
    pub errors: u64,
    pub hist: LatencyHist,
    /// In a run of several protocols: the figures per protocol.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_protocol: BTreeMap<Protocol, ProtocolFigures>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct MailWindow {
    pub ramp_up_s: f64,
    /// The real length of the simulated day (`--day-length`).
    pub day_s: f64,
    pub simulated_day_s: f64,
    /// simulated_day_s / day_s.
    pub compression: f64,
    pub drain_s: f64,
}

/// The weighted 95th-percentile response time over every sample of the day
/// (the verdict judges the steady window's, `steady.response_time_ms`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct DayResponseTime {
    pub weighted_p95_ms: f64,
    /// The weight of every task kind of the profile.
    pub weights: BTreeMap<String, f64>,
    pub limit_ms: f64,
}

/// Submitted and delivered, per some unit.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct FlowRates {
    pub submitted: f64,
    pub delivered: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct MailFlow {
    pub submitted: u64,
    pub recipients_addressed: u64,
    pub expected_deliveries: u64,
    /// Deliveries seen by the recipients.
    pub delivered: u64,
    /// Deliveries the (local) server logged.
    pub server_deliveries: Option<u64>,
    pub per_user_per_day: FlowRates,
    pub per_hour_real: FlowRates,
    pub per_simulated_hour: FlowRates,
    pub recipients_per_message: f64,
    /// What the profile should produce per user per day.
    pub profile_expects: ExpectedFlow,
    /// A remote server without distribution lists (no `--lists-file`):
    /// list mail goes to individuals, so the day is lighter; what the
    /// profile produces then. Absent when the run had lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_lists: Option<ExpectedFlow>,
}

impl MailFlow {
    /// The flow with its rates derived from its counts: per user per day
    /// (one simulated day per user; none without users), per real hour of a
    /// day of `real_hours`, per simulated hour of a day of `sim_hours`, and
    /// the recipients per message.
    pub fn with_rates(self, users: u64, real_hours: f64, sim_hours: f64) -> MailFlow {
        let rates = |d: f64| FlowRates {
            submitted: self.submitted as f64 / d,
            delivered: self.delivered as f64 / d,
        };
        MailFlow {
            per_user_per_day: if users > 0 {
                rates(users as f64)
            } else {
                FlowRates::default()
            },
            per_hour_real: rates(real_hours.max(1e-9)),
            per_simulated_hour: rates(sim_hours.max(1e-9)),
            recipients_per_message: if self.submitted > 0 {
                self.delivered as f64 / self.submitted as f64
            } else {
                0.0
            },
            ..self
        }
    }

    /// "the day is lighter …" when the run had no distribution lists and
    /// the profile sends to lists, else None.
    pub fn lighter_day(&self) -> Option<String> {
        let w = self.without_lists.as_ref()?;
        let p = &self.profile_expects;
        if p.delivered_per_day <= 0.0 || w.delivered_per_day >= p.delivered_per_day * 0.999 {
            return None;
        }
        Some(format!(
            "no distribution lists on this server (give --lists-file): list mail goes to \
             individuals, so the day is {:.1} % lighter than the profile: {:.1} deliveries per \
             user per day instead of {:.1}, {:.2} recipients per message instead of {:.2}",
            100.0 * (1.0 - w.delivered_per_day / p.delivered_per_day),
            w.delivered_per_day,
            p.delivered_per_day,
            w.recipients_per_message,
            p.recipients_per_message
        ))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DeliveryLatency {
    pub summary: LatencyFigures,
    pub within_s: f64,
    pub within_pct: f64,
    /// Deliveries seen within `within_s` (older results lack it: see
    /// [`DeliveryLatency::delivered_within`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_within: Option<u64>,
    pub hist: LatencyHist,
}

impl DeliveryLatency {
    /// Deliveries seen within the limit: recorded by newer results, else
    /// exactly recoverable from the percentage and the expected count.
    pub fn delivered_within(&self, expected: u64) -> u64 {
        self.delivered_within.unwrap_or_else(|| {
            if expected == 0 {
                0
            } else {
                (self.within_pct * expected as f64 / 100.0).round() as u64
            }
        })
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct QueueSample {
    pub t_s: f64,
    pub length: u64,
}

/// The server's queue over the run (where it can be sampled).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Queue {
    /// `postqueue -j`, or why there is none.
    pub source: String,
    pub samples: Vec<QueueSample>,
    pub max: Option<u64>,
    #[serde(rename = "final")]
    pub final_length: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Errors {
    pub total: u64,
    pub rate_pct: f64,
    pub by_kind: BTreeMap<String, u64>,
    /// The first error messages (a few dozen at most).
    pub samples: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct HostFigures {
    pub cpu_busy_pct: f64,
    pub cpu_iowait_pct: f64,
    pub memory_used_pct_max: f64,
}

/// The mail store's disk over the day, and per user.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct DiskPerUser {
    /// The device (several, comma-separated, in a merge).
    pub device: Option<String>,
    pub rates: DiskRates,
    pub reads_per_s_per_user: f64,
    pub writes_per_s_per_user: f64,
    pub iops_per_user: f64,
}

impl DiskPerUser {
    pub fn of(device: Option<String>, rates: DiskRates, users: f64) -> DiskPerUser {
        let per = users.max(1.0);
        DiskPerUser {
            device,
            rates,
            reads_per_s_per_user: rates.reads_per_s / per,
            writes_per_s_per_user: rates.writes_per_s / per,
            iops_per_user: (rates.reads_per_s + rates.writes_per_s) / per,
        }
    }
}

/// What driving the users cost the load generator.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Generator {
    pub cpu_s: f64,
    pub imap_commands: u64,
    pub smtp_commands: u64,
    pub sieve_commands: u64,
    /// JMAP requests (POSTs to the API URL) of the JMAP users (absent in
    /// older results).
    #[serde(default)]
    pub jmap_requests: u64,
    /// JMAP method calls in those requests (several to a request).
    #[serde(default)]
    pub jmap_method_calls: u64,
    /// Push events (EventSource `state` events) the JMAP users received.
    #[serde(default)]
    pub jmap_push_events: u64,
    /// Push streams opened again after they dropped (after a back-off).
    #[serde(default)]
    pub jmap_push_reconnects: u64,
    /// CPU seconds per 1000 commands: IMAP, SMTP and ManageSieve commands
    /// and JMAP method calls (a method call is a JMAP client's unit of
    /// work, as a command is IMAP's; requests batch several).
    #[serde(default)]
    pub cpu_s_per_1000_commands: f64,
    #[serde(default)]
    pub simulated_user_hours: f64,
    #[serde(default)]
    pub cpu_s_per_1000_user_hours: f64,
    /// How late the generator started operations it had planned.
    pub sched_delay: LatencyFigures,
    pub sched_delay_hist: LatencyHist,
    pub planned_tasks: u64,
    /// Tasks completed, failed or skipped.
    pub executed_tasks: u64,
    /// The generator's memory (resident set) and file limit.
    #[serde(default, flatten)]
    pub memory: GeneratorMemory,
}

/// The generator process's memory over the run (resident set size, sampled
/// every second; 0 when not measured) and the users its file limit holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GeneratorMemory {
    /// The largest resident set over the run (setup excluded); in a merge, summed
    /// over the generators.
    #[serde(default)]
    pub rss_max_bytes: u64,
    /// `rss_max_bytes` per simulated user.
    #[serde(default)]
    pub rss_max_bytes_per_user: f64,
    /// The resident set 10 s into the day (a tenth into a shorter one), once
    /// the day's first tasks have run: the base the day's growth is judged on.
    #[serde(default)]
    pub rss_day_start_bytes: u64,
    /// The resident set at the end of the day (or when the run was stopped).
    #[serde(default)]
    pub rss_day_end_bytes: u64,
    /// The open-file limit the generator ran with (raised to the hard limit).
    #[serde(default)]
    pub file_limit: u64,
    /// The most users one generator holds with that limit (in a merge, summed).
    #[serde(default)]
    pub max_users: u64,
}

impl GeneratorMemory {
    /// The figures of several generators together: sizes and capacities summed.
    pub fn sum(all: &[GeneratorMemory], users: u64) -> GeneratorMemory {
        let total = |f: fn(&GeneratorMemory) -> u64| all.iter().map(f).sum::<u64>();
        let rss = total(|m| m.rss_max_bytes);
        GeneratorMemory {
            rss_max_bytes: rss,
            rss_max_bytes_per_user: rss as f64 / users.max(1) as f64,
            rss_day_start_bytes: total(|m| m.rss_day_start_bytes),
            rss_day_end_bytes: total(|m| m.rss_day_end_bytes),
            file_limit: all.iter().map(|m| m.file_limit).max().unwrap_or(0),
            max_users: total(|m| m.max_users),
        }
    }
}

/// What the users sent, by protocol: the counts of a generator's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Commands {
    pub imap: u64,
    pub smtp: u64,
    pub sieve: u64,
    pub jmap_requests: u64,
    pub jmap_method_calls: u64,
    pub jmap_push_events: u64,
    pub jmap_push_reconnects: u64,
}

impl Commands {
    /// The commands CPU per 1000 commands counts: IMAP, SMTP, ManageSieve
    /// commands and JMAP method calls.
    pub fn counted(&self) -> u64 {
        self.imap + self.smtp + self.sieve + self.jmap_method_calls
    }

    /// The counts of several generators together.
    pub fn sum(all: impl IntoIterator<Item = Commands>) -> Commands {
        all.into_iter().fold(Commands::default(), |a, b| Commands {
            imap: a.imap + b.imap,
            smtp: a.smtp + b.smtp,
            sieve: a.sieve + b.sieve,
            jmap_requests: a.jmap_requests + b.jmap_requests,
            jmap_method_calls: a.jmap_method_calls + b.jmap_method_calls,
            jmap_push_events: a.jmap_push_events + b.jmap_push_events,
            jmap_push_reconnects: a.jmap_push_reconnects + b.jmap_push_reconnects,
        })
    }
}

impl Generator {
    /// The figures from the counts: CPU per 1000 commands (JMAP method
    /// calls counted as commands) and per 1000 simulated user-hours.
    pub fn of(
        cpu_s: f64,
        commands: Commands,
        user_hours: f64,
        sched: LatencyHist,
        planned_tasks: u64,
        executed_tasks: u64,
    ) -> Generator {
        let all = commands.counted();
        Generator {
            cpu_s,
            imap_commands: commands.imap,
            smtp_commands: commands.smtp,
            sieve_commands: commands.sieve,
            jmap_requests: commands.jmap_requests,
            jmap_method_calls: commands.jmap_method_calls,
            jmap_push_events: commands.jmap_push_events,
            jmap_push_reconnects: commands.jmap_push_reconnects,
            cpu_s_per_1000_commands: if all > 0 {
                1000.0 * cpu_s / all as f64
            } else {
                0.0
            },
            simulated_user_hours: user_hours,
            cpu_s_per_1000_user_hours: if user_hours > 0.0 {
                1000.0 * cpu_s / user_hours
            } else {
                0.0
            },
            sched_delay: sched.summary().into(),
            sched_delay_hist: sched,
            planned_tasks,
            executed_tasks,
            memory: GeneratorMemory::default(),
        }
    }

    /// The counts the figures came from.
    pub fn commands(&self) -> Commands {
        Commands {
            imap: self.imap_commands,
            smtp: self.smtp_commands,
            sieve: self.sieve_commands,
            jmap_requests: self.jmap_requests,
            jmap_method_calls: self.jmap_method_calls,
            jmap_push_events: self.jmap_push_events,
            jmap_push_reconnects: self.jmap_push_reconnects,
        }
    }
}

/// The target as the run saw it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct TargetInfo {
    /// `local` or `remote` (`mixed: ...` in a merge of both).
    pub kind: String,
    pub imap: String,
    pub submission: String,
    pub sieve: Option<String>,
    #[serde(default)]
    pub tls: TlsInfo,
    /// The local servers' folder.
    pub local_dir: Option<String>,
    /// What the local target runs (None for remote targets).
    pub server: Option<ServerInfo>,
}

/// How the connections were protected.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct TlsInfo {
    /// How each endpoint's connection was protected at start.
    pub connections: Option<Connections>,
    pub starttls: StartTls,
    pub certificates_verified: bool,
    /// How certificates were checked, in words.
    pub certificates: String,
    pub ca_file: Option<String>,
    pub cleartext_auth_allowed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Connections {
    pub imap: String,
    pub submission: String,
    pub sieve: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ServerInfo {
    pub software: String,
    pub fsync: String,
    pub mail_location: String,
}

/// Provisioning of users, folders and initial content.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SetupFigures {
    pub users: u64,
    pub users_ok: u64,
    pub lists: u64,
    pub folders_created: u64,
    pub messages_appended: u64,
    pub bytes_appended: u64,
    pub messages_present: u64,
    pub errors_by_kind: BTreeMap<String, u64>,
    pub error_samples: Vec<String>,
    pub seconds: f64,
    pub appends_per_s: f64,
    /// Where the first provisioned user's mailboxes are on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mailboxes: Option<MailboxLayout>,
}

/// Where one user's mailboxes are on the server (personal namespace,
/// hierarchy delimiter, special-use folders).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct MailboxLayout {
    /// Personal namespace prefix (`""`, `INBOX.`, ...).
    pub prefix: String,
    /// Hierarchy delimiter (None: the server has no hierarchy).
    pub delimiter: Option<char>,
    pub sent: String,
    pub drafts: String,
    pub deleted_items: String,
    /// The server's \Junk mailbox, if it has one.
    pub junk: Option<String>,
    /// Roles found by special-use attributes (the others are the profile's names).
    pub special_use: Vec<String>,
}

/// One load generator's own figures inside a merged mail result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct MailHost {
    /// Unique label (the hostname, `#2`... appended when it repeats); the
    /// generator's warnings and error samples are prefixed `label:`.
    pub label: String,
    pub source: String,
    pub hostname: String,
    pub started: String,
    pub ended: String,
    pub run_id: String,
    /// The IMAP server it drove.
    pub target: String,
    pub user_format: String,
    pub first_user: u64,
    pub users: u64,
    /// Its whole day's weighted p95 response time (`score_ms` before).
    pub response_time_ms: f64,
    pub submitted: u64,
    pub expected_deliveries: u64,
    pub delivered: u64,
    pub within_pct: f64,
    pub errors: u64,
    pub error_rate_pct: f64,
    pub verdict: Verdict,
}

/// result.json of `mail setup`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MailSetupResult {
    pub run: RunHeader,
    pub config: MailConfig,
    pub target: TargetInfo,
    pub profile: Profile,
    pub topology: TopologyInfo,
    pub setup: SetupFigures,
    /// A note for the user (empty when none).
    pub note: String,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct TopologyInfo {
    pub users: u64,
    pub lists: Vec<ListInfo>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ListInfo {
    pub address: String,
    pub size: u64,
}

/// One line of a mail run's intervals.jsonl.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MailInterval {
    pub t_s: f64,
    /// `ramp_up`, `day` or `drain`.
    pub phase: String,
    pub interval_s: f64,
    pub ops: BTreeMap<String, IntervalOp>,
    pub submitted: u64,
    pub delivered: u64,
    pub delivery_p95_ms: f64,
    pub delivery_hist: String,
    pub sched_delay_p99_ms: f64,
    pub sched_delay_hist: String,
    #[serde(default)]
    pub total_submitted: u64,
    #[serde(default)]
    pub total_expected_deliveries: u64,
    #[serde(default)]
    pub total_delivered: u64,
    pub queue_length: Option<u64>,
    pub cpu_busy_pct: f64,
    pub cpu_iowait_pct: f64,
    pub memory_used_pct: f64,
    pub disk: Option<DiskRates>,
    /// The generator's resident set at the end of the interval, bytes
    /// (absent in older results and in merges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// In a merge: how many generators had this interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generators: Option<u64>,
}

/// One operation over one interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IntervalOp {
    pub count: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    /// HDR histogram (µs), base64 V2+DEFLATE.
    pub hist: String,
}

impl IntervalOp {
    /// One interval's line for an operation: its histogram and errors.
    pub fn of(h: &LatencyHist, errors: u64) -> IntervalOp {
        let sum = h.summary();
        IntervalOp {
            count: sum.count,
            errors,
            p50_ms: sum.p50_us as f64 / 1000.0,
            p95_ms: sum.p95_us as f64 / 1000.0,
            hist: h.to_base64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Users split into slices (generators, MPI ranks) are assigned their
        /// protocols by number: the slices' counts add up to the whole run's,
        /// and the whole run holds the mix to within one user.
        #[test]
        fn slices_add_up_to_the_whole_mix(pct in 0u32..=100, users in 1u64..500, cut in 0u64..500) {
            let cut = cut.min(users);
            let whole = Protocol::users(pct, 0, users);
            let mut sum = Protocol::users(pct, 0, cut);
            for (p, n) in Protocol::users(pct, cut, users - cut) {
                *sum.entry(p).or_default() += n;
            }
            prop_assert_eq!(&sum, &whole);
            let jmap = whole.get(&Protocol::Jmap).copied().unwrap_or(0);
            let want = users * u64::from(pct) / 100;
            prop_assert!(jmap.abs_diff(want) <= 1, "{} JMAP users of {}, {}% asked", jmap, users, pct);
        }
    }
}
