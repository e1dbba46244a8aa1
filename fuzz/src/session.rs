//! A whole conversation: the `Session` state machine fed by two
//! `PacketScanner`s, with the relay's `Recorder` watching, as the relay runs
//! them — so the decoders the recorder calls on what the session hands it
//! (fingerprints, execute parameters, sampled rows) are fuzzed in context.
//!
//! Input: negotiated capabilities (8 bytes, arbitrary), the capture limit
//! (2), the handshake response's sequence id (1); then records, each a
//! control byte `c` and `c >> 1` bytes that go to the client (`c` even) or
//! upstream (`c` odd) as one read. `c == 0xFF` repeats the previous record
//! `8 * (k % 32 + 1)` times (`MAX_REPEAT` at most) for the next byte `k`, so
//! a short input can pipeline past the pending bound or stream many rows.
//!
//! Nothing ends the conversation: what the state machine cannot follow it
//! reports as a desync and resynchronises, as the relay keeps forwarding. Checked: no panic;
//! the pending queue stays within its bound when, like the relay, the
//! harness reads the client only while `accepts_commands()`; a command's
//! captured payload stays within the capture limit; and `command`/`finished`
//! pair up in order, which the recorder relies on to attribute responses.

use std::collections::VecDeque;
use std::sync::Arc;

use rttscope::live::LiveConnection;
use rttscope::protocol::framing::{PREFIX_LEN, PacketScanner};
use rttscope::protocol::packets::column_type;
use rttscope::protocol::session::{CONNECT, ColumnOf, CommandPacket, Identity, Observer, Session, Summary};
use rttscope::record::{EventSink, Recorder, RecorderSettings};
use tokio::time::Instant;

use super::Input;

/// `Session`'s own bound on pipelined commands (private there; restated, and
/// checked against `accepts_commands` below so the two cannot drift apart).
const MAX_PENDING: usize = 1024;
/// The most the harness hands the scanner in one client read, as the relay's
/// read buffer does. A read that starts under the bound can add at most one
/// command per 5 bytes (a header and a command byte) beyond it.
const CLIENT_READ: usize = 1024;
/// Repeats of one record: enough for records of several commands to pass
/// the pending bound, few enough that a run stays fast.
const MAX_REPEAT: usize = 256;

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let caps = input.u64();
    let capture_limit = usize::from(input.u16());
    let response_seq = input.u8();

    let (sink, _events) = EventSink::channel(64);
    let settings = RecorderSettings { examples: true };
    let live = Arc::new(LiveConnection::new(1, "fuzz".into(), 0));
    let recorder = Recorder::new(1, sink, live, Instant::now(), settings);
    let mut obs = Checker { recorder, in_flight: VecDeque::new(), capture_bound: capture_limit.max(PREFIX_LEN) };
    let mut conn = Conn {
        session: Session::after_handshake(Identity::default(), caps, 80, response_seq, 100, capture_limit, &mut obs),
        client: PacketScanner::new(),
        upstream: PacketScanner::new(),
        backlog: Vec::new(),
        read: 0,
    };
    assert_eq!(obs.in_flight, [CONNECT]);

    let mut previous: Option<(bool, &[u8])> = None;
    while !input.is_empty() {
        let c = input.u8();
        let (record, times) = match (c, previous) {
            (0xFF, Some(record)) => (record, 8 * (usize::from(input.u8()) % (MAX_REPEAT / 8) + 1)),
            (0xFF, None) => continue,
            _ => ((c & 1 == 1, input.bytes(usize::from(c >> 1))), 1),
        };
        previous = Some(record);
        for _ in 0..times {
            let (upstream, bytes) = record;
            if upstream {
                conn.upstream(bytes, &mut obs);
            } else {
                conn.client(bytes, &mut obs);
            }
        }
    }
}

