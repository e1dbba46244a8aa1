//! The command/response state machine: fed the packets of both directions,
//! it knows where every response ends, which command it answers, and what it
//! carried (rows, results, errors, bytes, round trips).
//!
//! Commands are queued in the order the client sent them, so clients that
//! pipeline (several commands before reading the first response) are
//! followed exactly: MySQL answers commands strictly in order.
//!
//! A packet the state machine cannot follow never ends the connection: the
//! session marks itself unsynced (the commands in flight are reported as
//! unparsed, with the reason), ignores what follows, and resynchronises at the
//! next safe point — a new client command (sequence id 0) while no server
//! packet is half read. The relay forwards every byte meanwhile.

mod identity;
mod response;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

pub use identity::Identity;

use super::constants::{capability::*, command, command::*};
use super::error::{DecodeError, Peer};
use super::framing::{FrameSink, PREFIX_LEN};
use super::packets::ErrPacket;

/// Command starts remembered between two calls of `take_command_starts`.
const MAX_COMMAND_STARTS: usize = 4096;

/// Pseudo-command for the connection phase (greeting to the auth OK), so
/// connection setup is recorded like any other exchange. MySQL's own
/// command enum uses the same value for "connect".
pub const CONNECT: u8 = COM_CONNECT;

/// A client command as it arrived, for observers.
#[derive(Debug)]
pub struct CommandPacket<'a> {
    /// The command byte (`COM_*`, see [`command`]), or [`CONNECT`].
    pub command: u8,
    /// The payload after the command byte, up to the capture limit.
    pub payload: &'a [u8],
    /// The payload's full length (command byte excluded).
    pub len: u64,
    /// `CLIENT_QUERY_ATTRIBUTES` was negotiated: `COM_QUERY` and `COM_STMT_EXECUTE`
    /// carry attributes before their SQL or parameters.
    pub query_attributes: bool,
}

/// A prepared statement announced by a `COM_STMT_PREPARE` OK.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PreparedStatement {
    /// The statement id the server assigned: what COM_STMT_EXECUTE, COM_STMT_FETCH and
    /// COM_STMT_CLOSE name.
    pub id: u32,
    /// Number of `?` placeholders: how many parameters each COM_STMT_EXECUTE binds.
    pub params: u16,
    /// Result columns COM_STMT_PREPARE_OK announced; 0 for a statement that returns no rows.
    pub columns: u16,
}

/// What one command and its response amounted to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The command byte (`COM_*`), or [`CONNECT`] for the connection phase.
    pub command: u8,
    /// Request/response exchanges: the times the client waited for the
    /// server. 1, plus one for every time the client spoke again after the
    /// server within the same command (a LOCAL INFILE upload, an auth switch
    /// reply); 0 for a command with no reply, or one pipelined behind
    /// others still unanswered (it shares their wait).
    pub round_trips: u32,
    /// Client-to-server bytes of the plain protocol, 4-byte packet headers included (before
    /// compression or TLS).
    pub bytes_up: u64,
    /// Server-to-client bytes, counted like `bytes_up`.
    pub bytes_down: u64,
    /// Result sets and OK packets in the response (more than one for
    /// multi-statements and stored procedures).
    pub results: u32,
    /// Rows in all result sets of the response (text, binary or COM_STMT_FETCH rows).
    pub rows: u64,
    /// Columns of the first result set.
    pub columns: u32,
    /// Sum of the OK packets' affected-row counts.
    pub affected_rows: u64,
    /// The last non-zero `last_insert_id` among the OK packets; 0 if none.
    pub last_insert_id: u64,
    /// Sum of the warning counts of every OK, EOF and COM_STMT_PREPARE_OK in the response.
    pub warnings: u32,
    /// Status flags of the last OK/EOF; `None` when the response had neither (an ERR, or no
    /// response at all).
    pub status: Option<u16>,
    /// The ERR_Packet that ended the response; MariaDB progress reports are not errors.
    pub error: Option<ErrPacket>,
    /// The statement a COM_STMT_PREPARE created, from its COM_STMT_PREPARE_OK.
    pub statement: Option<PreparedStatement>,
    /// The server sent a LOCAL INFILE Request (0xFB): the client uploaded a file, or an empty
    /// packet to refuse.
    pub local_infile: bool,
    /// The state machine lost its place in this response (see [`Observer::desync`]):
    /// the counts above are what it saw before.
    pub unparsed: bool,
}

