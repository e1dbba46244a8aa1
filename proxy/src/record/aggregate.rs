//! Aggregates per fingerprint and per connection, bounded in memory: at
//! most `max_fingerprints` statements are tracked by total time; when twice
//! that many have been seen, the slower half is kept and the rest fold into
//! one `other` entry (amortised, so a million distinct statements cost no
//! more than 2 × max entries).

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::latency::{Latency, LatencySummary};
use super::{
    CommandMetrics, CommandRecord, Compressibility, Connected, Event, IdentityChange, IndexedMap, LargeResponses,
    PayloadSample, WallUnion,
};
use crate::fingerprint::{FingerprintId, StatementKind};
use crate::live::Legs;
use crate::protocol::constants::command::*;

/// The id of the entry unlisted statements fold into.
pub const OTHER_FINGERPRINT: FingerprintId = FingerprintId(0);
/// Closed connections kept for the report.
const CLOSED_KEPT: usize = 256;

/// One statement class (or pseudo-statement for commands without SQL).
#[derive(Clone, Debug)]
pub struct QueryStats {
    /// The statement class's id; [`OTHER_FINGERPRINT`] for the folded entry.
    pub fingerprint: FingerprintId,
    /// Normalised SQL (or the command's name) from the first record of the class.
    pub text: Arc<str>,
    /// The statement kind from the first record of the class.
    pub kind: StatementKind,
    /// Executions: COM_QUERY and COM_STMT_EXECUTE (and each command without SQL).
    pub count: u64,
    /// Records of every command attributed here, by command byte.
    pub commands: Vec<(u8, u64)>,
    /// Commands answered with an ERR packet.
    pub errors: u64,
    /// Client waits over all its commands (see [`CommandRecord::round_trips`]).
    pub round_trips: u64,
    /// Request to first response byte, µs, for commands that got a response.
    pub first_byte: Latency,
    /// Request to last response byte, µs, of every command attributed here.
    pub latency: Latency,
    /// Rows returned over all commands; the report's `rows.sum`.
    pub rows_sum: u64,
    /// Most rows one command returned; the report's `rows.max`.
    pub rows_max: u64,
    /// MySQL packet bytes sent by clients, headers included, uncompressed.
    pub bytes_up: u64,
    /// MySQL packet bytes of responses, headers included, uncompressed.
    pub bytes_down: u64,
    /// Largest single response, bytes; the report's `bytes.max_down`.
    pub max_down: u64,
    /// Bytes on the long hop's wire (compressed when it is).
    pub wire_up: u64,
    /// Downstream counterpart of `wire_up`.
    pub wire_down: u64,
    /// Slices of its results compressed, while the long hop was not compressed.
    pub compressibility: Compressibility,
    /// Commands whose response the state machine lost its place in.
    pub unparsed: u64,
    /// Earliest request, µs since the recording epoch.
    pub first_seen_us: u64,
    /// Latest last response byte, µs since the recording epoch.
    pub last_seen_us: u64,
    /// For the `other` entry: how many statement classes were folded into it.
    pub folded: u64,
    /// One literal example (only recorded with `report.examples`).
    pub example: Option<Box<str>>,
    /// Of the latency sum, what an emulated link added, µs.
    pub injected_us: u64,
    /// Latencies of the executions that waited for a retransmission.
    pub retransmission_waits: Latency,
}

impl QueryStats {
    fn new(fingerprint: FingerprintId, text: Arc<str>, kind: StatementKind, at_us: u64) -> QueryStats {
        QueryStats {
            fingerprint,
            text,
            kind,
            count: 0,
            commands: Vec::new(),
            errors: 0,
            round_trips: 0,
            first_byte: Latency::new(),
            latency: Latency::new(),
            rows_sum: 0,
            rows_max: 0,
            bytes_up: 0,
            bytes_down: 0,
            max_down: 0,
            wire_up: 0,
            wire_down: 0,
            compressibility: Compressibility::default(),
            unparsed: 0,
            first_seen_us: at_us,
            last_seen_us: at_us,
            folded: 0,
            example: None,
            injected_us: 0,
            retransmission_waits: Latency::new(),
        }
    }

