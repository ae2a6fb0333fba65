//! Latency histograms: HDR, microseconds, 3 significant digits (0.1 % error bound),
//! from 1 µs to 1 hour. Merging adds counts, so percentiles of merged histograms are
//! exact within that bound — never averages of percentiles.

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

/// Highest trackable latency: one hour in microseconds. Larger values are clamped.
pub const MAX_TRACKABLE_US: u64 = 3_600_000_000;
const SIGFIG: u8 = 3;
/// Latencies recorded and not yet counted in the histogram, at most. A count's
/// slot in the histogram (188 KB of counts) is mostly out of the CPU's caches
/// when an engine records a latency between page checksums: counted one at a
/// time, each record waited for its slot; counted this many at once, the
/// loads overlap.
const PENDING: usize = 32;
const _: () = assert!(
    MAX_TRACKABLE_US <= u32::MAX as u64,
    "pending latencies fit in u32"
);

/// An HDR latency histogram. Every figure it gives (counts, percentiles,
/// encoding, merging) includes the latencies recorded and not yet counted.
#[derive(Clone, Debug)]
pub struct LatencyHist {
    h: Histogram<u64>,
    /// Latencies recorded, clamped, not yet counted in `h`: `pending[..n_pending]`.
    pending: [u32; PENDING],
    n_pending: usize,
}

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHist {
    pub fn new() -> LatencyHist {
        // 1..=MAX with 3 significant digits is always a valid configuration.
        let h = match Histogram::new_with_bounds(1, MAX_TRACKABLE_US, SIGFIG) {
            Ok(h) => h,
            Err(_) => Histogram::new(SIGFIG).unwrap_or_else(|_| unreachable_hist()),
        };
        LatencyHist {
            h,
            pending: [0; PENDING],
            n_pending: 0,
        }
    }

    /// Records one latency in microseconds (0 is counted as 1 µs; values over an
    /// hour are clamped to an hour).
    #[inline]
    pub fn record_us(&mut self, us: u64) {
        let v = us.clamp(1, MAX_TRACKABLE_US);
        self.pending[self.n_pending] = v as u32;
        self.n_pending += 1;
        if self.n_pending == PENDING {
            self.flush();
        }
    }

    #[inline]
    pub fn record(&mut self, d: std::time::Duration) {
        self.record_us(d.as_micros().min(u64::MAX as u128) as u64);
    }

    /// Counts the pending latencies in the histogram.
    pub fn flush(&mut self) {
        for &v in &self.pending[..self.n_pending] {
            // In range by construction: saturating_record cannot fail.
            self.h.saturating_record(u64::from(v));
        }
        self.n_pending = 0;
    }

    /// The histogram with every recorded latency counted.
    fn counted(&self) -> std::borrow::Cow<'_, Histogram<u64>> {
        if self.n_pending == 0 {
            return std::borrow::Cow::Borrowed(&self.h);
        }
        let mut h = self.h.clone();
        for &v in &self.pending[..self.n_pending] {
            h.saturating_record(u64::from(v));
        }
        std::borrow::Cow::Owned(h)
    }

    pub fn count(&self) -> u64 {
        self.h.len() + self.n_pending as u64
    }

    pub fn is_empty(&self) -> bool {
        self.h.is_empty() && self.n_pending == 0
    }

    pub fn add(&mut self, other: &LatencyHist) {
        // Same bounds on both sides: add cannot fail for range reasons.
        let _ = self.h.add(&other.h);
        for &v in &other.pending[..other.n_pending] {
            self.record_us(u64::from(v));
        }
    }

    pub fn reset(&mut self) {
        self.h.reset();
        self.n_pending = 0;
    }

    pub fn quantile_us(&self, q: f64) -> u64 {
        quantile_of(&self.counted(), q)
    }

    pub fn max_us(&self) -> u64 {
        max_of(&self.counted())
    }

    pub fn mean_us(&self) -> f64 {
        let h = self.counted();
        if h.is_empty() { 0.0 } else { h.mean() }
    }

    pub fn summary(&self) -> LatencySummary {
        let h = self.counted();
        LatencySummary {
            count: h.len(),
            mean_us: if h.is_empty() { 0.0 } else { h.mean() },
            p50_us: quantile_of(&h, 0.50),
            p95_us: quantile_of(&h, 0.95),
            p99_us: quantile_of(&h, 0.99),
            p999_us: quantile_of(&h, 0.999),
            max_us: max_of(&h),
        }
    }

    /// The percentile curve: (percentile, µs) points for charts.
    pub fn curve(&self) -> Vec<(f64, u64)> {
        const QS: [f64; 14] = [
            0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0,
        ];
        let h = self.counted();
        if h.is_empty() {
            return Vec::new();
        }
        QS.iter()
            .map(|q| (*q, quantile_of(&h, q / 100.0)))
            .collect()
    }

    /// Encodes as base64 of the HdrHistogram V2+DEFLATE format (readable by the
    /// Java, Go and Rust HdrHistogram libraries).
    pub fn to_base64(&self) -> String {
        let mut buf = Vec::new();
        if V2DeflateSerializer::new()
            .serialize(&self.counted(), &mut buf)
            .is_err()
        {
            return String::new();
        }
        base64::engine::general_purpose::STANDARD.encode(buf)
    }

    pub fn from_base64(text: &str) -> Result<LatencyHist, String> {
        if text.is_empty() {
            return Ok(LatencyHist::new());
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| format!("histogram is not valid base64: {e}"))?;
        let plain = inflate_capped(&bytes)?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut plain.as_slice())
            .map_err(|e| format!("histogram is not a valid HdrHistogram V2 blob: {e:?}"))?;
        let mut out = LatencyHist::new();
        out.h
            .add(&h)
            .map_err(|e| format!("histogram out of range: {e:?}"))?;
        Ok(out)
    }
}

