//! Named maxima: every input mailbench reads and every wait it makes has a bound
//! written here (or beside the loop it bounds, named in docs/ARCHITECTURE.md,
//! "Limits by construction"). Values outside a bound are refused with exit 2
//! before anything is written.

use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// The largest config file (`--config`, profile files, plan rules) read.
pub const MAX_CONFIG_FILE_BYTES: u64 = 4 << 20;
/// The largest result file (`result.json`) read by `report`, merges and compares.
pub const MAX_RESULT_FILE_BYTES: u64 = 256 << 20;
/// The largest small text input read whole: a password file, a CA file
/// (`--ca-file`), a distribution lists file, a mail profile file.
pub const MAX_INPUT_FILE_BYTES: u64 = 4 << 20;
/// The largest users file (`address password` per line; a million users of
/// 60-byte lines fit).
pub const MAX_USERS_FILE_BYTES: u64 = 64 << 20;
/// The most users a users file may list.
pub const MAX_USERS: usize = 1_000_000;
/// The largest file mailbench reads from /proc (/proc/locks, a command line).
pub const MAX_PROC_FILE_BYTES: u64 = 1 << 20;
/// The largest file mailbench wrote itself and reads back between commands
/// (a creation progress file, a checkpoint, a database header's page).
pub const MAX_STATE_FILE_BYTES: u64 = 1 << 20;
/// The longest IMAP/SMTP/ManageSieve response line without its CRLF.
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// The largest IMAP/ManageSieve response unit (a line with its literals).
pub const MAX_UNIT_BYTES: usize = 256 << 20;
/// The most untagged IMAP responses one command may collect before its tagged
/// answer (a FETCH of a whole large mailbox stays below).
pub const MAX_UNTAGGED_PER_COMMAND: usize = 100_000;
/// The most bytes of untagged responses one command may collect (one
/// response may be a whole message of up to [`MAX_UNIT_BYTES`]).
pub const MAX_UNTAGGED_BYTES: usize = MAX_UNIT_BYTES;
/// The most lines of one SMTP reply (an EHLO answer has about twenty).
pub const MAX_REPLY_LINES: usize = 1_000;
/// The most bytes of a Prometheus scrape (`--server-metrics`).
pub const MAX_HTTP_BODY_BYTES: u64 = 16 << 20;
/// The most bytes of one `intervals.jsonl` line read back.
pub const MAX_INTERVAL_LINE_BYTES: usize = 64 << 20;
/// The most bytes one encoded histogram may expand to when decoded.
pub const MAX_HISTOGRAM_DECODED_BYTES: usize = 16 << 20;
/// The longest measured window, warm-up or wait of any command.
pub const MAX_RUN_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The database cache over all databases may take at most this share of the RAM.
pub const MAX_CACHE_SHARE_OF_RAM: f64 = 0.8;
/// `storage run`: how long the clean shutdown after the measured window may take
/// before I/O is stopped and the partial result is written (`--shutdown-grace`).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(60);
/// The range `--shutdown-grace` accepts.
pub const MIN_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);
pub const MAX_SHUTDOWN_GRACE: Duration = Duration::from_secs(3600);
/// After Ctrl-C / SIGTERM a run writes back what fits in this long, then stops I/O.
pub const INTERRUPT_WRITE_BACK: Duration = Duration::from_millis(1200);
/// After I/O was told to stop, how long the run waits for its threads before it
/// writes the result without them (their I/O ends with the process).
pub const STOP_WAIT: Duration = Duration::from_secs(5);

/// Refuses a number that is not finite (NaN, infinity), naming its key.
pub fn finite(key: &str, x: f64) -> Result<f64> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(Error::usage(format!(
            "`{key}` = {x}: must be a finite number"
        )))
    }
}

/// Refuses a duration over [`MAX_RUN_DURATION`], naming its key.
pub fn duration(key: &str, d: Duration) -> Result<Duration> {
    if d > MAX_RUN_DURATION {
        Err(Error::usage(format!(
            "`{key}` = {}: at most {} (30 days)",
            humantime::format_duration(d),
            humantime::format_duration(MAX_RUN_DURATION)
        )))
    } else {
        Ok(d)
    }
}

