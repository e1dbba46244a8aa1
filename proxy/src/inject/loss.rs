//! What a lossy long hop does to the bytes above TCP, for one direction: which segments
//! are lost, how long the bytes behind each loss wait for its repair, and the window a
//! loss-based sender (Reno, CUBIC) keeps at that loss rate.
//!
//! The application never sees a lost segment, only its cost: TCP delivers in order, so a
//! hole holds everything after it until the retransmission arrives. How long depends on
//! what follows the hole in the same flight, as in Linux (RACK-TLP):
//!
//! - three or more segments after it: their SACKs start a fast retransmit, repaired one
//!   RTT after the segment would have arrived;
//! - one or two: RACK waits a quarter of the RTT more for reordering (`min_rtt/4`);
//! - none, with other data in flight: a tail loss probe after two RTTs (+2 ms, the
//!   kernel's two-jiffy minimum);
//! - a segment alone in flight (a query, a one-segment result): the probe is clamped to the
//!   retransmission timeout, RTT + 200 ms (`TCP_RTO_MIN`; the variance term is far smaller
//!   on a steady path).
//!
//! Whether data follows is known only once it arrives, so a loss near the end of a read is
//! first charged the probe or the timeout, then lowered to the fast repair if the next read
//! comes soon enough ([`Losses::follow_up`]).
//!
//! Stalls alone do not slow a bulk transfer: the bytes behind a stall go out together once
//! it ends. What does is the sender halving its window at every loss; on average it keeps
//! `MSS × √(3/2) / √p` bytes in flight (Mathis et al. 1997), which [`loss_window`] gives.

use std::time::Duration;

/// Bytes per segment: Ethernet's 1500 less IP, TCP and timestamp-option headers, what
/// Linux sends on a typical long hop.
pub const MSS: u64 = 1448;
/// Linux's minimum retransmission timeout (`TCP_RTO_MIN`).
pub(super) const RTO_MIN: Duration = Duration::from_millis(200);
/// Linux adds two jiffies to a tail loss probe (`TCP_TIMEOUT_MIN`); 2 ms at HZ=1000.
const PROBE_SLACK: Duration = Duration::from_millis(2);
/// Losses up to this many segments before the end of a read may still become a fast
/// retransmit when the next read follows.
const DUPTHRESH: u64 = 3;

/// The average window of a loss-based sender at `loss_ppm`, in bytes (Mathis et al.: the
/// saw-tooth between W/2 and W averages `MSS·√(3/(2p))`); `None` without loss.
pub fn loss_window(loss_ppm: u32) -> Option<u64> {
    if loss_ppm == 0 {
        return None;
    }
    let p = f64::from(loss_ppm) / 1e6;
    Some(((MSS as f64) * (1.5 / p).sqrt()) as u64)
}

/// How long the bytes behind a lost segment wait, beyond its own delay, for `followers`
/// segments after it in its flight, on a path of round trip `rtt`; `alone` when it was the
/// only segment in flight.
pub fn stall(followers: u64, alone: bool, rtt: Duration) -> Duration {
    match followers {
        0 if alone => rtt.saturating_add(RTO_MIN),
        0 => rtt.saturating_mul(2).saturating_add(PROBE_SLACK),
        f if f < DUPTHRESH => rtt.saturating_add(rtt / 4),
        _ => rtt,
    }
}

/// A loss near the end of the last read, charged a probe or a timeout for now.
#[derive(Clone, Copy, Debug)]
pub struct Tail {
    /// Stream offset where the lost segment starts: bytes from here on are held.
    pub from: u64,
    /// Segments after it known so far.
    pub followers: u64,
    /// When it left, and the stall it was charged.
    pub departed: std::time::Instant,
    /// The stall it was charged: a tail loss probe or a retransmission timeout.
    pub charged: Duration,
    /// Its release without the loss, and the release of the bytes ahead of it.
    pub natural: std::time::Instant,
    /// Release time of the bytes ahead of it: a faster repair never releases before this.
    pub floor: std::time::Instant,
}

/// One direction's loss draws: which segments are lost, reproducibly per seed. Segments
/// are counted per read, as a sender cuts each write into segments of at most [`MSS`].
#[derive(Debug)]
pub struct Losses {
    /// Probability a segment is lost.
    p: f64,
    /// Segments to pass before the next lost one (`u64::MAX`: none).
    countdown: u64,
    rng: u64,
    /// The latest loss that may still turn out to have followers.
    pub tail: Option<Tail>,
}

