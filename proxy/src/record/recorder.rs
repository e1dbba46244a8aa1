//! The relay-side recorder: one per connection, on the forwarding path. It
//! timestamps what the state machine reports, fingerprints SQL as commands
//! arrive, attributes prepared-statement traffic to the SQL that was
//! prepared, and emits one [`CommandRecord`] per command — never waiting.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rustc_hash::FxHashMap as HashMap;
use tokio::time::Instant;

use super::{micros, CommandRecord, Event, EventSink, LiveConnection, LiveLink, Values};
use crate::link::{sample, TransferTracker};
use tokio::net::TcpStream;
use crate::fingerprint::{hash_value, FingerprintId, Fingerprinter, Limit, StatementKind};
use crate::protocol::binary::{binary_row, execute_params, text_row, Param, UNSIGNED_FLAG};
use crate::protocol::constants::command::{self, *};
use crate::protocol::packets::u32_at;
use crate::protocol::handshake::HandshakeResponse41;
use crate::protocol::session::CONNECT;
use crate::protocol::{ColumnOf, CommandPacket, Observer, Summary};

/// Marks a column whose type could not be read (long names past the
/// prefix); `MYSQL_TYPE_NULL` never describes a real result column.
const MYSQL_TYPE_NULL_MARKER: u8 = crate::protocol::binary::types::MYSQL_TYPE_NULL;
use crate::relay::pump::{Direction, Tap};

/// Normalised texts a connection keeps at hand, so a repeated statement
/// costs a refcount, not an allocation. Cleared when full.
const TEXT_CACHE: usize = 512;
/// Prepared statements tracked per connection; a client leaking more than
/// this gets its executions attributed to "unknown statement".
const MAX_STATEMENTS: usize = 4096;
/// MariaDB's "the statement I just prepared" id, for pipelined prepare+execute.
const LAST_PREPARED: u32 = u32::MAX;
/// The placeholder id of a record not yet attributed to a statement.
const UNNAMED: FingerprintId = FingerprintId(0);

/// Longest literal example kept (`report.examples`).
const MAX_EXAMPLE: usize = 1024;

#[derive(Clone, Debug)]
struct Statement {
    fingerprint: FingerprintId,
    text: Arc<str>,
    kind: StatementKind,
    limit: Option<Limit>,
    params: u16,
    /// Parameter types from the last execute that sent them.
    types: Vec<(u8, u8)>,
    /// Result column types (`type`, unsigned), from the prepare or the last
    /// execute that sent metadata: fetches and cached-metadata executes
    /// send rows without it.
    columns: Vec<(u8, bool)>,
}

/// A command sent and not yet answered.
#[derive(Debug)]
struct InFlight {
    record: CommandRecord,
    /// For COM_STMT_PREPARE: the statement to remember once the server accepts it.
    prepare: Option<Statement>,
    /// For COM_INIT_DB, USE, COM_CHANGE_USER: the new schema once it succeeds.
    schema: Option<Option<Arc<str>>>,
    user: Option<Arc<str>>,
}

pub struct Recorder {
    conn_id: u64,
    sink: EventSink,
    live: Arc<LiveConnection>,
    /// The current chunk's time as the client lives it.
    now: Instant,
    /// When the current chunk reached rttscope.
    arrival: Instant,
    /// How long an emulated link holds the current chunk, µs.
    hold_us: u64,
    started_us: Option<u64>,
    fingerprinter: Fingerprinter,
    texts: HashMap<FingerprintId, Arc<str>>,
    statements: HashMap<u32, Statement>,
    last_prepared: Option<u32>,
    in_flight: VecDeque<InFlight>,
    /// Capture literal examples (`report.examples`).
    examples: bool,
    sample: RowSample,
    link: LinkProbe,
    /// The text of `UNNAMED`, shared so a blank record costs no allocation.
    unnamed: Arc<str>,
}

