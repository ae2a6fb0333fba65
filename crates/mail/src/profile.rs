//! User profiles as data (profiles/mail/*.toml): what one simulated user does in a
//! day, the initial mailbox content, distribution lists and the message size mix.

use mailbench_base::{ByteSize, Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The 17 task kinds of the MMB3 benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    Send,
    Read,
    Reply,
    ReplyAll,
    Forward,
    Move,
    Delete,
    PermanentlyDelete,
    FreeBusy,
    BrowseCalendar,
    MakeAppointment,
    RequestMeeting,
    CreateSmartFolder,
    DeleteSmartFolder,
    CreateRule,
    DeleteRule,
    ApplyViewSort,
}

impl TaskKind {
    pub const ALL: [TaskKind; 17] = [
        TaskKind::Send,
        TaskKind::Read,
        TaskKind::Reply,
        TaskKind::ReplyAll,
        TaskKind::Forward,
        TaskKind::Move,
        TaskKind::Delete,
        TaskKind::PermanentlyDelete,
        TaskKind::FreeBusy,
        TaskKind::BrowseCalendar,
        TaskKind::MakeAppointment,
        TaskKind::RequestMeeting,
        TaskKind::CreateSmartFolder,
        TaskKind::DeleteSmartFolder,
        TaskKind::CreateRule,
        TaskKind::DeleteRule,
        TaskKind::ApplyViewSort,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TaskKind::Send => "send",
            TaskKind::Read => "read",
            TaskKind::Reply => "reply",
            TaskKind::ReplyAll => "reply_all",
            TaskKind::Forward => "forward",
            TaskKind::Move => "move",
            TaskKind::Delete => "delete",
            TaskKind::PermanentlyDelete => "permanently_delete",
            TaskKind::FreeBusy => "free_busy",
            TaskKind::BrowseCalendar => "browse_calendar",
            TaskKind::MakeAppointment => "make_appointment",
            TaskKind::RequestMeeting => "request_meeting",
            TaskKind::CreateSmartFolder => "create_smart_folder",
            TaskKind::DeleteSmartFolder => "delete_smart_folder",
            TaskKind::CreateRule => "create_rule",
            TaskKind::DeleteRule => "delete_rule",
            TaskKind::ApplyViewSort => "apply_view_sort",
        }
    }

    /// Whether the task submits a message over SMTP.
    pub fn submits(self) -> bool {
        matches!(
            self,
            TaskKind::Send
                | TaskKind::Reply
                | TaskKind::ReplyAll
                | TaskKind::Forward
                | TaskKind::RequestMeeting
        )
    }
}

/// Recipients per message: a mean (`3.5`: 3 or 4, in the proportion that gives the
/// mean) or weights for 1, 2, 3, ... recipients (`[40, 30, 20, 10]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Recipients {
    Mean(f64),
    Weights(Vec<f64>),
}

impl Recipients {
    pub fn mean(&self) -> f64 {
        match self {
            Recipients::Mean(m) => *m,
            Recipients::Weights(w) => {
                let total: f64 = w.iter().sum();
                if total <= 0.0 {
                    return 1.0;
                }
                w.iter()
                    .enumerate()
                    .map(|(i, x)| (i + 1) as f64 * x)
                    .sum::<f64>()
                    / total
            }
        }
    }

