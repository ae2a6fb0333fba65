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
///
/// A histogram read from its encoding stays encoded (a few hundred bytes)
/// until something is recorded or added to it: its counts (188 KB) are
/// decoded for a figure and dropped, and an untouched one is written back as
/// it was read. Results hold one per I/O class per database per interval, so
/// a merge or a report of a long run holds their encodings, not their counts.
#[derive(Clone, Debug)]
pub struct LatencyHist {
    /// The counts; None while the histogram is only its encoding (`encoded`).
    h: Option<Histogram<u64>>,
    /// Latencies recorded, clamped, not yet counted in `h`: `pending[..n_pending]`.
    pending: [u32; PENDING],
    n_pending: usize,
    /// The encoding read (already checked), while `h` is None.
    encoded: Option<Box<str>>,
}

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHist {
    pub fn new() -> LatencyHist {
        // 1..=MAX with 3 significant digits is always a valid configuration.
        LatencyHist {
            h: Some(fresh()),
            pending: [0; PENDING],
            n_pending: 0,
            encoded: None,
        }
    }

    /// The counts, decoded from the encoding first if the histogram is still
    /// only that (it then is no longer kept encoded).
    fn live(&mut self) -> &mut Histogram<u64> {
        let enc = self.encoded.take();
        self.h.get_or_insert_with(|| {
            // The encoding was checked when it was read.
            enc.and_then(|e| decode(&e).ok()).unwrap_or_else(fresh)
        })
    }

    /// Records one latency in microseconds (0 is counted as 1 µs; values over an
    /// hour are clamped to an hour).
    #[inline]
    pub fn record_us(&mut self, us: u64) {
        let v = us.clamp(1, MAX_TRACKABLE_US);
        if self.h.is_none() {
            self.live();
        }
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
        let n = self.n_pending;
        if n == 0 {
            return;
        }
        let pending = self.pending;
        let h = self.live();
        for &v in &pending[..n] {
            // In range by construction: saturating_record cannot fail.
            h.saturating_record(u64::from(v));
        }
        self.n_pending = 0;
    }

    /// The histogram with every recorded latency counted.
    fn counted(&self) -> std::borrow::Cow<'_, Histogram<u64>> {
        let mut h = match (&self.h, &self.encoded) {
            (Some(h), _) if self.n_pending == 0 => return std::borrow::Cow::Borrowed(h),
            (Some(h), _) => h.clone(),
            // The encoding was checked when it was read.
            (None, Some(e)) => decode(e).unwrap_or_else(|_| fresh()),
            (None, None) => fresh(),
        };
        for &v in &self.pending[..self.n_pending] {
            h.saturating_record(u64::from(v));
        }
        std::borrow::Cow::Owned(h)
    }

    pub fn count(&self) -> u64 {
        match &self.h {
            Some(h) => h.len() + self.n_pending as u64,
            None => self.counted().len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    pub fn add(&mut self, other: &LatencyHist) {
        let theirs = other.counted();
        // Same bounds on both sides (every histogram is decoded into them):
        // add cannot fail for range reasons; were it to, each value is counted.
        if self.live().add(&*theirs).is_err() {
            for v in theirs.iter_recorded() {
                let h = self.live();
                h.saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }

    pub fn reset(&mut self) {
        self.encoded = None;
        self.h = Some(fresh());
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
        if let (None, Some(e), 0) = (&self.h, &self.encoded, self.n_pending) {
            return e.to_string();
        }
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
        // Checked whole now; the counts are decoded again when a figure is asked.
        decode(text)?;
        Ok(LatencyHist {
            h: None,
            pending: [0; PENDING],
            n_pending: 0,
            encoded: Some(text.into()),
        })
    }
}

/// An empty histogram of the bounds every `LatencyHist` has.
fn fresh() -> Histogram<u64> {
    // 1..=MAX with 3 significant digits is always a valid configuration.
    match Histogram::new_with_bounds(1, MAX_TRACKABLE_US, SIGFIG) {
        Ok(h) => h,
        Err(_) => Histogram::new(SIGFIG).unwrap_or_else(|_| unreachable_hist()),
    }
}

/// The counts of an encoded histogram (base64 of V2+DEFLATE), in the bounds
/// of [`fresh`]; an error says what is wrong with the text.
fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("histogram is not valid base64: {e}"))?;
    let plain = inflate_capped(&bytes)?;
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut plain.as_slice())
        .map_err(|e| format!("histogram is not a valid HdrHistogram V2 blob: {e:?}"))?;
    let mut out = fresh();
    out.add(&h)
        .map_err(|e| format!("histogram out of range: {e:?}"))?;
    Ok(out)
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

    /// A histogram read stays its encoding (no counts held) until something
    /// is recorded or added; its figures and its encoding are those it was
    /// read with, and a change is in every figure after.
    #[test]
    fn a_read_histogram_stays_encoded_until_changed() {
        let mut h = LatencyHist::new();
        for v in [5, 900, 70_000] {
            h.record_us(v);
        }
        let text = h.to_base64();
        let mut back = LatencyHist::from_base64(&text).unwrap();
        assert!(back.h.is_none(), "decoded at once");
        assert_eq!(back.summary(), h.summary());
        assert_eq!(back.to_base64(), text);
        let copy = back.clone();
        back.record_us(1_000_000);
        assert_eq!(back.count(), 4);
        assert_eq!(
            back.max_us(),
            LatencyHist::from_base64(&back.to_base64())
                .unwrap()
                .max_us()
        );
        let mut sum = LatencyHist::new();
        sum.add(&copy);
        sum.add(&back);
        assert_eq!(sum.count(), 7);
        assert!(copy.h.is_none() && copy.count() == 3);
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
            let want = LatencyHist { h: Some(plain.clone()), pending: [0; PENDING], n_pending: 0, encoded: None };
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
            let union = LatencyHist { h: Some(plain_of(&all)), pending: [0; PENDING], n_pending: 0, encoded: None };
            prop_assert_eq!(m.summary(), union.summary());
            m.flush();
            prop_assert_eq!(m.count(), all.len() as u64);
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
