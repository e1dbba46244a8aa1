//! The connection phase, from the server's greeting to its OK. rttscope offers the client
//! TLS of its own, decides the long hop's TLS and compression (`upstream.tls`,
//! `upstream.compression`), and relays the login between legs that may differ — each with
//! its own TLS, compression and so sequence ids — rewriting each packet's sequence id for
//! the other leg. The auth exchange itself (any plugin, auth switch, caching_sha2's full
//! auth) is relayed, never re-implemented; the session state machine follows it as the
//! client sees it, so the login is recorded like any command.
//!
//! Every packet here is small and read whole (at most [`MAX_HANDSHAKE_LEN`]); every step
//! has a deadline; every refusal reaches the client as an ERR packet.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rttscope_config::{UpstreamCompression, UpstreamTlsMode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::RelayStats;
use super::error::{Refusal, RelayError};
use super::leg::{Leg, Transport, UpstreamSocket};
use super::proxy_header::{First, read_first_client_packet};
use super::pump::Observers;
use super::timers;
use super::tls::{ClientSideTls, TlsInfo, UpstreamSideTls};
use crate::inject::{InjectBinding, InjectControl};
use crate::live::Legs;
use crate::protocol::compress::Algorithm;
use crate::protocol::constants::capability::*;
use crate::protocol::constants::header;
use crate::protocol::handshake::{HandshakeResponse41, HandshakeV10, MAX_HANDSHAKE_LEN, is_ssl_request, negotiated};
use crate::protocol::packets::ErrPacket;
use crate::protocol::{DecodeError, Direction, Identity, Observer, PacketScanner, Peer, Session, framing};
use crate::record::{Tap, micros};

/// What the connection phase needs to know.
pub(super) struct Settings<'a> {
    /// TLS towards clients, unless `listen.tls.mode: off` (or the client came over a Unix
    /// socket, which clients already treat as secure).
    pub client_tls: Option<&'a ClientSideTls>,
    /// TLS towards the server, unless `upstream.tls.mode: disabled`.
    pub upstream_tls: Option<&'a UpstreamSideTls>,
    pub compression: UpstreamCompression,
    /// How long the server may take to greet once dialled (`limits.connect_timeout`: a
    /// server that accepts and says nothing is as unreachable as one that does not answer).
    pub greeting_timeout: Duration,
    /// Deadline of each later step (`limits.handshake_timeout`).
    pub timeout: Duration,
    /// SQL bytes the session captures per command.
    pub capture_limit: usize,
    /// The upstream, for messages.
    pub upstream: String,
    /// The client, as logs and reports name it.
    pub peer: &'a str,
    /// Where refusals the upstream caused are counted.
    pub stats: &'a RelayStats,
    /// The emulated link and this connection's id, for its scope: the login pays the
    /// link's round trips as commands do.
    pub inject: Option<(&'a Arc<InjectControl>, u64)>,
}

/// How the connection phase ended.
pub(super) enum Handshake {
    /// Logged in: the pump takes over.
    Established(Box<Established>),
    /// It ended here, and the client was told why.
    Ended(Ending),
    /// The greeting was not one rttscope understands; it went to the client as it was.
    /// Relay bytes both ways and parse nothing.
    Opaque { client: Transport, upstream: TcpStream },
}

/// How a connection phase ended without a login, the client told.
#[derive(Debug)]
pub(super) enum Ending {
    /// The server sent an ERR instead of a greeting (too many connections, host blocked).
    RefusedByUpstream,
    /// rttscope turned the client away.
    Refused(Refusal),
    /// The server refused the login (wrong password, unknown user...).
    LoginFailed,
}

/// A logged-in connection, ready for the pump.
pub(super) struct Established {
    pub client: Leg,
    pub upstream: Leg,
    pub session: Session,
    pub greeting: HandshakeV10,
    pub response: HandshakeResponse41,
    /// How each leg is carried, and the client library.
    pub legs: Legs,
    /// Packet-stream bytes each side sent after the login, already read (a client that
    /// pipelines its first command behind its auth reply): forwarded first.
    pub client_pending: Vec<u8>,
    pub upstream_pending: Vec<u8>,
}

