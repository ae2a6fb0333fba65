//! `mail setup` and `mail run` against an in-process fake IMAP/SMTP server
//! (tests/fake) whose namespace, special-use mailboxes, capabilities, speed
//! and quota each test chooses: protocol behaviour checked exactly, with no
//! real server and nothing that depends on this machine's speed.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod conform;
mod fake;
mod fake_jmap;

use fake::{Fake, FakeConfig};
use mailbench_base::ExitStatus;
use mailbench_base::interrupt::Interrupt;
use mailbench_base::rundir::RunDir;
use mailbench_mail::command::{Output, run, setup};
use mailbench_mail::hooks::RunHooks;
use mailbench_mail::options::{Dur, MailOptions, ResolveExt, Resolved, RunOptions, SetupOptions};
use mailbench_mail::profile::ProfileExt;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    /// Options for `users` users of `fake` (password from a file).
    fn options(&self, fake: &Fake, users: usize, profile: &str) -> MailOptions {
        let pw = self.path("password");
        std::fs::write(&pw, "fake-secret\n").unwrap();
        let setup = SetupOptions {
            imap: Some(format!("imap://127.0.0.1:{}", fake.imap_port)),
            submission: Some(format!("smtp://127.0.0.1:{}", fake.smtp_port)),
            users: Some(users.into()),
            user_format: Some("user{n}@fake.test".into()),
            password_file: Some(pw),
            profile: Some(profile.into()),
            op_timeout: Some(Dur(Duration::from_secs(5))),
            ..Default::default()
        };
        MailOptions {
            setup,
            ..Default::default()
        }
    }

    fn profile(&self, toml: &str) -> String {
        let p = self.path("profile.toml");
        std::fs::write(&p, toml).unwrap();
        p.to_string_lossy().into_owned()
    }
}

/// A quiet run (no live line).
const OUT: Output = Output {
    json: false,
    quiet: true,
};

/// A run folder of the test's own in `base`.
fn run_dir(base: &Path) -> RunDir {
    RunDir::at(&base.join("run")).unwrap()
}

fn resolve(o: &MailOptions) -> Resolved {
    let p = mailbench_mail::profile::Profile::load(o.setup.profile.as_deref().unwrap()).unwrap();
    Resolved::resolve(o, p.day).unwrap()
}

fn do_setup(o: &MailOptions) -> (ExitStatus, Value) {
    let base = tempfile::tempdir().unwrap();
    let result = setup(resolve(o), &run_dir(base.path()), &Interrupt::never()).unwrap();
    let st = result.verdict.exit_status();
    (st, serde_json::to_value(&result).unwrap())
}

fn do_run(o: &MailOptions) -> (ExitStatus, Value) {
    let base = tempfile::tempdir().unwrap();
    let run = run(resolve(o), &run_dir(base.path()), &OUT, RunHooks::default()).unwrap();
    let st = run.result.verdict.exit_status();
    (st, serde_json::to_value(&run.result).unwrap())
}

fn short_day(mut o: MailOptions, day_s: u64) -> MailOptions {
    o.run.day_length = Some(Dur(Duration::from_secs(day_s)));
    o.run.ramp_up = Some(Dur(Duration::from_millis(500)));
    o.run.drain = Some(Dur(Duration::from_secs(10)));
    o.run.interval = Some(Dur(Duration::from_secs(1)));
    o
}

/// A profile of three Inbox messages, `calendar` appointments, 1 KB
/// messages and `tasks` (TOML).
fn profile_toml(description: &str, calendar: u32, tasks: &str) -> String {
    format!(
        "name = \"test\"\ndescription = \"{description}\"\nday = \"8h\"\n\
         [initial]\nfolders = 0\nmessages_per_folder = 0\ninbox = 3\ndeleted_items = 0\ncalendar = {calendar}\n\
         [lists]\nper_users = 10\nsizes = [2]\n[[sizes]]\nbody = \"1KB\"\nweight = 1\n{tasks}"
    )
}

fn errors(v: &Value) -> u64 {
    v["errors"]["total"].as_u64().unwrap()
}

