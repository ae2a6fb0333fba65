//! The JMAP client (`mailbench_mail::jmap`) against an in-process fake JMAP
//! server (tests/fake_jmap): session discovery through `/.well-known/jmap`
//! with relative URLs, every call a user's tasks make, the server's limits
//! honoured, and every fault (not a session, HTTP 401/403/429/503, request
//! problems, method errors, a push stream that drops) an error of its kind,
//! never a panic or a hang.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fake_jmap;

use fake_jmap::{Config, Fake};
use mailbench_mail::endpoint::Tls;
use mailbench_mail::jmap::push::Push;
use mailbench_mail::jmap::{Counts, Draft, JmapConn, session};
use mailbench_mail::wire::ErrorKind;
use std::sync::Arc;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

async fn open(f: &Fake) -> mailbench_mail::wire::OpResult<JmapConn> {
    let url = session::session_url(&format!("http://127.0.0.1:{}", f.port)).unwrap();
    JmapConn::open(&url, &Tls::default(), T, "user1@fake.test", "fake-secret").await
}

fn draft(subject: &str) -> Draft {
    Draft {
        from: "user1@fake.test".into(),
        to: vec!["user2@fake.test".into()],
        subject: subject.into(),
        text: "hello\r\n".into(),
        message_id: "<m1@mailbench>".into(),
        track: Some("run1 7".into()),
    }
}

#[tokio::test]
async fn a_users_calls_work_end_to_end() {
    let f = Fake::start(Config::default()).await;
    let mut c = open(&f).await.unwrap();
    // The well-known URL redirected; the relative apiUrl resolved against it.
    assert_eq!(c.session.api, f.url("/jmap/api"));
    assert_eq!(c.session.account, "A1");
    let boxes = c.mailboxes().await.unwrap();
    let role = |r: &str| {
        boxes
            .iter()
            .find(|b| b.role.as_deref() == Some(r))
            .unwrap()
            .id
            .clone()
    };
    let (inbox, drafts, sent, archive) =
        (role("inbox"), role("drafts"), role("sent"), role("archive"));
    let ids: Vec<String> = (0..5).map(|i| f.deliver(&format!("m{i}"))).collect();
    let (_, list) = c.list(&inbox, 50).await.unwrap();
    assert_eq!(list.len(), 5);
    assert_eq!(list[0].id, ids[4], "newest first");
    let read = c.read(&ids[0]).await.unwrap();
    assert_eq!(read.id, ids[0]);
    assert!(
        f.state.lock().unwrap().mails[&ids[0]]
            .keywords
            .contains_key("$seen")
    );
    let flag = (
        ids[1].clone(),
        serde_json::json!({"keywords/$flagged": true}),
    );
    let mv = (
        ids[2].clone(),
        serde_json::json!({format!("mailboxIds/{inbox}"): null, format!("mailboxIds/{archive}"): true}),
    );
    c.set(vec![flag, mv], vec![ids[3].clone()]).await.unwrap();
    {
        let s = f.state.lock().unwrap();
        assert!(s.mails[&ids[1]].keywords.contains_key("$flagged"));
        assert_eq!(s.mails[&ids[2]].mailbox, archive);
        assert!(!s.mails.contains_key(&ids[3]));
    }
    let d = c.save_draft(&drafts, &draft("draft")).await.unwrap();
    assert_eq!(f.state.lock().unwrap().mails[&d].mailbox, drafts);
    let before = f.state.lock().unwrap().next;
    c.submit(&drafts, &sent, &draft("sent")).await.unwrap();
    assert_eq!(f.state.lock().unwrap().submitted, 1);
    let ch = c.changes(&format!("s{before}"), 100).await.unwrap();
    assert_eq!(ch.created.len(), 1);
    let sent_id = &ch.created[0];
    assert_eq!(
        f.state.lock().unwrap().mails[sent_id].mailbox,
        sent,
        "moved on success"
    );
    // A missing message is a refusal, not a panic.
    let e = c
        .set(
            vec![("nope".into(), serde_json::json!({"keywords/$seen": true}))],
            vec![],
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Rejected);
}

