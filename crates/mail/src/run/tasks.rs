//! A user's tasks, run at their time: the dispatch by kind, the helpers they share
//! (picking messages and recipients, submission with its tracking header), and the
//! message tasks (send, read, reply, forward, move, delete).

use super::track::{answered, literals, unfolded_header};
use super::{INBOX, Outcome, Shared, User, envelope, random_other};
use crate::imap::{self, ImapConn};
use crate::message::Envelope;
use crate::profile::{RecipientsExt, TaskKind};
use crate::wire::OpResult;
use rand::Rng;
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use std::sync::atomic::Ordering;
use tokio::time::Instant;

impl User {
    pub(super) async fn task(&mut self, sh: &Shared, kind: TaskKind) -> OpResult<Outcome> {
        if self.imap.is_none() {
            self.connect(sh, "logon").await?;
        }
        self.conn()?.idle_done().await?;
        let r = match kind {
            TaskKind::Send => self.t_send(sh).await,
            TaskKind::Read => self.t_read().await,
            TaskKind::Reply => self.t_reply(sh, false).await,
            TaskKind::ReplyAll => self.t_reply(sh, true).await,
            TaskKind::Forward => self.t_forward(sh).await,
            TaskKind::Move => self.t_move(sh, false).await,
            TaskKind::Delete => self.t_move(sh, true).await,
            TaskKind::PermanentlyDelete => self.t_perm_delete().await,
            TaskKind::FreeBusy => self.t_free_busy().await,
            TaskKind::BrowseCalendar => self.t_browse_calendar().await,
            TaskKind::MakeAppointment => self.t_appointment(sh).await,
            TaskKind::RequestMeeting => self.t_meeting(sh).await,
            TaskKind::CreateSmartFolder => self.t_create_smart(sh).await,
            TaskKind::DeleteSmartFolder => self.t_delete_smart().await,
            TaskKind::CreateRule => self.t_rule(sh, true).await,
            TaskKind::DeleteRule => self.t_rule(sh, false).await,
            TaskKind::ApplyViewSort => self.t_view_sort().await,
        };
        self.count_cmds(sh);
        r
    }

    // ---- helpers -------------------------------------------------------------

    fn pick_msg(&mut self, prefer_unseen: bool) -> Option<usize> {
        if self.inbox.is_empty() {
            return None;
        }
        if prefer_unseen && let Some(i) = self.inbox.iter().position(|m| !m.seen) {
            return Some(i);
        }
        Some(self.rng.random_range(0..self.inbox.len()))
    }

    /// `k` recipients for a message of this user (see [`pick_colleagues`]).
    pub(super) fn colleagues(&mut self, sh: &Shared, k: usize, first: &[usize]) -> Vec<usize> {
        pick_colleagues(&mut self.rng, sh.topo.users.len(), self.idx, k, first)
    }

    /// `k` recipients drawn from the profile's count for `kind`.
    pub(super) fn recipients(&mut self, sh: &Shared, kind: TaskKind) -> usize {
        sh.profile
            .task(kind)
            .and_then(|s| s.recipients.as_ref())
            .map(|r| r.draw(&mut self.rng))
            .unwrap_or(1)
    }

