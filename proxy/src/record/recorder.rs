//! The relay-side recorder: one per connection, on the forwarding path. It
//! timestamps what the state machine reports, has SQL fingerprinted as
//! commands arrive (`texts`), attributes prepared-statement traffic to the
//! SQL that was prepared (`statements`), samples result rows (`rows`), and
//! emits one [`CommandRecord`] per command — never waiting.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::time::Instant;

use super::pool;
use super::retransmits::RetransmissionWatch;
use super::rows::RowSample;
use super::statements::{LAST_PREPARED, Statement, Statements, changes_registry, names_statement};
use super::texts::Texts;
use super::{CommandRecord, Connected, Event, EventSink, IdentityChange, ResponseSampler, Tap, micros};
use crate::fingerprint::{FingerprintId, SqlModes, traceparent as traceparent_id};
use crate::live::{Legs, LiveConnection, TlsInfo};
use crate::protocol::binary::query_attributes;
use crate::protocol::constants::command::{self, *};
use crate::protocol::handshake::HandshakeResponse41;
use crate::protocol::packets::{column_type, u32_at};
use crate::protocol::session::CONNECT;
use crate::protocol::{ColumnOf, CommandPacket, Direction, Identity, Observer, Summary};
use crate::socket::{LinkSample, LossCounters};
use modes::SessionModes;

/// The placeholder id of a record not yet attributed to a statement.
const UNNAMED: FingerprintId = FingerprintId(0);

/// Round trips of a login before its auth exchange, without TLS: the TCP handshake (SYN,
/// SYN-ACK), then the greeting, which the server sends only once it has accepted. An emulated
/// link charges the same (`relay::handshake`).
const SETUP_ROUND_TRIPS: u32 = 2;

/// A command sent and not yet answered.
#[derive(Debug)]
struct InFlight {
    /// Boxed: a record is a few hundred bytes, and it moves from here to the retransmission
    /// watch, into the channel and out to the collector; a box moves as a pointer.
    record: Box<CommandRecord>,
    /// For COM_STMT_PREPARE: the statement to remember once the server accepts it. Boxed:
    /// it is large and rare, and every command's in-flight entry is moved twice.
    prepare: Option<Box<Statement>>,
    /// The modes the session may be in once the server has run it, when it may change them.
    after: Option<SqlModes>,
    /// A `COM_STMT_*` command sent before the registry could say what it names: attributed
    /// when it reaches the front, every command before it answered.
    deferred: Option<Box<Deferred>>,
    /// It changes the statement registry, or waits to be attributed: the `COM_STMT_*`
    /// commands sent behind it wait too ([`Recorder::unsettled`]).
    unsettling: bool,
    /// Round trips taken over from the prepare this execute of "the statement just prepared"
    /// was sent with (see [`Recorder::finished`]).
    carried_round_trips: u32,
}

/// Bytes of a deferred command's payload kept: the id, flags, NULL bitmap and types of an
/// execute and its first values (a record keeps four). A client may pipeline a thousand
/// commands behind one prepare; each keeps this much, not the whole capture (64 KiB).
const DEFERRED_PAYLOAD: usize = 1024;

/// What a deferred `COM_STMT_*` command is attributed from.
#[derive(Debug)]
struct Deferred {
    /// The payload's first [`DEFERRED_PAYLOAD`] bytes.
    payload: Box<[u8]>,
    query_attributes: bool,
}

/// What a recorder needs to know besides its connection.
#[derive(Clone, Copy, Debug)]
pub struct RecorderSettings {
    /// Capture literal examples (`report.examples`).
    pub examples: bool,
}

