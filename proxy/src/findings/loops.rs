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
//! result of a query that ended just before the run began — on its own connection, or on
//! another of the same application's (a loop handed round a pool). A linked run is a loop over
//! that result and qualifies at `min_repeats`; one without a parent must be longer,
//! `min_repeats_without_parent`, to tell it from a workload that simply does a fixed handful
//! of lookups per transaction.
//!
//! Repetition alone is no loop: independent requests on a pooled connection, or a benchmark
//! picking one of a few tables at random, make streaks of one statement too, and a JOIN or a
//! batch cannot replace them. A run qualifies only with a [`LoopShape`] that shows one unit of
//! work issued it: a parent, one trace, one sqlcommenter origin, one explicit transaction, or
//! a regular loop body — the same number of other statements between every two executions and
//! a steady time between them, which random arrivals do not have.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustc_hash::FxHashMap as HashMap;

use rttscope_config::FindingsConfig;

use super::run::{AppId, Bar, Context, Detector, ParentLink, Role, Run};
use super::{Detail, Kind, LoopShape, PatternScope};
use crate::fingerprint::{FingerprintId, StatementKind};
use crate::protocol::constants::command::{COM_QUERY, COM_STMT_EXECUTE};
use crate::record::{CommandRecord, Origin, Values};

/// Candidate parents remembered per scope.
const PARENTS_PER_SCOPE: usize = 4;
/// How long before a run's start a parent's result may have ended.
const PARENT_WINDOW_US: u64 = 10_000_000;
/// The longest gap between two steps of a run over a parent's rows (see [`over_live_parent`]):
/// a pool of eight over a 250 ms link.
const PARENT_GAP_US: u64 = 2_000_000;
/// Children checked against the parents' sampled values (a parent's sample covers its first
/// rows, so later children cannot match anyway).
const CHILDREN_CHECKED: u32 = 64;
/// Open runs tracked at once; past this, the stalest is closed.
const MAX_RUNS: usize = 4096;
/// Scopes whose position and parents are remembered; applications whose recent results are.
const MAX_SCOPES: usize = 4096;
/// Gaps between executions a run remembers to judge how steady they are: its first ones.
const GAPS_KEPT: usize = 128;
/// A regular loop body: at least this share of the iterations have the same number of other
/// statements between them ...
const SAME_BODY_SHARE: f64 = 0.9;
/// ... and at least this share of the gaps are no shorter than a third of their median (or
/// than the median less half a millisecond): a loop's gaps are its own code's time, which a
/// busy machine stretches but never shrinks much, while arrivals at random are most often
/// short (a fifth of a Poisson stream's gaps are under a third of its median; unless they
/// come so fast that the connection never idles, when they are a queue worked off as a
/// loop). The long side is not judged: a loaded machine makes any loop's gaps uneven there.
const STEADY_GAP_SHARE: f64 = 0.9;
/// A gap may fall this far short of the median and still be steady, µs: a loop's µs-scale
/// gaps jitter by more than their own size.
const STEADY_GAP_SLACK_US: u64 = 500;

/// A result that may be the parent of a loop.
#[derive(Clone, Debug)]
struct Candidate {
    link: ParentLink,
    /// Its sqlcommenter origin: a loop in one controller is not over another's result.
    origin: Option<Arc<Origin>>,
    /// Sorted, for binary search.
    values: Arc<[u64]>,
    /// Set by the first run that links to it: that one counts the parent's round trip.
    claimed: Arc<AtomicBool>,
}

impl Candidate {
    /// The link for a run that takes this parent: counted by the first to take it.
    fn link_for(&self, held: Option<&ParentLink>) -> ParentLink {
        let same = held.is_some_and(|h| h.request_us == self.link.request_us && h.fingerprint == self.link.fingerprint);
        let counted = if same {
            held.is_some_and(|h| h.counted)
        } else {
            self.claimed.compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        };
        ParentLink { counted, ..self.link.clone() }
    }
}

/// Where a scope is: how many data statements it has run, how many boundaries it has crossed,
/// whether an explicit transaction is open, and the recent results that could be parents.
#[derive(Debug, Default)]
struct Position {
    statements: u64,
    boundaries: u64,
    in_transaction: bool,
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
    /// Began inside an explicit transaction (and, being unbroken by a boundary, is in it still).
    in_transaction: bool,
    /// Iterations by how many other data statements came between (the last slot: that many
    /// or more).
    bodies: [u32; 8],
    /// The first gaps between one execution's end and the next's request, µs.
    gaps: Vec<u32>,
    /// Whether `gaps` were steady when last judged (at each of the first eight, then every
    /// eighth).
    steady: bool,
}

impl LoopRun {
    /// Notes the body and the gap of the iteration that ends with an execution requested at
    /// `request_us`, `between` other statements after the previous one.
    fn iteration(&mut self, between: u64, request_us: u64) {
        if self.run.executions == 0 {
            return;
        }
        self.bodies[(between as usize).min(7)] += 1;
        if self.gaps.len() < GAPS_KEPT {
            let gap = request_us.saturating_sub(self.run.last_us);
            self.gaps.push(u32::try_from(gap).unwrap_or(u32::MAX));
            if self.gaps.len() <= 8 || self.gaps.len().is_multiple_of(8) {
                self.steady = steady(&self.gaps);
            }
        }
    }