/// A server with personal mailboxes under `INBOX.` (`.` delimiter) that
/// refuses names outside it, and its own \Sent, \Trash and \Junk mailboxes:
/// setup creates only what is missing, under the prefix, and the run files
/// sent mail in the server's \Sent and deleted mail in its \Trash.
#[test]
fn namespaces_and_special_use_mailboxes_are_followed() {
    let fake = Fake::start(FakeConfig {
        prefix: "INBOX.",
        delim: '.',
        special: vec![
            ("INBOX.Sent Messages", "\\Sent"),
            ("INBOX.Trash", "\\Trash"),
            ("INBOX.Spam", "\\Junk"),
        ],
        ..Default::default()
    });
    let env = Env::new();
    let o = env.options(&fake, 3, "loadsim-light");
    let (st, v) = do_setup(&o);
    assert_eq!(st, ExitStatus::Pass, "{}", v["setup"]);
    let s = &v["setup"];
    assert_eq!(s["users_ok"], 3, "{s}");
    assert_eq!(s["mailboxes"]["sent"], "INBOX.Sent Messages", "{s}");
    assert_eq!(s["mailboxes"]["deleted_items"], "INBOX.Trash", "{s}");
    assert_eq!(s["mailboxes"]["junk"], "INBOX.Spam", "{s}");
    assert_eq!(s["mailboxes"]["prefix"], "INBOX.", "{s}");
    let boxes = fake.mailboxes("user1@fake.test");
    for want in [
        "INBOX.Drafts",
        "INBOX.Calendar",
        "INBOX.Folder 01",
        "INBOX.Folder 20",
    ] {
        assert!(boxes.iter().any(|b| b == want), "{want} missing: {boxes:?}");
    }
    for unwanted in ["Sent", "INBOX.Sent", "INBOX.Deleted Items", "Calendar"] {
        assert!(
            !boxes.iter().any(|b| b == unwanted),
            "{unwanted} created: {boxes:?}"
        );
    }
    // loadsim-light: 1 message in Deleted Items, i.e. the server's Trash.
    assert_eq!(fake.count("user1@fake.test", "INBOX.Trash"), 1);
    // 20 folders + Drafts + Calendar + the search folder; Sent and Trash exist.
    assert_eq!(s["folders_created"], 3 * 23, "{s}");

    let (_, v) = do_run(&short_day(
        MailOptions {
            run: RunOptions {
                skip_setup: Some(true),
                ..o.run
            },
            ..o
        },
        6,
    ));
    assert_eq!(errors(&v), 0, "{}", v["errors"]);
    assert!(v["tasks"]["send"]["count"].as_u64().unwrap() > 0);
    let sent: usize = (1..=3)
        .map(|i| fake.count(&format!("user{i}@fake.test"), "INBOX.Sent Messages"))
        .sum();
    assert!(sent > 0, "nothing filed in the server's \\Sent");
}

/// Every user is busy all day (a slow server, a task due every few ms):
/// new mail shows up only in the answers to the tasks' own commands (a
/// SELECT of the Inbox after the Calendar, a NOOP-free day). It must still
/// be fetched right after the task, not at the end of the day, and read.
#[test]
fn arrivals_announced_inside_tasks_are_fetched_at_once() {
    let fake = Fake::start(FakeConfig {
        delay: Duration::from_millis(3),
        ..Default::default()
    });
    let env = Env::new();
    let profile = env.profile(&profile_toml(
        "always busy: sends, calendar browsing and reads back to back",
        3,
        "[tasks.send]\nper_day = 600\nrecipients = 1.0\n[tasks.browse_calendar]\nper_day = 600\n[tasks.read]\nper_day = 600\n",
    ));
    let o = env.options(&fake, 4, &profile);
    let (st, _) = do_setup(&o);
    assert_eq!(st, ExitStatus::Pass);
    let day = 8;
    let (_, v) = do_run(&short_day(o, day));
    assert_eq!(errors(&v), 0, "{}", v["errors"]);
    let d = &v["delivery_latency"]["summary"];
    let f = &v["mail_flow"];
    assert_eq!(f["delivered"], f["expected_deliveries"], "{f}");
    assert!(f["delivered"].as_u64().unwrap() > 100, "{f}");
    // Seen after at most a few tasks (each ~10 ms here), never near the end of
    // the day: well under an eighth of it.
    let p95 = d["p95_ms"].as_f64().unwrap();
    assert!(
        p95 < day as f64 * 1000.0 / 8.0,
        "delivery p95 {p95} ms: {d}"
    );
    // Fetched in time to be read: Read opens the oldest unread message, and
    // there are as many reads as deliveries.
    let (delivered, read) = (1..=4)
        .map(|i| fake.delivered_read(&format!("user{i}@fake.test")))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert!(
        read * 2 > delivered,
        "only {read} of {delivered} delivered messages were read"
    );
}