impl Losses {
    /// Losses at `loss_ppm`.
    pub fn new(loss_ppm: u32, seed: u64) -> Losses {
        let mut losses =
            Losses { p: 0.0, countdown: u64::MAX, rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, tail: None };
        losses.set_rate(loss_ppm);
        losses
    }

    /// A new rate from the next segment on.
    pub fn set_rate(&mut self, loss_ppm: u32) {
        self.p = (f64::from(loss_ppm) / 1e6).clamp(0.0, 0.5);
        self.draw();
    }

    /// Of the segments of a read starting at stream offset `read_start` whose first byte
    /// lies in `[start, end)`, the first lost one's start, if any. Each segment is judged
    /// once: the next call must start past what this one covered (past the lost segment's
    /// start when one was returned).
    pub fn lost_in(&mut self, read_start: u64, start: u64, end: u64) -> Option<u64> {
        let first = start.saturating_sub(read_start).div_ceil(MSS);
        let past = end.saturating_sub(read_start).div_ceil(MSS);
        let segments = past.saturating_sub(first);
        if self.countdown >= segments {
            self.countdown = self.countdown.saturating_sub(segments);
            return None;
        }
        let lost = read_start.saturating_add(first.saturating_add(self.countdown).saturating_mul(MSS));
        self.draw();
        Some(lost)
    }

