//! The write side of a [`Latency`](super::Latency): counts kept in hdrhistogram's own bucket
//! layout (2 significant digits, a resolution of 1), written with a few instructions, and
//! read through hdrhistogram.
//!
//! Why not write to the crate's histogram directly: each command records six durations on
//! the collector (its statement's latency and first byte, its connection's latency, and the
//! same again for the rolling window's slot), and `Histogram::record` costs about 100
//! instructions with its bounds checks, resizing path and running minimum and maximum
//! (callgrind, `scripts/bench.sh --only f`). Here a value is a shift, a leading-zero count
//! and an add. Readings are rarer (a report, a window): they rebuild the crate's histogram
//! from the non-empty buckets, each recorded at a value of its own bucket, so every
//! percentile and count is exactly what the crate would have answered.

use hdrhistogram::Histogram;

/// Sub-buckets in half a bucket: 2 significant digits need 200 distinct values per
/// power of two, so hdrhistogram takes 256 sub-buckets, 128 in the upper half.
const HALF_MAGNITUDE: u32 = 7;
const HALF: u64 = 1 << HALF_MAGNITUDE;
/// Values below this (the first bucket) are counted one by one.
const SUB_BUCKET_MASK: u64 = 2 * HALF - 1;
/// hdrhistogram's `leading_zero_count_base` for a unit magnitude of 0.
const LEADING_ZERO_BASE: u32 = 64 - HALF_MAGNITUDE - 1;

/// The bucket (power of two) `value` falls in.
fn bucket_of(value: u64) -> u32 {
    LEADING_ZERO_BASE - (value | SUB_BUCKET_MASK).leading_zeros()
}

/// The counts index of `value`, as hdrhistogram's `index_for` computes it.
fn index_of(value: u64) -> usize {
    let bucket = bucket_of(value);
    let sub_bucket = value >> bucket;
    // Bucket 0 uses all 256 sub-buckets; each later one only its upper half.
    (((u64::from(bucket) + 1) << HALF_MAGNITUDE) + sub_bucket - HALF) as usize
}

/// The lowest value counted at `index` and how many values share it.
fn range_of(index: usize) -> (u64, u64) {
    let (bucket, sub_bucket) = match (index as u64 >> HALF_MAGNITUDE).checked_sub(1) {
        Some(bucket) => (bucket, (index as u64 & (HALF - 1)) + HALF),
        None => (0, index as u64),
    };
    (sub_bucket << bucket, 1 << bucket)
}

/// The highest value counted at `index`: what hdrhistogram's iterators report for it
/// (one below the next bucket's lowest, saturating as the crate does at the very top).
pub(super) fn highest_at(index: usize) -> u64 {
    let (lowest, size) = range_of(index);
    lowest.saturating_add(size) - 1
}

/// Counts by bucket, grown only as far as the largest value recorded.
#[derive(Clone, Debug, Default)]
pub(super) struct Buckets {
    counts: Vec<u32>,
    total: u64,
}

impl Buckets {
    /// Counts `value` (at least 1) `n` times; a bucket saturates at `u32::MAX`.
    #[inline]
    pub fn record_n(&mut self, value: u64, n: u32) {
        let index = index_of(value);
        // One bounds check: a bucket within the counts is the common case, and growing is
        // out of line (the compiler cannot tell that the counts reach `index` after it).
        match self.counts.get_mut(index) {
            Some(count) => *count = count.saturating_add(n),
            None => self.grow_and_count(index, n),
        }
        self.total = self.total.saturating_add(u64::from(n));
    }

    /// [`Buckets::record_n`] for a value past the counts: grows them to it, then counts it.
    #[cold]
    fn grow_and_count(&mut self, index: usize, n: u32) {
        self.grow_to(index + 1);
        self.counts[index] = n;
    }

    /// Adds every count of `other`.
    pub fn add(&mut self, other: &Buckets) {
        if other.counts.len() > self.counts.len() {
            self.grow_to(other.counts.len());
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine = mine.saturating_add(*theirs);
        }
        self.total = self.total.saturating_add(other.total);
    }

