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

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::time::Instant;

use super::activity::Activity;
use super::drain::DrainWatch;
use super::error::RelayError;
use super::kills::{self, Kills};
use super::leg::Leg;
use super::local::{self, LocalAnswers, LocalContext, LocalReply};
use super::pipe::{BufferBudget, Fresh, HalfPipe};
use super::timers;
use crate::inject::InjectBinding;
use crate::link::{Due, Probe};
use crate::protocol::{Direction, PacketScanner, Peer, Session};
use crate::record::{Recorder, Tap, micros, now_us};

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
        withheld: 0,
        drain_registered: None,
        kill: None,
    };
    poll_fn(|cx| pump.poll(cx)).await
}

/// One connection's forwarding state, both directions. Each wake-up runs turns until nothing
/// moves: follow the emulated link's settings, move client bytes upstream, move server bytes
/// to the client, see whether a drain may end it, look at the timeouts.
struct Pump<'a> {
    client: &'a mut Leg,
    upstream: &'a mut Leg,
    session: &'a mut Session,
    tap: &'a mut Observers,
    settings: &'a PumpSettings,
    shutdown: &'a DrainWatch,
    inject: Option<InjectBinding>,
    to_upstream: HalfPipe,
    to_client: HalfPipe,
    /// Bytes read before the pump started, each side's, taken on the first turn.
    seeded: (Option<Fresh>, Option<Fresh>),
    /// Towards a compressed server: frames say where commands start.
    marks: bool,
    /// From a compressed server: packets are renumbered for the client.
    renumber: bool,
    draining: bool,
    /// One timer for both timeouts, re-armed lazily: activity only moves `last_activity_us`
    /// (reads) and, for bytes that had to wait, the pipes' late-write times; the timer is
    /// reset when it fires, never on the forwarding path.
    timeouts: Timeouts,
    last_activity_us: u64,
    timer: timers::FlaggedTimer,
    held_off: bool,
    /// The client's half-close, passed on to the server.
    upstream_shut: bool,
    /// The long hop's wire bytes so far, when it is compressed (read, written).
    wire: Option<(u64, u64)>,
    /// The emulated link's models follow both its settings and who the session is.
    identity_generation: Option<u64>,
    /// An answer rttscope makes itself, on its way to the client; and the client bytes kept
    /// from the server so far (the stream written upstream is that much shorter).
    reply: Option<LocalReply>,
    withheld: u64,
    /// The waker the shutdown watch wakes, once registered.
    drain_registered: Option<std::task::Waker>,
    /// A KILL of another proxied connection in flight: its answer waits for that
    /// connection's client socket to close, as the server closed it before answering
    /// (see `kills`).
    kill: Option<kills::Held>,
}

