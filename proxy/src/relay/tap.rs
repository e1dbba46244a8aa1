//! What the relay tells an observer besides protocol events: when bytes
//! arrived (and when an emulated link releases them), who connected, when
//! the sockets may be sampled, and when rttscope holds off for the client.

use std::net::SocketAddr;

use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::protocol::handshake::HandshakeResponse41;
use crate::protocol::Observer;

/// Which way bytes flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    ToUpstream,
    ToClient,
}

/// An observer that is also told about I/O. Called on the forwarding path:
/// implementations must be quick and must not block.
pub trait Tap: Observer {
    /// `len` bytes were read at `arrived`, before the state machine sees
    /// them; they go on at `released` (later than `arrived` only on an
    /// emulated link).
    fn arrived(&mut self, _direction: Direction, _arrived: Instant, _released: Instant, _len: usize) {}
    /// The handshake was relayed: who connected, as whom.
    fn handshake(&mut self, _client: SocketAddr, _response: &HandshakeResponse41) {}
    /// Bytes that arrived were scanned; the sockets may be sampled.
    fn scanned(&mut self, _direction: Direction, _client: &TcpStream, _upstream: &TcpStream) {}
    /// rttscope stopped (`true`) or resumed reading upstream because the
    /// client was not taking what was ready for it.
    fn held_off(&mut self, _held: bool, _now: Instant) {}
}

/// A tap that records nothing.
pub struct NoTap;
impl Observer for NoTap {}
impl Tap for NoTap {}
