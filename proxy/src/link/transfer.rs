//! Following one connection's transfers as they happen: when bytes arrive,
//! how long the pipe stood empty, how long rttscope itself held off because
//! the client was not reading, and what the kernel said about the upstream
//! socket meanwhile. At the end of a large response it names the one limit
//! that held it back. Pure logic: the relay feeds it times and samples.

use super::flight::Flight;
use super::loss::{Loss, Stalls};
use super::measurement::{
    CLIENT_READER_SHARE, LOSS_OUTRUN, LinkLimit, MIN_LOSS_EVENTS, Measurement, READER_TAIL_SHARE, UNREAD_FLOOR,
    at_reader_pace, slowed_while_held, window_closed,
};
use super::silence::{Silence, Verdict};
use crate::socket::{LinkSample, LossCounters};

/// Shares of a transfer's time that decide a verdict.
const SERVER_PAUSE_SHARE: f64 = 0.25;

/// Over the emulator (20 ms, 100 Mbit/s) servers held to 16-128 KiB of send
/// buffer left the pipe 61-76 % idle; link-limited 22 MB transfers 2-28 %,
/// the high end on a busy 2-core host, where loss recovery and scheduling
/// leave sub-RTT gaps a sender's silences cannot be told from. Between the two.
const WINDOW_IDLE_SHARE: f64 = 0.4;
/// Loss binds when the measured throughput is within these factors of the Mathis bound: not
/// far above it (the bound is a Reno figure, CUBIC beats it a little, and losses that merged
/// into one stall undercount `p`; a Reno server over the emulator with 1 % loss carried 1.2 ×
/// its bound, a BBR one 9 ×), nor far below it (then something else held the sender lower:
/// a 4 KiB receive buffer with the same loss carried 0.07 × its bound).
const LOSS_BOUND: std::ops::RangeInclusive<f64> = 0.4..=1.5;
/// A loss-limited Reno carries about its Mathis bound. A transfer under this share of it, in a
/// window's bursts, was held lower than loss alone would have: a window bound it first. With
/// loss counted in recovery episodes, over the emulator: the link matrix's 16 KiB send buffer
/// with 1 % reordering and 1 % loss at 20 ms carried 0.78 and 0.82 × its bound (the same
/// buffer without loss as much), Reno under 1 % loss alone 0.85-0.88 × at 5 ms and about 1 ×
/// at 20 and 80 ms. Between the two — a margin of 2-3 % either side, less than one run differs
/// from the next: the ratio alone cannot tell these apart every time.
const UNDER_LOSS_BOUND: f64 = 0.835;
/// A sender held to its Mathis bound on a faster path leaves the pipe empty at times; one
/// that keeps a capped path full meets the bottleneck queue's drops at just its bound too. Over
/// the emulator Reno under 0.5-2 % random loss left it empty 34-73 % of the time, Reno filling
/// a 30 Mbit/s line (0.96-0.98 × its bound) 1-11 %: the link. Counted after the sender's first
/// recovery: before it, slow start's growing bursts leave any path empty at times (Reno on a
/// clean 100 Mbit/s line at 20 ms: 23 % of 7.7 MiB, 44 % of slow start, 1-4 % after it; the
/// loss cells 35-71 % after it), and not where a read found the bytes waiting for rttscope.
const LOSS_IDLE_SHARE: f64 = 0.2;
/// Holes this often — about one round trip in five or more — with the pipe empty at times are a
/// loss-based sender that never kept a window the losses did not cut, whatever the Mathis
/// bound says. Counted in stalls, not episodes: each is a round trip the sender spent
/// repairing rather than growing its window, and a spurious recovery's cut is undone when the
/// held-back copy arrives, so the episodes alone understate it. Over the emulator a Reno
/// server whose packets were 1 % held back 100 ms (taken for lost) carried 2 MB at 40 ms at
/// 1.7-2.9 × the bound of its episodes, with a stall every 3.2-4.2 round trips (0.24-0.31 a
/// round trip, 30-58 % idle), 4 × slower than a clean line. A bottleneck queue overflowing as
/// the sender probes it drops in a burst or two (the matrix's autotuned 8 MB at 20 ms: 3
/// events in 40 round trips, 0.075, idle 11 %; its unit test doubles that); BBR under the same
/// loss meets 0.4-0.6 a round trip but keeps the pipe full (4-13 % idle). Between the rates.
const LOSS_EVENTS_PER_RTT: f64 = 0.18;
/// The receive window can have held a sender only when it was near what flowed per round
/// trip: an advertised window this many times larger never filled.
const WINDOW_NEVER_FILLED: u64 = 4;
/// Recovery stalls this large a share of a window-limited transfer make loss its second limit:
/// under a small window each one is time with nothing delivered (over the emulator a 4 KiB
/// receive buffer and 1 % loss spent 10-11 % of a 1.2 MB transfer waiting out timeouts).
const LOSS_STALL_SHARE: f64 = 0.05;
/// Two relay buffers: an unread backlog smaller than this is what one read left behind. A
/// client that held rttscope off while more than this (and a round trip's worth) of the
/// server's bytes waited in its socket was what the transfer waited for: over the emulator a
/// reader taking 5 MB/s from a 100 Mbit/s line at 20 ms left 0.3-5 MB unread at each
/// resumption, 34-86 % of the transfer, with the window wide open (16 MB) and the end of
/// the response never waiting long in the socket.
const BACKLOG_FLOOR: u64 = 64 << 10;
/// Small responses judged together for the `latency` verdict.
const LATENCY_WINDOW: u64 = 1000;