/// Without IDLE, users poll on their own schedule: about one poll per
/// `--poll-interval` whatever the tasks do, even when a task is always due.
#[test]
fn polling_runs_on_its_own_schedule() {
    let fake = Fake::start(FakeConfig {
        caps: vec!["LITERAL+", "NAMESPACE", "MOVE", "SORT", "UIDPLUS"],
        ..Default::default()
    });
    let env = Env::new();
    // Tasks that stay in the Inbox, so every poll is a NOOP.
    let profile = env.profile(&profile_toml(
        "reads and sends every few milliseconds",
        0,
        "[tasks.send]\nper_day = 400\nrecipients = 1.0\n[tasks.read]\nper_day = 1200\n",
    ));
    let mut o = env.options(&fake, 4, &profile);
    o.run.poll_interval = Some(Dur(Duration::from_millis(500)));
    let (st, _) = do_setup(&o);
    assert_eq!(st, ExitStatus::Pass);
    let day = 10;
    let (_, v) = do_run(&short_day(o, day));
    assert_eq!(errors(&v), 0, "{}", v["errors"]);
    // 4 users x (10 s day + 0.5 s ramp-up) / 0.5 s.
    let expected = 4.0 * (day as f64 + 0.5) / 0.5;
    let noops = fake.verb_count("NOOP") as f64;
    assert!(
        noops >= 0.8 * expected && noops <= 1.3 * expected,
        "{noops} polls, about {expected} due"
    );
    assert_eq!(v["delivery_latency"]["within_pct"], 100.0);
}

/// A user whose setup fails half-way still reports what it stored, so the
/// next setup's "already present" matches.
#[test]
fn a_failed_setup_reports_what_it_stored() {
    let fake = Fake::start(FakeConfig {
        append_limit: Some(7),
        ..Default::default()
    });
    let env = Env::new();
    let o = env.options(&fake, 3, "loadsim-light");
    let (st, v) = do_setup(&o);
    assert_eq!(st, ExitStatus::Fail);
    let s = &v["setup"];
    assert_eq!(s["users_ok"], 0, "{s}");
    assert_eq!(s["messages_appended"], 21, "{s}");
    let (_, again) = do_setup(&o);
    assert_eq!(again["setup"]["messages_present"], 21, "{}", again["setup"]);
    assert_eq!(again["setup"]["messages_appended"], 0, "{}", again["setup"]);
}

/// Distribution lists of a remote server (`--lists-file`): sends to a list
/// count one delivery per simulated member, and the flow has the profile's
/// list share.
#[test]
fn lists_of_a_remote_server_are_used() {
    let members: Vec<String> = (1..=6).map(|i| format!("user{i}@fake.test")).collect();
    let fake = Fake::start(FakeConfig {
        lists: vec![
            ("team@fake.test".into(), members[..4].to_vec()),
            ("all@fake.test".into(), members.clone()),
        ],
        ..Default::default()
    });
    let env = Env::new();
    let lists = env.path("lists");
    std::fs::write(
        &lists,
        format!(
            "team@fake.test: {}\nall@fake.test {}\n",
            members[..4].join(", "),
            members.join(" ")
        ),
    )
    .unwrap();
    let mut o = env.options(&fake, 6, "mmb3");
    o.setup.lists_file = Some(lists);
    let (st, _) = do_setup(&o);
    assert_eq!(st, ExitStatus::Pass);
    let (_, v) = do_run(&short_day(o, 6));
    assert_eq!(errors(&v), 0, "{}", v["errors"]);
    assert_eq!(v["lists"], 2);
    let f = &v["mail_flow"];
    assert_eq!(f["delivered"], f["expected_deliveries"], "{f}");
    let st = fake.state.lock().unwrap();
    let to_lists = st
        .submitted
        .iter()
        .filter(|m| {
            let t = String::from_utf8_lossy(m);
            t.contains("To: <team@fake.test>") || t.contains("To: <all@fake.test>")
        })
        .count();
    assert!(to_lists > 0, "no message went to a list");
}

