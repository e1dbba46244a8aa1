//! The connection phase, from the server's greeting to its OK, in four steps:
//!
//! 1. `relay_greeting`: the server's greeting goes to the client with the capabilities
//!    rttscope can carry (TLS of its own, compression as the server offers it);
//! 2. `read_client_response`: the client answers within `limits.first_byte_timeout` (an
//!    SSLRequest, then TLS with rttscope, or its handshake response, after a PROXY header
//!    if a load balancer sent one); a client that keeps the phase waiting while others wait
//!    for its slot gives the slot up (`connecting`);
//! 3. `long_hop`: TLS and compression towards the server as `upstream.tls` and
//!    `upstream.compression` decide, and the response rewritten for that leg;
//! 4. `log_in`: the auth exchange (`auth`) relayed between legs that may differ — each with
//!    its own TLS, compression and so sequence ids — never re-implemented (any plugin, auth
//!    switch, caching_sha2's full auth), save for one step: a plain client's request for the
//!    server's RSA key over a TLS long hop is answered with rttscope's (`stand_in`). The
//!    session state machine follows the exchange as the client sees it, so the login is
//!    recorded like any command.
//!
//! Every packet here is small and read whole (at most [`MAX_HANDSHAKE_LEN`](crate::protocol::handshake::MAX_HANDSHAKE_LEN)); every step
//! has a deadline; every refusal reaches the client as an ERR packet.

mod auth;
mod change_user;
mod long_hop;
mod settings;
mod stand_in;

use std::ops::ControlFlow::{self, Break, Continue};
use std::sync::Arc;
use std::time::Duration;

use rttscope_config::UpstreamCompression;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::RelayStats;
use super::auth_key::AuthKeys;
use super::connecting::Gate;
use super::error::{Refusal, RelayError};
use super::kills::{Kills, Listed};
use super::leg::{Leg, Transport};
use super::phase_io::{read_packet, send, within};
use super::proxy_header::{First, read_first_client_packet};
use super::pump::Observers;
use super::timers;
use super::tls::{ClientSideTls, TlsInfo, UpstreamSideTls};
use crate::inject::{InjectBinding, InjectControl};
use crate::live::Legs;
use crate::protocol::constants::capability::*;
use crate::protocol::constants::header;
use crate::protocol::handshake::{HandshakeResponse41, HandshakeV10, is_ssl_request, negotiated};
use crate::protocol::packets::ErrPacket;
use crate::protocol::{DecodeError, Direction, Identity, Observer, Peer, Session};
use crate::record::{Tap, micros};
use auth::{AuthEnd, Framed, relay_auth};
use long_hop::{LongHop, LongHopPlan};
use stand_in::{NoClearOnTheLongHop, StandIn, Watch};

pub(super) use change_user::{ChangeUserStandIn, ChangedUser, change_user};

/// What the connection phase needs to know.
pub(super) struct Settings<'a> {
    /// TLS towards clients, unless `listen.tls.mode: off` (or the client came over a Unix
    /// socket, which clients already treat as secure).
    pub client_tls: Option<&'a ClientSideTls>,
    /// TLS towards the server, unless `upstream.tls.mode: disabled`.
    pub upstream_tls: Option<&'a UpstreamSideTls>,
    /// The RSA key a plain client gets for its password when the long hop is TLS.
    pub auth_keys: &'a AuthKeys,
    pub compression: UpstreamCompression,
    /// How long the server may take to greet once dialled (`limits.connect_timeout`: a
    /// server that accepts and says nothing is as unreachable as one that does not answer).
    pub greeting_timeout: Duration,
    /// How long the client may take to answer the greeting (`limits.first_byte_timeout`).
    pub first_byte_timeout: Duration,
    /// Deadline of each later step (`limits.handshake_timeout`).
    pub timeout: Duration,
    /// The connection phase's slots (`limits.max_connecting`): while newcomers wait for
    /// one, a client that keeps this connection waiting gives its slot up.
    pub gate: Option<&'a Gate>,
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
    /// Where connections are listed by the server's id for them, for a KILL's answer to
    /// wait on ([`kills`](super::kills)).
    pub kills: &'a Arc<Kills>,
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
    /// For a plain client over a TLS long hop: what rttscope's key
    /// needs to stand in for the server's in a `COM_CHANGE_USER`, as it did at login.
    pub change_user: Option<ChangeUserStandIn>,
    /// Listed under the server's id since the greeting: keep it until the client socket is
    /// closed.
    pub listed: Listed,
}