/// What a recorder needs to know besides its connection.
#[derive(Clone, Copy, Debug)]
pub struct RecorderSettings {
    /// Capture literal examples (`report.examples`).
    pub examples: bool,
    /// Responses at least this large get a link verdict.
    pub large_transfer: u64,
    /// How often to read the sockets while a transfer is under way.
    pub sample_interval_us: u64,
    /// tcp_rmem max on this host, if known.
    pub rmem_max: Option<u64>,
}

/// Reads the kernel's view of both sockets while data flows: every
/// `sample_interval` during a response, once a second otherwise, never
/// while idle.
#[derive(Debug)]
struct LinkProbe {
    tracker: TransferTracker,
    interval_us: u64,
    last_sample_us: Option<u64>,
}

/// Between transfers, a reading keeps the RTT fresh for latency verdicts.
const IDLE_SAMPLE_INTERVAL_US: u64 = 1_000_000;

/// Rows sampled from each response, for linking an N+1 loop to the query
/// whose results it iterates. Bounded: a few values of a few rows.
#[derive(Debug, Default)]
struct RowSample {
    /// Column types of the first result set, when known.
    columns: Vec<(u8, bool)>,
    /// Columns of a statement being prepared.
    prepared: Vec<(u8, bool)>,
    result_sets: u32,
    rows: usize,
    hashes: Vec<u64>,
}

/// Rows sampled per response.
const SAMPLE_ROWS: usize = 64;
/// Leading columns sampled per row.
const SAMPLE_COLUMNS: usize = 4;
/// Longer values are not keys.
const SAMPLE_MAX_VALUE: usize = 40;

impl Recorder {
    /// `accepted` is when the client connected: the handshake's record starts there.
    pub fn new(conn_id: u64, sink: EventSink, live: Arc<LiveConnection>, accepted: Instant, settings: RecorderSettings) -> Recorder {
        Recorder {
            conn_id,
            sink,
            live,
            now: accepted,
            arrival: accepted,
            hold_us: 0,
            started_us: Some(micros(accepted)),
            fingerprinter: Fingerprinter::new(),
            texts: HashMap::default(),
            statements: HashMap::default(),
            last_prepared: None,
            in_flight: VecDeque::new(),
            examples: settings.examples,
            sample: RowSample::default(),
            unnamed: Arc::from(""),
            link: LinkProbe {
                tracker: TransferTracker::new(settings.large_transfer, settings.rmem_max),
                interval_us: settings.sample_interval_us,
                last_sample_us: None,
            },
        }
    }

    /// A pseudo-fingerprint for commands that carry no SQL.
    fn named(&mut self, name: &str) -> (FingerprintId, Arc<str>) {
        let id = FingerprintId(hash_value(name.as_bytes()));
        (id, cached(&mut self.texts, id, name).0)
    }

    /// A record whose statement is filled in by the caller (SQL, or the
    /// prepared statement) or, failing that, named after the command.
    fn blank(&mut self, command: u8) -> CommandRecord {
        let request_us = self.started_us.take().unwrap_or_else(|| micros(self.now));
        CommandRecord::new(self.conn_id, command, UNNAMED, self.unnamed.clone(), request_us)
    }

    fn statement_id(&self, payload: &[u8]) -> Option<u32> {
        match u32_at(payload, 0)? {
            LAST_PREPARED => self.last_prepared,
            id => Some(id),
        }
    }

    /// Fingerprints SQL into `record`; returns the statement facts for a prepare.
    fn sql(&mut self, record: &mut CommandRecord, sql: &[u8]) -> Statement {
        let fp = self.fingerprinter.fingerprint(sql);
        let (id, kind, limit, rows_in_values) = (fp.id, fp.kind, fp.limit, fp.rows_in_values);
        let trace = fp.trace.and_then(|t| u128::from_str_radix(t, 16).ok());
        let mut values = Values::default();
        for &v in fp.values {
            values.push(v);
        }
        let (text, first_time) = cached(&mut self.texts, id, fp.text);
        if first_time && self.examples {
            let sql = &sql[..sql.len().min(MAX_EXAMPLE)];
            record.example = Some(String::from_utf8_lossy(sql).into());
        }
        record.fingerprint = id;
        record.text = text.clone();
        record.kind = kind;
        record.limit = limit;
        record.rows_in_values = rows_in_values;
        record.trace = trace;
        record.values = values;
        Statement { fingerprint: id, text, kind, limit, params: 0, types: Vec::new(), columns: Vec::new() }
    }