#[tokio::test]
async fn calls_and_ids_stay_within_the_servers_limits() {
    let f = Fake::start(Config {
        max_calls: 1,
        max_get: 3,
        ..Config::default()
    })
    .await;
    let mut c = open(&f).await.unwrap();
    let ids: Vec<String> = (0..7).map(|i| f.deliver(&format!("m{i}"))).collect();
    let got = c.get(&ids, false).await.unwrap();
    assert_eq!(got.len(), 7);
    let most = {
        let s = f.state.lock().unwrap();
        (s.most_calls, s.most_get_ids)
    };
    assert_eq!(most, (1, 3));
    // Email/query + Email/get by back-reference cannot be split: refused
    // before anything is sent.
    let before = f.state.lock().unwrap().requests;
    let e = c.list("mb-inbox", 10).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Rejected);
    assert!(e.msg().contains("maxCallsInRequest of 1"), "{e}");
    assert_eq!(f.state.lock().unwrap().requests, before);
}

#[tokio::test]
async fn a_url_that_is_not_a_session_is_named() {
    let f = Fake::start(Config {
        session_body: Some("<html>welcome</html>"),
        ..Config::default()
    })
    .await;
    let e = open(&f).await.err().unwrap();
    assert_eq!(e.kind, ErrorKind::Malformed);
    assert!(
        e.msg()
            .contains("/jmap/session is not a JMAP session resource"),
        "{e}"
    );
    // A path the server does not serve.
    let url = f.url("/nothing");
    let e = JmapConn::open(&url, &Tls::default(), T, "u", "fake-secret")
        .await
        .err()
        .unwrap();
    assert!(e.msg().contains("HTTP 404"), "{e}");
}

#[tokio::test]
async fn http_statuses_are_errors_of_their_kind() {
    for (status, kind, text) in [
        (401, ErrorKind::Auth, "refused login name `user1@fake.test`"),
        (403, ErrorKind::Rejected, "forbidden"),
        (
            429,
            ErrorKind::Rejected,
            "too many requests (Retry-After 5)",
        ),
        (
            503,
            ErrorKind::Rejected,
            "service unavailable (Retry-After 5)",
        ),
    ] {
        let f = Fake::start(Config {
            api_status: Some(status),
            ..Config::default()
        })
        .await;
        let mut c = open(&f).await.unwrap();
        let e = c.mailboxes().await.unwrap_err();
        assert_eq!(e.kind, kind, "{status}: {e}");
        assert!(
            e.msg().contains(&format!("HTTP {status}")) && e.msg().contains(text),
            "{e}"
        );
    }
}

#[tokio::test]
async fn request_problems_and_method_errors_are_refusals() {
    for (p, text) in [
        ("notJSON", "error:notJSON"),
        ("limit", "error:limit (maxSizeRequest)"),
    ] {
        let f = Fake::start(Config {
            problem: Some(p),
            ..Config::default()
        })
        .await;
        let mut c = open(&f).await.unwrap();
        let e = c.mailboxes().await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Rejected);
        assert!(e.msg().contains(text), "{e}");
    }
    let f = Fake::start(Config {
        failing_method: Some("Email/query"),
        ..Config::default()
    })
    .await;
    let mut c = open(&f).await.unwrap();
    let e = c.list("mb-inbox", 10).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Rejected);
    assert!(e.msg().contains("serverFail"), "{e}");
    // The connection is still usable after a method error.
    assert_eq!(c.mailboxes().await.unwrap().len(), 5);
}

#[tokio::test]
async fn a_push_stream_that_drops_is_reopened_and_counted() {
    let f = Fake::start(Config::default()).await;
    let c = open(&f).await.unwrap();
    let url = c.session.event_source_url(30).unwrap().unwrap();
    let mut p = Push::new(url.clone(), c.http_for(&url).unwrap(), 1);
    let first = tokio::time::timeout(T, p.next()).await.unwrap();
    assert_eq!(first.changed["A1"]["Email"], "s0");
    f.deliver("new");
    // The fake ends each stream after one event: the next comes on a new one.
    let second = tokio::time::timeout(T, p.next()).await.unwrap();
    assert_eq!(second.changed["A1"]["Email"], "s1");
    assert_eq!((p.opened, p.drops), (2, 1));
    assert_eq!(f.state.lock().unwrap().push_streams, 2);
    assert_eq!(p.last_error.as_ref().unwrap().kind, ErrorKind::Reset);
}

#[tokio::test]
async fn an_account_without_submission_is_not_sent_through_jmap() {
    let f = Fake::start(Config {
        account_submission: false,
        ..Config::default()
    })
    .await;
    let mut c = open(&f).await.unwrap();
    assert!(!c.session.submission);
    let before = f.state.lock().unwrap().requests;
    let e = c
        .submit("mb-drafts", "mb-sent", &draft("x"))
        .await
        .unwrap_err();
    assert!(e.msg().contains("send over SMTP submission"), "{e}");
    assert_eq!(f.state.lock().unwrap().requests, before, "nothing sent");
}

