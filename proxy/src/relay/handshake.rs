//! The connection phase, relayed before the pump takes over: the server's
//! greeting and the client's handshake response are read whole (they are
//! small and bounded), the capabilities rttscope cannot carry are masked in
//! place, and everything after is forwarded byte for byte.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::error::RelayError;
use crate::protocol::constants::{capability, header};
use crate::protocol::handshake::{negotiated, HandshakeResponse41, HandshakeV10, MAX_HANDSHAKE_LEN};
use crate::protocol::codes;
use crate::protocol::packets::{err_packet, ErrPacket};
use crate::protocol::{framing, DecodeError, Observer, Peer, Session};

/// A connection whose handshake has been relayed; the auth exchange runs in the pump.
pub struct Established {
    pub session: Session,
    pub greeting: HandshakeV10,
    pub response: HandshakeResponse41,
}

/// What the server opened with.
pub enum Greeting {
    /// A greeting, masked and passed on; `len` is its payload length.
    Forwarded { greeting: HandshakeV10, len: usize },
    /// An ERR packet instead (too many connections, host blocked), passed on.
    Refused,
}

/// Reads the server's greeting and passes it on with capabilities masked.
/// On error nothing has reached the client yet, so the caller can still
/// answer it with an ERR packet of its own.
pub async fn relay_greeting(client: &mut TcpStream, upstream: &mut TcpStream, timeout: Duration) -> Result<Greeting, RelayError> {
    let (seq, mut payload) = read_packet(upstream, Peer::Upstream, "server greeting", timeout).await?;
    if payload.first() == Some(&header::ERR) {
        if let Some(err) = ErrPacket::parse(&payload) {
            let message = String::from_utf8_lossy(payload.get(3..).unwrap_or_default());
            tracing::info!(code = err.code, %message, "upstream refused the connection");
        }
        write_packet(client, seq, &payload).await.map_err(RelayError::Client)?;
        return Ok(Greeting::Refused);
    }
    let mut greeting = HandshakeV10::parse(&payload)?;
    greeting.mask(&mut payload, capability::MASKED);
    write_packet(client, seq, &payload).await.map_err(RelayError::Client)?;
    Ok(Greeting::Forwarded { greeting, len: payload.len() })
}

/// Relays the client's handshake response (masked); the auth exchange
/// that follows runs in the pump.
pub async fn relay_response<O: Observer>(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    (greeting, greeting_len): (HandshakeV10, usize),
    timeout: Duration,
    capture_limit: usize,
    obs: &mut O,
) -> Result<Established, RelayError> {
    let (seq, mut payload) = read_packet(client, Peer::Client, "handshake response", timeout).await?;
    let mut response = match HandshakeResponse41::parse(&payload) {
        Ok(response) => response,
        Err(e) => {
            // Tell the client why in words it will show its user.
            let (code, state) = match e {
                DecodeError::TlsRequested => (codes::HANDSHAKE_ERROR, "08S01"),
                DecodeError::PreProtocol41 => (codes::NOT_SUPPORTED_AUTH_MODE, "08004"),
                _ => return Err(e.into()),
            };
            let packet = err_packet(seq.wrapping_add(1), code, state, &format!("rttscope: {e}"), true);
            client.write_all(&packet).await.map_err(RelayError::Client)?;
            return Err(e.into());
        }
    };
    response.mask(&mut payload, capability::MASKED);
    write_packet(upstream, seq, &payload).await.map_err(RelayError::Upstream)?;
    let caps = negotiated(greeting.capabilities, response.capabilities);
    let session = Session::after_handshake(caps, greeting_len, seq, payload.len(), capture_limit, obs);
    Ok(Established { session, greeting, response })
}

async fn read_packet(
    stream: &mut TcpStream,
    from: Peer,
    what: &'static str,
    timeout: Duration,
) -> Result<(u8, Vec<u8>), RelayError> {
    let io_error = |e| RelayError::io(from, e);
    let read = async {
        let mut head = [0u8; 4];
        stream.read_exact(&mut head).await.map_err(io_error)?;
        let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
        if len > MAX_HANDSHAKE_LEN {
            return Err(DecodeError::HandshakeTooLarge { from, len, max: MAX_HANDSHAKE_LEN }.into());
        }
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload).await.map_err(io_error)?;
        Ok((head[3], payload))
    };
    tokio::time::timeout(timeout, read).await.unwrap_or(Err(RelayError::Timeout(what, timeout)))
}

async fn write_packet(stream: &mut TcpStream, seq: u8, payload: &[u8]) -> std::io::Result<()> {
    let mut packet = Vec::with_capacity(4 + payload.len());
    packet.extend_from_slice(&framing::header(payload.len(), seq));
    packet.extend_from_slice(payload);
    stream.write_all(&packet).await
}
