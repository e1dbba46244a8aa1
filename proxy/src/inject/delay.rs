//! One direction of the emulated link, as a schedule: each chunk read gets
//! the time it may be written on. A chunk first waits its turn on the wire
//! (serialisation at the configured bandwidth, and — with a window — until
//! the bytes a window before it have been acknowledged, one RTT after they
//! went out), then the one-way delay plus jitter. With loss, a lost segment
//! holds itself and every byte after it for a recovery stall, and the
//! window shrinks to what a loss-based sender keeps (`loss.rs`). Release
//! times never go backwards: bytes are delayed, never reordered or dropped.
//!
//! The settings are validated at the edge (delays at most a minute, ...), but the
//! arithmetic here does not rely on it: every sum saturates, so no setting can panic
//! a connection (`inject/proptests.rs` proves it over the whole input range).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::loss::{self, Losses, MSS, Tail};
use super::slow_start::SlowStart;

/// On a bandwidth-limited link a read is scheduled in pieces of at most
/// this much wire time, each released on its own. Released whole, a read
/// of n bytes held its first byte until its last had crossed the wire, and
/// it freed its buffer space at once; the next read then took all that
/// space as one chunk, so after any stall (the proxy not scheduled for a
/// few ms) reads coalesced into ever larger chunks and the wire sat idle
/// while each one's delay ran: 50 MB at 100 Mbit/s and 20 ms took 5.7 s,
/// not 4.05 s, on a busy machine. A millisecond keeps the wire busy at a
/// cost of at most a thousand timer wake-ups a second per direction.
const PIECE_TIME: Duration = Duration::from_millis(1);
/// On a slow link a piece is still at least about one Ethernet frame, so
/// that the queue of pending releases stays short.
const MIN_PIECE: u64 = 1500;

/// Jitter is drawn within ±this at most, so that `2 × jitter + 1` and the signed offset
/// fit their integers; far beyond any delay the config accepts.
const MAX_JITTER_NANOS: u64 = u64::MAX / 4;

/// `t + d`, or as late as an `Instant` goes when that overflows: a release that far away
/// never comes, which is what an absurd delay means.
fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d).unwrap_or_else(|| {
        // Halve the step until it fits: at most 64 tries.
        let mut step = d;
        let mut latest = t;
        while !step.is_zero() {
            match latest.checked_add(step) {
                Some(next) => latest = next,
                None => step /= 2,
            }
        }
        latest
    })
}

/// One direction's link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OneWayModel {
    /// One-way propagation delay: `inject.rtt / 2` unless the direction overrides it.
    pub delay: Duration,
    /// Each chunk's delay varies uniformly within ±jitter.
    pub jitter: Duration,
    /// Wire rate, bytes per second (the configured bits / 8, at least 1); `None`: unlimited.
    pub bytes_per_second: Option<u64>,
    /// At most this many bytes in flight per round trip.
    pub window: Option<u64>,
    /// The round trip a window's acknowledgement takes.
    pub rtt: Duration,
    /// Share of segments lost, in parts per million.
    pub loss_ppm: u32,
}

impl OneWayModel {
    /// Whether the model changes anything; an inactive one is not put on the path at all.
    pub fn is_active(&self) -> bool {
        !self.delay.is_zero()
            || !self.jitter.is_zero()
            || self.bytes_per_second.is_some()
            || self.window.is_some()
            || self.loss_ppm > 0
    }

    /// The window that binds: the configured one, or the one loss leaves a sender.
    pub fn window_limit(&self) -> Option<u64> {
        match (self.window, loss::loss_window(self.loss_ppm)) {
            (Some(w), Some(l)) => Some(w.min(l)),
            (w, l) => w.or(l),
        }
    }

    /// Bytes the emulated pipe holds at full speed: what the buffer must
    /// hold so that buffering, not the model, never sets the pace.
    pub fn pipe_bytes(&self) -> Option<u64> {
        let rate = self.bytes_per_second?;
        let held = self.delay.saturating_add(self.jitter);
        let bytes = u128::from(rate).saturating_mul(held.as_micros()) / 1_000_000;
        Some(u64::try_from(bytes).unwrap_or(u64::MAX))
    }

