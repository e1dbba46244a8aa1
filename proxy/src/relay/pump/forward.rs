//! One connection's forwarding state and its turns: what [`pump`](super::pump) polls.

use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use tokio::time::Instant;

use super::sockets::{bytes_waiting, client_hung_up, sample};
use super::timeouts::Timeouts;
use super::{Ended, Observers, PumpSettings};
use crate::inject::InjectBinding;
use crate::protocol::constants::command::COM_CHANGE_USER;
use crate::protocol::{Direction, PacketScanner, Peer, Session};
use crate::record::{Tap, now_us};
use crate::relay::drain::DrainWatch;
use crate::relay::error::RelayError;
use crate::relay::idle_poll::{self, Awaited};
use crate::relay::kills;
use crate::relay::leg::Leg;
use crate::relay::local::{self, LocalAnswers, LocalContext, LocalReply};
use crate::relay::pipe::{Fresh, HalfPipe};
use crate::relay::timers;

/// One connection's forwarding state, both directions. Each wake-up runs turns until nothing
/// moves: follow the emulated link's settings, move client bytes upstream, move server bytes
/// to the client, see whether a drain may end it, look at the timeouts.
pub(super) struct Pump<'a> {
    pub(super) client: &'a mut Leg,
    pub(super) upstream: &'a mut Leg,
    pub(super) session: &'a mut Session,
    pub(super) tap: &'a mut Observers,
    pub(super) settings: &'a PumpSettings,
    pub(super) shutdown: &'a DrainWatch,
    pub(super) inject: Option<InjectBinding>,
    pub(super) to_upstream: HalfPipe,
    pub(super) to_client: HalfPipe,
    /// Bytes read before the pump started, each side's, taken on the first turn.
    pub(super) seeded: (Option<Fresh>, Option<Fresh>),
    /// Towards a compressed server: frames say where commands start.
    pub(super) marks: bool,
    /// From a compressed server: packets are renumbered for the client.
    pub(super) renumber: bool,
    pub(super) draining: bool,
    /// One timer for both timeouts, re-armed lazily: activity only moves `last_activity_us`
    /// (reads) and, for bytes that had to wait, the pipes' late-write times; the timer is
    /// reset when it fires, never on the forwarding path.
    pub(super) timeouts: Timeouts,
    pub(super) last_activity_us: u64,
    pub(super) timer: timers::FlaggedTimer,
    pub(super) held_off: bool,
    /// The client's half-close, passed on to the server.
    pub(super) upstream_shut: bool,
    /// The long hop's wire bytes so far, when it is compressed (read, written).
    pub(super) wire: Option<(u64, u64)>,
    /// The emulated link's models follow both its settings and who the session is.
    pub(super) identity_generation: Option<u64>,
    /// An answer rttscope makes itself, on its way to the client; and the client bytes kept
    /// from the server so far (the stream written upstream is that much shorter; see
    /// `pump::withheld` for where it starts).
    pub(super) reply: Option<LocalReply>,
    pub(super) withheld: u64,
    /// The waker the shutdown watch wakes, once registered.
    pub(super) drain_registered: Option<std::task::Waker>,
    /// A KILL of another proxied connection in flight: its answer waits for that
    /// connection's client socket to close, as the server closed it before answering
    /// (see `kills`).
    pub(super) kill: Option<kills::Held>,
    /// Where the client bytes not yet written go when the pump stops at a `COM_CHANGE_USER`.
    pub(super) left_over: &'a mut Vec<u8>,
}

impl Pump<'_> {
    /// Turns until nothing moves, or the connection ends.
    pub(super) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Ended, RelayError>> {
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
                idle_poll::awaiting(self.awaited());
                return Poll::Pending;
            }
            first_turn = false;
        }
    }

    /// What the connection waits for as it goes idle, for the thread's poller.
    fn awaited(&self) -> Awaited {
        if self.session.is_idle() {
            Awaited::Command
        } else if self.session.response_under_way() {
            Awaited::Rest
        } else {
            Awaited::Answer
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
    fn client_to_upstream(&mut self, cx: &mut Context<'_>, progress: &mut bool) -> Result<Option<Ended>, RelayError> {
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
        // A COM_CHANGE_USER whose exchange needs rttscope's key: handed over unsent.
        if self.settings.change_user_stand_in
            && answer.is_none()
            && let Some(fresh) = &fresh
            && self.reply.is_none()
            && self.kill.is_none()
            && self.to_client.is_empty()
            && change_user_at_front(&self.to_upstream, fresh, self.session)
        {
            *self.left_over = self.to_upstream.unsent().to_vec();
            return Ok(Some(Ended::ChangeUser));
        }
        // A statement answered here never crosses the emulated link.
        let local = answer.is_some();
        if self.marks
            && let Some(fresh) = &fresh
        {
            self.see_client_marking_commands(fresh, local, answer.as_ref().map_or(0, |a| a.withheld as u64));
        }
        *progress |= self.to_upstream.poll_send(cx, (&mut *self.upstream, Peer::Upstream))?;
        if let Some((late_us, peer_us)) = self.to_upstream.take_released_late() {
            self.tap.released_late(Direction::ToUpstream, late_us, peer_us);
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
            let before = if kept > 0 && offset > start { self.withheld.wrapping_add(kept) } else { self.withheld };
            self.upstream.mark_command_start(offset.wrapping_sub(before));
        }
    }

    /// The statement is the command in flight: its response is the answer, as if the
    /// server had sent it, at no round trip upstream.
    fn reply_locally(&mut self, answer: LocalAnswer) {
        self.withheld = self.withheld.wrapping_add(answer.withheld as u64);
        self.session.answered_locally();
        let now = now_us();
        self.tap.arrived(Direction::ToClient, now, now, answer.bytes.len());
        PacketScanner::new().scan(&answer.bytes, &mut self.session.upstream(self.tap));
        // The reading a finished response asks for, so its record goes out now.
        sample(self.tap, self.client, self.upstream);
        self.reply = Some(LocalReply::new(answer.bytes));
    }

    /// The client has sent its last byte and all of it went upstream.
    fn client_closed(&mut self, cx: &mut Context<'_>, progress: &mut bool) -> Result<Option<Ended>, RelayError> {
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
    fn upstream_to_client(&mut self, cx: &mut Context<'_>, progress: &mut bool) -> Result<Option<Ended>, RelayError> {
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
            if let Some((late_us, peer_us)) = self.to_client.take_released_late() {
                self.tap.released_late(Direction::ToClient, late_us, peer_us);
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
            if held {
                // The kernel's count of the server's bytes as the hold begins: what it takes
                // in until rttscope reads again says whether the server slowed with the client.
                sample(self.tap, self.client, self.upstream);
            }
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
    fn kill_answer_released(&mut self, cx: &mut Context<'_>) -> bool {
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
    fn drained(&mut self, cx: &mut Context<'_>, first_turn: bool) -> Option<Ended> {
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
    if fresh.filled {
        tap.buffer_filled(Direction::ToClient);
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

/// Whether `fresh` starts with a `COM_CHANGE_USER` (sequence id 0) at a point where the
/// pump may hand it over: synchronised, nothing in flight, nothing older waiting to go
/// upstream.
fn change_user_at_front(to_upstream: &HalfPipe, fresh: &Fresh, session: &Session) -> bool {
    let bytes = to_upstream.fresh_bytes(fresh);
    session.is_synced()
        && session.is_idle()
        && to_upstream.scanner.at_boundary()
        && to_upstream.unsent().len() == bytes.len()
        && bytes.get(3..5) == Some(&[0, COM_CHANGE_USER][..])
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
