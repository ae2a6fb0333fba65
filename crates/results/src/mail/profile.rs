//! The mail user profile as a result echoes it (`profile`): what one
//! simulated user does in a day. Loading and checking profiles is
//! `mailbench_mail::profile`'s; the figures derived from a profile (score
//! weights, expected mail flow) are here, beside the verdict that uses them.

use mailbench_base::ByteSize;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The 17 task kinds of the MMB3 benchmark.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
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
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Lists {
    /// One distribution list per this many users.
    pub per_users: u32,
    /// List sizes, used in turn (the benchmark's min/avg/max is 2/10/20).
    pub sizes: Vec<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SizeClass {
    /// Text body size.
    pub body: ByteSize,
    /// Attachment size (0: none).
    #[serde(default)]
    pub attachment: ByteSize,
    pub weight: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    pub submitted_per_day: f64,
    pub delivered_per_day: f64,
    pub recipients_per_message: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub description: String,
    /// The simulated working day (the benchmark's is 8 hours).
    #[serde(with = "mailbench_base::units::serde_duration")]
    #[schemars(with = "String")]
    pub day: Duration,
    /// The published figures this profile is built to reproduce (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Flow>,
    pub initial: Initial,
    pub lists: Lists,
    pub sizes: Vec<SizeClass>,
    pub tasks: BTreeMap<TaskKind, TaskSpec>,
}

/// Expected mail flow of a profile per user per day.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ExpectedFlow {
    pub submitted_per_day: f64,
    pub delivered_per_day: f64,
    pub recipients_per_message: f64,
    pub tasks_per_day: f64,
}

impl Profile {
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
