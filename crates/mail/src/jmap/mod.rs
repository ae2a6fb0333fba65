//! A JMAP mail client (RFC 8620 core, RFC 8621 mail), beside the IMAP client
//! over the endpoint layer: the session (`session`), typed requests and
//! responses with back-references and the packing of calls within the
//! server's limits (`proto`), HTTP/1.1 on the endpoint's TCP/TLS stream
//! (`http`), the push stream with reconnection (`push`). `JmapConn` is one
//! user's client: the calls a mail client makes for the profile's tasks
//! (docs/mail-load.md, "JMAP").

pub mod http;
pub mod proto;
pub mod push;
pub mod session;

use crate::endpoint::Tls;
use crate::wire::{ErrorKind, OpError, OpResult};
use http::Http;
use mailbench_base::limits::MAX_HTTP_BODY_BYTES;
use proto::{Email, Group, Mailbox, QueryResponse, Response, SetResponse, answer, back_ref};
use serde_json::{Value, json};
use session::{MAIL, Ready, SUBMISSION, Session};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use url::Url;

/// What a run's JMAP clients sent and received, counted as it happens (a
/// connection dropped after an error keeps its counts): shared by the run's
/// users, read into the result's generator figures.
#[derive(Debug, Default)]
pub struct Counts {
    /// API requests (POSTs to the session's apiUrl; the session fetches and
    /// the push streams are not counted).
    pub requests: AtomicU64,
    /// Method calls in those requests.
    pub method_calls: AtomicU64,
    /// `state` events received on push streams.
    pub push_events: AtomicU64,
    /// Push streams opened again after they dropped or failed to open.
    pub push_reconnects: AtomicU64,
}

impl Counts {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// Redirects followed to reach the session resource.
pub const MAX_REDIRECTS: usize = 5;
/// The properties of the Inbox view.
pub const LIST_PROPERTIES: &[&str] = &[
    "id",
    "mailboxIds",
    "keywords",
    "subject",
    "size",
    "messageId",
    "header:X-Mailbench-Track:asText",
];

/// A message a user writes (a draft, or one to send).
#[derive(Debug, Clone)]
pub struct Draft {
    pub from: String,
    pub to: Vec<String>,
    pub subject: String,
    pub text: String,
    pub message_id: String,
    pub track: Option<String>,
}

/// One user's JMAP client.
/// The most message ids a mailbox listing takes (a resynchronised Inbox).
pub const MAX_MAILBOX_IDS: usize = 100_000;

pub struct JmapConn {
    pub session: Ready,
    api: Http,
    login: String,
    pw: String,
    tls: Tls,
    timeout: Duration,
    /// The identity EmailSubmission/set sends as (learned on first use).
    identity: Option<String>,
    /// Where its requests and method calls are counted.
    counts: Arc<Counts>,
}

impl JmapConn {
    /// Fetches the session at `url` (following up to `MAX_REDIRECTS`
    /// redirects, as `/.well-known/jmap` usually is) and makes it ready.
    pub async fn open(
        url: &Url,
        tls: &Tls,
        timeout: Duration,
        login: &str,
        pw: &str,
    ) -> OpResult<JmapConn> {
        let mut at = url.clone();
        let mut http = Http::new(&at, tls, timeout, login, pw)?;
        for _ in 0..=MAX_REDIRECTS {
            let r = http
                .send("GET", &at, None, Vec::new(), MAX_HTTP_BODY_BYTES)
                .await
                .map_err(|e| match e.kind {
                    ErrorKind::Rejected => OpError::new(
                        ErrorKind::Malformed,
                        format!(
                            "{at} is not a JMAP session resource ({}); give --jmap the session URL \
                             or the host whose {} leads to it",
                            e.msg(),
                            session::WELL_KNOWN
                        ),
                    ),
                    _ => e,
                })?;
            if (300..400).contains(&r.status) {
                let next = r
                    .location
                    .as_deref()
                    .and_then(|l| at.join(l).ok())
                    .ok_or_else(|| {
                        OpError::new(
                            ErrorKind::Malformed,
                            format!("{at}: HTTP {} without a usable Location", r.status),
                        )
                    })?;
                if !http.serves(&next) {
                    http = Http::new(&next, tls, timeout, login, pw)?;
                }
                at = next;
                continue;
            }
            let session = Session::parse(&at, &r.body)?.ready(&at)?;
            let api = if http.serves(&session.api) {
                http
            } else {
                Http::new(&session.api, tls, timeout, login, pw)?
            };
            return Ok(JmapConn {
                session,
                api,
                login: login.into(),
                pw: pw.into(),
                tls: tls.clone(),
                timeout,
                identity: None,
                counts: Arc::default(),
            });
        }
        Err(OpError::new(
            ErrorKind::Malformed,
            format!("{url}: more than {MAX_REDIRECTS} redirects before a JMAP session"),
        ))
    }