/// Receives what the state machine sees. Every method has a no-op default;
/// the relay's observer timestamps and records.
pub trait Observer {
    /// The first packet of a new client command began to arrive.
    fn command_started(&mut self, _command: u8) {}
    /// A client command arrived in full (or, for [`CONNECT`], the handshake
    /// response). Calls to `command` and `finished` pair up in FIFO order.
    fn command(&mut self, _command: &CommandPacket<'_>) {}
    /// The first packet of the response to the oldest unfinished command.
    fn response_started(&mut self) {}
    /// A result set begins: its column count arrived.
    fn result_set(&mut self, _columns: u32) {}
    /// A column definition: of the current result set, or of a statement
    /// being prepared. Carries the packet's first bytes, from which
    /// [`column_type`](crate::protocol::packets::column_type) reads the type and flags: an
    /// observer that wants them reads them (a walk over six names, read for every column of
    /// every result otherwise).
    fn column(&mut self, _definition: &[u8], _of: ColumnOf) {}
    /// A row of the current result set: the first bytes of its payload.
    fn row(&mut self, _prefix: &[u8]) {}
    /// The oldest unfinished command is complete.
    fn finished(&mut self, _summary: &Summary) {}
    /// The server accepted a change of user or default schema.
    fn identity(&mut self, _identity: &Identity) {}
    /// The state machine could not follow a packet (`reason`, a short fixed name);
    /// the commands in flight finish as unparsed right after this, and it picks up
    /// again at the next command.
    fn desync(&mut self, _reason: &'static str) {}
}

/// Whose column a column definition describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnOf {
    /// The result set now being received.
    ResultSet,
    /// The result of a statement being prepared (`COM_STMT_PREPARE`).
    PreparedStatement,
}

/// An observer that looks away.
pub struct NoObserver;
impl Observer for NoObserver {}

/// How the next client packet is to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientMode {
    /// A new command (sequence id 0).
    Command,
    /// Part of an auth exchange: opaque until the server's OK or ERR.
    Auth,
    /// LOCAL INFILE data, until an empty packet.
    Upload,
}

/// The client packet currently being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientPacket {
    Command,
    Upload {
        last: bool,
    },
    Opaque,
    /// Unsynced: not followed.
    Ignored,
}

/// Where the response to a command stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resp {
    /// No response follows (COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA, COM_QUIT).
    None,
    /// Exactly one packet (OK, ERR, EOF or a status string).
    Single,
    /// The first packet of a result: OK, ERR, a column count, or (COM_QUERY
    /// only) a LOCAL INFILE request.
    ResultStart { infile: bool },
    /// Column (or parameter) definitions still to come.
    Definitions { left: u32, then: AfterDefs },
    /// The EOF that ends definitions when CLIENT_DEPRECATE_EOF is off.
    DefinitionsEof { then: AfterDefs },
    /// Rows until an EOF/OK terminator or an ERR.
    Rows,
    /// The client is sending LOCAL INFILE data.
    Uploading,
    /// The first packet answering COM_STMT_PREPARE.
    PrepareOk,
    /// Column definitions until a terminator (COM_FIELD_LIST).
    FieldList,
    /// Binlog events until EOF or ERR.
    Binlog,
    /// An auth exchange until OK or ERR.
    Auth,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterDefs {
    Rows,
    PrepareColumns(u16),
    Done,
}

#[derive(Debug)]
struct Pending {
    command: u8,
    resp: Resp,
    /// Sequence id the next upstream packet of this exchange must carry.
    seq: u8,
    bytes_up: u64,
    /// The command packet has fully arrived.
    complete: bool,
    /// Sent while earlier commands were still unanswered: the client did
    /// not wait for this one on its own.
    pipelined: bool,
    /// The user or schema this command switches to, if the server agrees.
    change: Option<identity::Change>,
    /// A COM_STMT_EXECUTE that asked for a cursor: its rows come later, by COM_STMT_FETCH.
    wants_cursor: bool,
}

