//! Latency distributions: an hdrhistogram (2 significant digits, growing
//! only as far as the largest value seen, so rare statements stay small)
//! plus the exact sum and maximum. Written in the crate's bucket layout by
//! [`buckets`], read through the crate.
//!
//! A distribution that is no longer written to (a rolling window's past slot, a closed
//! connection) can be [packed](Latency::pack): its non-empty buckets as varints, a few
//! bytes each instead of the histogram's 4 bytes for every bucket up to its largest value
//! (5–7 KiB once values reach milliseconds). Packing loses nothing: every reading is the
//! same, and writing to a packed distribution unpacks it first.

use std::borrow::Cow;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

mod buckets;

use buckets::{Buckets, highest_at};

/// A distribution of durations in µs: an HDR histogram (2 significant digits) plus the exact sum and max.
#[derive(Clone, Debug)]
pub struct Latency {
    counts: Counts,
    sum: u64,
    max: u64,
}

/// The histogram, as it is written to or packed.
#[derive(Clone, Debug)]
enum Counts {
    /// Boxed, so that a packed distribution is small inline too.
    Dense(Box<Buckets>),
    /// `(value, count)` of each non-empty bucket, ascending: LEB128 varints of the value's
    /// distance from the previous bucket's value (the bucket's highest equivalent value) and
    /// of its count.
    Packed(Box<[u8]>),
}

/// The percentiles reports show, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Median, µs (to the histogram's 1 %, never above `max`).
    pub p50: u64,
    /// 95th percentile, µs.
    pub p95: u64,
    /// 99th percentile, µs.
    pub p99: u64,
    /// Largest value recorded, µs (exact).
    pub max: u64,
    /// All values added, µs (exact): a statement's total time.
    pub sum: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

fn empty_histogram() -> Histogram<u32> {
    // `new` is auto-resizing; 2 digits keep each bucket within 1 % (the layout `buckets` writes).
    Histogram::new(2).unwrap_or_else(|_| unreachable!("2 significant digits is valid"))
}

impl Latency {
    /// Empty; percentiles of an empty distribution read as 0.
    pub fn new() -> Latency {
        Latency { counts: Counts::Dense(Box::default()), sum: 0, max: 0 }
    }

    /// The counts to write to, unpacked first if they were packed.
    #[cold]
    fn dense_mut(&mut self) -> &mut Buckets {
        if let Counts::Packed(bytes) = &self.counts {
            let mut buckets = Box::<Buckets>::default();
            unpack_into(bytes, &mut buckets);
            self.counts = Counts::Dense(buckets);
        }
        match &mut self.counts {
            Counts::Dense(hist) => hist,
            Counts::Packed(_) => unreachable!("unpacked just above"),
        }
    }

