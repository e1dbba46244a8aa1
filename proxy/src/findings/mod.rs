//! Query-pattern findings: N+1 loops, one-row-at-a-time writes, undersized fetch batches,
//! pagination loops and chatty sessions — each with its evidence, its cost in round trips,
//! what it would cost over other links, and the fix. Runs in the collector, on the same
//! records as the aggregates; every map is bounded.
//!
//! # One shape for every detector
//!
//! A detector ([`Detector`], in `run`) follows commands and groups those that belong to one
//! occurrence of its pattern into a [`Run`], the one accumulator all kinds share: round trips,
//! the time of the run's own commands, bytes, rows, connections, plus the kind's own facts in
//! a [`Detail`]. It says when a run has ended and what bar a run must clear ([`Bar`]). The
//! engine (`engine`) does the rest, once for every kind: it decides whether a run qualifies,
//! turns it into a [`Finding`] (`Run::to_finding`), merges occurrences, ranks, projects and
//! words them ([`Assessed`]). `report` turns those into the JSON schema.
//!
//! - `loops`: `n_plus_one` and `repeated_write`, statements that really came back to back;
//! - `cursors`: `undersized_fetch`; `pages`: `pagination_loop`; `chatty`: `chatty_session`;
//! - `churn`: `connection_churn`, connection setup as a large share of an application's time;
//! - `compression`: `compression`, a bandwidth-bound statement whose results compress well;
//! - `run`: the trait, the run, and what a command is to a detector (`Role`);
//! - `engine`: [`FindingsEngine`]; `counts`: what they add to `/metrics` ([`FindingCounts`]); `whatif`: projections; `suggest`: the sentences and fixes;
//! - `driver`: the client library a connection uses; `driver_fix`: each fix in its words.
//!
//! # Adding a finding kind
//!
//! 1. A variant of [`Kind`] (its snake_case name is what reports and metrics call it) and,
//!    if it has facts of its own, of [`Detail`].
//! 2. A detector file implementing [`Detector`], listed in `FindingsEngine::new`.
//! 3. Its headline and fix in `suggest.rs`, its thresholds in `rttscope_config::FindingsConfig`.
//! 4. If it has a new [`Detail`], its evidence in `report/finding.rs` and
//!    `docs/report-schema.md` (a test holds the two together).

mod chatty;
pub mod churn;
pub mod compression;
mod counts;
mod cursors;
pub mod driver;
mod driver_fix;
mod engine;
mod loops;
mod pages;
mod run;
mod suggest;
pub mod whatif;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::fingerprint::{FingerprintId, StatementKind};
use crate::record::Origin;
use crate::record::{LargeResponses, WallUnion};
pub use counts::{FindingCounts, StatementFindings};
pub use driver::Driver;
pub use engine::{FindingsConsumer, FindingsEngine};
pub use run::{Bar, Context, Detector, ParentLink, Role, Run};
use whatif::{Measured, Projection};

/// The finding kinds, named as reports and metrics name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// One `SELECT` run back to back with different values, usually once per row of a parent query: N+1 round trips where one would do.
    NPlusOne,
    /// One row written per statement, back to back: a multi-row or batched write would take one round trip.
    RepeatedWrite,
    /// A server-side cursor fetching few rows per `COM_STMT_FETCH`: one round trip per small batch.
    UndersizedFetch,
    /// `LIMIT`/`OFFSET` pages read one after another: a round trip per page, and the server rescans every skipped row.
    PaginationLoop,
    /// Housekeeping round trips (pings, `SET`, `SHOW`, `SELECT 1`) dense enough to cost real time.
    ChattySession,
    /// Connection setup (TCP, greeting, TLS, login) a large share of an application's time: a pool would pay it once.
    ConnectionChurn,
    /// A bandwidth-bound statement whose results compress well: the compressed protocol would save transfer time.
    Compression,
}

