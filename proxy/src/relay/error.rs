//! Why a proxied connection ended early.

use std::io;

use crate::protocol::{DecodeError, Peer};

/// A connection-level failure. Each one ends its own connection only.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// A peer broke the protocol: logged once, connection closed.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The client went away or its socket failed (a hangup, not our fault).
    #[error("client connection: {0}")]
    Client(#[source] io::Error),
    /// The upstream server went away or its socket failed.
    #[error("upstream connection: {0}")]
    Upstream(#[source] io::Error),
    /// A step of the connection phase took too long.
    #[error("{0} did not arrive within {1:?}")]
    Timeout(&'static str, std::time::Duration),
}

impl RelayError {
    /// An I/O error on `peer`'s socket.
    pub fn io(peer: Peer, e: io::Error) -> Self {
        match peer {
            Peer::Client => RelayError::Client(e),
            Peer::Upstream => RelayError::Upstream(e),
        }
    }

    /// Hangups and resets are the ordinary end of a connection; protocol
    /// violations (a close in the middle of a packet included) and timeouts
    /// deserve a warning.
    pub fn is_hangup(&self) -> bool {
        match self {
            RelayError::Client(e) | RelayError::Upstream(e) => matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::NotConnected
            ),
            _ => false,
        }
    }
}