/// One connection's recorder.
pub struct Recorder {
    conn_id: u64,
    sink: EventSink,
    /// Where `/connections` shows the statement in flight.
    live: Arc<LiveConnection>,
    /// The statement last stored there: the same one again is only marked current.
    shown: Option<Arc<str>>,
    /// The current chunk's time as the client lives it, µs.
    now_us: u64,
    /// When the current chunk came off its socket, µs (before an emulated link held it).
    arrived_us: u64,
    /// How long an emulated link holds the current chunk, µs.
    hold_us: u64,
    /// Time reading waited for an emulated link's full buffer, µs, each way: up since the
    /// last request was recorded, down since the last response ended.
    stalled_up: u64,
    stalled_down: u64,
    /// When the latest chunk from the server came off its socket, µs, and whether the next
    /// one follows a stall on the emulated link's full buffer or fills rttscope's: then its
    /// gap is not the server's pace ([`CommandRecord::paced_us`]).
    down_prev_us: u64,
    down_irregular: bool,
    started_us: Option<u64>,
    texts: Texts,
    statements: Statements,
    in_flight: VecDeque<InFlight>,
    /// Commands in flight that are `unsettling`: while there are any, a `COM_STMT_*` command
    /// is attributed only once it reaches the front, so the registry stands as the server's
    /// will when it runs the command (a pipelined prepare answered, a close applied).
    unsettled: usize,
    rows: RowSample,
    /// The upstream path's base RTT as the link probe last read it, µs.
    base_rtt_us: u32,
    /// Bytes on the long hop's wire (told only when it is compressed) since the
    /// last record took its share, up and down.
    wire: Option<(u64, u64)>,
    /// Slices of large results for the collector to measure (only while the long hop is
    /// not compressed: the relay tells it bytes only then).
    sampler: ResponseSampler,
    /// The text of `UNNAMED`, shared so a blank record costs no allocation.
    unnamed: Arc<str>,
    /// The session's `sql_mode` as far as rttscope can tell: statements are read as the server
    /// reads them, or a literal could come out as words.
    modes: SessionModes,
    /// Holds each finished record until a reading says whether it waited for a retransmission.
    retransmits: RetransmissionWatch,
    /// The command whose response's end the emulated link still held when it finished
    /// (`request_us`, `last_byte_us`): its record waits, once settled, for that end to go.
    held_end: Option<(u64, u64)>,
    /// That record, settled: it goes on when the link lets the end go, with how late it went
    /// (or with whatever happens next on the connection).
    awaiting_release: Option<Box<CommandRecord>>,
    /// Round trips the login paid before its auth exchange: the upstream TCP handshake, the
    /// greeting, and the upstream TLS handshake if any.
    setup_round_trips: u32,
}

impl Recorder {
    /// `accepted` is when the client connected: the handshake's record starts there.
    pub fn new(
        conn_id: u64,
        sink: EventSink,
        live: Arc<LiveConnection>,
        accepted: Instant,
        settings: RecorderSettings,
    ) -> Recorder {
        Recorder {
            conn_id,
            sink,
            live,
            shown: None,
            now_us: micros(accepted),
            arrived_us: micros(accepted),
            hold_us: 0,
            stalled_up: 0,
            stalled_down: 0,
            down_prev_us: 0,
            down_irregular: false,
            started_us: Some(micros(accepted)),
            texts: Texts::new(settings.examples),
            statements: Statements::default(),
            in_flight: VecDeque::new(),
            unsettled: 0,
            rows: RowSample::default(),
            base_rtt_us: 0,
            wire: None,
            sampler: ResponseSampler::default(),
            unnamed: Arc::from(""),
            modes: SessionModes::default(),
            retransmits: RetransmissionWatch::default(),
            held_end: None,
            awaiting_release: None,
            setup_round_trips: SETUP_ROUND_TRIPS,
        }
    }

    /// The server's greeting said its version: which versioned comments (`/*!50700 ... */`)
    /// it runs as SQL, and so how its statements are fingerprinted.
    pub fn greeted(&mut self, server_version: &str) {
        self.modes.greeted(server_version);
    }

    /// Shows `text` as the statement in flight in `/connections`.
    fn show_statement(&mut self, text: &Arc<str>) {
        if self.shown.as_ref().is_some_and(|shown| Arc::ptr_eq(shown, text)) {
            self.live.same_statement();
        } else if self.live.set_statement(text) {
            self.shown = Some(text.clone());
        }
    }

