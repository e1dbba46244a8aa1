//! N+1 loops and their write-side twin: the same small statement executed
//! back to back with different values. A run continues while the gap from
//! one execution's end to the next one's start stays under `max_gap`;
//! other statements may interleave (a loop body often runs two). A run is
//! linked to its parent when the values the children use appeared in the
//! sampled result of a query just before the run began.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::{add_round_trips, min_known, Detail, Finding, Kind, Scope};
use crate::fingerprint::{FingerprintId, StatementKind};
use crate::record::{CommandRecord, Values};

/// Candidate parents remembered per scope.
const PARENTS_PER_SCOPE: usize = 4;
/// How long before a run's start a parent's result may have ended.
const PARENT_WINDOW_US: u64 = 10_000_000;
/// Children checked against the parents' sampled values (a parent's sample
/// covers its first rows, so later children cannot match anyway).
const CHILDREN_CHECKED: u32 = 64;
/// Open runs tracked at once; past this, the stalest is closed.
const MAX_RUNS: usize = 4096;
/// Scopes whose candidate parents are remembered.
const MAX_SCOPES: usize = 4096;

#[derive(Clone, Debug)]
pub struct Parent {
    pub fingerprint: FingerprintId,
    pub text: Arc<str>,
    request_us: u64,
    end_us: u64,
    round_trips: u64,
    /// Sorted, for binary search.
    values: Arc<[u64]>,
}

/// One loop in progress.
#[derive(Clone, Debug)]
pub struct Run {
    pub kind: Kind,
    pub scope: Scope,
    pub fingerprint: FingerprintId,
    pub text: Arc<str>,
    pub statement_kind: StatementKind,
    pub count: u64,
    /// Executions whose values differed from the one before.
    pub distinct: u64,
    last_values: Values,
    pub first_us: u64,
    pub last_end_us: u64,
    pub round_trips: u64,
    pub time_us: u64,
    pub bytes: u64,
    pub rows: u64,
    parents: Vec<Parent>,
    hits: Vec<u32>,
    checked: u32,
    /// Round trips by connection (a traced loop may span a pool).
    pub per_conn: Vec<(u64, u64)>,
    rtt_us: u32,
}

impl Run {
    /// The parent whose sampled result held most of the children's values,
    /// if it held at least half of those checked (and three).
    pub fn parent(&self) -> Option<&Parent> {
        let need = (self.checked / 2).max(3);
        self.hits.iter().enumerate().filter(|&(_, &h)| h >= need).max_by_key(|&(_, &h)| h).and_then(|(i, _)| self.parents.get(i))
    }

    /// The loop as a finding; a linked parent's own round trip and time
    /// are part of it (N children cost N+1 round trips).
    pub fn to_finding(&self) -> Finding {
        let linked = self.parent();
        let parent = linked.map(|p| (p.fingerprint, p.text.clone()));
        let (round_trips, start_us) = match linked {
            Some(p) => (self.round_trips + p.round_trips, p.request_us.min(self.first_us)),
            None => (self.round_trips, self.first_us),
        };
        Finding {
            kind: self.kind,
            fingerprint: self.fingerprint,
            text: self.text.clone(),
            statement_kind: self.statement_kind,
            parent,
            scope: self.scope,
            occurrences: 1,
            executions: self.count,
            round_trips,
            time_us: self.last_end_us.saturating_sub(start_us),
            busy_us: self.time_us,
            bytes: self.bytes,
            rows: self.rows,
            detail: Detail::Loop { distinct: self.distinct },
            per_conn: self.per_conn.clone(),
            rtt_us: self.rtt_us,
        }
    }
}

/// Thresholds of one loop kind.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    pub min_repeats: u64,
    pub max_gap_us: u64,
    pub max_rows: u64,
    pub min_projected_cost_us: u64,
    pub reference_rtt_us: u64,
}

impl Thresholds {
    pub fn qualifies(&self, run: &Run) -> bool {
        run.count >= self.min_repeats
            && run.distinct >= self.min_repeats
            && run.round_trips.saturating_mul(self.reference_rtt_us) >= self.min_projected_cost_us
    }
}

#[derive(Default)]
pub struct Loops {
    runs: HashMap<(Scope, FingerprintId), Run>,
    parents: HashMap<Scope, VecDeque<Parent>>,
}

impl Loops {
    /// Which loop kind a record could belong to, if any.
    pub fn kind_of(r: &CommandRecord, reads: &Thresholds) -> Option<Kind> {
        use crate::protocol::constants::command::{COM_QUERY, COM_STMT_EXECUTE};
        if !matches!(r.command, COM_QUERY | COM_STMT_EXECUTE) || r.error.is_some() || r.values.as_slice().is_empty() {
            return None;
        }
        match r.kind {
            // A page of a LIMIT/OFFSET loop is the pagination detector's.
            StatementKind::Select if r.rows <= reads.max_rows && r.limit.is_none_or(|l| l.offset == 0) => Some(Kind::NPlusOne),
            StatementKind::Insert | StatementKind::Replace | StatementKind::Update | StatementKind::Delete
                if r.rows_in_values <= 1 && r.affected_rows <= 1 =>
            {
                Some(Kind::RepeatedWrite)
            }
            _ => None,
        }
    }