#[derive(Clone, Copy, Debug, Default)]
struct Transfer {
    first_us: u64,
    last_read_us: u64,
    /// Time the pipe stood empty between reads for less than a round trip
    /// (not counting time held off for the client, nor loss-recovery stalls).
    idle_us: u64,
    /// Gaps of several RTTs: the server producing the result slowly.
    server_pause_us: u64,
    server_pauses: u32,
    blocked_us: u64,
    /// The last gap between reads, its length and how it was counted, until a reading of
    /// the socket says whether a hole was being filled meanwhile.
    open_gap: Option<(u64, Gap)>,
    /// Gaps that ended when a retransmission filled a hole, grouped into the sender's
    /// recovery episodes: the loss events.
    stalls: Stalls,
    /// When the sender's first recovery episode ended (its latest stall so far), µs, and the
    /// idle time counted by then: before it, slow start's growing window left the pipe empty
    /// at times on any path; only the idle time after it tells a window loss kept cutting.
    first_recovery: Option<(u64, u64)>,
    /// A silence as long as a retransmission timeout, until what follows it tells what it was.
    silence: Option<Silence>,
    /// The read after which the latest reading of the socket found segments waiting out of
    /// order behind a hole, µs.
    hole_open_after_us: Option<u64>,
    /// What each recovery did to what the sender delivered a round trip: from a response's
    /// second read on (most responses are one read, and need none).
    flight: Option<Flight>,
    /// The socket's loss counters when the response started.
    start: Option<LossCounters>,
    max_mss: u32,
    rtt_sum: u64,
    rtt_n: u32,
    min_rtt_us: u32,
    max_window: u32,
    max_rcvbuf: u32,
    samples: u32,
    /// rttscope resumed reading since the last reading of the socket.
    resumed: bool,
    /// How long that hold-off lasted, µs, until the reading after it says what waited.
    last_hold_us: u64,
    /// Hold-offs after which the server's bytes still waited in rttscope's socket.
    backlog_held_us: u64,
    /// A reading is wanted at the start of the hold-off that just began.
    hold_reading: bool,
    /// The kernel's `bytes_received` at that reading, until the reading after the hold.
    received_at_hold: Option<u64>,
    /// Bytes received during the hold-offs read at both ends, and their time.
    held_received: u64,
    held_timed_us: u64,
    /// The upstream reading just taken began a hold-off, or ended one that lasted this long:
    /// the client's reading that follows it pairs with it.
    client_at_hold: bool,
    client_after_hold_us: Option<u64>,
    /// The client socket's `bytes_acked` as the hold-off under way began.
    acked_at_hold: Option<u64>,
    /// Bytes the client acknowledged during the hold-offs read at both ends on its socket,
    /// and their time.
    reader_taken: u64,
    reader_timed_us: u64,
    /// The smallest window advertised at a reading right after a hold-off.
    window_after_hold: Option<u32>,
    /// The socket's `bytes_received` at the latest reading, and the time of the read behind
    /// the first reading that showed it: when the kernel last took in more of the response.
    received: u64,
    received_at_us: Option<u64>,
    /// Time rttscope stopped reading because the emulated link's bytes filled its buffer:
    /// the emulation holding the sender back, like a window of its own.
    line_stalled_us: u64,
    /// When the emulated link let the last bytes read go on to the client (0: no link).
    last_release_us: u64,
    /// Readings of the client's socket, and those that found it behind.
    client_readings: u32,
    client_behind_readings: u32,
}