    /// A record whose statement is filled in by the caller (SQL, or the
    /// prepared statement) or, failing that, named after the command.
    fn blank(&mut self, command: u8) -> Box<CommandRecord> {
        let request_us = self.started_us.take().unwrap_or(self.now_us);
        pool::boxed(self.conn_id, command, UNNAMED, self.unnamed.clone(), request_us)
    }

    /// Attributes the command at the front, if it was deferred: every command before it has
    /// been answered, so the registry now says what its id names.
    fn attribute_front(&mut self) {
        let Recorder { in_flight, statements, texts, .. } = self;
        let Some(front) = in_flight.front_mut() else { return };
        let Some(deferred) = front.deferred.take() else { return };
        attribute_to_statement(statements, texts, &mut front.record, &deferred.payload, deferred.query_attributes);
        if front.record.fingerprint == UNNAMED {
            (front.record.fingerprint, front.record.text) = texts.named(command::name(front.record.command));
        }
    }

    /// What a command the server answered did to the statement registry: a prepare it accepted
    /// or refused, a close, a session reset.
    fn registry_answered(
        &mut self,
        record: &mut CommandRecord,
        prepare: Option<Box<Statement>>,
        columns: Vec<(u8, bool)>,
        s: &Summary,
    ) {
        let ok = s.error.is_none();
        match record.command {
            COM_STMT_PREPARE => {
                match (prepare, s.statement) {
                    (Some(mut st), Some(announced)) if ok => {
                        st.params = announced.params;
                        st.columns = columns;
                        record.statement = Some(announced.id);
                        self.statements.prepared(announced.id, *st);
                    }
                    _ => self.statements.prepare_failed(),
                }
                // An execute of "the statement just prepared" sent with it (execute-direct) is
                // one exchange with it: the execution waited for the round trip the pair
                // shared, not the prepare alone, and a loop of them costs one a row.
                if let Some(next) = self.in_flight.front_mut()
                    && next.record.command == COM_STMT_EXECUTE
                    && next.deferred.as_ref().is_some_and(|d| u32_at(&d.payload, 0) == Some(LAST_PREPARED))
                {
                    next.carried_round_trips = std::mem::take(&mut record.round_trips);
                }
            }
            COM_STMT_CLOSE => {
                if let Some(id) = record.statement {
                    self.statements.closed(id);
                }
            }
            COM_RESET_CONNECTION | COM_CHANGE_USER if ok => self.statements.clear(),
            _ => {}
        }
    }

    /// Sends the record held for a reading that did not come before something else did.
    fn send_held(&mut self) {
        if let Some(record) = self.retransmits.flush() {
            self.emit(record);
        }
        self.held_end = None;
        if let Some(record) = self.awaiting_release.take() {
            self.sink.send(Event::Command(record));
        }
    }

    /// A chunk of `len` bytes from the server came off its socket at `arrived_us`: if it came
    /// as the server sent it, part of the streaming response's pace.
    fn paced(&mut self, arrived_us: u64, len: usize) {
        let gap = arrived_us.saturating_sub(std::mem::replace(&mut self.down_prev_us, arrived_us));
        let irregular = std::mem::take(&mut self.down_irregular);
        if let Some(front) = self.in_flight.front_mut()
            && front.record.first_arrived_us.is_some()
            && !irregular
        {
            front.record.paced_us += gap;
            front.record.paced_bytes += len as u64;
        }
    }

    /// A finished record on its way out: to the retransmission watch, which may hand back an
    /// earlier one to send.
    fn settle(&mut self, record: Box<CommandRecord>) {
        if let Some(ready) = self.retransmits.finished(record) {
            self.emit(ready);
        }
    }

