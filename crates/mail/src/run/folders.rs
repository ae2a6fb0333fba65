//! A user's calendar, folder, rule and view tasks: free/busy, browsing the
//! calendar, appointments and meetings, smart folders, Sieve rules, sorted views.

use super::{INBOX, Outcome, SCRIPT, Shared, User, envelope, random_other};
use crate::imap::{self, fetch_seq_uid, list_names};
use crate::message::{imap_date, unix_now};
use crate::profile::TaskKind;
use crate::wire::OpResult;
use rand::Rng;
use rand::seq::IndexedRandom;
use std::sync::atomic::Ordering;

impl User {
    /// Free/Busy: EXAMINE the Calendar and SEARCH the appointments starting today
    /// or tomorrow (a body search on DTSTART), then fetch their envelopes.
    pub(super) async fn t_free_busy(&mut self) -> OpResult<Outcome> {
        let now = unix_now();
        let d0 = crate::message::ical_time(now);
        let d1 = crate::message::ical_time(now + 86400);
        let calendar = self.boxes()?.calendar();
        let c = self.conn()?;
        c.select(&calendar, true).await?;
        let hits = c
            .uid_search(
                "SEARCH",
                &format!(
                    "UID SEARCH OR BODY \"DTSTART:{}\" BODY \"DTSTART:{}\"",
                    &d0[..8],
                    &d1[..8]
                ),
            )
            .await?;
        if !hits.is_empty() {
            let set: Vec<String> = hits.iter().take(50).map(|u| u.to_string()).collect();
            c.cmd(
                "FETCH",
                &format!("UID FETCH {} (UID ENVELOPE)", set.join(",")),
            )
            .await?;
        }
        Ok(Outcome::Done)
    }

    /// Browse Calendar: SELECT Calendar, fetch every item's summary, open one.
    pub(super) async fn t_browse_calendar(&mut self) -> OpResult<Outcome> {
        let calendar = self.boxes()?.calendar();
        let c = self.conn()?;
        c.select(&calendar, false).await?;
        if c.exists == 0 {
            return Ok(Outcome::Done);
        }
        let r = c
            .cmd("FETCH", "FETCH 1:* (UID FLAGS ENVELOPE RFC822.SIZE)")
            .await?;
        let uids: Vec<u32> = r
            .untagged
            .iter()
            .filter_map(|u| fetch_seq_uid(u).map(|x| x.1))
            .collect();
        if let Some(uid) = uids.choose(&mut self.rng) {
            let uid = *uid;
            self.conn()?
                .cmd("FETCH", &format!("UID FETCH {uid} (BODY.PEEK[])"))
                .await?;
        }
        Ok(Outcome::Done)
    }

    /// Make Appointment: APPEND an iCalendar appointment to the Calendar.
    pub(super) async fn t_appointment(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let seq = self.new_id(sh);
        let to = vec![self.addr.clone()];
        let env = envelope(
            &self.addr,
            &to,
            format!("Appointment {seq}"),
            &sh.run_id,
            seq,
            None,
        );
        let start = unix_now() + self.rng.random_range(0..7 * 86400);
        let msg = sh.msggen.calendar(&mut self.rng, &env, start, 30, false);
        let calendar = self.boxes()?.calendar();
        self.conn()?.append(&calendar, "\\Seen", &msg).await?;
        Ok(Outcome::Done)
    }

    /// Request Meeting: an iMIP invitation (METHOD:REQUEST) submitted to the
    /// attendees; the organizer's copy goes to the Calendar.
    pub(super) async fn t_meeting(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let k = self.recipients(sh, TaskKind::RequestMeeting);
        let idxs = self.colleagues(sh, k, &[]);
        let addrs = sh.addresses(&idxs);
        let msg = self.compose(sh, &addrs, &idxs, "Meeting", |rng, env| {
            let start = unix_now() + rng.random_range(3600..7 * 86400);
            sh.msggen.calendar(rng, &env, start, 60, true)
        });
        let n = idxs.len() as u64;
        let calendar = self.boxes()?.calendar();
        self.submit(sh, addrs, n, msg, &calendar).await?;
        Ok(Outcome::Done)
    }

    /// Create Smart Folder: CREATE a folder, SEARCH the Inbox with the folder's
    /// criteria and COPY the matches (up to 50) into it.
    pub(super) async fn t_create_smart(&mut self, sh: &Shared) -> OpResult<Outcome> {
        let name = self
            .boxes()?
            .smart(&format!("{}-{}", sh.run_id, self.next_name));
        self.next_name += 1;
        let other =
            sh.topo.users[random_other(&mut self.rng, sh.topo.users.len(), self.idx)].clone();
        let since = imap_date(unix_now() - 7 * 86400);
        let criteria = [
            "UNSEEN".to_string(),
            format!("FROM \"{other}\""),
            "LARGER 20000".to_string(),
            "SUBJECT \"RE:\"".to_string(),
            format!("SINCE {since}"),
        ];
        let crit = criteria[self.rng.random_range(0..criteria.len())].clone();
        let c = self.conn()?;
        c.cmd("CREATE", &format!("CREATE {}", imap::mailbox(&name)))
            .await?;
        c.ensure_selected(INBOX).await?;
        let hits = c
            .uid_search("SEARCH", &format!("UID SEARCH {crit}"))
            .await?;
        if !hits.is_empty() {
            let set: Vec<String> = hits.iter().take(50).map(|u| u.to_string()).collect();
            c.cmd(
                "COPY",
                &format!("UID COPY {} {}", set.join(","), imap::mailbox(&name)),
            )
            .await?;
        }
        self.smart.push(name);
        Ok(Outcome::Done)
    }