impl Pump<'_> {
    /// Turns until nothing moves, or the connection ends.
    fn poll(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<Ended, RelayError>> {
        // The timer is polled on the first turn of each wake-up, not on every turn: once
        // polled it wakes the task when it fires, whatever the later turns do. Re-polled on
        // the turn after a reset, to arm it again.
        let mut poll_timer = true;
        // Likewise the shutdown watch: registered on the first turn, it wakes the task when
        // a drain starts.
        let mut first_turn = true;
        // A side whose read is armed is polled again only if it is what woke the task.
        self.to_upstream.new_wake_up(cx.waker());
        self.to_client.new_wake_up(cx.waker());
        loop {
            let mut progress = false;
            self.follow_the_emulated_link();
            let ended = match self.client_to_upstream(cx, &mut progress) {
                Ok(None) => self.upstream_to_client(cx, &mut progress),
                other => other,
            };
            let ended = match ended {
                Ok(None) => Ok(self.drained(cx, first_turn)),
                other => other,
            };
            match ended {
                Ok(None) => {}
                Ok(Some(ended)) => return Poll::Ready(Ok(ended)),
                Err(e) => return Poll::Ready(Err(e)),
            }
            if std::mem::take(&mut poll_timer) && self.timer.poll_expired(cx).is_ready() {
                if let Some(ended) = self.timed_out() {
                    return Poll::Ready(Ok(ended));
                }
                poll_timer = true;
                progress = true;
            }
            // Every side that may read must have its waker registered before the task
            // waits: a read left out this turn (too much in flight a moment ago, bytes
            // seeded) is tried on another.
            let another_turn = progress
                || self.to_upstream.wants_read(self.session.accepts_commands())
                || self.to_client.wants_read(true);
            if !another_turn {
                return Poll::Pending;
            }
            first_turn = false;
        }
    }

    /// One atomic load per turn; the settings are read only when they or the session's
    /// identity changed.
    fn follow_the_emulated_link(&mut self) {
        let Some(binding) = &mut self.inject else { return };
        if !binding.changed() && self.identity_generation == Some(self.session.identity_generation()) {
            return;
        }
        self.identity_generation = Some(self.session.identity_generation());
        for (direction, model, seed) in binding.models(self.session.identity()) {
            let pipe = if direction == Direction::ToUpstream { &mut self.to_upstream } else { &mut self.to_client };
            pipe.set_link(model, seed);
        }
    }

    /// Client → upstream: read (unless too many pipelined commands are unanswered; answers
    /// will wake us), hold a KILL's answer or answer locally where due, write on, let the
    /// state machine see it, and pass a client's half-close on.
    fn client_to_upstream(
        &mut self,
        cx: &mut std::task::Context<'_>,
        progress: &mut bool,
    ) -> Result<Option<Ended>, RelayError> {
        let fresh = match self.seeded.0.take() {
            Some(fresh) => Some(fresh),
            None => self.to_upstream.poll_fill(
                cx,
                (&mut *self.client, Peer::Client),
                self.session.accepts_commands(),
                progress,
            )?,
        };
        if let Some(fresh) = &fresh {
            self.note_kill(fresh);
        }
        // A statement addressed to rttscope at the front: kept from the server.
        let answer = match (&self.settings.local, &fresh) {
            (Some((answers, conn_id)), Some(fresh)) if self.reply.is_none() && self.to_client.is_empty() => {
                answer_locally(&mut self.to_upstream, fresh, self.session, answers.as_ref(), *conn_id)
            }
            _ => None,
        };
        // A statement answered here never crosses the emulated link.
        let local = answer.is_some();
        if self.marks
            && let Some(fresh) = &fresh
        {
            self.see_client_marking_commands(fresh, local, answer.as_ref().map_or(0, |a| a.withheld as u64));
        }
        *progress |= self.to_upstream.poll_send(cx, (&mut *self.upstream, Peer::Upstream))?;
        if let Some(late_us) = self.to_upstream.take_released_late() {
            self.tap.released_late(Direction::ToUpstream, late_us);
        }
        if let Some(fresh) = &fresh {
            self.last_activity_us = fresh.arrived_us;
            if !self.marks {
                self.see_client(fresh, local);
            }
            sample(self.tap, self.client, self.upstream);
        }
        if let Some(answer) = answer {
            self.reply_locally(answer);
            *progress = true;
        }
        if self.to_upstream.read_closed && self.to_upstream.is_empty() {
            return self.client_closed(cx, progress);
        }
        Ok(None)
    }

    /// A KILL naming another proxied connection, at the front with nothing in flight: its
    /// answer will wait for that connection to close.
    fn note_kill(&mut self, fresh: &Fresh) {
        let Some((registry, own)) = &self.settings.kills else { return };
        let bytes = self.to_upstream.fresh_bytes(fresh);
        if self.kill.is_none()
            && kills::may_target(bytes, self.session.capabilities())
            && self.session.is_synced()
            && self.session.is_idle()
            && self.to_upstream.scanner.at_boundary()
            && self.to_client.is_empty()
            && let Some(id) = kills::target(bytes, self.session.capabilities())
            && id != u64::from(*own)
            && let Some(victim) = registry.victim(id)
        {
            self.kill = Some((victim, None));
        }
    }

    /// Lets the observers see bytes read from the client.
    fn see_client(&mut self, fresh: &Fresh, local: bool) {
        let released_us = if local { fresh.arrived_us } else { fresh.released_us };
        if fresh.stalled_us > 0 {
            self.tap.line_stalled(Direction::ToUpstream, fresh.stalled_us);
        }
        self.tap.arrived(Direction::ToUpstream, fresh.arrived_us, released_us, fresh.range.len());
        let (session, tap) = (&mut *self.session, &mut *self.tap);
        self.to_upstream.scan(fresh, |scanner, bytes| scanner.scan(bytes, &mut session.client(tap)));
    }

    /// Towards a compressed server: the state machine sees the bytes before they are
    /// written, so that each frame can say where a command starts. `kept`: the client bytes
    /// of a statement answered here, which start no command upstream.
    fn see_client_marking_commands(&mut self, fresh: &Fresh, local: bool, kept: u64) {
        let start = self.session.client_offset();
        self.see_client(fresh, local);
        for offset in self.session.take_command_starts() {
            // Offsets in the client's stream, made offsets in the stream written upstream;
            // the statement kept from the server starts no command there.
            if kept > 0 && offset == start {
                continue;
            }
            let before = if kept > 0 && offset > start { self.withheld + kept } else { self.withheld };
            self.upstream.mark_command_start(offset - before);
        }
    }

    /// The statement is the command in flight: its response is the answer, as if the
    /// server had sent it, at no round trip upstream.
    fn reply_locally(&mut self, answer: LocalAnswer) {
        self.withheld += answer.withheld as u64;
        self.session.answered_locally();
        let now = now_us();
        self.tap.arrived(Direction::ToClient, now, now, answer.bytes.len());
        PacketScanner::new().scan(&answer.bytes, &mut self.session.upstream(self.tap));
        // The reading a finished response asks for, so its record goes out now.
        sample(self.tap, self.client, self.upstream);
        self.reply = Some(LocalReply::new(answer.bytes));
    }

    /// The client has sent its last byte and all of it went upstream.
    fn client_closed(
        &mut self,
        cx: &mut std::task::Context<'_>,
        progress: &mut bool,
    ) -> Result<Option<Ended>, RelayError> {
        // A client that shut down its write side after a command (`mariadb < file`,
        // shutdown(SHUT_WR)) still reads the answer, as it would from the server: the
        // half-close is passed on and the answer relayed; the server closes after
        // answering, which ends the pump below.
        if self.session.is_idle() && self.reply.is_none() {
            return Ok(Some(Ended::ClientClosed));
        }
        // A client gone for good (its Unix socket closed both ways: killed, crashed) has no
        // one left to answer. The connection ends, and the server, finding the long hop
        // closed, ends the command (a lock wait, a sleep) as it would for the client itself;
        // a half-close passed on over TLS carries a `close_notify`, which a busy server finds
        // waiting to be read and takes for a client still there (MariaDB's main.dirty_close).
        if !self.upstream_shut && client_hung_up(self.client) {
            return Ok(Some(Ended::ClientClosed));
        }
        if !self.upstream_shut
            && let Poll::Ready(shut) = std::pin::Pin::new(&mut *self.upstream).poll_shutdown(cx)
        {
            shut.map_err(RelayError::Upstream)?;
            self.upstream_shut = true;
            *progress = true;
        }
        Ok(None)
    }

    /// Upstream → client: read, count the compressed long hop's wire bytes, send
    /// rttscope's own answer first, hold a KILL's answer until its victim is closed, write
    /// on, let the state machine see it, and tell when the client holds us off or the
    /// server closed.
    fn upstream_to_client(
        &mut self,
        cx: &mut std::task::Context<'_>,
        progress: &mut bool,
    ) -> Result<Option<Ended>, RelayError> {
        let fresh = match self.seeded.1.take() {
            Some(fresh) => Some(fresh),
            None => self.to_client.poll_fill(cx, (&mut *self.upstream, Peer::Upstream), true, progress)?,
        };
        self.count_wire_bytes();
        // rttscope's own answer goes first: anything the server sends now answers what the
        // client sent after it.
        if let Some(pending) = &mut self.reply
            && pending.poll_send(cx, self.client, progress)?
        {
            self.reply = None;
        }
        if self.renumber
            && let Some(fresh) = &fresh
        {
            see_upstream(&mut self.to_client, fresh, self.session, self.tap, true);
        }
        if self.kill_answer_released(cx) {
            self.kill = None;
        }
        if self.reply.is_none() && self.kill.is_none() {
            *progress |= self.to_client.poll_send(cx, (&mut *self.client, Peer::Client))?;
            if let Some(late_us) = self.to_client.take_released_late() {
                self.tap.released_late(Direction::ToClient, late_us);
            }
        }
        if let Some(fresh) = fresh {
            self.last_activity_us = fresh.arrived_us;
            if !self.renumber {
                see_upstream(&mut self.to_client, &fresh, self.session, self.tap, false);
            }
            sample(self.tap, self.client, self.upstream);
        }
        // A full buffer the client does not drain: we have stopped reading upstream for it.
        let held = self.to_client.held_off_by_peer();
        if held != self.held_off {
            self.held_off = held;
            self.tap.held_off(held, Instant::now());
        }
        if self.to_client.read_closed && self.to_client.is_empty() {
            // The server closing after the client's half-close is the client's doing.
            if self.upstream_shut {
                return Ok(Some(Ended::ClientClosed));
            }
            let mid_response = !self.session.is_idle() || !self.to_client.scanner.at_boundary();
            return Ok(Some(Ended::UpstreamClosed { mid_response }));
        }
        Ok(None)
    }

    /// Before a read is scanned, so that a response's frames are counted before its last
    /// packet finishes the record.
    fn count_wire_bytes(&mut self) {
        if let Some((read, written)) = self.wire
            && let Some(now) = self.upstream.wire_counters()
        {
            self.tap.wire(Direction::ToUpstream, now.1 - written);
            self.tap.wire(Direction::ToClient, now.0 - read);
            self.wire = Some(now);
        }
    }

    /// Whether a KILL's held answer may go now: the server closed this connection too
    /// (nothing is left to order), the answer is an ERR (nothing was killed), the victim is
    /// closed, or the hold reached its limit.
    fn kill_answer_released(&mut self, cx: &mut std::task::Context<'_>) -> bool {
        match &mut self.kill {
            None => false,
            Some(_) if self.to_client.read_closed => true,
            Some((victim, limit)) => match kills::is_err_response(self.to_client.unsent()) {
                None => false,
                Some(err) => {
                    let limit = limit.get_or_insert_with(|| Box::pin(timers::sleep(kills::HOLD_LIMIT)));
                    err || victim.closed_or_wake(cx.waker()) || limit.as_mut().poll(cx).is_ready()
                }
            },
        }
    }

    /// Shutting down and nothing in flight: done, unless the client already sent more
    /// (the read above is registered and wakes us when the runtime sees it).
    fn drained(&mut self, cx: &mut std::task::Context<'_>, first_turn: bool) -> Option<Ended> {
        if !self.draining && first_turn && self.shutdown.poll_started(cx, &mut self.drain_registered) {
            self.draining = true;
        }
        let idle = self.draining
            && self.reply.is_none()
            && self.session.is_idle()
            && self.to_upstream.scanner.at_boundary()
            && self.to_upstream.is_empty()
            && self.to_client.is_empty();
        (idle && !bytes_waiting(self.client)).then_some(Ended::Drained)
    }

    /// The timer fired: how the connection ends, or the timer re-armed.
    fn timed_out(&mut self) -> Option<Ended> {
        let late_write = self.to_upstream.last_late_write().max(self.to_client.last_late_write());
        let busy_since = self.tap.activity.busy_since_us();
        match self.timeouts.check(Instant::now(), &mut self.last_activity_us, late_write, busy_since) {
            Ok(next) => {
                self.timer.reset(next);
                None
            }
            Err(ended) => Some(ended),
        }
    }
}

