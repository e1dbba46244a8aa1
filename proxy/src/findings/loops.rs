//! N+1 loops and their write-side twin: the same small statement executed back to back with
//! different values.
//!
//! "Back to back" means what a person reading the statement log would mean. A run of one
//! statement in one scope (connection, or traced request) goes on while
//! - the next execution starts within `max_gap` of the last one's end,
//! - at most `max_between` other data statements ran in between (a loop body often runs a
//!   second or third lookup per row; more than that is other work, not a loop),
//! - and no transaction began or ended, nor was the session reset: ten lookups in each of
//!   thousands of transactions are thousands of bursts of ten, not one loop.
//!
//! A run is linked to its parent when the values its executions use appeared in the sampled
//! result of a query that ended just before the run began. A linked run is a loop over that
//! result and qualifies at `min_repeats`; one without a parent must be longer,
//! `min_repeats_without_parent`, to tell it from a workload that simply does a fixed handful
//! of lookups per transaction.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use rttscope_config::FindingsConfig;

use super::run::{Bar, Context, Detector, ParentLink, Role, Run};
use super::{Detail, Kind, PatternScope};
use crate::fingerprint::{FingerprintId, StatementKind};
use crate::protocol::constants::command::{COM_QUERY, COM_STMT_EXECUTE};
use crate::record::{CommandRecord, Origin, Values};

/// Candidate parents remembered per scope.
const PARENTS_PER_SCOPE: usize = 4;
/// How long before a run's start a parent's result may have ended.
const PARENT_WINDOW_US: u64 = 10_000_000;
/// Children checked against the parents' sampled values (a parent's sample covers its first
/// rows, so later children cannot match anyway).
const CHILDREN_CHECKED: u32 = 64;
/// Open runs tracked at once; past this, the stalest is closed.
const MAX_RUNS: usize = 4096;
/// Scopes whose position and parents are remembered.
const MAX_SCOPES: usize = 4096;

/// A result that may be the parent of a loop.
#[derive(Clone, Debug)]
struct Candidate {
    link: ParentLink,
    /// Its sqlcommenter origin: a loop in one controller is not over another's result.
    origin: Option<Arc<Origin>>,
    /// Sorted, for binary search.
    values: Arc<[u64]>,
}

/// Where a scope is: how many data statements it has run, how many boundaries it has crossed,
/// and the recent results that could be parents.
#[derive(Debug, Default)]
struct Position {
    statements: u64,
    boundaries: u64,
    parents: VecDeque<Candidate>,
}

/// One loop in progress.
#[derive(Clone, Debug)]
struct LoopRun {
    run: Run,
    /// The scope's statement count at its last execution, and its boundary count.
    at_statement: u64,
    at_boundary: u64,
    last_values: Values,
    distinct: u64,
    candidates: Vec<Candidate>,
    hits: Vec<u32>,
    checked: u32,
}

impl LoopRun {
    /// The candidate whose sampled result held most of the children's values, if it held at
    /// least half of those checked (and three).
    fn parent(&self) -> Option<&Candidate> {
        let need = (self.checked / 2).max(3);
        self.hits
            .iter()
            .enumerate()
            .filter(|&(_, &h)| h >= need)
            .max_by_key(|&(_, &h)| h)
            .and_then(|(i, _)| self.candidates.get(i))
    }
}

/// Thresholds of one loop kind.
#[derive(Clone, Copy, Debug)]
struct Thresholds {
    min_repeats: u64,
    min_repeats_without_parent: u64,
    max_gap_us: u64,
    max_between: u64,
    max_rows: u64,
    min_projected_cost_us: u64,
}

pub struct Loops {
    reads: Thresholds,
    writes: Thresholds,
    runs: HashMap<(PatternScope, FingerprintId), LoopRun>,
    positions: HashMap<PatternScope, Position>,
    last: Option<(PatternScope, FingerprintId)>,
}