    /// Requests sent so far.
    pub fn requests(&self) -> u64 {
        self.api.requests
    }

    /// Counts its requests and method calls (from now) into `counts`.
    pub fn count_into(&mut self, counts: Arc<Counts>) {
        self.counts = counts;
    }

    /// Where its requests and method calls are counted.
    pub fn counts(&self) -> &Arc<Counts> {
        &self.counts
    }

    /// A connection of this user's to another URL of the session (push).
    pub fn http_for(&self, url: &Url) -> OpResult<Http> {
        Http::new(url, &self.tls, self.timeout, &self.login, &self.pw)
    }

    /// Sends `groups` packed into as few requests as the server's
    /// `maxCallsInRequest` allows, one after the other (one request in
    /// flight per user: within any `maxConcurrentRequests`); a request over
    /// `maxSizeRequest` is refused before it is sent.
    pub async fn call(&mut self, groups: Vec<Group>) -> OpResult<Vec<Response>> {
        let lim = self.session.limits;
        let mut out = Vec::new();
        for calls in proto::pack(groups, lim.max_calls_in_request)? {
            let n_calls = calls.len() as u64;
            let using = if self.session.submission {
                vec![session::CORE, MAIL, SUBMISSION]
            } else {
                vec![session::CORE, MAIL]
            };
            let req = proto::Request {
                using,
                method_calls: calls,
            };
            let body = serde_json::to_vec(&req)
                .map_err(|e| OpError::new(ErrorKind::Malformed, format!("JMAP request: {e}")))?;
            if body.len() as u64 > lim.max_size_request {
                return Err(OpError::new(
                    ErrorKind::Rejected,
                    format!(
                        "a request of {} bytes is over the server's maxSizeRequest of {}",
                        body.len(),
                        lim.max_size_request
                    ),
                ));
            }
            let api = self.session.api.clone();
            Counts::add(&self.counts.requests, 1);
            Counts::add(&self.counts.method_calls, n_calls);
            let r = self
                .api
                .send(
                    "POST",
                    &api,
                    Some("application/json"),
                    body,
                    MAX_HTTP_BODY_BYTES,
                )
                .await?;
            let resp: Response = serde_json::from_slice(&r.body).map_err(|e| {
                OpError::new(
                    ErrorKind::Malformed,
                    format!("JMAP response from {api} unreadable: {e}"),
                )
            })?;
            out.push(resp);
        }
        Ok(out)
    }

    /// One group, its response.
    async fn one(&mut self, g: Group) -> OpResult<Response> {
        let mut r = self.call(vec![g]).await?;
        r.pop()
            .ok_or_else(|| OpError::new(ErrorKind::Malformed, "JMAP: no response"))
    }

    fn account(&self) -> &str {
        &self.session.account
    }

    /// Mailbox/get of every mailbox, with roles.
    pub async fn mailboxes(&mut self) -> OpResult<Vec<Mailbox>> {
        let mut g = Group::default();
        let id = g.call(
            "Mailbox/get",
            json!({"accountId": self.account(), "ids": null,
                   "properties": ["id", "name", "parentId", "role", "totalEmails"]}),
        );
        let r = self.one(g).await?;
        Ok(answer::<proto::GetResponse<Mailbox>>(&r, 0, &id)?.list)
    }