    /// A settled record: sent, unless the emulated link still holds its response's end.
    fn emit(&mut self, record: Box<CommandRecord>) {
        if self.held_end == Some((record.request_us, record.last_byte_us)) {
            if let Some(earlier) = self.awaiting_release.replace(record) {
                self.sink.send(Event::Command(earlier));
            }
        } else {
            self.sink.send(Event::Command(record));
        }
    }

    /// A response ended and the link probe did not read the loss counters for it (its
    /// command was short and they were read a moment ago): its record goes out as it stands.
    pub fn loss_unread(&mut self) {
        self.send_held();
    }

    /// The connection ended.
    pub fn closed(&mut self) {
        self.send_held();
        self.sink.send(Event::Closed { conn_id: self.conn_id, at_us: micros(Instant::now()) });
    }
}

/// Attributes a `COM_STMT_*` command to the statement it names (see [`Statements::attribute`]);
/// one the registry does not know is an "unknown prepared statement".
fn attribute_to_statement(
    statements: &mut Statements,
    texts: &mut Texts,
    record: &mut CommandRecord,
    payload: &[u8],
    query_attributes: bool,
) {
    if !statements.attribute(record, payload, query_attributes).1 {
        (record.fingerprint, record.text) = texts.named("unknown prepared statement");
    }
}

impl Observer for Recorder {
    #[inline(always)]
    fn command_started(&mut self, _command: u8) {
        self.send_held();
        self.started_us = Some(self.now_us);
    }

    fn command(&mut self, c: &CommandPacket<'_>) {
        let mut record = self.blank(c.command);
        let mut prepare = None;
        let mode = self.modes.ahead();
        let mut after = self.modes.change(c);
        let mut deferred = None;
        // The emulated link held the request this long on its way up.
        record.injected_us = self.hold_us + std::mem::take(&mut self.stalled_up);
        match c.command {
            COM_QUERY if c.query_attributes => {
                // Attributes (OpenTelemetry's among them) before the SQL; a traceparent
                // links the statement to its request as the comment does.
                let parsed = query_attributes(c.payload);
                let sql = parsed.as_ref().map_or(c.payload, |q| q.sql);
                after = self.texts.query(&mut record, sql, mode);
                let traceparent = parsed.as_ref().and_then(|q| {
                    q.attributes
                        .iter()
                        .find(|(name, _)| name.eq_ignore_ascii_case(b"traceparent"))
                        .and_then(|(_, v)| *v)
                });
                if let Some(trace) = traceparent.and_then(traceparent_id) {
                    record.trace = Some(trace);
                }
            }
            COM_QUERY => after = self.texts.query(&mut record, c.payload, mode),
            COM_STMT_PREPARE => prepare = Some(Box::new(self.texts.sql(&mut record, c.payload, mode))),
            cmd if names_statement(cmd) && self.unsettled > 0 => {
                let payload = Box::from(&c.payload[..c.payload.len().min(DEFERRED_PAYLOAD)]);
                deferred = Some(Box::new(Deferred { payload, query_attributes: c.query_attributes }));
            }
            cmd if names_statement(cmd) => {
                attribute_to_statement(
                    &mut self.statements,
                    &mut self.texts,
                    &mut record,
                    c.payload,
                    c.query_attributes,
                );
            }
            _ => {}
        }
        // A deferred command is named once attributed, at the front.
        if deferred.is_none() && record.fingerprint == UNNAMED {
            (record.fingerprint, record.text) = self.texts.named(command::name(c.command));
        } else if deferred.is_none() && self.in_flight.is_empty() {
            self.show_statement(&record.text);
        }
        let unsettling = deferred.is_some() || changes_registry(c.command);
        self.unsettled += usize::from(unsettling);
        let carried_round_trips = 0;
        let after = self.modes.sent(mode, after);
        self.in_flight.push_back(InFlight { record, prepare, after, deferred, unsettling, carried_round_trips });
    }

    fn result_set(&mut self, _columns: u32) {
        self.rows.result_set();
    }