/// Runs the connection phase over a dialled `upstream`.
pub(super) async fn handshake(
    client: Transport,
    mut upstream: TcpStream,
    s: &Settings<'_>,
    tap: &mut Observers,
) -> Result<Handshake, RelayError> {
    let mut client = client;
    // The greeting. Until the client has seen one, it can still be told anything.
    let (seq, mut greeting_payload) =
        match within(s.greeting_timeout, "server greeting", read_packet(&mut upstream, Peer::Upstream)).await {
            Ok(packet) => packet,
            Err(e @ RelayError::Client(_)) => return Err(e),
            Err(e) => {
                return s
                    .refuse(
                        &mut client,
                        0,
                        false,
                        Refusal::NoGreeting { upstream: s.upstream.clone(), reason: e.to_string() },
                    )
                    .await;
            }
        };
    if greeting_payload.first() == Some(&header::ERR) {
        if let Some(err) = ErrPacket::parse(&greeting_payload) {
            let message = String::from_utf8_lossy(greeting_payload.get(3..).unwrap_or_default()).into_owned();
            tracing::info!(code = err.code, %message, "upstream refused the connection");
        }
        send(&mut client, seq, &greeting_payload, Peer::Client).await?;
        return Ok(Handshake::Ended(Ending::RefusedByUpstream));
    }
    let mut greeting = match HandshakeV10::parse(&greeting_payload) {
        Ok(greeting) => greeting,
        Err(e) => {
            // Not understood is no reason to refuse: the client gets it as it is, and
            // bytes go both ways unread.
            tap.desync(e.kind());
            send(&mut client, seq, &greeting_payload, Peer::Client).await?;
            return Ok(Handshake::Opaque { client, upstream });
        }
    };
    let server_caps = greeting.capabilities;
    // What the client may use: the server's capabilities, compression as the server
    // offers it, and TLS — which rttscope terminates itself — when the long hop can
    // carry on what the client protects: the server offers TLS, or the config says
    // the long hop is plain (`upstream.tls.mode: disabled`) or clients must use TLS
    // (`listen.tls.mode: required`). A client that would talk plain to this server
    // directly (it offers no TLS) then talks plain to rttscope too.
    let mut offered = server_caps & !MASKED & !CLIENT_SSL;
    if let Some(tls) = s.client_tls
        && (server_caps & CLIENT_SSL != 0 || s.upstream_tls.is_none() || tls.required)
    {
        offered |= CLIENT_SSL;
    }
    greeting.set_capabilities(&mut greeting_payload, offered);
    let greeting_len = greeting_payload.len();
    send(&mut client, seq, &greeting_payload, Peer::Client).await?;

    // The client's answer: an SSLRequest first, or its handshake response — after a PROXY
    // protocol header, if a load balancer in front of rttscope sent one.
    let first = read_first_client_packet(&mut client, &mut upstream);
    let (mut seq, mut payload) = match within(s.timeout, "handshake response", first).await {
        Ok(First::Packet(seq, payload)) => (seq, payload),
        // A PROXY header rttscope cannot read went on as it was: the server judges it.
        Ok(First::Opaque) => return Ok(Handshake::Opaque { client, upstream }),
        // Too large to be a handshake: say so (the client still reads), and close.
        Err(RelayError::Decode(e @ DecodeError::HandshakeTooLarge { .. })) => {
            return s.refuse(&mut client, 2, true, Refusal::BadHandshake(e)).await;
        }
        Err(e) => return Err(e),
    };
    let mut client_tls = None;
    if is_ssl_request(&payload) {
        let Some(tls) = s.client_tls else {
            return s.refuse(&mut client, seq.wrapping_add(1), true, Refusal::TlsOff).await;
        };
        let Transport::Tcp(tcp) = client else {
            return s.refuse(&mut client, seq.wrapping_add(1), true, Refusal::TlsOff).await;
        };
        let accepted = timers::timeout(s.timeout, tls.acceptor.accept(tcp)).await;
        let stream = match accepted {
            Ok(Ok(stream)) => stream,
            // Nothing can reach a client whose TLS handshake failed: log and close.
            Ok(Err(e)) => return Ok(Handshake::Ended(Ending::Refused(Refusal::ClientTls(e.to_string())))),
            Err(_) => return Err(RelayError::Timeout("client TLS handshake", s.timeout)),
        };
        client_tls = Some(TlsInfo::of(stream.get_ref().1));
        client = Transport::ServerTls(Box::new(stream));
        (seq, payload) = match within(s.timeout, "handshake response", read_packet(&mut client, Peer::Client)).await {
            Ok(packet) => packet,
            Err(RelayError::Decode(e @ DecodeError::HandshakeTooLarge { .. })) => {
                return s.refuse(&mut client, 3, true, Refusal::BadHandshake(e)).await;
            }
            Err(e) => return Err(e),
        };
    } else if s.client_tls.is_some_and(|t| t.required) && matches!(client, Transport::Tcp(_)) {
        return s.refuse(&mut client, seq.wrapping_add(1), true, Refusal::TlsRequired).await;
    }
    let mut response = match HandshakeResponse41::parse(&payload) {
        Ok(response) => response,
        Err(e) => return s.refuse(&mut client, seq.wrapping_add(1), true, Refusal::BadHandshake(e)).await,
    };
    let client_caps = negotiated(offered, response.capabilities);

    // The long hop: TLS as upstream.tls.mode says, compression as upstream.compression.
    let use_tls = match upstream_tls(s, server_caps, client_tls.is_some()) {
        Ok(use_tls) => use_tls,
        Err(refusal) => return s.refuse(&mut client, seq.wrapping_add(1), true, refusal).await,
    };
    let client_algorithm = algorithm(client_caps, response.zstd_level);
    let upstream_algorithm = upstream_compression(s.compression, client_algorithm, server_caps, &s.upstream);
    let mut upstream_caps =
        (response.capabilities & !PER_LEG & !MASKED) | if use_tls.is_some() { CLIENT_SSL } else { 0 };
    let mut level = None;
    match upstream_algorithm {
        Some(Algorithm::Zlib) => upstream_caps |= CLIENT_COMPRESS,
        Some(Algorithm::Zstd { level: l }) => {
            upstream_caps |= CLIENT_ZSTD_COMPRESSION_ALGORITHM;
            level = Some(l);
        }
        None => {}
    }
    let client_response = response.clone();
    let mut upstream_payload = payload.clone();
    response.rewrite(&mut upstream_payload, upstream_caps, level);
    let mut upstream_seq = 1;
    let mut upstream_tls_info = None;
    let upstream = match use_tls {
        Some(tls) => {
            // A second handle on the socket, to read what the server said if the TLS handshake
            // fails: a server that refuses the client (a host blocked or not allowed, named by a
            // PROXY header) sends an ERR and closes — before the SSLRequest is even written,
            // or in answer to it.
            let witness = upstream.as_fd().try_clone_to_owned().ok().map(std::net::TcpStream::from);
            let ssl_request = HandshakeResponse41::ssl_request(&upstream_payload);
            if let Err(e) = send(&mut upstream, upstream_seq, &ssl_request, Peer::Upstream).await {
                if let Some(err) = witness.as_ref().and_then(server_refusal) {
                    return relay_refusal(&mut client, seq.wrapping_add(1), &err).await;
                }
                return Err(e);
            }
            upstream_seq += 1;
            // In TLS the client speaks first: anything the server sent already is a refusal.
            if let Some(err) = witness.as_ref().and_then(server_refusal) {
                return relay_refusal(&mut client, seq.wrapping_add(1), &err).await;
            }
            // Over a socket that keeps what the server sends until the handshake is done: an
            // ERR the server sends after the ClientHello went out is read by rustls, as a
            // broken record, and would be lost.
            let connect = tls.connector.connect(tls.server_name.clone(), UpstreamSocket::new(upstream));
            let handshake = match timers::timeout(s.timeout, connect.into_fallible()).await {
                Ok(Ok(mut stream)) => {
                    stream.get_mut().0.handshake_done();
                    upstream_tls_info = Some(TlsInfo::of(stream.get_ref().1));
                    Ok(stream)
                }
                Ok(Err((e, socket))) => {
                    // Only when the server broke the handshake off (a reset, a close, bytes that
                    // are not TLS): when rustls refused the server (a certificate, an alert),
                    // the server's answer to the aborted handshake (1043 Bad handshake) is not
                    // the news; the reason rustls gives is.
                    let server_broke_off = match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
                        None => true,
                        Some(inner) => matches!(inner, rustls::Error::InvalidMessage(_)),
                    };
                    // The server's ERR: read by rustls (kept by the socket), or still unread.
                    let err = server_broke_off
                        .then(|| err_payload(socket.seen()).or_else(|| witness.as_ref().and_then(server_refusal)))
                        .flatten();
                    if let Some(err) = err {
                        tracing::debug!(error = %e, "the server answered the TLS request with an ERR: relayed");
                        return relay_refusal(&mut client, seq.wrapping_add(1), &err).await;
                    }
                    Err(format!("TLS handshake failed: {e}"))
                }
                Err(_) => Err(format!("TLS handshake did not finish within {:?}", s.timeout)),
            };
            match handshake {
                Ok(stream) => Transport::ClientTls(Box::new(stream)),
                Err(reason) => {
                    let refusal = Refusal::UpstreamTls { upstream: s.upstream.clone(), reason };
                    return s.refuse(&mut client, seq.wrapping_add(1), true, refusal).await;
                }
            }
        }
        None => Transport::Tcp(upstream),
    };
    let mut upstream = upstream;
    match send(&mut upstream, upstream_seq, &upstream_payload, Peer::Upstream).await {
        Err(RelayError::Upstream(e)) => {
            return s.refuse(&mut client, seq.wrapping_add(1), true, s.lost_during_login(&e)).await;
        }
        sent => sent?,
    }

    // The auth exchange, followed as the client sees it.
    let identity = Identity {
        user: Arc::from(client_response.user.as_str()),
        schema: client_response.schema.as_deref().map(Arc::from),
    };
    // On an emulated link the login pays its round trips: the TCP handshake and the
    // greeting (two, paid now that the scope's user is known), TLS's (one or two), and one
    // per auth exchange (in relay_auth).
    let rtt = s.inject.map_or(Duration::ZERO, |(control, conn_id)| emulated_rtt(control, conn_id, &identity));
    let mut held = Duration::ZERO;
    if !rtt.is_zero() {
        let tls_round_trips = upstream_tls_info.as_ref().map_or(0, TlsInfo::handshake_round_trips);
        held = rtt * (2 + tls_round_trips);
        timers::sleep(held).await;
    }
    let legs = Legs {
        client_tls,
        upstream_tls: upstream_tls_info,
        client_compression: client_algorithm.map(|a| a.to_string()),
        upstream_compression: upstream_algorithm.map(|a| a.to_string()),
        client_library: client_library(&client_response),
        client_program: client_response.attribute("program_name").map(str::to_owned),
    };
    // Who connected, before the login's own record: observers file it under them.
    tap.connected(s.peer, &client_response, &legs);
    // The response as the client sent it, held for what the link charged so far.
    let now = Instant::now();
    tap.arrived(Direction::ToUpstream, micros(now.checked_sub(held).unwrap_or(now)), micros(now), 4 + payload.len());
    let mut session =
        Session::after_handshake(identity, client_caps, greeting_len, seq, payload.len(), s.capture_limit, tap);
    let mut client = Framed::new(client);
    let mut upstream = Framed::new(upstream);
    let delta = upstream_seq.wrapping_sub(seq);
    let auth = relay_auth(&mut client, &mut upstream, delta, rtt, &mut session, tap);
    let logged_in = match timers::timeout(s.timeout, auth).await {
        // The client waits for the login's answer: a reset or a close from the server
        // becomes an ERR saying so, as a stalled login does.
        Ok(Err(RelayError::Upstream(e))) => {
            let seq = session.response_seq().unwrap_or(seq.wrapping_add(1));
            return s.refuse(&mut client.io, seq, true, s.lost_during_login(&e)).await;
        }
        Ok(logged_in) => logged_in?,
        // The client still waits for the login's answer: tell it in its place.
        Err(_) => {
            let seq = session.response_seq().unwrap_or(seq.wrapping_add(1));
            let refusal = Refusal::LoginStalled { upstream: s.upstream.clone(), timeout: s.timeout };
            return s.refuse(&mut client.io, seq, true, refusal).await;
        }
    };
    if !logged_in {
        return Ok(Handshake::Ended(Ending::LoginFailed));
    }
    let (client_io, mut client_pending) = client.into_parts();
    let (upstream_io, mut upstream_pending) = upstream.into_parts();
    let mut client = Leg::new(client_io);
    let mut upstream = Leg::new(upstream_io);
    if let Some(algorithm) = client_algorithm {
        client.compress(algorithm, &std::mem::take(&mut client_pending)).map_err(RelayError::Client)?;
    }
    if let Some(algorithm) = upstream_algorithm {
        upstream.compress(algorithm, &std::mem::take(&mut upstream_pending)).map_err(RelayError::Upstream)?;
    }
    Ok(Handshake::Established(Box::new(Established {
        client,
        upstream,
        session,
        greeting,
        response: client_response,
        legs,
        client_pending,
        upstream_pending,
    })))
}