    fn attribute_to_statement(&mut self, record: &mut CommandRecord, payload: &[u8]) -> Option<u32> {
        let id = self.statement_id(payload)?;
        record.statement = Some(id);
        if let Some(st) = self.statements.get(&id) {
            record.fingerprint = st.fingerprint;
            record.text = st.text.clone();
            record.kind = st.kind;
            record.limit = st.limit;
        } else {
            let (fingerprint, text) = self.named("unknown prepared statement");
            record.fingerprint = fingerprint;
            record.text = text;
        }
        Some(id)
    }
}

/// The shared copy of a normalised text; allocates only the first time a
/// connection sees it. A free function over the cache alone, so it can be
/// called while the fingerprinter's scratch is still borrowed.
/// Also says whether this was the first time (a cache miss).
fn cached(texts: &mut HashMap<FingerprintId, Arc<str>>, id: FingerprintId, text: &str) -> (Arc<str>, bool) {
    if let Some(t) = texts.get(&id) {
        return (t.clone(), false);
    }
    if texts.len() >= TEXT_CACHE {
        texts.clear();
    }
    let t: Arc<str> = Arc::from(text);
    texts.insert(id, t.clone());
    (t, true)
}

fn cstr(buf: &[u8]) -> (&[u8], &[u8]) {
    match buf.iter().position(|&b| b == 0) {
        Some(nul) => (&buf[..nul], &buf[nul + 1..]),
        None => (buf, &[]),
    }
}

fn arc_text(bytes: &[u8]) -> Arc<str> {
    Arc::from(String::from_utf8_lossy(bytes).as_ref())
}

/// The schema named by `USE db` (backticks and a trailing `;` removed).
fn use_target(sql: &[u8]) -> Option<Arc<str>> {
    let text = std::str::from_utf8(sql).ok()?.trim();
    let rest = text.get(..4).filter(|k| k.eq_ignore_ascii_case("use "))?;
    let name = text[rest.len()..].trim().trim_end_matches(';').trim().trim_matches('`');
    (!name.is_empty()).then(|| Arc::from(name))
}

impl Observer for Recorder {
    fn command_started(&mut self, command: u8) {
        let us = micros(self.now);
        self.started_us = Some(us);
        if self.in_flight.is_empty() {
            self.live.current_command.store(u64::from(command) + 1, Ordering::Relaxed);
            self.live.current_since_us.store(us, Ordering::Relaxed);
        }
    }

    fn command(&mut self, c: &CommandPacket<'_>) {
        let mut record = self.blank(c.command);
        let (mut prepare, mut schema, mut user) = (None, None, None);
        // The emulated link held the request this long on its way up.
        record.injected_us = self.hold_us;
        match c.command {
            COM_QUERY => {
                self.sql(&mut record, c.payload);
                if record.kind == StatementKind::Other && record.text.starts_with("use ") {
                    schema = use_target(c.payload).map(Some);
                }
            }
            COM_STMT_PREPARE => prepare = Some(self.sql(&mut record, c.payload)),
            COM_STMT_EXECUTE => {
                if let Some(id) = self.attribute_to_statement(&mut record, c.payload) {
                    record.cursor = c.payload.get(4).is_some_and(|flags| flags & 0x07 != 0);
                    if let Some(st) = self.statements.get_mut(&id) {
                        let mut values = Values::default();
                        execute_params(c.payload, usize::from(st.params), &mut st.types, |p| {
                            values.push(p.canonical().map(hash_value).unwrap_or(0));
                        });
                        record.values = values;
                    }
                }
            }
            COM_STMT_FETCH => {
                self.attribute_to_statement(&mut record, c.payload);
                record.fetch_rows = u32_at(c.payload, 4).unwrap_or(0);
            }
            COM_STMT_CLOSE | COM_STMT_RESET | COM_STMT_SEND_LONG_DATA => {
                self.attribute_to_statement(&mut record, c.payload);
            }
            COM_INIT_DB => schema = Some(Some(arc_text(c.payload))),
            COM_CHANGE_USER => {
                let (name, rest) = cstr(c.payload);
                user = Some(arc_text(name));
                // auth data (1-byte length with CLIENT_SECURE_CONNECTION), then the schema.
                let db = rest.split_first().and_then(|(&n, r)| r.get(usize::from(n)..)).map(|r| cstr(r).0);
                schema = Some(db.filter(|s| !s.is_empty()).map(arc_text));
            }
            _ => {}
        }
        if record.fingerprint == UNNAMED {
            (record.fingerprint, record.text) = self.named(command::name(c.command));
        }
        self.in_flight.push_back(InFlight { record, prepare, schema, user });
    }

