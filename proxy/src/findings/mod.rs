//! Query-pattern findings: N+1 loops, one-row-at-a-time writes, undersized
//! fetch batches, pagination loops and chatty sessions — each with its
//! evidence, its cost in round trips, what it would cost over other links,
//! and the fix. Runs in the collector, on the same records as the
//! aggregates; every map is bounded.

mod chatty;
mod cursors;
mod loops;
mod pages;
mod suggest;
pub mod whatif;

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use std::sync::{Arc, Mutex};

use rttscope_config::FindingsConfig;
use serde_json::json;

use crate::fingerprint::{FingerprintId, StatementKind};
use crate::record::{CommandRecord, Consumer, Event};
use crate::report::FindingReport;
use chatty::Chatty;
use cursors::Cursors;
use loops::{Loops, Thresholds};
use pages::Pages;
use whatif::{projections, Measured};

/// The finding kinds, named as reports and metrics name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    NPlusOne,
    RepeatedWrite,
    UndersizedFetch,
    PaginationLoop,
    ChattySession,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::NPlusOne, Kind::RepeatedWrite, Kind::UndersizedFetch, Kind::PaginationLoop, Kind::ChattySession];

    pub fn name(self) -> &'static str {
        match self {
            Kind::NPlusOne => "n_plus_one",
            Kind::RepeatedWrite => "repeated_write",
            Kind::UndersizedFetch => "undersized_fetch",
            Kind::PaginationLoop => "pagination_loop",
            Kind::ChattySession => "chatty_session",
        }
    }
}

/// Where a pattern happened: a connection, or a request traced across
/// connections by a `traceparent` comment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    Connection(u64),
    Trace(u128),
}

/// Facts particular to a kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Detail {
    Loop { distinct: u64 },
    Fetch { fetch_size: u32 },
    Pages { page_size: u64, rescanned: u64 },
    Chatty { tiny: u64, top: Vec<(Arc<str>, u64)> },
}

/// One pattern, summed over its occurrences.
#[derive(Clone, Debug)]
pub struct Finding {
    pub kind: Kind,
    pub fingerprint: FingerprintId,
    pub text: Arc<str>,
    pub statement_kind: StatementKind,
    pub parent: Option<(FingerprintId, Arc<str>)>,
    pub scope: Scope,
    pub occurrences: u64,
    /// Repetitions, fetches or pages.
    pub executions: u64,
    pub round_trips: u64,
    /// Wall time the pattern took, first request to last response.
    pub time_us: u64,
    /// Time spent inside its commands.
    pub busy_us: u64,
    pub bytes: u64,
    pub rows: u64,
    pub detail: Detail,
    /// Round trips by connection.
    pub per_conn: Vec<(u64, u64)>,
    /// The upstream's base RTT where it happened, µs (0: unknown).
    pub rtt_us: u32,
}

impl Finding {
    fn key(&self) -> (Kind, FingerprintId, Option<FingerprintId>, Option<Scope>) {
        // Chatty sessions are per connection; the others merge wherever they recur.
        let scope = (self.kind == Kind::ChattySession).then_some(self.scope);
        (self.kind, self.fingerprint, self.parent.as_ref().map(|(p, _)| *p), scope)
    }

    fn merge(&mut self, other: &Finding) {
        self.occurrences += other.occurrences;
        self.executions += other.executions;
        self.round_trips += other.round_trips;
        self.time_us += other.time_us;
        self.busy_us += other.busy_us;
        self.bytes += other.bytes;
        self.rows += other.rows;
        if let (Detail::Loop { distinct }, Detail::Loop { distinct: d }) = (&mut self.detail, &other.detail) {
            *distinct += d;
        }
        if let (Detail::Pages { rescanned, .. }, Detail::Pages { rescanned: r, .. }) = (&mut self.detail, &other.detail) {
            *rescanned += r;
        }
        for &(c, n) in &other.per_conn {
            add_round_trips(&mut self.per_conn, c, n);
        }
        self.rtt_us = min_known(self.rtt_us, other.rtt_us);
    }

    fn measured(&self) -> Measured {
        Measured { elapsed_us: self.time_us, round_trips: self.round_trips, bytes: self.bytes, observed_rtt_us: u64::from(self.rtt_us) }
    }
}

