//! SEARCH and SORT over the sink's minimal state. Keys on what the sink keeps
//! (flags, size, UIDs, sequence numbers, the tracking header) are exact;
//! dates match as if every message arrived today; keys on text the sink does
//! not keep (FROM, TO, CC, BCC, SUBJECT, BODY, TEXT, other headers) match
//! every fourth message (UID divisible by 4), so a search still finds
//! something to fetch or copy, the same every time.

use super::imapd::words;
use super::store::{ANSWERED, DELETED, FLAGGED, Mailbox, Msg, SEEN};

/// Whether `n` is in an IMAP sequence set (`1:5,7,9:*`), `*` being `max`.
pub fn in_set(set: &str, n: u32, max: u32) -> bool {
    set.split(',').any(|part| {
        let (a, b) = part.split_once(':').unwrap_or((part, part));
        let v = |x: &str| {
            if x == "*" {
                Some(max)
            } else {
                x.parse::<u32>().ok()
            }
        };
        match (v(a), v(b)) {
            (Some(a), Some(b)) => (a.min(b)..=a.max(b)).contains(&n),
            _ => false,
        }
    })
}

/// Whether `t` is a sequence set rather than a search key.
fn is_set(t: &str) -> bool {
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b"*:,".contains(&b))
}

/// A message and where it is, as the keys see it.
struct At<'a> {
    m: &'a Msg,
    seq: u32,
    count: u32,
    max_uid: u32,
}

/// Text the sink does not keep: every fourth message matches.
fn text_match(m: &Msg) -> bool {
    m.uid.is_multiple_of(4)
}

/// Evaluates the key at `toks[*i]` (advancing past it and its arguments).
/// Depth-bounded: nested NOT/OR/groups deeper than 32 match nothing.
fn key(toks: &[String], i: &mut usize, at: &At<'_>, depth: usize) -> bool {
    let Some(t) = toks.get(*i) else {
        return true;
    };
    *i += 1;
    if depth > 32 {
        return false;
    }
    let mut arg = || {
        let a = toks.get(*i).map_or("", String::as_str);
        *i += 1;
        a
    };
    let flag = |bit: u8| at.m.flags & bit != 0;
    match t.to_ascii_uppercase().as_str() {
        "ALL" | "NEW" | "RECENT" => true,
        "OLD" => false,
        "SEEN" => flag(SEEN),
        "UNSEEN" => !flag(SEEN),
        "ANSWERED" => flag(ANSWERED),
        "UNANSWERED" => !flag(ANSWERED),
        "DELETED" => flag(DELETED),
        "UNDELETED" => !flag(DELETED),
        "FLAGGED" => flag(FLAGGED),
        "UNFLAGGED" => !flag(FLAGGED),
        "LARGER" => arg().parse::<u32>().is_ok_and(|n| at.m.size > n),
        "SMALLER" => arg().parse::<u32>().is_ok_and(|n| at.m.size < n),
        "SINCE" | "ON" | "SENTSINCE" | "SENTON" => {
            arg();
            true
        }
        "BEFORE" | "SENTBEFORE" => {
            arg();
            false
        }
        "KEYWORD" | "UNKEYWORD" => {
            arg();
            t.eq_ignore_ascii_case("UNKEYWORD")
        }
        "FROM" | "TO" | "CC" | "BCC" | "SUBJECT" | "BODY" | "TEXT" => {
            arg();
            text_match(at.m)
        }
        "HEADER" => {
            let name = arg().to_string();
            let value = arg();
            if name.eq_ignore_ascii_case("X-Mailbench-Track") {
                at.m.track.as_deref().is_some_and(|t| t.contains(value))
            } else {
                text_match(at.m)
            }
        }
        "UID" => in_set(arg(), at.m.uid, at.max_uid),
        "NOT" => !key(toks, i, at, depth + 1),
        "OR" => {
            let a = key(toks, i, at, depth + 1);
            let b = key(toks, i, at, depth + 1);
            a || b
        }
        g if g.starts_with('(') => {
            let inner = words(g.trim_start_matches('(').trim_end_matches(')'));
            all_keys(&inner, at, depth + 1)
        }
        s if is_set(s) => in_set(s, at.seq, at.count),
        _ => false,
    }
}

/// Every key of `toks` (ANDed).
fn all_keys(toks: &[String], at: &At<'_>, depth: usize) -> bool {
    let mut i = 0;
    let mut ok = true;
    while i < toks.len() {
        ok &= key(toks, &mut i, at, depth);
    }
    ok
}

