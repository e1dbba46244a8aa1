//! What can go wrong decoding the wire protocol.

pub use super::peer::Peer;

/// A protocol violation. Each one ends the connection it happened on, and
/// only that one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A packet header's sequence id is not the one the exchange calls for (a client command
    /// starts at 0; every later packet of the exchange is one higher, mod 256).
    #[error("{from} sent a packet out of order: expected sequence id {expected}, got {got}")]
    OutOfOrder {
        /// The sender; picks the metric label (`client_sequence`/`upstream_sequence`).
        from: Peer,
        /// The previous packet's sequence id plus one (0 for a new command).
        expected: u8,
        /// The sequence id in the packet header.
        got: u8,
    },
    /// A packet too short or inconsistent to read the fields the state machine needs.
    #[error("malformed {what} from {from}: {why}")]
    Malformed {
        /// The sender; picks the metric label (`client_malformed`/`upstream_malformed`).
        from: Peer,
        /// The packet being read, in words (`server greeting`, `EOF packet`).
        what: &'static str,
        /// What was wrong with it, in words (`truncated`, `unterminated user name`).
        why: &'static str,
    },
    /// The greeting's first byte, its protocol version, is not 10 (HandshakeV10): a server
    /// older than MySQL 3.21, or not MySQL at all.
    #[error("server greeting uses protocol version {0}; only version 10 is supported")]
    ProtocolVersion(u8),
    /// The client sent an SSLRequest (a 32-byte HandshakeResponse41 with `CLIENT_SSL`) to a
    /// listener that offers no TLS.
    #[error("client asked for TLS, which this rttscope does not offer (listen.tls.mode: off); connect without TLS")]
    TlsRequested,
    /// The handshake response lacks `CLIENT_PROTOCOL_41`: a HandshakeResponse320 client.
    #[error("client uses the pre-4.1 protocol, which rttscope does not support")]
    PreProtocol41,
    /// A server packet other than ERR arrived with no command pending (after a command
    /// rttscope does not know, stray packets are tolerated instead).
    #[error("upstream sent a packet (first byte {first:#04x}) while no command was pending")]
    Unsolicited {
        /// The packet's first payload byte, its header (`0x00` OK, `0xFE` EOF, ...), for the log.
        first: u8,
    },
    /// The peer's stream ended partway through a packet header or payload.
    #[error("{0} closed the connection in the middle of a packet")]
    Truncated(Peer),
    /// A connection-phase packet (greeting, handshake response, auth exchange) whose header
    /// declares more than [`MAX_HANDSHAKE_LEN`](super::handshake::MAX_HANDSHAKE_LEN): refused
    /// before it is buffered.
    #[error("{}", too_large(*from, *len, *max, head))]
    HandshakeTooLarge {
        /// The sender: `Upstream` for the greeting and auth requests, `Client` for its answers.
        from: Peer,
        /// The payload length the packet header declared, bytes.
        len: usize,
        /// The bound in force, bytes.
        max: usize,
        /// The header's four bytes: text there is another protocol, not an oversized packet.
        head: [u8; 4],
    },
}

/// What [`DecodeError::HandshakeTooLarge`] says. A header of printable text is another
/// protocol (an HTTP request, say, sent to the MySQL port), and the length it makes says
/// nothing.
fn too_large(from: Peer, len: usize, max: usize, head: &[u8; 4]) -> String {
    if head.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        let text = String::from_utf8_lossy(head);
        return format!(
            "{from} does not speak the MySQL protocol: its first bytes are text ({text:?}), not a packet header"
        );
    }
    format!("{from} sent a {len}-byte handshake packet; at most {max} bytes are accepted")
}

impl DecodeError {
    pub(crate) fn malformed(from: Peer, what: &'static str, why: &'static str) -> Self {
        DecodeError::Malformed { from, what, why }
    }

    /// Every name [`kind`](Self::kind) gives, for metrics that list them all.
    pub const KINDS: [&'static str; 10] = [
        "client_sequence",
        "upstream_sequence",
        "client_malformed",
        "upstream_malformed",
        "protocol_version",
        "tls_requested",
        "pre_protocol_41",
        "unsolicited",
        "truncated",
        "handshake_too_large",
    ];

    /// A short fixed name for what went wrong: a metric label and a log field.
    pub fn kind(&self) -> &'static str {
        match self {
            DecodeError::OutOfOrder { from: Peer::Client, .. } => "client_sequence",
            DecodeError::OutOfOrder { from: Peer::Upstream, .. } => "upstream_sequence",
            DecodeError::Malformed { from: Peer::Client, .. } => "client_malformed",
            DecodeError::Malformed { from: Peer::Upstream, .. } => "upstream_malformed",
            DecodeError::ProtocolVersion(_) => "protocol_version",
            DecodeError::TlsRequested => "tls_requested",
            DecodeError::PreProtocol41 => "pre_protocol_41",
            DecodeError::Unsolicited { .. } => "unsolicited",
            DecodeError::Truncated(_) => "truncated",
            DecodeError::HandshakeTooLarge { .. } => "handshake_too_large",
        }
    }
}
