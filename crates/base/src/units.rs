//! Sizes, durations and percentages as users write them: `32KiB`, `4GB`, `1.5TiB`,
//! `2h`, `90s`, `1h30m`, `25%`.

use std::fmt;
use std::time::Duration;

/// A size in bytes. Parses `1024`, `32KiB`, `32k` (=KiB), `4GB` (=10^9), `1.5TiB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn bytes(self) -> u64 {
        self.0
    }

    pub fn parse(text: &str) -> Result<ByteSize, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err("empty size".into());
        }
        if t.starts_with('-') {
            return Err(format!("size `{text}` is negative; sizes must be positive"));
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let num: f64 = num
            .replace('_', "")
            .parse()
            .map_err(|_| format!("size `{text}` does not start with a number"))?;
        let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "k" | "kib" => 1024.0,
            "m" | "mib" => 1024.0 * 1024.0,
            "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
            "t" | "tib" => 1024.0f64.powi(4),
            "kb" => 1e3,
            "mb" => 1e6,
            "gb" => 1e9,
            "tb" => 1e12,
            other => {
                return Err(format!(
                    "size `{text}` has unknown unit `{other}` (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
                ));
            }
        };
        let v = num * mult;
        if !v.is_finite() || v > u64::MAX as f64 {
            return Err(format!("size `{text}` is too large"));
        }
        Ok(ByteSize(v.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        const UNITS: [(&str, f64); 4] = [
            ("TiB", 1099511627776.0),
            ("GiB", 1073741824.0),
            ("MiB", 1048576.0),
            ("KiB", 1024.0),
        ];
        for (name, size) in UNITS {
            if b >= size {
                let v = b / size;
                return if (v - v.round()).abs() < 1e-9 {
                    write!(f, "{}{name}", v.round() as u64)
                } else {
                    write!(f, "{v:.2}{name}")
                };
            }
        }
        write!(f, "{}B", self.0)
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ByteSize::parse(s)
    }
}

impl serde::Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl schemars::JsonSchema for ByteSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteSize".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // Written as a number of bytes; read also as text (`"32KiB"`).
        schemars::json_schema!({
            "description": "A size in bytes (written as a number; `\"32KiB\"` is read too).",
            "type": ["integer", "string"],
        })
    }
}

impl<'de> serde::Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Float(f64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(i) if i >= 0 => Ok(ByteSize(i as u64)),
            Raw::Int(i) => Err(serde::de::Error::custom(format!(
                "size {i} is negative; sizes must be positive"
            ))),
            Raw::Float(f) if f >= 0.0 && f < u64::MAX as f64 => Ok(ByteSize(f as u64)),
            Raw::Float(f) if f.is_finite() && f >= 0.0 => {
                Err(serde::de::Error::custom(format!("size {f} is too large")))
            }
            Raw::Float(f) if !f.is_finite() => Err(serde::de::Error::custom(format!(
                "size {f} is not a finite number"
            ))),
            Raw::Float(f) => Err(serde::de::Error::custom(format!(
                "size {f} is negative; sizes must be positive"
            ))),
            Raw::Text(t) => ByteSize::parse(&t).map_err(serde::de::Error::custom),
        }
    }
}

/// Parses `90s`, `10m`, `2h`, `1h30m`, `500ms`, `1d`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("duration `{text}` is negative"));
    }
    humantime::parse_duration(t).map_err(|e| {
        format!("duration `{text}` is not valid ({e}); write e.g. 90s, 10m, 2h, 1h30m")
    })
}

/// Parses `25%`, `25` or `0.25` (fractions below 1 with no `%` are read as shares).
/// Returns a percentage (0..=100 for shares).
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, had_pct) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("percentage `{text}` is not a number; write e.g. 20%"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("percentage `{text}` must be zero or positive"));
    }
    Ok(if !had_pct && v < 1.0 && v > 0.0 {
        v * 100.0
    } else {
        v
    })
}

/// Serde helpers for durations written as text in TOML (`"2h"`) or seconds as numbers.
pub mod serde_duration {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        use serde::Deserialize;
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Secs(f64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            // try_from: seconds past what a Duration holds (1e308) are an error, not a panic.
            Raw::Secs(s) if s >= 0.0 && s.is_finite() => Duration::try_from_secs_f64(s)
                .map_err(|_| serde::de::Error::custom(format!("duration {s} s is too long"))),
            Raw::Secs(s) => Err(serde::de::Error::custom(format!(
                "duration {s} must be zero or positive"
            ))),
            Raw::Text(t) => super::parse_duration(&t).map_err(serde::de::Error::custom),
        }
    }

    /// The same for `Option<Duration>`.
    pub mod option {
        use std::time::Duration;

        pub fn serialize<S: serde::Serializer>(
            d: &Option<Duration>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => super::serialize(d, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: serde::Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Duration>, D::Error> {
            super::deserialize(d).map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(ByteSize::parse("32KiB"), Ok(ByteSize(32768)));
        assert_eq!(ByteSize::parse("32k"), Ok(ByteSize(32768)));
        assert_eq!(ByteSize::parse("4GB"), Ok(ByteSize(4_000_000_000)));
        assert_eq!(ByteSize::parse("1.5 GiB"), Ok(ByteSize(1610612736)));
        assert_eq!(ByteSize::parse("512"), Ok(ByteSize(512)));
        assert!(ByteSize::parse("-1GiB").unwrap_err().contains("negative"));
        assert!(
            ByteSize::parse("12 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(ByteSize::parse("GiB").is_err());
    }

    #[test]
    fn sizes_display_compactly() {
        assert_eq!(ByteSize(32768).to_string(), "32KiB");
        assert_eq!(ByteSize(1536).to_string(), "1.50KiB");
        assert_eq!(ByteSize(100).to_string(), "100B");
    }

    #[test]
    fn durations_and_percentages() {
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_percent("20%"), Ok(20.0));
        assert_eq!(parse_percent("0.2"), Ok(20.0));
        assert_eq!(parse_percent("35"), Ok(35.0));
        assert!(parse_percent("-3%").is_err());
    }

    proptest::proptest! {
        #[test]
        fn display_then_parse_is_close(n in 0u64..(1u64 << 50)) {
            let s = ByteSize(n).to_string();
            let back = ByteSize::parse(&s).unwrap().0 as f64;
            // Two decimals of the unit: within 0.5 % of the value.
            proptest::prop_assert!((back - n as f64).abs() <= (n as f64) * 0.005 + 1.0);
        }
    }
}