/// A step of the connection phase: on to the next one, or the end of the phase (the
/// client told, or the bytes relayed unread from here).
type Step<T> = ControlFlow<Handshake, T>;

/// A leg as the pump takes it, and what was read on it beyond the login.
type LegAndPending = (Leg, Vec<u8>);

/// The value of a step that went on; the end of the phase is returned as it is.
macro_rules! step {
    ($step:expr) => {
        match $step? {
            ControlFlow::Continue(value) => value,
            ControlFlow::Break(end) => return Ok(end),
        }
    };
}

/// Runs the connection phase over a dialled `upstream`: the greeting to the client, the
/// client's answer (after TLS, if it asks), the long hop (its own TLS and compression),
/// then the login, relayed until the server's OK or ERR.
pub(super) async fn handshake(
    client: Transport,
    upstream: TcpStream,
    s: &Settings<'_>,
    tap: &mut Observers,
) -> Result<Handshake, RelayError> {
    let greeted = step!(relay_greeting(client, upstream, s, tap).await);
    let (mut answered, upstream) = step!(read_client_response(greeted, s).await);
    let mut plan = step!(long_hop::plan(&mut answered, s).await);
    step!(long_hop::answer_key_request_first(&mut answered, &mut plan, s).await);
    let upstream = step!(long_hop::open(upstream, &mut answered, &plan, s).await);
    log_in(answered, plan, upstream, s, tap).await
}

/// The greeting went to the client.
struct Greeted {
    client: Transport,
    upstream: TcpStream,
    greeting: HandshakeV10,
    /// Its length, for the session's byte counts.
    greeting_len: usize,
    /// Its payload as the server sent it (the scramble the auth exchange uses).
    greeting_payload: Vec<u8>,
    /// The server's capabilities, as it greeted (the greeting's own are the offered ones).
    server_caps: u64,
    /// The capabilities the client was offered.
    offered: u64,
    /// When the client had it: its silence counts from here.
    at: Instant,
    listed: Listed,
}

/// The client's handshake response, read (over the client's TLS, if it asked for it).
struct Answered {
    client: Transport,
    greeting: HandshakeV10,
    greeting_len: usize,
    greeting_payload: Vec<u8>,
    server_caps: u64,
    client_tls: Option<TlsInfo>,
    /// Its sequence id and payload, as the client sent them.
    seq: u8,
    payload: Vec<u8>,
    response: HandshakeResponse41,
    /// What the client and rttscope agreed on.
    client_caps: u64,
    /// The stand-in that already gave the client rttscope's key (in answer to its first
    /// packet), for the rest of the login.
    stand_in: Option<StandIn>,
    listed: Listed,
}

/// Reads the server's greeting and passes it to the client with the capabilities rttscope
/// can carry. An ERR instead of a greeting goes to the client as the server's refusal; a
/// greeting rttscope does not understand goes as it is, and the phase ends unread.
async fn relay_greeting(
    mut client: Transport,
    mut upstream: TcpStream,
    s: &Settings<'_>,
    tap: &mut Observers,
) -> Result<Step<Greeted>, RelayError> {
    // Until the client has seen a greeting, it can still be told anything.
    let read = within(
        s.greeting_timeout,
        "server greeting",
        "limits.connect_timeout",
        read_packet(&mut upstream, Peer::Upstream),
    );
    let (seq, mut payload) = match read.await {
        Ok(packet) => packet,
        Err(e @ RelayError::Client(_)) => return Err(e),
        Err(e) => {
            let refusal = Refusal::NoGreeting { upstream: s.upstream.clone(), reason: e.to_string() };
            return s.refuse(&mut client, 0, false, refusal).await.map(Break);
        }
    };
    if payload.first() == Some(&header::ERR) {
        if let Some(err) = ErrPacket::parse(&payload) {
            let message = String::from_utf8_lossy(payload.get(3..).unwrap_or_default()).into_owned();
            tracing::info!(code = err.code, %message, "upstream refused the connection");
        }
        send(&mut client, seq, &payload, Peer::Client).await?;
        return Ok(Break(Handshake::Ended(Ending::RefusedByUpstream)));
    }
    let mut greeting = match HandshakeV10::parse(&payload) {
        Ok(greeting) => greeting,
        Err(e) => {
            // Not understood is no reason to refuse: the client gets it as it is, and
            // bytes go both ways unread.
            tap.desync(e.kind());
            send(&mut client, seq, &payload, Peer::Client).await?;
            return Ok(Break(Handshake::Opaque { client, upstream }));
        }
    };
    let server_caps = greeting.capabilities;
    let offered = offered_to_client(s, server_caps);
    let greeting_payload = payload.clone();
    greeting.set_capabilities(&mut payload, offered);
    // Listed before the client can know the id: a KILL from another connection may name
    // this one as soon as the greeting is out, and the client may take the login's OK as
    // soon as it is sent.
    let listed = s.kills.list(greeting.connection_id);
    send(&mut client, seq, &payload, Peer::Client).await?;
    let greeting_len = payload.len();
    let at = Instant::now();
    let greeted =
        Greeted { client, upstream, greeting, greeting_len, greeting_payload, server_caps, offered, at, listed };
    Ok(Continue(greeted))
}

