//! Accepting clients, dialling upstream, forwarding bytes both ways with
//! backpressure, and shutting down without cutting commands off.
//!
//! The listeners (TCP and Unix sockets, `listener`) take a connection permit,
//! then spawn one task per client (`connection`); each task takes a slot of the connection
//! phase (`connecting`: what clients not yet logged in may hold), dials the server
//! (`upstream`), runs the connection phase (`handshake`: TLS per leg from `tls`,
//! a load balancer's PROXY header passed on by `proxy_header`, the login relayed), and then the `pump`, which moves the packet stream
//! between the two legs (`leg`: TCP, TLS, Unix; `compressed`: the compressed
//! protocol) through one bounded buffer per direction (`pipe`), while the
//! observers watch (`activity` is the relay's own, for the live view); statements
//! addressed to rttscope itself are kept from the server and answered (`local`). On
//! shutdown (`drain`) the listeners stop, every connection closes as soon as
//! it has nothing in flight, and whatever is still busy after the grace period
//! is aborted. `error` is the one place refusals become ERR packets.

mod activity;
mod auth_key;
mod compressed;
mod connecting;
mod connection;
mod drain;
mod error;
mod handshake;
mod idle_poll;
mod kills;
mod leg;
mod listener;
mod local;
mod phase_io;
mod pipe;
mod proxy_header;
mod pump;
mod refusal_log;
mod shards;
mod timers;
pub mod tls;
mod upstream;
mod wake_flag;

pub use idle_poll::IdlePollStats;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rttscope_config::Config;
use tokio::io::AsyncWriteExt;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use drain::Drain;
pub use error::{Refusal, RelayError};
pub use local::{LocalAnswers, LocalContext};
pub use pump::Ended;
pub use upstream::DialError;

use crate::inject::InjectControl;
use crate::link::{LinkSink, ProbeSettings};
use crate::live::LiveRegistry;
use crate::protocol::DecodeError;
use crate::protocol::compress::Algorithm;
use crate::record::{EventSink, RecorderSettings};
use crate::sync::locked;
use leg::Transport;
use listener::Listener;
pub use pipe::BufferBudget;
pub use tls::TlsSetupError;
use tls::{ClientSideTls, UpstreamSideTls};

/// Counters the relay keeps; lock-free, read by metrics.
#[derive(Debug, Default)]
pub struct RelayStats {
    /// Clients accepted and served, refused logins included: `rttscope_connections_total`.
    pub connections_accepted: AtomicU64,
    /// Clients open now: `rttscope_connections_active`.
    pub connections_active: AtomicU64,
    /// Clients turned away before the handshake (connection or descriptor limit): `rttscope_connections_rejected_total`.
    pub connections_rejected: AtomicU64,
    /// Dials, greetings or upstream TLS that failed: `rttscope_upstream_connect_errors_total`.
    pub upstream_connect_errors: AtomicU64,
    /// Connections closed by an error other than a hangup (decode errors, timeouts): `rttscope_protocol_errors_total`.
    pub protocol_errors: AtomicU64,
    /// Connections the upstream closed in the middle of a response (died, was killed).
    pub upstream_closed_mid_response: AtomicU64,
    /// Times the state machine lost its place (and forwarding went on), by
    /// [`DecodeError::kind`](crate::protocol::DecodeError::kind).
    pub desyncs: [AtomicU64; DecodeError::KINDS.len()],
    /// Logins, by leg, how the leg is carried and its compression.
    pub logins: [[[AtomicU64; COMPRESSIONS.len()]; TRANSPORTS.len()]; LEGS.len()],
    /// The last upstream greeting came from MariaDB (its version says so), not MySQL.
    upstream_is_mariadb: AtomicBool,
    /// What the connection threads' polling before sleeping did.
    pub idle_poll: IdlePollStats,
}

/// The legs, transports and compressions `logins` counts, as metrics name them.
pub const LEGS: [&str; 2] = ["client", "upstream"];
/// How a leg is carried.
pub const TRANSPORTS: [&str; 3] = ["plain", "tls", "unix"];
/// What a leg is compressed with.
pub const COMPRESSIONS: [&str; 3] = ["none", "zlib", "zstd"];

