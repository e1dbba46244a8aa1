//! What-if projection: what recorded commands would take over another link.
//!
//! One model for a finding and for the whole recording (`docs/time-model.md`). The base is
//! the commands' own time minus what the link added: the real path's round trips (the
//! kernel's base RTT each) and whatever an emulated link held the bytes for, as measured.
//! What remains — the server's work and rttscope's — another link leaves as it is. Over the
//! target link every round trip pays its RTT on top of that base. Commands that overlapped on
//! several connections overlap there as they did here: the connection-time is scaled by the
//! share of it the wall clock saw. Bytes pay the target bandwidth once, whatever the
//! overlap, as they share the one link; a large response cannot go faster than TCP's slow
//! start lets it either, a round trip for each doubling of the window from the kernel's
//! initial ten segments — what a 40 MB result costs over a long link of any bandwidth — nor
//! than the server produced it here, and the two overlap only as far as the server's send
//! buffer lets it run ahead of the window (`whatif/slow_start.rs`).

mod slow_start;

use rttscope_config::Scenario;
use serde::{Deserialize, Serialize};

use crate::human::{bandwidth, us};
use crate::record::LargeResponses;

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
    /// What its commands took here, µs of wall clock (overlaps counted once).
    pub observed_us: u64,
    /// The same without the link here (the emulated link's measured time and the real path's
    /// round trips taken out), µs of wall clock: what the projection starts from.
    pub base_us: u64,
    /// What its commands would take there, µs of wall clock: the base, plus each round trip
    /// at `rtt_us`, plus its bytes at `bandwidth_bps`.
    pub projected_us: u64,
    /// The projection in a few words: `at 15.00 ms RTT and 34 Mbit/s (another data centre): ≈ 1.42 s`.
    pub summary: String,
}

/// What was measured, to be projected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    /// The commands' request-to-last-byte times summed (connection-time).
    pub commands_us: u64,
    /// The wall time they covered, overlaps counted once (at most `commands_us`).
    pub wall_us: u64,
    /// Round trips, each of which pays the target RTT.
    pub round_trips: u64,
    /// Bytes on the long hop's wire, both ways, each of which pays the target bandwidth.
    pub bytes: u64,
    /// Base RTT of the real path it was measured on (0 when unknown: the projection then adds
    /// the target RTT on top of what was seen).
    pub observed_rtt_us: u64,
    /// Of `commands_us`, what an emulated link added, as measured.
    pub injected_us: u64,
    /// Round trips slow start adds to the responses, and how long they streamed without the
    /// link ([`LargeResponses`]).
    pub large_responses: LargeResponses,
}

impl Measured {
    /// Connection-time without the link: minus the emulated link's time and the real path's
    /// round trips. The server's and rttscope's own time.
    fn base_commands_us(&self) -> u64 {
        self.commands_us
            .saturating_sub(self.injected_us)
            .saturating_sub(self.round_trips.saturating_mul(self.observed_rtt_us))
    }

    /// Connection-time as the wall clock sees it: scaled by how much the commands overlapped.
    fn as_wall(&self, commands_us: u64) -> u64 {
        if self.commands_us == 0 || self.wall_us >= self.commands_us {
            return commands_us;
        }
        (u128::from(commands_us) * u128::from(self.wall_us) / u128::from(self.commands_us)) as u64
    }

    /// The wall time without the link: where projections start.
    pub fn base_us(&self) -> u64 {
        self.as_wall(self.base_commands_us())
    }
}

/// Time `bytes` take at `bandwidth_bps` (none or 0: unlimited).
pub(super) fn transfer_us(bytes: u64, bandwidth_bps: Option<u64>) -> u64 {
    bandwidth_bps.filter(|&bw| bw > 0).map_or(0, |bw| (u128::from(bytes) * 8_000_000 / u128::from(bw)) as u64)
}

/// Projected wall time over a link of `rtt_us` and `bandwidth_bps`: the transfer takes what
/// the bandwidth allows, or what slow start and the large responses' own streaming (the server
/// producing, the client reading) take together, whichever is slower.
pub fn project(m: Measured, rtt_us: u64, bandwidth_bps: Option<u64>) -> u64 {
    let base = m.base_commands_us();
    let streaming = m.large_responses.stream_us.min(base);
    let commands = (base - streaming).saturating_add(m.round_trips.saturating_mul(rtt_us));
    let large = large_responses_us(m.large_responses, streaming, rtt_us, bandwidth_bps);
    let transfer = transfer_us(m.bytes, bandwidth_bps).max(m.as_wall(large));
    m.as_wall(commands).saturating_add(transfer.max(m.as_wall(streaming)))
}

/// The large responses over the target link, connection-time: each replayed as one of their
/// average size and streaming (`streaming_us`, theirs here) through slow start at the server's
/// pace ([`slow_start::response_us`]).
fn large_responses_us(large: LargeResponses, streaming_us: u64, rtt_us: u64, bandwidth_bps: Option<u64>) -> u64 {
    let n = large.responses;
    if n == 0 {
        // Counted before the responses were (a report saved by an older rttscope): slow
        // start's round trips alone.
        return large.rounds.saturating_mul(rtt_us);
    }
    let bytes_per_us = bandwidth_bps.filter(|&bw| bw > 0).map(|bw| bw as f64 / 8e6);
    slow_start::response_us(large.bytes / n, streaming_us / n, rtt_us, bytes_per_us).saturating_mul(n)
}

