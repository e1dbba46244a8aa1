//! Telling a retransmission timeout from a server that paused for as long. The length of a
//! silence cannot: from a 20 ms RTT on, 1, 2, 4 and 8 backed-off RTOs (and the slack around
//! each) cover nearly every silence of 0.2-3 s, and a server sleeping between chunks falls in
//! them as often as not. What arrives after the silence can. A timeout ends with the one lost
//! segment resent (the sender's window is one segment after an RTO, and the next two wait for
//! its ACK, a round trip later); a server that paused restarts with a window of ten segments
//! (Linux's restart after idle, `tcp_slow_start_after_idle`), or its whole window, sent back
//! to back. A loss with segments behind it shows as a hole instead, and counts as loss before
//! this is asked — or, when the reading that followed the last read before the silence already
//! found segments waiting out of order (a loaded host read the socket late, after every segment
//! behind the hole had come), here: the hole was open as the reads stopped, and its filling
//! released at once all that queued behind it, a window at once that was no pause. So does a
//! duplicate: a sender that resent what it had in flight was not idle — the path stalled (a
//! delay line starved of CPU released what it held, the timeout's copy behind it), whatever
//! came at once after.

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
    /// The socket's count of duplicates thrown away when the silence began, if known.
    pub dropped_before: Option<u32>,
    /// Segments waited out of order behind a hole at the reading after the last read before
    /// the silence.
    pub hole_open: bool,
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
    /// A read of `bytes` at `now_us` after the silence (`rtt_us` the base RTT).
    pub fn read(&mut self, now_us: u64, bytes: u64, rtt_us: u64) {
        if now_us <= self.end_us + rtt_us / 2 {
            self.bytes_after += bytes;
        }
    }

    /// The silence as judged at a reading at `now_us` that found `dropped` duplicates thrown
    /// away so far: [`Verdict::Open`] until half a round trip has passed, unless an open hole
    /// or a duplicate already says.
    pub fn at_reading(&self, now_us: u64, dropped: Option<u32>, rtt_us: u64, mss: u64) -> Verdict {
        if self.hole_open || self.resent(dropped) {
            return Verdict::Timeout;
        }
        if now_us <= self.end_us + rtt_us / 2 {
            return Verdict::Open;
        }
        self.judged(mss)
    }

    /// Whether a duplicate arrived since the silence began.
    fn resent(&self, dropped: Option<u32>) -> bool {
        self.dropped_before.zip(dropped).is_some_and(|(before, now)| now != before)
    }

    /// The silence as judged from what came after it so far (the response may have ended).
    pub fn judged(&self, mss: u64) -> Verdict {
        if !self.hole_open && self.bytes_after > AFTER_TIMEOUT_SEGMENTS * mss.max(1) {
            Verdict::Pause
        } else {
            Verdict::Timeout
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn silence(first_read: u64) -> Silence {
        Silence { start_us: 0, end_us: 440_000, bytes_after: first_read, dropped_before: Some(3), hole_open: false }
    }

    #[test]
    fn one_segment_then_a_round_trip_of_nothing_is_a_timeout() {
        let mut s = silence(1448);
        // The next two segments come a round trip (20 ms) later.
        s.read(460_000, 2_896, 20_000);
        assert_eq!(s.at_reading(460_000, Some(3), 20_000, 1448), Verdict::Timeout);
    }

    #[test]
    fn a_window_at_once_is_a_pause() {
        // The restart window of ten segments, read as they come: one, then the rest.
        let mut s = silence(1448);
        s.read(440_300, 13_032, 20_000);
        assert_eq!(s.at_reading(440_300, Some(3), 20_000, 1448), Verdict::Open, "half a round trip to wait");
        assert_eq!(s.at_reading(452_000, Some(3), 20_000, 1448), Verdict::Pause);
        // Or all in the first read.
        assert_eq!(silence(14_480).judged(1448), Verdict::Pause);
    }

    #[test]
    fn a_burst_with_a_duplicate_is_a_stalled_path_not_a_pause() {
        // The matrix's 16 KiB send buffer at 5 ms under load: 270 ms of nothing, then what the
        // line held at once, and the server's timeout copy of its first segment behind it.
        let s = silence(14_480);
        assert_eq!(s.at_reading(440_300, Some(4), 5_000, 1448), Verdict::Timeout);
    }

    #[test]
    fn a_burst_after_a_silence_a_hole_was_open_at_is_a_retransmission() {
        let s = Silence { hole_open: true, ..silence(14_480) };
        assert_eq!(s.at_reading(440_300, Some(3), 20_000, 1448), Verdict::Timeout);
        assert_eq!(s.judged(1448), Verdict::Timeout);
    }

    #[test]
    fn the_last_segment_of_a_response_alone_is_a_timeout() {
        assert_eq!(silence(900).judged(1448), Verdict::Timeout);
    }
}
