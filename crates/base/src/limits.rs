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

    #[test]
    fn non_finite_numbers_and_long_durations_are_refused() {
        assert!(finite("k", f64::NAN).is_err());
        assert!(finite("k", f64::INFINITY).is_err());
        assert_eq!(finite("k", 2.5).unwrap(), 2.5);
        assert!(duration("duration", MAX_RUN_DURATION).is_ok());
        assert!(duration("duration", MAX_RUN_DURATION + Duration::from_secs(1)).is_err());
    }
}
