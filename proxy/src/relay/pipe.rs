//! One direction of a connection: the bytes read from one side and not yet
//! written to the other, in one buffer. Normally the buffer is fixed and
//! bytes go on as soon as they are read. On an emulated link a delay line
//! holds them until their release time, and the buffer may grow to hold
//! the emulated pipe (bounded); when it is full, reading stops — the
//! sending side's TCP window closes, nothing is dropped.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::error::RelayError;
use super::leg::Leg;
use super::wake_flag::WakeFlag;
use crate::inject::{DelayLine, OneWayModel, timer};
use crate::protocol::{PacketScanner, Peer};
use crate::record::{micros, now_us};

pub(super) struct HalfPipe {
    buf: Vec<u8>,
    /// The buffer size when no link is emulated.
    base: usize,
    /// How large `buf` may grow (only an emulated link grows it).
    capacity: usize,
    /// Next byte to write.
    start: usize,
    /// End of the bytes read.
    end: usize,
    pub scanner: PacketScanner,
    pub read_closed: bool,
    /// Bytes written so far (a stream offset, to compare with the delay line's).
    written: u64,
    /// Bytes read so far.
    read: u64,
    line: Option<DelayLine>,
    /// The release the timer is already set for.
    armed: Option<Armed>,
    /// Released bytes are waiting for the peer to take them.
    peer_slow: bool,
    /// Written bytes the destination leg may hold until flushed.
    unflushed: bool,
    /// Bytes were left waiting after the last write: the write that takes them is timed.
    left_waiting: bool,
    /// The read side returned `Pending`, so its waker is registered: it is not polled again
    /// until it wakes the task ([`new_wake_up`](Self::new_wake_up)).
    read_armed: bool,
    /// Reads are polled with this flag's waker: it tells the next wake-up whether this
    /// side woke the task.
    read_flag: Option<WakeFlag>,
    /// A read error met while reading on after bytes had come: returned by the next fill,
    /// once those bytes are on their way (a server's last ERR before its RST, say).
    deferred_error: Option<io::Error>,
    last_late_write: Option<Instant>,
    /// Since when reading has waited because a read filled the buffer with bytes the emulated
    /// link holds: the link's doing (its sender's window closes meanwhile) until a write
    /// makes room. Such waits add up in `line_stalled_us` until the next read tells them.
    line_full_since: Option<Instant>,
    line_stalled_us: u64,
    /// How late the last bytes the emulated link released went out, µs, until the pump
    /// takes it: the link's lateness (negative: early, its timer having fired ahead by more
    /// than the wake-up took), then the wait for a peer that was not taking them.
    released_late_us: Option<(i64, u64)>,
    /// On an emulated link, since when released bytes have waited for a peer that is not
    /// taking them (a client reading a large result slower than the link lets it go): from
    /// then on their lateness is the peer's, not the link's. Cleared once it takes all.
    peer_held_since: Option<std::time::Instant>,
    /// Where bytes beyond `base` are accounted for, across connections.
    budget: Arc<BufferBudget>,
}

/// The process-wide budget of buffer bytes beyond every pipe's fixed size (what emulated
/// links hold in flight), and the total allocated, for the gauge. Past the budget a pipe
/// stops growing, so its connection stops reading: backpressure, not memory.
#[derive(Debug)]
pub struct BufferBudget {
    limit: u64,
    extra: AtomicU64,
    total: AtomicU64,
}

impl BufferBudget {
    /// A budget of `limit` bytes of buffer growth beyond each pipe's base size, across connections.
    pub fn new(limit: u64) -> BufferBudget {
        BufferBudget { limit, extra: AtomicU64::new(0), total: AtomicU64::new(0) }
    }

