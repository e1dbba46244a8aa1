//! Reading and writing the connection phase's packets (the handshake's and the PROXY
//! header's): whole, small, each step with a deadline that names the config key that set it.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::protocol::handshake::MAX_HANDSHAKE_LEN;
use crate::protocol::{DecodeError, Peer, framing};
use crate::relay::error::RelayError;
use crate::relay::timers;

/// `step`, or a timeout naming `what` and the config `key` that set `timeout`.
pub(super) async fn within<T>(
    timeout: Duration,
    what: &'static str,
    key: &'static str,
    step: impl Future<Output = Result<T, RelayError>>,
) -> Result<T, RelayError> {
    timers::timeout(timeout, step).await.unwrap_or(Err(RelayError::Timeout(what, timeout, key)))
}

/// Reads exactly one packet (header and payload, nothing beyond: TLS may start next).
pub(super) async fn read_packet<S: AsyncRead + Unpin>(stream: &mut S, from: Peer) -> Result<(u8, Vec<u8>), RelayError> {
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).await.map_err(|e| RelayError::io(from, e))?;
    read_payload(stream, head, from).await
}

/// The payload of a packet whose 4-byte header is `head`.
pub(in crate::relay) async fn read_payload<S: AsyncRead + Unpin>(
    stream: &mut S,
    head: [u8; 4],
    from: Peer,
) -> Result<(u8, Vec<u8>), RelayError> {
    let io_error = |e| RelayError::io(from, e);
    let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
    if len > MAX_HANDSHAKE_LEN {
        return Err(DecodeError::HandshakeTooLarge { from, len, max: MAX_HANDSHAKE_LEN, head }.into());
    }
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.map_err(io_error)?;
    Ok((head[3], payload))
}

pub(super) fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut packet = Vec::with_capacity(4 + payload.len());
    packet.extend_from_slice(&framing::header(payload.len(), seq));
    packet.extend_from_slice(payload);
    packet
}

pub(super) async fn send<S: AsyncWrite + Unpin>(
    stream: &mut S,
    seq: u8,
    payload: &[u8],
    to: Peer,
) -> Result<(), RelayError> {
    // Login packets may hold a password (rttscope's stand-in decrypted it): the framed copy is
    // wiped like the payload.
    let framed = zeroize::Zeroizing::new(packet(seq, payload));
    write_all(stream, &framed, to).await
}

/// Writes and flushes (a TLS stream holds records until flushed).
pub(in crate::relay) async fn write_all<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
    to: Peer,
) -> Result<(), RelayError> {
    stream.write_all(bytes).await.map_err(|e| RelayError::io(to, e))?;
    stream.flush().await.map_err(|e| RelayError::io(to, e))
}