/// Reads a file of at most `cap` bytes (a larger file, or a device that never
/// ends, is refused by name, exit 2); `what` says what the file is.
pub fn read_capped(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>> {
    let f = std::fs::File::open(path)
        .map_err(|e| Error::usage(format!("cannot read {what} {}: {e}", path.display())))?;
    let mut buf = Vec::new();
    f.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Error::usage(format!("cannot read {what} {}: {e}", path.display())))?;
    if buf.len() as u64 > cap {
        return Err(Error::usage(format!(
            "{what} {} is larger than {} MiB: not a file mailbench reads",
            path.display(),
            cap >> 20
        )));
    }
    Ok(buf)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_text_capped(path: &Path, cap: u64, what: &str) -> Result<String> {
    let bytes = read_capped(path, cap, what)?;
    String::from_utf8(bytes)
        .map_err(|_| Error::usage(format!("{what} {} is not UTF-8 text", path.display())))
}

/// What a numeric key measures: how its value is written and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A whole number of things (databases, users, servers, messages).
    Count,
    /// Bytes (written as `32KiB`, `4GB` or a number).
    Bytes,
    /// A duration (written as `90s`, `2h` or seconds).
    Seconds,
    /// Milliseconds (a key whose name says `_ms`).
    Millis,
    /// A percentage (written as `25%` or a number of percent).
    Percent,
    /// A rate or any other real number.
    Number,
}

/// The range of one numeric key. `key` is the dotted path of the key in its
/// section or profile; a `*` segment stands for any name or any array index
/// (`tasks.*.per_day`, `sizes.*.body`).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub key: &'static str,
    pub min: f64,
    pub max: f64,
    pub unit: Unit,
    /// What to give instead, added to the out-of-range message (a key whose
    /// usual wrong value has a known cause).
    pub hint: Option<&'static str>,
}

impl Bound {
    pub const fn new(key: &'static str, min: f64, max: f64, unit: Unit) -> Bound {
        Bound {
            key,
            min,
            max,
            unit,
            hint: None,
        }
    }

    /// The same range with a hint added to its out-of-range message.
    pub const fn with_hint(self, hint: &'static str) -> Bound {
        Bound {
            hint: Some(hint),
            ..self
        }
    }

    fn show(&self, v: f64) -> String {
        match self.unit {
            Unit::Bytes => crate::units::ByteSize(v as u64).to_string(),
            Unit::Seconds => humantime::format_duration(Duration::from_secs_f64(v)).to_string(),
            Unit::Millis => format!("{v} ms"),
            Unit::Percent => format!("{v}%"),
            Unit::Count | Unit::Number => format!("{v}"),
        }
    }
}

/// The one numeric validator: every number of `section` (a section's options
/// with the flags over the file, a host's table, a profile) within the range
/// its key has in `bounds`, NaN and infinities refused; the error names
/// `origin` and the key (exit 2). A section is given as any serializable
/// value; its sizes, durations and percentages are read back from their text.
/// A number whose key has no bound is accepted here; the table tests
/// ([`unbounded_keys`]) keep every numeric key in a table.
pub fn check_numbers<T: serde::Serialize>(
    origin: &str,
    section: &T,
    bounds: &[Bound],
) -> Result<()> {
    check(origin, section, bounds, false)
}

/// [`check_numbers`] for a section whose top-level keys are also flags: the
/// error names both (`` `day_length` (--day-length) ``).
pub fn check_options<T: serde::Serialize>(
    origin: &str,
    section: &T,
    bounds: &[Bound],
) -> Result<()> {
    check(origin, section, bounds, true)
}