    /// Room for at least `len` counts, to the end of that power of two's sub-buckets, as the
    /// crate sizes its own; exactly that, not the doubling a `Vec` grows by, since a
    /// thousand connections each keep one (the soak's RSS climbed with it).
    #[cold]
    fn grow_to(&mut self, len: usize) {
        let len = len.div_ceil(HALF as usize) * HALF as usize;
        self.counts.reserve_exact(len - self.counts.len());
        self.counts.resize(len, 0);
    }

    /// Values counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// `(index, count)` of each non-empty bucket, ascending.
    pub fn recorded(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.counts.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, c)| (i, *c))
    }

    /// Buckets allocated (empty ones below the largest included): the memory it takes.
    pub fn capacity(&self) -> usize {
        self.counts.capacity()
    }

    /// The same counts in hdrhistogram's histogram, for reading.
    pub fn to_histogram(&self, mut into: Histogram<u32>) -> Histogram<u32> {
        for (index, count) in self.recorded() {
            // The bucket's lowest value is in it: counted in the same bucket there.
            let _ = into.record_n(range_of(index).0, count);
        }
        into
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reading of values counted here and rebuilt equals hdrhistogram's own of the
    /// same values: the layout is the crate's, bucket for bucket.
    #[test]
    fn the_buckets_are_hdrhistograms() {
        let mut values: Vec<u64> = (1..=5_000).collect();
        for shift in 0..64 {
            let power = 1u64 << shift;
            values.extend([power - 1, power, power + 1, power.saturating_mul(3) / 2]);
        }
        values.push(u64::MAX);
        let mut state = 11u64;
        for _ in 0..20_000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            values.push((state >> (state % 50 + 1)).max(1));
        }
        values.retain(|v| *v >= 1);

        let mut direct = Histogram::<u32>::new(2).expect("2 digits");
        let mut buckets = Buckets::default();
        for v in &values {
            direct.record(*v).expect("auto-resizing");
            buckets.record_n(*v, 1);
        }
        let rebuilt = buckets.to_histogram(Histogram::new(2).expect("2 digits"));
        assert_eq!(rebuilt.len(), direct.len());
        assert_eq!(buckets.total(), values.len() as u64);
        let iterated = |h: &Histogram<u32>| -> Vec<(u64, u64)> {
            h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value().into())).collect()
        };
        assert_eq!(iterated(&rebuilt), iterated(&direct));
        let ours: Vec<(u64, u64)> = buckets.recorded().map(|(i, c)| (highest_at(i), c.into())).collect();
        let theirs = iterated(&direct);
        assert_eq!(ours.len(), theirs.len());
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(a, b, "each bucket's highest value is the crate's");
        }
        for q in [0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
            assert_eq!(rebuilt.value_at_quantile(q), direct.value_at_quantile(q), "quantile {q}");
        }
        for (low, high) in [(1, 10), (100, 5_000), (1 << 20, u64::MAX)] {
            assert_eq!(rebuilt.count_between(low, high), direct.count_between(low, high));
        }
    }

    /// A thousand connections each keep a distribution: it takes no more room than the
    /// crate's own would for the same values (a `Vec`'s doubling took up to twice that, and
    /// the soak's RSS climbed with it).
    #[test]
    fn counts_take_no_more_room_than_the_crates() {
        let mut direct = Histogram::<u32>::new(2).expect("2 digits");
        let (mut buckets, mut merged) = (Buckets::default(), Buckets::default());
        let mut v = 1u64;
        while v < 1 << 40 {
            direct.record(v).expect("auto-resizing");
            buckets.record_n(v, 1);
            let mut one = Buckets::default();
            one.record_n(v, 1);
            merged.add(&one);
            v = v * 5 / 4 + 1;
        }
        for b in [&buckets, &merged] {
            assert!(b.capacity() <= direct.distinct_values(), "{} > {}", b.capacity(), direct.distinct_values());
        }
    }

    #[test]
    fn adding_is_recording_both() {
        let (mut a, mut b, mut both) = (Buckets::default(), Buckets::default(), Buckets::default());
        for v in [1, 7, 300, 70_000] {
            a.record_n(v, 2);
            both.record_n(v, 2);
        }
        for v in [7, 1 << 40] {
            b.record_n(v, 1);
            both.record_n(v, 1);
        }
        a.add(&b);
        assert_eq!(a.recorded().collect::<Vec<_>>(), both.recorded().collect::<Vec<_>>());
        assert_eq!(a.total(), 10);
    }
}
