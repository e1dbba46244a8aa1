//! The command/response state machine: fed the packets of both directions,
//! it knows where every response ends, which command it answers, and what it
//! carried (rows, results, errors, bytes, round trips).
//!
//! Commands are queued in the order the client sent them, so clients that
//! pipeline (several commands before reading the first response) are
//! followed exactly: MySQL answers commands strictly in order.

mod response;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use super::constants::{capability::*, command, command::*};
use super::error::{DecodeError, Peer};
use super::framing::{FrameSink, PREFIX_LEN};
use super::packets::ErrPacket;

/// Pseudo-command for the connection phase (greeting to the auth OK), so
/// connection setup is recorded like any other exchange. MySQL's own
/// command enum uses the same value for "connect".
pub const CONNECT: u8 = COM_CONNECT;

/// A client command as it arrived, for observers.
#[derive(Debug)]
pub struct CommandPacket<'a> {
    pub command: u8,
    /// The payload after the command byte, up to the capture limit.
    pub payload: &'a [u8],
    /// The payload's full length (command byte excluded).
    pub len: u64,
}

/// A prepared statement announced by a `COM_STMT_PREPARE` OK.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PreparedStatement {
    pub id: u32,
    pub params: u16,
    pub columns: u16,
}

/// What one command and its response amounted to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub command: u8,
    /// Request/response exchanges: the times the client waited for the
    /// server. 1, plus one for every time the client spoke again after the
    /// server within the same command (a LOCAL INFILE upload, an auth switch
    /// reply); 0 for a command with no reply, or one pipelined behind
    /// others still unanswered (it shares their wait).
    pub round_trips: u32,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Result sets and OK packets in the response (more than one for
    /// multi-statements and stored procedures).
    pub results: u32,
    pub rows: u64,
    /// Columns of the first result set.
    pub columns: u32,
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub warnings: u32,
    /// Status flags of the last OK/EOF.
    pub status: u16,
    pub error: Option<ErrPacket>,
    pub statement: Option<PreparedStatement>,
    pub local_infile: bool,
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
    /// being prepared. Carries the type and flags when readable.
    fn column(&mut self, _type_and_flags: Option<(u8, u16)>, _of: ColumnOf) {}
    /// A row of the current result set: the first bytes of its payload.
    fn row(&mut self, _prefix: &[u8]) {}
    /// The oldest unfinished command is complete.
    fn finished(&mut self, _summary: &Summary) {}
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
    Upload { last: bool },
    Opaque,
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
}

impl Session {
    /// State after the greeting (`greeting_len` payload bytes) and the
    /// handshake response (sequence id `response_seq`, `response_len` payload
    /// bytes) have been forwarded: the auth exchange runs as the
    /// pseudo-command [`CONNECT`], which is charged for both.
    pub fn after_handshake<O: Observer>(
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
        };
        session.pending.push_back(Pending {
            command: CONNECT,
            resp: Resp::Auth,
            seq: response_seq.wrapping_add(1),
            bytes_up: 4 + response_len as u64,
            complete: true,
            pipelined: false,
        });
        session.begin_front();
        session.summary.bytes_down = 4 + greeting_len as u64;
        obs.command(&CommandPacket { command: CONNECT, payload: &[], len: response_len as u64 });
        session
    }

    pub fn capabilities(&self) -> u64 {
        self.caps
    }

    fn has(&self, cap: u64) -> bool {
        self.caps & cap != 0
    }

    /// Rows end with an OK packet (header 0xFE) instead of EOF, and no EOF
    /// follows column definitions.
    fn deprecate_eof(&self) -> bool {
        self.has(CLIENT_DEPRECATE_EOF)
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
            COM_QUERY => Resp::ResultStart { infile: true },
            COM_STMT_EXECUTE | COM_PROCESS_INFO => Resp::ResultStart { infile: false },
            COM_STMT_PREPARE => Resp::PrepareOk,
            COM_STMT_FETCH => Resp::Rows,
            COM_FIELD_LIST => Resp::FieldList,
            COM_CHANGE_USER => Resp::Auth,
            COM_BINLOG_DUMP | COM_BINLOG_DUMP_GTID => Resp::Binlog,
            COM_STMT_CLOSE | COM_STMT_SEND_LONG_DATA | COM_QUIT => Resp::None,
            COM_SLEEP | COM_INIT_DB | COM_CREATE_DB | COM_DROP_DB | COM_REFRESH | COM_SHUTDOWN
            | COM_STATISTICS | COM_CONNECT | COM_PROCESS_KILL | COM_DEBUG | COM_PING | COM_TIME
            | COM_DELAYED_INSERT | COM_TABLE_DUMP | COM_CONNECT_OUT | COM_REGISTER_SLAVE
            | COM_STMT_RESET | COM_SET_OPTION | COM_DAEMON | COM_RESET_CONNECTION => Resp::Single,
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

/// Bytes from the client, fed through the packet scanner.
pub struct ClientSide<'a, O> {
    session: &'a mut Session,
    obs: &'a mut O,
}

impl<O: Observer> FrameSink for ClientSide<'_, O> {
    fn start(&mut self, seq: u8, len: usize, prefix: &[u8]) -> Result<bool, DecodeError> {
        let s = &mut *self.session;
        match s.client_mode {
            ClientMode::Auth | ClientMode::Upload => {
                if s.upstream_spoke {
                    s.summary.round_trips += 1;
                    s.upstream_spoke = false;
                }
                s.client_packet = if s.client_mode == ClientMode::Upload {
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
        let resp = s.expected_response(command);
        self.obs.command_started(command);
        let pipelined = !s.pending.is_empty();
        s.pending.push_back(Pending { command, resp, seq: 1, bytes_up: 0, complete: false, pipelined });
        if s.pending.len() == 1 {
            s.begin_front();
        }
        s.client_packet = ClientPacket::Command;
        s.capture.clear();
        s.capture.extend_from_slice(args);
        Ok(len > prefix.len())
    }

    fn body(&mut self, bytes: &[u8]) {
        let s = &mut *self.session;
        let room = s.capture_limit.saturating_sub(s.capture.len());
        s.capture.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn end(&mut self, last_seq: u8, total_len: u64, packets: u32) -> Result<(), DecodeError> {
        let s = &mut *self.session;
        let bytes = total_len + 4 * u64::from(packets);
        match s.client_packet {
            ClientPacket::Command => {
                let Some(cmd) = s.pending.back_mut() else { return Ok(()) };
                cmd.bytes_up += bytes;
                cmd.seq = last_seq.wrapping_add(1);
                cmd.complete = true;
                let command = cmd.command;
                self.obs.command(&CommandPacket { command, payload: &s.capture, len: total_len.saturating_sub(1) });
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
        Ok(())
    }
}

/// Bytes from upstream, fed through the packet scanner.
pub struct UpstreamSide<'a, O> {
    session: &'a mut Session,
    obs: &'a mut O,
}

impl<O: Observer> FrameSink for UpstreamSide<'_, O> {
    fn start(&mut self, seq: u8, len: usize, prefix: &[u8]) -> Result<bool, DecodeError> {
        self.session.upstream_start(seq, len, prefix, self.obs)?;
        Ok(false)
    }

    fn body(&mut self, _bytes: &[u8]) {}

    fn end(&mut self, last_seq: u8, total_len: u64, packets: u32) -> Result<(), DecodeError> {
        self.session.upstream_end(last_seq, total_len + 4 * u64::from(packets), self.obs);
        Ok(())
    }
}