    fn result_set(&mut self, _columns: u32) {
        self.sample.result_sets += 1;
        if self.sample.result_sets == 1 {
            self.sample.columns.clear();
        }
    }

    fn column(&mut self, type_and_flags: Option<(u8, u16)>, of: ColumnOf) {
        let column = type_and_flags.map(|(ty, flags)| (ty, flags & UNSIGNED_FLAG != 0));
        // An unreadable type leaves a NULL type marker that stops binary sampling there.
        let column = column.unwrap_or((MYSQL_TYPE_NULL_MARKER, false));
        match of {
            ColumnOf::ResultSet if self.sample.result_sets == 1 => self.sample.columns.push(column),
            ColumnOf::ResultSet => {}
            ColumnOf::PreparedStatement => self.sample.prepared.push(column),
        }
    }

    fn row(&mut self, prefix: &[u8]) {
        let s = &mut self.sample;
        if s.result_sets > 1 || s.rows >= SAMPLE_ROWS {
            return;
        }
        s.rows += 1;
        let Some(front) = self.in_flight.front() else { return };
        let mut keep = |p: Param<'_>| {
            if let Some(v) = p.canonical().filter(|v| v.len() <= SAMPLE_MAX_VALUE) {
                s.hashes.push(hash_value(v));
            }
        };
        if matches!(front.record.command, COM_STMT_EXECUTE | COM_STMT_FETCH) {
            let columns = if s.columns.is_empty() {
                front.record.statement.and_then(|id| self.statements.get(&id)).map(|st| st.columns.as_slice()).unwrap_or_default()
            } else {
                &s.columns
            };
            // Stop at the first column whose type is unknown.
            let known = columns.iter().take_while(|(ty, _)| *ty != MYSQL_TYPE_NULL_MARKER).count();
            binary_row(prefix, &columns[..known], SAMPLE_COLUMNS.min(known), &mut keep);
        } else {
            text_row(prefix, SAMPLE_COLUMNS, &mut keep);
        }
    }

    fn response_started(&mut self) {
        let us = micros(self.now);
        self.link.tracker.response_started(micros(self.arrival));
        if let Some(front) = self.in_flight.front_mut() {
            front.record.first_byte_us = Some(us);
        }
    }

    fn finished(&mut self, s: &Summary) {
        let Some(InFlight { mut record, prepare, schema, user }) = self.in_flight.pop_front() else { return };
        // The sample's buffers are reused from command to command; only a
        // possible parent (a multi-row result) gets a copy of its values.
        let sample = &mut self.sample;
        if s.rows >= 2 && !sample.hashes.is_empty() {
            record.sample = Some(Box::from(sample.hashes.as_slice()));
        }
        // Remember result column types for the fetches and cached executes that follow.
        if let Some(st) = record.statement.and_then(|id| self.statements.get_mut(&id))
            && !sample.columns.is_empty()
            && st.columns != sample.columns
        {
            st.columns.clone_from(&sample.columns);
        }
        let prepared = std::mem::take(&mut sample.prepared);
        sample.hashes.clear();
        sample.columns.clear();
        (sample.result_sets, sample.rows) = (0, 0);
        let ok = s.error.is_none();
        record.last_byte_us = micros(self.now).max(record.request_us);
        record.rtt_us = self.link.tracker.min_rtt_us;
        // ... and the end of the response this long on its way down.
        record.injected_us += self.hold_us;
        let latency = record.last_byte_us.saturating_sub(record.request_us);
        if let Some(measurement) = self.link.tracker.finished(micros(self.arrival), s.bytes_down, s.round_trips, latency) {
            self.sink.send(Event::Link { conn_id: self.conn_id, at_us: record.last_byte_us, measurement });
        }
        // Connection setup also paid the upstream TCP handshake and greeting.
        record.round_trips = s.round_trips + u32::from(record.command == CONNECT);
        record.bytes_up = s.bytes_up;
        record.bytes_down = s.bytes_down;
        record.rows = s.rows;
        record.columns = s.columns;
        record.affected_rows = s.affected_rows;
        record.warnings = s.warnings;
        record.error = s.error.map(|e| e.code);
        match record.command {
            COM_STMT_PREPARE if ok => {
                if let (Some(mut st), Some(announced)) = (prepare, s.statement) {
                    st.params = announced.params;
                    st.columns = prepared;
                    record.statement = Some(announced.id);
                    if self.statements.len() < MAX_STATEMENTS || self.statements.contains_key(&announced.id) {
                        self.statements.insert(announced.id, st);
                    }
                    self.last_prepared = Some(announced.id);
                }
            }
            COM_STMT_CLOSE => {
                if let Some(id) = record.statement {
                    self.statements.remove(&id);
                }
            }
            COM_RESET_CONNECTION | COM_CHANGE_USER if ok => {
                self.statements.clear();
                self.last_prepared = None;
            }
            _ => {}
        }
        if ok && (schema.is_some() || user.is_some()) {
            self.sink.send(Event::Schema { conn_id: self.conn_id, schema: schema.flatten(), user });
        }
        if self.in_flight.is_empty() {
            self.live.current_command.store(0, Ordering::Relaxed);
        }
        self.sink.send(Event::Command(record));
    }
}

