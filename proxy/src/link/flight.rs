//! What a recovery did to the sender's flight, as the receiver sees it. A loss-based sender
//! (Reno, CUBIC) cuts its window when it repairs a loss: the round trip after the recovery
//! delivers about half (Reno) or 70 % (CUBIC) of the round trip before it. A sender the path
//! held — a capped line's queue dropping what overflowed, BBR pacing through random loss —
//! delivers as much after as before, however its window moved: the line, not the window, set
//! the pace. A sender that only its own buffer held has no loss to recover from. So a
//! transfer whose recoveries mostly cut the flight was paced by loss, whatever its rate says
//! against the Mathis bound (a formula for an average sender on an average path).

/// Reads kept to look back from: spaced at least [`SPACING`] of a round trip apart, they
/// reach more than two round trips back.
const KEPT: usize = 32;
/// Reads closer than this share of a round trip to the last one kept are merged into it.
const SPACING: u64 = 12;
/// A round trip that delivered at most this share of the one before the loss was cut: Reno
/// halves its window, CUBIC keeps 70 %, and the round trip after grows a segment or so; a
/// path-bound sender delivers about the same.
const CUT: f64 = 0.75;
/// Round trips that delivered less than this many bytes are too short to compare.
const LEAST_BYTES: u64 = 4 * 1448;

/// The reads of one transfer, and what its recoveries did to the round trip after them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flight {
    /// (µs, bytes delivered by then) of the kept reads, a ring: `len` of them ending at `head`.
    kept: [(u64, u64); KEPT],
    head: usize,
    len: usize,
    /// When the newest kept read started its slot: later reads within the spacing merge into it.
    slot_start_us: u64,
    delivered: u64,
    /// A recovery whose round trip after is still to come: when it ended, µs, and what the
    /// round trip before it delivered.
    pending: Option<(u64, u64)>,
    /// When the latest stall ended: a round trip just after one is no steady one to compare.
    last_stall_end_us: u64,
    last_read_us: u64,
    /// Whether a recovery has ended the transfer's slow start (see [`stall`](Self::stall)).
    slow_start_over: bool,
    /// Recoveries whose round trips before and after were both measured, and of them those
    /// that cut what the sender delivered.
    pub timed: u32,
    pub cut: u32,
}

impl Flight {
    /// `bytes` read at `now_us` on a path of base RTT `rtt_us`.
    pub fn read(&mut self, now_us: u64, bytes: u64, rtt_us: u64) {
        let silent_since = std::mem::replace(&mut self.last_read_us, now_us);
        self.delivered += bytes;
        if self.len > 0 && now_us < self.slot_start_us + rtt_us / SPACING {
            self.kept[self.head] = (now_us, self.delivered);
        } else {
            self.head = (self.head + 1) % KEPT;
            self.len = (self.len + 1).min(KEPT);
            self.kept[self.head] = (now_us, self.delivered);
            self.slot_start_us = now_us;
        }
        self.judge_pending(now_us, silent_since, rtt_us);
    }

    /// A stall from `start_us` to `end_us` that `began_episode` or not (a hole of a window
    /// already being repaired): the round trip before a new episode is kept to compare with
    /// the one a round trip after it ends.
    pub fn stall(&mut self, start_us: u64, end_us: u64, began_episode: bool, rtt_us: u64) {
        let steady_before = self.last_stall_end_us + rtt_us <= start_us.saturating_sub(rtt_us);
        self.last_stall_end_us = end_us;
        // A later hole of the same window moves the round trip after on; a new loss before
        // it came cuts again, and tells nothing of the first.
        match (began_episode, self.pending) {
            (false, Some((_, before))) => self.pending = Some((end_us, before)),
            _ => self.pending = None,
        }
        // The first loss ends slow start, and its recovery compares nothing: the round trip
        // before its hole was still doubling (and cut short by the hole), the one after carries
        // half the doubled window — as much as before, whatever held the path. Over the
        // emulator the confusion matrix's loss and capped-line cells alike delivered 1.05-2 ×
        // as much in the round trip after it, every later recovery telling them apart.
        let ends_slow_start = began_episode && !std::mem::replace(&mut self.slow_start_over, true);
        if !began_episode || ends_slow_start || !steady_before || rtt_us == 0 {
            return;
        }
        let before = self.between(start_us.saturating_sub(rtt_us), start_us);
        if let Some(before) = before.filter(|&b| b >= LEAST_BYTES) {
            self.pending = Some((end_us, before));
        }
    }

