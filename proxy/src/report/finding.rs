//! `findings[]` in the schema: a finding as the report shows it, built from the findings
//! engine's [`Assessed`] values, with a typed evidence object per kind.

use serde::{Deserialize, Serialize};

use crate::findings::whatif::Projection;
use crate::findings::{Assessed, Detail, Kind, LoopShape, PatternScope, Severity};
use crate::findings::{churn, compression};

/// A query-pattern finding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FindingReport {
    /// Which pattern (`n_plus_one`, `undersized_fetch`, ...); it decides `evidence`'s variant.
    pub kind: Kind,
    /// From the cost at the reference RTT: `critical` from 10 s, `warning` from 1 s, else `info`.
    pub severity: Severity,
    /// The statement the finding is about (for N+1, the repeated child).
    pub fingerprint_id: String,
    /// The facts behind it: the keys every kind has, then the kind's own.
    pub evidence: Evidence,
    /// Round trips the pattern cost.
    pub round_trips: u64,
    /// Wall time of the pattern's own commands, µs, overlapping ones (on a pool's connections)
    /// counted once: never more than the wall time its occurrences covered
    /// (`evidence.elapsed_us`), and what its `what_if` projections start from.
    pub cost_us: u64,
    /// The fix, in the words of `driver` when that is known.
    pub suggestion: String,
    /// The client library the suggestion speaks the words of, when the connection attributes
    /// named one rttscope knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// What its commands would take over each of `findings.scenarios`' links, in their order.
    pub what_if: Vec<WhatIf>,
}

/// The facts behind a finding: those every kind has, then the kind's own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// One sentence saying what happened.
    pub summary: String,
    /// The normalised statement.
    pub statement: String,
    /// Who ran it: `user@client-host` (empty when unknown).
    pub application: String,
    /// How many separate times the pattern happened.
    pub occurrences: u64,
    /// Repetitions, fetches, pages or round trips, over all occurrences.
    pub executions: u64,
    /// The fewest executions one occurrence had.
    pub smallest_occurrence: u64,
    /// The most executions one occurrence had.
    pub largest_occurrence: u64,
    /// Wall time the occurrences covered, each from its first request to its last response
    /// (a linked parent's own interval apart), overlapping occurrences counted once, µs:
    /// never more than the recording's window.
    pub elapsed_us: u64,
    /// Its commands' times summed, µs: connection-time, more than `cost_us` when they
    /// overlapped on several connections.
    #[serde(default)]
    pub commands_us: u64,
    /// Of `commands_us`, what an emulated link added, as measured per command, µs.
    pub injected_us: u64,
    /// `cost_us` without the emulated link and the real path's round trips: where
    /// projections start, µs.
    pub base_us: u64,
    /// Rows returned, over all occurrences.
    pub rows: u64,
    /// Bytes both ways on the long hop's wire (what projections charge bandwidth for), over all
    /// occurrences.
    pub bytes: u64,
    /// Of the time of the connections involved, the share the pattern took (0–1).
    pub share_of_connection_time: f64,
    /// Connection ids where it happened (at most 16).
    pub connections: Vec<u64>,
    /// What the pattern would cost at `reference_rtt_us`, µs: what ranks findings.
    pub projected_at_reference_us: u64,
    /// `findings.reference_rtt`, µs: the RTT `projected_at_reference_us` assumes.
    pub reference_rtt_us: u64,
    /// The upstream's base RTT where it happened, µs (0: unknown).
    pub observed_rtt_us: u32,
    /// The W3C trace id, when the pattern was followed by its `traceparent` comments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Where in the application, from the statements' sqlcommenter tags (`controller`,
    /// `action`, `route`, `framework`, `application`): only the tags they carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<std::collections::BTreeMap<String, String>>,
    /// The kind's own keys, flattened into this object in JSON (no `detail` key).
    #[serde(flatten)]
    pub detail: EvidenceDetail,
}