    /// Takes `n` bytes beyond a fixed size, if the budget has them.
    fn try_take(&self, n: u64) -> bool {
        self.extra
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(n).filter(|&after| after <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, n: u64) {
        self.extra.fetch_sub(n, Ordering::Relaxed);
    }

    /// Bytes all pipes' buffers hold now.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// The most bytes that may be taken beyond the fixed sizes (`limits.buffer_budget`).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes taken beyond the fixed sizes now.
    pub fn extra(&self) -> u64 {
        self.extra.load(Ordering::Relaxed)
    }
}

/// A zeroed buffer whose pages are in memory now. `vec![0; n]` asks the allocator for
/// zeroed memory, which it may hand out untouched: the pages would then become resident
/// only when a large result first fills them, and RSS would climb for as long as
/// connections keep meeting their first large result (the soak saw minutes of it). Written
/// here, each connection's memory is taken at login and stays what it is.
fn resident(size: usize) -> Vec<u8> {
    let mut buf = vec![0; size];
    // A byte per page, written with a value the optimiser cannot see is the zero already
    // there, so the write is neither dropped nor folded into the zeroed allocation.
    for at in (0..size).step_by(4096) {
        buf[at] = std::hint::black_box(0);
    }
    buf
}

/// Bytes just read: where they are in the buffer, when they arrived, and when they go
/// on (later only on an emulated link), µs on the recording's clock ([`micros`]).
pub(super) struct Fresh {
    pub range: std::ops::Range<usize>,
    pub arrived_us: u64,
    pub released_us: u64,
    /// How long reading had waited before this read because the emulated link's bytes
    /// filled the buffer, µs: time the link added besides `released_us - arrived_us`.
    pub stalled_us: u64,
    /// The read stopped because the buffer was full, not because the socket was empty: the
    /// bytes had been waiting in the socket for rttscope, a buffer's worth at least.
    pub filled: bool,
}

impl HalfPipe {
    pub fn new(size: usize, budget: Arc<BufferBudget>) -> HalfPipe {
        budget.total.fetch_add(size as u64, Ordering::Relaxed);
        HalfPipe {
            buf: resident(size),
            base: size,
            capacity: size,
            start: 0,
            end: 0,
            scanner: PacketScanner::new(),
            read_closed: false,
            written: 0,
            read: 0,
            line: None,
            armed: None,
            peer_slow: false,
            unflushed: false,
            left_waiting: false,
            read_armed: false,
            read_flag: None,
            deferred_error: None,
            last_late_write: None,
            line_full_since: None,
            line_stalled_us: 0,
            released_late_us: None,
            peer_held_since: None,
            budget,
        }
    }

    /// Back to the fixed size once empty, so a large transfer's buffer is not kept.
    fn shrink(&mut self) {
        let extra = self.buf.len().saturating_sub(self.base);
        if extra > 0 && self.start == self.end {
            self.buf = resident(self.base);
            (self.start, self.end) = (0, 0);
            self.budget.give_back(extra as u64);
            self.budget.total.fetch_sub(extra as u64, Ordering::Relaxed);
        }
    }

    /// When bytes that had to wait (for a slow peer, or on an emulated link) last went out.
    /// Bytes written as soon as they are read are the read's activity; these are later.
    pub fn last_late_write(&self) -> Option<Instant> {
        self.last_late_write
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end && !self.unflushed
    }

    /// Full, and the peer is not taking what is ready: it is the peer that
    /// holds us off, not the emulated link.
    pub fn held_off_by_peer(&self) -> bool {
        self.end == self.buf.len() && self.peer_slow
    }

    /// Puts this direction on an emulated link (or takes it off, once the
    /// bytes already held have gone). `base` is the normal buffer size.
    pub fn set_link(&mut self, model: OneWayModel, seed: u64) {
        if model.is_active() {
            self.capacity = crate::inject::pipe_capacity(&model, self.base);
            match &mut self.line {
                Some(line) => line.set_model(model),
                // Bytes read before the line existed go on at once.
                None => self.line = Some(DelayLine::new(model, self.written + (self.end - self.start) as u64, seed)),
            }
        } else if let Some(line) = &mut self.line {
            // Bytes already scheduled keep their release times; the line
            // goes once they have.
            line.set_model(model);
        }
    }