#[tokio::test]
async fn a_push_url_without_a_stream_is_a_counted_failure() {
    let f = Fake::start(Config {
        push_status: Some(204),
        ..Config::default()
    })
    .await;
    let c = open(&f).await.unwrap();
    let url = c.session.event_source_url(30).unwrap().unwrap();
    let mut p = Push::new(url.clone(), c.http_for(&url).unwrap(), 1);
    // No event ever comes: the caller's bound ends the wait (polling takes
    // over), the failed openings are counted and the last one kept.
    assert!(
        tokio::time::timeout(Duration::from_secs(3), p.next())
            .await
            .is_err()
    );
    assert!(p.failed >= 1 && p.opened == 0 && !p.connected());
    let e = p.last_error.as_ref().unwrap();
    assert!(e.msg().contains("HTTP 204"), "{e}");
}

#[tokio::test]
async fn a_session_without_push_says_so() {
    let f = Fake::start(Config {
        push: false,
        ..Config::default()
    })
    .await;
    let c = open(&f).await.unwrap();
    assert!(c.session.event_source_url(30).is_none());
}

/// The calls a JMAP user's day adds: a sorted (and filtered) screen of a
/// mailbox, the account's Email state to ask changes from, a message filed
/// without `$draft` (a copy in Sent, an appointment).
#[tokio::test]
async fn screens_states_and_filed_copies() {
    let f = Fake::start(Config::default()).await;
    let mut c = open(&f).await.unwrap();
    let ids: Vec<String> = (0..3).map(|i| f.deliver(&format!("m{i}"))).collect();
    let screen = c.query("mb-inbox", "subject", Some("m"), 2).await.unwrap();
    assert_eq!(screen.len(), 2);
    assert!(screen.iter().all(|e| ids.contains(&e.id)));
    let before = c.email_state().await.unwrap();
    let copy = c.save("mb-sent", &draft("sent copy"), false).await.unwrap();
    let ch = c.changes(&before, 16).await.unwrap();
    assert_eq!(
        ch.created,
        vec![copy.clone()],
        "the state is the one changes start from"
    );
    let s = f.state.lock().unwrap();
    let m = &s.mails[&copy];
    assert_eq!(m.mailbox, "mb-sent");
    assert!(m.keywords.contains_key("$seen"));
    assert!(!m.keywords.contains_key("$draft"));
}

/// What a run counts of its JMAP users (the result's generator figures):
/// the API requests and the method calls in them as the server received
/// them, the push `state` events, and the streams opened again after a drop.
#[tokio::test]
async fn requests_method_calls_push_events_and_reconnections_are_counted() {
    let f = Fake::start(Config {
        max_calls: 2,
        ..Config::default()
    })
    .await;
    let mut c = open(&f).await.unwrap();
    let counts = Arc::new(Counts::default());
    c.count_into(counts.clone());
    let (requests, calls) = {
        let s = f.state.lock().unwrap();
        (s.requests, s.method_calls)
    };
    let ids: Vec<String> = (0..3).map(|i| f.deliver(&format!("m{i}"))).collect();
    c.mailboxes().await.unwrap();
    c.list("mb-inbox", 10).await.unwrap();
    c.read(&ids[0]).await.unwrap();
    let (sent_requests, sent_calls) = {
        let s = f.state.lock().unwrap();
        (s.requests - requests, s.method_calls - calls)
    };
    assert!(
        sent_calls > sent_requests,
        "calls are batched: {sent_calls} in {sent_requests}"
    );
    assert_eq!(Counts::get(&counts.requests), sent_requests);
    assert_eq!(Counts::get(&counts.method_calls), sent_calls);
    let url = c.session.event_source_url(30).unwrap().unwrap();
    let mut p = Push::new(url.clone(), c.http_for(&url).unwrap(), 1);
    p.count_into(counts.clone());
    tokio::time::timeout(T, p.next()).await.unwrap();
    assert_eq!(Counts::get(&counts.push_reconnects), 0, "the first opening");
    f.deliver("new");
    // The fake ends each stream after one event: the second comes on a
    // stream opened again.
    tokio::time::timeout(T, p.next()).await.unwrap();
    assert_eq!(Counts::get(&counts.push_events), 2);
    assert_eq!(Counts::get(&counts.push_reconnects), 1);
    assert_eq!(
        Counts::get(&counts.requests),
        sent_requests,
        "push streams are no requests"
    );
}
