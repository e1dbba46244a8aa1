//! The admin HTTP API: `/metrics` (Prometheus text), `/report` (JSON, or
//! `?format=text|html`), `/connections` (live), `GET/PUT /inject` (the
//! emulated link, replaced live), `/healthz`, `POST /reset`.
//! It reads what the collector aggregated; nothing here touches the
//! forwarding path.

pub mod client;
pub mod metrics;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rttscope_config::{Config, Inject, ReportFormat};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::findings::FindingsEngine;
use crate::inject::InjectControl;
use crate::link::Links;
use crate::protocol::constants::command;
use crate::record::{micros, Aggregates, LiveLink};
use crate::relay::RelayStats;
use crate::report::{render_html, render_text, Extras, Report};
use metrics::MetricsWriter;

/// What the admin API reads.
pub struct AdminState {
    pub config: Arc<Config>,
    pub aggregates: Arc<Mutex<Aggregates>>,
    pub findings: Arc<Mutex<FindingsEngine>>,
    pub links: Arc<Mutex<Links>>,
    pub inject: Arc<InjectControl>,
    pub relay: Arc<RelayStats>,
    pub dropped: Arc<AtomicU64>,
}

impl AdminState {
    fn aggregates(&self) -> MutexGuard<'_, Aggregates> {
        // A panic while holding the lock would be a bug in the collector;
        // the data is still the best we have, so keep serving it.
        self.aggregates.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn findings(&self) -> MutexGuard<'_, FindingsEngine> {
        self.findings.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn links(&self) -> MutexGuard<'_, Links> {
        self.links.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A report of everything recorded so far.
    pub fn report(&self) -> Report {
        let now = micros(tokio::time::Instant::now());
        // Lock order: aggregates, then findings. The collector never holds both.
        let aggregates = self.aggregates();
        let conn_time = |id: u64| aggregates.connections().find(|c| c.id == id).map_or(0, |c| c.latency.sum());
        let findings = self.findings().report(&conn_time);
        let links = self.links().report();
        let extras = Extras { events_dropped: self.dropped.load(Ordering::Relaxed), findings, links };
        Report::build(&aggregates, now, &self.config.findings.scenarios, extras)
    }

    /// The Prometheus exposition.
    pub fn metrics(&self) -> String {
        let mut w = MetricsWriter::new();
        let relay = &self.relay;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        w.gauge("rttscope_connections_active", "Client connections open now.", load(&relay.connections_active) as f64);
        w.counter("rttscope_connections_total", "Client connections accepted.", load(&relay.connections_accepted));
        w.counter("rttscope_connections_rejected_total", "Clients refused at limits.max_connections.", load(&relay.connections_rejected));
        w.counter("rttscope_upstream_connect_errors_total", "Upstream dials that failed or timed out.", load(&relay.upstream_connect_errors));
        w.counter("rttscope_protocol_errors_total", "Connections closed for a protocol violation.", load(&relay.protocol_errors));
        w.counter("rttscope_records_dropped_total", "Command records dropped because the collector fell behind.", load(&self.dropped));
        let a = self.aggregates();
        let m = &a.metrics;
        w.labelled_counter("rttscope_commands_total", "Commands relayed, by command.", "command", m.by_command().map(|(c, n, _)| (c, n)));
        w.labelled_counter("rttscope_command_errors_total", "Commands answered with an error, by command.", "command", m.by_command().map(|(c, _, e)| (c, e)));
        w.counter("rttscope_round_trips_total", "Request/response exchanges with the upstream server.", m.round_trips);
        w.histogram("rttscope_query_duration_seconds", "Time from a command's first byte to the last byte of its response.", &m.duration_seconds);
        w.histogram("rttscope_query_first_byte_seconds", "Time from a command's first byte to the first byte of its response (server time plus one round trip).", &m.first_byte_seconds);
        w.histogram("rttscope_result_bytes", "Bytes in each response.", &m.result_bytes);
        w.gauge("rttscope_statement_classes", "Statement fingerprints tracked in the current window.", a.queries().len() as f64);
        drop(a);
        let f = self.findings();
        w.labelled_counter("rttscope_findings_total", "Query-pattern occurrences found, by kind.", "kind", f.counts.iter().map(|(k, n)| (*k, *n)));
        drop(f);
        let l = self.links();
        w.histogram("rttscope_upstream_rtt_seconds", "Upstream base RTT as the kernel measured it, per command.", &l.rtt);
        w.labelled_counter("rttscope_link_transfers_total", "Large transfers (and runs of small responses), by the limit that held them back.", "limit", l.totals.iter().map(|(k, (n, _))| (*k, *n)));
        drop(l);
        let inject = self.inject.current();
        w.gauge("rttscope_inject_active", "1 when an emulated link is on.", if inject.is_active() { 1.0 } else { 0.0 });
        w.gauge("rttscope_inject_rtt_seconds", "The emulated round-trip time.", inject.rtt.0.as_secs_f64());
        let l = self.links();
        w.labelled_counter_f64(
            "rttscope_link_limited_seconds_total",
            "Time transfers spent held back by each limit.",
            "limit",
            l.totals.iter().map(|(k, (_, us))| (*k, *us as f64 / 1e6)),
        );
        w.finish()
    }