/// The emulated link's round trip for this connection, if it is in scope.
fn emulated_rtt(control: &Arc<InjectControl>, conn_id: u64, identity: &Identity) -> Duration {
    let mut binding = InjectBinding::new(control.clone(), conn_id);
    binding.models(identity).iter().map(|(_, model, _)| model.delay).sum()
}

/// The client library, as the connection attributes name it (`libmariadb 3.3.8`).
fn client_library(response: &HandshakeResponse41) -> Option<String> {
    let name = response.attribute("_client_name")?;
    Some(match response.attribute("_client_version") {
        Some(version) => format!("{name} {version}"),
        None => name.to_owned(),
    })
}

/// The TLS to use towards a server with `server_caps`, or why the login cannot go on.
fn upstream_tls<'a>(
    s: &Settings<'a>,
    server_caps: u64,
    client_used_tls: bool,
) -> Result<Option<&'a UpstreamSideTls>, Refusal> {
    let Some(tls) = s.upstream_tls else {
        // upstream.tls.mode: disabled, said explicitly (and warned about at start).
        return Ok(None);
    };
    if server_caps & CLIENT_SSL != 0 {
        return Ok(Some(tls));
    }
    if tls.mode != UpstreamTlsMode::Preferred {
        let reason = format!("the server offers no TLS and upstream.tls.mode is {}", mode_name(tls.mode));
        return Err(Refusal::UpstreamTls { upstream: s.upstream.clone(), reason });
    }
    if client_used_tls {
        return Err(Refusal::CredentialsInClear { upstream: s.upstream.clone() });
    }
    Ok(None)
}