    fn add(&mut self, r: &CommandRecord) {
        if counts_as_execution(r.command) {
            self.count += 1;
        }
        match self.commands.iter_mut().find(|(c, _)| *c == r.command) {
            Some((_, n)) => *n += 1,
            None => self.commands.push((r.command, 1)),
        }
        self.errors += u64::from(r.error.is_some());
        self.round_trips += u64::from(r.round_trips);
        if let Some(us) = r.first_byte_latency_us() {
            self.first_byte.record(us);
        }
        self.latency.record(r.latency_us());
        if r.retransmission_wait {
            self.retransmission_waits.record(r.latency_us());
        }
        self.rows_sum += r.rows;
        self.rows_max = self.rows_max.max(r.rows);
        self.bytes_up += r.bytes_up;
        self.bytes_down += r.bytes_down;
        self.max_down = self.max_down.max(r.bytes_down);
        let (wire_up, wire_down) = r.wire();
        self.wire_up += wire_up;
        self.wire_down += wire_down;
        if let Some(PayloadSample::Measured(m)) = &r.payload_sample {
            self.compressibility.add(m);
        }
        self.unparsed += u64::from(r.unparsed);
        self.first_seen_us = self.first_seen_us.min(r.request_us);
        self.last_seen_us = self.last_seen_us.max(r.last_byte_us);
        self.injected_us += r.injected_within_latency();
        if self.example.is_none() {
            self.example.clone_from(&r.example);
        }
    }

    /// Packs its distributions (see [`Latency::pack`]).
    fn pack(&mut self) {
        self.first_byte.pack();
        self.latency.pack();
        self.retransmission_waits.pack();
    }

    /// Folds `other`, another statement class, into this one (the `other` entry).
    fn merge(&mut self, other: &QueryStats) {
        self.absorb(other);
        self.folded += other.folded.max(1);
    }

    /// Adds `other`'s counts, sums and distributions to this one's.
    fn absorb(&mut self, other: &QueryStats) {
        self.count += other.count;
        for &(c, n) in &other.commands {
            match self.commands.iter_mut().find(|(mine, _)| *mine == c) {
                Some((_, m)) => *m += n,
                None => self.commands.push((c, n)),
            }
        }
        self.errors += other.errors;
        self.round_trips += other.round_trips;
        self.first_byte.merge(&other.first_byte);
        self.latency.merge(&other.latency);
        self.retransmission_waits.merge(&other.retransmission_waits);
        self.rows_sum += other.rows_sum;
        self.rows_max = self.rows_max.max(other.rows_max);
        self.bytes_up += other.bytes_up;
        self.bytes_down += other.bytes_down;
        self.wire_up += other.wire_up;
        self.wire_down += other.wire_down;
        self.compressibility.add(&other.compressibility);
        self.unparsed += other.unparsed;
        self.max_down = self.max_down.max(other.max_down);
        self.first_seen_us = self.first_seen_us.min(other.first_seen_us);
        self.last_seen_us = self.last_seen_us.max(other.last_seen_us);
        self.injected_us += other.injected_us;
    }
}

/// Whether a command is one run of its statement. Prepares, fetches and the
/// other statement housekeeping cost round trips but are not runs.
pub fn counts_as_execution(command: u8) -> bool {
    !matches!(command, COM_STMT_PREPARE | COM_STMT_FETCH | COM_STMT_CLOSE | COM_STMT_RESET | COM_STMT_SEND_LONG_DATA)
}

/// One client connection.
#[derive(Clone, Debug)]
pub struct ConnectionStats {
    /// The relay's connection id (as in [`Event::Connected`]).
    pub id: u64,
    /// The client's address as the listener accepted it.
    pub client: Arc<str>,
    /// How each leg is carried, and the client library: shared by the copies a rolling
    /// window's slots keep of the connection.
    pub legs: Arc<Legs>,
    /// Logged-in user, updated by `COM_CHANGE_USER`.
    pub user: Arc<str>,
    /// Default schema, updated by `USE` / `COM_INIT_DB`; `None` when none is selected.
    pub schema: Option<Arc<str>>,
    /// When it was accepted, µs since the recording epoch.
    pub opened_us: u64,
    /// When it ended, µs since the recording epoch; `None` while open.
    pub closed_us: Option<u64>,
    /// Every command recorded, executions or not.
    pub commands: u64,
    /// Commands answered with an ERR packet.
    pub errors: u64,
    /// Client waits over all its commands.
    pub round_trips: u64,
    /// Request to last response byte, µs, per command.
    pub latency: Latency,
    /// MySQL packet bytes sent by the client, headers included, uncompressed.
    pub bytes_up: u64,
    /// MySQL packet bytes sent to the client, headers included, uncompressed.
    pub bytes_down: u64,
    /// Bytes on the long hop's wire (compressed when it is).
    pub wire_up: u64,
    /// Downstream counterpart of `wire_up`.
    pub wire_down: u64,
    /// Rows returned over all its commands.
    pub rows: u64,
    /// The upstream's base RTT as last measured, µs (0: unknown).
    pub rtt_us: u32,
    /// Of the latency sum, what an emulated link added, µs.
    pub injected_us: u64,
    /// Slow start's rounds and the streaming they overlap, of its large responses (as in [`Totals`]).
    pub large_responses: LargeResponses,
}