impl Transfer {
    /// An unread backlog worth the name, bytes: what the transfer has carried per round trip
    /// so far (`base_rtt_us`), and at least [`BACKLOG_FLOOR`]; less is a burst's leftovers.
    fn backlog_floor(&self, bytes_received: u64, base_rtt_us: u64) -> u64 {
        let carried = self.start.map_or(0, |s| bytes_received.saturating_sub(s.bytes_received));
        let elapsed = self.last_read_us.saturating_sub(self.first_us).max(1);
        let per_rtt = u128::from(carried) * u128::from(base_rtt_us) / u128::from(elapsed);
        (per_rtt as u64).max(BACKLOG_FLOOR)
    }

    /// The segment size to judge reads by: the largest received, else Ethernet's.
    fn mss(&self) -> u64 {
        if self.max_mss > 0 { u64::from(self.max_mss) } else { 1448 }
    }

    /// A stall from `start_us` to `end_us`, `counted_us` of it charged to recovery.
    fn stall(&mut self, start_us: u64, end_us: u64, counted_us: u64, timeout: bool, rtt_us: u64) {
        let began_episode = self.stalls.add(start_us, end_us, counted_us, timeout, rtt_us);
        if let Some(flight) = self.flight.as_mut() {
            flight.stall(start_us, end_us, began_episode, rtt_us);
        }
        if self.stalls.episodes.count == 1 {
            self.first_recovery = Some((end_us, self.idle_us));
        }
    }

    /// The time from the end of the sender's first recovery to `end_us`, and the idle time
    /// in it, µs; the whole transfer's if there was none.
    fn after_first_recovery(&self, end_us: u64) -> (u64, u64) {
        let (since_us, idle_before) = self.first_recovery.unwrap_or((self.first_us, 0));
        (end_us.saturating_sub(since_us).max(1), self.idle_us.saturating_sub(idle_before))
    }

    /// The pending timeout-long silence, once judged: a retransmission timeout (loss) or the
    /// server pausing.
    fn settle(&mut self, verdict: Verdict, rtt_us: u64) {
        let Some(s) = self.silence else { return };
        let gap = s.end_us - s.start_us;
        match verdict {
            Verdict::Open => return,
            Verdict::Timeout => self.stall(s.start_us, s.end_us, gap, true, rtt_us),
            Verdict::Pause => {
                self.server_pause_us += gap;
                self.server_pauses += 1;
            }
        }
        self.silence = None;
    }
}

/// How a gap between reads was counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gap {
    Idle,
    /// 1.5-3 RTT, or ended by a read that filled rttscope's buffer (the bytes waited for
    /// rttscope, the pipe was not seen empty): counted as nothing.
    Uncounted,
    Pause,
    /// As long as a retransmission timeout: a hole filled makes it one; else [`Silence`] judges.
    Timeout,
}

/// Small responses since the last `latency` judgement.
#[derive(Clone, Copy, Debug, Default)]
struct Small {
    responses: u64,
    round_trips: u64,
    time_us: u64,
}

/// One connection's transfer follower: fed read times, hold-offs and socket readings, it returns a [`Measurement`] for each large response.
#[derive(Debug)]
pub struct TransferTracker {
    large_transfer: u64,
    current: Option<Transfer>,
    blocked_since: Option<u64>,
    small: Small,
    /// Latest smoothed and base RTT of the upstream socket, µs.
    pub rtt_us: u32,
    /// Base RTT (`tcpi_min_rtt`, else the smoothed one), µs; 0 until a reading.
    pub min_rtt_us: u32,
    /// The socket's loss counters at the latest reading.
    latest: Option<LossCounters>,
    /// Gaps as long as a retransmission timeout in the middle of any response, ever.
    pub timeout_gaps: u32,
    /// rttscope's own retransmission timeout on this socket, µs: the server's, on the same
    /// path under the same kernel rules (srtt + 4 × rttvar, at least 200 ms), is about the same.
    rto_us: u32,
    /// Largest receive buffer this host allows (tcp_rmem max), if known.
    rmem_max: Option<u64>,
}

