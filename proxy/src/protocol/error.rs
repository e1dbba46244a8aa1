//! What can go wrong decoding the wire protocol.

use std::fmt;

/// The two peers of a proxied connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Client,
    Upstream,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Peer::Client => "client",
            Peer::Upstream => "upstream",
        })
    }
}

/// A protocol violation. Each one ends the connection it happened on, and
/// only that one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("continuation packet out of order: expected sequence id {expected}, got {got}")]
    ContinuationOutOfOrder { expected: u8, got: u8 },
    #[error("{from} sent a packet out of order: expected sequence id {expected}, got {got}")]
    OutOfOrder { from: Peer, expected: u8, got: u8 },
    #[error("malformed {what} from {from}: {why}")]
    Malformed { from: Peer, what: &'static str, why: &'static str },
    #[error("server greeting uses protocol version {0}; only version 10 is supported")]
    ProtocolVersion(u8),
    #[error("client asked for TLS, which rttscope does not carry yet; connect without TLS")]
    TlsRequested,
    #[error("client uses the pre-4.1 protocol, which rttscope does not support")]
    PreProtocol41,
    #[error("upstream sent a packet (first byte {first:#04x}) while no command was pending")]
    Unsolicited { first: u8 },
    #[error("{0} closed the connection in the middle of a packet")]
    Truncated(Peer),
    #[error("{from} sent a {len}-byte handshake packet; at most {max} bytes are accepted")]
    HandshakeTooLarge { from: Peer, len: usize, max: usize },
}

impl DecodeError {
    pub(crate) fn malformed(from: Peer, what: &'static str, why: &'static str) -> Self {
        DecodeError::Malformed { from, what, why }
    }
}