    /// What shows these executions are one loop, strongest first.
    fn shape(&self) -> Option<LoopShape> {
        if self.run.parent.is_some() {
            Some(LoopShape::Parent)
        } else if matches!(self.run.scope, PatternScope::Trace(_)) {
            Some(LoopShape::Trace)
        } else if self.run.origin.is_some() {
            Some(LoopShape::Origin)
        } else if self.in_transaction {
            Some(LoopShape::Transaction)
        } else {
            self.regular().then_some(LoopShape::Regular)
        }
    }

    /// A constant loop body at a steady pace.
    fn regular(&self) -> bool {
        let iterations: u32 = self.bodies.iter().sum();
        let same = self.bodies.iter().copied().max().unwrap_or(0);
        iterations > 0 && f64::from(same) >= SAME_BODY_SHARE * f64::from(iterations) && self.steady
    }

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

/// Whether few gaps fall far short of their median: a loop's pace, not arrivals'.
fn steady(gaps: &[u32]) -> bool {
    let mut sorted = gaps.to_vec();
    sorted.sort_unstable();
    let median = u64::from(sorted[sorted.len() / 2]);
    let low = (median / 3).min(median.saturating_sub(STEADY_GAP_SLACK_US));
    let kept = gaps.iter().filter(|&&g| u64::from(g) >= low).count();
    kept as f64 >= STEADY_GAP_SHARE * gaps.len() as f64
}

/// Whether a boundary statement opens an explicit transaction (`BEGIN`, `START TRANSACTION`);
/// any other boundary ends whatever was open.
fn opens_transaction(r: &CommandRecord) -> bool {
    r.command == COM_QUERY && (r.text.starts_with("begin") || r.text.starts_with("start transaction"))
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
    /// Each application's recent multi-row results, whichever of its connections read them:
    /// a loop handed round a pool runs on the others.
    results: HashMap<AppId, VecDeque<Candidate>>,
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
        Loops {
            reads,
            writes,
            runs: HashMap::default(),
            positions: HashMap::default(),
            results: HashMap::default(),
            last: None,
        }
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

    /// Remembers a multi-row result as a possible parent, in its scope and its application's.
    fn remember_parent(&mut self, scope: PatternScope, app: AppId, r: &CommandRecord) {
        let Some(sample) = &r.sample else { return };
        let mut values = sample.to_vec();
        values.sort_unstable();
        values.dedup();
        let candidate = Candidate {
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
                counted: false,
            },
            origin: r.origin.clone(),
            values: values.into(),
            claimed: Arc::new(AtomicBool::new(false)),
        };
        push_bounded(&mut self.position(scope).parents, candidate.clone());
        if self.results.len() >= MAX_SCOPES && !self.results.contains_key(&app) {
            self.results.clear();
        }
        push_bounded(self.results.entry(app).or_default(), candidate);
    }
}

/// Adds a candidate parent, forgetting the oldest past [`PARENTS_PER_SCOPE`].
fn push_bounded(parents: &mut VecDeque<Candidate>, candidate: Candidate) {
    if parents.len() >= PARENTS_PER_SCOPE {
        parents.pop_front();
    }
    parents.push_back(candidate);
}

/// Whether `run` goes on with an execution of `r` of `kind` (by thresholds `t`), the scope's
/// statement number `statement` after `boundaries` boundaries: back to back, and from the
/// same place. If it does, how many other data statements came between. `results` are the
/// application's latest multi-row results, for a run over one of them (see [`over_live_parent`]).
fn continues(
    run: &LoopRun,
    t: &Thresholds,
    kind: Kind,
    r: &CommandRecord,
    (statement, boundaries): (u64, u64),
    results: Option<&VecDeque<Candidate>>,
) -> Option<u64> {
    let between = statement.checked_sub(run.at_statement + 1)?;
    let gap = r.request_us.saturating_sub(run.run.last_us);
    (run.run.kind == kind
        && run.run.origin == r.origin
        && (gap <= t.max_gap_us || (gap <= PARENT_GAP_US && over_live_parent(run, r, results)))
        && boundaries == run.at_boundary
        && between <= t.max_between)
        .then_some(between)
}

/// Whether `run` is over a parent's rows — linked to it, or `r`'s values among them — and that
/// parent is still the application's latest result of its statement. A loop handed round a
/// pool over a far link waits the other connections' round trips between its own children
/// (three of 50 ms on a pool of four), longer than any gap between a loop's steps on one
/// connection; its parent is what shows the children are one loop. The parent's statement
/// running again starts the next loop, over the new rows.
fn over_live_parent(run: &LoopRun, r: &CommandRecord, results: Option<&VecDeque<Candidate>>) -> bool {
    let Some(results) = results else { return false };
    let latest = |c: &Candidate| match results.iter().rposition(|l| l.link.fingerprint == c.link.fingerprint) {
        Some(i) => Arc::ptr_eq(&results[i].claimed, &c.claimed),
        None => false,
    };
    match &run.run.parent {
        Some(parent) => run
            .candidates
            .iter()
            .find(|c| c.link.request_us == parent.request_us && c.link.fingerprint == parent.fingerprint)
            .is_some_and(latest),
        None => run
            .candidates
            .iter()
            .any(|c| r.values.as_slice().iter().any(|v| c.values.binary_search(v).is_ok()) && latest(c)),
    }
}

