//! The two peers of a proxied connection, and the two ways bytes flow
//! between them.

use std::fmt;

/// The two peers of a proxied connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// The application's side: whoever connected to rttscope.
    Client,
    /// The MySQL or MariaDB server rttscope forwards to.
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

/// Which way bytes flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client to the server: commands, uploads, auth replies.
    ToUpstream,
    /// From the server to the client: greetings and responses.
    ToClient,
}

impl Direction {
    /// The peer these bytes come from.
    pub fn from(self) -> Peer {
        match self {
            Direction::ToUpstream => Peer::Client,
            Direction::ToClient => Peer::Upstream,
        }
    }

    /// The peer these bytes go to.
    pub fn to(self) -> Peer {
        match self {
            Direction::ToUpstream => Peer::Upstream,
            Direction::ToClient => Peer::Client,
        }
    }
}