fn quantile_of(h: &Histogram<u64>, q: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(q)
    }
}

fn max_of(h: &Histogram<u64>) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.highest_equivalent(h.max())
    }
}

/// HdrHistogram V2 cookies: compressed (DEFLATE) and plain.
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
const V2_COOKIE: u32 = 0x1c84_9313;
/// The widest histogram read: 1 µs to about 12 days at 3 significant digits
/// (what mailbench writes is 1 µs to an hour): the counts it allocates stay small.
const MAX_READ_HIGHEST: u64 = 1 << 40;

/// The plain V2 form of an encoded histogram, expanded at most to
/// [`MAX_HISTOGRAM_DECODED_BYTES`](mailbench_base::limits::MAX_HISTOGRAM_DECODED_BYTES),
/// with a header whose range and precision stay within what mailbench writes:
/// a hostile result cannot make a reader allocate without bound.
fn inflate_capped(bytes: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let cap = mailbench_base::limits::MAX_HISTOGRAM_DECODED_BYTES;
    let be32 = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let be64 = |b: &[u8], at: usize| -> Option<u64> {
        Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
    };
    let plain = match be32(bytes, 0) {
        Some(V2_COMPRESSED_COOKIE) => {
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(bytes.get(8..).unwrap_or_default())
                .take(cap as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("histogram is not valid DEFLATE data: {e}"))?;
            if out.len() > cap {
                return Err(format!(
                    "histogram expands to more than {} MiB: not one mailbench wrote",
                    cap >> 20
                ));
            }
            out
        }
        Some(V2_COOKIE) if bytes.len() <= cap => bytes.to_vec(),
        _ => return Err("histogram is not a V2 HdrHistogram blob".into()),
    };
    // cookie, payload length, normalizing offset, significant digits, lowest, highest.
    let digits = be32(&plain, 12).ok_or("histogram header is cut short")?;
    let highest = be64(&plain, 24).ok_or("histogram header is cut short")?;
    if be32(&plain, 0) != Some(V2_COOKIE) || digits > SIGFIG as u32 || highest > MAX_READ_HIGHEST {
        return Err(format!(
            "histogram header out of range ({digits} significant digits, highest {highest}): \
             not one mailbench wrote"
        ));
    }
    Ok(plain)
}

#[cold]
fn unreachable_hist() -> Histogram<u64> {
    // Histogram::new(3) only fails for sigfig > 5; kept total to avoid a panic path.
    std::process::abort()
}

impl Serialize for LatencyHist {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_base64())
    }
}

impl schemars::JsonSchema for LatencyHist {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LatencyHist".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An HDR latency histogram in microseconds: HdrHistogram V2 + DEFLATE, base64.",
            "type": "string",
        })
    }
}

impl<'de> Deserialize<'de> for LatencyHist {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        LatencyHist::from_base64(&s).map_err(serde::de::Error::custom)
    }
}