impl Loops {
    pub fn new(config: &FindingsConfig) -> Loops {
        let n = &config.n_plus_one;
        let reads = Thresholds {
            min_repeats: u64::from(n.min_repeats),
            min_repeats_without_parent: u64::from(n.min_repeats_without_parent),
            max_gap_us: n.max_gap.0.as_micros() as u64,
            max_between: u64::from(n.max_between),
            max_rows: n.max_rows,
            min_projected_cost_us: n.min_projected_cost.0.as_micros() as u64,
        };
        let w = &config.repeated_write;
        let writes = Thresholds {
            min_repeats: u64::from(w.min_repeats),
            min_repeats_without_parent: u64::from(w.min_repeats),
            max_gap_us: w.max_gap.0.as_micros() as u64,
            max_between: u64::from(w.max_between),
            max_rows: u64::MAX,
            min_projected_cost_us: w.min_projected_cost.0.as_micros() as u64,
        };
        Loops { reads, writes, runs: HashMap::default(), positions: HashMap::default(), last: None }
    }

    fn thresholds(&self, kind: Kind) -> &Thresholds {
        if kind == Kind::NPlusOne { &self.reads } else { &self.writes }
    }

    /// Which loop kind a data statement could belong to, if any.
    fn kind_of(&self, r: &CommandRecord) -> Option<Kind> {
        if !matches!(r.command, COM_QUERY | COM_STMT_EXECUTE) || r.error.is_some() || r.values.as_slice().is_empty() {
            return None;
        }
        match r.kind {
            // A page of a LIMIT/OFFSET loop is the pagination detector's.
            StatementKind::Select if r.rows <= self.reads.max_rows && r.paging.is_none_or(|l| l.offset == 0) => {
                Some(Kind::NPlusOne)
            }
            StatementKind::Insert | StatementKind::Replace | StatementKind::Update | StatementKind::Delete
                if r.rows_in_values <= 1 && r.affected_rows <= 1 =>
            {
                Some(Kind::RepeatedWrite)
            }
            _ => None,
        }
    }

    fn position(&mut self, scope: PatternScope) -> &mut Position {
        if self.positions.len() >= MAX_SCOPES
            && !self.positions.contains_key(&scope)
            && let Some(&stale) = self.positions.keys().next()
        {
            // Forget some scope; any will do. Its runs see a fresh count and end (below).
            self.positions.remove(&stale);
        }
        self.positions.entry(scope).or_default()
    }

    /// Remembers a multi-row result as a possible parent.
    fn remember_parent(position: &mut Position, r: &CommandRecord) {
        let Some(sample) = &r.sample else { return };
        let mut values = sample.to_vec();
        values.sort_unstable();
        values.dedup();
        if position.parents.len() >= PARENTS_PER_SCOPE {
            position.parents.pop_front();
        }
        position.parents.push_back(Candidate {
            link: ParentLink {
                fingerprint: r.fingerprint,
                text: r.text.clone(),
                request_us: r.request_us,
                end_us: r.last_byte_us,
                round_trips: u64::from(r.round_trips),
                bytes: {
                    let (up, down) = r.wire();
                    up + down
                },
                injected_us: r.injected_within_latency(),
            },
            origin: r.origin.clone(),
            values: values.into(),
        });
    }
}

/// Whether `run` goes on with an execution of `r` of `kind` (by thresholds `t`), the scope's
/// statement number `statement` after `boundaries` boundaries: back to back, and from the
/// same place.
fn continues(run: &LoopRun, t: &Thresholds, kind: Kind, r: &CommandRecord, statement: u64, boundaries: u64) -> bool {
    let between = statement.checked_sub(run.at_statement + 1);
    run.run.kind == kind
        && run.run.origin == r.origin
        && r.request_us.saturating_sub(run.run.last_us) <= t.max_gap_us
        && boundaries == run.at_boundary
        && between.is_some_and(|n| n <= t.max_between)
}