/// The facts particular to a kind. Untagged: each variant has required keys no other has,
/// which is how a report read back from JSON finds its variant again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EvidenceDetail {
    /// `n_plus_one`, `repeated_write`.
    Loop(LoopEvidence),
    /// `undersized_fetch`.
    Fetch(FetchEvidence),
    /// `pagination_loop`.
    Pages(PagesEvidence),
    /// `chatty_session`.
    Chatty(ChattyEvidence),
    /// `connection_churn`.
    Churn(ChurnEvidence),
    /// `compression`.
    Compression(CompressionEvidence),
}

impl EvidenceDetail {
    /// Whether this is the evidence a finding of `kind` carries.
    pub fn fits(&self, kind: Kind) -> bool {
        matches!(
            (self, kind),
            (EvidenceDetail::Loop(_), Kind::NPlusOne | Kind::RepeatedWrite)
                | (EvidenceDetail::Fetch(_), Kind::UndersizedFetch)
                | (EvidenceDetail::Pages(_), Kind::PaginationLoop)
                | (EvidenceDetail::Chatty(_), Kind::ChattySession)
                | (EvidenceDetail::Churn(_), Kind::ConnectionChurn)
                | (EvidenceDetail::Compression(_), Kind::Compression)
        )
    }
}

/// Evidence of `n_plus_one` and `repeated_write`: one statement run over and over.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoopEvidence {
    /// Executions whose values differed from the one before.
    pub distinct_values: u64,
    /// The query whose result rows the loop's values came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_fingerprint_id: Option<String>,
    /// The parent's normalised statement; present exactly when `parent_fingerprint_id` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_statement: Option<String>,
    /// What shows the repetitions were one loop: `parent`, `trace`, `origin`,
    /// `transaction` or `regular` (the strongest any occurrence had).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<LoopShape>,
}

/// Evidence of `undersized_fetch`: a cursor read in a few rows per `COM_STMT_FETCH` round trip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FetchEvidence {
    /// Rows each `COM_STMT_FETCH` asked for.
    pub fetch_size: u32,
}

/// Evidence of `pagination_loop`: LIMIT/OFFSET pages fetched one after another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PagesEvidence {
    /// The LIMIT: rows asked for per page.
    pub page_size: u64,
    /// Pages fetched, over all occurrences (the finding's `executions`).
    pub pages: u64,
    /// Rows the server read and skipped for the OFFSETs.
    pub offset_rows_rescanned: u64,
}

/// Evidence of `chatty_session`: many small round trips dense in a short window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChattyEvidence {
    /// The sliding window the round trips were dense in (`findings.chatty.window`).
    pub window_us: u64,
    /// The statements with the most of them, most first.
    pub top_statements: Vec<StatementRoundTrips>,
}

/// A statement's results, sampled and compressed, and what compressing the long hop would
/// save. The finding's `bytes` are its wire bytes, both ways.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompressionEvidence {
    /// Responses of the statement sampled, as in `queries[].compressibility`.
    pub samples: u64,
    /// Their bytes sampled: the packet stream, headers included.
    pub sampled_bytes: u64,
    /// `sampled_bytes` compressed with zlib at its default level.
    pub compressed_bytes: u64,
    /// `sampled_bytes / compressed_bytes`.
    pub compression_ratio: f64,
    /// At each projection with a bandwidth, and over the emulated link when it has one.
    pub savings: Vec<CompressionSaving>,
}

/// `evidence.savings[]`: what compressing the long hop would save over one link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompressionSaving {
    /// A `findings.scenarios` name with a bandwidth, or `the emulated link`.
    pub scenario: String,
    /// That link's bandwidth, bits per second (a link without one saves nothing, so has no entry).
    pub bandwidth_bps: u64,
    /// Transfer time the bytes compression removes would take at that bandwidth.
    pub saved_us: u64,
}

/// An application's connection setups beside all its time. The finding's `round_trips` and
/// `cost_us` are its setups'; `executions` is the connections opened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChurnEvidence {
    /// Connections the application opened: also the finding's `executions`.
    pub connections_opened: u64,
    /// Over the span from the first setup's start to the last one's end.
    pub connections_per_second: f64,
    /// One setup's time, on average, µs.
    pub setup_avg_us: u64,
    /// Round trips per setup (the `COM_CONNECT` pseudo-command's), on average.
    pub setup_round_trips_avg: f64,
    /// Every setup's time, summed.
    pub setup_us: u64,
    /// The application's time in commands, setups included, summed as the totals sum it.
    pub recorded_us: u64,
    /// `setup_us` of `recorded_us` (0–1).
    pub setup_share: f64,
}

