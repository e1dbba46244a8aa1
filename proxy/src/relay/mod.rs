//! Accepting clients, dialling upstream, forwarding bytes both ways with
//! backpressure, and shutting down without cutting commands off.
//!
//! The listener takes a connection permit, then spawns one task per client
//! ([`connection`]); each task relays the handshake ([`handshake`]) and then
//! runs the [`pump`]. On shutdown the listener stops, every connection closes
//! as soon as it has nothing in flight, and whatever is still busy after the
//! grace period is aborted.

mod connection;
mod drain;
mod error;
mod handshake;
mod pipe;
pub mod pump;
mod tap;
mod upstream;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rttscope_config::Config;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use drain::Drain;
pub use error::RelayError;
pub use pump::{Direction, Ended};
pub use upstream::DialError;

use crate::protocol::codes;
use crate::protocol::packets::err_packet;
use crate::inject::InjectControl;
use crate::record::{EventSink, RecorderSettings};

/// Counters the relay keeps; lock-free, read by metrics.
#[derive(Debug, Default)]
pub struct RelayStats {
    pub connections_accepted: AtomicU64,
    pub connections_active: AtomicU64,
    pub connections_rejected: AtomicU64,
    pub upstream_connect_errors: AtomicU64,
    pub protocol_errors: AtomicU64,
}

/// What every connection task shares: immutable config, atomic stats, and
/// the sending end of the record channel (when recording is on).
pub(crate) struct Shared {
    pub config: Arc<Config>,
    pub stats: Arc<RelayStats>,
    pub events: Option<EventSink>,
    pub recorder: RecorderSettings,
    /// The emulated link, changeable at run time.
    pub inject: Option<Arc<InjectControl>>,
}

/// The MySQL-facing side of rttscope.
pub struct Proxy {
    listener: TcpListener,
    shared: Arc<Shared>,
    next_id: u64,
}

/// How many "too many connections" answers may be in flight; past that,
/// excess clients are simply closed rather than given a task each.
const MAX_REJECTIONS_IN_FLIGHT: usize = 64;

impl Proxy {
    /// Binds the listener of `config.listen`. With `events`, every
    /// connection records its commands there; `rmem_max` (the host's
    /// tcp_rmem ceiling) sharpens receive-window verdicts.
    pub async fn bind(
        config: Arc<Config>,
        events: Option<EventSink>,
        inject: Option<Arc<InjectControl>>,
        rmem_max: Option<u64>,
    ) -> io::Result<Proxy> {
        let listener = TcpListener::bind(config.listen).await?;
        let recorder = RecorderSettings {
            examples: config.report.examples,
            large_transfer: config.link.large_transfer.0,
            sample_interval_us: config.link.sample_interval.0.as_micros() as u64,
            rmem_max,
        };
        let shared = Arc::new(Shared { config, stats: Arc::default(), events, recorder, inject });
        Ok(Proxy { listener, shared, next_id: 0 })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn stats(&self) -> Arc<RelayStats> {
        self.shared.stats.clone()
    }

    /// Serves until `shutdown` completes, then drains: stops accepting, lets
    /// in-flight commands finish for up to `limits.shutdown_grace`, aborts the rest.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let config = self.shared.config.clone();
        let permits = Arc::new(Semaphore::new(config.limits.max_connections as usize));
        let rejections = Arc::new(Semaphore::new(MAX_REJECTIONS_IN_FLIGHT));
        let drain = Arc::new(Drain::default());
        let mut tasks = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let (client, peer) = match accepted {
                        Ok(accepted) => accepted,
                        // Out of file descriptors and the like: this client is lost,
                        // the listener is not. Back off a little so we don't spin.
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let Ok(permit) = permits.clone().try_acquire_owned() else {
                        self.reject(client, peer, &rejections, &mut tasks);
                        continue;
                    };
                    self.next_id += 1;
                    let conn_id = self.next_id;
                    let shared = self.shared.clone();
                    let watch = drain.watch(conn_id);
                    shared.stats.connections_accepted.fetch_add(1, Ordering::Relaxed);
                    shared.stats.connections_active.fetch_add(1, Ordering::Relaxed);
                    tasks.spawn(async move {
                        connection::serve(client, peer, conn_id, shared.clone(), watch).await;
                        shared.stats.connections_active.fetch_sub(1, Ordering::Relaxed);
                        drop(permit);
                    });
                }
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                () = &mut shutdown => break,
            }
        }
        drop(self.listener);
        let grace = config.limits.shutdown_grace.0;
        let open = tasks.len();
        if open > 0 {
            tracing::info!(connections = open, ?grace, "shutting down: letting in-flight commands finish");
        }
        drain.start();
        let drained = tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(connections = tasks.len(), "grace period over: closing connections still busy");
            tasks.shutdown().await;
        }
        tracing::info!("rttscope stopped");
        Ok(())
    }

    /// Answers a client over the connection limit the way MySQL does.
    fn reject(&self, mut client: TcpStream, peer: SocketAddr, rejections: &Arc<Semaphore>, tasks: &mut JoinSet<()>) {
        self.shared.stats.connections_rejected.fetch_add(1, Ordering::Relaxed);
        let max = self.shared.config.limits.max_connections;
        tracing::warn!(%peer, max_connections = max, "connection limit reached; refusing client");
        let Ok(permit) = rejections.clone().try_acquire_owned() else { return };
        // Before the handshake: no SQL state marker, as a full server sends it.
        let message = format!("rttscope: too many connections (limits.max_connections = {max})");
        let packet = err_packet(0, codes::TOO_MANY_CONNECTIONS, "08004", &message, false);
        tasks.spawn(async move {
            let write = async {
                client.write_all(&packet).await?;
                client.shutdown().await
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), write).await;
            drop(permit);
        });
    }
}
