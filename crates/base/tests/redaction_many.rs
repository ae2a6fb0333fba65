//! The redaction of many secrets (a users file of 10,000 users): the last
//! is masked as the first, in every encoding. Its own process: the registry
//! is process-wide.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mailbench_base::secrets::{redact, register_all};

mod support;
use support::{encodings, leaks};

#[test]
fn the_ten_thousandth_secret_is_masked_like_the_first() {
    let many: Vec<String> = (0..10_000).map(|i| format!("pw-{i:05};x,y")).collect();
    register_all(many.iter().map(String::as_str));
    for pw in [&many[0], &many[256], &many[9_999]] {
        for enc in encodings("user@example.test", pw) {
            let text = format!("NO [AUTHENTICATIONFAILED] {enc};");
            let out = redact(&text);
            assert!(!leaks(&out, pw, &enc), "{enc} -> {out}");
        }
    }
    // Text without a secret is left alone.
    assert_eq!(redact("* 3 EXISTS"), "* 3 EXISTS");
}