struct Conn {
    session: Session,
    client: PacketScanner,
    upstream: PacketScanner,
    /// Client bytes, of which those from `read` on are not read yet because too many
    /// commands are pending. A `Vec` and an offset rather than a `VecDeque<u8>`: its
    /// byte-at-a-time `extend` and `drain().collect()` were most of the harness's time
    /// under libFuzzer's comparison tracing.
    backlog: Vec<u8>,
    read: usize,
}

impl Conn {
    fn client(&mut self, bytes: &[u8], obs: &mut Checker) {
        self.backlog.extend_from_slice(bytes);
        self.drain_client(obs);
    }

    fn upstream(&mut self, bytes: &[u8], obs: &mut Checker) {
        self.upstream.scan(bytes, &mut self.session.upstream(obs));
        self.session.upstream_at_boundary(self.upstream.at_boundary());
        self.check(obs);
        // Answers make room: the relay would read the client again.
        self.drain_client(obs);
    }

    fn drain_client(&mut self, obs: &mut Checker) {
        while self.read < self.backlog.len() && self.session.accepts_commands() {
            let end = self.backlog.len().min(self.read + CLIENT_READ);
            self.client.scan(&self.backlog[self.read..end], &mut self.session.client(obs));
            self.read = end;
            self.check(obs);
        }
        // What was read is forgotten, as the relay's buffer forgets it.
        self.backlog.drain(..self.read);
        self.read = 0;
    }

    fn check(&self, obs: &Checker) {
        let pending = self.session.pending();
        assert!(pending <= MAX_PENDING + CLIENT_READ / 5 + 1, "{pending} commands pending");
        if pending >= MAX_PENDING {
            assert!(!self.session.accepts_commands(), "MAX_PENDING no longer matches Session's bound");
        }
        assert!(obs.in_flight.len() <= pending, "{} commands in flight, {pending} pending", obs.in_flight.len());
    }
}

/// Checks the observer contract, then hands every call to the recorder.
struct Checker {
    recorder: Recorder,
    /// Commands announced to the observer and not yet finished, oldest first.
    in_flight: VecDeque<u8>,
    capture_bound: usize,
}

impl Observer for Checker {
    fn command_started(&mut self, command: u8) {
        self.recorder.command_started(command);
    }

    fn command(&mut self, c: &CommandPacket<'_>) {
        assert!(
            c.payload.len() <= self.capture_bound,
            "captured {} bytes, limit {}",
            c.payload.len(),
            self.capture_bound
        );
        assert!(c.payload.len() as u64 <= c.len, "captured more than the command carried");
        self.in_flight.push_back(c.command);
        self.recorder.command(c);
    }

    fn response_started(&mut self) {
        self.recorder.response_started();
    }

    fn result_set(&mut self, columns: u32) {
        // The session's own bound (`MAX_RESULT_COLUMNS`, private there): a result joining
        // tables may have more than 65,535 columns (MariaDB's own tests send 68,001).
        assert!(columns > 0 && columns <= 1 << 20, "{columns} columns");
        self.recorder.result_set(columns);
    }

    fn column(&mut self, definition: &[u8], of: ColumnOf) {
        assert!(definition.len() <= PREFIX_LEN);
        // The recorder reads a definition's type only for binary rows and prepares: read
        // it here for every one, so the fuzzer keeps the parser under every column.
        let _ = column_type(definition);
        self.recorder.column(definition, of);
    }

    fn row(&mut self, prefix: &[u8]) {
        assert!(prefix.len() <= PREFIX_LEN);
        self.recorder.row(prefix);
    }

    fn finished(&mut self, summary: &Summary) {
        // A command the server refused before it fully arrived finishes
        // without having been announced; otherwise the oldest announced one
        // is the one finishing, or the recorder would misattribute it.
        if let Some(oldest) = self.in_flight.pop_front() {
            assert_eq!(oldest, summary.command, "finished out of order");
        }
        self.recorder.finished(summary);
    }

    fn desync(&mut self, reason: &'static str) {
        assert!(!reason.is_empty());
        self.recorder.desync(reason);
    }
}