impl RelayStats {
    /// Counts a desync of kind `reason`.
    pub fn desynced(&self, reason: &str) {
        if let Some(i) = DecodeError::KINDS.iter().position(|k| *k == reason) {
            self.desyncs[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a login: for each leg, how it is carried and compressed.
    pub fn logged_in(&self, legs: [(bool, bool, Option<Algorithm>); 2]) {
        for (leg, (tls, unix, compression)) in legs.into_iter().enumerate() {
            let transport = if unix { 2 } else { usize::from(tls) };
            let compression = match compression {
                None => 0,
                Some(Algorithm::Zlib) => 1,
                Some(Algorithm::Zstd { .. }) => 2,
            };
            self.logins[leg][transport][compression].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Logins so far, as `(leg, transport, compression, count)`.
    pub fn login_counts(&self) -> impl Iterator<Item = (&'static str, &'static str, &'static str, u64)> + '_ {
        self.logins.iter().enumerate().flat_map(|(l, by_transport)| {
            by_transport.iter().enumerate().flat_map(move |(t, by_compression)| {
                by_compression
                    .iter()
                    .enumerate()
                    .map(move |(c, n)| (LEGS[l], TRANSPORTS[t], COMPRESSIONS[c], n.load(Ordering::Relaxed)))
            })
        })
    }

    /// Notes the server version of an upstream greeting (`10.11.6-MariaDB-0+deb12u1`).
    pub fn saw_server(&self, version: &str) {
        let mariadb = version.to_ascii_lowercase().contains("mariadb");
        self.upstream_is_mariadb.store(mariadb, Ordering::Relaxed);
    }

    /// OpenTelemetry's `db.system.name` of the upstream: `mariadb` or `mysql` (also until
    /// a greeting has been seen).
    pub fn db_system_name(&self) -> &'static str {
        if self.upstream_is_mariadb.load(Ordering::Relaxed) { "mariadb" } else { "mysql" }
    }

    /// Desyncs so far, by reason.
    pub fn desync_counts(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DecodeError::KINDS.iter().zip(&self.desyncs).map(|(k, n)| (*k, n.load(Ordering::Relaxed)))
    }
}

/// Where a proxy's connections report what they see, and the emulated link
/// they follow.
pub struct Observation {
    /// Command records, when recording is on.
    pub events: Option<EventSink>,
    /// Link verdicts and socket readings (always on).
    pub link_events: LinkSink,
    /// The live view of open connections (always on).
    pub live: Arc<LiveRegistry>,
    /// The emulated link, changeable at run time.
    pub inject: Option<Arc<InjectControl>>,
    /// tcp_rmem max of this host, if known: it sharpens receive-window verdicts.
    pub rmem_max: Option<u64>,
}

/// What every connection task shares: immutable config, atomic stats, and
/// the sending ends of the observers' channels.
pub(crate) struct Shared {
    pub config: Arc<Config>,
    pub stats: Arc<RelayStats>,
    pub events: Option<EventSink>,
    pub recorder: RecorderSettings,
    pub link_events: LinkSink,
    pub probe: ProbeSettings,
    pub live: Arc<LiveRegistry>,
    /// The emulated link, changeable at run time.
    pub inject: Option<Arc<InjectControl>>,
    /// TLS towards clients (`listen.tls`), unless off.
    pub client_tls: Option<ClientSideTls>,
    /// TLS towards the server (`upstream.tls`), unless disabled.
    pub upstream_tls: Option<UpstreamSideTls>,
    /// The RSA key plain clients get for their password when the long hop is TLS.
    pub auth_keys: auth_key::AuthKeys,
    /// Buffer memory across connections (`limits.buffer_budget`).
    pub buffers: Arc<BufferBudget>,
    /// Who answers statements addressed to rttscope (the SQL view), if anyone.
    pub local: Option<Arc<dyn LocalAnswers>>,
    /// Logged-in connections by the server's id for them, for a KILL's answer to wait on.
    pub kills: Arc<kills::Kills>,
    /// The connection phase's slots (`limits.max_connecting`).
    pub(crate) connecting: connecting::Gate,
    /// Refused clients, logged without flooding the log.
    pub(crate) refusals: refusal_log::RefusalLog,
}

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        source: io::Error,
    },
    /// TLS could not be set up.
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
}

/// The MySQL-facing side of rttscope.
pub struct Proxy {
    listeners: Vec<Listener>,
    shared: Arc<Shared>,
    next_id: u64,
}

/// Held while a new socket is made for a dial, and while the listener gives up its
/// reserve descriptor to accept a client it must refuse: so that descriptor cannot go to
/// the dial instead, leaving the client waiting unanswered. Never held on the forwarding
/// path, and only for a syscall.
static FD_GATE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How many "too many connections" answers may be in flight; past that,
/// excess clients are simply closed rather than given a task each.
const MAX_REJECTIONS_IN_FLIGHT: usize = 64;

impl Proxy {
    /// Binds the listener of `config.listen`; its connections report to `observation`.
    pub async fn bind(config: Arc<Config>, observation: Observation) -> Result<Proxy, StartError> {
        let client_tls = ClientSideTls::from_config(&config.listen.tls)?;
        let upstream_tls = UpstreamSideTls::from_config(&config.upstream)?;
        if upstream_tls.is_none() && client_tls.is_some() {
            tracing::warn!(
                "upstream.tls.mode is disabled: logins of clients that use TLS towards rttscope cross the long hop in clear"
            );
        }
        let auth_keys = auth_key::AuthKeys::from_config(config.listen.rsa_key.as_deref())?;
        check_fd_limit(config.limits.max_connections);
        upstream::warn_fixed_buffers(&config.relay);
        let mode = config.listen.socket_mode().unwrap_or(0o660);
        let mut listeners = Vec::new();
        for addr in &config.listen.address {
            let listener = Listener::bind(addr, mode)
                .await
                .map_err(|source| StartError::Bind { addr: addr.to_string(), source })?;
            listeners.push(listener);
        }
        let recorder = RecorderSettings { examples: config.report.examples };
        let probe = ProbeSettings {
            large_transfer: config.link.large_transfer.0,
            sample_interval_us: config.link.sample_interval.0.as_micros() as u64,
            rmem_max: observation.rmem_max,
        };
        let Observation { events, link_events, live, inject, .. } = observation;
        let config_budget = config.limits.buffer_budget.0;
        let connecting = connecting::Gate::new(config.limits.connecting_slots());
        let shared = Arc::new(Shared {
            config,
            stats: Arc::default(),
            events,
            recorder,
            link_events,
            probe,
            live,
            inject,
            client_tls,
            upstream_tls,
            auth_keys,
            buffers: Arc::new(BufferBudget::new(config_budget)),
            local: None,
            kills: Arc::default(),
            connecting,
            refusals: refusal_log::RefusalLog::default(),
        });
        Ok(Proxy { listeners, shared, next_id: 0 })
    }

    /// The first TCP address clients connect to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listeners
            .iter()
            .find_map(Listener::tcp_addr)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no TCP listener"))
    }

    /// Every address clients connect to, as logs name them.
    pub fn listening(&self) -> Vec<String> {
        self.listeners.iter().map(Listener::describe).collect()
    }

    /// The CA rttscope generated for its client-side TLS (PEM), if it made its own.
    pub fn generated_ca(&self) -> Option<String> {
        self.shared.client_tls.as_ref().and_then(|t| t.generated_ca.clone())
    }

    /// The relay's counters, shared with `/metrics`.
    pub fn stats(&self) -> Arc<RelayStats> {
        self.shared.stats.clone()
    }

    /// Buffer memory across connections.
    pub fn buffers(&self) -> Arc<BufferBudget> {
        self.shared.buffers.clone()
    }

    /// Has `answers` answer the statements it claims, instead of the server. Only before
    /// [`run`](Self::run): connections started later see it.
    pub fn answer_locally(&mut self, answers: Arc<dyn LocalAnswers>) {
        match Arc::get_mut(&mut self.shared) {
            Some(shared) => shared.local = Some(answers),
            None => tracing::error!("local answers set after connections started: ignored"),
        }
    }

    /// Serves until `shutdown` completes, then drains: stops accepting, lets
    /// in-flight commands finish for up to `limits.shutdown_grace`, aborts the rest.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let config = self.shared.config.clone();
        let permits = Arc::new(Semaphore::new(config.limits.max_connections as usize));
        let rejections = Arc::new(Semaphore::new(MAX_REJECTIONS_IN_FLIGHT));
        let drain = Arc::new(Drain::default());
        let mut tasks = JoinSet::new();
        let mut shards = shards::Shards::start(&config.relay, &self.shared.stats, self.shared.inject.clone())?;
        // One descriptor held back: when the process runs out, it is given up to accept
        // the client that could not be, and tell it why.
        let mut reserve = std::fs::File::open("/dev/null").ok();
        tokio::pin!(shutdown);
        let summing = tokio::spawn(sum_up_refusals(self.shared.clone()));
        loop {
            // Lost while the process was out of descriptors: take it back as soon as one frees.
            if reserve.is_none() {
                reserve = std::fs::File::open("/dev/null").ok();
            }
            tokio::select! {
                accepted = accept(&self.listeners) => {
                    let (client, peer) = match accepted {
                        Ok(accepted) => accepted,
                        Err((e, listener)) if is_out_of_fds(&e) => {
                            self.out_of_fds(listener, &mut reserve).await;
                            continue;
                        }
                        // Anything else: this client is lost, the listener is not. Back
                        // off a little so we don't spin.
                        Err((e, _)) => {
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
                    let active = Active::count(shared.stats.clone());
                    // Served on a connection thread: the socket moves to its runtime.
                    let client = match client.detach() {
                        Ok(client) => client,
                        Err(e) => {
                            tracing::warn!(error = %e, %peer, "cannot hand the client to a connection thread; closing it");
                            continue;
                        }
                    };
                    tasks.spawn_on(async move {
                        match client.attach() {
                            Ok(client) => connection::serve(client, peer, conn_id, shared, watch).await,
                            Err(e) => tracing::warn!(error = %e, %peer, "cannot register the client's socket; closing it"),
                        }
                        // Also when the task is aborted at the end of the grace period.
                        drop((active, permit));
                    }, shards.next());
                }
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                () = &mut shutdown => break,
            }
        }
        drop(std::mem::take(&mut self.listeners));
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
        summing.abort();
        self.shared.refusals.sum_up(true);
        tracing::info!("rttscope stopped");
        Ok(())
    }

    /// Answers a client over the connection limit the way MySQL does.
    fn reject(&self, client: Transport, peer: String, rejections: &Arc<Semaphore>, tasks: &mut JoinSet<()>) {
        let max = self.shared.config.limits.max_connections;
        let refusal = Refusal::TooManyConnections { max };
        if self.shared.refusals.log_in_full(&refusal, || format!("{peer}: {refusal}")) {
            tracing::warn!(%peer, max_connections = max, "connection limit reached; refusing client (more refusals like it are counted for 10 s, then summed up)");
        }
        self.refuse(client, refusal, rejections, tasks);
    }

    /// The process is out of file descriptors: give up the reserve, take the client that
    /// waits, tell it (1040, naming the fd limit — never blaming the upstream), and take a
    /// reserve again.
    async fn out_of_fds(&self, listener: usize, reserve: &mut Option<std::fs::File>) {
        let limit = crate::sys::nofile_limit().map_or(0, |(soft, _)| soft);
        let refusal = Refusal::FdLimit { limit };
        if self.shared.refusals.log_in_full(&refusal, || refusal.to_string()) {
            tracing::warn!(
                fd_limit = limit,
                "out of file descriptors: refusing a client; raise `ulimit -n` for rttscope"
            );
        }
        // The reserve's descriptor must go to the waiting client, not to a connection
        // that is dialling the server meanwhile: both happen under the gate, and the
        // accept is tried once, at once (the listener has a client waiting: that is why
        // accepting failed).
        let accepted = {
            let _gate = locked(&FD_GATE);
            drop(reserve.take());
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            match self.listeners.get(listener).map(|l| l.poll_accept(&mut cx)) {
                Some(std::task::Poll::Ready(Ok(accepted))) => Some(accepted),
                _ => None,
            }
        };
        // Told and closed here, not in a task of its own: its descriptor must be free again
        // before the reserve is taken back, or a busy moment loses the reserve and the next
        // client waits unanswered for a descriptor that nothing frees.
        if let Some((mut client, _)) = accepted {
            self.shared.stats.connections_rejected.fetch_add(1, Ordering::Relaxed);
            let packet = refusal.packet(0, false);
            let write = async {
                client.write_all(&packet).await?;
                client.shutdown().await
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), write).await;
            // Its descriptor becomes the reserve again, under the gate for the same reason.
            let _gate = locked(&FD_GATE);
            drop(client);
            *reserve = std::fs::File::open("/dev/null").ok();
            return;
        }
        *reserve = std::fs::File::open("/dev/null").ok();
    }

    /// Tells a client turned away before the handshake why, in a task of its own (at most
    /// a few at once: past that, excess clients are simply closed).
    fn refuse(&self, mut client: Transport, refusal: Refusal, rejections: &Arc<Semaphore>, tasks: &mut JoinSet<()>) {
        self.shared.stats.connections_rejected.fetch_add(1, Ordering::Relaxed);
        let Ok(permit) = rejections.clone().try_acquire_owned() else { return };
        // Before the handshake: no SQL state marker, as a full server sends it.
        let packet = refusal.packet(0, false);
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

/// Every second, sums up the refusals counted rather than logged whose quiet time is over.
async fn sum_up_refusals(shared: Arc<Shared>) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        every.tick().await;
        shared.refusals.sum_up(false);
    }
}

/// The next client of any listener; an error names the listener. Each poll starts with a
/// different one, so a busy listener cannot starve the others.
async fn accept(listeners: &[Listener]) -> Result<(Transport, String), (io::Error, usize)> {
    let mut turn = 0usize;
    std::future::poll_fn(|cx| {
        turn = turn.wrapping_add(1);
        for i in 0..listeners.len() {
            let index = (turn + i) % listeners.len();
            if let std::task::Poll::Ready(accepted) = listeners[index].poll_accept(cx) {
                return std::task::Poll::Ready(accepted.map_err(|e| (e, index)));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Whether an accept failed for want of file descriptors (the process's or the system's).
pub(crate) fn is_out_of_fds(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// One open connection on the active-connections gauge, for as long as it lives: dropped
/// however the connection's task ends (done, failed, or aborted at shutdown).
struct Active(Arc<RelayStats>);

impl Active {
    fn count(stats: Arc<RelayStats>) -> Active {
        stats.connections_active.fetch_add(1, Ordering::Relaxed);
        Active(stats)
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.connections_active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Raises the soft open-file limit to the hard one and warns when even that cannot hold
/// `max_connections`: each takes two descriptors (client and upstream), plus headroom for
/// listeners, the admin API and logs.
fn check_fd_limit(max_connections: u32) {
    let needed = 2 * u64::from(max_connections) + 64;
    match crate::sys::raise_nofile_limit() {
        Ok((soft, _)) if soft < needed => tracing::warn!(
            fd_limit = soft,
            needed,
            max_connections,
            "the open-file limit cannot hold limits.max_connections (2 descriptors each, plus headroom): raise `ulimit -n` (or LimitNOFILE) to at least {needed}, or lower limits.max_connections to {}",
            soft.saturating_sub(64) / 2
        ),
        Ok((soft, _)) => tracing::debug!(fd_limit = soft, needed, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot read the open-file limit"),
    }
}