/// A run that starts with `r`, the scope's statement number `statement` after `boundaries`
/// boundaries, with the multi-row results shortly before it in `position` as its candidate parents.
fn new_run(
    position: Option<&Position>,
    kind: Kind,
    ctx: &Context,
    r: &CommandRecord,
    statement: u64,
    boundaries: u64,
) -> LoopRun {
    let candidates: Vec<Candidate> = position
        .map(|p| {
            p.parents
                .iter()
                .filter(|c| {
                    c.link.fingerprint != r.fingerprint
                        && (c.origin.is_none() || r.origin.is_none() || c.origin == r.origin)
                        && c.link.end_us <= r.request_us
                        && r.request_us - c.link.end_us <= PARENT_WINDOW_US
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    LoopRun {
        run: Run::new(kind, ctx, r, Detail::Loop { distinct: 0 }),
        at_statement: statement,
        at_boundary: boundaries,
        last_values: Values::default(),
        distinct: 0,
        hits: vec![0; candidates.len()],
        candidates,
        checked: 0,
    }
}

impl Detector for Loops {
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::NPlusOne, Kind::RepeatedWrite]
    }

    /// Inline, as most commands are neither data nor a boundary: those leave here, without the call into [`Loops::follow`].
    #[inline]
    fn command(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>) {
        self.last = None;
        if !matches!(ctx.role, Role::Boundary | Role::Data) {
            return;
        }
        self.follow(r, ctx, ended);
    }

    fn last_extended(&self) -> Option<&Run> {
        self.last.and_then(|k| self.runs.get(&k)).map(|r| &r.run)
    }

    fn connection_closed(&mut self, conn_id: u64, ended: &mut Vec<Run>) {
        let scope = PatternScope::Connection(conn_id);
        let keys: Vec<_> = self.runs.keys().filter(|(s, _)| *s == scope).copied().collect();
        ended.extend(keys.into_iter().filter_map(|k| self.runs.remove(&k)).map(|r| r.run));
        self.positions.remove(&scope);
        self.last = None;
    }

    fn in_progress(&self, out: &mut Vec<Run>) {
        out.extend(self.runs.values().map(|r| r.run.clone()));
    }

    fn bar(&self, run: &Run) -> Option<Bar> {
        let t = self.thresholds(run.kind);
        let Detail::Loop { distinct } = run.detail else { return None };
        if distinct < t.min_repeats {
            return None;
        }
        let min_executions = if run.parent.is_some() { t.min_repeats } else { t.min_repeats_without_parent };
        Some(Bar { min_executions, min_projected_cost_us: t.min_projected_cost_us })
    }

    fn clear(&mut self) {
        self.runs.clear();
        self.positions.clear();
        self.last = None;
    }
}

impl Loops {
    /// What [`Detector::command`] does with a command that may be this detector's.
    #[inline(never)]
    fn follow(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>) {
        let scope = ctx.scope;
        let (statement, boundaries) = match ctx.role {
            Role::Boundary => {
                self.position(scope).boundaries += 1;
                return;
            }
            Role::Data => {
                let position = self.position(scope);
                Loops::remember_parent(position, r);
                position.statements += 1;
                (position.statements, position.boundaries)
            }
            Role::Housekeeping | Role::Other => return,
        };
        let Some(kind) = self.kind_of(r) else { return };
        let key = (scope, r.fingerprint);
        let t = *self.thresholds(kind);
        // One look-up when the run goes on, the common case; a new run may need room first.
        let run = match self.runs.entry(key) {
            Entry::Occupied(known) => {
                let run = known.into_mut();
                if !continues(run, &t, kind, r, statement, boundaries) {
                    let fresh = new_run(self.positions.get(&scope), kind, ctx, r, statement, boundaries);
                    ended.push(std::mem::replace(run, fresh).run);
                }
                run
            }
            Entry::Vacant(_) => {
                if self.runs.len() >= MAX_RUNS
                    && let Some(stalest) = self.runs.iter().min_by_key(|(_, run)| run.run.last_us).map(|(k, _)| *k)
                    && let Some(run) = self.runs.remove(&stalest)
                {
                    ended.push(run.run);
                }
                let fresh = new_run(self.positions.get(&scope), kind, ctx, r, statement, boundaries);
                self.runs.entry(key).or_insert(fresh)
            }
        };
        if run.run.executions == 0 || r.values != run.last_values {
            run.distinct += 1;
        }
        run.last_values = r.values;
        run.at_statement = statement;
        run.run.add(r, ctx);
        if run.checked < CHILDREN_CHECKED && !run.candidates.is_empty() {
            run.checked += 1;
            for (candidate, hits) in run.candidates.iter().zip(run.hits.iter_mut()) {
                if r.values.as_slice().iter().any(|v| candidate.values.binary_search(v).is_ok()) {
                    *hits += 1;
                }
            }
            run.run.parent = run.parent().map(|c| c.link.clone());
        }
        run.run.detail = Detail::Loop { distinct: run.distinct };
        // A run already announced has nothing more to announce: the engine is not sent to
        // look it up again.
        if !run.run.announced.get() {
            self.last = Some(key);
        }
    }
}