    /// Makes room at the end: slide unwritten bytes to the front, or grow
    /// toward the emulated pipe's size.
    fn make_room(&mut self) {
        if self.end < self.buf.len() {
            return;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        } else if self.buf.len() < self.capacity {
            let grown = (self.buf.len() * 2).min(self.capacity);
            // Within the process's budget, or not at all: then reading waits.
            let more = (grown - self.buf.len()) as u64;
            if !self.budget.try_take(more) {
                return;
            }
            self.budget.total.fetch_add(more, Ordering::Relaxed);
            self.buf.resize(grown, 0);
        }
    }

    /// Bytes already read with the handshake: they go on first, as if just read.
    pub fn seed(&mut self, bytes: &[u8]) -> Option<Fresh> {
        if bytes.is_empty() {
            return None;
        }
        if self.buf.len() < bytes.len() {
            // Never seen in practice (a few bytes at most follow a login): accounted
            // beyond the budget rather than dropped.
            let more = (bytes.len() - self.buf.len()) as u64;
            self.budget.extra.fetch_add(more, Ordering::Relaxed);
            self.budget.total.fetch_add(more, Ordering::Relaxed);
            self.buf.resize(bytes.len(), 0);
        }
        self.buf[..bytes.len()].copy_from_slice(bytes);
        (self.start, self.end) = (0, bytes.len());
        let now = now_us();
        Some(Fresh { range: 0..bytes.len(), arrived_us: now, released_us: now, stalled_us: 0, filled: false })
    }

    /// The task was woken: the read is polled again if it was armed and is what woke it
    /// (or its flag is new: nothing would wake it).
    #[inline]
    pub fn new_wake_up(&mut self, task: &Waker) {
        if WakeFlag::poll_again(&mut self.read_flag, task) {
            self.read_armed = false;
        }
    }

    /// Reads what `from` has into free space (unless `may_read` is false: the state
    /// machine has too much in flight). Returns what was read, if anything, for the
    /// caller to scan. `moved` is set when the pump must turn again for this side: the
    /// read made progress and did not end with the side's waker registered.
    ///
    /// Off an emulated link, it reads on until the socket has nothing more (or the buffer
    /// is full): the read that finds nothing registers the waker now, so the pump needs
    /// no second turn just to arm it — a turn is most of what a round trip costs here.
    ///
    /// Inlined for the side that has nothing to do (half of the calls: the side that did
    /// not wake the task); the read itself is out of line. Always: a plain `#[inline]` was
    /// no longer taken (fat LTO), and every call paid a large function's prologue and
    /// epilogue to learn that there was nothing to read.
    #[inline(always)]
    pub fn poll_fill(
        &mut self,
        cx: &mut Context<'_>,
        from: (&mut Leg, Peer),
        may_read: bool,
        moved: &mut bool,
    ) -> Result<Option<Fresh>, RelayError> {
        if self.deferred_error.is_none() && (!may_read || self.read_closed || self.read_armed) {
            return Ok(None);
        }
        self.fill(cx, from, may_read, moved)
    }

