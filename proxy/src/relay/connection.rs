//! One client connection, start to end: dial upstream, run the connection phase, pump,
//! and log how it ended — once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::Shared;
use super::activity::Activity;
use super::connecting::Slot;
use super::drain::DrainWatch;
use super::error::{Refusal, RelayError};
use super::handshake::{ChangedUser, Ending, Established, Handshake, Settings, change_user, emulated_rtt, handshake};
use super::leg::Transport;
use super::pump::{Ended, Legs, Observers, PumpSettings, pump};
use super::timers;
use super::upstream::dial;
use crate::inject::InjectBinding;
use crate::link::Probe;
use crate::live::LiveConnection;
use crate::protocol::packets::err_packet;
use crate::protocol::{Observer, codes};
use crate::record::{Recorder, micros};

/// How a connection ended without an error.
#[derive(Debug)]
enum Outcome {
    Pumped(Ended),
    /// The long hop went dark (nothing acknowledged within `relay.user_timeout`); the
    /// client was told.
    UpstreamTimedOut,
    /// The connection phase ended it; the client was told.
    Ended(Ending),
    /// Relayed without being understood (an unknown greeting).
    Opaque,
}

pub(super) async fn serve(client: Transport, peer: String, conn_id: u64, shared: Arc<Shared>, shutdown: DrainWatch) {
    let accepted = tokio::time::Instant::now();
    // The span is the parent of this connection's few log lines, never
    // entered: entering it on every poll would cost on the forwarding path.
    let span =
        tracing::info_span!("conn", conn.id = conn_id, client.addr = %peer, upstream.addr = tracing::field::Empty);
    let log = &span;
    let live = Arc::new(LiveConnection::new(conn_id, peer.clone(), micros(accepted)));
    let _listed = shared.live.register(live.clone());
    let recorder = shared
        .events
        .as_ref()
        .map(|events| Recorder::new(conn_id, events.clone(), live.clone(), accepted, shared.recorder));
    let probe = Probe::new(conn_id, live.clone(), shared.link_events.clone(), accepted, shared.probe);
    let mut observers = Observers { activity: Activity::new(live, shared.stats.clone(), accepted), probe, recorder };
    let result = run(client, &peer, conn_id, &shared, &shutdown, log, &mut observers).await;
    if let Some(recorder) = &mut observers.recorder {
        recorder.closed();
    }
    let elapsed_ms = accepted.elapsed().as_millis() as u64;
    match result {
        Ok(Outcome::Pumped(Ended::UpstreamClosed { mid_response: true })) => {
            shared.stats.upstream_closed_mid_response.fetch_add(1, Ordering::Relaxed);
            tracing::info!(parent: log, elapsed_ms, "the upstream closed the connection in the middle of a response");
        }
        // Logged where it was noticed, with the statement it cut off.
        Ok(Outcome::UpstreamTimedOut) => {}
        Ok(Outcome::Pumped(ended)) => tracing::debug!(parent: log, ?ended, elapsed_ms, "connection closed"),
        Ok(Outcome::Ended(Ending::Refused(refusal))) => {
            if shared.refusals.log_in_full(&refusal, || format!("{peer}: {refusal}")) {
                tracing::warn!(parent: log, code = refusal.code(), elapsed_ms, "refused the client: {refusal}");
            }
        }
        Ok(outcome) => tracing::debug!(parent: log, ?outcome, elapsed_ms, "connection closed"),
        Err(e) if e.is_hangup() => tracing::debug!(parent: log, error = %e, elapsed_ms, "connection closed by peer"),
        Err(e) => {
            shared.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(parent: log, error = %e, %peer, elapsed_ms, "closing connection");
        }
    }
}

