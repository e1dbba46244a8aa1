//! Reports: the versioned JSON schema (documented in `docs/report-schema.md`), and its text
//! and HTML renderings. The one place the schema is built: from the aggregates, the findings
//! engine's [`Assessed`] findings and the link's [`LinkVerdict`]s, typed values all.
//!
//! - `mod.rs`: the report, its totals, statements, connections and recording-wide what-ifs;
//! - `finding`: `findings[]`, with a typed evidence object per kind;
//! - `link`: `links[]`;
//! - `window`: `window`, the stretch of the recording a report covers;
//! - `atomic`: writing a report file whole or not at all; `snapshots`: the periodic ones;
//! - `text`, `html`: the renderings, which show untrusted text through `escape`;
//! - `diff`: two reports compared (`rttscope report --diff`), and its renderings.

mod atomic;
pub mod diff;
mod escape;
mod finding;
mod html;
mod link;
pub mod snapshots;
mod text;
mod window;
mod words;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use rttscope_config::{ReportFormat, Scenario};

use crate::findings::Assessed;
use crate::findings::whatif::{Measured, Projection, project, projections};
use crate::link::LinkVerdict;
use crate::live::Legs;
use crate::protocol::constants::command;
pub use crate::record::Totals;
use crate::record::{Aggregates, ConnectionStats, LatencySummary, OTHER_FINGERPRINT, QueryStats, Window};

pub use finding::{
    ChattyEvidence, ChurnEvidence, CompressionEvidence, CompressionSaving, Evidence, EvidenceDetail, FetchEvidence,
    FindingReport, LoopEvidence, PagesEvidence, StatementRoundTrips, WhatIf,
};
pub use html::render_html;
pub use link::LinkReport;
pub use text::render_text;
pub use window::{WindowKind, WindowReport};

/// The report in `format`: pretty JSON (the versioned schema), text or a
/// self-contained HTML page. The one place every output path renders.
pub fn render(report: &Report, format: ReportFormat) -> Result<String, serde_json::Error> {
    Ok(match format {
        ReportFormat::Json => serde_json::to_string_pretty(report)? + "\n",
        ReportFormat::Text => render_text(report),
        ReportFormat::Html => render_html(report),
    })
}

/// Writes the report to `path` in `format`, atomically and durably (a temporary file
/// beside it, fsync, then a rename), so a reader never sees half a report.
pub fn write(report: &Report, format: ReportFormat, path: &std::path::Path) -> std::io::Result<()> {
    let body = render(report, format).map_err(std::io::Error::other)?;
    atomic::write(path, body.as_bytes())
}

/// Whether [`write`] could write a report at `path` (creating and removing its temporary file).
pub fn check_writable(path: &std::path::Path) -> std::io::Result<()> {
    atomic::check_writable(path)
}

/// The directory a report at `path` is written into (`.` for a bare file name).
pub fn directory(path: &std::path::Path) -> &std::path::Path {
    atomic::directory(path)
}

/// Bumped on any incompatible change to the JSON below.
pub const SCHEMA_VERSION: u32 = 3;

/// A whole report: the schema's top level (`docs/report-schema.md`), what `GET /report`,
/// `report.path`, the snapshots and `rttscope report --format json` serialise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`] when built here; `rttscope report FILE` refuses any other before parsing
    /// the rest.
    pub schema_version: u32,
    /// `rttscope <version>`: the build that wrote the report.
    pub generator: String,
    /// RFC 3339, UTC.
    pub generated_at: String,
    /// Length of the recording window (since start or the last reset, or the rolling
    /// window asked for), µs.
    pub window_us: u64,
    /// Which stretch of the recording this covers. `None` only in reports written before
    /// it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowReport>,
    /// Everything recorded in the window; its `events_dropped` comes from [`Extras`], not the
    /// aggregates.
    pub totals: Totals,
    /// One entry per statement class, by total time, slowest first.
    pub queries: Vec<QueryReport>,
    /// Open connections, then recently closed ones.
    pub connections: Vec<ConnectionReport>,
    /// Query-pattern findings, by what they would cost at the reference RTT, highest first.
    pub findings: Vec<FindingReport>,
    /// Verdicts on the upstream link for large transfers, oldest first (the last 100); in a rolling
    /// report, only those made in the window.
    pub links: Vec<LinkReport>,
    /// The recording and each connection projected onto each scenario's link.
    #[serde(default)]
    pub what_if: Vec<WhatIfReport>,
}

