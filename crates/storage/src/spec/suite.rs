//! The `[suite]` section and `storage suite`'s own flags ([`SuiteToml`]): the
//! stages of the test program and the stress stage's length; every other
//! option of the suite is a `[storage]` key.

use mailbench_base::units::serde_duration;
use mailbench_base::{Error, Result};
use mailbench_results::storage::suite::Stage;
use serde::Deserialize;
use std::time::Duration;

mailbench_base::options_struct! {
    /// The `[suite]` section and the flags of `storage suite` beyond the
    /// `[storage]` keys, defined once (flags win over the file).
    #[derive(Debug, Clone, Default, Deserialize, clap::Args)]
    #[serde(deny_unknown_fields)]
    pub struct SuiteToml {
        /// The stress stage's measured window (default 24h; 0s: no stress
        /// stage; with --quick, 0s unless given).
        #[serde(default, with = "serde_duration::option")]
        #[arg(long, value_parser = mailbench_base::parse_duration)]
        pub stress_duration: Option<Duration>,
        /// The stages, in the program's order (default: init, performance,
        /// stress, backup, recover, verify).
        #[serde(default)]
        #[arg(long, value_delimiter = ',', value_name = "STAGE,...")]
        pub stages: Option<Vec<String>>,
        /// Also write report.pdf with headless Chromium (the HTML is always written).
        #[serde(default)]
        #[arg(long, num_args = 0, default_missing_value = "true")]
        pub pdf: Option<bool>,
    }
}

/// The longest stress stage: a month, as the run's own limit.
pub const MAX_STRESS: Duration = mailbench_base::limits::MAX_RUN_DURATION;

impl SuiteToml {
    /// The stages to run, checked: known names, each at most once, in the
    /// program's order; the stress stage only when it has a length.
    pub fn stages(&self, stress: Duration) -> Result<Vec<Stage>> {
        let Some(names) = &self.stages else {
            let all = Stage::ALL.into_iter();
            return Ok(all
                .filter(|s| *s != Stage::Stress || !stress.is_zero())
                .collect());
        };
        let mut out: Vec<Stage> = Vec::new();
        for n in names {
            let s = Stage::parse(n).ok_or_else(|| {
                let known: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
                Error::usage(format!(
                    "suite stage `{n}` is not one of {} (`stages` in [suite], or --stages)",
                    known.join(", ")
                ))
            })?;
            if out.contains(&s) {
                return Err(Error::usage(format!(
                    "suite stage `{n}` is named twice (`stages` in [suite], or --stages)"
                )));
            }
            out.push(s);
        }
        if out.is_empty() {
            return Err(Error::usage("`stages` is empty: name at least one stage"));
        }
        if out.contains(&Stage::Stress) && stress.is_zero() {
            return Err(Error::usage(
                "the stress stage needs a length: give --stress-duration (e.g. 24h)",
            ));
        }
        let mut sorted = out.clone();
        sorted.sort();
        if sorted != out {
            return Err(Error::usage(format!(
                "suite stages run in the program's order (init, performance, stress, backup, \
                 recover, verify); give them so: {}",
                sorted
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(out)
    }

    /// The stress stage's length: given (at most [`MAX_STRESS`]), else 24 h
    /// (0 with `--quick`).
    pub fn stress(&self, quick: bool) -> Result<Duration> {
        match self.stress_duration {
            Some(d) if d > MAX_STRESS => Err(Error::usage(format!(
                "stress_duration {} is longer than {} days",
                humantime::format_duration(d),
                MAX_STRESS.as_secs() / 86_400
            ))),
            Some(d) => Ok(d),
            None if quick => Ok(Duration::ZERO),
            None => Ok(Duration::from_secs(24 * 3600)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(names: &[&str]) -> SuiteToml {
        SuiteToml {
            stages: Some(names.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn stages_are_checked_before_anything_runs() {
        let day = Duration::from_secs(86_400);
        let all = SuiteToml::default().stages(day).unwrap();
        assert_eq!(all, Stage::ALL.to_vec());
        let no_stress = SuiteToml::default().stages(Duration::ZERO).unwrap();
        assert!(!no_stress.contains(&Stage::Stress));
        assert_eq!(
            with(&["init", "verify"]).stages(day).unwrap(),
            vec![Stage::Init, Stage::Verify]
        );
        for bad in [
            &["init", "init"][..],
            &["checksum"],
            &[],
            &["verify", "init"],
        ] {
            let e = with(bad).stages(day).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{bad:?}: {e}");
        }
        let e = with(&["stress"]).stages(Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("--stress-duration"), "{e}");
    }

    #[test]
    fn the_stress_length_has_its_default_and_bound() {
        let t = SuiteToml::default();
        assert_eq!(t.stress(false).unwrap(), Duration::from_secs(86_400));
        assert_eq!(t.stress(true).unwrap(), Duration::ZERO);
        let long = SuiteToml {
            stress_duration: Some(MAX_STRESS + Duration::from_secs(1)),
            ..Default::default()
        };
        assert!(long.stress(false).is_err());
    }
}
