//! The shape every detector shares: the [`Detector`] trait, the [`Run`] it accumulates (one
//! occurrence of a pattern), the [`Bar`] a run must clear, and what a command is to a detector
//! ([`Role`]).

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::whatif::Measured;
use super::{Detail, Driver, Emulated, Finding, FindingKey, Kind, PatternScope};
use crate::fingerprint::{FingerprintId, StatementKind};
use crate::protocol::constants::command::*;
use crate::record::{CommandRecord, LargeResponses, Origin, WallUnion};

/// An application — `user@client-host` and its client library — as a number, worked out when
/// it connects: detectors that keep state per application key it by these eight bytes
/// instead of hashing the name for every command. Two applications of one number (a 64-bit
/// hash) would share that state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AppId(u64);

impl AppId {
    /// The number of `application` run by `driver`.
    pub fn of(application: &str, driver: Option<Driver>) -> AppId {
        let driver = driver.map_or(0, |d| d as u64 + 1);
        AppId(crate::fingerprint::hash_value(application.as_bytes()) ^ driver.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }
}

/// Where and for whom a command ran, as every detector sees it (borrowed from the engine and
/// the record: nothing in it is copied per command).
#[derive(Clone, Debug)]
pub struct Context<'a> {
    /// The connection, or the request when the command carried a `traceparent`.
    pub scope: PatternScope,
    /// `user@client-host` of the connection (empty when unknown).
    pub application: &'a Arc<str>,
    /// `application` and `driver` as a number.
    pub app: AppId,
    /// Where in the application the command came from (its sqlcommenter tags).
    pub origin: &'a Option<Arc<Origin>>,
    /// The emulated link configured when the command was collected.
    pub emulated: Option<Emulated>,
    /// The connection's client library, when its connection attributes named one we know.
    pub driver: Option<Driver>,
    /// What the command is to the detectors ([`Role::of`]), worked out once for them all.
    pub role: Role,
}

/// What a run must reach to be reported. Checked by the engine for every kind alike: at least
/// `min_executions`, and round trips that would cost at least `min_projected_cost_us` at the
/// reference RTT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar {
    /// Repetitions, fetches, pages or connections an occurrence needs at least.
    pub min_executions: u64,
    /// Its round trips' cost at the reference RTT must reach this, µs.
    pub min_projected_cost_us: u64,
}

/// A detector of one or more finding kinds.
pub trait Detector: Send {
    /// The kinds of the runs it makes.
    fn kinds(&self) -> &'static [Kind];

    /// Follows one command. Runs it ended (because this command broke them) go to `ended`.
    fn command(&mut self, r: &CommandRecord, ctx: &Context, ended: &mut Vec<Run>);

    /// The run the last command extended, if it extended one, so the engine can announce a
    /// finding the moment it qualifies. A detector may answer `None` for a run already
    /// announced: the engine has nothing more to do with it.
    fn last_extended(&self) -> Option<&Run>;

    /// A connection closed: its runs go to `ended`.
    fn connection_closed(&mut self, conn_id: u64, ended: &mut Vec<Run>);

    /// Copies of the runs still in progress, for a report.
    fn in_progress(&self, out: &mut Vec<Run>);

    /// The bar `run` must clear, or `None` when it cannot qualify whatever its size (a
    /// cursor fetching enough rows per batch, pages that are not full).
    fn bar(&self, run: &Run) -> Option<Bar>;

    /// Forgets everything (`POST /reset`).
    fn clear(&mut self);
}