/// One scenario's projection of the whole recording and of each connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WhatIfReport {
    /// The scenario's name, from `findings.scenarios`.
    pub scenario: String,
    /// The scenario's round-trip time, µs, charged once per round trip.
    pub rtt_us: u64,
    /// The scenario's bandwidth, bits per second, charged for the long hop's wire bytes; `None`:
    /// unlimited.
    pub bandwidth_bps: Option<u64>,
    /// Time in commands, all connections together, as the wall clock saw it.
    pub recording: ProjectedTime,
    /// Each connection's time in commands.
    pub connections: Vec<ConnectionProjection>,
    /// The recording's projection in a sentence, as the text and HTML renderings show it.
    pub summary: String,
}

impl WhatIfReport {
    /// The recording's projection, in the shape a finding's has.
    pub fn projection(&self) -> Projection {
        Projection {
            scenario: self.scenario.clone(),
            rtt_us: self.rtt_us,
            bandwidth_bps: self.bandwidth_bps,
            observed_us: self.recording.observed_us,
            base_us: self.recording.base_us,
            projected_us: self.recording.projected_us,
            summary: self.summary.clone(),
        }
    }
}

/// `what_if[].recording`: time in commands as recorded, beside the same work over a scenario's
/// link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectedTime {
    /// Wall time during which some command was in flight here, µs (`totals.busy_us`).
    pub observed_us: u64,
    /// The same without the emulated link and the real path's round trips: where the
    /// projection starts, µs.
    #[serde(default)]
    pub base_us: u64,
    /// The same over the scenario's link, µs: projected from the time without the emulated link
    /// and the real path's round trips, as every finding's is (`docs/time-model.md`).
    pub projected_us: u64,
}

/// `what_if[].connections[]`: one connection's time in commands, here and over a scenario's link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionProjection {
    /// The connection, as `connections[].id`.
    pub id: u64,
    /// Its time in commands here (request to last byte, summed), µs.
    pub observed_us: u64,
    /// Its time in commands over the scenario's link, µs.
    pub projected_us: u64,
}

/// `queries[]`: one statement class (every execution sharing a fingerprint), or the `other`
/// bucket that classes past `record.max_fingerprints` fold into.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryReport {
    /// Normalised statement (`select * from t where id = ?`), or the command
    /// name for commands without SQL (`COM_PING`).
    pub fingerprint: String,
    /// 16 hex digits; `0000000000000000` for the `other` bucket.
    pub fingerprint_id: String,
    /// `select`, `insert`, `update`, `delete`, `replace`, `call`, or `other` (other statements,
    /// commands without SQL, and the `other` bucket).
    pub kind: String,
    /// Executions (COM_QUERY, COM_STMT_EXECUTE, or the command itself).
    pub count: u64,
    /// Commands attributed here that got an ERR packet.
    pub errors: u64,
    /// Every request/response exchange, prepares and fetches included.
    pub round_trips: u64,
    /// Request to first response byte: the server's work plus one round trip.
    pub first_byte_us: LatencySummary,
    /// Request to last response byte: plus the transfer.
    pub latency_us: LatencySummary,
    /// Rows returned: in total, and by the largest single command.
    pub rows: RowsReport,
    /// Bytes each way: the MySQL packet stream, and what crossed the long hop's wire.
    pub bytes: BytesReport,
    /// Commands attributed to this statement, by name.
    pub commands: BTreeMap<String, u64>,
    /// Share of all recorded time, 0–1.
    pub time_share: f64,
    /// Latency histogram: `[upper bound µs (power of two), count]`.
    pub distribution: Vec<[u64; 2]>,
    /// Statement classes folded into the `other` bucket (0 otherwise).
    #[serde(default)]
    pub folded: u64,
    /// Of `latency_us.sum`, what the emulated link added; the rest is the
    /// server's own time (0 without injection).
    #[serde(default)]
    pub injected_us: u64,
    /// A literal example; only with `report.examples: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
    /// Executions whose response rttscope could not follow (forwarded anyway; their
    /// counts are partial). 0 normally.
    #[serde(default)]
    pub unparsed: u64,
    /// Executions held up by a retransmission on the long hop.
    #[serde(default)]
    pub retransmission_waits: RetransmissionWaits,
    /// How well its results compress, measured on samples while the long hop was not
    /// compressed; absent when nothing was sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compressibility: Option<CompressibilityReport>,
}