/// `evidence.top_statements[]`: one statement's share of a chatty session's round trips.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatementRoundTrips {
    /// The normalised statement.
    pub statement: String,
    /// Its round trips in the session's dense stretches, over all occurrences.
    pub round_trips: u64,
}

/// What a finding would cost over one scenario's link: the findings' own projection.
pub type WhatIf = Projection;

impl From<&Assessed> for FindingReport {
    fn from(a: &Assessed) -> FindingReport {
        let f = &a.finding;
        let detail = match &f.detail {
            Detail::Loop { distinct, shape } => EvidenceDetail::Loop(LoopEvidence {
                distinct_values: *distinct,
                shape: *shape,
                parent_fingerprint_id: f.parent.as_ref().map(|(id, _)| id.to_string()),
                parent_statement: f.parent.as_ref().map(|(_, text)| text.to_string()),
            }),
            Detail::Fetch { fetch_size } => EvidenceDetail::Fetch(FetchEvidence { fetch_size: *fetch_size }),
            Detail::Pages { page_size, rescanned } => EvidenceDetail::Pages(PagesEvidence {
                page_size: *page_size,
                pages: f.executions,
                offset_rows_rescanned: *rescanned,
            }),
            Detail::Chatty { top, window_us } => EvidenceDetail::Chatty(ChattyEvidence {
                window_us: *window_us,
                top_statements: top
                    .iter()
                    .map(|(text, n)| StatementRoundTrips { statement: text.to_string(), round_trips: *n })
                    .collect(),
            }),
            Detail::Churn { setup_us, recorded_us } => {
                let n = f.executions.max(1);
                EvidenceDetail::Churn(ChurnEvidence {
                    connections_opened: f.executions,
                    connections_per_second: churn::per_second(f.executions, f.elapsed_us()),
                    setup_avg_us: setup_us / n,
                    setup_round_trips_avg: f.round_trips as f64 / n as f64,
                    setup_us: *setup_us,
                    recorded_us: *recorded_us,
                    setup_share: churn::share(*setup_us, *recorded_us),
                })
            }
            Detail::Compression(c) => EvidenceDetail::Compression(CompressionEvidence {
                samples: c.samples,
                sampled_bytes: c.sampled_bytes,
                compressed_bytes: c.compressed_bytes,
                compression_ratio: c.ratio(),
                savings: compression::savings(f, &a.what_if)
                    .into_iter()
                    .map(|(scenario, bandwidth_bps, saved_us)| CompressionSaving { scenario, bandwidth_bps, saved_us })
                    .collect(),
            }),
        };
        FindingReport {
            kind: f.kind,
            severity: a.severity,
            fingerprint_id: f.fingerprint.to_string(),
            evidence: Evidence {
                summary: a.headline.clone(),
                statement: f.text.to_string(),
                application: f.application.to_string(),
                occurrences: f.occurrences,
                executions: f.executions,
                smallest_occurrence: f.smallest,
                largest_occurrence: f.largest,
                elapsed_us: f.elapsed_us(),
                commands_us: f.commands_us,
                injected_us: f.injected_us,
                base_us: a.base_us,
                rows: f.rows,
                bytes: f.bytes,
                share_of_connection_time: a.share_of_connection_time,
                connections: f.per_conn.iter().map(|(c, _)| *c).collect(),
                projected_at_reference_us: a.at_reference_us,
                reference_rtt_us: a.reference_rtt_us,
                observed_rtt_us: f.rtt_us,
                trace_id: match f.scope {
                    PatternScope::Trace(t) => Some(format!("{t:032x}")),
                    PatternScope::Connection(_) => None,
                },
                origin: f.origin.as_ref().map(|o| o.pairs().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()),
                detail,
            },
            round_trips: f.round_trips,
            cost_us: f.cost_us(),
            suggestion: a.fix.clone(),
            driver: f.driver.map(|d| d.name().to_owned()),
            what_if: a.what_if.clone(),
        }
    }
}