    /// The newest `limit` messages of `mailbox` (Email/query, and Email/get
    /// of its `#ids` in the same request): the query state and the list.
    pub async fn list(&mut self, mailbox: &str, limit: u64) -> OpResult<(String, Vec<Email>)> {
        let limit = limit.min(self.session.limits.max_objects_in_get);
        let mut g = Group::default();
        let q = g.call(
            "Email/query",
            json!({"accountId": self.account(), "filter": {"inMailbox": mailbox},
                   "sort": [{"property": "receivedAt", "isAscending": false}], "limit": limit}),
        );
        let get = g.call(
            "Email/get",
            json!({"accountId": self.account(), "#ids": back_ref(&q, "Email/query", "/ids"),
                   "properties": LIST_PROPERTIES}),
        );
        let r = self.one(g).await?;
        let qr: QueryResponse = answer(&r, 0, &q)?;
        let got: proto::GetResponse<Email> = answer(&r, 0, &get)?;
        Ok((qr.query_state, got.list))
    }

    /// Email/query in `mailbox` sorted by `sort` (a property; newest or
    /// largest first for dates and sizes) with an optional `text` filter,
    /// and Email/get `#ids` of the first `limit`: the list.
    pub async fn query(
        &mut self,
        mailbox: &str,
        sort: &str,
        text: Option<&str>,
        limit: u64,
    ) -> OpResult<Vec<Email>> {
        let limit = limit.min(self.session.limits.max_objects_in_get);
        let ascending = matches!(sort, "subject" | "from");
        let mut filter = json!({"inMailbox": mailbox});
        if let Some(t) = text {
            filter["text"] = json!(t);
        }
        let mut g = Group::default();
        let q = g.call(
            "Email/query",
            json!({"accountId": self.account(), "filter": filter,
                   "sort": [{"property": sort, "isAscending": ascending}], "limit": limit}),
        );
        let get = g.call(
            "Email/get",
            json!({"accountId": self.account(), "#ids": back_ref(&q, "Email/query", "/ids"),
                   "properties": LIST_PROPERTIES}),
        );
        let r = self.one(g).await?;
        answer::<QueryResponse>(&r, 0, &q)?;
        Ok(answer::<proto::GetResponse<Email>>(&r, 0, &get)?.list)
    }

    /// The ids of every message in `mailbox` (Email/query paged by position,
    /// at most [`MAX_MAILBOX_IDS`]), newest first.
    pub async fn ids(&mut self, mailbox: &str) -> OpResult<Vec<String>> {
        let page = self.session.limits.max_objects_in_get.clamp(1, 4096);
        let mut ids = Vec::new();
        loop {
            let mut g = Group::default();
            let q = g.call(
                "Email/query",
                json!({"accountId": self.account(), "filter": {"inMailbox": mailbox},
                       "sort": [{"property": "receivedAt", "isAscending": false}],
                       "position": ids.len(), "limit": page}),
            );
            let r = self.one(g).await?;
            let got = answer::<QueryResponse>(&r, 0, &q)?.ids;
            let last = (got.len() as u64) < page;
            ids.extend(got);
            if last || ids.len() >= MAX_MAILBOX_IDS {
                ids.truncate(MAX_MAILBOX_IDS);
                return Ok(ids);
            }
        }
    }

    /// The account's Email state now (Email/get of no ids).
    pub async fn email_state(&mut self) -> OpResult<String> {
        let mut g = Group::default();
        let id = g.call(
            "Email/get",
            json!({"accountId": self.account(), "ids": [], "properties": ["id"]}),
        );
        let r = self.one(g).await?;
        Ok(answer::<proto::GetResponse<Email>>(&r, 0, &id)?.state)
    }

    /// Mailbox/set: creates `create` (names, at the top) and destroys
    /// `destroy` (ids; their messages stay in their other mailboxes): the
    /// created ids in order.
    pub async fn mailbox_set(
        &mut self,
        create: &[String],
        destroy: &[String],
    ) -> OpResult<Vec<String>> {
        let mut c = serde_json::Map::new();
        for (i, name) in create.iter().enumerate() {
            c.insert(format!("m{i}"), json!({"name": name, "parentId": null}));
        }
        let mut g = Group::default();
        // A destroyed mailbox's messages leave it (RFC 8621 §2.5: without
        // this a mailbox holding mail is refused, `mailboxHasEmail`); those
        // also in another mailbox (a smart folder's Inbox hits) stay there.
        let id = g.call(
            "Mailbox/set",
            json!({"accountId": self.account(), "create": c, "destroy": destroy,
                   "onDestroyRemoveEmails": true}),
        );
        let r = self.one(g).await?;
        let s: SetResponse = answer(&r, 0, &id)?;
        s.check("Mailbox/set")?;
        (0..create.len())
            .map(|i| {
                s.created_id(&format!("m{i}")).ok_or_else(|| {
                    OpError::new(
                        ErrorKind::Malformed,
                        "Mailbox/set: a created mailbox has no id",
                    )
                })
            })
            .collect()
    }