/// `--trace-imap DIR`: one file per user with both directions of the IMAP
/// traffic, and never the password.
#[test]
fn imap_traces_leave_out_the_password() {
    let fake = Fake::start(FakeConfig::default());
    let env = Env::new();
    let trace = env.path("trace");
    let mut o = env.options(&fake, 2, "loadsim-light");
    o.setup.trace_imap = Some(trace.clone());
    let (st, _) = do_setup(&o);
    assert_eq!(st, ExitStatus::Pass);
    let t = std::fs::read_to_string(trace.join("user1@fake.test.imap.txt")).unwrap();
    assert!(
        t.contains(" C: a1 LOGIN \"user1@fake.test\" \"***\""),
        "{t}"
    );
    assert!(t.contains(" S: a1 OK"), "{t}");
    assert!(t.contains("APPEND"), "{t}");
    for f in std::fs::read_dir(&trace).unwrap() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        assert!(!text.contains("fake-secret"), "a password in a trace");
    }
    assert!(trace.join("user2@fake.test.imap.txt").is_file());
}

/// Every message a run submits (send, reply, reply all, forward, meeting
/// request, built from what the server returned) and every appointment it
/// files passes the parser checks; replies name the message they answer.
#[test]
fn every_message_of_a_run_is_conformant() {
    let fake = Fake::start(FakeConfig::default());
    let env = Env::new();
    let o = env.options(&fake, 5, "mmb3");
    let (st, _) = do_setup(&o);
    assert_eq!(st, ExitStatus::Pass);
    let (_, v) = do_run(&short_day(o, 8));
    assert_eq!(errors(&v), 0, "{}", v["errors"]);
    for k in [
        "send",
        "reply",
        "reply_all",
        "forward",
        "request_meeting",
        "make_appointment",
    ] {
        assert!(
            v["tasks"][k]["count"].as_u64().unwrap_or(0) > 0,
            "{k} never ran"
        );
    }
    let submitted = fake.state.lock().unwrap().submitted.clone();
    let mut replies = 0;
    let mut forwards = 0;
    for (i, m) in submitted.iter().enumerate() {
        let p = conform::check(&format!("submitted message {i}"), m);
        let subject = p.subject().unwrap_or("").to_string();
        if subject.starts_with("RE:") {
            replies += 1;
            let irt = conform::ids(p.in_reply_to());
            assert_eq!(irt.len(), 1, "{subject}: In-Reply-To {irt:?}");
            assert!(conform::ids(p.references()).contains(&irt[0]), "{subject}");
        }
        if subject.starts_with("FW:") {
            forwards += 1;
            assert!(p.parts.iter().any(|x| x.message().is_some()), "{subject}");
        }
    }
    assert!(
        replies > 0 && forwards > 0,
        "{replies} replies, {forwards} forwards"
    );
    let cal = fake.messages("user1@fake.test", "Calendar");
    assert!(!cal.is_empty());
    for (i, m) in cal.iter().enumerate() {
        conform::check(&format!("calendar item {i}"), m);
    }
}