impl TransferTracker {
    /// Responses of at least `large_transfer` bytes get a verdict; `rmem_max` (tcp_rmem max) tells a pinned receive buffer apart from the sender's window.
    pub fn new(large_transfer: u64, rmem_max: Option<u64>) -> TransferTracker {
        TransferTracker {
            large_transfer,
            current: None,
            blocked_since: None,
            small: Small::default(),
            rtt_us: 0,
            min_rtt_us: 0,
            latest: None,
            rto_us: 0,
            timeout_gaps: 0,
            rmem_max,
        }
    }

    /// Gaps shorter than this are the ordinary spacing of packets.
    fn idle_threshold_us(&self) -> u64 {
        (u64::from(self.rtt_us) / 4).max(1_000)
    }

    /// Gaps this long are not a window either: a window-limited sender hears
    /// the ACKs for its window within one round trip and sends again, so its
    /// silences are shorter than an RTT. A silence of 1.5 RTT or more is loss
    /// recovery: the reader waits a round trip (plus the queue that overflowed)
    /// for a retransmission to fill a hole, then gets what queued behind it at
    /// once. Over the emulator (20 ms, 100 Mbit/s, a BDP of tail-drop queue)
    /// a link-limited 22 MB had several of 35-45 ms; counting them made it
    /// 10-24 % idle and the verdict `sender`, leaving them out 2-8 %.
    fn stall_threshold_us(&self) -> u64 {
        (3 * u64::from(self.rtt_us) / 2).max(2 * self.idle_threshold_us())
    }

    /// Whether a gap lasted a retransmission timeout (or two, four or eight of them, backed
    /// off): a segment lost with too few behind it to trigger a fast retransmit — under a
    /// small window, every loss — leaves no segment out of order, only this silence. A server
    /// has no reason to pause for just that long.
    fn lasted_a_timeout(&self, gap_us: u64) -> bool {
        let (rto, rtt) = (u64::from(self.rto_us), u64::from(self.rtt_us));
        rto > 0 && [1, 2, 4, 8].iter().any(|k| (k * rto * 8 / 10..=k * rto * 13 / 10 + 2 * rtt).contains(&gap_us))
    }

    /// The longest a hole takes to fill: a retransmission timeout and the round trips around
    /// it. Unbounded until the socket has told its RTO.
    fn recovery_cap_us(&self) -> u64 {
        if self.rto_us == 0 { u64::MAX } else { u64::from(self.rto_us) + 2 * u64::from(self.rtt_us) }
    }

    /// Gaps longer than this are the server pausing, not a window.
    fn pause_threshold_us(&self) -> u64 {
        (3 * u64::from(self.rtt_us)).max(10_000)
    }

    /// The first byte of a response arrived at `now_us`: a transfer starts, with the loss counters as last read.
    pub fn response_started(&mut self, now_us: u64) {
        self.current = Some(Transfer {
            first_us: now_us,
            last_read_us: now_us,
            min_rtt_us: u32::MAX,
            start: self.latest,
            ..Transfer::default()
        });
    }

    /// `bytes` from upstream arrived at `now_us`: all the socket had.
    pub fn read(&mut self, now_us: u64, bytes: u64) {
        self.read_of(now_us, bytes, false);
    }

    /// `bytes` from upstream arrived at `now_us`, filling rttscope's buffer: more had arrived
    /// than it took, so the gap before was rttscope late to read, not the pipe standing empty
    /// (on a busy machine, what made a clean line's reads look like a window's bursts).
    pub fn read_filling(&mut self, now_us: u64, bytes: u64) {
        self.read_of(now_us, bytes, true);
    }

    fn read_of(&mut self, now_us: u64, bytes: u64, filled: bool) {
        let (idle_threshold, blocked) = (self.idle_threshold_us(), self.blocked_since.is_some());
        let rtt = u64::from(self.min_rtt_us);
        let dropped = self.latest.and_then(|c| c.dropped);
        let Some(t) = self.current.as_mut() else { return };
        let mss = t.mss();
        match t.flight.as_mut() {
            Some(flight) => flight.read(now_us, bytes, rtt),
            None if now_us == t.first_us => {}
            None => t.flight.insert(Flight::default()).read(now_us, bytes, rtt),
        }
        if let Some(silence) = t.silence.as_mut() {
            silence.read(now_us, bytes, rtt);
            let verdict = silence.at_reading(now_us, dropped, rtt, mss);
            t.settle(verdict, rtt);
        }
        let gap = now_us.saturating_sub(t.last_read_us);
        // Most reads follow the one before closely, or start the response: a gap shorter
        // than the idle threshold (the shortest of the three) counts as nothing.
        if gap < idle_threshold || blocked {
            t.open_gap = None;
            t.last_read_us = now_us;
            return;
        }
        self.gap(now_us, gap, bytes, filled);
    }