impl Tap for Recorder {
    fn arrived(&mut self, direction: Direction, arrived: Instant, released: Instant, _len: usize) {
        // Times are as the client lives them: a request when it sent it, a
        // response when it gets it (later than its arrival here only on an
        // emulated link, by the time the link held it).
        self.hold_us = micros(released).saturating_sub(micros(arrived));
        self.now = match direction {
            Direction::ToUpstream => arrived,
            Direction::ToClient => released,
        };
        self.arrival = arrived;
        if direction == Direction::ToClient {
            self.link.tracker.read(micros(arrived));
        }
    }

    fn scanned(&mut self, _direction: Direction, client: &TcpStream, upstream: &TcpStream) {
        let now = micros(self.arrival);
        let interval = if self.link.tracker.in_transfer() { self.link.interval_us } else { IDLE_SAMPLE_INTERVAL_US };
        if self.link.last_sample_us.is_some_and(|last| now.saturating_sub(last) < interval) {
            return;
        }
        self.link.last_sample_us = Some(now);
        // A socket that cannot be read right now is simply not sampled.
        let Ok(up) = sample(upstream) else { return };
        self.link.tracker.sample(&up);
        let down = sample(client).ok();
        self.live.publish(LiveLink { at_us: now, upstream: up, client: down });
    }

    fn held_off(&mut self, held: bool, now: Instant) {
        self.link.tracker.held_off(held, micros(now));
    }

    fn handshake(&mut self, client: SocketAddr, response: &HandshakeResponse41) {
        self.sink.send(Event::Connected {
            conn_id: self.conn_id,
            client,
            user: Arc::from(response.user.as_str()),
            schema: response.schema.as_deref().map(Arc::from),
            at_us: self.started_us.unwrap_or_else(|| micros(self.now)),
            live: self.live.clone(),
        });
    }
}

impl Recorder {
    /// The connection ended.
    pub fn closed(&mut self) {
        self.live.current_command.store(0, Ordering::Relaxed);
        self.sink.send(Event::Closed { conn_id: self.conn_id, at_us: micros(Instant::now()) });
    }

}
