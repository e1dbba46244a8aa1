//! Per-command records and their aggregates.
//!
//! The relay's [`Recorder`] (one per connection, on the forwarding path)
//! turns what the protocol state machine sees into compact [`Event`]s and
//! hands them to a bounded channel with `try_send`: when the channel is
//! full the event is counted as dropped and forwarding goes on. The
//! [`Collector`] drains the channel in batches, off the forwarding path, and
//! keeps the [`Aggregates`] that metrics and reports read.

mod aggregate;
mod collector;
mod latency;
mod metric_state;
mod recorder;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::mpsc;
use tokio::time::Instant;

pub use aggregate::{Aggregates, ConnectionStats, QueryStats, Totals, OTHER_FINGERPRINT};
pub use collector::{Collector, Consumer};
pub use latency::{Latency, LatencySummary};
pub use metric_state::{BucketHistogram, CommandMetrics, BYTES_BUCKETS, SECONDS_BUCKETS};
pub use recorder::{Recorder, RecorderSettings};

use crate::fingerprint::{FingerprintId, Limit, StatementKind};
use crate::link::LinkSample;

/// Microseconds since the process's recording epoch: compact monotonic
/// timestamps that all connections share.
pub fn micros(at: Instant) -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    at.saturating_duration_since(epoch).as_micros() as u64
}

/// Up to four hashed values (literals or parameters), in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Values {
    hashes: [u64; 4],
    len: u8,
}

impl Values {
    pub fn push(&mut self, hash: u64) {
        if let Some(slot) = self.hashes.get_mut(usize::from(self.len)) {
            *slot = hash;
            self.len += 1;
        }
    }

    pub fn as_slice(&self) -> &[u64] {
        &self.hashes[..usize::from(self.len)]
    }
}

/// One command and its response.
#[derive(Clone, Debug)]
pub struct CommandRecord {
    pub conn_id: u64,
    /// The command byte (`COM_QUERY`, ...); `CONNECT` for the handshake.
    pub command: u8,
    /// The statement this command ran or served. Commands without SQL get a
    /// pseudo-fingerprint named after the command (`COM_PING`).
    pub fingerprint: FingerprintId,
    pub text: Arc<str>,
    pub kind: StatementKind,
    /// When the command's first byte arrived, µs since the epoch.
    pub request_us: u64,
    /// When the first response byte arrived; `None` when there was no response.
    pub first_byte_us: Option<u64>,
    /// When the last response byte arrived (or the request ended, without a response).
    pub last_byte_us: u64,
    pub round_trips: u32,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub rows: u64,
    pub columns: u32,
    pub affected_rows: u64,
    pub warnings: u32,
    pub error: Option<u16>,
    /// Statement id for the `COM_STMT_*` family.
    pub statement: Option<u32>,
    /// Rows a `COM_STMT_FETCH` asked for.
    pub fetch_rows: u32,
    /// A `COM_STMT_EXECUTE` that opened a cursor (rows follow by fetches).
    pub cursor: bool,
    /// Hashed literal values (text) or parameters (prepared).
    pub values: Values,
    pub limit: Option<Limit>,
    pub rows_in_values: u32,
    /// W3C trace id from a traceparent comment.
    pub trace: Option<u128>,
    /// The SQL with its literals, the first time a connection runs a
    /// statement, only when `report.examples` is on.
    pub example: Option<Box<str>>,
    /// Hashes of key-like values (leading columns of the first rows) of a
    /// multi-row result: a possible parent of an N+1 loop.
    pub sample: Option<Box<[u64]>>,
    /// The upstream path's base RTT as the kernel last measured it, µs (0: unknown).
    pub rtt_us: u32,
    /// Of the command's time, how much an emulated link added, µs.
    pub injected_us: u64,
}

