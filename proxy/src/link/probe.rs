//! The link probe: one per connection, a [`Tap`] beside the recorder. It
//! follows each response's transfer (when bytes arrive, when rttscope held
//! off for a slow client), reads the kernel's view of both sockets while
//! data flows — every `link.sample_interval` during a response, once a
//! second otherwise, never while idle — and at the end of a large response
//! sends the verdict on what held it back. It is the one part of rttscope
//! that reads sockets; the relay hands it the raw ones (also under TLS).

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use socket2::SockRef;
use tokio::time::Instant;

use super::events::{LinkEvent, LinkSink};
use super::transfer::TransferTracker;
use crate::live::{LiveConnection, LiveLink};
use crate::protocol::{Direction, Observer, Summary};
use crate::record::{Tap, micros};
use crate::socket::{LinkSample, LossCounters, loss_counters, sample};

/// Between transfers, a reading keeps the RTT fresh for latency verdicts.
const IDLE_SAMPLE_INTERVAL_US: u64 = 1_000_000;

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
        }
    }

    /// Whether [`sample`](Self::sample) would read a socket now: a response ended and its
    /// loss counters are wanted, or a reading is due. The relay asks after every read; most
    /// of the time nothing is due, and this is all it costs. When nothing is due, a
    /// response's end that nobody wants the counters of is forgotten, as `sample` would.
    #[inline]
    pub fn due(&mut self, loss_wanted: bool) -> bool {
        let interval = if self.tracker.in_transfer() { self.interval_us } else { IDLE_SAMPLE_INTERVAL_US };
        let due = (self.response_ended && loss_wanted)
            || self.tracker.wants_sample()
            || self.last_sample_us.is_none_or(|last| self.arrival_us.saturating_sub(last) >= interval);
        if !due {
            self.response_ended = false;
        }
        due
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
            return (None, counters.map(|c| self.with_gaps(c)));
        }
        self.last_sample_us = Some(now);
        // A socket that cannot be read right now is simply not sampled.
        let Ok(up) = sample(upstream) else { return (None, None) };
        self.tracker.sample(&up);
        let down = client.and_then(|c| sample(c).ok());
        self.live.publish(LiveLink { at_us: now, upstream: up, client: down });
        if up.base_rtt_us() > 0 {
            self.sink.send(LinkEvent::Rtt { base_rtt_us: up.base_rtt_us() });
        }
        (Some(up), Some(self.with_gaps(LossCounters::of(&up))))
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
        if let Some(measurement) = self.tracker.finished(at_us, s.bytes_down, s.round_trips, latency) {
            self.sink.send(LinkEvent::Measured {
                conn_id: self.conn_id,
                at_us: self.now_us,
                measurement: Box::new(measurement),
            });
        }
    }
}

impl Tap for Probe {
    fn arrived(&mut self, direction: Direction, arrived_us: u64, released_us: u64, _len: usize) {
        self.arrival_us = arrived_us;
        self.now_us = match direction {
            Direction::ToUpstream => arrived_us,
            Direction::ToClient => released_us,
        };
        if direction == Direction::ToClient {
            self.tracker.read(arrived_us);
        }
    }

    fn held_off(&mut self, held: bool, now: Instant) {
        self.tracker.held_off(held, micros(now));
    }
}