    /// The counts: borrowed, or unpacked into a copy.
    fn buckets(&self) -> Cow<'_, Buckets> {
        match &self.counts {
            Counts::Dense(buckets) => Cow::Borrowed(&**buckets),
            Counts::Packed(bytes) => {
                let mut buckets = Buckets::default();
                unpack_into(bytes, &mut buckets);
                Cow::Owned(buckets)
            }
        }
    }

    /// The histogram to read, built from the counts; `None` when nothing was recorded. A
    /// packed distribution is unpacked once for both answers.
    fn hist(&self) -> Option<Histogram<u32>> {
        let buckets = self.buckets();
        (buckets.total() > 0).then(|| buckets.to_histogram(empty_histogram()))
    }

    /// Adds one duration in µs; 0 is histogrammed as 1 but summed as 0.
    #[inline]
    pub fn record(&mut self, us: u64) {
        // A bucket saturates after 4 billion samples, harmless for a report. Several are
        // recorded per command, so the common case (counts not packed) is inlined.
        let buckets = match &mut self.counts {
            Counts::Dense(buckets) => buckets,
            Counts::Packed(_) => self.dense_mut(),
        };
        buckets.record_n(us.max(1), 1);
        self.sum = self.sum.saturating_add(us);
        self.max = self.max.max(us);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.buckets().total()
    }

    /// How many values were at least `us` (to the histogram's 1 %).
    pub fn count_at_least(&self, us: u64) -> u64 {
        if us > self.max {
            return 0;
        }
        let Some(hist) = self.hist() else { return 0 };
        hist.count_between(us.max(1), self.max.max(1))
    }

    /// Exact sum of values recorded, µs (saturating).
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// Adds `other`'s values: percentiles of the union, not a mean of percentiles.
    pub fn merge(&mut self, other: &Latency) {
        match &other.counts {
            Counts::Dense(theirs) => self.dense_mut().add(theirs),
            Counts::Packed(bytes) => unpack_into(bytes, self.dense_mut()),
        }
        self.sum = self.sum.saturating_add(other.sum);
        self.max = self.max.max(other.max);
    }

    /// Percentiles, max and sum; all 0 when nothing was recorded.
    pub fn summary(&self) -> LatencySummary {
        let Some(hist) = self.hist() else { return LatencySummary::default() };
        // hdrhistogram reports the bucket's upper edge; never above the true max.
        let at = |q: f64| hist.value_at_quantile(q).min(self.max);
        LatencySummary { p50: at(0.50), p95: at(0.95), p99: at(0.99), max: self.max, sum: self.sum }
    }

    /// Counts in power-of-two buckets: `(upper bound in µs, count)`, for charts.
    pub fn distribution(&self) -> Vec<(u64, u64)> {
        let mut buckets: Vec<(u64, u64)> = Vec::new();
        let Some(hist) = self.hist() else { return buckets };
        for v in hist.iter_recorded() {
            let upper = v.value_iterated_to().max(1).next_power_of_two();
            match buckets.last_mut() {
                Some((u, c)) if *u == upper => *c += u64::from(v.count_at_value()),
                _ => buckets.push((upper, u64::from(v.count_at_value()))),
            }
        }
        buckets
    }

    /// Packs the histogram for keeping, when that is smaller (see the module docs): for a
    /// distribution that is read from now on. Readings stay the same; a later write unpacks.
    pub fn pack(&mut self) {
        let Counts::Dense(buckets) = &self.counts else { return };
        let mut bytes = Vec::new();
        let mut previous = 0;
        for (index, count) in buckets.recorded() {
            let value = highest_at(index);
            put_varint(&mut bytes, value - previous);
            put_varint(&mut bytes, u64::from(count));
            previous = value;
        }
        if bytes.len() < buckets.capacity() * std::mem::size_of::<u32>() {
            self.counts = Counts::Packed(bytes.into_boxed_slice());
        }
    }

    /// Heap bytes the histogram holds: what packing saves (for tests of memory bounds).
    pub fn heap_bytes(&self) -> usize {
        match &self.counts {
            Counts::Dense(buckets) => buckets.capacity() * std::mem::size_of::<u32>(),
            Counts::Packed(bytes) => bytes.len(),
        }
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn take_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Counts a packed histogram's buckets into `buckets`: each at its bucket's highest
/// equivalent value, so into the same bucket it was counted in.
fn unpack_into(mut bytes: &[u8], buckets: &mut Buckets) {
    let mut value = 0u64;
    while let (Some(delta), Some(count)) = (take_varint(&mut bytes), take_varint(&mut bytes)) {
        value = value.saturating_add(delta);
        buckets.record_n(value.max(1), u32::try_from(count).unwrap_or(u32::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_sum_and_max() {
        let mut l = Latency::new();
        for us in 1..=1000 {
            l.record(us);
        }
        let s = l.summary();
        assert_eq!((s.max, s.sum), (1000, 500_500));
        assert!((495..=505).contains(&s.p50), "{s:?}");
        assert!((985..=1000).contains(&s.p99), "{s:?}");
        let mut other = Latency::new();
        other.record(5_000_000);
        l.merge(&other);
        assert_eq!(l.summary().max, 5_000_000);
        assert_eq!(l.count(), 1001);
        let total: u64 = l.distribution().iter().map(|(_, c)| c).sum();
        assert_eq!(total, 1001);
    }

    /// A packed distribution reads exactly as the histogram it was packed from, is far
    /// smaller, and merges and takes new values as it would have.
    #[test]
    fn packing_changes_no_reading_and_saves_the_empty_buckets() {
        let mut l = Latency::new();
        let mut state = 7u64;
        for _ in 0..60 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            l.record(100 + (state >> 33) % 900_000);
        }
        l.record(0);
        let readings = |l: &Latency| (l.summary(), l.count(), l.count_at_least(5_000), l.distribution());
        let before = readings(&l);
        let dense = l.heap_bytes();
        let mut packed = l.clone();
        packed.pack();
        assert_eq!(readings(&packed), before);
        assert!(packed.heap_bytes() * 10 < dense, "{} bytes packed, {dense} dense", packed.heap_bytes());
        let mut other = Latency::new();
        other.record(42);
        let (mut a, mut b) = (l.clone(), Latency::new());
        a.merge(&other);
        b.merge(&packed);
        b.merge(&other);
        assert_eq!(readings(&a), readings(&b), "merging a packed distribution");
        packed.record(42);
        assert_eq!(readings(&packed), readings(&a), "writing to a packed distribution");
        let mut empty = Latency::new();
        empty.pack();
        assert_eq!(empty.summary(), LatencySummary::default());
    }

    #[test]
    fn empty_is_all_zero() {
        assert_eq!(Latency::new().summary(), LatencySummary::default());
    }
}