    /// Draws the segments to pass before the next loss: geometric, one draw per loss
    /// rather than one per segment.
    fn draw(&mut self) {
        if self.p <= 0.0 {
            self.countdown = u64::MAX;
            return;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        // Uniform in (0, 1]: never ln(0).
        let u = ((self.rng >> 11) + 1) as f64 / (1u64 << 53) as f64;
        let gap = (u.ln() / (1.0 - self.p).ln()).floor();
        // Saturates: a gap past the end of any stream is no loss.
        self.countdown = if gap.is_finite() && gap >= 0.0 { gap as u64 } else { u64::MAX };
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::inject::{DelayLine, OneWayModel};

    #[test]
    fn the_window_is_the_mathis_bound() {
        assert_eq!(loss_window(0), None);
        // 1 %: √150 ≈ 12.2 segments; at 20 ms that is 884 KB/s, the bound the link verdicts quote.
        assert_eq!(loss_window(10_000), Some(17_734));
        assert_eq!(loss_window(500_000), Some(2_508));
    }

    #[test]
    fn stalls_follow_what_comes_after_the_hole() {
        let rtt = Duration::from_millis(20);
        assert_eq!(stall(10, false, rtt), rtt);
        assert_eq!(stall(3, false, rtt), rtt);
        assert_eq!(stall(2, false, rtt), Duration::from_millis(25));
        assert_eq!(stall(0, false, rtt), Duration::from_millis(42));
        assert_eq!(stall(0, true, rtt), Duration::from_millis(220));
        assert_eq!(stall(0, true, Duration::MAX), Duration::MAX);
    }

    #[test]
    fn draws_lose_about_the_rate_and_repeat_per_seed() {
        let count = |seed| {
            let mut losses = Losses::new(10_000, seed);
            let mut lost = Vec::new();
            let mut read = 0;
            // 100,000 segments, read 100 at a time.
            while read < 100_000 * MSS {
                let (mut at, end) = (read, read + 100 * MSS);
                while let Some(l) = losses.lost_in(read, at, end) {
                    assert!((l - read) % MSS == 0 && l >= at && l < end, "{l} outside [{at}, {end})");
                    lost.push(l);
                    at = l + 1;
                }
                read = end;
            }
            lost
        };
        let a = count(7);
        assert!((900..=1100).contains(&a.len()), "{} of 100,000 lost at 1 %", a.len());
        assert!(a.windows(2).all(|w| w[0] < w[1]), "each segment lost at most once, in order");
        assert_eq!(a, count(7));
        assert_ne!(a, count(8));
        assert_eq!(Losses::new(0, 1).lost_in(0, 0, u64::MAX), None);
        // Small reads are a segment each, however few bytes they carry.
        let mut losses = Losses::new(500_000, 3);
        let lost = (0..1000u64).filter(|i| losses.lost_in(i * 100, i * 100, i * 100 + 100).is_some()).count();
        assert!((400..=600).contains(&lost), "{lost} of 1,000 one-segment reads lost at 50 %");
    }

    fn lossy(loss_ppm: u32) -> OneWayModel {
        OneWayModel {
            delay: Duration::from_millis(10),
            rtt: Duration::from_millis(20),
            loss_ppm,
            ..OneWayModel::default()
        }
    }

    #[test]
    fn a_lost_lone_segment_waits_for_the_timeout() {
        let t0 = Instant::now();
        // Half the segments lost: queries a second apart, each one segment alone in flight.
        let mut line = DelayLine::new(lossy(500_000), 0, 3);
        let mut held = [0, 0];
        for i in 0..200 {
            let now = t0 + Duration::from_secs(i);
            let release = line.schedule(now, 100);
            match release - now {
                d if d == Duration::from_millis(10) => held[0] += 1,
                // RTT + TCP_RTO_MIN after the segment would have arrived.
                d if d == Duration::from_millis(230) => held[1] += 1,
                d => panic!("held {d:?}"),
            }
        }
        assert!(held[1] >= 70 && held[1] <= 130, "{held:?}");
    }

    /// A line at 2 % loss (a window of 12,540 bytes) whose first read of `segments` lost
    /// the segment `lost`, the seed found by search; and that read's last release.
    /// The next read's first three segments are not lost.
    fn line_losing(segments: u64, lost: u64) -> (DelayLine, Instant, Instant) {
        let t0 = Instant::now();
        (1..100_000u64)
            .find_map(|seed| {
                let mut losses = Losses::new(20_000, seed);
                let end = segments * MSS;
                (losses.lost_in(0, 0, end) == Some(lost * MSS)
                    && losses.lost_in(0, lost * MSS + 1, end).is_none()
                    && losses.lost_in(end, end, end + 3 * MSS).is_none())
                .then(|| {
                    let mut line = DelayLine::new(lossy(20_000), 0, seed);
                    let end = line.schedule(t0, (segments * MSS) as usize);
                    (line, t0, end)
                })
            })
            .expect("a seed that loses just that segment")
    }

    #[test]
    fn a_hole_holds_what_follows_it_for_one_round_trip() {
        // Eight segments, the fourth lost: four follow it, their SACKs start a fast retransmit.
        let (mut line, t0, end) = line_losing(8, 3);
        let on_time = t0 + Duration::from_millis(10);
        let marks: Vec<(u64, Instant)> = line.marks().collect();
        assert_eq!(marks, [(3 * MSS, on_time), (8 * MSS, on_time + Duration::from_millis(20))]);
        assert_eq!(end, on_time + Duration::from_millis(20));
        assert_eq!(line.released_by(on_time), 3 * MSS, "the bytes ahead of the hole go on time");
        // Two after it: RACK waits a quarter RTT more.
        let (_, t0, end) = line_losing(8, 5);
        assert_eq!(end, t0 + Duration::from_millis(10 + 25));
    }

    #[test]
    fn a_hole_at_the_end_of_a_read_is_repaired_by_what_follows() {
        // The last of five segments lost, nothing after it yet: charged a tail loss probe.
        let (mut line, t0, end) = line_losing(5, 4);
        assert_eq!(end, t0 + Duration::from_millis(10 + 42));
        // The next read comes 1 ms later: its SACKs start a fast retransmit instead,
        // an RTT after they left.
        let next = line.schedule(t0 + Duration::from_millis(1), (3 * MSS) as usize);
        let lowered = line.marks().find(|&(e, _)| e == 5 * MSS).map(|(_, at)| at);
        assert_eq!(lowered, Some(t0 + Duration::from_millis(10 + 1 + 20)));
        assert_eq!(next, t0 + Duration::from_millis(31), "the bytes behind it wait for it, in order");
    }

    #[test]
    fn loss_caps_a_bulk_transfer_at_the_mathis_bound() {
        let t0 = Instant::now();
        let mut line = DelayLine::new(lossy(10_000), 0, 9);
        // 4 MB at 1 % loss and 20 ms: 17,734 bytes per round trip, ≈ 4.5 s.
        let mut last = t0;
        let reads = 4_000_000 / 65_536;
        for _ in 0..reads {
            last = line.schedule(t0, 65_536);
        }
        let took = (last - t0).as_secs_f64();
        let bound = (reads * 65_536) as f64 / 17_734.0 * 0.020;
        assert!((took - bound).abs() < 0.02 * bound, "{took} s for a bound of {bound} s");
    }
}