/// The smaller of two RTTs, where 0 means unknown.
pub(crate) fn min_known(a: u32, b: u32) -> u32 {
    match (a, b) {
        (0, x) | (x, 0) => x,
        (x, y) => x.min(y),
    }
}

/// Connections remembered per finding (a traced loop may span a pool).
const CONNECTIONS_PER_FINDING: usize = 16;

/// Adds `n` round trips of connection `conn` to a bounded per-connection list.
fn add_round_trips(list: &mut Vec<(u64, u64)>, conn: u64, n: u64) {
    match list.iter().position(|(c, _)| *c == conn) {
        Some(i) => list[i].1 += n,
        None if list.len() < CONNECTIONS_PER_FINDING => list.push((conn, n)),
        None => {}
    }
}

/// Most distinct findings kept; the cheapest go first.
const MAX_FINDINGS: usize = 1000;
/// New-finding log lines allowed per minute.
const LOG_LINES_PER_MINUTE: u32 = 10;

pub struct FindingsEngine {
    config: FindingsConfig,
    reads: Thresholds,
    writes: Thresholds,
    loops: Loops,
    cursors: Cursors,
    pages: Pages,
    chatty: Chatty,
    found: HashMap<(Kind, FingerprintId, Option<FingerprintId>, Option<Scope>), Finding>,
    /// Occurrences that qualified, by kind, since start (metrics).
    pub counts: BTreeMap<&'static str, u64>,
    log_window: (u64, u32),
}

impl FindingsEngine {
    pub fn new(config: FindingsConfig) -> FindingsEngine {
        let reference_rtt_us = config.reference_rtt.0.as_micros() as u64;
        let n = &config.n_plus_one;
        let reads = Thresholds {
            min_repeats: u64::from(n.min_repeats),
            max_gap_us: n.max_gap.0.as_micros() as u64,
            max_rows: n.max_rows,
            min_projected_cost_us: n.min_projected_cost.0.as_micros() as u64,
            reference_rtt_us,
        };
        let w = &config.repeated_write;
        let writes = Thresholds {
            min_repeats: u64::from(w.min_repeats),
            max_gap_us: w.max_gap.0.as_micros() as u64,
            max_rows: u64::MAX,
            min_projected_cost_us: w.min_projected_cost.0.as_micros() as u64,
            reference_rtt_us,
        };
        let chatty = Chatty::new(&config.chatty, reference_rtt_us);
        FindingsEngine {
            config,
            reads,
            writes,
            loops: Loops::default(),
            cursors: Cursors::default(),
            pages: Pages::default(),
            chatty,
            found: HashMap::default(),
            counts: Kind::ALL.iter().map(|k| (k.name(), 0)).collect(),
            log_window: (0, 0),
        }
    }

    pub fn observe(&mut self, event: &Event) {
        match event {
            Event::Command(r) => self.command(r),
            Event::Closed { conn_id, at_us } => {
                let scope = Scope::Connection(*conn_id);
                for run in self.loops.close_scope(scope) {
                    self.close_run(&run, *at_us);
                }
                for cursor in self.cursors.close_connection(*conn_id) {
                    self.close_cursor(&cursor, *at_us);
                }
                for pages in self.pages.close_scope(scope) {
                    self.close_pages(&pages, *at_us);
                }
                if let Some(f) = self.chatty.close(*conn_id, &self.found_loop_round_trips(*conn_id)) {
                    self.record_finding(f, *at_us);
                }
            }
            Event::Connected { .. } | Event::Schema { .. } | Event::Link { .. } => {}
        }
    }

    fn command(&mut self, r: &CommandRecord) {
        let scope = r.trace.map_or(Scope::Connection(r.conn_id), Scope::Trace);
        self.chatty.add(r);
        self.loops.remember_parent(scope, r);
        if let Some(kind) = Loops::kind_of(r, &self.reads) {
            let t = if kind == Kind::NPlusOne { self.reads } else { self.writes };
            let (closed, run) = self.loops.add(scope, kind, r, &t);
            // Log once, the moment a loop first qualifies.
            let just_qualified = t.qualifies(run) && (run.count == t.min_repeats || run.distinct == t.min_repeats);
            let first = just_qualified.then(|| run.to_finding());
            if let Some(run) = closed {
                self.close_run(&run, r.request_us);
            }
            if let Some(f) = first {
                self.announce(&f, r.last_byte_us);
            }
        }
        if let Some(cursor) = self.cursors.add(r) {
            self.close_cursor(&cursor, r.last_byte_us);
        }
        if let Some(pages) = self.pages.add(scope, r) {
            self.close_pages(&pages, r.last_byte_us);
        }
    }