    /// Remembers a multi-row result as a possible parent.
    pub fn remember_parent(&mut self, scope: Scope, r: &CommandRecord) {
        let Some(sample) = &r.sample else { return };
        if self.parents.len() >= MAX_SCOPES && !self.parents.contains_key(&scope) {
            // Forget some scope; any will do, a loop's parent is recent.
            if let Some(&stale) = self.parents.keys().next() {
                self.parents.remove(&stale);
            }
        }
        let mut values = sample.to_vec();
        values.sort_unstable();
        values.dedup();
        let list = self.parents.entry(scope).or_default();
        if list.len() >= PARENTS_PER_SCOPE {
            list.pop_front();
        }
        list.push_back(Parent {
            fingerprint: r.fingerprint,
            text: r.text.clone(),
            request_us: r.request_us,
            end_us: r.last_byte_us,
            round_trips: u64::from(r.round_trips),
            values: values.into(),
        });
    }

    /// Adds an execution; returns the run it closed (if the gap ended one)
    /// and a reference to the run it now extends.
    pub fn add(&mut self, scope: Scope, kind: Kind, r: &CommandRecord, t: &Thresholds) -> (Option<Run>, &Run) {
        let key = (scope, r.fingerprint);
        let mut closed = None;
        if self.runs.get(&key).is_some_and(|run| r.request_us.saturating_sub(run.last_end_us) > t.max_gap_us || run.kind != kind) {
            closed = self.runs.remove(&key);
        }
        if !self.runs.contains_key(&key) && self.runs.len() >= MAX_RUNS {
            let stalest = self.runs.iter().min_by_key(|(_, run)| run.last_end_us).map(|(k, _)| *k);
            if let Some(k) = stalest {
                closed = closed.or_else(|| self.runs.remove(&k));
            }
        }
        let parents = &self.parents;
        let run = self.runs.entry(key).or_insert_with(|| {
            let candidates: Vec<Parent> = parents
                .get(&scope)
                .map(|list| {
                    list.iter()
                        .filter(|p| p.fingerprint != r.fingerprint && p.end_us <= r.request_us && r.request_us - p.end_us <= PARENT_WINDOW_US)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            Run {
                kind,
                scope,
                fingerprint: r.fingerprint,
                text: r.text.clone(),
                statement_kind: r.kind,
                count: 0,
                distinct: 0,
                last_values: Values::default(),
                first_us: r.request_us,
                last_end_us: r.last_byte_us,
                round_trips: 0,
                time_us: 0,
                bytes: 0,
                rows: 0,
                hits: vec![0; candidates.len()],
                parents: candidates,
                checked: 0,
                per_conn: Vec::new(),
                rtt_us: 0,
            }
        });
        // Busy time is the union of the commands' times: pipelined commands
        // overlap, and their sum would exceed the wall clock.
        let busy_from = if run.count == 0 { r.request_us } else { r.request_us.max(run.last_end_us) };
        run.time_us += r.last_byte_us.saturating_sub(busy_from);
        run.count += 1;
        if run.count == 1 || r.values != run.last_values {
            run.distinct += 1;
        }
        run.last_values = r.values;
        run.last_end_us = run.last_end_us.max(r.last_byte_us);
        run.round_trips += u64::from(r.round_trips);
        run.bytes += r.bytes_up + r.bytes_down;
        run.rows += r.rows;
        add_round_trips(&mut run.per_conn, r.conn_id, u64::from(r.round_trips));
        run.rtt_us = min_known(run.rtt_us, r.rtt_us);
        if run.checked < CHILDREN_CHECKED && !run.parents.is_empty() {
            run.checked += 1;
            for (parent, hits) in run.parents.iter().zip(run.hits.iter_mut()) {
                if r.values.as_slice().iter().any(|v| parent.values.binary_search(v).is_ok()) {
                    *hits += 1;
                }
            }
        }
        (closed, run)
    }

    /// Closes every run of a scope (its connection closed).
    pub fn close_scope(&mut self, scope: Scope) -> Vec<Run> {
        let keys: Vec<_> = self.runs.keys().filter(|(s, _)| *s == scope).copied().collect();
        self.parents.remove(&scope);
        keys.into_iter().filter_map(|k| self.runs.remove(&k)).collect()
    }

    /// Runs still open.
    pub fn open(&self) -> impl Iterator<Item = &Run> {
        self.runs.values()
    }

    pub fn clear(&mut self) {
        self.runs.clear();
        self.parents.clear();
    }
}