fn mode_name(mode: UpstreamTlsMode) -> &'static str {
    match mode {
        UpstreamTlsMode::Disabled => "disabled",
        UpstreamTlsMode::Preferred => "preferred",
        UpstreamTlsMode::Required => "required",
        UpstreamTlsMode::VerifyCa => "verify-ca",
        UpstreamTlsMode::VerifyIdentity => "verify-identity",
    }
}

/// The compression a leg negotiated: zstd when both ends announced it, else zlib.
fn algorithm(caps: u64, zstd_level: Option<u8>) -> Option<Algorithm> {
    if caps & CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0 {
        // MySQL's default level when the client sent none.
        Some(Algorithm::Zstd { level: zstd_level.filter(|l| (1..=22).contains(l)).unwrap_or(3) })
    } else if caps & CLIENT_COMPRESS != 0 {
        Some(Algorithm::Zlib)
    } else {
        None
    }
}

/// Fallbacks already logged (once each, not per connection).
static FELL_BACK_FROM_ZSTD: AtomicBool = AtomicBool::new(false);
static FELL_BACK_FROM_ZLIB: AtomicBool = AtomicBool::new(false);

/// The long hop's compression: as `mode` asks, as far as the server supports it.
fn upstream_compression(
    mode: UpstreamCompression,
    client: Option<Algorithm>,
    server_caps: u64,
    upstream: &str,
) -> Option<Algorithm> {
    let wanted = match mode {
        UpstreamCompression::Mirror => client?,
        UpstreamCompression::Off => return None,
        UpstreamCompression::Zlib => Algorithm::Zlib,
        UpstreamCompression::Zstd => match client {
            Some(zstd @ Algorithm::Zstd { .. }) => zstd,
            _ => Algorithm::Zstd { level: 3 },
        },
    };
    let zstd = server_caps & CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0;
    let zlib = server_caps & CLIENT_COMPRESS != 0;
    match wanted {
        Algorithm::Zstd { .. } if zstd => Some(wanted),
        Algorithm::Zstd { .. } => {
            if !FELL_BACK_FROM_ZSTD.swap(true, Ordering::Relaxed) {
                tracing::warn!(%upstream, zlib, "upstream offers no zstd compression: the long hop uses {}", if zlib { "zlib" } else { "none" });
            }
            zlib.then_some(Algorithm::Zlib)
        }
        Algorithm::Zlib if zlib => Some(wanted),
        Algorithm::Zlib => {
            if !FELL_BACK_FROM_ZLIB.swap(true, Ordering::Relaxed) {
                tracing::warn!(%upstream, "upstream offers no compression: the long hop is uncompressed");
            }
            None
        }
    }
}