/// Per-connection protocol state. Sans-io: bytes in, observations out.
#[derive(Debug)]
pub struct Session {
    caps: u64,
    client_mode: ClientMode,
    client_packet: ClientPacket,
    pending: VecDeque<Pending>,
    max_pending: usize,
    /// Accumulators for the oldest pending command.
    summary: Summary,
    response_started: bool,
    /// The upstream packet being read ends the current response.
    finishing: bool,
    /// Upstream has sent a packet since the client's last one (round trips).
    upstream_spoke: bool,
    /// The last finished command was one rttscope does not know, so a stray
    /// upstream packet may be part of its answer: forward it, don't fail.
    lenient: bool,
    capture: Vec<u8>,
    capture_limit: usize,
    identity: Identity,
    /// Bumped on every change of `identity`.
    identity_generation: u64,
    /// False after a packet the state machine could not follow, until it resynchronises.
    synced: bool,
    /// The server's stream is between packets, as the relay last saw it.
    upstream_at_boundary: bool,
    /// Client bytes scanned so far (after the handshake response): a packet's offset
    /// in the client's stream.
    client_offset: u64,
    /// Record where commands start in the client's stream (for compressed upstreams).
    track_starts: bool,
    command_starts: VecDeque<u64>,
    /// The server status flags of the last OK or EOF (in a transaction, autocommit...).
    server_status: u16,
    /// Give the server's packets the plain protocol's sequence ids: a compressed server
    /// numbers the packets after a mid-response flush its own way, which a client reading
    /// the plain protocol refuses.
    renumber_upstream: bool,
    /// The id the next physical server packet gets, when renumbering.
    upstream_next: u8,
}

impl Session {
    /// State after the greeting (`greeting_len` payload bytes) and the
    /// handshake response (sequence id `response_seq`, `response_len` payload
    /// bytes) have been forwarded: the auth exchange runs as the
    /// pseudo-command [`CONNECT`], which is charged for both.
    pub fn after_handshake<O: Observer>(
        identity: Identity,
        negotiated_caps: u64,
        greeting_len: usize,
        response_seq: u8,
        response_len: usize,
        capture_limit: usize,
        obs: &mut O,
    ) -> Session {
        let mut session = Session {
            caps: negotiated_caps,
            client_mode: ClientMode::Auth,
            client_packet: ClientPacket::Opaque,
            pending: VecDeque::with_capacity(4),
            max_pending: 1024,
            summary: Summary::default(),
            response_started: false,
            finishing: false,
            upstream_spoke: false,
            lenient: false,
            capture: Vec::new(),
            capture_limit: capture_limit.max(PREFIX_LEN),
            identity,
            identity_generation: 0,
            synced: true,
            upstream_at_boundary: true,
            client_offset: 0,
            track_starts: false,
            command_starts: VecDeque::new(),
            server_status: 0,
            renumber_upstream: false,
            upstream_next: 0,
        };
        session.pending.push_back(Pending {
            command: CONNECT,
            resp: Resp::Auth,
            seq: response_seq.wrapping_add(1),
            bytes_up: 4 + response_len as u64,
            complete: true,
            pipelined: false,
            change: None,
            wants_cursor: false,
        });
        session.begin_front();
        session.summary.bytes_down = 4 + greeting_len as u64;
        obs.command(&CommandPacket {
            command: CONNECT,
            payload: &[],
            len: response_len as u64,
            query_attributes: false,
        });
        session
    }

    /// The capability flags negotiated with the client (its asks within what rttscope offered):
    /// what decides the shape of the packets the state machine reads.
    pub fn capabilities(&self) -> u64 {
        self.caps
    }

    /// Who the session is now: as it logged in, or as the server last
    /// accepted a change.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Moves whenever [`identity`](Self::identity) changes: one comparison
    /// tells a caller whether to look again.
    pub fn identity_generation(&self) -> u64 {
        self.identity_generation
    }

    /// Tells the session whether the server's stream, as scanned so far, stands
    /// between packets: resynchronising is safe only then. The relay says so after
    /// scanning what the server sent.
    pub fn upstream_at_boundary(&mut self, at_boundary: bool) {
        self.upstream_at_boundary = at_boundary;
    }

    /// Whether the state machine follows the conversation (false between a packet it
    /// could not follow and the next command).
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// The server status flags of the last OK or EOF packet: what an answer rttscope
    /// makes itself repeats, so the client's idea of its transaction does not change.
    pub fn server_status(&self) -> u16 {
        self.server_status
    }