impl CommandRecord {
    /// A record of `command` on connection `conn_id`, requested at
    /// `request_us`, attributed to `fingerprint`; everything else empty
    /// until the command's response fills it in.
    pub fn new(conn_id: u64, command: u8, fingerprint: FingerprintId, text: Arc<str>, request_us: u64) -> CommandRecord {
        CommandRecord {
            conn_id,
            command,
            fingerprint,
            text,
            kind: StatementKind::Other,
            request_us,
            first_byte_us: None,
            last_byte_us: request_us,
            round_trips: 0,
            bytes_up: 0,
            bytes_down: 0,
            rows: 0,
            columns: 0,
            affected_rows: 0,
            warnings: 0,
            error: None,
            statement: None,
            fetch_rows: 0,
            cursor: false,
            values: Values::default(),
            limit: None,
            rows_in_values: 0,
            trace: None,
            example: None,
            sample: None,
            rtt_us: 0,
            injected_us: 0,
        }
    }

    /// Time from request to last response byte.
    pub fn latency_us(&self) -> u64 {
        self.last_byte_us.saturating_sub(self.request_us)
    }

    /// Time from request to first response byte: the server's work plus one round trip.
    pub fn first_byte_latency_us(&self) -> Option<u64> {
        self.first_byte_us.map(|t| t.saturating_sub(self.request_us))
    }
}

/// Live state of one connection, written by its relay task and read by
/// `/connections`: the command in flight (plain atomic stores) and the
/// latest socket readings.
#[derive(Debug, Default)]
pub struct LiveConnection {
    /// The command byte in flight plus one; 0 when idle.
    pub current_command: AtomicU64,
    pub current_since_us: AtomicU64,
    link: Mutex<Option<LiveLink>>,
}

/// The latest readings of a connection's two sockets.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct LiveLink {
    pub at_us: u64,
    pub upstream: LinkSample,
    pub client: Option<LinkSample>,
}

impl LiveConnection {
    pub fn current(&self) -> Option<(u8, u64)> {
        let command = self.current_command.load(Ordering::Relaxed);
        let since = self.current_since_us.load(Ordering::Relaxed);
        command.checked_sub(1).map(|c| (c as u8, since))
    }

    /// Called by the relay, at most every sample interval. `try_lock` never
    /// waits: if a reader holds the lock, this reading is skipped.
    pub fn publish(&self, link: LiveLink) {
        if let Ok(mut slot) = self.link.try_lock() {
            *slot = Some(link);
        }
    }

    pub fn link(&self) -> Option<LiveLink> {
        self.link.lock().map(|l| *l).unwrap_or(None)
    }
}

/// What the relay tells the collector. Records travel inline (no box): the
/// channel's slots are allocated in blocks, so a record costs no allocation.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Event {
    Connected {
        conn_id: u64,
        client: SocketAddr,
        user: Arc<str>,
        schema: Option<Arc<str>>,
        at_us: u64,
        live: Arc<LiveConnection>,
    },
    Command(CommandRecord),
    /// A large transfer's limit, or a run of small responses judged latency-bound.
    Link { conn_id: u64, at_us: u64, measurement: crate::link::Measurement },
    /// The default schema changed (`COM_INIT_DB`, `USE`, change user).
    Schema { conn_id: u64, schema: Option<Arc<str>>, user: Option<Arc<str>> },
    Closed { conn_id: u64, at_us: u64 },
}

/// The relay's end of the event channel. Cloned into every connection.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: mpsc::Sender<Event>,
    dropped: Arc<AtomicU64>,
}

impl EventSink {
    /// A channel holding at most `capacity` events.
    pub fn channel(capacity: usize) -> (EventSink, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (EventSink { tx, dropped: Arc::default() }, rx)
    }

    /// Never waits: a full channel drops the event and counts it.
    pub fn send(&self, event: Event) {
        if self.tx.try_send(event).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Events dropped because the collector fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The drop counter alone, for readers that must not hold a sender
    /// (which would keep the channel open past shutdown).
    pub fn dropped_counter(&self) -> Arc<AtomicU64> {
        self.dropped.clone()
    }
}
