//! The spec's resolution and checks, from config text and flags.

use super::*;
use crate::bounds;
use crate::profile::ProfileExt;
use mailbench_base::config::ConfigFile;
use std::path::{Path, PathBuf};

fn cfg(text: &str) -> ConfigFile {
    ConfigFile::parse(text, Path::new("t.toml")).unwrap()
}

#[test]
fn sizes_from_mailboxes_and_quota() {
    let c = cfg(
        "[storage]\nmailboxes = 100\nmailbox_quota = \"100MiB\"\ndatabases = 4\niops_per_mailbox = 0.5\n",
    );
    let s = StorageSpec::resolve(StorageToml::default(), &c, Path::new("/tmp/x")).unwrap();
    assert_eq!(s.instances.len(), 4);
    assert_eq!(s.instances[0].size_bytes, 25 * (100 << 20));
    assert_eq!(s.target_iops, Some(50.0));
    assert!(!s.paced);
    assert_eq!(s.instances[0].mailboxes, 25);
    assert_eq!(s.instances.iter().map(|i| i.sessions).sum::<usize>(), 16);
}

#[test]
fn a_host_section_applies_to_its_host_only_and_flags_win() {
    let c = cfg(
        "[storage]\ndb_size = \"1GiB\"\npaths = [\"/data/a\"]\ndatabases = 2\n\
         [storage.hosts.db07]\npaths = [\"/srv/x\", \"/srv/y\"]\ndatabases = 4\n",
    );
    let d = Path::new("/tmp/x");
    let s = StorageSpec::resolve_for_host(StorageToml::default(), &c, d, "db07").unwrap();
    assert_eq!(
        s.volumes,
        vec![PathBuf::from("/srv/x"), PathBuf::from("/srv/y")]
    );
    assert_eq!(s.instances.len(), 4);
    let s = StorageSpec::resolve_for_host(StorageToml::default(), &c, d, "db08").unwrap();
    assert_eq!(s.volumes, vec![PathBuf::from("/data/a")]);
    assert_eq!(s.instances.len(), 2);
    let flags = StorageToml {
        databases: Some(1),
        ..Default::default()
    };
    let s = StorageSpec::resolve_for_host(flags, &c, d, "db07").unwrap();
    assert_eq!(s.instances.len(), 1);
    let bad = cfg("[storage]\ndb_size = \"1GiB\"\n[storage.hosts.db07]\npath = [\"/x\"]\n");
    let e = StorageSpec::resolve_for_host(StorageToml::default(), &bad, d, "db07")
        .unwrap_err()
        .to_string();
    assert!(e.contains("path"), "{e}");
}

#[test]
fn a_host_table_may_set_only_what_differs_between_hosts() {
    let d = Path::new("/tmp/x");
    // Any host's table is checked, not only the resolving host's.
    let c = cfg("[storage]\ndb_size = \"1GiB\"\n[storage.hosts.db09]\nduration = \"5m\"\n");
    let e = StorageSpec::resolve_for_host(StorageToml::default(), &c, d, "db07")
        .unwrap_err()
        .to_string();
    assert!(e.contains("db09") && e.contains("`duration`"), "{e}");
    let c = cfg("[storage]\ndb_size = \"1GiB\"\n[storage.hosts.db09]\ntype = \"stress\"\n");
    let e = StorageSpec::resolve_for_host(StorageToml::default(), &c, d, "db07")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`type`"), "{e}");
    // Every key of the list is accepted and applies to its host only.
    let c = cfg(
        "[storage]\ndb_size = \"1GiB\"\n[storage.hosts.db07]\npaths = [\"/p\"]\n\
         log_paths = [\"/l\"]\ndatabases = 3\nthreads = 2\ntarget_iops = 50.0\n\
         backup_to = \"/b\"\n",
    );
    let s = StorageSpec::resolve_for_host(StorageToml::default(), &c, d, "db07").unwrap();
    assert_eq!(s.volumes, vec![PathBuf::from("/p")]);
    assert_eq!(s.instances.len(), 3);
    assert_eq!(s.threads, 2);
    assert_eq!(s.log_volumes, vec![PathBuf::from("/l")]);
    assert_eq!(s.target_iops, Some(50.0));
    let s = StorageSpec::resolve_for_host(StorageToml::default(), &c, d, "db08").unwrap();
    assert_ne!(s.volumes, vec![PathBuf::from("/p")]);
    assert_eq!(s.target_iops, None);
}