/// `queries[].compressibility`: slices of large results compressed with zlib (the
/// compressed protocol's default), off the forwarding path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompressibilityReport {
    /// Responses sampled: one large response in 16 per connection, 64 KiB of each past its first
    /// 16 KiB.
    pub samples: u64,
    /// Bytes of them sampled: the packet stream, 4-byte headers included.
    pub sampled_bytes: u64,
    /// What zlib at its default level made of `sampled_bytes`.
    pub compressed_bytes: u64,
    /// `sampled_bytes / compressed_bytes`: 2.0 is 2:1.
    pub ratio: f64,
}

/// `queries[].retransmission_waits`: the executions whose command or response waited for a
/// lost segment to be sent again (the long-haul socket retransmitted, or received segments
/// behind a hole, while they were in flight).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RetransmissionWaits {
    /// Executions that waited for a retransmission.
    pub count: u64,
    /// Of the executions at or above the statement's p99, how many waited.
    pub at_or_above_p99: u64,
    /// Their latencies, request to last byte.
    pub latency_us: LatencySummary,
}

impl RetransmissionWaits {
    /// "p99 410 ms: 3 of 1,000 executions waited for a retransmission (…)"; `None` when none did.
    pub fn sentence(&self, executions: u64, latency: &LatencySummary) -> Option<String> {
        (self.count > 0).then(|| {
            format!(
                "p99 {}: {} of {} waited for a retransmission, {} of them at or above p99; they took p50 {}, max {}",
                crate::human::us(latency.p99),
                crate::human::count(self.count),
                crate::human::counted(executions, "execution", "executions"),
                crate::human::count(self.at_or_above_p99),
                crate::human::us(self.latency_us.p50),
                crate::human::us(self.latency_us.max)
            )
        })
    }
}

/// `queries[].rows`: the rows a statement's result sets returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowsReport {
    /// Over every execution.
    pub sum: u64,
    /// By the largest single command.
    pub max: u64,
}

/// `queries[].bytes` and `connections[].bytes`: payload bytes each way, and what crossed the long
/// hop's wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BytesReport {
    /// Client → server: the MySQL packet stream, 4-byte packet headers included (before compression
    /// and TLS).
    pub up: u64,
    /// Server → client, counted as `up` is.
    pub down: u64,
    /// The largest single response, bytes; always 0 in `connections[]`.
    pub max_down: u64,
    /// What crossed the long hop's wire, up and down: less than `up`/`down` when it is compressed.
    #[serde(default)]
    pub wire_up: u64,
    /// Of `down`, what crossed the long hop's wire: compressed frames with their 7-byte headers when
    /// the upstream leg is compressed, else the same as `down`.
    #[serde(default)]
    pub wire_down: u64,
}

impl BytesReport {
    /// Payload bytes per wire byte on the long hop (both ways), when they differ: the
    /// compressed protocol's ratio there.
    pub fn wire_ratio(&self) -> Option<f64> {
        let (payload, wire) = (self.up + self.down, self.wire_up + self.wire_down);
        (wire > 0 && wire != payload).then(|| payload as f64 / wire as f64)
    }

    /// ", on the long hop's wire 1.2 KiB up, 40.0 KiB down (12.3:1)", when it differs.
    pub fn wire_words(&self) -> String {
        self.wire_ratio().map_or(String::new(), |ratio| {
            format!(
                ", on the long hop's wire {} up, {} down ({ratio:.1}:1)",
                crate::human::bytes(self.wire_up),
                crate::human::bytes(self.wire_down)
            )
        })
    }
}