    /// The command just sent (the only one in flight) is answered by rttscope itself:
    /// it costs no round trip upstream. Call after the client's bytes were scanned and
    /// before the answer is.
    pub fn answered_locally(&mut self) {
        if self.pending.len() == 1 {
            self.summary.round_trips = 0;
        }
    }

    /// Client bytes scanned so far: where the next one sits in the client's stream (the
    /// coordinates of [`take_command_starts`](Self::take_command_starts)).
    pub fn client_offset(&self) -> u64 {
        self.client_offset
    }

    fn note_status(&mut self, status: u16) {
        self.summary.status = Some(status);
        self.server_status = status;
    }

    /// Renumber the server's packets to the plain protocol's sequence ids as they are
    /// scanned (with [`PacketScanner::scan_mut`](super::PacketScanner::scan_mut)); for a
    /// compressed upstream.
    pub fn renumber_upstream(&mut self, on: bool) {
        self.renumber_upstream = on;
    }

    /// Asks the session to note where in the client's stream each command starts, for
    /// [`take_command_starts`](Self::take_command_starts) to drain (off by default).
    pub fn track_command_starts(&mut self, on: bool) {
        self.track_starts = on;
    }

    /// Offsets in the client's stream (bytes after the handshake response) where
    /// commands started since the last call. While unsynced, every packet with
    /// sequence id 0 counts.
    pub fn take_command_starts(&mut self) -> std::collections::vec_deque::Drain<'_, u64> {
        self.command_starts.drain(..)
    }

    fn note_command_start(&mut self) {
        if self.track_starts && self.command_starts.len() < MAX_COMMAND_STARTS {
            self.command_starts.push_back(self.client_offset);
        }
    }

    /// The state machine cannot follow: every command in flight finishes as
    /// unparsed, and what follows is ignored until the next command.
    fn desync<O: Observer>(&mut self, error: &DecodeError, obs: &mut O) {
        let reason = error.kind();
        obs.desync(reason);
        while !self.pending.is_empty() {
            self.summary.unparsed = true;
            self.finishing = false;
            self.finish_front(obs);
        }
        self.synced = false;
        self.client_mode = ClientMode::Command;
        self.client_packet = ClientPacket::Ignored;
    }

    fn has(&self, cap: u64) -> bool {
        self.caps & cap != 0
    }

    /// Rows end with an OK packet (header 0xFE) instead of EOF, and no EOF
    /// follows column definitions.
    fn deprecate_eof(&self) -> bool {
        self.has(CLIENT_DEPRECATE_EOF)
    }

    /// The sequence id the response to the oldest unanswered command continues with.
    pub fn response_seq(&self) -> Option<u8> {
        self.pending.front().map(|p| p.seq)
    }

    /// Commands sent and not yet fully answered.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// False while so many pipelined commands are unanswered that reading
    /// more from the client would grow the queue without bound.
    pub fn accepts_commands(&self) -> bool {
        self.pending.len() < self.max_pending
    }

    /// No command in flight and authenticated: the connection can be closed
    /// without cutting anything off (the caller also checks the client
    /// stream is between packets).
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.client_mode == ClientMode::Command
    }

    /// Some of the answer to the oldest unanswered command came, not its end: a result set
    /// streaming, a large packet half read.
    pub fn response_under_way(&self) -> bool {
        self.response_started && !self.pending.is_empty()
    }

    /// A sink for bytes from the client.
    pub fn client<'a, O: Observer>(&'a mut self, obs: &'a mut O) -> ClientSide<'a, O> {
        ClientSide { session: self, obs }
    }

    /// A sink for bytes from upstream.
    pub fn upstream<'a, O: Observer>(&'a mut self, obs: &'a mut O) -> UpstreamSide<'a, O> {
        UpstreamSide { session: self, obs }
    }

    fn expected_response(&self, command: u8) -> Resp {
        match command {
            // A prepared LOAD DATA LOCAL INFILE asks for the file as a query does.
            COM_QUERY | COM_STMT_EXECUTE => Resp::ResultStart { infile: true },
            COM_PROCESS_INFO => Resp::ResultStart { infile: false },
            COM_STMT_PREPARE => Resp::PrepareOk,
            COM_STMT_FETCH => Resp::Rows,
            COM_FIELD_LIST => Resp::FieldList,
            COM_CHANGE_USER => Resp::Auth,
            COM_BINLOG_DUMP | COM_BINLOG_DUMP_GTID => Resp::Binlog,
            COM_STMT_CLOSE | COM_STMT_SEND_LONG_DATA | COM_QUIT => Resp::None,
            COM_SLEEP | COM_INIT_DB | COM_CREATE_DB | COM_DROP_DB | COM_REFRESH | COM_SHUTDOWN | COM_STATISTICS
            | COM_CONNECT | COM_PROCESS_KILL | COM_DEBUG | COM_PING | COM_TIME | COM_DELAYED_INSERT
            | COM_TABLE_DUMP | COM_CONNECT_OUT | COM_REGISTER_SLAVE | COM_STMT_RESET | COM_SET_OPTION | COM_DAEMON
            | COM_RESET_CONNECTION => Resp::Single,
            // Unknown (or masked, like bulk execute): the server answers with
            // OK, ERR or a result set; read it as such.
            _ => Resp::ResultStart { infile: false },
        }
    }

    /// Resets the accumulators for the command now at the front. Auth
    /// commands make the client's next packets opaque auth data; they can
    /// only come once this command is the one being answered.
    fn begin_front(&mut self) {
        self.summary = Summary::default();
        self.response_started = false;
        self.upstream_spoke = false;
        self.client_mode = ClientMode::Command;
        if let Some(front) = self.pending.front() {
            self.summary.command = front.command;
            // A command without a reply is sent, not exchanged; one sent
            // behind others still unanswered shares their wait.
            self.summary.round_trips = u32::from(front.resp != Resp::None && !front.pipelined);
            if matches!(front.command, CONNECT | COM_CHANGE_USER) {
                self.client_mode = ClientMode::Auth;
            }
        }
    }

    /// Completes the front command and moves on to the next, completing at
    /// once any that expect no response.
    fn finish_front<O: Observer>(&mut self, obs: &mut O) {
        let Some(done) = self.pending.pop_front() else { return };
        self.summary.bytes_up = done.bytes_up;
        self.lenient = !command::is_known(done.command);
        obs.finished(&self.summary);
        if let Some(change) = done.change
            && self.summary.error.is_none()
        {
            change.apply(&mut self.identity);
            self.identity_generation += 1;
            obs.identity(&self.identity);
        }
        self.begin_front();
        while let Some(next) = self.pending.front() {
            if next.resp != Resp::None || !next.complete {
                break;
            }
            self.summary.bytes_up = next.bytes_up;
            self.pending.pop_front();
            obs.finished(&self.summary);
            self.begin_front();
        }
    }
}