    fn close_run(&mut self, run: &loops::Run, now_us: u64) {
        let t = if run.kind == Kind::NPlusOne { self.reads } else { self.writes };
        if t.qualifies(run) {
            self.record_finding(run.to_finding(), now_us);
        }
    }

    fn cursor_qualifies(&self, c: &cursors::Cursor) -> bool {
        c.fetches >= u64::from(self.config.fetch.min_fetches) && u64::from(c.fetch_size) < self.config.fetch.min_rows
    }

    fn close_cursor(&mut self, c: &cursors::Cursor, now_us: u64) {
        if self.cursor_qualifies(c) {
            let f = c.to_finding();
            self.announce(&f, now_us);
            self.record_finding(f, now_us);
        }
    }

    fn pages_qualify(&self, p: &pages::PageRun) -> bool {
        p.pages >= u64::from(self.config.pagination.min_pages) && p.full_pages + 1 >= p.pages
    }

    fn close_pages(&mut self, p: &pages::PageRun, now_us: u64) {
        if self.pages_qualify(p) {
            let f = p.to_finding();
            self.announce(&f, now_us);
            self.record_finding(f, now_us);
        }
    }

    /// Round trips of one connection already explained by loop findings,
    /// so a chatty session is only what remains.
    fn found_loop_round_trips(&self, conn: u64) -> u64 {
        let loops = self.found.values().filter(|f| matches!(f.kind, Kind::NPlusOne | Kind::RepeatedWrite | Kind::PaginationLoop | Kind::UndersizedFetch));
        let open = self.loops.open().filter(|r| {
            let t = if r.kind == Kind::NPlusOne { self.reads } else { self.writes };
            t.qualifies(r)
        });
        loops.flat_map(|f| f.per_conn.iter()).chain(open.flat_map(|r| r.per_conn.iter())).filter(|(c, _)| *c == conn).map(|(_, n)| n).sum()
    }

    fn record_finding(&mut self, f: Finding, _now_us: u64) {
        *self.counts.entry(f.kind.name()).or_default() += 1;
        match self.found.get_mut(&f.key()) {
            Some(existing) => existing.merge(&f),
            None => {
                if self.found.len() >= MAX_FINDINGS
                    && let Some(cheapest) = self.found.iter().min_by_key(|(_, g)| g.round_trips).map(|(k, _)| *k)
                {
                    self.found.remove(&cheapest);
                }
                self.found.insert(f.key(), f);
            }
        }
    }

    /// One warning per new finding, at most a few a minute.
    fn announce(&mut self, f: &Finding, now_us: u64) {
        if self.found.contains_key(&f.key()) {
            return;
        }
        let minute = now_us / 60_000_000;
        if self.log_window.0 != minute {
            self.log_window = (minute, 0);
        }
        self.log_window.1 += 1;
        if self.log_window.1 <= LOG_LINES_PER_MINUTE {
            tracing::warn!(
                kind = f.kind.name(),
                statement = %f.fingerprint,
                round_trips = f.round_trips,
                "finding: {}",
                suggest::headline(f)
            );
        }
    }