/// Lets the observers see bytes read from the server; with `renumber`, rewriting their
/// sequence ids (before they are written).
fn see_upstream(to_client: &mut HalfPipe, fresh: &Fresh, session: &mut Session, tap: &mut Observers, renumber: bool) {
    if fresh.stalled_us > 0 {
        tap.line_stalled(Direction::ToClient, fresh.stalled_us);
    }
    tap.arrived(Direction::ToClient, fresh.arrived_us, fresh.released_us, fresh.range.len());
    let boundary = if renumber {
        to_client.scan_mut(fresh, |scanner, bytes| {
            scanner.scan_mut(bytes, &mut session.upstream(tap));
            scanner.at_boundary()
        })
    } else {
        // Uncompressed long hop: how well its results would compress is sampled instead.
        tap.response_bytes(to_client.fresh_bytes(fresh));
        to_client.scan(fresh, |scanner, bytes| {
            scanner.scan(bytes, &mut session.upstream(tap));
            scanner.at_boundary()
        })
    };
    session.upstream_at_boundary(boundary);
}

/// A statement rttscope answers itself: how many client bytes it took, and the answer.
struct LocalAnswer {
    withheld: usize,
    bytes: Vec<u8>,
}

/// When `fresh` starts with a statement `answers` claims, at a point where answering it
/// cannot reorder anything (synchronised, nothing in flight, nothing older waiting to go
/// upstream): takes it out of the stream and returns the answer.
fn answer_locally(
    to_upstream: &mut HalfPipe,
    fresh: &Fresh,
    session: &Session,
    answers: &dyn LocalAnswers,
    conn_id: u64,
) -> Option<LocalAnswer> {
    if !(session.is_synced() && session.is_idle() && to_upstream.scanner.at_boundary()) {
        return None;
    }
    let capabilities = session.capabilities();
    let (withheld, sql) = local::claimed(to_upstream.fresh_bytes(fresh), capabilities, answers)?;
    let context =
        LocalContext { conn_id, capabilities, server_status: session.server_status(), identity: session.identity() };
    let bytes = answers.answer(sql, &context);
    to_upstream.withhold(fresh, withheld).then_some(LocalAnswer { withheld, bytes })
}