#[test]
fn thresholds_come_from_the_profile_and_the_test_type_and_keys_override_one_by_one() {
    let d = Path::new("/tmp/x");
    let th = |text: &str| {
        StorageSpec::resolve(StorageToml::default(), &cfg(text), d)
            .unwrap()
            .thresholds
    };
    let t = th("[storage]\ndb_size = \"1GiB\"\n");
    assert_eq!((t.db_read_max_ms, t.log_write_max_ms), (100.0, 100.0));
    assert_eq!(t.page_fault_stalls_per_s, 1.0);
    assert_eq!(t.page_fault_stalls_max_per_s, None);
    let t = th("[storage]\ndb_size = \"1GiB\"\ntype = \"stress\"\n");
    assert_eq!((t.db_read_max_ms, t.log_write_max_ms), (200.0, 200.0));
    // The 2007-era tool: 50 ms maxima, no stall in any sample; stress 100 ms.
    let t = th("[storage]\ndb_size = \"1GiB\"\nprofile = \"exchange2007\"\n");
    assert_eq!((t.db_read_avg_ms, t.db_read_max_ms), (20.0, 50.0));
    assert_eq!((t.log_write_avg_ms, t.log_write_max_ms), (10.0, 50.0));
    assert_eq!(t.page_fault_stalls_max_per_s, Some(0.0));
    let t = th("[storage]\ndb_size = \"1GiB\"\nprofile = \"exchange2003\"\ntype = \"stress\"\n");
    assert_eq!((t.db_read_max_ms, t.log_write_max_ms), (100.0, 100.0));
    // One key of [storage.thresholds] replaces that key only.
    let t = th(
        "[storage]\ndb_size = \"1GiB\"\nprofile = \"exchange2007\"\n\
                [storage.thresholds]\ndb_read_max_ms = 75\npage_fault_stalls_max_per_s = 2\n",
    );
    assert_eq!((t.db_read_max_ms, t.log_write_max_ms), (75.0, 50.0));
    assert_eq!(t.page_fault_stalls_max_per_s, Some(2.0));
    for (text, key) in [
        ("db_read_max_ms = 0", "db_read_max_ms"),
        (
            "page_fault_stalls_max_per_s = -1",
            "page_fault_stalls_max_per_s",
        ),
    ] {
        let c = cfg(&format!(
            "[storage]\ndb_size = \"1GiB\"\n[storage.thresholds]\n{text}\n"
        ));
        let e = StorageSpec::resolve(StorageToml::default(), &c, d).unwrap_err();
        assert_eq!(e.exit_status().code(), 2);
        assert!(e.to_string().contains(key), "{e}");
    }
    let t = Thresholds::exchange2013(TestType::Performance);
    assert!(!t.describe().contains("every sample"));
    let t = Profile::load("exchange2007", None)
        .unwrap()
        .thresholds
        .performance;
    assert!(
        t.describe().contains("<= 0/s in every sample"),
        "{}",
        t.describe()
    );
}

#[test]
fn flags_override_file_and_bad_values_name_their_key() {
    let c = cfg("[storage]\ndb_size = \"1GiB\"\nthreads = 4\n");
    let flags = StorageToml {
        threads: Some(Threads::Fixed(2)),
        ..Default::default()
    };
    let s = StorageSpec::resolve(flags, &c, Path::new("/tmp/x")).unwrap();
    assert_eq!(s.threads, 2);
    assert_eq!(s.io_threads, None, "one I/O thread per CPU unless asked");
    let c = cfg("[storage]\ndb_size = \"1GiB\"\ndatabases = 4\nio_threads = 2\n");
    let s = StorageSpec::resolve(StorageToml::default(), &c, Path::new("/tmp/x")).unwrap();
    assert_eq!(s.io_threads, Some(2));

    for (text, key) in [
        ("[storage]\ndb_size = \"1GiB\"\ncopies = 0\n", "copies"),
        (
            "[storage]\ndb_size = \"1GiB\"\ncapacity_pct = 50\n",
            "db_size",
        ),
        ("[storage]\ncapacity_pct = 150\n", "capacity_pct"),
        (
            "[storage]\ndb_size = \"1GiB\"\ntarget_iops = -3\n",
            "target_iops",
        ),
        (
            "[storage]\ndb_size = \"1GiB\"\nio_engine = \"spdk\"\n",
            "io_engine",
        ),
        (
            "[storage]\ndb_size = \"1GiB\"\ndatabases = 2\nio_threads = 3\n",
            "io_threads",
        ),
        (
            "[storage]\ndb_size = \"1GiB\"\nio_threads = 0\n",
            "io_threads",
        ),
        ("[storage]\ndb_size = \"64KiB\"\n", "too small"),
        (
            "[storage]\ndb_size = \"1GiB\"\n[storage.profile_overrides]\nread_pct = 90\n",
            "sums to",
        ),
    ] {
        let e = StorageSpec::resolve(StorageToml::default(), &cfg(text), Path::new("/tmp/x"))
            .unwrap_err();
        assert_eq!(e.exit_status().code(), 2);
        assert!(e.to_string().contains(key), "{text}: {e}");
    }
    let e = cfg("[storage]\nthreads = \"many\"\n")
        .section::<StorageToml>("storage")
        .unwrap_err();
    assert!(e.to_string().contains("many"), "{e}");
    let e = cfg("[storage]\nmailbox_quota = \"-1GiB\"\n")
        .section::<StorageToml>("storage")
        .unwrap_err();
    assert!(e.to_string().contains("negative"), "{e}");
}

