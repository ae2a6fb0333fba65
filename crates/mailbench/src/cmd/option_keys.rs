//! Every flag has a TOML key of the same name in its command's section and
//! the configuration docs name every key: checked here against the clap
//! definitions, the section types (their serde field lists) and docs/.

use clap::CommandFactory;
use std::collections::BTreeSet;

/// The keys a section type accepts, as a set.
fn section_keys<T: serde::de::DeserializeOwned>() -> BTreeSet<String> {
    mailbench_base::config::accepted_keys::<T>()
        .into_iter()
        .collect()
}

/// The long flags (as keys: `-` becomes `_`) of `mailbench <group> <sub>`
/// for each sub, without the global ones.
fn flag_keys(group: &str, subs: &[&str]) -> BTreeSet<String> {
    let cli = crate::Cli::command();
    let Some(g) = cli.find_subcommand(group) else {
        panic!("no command {group}")
    };
    let mut out = BTreeSet::new();
    let mut add = |c: &clap::Command| {
        for a in c.get_arguments().filter(|a| !a.is_global_set()) {
            if let Some(l) = a.get_long() {
                out.insert(l.replace('-', "_"));
            }
            // Older names kept as aliases have their key's alias too.
            for l in a.get_all_aliases().unwrap_or_default() {
                out.insert(l.replace('-', "_"));
            }
        }
    };
    if subs.is_empty() {
        add(g);
    }
    for s in subs {
        add(g
            .find_subcommand(s)
            .unwrap_or_else(|| panic!("no command {group} {s}")));
    }
    out.retain(|k| !["help", "config", "output", "json", "quiet", "verbose"].contains(&k.as_str()));
    out
}

/// The docs page of a section, from the repository.
fn doc(name: &str) -> String {
    let path = format!("{}/../../docs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Keys the docs page names neither as a TOML line (`key =`, `# key =`), a
/// table (`[section.key`) nor as a flag (`--key`).
fn undocumented(keys: &BTreeSet<String>, section: &str, text: &str) -> Vec<String> {
    keys.iter()
        .filter(|k| {
            !text.contains(&format!("{k} ="))
                && !text.contains(&format!("[{section}.{k}"))
                && !text.contains(&format!("--{}", k.replace('_', "-")))
        })
        .cloned()
        .collect()
}

/// Checks that flags and keys differ only by the pairs and exceptions named.
fn assert_agree(
    what: &str,
    flags: BTreeSet<String>,
    keys: &BTreeSet<String>,
    renamed: &[(&str, &str)],
    flag_only: &[&str],
    key_only: &[&str],
) {
    let flags: BTreeSet<String> = flags
        .into_iter()
        .map(|f| {
            renamed
                .iter()
                .find(|(flag, _)| *flag == f)
                .map_or(f, |(_, key)| key.to_string())
        })
        .filter(|f| !flag_only.contains(&f.as_str()))
        .collect();
    let keys: BTreeSet<String> = keys
        .iter()
        .filter(|k| !key_only.contains(&k.as_str()))
        .cloned()
        .collect();
    assert_eq!(
        flags,
        keys,
        "{what}: flags without a key: {:?}; keys without a flag: {:?}",
        flags.difference(&keys).collect::<Vec<_>>(),
        keys.difference(&flags).collect::<Vec<_>>()
    );
}

#[test]
fn storage_flags_keys_and_docs_agree() {
    let keys = section_keys::<mailbench_storage::spec::StorageToml>();
    assert!(keys.len() > 20, "the probe found no key list: {keys:?}");
    assert_agree(
        "[storage]",
        flag_keys("storage", &["init", "run", "verify", "backup", "recover"]),
        &keys,
        &[
            ("path", "paths"),
            ("log_path", "log_paths"),
            ("to", "backup_to"),
            ("no_verify", "verify"),
        ],
        // The loss is accepted per command; the endpoint is `[report] metrics_listen`.
        &["accept_lost_log_tail", "metrics_listen"],
        // Tables only a file can hold.
        &["profile_overrides", "thresholds", "hosts"],
    );
    let missing = undocumented(&keys, "storage", &doc("storage-config.md"));
    assert!(
        missing.is_empty(),
        "docs/storage-config.md lacks {missing:?}"
    );
    // The keys a host table may set: the definition, the docs' list.
    let host_keys = mailbench_storage::spec::HOST_KEYS.map(String::from);
    assert!(host_keys.iter().all(|k| keys.contains(k)), "{host_keys:?}");
    let text = doc("multihost.md");
    let Some(list) = text.split("Keys allowed per host:").nth(1) else {
        panic!("docs/multihost.md has no `Keys allowed per host:` list")
    };
    let list = &list[..list.find(". ").unwrap_or(list.len())];
    let documented: BTreeSet<String> = list
        .split('`')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect();
    assert_eq!(
        documented,
        host_keys.into_iter().collect::<BTreeSet<_>>(),
        "docs/multihost.md"
    );
}

#[test]
fn suite_flags_keys_and_docs_agree() {
    let mut keys = section_keys::<mailbench_storage::spec::StorageToml>();
    let suite = section_keys::<mailbench_storage::spec::SuiteToml>();
    assert!(suite.len() >= 3, "the probe found no key list: {suite:?}");
    keys.extend(suite.iter().cloned());
    assert_agree(
        "[storage] and [suite] of storage suite",
        flag_keys("storage", &["suite"]),
        &keys,
        &[
            ("path", "paths"),
            ("log_path", "log_paths"),
            ("to", "backup_to"),
            ("no_verify", "verify"),
        ],
        &["accept_lost_log_tail", "metrics_listen", "resume"],
        &["profile_overrides", "thresholds", "hosts"],
    );
    let missing = undocumented(&suite, "suite", &doc("storage-config.md"));
    assert!(
        missing.is_empty(),
        "docs/storage-config.md lacks {missing:?}"
    );
}

#[test]
fn mail_flags_keys_and_docs_agree() {
    use mailbench_mail::options::{MailOptions, SetupOptions};
    let keys = section_keys::<MailOptions>();
    assert!(keys.len() > 20, "the probe found no key list: {keys:?}");
    // Each command takes exactly its groups of the one section: setup the
    // setup group, run every group, sweep every group and its search
    // (`--find-max`, `--resolution`) and `--pdf`: flags of `mail sweep` only.
    assert_agree(
        "[mail] of mail setup",
        flag_keys("mail", &["setup"]),
        &section_keys::<SetupOptions>(),
        &[],
        &[],
        &[],
    );
    assert_agree(
        "[mail] of mail run",
        flag_keys("mail", &["run"]),
        &keys,
        &[],
        &[],
        &[],
    );
    assert_agree(
        "[mail] of mail sweep",
        flag_keys("mail", &["sweep"]),
        &keys,
        &[],
        &["find_max", "resolution", "pdf"],
        &[],
    );
    let missing = undocumented(&keys, "mail", &doc("mail-load.md"));
    assert!(missing.is_empty(), "docs/mail-load.md lacks {missing:?}");
}

#[test]
fn plan_flags_keys_and_docs_agree() {
    let keys = section_keys::<mailbench_plan::Settings>();
    assert!(keys.len() > 20, "the probe found no key list: {keys:?}");
    assert_agree("[plan]", flag_keys("plan", &[]), &keys, &[], &[], &[]);
    let missing = undocumented(&keys, "plan", &doc("planner.md"));
    assert!(missing.is_empty(), "docs/planner.md lacks {missing:?}");
}
