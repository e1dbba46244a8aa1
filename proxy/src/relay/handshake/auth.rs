//! The login's auth exchange, relayed between legs whose sequence ids differ by a fixed
//! delta: any plugin, auth switch or caching_sha2's full auth, never re-implemented.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::time::Instant;
use zeroize::Zeroizing;

use crate::protocol::constants::header;
use crate::protocol::handshake::MAX_HANDSHAKE_LEN;
use crate::protocol::{DecodeError, Direction, PacketScanner, Peer, Session};
use crate::record::{Tap, micros};
use crate::relay::error::{Refusal, RelayError};
use crate::relay::leg::Transport;
use crate::relay::phase_io::{packet, write_all};
use crate::relay::pump::Observers;
use crate::relay::timers;

use super::stand_in::{ClientPacket, Watch};

/// How the auth exchange ended.
pub(super) enum AuthEnd {
    /// The server's OK.
    LoggedIn,
    /// The server's ERR, relayed.
    Failed,
    /// rttscope refuses the login: the client is to be told with sequence id `seq`.
    Refused { seq: u8, refusal: Refusal },
}

/// Relays the auth exchange until the server's OK or ERR. Either side may speak out of turn
/// (caching_sha2's "fast auth done" is followed by the OK at once), so both are read at
/// once. With a `watch`, a plain client's request for the server's key is answered here, or
/// a request for a password that would cross the long hop in clear refused (see [`Watch`]).
pub(super) async fn relay_auth<C: AsyncRead + AsyncWrite + Unpin, U: AsyncRead + AsyncWrite + Unpin>(
    client: &mut Framed<C>,
    upstream: &mut Framed<U>,
    mut delta: u8,
    rtt: Duration,
    mut watch: Option<Watch>,
    session: &mut Session,
    tap: &mut Observers,
) -> Result<AuthEnd, RelayError> {
    let (mut client_view, mut upstream_view) = (PacketScanner::new(), PacketScanner::new());
    // On an emulated link, the server's answer reaches the client one round trip after
    // what it answers went upstream.
    let mut sent = Instant::now();
    loop {
        while let Some((seq, payload)) = upstream.take_packet(Peer::Upstream)? {
            match watch.as_mut() {
                Some(Watch::StandIn(stand_in)) => stand_in.upstream_said(&payload),
                Some(Watch::NoClear(guard)) => {
                    if let Some(refusal) = guard.upstream_said(&payload) {
                        return Ok(AuthEnd::Refused { seq: seq.wrapping_sub(delta), refusal });
                    }
                }
                None => {}
            }
            let packet = packet(seq.wrapping_sub(delta), &payload);
            let arrived = Instant::now();
            let due = sent + rtt;
            if due > arrived {
                timers::sleep_until(due).await;
            }
            tap.arrived(Direction::ToClient, micros(arrived), micros(due.max(arrived)), packet.len());
            upstream_view.scan(&packet, &mut session.upstream(tap));
            write_all(&mut client.io, &packet, Peer::Client).await?;
            if session.pending() == 0 {
                return Ok(if payload.first() == Some(&header::OK) { AuthEnd::LoggedIn } else { AuthEnd::Failed });
            }
        }
        while let Some((seq, payload)) = client.take_packet(Peer::Client)? {
            let packet = packet(seq, &payload);
            let now = micros(Instant::now());
            tap.arrived(Direction::ToUpstream, now, now, packet.len());
            client_view.scan(&packet, &mut session.client(tap));
            let moved = match watch.as_mut() {
                Some(Watch::StandIn(stand_in)) => stand_in.client_said(&payload).await,
                Some(Watch::NoClear(guard)) => guard.client_said(&payload).map_or(Ok(ClientPacket::Relay), Err),
                None => Ok(ClientPacket::Relay),
            };
            let upstream_seq = seq.wrapping_add(delta);
            // Wiped once written: with a stand-in, it may hold the password.
            let forward = Zeroizing::new(match moved {
                Ok(ClientPacket::Relay) => self::packet(upstream_seq, &payload),
                Ok(ClientPacket::Clear(password)) => self::packet(upstream_seq, &password),
                Ok(ClientPacket::Answer(key)) => {
                    // The client's exchange gains two packets the server never sees.
                    let answer = self::packet(seq.wrapping_add(1), &key);
                    let now = micros(Instant::now());
                    tap.arrived(Direction::ToClient, now, now, answer.len());
                    upstream_view.scan(&answer, &mut session.upstream(tap));
                    write_all(&mut client.io, &answer, Peer::Client).await?;
                    delta = delta.wrapping_sub(2);
                    continue;
                }
                Err(refusal) => return Ok(AuthEnd::Refused { seq: seq.wrapping_add(1), refusal }),
            });
            write_all(&mut upstream.io, &forward, Peer::Upstream).await?;
            sent = Instant::now();
        }
        tokio::select! {
            filled = client.fill(Peer::Client) => filled?,
            filled = upstream.fill(Peer::Upstream) => filled?,
        }
    }
}

/// A stream read whole packets at a time, with what was read beyond them kept: a leg's
/// transport during the login, or the leg itself for a `COM_CHANGE_USER` exchange.
pub(super) struct Framed<T = Transport> {
    pub(super) io: T,
    buf: Vec<u8>,
}

impl<T: AsyncRead + Unpin> Framed<T> {
    pub(super) fn new(io: T) -> Framed<T> {
        Framed::with_pending(io, Vec::with_capacity(1024))
    }

    /// `io`, whose first bytes (read before) are `pending`.
    pub(super) fn with_pending(io: T, pending: Vec<u8>) -> Framed<T> {
        Framed { io, buf: pending }
    }

    /// A complete packet from the buffer, if one is there.
    fn take_packet(&mut self, from: Peer) -> Result<Option<(u8, Vec<u8>)>, RelayError> {
        let Some(head) = self.buf.get(..4) else { return Ok(None) };
        let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
        if len > MAX_HANDSHAKE_LEN {
            let head = [head[0], head[1], head[2], head[3]];
            return Err(DecodeError::HandshakeTooLarge { from, len, max: MAX_HANDSHAKE_LEN, head }.into());
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let seq = head[3];
        let payload = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Ok(Some((seq, payload)))
    }

    /// Reads more. Cancel-safe: what a read returns is in the buffer or was never read.
    async fn fill(&mut self, from: Peer) -> Result<(), RelayError> {
        let n = self.io.read_buf(&mut self.buf).await.map_err(|e| RelayError::io(from, e))?;
        if n == 0 {
            return Err(RelayError::io(from, std::io::ErrorKind::UnexpectedEof.into()));
        }
        Ok(())
    }

    pub(super) fn into_parts(self) -> (T, Vec<u8>) {
        (self.io, self.buf)
    }
}
