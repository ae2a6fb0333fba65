//! `[storage.thresholds]`: verdict limits over the profile's own for the test
//! type, key by key.

use mailbench_base::{Error, Result};
use mailbench_results::storage::spec::LatencyMax;
use mailbench_results::storage::spec::Thresholds;
use serde::{Deserialize, Serialize};

/// Verdict thresholds (docs/storage.md, "Verdict"); `[storage.thresholds]` over the
/// profile's own for the test type.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ThresholdsToml {
    pub db_read_avg_ms: Option<f64>,
    pub db_read_max_ms: Option<f64>,
    pub log_write_avg_ms: Option<f64>,
    pub log_write_max_ms: Option<f64>,
    pub page_fault_stalls_per_s: Option<f64>,
    pub page_fault_stalls_max_per_s: Option<f64>,
    /// `"sampled"` (the published tool's rule) or `"single_io"` (stricter).
    pub latency_max: Option<LatencyMax>,
}

/// Applying `[storage.thresholds]` to thresholds (whose type lives with
/// the results that echo them).
pub trait ThresholdsExt: Sized {
    /// These limits with the keys `o` gives replaced; every value must be a
    /// positive number (stall limits may be 0). `origin` names the table.
    fn with(self, o: &ThresholdsToml, origin: &str) -> Result<Self>;
}

impl ThresholdsExt for Thresholds {
    fn with(mut self, o: &ThresholdsToml, origin: &str) -> Result<Thresholds> {
        let check = |v: f64, k: &str, zero_ok: bool| -> Result<f64> {
            if v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0)) {
                Ok(v)
            } else {
                let need = if zero_ok { "0 or more" } else { "positive" };
                Err(Error::usage(format!(
                    "`{origin}.{k}` = {v}: must be {need}"
                )))
            }
        };
        let set = |dst: &mut f64, v: Option<f64>, k: &str, zero_ok: bool| -> Result<()> {
            if let Some(x) = v {
                *dst = check(x, k, zero_ok)?;
            }
            Ok(())
        };
        set(
            &mut self.db_read_avg_ms,
            o.db_read_avg_ms,
            "db_read_avg_ms",
            false,
        )?;
        set(
            &mut self.db_read_max_ms,
            o.db_read_max_ms,
            "db_read_max_ms",
            false,
        )?;
        set(
            &mut self.log_write_avg_ms,
            o.log_write_avg_ms,
            "log_write_avg_ms",
            false,
        )?;
        set(
            &mut self.log_write_max_ms,
            o.log_write_max_ms,
            "log_write_max_ms",
            false,
        )?;
        set(
            &mut self.page_fault_stalls_per_s,
            o.page_fault_stalls_per_s,
            "page_fault_stalls_per_s",
            true,
        )?;
        if let Some(x) = o.page_fault_stalls_max_per_s {
            self.page_fault_stalls_max_per_s = Some(check(x, "page_fault_stalls_max_per_s", true)?);
        }
        if let Some(m) = o.latency_max {
            self.latency_max = m;
        }
        Ok(self)
    }
}
