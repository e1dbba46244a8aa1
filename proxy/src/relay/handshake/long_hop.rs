//! The long hop, from rttscope to the server: its TLS (as `upstream.tls.mode` says, in the
//! modes MySQL clients know) and compression (as `upstream.compression` says, as far as the
//! server offers it), then the client's handshake response, rewritten for it. A server that
//! refuses rttscope's host answers the TLS request with an ERR and closes: that ERR reaches
//! the client as the server's own refusal, whichever point of the TLS handshake it came at.

use std::ops::ControlFlow::{Break, Continue};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};

use rttscope_config::{UpstreamCompression, UpstreamTlsMode};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use zeroize::Zeroizing;

use super::stand_in::{ClientPacket, StandIn};
use super::{Answered, Ending, Handshake, Settings, Step, send};
use crate::protocol::Peer;
use crate::protocol::auth::{SHA256_PASSWORD, auth_response, password_in_first_packet, with_auth_response};
use crate::protocol::compress::Algorithm;
use crate::protocol::constants::capability::*;
use crate::protocol::constants::header;
use crate::protocol::handshake::HandshakeResponse41;
use crate::protocol::packets::ErrPacket;
use crate::relay::error::{Refusal, RelayError};
use crate::relay::leg::{Transport, UpstreamSocket};
use crate::relay::phase_io::{read_packet, within};
use crate::relay::timers;
use crate::relay::tls::{TlsInfo, UpstreamSideTls};

/// How the long hop will be taken.
pub(super) struct LongHopPlan<'a> {
    tls: Option<&'a UpstreamSideTls>,
    pub(super) client_algorithm: Option<Algorithm>,
    pub(super) upstream_algorithm: Option<Algorithm>,
    /// The client's response as the server gets it (capabilities, compression level); wiped
    /// when the plan is dropped, after the login, as it may hold a password (see
    /// [`answer_key_request_first`]).
    upstream_payload: Zeroizing<Vec<u8>>,
}

/// The long hop, open, the client's response sent on it.
pub(super) struct LongHop {
    pub(super) io: Transport,
    /// The sequence id the response went with.
    pub(super) seq: u8,
    pub(super) tls: Option<TlsInfo>,
}

/// Opens the long hop over the dialled `upstream` as `plan` says (TLS first, if it says so)
/// and sends the client's response on it; a client the long hop fails is told why.
pub(super) async fn open(
    upstream: TcpStream,
    a: &mut Answered,
    plan: &LongHopPlan<'_>,
    s: &Settings<'_>,
) -> Result<Step<LongHop>, RelayError> {
    let (mut io, seq, tls) = match plan.tls {
        Some(tls) => match start_tls(upstream, a, plan, tls, s).await? {
            Continue((stream, info)) => (stream, 2, Some(info)),
            Break(end) => return Ok(Break(end)),
        },
        None => (Transport::Tcp(upstream), 1, None),
    };
    match send(&mut io, seq, &plan.upstream_payload, Peer::Upstream).await {
        Err(RelayError::Upstream(e)) => {
            let refusal = s.lost_during_login(&e);
            return s.refuse(&mut a.client, a.seq.wrapping_add(1), true, refusal).await.map(Break);
        }
        sent => sent?,
    }
    Ok(Continue(LongHop { io, seq, tls }))
}

/// TLS over the long hop: an SSLRequest (sequence id 1), then the TLS handshake.
async fn start_tls(
    mut upstream: TcpStream,
    a: &mut Answered,
    plan: &LongHopPlan<'_>,
    tls: &UpstreamSideTls,
    s: &Settings<'_>,
) -> Result<Step<(Transport, TlsInfo)>, RelayError> {
    let client_seq = a.seq.wrapping_add(1);
    // A second handle on the socket, to read what the server said if the TLS handshake
    // fails: a server that refuses the client (a host blocked or not allowed, named by a
    // PROXY header) sends an ERR and closes — before the SSLRequest is even written, or in
    // answer to it.
    let witness = upstream.as_fd().try_clone_to_owned().ok().map(std::net::TcpStream::from);
    let ssl_request = HandshakeResponse41::ssl_request(&plan.upstream_payload);
    if let Err(e) = send(&mut upstream, 1, &ssl_request, Peer::Upstream).await {
        if let Some(err) = witness.as_ref().and_then(server_refusal) {
            return relay_refusal(&mut a.client, client_seq, &err).await.map(Break);
        }
        return Err(e);
    }
    // In TLS the client speaks first: anything the server sent already is a refusal.
    if let Some(err) = witness.as_ref().and_then(server_refusal) {
        return relay_refusal(&mut a.client, client_seq, &err).await.map(Break);
    }
    // Over a socket that keeps what the server sends until the handshake is done: an ERR
    // the server sends after the ClientHello went out is read by rustls, as a broken
    // record, and would be lost.
    let connect = tls.connector.connect(tls.server_name.clone(), UpstreamSocket::new(upstream));
    let reason = match timers::timeout(s.timeout, connect.into_fallible()).await {
        Ok(Ok(mut stream)) => {
            stream.get_mut().0.handshake_done();
            let info = TlsInfo::of(stream.get_ref().1);
            return Ok(Continue((Transport::ClientTls(Box::new(stream)), info)));
        }
        Ok(Err((e, socket))) => {
            // Only when the server broke the handshake off (a reset, a close, bytes that
            // are not TLS): when rustls refused the server (a certificate, an alert), the
            // server's answer to the aborted handshake (1043 Bad handshake) is not the
            // news; the reason rustls gives is.
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
                return relay_refusal(&mut a.client, client_seq, &err).await.map(Break);
            }
            format!("TLS handshake failed: {e}")
        }
        Err(_) => format!("TLS handshake did not finish within {:?} (limits.handshake_timeout)", s.timeout),
    };
    let refusal = Refusal::UpstreamTls { upstream: s.upstream.clone(), reason };
    s.refuse(&mut a.client, client_seq, true, refusal).await.map(Break)
}