/// A link in words: `15.00 ms RTT and 34 Mbit/s`.
pub fn link_words(rtt_us: u64, bandwidth_bps: Option<u64>) -> String {
    match bandwidth_bps {
        Some(bw) => format!("{} RTT and {}", us(rtt_us), bandwidth(bw)),
        None => format!("{} RTT", us(rtt_us)),
    }
}

/// Projections for every configured scenario.
pub fn projections(m: Measured, scenarios: &[Scenario]) -> Vec<Projection> {
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
                observed_us: m.wall_us,
                base_us: m.base_us(),
                projected_us,
                summary: format!("at {} ({}): ≈ {}", link_words(rtt_us, bandwidth_bps), s.name, us(projected_us)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(commands_us: u64, round_trips: u64, observed_rtt_us: u64, injected_us: u64) -> Measured {
        Measured {
            commands_us,
            wall_us: commands_us,
            round_trips,
            bytes: 0,
            observed_rtt_us,
            injected_us,
            large_responses: LargeResponses::default(),
        }
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
        let p = &projections(m, &[scenario])[0];
        assert_eq!(p.summary, "at 200 µs RTT (same rack): ≈ 127.65 ms");
        assert_eq!((p.observed_us, p.base_us), (588_000, 121_450));
    }

    #[test]
    fn overlapping_commands_overlap_over_the_target_link_too() {
        // 200 lookups over a pool of 4, 15 ms each, all four busy at once: 3 s of
        // connection-time in 750 ms of wall clock. At 80 ms each connection's 50 take 4 s.
        let m = Measured {
            commands_us: 3_000_000,
            wall_us: 750_000,
            round_trips: 200,
            bytes: 0,
            observed_rtt_us: 0,
            injected_us: 3_000_000,
            large_responses: LargeResponses::default(),
        };
        assert_eq!(m.base_us(), 0);
        assert_eq!(project(m, 80_000, None), 4_000_000);
        // Bytes share the one link: 4.25 MB at 34 Mbit/s is a second, overlap or not.
        let m = Measured { bytes: 4_250_000, ..m };
        assert_eq!(project(m, 80_000, Some(34_000_000)), 5_000_000);
    }

    #[test]
    fn a_large_result_pays_slow_start_where_the_bandwidth_would_not_hold_it() {
        // 40 MB, read in 270 ms here, 250 ms of it streaming: at 80 ms over a link of no limit,
        // eleven more round trips (and at most one more while the server waits on a full
        // send buffer); at 34 Mbit/s, slow start's ramp to the pipe, then the bandwidth's.
        let large_responses = LargeResponses { rounds: 11, stream_us: 250_000, responses: 1, bytes: 40_000_000 };
        let m = Measured { bytes: 40_000_000, large_responses, ..measured(270_000, 1, 0, 0) };
        let far = project(m, 80_000, None) - 20_000 - 80_000;
        assert!((11 * 80_000..12 * 80_000).contains(&far), "{far}");
        // At 34 Mbit/s the window reaches the pipe (340 KB) in five round trips, carrying 31
        // initial windows meanwhile; the rest goes at the bandwidth.
        let ramp = 5 * 80_000 + (40_000_000 - 31 * 14_480) * 8 / 34;
        assert_eq!(project(m, 80_000, Some(34_000_000)), 20_000 + 80_000 + ramp);
        // At 1 ms the window outruns the server within a few round trips: its streaming.
        assert_eq!(project(m, 1_000, None), 20_000 + 1_000 + 250_000, "the streaming outlasts slow start");
    }

    #[test]
    fn a_server_that_outruns_the_window_waits_for_it() {
        // The what-if benchmark's 40 MB read, streamed in 80 ms of an 88 ms base: at 5 ms the
        // server fills its send buffer while the window is still opening and waits for it, so
        // the read takes longer than its streaming or slow start's eleven round trips (55 ms)
        // — measured over the emulated link, about 20 ms longer.
        let large_responses = LargeResponses { rounds: 11, stream_us: 80_000, responses: 1, bytes: 40_000_000 };
        let m = Measured { bytes: 40_000_000, large_responses, ..measured(88_000, 1, 0, 0) };
        let transfer = project(m, 5_000, None) - 8_000 - 5_000;
        assert!((95_000..=110_000).contains(&transfer), "{transfer}");
        // Two such reads take twice as long as one.
        let two = LargeResponses { rounds: 22, stream_us: 160_000, responses: 2, bytes: 80_000_000 };
        let m2 = Measured { bytes: 80_000_000, large_responses: two, ..measured(176_000, 2, 0, 0) };
        assert_eq!(project(m2, 5_000, None) - 16_000 - 10_000, 2 * transfer);
    }
}