/// `connections[]`: one client connection's figures in the window, open or recently closed (the
/// last 256 closed are kept).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionReport {
    /// rttscope's connection id, as in its logs, `/connections` and `links[].conn_id`.
    pub id: u64,
    /// The client's `ip:port`, or `unix:<path>` when it came through a Unix socket.
    pub client: String,
    /// The user it logged in as, or last changed to (`COM_CHANGE_USER`).
    pub user: String,
    /// Its default schema; `None` when it never chose one.
    pub schema: Option<String>,
    /// Still open when the report was built (then `closed_at_us` is `None`).
    pub open: bool,
    /// Since the start of the window, µs (negative numbers clamp to 0).
    pub opened_at_us: u64,
    /// When it closed, µs since the window's start (clamped at 0); `None` while open.
    pub closed_at_us: Option<u64>,
    /// Commands recorded on it, counted as `totals.commands` counts them.
    pub commands: u64,
    /// Its commands answered with an ERR packet.
    pub errors: u64,
    /// Request/response exchanges with the server; pipelined commands share one.
    pub round_trips: u64,
    /// Its commands' request-to-last-byte times.
    pub latency_us: LatencySummary,
    /// Its bytes each way; `max_down` is always 0.
    pub bytes: BytesReport,
    /// Rows its commands returned.
    pub rows: u64,
    /// How each leg is carried (TLS version and cipher, compression) and the client library.
    #[serde(default)]
    pub legs: Legs,
}

/// What a report is built from besides the aggregates.
#[derive(Default)]
pub struct Extras {
    /// The findings, ranked.
    pub findings: Vec<Assessed>,
    /// The recent link verdicts, newest last.
    pub links: Vec<LinkVerdict>,
    /// Records the collector lost because its queue was full; becomes `totals.events_dropped`.
    pub events_dropped: u64,
}

impl Report {
    /// A cumulative report: everything in `aggregates` from their start (or last reset) to `now_us`,
    /// projected onto each of `scenarios`.
    pub fn build(aggregates: &Aggregates, now_us: u64, scenarios: &[Scenario], extras: Extras) -> Report {
        let since = aggregates.since_us;
        let mut t = aggregates.totals();
        // Commands straddling two rolling-window slots are counted in both.
        t.busy_us = t.busy_us.min(now_us.saturating_sub(since));
        let total_time = t.time_us.max(1) as f64;
        let queries = aggregates.queries().into_iter().map(|q| query_report(q, total_time)).collect();
        let connections = aggregates.connections().map(|c| connection_report(c, since)).collect();
        Report {
            schema_version: SCHEMA_VERSION,
            generator: format!("rttscope {}", env!("CARGO_PKG_VERSION")),
            generated_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            window_us: now_us.saturating_sub(since),
            window: Some(WindowReport::cumulative(since, now_us)),
            totals: Totals { events_dropped: extras.events_dropped, ..t },
            queries,
            connections,
            findings: extras.findings.iter().map(FindingReport::from).collect(),
            links: extras.links.iter().map(LinkReport::from).collect(),
            what_if: what_if(aggregates, &t, scenarios),
        }
    }
}

impl Report {
    /// A report of a rolling window: its statements, totals, connections and what-ifs,
    /// the link verdicts made in it, and `findings`, the engine's of the same window
    /// ([`FindingsEngine::report_since`](crate::findings::FindingsEngine::report_since)).
    pub fn build_window(
        window: &Window,
        requested_us: u64,
        now_us: u64,
        scenarios: &[Scenario],
        findings: Vec<Assessed>,
        links: impl IntoIterator<Item = LinkVerdict>,
    ) -> Report {
        let start = window.aggregates.since_us;
        let extras = Extras {
            findings,
            links: links.into_iter().filter(|l| l.at_us >= start).collect(),
            events_dropped: window.events_dropped,
        };
        let mut report = Report::build(&window.aggregates, now_us, scenarios, extras);
        report.window = Some(WindowReport::rolling(start, now_us, requested_us, window.resolution_us));
        report
    }
}

