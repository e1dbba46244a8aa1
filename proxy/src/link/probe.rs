//! The link probe: one per connection, a [`Tap`] beside the recorder. It
//! follows each response's transfer (when bytes arrive, when rttscope held
//! off for a slow client), reads the kernel's view of both sockets while
//! data flows — every `link.sample_interval` during a response, once a
//! second otherwise, never while idle — and at the end of a large response
//! sends the verdict on what held it back. It is the one part of rttscope
//! that reads sockets; the relay hands it the raw ones (also under TLS).

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use socket2::SockRef;
use tokio::time::Instant;

use super::events::{LinkEvent, LinkSink};
use super::measurement::{LinkLimit, Measurement};
use super::transfer::TransferTracker;
use crate::live::{LiveConnection, LiveLink};
use crate::local_peer::LocalPeer;
use crate::protocol::{Direction, Observer, Summary};
use crate::record::{Tap, micros};
use crate::socket::{LinkSample, LossCounters, loss_counters, sample};

/// Between transfers, a reading keeps the RTT fresh for latency verdicts.
const IDLE_SAMPLE_INTERVAL_US: u64 = 1_000_000;

/// A response's end gets a reading of the loss counters unless its command was shorter than
/// this and the counters were read less than this long ago. Why: the reading is a system call
/// (`TCP_INFO`), about a twentieth of the relay's CPU per query when queries take tens of
/// microseconds (`perf`, workload b), for a question those queries can barely raise: Linux
/// recovers a lost segment no sooner than a tail-loss probe (milliseconds) or a retransmission
/// timeout (200 ms) unless later segments reveal the hole, one round trip on. So a command held
/// up by a probe or a timeout, or any command at least this long, still gets its own reading;
/// what a shorter gate can blur is a loss recovered within the millisecond on a
/// sub-millisecond link, put on a neighbouring command of the same connection.
const END_READING_GAP_US: u64 = 1_000;

/// What the relay is to do after a read ([`Probe::due`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Nothing.
    Nothing,
    /// Read the sockets ([`Probe::sample`]).
    Read,
    /// A response ended and its loss counters are not read ([`END_READING_GAP_US`]): what
    /// finished is settled as it stands.
    Settle,
}

/// What a probe needs to know besides its connection.
#[derive(Clone, Copy, Debug)]
pub struct ProbeSettings {
    /// Responses at least this large get a verdict.
    pub large_transfer: u64,
    /// How often to read the sockets while a transfer is under way.
    pub sample_interval_us: u64,
    /// tcp_rmem max on this host, if known.
    pub rmem_max: Option<u64>,
}

/// One connection's link probe.
pub struct Probe {
    conn_id: u64,
    tracker: TransferTracker,
    interval_us: u64,
    last_sample_us: Option<u64>,
    live: Arc<LiveConnection>,
    sink: LinkSink,
    /// When the current chunk reached rttscope.
    arrival_us: u64,
    /// The current chunk's time as the client lives it.
    now_us: u64,
    /// When each unanswered command was sent, as the client lives it, µs.
    requests: VecDeque<u64>,
    /// A response ended since the last reading: its end wants one, so that a command that
    /// waited for a retransmission can be told from one that did not.
    response_ended: bool,
    /// That response's command took less than [`END_READING_GAP_US`].
    ended_short: bool,
    /// When the loss counters were last read, µs.
    last_loss_us: Option<u64>,
    /// The read `arrived` tells next filled rttscope's buffer ([`Tap::buffer_filled`]).
    read_filled: bool,
    /// A large response's measurement, and when it ended as the client lives it, waiting
    /// for the reading of the client's socket that says how much of the response the
    /// application had still to take ([`Probe::client_unread`]).
    unread_wanted: Option<(u64, Box<Measurement>)>,
    /// The application's own socket, if it is on this host: what it holds unread counts as
    /// unread too ([`LocalPeer`]).
    peer: Peer,
}