impl Kind {
    /// Every kind, in the order metrics and reports list them.
    pub const ALL: [Kind; 7] = [
        Kind::NPlusOne,
        Kind::RepeatedWrite,
        Kind::UndersizedFetch,
        Kind::PaginationLoop,
        Kind::ChattySession,
        Kind::ConnectionChurn,
        Kind::Compression,
    ];

    /// The snake_case name of the report's `kind` and the metrics' `kind` label.
    pub fn name(self) -> &'static str {
        match self {
            Kind::NPlusOne => "n_plus_one",
            Kind::RepeatedWrite => "repeated_write",
            Kind::UndersizedFetch => "undersized_fetch",
            Kind::PaginationLoop => "pagination_loop",
            Kind::ChattySession => "chatty_session",
            Kind::ConnectionChurn => "connection_churn",
            Kind::Compression => "compression",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How much a finding matters: what it would cost at the reference RTT, and its share of the
/// time of the connections it ran on. A pattern that costs a lot only because the recording
/// was long is not urgent when it is a sliver of what those connections did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Ten seconds or more at the reference RTT, and at least a fifth of its connections' time.
    Critical,
    /// One second or more at the reference RTT, and at least a twentieth of its connections' time.
    Warning,
    /// Anything less.
    Info,
}

impl Severity {
    /// Most severe first.
    pub const ALL: [Severity; 3] = [Severity::Critical, Severity::Warning, Severity::Info];

    /// The snake_case name reports use.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }

    /// From the cost at the reference RTT, µs, and the share (0–1) of its connections' time
    /// (`None`: not known, as when those connections are long gone).
    pub fn of(at_reference_us: u64, share: Option<f64>) -> Severity {
        let share = share.unwrap_or(1.0);
        match at_reference_us {
            10_000_000.. if share >= 0.2 => Severity::Critical,
            1_000_000.. if share >= 0.05 => Severity::Warning,
            _ => Severity::Info,
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a pattern happened: a connection, or a request traced across connections by a
/// `traceparent` comment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PatternScope {
    /// Within one client connection (its relay id).
    Connection(u64),
    /// Within one traced request (the W3C trace id), across the connections of a pool.
    Trace(u128),
}

/// The emulated link a pattern ran over, as configured (`inject`).
pub use crate::inject::EmulatedLink as Emulated;

/// Facts particular to a kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Detail {
    /// `n_plus_one`, `repeated_write`: executions whose values differed from the one before,
    /// and what shows that one unit of work issued them.
    Loop {
        /// Executions whose hashed values differed from the previous execution's, summed over
        /// occurrences.
        distinct: u64,
        /// Why the repetitions are one loop and not independent requests that happened to
        /// follow each other; `None`: nothing does yet, and the run cannot qualify.
        shape: Option<LoopShape>,
    },
    /// `undersized_fetch`: rows each fetch asked for.
    Fetch {
        /// Rows per `COM_STMT_FETCH` the client asked for (the latest fetch's): its fetch size.
        fetch_size: u32,
    },
    /// `pagination_loop`: the LIMIT, and the rows the OFFSETs made the server skip.
    Pages {
        /// The `LIMIT`: rows per page.
        page_size: u64,
        /// Rows the server read and threw away to reach each page's `OFFSET`, summed.
        rescanned: u64,
    },
    /// `chatty_session`: the statements with the most round trips, and the window the round
    /// trips were dense in.
    Chatty {
        /// `(normalised SQL, executions)`, most frequent first, at most five.
        top: Vec<(Arc<str>, u64)>,
        /// Length of the window the round trips were dense in, µs.
        window_us: u64,
    },
    /// `connection_churn`: the application's time in connection setup, and in all its
    /// commands (setups included), each command's latency summed.
    Churn {
        /// Connection setups' time (TCP, greeting, TLS, login), µs.
        setup_us: u64,
        /// All the application's commands' time, setups included, µs.
        recorded_us: u64,
    },
    /// `compression`: its results' samples, compressed (zlib).
    Compression(crate::record::Compressibility),
}

/// What shows that repeated statements came from one loop in the application, strongest
/// first: a random stream of one table's statement among others' (independent requests on a
/// pooled connection, a benchmark's random tables) shows none of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopShape {
    /// Their values came from the rows of a result just before (N+1 over a parent).
    Parent,
    /// They carried one `traceparent`: one request issued them.
    Trace,
    /// They carried the same sqlcommenter origin (controller, route, ...).
    Origin,
    /// One explicit transaction held them.
    Transaction,
    /// A constant loop body: the same number of other statements between every two of them,
    /// and the application's time between them steady, as a loop's is and arrivals are not.
    Regular,
}

impl LoopShape {
    /// The snake_case name the report's `evidence.shape` uses.
    pub fn name(self) -> &'static str {
        match self {
            LoopShape::Parent => "parent",
            LoopShape::Trace => "trace",
            LoopShape::Origin => "origin",
            LoopShape::Transaction => "transaction",
            LoopShape::Regular => "regular",
        }
    }
}