/// Latency figures of one histogram, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl LatencySummary {
    pub fn mean_ms(&self) -> f64 {
        self.mean_us / 1000.0
    }
    pub fn max_ms(&self) -> f64 {
        self.max_us as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn summary_of_known_values() {
        let mut h = LatencyHist::new();
        for v in 1..=1000u64 {
            h.record_us(v * 10);
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!((s.mean_us - 5005.0).abs() < 10.0, "{s:?}");
        assert!((s.p50_us as f64 - 5000.0).abs() <= 5.0, "{s:?}");
        assert!((s.p99_us as f64 - 9900.0).abs() <= 10.0, "{s:?}");
        assert!((s.max_us as f64 - 10000.0).abs() <= 10.0, "{s:?}");
    }

    #[test]
    fn encoding_round_trips_and_rejects_garbage() {
        let mut h = LatencyHist::new();
        h.record_us(5);
        h.record_us(70_000);
        let back = LatencyHist::from_base64(&h.to_base64()).unwrap();
        assert_eq!(back.summary(), h.summary());
        assert!(LatencyHist::from_base64("!!!").is_err());
        assert!(LatencyHist::from_base64("aGVsbG8=").is_err());
    }

    /// A V2+DEFLATE blob whose DEFLATE stream holds `plain`.
    fn compressed(plain: &[u8]) -> String {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(plain).unwrap();
        let body = z.finish().unwrap();
        let mut blob = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        blob.extend_from_slice(&(body.len() as u32).to_be_bytes());
        blob.extend_from_slice(&body);
        base64::engine::general_purpose::STANDARD.encode(blob)
    }

    /// A small result whose histogram would expand past the cap (a few KB
    /// expanding to 64 MiB) is refused with a plain error, not inflated.
    #[test]
    fn a_histogram_that_expands_past_the_cap_is_refused() {
        let mut plain = V2_COOKIE.to_be_bytes().to_vec();
        plain.resize(64 << 20, 0);
        let text = compressed(&plain);
        assert!(text.len() < 1 << 20, "{} bytes of base64", text.len());
        let e = LatencyHist::from_base64(&text).unwrap_err();
        assert!(e.contains("expands to more than 16 MiB"), "{e}");
        // A header asking for a range mailbench never writes is refused too.
        let mut wide = V2_COOKIE.to_be_bytes().to_vec();
        wide.extend_from_slice(&[0; 8]);
        wide.extend_from_slice(&5u32.to_be_bytes());
        wide.extend_from_slice(&1u64.to_be_bytes());
        wide.extend_from_slice(&u64::MAX.to_be_bytes());
        let e = LatencyHist::from_base64(&compressed(&wide)).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Fuzz: arbitrary or mutated blobs never panic; what decodes is a histogram
        /// of bounded size (256 cases).
        #[test]
        fn arbitrary_histogram_blobs_never_panic(
            raw in proptest::collection::vec(any::<u8>(), 0..512),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
            samples in proptest::collection::vec(1u64..100_000_000, 0..50),
            kind in 0u8..3,
        ) {
            let text = match kind {
                0 => base64::engine::general_purpose::STANDARD.encode(&raw),
                1 => compressed(&raw),
                _ => {
                    let mut h = LatencyHist::new();
                    for s in &samples {
                        h.record_us(*s);
                    }
                    let mut b = base64::engine::general_purpose::STANDARD
                        .decode(h.to_base64())
                        .unwrap();
                    for (at, x) in &flips {
                        if !b.is_empty() {
                            let i = at % b.len();
                            b[i] ^= x;
                        }
                    }
                    base64::engine::general_purpose::STANDARD.encode(&b)
                }
            };
            if let Ok(h) = LatencyHist::from_base64(&text) {
                prop_assert!(h.max_us() <= 2 * MAX_READ_HIGHEST);
            }
        }
    }

    /// A plain HdrHistogram of `values` as `LatencyHist` clamps them.
    fn plain_of(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, MAX_TRACKABLE_US, SIGFIG).unwrap();
        for &v in values {
            h.saturating_record(v.clamp(1, MAX_TRACKABLE_US));
        }
        h
    }

    proptest! {
        /// Latencies pending (not yet counted) are in every figure: count,
        /// percentiles, curve, encoding, merging, as if counted one by one.
        #[test]
        fn pending_latencies_are_in_every_figure(
            a in proptest::collection::vec(0u64..5_000_000_000, 0..100),
            b in proptest::collection::vec(0u64..10_000_000, 0..70),
        ) {
            let mut h = LatencyHist::new();
            for &v in &a { h.record_us(v); }
            let plain = plain_of(&a);
            let want = LatencyHist { h: plain.clone(), pending: [0; PENDING], n_pending: 0 };
            prop_assert_eq!(h.count(), plain.len());
            prop_assert_eq!(h.is_empty(), a.is_empty());
            prop_assert_eq!(h.summary(), want.summary());
            prop_assert_eq!(h.curve(), want.curve());
            prop_assert_eq!(h.mean_us(), want.mean_us());
            prop_assert_eq!(h.to_base64(), want.to_base64());
            let mut m = LatencyHist::new();
            for &v in &b { m.record_us(v); }
            m.add(&h);
            let mut all = b.clone();
            all.extend(&a);
            let union = LatencyHist { h: plain_of(&all), pending: [0; PENDING], n_pending: 0 };
            prop_assert_eq!(m.summary(), union.summary());
            m.flush();
            prop_assert_eq!(m.h.len(), all.len() as u64);
            prop_assert_eq!(m.clone().summary(), union.summary());
            m.reset();
            prop_assert!(m.is_empty());
        }
    }

    proptest! {
        /// Merging per-part histograms equals one histogram of all samples.
        #[test]
        fn merge_equals_union(parts in proptest::collection::vec(
            proptest::collection::vec(1u64..10_000_000, 0..200), 1..5)) {
            let mut all = LatencyHist::new();
            let mut merged = LatencyHist::new();
            for p in &parts {
                let mut h = LatencyHist::new();
                for v in p { h.record_us(*v); all.record_us(*v); }
                let h = LatencyHist::from_base64(&h.to_base64()).unwrap();
                merged.add(&h);
            }
            prop_assert_eq!(merged.summary(), all.summary());
        }
    }
}