/// Relays the auth exchange until the server's OK (true) or ERR (false). Either side may
/// speak out of turn (caching_sha2's "fast auth done" is followed by the OK at once), so
/// both are read at once.
async fn relay_auth(
    client: &mut Framed,
    upstream: &mut Framed,
    delta: u8,
    rtt: Duration,
    session: &mut Session,
    tap: &mut Observers,
) -> Result<bool, RelayError> {
    let (mut client_view, mut upstream_view) = (PacketScanner::new(), PacketScanner::new());
    // On an emulated link, the server's answer reaches the client one round trip after
    // what it answers went upstream.
    let mut sent = Instant::now();
    loop {
        while let Some((seq, payload)) = upstream.take_packet(Peer::Upstream)? {
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
                return Ok(payload.first() == Some(&header::OK));
            }
        }
        while let Some((seq, payload)) = client.take_packet(Peer::Client)? {
            let packet = packet(seq, &payload);
            let now = micros(Instant::now());
            tap.arrived(Direction::ToUpstream, now, now, packet.len());
            client_view.scan(&packet, &mut session.client(tap));
            write_all(&mut upstream.io, &self::packet(seq.wrapping_add(delta), &payload), Peer::Upstream).await?;
            sent = Instant::now();
        }
        tokio::select! {
            filled = client.fill(Peer::Client) => filled?,
            filled = upstream.fill(Peer::Upstream) => filled?,
        }
    }
}