/// What the client may use: the server's capabilities, compression as the server offers
/// it, and TLS — which rttscope terminates itself — when the long hop can carry on what the
/// client protects: the server offers TLS, or the config says the long hop is plain
/// (`upstream.tls.mode: disabled`) or clients must use TLS (`listen.tls.mode: required`). A
/// client that would talk plain to this server directly (it offers no TLS) then talks plain
/// to rttscope too.
fn offered_to_client(s: &Settings<'_>, server_caps: u64) -> u64 {
    let mut offered = server_caps & !MASKED & !CLIENT_SSL;
    if let Some(tls) = s.client_tls
        && (server_caps & CLIENT_SSL != 0 || s.upstream_tls.is_none() || tls.required)
    {
        offered |= CLIENT_SSL;
    }
    offered
}

/// The client's answer: an SSLRequest first (then TLS, then its handshake response), or its
/// handshake response — after a PROXY protocol header, if a load balancer in front of
/// rttscope sent one. A client that keeps rttscope waiting past `first_byte_timeout` (or
/// past the contended grace while others wait for its slot) is told and closed.
async fn read_client_response(greeted: Greeted, s: &Settings<'_>) -> Result<Step<(Answered, TcpStream)>, RelayError> {
    // `listed` first: dropped last, after the client socket, on every way out.
    let Greeted {
        listed,
        mut client,
        mut upstream,
        greeting,
        greeting_len,
        greeting_payload,
        server_caps,
        offered,
        at,
    } = greeted;
    let first = read_first_client_packet(&mut client, &mut upstream);
    let waited = s.wait_for_client(
        "the client's answer to the greeting",
        at,
        s.first_byte_timeout,
        "limits.first_byte_timeout",
        first,
    );
    let (mut seq, mut payload) = match waited.await {
        Ok(Ok(First::Packet(seq, payload))) => (seq, payload),
        // A PROXY header rttscope cannot read went on as it was: the server judges it.
        Ok(Ok(First::Opaque)) => return Ok(Break(Handshake::Opaque { client, upstream })),
        // Too large to be a handshake: say so (the client still reads), and close.
        Ok(Err(RelayError::Decode(e @ DecodeError::HandshakeTooLarge { .. }))) => {
            return s.refuse(&mut client, 2, true, Refusal::BadHandshake(e)).await.map(Break);
        }
        Ok(Err(e)) => return Err(e),
        Err(silent) => return s.refuse(&mut client, 2, true, silent).await.map(Break),
    };
    let mut client_tls = None;
    if is_ssl_request(&payload) {
        (client, client_tls) = match accept_client_tls(client, seq, s).await? {
            Continue((stream, info)) => (stream, Some(info)),
            Break(end) => return Ok(Break(end)),
        };
        let read = s.wait_for_client(
            "the handshake response",
            Instant::now(),
            s.timeout,
            "limits.handshake_timeout",
            read_packet(&mut client, Peer::Client),
        );
        (seq, payload) = match read.await {
            Ok(Ok(packet)) => packet,
            Ok(Err(RelayError::Decode(e @ DecodeError::HandshakeTooLarge { .. }))) => {
                return s.refuse(&mut client, 3, true, Refusal::BadHandshake(e)).await.map(Break);
            }
            // Nothing can reach it: said in the log, with the CA it may want.
            Ok(Err(e)) if e.is_hangup() && matches!(e, RelayError::Client(_)) => {
                let why = s.client_tls.map(ClientSideTls::explain_hangup_after_tls).unwrap_or_default();
                return Ok(Break(Handshake::Ended(Ending::Refused(Refusal::HungUpAfterTls(why)))));
            }
            Ok(Err(e)) => return Err(e),
            // In place of the server's answer to the response that did not come.
            Err(silent) => return s.refuse(&mut client, seq.wrapping_add(2), true, silent).await.map(Break),
        };
    } else if s.client_tls.is_some_and(|t| t.required) && matches!(client, Transport::Tcp(_)) {
        return s.refuse(&mut client, seq.wrapping_add(1), true, Refusal::TlsRequired).await.map(Break);
    }
    let response = match HandshakeResponse41::parse(&payload) {
        Ok(response) => response,
        Err(e) => return s.refuse(&mut client, seq.wrapping_add(1), true, Refusal::BadHandshake(e)).await.map(Break),
    };
    let client_caps = negotiated(offered, response.capabilities);
    let answered = Answered {
        client,
        greeting,
        greeting_len,
        greeting_payload,
        server_caps,
        client_tls,
        seq,
        payload,
        response,
        client_caps,
        stand_in: None,
        listed,
    };
    Ok(Continue((answered, upstream)))
}

