//! Latency distributions: an hdrhistogram (2 significant digits, growing
//! only as far as the largest value seen, so rare statements stay small)
//! plus the exact sum and maximum.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A distribution of durations in µs: an HDR histogram (2 significant digits) plus the exact sum and max.
#[derive(Clone, Debug)]
pub struct Latency {
    hist: Histogram<u32>,
    sum: u64,
    max: u64,
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

impl Latency {
    /// Empty; percentiles of an empty distribution read as 0.
    pub fn new() -> Latency {
        // `new` is auto-resizing; 2 digits keep each bucket within 1 %.
        let hist = Histogram::new(2).unwrap_or_else(|_| unreachable!("2 significant digits is valid"));
        Latency { hist, sum: 0, max: 0 }
    }

    /// Adds one duration in µs; 0 is histogrammed as 1 but summed as 0.
    pub fn record(&mut self, us: u64) {
        // `record` grows the histogram to fit (saturating_record would clamp
        // to the current range instead); the only error left is a u32 bucket
        // overflowing after 4 billion samples, harmless for a report.
        let _ = self.hist.record(us.max(1));
        self.sum = self.sum.saturating_add(us);
        self.max = self.max.max(us);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// How many values were at least `us` (to the histogram's 1 %).
    pub fn count_at_least(&self, us: u64) -> u64 {
        if self.hist.is_empty() || us > self.max {
            return 0;
        }
        self.hist.count_between(us.max(1), self.max.max(1))
    }

    /// Exact sum of values recorded, µs (saturating).
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// Adds `other`'s values: percentiles of the union, not a mean of percentiles.
    pub fn merge(&mut self, other: &Latency) {
        let _ = self.hist.add(&other.hist);
        self.sum = self.sum.saturating_add(other.sum);
        self.max = self.max.max(other.max);
    }

    /// Percentiles, max and sum; all 0 when nothing was recorded.
    pub fn summary(&self) -> LatencySummary {
        if self.hist.is_empty() {
            return LatencySummary::default();
        }
        // hdrhistogram reports the bucket's upper edge; never above the true max.
        let at = |q: f64| self.hist.value_at_quantile(q).min(self.max);
        LatencySummary { p50: at(0.50), p95: at(0.95), p99: at(0.99), max: self.max, sum: self.sum }
    }

    /// Counts in power-of-two buckets: `(upper bound in µs, count)`, for charts.
    pub fn distribution(&self) -> Vec<(u64, u64)> {
        let mut buckets: Vec<(u64, u64)> = Vec::new();
        for v in self.hist.iter_recorded() {
            let upper = v.value_iterated_to().max(1).next_power_of_two();
            match buckets.last_mut() {
                Some((u, c)) if *u == upper => *c += u64::from(v.count_at_value()),
                _ => buckets.push((upper, u64::from(v.count_at_value()))),
            }
        }
        buckets
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

    #[test]
    fn empty_is_all_zero() {
        assert_eq!(Latency::new().summary(), LatencySummary::default());
    }
}
