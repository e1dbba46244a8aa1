//! What can go wrong decoding the wire protocol.

pub use super::peer::Peer;

/// A protocol violation. Each one ends the connection it happened on, and
/// only that one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{from} sent a packet out of order: expected sequence id {expected}, got {got}")]
    OutOfOrder { from: Peer, expected: u8, got: u8 },
    #[error("malformed {what} from {from}: {why}")]
    Malformed { from: Peer, what: &'static str, why: &'static str },
    #[error("server greeting uses protocol version {0}; only version 10 is supported")]
    ProtocolVersion(u8),
    #[error("client asked for TLS, which this rttscope does not offer (listen.tls.mode: off); connect without TLS")]
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
