//! What-if projection: what a recorded pattern would cost over another
//! link. Every round trip pays the target RTT instead of the observed one,
//! and every byte pays the target bandwidth.

use rttscope_config::Scenario;
use serde::Serialize;

use crate::report::fmt::{count, us};

/// One scenario's projection of one measured cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Projection {
    pub scenario: String,
    pub rtt_us: u64,
    pub bandwidth_bps: Option<u64>,
    pub observed_us: u64,
    pub projected_us: u64,
    pub summary: String,
}

/// What was measured, to be projected.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    /// Elapsed time here.
    pub elapsed_us: u64,
    pub round_trips: u64,
    pub bytes: u64,
    /// RTT of the path it was measured on (0 when unknown: the projection
    /// then adds the target RTT on top of what was seen).
    pub observed_rtt_us: u64,
}

/// Projected elapsed time over a link of `rtt_us` and `bandwidth_bps`.
pub fn project(m: Measured, rtt_us: u64, bandwidth_bps: Option<u64>) -> u64 {
    let without_rtt = m.elapsed_us.saturating_sub(m.round_trips.saturating_mul(m.observed_rtt_us));
    let transfer = bandwidth_bps.filter(|&bw| bw > 0).map_or(0, |bw| (m.bytes as u128 * 8_000_000 / u128::from(bw)) as u64);
    without_rtt.saturating_add(m.round_trips.saturating_mul(rtt_us)).saturating_add(transfer)
}

/// Projections for every configured scenario, each with a sentence like
/// "10,001 round trips: at 15 ms RTT this loop takes ≈ 150 s (here 5.7 s)".
pub fn projections(m: Measured, scenarios: &[Scenario], what: &str) -> Vec<Projection> {
    scenarios
        .iter()
        .map(|s| {
            let rtt_us = s.rtt.0.as_micros() as u64;
            let bandwidth_bps = s.bandwidth.map(|b| b.bits_per_second());
            let projected_us = project(m, rtt_us, bandwidth_bps);
            let link = match bandwidth_bps {
                Some(bw) => format!("{} RTT and {}", us(rtt_us), bandwidth(bw)),
                None => format!("{} RTT", us(rtt_us)),
            };
            Projection {
                scenario: s.name.clone(),
                rtt_us,
                bandwidth_bps,
                observed_us: m.elapsed_us,
                projected_us,
                summary: format!(
                    "{} round trips: at {link} ({}) {what} takes ≈ {} (here {})",
                    count(m.round_trips),
                    s.name,
                    us(projected_us),
                    us(m.elapsed_us)
                ),
            }
        })
        .collect()
}

fn bandwidth(bps: u64) -> String {
    if bps >= 1_000_000 { format!("{} Mbit/s", bps / 1_000_000) } else { format!("{} kbit/s", bps / 1000) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_trip_pays_the_target_rtt() {
        // The background article: 10,001 round trips took 5.7 s on localhost.
        let m = Measured { elapsed_us: 5_700_000, round_trips: 10_001, bytes: 0, observed_rtt_us: 0 };
        assert_eq!(project(m, 15_000, None), 5_700_000 + 10_001 * 15_000);
        // An observed RTT is replaced, not added to.
        let m = Measured { elapsed_us: 2_000_000, round_trips: 100, bytes: 0, observed_rtt_us: 10_000 };
        assert_eq!(project(m, 30_000, None), 1_000_000 + 3_000_000);
        // 34 Mbit/s: 4.25 MB/s, so 4.25 MB costs one second.
        let m = Measured { elapsed_us: 0, round_trips: 1, bytes: 4_250_000, observed_rtt_us: 0 };
        assert_eq!(project(m, 0, Some(34_000_000)), 1_000_000);
    }
}