#[test]
fn free_space_and_foreign_folders_are_checked_before_writing() {
    let t = tempfile::tempdir().unwrap();
    let c = cfg("[storage]\ndb_size = \"1000TiB\"\n");
    let flags = StorageToml {
        paths: Some(vec![t.path().join("db")]),
        ..Default::default()
    };
    let s = StorageSpec::resolve(flags, &c, Path::new("/tmp/x")).unwrap();
    let e = s.check_paths(Space::Create).unwrap_err().to_string();
    assert!(
        e.contains("not enough free space") && e.contains("available"),
        "{e}"
    );
    // What writes nothing new there (verify, backup, replay) is not blocked.
    s.check_paths(Space::None).unwrap();
    assert!(!t.path().join("db").exists(), "nothing written");

    std::fs::create_dir(t.path().join("mine")).unwrap();
    std::fs::write(t.path().join("mine/notes.txt"), "x").unwrap();
    let flags = StorageToml {
        paths: Some(vec![t.path().join("mine")]),
        ..Default::default()
    };
    let s = StorageSpec::resolve(
        flags,
        &cfg("[storage]\ndb_size = \"1GiB\"\n"),
        Path::new("/x"),
    )
    .unwrap();
    let e = s.check_paths(Space::None).unwrap_err().to_string();
    assert!(e.contains("notes.txt"), "{e}");
}

/// Every key of `[storage]` that takes a number has its range in the one
/// table (`bounds::STORAGE`), and every bounded key, spoiled (below, above,
/// NaN, infinity) in the file or on a host's table, is refused with exit 2
/// naming it before anything is written.
#[test]
fn every_numeric_key_of_storage_is_bounded_and_checked() {
    use mailbench_base::limits::{spoiled, unbounded_keys};
    for key in mailbench_base::config::accepted_keys::<StorageToml>() {
        let Ok(t) = toml::from_str::<StorageToml>(&format!("{key} = 1")) else {
            continue;
        };
        let loose = unbounded_keys(&t, bounds::STORAGE);
        assert!(loose.is_empty(), "`{key}` takes a number but has no range");
    }
    let full = "databases = 2\nmailboxes = 100\niops_per_mailbox = 0.5\ntarget_iops = 50\n\
        copies = 2\nthreads = 8\nduration = \"10m\"\nwarmup = \"1m\"\nsample_interval = \"5s\"\n\
        shutdown_grace = \"30s\"\nio_threads = 1\ncache_size = \"256MiB\"\nseed = 7\nlog_files = 5\n\
        db_size = \"1GiB\"\n[thresholds]\ndb_read_avg_ms = 20\n[hosts.h1]\ndatabases = 2\n\
        mailboxes = 10\ntarget_iops = 10\nthreads = 4\n";
    let doc: toml::Value = toml::from_str(full).unwrap();
    let t: StorageToml = doc.clone().try_into().unwrap();
    assert!(unbounded_keys(&t, bounds::STORAGE).is_empty());
    let cases = spoiled(&doc, bounds::STORAGE);
    assert!(cases.len() > 60, "{}", cases.len());
    for (key, bad) in cases {
        let mut top = toml::Table::new();
        top.insert("storage".into(), bad);
        let c = cfg(&toml::to_string(&top).unwrap());
        let e = StorageSpec::resolve(StorageToml::default(), &c, Path::new("/tmp/x")).unwrap_err();
        assert_eq!(e.exit_status().code(), 2, "{key}: {e}");
        let leaf = key.rsplit('.').next().unwrap();
        assert!(e.to_string().contains(leaf), "{key}: {e}");
    }
}

/// The same for every key of a storage profile (`[storage.profile]` over a
/// built-in one).
#[test]
fn every_numeric_key_of_a_storage_profile_is_bounded_and_checked() {
    use mailbench_base::limits::{spoiled, unbounded_keys};
    let p = Profile::load("exchange2013", None).unwrap();
    let loose = unbounded_keys(&p, bounds::PROFILE);
    assert!(loose.is_empty(), "no range for {loose:?}");
    let doc = toml::Value::try_from(&p).unwrap();
    let cases = spoiled(&doc, bounds::PROFILE);
    assert!(cases.len() > 80, "{}", cases.len());
    for (key, bad) in cases {
        let toml::Value::Table(t) = bad else { panic!() };
        let e = Profile::load("exchange2013", Some(&t)).unwrap_err();
        assert_eq!(e.exit_status().code(), 2, "{key}: {e}");
        let leaf = key.rsplit('.').next().unwrap();
        assert!(e.to_string().contains(leaf), "{key}: {e}");
    }
}
