//! rttscope assembled: the relay feeds records through a bounded channel to
//! the collector; the admin API and the final report read the aggregates.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rttscope_config::Config;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::admin::{self, AdminState};
use crate::findings::{FindingsConsumer, FindingsEngine};
use crate::inject::InjectControl;
use crate::link::{self, Links, LinksConsumer};
use crate::record::{micros, Aggregates, Collector, EventSink};
use crate::relay::Proxy;

pub struct Rttscope {
    config: Arc<Config>,
    proxy: Proxy,
    admin: TcpListener,
    collector: Collector,
    state: Arc<AdminState>,
}

impl Rttscope {
    /// Binds the MySQL listener and the admin API.
    pub async fn bind(config: Arc<Config>) -> io::Result<Rttscope> {
        let (sink, rx) = EventSink::channel(config.record.event_queue);
        let now = micros(tokio::time::Instant::now());
        let aggregates = Arc::new(Mutex::new(Aggregates::new(config.record.max_fingerprints, now)));
        let dropped = sink.dropped_counter();
        let events = config.record.enabled.then_some(sink);
        let sysctls = link::startup_check(&config);
        let inject = Arc::new(InjectControl::new(config.inject.clone()));
        if config.inject.is_active() {
            tracing::info!("emulated link on: {}", crate::inject::describe(&config.inject));
        }
        let proxy = Proxy::bind(config.clone(), events, Some(inject.clone()), sysctls.tcp_rmem.map(|[_, _, max]| max)).await?;
        let admin = TcpListener::bind(config.admin).await.map_err(|e| io::Error::new(e.kind(), format!("admin API on {}: {e}", config.admin)))?;
        let findings = Arc::new(Mutex::new(FindingsEngine::new(config.findings.clone())));
        let expected_bps = config.link.expected_bandwidth.map(|b| b.bits_per_second());
        let links = Arc::new(Mutex::new(Links::new(sysctls, expected_bps)));
        let state = Arc::new(AdminState {
            config: config.clone(),
            aggregates: aggregates.clone(),
            findings: findings.clone(),
            links: links.clone(),
            inject,
            relay: proxy.stats(),
            dropped,
        });
        let mut collector = Collector::new(rx, aggregates);
        collector.add_consumer(Box::new(FindingsConsumer(findings)));
        collector.add_consumer(Box::new(LinksConsumer(links)));
        Ok(Rttscope { config, proxy, admin, collector, state })
    }

    pub fn mysql_addr(&self) -> io::Result<SocketAddr> {
        self.proxy.local_addr()
    }

    pub fn admin_addr(&self) -> io::Result<SocketAddr> {
        self.admin.local_addr()
    }

    pub fn state(&self) -> Arc<AdminState> {
        self.state.clone()
    }

    /// Serves until `shutdown`, drains, lets the collector apply every
    /// record, writes the final report (if `report.path` is set), and only
    /// then stops the admin API, so it stays readable while draining.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let Rttscope { config, proxy, admin, collector, state } = self;
        let collector = tokio::spawn(collector.run());
        let stop_admin = CancellationToken::new();
        let admin_task = tokio::spawn(admin::serve(admin, state.clone(), stop_admin.clone().cancelled_owned()));
        let served = proxy.run(shutdown).await;
        // Every sender is gone once the relay has stopped: this ends when the
        // last record is applied.
        let _ = collector.await;
        if let Some(path) = &config.report.path {
            match admin::write_report(&state.report(), config.report.format, path) {
                Ok(()) => tracing::info!(path = %path.display(), "final report written"),
                Err(e) => tracing::error!(path = %path.display(), error = %e, "cannot write the final report"),
            }
        }
        stop_admin.cancel();
        match admin_task.await {
            Ok(Err(e)) => tracing::warn!(error = %e, "admin API stopped with an error"),
            Err(e) => tracing::warn!(error = %e, "admin API task failed"),
            Ok(Ok(())) => {}
        }
        served
    }
}
