//! A PROXY protocol header (v1's `PROXY TCP4 ...\r\n` line or v2's binary form) ahead of the
//! client's first packet, from a load balancer in front of rttscope or a client that sends one
//! itself: read when it is well formed and passed on to the server unchanged, so the server
//! sees what it would see directly and accepts or refuses it by its own
//! `proxy_protocol_networks`; passed on unread when it is not.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::error::RelayError;
use super::leg::Transport;
use super::phase_io::{read_payload, write_all};
use super::timers;
use crate::protocol::Peer;

/// The client's first packet. A PROXY protocol header before it (v1 `PROXY TCP4 ...\r\n`, or
/// v2's binary form), from a load balancer in front of rttscope or a client that sends one
/// itself, goes on to the server unchanged before anything else: the server sees what it
/// would see directly, and accepts or refuses it by its own `proxy_protocol_networks`.
pub(super) async fn read_first_client_packet(
    client: &mut Transport,
    upstream: &mut TcpStream,
) -> Result<First, RelayError> {
    let mut head = [0u8; 4];
    client.read_exact(&mut head).await.map_err(|e| RelayError::io(Peer::Client, e))?;
    match proxy_header(client, head).await? {
        ProxyHeader::None => {}
        ProxyHeader::Whole(header) => {
            write_all(upstream, &header, Peer::Upstream).await?;
            if let Some(partial) = read_head_unless_upstream_speaks(client, upstream, &mut head).await? {
                // The server answered the header itself (refused it: ERR 1105, or closed) before
                // the client's handshake came, or the client stopped after the header: relay the
                // rest unread, so the client reads what the server said as it would directly —
                // and, having stopped, hears the end only once the server has taken it in.
                tracing::debug!(
                    "the server answered the PROXY header, or the client stopped after it: relayed unread from here"
                );
                write_all(upstream, partial, Peer::Upstream).await?;
                return Ok(First::Opaque);
            }
        }
        ProxyHeader::Unreadable(bytes) => {
            tracing::debug!(len = bytes.len(), "a PROXY header rttscope cannot read: passed on as it is");
            write_all(upstream, &bytes, Peer::Upstream).await?;
            return Ok(First::Opaque);
        }
    }
    let (seq, payload) = read_payload(client, head, Peer::Client).await?;
    Ok(First::Packet(seq, payload))
}

/// Reads the 4-byte head of the client's next packet into `head`, unless the server speaks
/// (or closes) first, or the client ends its side: then the part of it read so far, which is
/// the server's to have. A client that sends a header and stops (mysql_client_test's
/// test_proxy_header_connect_errors_reset) is a failed handshake the server counts against
/// the host the header names; directly, the client hears the server close only after it was
/// counted. Closing both legs at the client's end would let the client's next connection
/// overtake the count (the host not yet blocked, or blocked after a login that reset it).
async fn read_head_unless_upstream_speaks<'h>(
    client: &mut Transport,
    upstream: &TcpStream,
    head: &'h mut [u8; 4],
) -> Result<Option<&'h [u8]>, RelayError> {
    let mut have = 0;
    let mut probe = [0u8; 1];
    while have < head.len() {
        tokio::select! {
            // The client's bytes first when both are there: a client that sent its handshake
            // with the header goes on to the login, which relays a refusal as the server's.
            biased;
            // `read` and `peek` are cancel-safe: whichever loses has taken nothing.
            read = client.read(&mut head[have..]) => match read.map_err(|e| RelayError::io(Peer::Client, e))? {
                0 => return Ok(Some(&head[..have])),
                n => have += n,
            },
            _ = upstream.peek(&mut probe) => return Ok(Some(&head[..have])),
        }
    }
    Ok(None)
}

/// What the client sent first.
pub(super) enum First {
    /// Its first packet (after any PROXY header, which went on to the server).
    Packet(u8, Vec<u8>),
    /// A PROXY header rttscope cannot read, or one the server answered itself (refused it)
    /// before the client's handshake came: passed on, and the rest relayed unread.
    Opaque,
}

/// A PROXY protocol header at the start of the client's bytes.
enum ProxyHeader {
    None,
    Whole(Vec<u8>),
    /// What was read of one that is malformed or longer than the protocol allows.
    Unreadable(Vec<u8>),
}

