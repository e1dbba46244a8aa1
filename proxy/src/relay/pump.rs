//! The forwarding loop. One task drives both directions of a connection
//! from a single `poll_fn`: read what arrived, let the state machine see it,
//! write it on at once. Each direction owns one fixed buffer, so memory per
//! connection is two buffers whatever the result size; a full buffer stops
//! reading from that side, which is backpressure all the way to the peer's
//! TCP window. Nothing is shared between connections and nothing is locked.

use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::error::RelayError;
use crate::protocol::handshake::HandshakeResponse41;
use crate::protocol::{DecodeError, Observer, PacketScanner, Peer, Session};

/// Which way bytes flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    ToUpstream,
    ToClient,
}

/// An observer that is also told when bytes arrive. Called on the
/// forwarding path: implementations must be quick and must not block.
pub trait Tap: Observer {
    /// `len` bytes were read at `now`, before the state machine sees them.
    fn arrived(&mut self, _direction: Direction, _now: Instant, _len: usize) {}
    /// The handshake was relayed: who connected, as whom.
    fn handshake(&mut self, _client: SocketAddr, _response: &HandshakeResponse41) {}
    /// Bytes that arrived were scanned; the sockets may be sampled.
    fn scanned(&mut self, _direction: Direction, _client: &TcpStream, _upstream: &TcpStream) {}
    /// rttscope stopped (`true`) or resumed reading upstream because its
    /// buffer toward the client was full: the client is not keeping up.
    fn held_off(&mut self, _held: bool, _now: Instant) {}
}

/// A tap that records nothing.
pub struct NoTap;
impl Observer for NoTap {}
impl Tap for NoTap {}

/// How a pump ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    ClientClosed,
    UpstreamClosed,
    IdleTimeout,
    /// Shutting down, and the connection had nothing in flight.
    Drained,
}

/// Bytes read from one side and not yet written to the other.
struct HalfPipe {
    buf: Box<[u8]>,
    /// Next byte to write.
    start: usize,
    /// End of the bytes read.
    end: usize,
    scanner: PacketScanner,
    read_closed: bool,
}

impl HalfPipe {
    fn new(size: usize) -> HalfPipe {
        HalfPipe { buf: vec![0; size].into_boxed_slice(), start: 0, end: 0, scanner: PacketScanner::new(), read_closed: false }
    }

    fn can_read(&self) -> bool {
        !self.read_closed && self.end < self.buf.len()
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// No room to read into until the other side takes some.
    fn is_full(&self) -> bool {
        self.end == self.buf.len()
    }

    /// Reads what `from` has into free space, lets `scan` see the new bytes
    /// before anyone else does, then writes what it can to `to`. Returns
    /// whether anything moved.
    fn poll_step(
        &mut self,
        cx: &mut Context<'_>,
        (from, from_peer): (&mut TcpStream, Peer),
        (to, to_peer): (&mut TcpStream, Peer),
        may_read: bool,
        scan: impl FnOnce(&mut PacketScanner, &[u8]) -> Result<(), DecodeError>,
    ) -> Result<bool, RelayError> {
        let mut moved = false;
        if may_read && self.can_read() {
            let mut rb = ReadBuf::new(&mut self.buf[self.end..]);
            if let Poll::Ready(read) = Pin::new(from).poll_read(cx, &mut rb) {
                read.map_err(|e| RelayError::io(from_peer, e))?;
                moved = true;
                let n = rb.filled().len();
                if n == 0 {
                    self.read_closed = true;
                } else {
                    let new = self.end..self.end + n;
                    self.end += n;
                    scan(&mut self.scanner, &self.buf[new])?;
                }
            }
        }
        if !self.is_empty()
            && let Poll::Ready(written) = Pin::new(to).poll_write(cx, &self.buf[self.start..self.end])
        {
            let n = written.map_err(|e| RelayError::io(to_peer, e))?;
            if n == 0 {
                return Err(RelayError::io(to_peer, io::ErrorKind::WriteZero.into()));
            }
            moved = true;
            self.start += n;
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            }
        }
        Ok(moved)
    }
}