/// Where the client's end of the connection is, as far as the probe has looked.
#[derive(Debug)]
enum Peer {
    /// Not looked up yet: the first reading during a transfer does.
    Unknown,
    /// On this host: its receive queue can be read.
    Local(LocalPeer),
    /// Elsewhere, not TCP, or not readable here: never asked again.
    Elsewhere,
}

impl Probe {
    /// A probe for connection `conn_id`, accepted at `accepted`.
    pub fn new(
        conn_id: u64,
        live: Arc<LiveConnection>,
        sink: LinkSink,
        accepted: Instant,
        settings: ProbeSettings,
    ) -> Probe {
        Probe {
            conn_id,
            tracker: TransferTracker::new(settings.large_transfer, settings.rmem_max),
            interval_us: settings.sample_interval_us,
            last_sample_us: None,
            live,
            sink,
            arrival_us: micros(accepted),
            now_us: micros(accepted),
            // The handshake's pseudo-command began when the client connected.
            requests: VecDeque::from([micros(accepted)]),
            response_ended: false,
            ended_short: false,
            last_loss_us: None,
            read_filled: false,
            unread_wanted: None,
            peer: Peer::Unknown,
        }
    }

    /// Whether [`sample`](Self::sample) would read a socket now: a reading is due, or a
    /// response ended and its loss counters are wanted — unless its command was short and
    /// they were read a moment ago ([`END_READING_GAP_US`]): then [`Due::Settle`]. The relay
    /// asks after every read; most of the time nothing is due, and this is all it costs.
    /// When nothing is due, a response's end that nobody wants the counters of is
    /// forgotten, as `sample` would.
    #[inline]
    pub fn due(&mut self, loss_wanted: bool) -> Due {
        if self.unread_wanted.is_some() {
            return Due::Read;
        }
        let interval = if self.tracker.in_transfer() { self.interval_us } else { IDLE_SAMPLE_INTERVAL_US };
        if self.tracker.wants_sample()
            || self.last_sample_us.is_none_or(|last| self.arrival_us.saturating_sub(last) >= interval)
        {
            return Due::Read;
        }
        if !std::mem::take(&mut self.response_ended) || !loss_wanted {
            return Due::Nothing;
        }
        if self.ended_short
            && self.last_loss_us.is_some_and(|last| self.arrival_us.saturating_sub(last) < END_READING_GAP_US)
        {
            return Due::Settle;
        }
        self.response_ended = true;
        Due::Read
    }

    /// Reads the sockets if a reading is due: the long-haul `upstream` one
    /// and, when it is TCP, the client's. Returns the upstream reading for
    /// the other observers, and its loss counters — alone (one `TCP_INFO`) when only
    /// a response's end asked for them and `loss_wanted` (someone records which commands
    /// waited for a retransmission). Called by the relay after each read.
    pub fn sample<U, C>(
        &mut self,
        upstream: &U,
        client: Option<&C>,
        loss_wanted: bool,
    ) -> (Option<LinkSample>, Option<LossCounters>)
    where
        U: AsRawFd,
        C: AsRawFd,
        for<'a> SockRef<'a>: From<&'a U> + From<&'a C>,
    {
        let now = self.arrival_us;
        let interval = if self.tracker.in_transfer() { self.interval_us } else { IDLE_SAMPLE_INTERVAL_US };
        let response_ended = std::mem::take(&mut self.response_ended) && loss_wanted;
        if !self.tracker.wants_sample() && self.last_sample_us.is_some_and(|last| now.saturating_sub(last) < interval) {
            let counters = if response_ended { loss_counters(upstream).ok() } else { None };
            if counters.is_some() {
                self.last_loss_us = Some(now);
            }
            return (None, counters.map(|c| self.with_gaps(c)));
        }
        self.last_sample_us = Some(now);
        // A socket that cannot be read right now is simply not sampled.
        let Ok(up) = sample(upstream) else { return (None, None) };
        self.tracker.sample(&up);
        let down = client.and_then(|c| sample(c).ok());
        // Outside a transfer a client reading counts for nothing: its own socket is not asked.
        if let (Some(down), Some(c)) = (&down, client)
            && self.tracker.in_transfer()
        {
            let peer_unread = self.peer_unread(SockRef::from(c));
            self.tracker.client_sample(down, peer_unread);
        }
        self.live.publish(LiveLink { at_us: now, upstream: up, client: down });
        if up.base_rtt_us() > 0 {
            self.sink.send(LinkEvent::Rtt { base_rtt_us: up.base_rtt_us() });
        }
        self.last_loss_us = Some(now);
        (Some(up), Some(self.with_gaps(LossCounters::of(&up))))
    }