/// The idle and query timeouts, checked only when their timer fires.
struct Timeouts {
    idle: Option<Duration>,
    query: Option<Duration>,
}

/// A timer that never fires in practice.
const NEVER: Duration = Duration::from_secs(86400 * 365);

impl Timeouts {
    fn new(settings: &PumpSettings) -> Timeouts {
        Timeouts { idle: settings.idle_timeout, query: settings.query_timeout }
    }

    /// When to look first.
    fn first(&self, now: Instant) -> Instant {
        now + self.idle.unwrap_or(NEVER).min(self.query.unwrap_or(NEVER))
    }

    /// At `now`, with the last read at `last_activity_us`, the last write of bytes that had
    /// waited at `late_write` and a command in flight since `busy_since_us` (if any): how
    /// the connection ends, or when to look again. Activity is timed when it happens, not
    /// when the timer next looks, so an idle connection closes one timeout after its last
    /// byte, not up to two.
    fn check(
        &mut self,
        now: Instant,
        last_activity_us: &mut u64,
        late_write: Option<Instant>,
        busy_since_us: Option<u64>,
    ) -> Result<Instant, Ended> {
        let now_us = micros(now);
        if let Some(written) = late_write {
            *last_activity_us = (*last_activity_us).max(micros(written));
        }
        let mut next = now + NEVER;
        if let Some(since) = busy_since_us {
            // A command in flight is never idle.
            *last_activity_us = now_us;
            if let Some(query) = self.query {
                let waited = Duration::from_micros(now_us.saturating_sub(since));
                if waited >= query {
                    return Err(Ended::QueryTimeout);
                }
                next = next.min(now + (query - waited));
            }
        } else if let Some(query) = self.query {
            // A command may start any moment: look again within one timeout.
            next = next.min(now + query);
        }
        if let Some(idle) = self.idle {
            let deadline_us = last_activity_us.saturating_add(u64::try_from(idle.as_micros()).unwrap_or(u64::MAX));
            if busy_since_us.is_none() && now_us >= deadline_us {
                return Err(Ended::IdleTimeout);
            }
            next =
                next.min(now + Duration::from_micros(deadline_us.saturating_sub(now_us)).max(Duration::from_millis(1)));
        }
        Ok(next)
    }
}