/// The parent of an N+1 loop: the query whose result rows the loop's values came from. Its
/// round trip, time and bytes are part of the loop's (N children cost N+1 round trips).
#[derive(Clone, Debug, PartialEq)]
pub struct ParentLink {
    /// The parent statement's id.
    pub fingerprint: FingerprintId,
    /// The parent statement's normalised SQL.
    pub text: Arc<str>,
    /// When the parent was requested, µs since the recording epoch.
    pub request_us: u64,
    /// When its last response byte arrived, µs since the recording epoch.
    pub end_us: u64,
    /// Its round trips (usually 1).
    pub round_trips: u64,
    /// Its bytes on the long hop's wire, both ways.
    pub bytes: u64,
    /// Of its time, what an emulated link added, µs.
    pub injected_us: u64,
    /// Whether this occurrence holds the parent's round trip and time: loops on a pool's
    /// connections over one result all link to it, and the first to do so counts it.
    pub counted: bool,
}

/// What a run keeps of one of its commands: enough to add it later (a chatty session's
/// window holds these until it turns out dense enough).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub conn_id: u64,
    pub request_us: u64,
    pub last_byte_us: u64,
    pub round_trips: u32,
    pub rtt_us: u32,
    /// Both ways.
    pub bytes: u64,
    pub rows: u64,
    pub injected_us: u64,
    /// Slow start's rounds over its response, and its streaming ([`LargeResponses`]).
    pub large_responses: LargeResponses,
}

impl Step {
    #[inline(always)]
    pub fn of(r: &CommandRecord) -> Step {
        Step {
            conn_id: r.conn_id,
            request_us: r.request_us,
            last_byte_us: r.last_byte_us,
            round_trips: r.round_trips,
            rtt_us: r.rtt_us,
            bytes: {
                let (up, down) = r.wire();
                up + down
            },
            rows: r.rows,
            injected_us: r.injected_within_latency(),
            large_responses: LargeResponses::of(r),
        }
    }
}

/// Connections remembered per run (a traced loop may span a pool).
pub const CONNECTIONS_PER_RUN: usize = 16;
/// Statements a chatty run names.
const TOP_SHOWN: usize = 5;

/// One occurrence of a pattern in progress: the accumulator every detector uses.
#[derive(Clone, Debug)]
pub struct Run {
    /// The pattern this run is an occurrence of.
    pub kind: Kind,
    /// The connection or traced request it happened in.
    pub scope: PatternScope,
    /// `user@client-host` of the connection; empty when unknown.
    pub application: Arc<str>,
    /// The first command's origin. A chatty session spans many statements, so has none.
    pub origin: Option<Arc<Origin>>,
    /// The statement repeated; for a chatty run, its most frequent statement.
    pub fingerprint: FingerprintId,
    /// Its normalised SQL.
    pub text: Arc<str>,
    /// Its statement kind.
    pub statement_kind: StatementKind,
    /// Commands counted: repetitions, fetches, pages, round trips or connections.
    pub executions: u64,
    /// Round trips of its commands.
    pub round_trips: u64,
    /// First request and last response of the run's own commands (`first_us` is `u64::MAX`
    /// until the first command).
    pub first_us: u64,
    /// Last response byte of its commands, µs since the recording epoch.
    pub last_us: u64,
    /// The wall-clock union of its commands' request-to-last-byte intervals: pipelined or
    /// pooled commands overlap, and their sum would exceed the wall clock.
    pub busy: WallUnion,
    /// Its commands' request-to-last-byte times summed: connection-time, `busy` with
    /// overlaps counted as often as they happened.
    pub commands_us: u64,
    /// Of `commands_us`, what an emulated link added (as each command measured it).
    pub injected_us: u64,
    /// Slow start's rounds over its commands' large responses, and their streaming.
    pub large_responses: LargeResponses,
    /// Bytes on the long hop's wire, both ways.
    pub bytes: u64,
    /// Rows returned.
    pub rows: u64,
    /// `(connection id, round trips)`, at most [`CONNECTIONS_PER_RUN`] connections.
    pub per_conn: Vec<(u64, u64)>,
    /// The lowest known base RTT of its commands, µs (0: unknown).
    pub rtt_us: u32,
    /// The emulated link its commands ran over, if any.
    pub emulated: Option<Emulated>,
    /// The client library of its connection, when known.
    pub driver: Option<Driver>,
    /// For `n_plus_one`: the query whose rows supplied the loop's values.
    pub parent: Option<ParentLink>,
    /// The kind's own facts, carried into the finding.
    pub detail: Detail,
    /// Set once the engine has seen the run qualify (and announced it, unless its finding
    /// was announced before), so each later extension skips building and hashing its key.
    pub announced: std::cell::Cell<bool>,
}