    /// Reads how much of a large response that just ended the application had still to take
    /// (the client's socket: TCP or Unix, under any TLS) and sends its measurement, judged
    /// with it. Called by the relay before [`sample`](Self::sample) when a reading is due;
    /// nothing is read unless a large response ended.
    pub fn client_unread<C: AsFd + AsRawFd>(&mut self, client: &C) {
        let Some((at_us, measurement)) = self.unread_wanted.take() else { return };
        let measurement = match crate::sys::unsent(client) {
            Ok(unacknowledged) => {
                let unread = u64::from(unacknowledged) + u64::from(self.peer_unread(SockRef::from(client)));
                Box::new(measurement.with_client_unread(unread))
            }
            Err(_) => measurement,
        };
        self.send_measured(at_us, measurement);
    }

    /// Bytes the application's own socket holds unread, when it is on this host (0 when it
    /// is not, or cannot be read: then nothing is claimed about it). Looked up at the first
    /// call, through the kernel's socket diagnostics ([`LocalPeer`]).
    fn peer_unread(&mut self, client: SockRef<'_>) -> u32 {
        if matches!(self.peer, Peer::Unknown) {
            self.peer = LocalPeer::of(client).map_or(Peer::Elsewhere, Peer::Local);
        }
        let Peer::Local(peer) = &self.peer else { return 0 };
        match peer.unread() {
            Ok(Some(unread)) => unread,
            Ok(None) => {
                // No socket with the client's address on this host: it is elsewhere.
                self.peer = Peer::Elsewhere;
                0
            }
            Err(e) => {
                tracing::debug!(conn = self.conn_id, error = %e, "link probe: cannot read the client's own socket (sock_diag); its unread bytes are not counted");
                self.peer = Peer::Elsewhere;
                0
            }
        }
    }

    /// Sends a measurement still waiting for its client reading as it stands.
    fn send_unread_wanted(&mut self) {
        if let Some((at_us, measurement)) = self.unread_wanted.take() {
            self.send_measured(at_us, measurement);
        }
    }

    fn send_measured(&self, at_us: u64, measurement: Box<Measurement>) {
        self.sink.send(LinkEvent::Measured { conn_id: self.conn_id, at_us, measurement });
    }

    /// The kernel's counters and the probe's own: the timeout-long gaps it saw mid-response.
    fn with_gaps(&self, counters: LossCounters) -> LossCounters {
        LossCounters { timeout_gaps: self.tracker.timeout_gaps, ..counters }
    }
}

impl Observer for Probe {
    fn command_started(&mut self, _command: u8) {
        self.requests.push_back(self.now_us);
    }

    fn response_started(&mut self) {
        self.tracker.response_started(self.arrival_us);
    }

    fn finished(&mut self, s: &Summary) {
        let request_us = self.requests.pop_front().unwrap_or(self.now_us);
        let latency = self.now_us.saturating_sub(request_us);
        let at_us = self.arrival_us;
        self.response_ended = true;
        self.ended_short = latency < END_READING_GAP_US;
        if let Some(measurement) = self.tracker.finished(at_us, s.bytes_down, s.round_trips, latency) {
            // The relay reads the client's socket right after (`client_unread`); one left
            // waiting by pipelined responses goes as it stands.
            self.send_unread_wanted();
            let measurement = Box::new(measurement);
            if measurement.limit == LinkLimit::Latency {
                self.send_measured(self.now_us, measurement);
            } else {
                self.unread_wanted = Some((self.now_us, measurement));
            }
        }
    }
}

