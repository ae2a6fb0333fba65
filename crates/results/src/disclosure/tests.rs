#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use proptest::prelude::*;

fn from_toml(text: &str) -> std::result::Result<DisclosureToml, String> {
    toml::from_str(text).map_err(|e| e.message().to_string())
}

#[test]
fn the_section_reads_every_key_and_refuses_an_unknown_one_by_name() {
    let d = from_toml(
        r#"
vendor = "Contoso Storage"
solution = "MailArray 5000"
storage_model = "MA5000"
storage_firmware = "5.2.1"
raid_layout = "RAID-10, 24 x 1.2 TB 10k SAS"
connectivity = "16 Gb FC, 2 paths"
best_practices = """
Database and logs on separate LUNs.
Write cache mirrored."""
notes = "tested in the Contoso lab"
"#,
    )
    .unwrap();
    assert_eq!(d.connectivity.as_deref(), Some("16 Gb FC, 2 paths"));
    assert!(
        d.best_practices
            .as_deref()
            .unwrap()
            .contains("LUNs.\nWrite")
    );
    d.validate().unwrap();
    assert!(!d.is_empty());
    assert!(DisclosureToml::default().is_empty());
    let err = from_toml("vendor = \"x\"\nstorage_modle = \"y\"\n").unwrap_err();
    assert!(err.contains("unknown field `storage_modle`"), "{err}");
    assert!(err.contains("`storage_model`"), "{err}");
    let keys = mailbench_base::config::accepted_keys::<DisclosureToml>();
    assert_eq!(keys.len(), 8, "{keys:?}");
}

#[test]
fn values_over_their_bound_or_with_control_characters_are_refused_by_key() {
    let line = "x".repeat(MAX_DISCLOSURE_LINE_BYTES);
    let text = "x".repeat(MAX_DISCLOSURE_TEXT_BYTES);
    let ok = DisclosureToml {
        raid_layout: Some(line.clone()),
        best_practices: Some(text.clone()),
        notes: Some("a\n\tb\r\n".into()),
        ..Default::default()
    };
    ok.validate().unwrap();
    let cases = [
        (
            DisclosureToml {
                raid_layout: Some(line + "x"),
                ..Default::default()
            },
            "[disclosure] raid_layout is 4097 bytes long: at most 4096 bytes",
        ),
        (
            DisclosureToml {
                best_practices: Some(text + "x"),
                ..Default::default()
            },
            "[disclosure] best_practices is 65537 bytes long: at most 65536 bytes",
        ),
        (
            DisclosureToml {
                vendor: Some("a\nb".into()),
                ..Default::default()
            },
            "[disclosure] vendor holds '\\n': control characters (it is one line) are not accepted",
        ),
        (
            DisclosureToml {
                notes: Some("a\u{1b}[31m".into()),
                ..Default::default()
            },
            "[disclosure] notes holds '\\u{1b}': control characters other than line breaks and tabs are not accepted",
        ),
    ];
    for (d, want) in cases {
        let e = d.validate().unwrap_err();
        assert_eq!(e.to_string(), want);
        assert_eq!(e.exit_status().code(), 2);
    }
}

#[test]
fn rows_list_every_key_a_missing_one_saying_so() {
    let d = DisclosureToml {
        vendor: Some("Contoso".into()),
        ..Default::default()
    };
    let rows = d.rows();
    assert_eq!(rows.len(), 8);
    assert_eq!(rows[0], ("Vendor".into(), "Contoso".into()));
    assert_eq!(
        rows[5],
        (
            "Connectivity".into(),
            "not stated (the [disclosure] key connectivity)".into()
        )
    );
}