    fn reset(&self) {
        self.aggregates().reset(micros(tokio::time::Instant::now()));
        self.findings().reset();
        self.links().reset();
    }
}

/// Serves the admin API on `listener` until `shutdown` completes.
pub async fn serve(listener: TcpListener, state: Arc<AdminState>, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown).await
}

pub fn router(state: Arc<AdminState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/report", get(report_handler))
        .route("/connections", get(connections_handler))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/reset", post(reset_handler))
        .route("/inject", get(get_inject).put(put_inject))
        .with_state(state)
}

async fn metrics_handler(State(state): State<Arc<AdminState>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], state.metrics()).into_response()
}

#[derive(Deserialize)]
struct ReportQuery {
    format: Option<String>,
}

async fn report_handler(State(state): State<Arc<AdminState>>, Query(q): Query<ReportQuery>) -> Response {
    let format = match q.format.as_deref().map(str::parse::<ReportFormat>) {
        None => ReportFormat::Json,
        Some(Ok(f)) => f,
        Some(Err(e)) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    };
    render(&state.report(), format)
}

/// A report in the wanted format, as an HTTP response.
pub fn render(report: &Report, format: ReportFormat) -> Response {
    match format {
        ReportFormat::Json => Json(report).into_response(),
        ReportFormat::Text => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], render_text(report)).into_response(),
        ReportFormat::Html => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], render_html(report)).into_response(),
    }
}

/// One open connection, as `/connections` shows it.
#[derive(Debug, Serialize, Deserialize)]
pub struct LiveConnectionView {
    pub id: u64,
    pub client: String,
    pub user: String,
    pub schema: Option<String>,
    pub open_for_us: u64,
    /// The command in flight, if any, and for how long.
    pub current_command: Option<String>,
    pub current_for_us: Option<u64>,
    pub commands: u64,
    pub errors: u64,
    pub round_trips: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub latency_p50_us: u64,
    /// The latest kernel readings of the upstream and client sockets.
    pub link: Option<LiveLink>,
}

async fn connections_handler(State(state): State<Arc<AdminState>>) -> Json<Vec<LiveConnectionView>> {
    let now = micros(tokio::time::Instant::now());
    let a = state.aggregates();
    let views = a
        .live_connections()
        .into_iter()
        .map(|c| {
            let current = c.live.as_ref().and_then(|l| l.current());
            LiveConnectionView {
                id: c.id,
                client: c.client.to_string(),
                user: c.user.to_string(),
                schema: c.schema.as_deref().map(str::to_owned),
                open_for_us: now.saturating_sub(c.opened_us),
                current_command: current.map(|(cmd, _)| command::name(cmd).to_owned()),
                current_for_us: current.map(|(_, since)| now.saturating_sub(since)),
                commands: c.commands,
                errors: c.errors,
                round_trips: c.round_trips,
                bytes_up: c.bytes_up,
                bytes_down: c.bytes_down,
                latency_p50_us: c.latency.summary().p50,
                link: c.live.as_ref().and_then(|l| l.link()),
            }
        })
        .collect();
    Json(views)
}

async fn get_inject(State(state): State<Arc<AdminState>>) -> Json<Inject> {
    Json(state.inject.current().as_ref().clone())
}

/// Replaces the emulated link for existing and new connections at once.
/// Bad values are refused whole, naming each key.
async fn put_inject(State(state): State<Arc<AdminState>>, body: String) -> Response {
    match Inject::from_json(&body) {
        Ok(inject) => {
            state.inject.replace(inject.clone());
            Json(inject).into_response()
        }
        Err(e) => {
            let problems: Vec<_> = e.problems().into_iter().map(|p| serde_json::json!({"key": p.path, "message": p.message})).collect();
            (StatusCode::BAD_REQUEST, Json(serde_json::json!({"error": e.to_string(), "problems": problems}))).into_response()
        }
    }
}

async fn reset_handler(State(state): State<Arc<AdminState>>) -> Response {
    state.reset();
    tracing::info!("recorded data reset through the admin API");
    (StatusCode::OK, Json(serde_json::json!({"reset": true}))).into_response()
}

/// Writes the report to `path` in `format`, atomically (temp file, rename).
pub fn write_report(report: &Report, format: ReportFormat, path: &std::path::Path) -> std::io::Result<()> {
    let body = match format {
        ReportFormat::Json => serde_json::to_string_pretty(report).map_err(std::io::Error::other)?,
        ReportFormat::Text => render_text(report),
        ReportFormat::Html => render_html(report),
    };
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, body)?;
    std::fs::rename(&tmp, path)
}
