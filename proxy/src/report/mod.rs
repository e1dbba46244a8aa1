//! Reports: the versioned JSON schema (documented in `docs/report-schema.md`),
//! built from the aggregates, and its text and HTML renderings.

mod html;
mod text;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use rttscope_config::Scenario;

use crate::findings::whatif::{project, projections, Measured};
use crate::protocol::constants::command;
pub use crate::record::Totals;
use crate::record::{Aggregates, ConnectionStats, LatencySummary, QueryStats, OTHER_FINGERPRINT};

pub use html::render_html;
pub use text::render_text;

/// Bumped on any incompatible change to the JSON below.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub generator: String,
    /// RFC 3339, UTC.
    pub generated_at: String,
    /// Length of the recording window (since start or the last reset), µs.
    pub window_us: u64,
    pub totals: Totals,
    /// One entry per statement class, by total time, slowest first.
    pub queries: Vec<QueryReport>,
    /// Open connections, then recently closed ones.
    pub connections: Vec<ConnectionReport>,
    pub findings: Vec<FindingReport>,
    pub links: Vec<LinkReport>,
    /// The recording and each connection projected onto each scenario's link.
    #[serde(default)]
    pub what_if: Vec<WhatIfReport>,
}

/// One scenario's projection of the whole recording and of each connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WhatIfReport {
    pub scenario: String,
    pub rtt_us: u64,
    pub bandwidth_bps: Option<u64>,
    /// Time in commands, all connections together.
    pub recording: ProjectedTime,
    /// Each connection's time in commands.
    pub connections: Vec<ConnectionProjection>,
    pub summary: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectedTime {
    pub observed_us: u64,
    pub projected_us: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionProjection {
    pub id: u64,
    pub observed_us: u64,
    pub projected_us: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryReport {
    /// Normalised statement (`select * from t where id = ?`), or the command
    /// name for commands without SQL (`COM_PING`).
    pub fingerprint: String,
    /// 16 hex digits; `0000000000000000` for the `other` bucket.
    pub fingerprint_id: String,
    pub kind: String,
    /// Executions (COM_QUERY, COM_STMT_EXECUTE, or the command itself).
    pub count: u64,
    pub errors: u64,
    /// Every request/response exchange, prepares and fetches included.
    pub round_trips: u64,
    /// Request to first response byte: the server's work plus one round trip.
    pub first_byte_us: LatencySummary,
    /// Request to last response byte: plus the transfer.
    pub latency_us: LatencySummary,
    pub rows: RowsReport,
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
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowsReport {
    pub sum: u64,
    pub max: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BytesReport {
    pub up: u64,
    pub down: u64,
    pub max_down: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionReport {
    pub id: u64,
    pub client: String,
    pub user: String,
    pub schema: Option<String>,
    pub open: bool,
    /// Since the start of the window, µs (negative numbers clamp to 0).
    pub opened_at_us: u64,
    pub closed_at_us: Option<u64>,
    pub commands: u64,
    pub errors: u64,
    pub round_trips: u64,
    pub latency_us: LatencySummary,
    pub bytes: BytesReport,
    pub rows: u64,
}

/// A query-pattern finding (see the findings module).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FindingReport {
    pub kind: String,
    pub severity: String,
    pub fingerprint_id: String,
    pub evidence: serde_json::Value,
    pub round_trips: u64,
    pub cost_us: u64,
    pub suggestion: String,
    pub what_if: Vec<serde_json::Value>,
}

/// A verdict on the upstream link (see the link module).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkReport {
    pub limit: String,
    #[serde(flatten)]
    pub detail: serde_json::Map<String, serde_json::Value>,
}

/// What a report is built from besides the aggregates.
#[derive(Default)]
pub struct Extras {
    pub findings: Vec<FindingReport>,
    pub links: Vec<LinkReport>,
    pub events_dropped: u64,
}

impl Report {
    pub fn build(aggregates: &Aggregates, now_us: u64, scenarios: &[Scenario], extras: Extras) -> Report {
        let t = aggregates.totals;
        let since = aggregates.since_us;
        let total_time = t.time_us.max(1) as f64;
        let queries = aggregates
            .queries()
            .into_iter()
            .map(|q| query_report(q, total_time))
            .collect();
        let connections = aggregates.connections().map(|c| connection_report(c, since)).collect();
        Report {
            schema_version: SCHEMA_VERSION,
            generator: format!("rttscope {}", env!("CARGO_PKG_VERSION")),
            generated_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            window_us: now_us.saturating_sub(since),
            totals: Totals { events_dropped: extras.events_dropped, ..t },
            queries,
            connections,
            findings: extras.findings,
            links: extras.links,
            what_if: what_if(aggregates, scenarios),
        }
    }
}

fn what_if(a: &Aggregates, scenarios: &[Scenario]) -> Vec<WhatIfReport> {
    let t = a.totals;
    let recording =
        Measured { elapsed_us: t.time_us, round_trips: t.round_trips, bytes: t.bytes_up + t.bytes_down, observed_rtt_us: u64::from(a.rtt_us) };
    projections(recording, scenarios, "the recorded work")
        .into_iter()
        .map(|p| {
            let connections = a
                .connections()
                .map(|c| {
                    let m = Measured {
                        elapsed_us: c.latency.sum(),
                        round_trips: c.round_trips,
                        bytes: c.bytes_up + c.bytes_down,
                        observed_rtt_us: u64::from(c.rtt_us),
                    };
                    ConnectionProjection { id: c.id, observed_us: m.elapsed_us, projected_us: project(m, p.rtt_us, p.bandwidth_bps) }
                })
                .collect();
            WhatIfReport {
                scenario: p.scenario,
                rtt_us: p.rtt_us,
                bandwidth_bps: p.bandwidth_bps,
                recording: ProjectedTime { observed_us: p.observed_us, projected_us: p.projected_us },
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
        bytes: BytesReport { up: q.bytes_up, down: q.bytes_down, max_down: q.max_down },
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
        bytes: BytesReport { up: c.bytes_up, down: c.bytes_down, max_down: 0 },
        rows: c.rows,
    }
}

/// Human-sized numbers for the text and HTML renderings.
pub(crate) mod fmt {
    pub fn us(us: u64) -> String {
        match us {
            0..1_000 => format!("{us} µs"),
            1_000..1_000_000 => format!("{:.2} ms", us as f64 / 1e3),
            _ => format!("{:.2} s", us as f64 / 1e6),
        }
    }

    pub fn bytes(b: u64) -> String {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut v = b as f64;
        let mut unit = 0;
        while v >= 1024.0 && unit + 1 < UNITS.len() {
            v /= 1024.0;
            unit += 1;
        }
        if unit == 0 { format!("{b} B") } else { format!("{v:.1} {}", UNITS[unit]) }
    }

    /// 12345678 → "12,345,678".
    pub fn count(n: u64) -> String {
        let digits = n.to_string();
        let mut out = String::with_capacity(digits.len() + digits.len() / 3);
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    }
}
