//! The admin HTTP API: `/metrics` (Prometheus text), `/report` (JSON, or
//! `?format=text|html`; `?window=15m` for the last 15 minutes only), `/connections` (live), `GET/PUT /inject` (the
//! emulated link, replaced live), `/healthz`, `POST /reset`.
//! It reads what the collector aggregated; nothing here touches the
//! forwarding path.
//!
//! - `guard`: Host, token, JSON-only mutations, body limits, before any handler;
//! - `server`: the listener: connection cap, header timeout and size;
//! - `token`: where the token comes from, and the comparison;
//! - `metrics`: the Prometheus text writer.

pub mod collectors;
pub mod guard;
pub mod metrics;
mod server;
pub mod token;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rttscope_config::{AdminToken, Config, HumanDuration, Inject, ReportFormat};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::findings::FindingsEngine;
use crate::inject::InjectControl;
use crate::link::Links;
use crate::live::{Legs, LiveLink, LiveRegistry};
use crate::protocol::constants::command;
use crate::record::{CatchUp, Recording, WindowError, micros};
use crate::relay::RelayStats;
use crate::report::{self, Extras, Report};
use crate::sync::locked;

/// What the admin API reads.
pub struct AdminState {
    /// The effective configuration: the guard's rules and the report's scenarios come from it.
    pub config: Arc<Config>,
    /// What the collector recorded since start or the last `POST /reset`, cumulative and in
    /// rolling-window slots, shared with it under this lock.
    pub recording: Arc<Mutex<Recording>>,
    /// Applies what the collector has not yet: every reader here catches up first, so that
    /// what it reads includes every command that ended before it asked.
    pub catch_up: CatchUp,
    /// The findings engine the collector feeds: reports take their findings from it, `POST /reset`
    /// clears it.
    pub findings: Arc<Mutex<FindingsEngine>>,
    /// Recent verdicts on the upstream link (the last 100), for `links[]`; the link collector adds
    /// them.
    pub links: Arc<Mutex<Links>>,
    /// The emulated link's live settings: `GET`/`PUT /inject` and `SET RTTSCOPE` read and replace them.
    pub inject: Arc<InjectControl>,
    /// The relay's lock-free counters, for readers of the state; `/metrics` reads them through its
    /// own collector.
    pub relay: Arc<RelayStats>,
    /// The open connections, as their tasks describe them.
    pub live: Arc<LiveRegistry>,
    /// Records the collector lost because its queue was full; becomes `totals.events_dropped`.
    pub dropped: Arc<AtomicU64>,
    /// The CA of rttscope's generated client-side certificate (PEM), if it made one.
    pub tls_ca: Option<String>,
    /// What `/metrics` exposes: a collector per part, under the service's label.
    pub metrics: collectors::Metrics,
}

