//! Property-based fuzzing of what the mail client reads from a server: IMAP
//! response framing (`wire::unit_len`, `Wire::read_unit`), the IMAP response
//! parsers, and SMTP and IMAP greetings and replies through a real `Wire` over
//! an in-memory stream. Arbitrary bytes never panic, never hang (every read has
//! its deadline, the stream ends) and every accepted unit is bounded by the
//! input. 256 cases per property (`FUZZ_CASES`), part of the normal suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mailbench_mail::imap::{self, ImapConn};
use mailbench_mail::smtp::SmtpConn;
use mailbench_mail::wire::{self, Wire};
use proptest::prelude::*;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

const FUZZ_CASES: u32 = 256;

/// Bytes that look like server output often enough to get past the first
/// check: arbitrary bytes, or protocol-ish lines with literals, codes and CRLFs.
fn server_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        Just(b"\r\n".to_vec()),
        "[0-9]{1,12}".prop_map(|n| format!("{{{n}}}\r\n").into_bytes()),
        "[0-9]{1,3}".prop_map(|n| format!("{{{n}+}}\r\n").into_bytes()),
        Just(b"* OK [CAPABILITY IMAP4rev1 IDLE] hi\r\n".to_vec()),
        Just(b"* LIST (\\HasNoChildren) \"/\" \"INBOX\"\r\n".to_vec()),
        Just(b"* 3 FETCH (UID 7 FLAGS (\\Seen))\r\n".to_vec()),
        Just(b"220 mx ESMTP\r\n".to_vec()),
        Just(b"250-PIPELINING\r\n".to_vec()),
        Just(b"250 OK\r\n".to_vec()),
        "[0-9]{3}[- x]?[ -~]{0,20}\r\n".prop_map(String::into_bytes),
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

/// A `Wire` whose peer sent `bytes` and then closed.
async fn wire_of(bytes: &[u8]) -> Wire {
    let (ours, mut theirs) = tokio::io::duplex(bytes.len() + 1024);
    theirs.write_all(bytes).await.unwrap();
    drop(theirs);
    Wire::from_io(Box::new(ours), "fuzz".into())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(FUZZ_CASES))]

    #[test]
    fn unit_framing_never_panics_and_stays_in_the_input(b in server_bytes()) {
        if let Ok(Some(n)) = wire::unit_len(&b) {
            prop_assert!(n >= 2 && n <= b.len());
            prop_assert_eq!(&b[n - 2..n], b"\r\n");
        }
    }

    #[test]
    fn read_unit_and_read_line_end_on_any_stream(b in server_bytes()) {
        runtime().block_on(async {
            let mut w = wire_of(&b).await;
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut total = 0;
            // Every unit consumes input: at most one per input byte, then EOF.
            for _ in 0..=b.len() {
                match w.read_unit(deadline).await {
                    Ok(u) => {
                        // The unit without its final CRLF: never more than was sent.
                        total += u.len() + 2;
                        prop_assert!(total <= b.len());
                    }
                    Err(_) => break,
                }
            }
            let mut w = wire_of(&b).await;
            for _ in 0..=b.len() {
                if w.read_line(deadline).await.is_err() {
                    break;
                }
            }
            Ok(())
        })?;
    }

    #[test]
    fn imap_parsers_never_panic(lines in proptest::collection::vec(server_bytes(), 0..6)) {
        let _ = imap::parse_numbers(&lines);
        let _ = imap::parse_list(&lines);
        let _ = imap::list_names(&lines);
        let _ = imap::personal_namespace(&lines);
        let _ = imap::status_messages(&lines);
        for l in &lines {
            let _ = imap::fetch_seq_uid(l);
            let _ = imap::header_value(l, "X-Mailbench-Track");
            let _ = imap::appenduid(&String::from_utf8_lossy(l));
            let shown = wire::show(l);
            // What is shown of a server's line in an error is bounded.
            prop_assert!(shown.chars().count() <= 120);
        }
    }

    #[test]
    fn smtp_and_imap_greetings_and_replies_never_panic(b in server_bytes()) {
        runtime().block_on(async {
            if let Ok(mut c) = SmtpConn::from_wire(wire_of(&b).await, Duration::from_secs(5)).await {
                let _ = c.hello().await;
            }
            let _ = ImapConn::from_wire(wire_of(&b).await, Duration::from_secs(5), None).await;
        });
    }
}
