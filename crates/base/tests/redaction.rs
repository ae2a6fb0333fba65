//! The redaction layer as a class: every encoding mailbench sends a secret
//! in, next to any character, for the 1st or the 10,000th secret, is gone
//! from every sink (test log, run folder files, JSON) before it is written.
//! Its own process: the registry is process-wide.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mailbench_base::rundir::{RunDir, write_json, write_text};
use mailbench_base::secrets::{MASK, redact, register};
use proptest::prelude::*;
use support::{encodings, leaks};

mod support;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_encoding_is_masked_next_to_any_character(
        pw in "[!-~]{6,24}",
        login in "[a-z0-9.@]{1,20}",
        before in "[ .=;,:\"'a-zA-Z0-9+/]{0,3}",
        after in "[ .=;,:\"'a-zA-Z0-9+/]{0,3}",
    ) {
        register(&pw);
        for enc in encodings(&login, &pw) {
            let text = format!("535 5.7.8 failed for {before}{enc}{after}. done");
            let out = redact(&text);
            prop_assert!(!leaks(&out, &pw, &enc), "{text:?} -> {out:?}");
            prop_assert!(out.contains(MASK));
            prop_assert!(out.starts_with("535 5.7.8 failed for") && out.ends_with("done"));
        }
    }
}

#[test]
fn every_sink_of_a_run_folder_writes_redacted() {
    let pw = "Tr0ub4dor&3 \"x\"";
    register(pw);
    let t = tempfile::tempdir().unwrap();
    let dir = RunDir::create(t.path(), "mail-run").unwrap();
    let said = encodings("user1@example.test", pw).join(" | ");
    dir.log.line(format!("error: {said}"));
    dir.write("summary.txt", said.as_bytes()).unwrap();
    dir.write_json(
        "result.json",
        &serde_json::json!({ "errors": [said.clone()] }),
    )
    .unwrap();
    dir.write_jsonl(
        "intervals.jsonl",
        &[serde_json::json!({ "e": said.clone() })],
    )
    .unwrap();
    write_text(&dir.file("report.html"), &format!("<p>{said}</p>")).unwrap();
    write_json(&dir.file("other.json"), &said).unwrap();
    for f in std::fs::read_dir(&dir.path).unwrap() {
        let p = f.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        for enc in encodings("user1@example.test", pw) {
            assert!(
                !leaks(&text, pw, &enc),
                "{} holds {enc}: {text}",
                p.display()
            );
        }
        assert!(text.contains(MASK), "{}", p.display());
    }
    // JSON stays JSON: keys are mailbench's own, values are masked.
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.file("result.json")).unwrap()).unwrap();
    assert!(v["errors"][0].as_str().unwrap().contains(MASK));
}