    /// Delete Smart Folder: DELETE one (listing them first if none is known yet).
    pub(super) async fn t_delete_smart(&mut self) -> OpResult<Outcome> {
        if self.smart.is_empty() && !self.smart_listed {
            self.smart_listed = true;
            let pattern = self.boxes()?.smart_pattern();
            let c = self.conn()?;
            let r = c
                .cmd("LIST", &format!("LIST \"\" {}", imap::mailbox(&pattern)))
                .await?;
            self.smart = list_names(&r.untagged);
        }
        let Some(name) = self.smart.pop() else {
            return Ok(Outcome::Skipped("no smart folder"));
        };
        let c = self.conn()?;
        if c.selected.as_deref() == Some(name.as_str()) {
            c.select(INBOX, false).await?;
        }
        c.cmd("DELETE", &format!("DELETE {}", imap::mailbox(&name)))
            .await?;
        Ok(Outcome::Done)
    }

    /// Create / Delete Rule: rewrite the user's Sieve script with one rule more or
    /// less over ManageSieve (PUTSCRIPT + SETACTIVE, or DELETESCRIPT when empty).
    pub(super) async fn t_rule(&mut self, sh: &Shared, create: bool) -> OpResult<Outcome> {
        let rules = Rules {
            addr: &self.addr,
            login: &self.login,
            names: &mut self.rules,
            next_name: &mut self.next_name,
        };
        rules.change(sh, create).await
    }

    /// Apply View/Sort: UID SORT the Inbox by a random key and fetch the first
    /// screen (50 summaries); without SORT, fetch all envelopes and sort here.
    pub(super) async fn t_view_sort(&mut self) -> OpResult<Outcome> {
        let keys = [
            "REVERSE ARRIVAL",
            "SUBJECT",
            "FROM",
            "REVERSE SIZE",
            "REVERSE DATE",
        ];
        let key = keys[self.rng.random_range(0..keys.len())];
        let c = self.inbox_conn().await?;
        let uids = if c.has_cap("SORT") {
            c.uid_search("SORT", &format!("UID SORT ({key}) US-ASCII ALL"))
                .await?
        } else {
            let r = c.cmd("FETCH", "UID FETCH 1:* (UID ENVELOPE)").await?;
            let mut v: Vec<(Vec<u8>, u32)> = r
                .untagged
                .iter()
                .filter_map(|u| fetch_seq_uid(u).map(|(_, uid)| (u.clone(), uid)))
                .collect();
            v.sort();
            v.into_iter().map(|(_, u)| u).collect()
        };
        if !uids.is_empty() {
            let set: Vec<String> = uids.iter().take(50).map(|u| u.to_string()).collect();
            self.conn()?
                .cmd(
                    "FETCH",
                    &format!(
                        "UID FETCH {} (UID FLAGS ENVELOPE RFC822.SIZE)",
                        set.join(",")
                    ),
                )
                .await?;
        }
        Ok(Outcome::Done)
    }
}

/// A user's Sieve rules, changed over ManageSieve by IMAP and JMAP users alike.
pub(super) struct Rules<'a> {
    pub addr: &'a str,
    pub login: &'a str,
    pub names: &'a mut Vec<String>,
    pub next_name: &'a mut u32,
}

impl Rules<'_> {
    /// One rule more (`create`) or less: the script rewritten (PUTSCRIPT +
    /// SETACTIVE), or deleted when it holds none (DELETESCRIPT).
    pub(super) async fn change(self, sh: &Shared, create: bool) -> OpResult<Outcome> {
        if !create && self.names.is_empty() {
            return Ok(Outcome::Skipped("no rule"));
        }
        let _slot = sh.second_conns.acquire().await.ok();
        let Some(conn) = sh.target.sieve_login(self.addr, self.login).await else {
            return Ok(Outcome::Skipped("no ManageSieve"));
        };
        let mut s = conn?;
        if create {
            let name = format!("{}-{}", sh.run_id, self.next_name);
            *self.next_name += 1;
            self.names.push(name);
        } else {
            self.names.pop();
        }
        let r = async {
            if self.names.is_empty() {
                s.set_active("").await?;
                s.delete_script(SCRIPT).await
            } else {
                s.put_script(SCRIPT, &crate::sieve::script(self.names))
                    .await?;
                s.set_active(SCRIPT).await
            }
        }
        .await;
        sh.sieve_cmds.fetch_add(s.commands, Ordering::Relaxed);
        r?;
        s.logout().await;
        Ok(Outcome::Done)
    }
}
