//! User profiles as data (profiles/mail/*.toml): what one simulated user does in a
//! day, the initial mailbox content, distribution lists and the message size mix.
//! The profile's types live with the results (which echo it); loading,
//! checking and drawing from it are here.

use mailbench_base::limits::{Bound, Unit, check_numbers};
use mailbench_base::{Error, Result};
pub use mailbench_results::mail::profile::{
    ExpectedFlow, Flow, Initial, Lists, Profile, Recipients, SizeClass, TaskKind, TaskSpec,
};
use std::path::Path;

const MMB: &str = include_str!("../../../profiles/mail/mmb.toml");

/// Built-in profiles (the files in profiles/mail/). `loadsim-medium` is LoadSim
/// 5.5's canonical Medium MAPI user, which the MMB benchmark defines, so it
/// loads mmb.toml under its own name; LoadSim 4.0/5.0's Medium user of the
/// Resource Kit table is `loadsim4-medium` (docs/mail-load.md).
pub const BUILTIN: &[(&str, &str)] = &[
    ("mmb3", include_str!("../../../profiles/mail/mmb3.toml")),
    (
        "loadsim-light",
        include_str!("../../../profiles/mail/loadsim-light.toml"),
    ),
    ("loadsim-medium", MMB),
    (
        "loadsim-heavy",
        include_str!("../../../profiles/mail/loadsim-heavy.toml"),
    ),
    ("mmb", MMB),
    (
        "loadsim4-medium",
        include_str!("../../../profiles/mail/loadsim4-medium.toml"),
    ),
];

/// Loading and checking profiles ([`Profile`]'s data lives with the results,
/// which echo it).
pub trait ProfileExt: Sized {
    /// A built-in profile by name, or a TOML file by path.
    fn load(name_or_path: &str) -> Result<Self>;
    fn parse(text: &str, origin: &str) -> Result<Self>;
}

impl ProfileExt for Profile {
    fn load(name_or_path: &str) -> Result<Profile> {
        if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            let mut p = Self::parse(text, name)?;
            p.name = name.to_string();
            return Ok(p);
        }
        let p = Path::new(name_or_path);
        if p.is_file() {
            let text = mailbench_base::limits::read_text_capped(
                p,
                mailbench_base::limits::MAX_INPUT_FILE_BYTES,
                "profile file",
            )?;
            return Self::parse(&text, name_or_path);
        }
        let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
        Err(Error::usage(format!(
            "unknown mail profile `{name_or_path}`: give one of {} or a path to a .toml file",
            names.join(", ")
        )))
    }

    fn parse(text: &str, origin: &str) -> Result<Profile> {
        let p: Profile = toml::from_str(text).map_err(|e| {
            Error::usage(format!(
                "mail profile {origin}: {}",
                mailbench_base::config::toml_error(&e, text)
            ))
        })?;
        validate(&p, origin)?;
        Ok(p)
    }
}

const MIB: f64 = (1u64 << 20) as f64;

/// The range of every numeric key of a mail profile (built-in or a file),
/// checked by the one numeric validator before anything is written. A
/// message (body and attachment) must fit in memory and in one IMAP literal.
pub const BOUNDS: &[Bound] = &[
    Bound::new("day", 1.0, 7.0 * 86_400.0, Unit::Seconds),
    Bound::new("flow.submitted_per_day", 0.0, 1e6, Unit::Number),
    Bound::new("flow.delivered_per_day", 0.0, 1e6, Unit::Number),
    Bound::new("flow.recipients_per_message", 0.0, 10_000.0, Unit::Number),
    Bound::new("initial.folders", 0.0, 10_000.0, Unit::Count),
    Bound::new("initial.messages_per_folder", 0.0, 100_000.0, Unit::Count),
    Bound::new("initial.inbox", 0.0, 100_000.0, Unit::Count),
    Bound::new("initial.deleted_items", 0.0, 100_000.0, Unit::Count),
    Bound::new("initial.sent", 0.0, 100_000.0, Unit::Count),
    Bound::new("initial.calendar", 0.0, 100_000.0, Unit::Count),
    Bound::new("lists.per_users", 1.0, 1e6, Unit::Count),
    Bound::new("lists.sizes.*", 1.0, 100_000.0, Unit::Count),
    Bound::new("sizes.*.body", 0.0, 64.0 * MIB, Unit::Bytes),
    Bound::new("sizes.*.attachment", 0.0, 64.0 * MIB, Unit::Bytes),
    Bound::new("sizes.*.weight", 0.0, 1e6, Unit::Number),
    Bound::new("tasks.*.per_day", 0.0, 100_000.0, Unit::Number),
    Bound::new("tasks.*.recipients", 1.0, 10_000.0, Unit::Number),
    Bound::new("tasks.*.recipients.*", 0.0, 1e6, Unit::Number),
    Bound::new("tasks.*.list_share", 0.0, 1.0, Unit::Number),
    Bound::new("tasks.*.weight", 0.0, 1e6, Unit::Number),
];

fn validate(p: &Profile, origin: &str) -> Result<()> {
    check_numbers(&format!("mail profile {origin}"), p, BOUNDS)?;
    let bad = |m: String| Err(Error::usage(format!("mail profile {origin}: {m}")));
    if p.day.is_zero() {
        return bad("day must be longer than 0".into());
    }
    if p.sizes.is_empty() || p.sizes.iter().all(|s| s.weight <= 0.0) {
        return bad("sizes needs at least one entry with a positive weight".into());
    }
    if p.lists.sizes.is_empty() || p.lists.per_users == 0 {
        return bad("lists needs per_users > 0 and at least one size".into());
    }
    for (k, t) in &p.tasks {
        if !(t.per_day >= 0.0 && t.per_day.is_finite()) {
            return bad(format!(
                "tasks.{}.per_day must be zero or positive",
                k.name()
            ));
        }
        if let Some(s) = t.list_share
            && !(0.0..=1.0).contains(&s)
        {
            return bad(format!("tasks.{}.list_share must be within 0..1", k.name()));
        }
    }
    Ok(())
}