async fn run(
    mut client: Transport,
    peer: &str,
    conn_id: u64,
    shared: &Shared,
    shutdown: &DrainWatch,
    log: &tracing::Span,
    tap: &mut Observers,
) -> Result<Outcome, RelayError> {
    let config = &shared.config;
    if let Transport::Tcp(tcp) = &client {
        // Best effort: a client socket that already died fails at the first write anyway.
        let _ = tcp.set_nodelay(true);
        let _ = super::upstream::keep_alive(tcp, &config.relay);
    }
    // The slot is held until the connection phase ends: logged in, refused, or relayed unread.
    let (slot, upstream, upstream_addr) = match reach_upstream(shared).await {
        Ok(reached) => reached,
        Err(refusal) => {
            // Before the greeting: no SQL state marker, as servers send it.
            client.write_all(&refusal.packet(0, false)).await.map_err(RelayError::Client)?;
            let _ = client.shutdown().await;
            return Ok(Outcome::Ended(Ending::Refused(refusal)));
        }
    };
    log.record("upstream.addr", tracing::field::display(upstream_addr));
    let settings = Settings {
        // Clients on a Unix socket are not offered TLS: they already treat it as secure.
        client_tls: shared.client_tls.as_ref().filter(|_| !matches!(client, Transport::Unix(_))),
        upstream_tls: shared.upstream_tls.as_ref(),
        auth_keys: &shared.auth_keys,
        compression: config.upstream.compression,
        greeting_timeout: config.limits.connect_timeout.0,
        first_byte_timeout: config.limits.first_byte_limit(),
        timeout: config.limits.handshake_timeout.0,
        gate: Some(&shared.connecting),
        capture_limit: config.record.max_sql_bytes.0 as usize,
        upstream: config.upstream.address.to_string(),
        peer,
        stats: &shared.stats,
        inject: shared.inject.as_ref().map(|control| (control, conn_id)),
        kills: &shared.kills,
    };
    let handshake = handshake(client, upstream, &settings, tap).await;
    drop(slot);
    let established = match handshake? {
        Handshake::Established(established) => established,
        Handshake::Ended(ending) => return Ok(Outcome::Ended(ending)),
        Handshake::Opaque { mut client, mut upstream } => {
            tokio::io::copy_bidirectional(&mut client, &mut upstream).await.map_err(RelayError::Client)?;
            return Ok(Outcome::Opaque);
        }
    };
    let established = *established;
    note_login(&established, shared, log, tap);
    // Listed until the legs (declared after it, dropped before it) are closed.
    let server_id = established.greeting.connection_id;
    let _listed = established.listed;
    let mut session = established.session;
    let change_user_stand_in = established.change_user;
    let mut legs = Legs {
        client: established.client,
        upstream: established.upstream,
        client_pending: established.client_pending,
        upstream_pending: established.upstream_pending,
    };
    let settings = PumpSettings {
        buffer_size: config.relay.buffer_size.0 as usize,
        idle_timeout: Some(config.limits.idle_timeout.0).filter(|d| !d.is_zero()),
        query_timeout: Some(config.limits.query_timeout.0).filter(|d| !d.is_zero()),
        budget: shared.buffers.clone(),
        local: shared.local.clone().map(|answers| (answers, conn_id)),
        kills: Some((shared.kills.clone(), server_id)),
        change_user_stand_in: change_user_stand_in.is_some(),
    };
    let pumped = loop {
        let inject = shared.inject.as_ref().map(|control| InjectBinding::new(control.clone(), conn_id));
        let pumped = pump(&mut legs, &mut session, tap, &settings, inject, shutdown).await;
        // A COM_CHANGE_USER whose exchange rttscope's key stands in for: relayed, then on.
        let (Ok(Ended::ChangeUser), Some(stand_in)) = (&pumped, &change_user_stand_in) else { break pumped };
        let rtt = shared.inject.as_ref().map_or(Duration::ZERO, |c| emulated_rtt(c, conn_id, session.identity()));
        let timeout = config.limits.handshake_timeout.0;
        if let ChangedUser::Refused(refusal) = change_user(&mut legs, &mut session, tap, stand_in, rtt, timeout).await?
        {
            return Ok(Outcome::Ended(Ending::Refused(refusal)));
        }
    };
    tell_how_it_ended(pumped, &mut legs, &session, tap, config, log).await
}

/// Logs the login, counts it, and tells the observers who logged in over which legs.
fn note_login(established: &Established, shared: &Shared, log: &tracing::Span, tap: &mut Observers) {
    tracing::debug!(
        parent: log,
        user = %established.response.user,
        schema = established.response.schema.as_deref().unwrap_or(""),
        server = %established.greeting.server_version,
        client.tls = established.legs.client_tls.as_ref().map(|t| t.version.as_str()).unwrap_or("none"),
        upstream.tls = established.legs.upstream_tls.as_ref().map(|t| t.version.as_str()).unwrap_or("none"),
        client.compression = ?established.client.compression(),
        upstream.compression = ?established.upstream.compression(),
        "logged in"
    );
    shared.stats.saw_server(&established.greeting.server_version);
    if let Some(recorder) = &mut tap.recorder {
        recorder.greeted(&established.greeting.server_version);
    }
    let legs = &established.legs;
    shared.stats.logged_in([
        (
            legs.client_tls.is_some(),
            matches!(established.client.transport(), Transport::Unix(_)),
            established.client.compression(),
        ),
        (legs.upstream_tls.is_some(), false, established.upstream.compression()),
    ]);
    tap.activity.set_legs(legs);
    Observer::identity(&mut tap.activity, established.session.identity());
}

