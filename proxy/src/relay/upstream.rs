//! Dialling the upstream server: TCP_NODELAY and keepalive on, socket
//! buffers left to the kernel's autotuning unless an experiment overrides them.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use rttscope_config::{RelayConfig, UpstreamAddr};
use socket2::{SockRef, TcpKeepalive};
use tokio::net::{TcpSocket, TcpStream};

/// Why the upstream could not be reached; shown to the client in an ERR packet.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("cannot resolve upstream {addr}: {source}")]
    Resolve { addr: UpstreamAddr, source: io::Error },
    #[error("upstream {addr} resolved to no addresses")]
    NoAddress { addr: UpstreamAddr },
    #[error("cannot connect to upstream {addr}: {source}")]
    Connect { addr: String, source: io::Error },
    #[error("cannot connect to upstream {addr}: no answer within {timeout:?}")]
    Timeout { addr: UpstreamAddr, timeout: Duration },
}

/// Connects to `addr`, trying each resolved address in turn, all within `timeout`.
pub async fn dial(addr: &UpstreamAddr, relay: &RelayConfig, timeout: Duration) -> Result<(TcpStream, SocketAddr), DialError> {
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
    tokio::time::timeout(timeout, attempt)
        .await
        .unwrap_or_else(|_| Err(DialError::Timeout { addr: addr.clone(), timeout }))
}

async fn connect(target: SocketAddr, relay: &RelayConfig) -> io::Result<TcpStream> {
    let socket = if target.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    // Buffer sizes must be set before connect to shape the window scale
    // negotiated in the SYN. They are off by default: a fixed buffer is one
    // window per round trip, the very limit rttscope exists to expose.
    if let Some(size) = relay.upstream_sndbuf {
        tracing::warn!(%size, "relay.upstream_sndbuf is set: send-buffer autotuning is off for upstream sockets");
        socket.set_send_buffer_size(clamp_u32(size.0))?;
    }
    if let Some(size) = relay.upstream_rcvbuf {
        tracing::warn!(%size, "relay.upstream_rcvbuf is set: receive-window autotuning is off for upstream sockets");
        socket.set_recv_buffer_size(clamp_u32(size.0))?;
    }
    let stream = socket.connect(target).await?;
    stream.set_nodelay(true)?;
    let keepalive = relay.keepalive.0;
    if !keepalive.is_zero() {
        let params = TcpKeepalive::new().with_time(keepalive).with_interval(keepalive.min(Duration::from_secs(10)));
        SockRef::from(&stream).set_tcp_keepalive(&params)?;
    }
    Ok(stream)
}

fn clamp_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}