/// A stream read whole packets at a time, with what was read beyond them kept.
struct Framed {
    io: Transport,
    buf: Vec<u8>,
}

impl Framed {
    fn new(io: Transport) -> Framed {
        Framed { io, buf: Vec::with_capacity(1024) }
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

    fn into_parts(self) -> (Transport, Vec<u8>) {
        (self.io, self.buf)
    }
}

impl Settings<'_> {
    /// Why the login failed when the upstream's socket did, mid-login.
    fn lost_during_login(&self, e: &std::io::Error) -> Refusal {
        let reason = match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "end of stream".to_owned(),
            _ => e.to_string(),
        };
        Refusal::LostDuringLogin { upstream: self.upstream.clone(), reason }
    }

    /// Tells the client why it is turned away (over its TLS, if it has it), then ends.
    async fn refuse<S: AsyncWrite + Unpin>(
        &self,
        client: &mut S,
        seq: u8,
        protocol_41: bool,
        refusal: Refusal,
    ) -> Result<Handshake, RelayError> {
        // Counted before the client hears it: whoever reads the count after the ERR sees it.
        if refusal.is_upstream() {
            self.stats.upstream_connect_errors.fetch_add(1, Ordering::Relaxed);
        }
        write_all(client, &refusal.packet(seq, protocol_41), Peer::Client).await?;
        let _ = client.shutdown().await;
        Ok(Handshake::Ended(Ending::Refused(refusal)))
    }
}