    #[inline(never)]
    fn fill(
        &mut self,
        cx: &mut Context<'_>,
        (from, from_peer): (&mut Leg, Peer),
        may_read: bool,
        moved: &mut bool,
    ) -> Result<Option<Fresh>, RelayError> {
        if let Some(e) = self.deferred_error.take() {
            return Err(RelayError::io(from_peer, e));
        }
        if !may_read || self.read_closed || self.read_armed {
            return Ok(None);
        }
        // A large transfer is over (nothing buffered, nothing held on the emulated link):
        // give its buffer back. The bytes of the last read were scanned by now.
        if self.buf.len() > self.base && self.line.as_ref().is_none_or(|l| l.next_release().is_none()) {
            self.shrink();
        }
        self.make_room();
        if self.end == self.buf.len() {
            return Ok(None);
        }
        let start = self.end;
        if !self.read_once(cx, from).map_err(|e| RelayError::io(from_peer, e))? {
            return Ok(None);
        }
        *moved = true;
        if self.end == start {
            // End of stream, nothing before it.
            return Ok(None);
        }
        let (arrived_us, released_us, stalled_us) = match &mut self.line {
            Some(line) => {
                // The delay line schedules by `Instant` (tokio's, which tests may pause).
                let arrived = Instant::now();
                let released = line.schedule(arrived.into_std(), self.end - start);
                let stalled = std::mem::take(&mut self.line_stalled_us);
                // Full of bytes the link has yet to release (not of bytes a slow peer left):
                // the link holds the sender back from now until a write makes room. Released
                // bytes still waiting mean the peer is what holds the room, however its last
                // write went. Not full (or grown since): reading goes on, and an earlier mark
                // is no wait.
                let peer_behind = self.peer_slow || line.released() > self.written;
                self.line_full_since = (self.end == self.buf.len() && !peer_behind).then_some(arrived);
                (micros(arrived), micros(Instant::from_std(released)), stalled)
            }
            None => {
                let arrived_us = now_us();
                loop {
                    if self.read_closed || self.end == self.buf.len() {
                        break;
                    }
                    match self.read_once(cx, from) {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(e) => {
                            self.deferred_error = Some(e);
                            break;
                        }
                    }
                }
                // Armed, or closed: nothing more to read on this side until woken.
                *moved = !(self.read_armed || self.read_closed);
                (arrived_us, arrived_us, 0)
            }
        };
        let filled = self.end == self.buf.len();
        Ok(Some(Fresh { range: start..self.end, arrived_us, released_us, stalled_us, filled }))
    }

    /// Whether this side could read and its waker is not registered: the pump must turn
    /// again before it waits. A full buffer waits for its write instead (registered, or
    /// timed on an emulated link), and growth beyond it is never retried here.
    pub fn wants_read(&self, may_read: bool) -> bool {
        may_read && !self.read_armed && !self.read_closed && (self.end < self.buf.len() || self.start > 0)
    }

    /// One read into the free space: false when nothing was there (the waker is then
    /// registered); end of stream sets `read_closed`. Inlined into both of `fill`'s reads:
    /// as a call, its register saves and restores cost some 36 instructions a round trip.
    #[inline(always)]
    fn read_once(&mut self, cx: &mut Context<'_>, from: &mut Leg) -> io::Result<bool> {
        let mut rb = ReadBuf::new(&mut self.buf[self.end..]);
        let polled = match &self.read_flag {
            Some(flag) => Pin::new(from).poll_read(&mut Context::from_waker(flag.waker()), &mut rb),
            None => Pin::new(from).poll_read(cx, &mut rb),
        };
        let Poll::Ready(read) = polled else {
            self.read_armed = true;
            return Ok(false);
        };
        read?;
        let n = rb.filled().len();
        if n == 0 {
            self.read_closed = true;
        }
        self.end += n;
        self.read += n as u64;
        Ok(true)
    }