    /// Every finding so far, open patterns included, for a report: ranked by
    /// what it would cost at the reference RTT. `conn_time` gives each
    /// connection's time in commands (for "share of the connection").
    pub fn report(&self, conn_time: &dyn Fn(u64) -> u64) -> Vec<FindingReport> {
        let mut all: HashMap<_, Finding> = self.found.clone();
        let mut add = |f: Finding| match all.get_mut(&f.key()) {
            Some(existing) => existing.merge(&f),
            None => {
                all.insert(f.key(), f);
            }
        };
        for run in self.loops.open() {
            let t = if run.kind == Kind::NPlusOne { self.reads } else { self.writes };
            if t.qualifies(run) {
                add(run.to_finding());
            }
        }
        for c in self.cursors.open().filter(|c| self.cursor_qualifies(c)) {
            add(c.to_finding());
        }
        for p in self.pages.open().filter(|p| self.pages_qualify(p)) {
            add(p.to_finding());
        }
        for f in self.chatty.open(&|conn| self.found_loop_round_trips(conn)) {
            add(f);
        }
        let reference_rtt_us = self.reads.reference_rtt_us;
        let mut ranked: Vec<(u64, FindingReport)> = all
            .values()
            .map(|f| {
                let measured = f.measured();
                let at_reference = whatif::project(measured, reference_rtt_us, None);
                (at_reference, self.to_report(f, measured, at_reference, conn_time))
            })
            .collect();
        ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
        ranked.into_iter().map(|(_, r)| r).collect()
    }

    fn to_report(&self, f: &Finding, measured: Measured, at_reference: u64, conn_time: &dyn Fn(u64) -> u64) -> FindingReport {
        let severity = match at_reference {
            10_000_000.. => "critical",
            1_000_000.. => "warning",
            _ => "info",
        };
        let what = match f.kind {
            Kind::NPlusOne | Kind::RepeatedWrite => "this loop",
            Kind::UndersizedFetch => "this cursor",
            Kind::PaginationLoop => "this paging",
            Kind::ChattySession => "this session's small round trips",
        };
        let what_if = projections(measured, &self.config.scenarios, what);
        let conn_total: u64 = f.per_conn.iter().map(|(c, _)| conn_time(*c)).sum();
        let mut evidence = json!({
            "summary": suggest::headline(f),
            "statement": f.text.as_ref(),
            "occurrences": f.occurrences,
            "executions": f.executions,
            "elapsed_us": f.time_us,
            "busy_us": f.busy_us,
            "rows": f.rows,
            "bytes": f.bytes,
            "share_of_connection_time": if conn_total > 0 { (f.busy_us as f64 / conn_total as f64).min(1.0) } else { 0.0 },
            "connections": f.per_conn.iter().map(|(c, _)| c).collect::<Vec<_>>(),
            "projected_at_reference_us": at_reference,
            "reference_rtt_us": self.reads.reference_rtt_us,
            "observed_rtt_us": f.rtt_us,
        });
        if let Scope::Trace(t) = f.scope {
            evidence["trace_id"] = json!(format!("{t:032x}"));
        }
        if let Some((id, text)) = &f.parent {
            evidence["parent_fingerprint_id"] = json!(id.to_string());
            evidence["parent_statement"] = json!(text.as_ref());
        }
        match &f.detail {
            Detail::Loop { distinct } => evidence["distinct_values"] = json!(distinct),
            Detail::Fetch { fetch_size } => evidence["fetch_size"] = json!(fetch_size),
            Detail::Pages { page_size, rescanned } => {
                evidence["page_size"] = json!(page_size);
                evidence["pages"] = json!(f.executions);
                evidence["offset_rows_rescanned"] = json!(rescanned);
            }
            Detail::Chatty { tiny, top } => {
                evidence["tiny_round_trips"] = json!(tiny);
                evidence["top_statements"] = json!(top.iter().map(|(t, n)| json!({"statement": t.as_ref(), "round_trips": n})).collect::<Vec<_>>());
            }
        }
        FindingReport {
            kind: f.kind.name().to_owned(),
            severity: severity.to_owned(),
            fingerprint_id: f.fingerprint.to_string(),
            evidence,
            round_trips: f.round_trips,
            cost_us: f.time_us,
            suggestion: suggest::fix(f),
            what_if: what_if.into_iter().map(|p| serde_json::to_value(p).unwrap_or_default()).collect(),
        }
    }

    pub fn reset(&mut self) {
        self.loops.clear();
        self.cursors.clear();
        self.pages.clear();
        self.chatty.clear();
        self.found.clear();
    }
}

/// Feeds the engine from the collector, one lock per batch.
pub struct FindingsConsumer(pub Arc<Mutex<FindingsEngine>>);

impl Consumer for FindingsConsumer {
    fn events(&mut self, batch: &[Event]) {
        let mut engine = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for event in batch {
            engine.observe(event);
        }
    }
}

#[cfg(test)]
mod tests;

