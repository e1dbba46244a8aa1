//! The admin listener: at most `admin.max_connections` connections at once (more are
//! answered 503 and closed, so the fds the MySQL listener needs stay free), each served by
//! hyper with `admin.header_timeout` for every request head (a client that trickles its
//! headers, or idles between requests, is cut off) and `admin.max_header_bytes` (431).
//! No connection lives longer than [`LIFETIME`]: hyper has no write timeout, so a client
//! that asks for a large report and never reads it would otherwise hold its slot for good.
//! Health checks have headroom of their own: past the cap, [`HEALTH_HEADROOM`] more
//! connections may ask for `/healthz` (and nothing else), each for at most
//! [`HEALTH_LIFETIME`], so clients holding every slot (a slowloris) do not turn the health
//! check into a 503 and get the process restarted.
//! On shutdown each connection finishes the request it is on, for at most a few seconds.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::{Extension, Router};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rttscope_config::AdminConfig;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::guard::{LocalAddr, PeerAddr};

/// Longest a connection may take to finish its request once shutdown began.
const DRAIN: Duration = Duration::from_secs(5);
/// Longest an admin connection lives. Scrapers reconnect (and idle keep-alives are cut by
/// the header timeout long before); a report that takes minutes to download is not normal.
pub const LIFETIME: Duration = Duration::from_secs(300);
/// After accept fails (out of fds, say), wait this long before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
const BUSY: &str = "too many admin connections (admin.max_connections)\n";
/// Connections past `admin.max_connections` that may still ask for `/healthz`.
pub const HEALTH_HEADROOM: usize = 8;
/// How long such a connection may take, from accept to the answer: a health checker asks
/// at once, and a slot held longer is a slot some other health check waits for.
pub const HEALTH_LIFETIME: Duration = Duration::from_secs(2);

/// How long a connection may live, and may take to finish once told to stop.
#[derive(Clone, Copy, Debug)]
struct Lifetimes {
    lifetime: Duration,
    drain: Duration,
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: AdminConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_for(listener, router, limits, Lifetimes { lifetime: LIFETIME, drain: DRAIN }, shutdown).await
}

async fn serve_for(
    listener: TcpListener,
    router: Router,
    limits: AdminConfig,
    times: Lifetimes,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let headroom = Arc::new(Semaphore::new(HEALTH_HEADROOM));
    let health_only = router.clone().layer(axum::middleware::from_fn(only_health));
    let mut builder = http1::Builder::new();
    let head_bytes = usize::try_from(limits.max_header_bytes.0).unwrap_or(usize::MAX);
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout.get())
        .max_header_size(head_bytes)
        // hyper's floor for its read buffer is 8 KiB; the head limit above is the one that bites.
        .max_buf_size(head_bytes.max(8192));
    let connections = TaskTracker::new();
    let stop = CancellationToken::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "admin API: cannot accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            match headroom.clone().try_acquire_owned() {
                Ok(spare) => {
                    let health = serve_health(stream, peer, health_only.clone(), limits.header_timeout.get());
                    connections.spawn(async move {
                        health.await;
                        drop(spare);
                    });
                }
                Err(_) => {
                    tracing::debug!("admin API: connection refused at admin.max_connections");
                    connections.spawn(turn_away(stream));
                }
            }
            continue;
        };
        let Ok(local) = stream.local_addr() else { continue };
        let service = TowerToHyperService::new(
            router.clone().layer(Extension(LocalAddr(local))).layer(Extension(PeerAddr(peer))),
        );
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let stop = stop.clone();
        connections.spawn(async move {
            tokio::pin!(connection);
            let stopping = tokio::select! {
                served = connection.as_mut() => Err(served),
                () = stop.cancelled() => Ok("shutdown"),
                () = tokio::time::sleep(times.lifetime) => Ok("the connection's lifetime is up"),
            };
            let served = match stopping {
                Err(served) => served,
                Ok(why) => {
                    tracing::debug!("admin API connection closing: {why}");
                    connection.as_mut().graceful_shutdown();
                    tokio::time::timeout(times.drain, connection.as_mut()).await.unwrap_or(Ok(()))
                }
            };
            // Timeouts, oversized heads and clients that vanish end here; none is our fault.
            if let Err(e) = served {
                tracing::debug!(error = %e, "admin API connection ended");
            }
            drop(permit);
        });
    }
    stop.cancel();
    connections.close();
    let _ = tokio::time::timeout(times.drain, connections.wait()).await;
    Ok(())
}

/// Serves one request of a connection past the cap: `/healthz` through `router` (the
/// guard's checks included), 503 for anything else, all within [`HEALTH_LIFETIME`].
async fn serve_health(stream: TcpStream, peer: std::net::SocketAddr, router: Router, header_timeout: Duration) {
    let Ok(local) = stream.local_addr() else { return };
    let service = TowerToHyperService::new(router.layer(Extension(LocalAddr(local))).layer(Extension(PeerAddr(peer))));
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout.min(HEALTH_LIFETIME)).keep_alive(false);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    if let Ok(Err(e)) = tokio::time::timeout(HEALTH_LIFETIME, connection).await {
        tracing::debug!(error = %e, "admin API health connection ended");
    }
}

/// Lets `/healthz` through to the guard and the handler; anything else is told the API is busy.
async fn only_health(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse;
    if request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    (axum::http::StatusCode::SERVICE_UNAVAILABLE, BUSY).into_response()
}

/// Tells a client over the cap why, without reading its request, and closes.
async fn turn_away(mut stream: TcpStream) {
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{BUSY}",
        BUSY.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(response.as_bytes())).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use axum::routing::get;
    use tokio::io::AsyncReadExt;

    use super::*;

    /// `GET /small` on a fresh connection: the status line, or what the server said.
    async fn status_of_small(addr: std::net::SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut reply = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut reply)).await;
        String::from_utf8_lossy(&reply).lines().next().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn a_client_that_never_reads_loses_its_slot_after_the_lifetime() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Far more than the kernel buffers on both sides: the write stalls.
        let big = axum::body::Bytes::from(vec![b'x'; 64 << 20]);
        let router = Router::new()
            .route("/big", get(move || std::future::ready(big.clone())))
            .route("/small", get(|| async { "ok" }));
        let limits = AdminConfig { max_connections: 1, ..AdminConfig::default() };
        let times = Lifetimes { lifetime: Duration::from_millis(700), drain: Duration::from_millis(100) };
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve_for(listener, router, limits, times, stop.clone().cancelled_owned()));

        let mut stalled = TcpStream::connect(addr).await.unwrap();
        stalled.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(status_of_small(addr).await, "HTTP/1.1 503 Service Unavailable", "the one slot is taken");
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(status_of_small(addr).await, "HTTP/1.1 200 OK", "the slot is free again");
        stop.cancel();
        server.await.unwrap().unwrap();
    }
}