    /// Bytes in flight that keep the wire busy for a round trip: a window at least this large
    /// no longer binds. `None` without a bandwidth.
    pub fn pipe_window(&self) -> Option<u64> {
        let rate = self.bytes_per_second?;
        let bytes = u128::from(rate).saturating_mul(self.rtt.as_micros()) / 1_000_000;
        Some(u64::try_from(bytes).unwrap_or(u64::MAX))
    }
}

/// One direction's schedule: given each read's time and size, when its bytes may be written on.
#[derive(Debug)]
pub struct DelayLine {
    model: OneWayModel,
    /// Bytes scheduled so far (a stream offset).
    scheduled: u64,
    /// Bytes whose release time has passed.
    released: u64,
    /// Pending releases: (stream offset the release reaches, when).
    marks: VecDeque<(u64, Instant)>,
    /// When the bytes released last were due, until [`DelayLine::take_due`] takes it.
    last_due: Option<Instant>,
    /// When the emulated wire is next free.
    wire_free: Option<Instant>,
    last_release: Option<Instant>,
    /// Departures of recent bytes, for the window rules: (end offset, departed). Only the
    /// last round trip's: older ones are acknowledged already and bind nothing.
    departures: VecDeque<(u64, Instant)>,
    /// Bytes up to this stream offset are acknowledged (their departures dropped).
    acknowledged: u64,
    /// `model.window_limit()`, worked out once per model.
    window: Option<u64>,
    /// The congestion window while it grows.
    slow_start: SlowStart,
    losses: Losses,
    /// The release the last piece would have had without loss.
    last_natural: Option<Instant>,
    rng: u64,
}

impl DelayLine {
    /// A line for a stream that has already carried `offset` bytes: those
    /// count as released (a link switched on mid-connection holds only what
    /// arrives from then on).
    pub fn new(model: OneWayModel, offset: u64, seed: u64) -> DelayLine {
        DelayLine {
            model,
            scheduled: offset,
            released: offset,
            marks: VecDeque::new(),
            last_due: None,
            wire_free: None,
            last_release: None,
            departures: VecDeque::new(),
            acknowledged: offset,
            window: model.window_limit(),
            slow_start: SlowStart::new(&model, offset),
            losses: Losses::new(model.loss_ppm, seed),
            last_natural: None,
            rng: seed | 1,
        }
    }

    /// The settings this line was built with.
    pub fn model(&self) -> &OneWayModel {
        &self.model
    }

    /// A new link from now on; bytes already scheduled keep their times.
    pub fn set_model(&mut self, model: OneWayModel) {
        if model.loss_ppm != self.model.loss_ppm {
            self.losses.set_rate(model.loss_ppm);
        }
        self.model = model;
        self.window = model.window_limit();
        self.slow_start.set_model(&model, self.scheduled);
    }

    /// Schedules `len` bytes that arrived at `now`; returns when the last
    /// of them may be written, as far as is known now: bytes behind a hole near
    /// their end may go sooner once the next read follows them (`follow_up`).
    pub fn schedule(&mut self, now: Instant, len: usize) -> Instant {
        let mut left = len as u64;
        let mut release = now;
        if len > 0 {
            self.follow_up(now, left);
            if let Some(free) = self.wire_free {
                self.slow_start.before_bytes(now.saturating_duration_since(free), self.scheduled);
            }
        }
        let read = Read {
            start: self.scheduled,
            end: self.scheduled.saturating_add(left),
            // A lone segment, nothing in flight before it (the last bytes left over an RTT
            // ago): lost, only a timeout repairs it.
            alone: left <= MSS && self.wire_free.is_none_or(|w| later(w, self.model.rtt) <= now),
        };
        // A piece larger than the window cannot leave in one round trip.
        let window = self.window.map_or(u64::MAX, |w| w.max(1));
        let wire = self.model.bytes_per_second.map_or(u64::MAX, |rate| {
            ((u128::from(rate) * PIECE_TIME.as_nanos() / 1_000_000_000) as u64).max(MIN_PIECE)
        });
        // One draw per read, not per piece: pieces keep their order, so each
        // extra draw could only push the read's delay up, never down.
        let jitter = self.draw_jitter();
        while left > 0 {
            // Pieces end on multiples of the window: then the byte a window before a piece's
            // end is the last of an earlier piece, and the window rule holds exactly (cut
            // elsewhere, a piece waited for all of the piece holding that byte).
            let to_boundary = window - self.scheduled % window;
            // And on the ends of slow start's rounds, for the same reason.
            // (At least a byte: at the end of the stream's offsets the rounds end there too.)
            let to_round_end =
                self.slow_start.round_end(self.scheduled).map_or(u64::MAX, |e| e.saturating_sub(self.scheduled).max(1));
            let piece = left.min(to_boundary).min(to_round_end).min(wire);
            release = self.schedule_piece(now, piece, jitter, read);
            left -= piece;
        }
        if len == 0 {
            return self.last_release.map_or(now, |r| r.max(now));
        }
        release
    }

