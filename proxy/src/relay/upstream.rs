//! Dialling the upstream server: TCP_NODELAY and keepalive on, socket
//! buffers left to the kernel's autotuning unless an experiment overrides them.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use rttscope_config::{RelayConfig, UpstreamAddr};
use socket2::{SockRef, TcpKeepalive};
use tokio::net::{TcpSocket, TcpStream};

use super::timers;
use crate::sync::locked;

/// Why the upstream could not be reached; shown to the client in an ERR packet.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// DNS lookup of `upstream.address` failed.
    #[error("cannot resolve upstream {addr}: {source}")]
    Resolve {
        /// `upstream.address` as configured.
        addr: UpstreamAddr,
        /// The resolver's error.
        source: io::Error,
    },
    /// The name resolved, but to an empty list.
    #[error("upstream {addr} resolved to no addresses")]
    NoAddress {
        /// `upstream.address` as configured.
        addr: UpstreamAddr,
    },
    /// Every resolved address refused or failed; the last one's error is kept.
    #[error("cannot connect to upstream {addr}: {source}")]
    Connect {
        /// The resolved `ip:port` whose error this is.
        addr: String,
        /// The connect error (refused, unreachable, out of descriptors...).
        source: io::Error,
    },
    /// `limits.connect_timeout` passed before any address answered.
    #[error("cannot connect to upstream {addr}: no answer within {timeout:?} (limits.connect_timeout)")]
    Timeout {
        /// `upstream.address` as configured.
        addr: UpstreamAddr,
        /// The limit that passed.
        timeout: Duration,
    },
}

/// Connects to `addr`, trying each resolved address in turn, all within `timeout`.
pub async fn dial(
    addr: &UpstreamAddr,
    relay: &RelayConfig,
    timeout: Duration,
) -> Result<(TcpStream, SocketAddr), DialError> {
    let attempt = async {
        let resolved = tokio::net::lookup_host((addr.host(), addr.port()))
            .await
            .map_err(|source| DialError::Resolve { addr: addr.clone(), source })?;
        let mut last = DialError::NoAddress { addr: addr.clone() };
        for target in resolved {
            match connect(target, relay).await {
                Ok(stream) => return Ok((stream, target)),
                Err(source) => last = DialError::Connect { addr: target.to_string(), source },
            }
        }
        Err(last)
    };
    timers::timeout(timeout, attempt).await.unwrap_or_else(|_| Err(DialError::Timeout { addr: addr.clone(), timeout }))
}

/// Says once, at start, that fixed upstream buffers turn the kernel's autotuning off (it is
/// true of every connection; saying it per connection would bury the log).
pub(super) fn warn_fixed_buffers(relay: &RelayConfig) {
    if let Some(size) = relay.upstream_sndbuf {
        tracing::warn!(%size, "relay.upstream_sndbuf is set: send-buffer autotuning is off for upstream sockets");
    }
    if let Some(size) = relay.upstream_rcvbuf {
        tracing::warn!(%size, "relay.upstream_rcvbuf is set: receive-window autotuning is off for upstream sockets");
    }
}

async fn connect(target: SocketAddr, relay: &RelayConfig) -> io::Result<TcpStream> {
    let socket = {
        // Not while the listener hands its reserve descriptor to a client it must refuse.
        let _gate = locked(&super::FD_GATE);
        if target.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? }
    };
    // Buffer sizes must be set before connect to shape the window scale
    // negotiated in the SYN. They are off by default: a fixed buffer is one
    // window per round trip, the very limit rttscope exists to expose.
    if let Some(size) = relay.upstream_sndbuf {
        socket.set_send_buffer_size(clamp_u32(size.0))?;
    }
    if let Some(size) = relay.upstream_rcvbuf {
        socket.set_recv_buffer_size(clamp_u32(size.0))?;
    }
    let stream = socket.connect(target).await?;
    super::idle_poll::watch(stream.as_raw_fd());
    stream.set_nodelay(true)?;
    keep_alive(&stream, relay)?;
    // A dead long hop is noticed in seconds, not after the kernel's ~15 minutes of retries.
    let user_timeout = relay.user_timeout.0;
    if !user_timeout.is_zero() {
        SockRef::from(&stream).set_tcp_user_timeout(Some(user_timeout))?;
    }
    Ok(stream)
}

/// TCP keepalive as `relay.keepalive` says (both legs): a peer or path that died without
/// a word is noticed, and its connection slot freed.
pub(super) fn keep_alive(stream: &TcpStream, relay: &RelayConfig) -> io::Result<()> {
    let keepalive = relay.keepalive.0;
    if !keepalive.is_zero() {
        let params = TcpKeepalive::new().with_time(keepalive).with_interval(keepalive.min(Duration::from_secs(10)));
        SockRef::from(stream).set_tcp_keepalive(&params)?;
    }
    Ok(())
}

fn clamp_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}
