//! What the Prometheus metrics are made of: fixed-bucket histograms and
//! per-command counters, updated by the collector and never reset (counters
//! must only go up, or `rate()` breaks).

use super::{CommandRecord, StatementMetrics};
use crate::protocol::constants::command;

/// Fixed-bucket histogram state in Prometheus's cumulative form.
#[derive(Clone, Debug)]
pub struct BucketHistogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
    /// The bucket the last value fell in (see [`BucketHistogram::bucket_of`]).
    last: usize,
    /// The values that bucket takes: above `last_above` (the bound before it, `-inf` for the
    /// first), up to `last_bound` (its own). Kept beside it, so that a value in it is two
    /// compares, without reading the bounds.
    last_above: f64,
    last_bound: f64,
}

impl BucketHistogram {
    /// `(upper bound, count in that bucket)`, not cumulative.
    pub fn buckets(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        self.bounds.iter().copied().zip(self.counts.iter().copied())
    }

    /// Sum of every observed value (Prometheus `_sum`).
    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// Observations, including those above the last bound (Prometheus `_count`, the `+Inf` bucket).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Empty, with upper bounds `bounds` (ascending; one of the `*_BUCKETS` constants).
    pub fn new(bounds: &'static [f64]) -> BucketHistogram {
        let mut empty = BucketHistogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
            last: 0,
            last_above: f64::INFINITY,
            last_bound: f64::NEG_INFINITY,
        };
        if !bounds.is_empty() {
            empty.found(0);
        }
        empty
    }

    /// Adds `other`'s observations (same bounds: both are built from one constant).
    pub fn merge(&mut self, other: &BucketHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.sum += other.sum;
        self.count += other.count;
    }

    /// Counts `v` in the first bucket whose bound is at least `v`; above every bound, only in sum and count.
    pub fn observe(&mut self, v: f64) {
        if let Some(i) = self.bucket_of(v) {
            self.counts[i] += 1;
        }
        self.sum += v;
        self.count += 1;
    }

    /// The first bucket whose bound is at least `v`. The one found last is tried before the
    /// search: a statement's durations and sizes mostly fall in one bucket, and each command
    /// observes several histograms. (A NaN is in none: no compare holds.)
    #[inline(always)]
    fn bucket_of(&mut self, v: f64) -> Option<usize> {
        if v > self.last_above && v <= self.last_bound {
            return Some(self.last);
        }
        let i = self.bounds.iter().position(|&b| v <= b)?;
        self.found(i);
        Some(i)
    }

    /// Remembers bucket `i` (one of the bounds) as the one found last.
    fn found(&mut self, i: usize) {
        self.last = i;
        self.last_above = i.checked_sub(1).map_or(f64::NEG_INFINITY, |before| self.bounds[before]);
        self.last_bound = self.bounds[i];
    }
}

/// Seconds: 50 µs to 10 s, for round-trip-sized to slow-query-sized latencies.
pub const SECONDS_BUCKETS: &[f64] =
    &[0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Seconds of lateness: 10 µs to 100 ms, around the ±0.3 ms an emulated link should keep to.
pub const LATE_SECONDS_BUCKETS: &[f64] =
    &[0.00001, 0.00005, 0.0001, 0.0002, 0.0003, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.1];
/// Bytes: 256 B to 1 GiB in powers of four.
pub const BYTES_BUCKETS: &[f64] = &[
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262144.0,
    1048576.0,
    4194304.0,
    16777216.0,
    67108864.0,
    268435456.0,
    1073741824.0,
];

/// Command-level metrics since start. Every command counts in its statement's series (or
/// `other`'s), so the command-level latency histograms and round trips are those series
/// summed when a scrape asks ([`StatementMetrics::sum`]), not counted a second time per command.
#[derive(Clone, Debug)]
pub struct CommandMetrics {
    /// Response packet bytes per command: `rttscope_result_bytes`.
    pub result_bytes: BucketHistogram,
    /// Per command over an emulated link, how much later than its settings the link let it
    /// go: `rttscope_inject_late_seconds`.
    pub inject_late: BucketHistogram,
    /// `[commands, errors]` by command byte: counted by index, named when a scrape reads
    /// them ([`by_command`](Self::by_command)). (A search of `(name, count)` pairs by name
    /// cost some 90 instructions a command in f.)
    commands: Box<[[u64; 2]; 256]>,
    /// Per-statement series, the top `metrics.top_statements` by time and `other`.
    pub statements: StatementMetrics,
}

impl Default for CommandMetrics {
    fn default() -> Self {
        CommandMetrics {
            result_bytes: BucketHistogram::new(BYTES_BUCKETS),
            inject_late: BucketHistogram::new(LATE_SECONDS_BUCKETS),
            commands: Box::new([[0; 2]; 256]),
            statements: StatementMetrics::new(DEFAULT_TOP_STATEMENTS),
        }
    }
}

/// Statements with series of their own unless the config says otherwise.
const DEFAULT_TOP_STATEMENTS: usize = 100;

impl CommandMetrics {
    /// Metrics that give at most `top_statements` statements series of their own.
    pub fn new(top_statements: usize) -> CommandMetrics {
        CommandMetrics { statements: StatementMetrics::new(top_statements), ..CommandMetrics::default() }
    }

    /// Counts one command in every histogram, its command name and its statement's series.
    #[inline(always)]
    pub fn record(&mut self, r: &CommandRecord) {
        self.statements.record(r);
        self.result_bytes.observe(r.bytes_down as f64);
        if r.injected_us > 0 {
            self.inject_late.observe(r.late_us as f64 / 1e6);
        }
        let [count, errors] = &mut self.commands[usize::from(r.command)];
        *count += 1;
        *errors += u64::from(r.error.is_some());
    }

    /// `(command name, count, errors)` of every command seen, in byte order. Every byte
    /// without a name counts as one `COM_UNKNOWN`, so a client sending nonsense cannot grow
    /// the label set.
    pub fn by_command(&self) -> impl Iterator<Item = (&'static str, u64, u64)> + '_ {
        let mut named: Vec<(&'static str, u64, u64)> = Vec::new();
        for (byte, &[count, errors]) in (0..=u8::MAX).zip(self.commands.iter()) {
            if count == 0 {
                continue;
            }
            let name = command::name(byte);
            match named.iter_mut().find(|(n, _, _)| *n == name) {
                Some((_, c, e)) => {
                    *c += count;
                    *e += errors;
                }
                None => named.push((name, count, errors)),
            }
        }
        named.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever bucket the last value fell in, a value is counted in the first bucket whose
    /// bound is at least it, as a search from the start would count it.
    #[test]
    fn the_last_bucket_found_changes_no_count() {
        let values = [
            0.0003,
            0.0003,
            0.00005,
            0.00004,
            11.0,
            0.0003,
            10.0,
            0.0001,
            0.00011,
            f64::NAN,
            0.0,
            0.0002,
            f64::NEG_INFINITY,
            0.00005,
            f64::INFINITY,
            0.00025,
            0.00026,
        ];
        let mut h = BucketHistogram::new(SECONDS_BUCKETS);
        let mut expected = vec![0; SECONDS_BUCKETS.len()];
        for v in values {
            h.observe(v);
            if let Some(i) = SECONDS_BUCKETS.iter().position(|&b| v <= b) {
                expected[i] += 1;
            }
            assert_eq!(h.counts, expected, "after {v}");
        }
        assert_eq!(h.count(), values.len() as u64);
    }
}