    /// Drops the departures whose acknowledgement came by `depart`: bytes waiting on them may
    /// leave by then anyway. Keeps the bookkeeping to a round trip's pieces, however long the
    /// window.
    fn forget_acknowledged(&mut self, depart: Instant) {
        while let Some(&(end, departed)) = self.departures.front() {
            if later(departed, self.model.rtt) > depart {
                break;
            }
            self.acknowledged = end;
            self.departures.pop_front();
        }
    }

    /// The stream offset that must have been acknowledged before the byte ending at `end`
    /// may leave: a window (configured, or what loss leaves) before it, or what slow start's
    /// window allows, whichever holds it back longer.
    fn acknowledged_before(&mut self, end: u64) -> Option<u64> {
        let window = self.window.and_then(|w| end.checked_sub(w)).filter(|&a| a > 0);
        let slow_start = self.slow_start.acknowledged_before(end);
        window.max(slow_start)
    }

    /// A delay offset uniform within ±jitter, in nanoseconds (xorshift:
    /// cheap, and reproducible per seed).
    fn draw_jitter(&mut self) -> i64 {
        let jitter = u64::try_from(self.model.jitter.as_nanos()).unwrap_or(u64::MAX).min(MAX_JITTER_NANOS);
        if jitter == 0 {
            return 0;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % (2 * jitter + 1)) as i64 - jitter as i64
    }

    fn schedule_piece(&mut self, now: Instant, len: u64, jitter: i64, read: Read) -> Instant {
        let end = self.scheduled.saturating_add(len);
        let mut depart = self.wire_free.map_or(now, |free| free.max(now));
        self.forget_acknowledged(depart);
        let acknowledged = self.acknowledged_before(end);
        if let Some(acknowledged) = acknowledged.filter(|&a| a > self.acknowledged) {
            // Our last byte may leave once the bytes the window holds back have been
            // acknowledged: one RTT after the piece holding the last of them left.
            if let Some(&(_, departed)) = self.departures.iter().find(|&&(e, _)| e >= acknowledged) {
                depart = depart.max(later(departed, self.model.rtt));
            }
        }
        let serialise = self.model.bytes_per_second.map_or(Duration::ZERO, |rate| {
            let nanos = u128::from(len) * 1_000_000_000 / u128::from(rate.max(1));
            Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
        });
        let departed = later(depart, serialise);
        self.wire_free = Some(departed);
        if self.window.is_some() || self.slow_start.binds() {
            self.departures.push_back((end, departed));
            // Later bytes wait for later acknowledgements only: what lies before this one's
            // (or before the window, or before slow start's burst) is never looked up again.
            let floor = match self.window {
                Some(w) => end.saturating_sub(w),
                None => self.slow_start.burst_start().unwrap_or(end),
            };
            let needed = acknowledged.unwrap_or(floor);
            while self.departures.front().is_some_and(|&(e, _)| e < needed) {
                self.departures.pop_front();
            }
        } else {
            self.departures.clear();
            self.acknowledged = end;
        }
        let delayed = later(departed, self.model.delay);
        let release = if jitter >= 0 {
            later(delayed, Duration::from_nanos(jitter.unsigned_abs()))
        } else {
            // Never before the bytes crossed the wire, whatever the jitter (validation keeps
            // it within the delay; a model built otherwise must not release bytes early).
            delayed.checked_sub(Duration::from_nanos(jitter.unsigned_abs())).unwrap_or(delayed).max(departed)
        };
        self.last_natural = Some(release);
        // Never before bytes that came earlier: a stream keeps its order.
        let mut at = self.last_release.map_or(release, |last| release.max(last));
        let mut from = self.scheduled;
        while let Some(lost) = self.losses.lost_in(read.start, from, end) {
            // Bytes before the hole go on time; the hole holds the rest.
            if lost > from {
                self.marks.push_back((lost, at));
            }
            let followers = read.end.saturating_sub(lost.saturating_add(MSS)).div_ceil(MSS);
            let stall = loss::stall(followers, read.alone, self.model.rtt);
            let floor = at;
            at = at.max(later(release, stall));
            self.losses.tail = (followers < 3).then_some(Tail {
                from: lost,
                followers,
                departed,
                charged: stall,
                natural: release,
                floor,
            });
            from = lost.saturating_add(1);
        }
        self.last_release = Some(at);
        self.scheduled = end;
        self.marks.push_back((end, at));
        at
    }