/// The messages of `b` matching the criteria `args` (a leading `CHARSET x`
/// skipped): UIDs when `uid`, else sequence numbers.
pub fn search(b: &Mailbox, args: &[String], uid: bool) -> Vec<u32> {
    let toks = match args.first() {
        Some(c) if c.eq_ignore_ascii_case("CHARSET") => &args[2.min(args.len())..],
        _ => args,
    };
    let count = b.msgs.len() as u32;
    let max_uid = b.max_uid();
    b.msgs
        .iter()
        .enumerate()
        .filter(|(i, m)| {
            let at = At {
                m,
                seq: *i as u32 + 1,
                count,
                max_uid,
            };
            all_keys(toks, &at, 0)
        })
        .map(|(i, m)| if uid { m.uid } else { i as u32 + 1 })
        .collect()
}

/// SORT `(keys) charset criteria`: by size or by arrival (UID) order, or
/// reversed; keys on text the sink does not keep sort by arrival.
pub fn sort(b: &Mailbox, args: &[String], uid: bool) -> Vec<u32> {
    let keys = args
        .first()
        .map_or(String::new(), |k| k.to_ascii_uppercase());
    let criteria = &args[2.min(args.len())..];
    let mut hits: Vec<(u32, u32, u32)> = search(b, criteria, true)
        .into_iter()
        .filter_map(|u| {
            let i = b.msgs.iter().position(|m| m.uid == u)?;
            Some((b.msgs[i].size, u, i as u32 + 1))
        })
        .collect();
    let words: Vec<&str> = keys.trim_matches(['(', ')']).split_whitespace().collect();
    let by_size = words.contains(&"SIZE");
    hits.sort_by_key(|(size, u, _)| if by_size { (*size, *u) } else { (0, *u) });
    let reverse = words.first() == Some(&"REVERSE");
    if reverse {
        hits.reverse();
    }
    hits.into_iter()
        .map(|(_, u, seq)| if uid { u } else { seq })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mailbox() -> Mailbox {
        let mut b = Mailbox::new("INBOX", None);
        for (size, flags, track) in [
            (100, SEEN, None),
            (30_000, 0, Some("r1 1 2 3 -")),
            (500, 0, Some("r2 1 2 3 -")),
            (25_000, SEEN | DELETED, None),
        ] {
            b.add(size, flags, track.map(Into::into));
        }
        b
    }

    fn args(s: &str) -> Vec<String> {
        words(s)
    }

    #[test]
    fn keys_on_what_is_kept_are_exact() {
        let b = mailbox();
        assert_eq!(search(&b, &args("ALL"), true), vec![1, 2, 3, 4]);
        assert_eq!(search(&b, &args("UNSEEN"), true), vec![2, 3]);
        assert_eq!(search(&b, &args("LARGER 20000"), false), vec![2, 4]);
        assert_eq!(
            search(
                &b,
                &args("SINCE 1-Jan-2026 HEADER X-Mailbench-Track \"r1\""),
                true
            ),
            vec![2]
        );
        assert_eq!(search(&b, &args("OR UID 1 DELETED"), true), vec![1, 4]);
        assert_eq!(search(&b, &args("NOT SEEN"), true), vec![2, 3]);
        assert_eq!(search(&b, &args("2:*"), true), vec![2, 3, 4]);
        assert_eq!(search(&b, &args("SUBJECT \"RE:\""), true), vec![4]);
        assert_eq!(
            search(&b, &args("CHARSET UTF-8 (UNSEEN LARGER 1000)"), true),
            vec![2]
        );
        assert_eq!(
            sort(&b, &args("(REVERSE ARRIVAL) US-ASCII ALL"), true),
            vec![4, 3, 2, 1]
        );
        assert_eq!(
            sort(&b, &args("(REVERSE SIZE) US-ASCII ALL"), true),
            vec![2, 4, 3, 1]
        );
        assert_eq!(
            sort(&b, &args("(SUBJECT) US-ASCII UNSEEN"), false),
            vec![2, 3]
        );
    }

    #[test]
    fn sets() {
        assert!(in_set("1:5,7,9:*", 7, 20) && in_set("1:5,7,9:*", 20, 20));
        assert!(!in_set("1:5,7", 6, 20));
        // N:* past the last names the last.
        assert!(in_set("30:*", 20, 20));
        assert!(!in_set("x", 1, 1) && !in_set("", 1, 1));
    }
}