    /// A read of `bytes` after a gap of `gap` µs, at least the idle threshold, not held off by
    /// the client; `filled`: the read filled rttscope's buffer.
    fn gap(&mut self, now_us: u64, gap: u64, bytes: u64, filled: bool) {
        let (stall_threshold, pause_threshold) = (self.stall_threshold_us(), self.pause_threshold_us());
        let timeout = gap >= pause_threshold && self.lasted_a_timeout(gap);
        self.timeout_gaps = self.timeout_gaps.wrapping_add(u32::from(timeout));
        let Some(t) = self.current.as_mut() else { return };
        t.open_gap = None;
        if timeout {
            // A timeout, or a server that paused as long: what comes next tells (`silence`).
            let dropped_before = self.latest.and_then(|c| c.dropped);
            let hole_open = t.hole_open_after_us == Some(t.last_read_us);
            t.silence =
                Some(Silence { start_us: now_us - gap, end_us: now_us, bytes_after: bytes, dropped_before, hole_open });
            t.open_gap = Some((gap, Gap::Timeout));
        } else {
            let kind = if gap >= pause_threshold {
                t.server_pause_us += gap;
                t.server_pauses += 1;
                Gap::Pause
            } else if gap < stall_threshold && !filled {
                t.idle_us += gap;
                Gap::Idle
            } else {
                Gap::Uncounted
            };
            t.open_gap = Some((gap, kind));
        }
        t.last_read_us = now_us;
    }

    /// Before the read that follows, rttscope had waited `stalled_us` for the emulated link to
    /// make room in its buffer.
    pub fn line_stalled(&mut self, stalled_us: u64) {
        if let Some(t) = self.current.as_mut() {
            t.line_stalled_us += stalled_us;
        }
    }

    /// The emulated link lets bytes just read go on at `released_us`.
    pub fn released(&mut self, released_us: u64) {
        if let Some(t) = self.current.as_mut() {
            t.last_release_us = t.last_release_us.max(released_us);
        }
    }

    /// rttscope stopped (`true`) or resumed reading upstream because the
    /// client was not taking what it had.
    pub fn held_off(&mut self, held: bool, now_us: u64) {
        match (held, self.blocked_since) {
            (true, None) => {
                self.blocked_since = Some(now_us);
                if let Some(t) = self.current.as_mut() {
                    (t.hold_reading, t.received_at_hold) = (true, None);
                    if let Some(flight) = t.flight.as_mut() {
                        flight.disturbed();
                    }
                }
            }
            (false, Some(since)) => {
                self.blocked_since = None;
                if let Some(t) = self.current.as_mut() {
                    t.blocked_us += now_us.saturating_sub(since);
                    t.last_hold_us = now_us.saturating_sub(since);
                    // The gap that follows is the client's doing, not the path's.
                    t.last_read_us = now_us;
                    t.resumed = true;
                    // A hold whose start was not read is not timed.
                    t.hold_reading = false;
                }
            }
            _ => {}
        }
    }

    /// Whether a gap just ended that a reading of the socket should explain (now, before
    /// more reads blur which gap a hole belonged to).
    pub fn wants_sample(&self) -> bool {
        self.current.is_some_and(|t| t.open_gap.is_some() || t.resumed || t.hold_reading || t.silence.is_some())
    }