impl AdminState {
    /// The recording, with every queued event applied ([`CatchUp`]).
    fn recording(&self) -> MutexGuard<'_, Recording> {
        self.catch_up.now();
        // A panic while holding the lock would be a bug in the collector;
        // the data is still the best we have, so keep serving it.
        locked(&self.recording)
    }

    fn findings(&self) -> MutexGuard<'_, FindingsEngine> {
        locked(&self.findings)
    }

    fn links(&self) -> MutexGuard<'_, Links> {
        locked(&self.links)
    }

    /// A report of everything recorded so far.
    pub fn report(&self) -> Report {
        let now = micros(tokio::time::Instant::now());
        // Lock order: recording, then findings. The collector never holds both.
        let recording = self.recording();
        let aggregates = recording.cumulative();
        let conn_time = |id: u64| aggregates.connections().find(|c| c.id == id).map_or(0, |c| c.latency.sum());
        let findings = self.findings().report(&conn_time);
        let links = self.links().recent().cloned().collect();
        let extras = Extras { events_dropped: self.dropped.load(Ordering::Relaxed), findings, links };
        Report::build(&aggregates, now, &self.config.findings.scenarios, extras)
    }

    /// A report of the last `window` only (see [`Windows::window`](crate::record::Windows::window)).
    pub fn window_report(&self, window: std::time::Duration) -> Result<Report, WindowError> {
        let now = micros(tokio::time::Instant::now());
        let requested = u64::try_from(window.as_micros()).unwrap_or(u64::MAX);
        // Merged under the recording's lock alone; the links are read after it is released.
        let merged = self.recording().window(now, requested)?;
        let conn_time = |id: u64| merged.aggregates.connections().find(|c| c.id == id).map_or(0, |c| c.latency.sum());
        let findings = self.findings().report_since(merged.aggregates.since_us, &conn_time);
        let links: Vec<_> = self.links().recent().cloned().collect();
        Ok(Report::build_window(&merged, requested, now, &self.config.findings.scenarios, findings, links))
    }

    /// The Prometheus exposition.
    pub fn metrics(&self) -> String {
        self.catch_up.now();
        self.metrics.encode()
    }

    fn reset(&self) {
        let now = micros(tokio::time::Instant::now());
        self.recording().reset(now);
        self.findings().reset();
        self.links().reset();
    }
}

/// Serves the admin API on `listener` until `shutdown` completes, behind the guard
/// (`token` is the one [`token::resolve`] found).
pub async fn serve(
    listener: TcpListener,
    state: Arc<AdminState>,
    token: Option<AdminToken>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let admin = state.config.admin.clone();
    let guard = Arc::new(guard::Guard::new(&admin, token));
    let router = router(state).layer(axum::middleware::from_fn_with_state(guard, guard::guard));
    server::serve(listener, router, admin, shutdown).await
}

/// The routes without the guard: [`serve`] adds it, so nothing else may serve these.
pub(crate) fn router(state: Arc<AdminState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/report", get(report_handler))
        .route("/connections", get(connections_handler))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/reset", post(reset_handler))
        .route("/inject", get(get_inject).put(put_inject))
        .route("/tls/ca.pem", get(tls_ca_handler))
        .with_state(state)
}

async fn metrics_handler(State(state): State<Arc<AdminState>>) -> Response {
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], state.metrics()).into_response()
}

#[derive(Deserialize)]
struct ReportQuery {
    format: Option<String>,
    /// `15m`: the last 15 minutes only; absent: everything recorded.
    window: Option<String>,
}

async fn report_handler(State(state): State<Arc<AdminState>>, Query(q): Query<ReportQuery>) -> Response {
    let bad = |message: String| (StatusCode::BAD_REQUEST, format!("{message}\n")).into_response();
    let format = match q.format.as_deref().map(str::parse::<ReportFormat>) {
        None => ReportFormat::Json,
        Some(Ok(f)) => f,
        Some(Err(e)) => return bad(e.to_string()),
    };
    let report = match q.window.as_deref().map(str::parse::<HumanDuration>) {
        None => state.report(),
        Some(Err(e)) => return bad(format!("window: {e}")),
        Some(Ok(window)) => match state.window_report(window.get()) {
            Ok(report) => report,
            Err(e) => return bad(format!("window: {e}")),
        },
    };
    render(&report, format)
}

/// A report in the wanted format, as an HTTP response.
fn render(report: &Report, format: ReportFormat) -> Response {
    let content_type = match format {
        ReportFormat::Json => "application/json",
        ReportFormat::Text => "text/plain; charset=utf-8",
        ReportFormat::Html => "text/html; charset=utf-8",
    };
    match report::render(report, format) {
        Ok(body) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot render the report: {e}\n")).into_response(),
    }
}