/// TLS with a client that sent an SSLRequest (sequence id `seq`): its stream and what it
/// negotiated. A client whose TLS handshake failed cannot be told anything: logged, closed.
async fn accept_client_tls(
    mut client: Transport,
    seq: u8,
    s: &Settings<'_>,
) -> Result<Step<(Transport, TlsInfo)>, RelayError> {
    let Some(tls) = s.client_tls else {
        return s.refuse(&mut client, seq.wrapping_add(1), true, Refusal::TlsOff).await.map(Break);
    };
    let Transport::Tcp(tcp) = client else {
        return s.refuse(&mut client, seq.wrapping_add(1), true, Refusal::TlsOff).await.map(Break);
    };
    let accept =
        s.wait_for_client("the client's TLS handshake", Instant::now(), s.timeout, "limits.handshake_timeout", async {
            tls.acceptor.accept(tcp).await.map_err(RelayError::Client)
        });
    match accept.await {
        Ok(Ok(stream)) => {
            let info = TlsInfo::of(stream.get_ref().1);
            Ok(Continue((Transport::ServerTls(Box::new(stream)), info)))
        }
        Ok(Err(RelayError::Client(e))) => {
            Ok(Break(Handshake::Ended(Ending::Refused(Refusal::ClientTls(tls.explain_failure(&e))))))
        }
        Ok(Err(e)) => Err(e),
        Err(silent) => Ok(Break(Handshake::Ended(Ending::Refused(silent)))),
    }
}