/// Settings of one pump.
pub struct PumpSettings {
    pub buffer_size: usize,
    /// Close after this long without a byte either way; `None` for never.
    pub idle_timeout: Option<Duration>,
}

/// Forwards until one side closes, the connection idles out, or shutdown
/// finds it with nothing in flight.
pub async fn pump<T: Tap>(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    session: &mut Session,
    tap: &mut T,
    settings: &PumpSettings,
    shutdown: &CancellationToken,
) -> Result<Ended, RelayError> {
    let mut to_upstream = HalfPipe::new(settings.buffer_size);
    let mut to_client = HalfPipe::new(settings.buffer_size);
    let shutdown = shutdown.cancelled();
    tokio::pin!(shutdown);
    let mut draining = false;
    // Re-armed lazily: activity only moves `last_activity`; the timer is
    // reset when it fires early, not on every read.
    let idle_timeout = settings.idle_timeout.unwrap_or(Duration::from_secs(86400 * 365));
    let mut last_activity = Instant::now();
    let idle = tokio::time::sleep_until(last_activity + idle_timeout);
    tokio::pin!(idle);

    let mut held_off = false;

    poll_fn(|cx| loop {
        let mut progress = false;
        let mut read = None;

        // Client → upstream. Stop reading while too many pipelined commands
        // are unanswered; answers will wake us.
        progress |= to_upstream.poll_step(
            cx,
            (&mut *client, Peer::Client),
            (&mut *upstream, Peer::Upstream),
            session.accepts_commands(),
            |scanner, bytes| {
                let now = Instant::now();
                last_activity = now;
                read = Some(Direction::ToUpstream);
                tap.arrived(Direction::ToUpstream, now, bytes.len());
                scanner.scan(bytes, &mut session.client(tap))
            },
        )?;
        if let Some(direction) = read.take() {
            tap.scanned(direction, client, upstream);
        }
        if to_upstream.read_closed && to_upstream.is_empty() {
            return Poll::Ready(Ok(Ended::ClientClosed));
        }

        // Upstream → client.
        progress |= to_client.poll_step(
            cx,
            (&mut *upstream, Peer::Upstream),
            (&mut *client, Peer::Client),
            true,
            |scanner, bytes| {
                let now = Instant::now();
                last_activity = now;
                read = Some(Direction::ToClient);
                tap.arrived(Direction::ToClient, now, bytes.len());
                scanner.scan(bytes, &mut session.upstream(tap))
            },
        )?;
        if let Some(direction) = read.take() {
            tap.scanned(direction, client, upstream);
        }
        // A full buffer toward the client means we have stopped reading upstream.
        let full = to_client.is_full();
        if full != held_off {
            held_off = full;
            tap.held_off(full, Instant::now());
        }
        if to_client.read_closed && to_client.is_empty() {
            if !to_client.scanner.at_boundary() {
                return Poll::Ready(Err(DecodeError::Truncated(Peer::Upstream).into()));
            }
            return Poll::Ready(Ok(Ended::UpstreamClosed));
        }

        if !draining && shutdown.as_mut().poll(cx).is_ready() {
            draining = true;
        }
        if draining
            && session.is_idle()
            && to_upstream.scanner.at_boundary()
            && to_upstream.is_empty()
            && to_client.is_empty()
        {
            return Poll::Ready(Ok(Ended::Drained));
        }

        if idle.as_mut().poll(cx).is_ready() {
            let deadline = last_activity + idle_timeout;
            if Instant::now() >= deadline {
                return Poll::Ready(Ok(Ended::IdleTimeout));
            }
            idle.as_mut().reset(deadline);
            progress = true;
        }

        if !progress {
            return Poll::Pending;
        }
    })
    .await
}