impl Run {
    /// An empty run of `kind` about `r`'s statement.
    pub fn new(kind: Kind, ctx: &Context, r: &CommandRecord, detail: Detail) -> Run {
        Run {
            kind,
            scope: ctx.scope,
            application: ctx.application.clone(),
            origin: if kind == Kind::ChattySession { None } else { ctx.origin.clone() },
            fingerprint: r.fingerprint,
            text: r.text.clone(),
            statement_kind: r.kind,
            executions: 0,
            round_trips: 0,
            first_us: u64::MAX,
            last_us: 0,
            busy: WallUnion::default(),
            commands_us: 0,
            injected_us: 0,
            large_responses: LargeResponses::default(),
            bytes: 0,
            rows: 0,
            per_conn: Vec::new(),
            rtt_us: 0,
            emulated: None,
            driver: ctx.driver,
            parent: None,
            detail,
            announced: std::cell::Cell::new(false),
        }
    }

    /// Adds one of the pattern's own commands.
    pub fn add(&mut self, r: &CommandRecord, ctx: &Context) {
        self.add_step(&Step::of(r), ctx);
    }

    /// Adds one of the pattern's own commands, as remembered.
    #[inline(always)]
    pub fn add_step(&mut self, r: &Step, ctx: &Context) {
        self.busy.add(r.request_us, r.last_byte_us);
        self.commands_us += r.last_byte_us.saturating_sub(r.request_us);
        self.injected_us += r.injected_us;
        self.large_responses.add(r.large_responses);
        self.executions += 1;
        self.round_trips += u64::from(r.round_trips);
        self.first_us = self.first_us.min(r.request_us);
        self.last_us = self.last_us.max(r.last_byte_us);
        self.bytes += r.bytes;
        self.rows += r.rows;
        add_round_trips(&mut self.per_conn, r.conn_id, u64::from(r.round_trips));
        self.rtt_us = min_known(self.rtt_us, r.rtt_us);
        if r.injected_us > 0 && self.emulated.is_none() {
            self.emulated = ctx.emulated;
        }
    }

    /// What projecting the run's own commands starts from.
    pub fn measured(&self) -> Measured {
        Measured {
            commands_us: self.commands_us,
            wall_us: self.busy.us(),
            round_trips: self.round_trips,
            bytes: self.bytes,
            observed_rtt_us: u64::from(self.rtt_us),
            injected_us: self.injected_us,
            large_responses: self.large_responses,
        }
    }

    /// What the run's finding will merge by.
    pub fn key(&self) -> FindingKey {
        (
            self.kind,
            self.fingerprint,
            self.parent.as_ref().map(|p| p.fingerprint),
            self.application.clone(),
            self.origin.clone(),
            self.driver,
        )
    }