    /// New bytes arrived: if the last read ended in a hole, these follow it, and their
    /// acknowledgements may repair it sooner than the probe or timeout it was charged.
    fn follow_up(&mut self, now: Instant, len: u64) {
        let Some(tail) = self.losses.tail.take() else { return };
        let depart = self.wire_free.map_or(now, |free| free.max(now));
        let followers = tail.followers.saturating_add(len.div_ceil(MSS));
        let repair = depart.saturating_duration_since(tail.departed).saturating_add(loss::stall(
            followers,
            false,
            self.model.rtt,
        ));
        if repair >= tail.charged || self.marks.back().is_none_or(|&(end, _)| end <= tail.from) {
            return;
        }
        // Never before the bytes of that read crossed, nor before the bytes ahead of the hole.
        let natural = self.last_natural.unwrap_or(tail.natural);
        let at = later(tail.natural, repair).max(tail.floor).max(natural);
        for mark in self.marks.iter_mut().rev() {
            if mark.0 <= tail.from {
                break;
            }
            mark.1 = mark.1.min(at);
        }
        self.last_release = self.marks.back().map(|&(_, at)| at);
    }

    /// Bytes (stream offset) that may be written by `now`.
    pub fn released_by(&mut self, now: Instant) -> u64 {
        while let Some(&(end, at)) = self.marks.front() {
            if at > now {
                break;
            }
            self.released = end;
            self.last_due = Some(at);
            self.marks.pop_front();
        }
        self.released
    }

    /// Bytes (stream offset) whose release time had passed when last asked.
    pub fn released(&self) -> u64 {
        self.released
    }

    /// When the bytes released last were due, once: the write that sends them says how late
    /// they went.
    pub fn take_due(&mut self) -> Option<Instant> {
        self.last_due.take()
    }

    /// The held releases: (stream offset reached, when), in order.
    #[cfg(test)]
    pub(super) fn marks(&self) -> impl Iterator<Item = (u64, Instant)> + '_ {
        self.marks.iter().copied()
    }

    /// When the next held bytes come due, if any are held.
    pub fn next_release(&self) -> Option<Instant> {
        self.marks.front().map(|&(_, at)| at)
    }
}

/// What a piece's losses need to know of the read it belongs to.
#[derive(Clone, Copy)]
struct Read {
    /// Stream offsets of the read: its segments start at `start`, and those after a hole
    /// up to `end` follow it.
    start: u64,
    end: u64,
    /// The read is one segment with nothing in flight before it.
    alone: bool,
}

#[cfg(test)]
#[path = "delay_tests.rs"]
mod tests;