    /// A reading of the upstream socket.
    pub fn sample(&mut self, s: &LinkSample) {
        let counters = LossCounters::of(s);
        let hole = self.latest.is_some_and(|before| counters.out_of_order != before.out_of_order);
        self.latest = Some(counters);
        if s.rtt_us > 0 {
            self.rtt_us = s.rtt_us;
        }
        if s.rto_us > 0 {
            self.rto_us = s.rto_us;
        }
        if s.base_rtt_us() > 0 {
            self.min_rtt_us = s.base_rtt_us();
        }
        let (recovery_cap, rtt) = (self.recovery_cap_us(), u64::from(self.min_rtt_us));
        if let Some(t) = self.current.as_mut() {
            t.samples += 1;
            // What the client's reading after this one pairs with: this reading's alone.
            (t.client_at_hold, t.client_after_hold_us) = (false, None);
            if s.rtt_us > 0 {
                t.rtt_sum += u64::from(s.rtt_us);
                t.rtt_n += 1;
            }
            t.min_rtt_us = t.min_rtt_us.min(s.base_rtt_us().max(1));
            t.hole_open_after_us = s.hole_open().then_some(t.last_read_us);
            t.max_window = t.max_window.max(s.advertised_window());
            t.max_rcvbuf = t.max_rcvbuf.max(s.rcvbuf);
            t.max_mss = t.max_mss.max(s.rcv_mss);
            if std::mem::take(&mut t.resumed) {
                // The server's bytes were waiting for the client, not the client for them.
                let hold = std::mem::take(&mut t.last_hold_us);
                if u64::from(s.inq) >= t.backlog_floor(s.bytes_received, rtt) {
                    t.backlog_held_us += hold;
                }
                if let Some(at_hold) = t.received_at_hold.take() {
                    t.held_received += s.bytes_received.saturating_sub(at_hold);
                    t.held_timed_us += hold;
                }
                t.client_after_hold_us = Some(hold);
                let window = s.advertised_window();
                t.window_after_hold = Some(t.window_after_hold.map_or(window, |w| w.min(window)));
            }
            if std::mem::take(&mut t.hold_reading) {
                t.received_at_hold = Some(s.bytes_received);
                t.client_at_hold = true;
            }
            // Readings follow reads: the latest read's time is the reading's.
            if s.bytes_received != t.received {
                t.received = s.bytes_received;
                t.received_at_us = Some(t.last_read_us);
            }
            // Segments queued behind a hole while the reads stood still: the gap was a
            // retransmission being awaited, whatever its length said.
            if let Some((gap, kind)) = t.open_gap.take()
                && hole
            {
                // A silence far longer than any recovery in which a hole was also filled was
                // the server pausing, a retransmission arriving meanwhile: the recovery's
                // share is a stall, the rest stays a pause.
                let stall = match kind {
                    Gap::Pause if gap > recovery_cap => {
                        t.server_pause_us -= recovery_cap;
                        recovery_cap
                    }
                    Gap::Pause => {
                        t.server_pause_us -= gap;
                        t.server_pauses -= 1;
                        gap
                    }
                    Gap::Idle => {
                        t.idle_us -= gap;
                        gap
                    }
                    Gap::Uncounted | Gap::Timeout => gap,
                };
                t.silence = None;
                t.stall(t.last_read_us - gap, t.last_read_us, stall, kind == Gap::Timeout, rtt);
            }
            if let Some(silence) = t.silence {
                let verdict = silence.at_reading(t.last_read_us, s.dropped, rtt, t.mss());
                t.settle(verdict, rtt);
            }
        }
    }

    /// A reading of the client's (TCP) socket during a transfer, with what the application's
    /// own socket held unread (`peer_unread`, 0 unless it is on this host): behind when more
    /// than the buffers' worth rttscope wrote had not been taken by the application.
    pub fn client_sample(&mut self, s: &LinkSample, peer_unread: u32) {
        if let Some(t) = self.current.as_mut() {
            t.client_readings += 1;
            t.client_behind_readings += u32::from(u64::from(s.outq) + u64::from(peer_unread) >= UNREAD_FLOOR);
            if let (Some(hold), Some(at_hold)) = (t.client_after_hold_us.take(), t.acked_at_hold.take()) {
                t.reader_taken += s.bytes_acked.saturating_sub(at_hold);
                t.reader_timed_us += hold;
            }
            if std::mem::take(&mut t.client_at_hold) {
                t.acked_at_hold = Some(s.bytes_acked);
            }
        }
    }

    /// Whether a transfer is under way (worth sampling while it lasts).
    pub fn in_transfer(&self) -> bool {
        self.current.is_some()
    }

