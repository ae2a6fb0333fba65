//! A user's connection and Inbox: logon, the first look at the Inbox, fetching new
//! mail (counting this run's deliveries), and the wait for the next task in IDLE or
//! polling.

use super::track::parse_track;
use super::{INBOX, Msg, Shared, User, next_poll};
use crate::imap;
use crate::imap::{ImapConn, fetch_seq_uid, header_value};
use crate::mailboxes::{Mailboxes, discover};
use crate::message::{imap_date, unix_now};
use crate::stats::{OpName, Protocol};
use crate::wire::{ErrorKind, OpError, OpResult};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

impl User {
    pub(super) fn drop_conn(&mut self) {
        self.imap = None;
    }

    pub(super) fn conn(&mut self) -> OpResult<&mut ImapConn> {
        self.imap
            .as_mut()
            .ok_or_else(|| OpError::new(ErrorKind::Reset, "not connected"))
    }

    /// The IMAP connection with the Inbox selected.
    pub(super) async fn inbox_conn(&mut self) -> OpResult<&mut ImapConn> {
        let c = self.conn()?;
        c.ensure_selected(INBOX).await?;
        Ok(c)
    }

    pub(super) fn boxes(&self) -> OpResult<&Mailboxes> {
        self.boxes
            .as_ref()
            .ok_or_else(|| OpError::new(ErrorKind::Reset, "not connected"))
    }

    /// Connect, log in, learn the mailboxes (first time), select the Inbox and
    /// learn what is in it.
    pub(super) async fn connect(&mut self, sh: &Shared, op: OpName) -> OpResult<()> {
        let t = Instant::now();
        let r = async {
            let mut c = sh.target.imap_login(&self.addr, &self.login).await?;
            if self.boxes.is_none() {
                self.boxes = Some(discover(&mut c).await?);
            }
            c.select(INBOX, false).await?;
            self.imap = Some(c);
            self.sync_inbox(sh).await
        }
        .await;
        self.count_cmds(sh);
        match &r {
            Ok(()) => {
                self.backoff.succeeded();
                sh.stats().ok(Protocol::Imap, op, t.elapsed());
            }
            Err(e) => {
                self.imap = None;
                self.backoff.failed(Instant::now(), &mut self.rng);
                sh.stats().error(Protocol::Imap, op, &self.addr, e);
            }
        }
        if self.next_poll.is_none() {
            self.next_poll = Some(Instant::now() + sh.params.poll_interval);
        }
        r
    }

    pub(super) fn count_cmds(&mut self, sh: &Shared) {
        if let Some(c) = self.imap.as_mut() {
            sh.imap_cmds.fetch_add(c.commands, Ordering::Relaxed);
            c.commands = 0;
        }
    }

    /// First logon: learn the UIDs already in the Inbox, except this run's
    /// messages delivered before the logon (a slow server, a long ramp-up),
    /// which are fetched as new mail. Later: fetch new arrivals.
    async fn sync_inbox(&mut self, sh: &Shared) -> OpResult<()> {
        if self.synced {
            return self.fetch_new(sh).await;
        }
        let c = self.conn()?;
        let uids = c.uid_search("SEARCH", "UID SEARCH ALL").await?;
        let since = imap_date(unix_now() - 86400);
        let ours = c
            .uid_search(
                "SEARCH",
                &format!(
                    "UID SEARCH SINCE {since} HEADER X-Mailbench-Track {}",
                    imap::mailbox(&sh.run_id)
                ),
            )
            .await?;
        c.inbox.arrivals.clear();
        let uidnext = c.inbox.uidnext.unwrap_or(0);
        let first_ours = ours.iter().min().copied().unwrap_or(u32::MAX);
        for uid in uids.into_iter().filter(|u| *u < first_ours) {
            self.last_uid = self.last_uid.max(uid);
            self.inbox.push(Msg {
                seen: true,
                ..Msg::new(uid)
            });
        }
        self.synced = true;
        if ours.is_empty() {
            self.next_uid = uidnext.max(self.last_uid + 1);
            return Ok(());
        }
        self.fetch_new(sh).await
    }

    /// Whether the Inbox announced mail the user has not fetched yet.
    fn has_news(&self) -> bool {
        self.imap
            .as_ref()
            .is_some_and(|c| c.inbox_news(self.next_uid))
    }

    /// Fetches announced arrivals now (recorded as `new_mail`).
    pub(super) async fn take_news(&mut self, sh: &Shared) {
        if !self.has_news() {
            return;
        }
        let t = Instant::now();
        let r = self.fetch_new(sh).await;
        self.new_mail_done(sh, t, r);
    }

    /// Records a new-mail operation begun at `t` (its commands too); a
    /// failure drops the connection (the next task reconnects).
    fn new_mail_done(&mut self, sh: &Shared, t: Instant, r: OpResult<()>) {
        self.count_cmds(sh);
        match r {
            Ok(()) => sh.stats().ok(Protocol::Imap, "new_mail", t.elapsed()),
            Err(e) => {
                sh.stats().error(Protocol::Imap, "new_mail", &self.addr, &e);
                self.drop_conn();
            }
        }
    }

