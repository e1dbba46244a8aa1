//! One command and its response, as the recorder saw it: the record every
//! aggregate, detector and report is built from.

use std::sync::Arc;

use super::{Origin, PayloadSample};
use crate::fingerprint::{FingerprintId, Paging, StatementKind};
use crate::inject::slow_start::INITIAL_WINDOW;

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

/// [`CommandRecord::slow_start_rounds`] of a response of `bytes`.
fn slow_start_rounds(bytes: u64) -> u64 {
    // k rounds carry INITIAL_WINDOW × (2^k − 1): the fewest that carry `bytes`, less the first.
    u64::from((bytes.saturating_sub(1) / INITIAL_WINDOW + 1).ilog2())
}

/// What TCP's slow start does to some commands' large responses over a far link, summed.
/// Flattened into the report's objects, so its keys read `slow_start_rounds`,
/// `slow_start_stream_us`, `slow_start_responses` and `slow_start_bytes` there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LargeResponses {
    /// Round trips slow start adds to the responses ([`CommandRecord::slow_start_rounds`]).
    #[serde(rename = "slow_start_rounds", default)]
    pub rounds: u64,
    /// Of the commands' time without the link, how long those responses streamed, from the
    /// server's first byte to the client's last ([`CommandRecord::stream_us`]), µs: what the
    /// rounds overlap.
    #[serde(rename = "slow_start_stream_us", default)]
    pub stream_us: u64,
    /// How many responses slow start stretches: a projection replays one of their average
    /// size and streaming over the target link (`findings::whatif`).
    #[serde(rename = "slow_start_responses", default)]
    pub responses: u64,
    /// Their bytes down on the long hop's wire, summed.
    #[serde(rename = "slow_start_bytes", default)]
    pub bytes: u64,
}

impl LargeResponses {
    /// One command's.
    pub fn of(r: &CommandRecord) -> LargeResponses {
        let rounds = r.slow_start_rounds();
        if rounds == 0 {
            return LargeResponses::default();
        }
        LargeResponses { rounds, stream_us: r.stream_us(), responses: 1, bytes: r.wire().1 }
    }

    /// Sums `other` into this.
    pub fn add(&mut self, other: LargeResponses) {
        self.rounds += other.rounds;
        self.stream_us += other.stream_us;
        self.responses += other.responses;
        self.bytes += other.bytes;
    }
}