fn check<T: serde::Serialize>(
    origin: &str,
    section: &T,
    bounds: &[Bound],
    flags: bool,
) -> Result<()> {
    let value = toml::Value::try_from(section).map_err(|e| {
        Error::usage(format!(
            "{origin}: a value is out of range ({e}); numbers above 9.2e18 are not accepted"
        ))
    })?;
    let mut leaves = Vec::new();
    leaves_of(&value, String::new(), &mut leaves);
    for (key, leaf) in leaves {
        let Some(b) = bound_of(bounds, &key) else {
            continue;
        };
        let Some(v) = number_of(leaf, b.unit) else {
            continue;
        };
        let name = if flags && !key.contains('.') {
            format!("`{key}` (--{})", key.replace('_', "-"))
        } else {
            format!("`{key}`")
        };
        if !v.is_finite() {
            return Err(Error::usage(format!(
                "{origin}: {name} = {v}: must be a finite number"
            )));
        }
        if v < b.min || v > b.max {
            let hint = b.hint.map(|h| format!(" ({h})")).unwrap_or_default();
            return Err(Error::usage(format!(
                "{origin}: {name} = {}: give {} to {}{hint}",
                b.show(v),
                b.show(b.min),
                b.show(b.max)
            )));
        }
    }
    Ok(())
}

/// The keys of `section` that hold a number (or a size or duration text)
/// and have no bound in `bounds`: empty when the table covers the section.
pub fn unbounded_keys<T: serde::Serialize>(section: &T, bounds: &[Bound]) -> Vec<String> {
    let Ok(value) = toml::Value::try_from(section) else {
        return vec!["(not serializable)".into()];
    };
    let mut leaves = Vec::new();
    leaves_of(&value, String::new(), &mut leaves);
    leaves
        .into_iter()
        .filter(|(k, v)| bound_of(bounds, k).is_none() && looks_numeric(v))
        .map(|(k, _)| k)
        .collect()
}

/// For the table tests: every copy of `doc` (a config section or profile as
/// TOML) with one bounded number replaced by a value its bound refuses (below
/// its least, above its most, NaN, infinity), with the key spoiled. A test
/// feeds each to the real loader and expects exit 2 naming the key.
pub fn spoiled(doc: &toml::Value, bounds: &[Bound]) -> Vec<(String, toml::Value)> {
    let mut leaves = Vec::new();
    leaves_of(doc, String::new(), &mut leaves);
    let mut out = Vec::new();
    for (key, leaf) in leaves {
        let Some(b) = bound_of(bounds, &key) else {
            continue;
        };
        if number_of(leaf, b.unit).is_none() {
            continue;
        }
        let mut bad = vec![
            toml::Value::Float(f64::NAN),
            toml::Value::Float(f64::INFINITY),
        ];
        if b.max < 9e18 {
            bad.push(toml::Value::Integer(
                b.max as i64 + 1 + (b.max * 0.5) as i64,
            ));
        }
        if b.min >= 1.0 {
            bad.push(toml::Value::Integer(b.min.ceil() as i64 - 1));
        } else if b.min == 0.0 {
            bad.push(toml::Value::Integer(-1));
        }
        for v in bad {
            let mut d = doc.clone();
            if set_leaf(&mut d, &key, v) {
                out.push((key.clone(), d));
            }
        }
    }
    out
}

fn set_leaf(doc: &mut toml::Value, key: &str, v: toml::Value) -> bool {
    let mut cur = doc;
    for seg in key.split('.') {
        cur = match cur {
            toml::Value::Table(t) => match t.get_mut(seg) {
                Some(x) => x,
                None => return false,
            },
            toml::Value::Array(a) => match seg.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(x) => x,
                None => return false,
            },
            _ => return false,
        };
    }
    *cur = v;
    true
}

fn looks_numeric(v: &toml::Value) -> bool {
    match v {
        toml::Value::Integer(_) | toml::Value::Float(_) => true,
        toml::Value::String(s) => {
            crate::units::ByteSize::parse(s).is_ok() || crate::units::parse_duration(s).is_ok()
        }
        _ => false,
    }
}

fn leaves_of<'a>(v: &'a toml::Value, path: String, out: &mut Vec<(String, &'a toml::Value)>) {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        toml::Value::Table(t) => t.iter().for_each(|(k, v)| leaves_of(v, join(k), out)),
        toml::Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, v)| leaves_of(v, join(&i.to_string()), out)),
        leaf => out.push((path, leaf)),
    }
}