/// Drawing a number of recipients (the workload's random side of
/// [`Recipients`]).
pub trait RecipientsExt {
    fn draw<R: rand::Rng>(&self, rng: &mut R) -> usize;
}

impl RecipientsExt for Recipients {
    fn draw<R: rand::Rng>(&self, rng: &mut R) -> usize {
        match self {
            Recipients::Mean(m) => {
                let m = m.max(1.0);
                let base = m.floor();
                let frac = m - base;
                base as usize + usize::from(rng.random::<f64>() < frac)
            }
            Recipients::Weights(w) => {
                let total: f64 = w.iter().sum();
                if total <= 0.0 {
                    return 1;
                }
                let mut x = rng.random::<f64>() * total;
                for (i, v) in w.iter().enumerate() {
                    if x < *v {
                        return i + 1;
                    }
                    x -= v;
                }
                w.len().max(1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_mmb3_reproduces_the_benchmark_flow() {
        for (name, _) in BUILTIN {
            let p = Profile::load(name).unwrap();
            assert_eq!(&p.name, name);
        }
        let p = Profile::load("mmb3").unwrap();
        assert_eq!(p.tasks.len(), 17, "mmb3 has all 17 task kinds");
        let f = p.expected_flow(1000);
        assert!((f.submitted_per_day - 85.0).abs() < 0.01, "{f:?}");
        assert!((f.delivered_per_day - 210.0).abs() < 0.5, "{f:?}");
        assert!((f.recipients_per_message - 2.47).abs() < 0.01, "{f:?}");
        // Send is the published 8 a day; the rest closes 85 submitted.
        assert_eq!(p.tasks[&TaskKind::Send].per_day, 8.0);
        // Without lists Send's 30 % list share goes to 2.375 individuals:
        // 8 x 2.375 = 19 instead of 37.3 deliveries, 191.7 a day in all.
        let n = p.expected_flow_without_lists(1000);
        assert!((n.delivered_per_day - 191.7).abs() < 0.05, "{n:?}");
        assert!((n.recipients_per_message - 2.255).abs() < 0.001, "{n:?}");
        assert_eq!(n.submitted_per_day, f.submitted_per_day);
        for (name, sent, recv) in [
            ("loadsim-light", 6.7, 20.4),
            ("loadsim-medium", 14.18, 66.3),
            ("loadsim-heavy", 38.6, 118.9),
            ("mmb", 14.18, 66.3),
            ("loadsim4-medium", 19.8, 55.9),
        ] {
            let f = Profile::load(name).unwrap().expected_flow(1000);
            assert!(
                (f.submitted_per_day - sent).abs() / sent < 0.02,
                "{name} {f:?}"
            );
            assert!(
                (f.delivered_per_day - recv).abs() / recv < 0.02,
                "{name} {f:?}"
            );
        }
    }

    #[test]
    fn recipients_draw_to_their_mean() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for r in [
            Recipients::Mean(2.4),
            Recipients::Weights(vec![35.0, 25.0, 17.5, 12.5, 10.0]),
        ] {
            let n = 100_000;
            let s: usize = (0..n).map(|_| r.draw(&mut rng)).sum();
            let m = s as f64 / n as f64;
            assert!((m - r.mean()).abs() < 0.02, "{r:?} {m}");
        }
    }

    /// The numeric validator's table covers every numeric key of every
    /// built-in profile, and each bounded key of a profile file, spoiled
    /// (below, above, NaN, infinity), is refused naming it (`body =
    /// "1TiB"` aborted a run before).
    #[test]
    fn every_numeric_key_of_a_profile_is_bounded() {
        for (name, text) in BUILTIN {
            let p = Profile::parse(text, name).unwrap();
            let loose = mailbench_base::limits::unbounded_keys(&p, BOUNDS);
            assert!(loose.is_empty(), "{name}: no bound for {loose:?}");
        }
        let doc: toml::Value = toml::from_str(BUILTIN[0].1).unwrap();
        let cases = mailbench_base::limits::spoiled(&doc, BOUNDS);
        assert!(cases.len() > 60, "{}", cases.len());
        for (key, bad) in cases {
            let text = toml::to_string(&bad).unwrap();
            let e = Profile::parse(&text, "x.toml").unwrap_err();
            assert_eq!(e.exit_status().code(), 2, "{key}: {e}");
            let leaf = key
                .rsplit('.')
                .find(|s| s.parse::<usize>().is_err())
                .unwrap();
            assert!(e.to_string().contains(leaf), "{key}: {e}");
        }
        let huge = BUILTIN[0]
            .1
            .replacen("body = \"1KiB\"", "body = \"1TiB\"", 1);
        let e = Profile::parse(&huge, "big.toml").unwrap_err().to_string();
        assert!(e.contains("sizes.0.body") && e.contains("1TiB"), "{e}");
    }

    #[test]
    fn bad_profiles_are_refused_by_name() {
        let e = Profile::load("mmb9").unwrap_err().to_string();
        assert!(e.contains("mmb3"), "{e}");
        let text = include_str!("../../../profiles/mail/mmb3.toml")
            .replace("per_day = 40", "per_dya = 40");
        let e = Profile::parse(&text, "x.toml").unwrap_err().to_string();
        assert!(e.contains("per_dya") || e.contains("per_day"), "{e}");
    }
}