/// One message of each kind the profiles produce, each from a run whose
/// profile has only that task, shown as mail-parser parses it (key headers,
/// MIME tree with content types and transfer encodings; visible with
/// `--nocapture`) and checked: conformant, Message-IDs in one pair of angle
/// brackets, replies naming the message they answer, a forward's
/// message/rfc822 part never base64 or quoted-printable (RFC 2046 5.2.1),
/// meeting requests and appointments carrying their iCalendar method.
#[test]
fn one_message_of_each_kind_is_shown_and_conformant() {
    for (kind, task) in [
        ("send", "[tasks.send]\nper_day = 200\nrecipients = 2.0\n"),
        ("reply", "[tasks.reply]\nper_day = 200\nrecipients = 1.0\n"),
        (
            "reply all",
            "[tasks.reply_all]\nper_day = 200\nrecipients = 3.0\n",
        ),
        (
            "forward",
            "[tasks.forward]\nper_day = 200\nrecipients = 1.0\n",
        ),
        (
            "meeting request",
            "[tasks.request_meeting]\nper_day = 200\nrecipients = 2.0\n",
        ),
        ("appointment", "[tasks.make_appointment]\nper_day = 200\n"),
    ] {
        let fake = Fake::start(FakeConfig::default());
        let env = Env::new();
        let profile = env.profile(&profile_toml(kind, 0, task));
        let o = env.options(&fake, 4, &profile);
        assert_eq!(do_setup(&o).0, ExitStatus::Pass, "{kind}: setup");
        let (_, v) = do_run(&short_day(o, 3));
        assert_eq!(errors(&v), 0, "{kind}: {}", v["errors"]);
        let raw = if kind == "appointment" {
            (1..=4)
                .flat_map(|n| fake.messages(&format!("user{n}@fake.test"), "Calendar"))
                .next()
        } else {
            fake.state.lock().unwrap().submitted.first().cloned()
        };
        let raw = raw.unwrap_or_else(|| panic!("{kind}: no message was made"));
        println!("== {kind} ==\n{}", conform::describe(&raw));
        let p = conform::check(kind, &raw);
        let irt = conform::ids(p.in_reply_to());
        if kind.starts_with("reply") {
            assert_eq!(irt.len(), 1, "{kind}: In-Reply-To {irt:?}");
            assert!(conform::ids(p.references()).contains(&irt[0]), "{kind}");
        } else {
            assert!(irt.is_empty(), "{kind}: In-Reply-To {irt:?}");
        }
        let text = String::from_utf8_lossy(&raw);
        match kind {
            "forward" => assert!(p.parts.iter().any(|x| x.message().is_some()), "{kind}"),
            "meeting request" => assert!(text.contains("METHOD:REQUEST"), "{kind}"),
            "appointment" => assert!(text.contains("METHOD:PUBLISH"), "{kind}"),
            _ => {}
        }
    }
}

/// Servers that refuse a login by quoting the command back (IMAP LOGIN with
/// the password, SMTP AUTH PLAIN and ManageSieve AUTHENTICATE with its
/// base64 token): the password appears in no error, sample, test.log,
/// trace or result (summary.txt and report.html are made from the result).
#[test]
fn passwords_echoed_by_servers_are_redacted_everywhere() {
    let secret = "fake-secret";
    let token = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("\0user1@fake.test\0{secret}"))
    };
    let check = |what: &str, text: &str| {
        assert!(!text.contains(secret), "{what} holds the password: {text}");
        assert!(
            !text.contains(&token),
            "{what} holds the AUTH token: {text}"
        );
    };
    let files = |dir: &Path| {
        let mut all = String::new();
        for f in std::fs::read_dir(dir).unwrap() {
            let p = f.unwrap().path();
            if p.is_file() {
                all.push_str(&std::fs::read_to_string(&p).unwrap());
            }
        }
        all
    };

    // IMAP: setup logs every user in.
    let fake = Fake::start(FakeConfig {
        echo_imap_login: true,
        ..Default::default()
    });
    let env = Env::new();
    let trace = env.path("trace");
    let mut o = env.options(&fake, 2, "loadsim-light");
    o.setup.trace_imap = Some(trace.clone());
    let base = tempfile::tempdir().unwrap();
    let dir = run_dir(base.path());
    let result = setup(resolve(&o), &dir, &Interrupt::never()).unwrap();
    let v = serde_json::to_string(&result).unwrap();
    check("setup result", &v);
    assert!(v.contains("you said: LOGIN"), "{v}");
    assert!(v.contains("***"), "{v}");
    check("setup test.log", &files(&dir.path));
    check("IMAP trace", &files(&trace));

    // SMTP and ManageSieve: a run whose IMAP logins work.
    let fake = Fake::start(FakeConfig {
        echo_smtp_auth: true,
        ..Default::default()
    });
    let env = Env::new();
    let profile = env.profile(&profile_toml(
        "sends and rules",
        0,
        "[tasks.send]\nper_day = 100\nrecipients = 1.0\n[tasks.create_rule]\nper_day = 100\n",
    ));
    let mut o = short_day(env.options(&fake, 2, &profile), 3);
    o.setup.sieve = Some(format!("sieve://127.0.0.1:{}", fake.sieve_port));
    let base = tempfile::tempdir().unwrap();
    let rdir = run_dir(base.path());
    let run = run(resolve(&o), &rdir, &OUT, RunHooks::default()).unwrap();
    let v = serde_json::to_string(&run.result).unwrap();
    check("run result", &v);
    let samples = run.result.errors.samples.join("\n");
    assert!(samples.contains("you said: AUTH PLAIN ***"), "{samples}");
    assert!(samples.contains("you said: AUTHENTICATE"), "{samples}");
    check("run folder", &files(&rdir.path));
}