    /// The bytes read and not yet written.
    pub fn unsent(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// The bytes just read (valid until the next fill).
    #[inline]
    pub fn fresh_bytes(&self, fresh: &Fresh) -> &[u8] {
        &self.buf[fresh.range.clone()]
    }

    /// Takes the first `n` bytes of `fresh` out of the stream: they are never written
    /// (rttscope answers them itself). Only when nothing read before them waits to be
    /// written, else nothing is taken and it returns false.
    pub fn withhold(&mut self, fresh: &Fresh, n: usize) -> bool {
        if self.start != fresh.range.start || n > fresh.range.len() {
            return false;
        }
        // Counted as written: the delay line's offsets stay those of the stream read.
        self.start += n;
        self.written += n as u64;
        true
    }

    /// Lets `scan` see bytes just read (valid until the next fill).
    pub fn scan<T>(&mut self, fresh: &Fresh, scan: impl FnOnce(&mut PacketScanner, &[u8]) -> T) -> T {
        scan(&mut self.scanner, &self.buf[fresh.range.clone()])
    }

    /// Like [`scan`](Self::scan), with the bytes writable (to renumber packets before
    /// they are written): call it before [`poll_send`](Self::poll_send).
    pub fn scan_mut<T>(&mut self, fresh: &Fresh, scan: impl FnOnce(&mut PacketScanner, &mut [u8]) -> T) -> T {
        scan(&mut self.scanner, &mut self.buf[fresh.range.clone()])
    }

    /// Writes what is ready (on an emulated link, what is released) to `to`, and
    /// flushes what the leg holds back (TLS records, compressed frames). Returns
    /// whether the pump must turn again for it: bytes were written and some are left
    /// (the write's waker is not registered). A read the room made allows (a full buffer
    /// had stopped it) is asked for by the pump's end-of-turn check, `wants_read`.
    ///
    /// Inlined for a pipe with nothing to write or flush (half of the calls); the write
    /// itself is out of line. Always, as [`HalfPipe::poll_fill`].
    #[inline(always)]
    pub fn poll_send(&mut self, cx: &mut Context<'_>, to: (&mut Leg, Peer)) -> Result<bool, RelayError> {
        if self.start == self.end && !self.unflushed && self.line.is_none() {
            self.peer_slow = false;
            self.left_waiting = false;
            return Ok(false);
        }
        self.send(cx, to)
    }

    #[inline(never)]
    fn send(&mut self, cx: &mut Context<'_>, (to, to_peer): (&mut Leg, Peer)) -> Result<bool, RelayError> {
        let mut moved = false;
        let ready = self.ready(cx);
        self.peer_slow = false;
        if ready > 0 {
            match Pin::new(&mut *to).poll_write(cx, &self.buf[self.start..self.start + ready]) {
                Poll::Ready(written) => {
                    let n = written.map_err(|e| RelayError::io(to_peer, e))?;
                    if n == 0 {
                        return Err(RelayError::io(to_peer, io::ErrorKind::WriteZero.into()));
                    }
                    moved = true;
                    if let Some(since) = self.line_full_since.take() {
                        // Room again: the wait for it was the link's.
                        self.line_stalled_us += Instant::now().saturating_duration_since(since).as_micros() as u64;
                    }
                    if self.left_waiting {
                        // Off the fast path: only bytes that waited cost a clock read.
                        self.last_late_write = Some(Instant::now());
                    }
                    self.start += n;
                    self.written += n as u64;
                    self.note_lateness();
                    if n == ready {
                        self.peer_held_since = None;
                    }
                    self.unflushed = to.may_hold_writes();
                    if self.start == self.end {
                        // Nothing waits; the next read starts at the front. Bytes
                        // just read stay in place for their scan (a shrink replaces the
                        // buffer, so only between transfers: not with fresh bytes).
                        self.start = 0;
                        self.end = 0;
                        // No read came while room was made: the server had sent all it had,
                        // and that wait is the last bytes' hold, told with them.
                        self.line_stalled_us = 0;
                    }
                }
                Poll::Pending => self.peer_not_taking(),
            }
        }
        self.left_waiting = self.start != self.end;
        // Another turn for bytes left to write. A read the freed room now allows is the
        // pump's end-of-turn check's to ask for (`wants_read`).
        let moved = moved && self.left_waiting;
        if self.unflushed {
            match Pin::new(to).poll_flush(cx) {
                Poll::Ready(flushed) => {
                    flushed.map_err(|e| RelayError::io(to_peer, e))?;
                    self.unflushed = false;
                }
                Poll::Pending => self.peer_not_taking(),
            }
        }
        Ok(moved)
    }

    /// The peer did not take what was ready. On an emulated link, when it started not to
    /// (a clock read only then: a slow peer, never the fast path).
    fn peer_not_taking(&mut self) {
        self.peer_slow = true;
        if self.line.is_some() && self.peer_held_since.is_none() {
            self.peer_held_since = Some(std::time::Instant::now());
        }
    }

    /// On an emulated link, once every byte it held is written: how long after (or before) the
    /// last of them was due (a clock read per drained link, never on the fast path), split at the
    /// moment the peer stopped taking released bytes — before it, the link's lateness (its
    /// timers, the relay); after it, the peer's own pace. The last bytes are what a command
    /// waits for; earlier ones' lateness moves nothing the schedule fixes.
    fn note_lateness(&mut self) {
        let Some(line) = &mut self.line else { return };
        if self.written < line.released() || line.next_release().is_some() {
            return;
        }
        if let Some(due) = line.take_due() {
            let now = std::time::Instant::now();
            let held_from = self.peer_held_since.map_or(now, |since| since.clamp(due.min(now), now));
            let micros = |d: std::time::Duration| d.as_micros() as u64;
            // The timer fires ahead of the release by the wake-up it expects; a quicker wake-up
            // sends the bytes that much early, and the client has them then.
            let link = match held_from.checked_duration_since(due) {
                Some(late) => i64::try_from(micros(late)).unwrap_or(i64::MAX),
                None => -i64::try_from(micros(due - held_from)).unwrap_or(i64::MAX),
            };
            self.released_late_us = Some((link, micros(now.saturating_duration_since(held_from))));
        }
    }

    /// How late the emulated link's last released bytes went out, once: `(link_us, peer_us)`,
    /// the link's lateness (negative: early), then how long the peer took to take them.
    pub fn take_released_late(&mut self) -> Option<(i64, u64)> {
        self.released_late_us.take()
    }

    /// Bytes that may be written now. On an emulated link, only released
    /// ones; if some are held, the timer wakes us when the next are due.
    fn ready(&mut self, cx: &mut Context<'_>) -> usize {
        let buffered = self.end - self.start;
        let Some(line) = &mut self.line else { return buffered };
        let now = std::time::Instant::now();
        // Once the timer has fired, the bytes it fired for are due: it fires
        // early by the wake-up chain's latency so that this poll comes when
        // they are. Before that, only what is due by now goes.
        let due_by = match &mut self.armed {
            Some(armed) if now >= armed.fires => {
                if !armed.observed {
                    armed.observed = true;
                    timer::WAKE_LATENCY.observe(armed.fires, now);
                }
                now.max(armed.release)
            }
            _ => now,
        };
        let released = line.released_by(due_by);
        let ready = buffered.min(released.saturating_sub(self.written) as usize);
        match line.next_release() {
            Some(next) if ready < buffered && self.armed.as_ref().is_none_or(|a| a.release != next) => {
                // Not in the past: a sample must not count time before arming. Never earlier
                // than a quarter of the delay: on a quick wake-up the bytes leave that early.
                let lead = timer::WAKE_LATENCY.lead().min(line.model().delay / 4);
                let fires = next.checked_sub(lead).unwrap_or(next).max(now);
                self.armed = Some(Armed { release: next, fires, observed: false });
                timer::wake_at(fires, cx.waker().clone());
            }
            // Taken off the link and everything held has gone: back to the
            // fast path, and back to the normal buffer once it is empty.
            None if !line.model().is_active() => {
                self.line = None;
                self.capacity = self.base;
                self.shrink();
            }
            _ => {}
        }
        ready
    }
}

/// The timer set for a held release.
struct Armed {
    release: std::time::Instant,
    /// When the timer fires: early by the wake-up chain's latency.
    fires: std::time::Instant,
    /// Whether this wake-up was already counted as a sample of the chain.
    observed: bool,
}

impl Drop for HalfPipe {
    fn drop(&mut self) {
        let extra = self.buf.len().saturating_sub(self.base) as u64;
        self.budget.give_back(extra);
        self.budget.total.fetch_sub(self.buf.len() as u64, Ordering::Relaxed);
    }
}