/// Everything recorded since start (or the last reset); the report's
/// `totals` as they are.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Totals {
    /// Every command recorded, including prepares, fetches and the handshake (`CONNECT`).
    pub commands: u64,
    /// Commands that ran a statement (see [`counts_as_execution`]).
    pub executions: u64,
    /// Commands answered with an ERR packet.
    pub errors: u64,
    /// Times a client waited for the server, summed.
    pub round_trips: u64,
    /// Sum of request-to-last-byte time over all commands, µs: connection-time, which
    /// counts twice what two connections spent waiting at the same moment.
    pub time_us: u64,
    /// Wall time during which at least one command was in flight, µs: `time_us` with
    /// overlapping commands counted once (`docs/time-model.md`). Never more than the
    /// recording's window; 0 in reports written before it existed.
    #[serde(default)]
    pub busy_us: u64,
    /// MySQL packet bytes clients sent, headers included, uncompressed.
    pub bytes_up: u64,
    /// MySQL packet bytes sent to clients, headers included, uncompressed.
    pub bytes_down: u64,
    /// Rows returned over all commands.
    pub rows: u64,
    /// Clients that logged in (handshakes relayed).
    pub connections: u64,
    /// Records lost because the collector fell behind (forwarding never
    /// waits). Counted by the relay; filled in when a report is made.
    pub events_dropped: u64,
    /// Of `time_us`, what an emulated link added (0 without injection).
    #[serde(default)]
    pub injected_us: u64,
    /// Bytes on the long hop's wire, up and down: compressed when it is, else the
    /// same as `bytes_up` / `bytes_down`.
    #[serde(default)]
    pub wire_up: u64,
    /// Downstream counterpart of `wire_up`.
    #[serde(default)]
    pub wire_down: u64,
    /// Commands whose response the state machine could not follow (forwarded anyway).
    #[serde(default)]
    pub unparsed: u64,
    /// Of `injected_us`, how much later than its settings the emulated link let requests and
    /// responses' ends go (timer and scheduling lateness on a busy machine): the link's time,
    /// never the server's.
    #[serde(default)]
    pub inject_late_us: u64,
    /// That lateness per command over an emulated link, µs: its percentiles (all 0 without
    /// an emulated link).
    #[serde(default)]
    pub inject_lateness: LatencySummary,
    /// Round trips TCP's slow start adds to the large responses, summed: a round trip per
    /// doubling of the window from ten segments to the response's size; and how long those
    /// responses streamed without the link. A projection charges the rounds at the target RTT
    /// where the bandwidth would not hold the transfer longer, overlapping the streaming.
    #[serde(flatten)]
    pub large_responses: LargeResponses,
}

/// The collector's view of everything recorded: totals, statement classes (bounded, see the module docs), connections open and recently closed.
#[derive(Clone, Debug)]
pub struct Aggregates {
    max_fingerprints: usize,
    /// Indexed: each command looks up its statement and its connection, mostly the ones
    /// the command before looked up.
    queries: IndexedMap<FingerprintId, QueryStats>,
    other: QueryStats,
    /// Boxed: a rolling window keeps a map per slot, and a vector of boxes has less slack
    /// than a vector of the stats themselves.
    connections: IndexedMap<u64, Box<ConnectionStats>>,
    closed: VecDeque<ConnectionStats>,
    /// The report's `totals`; its `busy_us` is filled in from `busy` by [`Aggregates::totals`].
    pub totals: Totals,
    /// The wall-clock union of every command's request-to-last-byte interval.
    busy: WallUnion,
    /// The emulated link's lateness per command that ran over it.
    lateness: Latency,
    /// Start of the recording window, µs since the epoch.
    pub since_us: u64,
    /// Since start; survives `reset` (Prometheus counters only go up).
    pub metrics: CommandMetrics,
    /// The upstream's base RTT as last measured on any connection, µs.
    pub rtt_us: u32,
    /// Whether commands also go to `metrics`: not in a rolling window's slots, which
    /// Prometheus never reads.
    metered: bool,
}