/// One pattern, summed over its occurrences.
#[derive(Clone, Debug)]
pub struct Finding {
    /// Which pattern this is.
    pub kind: Kind,
    /// The statement repeated (for a chatty session, its most frequent statement).
    pub fingerprint: FingerprintId,
    /// The statement's normalised SQL.
    pub text: Arc<str>,
    /// `SELECT`, `INSERT`, ... of the statement.
    pub statement_kind: StatementKind,
    /// Who ran it: `user@client-host` (empty when unknown).
    pub application: Arc<str>,
    /// Where in the application (sqlcommenter `controller`, `route`, ...), when tagged.
    pub origin: Option<Arc<Origin>>,
    /// For N+1: the query whose rows the loop's values came from.
    pub parent: Option<(FingerprintId, Arc<str>)>,
    /// Where the first occurrence happened; later ones may be elsewhere.
    pub scope: PatternScope,
    /// Runs merged into this finding, each of which cleared its kind's bar.
    pub occurrences: u64,
    /// Repetitions, fetches, pages, round trips or connections opened, over all occurrences.
    pub executions: u64,
    /// The fewest and the most executions one occurrence had.
    pub smallest: u64,
    /// The most executions one occurrence had.
    pub largest: u64,
    /// Round trips over all occurrences, an N+1 parent's included.
    pub round_trips: u64,
    /// The wall-clock union of its occurrences' spans (each from its first request to its
    /// last response, a linked parent's own interval apart): overlapping occurrences, on a
    /// pool's connections, count once.
    pub spans: WallUnion,
    /// The wall-clock union of its own commands' intervals, overlaps counted once.
    pub busy: WallUnion,
    /// Its own commands' times summed: connection-time, which counts an overlap on two
    /// connections twice.
    pub commands_us: u64,
    /// Of `commands_us`, what an emulated link added.
    pub injected_us: u64,
    /// Slow start's rounds over its commands' large responses, and their streaming.
    pub large_responses: LargeResponses,
    /// Bytes on the long hop's wire, both ways, over all occurrences.
    pub bytes: u64,
    /// Rows returned over all occurrences.
    pub rows: u64,
    /// The kind's own evidence (the report's `evidence`).
    pub detail: Detail,
    /// Round trips by connection (at most [`run::CONNECTIONS_PER_RUN`]).
    pub per_conn: Vec<(u64, u64)>,
    /// The upstream's base RTT where it happened, µs (0: unknown).
    pub rtt_us: u32,
    /// The emulated link it ran over, if it did.
    pub emulated: Option<Emulated>,
    /// The client library that ran it, when known: the fix speaks its words.
    pub driver: Option<Driver>,
}

/// What findings merge by: the same pattern of the same statement (and parent) by the same
/// application from the same place in it (its sqlcommenter origin) is one finding, wherever
/// and however often it recurs. The same user on the same host through another driver (a
/// script beside the service) is another program, with a fix in other words.
pub(crate) type FindingKey =
    (Kind, FingerprintId, Option<FingerprintId>, Arc<str>, Option<Arc<Origin>>, Option<Driver>);