/// A run that starts with `r`, the scope's statement number `statement` after `boundaries`
/// boundaries, with the multi-row results shortly before it (in its scope, then on its
/// application's other connections) as its candidate parents.
fn new_run(
    candidates: Vec<Candidate>,
    kind: Kind,
    ctx: &Context,
    r: &CommandRecord,
    at: (u64, u64),
    in_transaction: bool,
) -> LoopRun {
    LoopRun {
        run: Run::new(kind, ctx, r, Detail::Loop { distinct: 0, shape: None }),
        at_statement: at.0,
        at_boundary: at.1,
        last_values: Values::default(),
        distinct: 0,
        hits: vec![0; candidates.len()],
        candidates,
        checked: 0,
        in_transaction,
        bodies: [0; 8],
        gaps: Vec::new(),
        steady: false,
    }
}

/// The results that could be the parent of a run starting with `r`: recent, other than its
/// own statement, from the same place in the application; its scope's first.
fn candidates(scope: Option<&Position>, app: Option<&VecDeque<Candidate>>, r: &CommandRecord) -> Vec<Candidate> {
    let mut found: Vec<Candidate> = Vec::new();
    for c in scope.into_iter().flat_map(|p| p.parents.iter()).chain(app.into_iter().flatten()) {
        let fits = c.link.fingerprint != r.fingerprint
            && (c.origin.is_none() || r.origin.is_none() || c.origin == r.origin)
            && c.link.end_us <= r.request_us
            && r.request_us - c.link.end_us <= PARENT_WINDOW_US;
        if fits && !found.iter().any(|f| Arc::ptr_eq(&f.claimed, &c.claimed)) {
            found.push(c.clone());
        }
    }
    found
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
        // The application's results stay: its other connections may still loop over them.
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
        let Detail::Loop { distinct, shape } = run.detail else { return None };
        if distinct < t.min_repeats || shape.is_none() {
            return None;
        }
        // A streak whose only evidence is its regularity must be long enough that chance
        // could not have made it (six of one table's statements in a row among four tables
        // come by chance in a few thousand statements; twenty do not).
        let min_executions = match shape {
            Some(LoopShape::Regular) => t.min_repeats_without_parent.max(self.reads.min_repeats_without_parent),
            _ if run.parent.is_some() => t.min_repeats,
            _ => t.min_repeats_without_parent,
        };
        Some(Bar { min_executions, min_projected_cost_us: t.min_projected_cost_us })
    }

    fn clear(&mut self) {
        self.runs.clear();
        self.positions.clear();
        self.results.clear();
        self.last = None;
    }
}

impl Loops {
    /// What [`Detector::command`] does with a command that may be this detector's.
    #[inline(never)]
    fn follow(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>) {
        let scope = ctx.scope;
        let (statement, boundaries, in_transaction) = match ctx.role {
            Role::Boundary => {
                let position = self.position(scope);
                position.boundaries += 1;
                position.in_transaction = opens_transaction(r);
                return;
            }
            Role::Data => {
                self.remember_parent(scope, ctx.app, r);
                let position = self.position(scope);
                position.statements += 1;
                (position.statements, position.boundaries, position.in_transaction)
            }
            Role::Housekeeping | Role::Other => return,
        };
        let Some(kind) = self.kind_of(r) else { return };
        let key = (scope, r.fingerprint);
        let t = *self.thresholds(kind);
        let at = (statement, boundaries);
        // One look-up when the run goes on, the common case; a new run may need room first.
        let run = match self.runs.entry(key) {
            Entry::Occupied(known) => {
                let run = known.into_mut();
                match continues(run, &t, kind, r, at, self.results.get(&ctx.app)) {
                    Some(between) => run.iteration(between, r.request_us),
                    None => {
                        let parents = candidates(self.positions.get(&scope), self.results.get(&ctx.app), r);
                        let fresh = new_run(parents, kind, ctx, r, at, in_transaction);
                        ended.push(std::mem::replace(run, fresh).run);
                    }
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
                let parents = candidates(self.positions.get(&scope), self.results.get(&ctx.app), r);
                let fresh = new_run(parents, kind, ctx, r, at, in_transaction);
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
            // Once found, a parent stays: the children past its sampled rows cannot match it,
            // and on a pool each connection's share of the sampled rows comes first.
            if let Some(c) = run.parent() {
                run.run.parent = Some(c.link_for(run.run.parent.as_ref()));
            }
        }
        run.run.detail = Detail::Loop { distinct: run.distinct, shape: run.shape() };
        // A run already announced has nothing more to announce: the engine is not sent to
        // look it up again.
        if !run.run.announced.get() {
            self.last = Some(key);
        }
    }
}
