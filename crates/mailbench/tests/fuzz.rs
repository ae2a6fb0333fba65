//! Property-based fuzzing of every file mailbench reads: storage TOML
//! (`[storage]` of `--config`), profile files, plan TOML (`[plan]`), mail
//! TOML (`[mail]`), and
//! result.json (mutated copies of real results, loaded as `report` loads them).
//! Arbitrary input never panics; bad input is an error naming the file. 256
//! cases per property (`FUZZ_CASES`), part of the normal suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mailbench_base::config::{ConfigFile, accepted_keys};
use mailbench_storage::profile::ProfileExt;
use mailbench_storage::spec::{Profile, SpecExt, StorageSpec, StorageToml};
use proptest::prelude::*;
use std::path::Path;

const FUZZ_CASES: u32 = 256;

/// TOML values of every type, sane and hostile.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("1e308".to_string()),
        Just("true".to_string()),
        "[0-9]{1,20}(\\.[0-9]{1,3})?(KiB|MiB|GiB|TiB|PiB|KB|GB|%|s|ms|h|d|)"
            .prop_map(|s| format!("\"{s}\"")),
        "[ -~]{0,24}".prop_map(|s| format!("{s:?}")),
        proptest::collection::vec(any::<u8>(), 0..4).prop_map(|v| format!(
            "[{}]",
            v.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
        )),
        Just("{ a = 1 }".to_string()),
    ]
}

/// A TOML section of known keys (and a few unknown ones) with random values,
/// or raw arbitrary text.
fn section(name: &'static str, keys: Vec<String>) -> impl Strategy<Value = String> {
    assert!(!keys.is_empty(), "[{name}] has no known keys");
    let key = prop_oneof![
        9 => proptest::sample::select(keys),
        1 => "[a-z_]{1,12}",
    ];
    prop_oneof![
        9 => proptest::collection::vec((key, value()), 0..12).prop_map(move |kv| {
            let mut s = format!("[{name}]\n");
            let mut seen = std::collections::BTreeSet::new();
            for (k, v) in kv {
                if seen.insert(k.clone()) {
                    s.push_str(&format!("{k} = {v}\n"));
                }
            }
            s
        }),
        1 => "\\PC{0,200}",
    ]
}

const RESULTS: &[&str] = &[
    include_str!("../../results/tests/fixtures/v1/storage-run.json"),
    include_str!("../../results/tests/fixtures/v1/storage-init.json"),
    include_str!("../../results/tests/fixtures/v1/storage-verify.json"),
    include_str!("../../results/tests/fixtures/v1/storage-backup.json"),
    include_str!("../../results/tests/fixtures/v1/storage-recover.json"),
    include_str!("../../results/tests/fixtures/v1/storage-run-merged.json"),
    include_str!("../../results/tests/fixtures/v1/mail-run.json"),
    include_str!("../../results/tests/fixtures/v1/mail-setup.json"),
    include_str!("../../results/tests/fixtures/v1/mail-run-merged.json"),
];

/// Replaces the `pick`-th node (depth first) of `v` with `with`, or removes it
/// from its object.
fn mutate(v: &mut serde_json::Value, pick: &mut usize, with: &serde_json::Value, remove: bool) {
    match v {
        serde_json::Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if *pick == 0 {
                    if remove {
                        m.remove(&k);
                    } else {
                        m.insert(k, with.clone());
                    }
                    *pick = usize::MAX;
                    return;
                }
                *pick -= 1;
                if let Some(c) = m.get_mut(&k) {
                    mutate(c, pick, with, remove);
                }
                if *pick == usize::MAX {
                    return;
                }
            }
        }
        serde_json::Value::Array(a) => {
            for c in a.iter_mut() {
                if *pick == 0 {
                    *c = with.clone();
                    *pick = usize::MAX;
                    return;
                }
                *pick -= 1;
                mutate(c, pick, with, remove);
                if *pick == usize::MAX {
                    return;
                }
            }
        }
        _ => {}
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        Just(serde_json::json!(u64::MAX)),
        Just(serde_json::json!(-1e300)),
        "[ -~]{0,16}".prop_map(serde_json::Value::from),
        Just(serde_json::json!({})),
        Just(serde_json::json!([])),
        Just(serde_json::json!("HISTx")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(FUZZ_CASES))]

    #[test]
    fn storage_config_never_panics(text in section("storage", accepted_keys::<StorageToml>())) {
        let path = Path::new("fuzz.toml");
        if let Ok(cfg) = ConfigFile::parse(&text, path) {
            let _ = StorageSpec::resolve(StorageToml::default(), &cfg, Path::new("/nonexistent/fuzz"));
        }
    }

    #[test]
    fn profile_files_never_panic_and_errors_name_the_file(text in section("x", accepted_keys::<Profile>())) {
        // Profiles are top-level tables: drop the section line.
        let body = text.strip_prefix("[x]\n").unwrap_or(&text);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("profile.toml");
        std::fs::write(&file, body).unwrap();
        if let Err(e) = Profile::load(file.to_str().unwrap(), None) {
            let m = e.to_string();
            prop_assert!(m.contains("profile.toml") || m.contains("profile"), "{m}");
        }
    }

    #[test]
    fn plan_config_never_panics(text in section("plan", accepted_keys::<mailbench_plan::Settings>())) {
        let path = Path::new("fuzz.toml");
        let Ok(cfg) = ConfigFile::parse(&text, path) else { return Ok(()) };
        let Ok(settings) = cfg.section::<mailbench_plan::Settings>("plan") else { return Ok(()) };
        let rules = mailbench_plan::Rules::builtin().unwrap();
        if let Ok(input) = settings.validate(&rules) {
            let _ = mailbench_plan::plan(&input, &rules);
        }
    }

    #[test]
    fn mail_config_never_panics_and_errors_name_the_file(
        text in section("mail", accepted_keys::<mailbench_mail::options::MailOptions>()),
    ) {
        use mailbench_mail::options::{MailOptions, ResolveExt, Resolved};
        let path = Path::new("fuzz.toml");
        let Ok(cfg) = ConfigFile::parse(&text, path) else { return Ok(()) };
        match cfg.section::<MailOptions>("mail") {
            Ok(o) => {
                let _ = Resolved::resolve(&o, std::time::Duration::from_secs(8 * 3600));
            }
            Err(e) => {
                let m = e.to_string();
                prop_assert!(m.contains("fuzz.toml") && m.contains("[mail]"), "{m}");
                prop_assert_eq!(e.exit_status().code(), 2);
            }
        }
    }

    #[test]
    fn mutated_results_never_panic_and_errors_name_the_file(
        which in 0..RESULTS.len(),
        edits in proptest::collection::vec((any::<usize>(), json_value(), any::<bool>()), 1..6),
        cut in proptest::option::of(any::<usize>()),
    ) {
        let mut v: serde_json::Value = serde_json::from_str(RESULTS[which]).unwrap();
        for (pick, with, remove) in &edits {
            let mut p = pick % 400;
            mutate(&mut v, &mut p, with, *remove);
        }
        let mut text = serde_json::to_string(&v).unwrap();
        if let Some(c) = cut {
            let at = c % (text.len() + 1);
            let at = (0..=at).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
            text.truncate(at);
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("result.json");
        std::fs::write(&file, &text).unwrap();
        if let Err(e) = mailbench_report::load::load(&file) {
            let m = e.to_string();
            prop_assert!(m.contains(&file.display().to_string()), "{m}");
        }
    }
}