    /// Something other than the path held the transfer (the client, the server, rttscope):
    /// the round trip under way compares nothing.
    pub fn disturbed(&mut self) {
        self.pending = None;
    }

    /// Whether most recoveries timed — two in three — cut what the sender delivered. Over the
    /// emulator (the confusion matrix) a Reno sender under random loss cut after 93-100 % of
    /// those of a transfer; a capped line's queue drops, timed the same way, after 0-5 % where
    /// more than two were timed (a 1 MiB result has one or two to time, and one alone can be
    /// cut: the pipe the capped line keeps full tells it from loss besides).
    pub fn mostly_cut(&self) -> bool {
        self.timed > 0 && 3 * self.cut >= 2 * self.timed
    }

    /// Once a round trip has passed since the round trip after a recovery began, compares it
    /// with the one before.
    fn judge_pending(&mut self, now_us: u64, silent_since_us: u64, rtt_us: u64) {
        let Some((end_us, before)) = self.pending else { return };
        // The round trip after: from one round trip after the hole filled (what the sender
        // sent once it heard) to the next. Judged at the first read past it.
        let (from_us, to_us) = (end_us + rtt_us, end_us + 2 * rtt_us);
        if now_us <= to_us {
            return;
        }
        self.pending = None;
        // Reads that stood still longer than a round trip within it: a stall or a pause (told
        // apart only later) took that round trip, not the sender's window.
        if now_us.saturating_sub(silent_since_us) > rtt_us && silent_since_us < to_us {
            return;
        }
        if let Some(after) = self.between(from_us, to_us) {
            self.timed += 1;
            self.cut += u32::from((after as f64) <= CUT * before as f64);
        }
    }

    /// Bytes delivered from `from_us` to `to_us`, if the kept reads reach back that far.
    fn between(&self, from_us: u64, to_us: u64) -> Option<u64> {
        Some(self.delivered_by(to_us)? - self.delivered_by(from_us)?)
    }