    /// Email/get of `ids` (in requests of at most `maxObjectsInGet` ids),
    /// with the text body when `body`.
    pub async fn get(&mut self, ids: &[String], body: bool) -> OpResult<Vec<Email>> {
        let per = usize::try_from(self.session.limits.max_objects_in_get).unwrap_or(usize::MAX);
        let mut groups = Vec::new();
        for chunk in ids.chunks(per.max(1)) {
            let mut g = Group::default();
            let mut args =
                json!({"accountId": self.account(), "ids": chunk, "properties": LIST_PROPERTIES});
            if body {
                args["properties"] =
                    json!([LIST_PROPERTIES, &["textBody", "bodyValues"][..]].concat());
                args["fetchTextBodyValues"] = json!(true);
            }
            g.call("Email/get", args);
            groups.push(g);
        }
        let mut out = Vec::new();
        for r in self.call(groups.clone()).await? {
            for inv in &r.method_responses {
                let gi = group_of(&inv.id);
                out.extend(answer::<proto::GetResponse<Email>>(&r, gi, "c0")?.list);
            }
        }
        Ok(out)
    }

    /// Email/set: `update` patches by id, `destroy` ids (in calls of at
    /// most `maxObjectsInSet` objects).
    pub async fn set(
        &mut self,
        update: Vec<(String, Value)>,
        destroy: Vec<String>,
    ) -> OpResult<()> {
        let per = usize::try_from(self.session.limits.max_objects_in_set)
            .unwrap_or(usize::MAX)
            .max(1);
        let mut groups = Vec::new();
        for chunk in update.chunks(per) {
            let patch: serde_json::Map<String, Value> = chunk.iter().cloned().collect();
            let mut g = Group::default();
            g.call(
                "Email/set",
                json!({"accountId": self.account(), "update": patch}),
            );
            groups.push(g);
        }
        for chunk in destroy.chunks(per) {
            let mut g = Group::default();
            g.call(
                "Email/set",
                json!({"accountId": self.account(), "destroy": chunk}),
            );
            groups.push(g);
        }
        for r in self.call(groups).await? {
            for inv in &r.method_responses {
                answer::<SetResponse>(&r, group_of(&inv.id), "c0")?.check("Email/set")?;
            }
        }
        Ok(())
    }

    /// Reads a message: its text body, then `$seen` set (one request).
    pub async fn read(&mut self, id: &str) -> OpResult<Email> {
        let mut g = Group::default();
        let props = [LIST_PROPERTIES, &["textBody", "bodyValues"][..]].concat();
        let get = g.call(
            "Email/get",
            json!({"accountId": self.account(), "ids": [id], "fetchTextBodyValues": true,
                   "properties": props}),
        );
        let set = g.call(
            "Email/set",
            json!({"accountId": self.account(), "update": {id: {"keywords/$seen": true}}}),
        );
        let r = self.one(g).await?;
        answer::<SetResponse>(&r, 0, &set)?.check("Email/set")?;
        answer::<proto::GetResponse<Email>>(&r, 0, &get)?
            .list
            .pop()
            .ok_or_else(|| OpError::new(ErrorKind::Rejected, format!("Email/get: {id} not found")))
    }

    /// Saves a draft in `drafts`: its id.
    pub async fn save_draft(&mut self, drafts: &str, d: &Draft) -> OpResult<String> {
        self.save(drafts, d, true).await
    }