/// The long hop's TLS (as `upstream.tls.mode` says) and compression (as
/// `upstream.compression` says), and the client's response rewritten for it; a client the
/// long hop cannot serve is told why.
pub(super) async fn plan<'a>(a: &mut Answered, s: &Settings<'a>) -> Result<Step<LongHopPlan<'a>>, RelayError> {
    let server_caps = a.server_caps;
    let tls = match upstream_tls(s, server_caps, a.client_tls.is_some()) {
        Ok(tls) => tls,
        Err(refusal) => return s.refuse(&mut a.client, a.seq.wrapping_add(1), true, refusal).await.map(Break),
    };
    // A Unix-socket client counts its connection as secure: with sha256_password or the
    // clear-text plugin its first packet may hold the password itself, which must not cross a
    // plain long hop the operator meant to protect.
    if tls.is_none()
        && s.upstream_tls.is_some()
        && matches!(a.client, Transport::Unix(_))
        && password_in_first_packet(a.response.auth_plugin.as_deref(), &a.payload)
    {
        let refusal = Refusal::PasswordInClear { upstream: s.upstream.clone() };
        return s.refuse(&mut a.client, a.seq.wrapping_add(1), true, refusal).await.map(Break);
    }
    let client_algorithm = algorithm(a.client_caps, a.response.zstd_level);
    let upstream_algorithm = upstream_compression(s.compression, client_algorithm, server_caps, &s.upstream);
    let mut upstream_caps = (a.response.capabilities & !PER_LEG & !MASKED) | if tls.is_some() { CLIENT_SSL } else { 0 };
    let mut level = None;
    match upstream_algorithm {
        Some(Algorithm::Zlib) => upstream_caps |= CLIENT_COMPRESS,
        Some(Algorithm::Zstd { level: l }) => {
            upstream_caps |= CLIENT_ZSTD_COMPRESSION_ALGORITHM;
            level = Some(l);
        }
        None => {}
    }
    let mut upstream_payload = a.payload.clone();
    // On a copy: the session and the observers keep the response as the client sent it.
    a.response.clone().rewrite(&mut upstream_payload, upstream_caps, level);
    let upstream_payload = Zeroizing::new(upstream_payload);
    Ok(Continue(LongHopPlan { tls, client_algorithm, upstream_algorithm, upstream_payload }))
}

/// A plain client whose first packet already asks sha256_password for the server's key (its
/// auth response is the request, 0x01: the server's default plugin is sha256_password), over a
/// TLS long hop: rttscope gives it its own key before the response goes upstream, and the
/// response carries the decrypted password instead, as a client on a secure connection sends
/// it. The client's sequence ids then run two ahead.
pub(super) async fn answer_key_request_first(
    a: &mut Answered,
    plan: &mut LongHopPlan<'_>,
    s: &Settings<'_>,
) -> Result<Step<()>, RelayError> {
    let asks = plan.tls.is_some()
        && a.client_tls.is_none()
        && a.response.auth_plugin.as_deref() == Some(SHA256_PASSWORD)
        && auth_response(&a.payload) == Some(&[1][..]);
    if !asks {
        return Ok(Continue(()));
    }
    let mut stand_in = StandIn::new(s.auth_keys.clone(), &a.greeting_payload, Some(SHA256_PASSWORD));
    // The key may still be in the making (generated at start): as long as the login may take.
    let answer = match timers::timeout(s.timeout, stand_in.give_key()).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(refusal)) => return s.refuse(&mut a.client, a.seq.wrapping_add(1), true, refusal).await.map(Break),
        Err(_) => {
            let refusal = Refusal::NoRsaKey(format!("not ready within limits.handshake_timeout ({:?})", s.timeout));
            return s.refuse(&mut a.client, a.seq.wrapping_add(1), true, refusal).await.map(Break);
        }
    };
    send(&mut a.client, a.seq.wrapping_add(1), &answer, Peer::Client).await?;
    let read = read_packet(&mut a.client, Peer::Client);
    let (seq, ciphertext) =
        within(s.timeout, "the client's encrypted password", "limits.handshake_timeout", read).await?;
    let refusal = match stand_in.client_said(&ciphertext).await {
        Ok(ClientPacket::Clear(password)) => match with_auth_response(&plan.upstream_payload, &password) {
            Some(payload) => {
                plan.upstream_payload = Zeroizing::new(payload);
                a.seq = seq;
                a.stand_in = Some(stand_in);
                return Ok(Continue(()));
            }
            None => Refusal::PasswordTooLong,
        },
        Ok(_) => Refusal::PasswordNotDecrypted,
        Err(refusal) => refusal,
    };
    s.refuse(&mut a.client, seq.wrapping_add(1), true, refusal).await.map(Break)
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