/// The login, relayed until the server's OK (the pump takes over) or ERR (relayed, the
/// phase ends). The login pays the emulated link's round trips, as commands do.
async fn log_in(
    a: Answered,
    plan: LongHopPlan<'_>,
    upstream: LongHop,
    s: &Settings<'_>,
    tap: &mut Observers,
) -> Result<Handshake, RelayError> {
    let identity =
        Identity { user: Arc::from(a.response.user.as_str()), schema: a.response.schema.as_deref().map(Arc::from) };
    // On an emulated link the login pays its round trips: the TCP handshake and the
    // greeting (two, paid now that the scope's user is known), TLS's (one or two), and one
    // per auth exchange (in relay_auth).
    let rtt = s.inject.map_or(Duration::ZERO, |(control, conn_id)| emulated_rtt(control, conn_id, &identity));
    let mut held = Duration::ZERO;
    if !rtt.is_zero() {
        let tls_round_trips = upstream.tls.as_ref().map_or(0, TlsInfo::handshake_round_trips);
        held = rtt * (2 + tls_round_trips);
        timers::sleep(held).await;
    }
    let legs = Legs {
        client_tls: a.client_tls,
        upstream_tls: upstream.tls,
        client_compression: plan.client_algorithm.map(|a| a.to_string()),
        upstream_compression: plan.upstream_algorithm.map(|a| a.to_string()),
        client_library: client_library(&a.response),
        client_program: a.response.attribute("program_name").map(str::to_owned),
    };
    // Who connected, before the login's own record: observers file it under them.
    tap.connected(s.peer, &a.response, &legs);
    // The response as the client sent it, held for what the link charged so far.
    let now = Instant::now();
    tap.arrived(Direction::ToUpstream, micros(now.checked_sub(held).unwrap_or(now)), micros(now), 4 + a.payload.len());
    let mut session =
        Session::after_handshake(identity, a.client_caps, a.greeting_len, a.seq, a.payload.len(), s.capture_limit, tap);
    let unix_client = matches!(a.client, Transport::Unix(_));
    let mut client = Framed::new(a.client);
    let mut upstream_io = Framed::new(upstream.io);
    let delta = upstream.seq.wrapping_sub(a.seq);
    let watch = match a.stand_in {
        Some(stand_in) => Some(Watch::StandIn(stand_in)),
        None => watch(s, &legs, unix_client, &a.greeting_payload, a.response.auth_plugin.as_deref()),
    };
    let auth = relay_auth(&mut client, &mut upstream_io, delta, rtt, watch, &mut session, tap);
    let logged_in = match timers::timeout(s.timeout, auth).await {
        // The client waits for the login's answer: a reset or a close from the server
        // becomes an ERR saying so, as a stalled login does.
        Ok(Err(RelayError::Upstream(e))) => {
            let seq = session.response_seq().unwrap_or(a.seq.wrapping_add(1));
            return s.refuse(&mut client.io, seq, true, s.lost_during_login(&e)).await;
        }
        Ok(Ok(AuthEnd::LoggedIn)) => true,
        Ok(Ok(AuthEnd::Failed)) => false,
        Ok(Ok(AuthEnd::Refused { seq, refusal })) => {
            tracing::info!(user = %a.response.user, "login refused: {refusal}");
            return s.refuse(&mut client.io, seq, true, refusal).await;
        }
        Ok(Err(e)) => return Err(e),
        // The client still waits for the login's answer: tell it in its place.
        Err(_) => {
            let seq = session.response_seq().unwrap_or(a.seq.wrapping_add(1));
            let refusal = Refusal::LoginStalled { upstream: s.upstream.clone(), timeout: s.timeout };
            return s.refuse(&mut client.io, seq, true, refusal).await;
        }
    };
    if !logged_in {
        return Ok(Handshake::Ended(Ending::LoginFailed));
    }
    // Compressed legs or not: `change_user` marks its command for a compressed server.
    let stands_in = legs.upstream_tls.is_some() && legs.client_tls.is_none() && !unix_client;
    let change_user =
        stands_in.then(|| ChangeUserStandIn::new(s.auth_keys.clone(), &a.greeting_payload, s.upstream.clone()));
    let ((client, client_pending), (upstream, upstream_pending)) = compressed_legs(client, upstream_io, &plan)?;
    Ok(Handshake::Established(Box::new(Established {
        client,
        upstream,
        session,
        greeting: a.greeting,
        response: a.response,
        legs,
        client_pending,
        upstream_pending,
        change_user,
        listed: a.listed,
    })))
}

/// What the auth exchange needs beyond relaying: a plain client over a TLS long hop gets
/// rttscope's key in place of the server's; a client whose password would cross a plain long
/// hop in clear is refused (unless `upstream.tls.mode: disabled` allows it).
fn watch(s: &Settings<'_>, legs: &Legs, unix_client: bool, greeting: &[u8], plugin: Option<&str>) -> Option<Watch> {
    match (legs.upstream_tls.is_some(), legs.client_tls.is_some()) {
        (true, false) => {
            // The key is made the first time a plain client logs in over a TLS long hop (some
            // 280 million instructions, once): not on hosts that never see one.
            s.auth_keys.warm_up();
            Some(Watch::StandIn(StandIn::new(s.auth_keys.clone(), greeting, plugin)))
        }
        (false, false) if s.upstream_tls.is_some() => {
            Some(Watch::NoClear(NoClearOnTheLongHop::new(plugin, &s.upstream, unix_client)))
        }
        _ => None,
    }
}

/// Both legs as the pump takes them, each compressed as negotiated, with what was read
/// beyond the login (compressed already, if the leg is).
fn compressed_legs(
    client: Framed,
    upstream: Framed,
    plan: &LongHopPlan<'_>,
) -> Result<(LegAndPending, LegAndPending), RelayError> {
    let (client_io, mut client_pending) = client.into_parts();
    let (upstream_io, mut upstream_pending) = upstream.into_parts();
    let mut client = Leg::new(client_io);
    let mut upstream = Leg::new(upstream_io);
    if let Some(algorithm) = plan.client_algorithm {
        client.compress(algorithm, &std::mem::take(&mut client_pending)).map_err(RelayError::Client)?;
    }
    if let Some(algorithm) = plan.upstream_algorithm {
        upstream.compress(algorithm, &std::mem::take(&mut upstream_pending)).map_err(RelayError::Upstream)?;
    }
    Ok(((client, client_pending), (upstream, upstream_pending)))
}

/// The emulated link's round trip for this connection, if it is in scope.
pub(super) fn emulated_rtt(control: &Arc<InjectControl>, conn_id: u64, identity: &Identity) -> Duration {
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
