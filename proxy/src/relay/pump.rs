//! The forwarding loop. One task drives both directions of a connection
//! from a single `poll_fn`: read what arrived, let the state machine see it,
//! write it on at once (or when an emulated link releases it). Each
//! direction owns one buffer, so memory per connection is bounded whatever
//! the result size; a full buffer stops reading from that side, which is
//! backpressure all the way to the peer's TCP window. Nothing is shared
//! between connections and nothing is locked.

use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::io::ReadBuf;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::drain::DrainWatch;
use super::error::RelayError;
use super::pipe::HalfPipe;
pub use super::tap::{Direction, NoTap, Tap};
use crate::inject::{self, InjectControl};
use crate::protocol::{DecodeError, Peer, Session};

/// How a pump ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    ClientClosed,
    UpstreamClosed,
    IdleTimeout,
    /// Shutting down, and the connection had nothing in flight.
    Drained,
}

/// A connection's place on the emulated link: which settings it follows
/// and who it is, for the scope.
pub struct InjectBinding {
    pub control: Arc<InjectControl>,
    pub conn_id: u64,
    pub user: String,
    pub schema: Option<String>,
}

impl InjectBinding {
    /// Applies the current settings to both directions.
    fn apply(&self, to_upstream: &mut HalfPipe, to_client: &mut HalfPipe) {
        let settings = self.control.current();
        let on = inject::in_scope(&settings, self.conn_id, &self.user, self.schema.as_deref());
        for (pipe, direction, salt) in [(to_upstream, Direction::ToUpstream, 1), (to_client, Direction::ToClient, 2)] {
            let model = if on { inject::model(&settings, direction) } else { inject::OneWayModel::default() };
            pipe.set_link(model, self.conn_id.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ salt);
        }
    }
}

/// Settings of one pump.
pub struct PumpSettings {
    pub buffer_size: usize,
    /// Close after this long without a byte either way; `None` for never.
    pub idle_timeout: Option<Duration>,
    pub inject: Option<InjectBinding>,
}

/// Forwards until one side closes, the connection idles out, or shutdown
/// finds it with nothing in flight.
pub async fn pump<T: Tap>(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    session: &mut Session,
    tap: &mut T,
    settings: &PumpSettings,
    shutdown: &DrainWatch,
) -> Result<Ended, RelayError> {
    let mut to_upstream = HalfPipe::new(settings.buffer_size);
    let mut to_client = HalfPipe::new(settings.buffer_size);
    let mut draining = false;
    // Re-armed lazily: activity only moves `last_activity`; the timer is
    // reset when it fires early, not on every read.
    let idle_timeout = settings.idle_timeout.unwrap_or(Duration::from_secs(86400 * 365));
    let mut last_activity = Instant::now();
    let idle = tokio::time::sleep_until(last_activity + idle_timeout);
    tokio::pin!(idle);

    let mut held_off = false;
    let mut link_generation = 0;

    poll_fn(|cx| loop {
        let mut progress = false;
        let mut read = None;
        // One atomic load per turn; the settings are read only when they changed.
        if let Some(binding) = &settings.inject {
            let generation = binding.control.generation();
            if generation != link_generation {
                link_generation = generation;
                binding.apply(&mut to_upstream, &mut to_client);
            }
        }

        // Client → upstream. Stop reading while too many pipelined commands
        // are unanswered; answers will wake us.
        progress |= to_upstream.poll_step(
            cx,
            (&mut *client, Peer::Client),
            (&mut *upstream, Peer::Upstream),
            session.accepts_commands(),
            |scanner, bytes, arrived, released| {
                last_activity = arrived;
                read = Some(Direction::ToUpstream);
                tap.arrived(Direction::ToUpstream, arrived, released, bytes.len());
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
            |scanner, bytes, arrived, released| {
                last_activity = arrived;
                read = Some(Direction::ToClient);
                tap.arrived(Direction::ToClient, arrived, released, bytes.len());
                scanner.scan(bytes, &mut session.upstream(tap))
            },
        )?;
        if let Some(direction) = read.take() {
            tap.scanned(direction, client, upstream);
        }
        // A full buffer the client does not drain: we have stopped reading upstream for it.
        let held = to_client.held_off_by_peer();
        if held != held_off {
            held_off = held;
            tap.held_off(held, Instant::now());
        }
        if to_client.read_closed && to_client.is_empty() {
            if !to_client.scanner.at_boundary() {
                return Poll::Ready(Err(DecodeError::Truncated(Peer::Upstream).into()));
            }
            return Poll::Ready(Ok(Ended::UpstreamClosed));
        }

        if !draining && shutdown.poll_started(cx) {
            draining = true;
        }
        if draining
            && session.is_idle()
            && to_upstream.scanner.at_boundary()
            && to_upstream.is_empty()
            && to_client.is_empty()
        {
            // What the client already sent is in flight too: if bytes are
            // waiting, take them first. Pending or closed: nothing waits.
            let mut probe = [0u8; 1];
            match client.poll_peek(cx, &mut ReadBuf::new(&mut probe)) {
                Poll::Ready(Ok(n)) if n > 0 => progress = true,
                _ => return Poll::Ready(Ok(Ended::Drained)),
            }
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