    pub fn draw<R: rand::Rng>(&self, rng: &mut R) -> usize {
        match self {
            Recipients::Mean(m) => {
                let m = m.max(1.0);
                let base = m.floor();
                let frac = m - base;
                base as usize + usize::from(rng.random::<f64>() < frac)
            }
            Recipients::Weights(w) => {
                let total: f64 = w.iter().sum();
                if total <= 0.0 {
                    return 1;
                }
                let mut x = rng.random::<f64>() * total;
                for (i, v) in w.iter().enumerate() {
                    if x < *v {
                        return i + 1;
                    }
                    x -= v;
                }
                w.len().max(1)
            }
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// Times per user per simulated day.
    pub per_day: f64,
    /// Recipients of the message (tasks that submit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipients: Option<Recipients>,
    /// Share of messages (0..1) sent to one distribution list instead (Send).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_share: Option<f64>,
    /// Weight in the 95th-percentile score (default: per_day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Initial {
    /// Non-default folders ("Folder 01" ...).
    pub folders: u32,
    pub messages_per_folder: u32,
    pub inbox: u32,
    pub deleted_items: u32,
    #[serde(default)]
    pub sent: u32,
    /// Appointments (iCalendar messages) in the Calendar folder.
    pub calendar: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Lists {
    /// One distribution list per this many users.
    pub per_users: u32,
    /// List sizes, used in turn (the benchmark's min/avg/max is 2/10/20).
    pub sizes: Vec<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SizeClass {
    /// Text body size.
    pub body: ByteSize,
    /// Attachment size (0: none).
    #[serde(default)]
    pub attachment: ByteSize,
    pub weight: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    pub submitted_per_day: f64,
    pub delivered_per_day: f64,
    pub recipients_per_message: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub description: String,
    /// The simulated working day (the benchmark's is 8 hours).
    #[serde(with = "mailbench_base::units::serde_duration")]
    pub day: Duration,
    /// The published figures this profile is built to reproduce (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Flow>,
    pub initial: Initial,
    pub lists: Lists,
    pub sizes: Vec<SizeClass>,
    pub tasks: BTreeMap<TaskKind, TaskSpec>,
}

const MMB: &str = include_str!("../../../profiles/mail/mmb.toml");

/// Built-in profiles (the files in profiles/mail/). `loadsim-medium` is LoadSim
/// 5.5's canonical Medium MAPI user, which the MMB benchmark defines, so it
/// loads mmb.toml under its own name; LoadSim 4.0/5.0's Medium user of the
/// Resource Kit table is `loadsim4-medium` (docs/mail-load.md).
pub const BUILTIN: &[(&str, &str)] = &[
    ("mmb3", include_str!("../../../profiles/mail/mmb3.toml")),
    (
        "loadsim-light",
        include_str!("../../../profiles/mail/loadsim-light.toml"),
    ),
    ("loadsim-medium", MMB),
    (
        "loadsim-heavy",
        include_str!("../../../profiles/mail/loadsim-heavy.toml"),
    ),
    ("mmb", MMB),
    (
        "loadsim4-medium",
        include_str!("../../../profiles/mail/loadsim4-medium.toml"),
    ),
];

/// Expected mail flow of a profile per user per day.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct ExpectedFlow {
    pub submitted_per_day: f64,
    pub delivered_per_day: f64,
    pub recipients_per_message: f64,
    pub tasks_per_day: f64,
}

impl Profile {
    /// A built-in profile by name, or a TOML file by path.
    pub fn load(name_or_path: &str) -> Result<Profile> {
        if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            let mut p = Self::parse(text, name)?;
            p.name = name.to_string();
            return Ok(p);
        }
        let p = Path::new(name_or_path);
        if p.is_file() {
            let text = std::fs::read_to_string(p).map_err(|e| {
                Error::usage(format!("cannot read profile file {}: {e}", p.display()))
            })?;
            return Self::parse(&text, name_or_path);
        }
        let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
        Err(Error::usage(format!(
            "unknown mail profile `{name_or_path}`: give one of {} or a path to a .toml file",
            names.join(", ")
        )))
    }

    pub fn parse(text: &str, origin: &str) -> Result<Profile> {
        let p: Profile = toml::from_str(text)
            .map_err(|e| Error::usage(format!("mail profile {origin}: {}", e.message())))?;
        p.validate(origin)?;
        Ok(p)
    }

    fn validate(&self, origin: &str) -> Result<()> {
        let bad = |m: String| Err(Error::usage(format!("mail profile {origin}: {m}")));
        if self.day.is_zero() {
            return bad("day must be longer than 0".into());
        }
        if self.sizes.is_empty() || self.sizes.iter().all(|s| s.weight <= 0.0) {
            return bad("sizes needs at least one entry with a positive weight".into());
        }
        if self.lists.sizes.is_empty() || self.lists.per_users == 0 {
            return bad("lists needs per_users > 0 and at least one size".into());
        }
        for (k, t) in &self.tasks {
            if !(t.per_day >= 0.0 && t.per_day.is_finite()) {
                return bad(format!(
                    "tasks.{}.per_day must be zero or positive",
                    k.name()
                ));
            }
            if let Some(s) = t.list_share
                && !(0.0..=1.0).contains(&s)
            {
                return bad(format!("tasks.{}.list_share must be within 0..1", k.name()));
            }
        }
        Ok(())
    }

    pub fn task(&self, k: TaskKind) -> Option<&TaskSpec> {
        self.tasks.get(&k)
    }

    /// Score weight of a task (its `weight`, else its frequency).
    pub fn weight(&self, k: TaskKind) -> f64 {
        self.task(k)
            .map(|t| t.weight.unwrap_or(t.per_day))
            .unwrap_or(0.0)
    }

    /// Mean size of the lists for `users` users (sizes clamped to users).
    pub fn mean_list_size(&self, users: usize) -> f64 {
        let n = self.lists.sizes.len() as f64;
        self.lists
            .sizes
            .iter()
            .map(|s| (*s as usize).min(users) as f64)
            .sum::<f64>()
            / n
    }

    /// Mean deliveries of one message of task `k`.
    pub fn deliveries_per_message(&self, k: TaskKind, users: usize) -> f64 {
        let Some(t) = self.task(k) else {
            return 0.0;
        };
        let others = users.saturating_sub(1).max(1) as f64;
        let indiv = match (&t.recipients, k) {
            (Some(r), _) => r.mean(),
            (None, _) => 1.0,
        }
        .min(others);
        let share = t.list_share.unwrap_or(0.0);
        share * self.mean_list_size(users) + (1.0 - share) * indiv
    }

    /// What the profile should produce per user per day.
    pub fn expected_flow(&self, users: usize) -> ExpectedFlow {
        self.flow(users, true)
    }

    /// What the profile produces when there are no distribution lists (a
    /// remote server without `--lists-file`): list sends go to individuals,
    /// so fewer deliveries per message.
    pub fn expected_flow_without_lists(&self, users: usize) -> ExpectedFlow {
        self.flow(users, false)
    }

    fn flow(&self, users: usize, lists: bool) -> ExpectedFlow {
        let mut sub = 0.0;
        let mut del = 0.0;
        let mut tasks = 0.0;
        for (k, t) in &self.tasks {
            tasks += t.per_day;
            if k.submits() {
                sub += t.per_day;
                let per = if lists || t.list_share.unwrap_or(0.0) == 0.0 {
                    self.deliveries_per_message(*k, users)
                } else {
                    t.recipients
                        .as_ref()
                        .map_or(1.0, |r| r.mean())
                        .min(users.saturating_sub(1).max(1) as f64)
                };
                del += t.per_day * per;
            }
        }
        ExpectedFlow {
            submitted_per_day: sub,
            delivered_per_day: del,
            recipients_per_message: if sub > 0.0 { del / sub } else { 0.0 },
            tasks_per_day: tasks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_mmb3_reproduces_the_benchmark_flow() {
        for (name, _) in BUILTIN {
            let p = Profile::load(name).unwrap();
            assert_eq!(&p.name, name);
        }
        let p = Profile::load("mmb3").unwrap();
        assert_eq!(p.tasks.len(), 17, "mmb3 has all 17 task kinds");
        let f = p.expected_flow(1000);
        assert!((f.submitted_per_day - 85.0).abs() < 0.01, "{f:?}");
        assert!((f.delivered_per_day - 210.0).abs() < 0.5, "{f:?}");
        assert!((f.recipients_per_message - 2.47).abs() < 0.01, "{f:?}");
        // Send is the published 8 a day; the rest closes 85 submitted.
        assert_eq!(p.tasks[&TaskKind::Send].per_day, 8.0);
        // Without lists Send's 30 % list share goes to 2.375 individuals:
        // 8 x 2.375 = 19 instead of 37.3 deliveries, 191.7 a day in all.
        let n = p.expected_flow_without_lists(1000);
        assert!((n.delivered_per_day - 191.7).abs() < 0.05, "{n:?}");
        assert!((n.recipients_per_message - 2.255).abs() < 0.001, "{n:?}");
        assert_eq!(n.submitted_per_day, f.submitted_per_day);
        for (name, sent, recv) in [
            ("loadsim-light", 6.7, 20.4),
            ("loadsim-medium", 14.18, 66.3),
            ("loadsim-heavy", 38.6, 118.9),
            ("mmb", 14.18, 66.3),
            ("loadsim4-medium", 19.8, 55.9),
        ] {
            let f = Profile::load(name).unwrap().expected_flow(1000);
            assert!(
                (f.submitted_per_day - sent).abs() / sent < 0.02,
                "{name} {f:?}"
            );
            assert!(
                (f.delivered_per_day - recv).abs() / recv < 0.02,
                "{name} {f:?}"
            );
        }
    }

    #[test]
    fn recipients_draw_to_their_mean() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for r in [
            Recipients::Mean(2.4),
            Recipients::Weights(vec![35.0, 25.0, 17.5, 12.5, 10.0]),
        ] {
            let n = 100_000;
            let s: usize = (0..n).map(|_| r.draw(&mut rng)).sum();
            let m = s as f64 / n as f64;
            assert!((m - r.mean()).abs() < 0.02, "{r:?} {m}");
        }
    }

    #[test]
    fn bad_profiles_are_refused_by_name() {
        let e = Profile::load("mmb9").unwrap_err().to_string();
        assert!(e.contains("mmb3"), "{e}");
        let text = include_str!("../../../profiles/mail/mmb3.toml")
            .replace("per_day = 40", "per_dya = 40");
        let e = Profile::parse(&text, "x.toml").unwrap_err().to_string();
        assert!(e.contains("per_dya") || e.contains("per_day"), "{e}");
    }
}
