//! One command and its response, as the recorder saw it: the record every
//! aggregate, detector and report is built from.

use std::sync::Arc;

use super::{Origin, PayloadSample};
use crate::fingerprint::{FingerprintId, Paging, StatementKind};

/// Up to four hashed values (literals or parameters), in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Values {
    hashes: [u64; 4],
    len: u8,
}

impl Values {
    /// Appends a hash; past the fourth, values are dropped silently (the first four are what loops compare).
    pub fn push(&mut self, hash: u64) {
        if let Some(slot) = self.hashes.get_mut(usize::from(self.len)) {
            *slot = hash;
            self.len += 1;
        }
    }

    /// The hashes pushed so far, in order (at most four).
    pub fn as_slice(&self) -> &[u64] {
        &self.hashes[..usize::from(self.len)]
    }
}

/// One command and its response.
#[derive(Clone, Debug)]
pub struct CommandRecord {
    /// The relay's id of the client connection (the `Event::Connected` one).
    pub conn_id: u64,
    /// The command byte (`COM_QUERY`, ...); `CONNECT` for the handshake.
    pub command: u8,
    /// The statement this command ran or served. Commands without SQL get a
    /// pseudo-fingerprint named after the command (`COM_PING`).
    pub fingerprint: FingerprintId,
    /// The fingerprint's normalised SQL (literals replaced), or the command's name.
    pub text: Arc<str>,
    /// SELECT, INSERT, ... as the fingerprinter classed the statement; `Other` until known.
    pub kind: StatementKind,
    /// When the command's first byte arrived, µs since the epoch.
    pub request_us: u64,
    /// When the first response byte arrived; `None` when there was no response.
    pub first_byte_us: Option<u64>,
    /// When the last response byte arrived (or the request ended, without a response).
    pub last_byte_us: u64,
    /// Times the client waited for the server; for `CONNECT`, plus the TCP handshake, greeting and upstream TLS.
    pub round_trips: u32,
    /// MySQL packet bytes the client sent for it, 4-byte headers included (uncompressed).
    pub bytes_up: u64,
    /// MySQL packet bytes of the response, 4-byte headers included (uncompressed).
    pub bytes_down: u64,
    /// Bytes on the long hop's wire when it is compressed (`None`: the same as
    /// `bytes_up` / `bytes_down`). What a link's bandwidth charges for.
    pub wire_up: Option<u64>,
    /// Downstream counterpart of `wire_up`.
    pub wire_down: Option<u64>,
    /// Rows returned, over every result set of the response.
    pub rows: u64,
    /// Columns of the first result set (0 without one).
    pub columns: u32,
    /// From the OK packet(s): rows written, or a bulk execute's rows.
    pub affected_rows: u64,
    /// Warning count from the last OK/EOF.
    pub warnings: u32,
    /// The server's error code when the response was an ERR packet.
    pub error: Option<u16>,
    /// Statement id for the `COM_STMT_*` family.
    pub statement: Option<u32>,
    /// Rows a `COM_STMT_FETCH` asked for.
    pub fetch_rows: u32,
    /// A `COM_STMT_EXECUTE` that opened a cursor (rows follow by fetches).
    pub cursor: bool,
    /// Hashed literal values (text) or parameters (prepared).
    pub values: Values,
    /// The `LIMIT`/`OFFSET` page, when its numbers are literals or bound parameters.
    pub paging: Option<Paging>,
    /// Rows in an `INSERT ... VALUES (...), (...)` list (0 for other statements): a batch insert is not a loop.
    pub rows_in_values: u32,
    /// W3C trace id from a traceparent comment.
    pub trace: Option<u128>,
    /// Where in the application it came from: its sqlcommenter `controller`, `route`, ...
    pub origin: Option<Arc<Origin>>,
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
    /// The state machine lost its place in this command's response: counts are partial.
    pub unparsed: bool,
    /// The long-haul socket retransmitted, or received out of order behind a hole, while
    /// this command waited: a lost segment held it up.
    pub retransmission_wait: bool,
    /// A slice of a large result, while the long hop is not compressed: copied by the
    /// recorder, measured (compressed) by the collector before anyone else sees the record.
    pub payload_sample: Option<PayloadSample>,
}

impl CommandRecord {
    /// A record of `command` on connection `conn_id`, requested at
    /// `request_us`, attributed to `fingerprint`; everything else empty
    /// until the command's response fills it in.
    pub fn new(
        conn_id: u64,
        command: u8,
        fingerprint: FingerprintId,
        text: Arc<str>,
        request_us: u64,
    ) -> CommandRecord {
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
            wire_up: None,
            wire_down: None,
            rows: 0,
            columns: 0,
            affected_rows: 0,
            warnings: 0,
            error: None,
            statement: None,
            fetch_rows: 0,
            cursor: false,
            values: Values::default(),
            paging: None,
            rows_in_values: 0,
            trace: None,
            origin: None,
            example: None,
            sample: None,
            rtt_us: 0,
            injected_us: 0,
            unparsed: false,
            retransmission_wait: false,
            payload_sample: None,
        }
    }

    /// Bytes on the long hop's wire, up and down (compressed when it is).
    pub fn wire(&self) -> (u64, u64) {
        (self.wire_up.unwrap_or(self.bytes_up), self.wire_down.unwrap_or(self.bytes_down))
    }

    /// Time from request to last response byte.
    pub fn latency_us(&self) -> u64 {
        self.last_byte_us.saturating_sub(self.request_us)
    }

    /// Of [`Self::latency_us`], what the emulated link added. The recorder counts the time the
    /// link held the request too, which a command without a response (`COM_QUIT`) never
    /// waited for: what it added to this command's time is at most that time.
    pub fn injected_within_latency(&self) -> u64 {
        self.injected_us.min(self.latency_us())
    }

    /// Time from request to first response byte: the server's work plus one round trip.
    pub fn first_byte_latency_us(&self) -> Option<u64> {
        self.first_byte_us.map(|t| t.saturating_sub(self.request_us))
    }
}
