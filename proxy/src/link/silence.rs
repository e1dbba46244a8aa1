//! Telling a retransmission timeout from a server that paused for as long. The length of a
//! silence cannot: from a 20 ms RTT on, 1, 2, 4 and 8 backed-off RTOs (and the slack around
//! each) cover nearly every silence of 0.2-3 s, and a server sleeping between chunks falls in
//! them as often as not. What arrives after the silence can. A timeout ends with the one lost
//! segment resent (the sender's window is one segment after an RTO, and the next two wait for
//! its ACK, a round trip later); a server that paused restarts with a window of ten segments
//! (Linux's restart after idle, `tcp_slow_start_after_idle`), or its whole window, sent back
//! to back. A loss with segments behind it shows as a hole instead, and counts as loss before
//! this is asked.

/// Segments that may arrive within half a round trip of the end of a timeout: the resent one
/// (two, should the read straddle a short segment).
const AFTER_TIMEOUT_SEGMENTS: u64 = 2;

/// A silence as long as a retransmission timeout, and what came in just after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Silence {
    /// When the reads stopped and resumed, µs.
    pub start_us: u64,
    pub end_us: u64,
    /// Bytes read from `end_us` to half a round trip later.
    pub bytes_after: u64,
}

/// What a timeout-long silence was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not known yet: reads within the half round trip may still come.
    Open,
    /// A retransmission timeout: loss.
    Timeout,
    /// The server sent nothing meanwhile, then a window at once.
    Pause,
}

impl Silence {
    /// A read of `bytes` at `now_us` after the silence, and whether the silence is now judged
    /// (`rtt_us` the base RTT, `mss` the segment size).
    pub fn read(&mut self, now_us: u64, bytes: u64, rtt_us: u64, mss: u64) -> Verdict {
        if now_us <= self.end_us + rtt_us / 2 {
            self.bytes_after += bytes;
            if self.bytes_after > AFTER_TIMEOUT_SEGMENTS * mss.max(1) {
                return Verdict::Pause;
            }
            return Verdict::Open;
        }
        self.judged(mss)
    }

    /// The silence as judged from what came after it so far (the response may have ended).
    pub fn judged(&self, mss: u64) -> Verdict {
        if self.bytes_after > AFTER_TIMEOUT_SEGMENTS * mss.max(1) { Verdict::Pause } else { Verdict::Timeout }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn silence(first_read: u64) -> Silence {
        Silence { start_us: 0, end_us: 440_000, bytes_after: first_read }
    }

    #[test]
    fn one_segment_then_a_round_trip_of_nothing_is_a_timeout() {
        let mut s = silence(1448);
        // The next two segments come a round trip (20 ms) later.
        assert_eq!(s.read(460_000, 2_896, 20_000, 1448), Verdict::Timeout);
    }

    #[test]
    fn a_window_at_once_is_a_pause() {
        // The restart window of ten segments, read as they come: one, then the rest.
        let mut s = silence(1448);
        assert_eq!(s.read(440_300, 4_344, 20_000, 1448), Verdict::Pause);
        // Or all in the first read.
        assert_eq!(silence(14_480).judged(1448), Verdict::Pause);
    }

    #[test]
    fn the_last_segment_of_a_response_alone_is_a_timeout() {
        assert_eq!(silence(900).judged(1448), Verdict::Timeout);
    }
}