    #[inline(always)]
    fn column(&mut self, definition: &[u8], of: ColumnOf) {
        // Types serve binary rows (an execute's, a fetch's) and a prepared statement's later
        // executes: a text result set's rows are sampled without them, and its definitions
        // are not read.
        let wanted = match of {
            ColumnOf::PreparedStatement => true,
            ColumnOf::ResultSet => {
                self.in_flight.front().is_some_and(|f| matches!(f.record.command, COM_STMT_EXECUTE | COM_STMT_FETCH))
            }
        };
        if wanted {
            self.rows.column(column_type(definition), of);
        }
    }

    #[inline(always)]
    fn row(&mut self, prefix: &[u8]) {
        let Some(front) = self.in_flight.front() else { return };
        let binary = matches!(front.record.command, COM_STMT_EXECUTE | COM_STMT_FETCH);
        let known = front.record.statement.and_then(|id| self.statements.get(id)).map(|st| st.columns.as_slice());
        self.rows.row(prefix, binary, known.unwrap_or_default());
    }

    fn response_started(&mut self) {
        let (us, arrived_us) = (self.now_us, self.arrived_us);
        if let Some(front) = self.in_flight.front_mut() {
            let r = &mut front.record;
            (r.first_byte_us, r.first_arrived_us) = (Some(us), Some(arrived_us));
            // The request's hold and stalls, and how late it went: all the link added so far.
            r.request_injected_us = r.injected_us + r.late_us;
        }
    }

    fn finished(&mut self, s: &Summary) {
        let Some(InFlight { mut record, prepare, after, unsettling, carried_round_trips, .. }) =
            self.in_flight.pop_front()
        else {
            return;
        };
        self.unsettled -= usize::from(unsettling);
        self.modes.answered(s, after, self.in_flight.is_empty());
        // Only a possible parent (a multi-row result) gets a copy of its values.
        if s.rows >= 2 && !self.rows.hashes.is_empty() {
            record.sample = Some(Box::from(self.rows.hashes.as_slice()));
        }
        // Remember result column types for the fetches and cached executes that follow.
        if let Some(st) = record.statement.and_then(|id| self.statements.get_mut(id))
            && !self.rows.columns.is_empty()
            && st.columns != self.rows.columns
        {
            st.columns.clone_from(&self.rows.columns);
        }
        let prepared_columns = self.rows.finish();
        record.last_byte_us = self.now_us.max(record.request_us);
        record.rtt_us = self.base_rtt_us;
        // ... and the end of the response this long on its way down, after the link had held
        // back the rest of it (a bandwidth limit: most of a large result's time).
        record.injected_us += self.hold_us + std::mem::take(&mut self.stalled_down) + record.late_us;
        // Connection setup also paid the upstream TCP handshake, greeting and TLS.
        record.round_trips = s.round_trips + if record.command == CONNECT { self.setup_round_trips } else { 0 };
        record.round_trips += carried_round_trips;
        record.bytes_up = s.bytes_up;
        record.bytes_down = s.bytes_down;
        // What crossed the compressed long hop since the last record: exact for one
        // command at a time, shared out in order when commands are pipelined.
        if let Some((up, down)) = self.wire.as_mut() {
            (record.wire_up, record.wire_down) = (Some(std::mem::take(up)), Some(std::mem::take(down)));
        }
        record.payload_sample = self.sampler.finished();
        record.rows = s.rows;
        record.columns = s.columns;
        record.affected_rows = s.affected_rows;
        record.warnings = s.warnings;
        record.error = s.error.map(|e| e.code);
        record.unparsed = s.unparsed;
        self.registry_answered(&mut record, prepare, prepared_columns, s);
        // Its end is held on the emulated link: once settled, it goes on when that end is out.
        self.held_end = (self.hold_us > 0).then_some((record.request_us, record.last_byte_us));
        self.settle(record);
        self.attribute_front();
        // The next command in line, if pipelined, is the one in flight now.
        if let Some(text) = self.in_flight.front().map(|next| next.record.text.clone()) {
            self.show_statement(&text);
        }
    }