    /// The response ended: a measurement with its limit if it was large;
    /// or, every thousand small responses, a `latency` judgement when round
    /// trips were most of their time.
    pub fn finished(&mut self, now_us: u64, bytes: u64, round_trips: u32, latency_us: u64) -> Option<Measurement> {
        // A small response only ends the transfer: taking it out would copy the whole
        // transfer state for nothing (some 40 instructions a round trip, callgrind).
        self.current.as_ref()?;
        if bytes < self.large_transfer {
            self.current = None;
            self.small.responses += 1;
            self.small.round_trips += u64::from(round_trips);
            self.small.time_us += latency_us;
            return self.judge_small();
        }
        let mut t = self.current.take()?;
        if let Some(silence) = t.silence {
            t.settle(silence.judged(t.mss()), u64::from(self.min_rtt_us));
        }
        let end_us = t.last_read_us.max(now_us);
        let duration_us = end_us.saturating_sub(t.first_us).max(1);
        let rtt_us = if t.rtt_n > 0 { (t.rtt_sum / u64::from(t.rtt_n)) as u32 } else { self.rtt_us };
        let base_rtt_us = if t.min_rtt_us == u32::MAX { self.min_rtt_us } else { t.min_rtt_us };
        let throughput = (u128::from(bytes) * 1_000_000 / u128::from(duration_us)) as u64;
        let bytes_per_rtt = (u128::from(throughput) * u128::from(base_rtt_us.max(1)) / 1_000_000) as u64;
        let share = |v: u64| v as f64 / duration_us as f64;
        let at_rmem_ceiling = self.rmem_max.is_some_and(|max| u64::from(t.max_rcvbuf) >= max * 9 / 10);
        // What arrived per round trip filled the window we advertised: the
        // sender could not have sent more, however evenly the window's reopening
        // spread its segments over the RTT. (A 19 KB window over the emulator
        // arrived as a read every 3.3 ms, gaps too short to count as idle.)
        let window_full = t.max_window > 0 && bytes_per_rtt * 16 >= u64::from(t.max_window) * 10;
        let moved = match (self.latest, t.start) {
            (Some(now), Some(start)) => now.since(&start),
            _ => LossCounters::default(),
        };
        let loss = Loss {
            recoveries_timed: t.flight.as_ref().map_or(0, |f| f.timed),
            recoveries_cut: t.flight.as_ref().map_or(0, |f| f.cut),
            ..Loss::from_transfer(&moved, &t.stalls, t.max_mss, base_rtt_us)
        };
        let events = t.stalls.episodes.count;
        // The sender's window was what loss let it have: the throughput is at the Mathis bound.
        let loss_binds = events >= MIN_LOSS_EVENTS
            && loss.loss_limited_throughput.is_some_and(|b| LOSS_BOUND.contains(&(throughput as f64 / b as f64)));
        // Far faster than its loss allows: the drops were a full path's queue, not a lossy one.
        let loss_outrun = events >= MIN_LOSS_EVENTS
            && loss.loss_limited_throughput.is_some_and(|b| throughput as f64 > b as f64 * LOSS_OUTRUN);
        let rtts = duration_us as f64 / f64::from(base_rtt_us.max(1));
        let frequent_loss = events >= MIN_LOSS_EVENTS && f64::from(t.stalls.count) >= LOSS_EVENTS_PER_RTT * rtts;
        // Above the range in which the bound binds, however far: the frequent holes, not the
        // bound, say it was loss (between the range's end and `LOSS_OUTRUN` no other limit fits).
        let above_bound = events >= MIN_LOSS_EVENTS
            && loss.loss_limited_throughput.is_some_and(|b| throughput as f64 > b as f64 * LOSS_BOUND.end());
        // A window held it, and waiting for retransmissions cost it a share besides.
        let loss_also = events >= MIN_LOSS_EVENTS && (loss_binds || share(t.stalls.us) >= LOSS_STALL_SHARE);
        let window_bursts = share(t.idle_us) >= WINDOW_IDLE_SHARE;
        let under_loss_bound =
            loss.loss_limited_throughput.is_some_and(|b| (throughput as f64) < b as f64 * UNDER_LOSS_BOUND);
        // The sender's window was what loss left it — at the Mathis bound, or cut every few
        // round trips however far above it — and the pipe stood empty at times.
        let (after_first_loss_us, idle_after_first_loss_us) = t.after_first_recovery(end_us);
        let pipe_emptied = idle_after_first_loss_us as f64 / after_first_loss_us as f64 >= LOSS_IDLE_SHARE;
        // Each recovery cut what the sender delivered: a loss-based window, not the path, set
        // the pace, however its rate compares with the Mathis bound. (The first recovery is not
        // timed: this takes two loss events or more, and says nothing of a rate.)
        let cut_by_loss = t.flight.as_ref().is_some_and(Flight::mostly_cut);
        let loss_paced =
            pipe_emptied && (cut_by_loss || (!under_loss_bound && (loss_binds || (above_bound && frequent_loss))));
        let our_window_could_bind =
            at_rmem_ceiling && u64::from(t.max_window) <= bytes_per_rtt.max(1) * WINDOW_NEVER_FILLED;
        let also_loss = |limit| (limit, loss_also.then_some(LinkLimit::Loss));
        let reader_tail_us = t.received_at_us.map_or(0, |at| end_us.saturating_sub(at));
        let reader_cost = window_closed(t.window_after_hold.map(u64::from), t.max_mss)
            || share(reader_tail_us) >= READER_TAIL_SHARE
            || share(t.backlog_held_us) >= CLIENT_READER_SHARE
            || at_reader_pace(t.reader_taken, t.reader_timed_us, throughput)
            || slowed_while_held(t.held_received, t.held_timed_us, throughput, duration_us);
        let (limit, secondary) = if share(t.blocked_us) >= CLIENT_READER_SHARE && reader_cost {
            (LinkLimit::ClientReader, None)
        } else if share(t.server_pause_us) >= SERVER_PAUSE_SHARE {
            (LinkLimit::Server, None)
        } else if window_full {
            also_loss(LinkLimit::ReceiveWindow)
        } else if loss_paced {
            (LinkLimit::Loss, None)
        } else if loss_outrun {
            // The gaps are the recovery from those drops, not a window's silences.
            (LinkLimit::Link, None)
        } else if window_bursts {
            // Bursts then silence: a window, ours (pinned at the ceiling, and no wider than
            // what flowed) or the server's.
            also_loss(if our_window_could_bind { LinkLimit::ReceiveWindow } else { LinkLimit::Sender })
        } else {
            (LinkLimit::Link, None)
        };
        Some(Measurement {
            limit,
            secondary,
            loss,
            bytes,
            duration_us,
            throughput,
            rtt_us,
            base_rtt_us,
            bytes_per_rtt,
            advertised_window: u64::from(t.max_window),
            receive_buffer: u64::from(t.max_rcvbuf),
            idle_us: t.idle_us,
            after_first_loss_us,
            idle_after_first_loss_us,
            held_off_us: t.blocked_us,
            backlog_held_us: t.backlog_held_us,
            held_received: t.held_received,
            held_timed_us: t.held_timed_us,
            reader_taken: t.reader_taken,
            reader_timed_us: t.reader_timed_us,
            window_after_hold: t.window_after_hold.map(u64::from),
            reader_tail_us,
            server_pauses: t.server_pauses,
            server_pause_us: t.server_pause_us,
            samples: t.samples,
            round_trips: u64::from(round_trips),
            emulated_us: (t.line_stalled_us + t.last_release_us.saturating_sub(end_us)).min(duration_us),
            client_unread_at_end: None,
            client_readings: t.client_readings,
            client_behind_readings: t.client_behind_readings,
        })
    }

