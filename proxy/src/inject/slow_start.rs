//! TCP's slow start on one direction of the emulated link. A real long hop does not carry a
//! large result at the pace the proxy's buffer allows: the sender starts from ten segments
//! (`initcwnd`) and grows its window by every byte acknowledged, doubling it each round trip
//! — 11 round trips before 40 MB have left, whatever the bandwidth. The what-if projections
//! charge exactly that ([`CommandRecord::slow_start_rounds`]), so the link they are checked
//! against must do it too.
//!
//! The window is a rule on departures, as `window` is: with `c` the window the burst started
//! from and `x` the bytes sent since, the byte at `x` may leave once the byte at `(x − c) / 2`
//! has been acknowledged, one round trip after it left. Acknowledged bytes open the window
//! byte for byte, so round `k` carries `c · 2^k`, and the rounds end at `c · (2^(k+1) − 1)`:
//! pieces are cut there, so that the rule holds at every round's end exactly.
//!
//! The window grows only while it limits the sender, as Linux's does (it grows on an ACK only
//! while less than twice the largest flight): a burst — the bytes sent until the pipe drains,
//! a response — that the window held back leaves the window larger by what it carried; a
//! burst the window did not hold back (a query, a small result) leaves it as it was. After
//! the link sat idle a retransmission timeout (RTT + 200 ms), the window restarts (Linux's
//! `tcp_slow_start_after_idle`): halved for each timeout that passed, never below the initial
//! window. Once the window holds the whole pipe (bandwidth × RTT) it no longer binds and slow
//! start is over; without a bandwidth it grows to [`OPEN_WINDOW`].
//!
//! [`CommandRecord::slow_start_rounds`]: crate::record::CommandRecord::slow_start_rounds

use std::time::Duration;

use super::delay::OneWayModel;
use super::loss::{MSS, RTO_MIN};

/// Linux's initial window: ten segments. The record's slow-start rounds and the what-if
/// projections count from this one too, so that they agree with what is emulated.
pub const INITIAL_WINDOW: u64 = 10 * MSS;
/// Without a bandwidth, the window stops growing here: far more than a result needs per
/// round trip.
const OPEN_WINDOW: u64 = 64 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No round trip to grow over: nothing to emulate.
    Off,
    /// Growing from `initial` bytes, which the burst starting at stream offset `base` began with.
    Growing { base: u64, initial: u64 },
    /// The window holds the pipe: it no longer binds.
    Open,
}

/// One direction's congestion window while it grows.
#[derive(Clone, Copy, Debug)]
pub struct SlowStart {
    phase: Phase,
    rtt: Duration,
    /// Where the window stops binding.
    open: u64,
}

impl SlowStart {
    /// A fresh connection's window, for a stream that has carried `offset` bytes.
    pub fn new(model: &OneWayModel, offset: u64) -> SlowStart {
        let mut start = SlowStart { phase: Phase::Off, rtt: model.rtt, open: OPEN_WINDOW };
        start.set_model(model, offset);
        start
    }

    /// A new link from stream offset `offset` on: a window already growing keeps what it grew
    /// to, up to the new pipe; one that was off (no round trip before) starts from ten segments.
    pub fn set_model(&mut self, model: &OneWayModel, offset: u64) {
        self.rtt = model.rtt;
        self.open = model.pipe_window().unwrap_or(OPEN_WINDOW).min(OPEN_WINDOW);
        self.phase = match self.phase {
            _ if model.rtt.is_zero() => Phase::Off,
            Phase::Off => self.growing(offset, INITIAL_WINDOW),
            phase => phase,
        };
    }

    /// Whether the window may still hold bytes back (so departures must be remembered).
    pub fn binds(&self) -> bool {
        matches!(self.phase, Phase::Growing { .. })
    }

    /// Where the burst the window is growing over began: no byte before it is waited for.
    pub fn burst_start(&self) -> Option<u64> {
        match self.phase {
            Phase::Growing { base, .. } => Some(base),
            _ => None,
        }
    }

    fn growing(&self, base: u64, initial: u64) -> Phase {
        if initial >= self.open { Phase::Open } else { Phase::Growing { base, initial } }
    }

    /// The bytes from stream offset `offset` on come `idle` after the last ones left. Once a
    /// round trip has passed every byte sent has been acknowledged: the burst is over, and
    /// the next starts from the window it left; after a retransmission timeout that window is
    /// halved for each timeout that passed.
    pub fn before_bytes(&mut self, idle: Duration, offset: u64) {
        if self.phase == Phase::Off || idle < self.rtt {
            return;
        }
        let window = match self.phase {
            // Each acknowledged byte opened the window by one, if the window held the burst
            // back at all.
            Phase::Growing { base, initial } => {
                let sent = offset.saturating_sub(base);
                if sent > initial { initial.saturating_add(sent) } else { initial }
            }
            _ => self.open,
        };
        let rto = self.rtt.saturating_add(RTO_MIN);
        let timeouts = idle.as_nanos() / rto.as_nanos().max(1);
        let halved = window.checked_shr(u32::try_from(timeouts).unwrap_or(u32::MAX)).unwrap_or(0);
        self.phase = self.growing(offset, halved.max(INITIAL_WINDOW));
    }

