//! The tracking header that ties a delivered message to its submission
//! (`X-Mailbench-Track`), the run id, and the parsing of fetched headers and literals.

/// The value of header `name` in a header block, continuation lines joined.
pub(super) fn unfolded_header(block: &[u8], name: &str) -> Option<String> {
    let text = String::from_utf8_lossy(block);
    let mut value: Option<String> = None;
    for line in text.split("\r\n") {
        match &mut value {
            Some(v) if line.starts_with([' ', '\t']) => {
                v.push(' ');
                v.push_str(line.trim());
            }
            Some(_) => break,
            None => {
                if let Some((h, v)) = line.split_once(':')
                    && h.trim().eq_ignore_ascii_case(name)
                {
                    value = Some(v.trim().to_string());
                }
            }
        }
    }
    value.filter(|v| !v.is_empty())
}

/// The contents of the `{n}` literals of a response unit, in order.
pub(super) fn literals(u: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(rel) = u[i..].windows(3).position(|w| w == b"}\r\n") {
        let close = i + rel;
        let open = u[..close].iter().rposition(|c| *c == b'{');
        let n = open.and_then(|o| {
            std::str::from_utf8(&u[o + 1..close])
                .ok()?
                .trim_end_matches('+')
                .parse::<usize>()
                .ok()
        });
        let start = close + 3;
        match n {
            Some(n) if start + n <= u.len() => {
                out.push(u[start..start + n].to_vec());
                i = start + n;
            }
            _ => i = start,
        }
        if i >= u.len() {
            break;
        }
    }
    out
}

pub struct Track {
    pub seq: u64,
    pub t_us: u64,
    pub from: usize,
    pub rcpts: Vec<usize>,
}

/// Parses `<run> <seq> <t_us> <from> <rcpt,...|->` when it belongs to `run_id`.
pub fn parse_track(v: &str, run_id: &str) -> Option<Track> {
    let mut it = v.split_whitespace();
    if it.next()? != run_id {
        return None;
    }
    let seq = it.next()?.parse().ok()?;
    let t_us = it.next()?.parse().ok()?;
    let from = it.next()?.parse().ok()?;
    // The recipients' list as one word, should a server have folded it.
    let rest: String = it.collect();
    let rcpts = match rest.as_str() {
        "-" | "" => Vec::new(),
        r => r.split(',').filter_map(|x| x.parse().ok()).collect(),
    };
    Some(Track {
        seq,
        t_us,
        from,
        rcpts,
    })
}

/// Whom an answer to a message goes to first, from the message's fetched
/// `header` block: its sender, then for Reply All its recipients (user
/// indexes of run `run_id`, from the tracking header); none for mail that
/// is not this run's.
pub(super) fn answered(header: &[u8], run_id: &str, all: bool) -> Vec<usize> {
    let Some(t) =
        unfolded_header(header, "X-Mailbench-Track").and_then(|v| parse_track(&v, run_id))
    else {
        return Vec::new();
    };
    let mut out = vec![t.from];
    if all {
        out.extend(t.rcpts);
    }
    out
}

/// A run id unique enough to tell this run's messages from earlier runs'.
pub fn new_run_id(seed: u64) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    format!(
        "r{:x}",
        t ^ seed.rotate_left(17) ^ u64::from(std::process::id())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracking_headers_round_trip() {
        let t = parse_track("rab 12 3456 7 1,2,3", "rab").unwrap();
        assert_eq!(
            (t.seq, t.t_us, t.from, t.rcpts),
            (12, 3456, 7, vec![1, 2, 3])
        );
        assert!(
            parse_track("rab 12 3456 7 -", "rab")
                .unwrap()
                .rcpts
                .is_empty()
        );
        assert!(parse_track("other 1 2 3 -", "rab").is_none());
        assert!(parse_track("rab x", "rab").is_none());
        assert_eq!(
            literals(b"* 1 FETCH (BODY[] {3}\r\nabc)"),
            vec![b"abc".to_vec()]
        );
        assert_eq!(
            literals(b"* 1 FETCH (UID 4 BODY[HEADER.FIELDS (FROM)] {6}\r\nF: a\r\n BODY[TEXT]<0> {2}\r\nhi)"),
            vec![b"F: a\r\n".to_vec(), b"hi".to_vec()]
        );
        let h =
            b"From: a@x\r\nMessage-ID: <1@x>\r\nReferences: <0@x>\r\n <00@x>\r\nSubject: s\r\n\r\n";
        assert_eq!(unfolded_header(h, "message-id").as_deref(), Some("<1@x>"));
        assert_eq!(
            unfolded_header(h, "References").as_deref(),
            Some("<0@x> <00@x>")
        );
        assert_eq!(unfolded_header(h, "Cc"), None);
    }

    #[test]
    fn an_answer_goes_to_the_people_of_the_tracking_header() {
        let h = b"From: u3@x\r\nX-Mailbench-Track: rab 12 3456 3 1,2,\r\n 7\r\nTo: u1@x\r\n\r\n";
        assert_eq!(answered(h, "rab", false), vec![3]);
        // Folded by a server: the recipients' list is still whole.
        assert_eq!(answered(h, "rab", true), vec![3, 1, 2, 7]);
        assert!(answered(h, "other", true).is_empty());
        assert!(answered(b"From: a@x\r\n\r\n", "rab", true).is_empty());
    }
}