fn what_if(a: &Aggregates, t: &Totals, scenarios: &[Scenario]) -> Vec<WhatIfReport> {
    let recording = Measured {
        commands_us: t.time_us,
        wall_us: t.busy_us,
        round_trips: t.round_trips,
        bytes: t.wire_up + t.wire_down,
        observed_rtt_us: u64::from(a.rtt_us),
        injected_us: t.injected_us,
        large_responses: t.large_responses,
    };
    projections(recording, scenarios)
        .into_iter()
        .map(|p| {
            let connections = a
                .connections()
                .map(|c| {
                    // One connection's commands follow one another: their sum is their wall time.
                    let m = Measured {
                        commands_us: c.latency.sum(),
                        wall_us: c.latency.sum(),
                        round_trips: c.round_trips,
                        bytes: c.wire_up + c.wire_down,
                        observed_rtt_us: u64::from(c.rtt_us),
                        injected_us: c.injected_us,
                        large_responses: c.large_responses,
                    };
                    ConnectionProjection {
                        id: c.id,
                        observed_us: m.wall_us,
                        projected_us: project(m, p.rtt_us, p.bandwidth_bps),
                    }
                })
                .collect();
            WhatIfReport {
                scenario: p.scenario,
                rtt_us: p.rtt_us,
                bandwidth_bps: p.bandwidth_bps,
                recording: ProjectedTime {
                    observed_us: p.observed_us,
                    base_us: p.base_us,
                    projected_us: p.projected_us,
                },
                connections,
                summary: p.summary,
            }
        })
        .collect()
}

fn query_report(q: &QueryStats, total_time: f64) -> QueryReport {
    let id = q.fingerprint.to_string();
    QueryReport {
        fingerprint: q.text.to_string(),
        kind: if q.fingerprint == OTHER_FINGERPRINT { "other".into() } else { q.kind.as_str().to_lowercase() },
        count: q.count,
        errors: q.errors,
        round_trips: q.round_trips,
        first_byte_us: q.first_byte.summary(),
        latency_us: q.latency.summary(),
        rows: RowsReport { sum: q.rows_sum, max: q.rows_max },
        bytes: BytesReport {
            up: q.bytes_up,
            down: q.bytes_down,
            max_down: q.max_down,
            wire_up: q.wire_up,
            wire_down: q.wire_down,
        },
        unparsed: q.unparsed,
        retransmission_waits: RetransmissionWaits {
            count: q.retransmission_waits.count(),
            at_or_above_p99: q.retransmission_waits.count_at_least(q.latency.summary().p99),
            latency_us: q.retransmission_waits.summary(),
        },
        compressibility: (q.compressibility.samples > 0).then(|| CompressibilityReport {
            samples: q.compressibility.samples,
            sampled_bytes: q.compressibility.sampled_bytes,
            compressed_bytes: q.compressibility.compressed_bytes,
            ratio: q.compressibility.ratio(),
        }),
        commands: q.commands.iter().map(|&(c, n)| (command::name(c).to_owned(), n)).collect(),
        time_share: q.latency.sum() as f64 / total_time,
        distribution: q.latency.distribution().into_iter().map(|(u, c)| [u, c]).collect(),
        folded: q.folded,
        injected_us: q.injected_us,
        example: q.example.as_deref().map(str::to_owned),
        fingerprint_id: id,
    }
}

fn connection_report(c: &ConnectionStats, since: u64) -> ConnectionReport {
    ConnectionReport {
        id: c.id,
        client: c.client.to_string(),
        user: c.user.to_string(),
        schema: c.schema.as_deref().map(str::to_owned),
        open: c.closed_us.is_none(),
        opened_at_us: c.opened_us.saturating_sub(since),
        closed_at_us: c.closed_us.map(|t| t.saturating_sub(since)),
        commands: c.commands,
        errors: c.errors,
        round_trips: c.round_trips,
        latency_us: c.latency.summary(),
        bytes: BytesReport {
            up: c.bytes_up,
            down: c.bytes_down,
            max_down: 0,
            wire_up: c.wire_up,
            wire_down: c.wire_down,
        },
        rows: c.rows,
        legs: Legs::clone(&c.legs),
    }
}

#[cfg(test)]
mod tests;