impl Finding {
    pub(crate) fn key(&self) -> FindingKey {
        (
            self.kind,
            self.fingerprint,
            self.parent.as_ref().map(|(p, _)| *p),
            self.application.clone(),
            self.origin.clone(),
            self.driver,
        )
    }

    fn merge(&mut self, other: &Finding) {
        self.occurrences += other.occurrences;
        self.executions += other.executions;
        self.smallest = self.smallest.min(other.smallest);
        self.largest = self.largest.max(other.largest);
        self.round_trips += other.round_trips;
        self.spans.absorb(&other.spans);
        self.busy.absorb(&other.busy);
        self.commands_us += other.commands_us;
        self.injected_us += other.injected_us;
        self.large_responses.add(other.large_responses);
        self.bytes += other.bytes;
        self.rows += other.rows;
        match (&mut self.detail, &other.detail) {
            (Detail::Loop { distinct, shape }, Detail::Loop { distinct: d, shape: s }) => {
                *distinct += d;
                // The strongest evidence any occurrence had.
                *shape = match (*shape, *s) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            (Detail::Pages { rescanned, .. }, Detail::Pages { rescanned: r, .. }) => *rescanned += r,
            (Detail::Chatty { top, .. }, Detail::Chatty { top: t, .. }) => run::merge_top(top, t),
            (Detail::Churn { setup_us, recorded_us }, Detail::Churn { setup_us: s, recorded_us: r }) => {
                *setup_us += s;
                *recorded_us += r;
            }
            _ => {}
        }
        for &(c, n) in &other.per_conn {
            run::add_round_trips(&mut self.per_conn, c, n);
        }
        self.rtt_us = run::min_known(self.rtt_us, other.rtt_us);
        self.emulated = self.emulated.or(other.emulated);
        self.driver = self.driver.or(other.driver);
    }

    /// Wall time its occurrences covered, overlaps counted once: never more than the
    /// recording's window.
    pub fn elapsed_us(&self) -> u64 {
        self.spans.us()
    }

    /// Wall time its own commands took, overlaps counted once: never more than
    /// [`Self::elapsed_us`] (an occurrence reported far out of order could otherwise count
    /// an overlap twice, `record::WallUnion`).
    pub fn cost_us(&self) -> u64 {
        self.busy.us().min(self.elapsed_us())
    }

    /// What projections start from, for every kind alike: its own commands, as the
    /// recording's projection starts from all of them (`docs/time-model.md`).
    fn measured(&self) -> Measured {
        Measured {
            commands_us: self.commands_us,
            wall_us: self.cost_us(),
            round_trips: self.round_trips,
            bytes: self.bytes,
            observed_rtt_us: u64::from(self.rtt_us),
            injected_us: self.injected_us,
            large_responses: self.large_responses,
        }
    }
}

/// A finding as a report shows it: the facts, how much it matters, what it says, and what it
/// would cost over other links. `report` turns it into the schema.
#[derive(Clone, Debug)]
pub struct Assessed {
    /// The merged facts.
    pub finding: Finding,
    /// From what it would cost at the reference RTT (`at_reference_us`).
    pub severity: Severity,
    /// One sentence saying what happened.
    pub headline: String,
    /// The fix.
    pub fix: String,
    /// `findings.reference_rtt`, µs: the link every finding is ranked on, whatever the link it ran over.
    pub reference_rtt_us: u64,
    /// What it would cost at `reference_rtt_us`: what findings are ranked by.
    pub at_reference_us: u64,
    /// The time it took without the emulated link and the real path's round trips: where
    /// projections start.
    pub base_us: u64,
    /// One projection per configured scenario.
    pub what_if: Vec<Projection>,
    /// Of the time of the connections involved, the share it took (0–1).
    pub share_of_connection_time: f64,
}

#[cfg(test)]
mod tests;