/// Lets the link probe read the sockets (if a reading is due) and tells the
/// other observers what it read.
#[inline]
fn sample(tap: &mut Observers, client: &Leg, upstream: &Leg) {
    // The reading at a response's end is for the recorder alone (which commands waited for a
    // retransmission): with recording off, it is not made.
    let loss_wanted = tap.recorder.is_some();
    match tap.probe.due(loss_wanted) {
        Due::Nothing => {}
        Due::Read => read_sockets(tap, client, upstream, loss_wanted),
        Due::Settle => {
            if let Some(recorder) = &mut tap.recorder {
                recorder.loss_unread();
            }
        }
    }
}

/// The link probe's reading of the sockets, when one is due ([`sample`]).
fn read_sockets(tap: &mut Observers, client: &Leg, upstream: &Leg, loss_wanted: bool) {
    let Some(up) = upstream.transport().tcp() else { return };
    let (reading, counters) = tap.probe.sample(up, client.transport().tcp(), loss_wanted);
    if let Some(reading) = reading {
        tap.link_sample(&reading);
    }
    if let Some(counters) = counters {
        tap.loss_counters(&counters);
    }
}

/// Whether the client closed its socket both ways (see [`crate::sys::hung_up`]): asked only
/// once it has sent its last byte with a command in flight.
fn client_hung_up(client: &Leg) -> bool {
    crate::sys::hung_up(&client.transport().socket())
}

/// Whether the client has sent bytes rttscope has not read: a peek at the socket itself
/// (under any TLS or compression). Asked of the kernel, not the runtime: the runtime may
/// not have noticed bytes that arrived a moment ago, and a client's last command (its
/// COM_QUIT, say) must not be cut off for that.
fn bytes_waiting(client: &Leg) -> bool {
    let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    matches!(socket2::SockRef::from(&client.transport().socket()).peek(&mut probe), Ok(n) if n > 0)
}

#[cfg(test)]
mod tests;
