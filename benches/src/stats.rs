//! Summaries of repeated measurements: latency percentiles, medians, means.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Round-trip latency of workload a, in microseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Latency {
    /// From a histogram of nanoseconds.
    pub fn from_ns(h: &Histogram<u64>) -> Latency {
        let us = |ns: u64| ns as f64 / 1e3;
        Latency {
            count: h.len(),
            mean_us: h.mean() / 1e3,
            p50_us: us(h.value_at_quantile(0.50)),
            p90_us: us(h.value_at_quantile(0.90)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

/// The middle value (the mean of the two middle ones for an even count); `None` if empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) { (sorted[mid - 1] + sorted[mid]) / 2.0 } else { sorted[mid] })
}

/// The arithmetic mean; `None` if empty.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_means() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(mean(&[1.0, 2.0]), Some(1.5));
    }

    #[test]
    fn latency_in_microseconds() -> anyhow::Result<()> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
        for ns in [10_000, 20_000, 30_000] {
            h.record(ns)?;
        }
        let l = Latency::from_ns(&h);
        assert_eq!(l.count, 3);
        assert!((l.p50_us - 20.0).abs() < 0.1, "{l:?}");
        Ok(())
    }
}