/// One command and its response. The default is empty: connection 0, no statement.
#[derive(Clone, Debug, Default)]
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
    /// When the first response byte came off the server's socket: `first_byte_us` less the
    /// time an emulated link held it (the same without one).
    pub first_arrived_us: Option<u64>,
    /// Of `injected_us`, what the emulated link added before the response began (the
    /// request's hold, lateness and stalls), µs: the rest fell while the response streamed.
    pub request_injected_us: u64,
    /// Of the response after its first read, the reads that came as the server sent them —
    /// no stall on the emulated link's full buffer before them, no backlog filling rttscope's
    /// buffer — their gaps summed, µs: the server's own pace, with [`Self::paced_bytes`].
    pub paced_us: u64,
    /// The bytes of those reads.
    pub paced_bytes: u64,
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
    /// Of the command's time, how much an emulated link added, µs: as measured, with
    /// `late_us` in it.
    pub injected_us: u64,
    /// Of `injected_us`, how much later than its settings the emulated link let the request
    /// and the response's end go (its timers' and the relay's lateness on a busy machine), µs.
    pub late_us: u64,
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
        let mut record = CommandRecord::default();
        record.reset(conn_id, command, fingerprint, text, request_us);
        record
    }

    /// Makes this record what [`CommandRecord::new`] makes, in place: every field but the
    /// five given back to its default. Field by field, so a recycled box
    /// ([`super::pool::boxed`]) is rewritten where it is rather than a record being built
    /// beside it and copied in (a few hundred bytes a command: some 60 instructions,
    /// callgrind). Every field is named: a new one does not compile until it is reset here.
    #[inline(always)]
    pub fn reset(&mut self, conn_id: u64, command: u8, fingerprint: FingerprintId, text: Arc<str>, request_us: u64) {
        let CommandRecord {
            conn_id: conn,
            command: cmd,
            fingerprint: fp,
            text: t,
            kind,
            request_us: requested,
            first_byte_us,
            last_byte_us,
            first_arrived_us,
            request_injected_us,
            paced_us,
            paced_bytes,
            round_trips,
            bytes_up,
            bytes_down,
            wire_up,
            wire_down,
            rows,
            columns,
            affected_rows,
            warnings,
            error,
            statement,
            fetch_rows,
            cursor,
            values,
            paging,
            rows_in_values,
            trace,
            origin,
            example,
            sample,
            rtt_us,
            injected_us,
            late_us,
            unparsed,
            retransmission_wait,
            payload_sample,
        } = self;
        (*conn, *cmd, *fp, *t, *requested, *last_byte_us) =
            (conn_id, command, fingerprint, text, request_us, request_us);
        *kind = StatementKind::default();
        (*first_byte_us, *first_arrived_us) = (None, None);
        (*round_trips, *columns, *warnings, *fetch_rows, *rows_in_values, *rtt_us) = (0, 0, 0, 0, 0, 0);
        (*bytes_up, *bytes_down, *rows, *affected_rows, *injected_us, *late_us) = (0, 0, 0, 0, 0, 0);
        (*request_injected_us, *paced_us, *paced_bytes) = (0, 0, 0);
        (*wire_up, *wire_down) = (None, None);
        *error = None;
        *statement = None;
        (*cursor, *unparsed, *retransmission_wait) = (false, false, false);
        *values = Values::default();
        *paging = None;
        *trace = None;
        *origin = None;
        *example = None;
        *sample = None;
        *payload_sample = None;
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
    /// waited for: what it added to this command's time is at most that time. Less, for a
    /// large response, the time the server went on streaming while the link held rttscope's
    /// buffer full ([`Self::stream_us`]): the server's time as much as the link's.
    pub fn injected_within_latency(&self) -> u64 {
        // Without a link there is nothing to share out (most commands: no streaming to work out).
        if self.injected_us == 0 {
            return 0;
        }
        let overlapped = self.streaming().map_or(0, |(beside_held, stream)| stream - beside_held);
        self.held_within_latency().saturating_sub(overlapped)
    }

    /// What the emulated link held the command, as the relay counted it, within its latency.
    fn held_within_latency(&self) -> u64 {
        self.injected_us.min(self.latency_us())
    }

    /// Round trips TCP's slow start adds to this command's response beyond the first: a
    /// round trip for each doubling of the window from the kernel's initial ten segments
    /// (`initcwnd`) until it carried the response — 0 up to 14 KB, 11 for 40 MB. Over a link
    /// whose bandwidth holds the response longer, that is the bandwidth's time instead.
    pub fn slow_start_rounds(&self) -> u64 {
        slow_start_rounds(self.wire().1)
    }

    /// For a response slow start stretches (see [`Self::slow_start_rounds`]; 0 for others),
    /// how long it streamed without the link, µs: from its first byte's arrival from the
    /// server to its last byte's going to the client, less what the emulated link added
    /// meanwhile, and at most the command's time less what the link added. Measured from the
    /// server's socket because an emulated link releases the first bytes at its own slow
    /// start's pace, and the server went on producing meanwhile. The server producing the rows
    /// and the client reading them go on while a far link's window opens, so the rounds
    /// overlap this time.
    ///
    /// The link's hold is not all lost to the server: while the link held rttscope's buffer
    /// full, the server went on producing into the sockets' buffers, so a response streamed at
    /// least as long as its bytes take at the server's own pace, measured on the reads that
    /// came as it sent them ([`Self::paced_us`]) — when they carried a quarter of it or more.
    pub fn stream_us(&self) -> u64 {
        self.streaming().map_or(0, |(_, stream)| stream)
    }

    /// For a response slow start stretches: its streaming with everything the link held taken
    /// out, and its streaming ([`Self::stream_us`]), at least the first, µs.
    fn streaming(&self) -> Option<(u64, u64)> {
        let first_arrived_us = self.first_arrived_us.filter(|_| self.slow_start_rounds() > 0)?;
        let held_us = self.held_within_latency();
        let link_meanwhile_us = held_us.saturating_sub(self.request_injected_us);
        let real_path_us = u64::from(self.round_trips) * u64::from(self.rtt_us);
        let without_link = self.latency_us().saturating_sub(held_us).saturating_sub(real_path_us);
        let span = self.last_byte_us.saturating_sub(first_arrived_us);
        let beside_held = span.saturating_sub(link_meanwhile_us).min(without_link);
        Some((beside_held, beside_held.max(self.at_servers_pace_us().min(span))))
    }

    /// The response's bytes at the server's pace, µs; 0 when too few reads showed it.
    fn at_servers_pace_us(&self) -> u64 {
        if self.paced_bytes == 0 || self.paced_bytes < self.bytes_down / 4 {
            return 0;
        }
        (u128::from(self.bytes_down) * u128::from(self.paced_us) / u128::from(self.paced_bytes)) as u64
    }

    /// Time from request to first response byte: the server's work plus one round trip.
    pub fn first_byte_latency_us(&self) -> Option<u64> {
        self.first_byte_us.map(|t| t.saturating_sub(self.request_us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_takes_a_round_trip_per_doubling_of_ten_segments() {
        let rounds = [0, 1_000, 14_480, 14_481, 3 * 14_480, 3 * 14_480 + 1, 40_000_000].map(slow_start_rounds);
        assert_eq!(rounds, [0, 0, 0, 1, 1, 2, 11]);
    }

    #[test]
    fn a_large_response_streams_from_its_first_byte_to_its_last_without_the_link() {
        let mut r = CommandRecord {
            request_us: 1_000,
            first_byte_us: Some(21_000),
            first_arrived_us: Some(21_000),
            last_byte_us: 271_000,
            ..CommandRecord::default()
        };
        (r.round_trips, r.bytes_down) = (1, 40_000_000);
        assert_eq!(r.stream_us(), 250_000);
        // Over an emulated link that held most of it, only the rest is the server's and the client's.
        r.injected_us = 200_000;
        assert_eq!(r.stream_us(), 50_000);
        r.bytes_down = 14_000;
        assert_eq!(r.stream_us(), 0, "a response within the initial window has no rounds to overlap");
    }

    /// Over an emulated 15 ms link the first 64 KiB read is released after three rounds of
    /// its slow start, the last bytes half a round trip after they came: the server's and the
    /// client's streaming starts when the first byte came from the server, not when the link
    /// let it go. What the link added before the response (the request's hold) is not taken
    /// from it.
    #[test]
    fn a_large_responses_streaming_starts_at_its_first_byte_from_the_server() {
        let mut r = CommandRecord {
            request_us: 0,
            first_arrived_us: Some(12_000),
            first_byte_us: Some(12_000 + 45_000),
            last_byte_us: 857_000 + 7_500,
            ..CommandRecord::default()
        };
        (r.round_trips, r.bytes_down) = (1, 40_000_000);
        // 7.5 ms on the request's way up, 7.5 ms the end's way down, 2 ms reading waited.
        (r.injected_us, r.request_injected_us) = (7_500 + 7_500 + 2_000, 7_500);
        assert_eq!(r.stream_us(), 857_000 - 12_000 - 2_000);
    }

    /// The 15 ms rehearsal of whatif-accuracy's 40 MB read: the link's slow start held
    /// rttscope's buffer full for 140 ms of the response's 210, and the server went on
    /// producing meanwhile — half the response came in reads at its own pace, 330 MB/s. The
    /// response streamed as long as 40 MB take at that pace, and the link's hold it overlapped
    /// is not the link's alone: subtracted whole, the server's time came out at 60 ms, half
    /// what the plain run measured.
    #[test]
    fn a_server_producing_while_the_link_held_its_bytes_streamed_at_its_own_pace() {
        let mut r = CommandRecord {
            request_us: 0,
            first_arrived_us: Some(20_000),
            first_byte_us: Some(35_000),
            last_byte_us: 230_000,
            ..CommandRecord::default()
        };
        (r.round_trips, r.bytes_down) = (1, 40_000_000);
        (r.injected_us, r.request_injected_us) = (15_000 + 140_000, 15_000);
        assert_eq!(r.stream_us(), 230_000 - 20_000 - 140_000, "without reads at the server's pace");
        assert_eq!(r.injected_within_latency(), 155_000);
        (r.paced_bytes, r.paced_us) = (20_000_000, 60_000);
        assert_eq!(r.stream_us(), 120_000, "40 MB at 20 MB per 60 ms");
        assert_eq!(r.injected_within_latency(), 155_000 - (120_000 - 70_000));
        // A few reads at some pace say nothing: under a bandwidth limit hardly one comes.
        (r.paced_bytes, r.paced_us) = (9_000_000, 1_000);
        assert_eq!((r.stream_us(), r.injected_within_latency()), (70_000, 155_000));
    }

    /// A recycled record, reset, is exactly a new one: nothing of the command it carried
    /// before survives into the next.
    #[test]
    fn a_reset_record_is_a_new_one() {
        let text: Arc<str> = Arc::from("select ?");
        let mut used = CommandRecord::new(7, 3, FingerprintId(9), Arc::from("insert ?"), 5);
        used.kind = StatementKind::Insert;
        (used.first_byte_us, used.last_byte_us, used.round_trips) = (Some(6), 9, 2);
        (used.bytes_up, used.bytes_down, used.wire_up, used.wire_down) = (1, 2, Some(3), Some(4));
        (used.rows, used.columns, used.affected_rows, used.warnings) = (5, 6, 7, 8);
        (used.error, used.statement, used.fetch_rows, used.cursor) = (Some(1064), Some(1), 100, true);
        used.values.push(42);
        used.paging = Some(Paging { count: 10, offset: 20 });
        (used.rows_in_values, used.trace) = (3, Some(77));
        used.origin = Some(Arc::new(Origin::default()));
        (used.example, used.sample) = (Some("insert 1".into()), Some(Box::from([1u64, 2].as_slice())));
        (used.rtt_us, used.injected_us, used.unparsed, used.retransmission_wait) = (10, 11, true, true);
        (used.late_us, used.first_arrived_us, used.request_injected_us) = (12, Some(13), 14);
        (used.paced_us, used.paced_bytes) = (15, 16);
        used.payload_sample = Some(PayloadSample::Bytes(Box::from([1u8, 2, 3].as_slice())));

        used.reset(8, 22, FingerprintId(4), text.clone(), 1_000);
        let fresh = CommandRecord::new(8, 22, FingerprintId(4), text, 1_000);
        assert_eq!(format!("{used:?}"), format!("{fresh:?}"));
        assert_eq!((fresh.last_byte_us, fresh.kind, fresh.rows), (1_000, StatementKind::Other, 0));
    }
}