impl Aggregates {
    /// Keeps at most `max_fingerprints` statement classes (at least 1) past a fold; `since_us` starts the recording window.
    pub fn new(max_fingerprints: usize, since_us: u64) -> Aggregates {
        Aggregates {
            max_fingerprints: max_fingerprints.max(1),
            queries: IndexedMap::default(),
            other: QueryStats::new(OTHER_FINGERPRINT, Arc::from("(other statements)"), StatementKind::Other, since_us),
            connections: IndexedMap::default(),
            closed: VecDeque::new(),
            totals: Totals::default(),
            busy: WallUnion::default(),
            lateness: Latency::new(),
            since_us,
            metrics: CommandMetrics::default(),
            rtt_us: 0,
            metered: true,
        }
    }

    /// The report's `totals`: the counters, and the wall time commands were in flight.
    pub fn totals(&self) -> Totals {
        Totals { busy_us: self.busy.us(), inject_lateness: self.lateness.summary(), ..self.totals }
    }

    /// Aggregates that keep no Prometheus metrics: a rolling window's slot, or a window
    /// merged from slots.
    pub fn unmetered(max_fingerprints: usize, since_us: u64) -> Aggregates {
        Aggregates { metered: false, metrics: CommandMetrics::new(0), ..Aggregates::new(max_fingerprints, since_us) }
    }

    /// Folds one event in; a command of an unknown connection still counts in totals and its statement class.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::Connected(c) => {
                let Connected { conn_id, client, legs, user, schema, at_us } = &**c;
                self.totals.connections += 1;
                self.connections.insert(
                    *conn_id,
                    Box::new(ConnectionStats::opened(
                        *conn_id,
                        client.clone(),
                        Arc::new(legs.as_ref().clone()),
                        user.clone(),
                        schema.clone(),
                        *at_us,
                    )),
                );
            }
            Event::Command(r) => self.command(r, None),
            Event::Identity(change) => {
                let IdentityChange { conn_id, user, schema } = &**change;
                if let Some(c) = self.connections.get_mut(conn_id) {
                    c.user = user.clone();
                    c.schema = schema.clone();
                }
            }
            Event::Closed { conn_id, at_us } => {
                if let Some(c) = self.connections.remove(conn_id) {
                    let mut c = *c;
                    c.closed_us = Some(*at_us);
                    // Only read from now on.
                    c.latency.pack();
                    if self.closed.len() >= CLOSED_KEPT {
                        self.closed.pop_front();
                    }
                    self.closed.push_back(c);
                }
            }
        }
    }

    /// Folds a command in, as [`apply`](Self::apply) does, taking its connection from
    /// `directory` if this recording does not know it yet: how a rolling window's slot learns
    /// of a connection opened before it began, in the one look-up the command needs anyway.
    pub fn apply_command(&mut self, r: &CommandRecord, directory: &HashMap<u64, ConnectionStats>) {
        self.command(r, Some(directory));
    }

    /// Counts a command in the Prometheus metrics alone: the cumulative recording's part
    /// when the rest of the command goes to a rolling window's slot ([`Recording`](super::Recording)).
    #[inline(always)]
    pub fn meter(&mut self, r: &CommandRecord) {
        if self.metered {
            self.metrics.record(r);
        }
    }

    fn command(&mut self, r: &CommandRecord, directory: Option<&HashMap<u64, ConnectionStats>>) {
        self.meter(r);
        let t = &mut self.totals;
        t.commands += 1;
        t.executions += u64::from(counts_as_execution(r.command));
        t.errors += u64::from(r.error.is_some());
        t.round_trips += u64::from(r.round_trips);
        t.time_us += r.latency_us();
        t.injected_us += r.injected_within_latency();
        self.busy.add(r.request_us, r.last_byte_us);
        if r.injected_us > 0 {
            t.inject_late_us += r.late_us;
            self.lateness.record(r.late_us);
        }
        t.bytes_up += r.bytes_up;
        t.bytes_down += r.bytes_down;
        let (wire_up, wire_down) = r.wire();
        t.wire_up += wire_up;
        t.wire_down += wire_down;
        let large_responses = LargeResponses::of(r);
        t.large_responses.add(large_responses);
        t.unparsed += u64::from(r.unparsed);
        t.rows += r.rows;
        let connection = self.connections.get_or_try_insert_with(r.conn_id, || {
            directory.and_then(|d| d.get(&r.conn_id)).map(|template| Box::new(template.clone()))
        });
        if let Some(c) = connection {
            c.commands += 1;
            c.errors += u64::from(r.error.is_some());
            c.round_trips += u64::from(r.round_trips);
            c.latency.record(r.latency_us());
            c.bytes_up += r.bytes_up;
            c.bytes_down += r.bytes_down;
            c.wire_up += wire_up;
            c.wire_down += wire_down;
            c.rows += r.rows;
            c.injected_us += r.injected_within_latency();
            c.large_responses.add(large_responses);
            if r.rtt_us > 0 {
                c.rtt_us = r.rtt_us;
            }
        }
        if r.rtt_us > 0 {
            self.rtt_us = r.rtt_us;
        }
        self.queries
            .get_or_insert_with(r.fingerprint, || QueryStats::new(r.fingerprint, r.text.clone(), r.kind, r.request_us))
            .add(r);
        if self.queries.len() >= 2 * self.max_fingerprints {
            self.fold();
        }
    }

    /// Keeps the `max_fingerprints` classes with the most total time.
    fn fold(&mut self) {
        let mut by_time: Vec<(u64, FingerprintId)> =
            self.queries.values().map(|q| (q.latency.sum(), q.fingerprint)).collect();
        by_time.sort_unstable_by(|a, b| b.cmp(a));
        for &(_, id) in &by_time[self.max_fingerprints.min(by_time.len())..] {
            if let Some(q) = self.queries.remove(&id) {
                self.other.merge(&q);
            }
        }
    }

    /// Statement classes by total time, slowest first; `other` last if used.
    pub fn queries(&self) -> Vec<&QueryStats> {
        let mut all: Vec<&QueryStats> = self.queries.values().collect();
        all.sort_by(|a, b| b.latency.sum().cmp(&a.latency.sum()).then(a.fingerprint.cmp(&b.fingerprint)));
        if self.other.folded > 0 {
            all.push(&self.other);
        }
        all
    }

    /// A listed statement class; `None` for one never seen or folded into `other`.
    pub fn query(&self, id: FingerprintId) -> Option<&QueryStats> {
        self.queries.get(&id)
    }

    /// An open connection's totals.
    pub fn connection(&self, id: u64) -> Option<&ConnectionStats> {
        self.connections.get(&id).map(|c| &**c)
    }

    /// Open connections, oldest first.
    pub fn live_connections(&self) -> Vec<&ConnectionStats> {
        let mut live: Vec<&ConnectionStats> = self.connections.values().map(|c| &**c).collect();
        live.sort_by_key(|c| c.id);
        live
    }

    /// Open connections, then the most recently closed ones.
    pub fn connections(&self) -> impl Iterator<Item = &ConnectionStats> {
        self.live_connections().into_iter().chain(self.closed.iter().rev())
    }

    /// Packs every distribution (see [`Latency::pack`]) for aggregates that are only read
    /// from now on, such as a rolling window's past slot: a connection's latency histogram
    /// shrinks from kilobytes to a few bytes per distinct value. Readings stay the same.
    pub fn pack(&mut self) {
        for q in self.queries.values_mut().chain(std::iter::once(&mut self.other)) {
            q.pack();
        }
        for c in self.connections.values_mut().map(|c| &mut **c).chain(self.closed.iter_mut()) {
            c.latency.pack();
        }
    }

    /// Forgets everything recorded; open connections stay, with zeroed counters.
    pub fn reset(&mut self, now_us: u64) {
        let live: Vec<ConnectionStats> = self.connections.drain().map(|(_, c)| *c).collect();
        let (metrics, metered) = (std::mem::take(&mut self.metrics), self.metered);
        *self = Aggregates::new(self.max_fingerprints, now_us);
        (self.metrics, self.metered) = (metrics, metered);
        for c in live {
            self.connections.insert(c.id, Box::new(c.zeroed()));
        }
    }
}

