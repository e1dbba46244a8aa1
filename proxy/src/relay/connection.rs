//! One client connection, start to end: dial upstream, relay the handshake,
//! pump, and log how it ended — once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::drain::DrainWatch;
use super::error::RelayError;
use super::handshake::{relay_greeting, relay_response, Greeting};
use super::pump::{pump, Ended, InjectBinding, NoTap, PumpSettings, Tap};
use super::upstream::dial;
use super::Shared;
use crate::protocol::codes;
use crate::protocol::packets::err_packet;
use crate::record::Recorder;


/// How a connection ended without an error.
#[derive(Debug)]
enum Outcome {
    Pumped(Ended),
    /// The client got an ERR packet saying the upstream is unreachable.
    UpstreamUnreachable,
    /// The server answered with an ERR instead of a greeting, passed on.
    RefusedByUpstream,
}

pub(super) async fn serve(mut client: TcpStream, peer: SocketAddr, conn_id: u64, shared: Arc<Shared>, shutdown: DrainWatch) {
    let accepted = tokio::time::Instant::now();
    // The span is the parent of this connection's few log lines, never
    // entered: entering it on every poll would cost on the forwarding path.
    let span = tracing::info_span!("conn", conn.id = conn_id, client.addr = %peer, upstream.addr = tracing::field::Empty);
    let log = &span;
    let result = match (&shared.events, shared.config.record.enabled) {
        (Some(events), true) => {
            let mut recorder = Recorder::new(conn_id, events.clone(), Arc::default(), accepted, shared.recorder);
            let result = run(&mut client, peer, conn_id, &shared, &shutdown, log, &mut recorder).await;
            recorder.closed();
            result
        }
        _ => run(&mut client, peer, conn_id, &shared, &shutdown, log, &mut NoTap).await,
    };
    let elapsed_ms = accepted.elapsed().as_millis() as u64;
    match result {
        Ok(Outcome::Pumped(ended)) => tracing::debug!(parent: log, ?ended, elapsed_ms, "connection closed"),
        Ok(outcome) => tracing::debug!(parent: log, ?outcome, elapsed_ms, "connection closed"),
        Err(e) if e.is_hangup() => tracing::debug!(parent: log, error = %e, elapsed_ms, "connection closed by peer"),
        Err(e) => {
            shared.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(parent: log, error = %e, %peer, elapsed_ms, "closing connection");
        }
    }
}

async fn run<T: Tap>(
    client: &mut TcpStream,
    peer: SocketAddr,
    conn_id: u64,
    shared: &Shared,
    shutdown: &DrainWatch,
    log: &tracing::Span,
    tap: &mut T,
) -> Result<Outcome, RelayError> {
    let config = &shared.config;
    // Best effort: a client socket that already died fails at the first write anyway.
    let _ = client.set_nodelay(true);
    let timeout = config.limits.connect_timeout.0;
    let (mut upstream, upstream_addr) = match dial(&config.upstream, &config.relay, timeout).await {
        Ok(dialled) => dialled,
        Err(e) => {
            shared.stats.upstream_connect_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(parent: log, error = %e, "upstream unreachable; told the client");
            refuse(client, &format!("rttscope: {e}")).await?;
            return Ok(Outcome::UpstreamUnreachable);
        }
    };
    log.record("upstream.addr", tracing::field::display(upstream_addr));

    let greeting = match relay_greeting(client, &mut upstream, timeout).await {
        Ok(Greeting::Forwarded { greeting, len }) => (greeting, len),
        Ok(Greeting::Refused) => return Ok(Outcome::RefusedByUpstream),
        Err(e @ RelayError::Client(_)) => return Err(e),
        Err(e) => {
            // The client has seen nothing yet: it still gets told why.
            shared.stats.upstream_connect_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(parent: log, error = %e, "no usable greeting from upstream; told the client");
            refuse(client, &format!("rttscope: upstream {upstream_addr} sent no usable greeting: {e}")).await?;
            return Ok(Outcome::UpstreamUnreachable);
        }
    };
    let capture = config.record.max_sql_bytes.0 as usize;
    let established = relay_response(client, &mut upstream, greeting, timeout, capture, tap).await?;
    tracing::debug!(
        parent: log,
        user = %established.response.user,
        schema = established.response.schema.as_deref().unwrap_or(""),
        server = %established.greeting.server_version,
        "handshake relayed"
    );
    tap.handshake(peer, &established.response);
    let mut session = established.session;
    let inject = shared.inject.as_ref().map(|control| InjectBinding {
        control: control.clone(),
        conn_id,
        user: established.response.user.clone(),
        schema: established.response.schema.clone(),
    });
    let settings = PumpSettings {
        buffer_size: config.relay.buffer_size.0 as usize,
        idle_timeout: Some(config.limits.idle_timeout.0).filter(|d| !d.is_zero()),
        inject,
    };
    pump(client, &mut upstream, &mut session, tap, &settings, shutdown).await.map(Outcome::Pumped)
}

/// Tells a client that has not seen a greeting yet that the upstream is out
/// of reach. Before the handshake nothing is negotiated: no SQL state marker,
/// as servers send it (clients read HY000).
async fn refuse(client: &mut TcpStream, message: &str) -> Result<(), RelayError> {
    let packet = err_packet(0, codes::UPSTREAM_UNREACHABLE, "HY000", message, false);
    client.write_all(&packet).await.map_err(RelayError::Client)?;
    let _ = client.shutdown().await;
    Ok(())
}