    pub(super) fn new_id(&mut self, sh: &Shared) -> u64 {
        sh.msg_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// A new tracked message from this user to `addrs` (`idxs`: the users among
    /// them): a new id, its tracking header, the envelope with the subject
    /// `"{subject} {id}"`, and the message `write` makes of that envelope.
    pub(super) fn compose(
        &mut self,
        sh: &Shared,
        addrs: &[String],
        idxs: &[usize],
        subject: &str,
        write: impl FnOnce(&mut SmallRng, Envelope<'_>) -> Vec<u8>,
    ) -> Vec<u8> {
        let seq = self.new_id(sh);
        let track = self.track(sh, seq, idxs);
        let env = envelope(
            &self.addr,
            addrs,
            format!("{subject} {seq}"),
            &sh.run_id,
            seq,
            Some(track),
        );
        write(&mut self.rng, env)
    }

    /// Submits `msg` to `rcpts` and files a copy in `copy_to`; counts the flow.
    pub(super) async fn submit(
        &mut self,
        sh: &Shared,
        addrs: Vec<String>,
        deliveries: u64,
        msg: Vec<u8>,
        copy_to: &str,
    ) -> OpResult<()> {
        // The semaphore is never closed: a slot is always given in the end.
        let _slot = sh.second_conns.acquire().await.ok();
        let mut s = sh.target.smtp_login(&self.addr, &self.login).await?;
        let r = s.send(&self.addr, &addrs, &msg).await;
        sh.smtp_cmds.fetch_add(s.commands, Ordering::Relaxed);
        r?;
        s.quit().await;
        {
            let mut st = sh.stats();
            st.submitted += 1;
            st.interval_submitted += 1;
            st.addressed += addrs.len() as u64;
            st.expected_deliveries += deliveries;
        }
        self.conn()?.append(copy_to, "\\Seen", &msg).await?;
        Ok(())
    }

    pub(super) fn track(&self, sh: &Shared, seq: u64, rcpts: &[usize]) -> String {
        let t_us = Instant::now().saturating_duration_since(sh.t0).as_micros() as u64;
        let r: Vec<String> = rcpts.iter().map(|i| i.to_string()).collect();
        format!(
            "{} {seq} {t_us} {} {}",
            sh.run_id,
            self.idx,
            if r.is_empty() {
                "-".into()
            } else {
                r.join(",")
            }
        )
    }

    // ---- tasks ---------------------------------------------------------------

    /// Send: compose a new message (size mix) to individuals or one list, submit
    /// it, save a copy in Sent.
    async fn t_send(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let spec = sh.profile.task(TaskKind::Send);
        let share = spec.and_then(|s| s.list_share).unwrap_or(0.0);
        let (addrs, idxs, deliveries) =
            if !sh.topo.lists.is_empty() && self.rng.random::<f64>() < share {
                let l = &sh.topo.lists[self.rng.random_range(0..sh.topo.lists.len())];
                (vec![l.address.clone()], Vec::new(), l.members.len() as u64)
            } else {
                let k = self.recipients(sh, TaskKind::Send);
                let idxs = self.colleagues(sh, k, &[]);
                let addrs = sh.addresses(&idxs);
                let n = idxs.len() as u64;
                (addrs, idxs, n)
            };
        let msg = self.compose(sh, &addrs, &idxs, "Status", |rng, env| {
            sh.msggen.mail(rng, &env)
        });
        let sent = self.boxes()?.layout.sent.clone();
        self.submit(sh, addrs, deliveries, msg, &sent).await?;
        Ok(Outcome::Done)
    }

    /// Read: open the oldest unread Inbox message (else a random one): headers and
    /// structure, then the whole message (marks it \Seen).
    async fn t_read(&mut self) -> OpResult<Outcome> {
        let Some(i) = self.pick_msg(true) else {
            return Ok(Outcome::Skipped("empty inbox"));
        };
        let uid = self.inbox[i].uid;
        let c = self.inbox_conn().await?;
        c.cmd(
            "FETCH",
            &format!("UID FETCH {uid} (FLAGS INTERNALDATE RFC822.SIZE ENVELOPE BODYSTRUCTURE)"),
        )
        .await?;
        c.cmd("FETCH", &format!("UID FETCH {uid} (BODY[])")).await?;
        self.inbox[i].seen = true;
        Ok(Outcome::Done)
    }

    /// Reply / Reply All: fetch the original's headers and text, answer its sender
    /// (and, for Reply All, its other recipients, up to the profile's count) with
    /// In-Reply-To/References to it, save a copy in Sent, flag the original
    /// \Answered.
    async fn t_reply(&mut self, sh: &Shared, all: bool) -> OpResult<Outcome> {
        let Some(i) = self.pick_msg(false) else {
            return Ok(Outcome::Skipped("empty inbox"));
        };
        let orig = self.inbox[i];
        let c = self.inbox_conn().await?;
        let r = c
            .cmd(
                "FETCH",
                &format!(
                    "UID FETCH {} (BODY.PEEK[HEADER.FIELDS (FROM TO CC SUBJECT MESSAGE-ID REFERENCES X-MAILBENCH-TRACK)] BODY.PEEK[TEXT]<0.2048>)",
                    orig.uid
                ),
            )
            .await?;
        let lits = r.untagged.first().map(|u| literals(u)).unwrap_or_default();
        let header = lits.first().cloned().unwrap_or_default();
        let quoted = lits
            .get(1)
            .map(|t| String::from_utf8_lossy(t).into_owned())
            .unwrap_or_default();
        let kind = if all {
            TaskKind::ReplyAll
        } else {
            TaskKind::Reply
        };
        let k = self.recipients(sh, kind);
        let first = answered(&header, &sh.run_id, all);
        let idxs = self.colleagues(sh, if all { k } else { k.max(1) }, &first);
        let addrs = sh.addresses(&idxs);
        let msg = self.compose(sh, &addrs, &idxs, "RE: Status", |rng, mut env| {
            env.in_reply_to = unfolded_header(&header, "Message-ID");
            env.references = unfolded_header(&header, "References")
                .map(|r| r.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default();
            sh.msggen.reply(rng, &env, &quoted)
        });
        let n = idxs.len() as u64;
        self.send_then_flag(sh, addrs, n, msg, orig.uid, "(\\Answered \\Seen)")
            .await
    }

    /// Forward: fetch the whole original, send it attached (message/rfc822) to the
    /// profile's count of colleagues, save a copy, flag the original $Forwarded.
    async fn t_forward(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let Some(i) = self.pick_msg(false) else {
            return Ok(Outcome::Skipped("empty inbox"));
        };
        let uid = self.inbox[i].uid;
        let c = self.inbox_conn().await?;
        let r = c
            .cmd("FETCH", &format!("UID FETCH {uid} (BODY.PEEK[])"))
            .await?;
        let original = r
            .untagged
            .first()
            .and_then(|u| literals(u).into_iter().next())
            .unwrap_or_default();
        let k = self.recipients(sh, TaskKind::Forward);
        let idxs = self.colleagues(sh, k, &[]);
        let addrs = sh.addresses(&idxs);
        let msg = self.compose(sh, &addrs, &idxs, "FW: Status", |rng, env| {
            sh.msggen.forward(rng, &env, &original)
        });
        let n = idxs.len() as u64;
        self.send_then_flag(sh, addrs, n, msg, uid, "($Forwarded)")
            .await
    }

    /// The end of Reply and Forward: submit `msg` (a copy to Sent), then set
    /// `flags` on the Inbox original `uid`.
    async fn send_then_flag(
        &mut self,
        sh: &Shared,
        addrs: Vec<String>,
        n: u64,
        msg: Vec<u8>,
        uid: u32,
        flags: &str,
    ) -> OpResult<Outcome> {
        let sent = self.boxes()?.layout.sent.clone();
        self.submit(sh, addrs, n, msg, &sent).await?;
        let c = self.inbox_conn().await?;
        let store = format!("UID STORE {uid} +FLAGS.SILENT {flags}");
        c.cmd("STORE", &store).await?;
        Ok(Outcome::Done)
    }

    /// Move: UID MOVE an Inbox message (a read one if any) to a random folder.
    /// Delete: the same to Deleted Items. Without MOVE: COPY + \Deleted + UID EXPUNGE.
    async fn t_move(&mut self, sh: &Shared, delete: bool) -> OpResult<Outcome> {
        let Some(i) = self.pick_seen() else {
            return Ok(Outcome::Skipped("empty inbox"));
        };
        let uid = self.inbox[i].uid;
        let folders = sh.profile.initial.folders;
        let dest = if delete || folders == 0 {
            self.boxes()?.layout.deleted_items.clone()
        } else {
            let n = self.rng.random_range(1..=folders);
            self.boxes()?.folder(n)
        };
        let c = self.inbox_conn().await?;
        move_or_copy(c, uid, &dest).await?;
        self.inbox.swap_remove(i);
        Ok(Outcome::Done)
    }

    fn pick_seen(&mut self) -> Option<usize> {
        let seen: Vec<usize> = (0..self.inbox.len())
            .filter(|i| self.inbox[*i].seen)
            .collect();
        if let Some(i) = seen.choose(&mut self.rng) {
            return Some(*i);
        }
        self.pick_msg(false)
    }

    /// Permanently Delete: in Deleted Items, flag the oldest message \Deleted and
    /// UID EXPUNGE it (from the Inbox when Deleted Items is empty).
    async fn t_perm_delete(&mut self) -> OpResult<Outcome> {
        let deleted = self.boxes()?.layout.deleted_items.clone();
        let c = self.conn()?;
        c.select(&deleted, false).await?;
        let uids = c.uid_search("SEARCH", "UID SEARCH ALL").await?;
        if let Some(uid) = uids.first() {
            expunge_uid(c, *uid).await?;
            return Ok(Outcome::Done);
        }
        let Some(i) = self.pick_seen() else {
            return Ok(Outcome::Skipped("nothing to delete"));
        };
        let uid = self.inbox[i].uid;
        let c = self.conn()?;
        c.select(INBOX, false).await?;
        expunge_uid(c, uid).await?;
        self.inbox.swap_remove(i);
        Ok(Outcome::Done)
    }
}

/// UID MOVE `uid` of the selected mailbox to `dest`; without MOVE: UID COPY,
/// then flag it \Deleted and UID EXPUNGE it.
async fn move_or_copy(c: &mut ImapConn, uid: u32, dest: &str) -> OpResult<()> {
    if c.has_cap("MOVE") {
        c.cmd("MOVE", &format!("UID MOVE {uid} {}", imap::mailbox(dest)))
            .await?;
        return Ok(());
    }
    c.cmd("COPY", &format!("UID COPY {uid} {}", imap::mailbox(dest)))
        .await?;
    expunge_uid(c, uid).await
}

/// Flags `uid` of the selected mailbox \Deleted and removes it (UID EXPUNGE
/// with UIDPLUS, else EXPUNGE).
async fn expunge_uid(c: &mut ImapConn, uid: u32) -> OpResult<()> {
    c.cmd(
        "STORE",
        &format!("UID STORE {uid} +FLAGS.SILENT (\\Deleted)"),
    )
    .await?;
    if c.has_cap("UIDPLUS") {
        c.cmd("EXPUNGE", &format!("UID EXPUNGE {uid}")).await?;
    } else {
        c.cmd("EXPUNGE", "EXPUNGE").await?;
    }
    Ok(())
}

/// `k` recipients (at least one) among the `n` users of this run for user
/// `me`: `first` (the people of the message answered) that are not `me`,
/// then others at random, each once; never more than the `n - 1` others.
/// A run of one user has no one else: the user writes to itself (its own
/// Inbox receives and tracks the message), so its Send, Reply and Forward
/// still load the server.
pub(super) fn pick_colleagues(
    rng: &mut rand::rngs::SmallRng,
    n: usize,
    me: usize,
    k: usize,
    first: &[usize],
) -> Vec<usize> {
    if n <= 1 {
        return vec![me];
    }
    let k = k.min(n - 1).max(1);
    let mut out: Vec<usize> = Vec::with_capacity(k);
    for &i in first {
        if i != me && i < n && !out.contains(&i) && out.len() < k {
            out.push(i);
        }
    }
    let mut guard = 0;
    while out.len() < k && guard < 10 * k + 100 {
        guard += 1;
        let i = random_other(rng, n, me);
        if i != me && !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn recipients_are_others_and_a_lone_user_writes_to_itself() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        // A run of one user: itself, whatever was asked.
        for k in [0, 1, 3] {
            assert_eq!(pick_colleagues(&mut rng, 1, 0, k, &[]), vec![0]);
            assert_eq!(pick_colleagues(&mut rng, 1, 0, k, &[0]), vec![0]);
        }
        // Two users: the other one, never itself.
        for _ in 0..50 {
            assert_eq!(pick_colleagues(&mut rng, 2, 1, 3, &[1]), vec![0]);
        }
        // Many: `first` first (without me), then distinct others, k of them.
        for _ in 0..50 {
            let r = pick_colleagues(&mut rng, 10, 4, 3, &[4, 7, 7]);
            assert_eq!(r.len(), 3, "{r:?}");
            assert_eq!(r[0], 7);
            assert!(!r.contains(&4), "{r:?}");
            let mut d = r.clone();
            d.sort_unstable();
            d.dedup();
            assert_eq!(d.len(), 3, "{r:?}");
        }
        // Never more than the others.
        assert_eq!(pick_colleagues(&mut rng, 3, 0, 9, &[]).len(), 2);
    }
}
