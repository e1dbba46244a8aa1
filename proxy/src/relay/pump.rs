//! The forwarding loop. One task drives both directions of a connection
//! from a single `poll_fn`: read what arrived, write it on at once (or when an
//! emulated link releases it), and let the state machine see it. Each
//! direction owns one buffer, so memory per connection is bounded whatever
//! the result size; a full buffer stops reading from that side, which is
//! backpressure all the way to the peer's TCP window. Nothing is shared
//! between connections and nothing is locked.
//!
//! The legs may be TLS and may be compressed, each its own way: the pump moves
//! the packet stream between them and the legs do the rest. Writing comes
//! before scanning, to keep recording off the bytes' way — except towards a
//! compressed upstream, whose frames must know where each command starts: there
//! the state machine sees the bytes first.
//!
//! - `forward`: the connection's forwarding state ([`Pump`]) and its turns, step by step;
//! - `timeouts`: the idle and query timeouts, on one lazily re-armed timer;
//! - `sockets`: what is asked of the sockets beside the bytes (the link probe's readings, a
//!   client's hang-up, bytes waiting).

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::activity::Activity;
use super::drain::DrainWatch;
use super::error::RelayError;
use super::kills::Kills;
use super::leg::Leg;
use super::local::LocalAnswers;
use super::pipe::{BufferBudget, HalfPipe};
use super::timers;
use crate::inject::InjectBinding;
use crate::link::Probe;
use crate::protocol::Session;
use crate::record::{Recorder, now_us};

/// What watches a connection, told in this order: the live view's
/// bookkeeping, the link probe (which also reads the sockets) and, when
/// recording is on, the recorder.
pub(super) struct Observers {
    pub activity: Activity,
    pub probe: Probe,
    pub recorder: Option<Recorder>,
}

crate::record::tell_each!([] [] Observers { activity, probe, recorder });

/// How a pump ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The client closed its side.
    ClientClosed,
    /// The server closed its side: between responses, or (`mid_response`) in the
    /// middle of one — a server that died, or a KILL; the client sees its side close too.
    UpstreamClosed {
        /// A response was under way.
        mid_response: bool,
    },
    /// No command in flight and nothing moved for `limits.idle_timeout`.
    IdleTimeout,
    /// A command waited `limits.query_timeout` for its response.
    QueryTimeout,
    /// Shutting down, and the connection had nothing in flight.
    Drained,
    /// A `COM_CHANGE_USER` is at the front of what the client sent, not yet written (left in
    /// [`Legs::client_pending`]): with [`PumpSettings::change_user_stand_in`], its exchange is
    /// relayed apart, rttscope's key standing in for the server's, and the pump starts again.
    ChangeUser,
}

/// Settings of one pump.
pub(super) struct PumpSettings {
    pub buffer_size: usize,
    /// Close after this long with no command in flight and no byte either way; `None`
    /// for never.
    pub idle_timeout: Option<Duration>,
    /// End a command that waits this long for its response; `None` for never.
    pub query_timeout: Option<Duration>,
    /// The process's budget for buffers beyond `buffer_size`.
    pub budget: Arc<BufferBudget>,
    /// Who answers statements addressed to rttscope, and this connection's id for it.
    pub local: Option<(Arc<dyn LocalAnswers>, u64)>,
    /// The connections a KILL may name, and the server's id for this one.
    pub kills: Option<(Arc<Kills>, u32)>,
    /// Stop at a `COM_CHANGE_USER` ([`Ended::ChangeUser`]): a plain client over a TLS long
    /// hop, whose key request the server would read as a password.
    pub change_user_stand_in: bool,
}

/// The two legs and what was read from them before the pump started.
pub(super) struct Legs {
    pub client: Leg,
    pub upstream: Leg,
    pub client_pending: Vec<u8>,
    pub upstream_pending: Vec<u8>,
}

/// Forwards until one side closes, the connection idles out, or shutdown
/// finds it with nothing in flight.
pub(super) async fn pump(
    legs: &mut Legs,
    session: &mut Session,
    tap: &mut Observers,
    settings: &PumpSettings,
    inject: Option<InjectBinding>,
    shutdown: &DrainWatch,
) -> Result<Ended, RelayError> {
    let Legs { client, upstream, client_pending, upstream_pending } = legs;
    let mut to_upstream = HalfPipe::new(settings.buffer_size, settings.budget.clone());
    let mut to_client = HalfPipe::new(settings.buffer_size, settings.budget.clone());
    // Towards a compressed server, each frame that starts a command must say so.
    let marks = upstream.compression().is_some();
    session.track_command_starts(marks);
    // From a compressed server, packets are renumbered for the client: scanned (and
    // rewritten) before they are written.
    session.renumber_upstream(marks);
    let seeded = (to_upstream.seed(client_pending), to_client.seed(upstream_pending));
    // In the pipes now; what is left over when the pump stops goes back here.
    client_pending.clear();
    upstream_pending.clear();
    let withheld = withheld(session, upstream);
    let timeouts = Timeouts::new(settings);
    let timer = timers::FlaggedTimer::new(timeouts.first(Instant::now()));
    let wire = upstream.wire_counters();
    let mut pump = Pump {
        client,
        upstream,
        session,
        tap,
        settings,
        shutdown,
        inject,
        to_upstream,
        to_client,
        seeded,
        marks,
        renumber: marks,
        draining: false,
        timeouts,
        last_activity_us: now_us(),
        timer,
        held_off: false,
        upstream_shut: false,
        wire,
        identity_generation: None,
        reply: None,
        withheld,
        drain_registered: None,
        kill: None,
        left_over: client_pending,
    };
    poll_fn(|cx| pump.poll(cx)).await
}

/// The client bytes the session has scanned that never went into the compressed stream
/// written upstream: what maps an offset in the client's stream to one in that stream.
/// Whenever a pump starts, every client byte scanned so far was written upstream or kept
/// from it: the auth exchanges before the long hop was compressed, and the bytes a stand-in
/// answered or replaced in a `COM_CHANGE_USER`'s exchange since (its key request, a ciphertext
/// longer than the password it held). Wrapping: the offsets differ by this much modulo 2^64,
/// whichever stream is longer.
fn withheld(session: &Session, upstream: &Leg) -> u64 {
    upstream.written().map_or(0, |written| session.client_offset().wrapping_sub(written))
}

mod forward;
mod sockets;
#[cfg(test)]
mod tests;
mod timeouts;

use forward::Pump;
use timeouts::Timeouts;