    /// The run as a finding of one occurrence; a linked parent's round trip, time and bytes
    /// are part of it. Its span is the run's stretch and the parent's own interval: the work
    /// between a parent and a loop that started later (another loop, say) is not this one's.
    pub fn to_finding(&self) -> Finding {
        let (mut round_trips, mut commands_us, mut injected_us, mut bytes) =
            (self.round_trips, self.commands_us, self.injected_us, self.bytes);
        let (mut spans, mut busy) = (WallUnion::default(), self.busy);
        if let Some(p) = self.parent.as_ref().filter(|p| p.counted) {
            round_trips += p.round_trips;
            commands_us += p.end_us.saturating_sub(p.request_us);
            injected_us += p.injected_us;
            bytes += p.bytes;
            spans.add(p.request_us, p.end_us);
            busy.add(p.request_us, p.end_us);
        }
        spans.add(self.first_us.min(self.last_us), self.last_us);
        Finding {
            kind: self.kind,
            fingerprint: self.fingerprint,
            text: self.text.clone(),
            statement_kind: self.statement_kind,
            application: self.application.clone(),
            origin: self.origin.clone(),
            parent: self.parent.as_ref().map(|p| (p.fingerprint, p.text.clone())),
            scope: self.scope,
            occurrences: 1,
            executions: self.executions,
            smallest: self.executions,
            largest: self.executions,
            round_trips,
            spans,
            busy,
            commands_us,
            injected_us: injected_us.min(commands_us),
            large_responses: self.large_responses,
            bytes,
            rows: self.rows,
            detail: self.detail.clone(),
            per_conn: self.per_conn.clone(),
            rtt_us: self.rtt_us,
            emulated: self.emulated,
            driver: self.driver,
        }
    }
}

/// What a command is to the detectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A statement that reads or writes data: what loops are made of.
    Data,
    /// Ends what came before: a transaction's start or end, a session reset or user change.
    /// Statements on either side of one are not back to back.
    Boundary,
    /// A round trip that does no work on data: a ping, `SET`, `SHOW`, `USE`, a `SELECT`
    /// without `FROM` (`SELECT 1`, `SELECT @@version`). What chatty sessions are made of.
    Housekeeping,
    /// Everything else: prepares, fetches, closes, connection setup.
    Other,
}

impl Role {
    /// Classifies by command and, for SQL, by statement kind and first word.
    pub fn of(r: &CommandRecord) -> Role {
        match r.command {
            COM_QUERY | COM_STMT_EXECUTE => statement_role(r.kind, &r.text),
            COM_PING | COM_INIT_DB | COM_STATISTICS | COM_SET_OPTION | COM_DEBUG => Role::Housekeeping,
            COM_RESET_CONNECTION | COM_CHANGE_USER => Role::Boundary,
            _ => Role::Other,
        }
    }
}

/// Statements whose role [`Roles`] remembers before it forgets them all and starts again.
const MAX_REMEMBERED_ROLES: usize = 16_384;

/// [`Role::of`], remembered by statement: a statement's role is read from its text (a
/// substring search, some 200 instructions), and statements recur.
#[derive(Debug, Default)]
pub struct Roles {
    by_statement: HashMap<FingerprintId, Role>,
    /// The last statement's role, looked at before the map: a loop repeats its statement,
    /// and a hit saves the map's look-up (some 25 instructions a command).
    last: Option<(FingerprintId, Role)>,
}

impl Roles {
    /// The role of `r`, as [`Role::of`] gives it.
    pub fn of(&mut self, r: &CommandRecord) -> Role {
        if !matches!(r.command, COM_QUERY | COM_STMT_EXECUTE) {
            return Role::of(r);
        }
        match self.last {
            Some((fingerprint, role)) if fingerprint == r.fingerprint => role,
            _ => {
                let role = self.remembered(r);
                self.last = Some((r.fingerprint, role));
                role
            }
        }
    }

    fn remembered(&mut self, r: &CommandRecord) -> Role {
        if let Some(role) = self.by_statement.get(&r.fingerprint) {
            return *role;
        }
        if self.by_statement.len() >= MAX_REMEMBERED_ROLES {
            self.by_statement.clear();
        }
        let role = Role::of(r);
        self.by_statement.insert(r.fingerprint, role);
        role
    }
}