/// The longest PROXY v1 line, `\r\n` included (the protocol's own limit).
const PROXY_V1_MAX: usize = 107;
/// The PROXY v2 signature.
const PROXY_V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";

/// When `head` (the client's first 4 bytes) starts a PROXY protocol header, the whole
/// header. Neither start can begin a handshake packet: both read as lengths over 64 KiB.
async fn proxy_header(client: &mut Transport, head: [u8; 4]) -> Result<ProxyHeader, RelayError> {
    // A balancer writes its header at once. Bytes that stop coming before the header ends
    // (a client that waits for an answer to a header it cut short) are passed on unread:
    // the server answers them as it would directly.
    const PAUSE: Duration = Duration::from_millis(200);
    let io_error = |e| RelayError::io(Peer::Client, e);
    if head == *b"PROX" {
        let mut line = head.to_vec();
        while !line.ends_with(b"\r\n") {
            if line.len() >= PROXY_V1_MAX {
                return Ok(ProxyHeader::Unreadable(line));
            }
            match timers::timeout(PAUSE, client.read_u8()).await {
                Ok(byte) => line.push(byte.map_err(io_error)?),
                Err(_) => return Ok(ProxyHeader::Unreadable(line)),
            }
        }
        return Ok(ProxyHeader::Whole(line));
    }
    if head == PROXY_V2_SIGNATURE[..4] {
        // The rest of the signature, version and command, family, and the length to follow.
        let mut header = head.to_vec();
        header.resize(16, 0);
        let mut have = 4;
        while have < header.len() {
            match timers::timeout(PAUSE, client.read(&mut header[have..])).await {
                Ok(Ok(0)) => return Err(io_error(std::io::ErrorKind::UnexpectedEof.into())),
                Ok(Ok(n)) => have += n,
                Ok(Err(e)) => return Err(io_error(e)),
                Err(_) => {
                    header.truncate(have);
                    return Ok(ProxyHeader::Unreadable(header));
                }
            }
            if have == 16 {
                let len = usize::from(u16::from_be_bytes([header[14], header[15]]));
                if header[4..12] != PROXY_V2_SIGNATURE[4..] || !proxy_v2_fits(header[12], header[13], len) {
                    return Ok(ProxyHeader::Unreadable(header));
                }
                header.resize(16 + len, 0);
            }
        }
        return Ok(ProxyHeader::Whole(header));
    }
    Ok(ProxyHeader::None)
}

/// Whether a PROXY v2 header's version and command, family and length agree: a `PROXY`
/// command's addresses must fit in what follows (12 bytes for IPv4, 36 for IPv6, 216 for Unix
/// paths). One that does not is the server's to refuse ("Failed to parse proxy header"); read
/// as rttscope would, its short length would make the client's next bytes a bogus packet.
fn proxy_v2_fits(version_command: u8, family: u8, len: usize) -> bool {
    const LOCAL: u8 = 0x20;
    const PROXY: u8 = 0x21;
    match version_command {
        LOCAL => true,
        PROXY => match family >> 4 {
            0 => true,
            1 => len >= 12,
            2 => len >= 36,
            3 => len >= 216,
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v2_header_must_have_room_for_its_addresses() {
        assert!(proxy_v2_fits(0x21, 0x11, 12), "TCP4");
        assert!(!proxy_v2_fits(0x21, 0x11, 0), "TCP4 with nothing after it (mysql_client_test's case)");
        assert!(proxy_v2_fits(0x21, 0x21, 36) && !proxy_v2_fits(0x21, 0x21, 12), "TCP6");
        assert!(proxy_v2_fits(0x21, 0x31, 216) && !proxy_v2_fits(0x21, 0x31, 36), "Unix");
        assert!(proxy_v2_fits(0x20, 0x11, 0), "LOCAL carries no addresses");
        assert!(proxy_v2_fits(0x21, 0x00, 0), "UNSPEC");
        assert!(!proxy_v2_fits(0x11, 0x11, 12), "version 1 in the binary form");
        assert!(!proxy_v2_fits(0x21, 0x41, 64), "no such family");
    }
}