/// The bound of a dotted key: an exact key, or a pattern whose `*` segments
/// match any segment.
fn bound_of<'a>(bounds: &'a [Bound], key: &str) -> Option<&'a Bound> {
    let segs: Vec<&str> = key.split('.').collect();
    bounds.iter().find(|b| {
        let pat: Vec<&str> = b.key.split('.').collect();
        pat.len() == segs.len() && pat.iter().zip(&segs).all(|(p, s)| *p == "*" || p == s)
    })
}

fn number_of(v: &toml::Value, unit: Unit) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        toml::Value::String(s) => match unit {
            Unit::Bytes => crate::units::ByteSize::parse(s).ok().map(|b| b.0 as f64),
            Unit::Seconds => crate::units::parse_duration(s)
                .ok()
                .map(|d| d.as_secs_f64()),
            Unit::Percent => crate::units::parse_percent(s).ok(),
            _ => s.trim().parse().ok(),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_and_large_files_are_refused() {
        let e = read_capped(Path::new("/dev/zero"), 1 << 10, "config file").unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        assert_eq!(e.exit_status().code(), 2);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.toml");
        std::fs::write(&p, "x = 1\n").unwrap();
        assert_eq!(read_text_capped(&p, 6, "config file").unwrap(), "x = 1\n");
        assert!(read_text_capped(&p, 5, "config file").is_err());
    }

    #[derive(serde::Serialize)]
    struct Demo {
        databases: Option<u32>,
        rate: f64,
        size: crate::ByteSize,
        #[serde(with = "crate::units::serde_duration")]
        wait: Duration,
        tasks: std::collections::BTreeMap<String, f64>,
    }

    const DEMO: [Bound; 4] = [
        Bound::new("databases", 1.0, 256.0, Unit::Count),
        Bound::new("rate", 0.0, 10.0, Unit::Number),
        Bound::new("size", 4096.0, 1e9, Unit::Bytes),
        Bound::new("wait", 1.0, 3600.0, Unit::Seconds),
    ];

    #[test]
    fn the_numeric_validator_names_the_key_and_refuses_what_is_out_of_range() {
        let ok = || Demo {
            databases: Some(4),
            rate: 2.5,
            size: crate::ByteSize(1 << 20),
            wait: Duration::from_secs(60),
            tasks: [("send".to_string(), 8.0)].into(),
        };
        let mut bounds = DEMO.to_vec();
        assert_eq!(unbounded_keys(&ok(), &bounds), ["tasks.send"]);
        bounds.push(Bound::new("tasks.*", 0.0, 1e4, Unit::Number));
        assert!(unbounded_keys(&ok(), &bounds).is_empty());
        check_numbers("demo", &ok(), &bounds).unwrap();
        type Spoil = fn(&mut Demo);
        let bad: [(&str, Spoil); 7] = [
            ("databases", |d| d.databases = Some(0)),
            ("databases", |d| d.databases = Some(10_000_000)),
            ("rate", |d| d.rate = f64::NAN),
            ("rate", |d| d.rate = f64::INFINITY),
            ("size", |d| d.size = crate::ByteSize(1 << 40)),
            ("wait", |d| d.wait = Duration::ZERO),
            ("tasks.send", |d| {
                d.tasks.insert("send".into(), -1.0).map_or((), |_| ())
            }),
        ];
        for (key, spoil) in bad {
            let mut d = ok();
            spoil(&mut d);
            let e = check_numbers("demo", &d, &bounds).unwrap_err();
            assert_eq!(e.exit_status().code(), 2);
            assert!(e.to_string().contains(&format!("`{key}`")), "{key}: {e}");
        }
    }

    #[test]
    fn non_finite_numbers_and_long_durations_are_refused() {
        assert!(finite("k", f64::NAN).is_err());
        assert!(finite("k", f64::INFINITY).is_err());
        assert_eq!(finite("k", 2.5).unwrap(), 2.5);
        assert!(duration("duration", MAX_RUN_DURATION).is_ok());
        assert!(duration("duration", MAX_RUN_DURATION + Duration::from_secs(1)).is_err());
    }
}
