//! What-if projection: what a recorded pattern would cost over another link.
//!
//! The base is the time the pattern took minus what the link added: the real path's round
//! trips (the kernel's base RTT each) and whatever an emulated link held the bytes for. What
//! remains — the server's work, rttscope's, and the application's own time between the
//! statements — another link leaves as it is. Over the target link every round trip pays its
//! RTT and every byte its bandwidth, on top of that base. A pattern recorded over an emulated
//! link is also projected onto that link, so the report shows the model beside what really
//! happened there.

use rttscope_config::Scenario;
use serde::{Deserialize, Serialize};

use super::Emulated;
use crate::human::{bandwidth, counted, us};

/// One scenario's projection of one measured cost; the report's `findings[].what_if[]` as it
/// is, so these comments are that object's reference text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    /// The scenario's name, from `findings.scenarios`.
    pub scenario: String,
    /// The scenario's round-trip time, µs, charged once per round trip of the pattern.
    pub rtt_us: u64,
    /// The scenario's bandwidth, bits per second, charged for the pattern's wire bytes; `None`:
    /// unlimited.
    pub bandwidth_bps: Option<u64>,
    /// What it took here, µs.
    pub observed_us: u64,
    /// What it took without the link here, µs: what the projection starts from.
    pub base_us: u64,
    /// What it would cost there, µs: the base, plus each round trip at `rtt_us`, plus its bytes
    /// at `bandwidth_bps`.
    pub projected_us: u64,
    /// The projection in a sentence; over an emulated link it says what the projection started from.
    pub summary: String,
}

/// A pattern recorded over an emulated link, projected onto that link: the model checked
/// against what happened. The report's `findings[].emulation` as it is, so these comments are
/// that object's reference text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmulationCheck {
    /// The emulated link's RTT (both directions' delays) when the pattern ran, µs.
    pub rtt_us: u64,
    /// Its bandwidth towards the client, bits per second; `None`: unlimited.
    pub bandwidth_bps: Option<u64>,
    /// The projection onto that link from the pattern's `base_us`, µs: what the model says it
    /// should have cost there.
    pub projected_us: u64,
    /// What the pattern took over it, µs (as `what_if[].observed_us`): how far off the model is.
    pub took_us: u64,
    /// The two in a sentence: `emulated 15.00 ms RTT: projected 465.20 ms, took 468.90 ms`.
    pub summary: String,
}

/// What was measured, to be projected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    /// The time it took here: its wall time (a loop's statements and the application's time
    /// between them), or just its commands' time.
    pub took_us: u64,
    /// Round trips, each of which pays the target RTT.
    pub round_trips: u64,
    /// Bytes on the long hop's wire, both ways, each of which pays the target bandwidth.
    pub bytes: u64,
    /// Base RTT of the real path it was measured on (0 when unknown: the projection then adds
    /// the target RTT on top of what was seen).
    pub observed_rtt_us: u64,
    /// Of `took_us`, what an emulated link added.
    pub injected_us: u64,
}

impl Measured {
    /// The time without the link: minus the emulated link's time and the real path's round
    /// trips. The server's, rttscope's and the application's own time.
    pub fn base_us(&self) -> u64 {
        self.took_us
            .saturating_sub(self.injected_us)
            .saturating_sub(self.round_trips.saturating_mul(self.observed_rtt_us))
    }
}

/// Projected time over a link of `rtt_us` and `bandwidth_bps`.
pub fn project(m: Measured, rtt_us: u64, bandwidth_bps: Option<u64>) -> u64 {
    let transfer =
        bandwidth_bps.filter(|&bw| bw > 0).map_or(0, |bw| (m.bytes as u128 * 8_000_000 / u128::from(bw)) as u64);
    m.base_us().saturating_add(m.round_trips.saturating_mul(rtt_us)).saturating_add(transfer)
}

fn link_words(rtt_us: u64, bandwidth_bps: Option<u64>) -> String {
    match bandwidth_bps {
        Some(bw) => format!("{} RTT and {}", us(rtt_us), bandwidth(bw)),
        None => format!("{} RTT", us(rtt_us)),
    }
}

