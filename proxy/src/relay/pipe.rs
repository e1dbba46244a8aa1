//! One direction of a connection: the bytes read from one side and not yet
//! written to the other, in one buffer. Normally the buffer is fixed and
//! bytes go on as soon as they are read. On an emulated link a delay line
//! holds them until their release time, and the buffer may grow to hold
//! the emulated pipe (bounded); when it is full, reading stops — the
//! sending side's TCP window closes, nothing is dropped.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::error::RelayError;
use crate::inject::{timer, DelayLine, OneWayModel};
use crate::protocol::{DecodeError, PacketScanner, Peer};

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
    line: Option<DelayLine>,
    /// The release the timer is already set for.
    armed: Option<Armed>,
    /// Released bytes are waiting for the peer to take them.
    peer_slow: bool,
}

impl HalfPipe {
    pub fn new(size: usize) -> HalfPipe {
        HalfPipe {
            buf: vec![0; size],
            base: size,
            capacity: size,
            start: 0,
            end: 0,
            scanner: PacketScanner::new(),
            read_closed: false,
            written: 0,
            line: None,
            armed: None,
            peer_slow: false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
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
            self.buf.resize(grown, 0);
        }
    }

    /// Reads what `from` has into free space, writes what is released to
    /// `to`, then lets `scan` see the new bytes (with their arrival and
    /// release times). Writing first keeps recording off the bytes' way;
    /// the state machine still sees every chunk before this task reads
    /// anything else, so it is never behind what the peers have seen of
    /// each other. Returns whether anything moved.
    pub fn poll_step(
        &mut self,
        cx: &mut Context<'_>,
        (from, from_peer): (&mut TcpStream, Peer),
        (to, to_peer): (&mut TcpStream, Peer),
        may_read: bool,
        scan: impl FnOnce(&mut PacketScanner, &[u8], Instant, Instant) -> Result<(), DecodeError>,
    ) -> Result<bool, RelayError> {
        let mut moved = false;
        let mut fresh = None;
        if may_read && !self.read_closed {
            self.make_room();
        }
        if may_read && !self.read_closed && self.end < self.buf.len() {
            let mut rb = ReadBuf::new(&mut self.buf[self.end..]);
            if let Poll::Ready(read) = Pin::new(from).poll_read(cx, &mut rb) {
                read.map_err(|e| RelayError::io(from_peer, e))?;
                moved = true;
                let n = rb.filled().len();
                if n == 0 {
                    self.read_closed = true;
                } else {
                    let arrived = Instant::now();
                    let released = match &mut self.line {
                        Some(line) => Instant::from_std(line.schedule(arrived.into_std(), n)),
                        None => arrived,
                    };
                    fresh = Some((self.end..self.end + n, arrived, released));
                    self.end += n;
                }
            }
        }
        let ready = self.ready(cx);
        self.peer_slow = false;
        if ready > 0 {
            match Pin::new(to).poll_write(cx, &self.buf[self.start..self.start + ready]) {
                Poll::Ready(written) => {
                    let n = written.map_err(|e| RelayError::io(to_peer, e))?;
                    if n == 0 {
                        return Err(RelayError::io(to_peer, io::ErrorKind::WriteZero.into()));
                    }
                    moved = true;
                    self.start += n;
                    self.written += n as u64;
                    if self.start == self.end {
                        // Nothing waits; the next read starts at the front. The
                        // bytes just read are still in place for the scan below.
                        self.start = 0;
                        self.end = 0;
                    }
                }
                Poll::Pending => self.peer_slow = true,
            }
        }
        if let Some((new, arrived, released)) = fresh {
            scan(&mut self.scanner, &self.buf[new], arrived, released)?;
        }
        Ok(moved)
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
                // Not in the past: a sample must not count time before arming.
                let fires = next.checked_sub(timer::WAKE_LATENCY.lead()).unwrap_or(next).max(now);
                self.armed = Some(Armed { release: next, fires, observed: false });
                timer::wake_at(fires, cx.waker().clone());
            }
            // Taken off the link and everything held has gone: back to the
            // fast path, and back to the normal buffer once it is empty.
            None if !line.model().is_active() => {
                self.line = None;
                self.capacity = self.base;
                if buffered == 0 && self.buf.len() > self.base {
                    self.buf = vec![0; self.base];
                    (self.start, self.end) = (0, 0);
                }
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