impl Session {
    /// A client packet begins, the session in sync. Errors are what desynchronise it.
    fn client_start<O: Observer>(
        &mut self,
        seq: u8,
        len: usize,
        prefix: &[u8],
        obs: &mut O,
    ) -> Result<bool, DecodeError> {
        match self.client_mode {
            ClientMode::Auth | ClientMode::Upload => {
                if self.upstream_spoke {
                    self.summary.round_trips += 1;
                    self.upstream_spoke = false;
                }
                self.client_packet = if self.client_mode == ClientMode::Upload {
                    ClientPacket::Upload { last: len == 0 }
                } else {
                    ClientPacket::Opaque
                };
                return Ok(false);
            }
            ClientMode::Command => {}
        }
        if seq != 0 {
            return Err(DecodeError::OutOfOrder { from: Peer::Client, expected: 0, got: seq });
        }
        let Some((&command, args)) = prefix.split_first() else {
            return Err(DecodeError::malformed(Peer::Client, "command", "empty packet"));
        };
        self.note_command_start();
        let resp = self.expected_response(command);
        obs.command_started(command);
        let pipelined = !self.pending.is_empty();
        self.pending.push_back(Pending {
            command,
            resp,
            seq: 1,
            bytes_up: 0,
            complete: false,
            pipelined,
            change: None,
            wants_cursor: false,
        });
        if self.pending.len() == 1 {
            self.begin_front();
        }
        self.client_packet = ClientPacket::Command;
        self.capture.clear();
        self.capture.extend_from_slice(args);
        Ok(len > prefix.len())
    }
}

/// Whether a COM_STMT_EXECUTE's arguments (statement id, then flags) ask for a cursor.
fn wants_cursor(args: &[u8]) -> bool {
    const CURSOR_TYPES: u8 = 0x07; // read only, for update, scrollable
    args.get(4).is_some_and(|flags| flags & CURSOR_TYPES != 0)
}