/// A JMAP user's day (`--protocol jmap`, `--jmap URL`): one user against the
/// fake JMAP server (which delivers what is submitted into its one Inbox),
/// beside the fake IMAP/SMTP server the remote target also names. Every task
/// of the profile is measured under its name, the sent mail is tracked to
/// its delivery by polling Email/changes, nothing fails.
#[test]
fn a_jmap_users_day() {
    jmap_day(false);
}

/// The same day with the push stream (the fake's ends after its first
/// event: reopened after the back-off, polling meanwhile).
#[test]
fn a_jmap_users_day_with_push() {
    jmap_day(true);
}

fn jmap_day(push: bool) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let jmap = rt.block_on(fake_jmap::Fake::start(fake_jmap::Config {
        push,
        deliver_submitted: true,
        ..Default::default()
    }));
    let fake = Fake::start(FakeConfig::default());
    let env = Env::new();
    let profile = env.profile(&profile_toml(
        "a JMAP user's message tasks",
        0,
        "[tasks.send]\nper_day = 200\nrecipients = 1.0\n[tasks.read]\nper_day = 400\n\
         [tasks.delete]\nper_day = 100\n[tasks.apply_view_sort]\nper_day = 100\n",
    ));
    let mut o = env.options(&fake, 1, &profile);
    o.setup.protocol = Some("jmap".into());
    o.setup.jmap = Some(format!("http://127.0.0.1:{}", jmap.port));
    o.run.poll_interval = Some(Dur(Duration::from_millis(300)));
    o.run.skip_setup = Some(true);
    let (_, v) = do_run(&short_day(o, 6));
    assert_eq!(errors(&v), 0, "{}", v["errors"]);
    assert_eq!(v["config"]["jmap_pct"], 100);
    for task in ["send", "read", "delete", "apply_view_sort"] {
        let n = v["tasks"][task]["count"].as_u64().unwrap_or(0);
        assert!(n > 0, "{task}: {}", v["tasks"][task]);
    }
    let st = jmap.state.lock().unwrap();
    assert!(st.submitted > 0, "sent over EmailSubmission/set");
    // Every message submitted was seen delivered, by its tracking header.
    assert_eq!(
        v["delivery_latency"]["delivered_within"].as_u64(),
        Some(st.submitted)
    );
    assert_eq!(
        v["delivery_latency"]["within_pct"], 100.0,
        "{}",
        v["delivery_latency"]
    );
    // Nothing reached the IMAP server's submission: every message went
    // through JMAP.
    assert_eq!(fake.verb_count("DATA"), 0);
    assert_eq!(st.push_streams > 0, push, "push streams opened");
}