/// The server's refusal `err` (an ERR payload) to the client as the answer to its handshake.
async fn relay_refusal(client: &mut Transport, seq: u8, err: &[u8]) -> Result<Handshake, RelayError> {
    send(client, seq, err, Peer::Client).await?;
    let _ = client.shutdown().await;
    Ok(Handshake::Ended(Ending::RefusedByUpstream))
}

/// An ERR packet the server sent and rttscope has not read, on a socket whose TLS handshake
/// just failed: its payload. Reads without waiting (the handle shares the socket's
/// non-blocking mode); what the server sent before it closed is still queued.
fn server_refusal(socket: &std::net::TcpStream) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut buf = [0u8; 1024];
    let n = (&*socket).read(&mut buf).ok()?;
    err_payload(buf.get(..n)?)
}

/// The payload of the ERR packet `bytes` start with, if they do.
fn err_payload(bytes: &[u8]) -> Option<Vec<u8>> {
    let (head, rest) = bytes.split_at_checked(4)?;
    let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
    let payload = rest.get(..len)?;
    (payload.first() == Some(&header::ERR) && ErrPacket::parse(payload).is_some()).then(|| payload.to_vec())
}

async fn within<T>(
    timeout: Duration,
    what: &'static str,
    step: impl Future<Output = Result<T, RelayError>>,
) -> Result<T, RelayError> {
    timers::timeout(timeout, step).await.unwrap_or(Err(RelayError::Timeout(what, timeout)))
}

/// Reads exactly one packet (header and payload, nothing beyond: TLS may start next).
async fn read_packet<S: AsyncRead + Unpin>(stream: &mut S, from: Peer) -> Result<(u8, Vec<u8>), RelayError> {
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).await.map_err(|e| RelayError::io(from, e))?;
    read_payload(stream, head, from).await
}

/// The payload of a packet whose 4-byte header is `head`.
pub(super) async fn read_payload<S: AsyncRead + Unpin>(
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

fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut packet = Vec::with_capacity(4 + payload.len());
    packet.extend_from_slice(&framing::header(payload.len(), seq));
    packet.extend_from_slice(payload);
    packet
}

async fn send<S: AsyncWrite + Unpin>(stream: &mut S, seq: u8, payload: &[u8], to: Peer) -> Result<(), RelayError> {
    write_all(stream, &packet(seq, payload), to).await
}

/// Writes and flushes (a TLS stream holds records until flushed).
pub(super) async fn write_all<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8], to: Peer) -> Result<(), RelayError> {
    stream.write_all(bytes).await.map_err(|e| RelayError::io(to, e))?;
    stream.flush().await.map_err(|e| RelayError::io(to, e))
}
