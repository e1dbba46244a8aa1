//! rttscope assembled: the relay feeds records through a bounded channel to
//! the collector; the admin API and the final report read the aggregates.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rttscope_config::{ADMIN_TOKEN_ENV, AdminToken, Config};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::admin::token::{self, TokenError};
use crate::admin::{self, AdminState};
use crate::findings::{Emulated, FindingsConsumer, FindingsEngine};
use crate::inject::InjectControl;
use crate::link::{self, Expected, LinkEvent, LinkSink, Links};
use crate::live::LiveRegistry;
use crate::record::{Aggregates, Collector, CommandMetrics, EventSink, Recording, Windows, micros};
use crate::relay::{Observation, Proxy, StartError};
use crate::report::snapshots::{self, Snapshots};
use crate::sqlview::SqlView;
use crate::sync::locked;

/// Why rttscope could not start.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The MySQL side: a listen address or TLS.
    #[error(transparent)]
    Proxy(#[from] StartError),
    /// The admin API's address.
    #[error("cannot listen on {addr} for the admin API: {source}")]
    Admin {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The admin token: missing beyond loopback, unreadable, or too weak.
    #[error(transparent)]
    AdminToken(#[from] TokenError),
    /// `report.path` cannot be written: found now rather than at stop, with the recording.
    #[error("{0}")]
    ReportPath(String),
}

/// Logs a warning when `upstream.address` names a host that does not resolve now: each client
/// would otherwise be the first to find out, refused. Not fatal (DNS may come up later), and
/// no connection is tried (a bare connect counts against the server's `max_connect_errors`).
async fn warn_if_unresolvable(upstream: rttscope_config::UpstreamAddr) {
    let lookup = tokio::net::lookup_host((upstream.host().to_owned(), upstream.port()));
    match tokio::time::timeout(std::time::Duration::from_secs(10), lookup).await.map(|r| r.map(Iterator::count)) {
        Ok(Ok(1..)) => {}
        Ok(Ok(0)) => tracing::warn!(%upstream, "upstream.address resolves to no address: clients will be refused"),
        Ok(Err(e)) => {
            tracing::warn!(%upstream, error = %e, "upstream.address does not resolve: clients will be refused until it does")
        }
        Err(_) => tracing::warn!(%upstream, "upstream.address does not resolve: no answer within 10 s"),
    }
}

/// Writes the final report as it stands (`report.path`), for a stop that cannot wait for the
/// drain: set once rttscope runs.
type FinalReport = Box<dyn Fn() -> io::Result<()> + Send + Sync>;
static FINAL_REPORT: std::sync::OnceLock<FinalReport> = std::sync::OnceLock::new();
/// Held while a final report is written: a second signal during the drain's own write waits
/// for it rather than writing the same temporary file beside it.
static FINAL_WRITE: Mutex<()> = Mutex::new(());

/// Writes `report` to `path` as the final report, one writer at a time.
fn write_final(report: &crate::report::Report, format: rttscope_config::ReportFormat, path: &Path) -> io::Result<()> {
    let _one_at_a_time = locked(&FINAL_WRITE);
    crate::report::write(report, format, path)
}

/// For a stop at once (a second signal): writes the final report with what was recorded so
/// far, waiting at most `within` (a wedged process must still stop), and says what happened.
/// Nothing to do without `report.path`.
pub fn write_final_report_now(within: std::time::Duration) {
    let Some(write) = FINAL_REPORT.get() else { return };
    let (done, finished) = std::sync::mpsc::channel();
    let writer = std::thread::Builder::new().name("rttscope-last-report".to_owned()).spawn(move || {
        let _ = done.send(write());
    });
    if writer.is_err() {
        tracing::error!("the final report was not written: no thread to write it");
        return;
    }
    match finished.recv_timeout(within) {
        Ok(Ok(())) => tracing::info!("final report written with what was recorded so far"),
        Ok(Err(e)) => tracing::error!(error = %e, "cannot write the final report"),
        Err(_) => tracing::error!("the final report was not written: it took longer than {within:?}"),
    }
}

/// What a reload (SIGHUP) changes while rttscope runs, from the config file read again: the
/// emulated link (`inject`), when the file's changed since it was last read (so a
/// `PUT /inject` since then stands until the file says otherwise). Other sections are read,
/// checked and named when they changed, but take effect at the next start: they size or
/// bind what is already running (listeners, TLS, buffers, the recording), and the findings
/// engine keeps what it has found under the thresholds it was started with.
pub struct Reloader {
    loaded: Mutex<Config>,
    inject: Arc<InjectControl>,
}

/// What a reload did.
#[derive(Debug, Default)]
pub struct Reloaded {
    /// Sections applied at once.
    pub applied: Vec<&'static str>,
    /// Sections that changed and take effect at the next start.
    pub at_restart: Vec<&'static str>,
}

impl Reloader {
    /// Applies `new` (the file read again, with the same flags and environment) where it
    /// differs from what was read last.
    pub fn apply(&self, new: Config) -> Reloaded {
        let mut loaded = locked(&self.loaded);
        let mut reloaded = Reloaded::default();
        if new.inject != loaded.inject {
            self.inject.replace(new.inject.clone());
            reloaded.applied.push("inject");
        }
        let sections = [
            ("listen", new.listen != loaded.listen),
            ("admin", new.admin != loaded.admin),
            ("upstream", new.upstream != loaded.upstream),
            ("limits", new.limits != loaded.limits),
            ("relay", new.relay != loaded.relay),
            ("log.format", new.log.format != loaded.log.format),
            ("metrics", new.metrics != loaded.metrics),
            ("record", new.record != loaded.record),
            ("report", new.report != loaded.report),
            ("findings", new.findings != loaded.findings),
            ("link", new.link != loaded.link),
            ("sql_view", new.sql_view != loaded.sql_view),
        ];
        reloaded.at_restart = sections.into_iter().filter(|(_, changed)| *changed).map(|(name, _)| name).collect();
        *loaded = new;
        reloaded
    }
}

/// rttscope bound but not yet serving: [`bind`](Rttscope::bind), then [`run`](Rttscope::run);
/// addresses and state can be read in between (tests bind port 0).
pub struct Rttscope {
    config: Arc<Config>,
    proxy: Proxy,
    /// The admin API's listener and token; `None` with `admin: off`.
    admin: Option<(TcpListener, Option<AdminToken>)>,
    collector: Collector,
    link_events: tokio::sync::mpsc::Receiver<LinkEvent>,
    state: Arc<AdminState>,
}

impl Rttscope {
    /// Binds the MySQL listeners and the admin API, and sets up TLS.
    pub async fn bind(config: Arc<Config>) -> Result<Rttscope, BindError> {
        let (sink, rx) = EventSink::channel(config.record.event_queue);
        let now = micros(tokio::time::Instant::now());
        let mut aggregates = Aggregates::new(config.record.max_fingerprints, now);
        aggregates.metrics = CommandMetrics::new(config.metrics.top_statements);
        let dropped = sink.dropped_counter();
        let windows = Windows::new(
            config.report.window_resolution.get(),
            config.report.window_max.get(),
            config.record.max_fingerprints,
            now,
            dropped.clone(),
        );
        let recording = Arc::new(Mutex::new(Recording::new(aggregates, windows)));
        let events = config.record.enabled.then_some(sink);
        let sysctls = link::startup_check(&config);
        let inject = Arc::new(InjectControl::new(config.inject.clone()));
        if config.inject.is_active() {
            tracing::info!("emulated link on: {}", crate::inject::describe(&config.inject));
        }
        let (link_sink, link_events) = LinkSink::channel(config.record.event_queue);
        let live = Arc::new(LiveRegistry::default());
        let observation = Observation {
            events,
            link_events: link_sink,
            live: live.clone(),
            inject: Some(inject.clone()),
            rmem_max: sysctls.tcp_rmem.map(|[_, _, max]| max),
        };
        if let Some(path) = &config.report.path {
            crate::preflight::report_path(path).map_err(BindError::ReportPath)?;
        }
        // Before anything binds: a wide-open admin API must not even start listening.
        let admin_token = match config.admin.enabled {
            true => Some(token::resolve(&config.admin, std::env::var(ADMIN_TOKEN_ENV).ok())?),
            false => None,
        };
        let mut proxy = Proxy::bind(config.clone(), observation).await?;
        let admin = match admin_token {
            Some(token) => {
                let addr = config.admin.address;
                let listener = TcpListener::bind(addr).await.map_err(|source| BindError::Admin { addr, source })?;
                Some((listener, token))
            }
            None => None,
        };
        let mut engine = FindingsEngine::new(config.findings.clone());
        engine.keep_recent(config.report.window_max.get());
        engine.counts.set_top(config.metrics.top_statements);
        let findings = Arc::new(Mutex::new(engine));
        let expected = Expected::new(
            config.link.expected_rtt.map(|d| d.0),
            config.link.expected_bandwidth.map(|b| b.bits_per_second()),
        );
        let links = Arc::new(Mutex::new(Links::new(sysctls, expected)));
        let sources = admin::collectors::Sources {
            relay: proxy.stats(),
            dropped: dropped.clone(),
            buffers: proxy.buffers(),
            recording: recording.clone(),
            findings: findings.clone(),
            links: links.clone(),
            inject: inject.clone(),
            server_address: config.upstream.address.host().to_owned(),
        };
        let service_env = std::env::var("OTEL_SERVICE_NAME").ok();
        let metrics =
            admin::collectors::Metrics::new(sources, config.metrics.service.as_deref(), service_env.as_deref());
        let mut collector = Collector::new(rx, recording.clone());
        let emulation = inject.clone();
        collector.add_consumer(Box::new(FindingsConsumer::new(findings.clone(), move || {
            Emulated::of(&emulation.current())
        })));
        let state = Arc::new(AdminState {
            config: config.clone(),
            recording,
            catch_up: collector.catch_up(),
            findings: findings.clone(),
            links: links.clone(),
            inject,
            relay: proxy.stats(),
            live,
            dropped,
            tls_ca: proxy.generated_ca(),
            metrics,
        });
        if config.sql_view.enabled {
            proxy.answer_locally(Arc::new(SqlView::new(state.clone(), config.sql_view)));
        }
        Ok(Rttscope { config, proxy, admin, collector, link_events, state })
    }

    /// The first TCP address clients connect to (the real port when `listen` asked for port 0); an
    /// error when every listener is a Unix socket.
    pub fn mysql_addr(&self) -> io::Result<SocketAddr> {
        self.proxy.local_addr()
    }

    /// Every address clients connect to, as logs name them.
    pub fn listening(&self) -> Vec<String> {
        self.proxy.listening()
    }

    /// The admin API's address; an error with `admin: off`.
    pub fn admin_addr(&self) -> io::Result<SocketAddr> {
        match &self.admin {
            Some((listener, _)) => listener.local_addr(),
            None => Err(io::Error::new(io::ErrorKind::NotConnected, "the admin API is off (admin: off)")),
        }
    }

    /// What a reload (SIGHUP) may change while this runs.
    pub fn reloader(&self) -> Reloader {
        Reloader { loaded: Mutex::new((*self.config).clone()), inject: self.state.inject.clone() }
    }

    /// What the admin API reads (reports, live connections, the emulated link), for callers that
    /// skip HTTP: tests and embedders.
    pub fn state(&self) -> Arc<AdminState> {
        self.state.clone()
    }

    /// Serves until `shutdown` (writing snapshots every `report.every` meanwhile), drains,
    /// lets the collector apply every record, writes the final report (if `report.path`
    /// is set), and only
    /// then stops the admin API, so it stays readable while draining.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let Rttscope { config, proxy, admin, collector, link_events, state } = self;
        let collector = tokio::spawn(collector.run());
        let emulation = state.inject.clone();
        let link_collector =
            tokio::spawn(link::collect(link_events, state.links.clone(), move || Emulated::of(&emulation.current())));
        let stop_admin = CancellationToken::new();
        let admin_task = admin.map(|(listener, token)| {
            tokio::spawn(admin::serve(listener, state.clone(), token, stop_admin.clone().cancelled_owned()))
        });
        let stop_snapshots = CancellationToken::new();
        let snapshot_task = config.report.snapshots().map(|(every, dir)| {
            let snapshots = Snapshots { dir: dir.to_owned(), format: config.report.format, keep: config.report.keep };
            tracing::info!(dir = %dir.display(), every = %humantime::format_duration(every), "writing report snapshots");
            let of = state.clone();
            tokio::spawn(snapshots::run(every, snapshots, Arc::new(move || of.report()), stop_snapshots.clone()))
        });
        tokio::spawn(warn_if_unresolvable(config.upstream.address.clone()));
        let heap_trim = (!config.limits.heap_trim.is_zero())
            .then(|| tokio::spawn(crate::memory::trim_every(config.limits.heap_trim.0)));
        if let Some(path) = &config.report.path {
            let (state, format, path) = (state.clone(), config.report.format, path.clone());
            let _ = FINAL_REPORT.set(Box::new(move || write_final(&state.report(), format, &path)));
        }
        let served = proxy.run(shutdown).await;
        if let Some(task) = heap_trim {
            task.abort();
        }
        // Every sender is gone once the relay has stopped: this ends when the
        // last record is applied.
        let _ = collector.await;
        let _ = link_collector.await;
        // The final report (below) supersedes snapshots; one being written finishes first.
        stop_snapshots.cancel();
        if let Some(task) = snapshot_task {
            let _ = task.await;
        }
        let mut report_lost = None;
        if let Some(path) = &config.report.path {
            match write_final(&state.report(), config.report.format, path) {
                Ok(()) => tracing::info!(path = %path.display(), "final report written"),
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "cannot write the final report");
                    report_lost = Some(io::Error::new(e.kind(), format!("the final report was not written: {e}")));
                }
            }
        }
        stop_admin.cancel();
        if let Some(task) = admin_task {
            match task.await {
                Ok(Err(e)) => tracing::warn!(error = %e, "admin API stopped with an error"),
                Err(e) => tracing::warn!(error = %e, "admin API task failed"),
                Ok(Ok(())) => {}
            }
        }
        // A stop that lost the recording is not a clean one: the exit status says so.
        served.and(report_lost.map_or(Ok(()), Err))
    }
}