/// What the pump's end means for the client: a long hop gone dark or a command past
/// `limits.query_timeout` is told why in place of the answer it waits for; an idle
/// connection past `limits.idle_timeout` is logged.
async fn tell_how_it_ended(
    pumped: Result<Ended, RelayError>,
    legs: &mut Legs,
    session: &crate::protocol::Session,
    tap: &mut Observers,
    config: &rttscope_config::Config,
    log: &tracing::Span,
) -> Result<Outcome, RelayError> {
    let ended = match pumped {
        // TCP_USER_TIMEOUT (or keepalive) declared the long hop dead: a blackholed path,
        // not a peer that hung up and not a protocol error. The client would otherwise see
        // a bare close; it is told why in place of the answer it waits for.
        Err(RelayError::Upstream(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
            let statement = tap.activity.statement_in_flight();
            tracing::info!(
                parent: log,
                user_timeout = ?config.relay.user_timeout.0,
                %statement,
                "the upstream acknowledged nothing within relay.user_timeout: told the client, closing"
            );
            let message = format!(
                "rttscope: upstream {} acknowledged nothing within relay.user_timeout ({}): connection lost",
                config.upstream.address,
                humantime::format_duration(config.relay.user_timeout.0)
            );
            tell_client(legs, session, codes::NET_READ_INTERRUPTED, "08S01", &message, config).await;
            return Ok(Outcome::UpstreamTimedOut);
        }
        ended => ended?,
    };
    match ended {
        Ended::IdleTimeout => tracing::info!(
            parent: log,
            idle_timeout = ?config.limits.idle_timeout.0,
            "closing a connection idle for limits.idle_timeout"
        ),
        Ended::QueryTimeout => {
            let statement = tap.activity.statement_in_flight();
            tracing::info!(
                parent: log,
                query_timeout = ?config.limits.query_timeout.0,
                %statement,
                "a command waited limits.query_timeout for its response: told the client, closing"
            );
            let message = format!(
                "rttscope: no response within limits.query_timeout ({})",
                humantime::format_duration(config.limits.query_timeout.0)
            );
            tell_client(legs, session, codes::STATEMENT_TIMEOUT, "70100", &message, config).await;
        }
        _ => {}
    }
    Ok(Outcome::Pumped(ended))
}

/// A slot of the connection phase (`limits.max_connecting`), then the upstream dialled; or
/// why the client is turned away, counted before the client hears it (and logged once it
/// has: rttscope's own fd limit included, the refusal saying to raise `ulimit -n`).
async fn reach_upstream(shared: &Shared) -> Result<(Slot, TcpStream, SocketAddr), Refusal> {
    let limits = &shared.config.limits;
    let Some(slot) = shared.connecting.enter(limits.connect_timeout.0).await else {
        shared.stats.connections_rejected.fetch_add(1, Ordering::Relaxed);
        return Err(Refusal::TooManyConnecting { max: limits.connecting_slots() });
    };
    match dial(&shared.config.upstream.address, &shared.config.relay, limits.connect_timeout.0).await {
        Ok((upstream, addr)) => Ok((slot, upstream, addr)),
        Err(e) => {
            let refusal = Refusal::from(e);
            if refusal.is_upstream() {
                shared.stats.upstream_connect_errors.fetch_add(1, Ordering::Relaxed);
            }
            Err(refusal)
        }
    }
}

/// The response the client waits for: an ERR in its place, with the sequence id the
/// server's next packet would have had. Best effort, bounded by `handshake_timeout`: a
/// client that does not read is closed anyway.
async fn tell_client(
    legs: &mut Legs,
    session: &crate::protocol::Session,
    code: u16,
    state: &str,
    message: &str,
    config: &rttscope_config::Config,
) {
    let seq = session.response_seq().unwrap_or(1);
    let packet = err_packet(seq, code, state, message, true);
    let _ = timers::timeout(config.limits.handshake_timeout.0, async {
        legs.client.write_all(&packet).await?;
        legs.client.flush().await
    })
    .await;
}