impl Tap for Probe {
    fn arrived(&mut self, direction: Direction, arrived_us: u64, released_us: u64, len: usize) {
        self.arrival_us = arrived_us;
        self.now_us = match direction {
            Direction::ToUpstream => arrived_us,
            Direction::ToClient => released_us,
        };
        if direction == Direction::ToClient {
            if std::mem::take(&mut self.read_filled) {
                self.tracker.read_filling(arrived_us, len as u64);
            } else {
                self.tracker.read(arrived_us, len as u64);
            }
            if released_us > arrived_us {
                self.tracker.released(released_us);
            }
        }
    }

    fn buffer_filled(&mut self, direction: Direction) {
        self.read_filled = direction == Direction::ToClient;
    }

    fn line_stalled(&mut self, direction: Direction, stalled_us: u64) {
        if direction == Direction::ToClient {
            self.tracker.line_stalled(stalled_us);
        }
    }

    fn held_off(&mut self, held: bool, now: Instant) {
        self.tracker.held_off(held, micros(now));
    }
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};

    use super::*;

    /// A probe whose clock is what the test tells it, and a loopback TCP socket to read.
    fn probe() -> (Probe, TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let live = Arc::new(LiveConnection::new(1, "test".into(), 0));
        let (sink, _) = LinkSink::channel(16);
        let settings = ProbeSettings { large_transfer: u64::MAX, sample_interval_us: 1_000, rmem_max: None };
        (Probe::new(1, live, sink, Instant::now(), settings), client, server)
    }

    /// One command sent at `sent_us` and answered whole at `ended_us`.
    fn exchange(probe: &mut Probe, sent_us: u64, ended_us: u64) {
        probe.arrived(Direction::ToUpstream, sent_us, sent_us, 10);
        probe.command_started(3);
        probe.arrived(Direction::ToClient, ended_us, ended_us, 20);
        probe.response_started();
        probe.finished(&Summary::default());
    }

    #[test]
    fn a_short_command_right_after_a_reading_is_settled_without_one() {
        let (mut probe, socket, _server) = probe();
        // The login ends: the first reading, a full one, loss counters with it.
        let t0 = 1_000_000_000;
        probe.arrived(Direction::ToClient, t0, t0, 10);
        probe.finished(&Summary::default());
        assert_eq!(probe.due(true), Due::Read);
        let (reading, counters) = probe.sample(&socket, None::<&TcpStream>, true);
        assert!(reading.is_some() && counters.is_some());

        // 200 µs, 300 µs after that reading: no system call, the record goes as it stands.
        exchange(&mut probe, t0 + 100, t0 + 300);
        assert_eq!(probe.due(true), Due::Settle);
        assert_eq!(probe.due(true), Due::Nothing, "settled once");
        // A millisecond-long command always gets its own reading, however recent the last.
        exchange(&mut probe, t0 + 400, t0 + 1_500);
        assert_eq!(probe.due(true), Due::Read);
        let (reading, counters) = probe.sample(&socket, None::<&TcpStream>, true);
        assert!(reading.is_none(), "only the loss counters: no full reading was due");
        assert!(counters.is_some());
        // Short again, right after: settled; short, but a millisecond after the last reading: read.
        exchange(&mut probe, t0 + 1_600, t0 + 1_700);
        assert_eq!(probe.due(true), Due::Settle);
        exchange(&mut probe, t0 + 2_400, t0 + 2_600);
        assert_eq!(probe.due(true), Due::Read);
        assert!(probe.sample(&socket, None::<&TcpStream>, true).1.is_some());
        // Nobody records: nothing to read or settle.
        exchange(&mut probe, t0 + 5_000, t0 + 5_100);
        assert_eq!(probe.due(false), Due::Nothing);
    }
}