/// Projections for every configured scenario, each with a sentence like "10,001 round trips:
/// at 15.00 ms RTT (another data centre) this loop takes ≈ 150.00 s (here 5.70 s)". Over an
/// emulated link the sentence says what the projection started from.
pub fn projections(m: Measured, scenarios: &[Scenario], what: &str) -> Vec<Projection> {
    let here = if m.injected_us > 0 {
        format!(
            "here {}, of which the emulated link added {}; projected from the {} without it",
            us(m.took_us),
            us(m.injected_us),
            us(m.took_us.saturating_sub(m.injected_us))
        )
    } else {
        format!("here {}", us(m.took_us))
    };
    scenarios
        .iter()
        .map(|s| {
            let rtt_us = s.rtt.0.as_micros() as u64;
            let bandwidth_bps = s.bandwidth.map(|b| b.bits_per_second());
            let projected_us = project(m, rtt_us, bandwidth_bps);
            Projection {
                scenario: s.name.clone(),
                rtt_us,
                bandwidth_bps,
                observed_us: m.took_us,
                base_us: m.base_us(),
                projected_us,
                summary: format!(
                    "{}: at {} ({}) {what} takes ≈ {} ({here})",
                    counted(m.round_trips, "round trip", "round trips"),
                    link_words(rtt_us, bandwidth_bps),
                    s.name,
                    us(projected_us),
                ),
            }
        })
        .collect()
}

/// The projection onto the emulated link the pattern ran over, beside what it took there.
pub fn check_emulation(m: Measured, link: Emulated) -> EmulationCheck {
    let projected_us = project(m, link.rtt_us, link.bandwidth_bps);
    EmulationCheck {
        rtt_us: link.rtt_us,
        bandwidth_bps: link.bandwidth_bps,
        projected_us,
        took_us: m.took_us,
        summary: format!(
            "emulated {}: projected {}, took {}",
            link_words(link.rtt_us, link.bandwidth_bps),
            us(projected_us),
            us(m.took_us)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(took_us: u64, round_trips: u64, observed_rtt_us: u64, injected_us: u64) -> Measured {
        Measured { took_us, round_trips, bytes: 0, observed_rtt_us, injected_us }
    }

    #[test]
    fn every_round_trip_pays_the_target_rtt() {
        // The background article: 10,001 round trips took 5.7 s on localhost.
        let m = measured(5_700_000, 10_001, 0, 0);
        assert_eq!(project(m, 15_000, None), 5_700_000 + 10_001 * 15_000);
        // An observed RTT is replaced, not added to.
        let m = measured(2_000_000, 100, 10_000, 0);
        assert_eq!(project(m, 30_000, None), 1_000_000 + 3_000_000);
        // 34 Mbit/s: 4.25 MB/s, so 4.25 MB costs one second.
        let m = Measured { bytes: 4_250_000, ..measured(0, 1, 0, 0) };
        assert_eq!(project(m, 0, Some(34_000_000)), 1_000_000);
    }

    #[test]
    fn an_emulated_link_is_taken_out_before_projecting() {
        // 31 round trips over an emulated 15 ms took 588 ms; 465 ms of it the link's, 31 × 50 µs
        // the real path's. At 200 µs it takes the 121.45 ms left plus 31 × 200 µs.
        let m = measured(588_000, 31, 50, 465_000);
        assert_eq!(m.base_us(), 588_000 - 465_000 - 31 * 50);
        assert_eq!(project(m, 200, None), m.base_us() + 31 * 200);
        let scenario = Scenario {
            name: "same rack".into(),
            rtt: rttscope_config::HumanDuration(std::time::Duration::from_micros(200)),
            bandwidth: None,
        };
        let p = &projections(m, &[scenario], "this loop")[0];
        assert_eq!(
            p.summary,
            "31 round trips: at 200 µs RTT (same rack) this loop takes ≈ 127.65 ms (here 588.00 ms, of which the emulated link added 465.00 ms; projected from the 123.00 ms without it)"
        );
        // Onto the link it ran over, the projection gives back what it took when the link
        // added exactly its RTT per round trip.
        let check = check_emulation(m, Emulated { rtt_us: 15_000, bandwidth_bps: None });
        assert_eq!(check.projected_us, m.base_us() + 31 * 15_000);
        assert_eq!(check.took_us, 588_000);
        assert_eq!(check.summary, "emulated 15.00 ms RTT: projected 586.45 ms, took 588.00 ms");
    }
}