    /// Fetches the tracking header of messages that arrived in the Inbox since the
    /// last look and counts the deliveries of this run. Each one's arrival is
    /// the moment its EXISTS was announced (else now, an upper bound).
    async fn fetch_new(&mut self, sh: &Shared) -> OpResult<()> {
        let last = self.last_uid;
        let c = self.inbox_conn().await?;
        let r = c
            .cmd(
                "FETCH",
                &format!(
                    "UID FETCH {}:* (UID BODY.PEEK[HEADER.FIELDS (X-Mailbench-Track)])",
                    last + 1
                ),
            )
            .await?;
        let now = Instant::now();
        let mut got = Vec::new();
        let mut max_seq = 0;
        for u in &r.untagged {
            let Some((seq, uid)) = fetch_seq_uid(u) else {
                continue;
            };
            max_seq = max_seq.max(seq);
            if uid <= last {
                continue;
            }
            let arrival = c
                .inbox
                .arrivals
                .iter()
                .find(|(n, _)| *n >= seq)
                .map(|(_, t)| *t)
                .unwrap_or(now);
            got.push((uid, header_value(u, "X-Mailbench-Track"), arrival));
        }
        // Announcements of messages this fetch did not cover stay pending.
        c.inbox.arrivals.retain(|(n, _)| *n > max_seq);
        let uidnext = c.inbox.uidnext.unwrap_or(0);
        let mut delivered = Vec::new();
        for (uid, track, arrival) in got {
            self.last_uid = self.last_uid.max(uid);
            if let Some(t) = track
                && let Some(tr) = parse_track(&t, &sh.run_id)
            {
                let submitted = sh.t0 + Duration::from_micros(tr.t_us);
                delivered.push(arrival.saturating_duration_since(submitted));
            }
            self.inbox.push(Msg::new(uid));
        }
        self.next_uid = self.next_uid.max(uidnext).max(self.last_uid + 1);
        if !delivered.is_empty() {
            let mut s = sh.stats();
            for d in delivered {
                s.delivered(d);
            }
        }
        Ok(())
    }

    pub(super) async fn final_check(&mut self, sh: &Shared) -> OpResult<()> {
        if self.imap.is_none() {
            self.connect(sh, "logon").await?;
        }
        let c = self.conn()?;
        c.idle_done().await?;
        let r = self.fetch_new(sh).await;
        self.count_cmds(sh);
        r
    }

    /// Whether this user waits in IDLE (else it polls).
    fn idles(&self, sh: &Shared) -> bool {
        sh.params.use_idle && self.imap.as_ref().is_some_and(|c| c.has_cap("IDLE"))
    }

    /// Waits for `when` while watching the Inbox (IDLE, else polling on its own
    /// schedule). Returns true when the run is stopping.
    pub(super) async fn wait_until(
        &mut self,
        sh: &Shared,
        when: Instant,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        loop {
            if *stop.borrow() {
                return true;
            }
            let now = Instant::now();
            let poll_due = self
                .next_poll
                .filter(|_| self.imap.is_some() && !self.idles(sh));
            if let Some(due) = poll_due
                && now >= due
            {
                self.poll(sh).await;
                self.next_poll = Some(next_poll(due, sh.params.poll_interval, Instant::now()));
                continue;
            }
            if now >= when {
                return false;
            }
            if self.idles(sh) {
                match self.idle_until(sh, when, stop).await {
                    Some(true) => return true,
                    Some(false) => return false,
                    None => continue,
                }
            }
            let until = poll_due.map_or(when, |p| p.min(when));
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = stop.changed() => return true,
            }
            if until == when {
                self.woke(when);
                return false;
            }
        }
    }

    /// The timer woke the user for its task due at `when`: how late.
    fn woke(&mut self, when: Instant) {
        self.woke_late = Some(Instant::now().saturating_duration_since(when));
    }

    /// Waits for a task slot ([`Shared::take_slot`]), the timer's lateness
    /// when it woke the user for the task counted in its scheduling delay.
    pub(super) async fn take_slot<'s>(
        &mut self,
        sh: &'s Shared,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<super::capacity::TaskSlot<'s>> {
        sh.take_slot(self.woke_late.take(), stop).await
    }

    /// One stretch of IDLE on the Inbox until `when` or new mail: Some(true)
    /// when stopping, Some(false) when `when` came, None after new mail was
    /// fetched (or the connection failed) and the wait goes on.
    async fn idle_until(
        &mut self,
        sh: &Shared,
        when: Instant,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<bool> {
        if self.imap.as_ref().is_some_and(|c| !c.idling()) {
            // Back to the Inbox first, fetching anything it announces.
            if let Err(e) = self.inbox_conn().await {
                sh.stats().error(Protocol::Imap, "new_mail", &self.addr, &e);
                self.drop_conn();
                return None;
            }
            self.take_news(sh).await;
            let r = async { self.conn()?.idle_start().await }.await;
            self.count_cmds(sh);
            if let Err(e) = r {
                if self.imap.is_some() {
                    sh.stats().error(Protocol::Imap, "new_mail", &self.addr, &e);
                    self.drop_conn();
                }
                return None;
            }
        }
        let c = self.imap.as_mut()?;
        let r = tokio::select! {
            r = c.idle_wait(when) => r,
            _ = stop.changed() => return Some(true),
        };
        match r {
            Ok(false) => {
                self.woke(when);
                Some(false)
            }
            Ok(true) => {
                let t = Instant::now();
                let r = async {
                    self.conn()?.idle_done().await?;
                    self.fetch_new(sh).await
                }
                .await;
                self.new_mail_done(sh, t, r);
                None
            }
            Err(e) => {
                sh.stats().error(Protocol::Imap, "new_mail", &self.addr, &e);
                self.drop_conn();
                None
            }
        }
    }

    /// One poll (`new_mail`): NOOP on the selected Inbox, else SELECT it (both
    /// report new EXISTS/UIDNEXT), then fetch what arrived.
    async fn poll(&mut self, sh: &Shared) {
        let t = Instant::now();
        let r = async {
            let c = self.conn()?;
            if c.inbox_selected() {
                c.cmd("NOOP", "NOOP").await?;
            } else {
                c.select(INBOX, false).await?;
            }
            if self.has_news() {
                self.fetch_new(sh).await?;
            }
            Ok::<(), OpError>(())
        }
        .await;
        self.new_mail_done(sh, t, r);
    }
}