#[test]
fn a_fact_is_a_value_or_unknown_with_its_reason_in_json() {
    let k: Fact<u64> = Fact::Known(512);
    let u: Fact<u64> = Fact::unknown("tmpfs has no block device");
    assert_eq!(serde_json::to_string(&k).unwrap(), r#"{"value":512}"#);
    assert_eq!(
        serde_json::to_string(&u).unwrap(),
        r#"{"unknown":"tmpfs has no block device"}"#
    );
    assert_eq!(u.text(), "unknown (tmpfs has no block device)");
    assert_eq!(k.text(), "512");
    assert!(serde_json::from_str::<Fact<u64>>(r#"{"value":1,"unknown":"x"}"#).is_err());
    assert!(serde_json::from_str::<Fact<u64>>(r#"{"guess":1}"#).is_err());
}

fn text() -> impl Strategy<Value = String> {
    "[ -~\\n\\tàé€]{0,24}"
}

fn fact<T: std::fmt::Debug + Clone + 'static>(
    v: impl Strategy<Value = T> + 'static,
) -> impl Strategy<Value = Fact<T>> {
    prop_oneof![v.prop_map(Fact::Known), text().prop_map(Fact::Unknown)]
}

fn kind() -> impl Strategy<Value = DeviceKind> {
    prop::sample::select(vec![
        DeviceKind::Disk,
        DeviceKind::Nvme,
        DeviceKind::Virtio,
        DeviceKind::Partition,
        DeviceKind::Lvm,
        DeviceKind::Crypt,
        DeviceKind::Multipath,
        DeviceKind::Dm,
        DeviceKind::Md,
        DeviceKind::Loop,
        DeviceKind::Virtual,
    ])
}

fn device() -> impl Strategy<Value = BlockDevice> {
    (
        (
            text(),
            kind(),
            any::<u32>(),
            prop::collection::vec(text(), 0..3),
        ),
        (
            fact(text()),
            fact(any::<u64>()),
            fact(any::<bool>()),
            fact(text()),
        ),
        (fact(any::<u64>()), prop::option::of(fact(any::<u64>()))),
        (fact(any::<u64>()), fact(any::<u64>())),
        (
            prop::option::of(fact(text())),
            prop::option::of(fact(text())),
            prop::option::of(fact(text())),
        ),
    )
        .prop_map(
            |(
                (name, kind, depth, below),
                (model, size, rot, sched),
                (nr, qd),
                (lbs, pbs),
                (dm, raid, backing),
            )| BlockDevice {
                name,
                kind,
                depth,
                below,
                model,
                size_bytes: size,
                rotational: rot,
                scheduler: sched,
                nr_requests: nr,
                queue_depth: qd,
                logical_block_size: lbs,
                physical_block_size: pbs,
                dm_name: dm,
                raid,
                backing_file: backing,
            },
        )
}

fn filesystem() -> impl Strategy<Value = Filesystem> {
    (text(), text(), text(), text(), text(), text()).prop_map(|(a, b, c, d, e, f)| Filesystem {
        fs_type: a,
        source: b,
        mount_point: c,
        mount_options: d,
        super_options: e,
        device_number: f,
    })
}

fn path_facts() -> impl Strategy<Value = PathFacts> {
    (
        text(),
        fact(text()),
        any::<bool>(),
        fact(filesystem()),
        fact(prop::collection::vec(device(), 0..4)),
        prop::collection::vec(text(), 0..3),
    )
        .prop_map(
            |(path, examined, exists, filesystem, devices, notes)| PathFacts {
                path,
                examined,
                exists,
                filesystem,
                devices,
                notes,
            },
        )
}

pub(crate) fn detected() -> impl Strategy<Value = Detected> {
    (
        (
            text(),
            fact(text()),
            fact(text()),
            fact(text()),
            fact(text()),
        ),
        (
            fact(text()),
            fact(any::<u64>()),
            fact(any::<u64>()),
            fact(any::<u64>()),
        ),
        (fact(any::<u64>()), fact(text()), fact(text())),
        prop::collection::vec(path_facts(), 0..3),
    )
        .prop_map(
            |(
                (v, host, vendor, model, version),
                (cpu, logical, sockets, cores),
                (mem, kernel, os),
                paths,
            )| Detected {
                mailbench_version: v,
                hostname: host,
                system_vendor: vendor,
                system_model: model,
                system_version: version,
                cpu_model: cpu,
                logical_cpus: logical,
                sockets,
                cores,
                memory_bytes: mem,
                kernel,
                os,
                paths,
            },
        )
}

pub(crate) fn disclosure_toml() -> impl Strategy<Value = DisclosureToml> {
    let line = || prop::option::of("[ -~àé€]{0,40}");
    let multi = || prop::option::of("[ -~\\n\\tàé€]{0,200}");
    (
        line(),
        line(),
        line(),
        line(),
        line(),
        line(),
        multi(),
        multi(),
    )
        .prop_map(
            |(
                vendor,
                solution,
                storage_model,
                storage_firmware,
                raid_layout,
                connectivity,
                best_practices,
                notes,
            )| {
                DisclosureToml {
                    vendor,
                    solution,
                    storage_model,
                    storage_firmware,
                    raid_layout,
                    connectivity,
                    best_practices,
                    notes,
                }
            },
        )
}

proptest! {
    #[test]
    fn facts_round_trip_through_json(f in fact(any::<u64>()), g in fact(text())) {
        let back: Fact<u64> = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        prop_assert_eq!(back, f);
        let back: Fact<String> = serde_json::from_str(&serde_json::to_string(&g).unwrap()).unwrap();
        prop_assert_eq!(back, g);
    }

    #[test]
    fn detected_round_trips_through_json(d in detected()) {
        let text = serde_json::to_string(&d).unwrap();
        let back: Detected = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&back, &d);
        // Every row is labelled; an unknown fact shows its reason.
        for (label, value) in d.rows() {
            prop_assert!(!label.is_empty());
            if let Some(why) = value.strip_prefix("unknown (") {
                prop_assert!(why.ends_with(')'));
            }
        }
    }

    #[test]
    fn a_declared_section_within_its_bounds_is_accepted_and_round_trips(d in disclosure_toml()) {
        prop_assert!(d.validate().is_ok());
        let json: DisclosureToml = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        prop_assert_eq!(&json, &d);
        let toml_back: DisclosureToml = toml::from_str(&toml::to_string(&d).unwrap()).unwrap();
        prop_assert_eq!(&toml_back, &d);
    }
}