    fn judge_small(&mut self) -> Option<Measurement> {
        if self.small.responses < LATENCY_WINDOW {
            return None;
        }
        let s = std::mem::take(&mut self.small);
        let rtt = u64::from(self.min_rtt_us);
        // Round trips are most of the time when each one costs about an RTT.
        if rtt == 0 || s.round_trips.saturating_mul(rtt) * 2 < s.time_us {
            return None;
        }
        Some(Measurement {
            limit: LinkLimit::Latency,
            secondary: None,
            loss: Loss::default(),
            bytes: 0,
            duration_us: s.time_us,
            throughput: 0,
            rtt_us: self.rtt_us,
            base_rtt_us: self.min_rtt_us,
            bytes_per_rtt: 0,
            advertised_window: 0,
            receive_buffer: 0,
            idle_us: 0,
            after_first_loss_us: s.time_us,
            idle_after_first_loss_us: 0,
            held_off_us: 0,
            backlog_held_us: 0,
            held_received: 0,
            held_timed_us: 0,
            reader_taken: 0,
            reader_timed_us: 0,
            window_after_hold: None,
            reader_tail_us: 0,
            server_pauses: 0,
            server_pause_us: 0,
            samples: 0,
            round_trips: s.round_trips,
            emulated_us: 0,
            client_unread_at_end: None,
            client_readings: 0,
            client_behind_readings: 0,
        })
    }
}

#[cfg(test)]
mod tests;