/// The role of a statement from its kind and normalised text (lower case, one space).
fn statement_role(kind: StatementKind, text: &str) -> Role {
    match kind {
        StatementKind::Select if !text.contains(" from ") => Role::Housekeeping,
        StatementKind::Other => match first_word(text) {
            "begin" | "commit" | "xa" => Role::Boundary,
            "start" if text.starts_with("start transaction") => Role::Boundary,
            "rollback" if !text.starts_with("rollback to") => Role::Boundary,
            "set" | "show" | "use" | "do" => Role::Housekeeping,
            _ => Role::Data,
        },
        _ => Role::Data,
    }
}

/// The text up to its first space or `(`.
fn first_word(text: &str) -> &str {
    let end = text.bytes().position(|c| c == b' ' || c == b'(').unwrap_or(text.len());
    &text[..end]
}

/// The smaller of two RTTs, where 0 means unknown.
pub(crate) fn min_known(a: u32, b: u32) -> u32 {
    match (a, b) {
        (0, x) | (x, 0) => x,
        (x, y) => x.min(y),
    }
}

/// Adds `n` round trips of connection `conn` to a bounded per-connection list.
pub(crate) fn add_round_trips(list: &mut Vec<(u64, u64)>, conn: u64, n: u64) {
    match list.iter().position(|(c, _)| *c == conn) {
        Some(i) => list[i].1 += n,
        None if list.len() < CONNECTIONS_PER_RUN => list.push((conn, n)),
        None => {}
    }
}

/// Adds `more`'s statement counts to `top`, keeping the largest few, largest first.
pub(crate) fn merge_top(top: &mut Vec<(Arc<str>, u64)>, more: &[(Arc<str>, u64)]) {
    for (text, n) in more {
        match top.iter_mut().find(|(t, _)| t == text) {
            Some(entry) => entry.1 += n,
            None => top.push((text.clone(), *n)),
        }
    }
    sort_top(top);
    top.truncate(TOP_SHOWN);
}

/// Puts statement counts in the order a run shows them: largest first, then by text.
pub(crate) fn sort_top(top: &mut [(Arc<str>, u64)]) {
    top.sort_by(top_order);
}

/// Whether statement count `a` comes before `b` in a run's top ([`sort_top`]'s order).
pub(crate) fn outranks(a: &(Arc<str>, u64), b: &(Arc<str>, u64)) -> bool {
    top_order(a, b) == std::cmp::Ordering::Less
}

fn top_order(a: &(Arc<str>, u64), b: &(Arc<str>, u64)) -> std::cmp::Ordering {
    b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_of_statements() {
        let cases = [
            (StatementKind::Select, "select c from sbtest1 where id=?", Role::Data),
            (StatementKind::Select, "select ?", Role::Housekeeping),
            (StatementKind::Select, "select @@version_comment limit ?", Role::Housekeeping),
            (StatementKind::Select, "select (select count(*) from t)", Role::Data),
            (StatementKind::Update, "update t set a=? where id=?", Role::Data),
            (StatementKind::Other, "begin", Role::Boundary),
            (StatementKind::Other, "start transaction read only", Role::Boundary),
            (StatementKind::Other, "commit", Role::Boundary),
            (StatementKind::Other, "rollback", Role::Boundary),
            (StatementKind::Other, "rollback to savepoint a", Role::Data),
            (StatementKind::Other, "set autocommit=?", Role::Housekeeping),
            (StatementKind::Other, "show warnings", Role::Housekeeping),
            (StatementKind::Other, "create table t (a int)", Role::Data),
        ];
        for (kind, text, role) in cases {
            assert_eq!(statement_role(kind, text), role, "{text}");
        }
    }

    #[test]
    fn top_statements_merge_and_stay_few() {
        let t = |s: &str, n| (Arc::<str>::from(s), n);
        let mut top = vec![t("a", 5), t("b", 3)];
        merge_top(&mut top, &[t("b", 4), t("c", 1), t("d", 1), t("e", 1), t("f", 1)]);
        assert_eq!(top, vec![t("b", 7), t("a", 5), t("c", 1), t("d", 1), t("e", 1)]);
    }
}