impl ConnectionStats {
    /// A connection accepted at `opened_us`, nothing recorded yet: the one place every
    /// counter starts from.
    fn opened(
        id: u64,
        client: Arc<str>,
        legs: Arc<Legs>,
        user: Arc<str>,
        schema: Option<Arc<str>>,
        opened_us: u64,
    ) -> ConnectionStats {
        ConnectionStats {
            id,
            client,
            legs,
            user,
            schema,
            opened_us,
            closed_us: None,
            commands: 0,
            errors: 0,
            round_trips: 0,
            latency: Latency::new(),
            bytes_up: 0,
            bytes_down: 0,
            wire_up: 0,
            wire_down: 0,
            rows: 0,
            rtt_us: 0,
            injected_us: 0,
            large_responses: LargeResponses::default(),
        }
    }

    /// The same connection with nothing recorded yet (its close and last RTT kept): what a
    /// reset, or a new window slot, starts from.
    pub fn zeroed(self) -> ConnectionStats {
        let (closed_us, rtt_us) = (self.closed_us, self.rtt_us);
        ConnectionStats {
            closed_us,
            rtt_us,
            ..ConnectionStats::opened(self.id, self.client, self.legs, self.user, self.schema, self.opened_us)
        }
    }
}

mod merge;
#[cfg(test)]
mod tests;