/// One open connection, as `/connections` shows it.
#[derive(Debug, Serialize, Deserialize)]
pub struct LiveConnectionView {
    /// rttscope's connection id, as in its logs and `connections[].id` of the report.
    pub id: u64,
    /// The client's `ip:port`, or `unix:<path>` when it came through a Unix socket.
    pub client: String,
    /// The user it logged in as, or last changed to.
    pub user: String,
    /// Its default schema; `None` when it has not chosen one.
    pub schema: Option<String>,
    /// Since the connection was accepted, µs.
    pub open_for_us: u64,
    /// The command in flight (`COM_QUERY`, ...); `None` when idle.
    pub current_command: Option<String>,
    /// How long the command in flight has taken so far, µs; `None` when idle.
    pub current_for_us: Option<u64>,
    /// The statement in flight (normalised), when recording knows it.
    #[serde(default)]
    pub current_statement: Option<String>,
    /// Totals since the connection opened (zero when recording is off).
    pub commands: u64,
    /// Of them, commands answered with an ERR packet.
    pub errors: u64,
    /// Request/response exchanges with the server; pipelined commands share one.
    pub round_trips: u64,
    /// Client → server: the MySQL packet stream, 4-byte packet headers included (before compression
    /// and TLS).
    pub bytes_up: u64,
    /// Server → client, counted as `bytes_up` is.
    pub bytes_down: u64,
    /// Median request-to-last-byte time of its commands, µs (within 1 %: an hdrhistogram).
    pub latency_p50_us: u64,
    /// The latest kernel readings of the upstream and client sockets.
    pub link: Option<LiveLink>,
    /// How each leg is carried (TLS version and cipher, compression) and the client library.
    #[serde(default)]
    pub legs: Option<Legs>,
}

async fn connections_handler(State(state): State<Arc<AdminState>>) -> Json<Vec<LiveConnectionView>> {
    let now = micros(tokio::time::Instant::now());
    let open = state.live.snapshot();
    let recording = state.recording();
    let views = open
        .iter()
        .map(|live| {
            let identity = live.identity();
            let current = live.in_flight();
            let stats = recording.connection(live.id);
            let stats = stats.as_deref();
            LiveConnectionView {
                id: live.id,
                client: live.client.clone(),
                user: identity.user.to_string(),
                schema: identity.schema.as_deref().map(str::to_owned),
                open_for_us: now.saturating_sub(live.opened_us),
                current_command: current.as_ref().map(|c| command::name(c.command).to_owned()),
                current_for_us: current.as_ref().map(|c| now.saturating_sub(c.since_us)),
                current_statement: current.and_then(|c| c.statement).map(|s| s.to_string()),
                commands: stats.map_or(0, |c| c.commands),
                errors: stats.map_or(0, |c| c.errors),
                round_trips: stats.map_or(0, |c| c.round_trips),
                bytes_up: stats.map_or(0, |c| c.bytes_up),
                bytes_down: stats.map_or(0, |c| c.bytes_down),
                latency_p50_us: stats.map_or(0, |c| c.latency.summary().p50),
                link: live.link(),
                legs: live.legs(),
            }
        })
        .collect();
    Json(views)
}

/// The CA that signed rttscope's generated certificate: what a client that verifies
/// (`--ssl-mode=VERIFY_CA`) trusts. A public certificate: nothing secret.
async fn tls_ca_handler(State(state): State<Arc<AdminState>>) -> Response {
    match &state.tls_ca {
        Some(pem) => ([(header::CONTENT_TYPE, "application/x-pem-file")], pem.clone()).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "rttscope did not generate a certificate (listen.tls has cert and key, or is off)\n",
        )
            .into_response(),
    }
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
            let problems: Vec<_> =
                e.problems().into_iter().map(|p| serde_json::json!({"key": p.path, "message": p.message})).collect();
            (StatusCode::BAD_REQUEST, Json(serde_json::json!({"error": e.to_string(), "problems": problems})))
                .into_response()
        }
    }
}

async fn reset_handler(State(state): State<Arc<AdminState>>) -> Response {
    state.reset();
    tracing::info!("recorded data reset through the admin API");
    (StatusCode::OK, Json(serde_json::json!({"reset": true}))).into_response()
}