    /// Bytes delivered by `at_us`: the latest kept read at or before it. `None` when every
    /// kept read is later (the ring does not reach back), or none is kept.
    fn delivered_by(&self, at_us: u64) -> Option<u64> {
        let oldest = (self.head + KEPT + 1 - self.len) % KEPT;
        if self.len == 0 || self.kept[oldest].0 > at_us {
            return None;
        }
        (0..self.len).map(|back| self.kept[(self.head + KEPT - back) % KEPT]).find(|&(t, _)| t <= at_us).map(|(_, d)| d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: u64 = 5_000;
    const MSS: u64 = 1448;

    /// `segments` per round trip, in reads a millisecond apart, from `from_us` for `rtts`
    /// round trips; returns when it ended.
    fn deliver(f: &mut Flight, from_us: u64, segments: u64, rtts: u64) -> u64 {
        let per_read = segments * MSS / 5;
        let mut now = from_us;
        for _ in 0..rtts * 5 {
            now += 1_000;
            f.read(now, per_read, RTT);
        }
        now
    }

    /// Ten segments a round trip, then the loss that ends slow start (not timed), then twenty
    /// a round trip for six round trips; returns when those ended.
    fn past_slow_start(f: &mut Flight) -> u64 {
        let at = deliver(f, 0, 10, 6);
        let end = recover(f, at, 10 * MSS);
        deliver(f, end, 20, 6)
    }

    /// A loss at `at_us` stalling the reads for a round trip and a half; returns when the
    /// hole filled (the reads resume there with what queued behind it).
    fn recover(f: &mut Flight, at_us: u64, queued: u64) -> u64 {
        let end = at_us + 3 * RTT / 2;
        f.read(end, queued, RTT);
        f.stall(at_us, end, true, RTT);
        end
    }

    #[test]
    fn a_window_halved_by_recovery_is_cut() {
        let mut f = Flight::default();
        let at = past_slow_start(&mut f);
        let end = recover(&mut f, at, 10 * MSS);
        deliver(&mut f, end, 10, 3);
        assert_eq!((f.timed, f.cut), (1, 1));
        assert!(f.mostly_cut());
    }

    #[test]
    fn a_full_line_delivers_as_much_after_a_drop() {
        let mut f = Flight::default();
        let start = past_slow_start(&mut f);
        let mut at = deliver(&mut f, start, 12, 6);
        for _ in 0..3 {
            let end = recover(&mut f, at, 12 * MSS);
            at = deliver(&mut f, end, 12, 6);
        }
        assert_eq!((f.timed, f.cut), (3, 0));
        assert!(!f.mostly_cut());
    }

    #[test]
    fn a_loss_soon_after_another_compares_nothing() {
        let mut f = Flight::default();
        let at = past_slow_start(&mut f);
        let end = recover(&mut f, at, 10 * MSS);
        // The next loss half a round trip into the round trip after: neither is timed (the
        // first's round trip after never came, the second's before was a recovery's).
        let at = deliver(&mut f, end, 10, 1);
        let end = recover(&mut f, at + RTT / 2, 5 * MSS);
        deliver(&mut f, end, 5, 3);
        assert_eq!(f.timed, 0);
    }

    #[test]
    fn a_later_hole_of_the_same_window_moves_the_round_trip_after_on() {
        let mut f = Flight::default();
        let at = past_slow_start(&mut f);
        let end = recover(&mut f, at, 4 * MSS);
        // A second hole of the window under repair, filled half a round trip later.
        f.read(end + RTT, 4 * MSS, RTT);
        f.stall(end + RTT / 2, end + RTT, false, RTT);
        deliver(&mut f, end + RTT, 10, 3);
        assert_eq!((f.timed, f.cut), (1, 1));
    }

    #[test]
    fn a_silence_in_the_round_trip_after_compares_nothing() {
        let mut f = Flight::default();
        let at = past_slow_start(&mut f);
        let end = recover(&mut f, at, 10 * MSS);
        // Reads stop half-way into the round trip after, for two round trips: the next stall
        // (or a pause) is known only at the sample after the read that ends it.
        let at = deliver(&mut f, end, 20, 1) + RTT / 2;
        f.read(at + 2 * RTT, 20 * MSS, RTT);
        assert_eq!(f.timed, 0);
    }

    #[test]
    fn a_hold_off_in_the_round_trip_after_compares_nothing() {
        let mut f = Flight::default();
        let at = past_slow_start(&mut f);
        let end = recover(&mut f, at, 10 * MSS);
        f.disturbed();
        deliver(&mut f, end, 10, 3);
        assert_eq!(f.timed, 0);
    }

    #[test]
    fn the_recovery_that_ends_slow_start_is_not_timed() {
        // Slow start's window doubled in the round trip its loss was found in: half of it is
        // about what the round trip before the hole delivered.
        let mut f = Flight::default();
        let at = deliver(&mut f, 0, 20, 6);
        let end = recover(&mut f, at, 10 * MSS);
        deliver(&mut f, end, 10, 6);
        assert_eq!(f.timed, 0, "the first recovery compares nothing, cut or not");
        // The next one does.
        let end = recover(&mut f, end + 6 * RTT, 10 * MSS);
        deliver(&mut f, end, 5, 3);
        assert_eq!((f.timed, f.cut), (1, 1));
    }

    #[test]
    fn reads_too_far_back_for_the_ring_compare_nothing() {
        // Reads every 100 µs at a 50 ms RTT: 32 kept slots cover little more than 2 round trips.
        let mut f = Flight::default();
        let mut now = 0;
        for _ in 0..2_000 {
            now += 100;
            f.read(now, 100, 50_000);
        }
        assert!(f.between(now - 50_000, now).is_some(), "a round trip back is kept");
        assert!(f.between(now - 200_000, now).is_none(), "four are not");
    }
}