/// Bytes from the client, fed through the packet scanner.
pub struct ClientSide<'a, O> {
    session: &'a mut Session,
    obs: &'a mut O,
}

impl<O: Observer> FrameSink for ClientSide<'_, O> {
    fn start(&mut self, seq: u8, len: usize, prefix: &[u8]) -> bool {
        let s = &mut *self.session;
        if !s.synced {
            // A new command while no server packet is half read: pick up again.
            if seq == 0 && s.upstream_at_boundary && s.pending.is_empty() {
                s.synced = true;
            } else {
                if seq == 0 {
                    s.note_command_start();
                }
                s.client_packet = ClientPacket::Ignored;
                return false;
            }
        }
        match s.client_start(seq, len, prefix, self.obs) {
            Ok(want_body) => want_body,
            Err(e) => {
                s.desync(&e, self.obs);
                false
            }
        }
    }

    fn body(&mut self, bytes: &[u8]) {
        let s = &mut *self.session;
        if s.client_packet != ClientPacket::Command {
            return;
        }
        let room = s.capture_limit.saturating_sub(s.capture.len());
        s.capture.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn end(&mut self, last_seq: u8, total_len: u64, packets: u32) {
        let s = &mut *self.session;
        let bytes = total_len + 4 * u64::from(packets);
        s.client_offset += bytes;
        match s.client_packet {
            ClientPacket::Ignored => {}
            ClientPacket::Command => {
                let Some(cmd) = s.pending.back_mut() else { return };
                cmd.bytes_up += bytes;
                cmd.seq = last_seq.wrapping_add(1);
                cmd.complete = true;
                cmd.change = identity::requested(cmd.command, &s.capture);
                cmd.wants_cursor = cmd.command == COM_STMT_EXECUTE && wants_cursor(&s.capture);
                let command = cmd.command;
                self.obs.command(&CommandPacket {
                    command,
                    payload: &s.capture,
                    len: total_len.saturating_sub(1),
                    query_attributes: s.has(CLIENT_QUERY_ATTRIBUTES),
                });
                if s.pending.len() == 1 && s.pending.front().is_some_and(|p| p.resp == Resp::None) {
                    s.finish_front(self.obs);
                }
            }
            ClientPacket::Upload { last } => {
                if let Some(front) = s.pending.front_mut() {
                    front.bytes_up += bytes;
                    front.seq = last_seq.wrapping_add(1);
                    if last && front.resp == Resp::Uploading {
                        // The empty packet ends the upload; the server answers with OK/ERR.
                        front.resp = Resp::ResultStart { infile: true };
                        s.client_mode = ClientMode::Command;
                    }
                }
            }
            ClientPacket::Opaque => {
                if let Some(front) = s.pending.front_mut() {
                    front.bytes_up += bytes;
                    front.seq = last_seq.wrapping_add(1);
                }
            }
        }
    }
}

/// Bytes from upstream, fed through the packet scanner.
pub struct UpstreamSide<'a, O> {
    session: &'a mut Session,
    obs: &'a mut O,
}

impl<O: Observer> FrameSink for UpstreamSide<'_, O> {
    fn start(&mut self, seq: u8, len: usize, prefix: &[u8]) -> bool {
        let s = &mut *self.session;
        if s.synced
            && let Err(e) = s.upstream_start(seq, len, prefix, self.obs)
        {
            s.desync(&e, self.obs);
        }
        false
    }

    fn body(&mut self, _bytes: &[u8]) {}

    fn renumber(&mut self, seq: u8, continuation: bool) -> u8 {
        let s = &mut *self.session;
        if !s.renumber_upstream {
            return seq;
        }
        // A response continues the numbering of the client's last packet; a physical
        // packet continuing a long one, its predecessor's. Unsure where the stream is
        // (out of step, a command not yet complete): the server's own id.
        let next = match s.pending.front() {
            _ if continuation => s.upstream_next,
            Some(front) if s.synced && front.complete => front.seq,
            _ => seq,
        };
        s.upstream_next = next.wrapping_add(1);
        next
    }

    fn end(&mut self, last_seq: u8, total_len: u64, packets: u32) {
        let s = &mut *self.session;
        if s.synced {
            s.upstream_end(last_seq, total_len + 4 * u64::from(packets), self.obs);
        }
    }
}