    fn identity(&mut self, identity: &Identity) {
        self.sink.send(Event::Identity(Box::new(IdentityChange {
            conn_id: self.conn_id,
            user: identity.user.clone(),
            schema: identity.schema.clone(),
        })));
    }
}

impl Tap for Recorder {
    fn released_late(&mut self, direction: Direction, late_us: i64, peer_us: u64) {
        let (late, early) = (late_us.max(0).unsigned_abs(), late_us.min(0).unsigned_abs());
        match direction {
            // The request went on that much later (or earlier): the server saw it then. (How
            // long the server then took to read it is its own time.)
            Direction::ToUpstream => {
                if let Some(f) = self.in_flight.back_mut() {
                    f.record.late_us = late;
                    f.record.injected_us = f.record.injected_us.saturating_sub(early);
                }
            }
            // The response's end reached the client that much later: late by the link, then
            // by the client itself, not reading on (its time, as it would be without the link).
            // Or that much earlier: the link held it less than its schedule said.
            Direction::ToClient => {
                self.held_end = None;
                if let Some(mut record) = self.awaiting_release.take() {
                    let early = early.min(record.injected_us).min(record.latency_us());
                    record.late_us += late;
                    record.injected_us = record.injected_us + late - early;
                    record.last_byte_us = record.last_byte_us + late + peer_us - early;
                    self.sink.send(Event::Command(record));
                }
            }
        }
    }

    fn line_stalled(&mut self, direction: Direction, stalled_us: u64) {
        match direction {
            Direction::ToUpstream => self.stalled_up += stalled_us,
            Direction::ToClient => {
                self.stalled_down += stalled_us;
                self.down_irregular = true;
            }
        }
    }

    fn buffer_filled(&mut self, direction: Direction) {
        self.down_irregular |= direction == Direction::ToClient;
    }

    #[inline(always)]
    fn arrived(&mut self, direction: Direction, arrived_us: u64, released_us: u64, len: usize) {
        self.send_held();
        if direction == Direction::ToClient {
            self.paced(arrived_us, len);
        }
        // Times are as the client lives them: a request when it sent it, a
        // response when it gets it (later than its arrival here only on an
        // emulated link, by the time the link held it).
        self.hold_us = released_us.saturating_sub(arrived_us);
        self.arrived_us = arrived_us;
        self.now_us = match direction {
            Direction::ToUpstream => arrived_us,
            Direction::ToClient => released_us,
        };
    }

    fn connected(&mut self, client: &str, response: &HandshakeResponse41, legs: &Legs) {
        self.setup_round_trips =
            SETUP_ROUND_TRIPS + legs.upstream_tls.as_ref().map_or(0, TlsInfo::handshake_round_trips);
        self.sink.send(Event::Connected(Box::new(Connected {
            conn_id: self.conn_id,
            client: Arc::from(client),
            legs: Box::new(legs.clone()),
            user: Arc::from(response.user.as_str()),
            schema: response.schema.as_deref().map(Arc::from),
            at_us: self.started_us.unwrap_or(self.now_us),
        })));
    }

    fn wire(&mut self, direction: Direction, bytes: u64) {
        let (up, down) = self.wire.get_or_insert((0, 0));
        match direction {
            Direction::ToUpstream => *up += bytes,
            Direction::ToClient => *down += bytes,
        }
    }

    fn response_bytes(&mut self, bytes: &[u8]) {
        self.sampler.bytes(bytes);
    }

    fn loss_counters(&mut self, counters: &LossCounters) {
        if let Some(record) = self.retransmits.counters(counters) {
            self.emit(record);
        }
    }

    fn link_sample(&mut self, sample: &LinkSample) {
        if sample.base_rtt_us() > 0 {
            self.base_rtt_us = sample.base_rtt_us();
        }
    }
}

mod modes;
#[cfg(test)]
mod tests;
