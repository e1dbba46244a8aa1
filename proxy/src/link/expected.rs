//! What the operator said the link should be (`link.expected_rtt`, `link.expected_bandwidth`)
//! held against what a transfer measured, and the host's TCP ceilings checked against the path
//! as measured — the start-up check has only the configured figures, often none.

use super::measurement::{LinkLimit, Measurement};
use super::sysctl::Sysctls;
use crate::human::{rate, us};

/// A transfer below this share of the expected bandwidth is explained against it.
const FAR_BELOW: f64 = 0.5;
/// A base RTT this many times off the expected one (either way) is named.
const RTT_OFF_BY: f64 = 1.5;
/// The measured BDP must grow by this factor before the ceilings are checked again (so a
/// warning repeats only when the path turned out markedly bigger, a few times at most).
const RECHECK_GROWTH: u64 = 2;

/// The link's expected figures, as configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expected {
    /// `link.expected_rtt`, µs; `None` when not configured.
    pub rtt_us: Option<u64>,
    /// `link.expected_bandwidth` converted to bytes per second; `None` when not configured.
    pub bytes_per_second: Option<u64>,
}

impl Expected {
    /// From `link.expected_rtt` and `link.expected_bandwidth` (bits per second).
    pub fn new(rtt: Option<std::time::Duration>, bits_per_second: Option<u64>) -> Expected {
        Expected {
            rtt_us: rtt.map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
            bytes_per_second: bits_per_second.map(|b| b / 8),
        }
    }

    /// What a verdict adds when the measurement is far from what was expected: a throughput
    /// well below the expected bandwidth (the limit just named is why), or a base RTT well off
    /// the expected one. Empty when they agree or nothing was expected.
    pub fn words(&self, m: &Measurement) -> String {
        let mut out = String::new();
        if let Some(expected) = self.bytes_per_second.filter(|&b| b > 0)
            && m.limit != LinkLimit::Latency
            && (m.throughput as f64) < FAR_BELOW * expected as f64
        {
            let share = 100.0 * m.throughput as f64 / expected as f64;
            let why = if m.limit == LinkLimit::Link {
                "the path itself is slower than expected: a shared or policed link, or another route"
            } else {
                "the limit above is what kept it there"
            };
            out.push_str(&format!(
                "; that is {share:.0}% of the {} expected (link.expected_bandwidth): {why}",
                rate(expected)
            ));
        }
        if let Some(expected) = self.rtt_us.filter(|&r| r > 0) {
            let measured = u64::from(m.base_rtt_us);
            let ratio = measured as f64 / expected as f64;
            if measured > 0 && ratio >= RTT_OFF_BY {
                out.push_str(&format!(
                    "; the base RTT of {} is {ratio:.1}× the {} expected (link.expected_rtt): a longer route or a standing queue on the path",
                    us(measured),
                    us(expected)
                ));
            } else if measured > 0 && ratio <= 1.0 / RTT_OFF_BY {
                out.push_str(&format!(
                    "; the base RTT of {} is below the {} expected (link.expected_rtt): the database is nearer than configured",
                    us(measured),
                    us(expected)
                ));
            }
        }
        out
    }
}

/// The host's buffer ceilings against the largest bandwidth-delay product measured so far.
#[derive(Debug, Default)]
pub struct HostCheck {
    checked_bdp: u64,
}

impl HostCheck {
    /// Problems with the host's TCP settings for a path measured at `bdp` bytes, when that
    /// path is the biggest yet by a margin; otherwise nothing (already said).
    pub fn check(&mut self, sysctls: &Sysctls, bdp: u64) -> Vec<String> {
        if bdp == 0 || bdp < self.checked_bdp.saturating_mul(RECHECK_GROWTH) {
            return Vec::new();
        }
        self.checked_bdp = bdp;
        sysctls.problems(bdp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(throughput: u64, base_rtt_us: u32) -> Measurement {
        let limit = LinkLimit::Link;
        Measurement {
            throughput,
            rtt_us: base_rtt_us,
            base_rtt_us,
            ..crate::link::measurement::test_measurement(limit)
        }
    }

    #[test]
    fn a_slow_path_is_measured_against_the_expected_bandwidth() {
        let expected = Expected::new(None, Some(100_000_000));
        let words = expected.words(&link(3_000_000, 20_000));
        assert!(words.contains("24% of the 12.5 MB/s expected (link.expected_bandwidth)"), "{words}");
        assert!(words.contains("path itself is slower"), "{words}");
        // Within half of it: nothing to say.
        assert_eq!(expected.words(&link(10_000_000, 20_000)), "");
        assert_eq!(Expected::default().words(&link(3_000_000, 20_000)), "");
    }

    #[test]
    fn a_base_rtt_far_from_the_expected_one_is_named() {
        let expected = Expected::new(Some(std::time::Duration::from_millis(20)), None);
        assert!(expected.words(&link(1, 45_000)).contains("2.2× the 20.00 ms expected"));
        assert!(expected.words(&link(1, 5_000)).contains("below the 20.00 ms expected"));
        assert_eq!(expected.words(&link(1, 22_000)), "");
    }

    #[test]
    fn host_ceilings_are_checked_again_only_for_a_much_bigger_path() {
        let sysctls = Sysctls { tcp_rmem: Some([4096, 131_072, 200_000]), ..Sysctls::default() };
        let mut check = HostCheck::default();
        assert_eq!(check.check(&sysctls, 250_000).len(), 1);
        assert!(check.check(&sysctls, 300_000).is_empty(), "said already for a path about this size");
        assert_eq!(check.check(&sysctls, 600_000).len(), 1);
        assert!(HostCheck::default().check(&sysctls, 50_000).is_empty(), "2 × 50 kB fits under 200 kB");
    }
}