    /// The stream offset that must have been acknowledged before the byte ending at `end` may
    /// leave, if the window holds it back; ends slow start once the window holds the pipe.
    pub fn acknowledged_before(&mut self, end: u64) -> Option<u64> {
        let Phase::Growing { base, initial } = self.phase else { return None };
        let sent = end.saturating_sub(base);
        if sent.saturating_add(initial) / 2 >= self.open {
            self.phase = Phase::Open;
            return None;
        }
        (sent > initial).then(|| base.saturating_add((sent - initial) / 2))
    }

    /// Where the round holding stream offset `offset` ends, if the window is growing: the
    /// next piece stops there.
    pub fn round_end(&self, offset: u64) -> Option<u64> {
        let Phase::Growing { base, initial } = self.phase else { return None };
        let rounds = (offset.saturating_sub(base) / initial).saturating_add(1).ilog2();
        let carried = initial.saturating_mul(2u64.saturating_pow(rounds.saturating_add(1)).saturating_sub(1));
        Some(base.saturating_add(carried))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(rtt_ms: u64, bytes_per_second: Option<u64>) -> OneWayModel {
        OneWayModel {
            delay: Duration::from_millis(rtt_ms / 2),
            rtt: Duration::from_millis(rtt_ms),
            bytes_per_second,
            ..OneWayModel::default()
        }
    }

    #[test]
    fn rounds_double_from_ten_segments() {
        let mut start = SlowStart::new(&model(20, None), 0);
        let w = INITIAL_WINDOW;
        assert_eq!([0, w - 1, w, 3 * w - 1, 3 * w].map(|o| start.round_end(o)), [w, w, 3 * w, 3 * w, 7 * w].map(Some));
        // The first window goes at once; the end of round 1 waits for round 0's end.
        assert_eq!(start.acknowledged_before(w), None);
        assert_eq!(start.acknowledged_before(3 * w), Some(w));
        assert_eq!(start.acknowledged_before(7 * w), Some(3 * w));
    }

    #[test]
    fn the_window_stops_binding_once_it_holds_the_pipe() {
        // 20 ms at 2.5 MB/s: a 50 KB pipe.
        let mut start = SlowStart::new(&model(20, Some(2_500_000)), 0);
        assert!(start.binds());
        assert_eq!(start.acknowledged_before(2 * INITIAL_WINDOW), Some(INITIAL_WINDOW / 2));
        assert_eq!(start.acknowledged_before(7 * INITIAL_WINDOW), None);
        assert!(!start.binds());
        // Nothing to grow over without a round trip, until the link gets one.
        let mut start = SlowStart::new(&model(0, None), 0);
        assert!(!start.binds());
        start.set_model(&model(40, None), 5_000);
        assert_eq!(start.round_end(5_000), Some(5_000 + INITIAL_WINDOW));
    }

    #[test]
    fn a_burst_the_window_held_back_opens_it_for_the_next() {
        let mut start = SlowStart::new(&model(20, None), 0);
        let sent = 100 * INITIAL_WINDOW;
        start.before_bytes(Duration::from_millis(19), sent);
        assert_eq!(start.round_end(sent), Some(127 * INITIAL_WINDOW), "within a round trip: the same burst");
        // Everything acknowledged: the next burst starts from the 101 windows they opened.
        start.before_bytes(Duration::from_millis(20), sent);
        assert_eq!(start.round_end(sent), Some(sent + 101 * INITIAL_WINDOW));
    }

    #[test]
    fn bursts_the_window_did_not_hold_back_leave_it_as_it_was() {
        let mut start = SlowStart::new(&model(20, None), 0);
        for query in 1..1_000 {
            start.before_bytes(Duration::from_millis(25), query * 100);
        }
        assert_eq!(start.round_end(99_900), Some(99_900 + INITIAL_WINDOW));
        assert_eq!(start.burst_start(), Some(99_900));
    }

    #[test]
    fn an_idle_link_restarts_from_a_halved_window() {
        let mut start = SlowStart::new(&model(20, None), 0);
        let sent = 100 * INITIAL_WINDOW;
        start.before_bytes(Duration::from_millis(219), sent);
        assert_eq!(start.round_end(sent), Some(sent + 101 * INITIAL_WINDOW), "shorter than a timeout: kept");
        // One timeout: half of it.
        start.before_bytes(Duration::from_millis(220), sent);
        assert_eq!(start.round_end(sent), Some(sent + 101 * INITIAL_WINDOW / 2));
        // Many: back to the initial window.
        start.before_bytes(Duration::from_secs(60), sent);
        assert_eq!(start.round_end(sent), Some(sent + INITIAL_WINDOW));
    }
}