    /// Files `d` in `mailbox` (`$seen`; `$draft` when `draft`): its id.
    pub async fn save(&mut self, mailbox: &str, d: &Draft, draft: bool) -> OpResult<String> {
        let mut e = email_of(d, mailbox);
        if !draft {
            e["keywords"] = json!({"$seen": true});
        }
        let mut g = Group::default();
        let set = g.call(
            "Email/set",
            json!({"accountId": self.account(), "create": {"d": e}}),
        );
        let r = self.one(g).await?;
        let s: SetResponse = answer(&r, 0, &set)?;
        s.check("Email/set create")?;
        s.created_id("d")
            .ok_or_else(|| OpError::new(ErrorKind::Malformed, "Email/set: the draft has no id"))
    }

    /// Sends `d` with EmailSubmission/set: the message created in
    /// `drafts` and submitted in one request, moved to `sent` with `$draft`
    /// cleared on success (`onSuccessUpdateEmail`).
    pub async fn submit(&mut self, drafts: &str, sent: &str, d: &Draft) -> OpResult<()> {
        if !self.session.submission {
            return Err(OpError::new(
                ErrorKind::Rejected,
                format!(
                    "account {} does not offer {SUBMISSION}: send over SMTP submission",
                    self.session.account
                ),
            ));
        }
        let identity = self.identity(&d.from).await?;
        let mut g = Group::default();
        let set = g.call(
            "Email/set",
            json!({"accountId": self.account(), "create": {"m": email_of(d, drafts)}}),
        );
        let rcpt: Vec<Value> = d.to.iter().map(|t| json!({"email": t})).collect();
        let sub = g.call(
            "EmailSubmission/set",
            json!({"accountId": self.account(),
                   "create": {"s": {"identityId": identity, "emailId": "#m",
                                    "envelope": {"mailFrom": {"email": d.from}, "rcptTo": rcpt}}},
                   "onSuccessUpdateEmail": {"#s": {
                        format!("mailboxIds/{drafts}"): null, format!("mailboxIds/{sent}"): true,
                        "keywords/$draft": null}}}),
        );
        let r = self.one(g).await?;
        answer::<SetResponse>(&r, 0, &set)?.check("Email/set create")?;
        answer::<SetResponse>(&r, 0, &sub)?.check("EmailSubmission/set")
    }

    async fn identity(&mut self, from: &str) -> OpResult<String> {
        if let Some(i) = &self.identity {
            return Ok(i.clone());
        }
        let mut g = Group::default();
        let id = g.call(
            "Identity/get",
            json!({"accountId": self.account(), "ids": null}),
        );
        let r = self.one(g).await?;
        let list = answer::<proto::GetResponse<proto::Identity>>(&r, 0, &id)?.list;
        let pick = list
            .iter()
            .find(|i| i.email.eq_ignore_ascii_case(from))
            .or(list.first());
        let i = pick.map(|i| i.id.clone()).ok_or_else(|| {
            OpError::new(
                ErrorKind::Rejected,
                format!("Identity/get: no identity to send as {from}"),
            )
        })?;
        self.identity = Some(i.clone());
        Ok(i)
    }

    /// Email/changes since `state` (at most `max` ids).
    pub async fn changes(&mut self, state: &str, max: u64) -> OpResult<proto::ChangesResponse> {
        let mut g = Group::default();
        let id = g.call(
            "Email/changes",
            json!({"accountId": self.account(), "sinceState": state, "maxChanges": max}),
        );
        let r = self.one(g).await?;
        answer(&r, 0, &id)
    }
}

/// The group index of a packed call id `g<group>.<id>`.
fn group_of(id: &str) -> usize {
    id.strip_prefix('g')
        .and_then(|s| s.split_once('.'))
        .and_then(|(g, _)| g.parse().ok())
        .unwrap_or(usize::MAX)
}

fn email_of(d: &Draft, mailbox: &str) -> Value {
    let to: Vec<Value> = d.to.iter().map(|t| json!({"email": t})).collect();
    let mut e = json!({
        "mailboxIds": {mailbox: true},
        "keywords": {"$draft": true, "$seen": true},
        "from": [{"email": d.from}],
        "to": to,
        "subject": d.subject,
        "messageId": [d.message_id.trim_matches(['<', '>'])],
        "bodyValues": {"b": {"value": d.text}},
        "textBody": [{"partId": "b", "type": "text/plain"}],
    });
    if let Some(t) = &d.track {
        e["header:X-Mailbench-Track:asText"] = json!(t);
    }
    e
}
