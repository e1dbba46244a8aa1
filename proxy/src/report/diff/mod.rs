//! Two reports compared — "did the fix work, what did the move cost": the totals before and
//! after, each statement's change (matched by statement id), statements only on one side, and
//! findings fixed, new or unchanged (matched by kind and statement). Built from two [`Report`]s,
//! rendered as JSON (its own small versioned schema, documented in `docs/report-schema.md`), text
//! or a self-contained HTML page.
//!
//! - this file: the comparison, typed;
//! - `text`, `html`: its renderings, which show untrusted text through `escape`.

mod html;
mod text;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use rttscope_config::ReportFormat;

use super::{FindingReport, QueryReport, Report};
use crate::findings::Kind;

pub use html::render_html;
pub use text::render_text;

/// Bumped on any incompatible change to the diff's JSON.
pub const DIFF_SCHEMA_VERSION: u32 = 1;

/// The diff in `format`.
pub fn render(diff: &ReportDiff, format: ReportFormat) -> Result<String, serde_json::Error> {
    Ok(match format {
        ReportFormat::Json => serde_json::to_string_pretty(diff)? + "\n",
        ReportFormat::Text => render_text(diff),
        ReportFormat::Html => render_html(diff),
    })
}

/// What `rttscope report --diff` builds (`docs/report-diff-schema.md`): the first report compared
/// with the second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReportDiff {
    /// [`DIFF_SCHEMA_VERSION`]: versioned apart from the report schema.
    pub diff_schema_version: u32,
    /// `rttscope <version>`: the build that compared, not the one that wrote either report.
    pub generator: String,
    /// Where the first report came from.
    pub before: Side,
    /// Where the second report came from.
    pub after: Side,
    /// The two recordings' totals.
    pub totals: TotalsDiff,
    /// Statements in both reports, by the size of their change in time, largest first.
    pub statements: Vec<StatementDiff>,
    /// Statements only the first report has (gone after), by time, slowest first.
    pub only_before: Vec<StatementSide>,
    /// Statements only the second report has (new after), by time, slowest first.
    pub only_after: Vec<StatementSide>,
    /// Findings matched by kind and statement: fixed, new, unchanged.
    pub findings: FindingsDiff,
}

/// Where one side came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// The file or admin URL it was read from.
    pub source: String,
    /// That report's own `generated_at` (RFC 3339, UTC).
    pub generated_at: String,
    /// That report's `window_us`: how long a recording it covers, µs.
    pub window_us: u64,
}

/// A number before and after.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// In the first report.
    pub before: u64,
    /// In the second report.
    pub after: u64,
    /// `after - before`.
    pub change: i64,
    /// `after / before`; `None` when `before` is 0.
    pub ratio: Option<f64>,
}

impl Change {
    /// `before` to `after`; a difference that does not fit an `i64` reads as `i64::MAX`.
    pub fn of(before: u64, after: u64) -> Change {
        let change = i64::try_from(i128::from(after) - i128::from(before)).unwrap_or(i64::MAX);
        let ratio = (before > 0).then(|| after as f64 / before as f64);
        Change { before, after, change, ratio }
    }
}

/// `totals`: the recordings' totals, before and after.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TotalsDiff {
    /// Every command recorded (`totals.commands`).
    pub commands: Change,
    /// Request/response exchanges with the server.
    pub round_trips: Change,
    /// Time in commands, µs.
    pub time_us: Change,
    /// Bytes up and down, between the clients and rttscope.
    pub bytes: Change,
}

/// `statements[]`: a statement in both reports, matched by `fingerprint_id`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatementDiff {
    /// The statement id both reports share (stable across runs and versions).
    pub fingerprint_id: String,
    /// The normalised statement, as the second report has it.
    pub fingerprint: String,
    /// Executions (`queries[].count`).
    pub calls: Change,
    /// Round trips attributed to it, prepares and fetches included.
    pub round_trips: Change,
    /// Total time to last byte (`queries[].latency_us.sum`), µs.
    pub time_us: Change,
    /// Payload bytes up and down (`queries[].bytes`).
    pub bytes: Change,
}

/// A statement that one report alone has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatementSide {
    /// Statement id (`queries[].fingerprint_id`).
    pub fingerprint_id: String,
    /// The normalised statement.
    pub fingerprint: String,
    /// Executions (`queries[].count`).
    pub calls: u64,
    /// Round trips attributed to it, prepares and fetches included.
    pub round_trips: u64,
    /// Total time to last byte (`queries[].latency_us.sum`), µs.
    pub time_us: u64,
    /// Payload bytes up and down (`queries[].bytes`).
    pub bytes: u64,
}

/// `findings`: each side's findings grouped by kind and statement (other applications and
/// parents summed), then matched.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FindingsDiff {
    /// In the first report, not in the second.
    pub fixed: Vec<FindingSide>,
    /// In the second report, not in the first.
    pub new: Vec<FindingSide>,
    /// In both: what each cost before and after.
    pub unchanged: Vec<FindingChange>,
}

/// A finding on one side: a kind and statement, its occurrences summed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FindingSide {
    /// The pattern (`n_plus_one`, ...); with `fingerprint_id`, what findings are matched by.
    pub kind: Kind,
    /// The statement it is about.
    pub fingerprint_id: String,
    /// The normalised statement.
    pub statement: String,
    /// The costliest occurrence's sentence.
    pub summary: String,
    /// Round trips over all its occurrences on this side.
    pub round_trips: u64,
    /// Time of its own commands over all its occurrences on this side, µs: what the lists are sorted
    /// by.
    pub cost_us: u64,
}

/// `findings.unchanged[]`: a pattern both reports have, with its cost before and after.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FindingChange {
    /// The pattern (`n_plus_one`, ...); with `fingerprint_id`, what findings are matched by.
    pub kind: Kind,
    /// The statement it is about.
    pub fingerprint_id: String,
    /// The normalised statement, as the second report has it.
    pub statement: String,
    /// The sentence after.
    pub summary: String,
    /// Round trips it cost, all occurrences summed on each side.
    pub round_trips: Change,
    /// Time of its own commands, µs, all occurrences summed on each side; `unchanged` is sorted by
    /// its `after`.
    pub cost_us: Change,
}

/// `before` compared with `after`; `sources` name where each was read from.
pub fn diff(before: &Report, after: &Report, sources: (&str, &str)) -> ReportDiff {
    let side = |r: &Report, source: &str| Side {
        source: source.to_owned(),
        generated_at: r.generated_at.clone(),
        window_us: r.window_us,
    };
    let (b, a) = (&before.totals, &after.totals);
    let totals = TotalsDiff {
        commands: Change::of(b.commands, a.commands),
        round_trips: Change::of(b.round_trips, a.round_trips),
        time_us: Change::of(b.time_us, a.time_us),
        bytes: Change::of(b.bytes_up + b.bytes_down, a.bytes_up + a.bytes_down),
    };
    let (statements, only_before, only_after) = statements(&before.queries, &after.queries);
    ReportDiff {
        diff_schema_version: DIFF_SCHEMA_VERSION,
        generator: format!("rttscope {}", env!("CARGO_PKG_VERSION")),
        before: side(before, sources.0),
        after: side(after, sources.1),
        totals,
        statements,
        only_before,
        only_after,
        findings: findings(&before.findings, &after.findings),
    }
}

fn query_bytes(q: &QueryReport) -> u64 {
    q.bytes.up + q.bytes.down
}

fn side_of(q: &QueryReport) -> StatementSide {
    StatementSide {
        fingerprint_id: q.fingerprint_id.clone(),
        fingerprint: q.fingerprint.clone(),
        calls: q.count,
        round_trips: q.round_trips,
        time_us: q.latency_us.sum,
        bytes: query_bytes(q),
    }
}

fn statements(
    before: &[QueryReport],
    after: &[QueryReport],
) -> (Vec<StatementDiff>, Vec<StatementSide>, Vec<StatementSide>) {
    let after_by_id: BTreeMap<&str, &QueryReport> = after.iter().map(|q| (q.fingerprint_id.as_str(), q)).collect();
    let before_ids: std::collections::BTreeSet<&str> = before.iter().map(|q| q.fingerprint_id.as_str()).collect();
    let mut matched = Vec::new();
    let mut only_before = Vec::new();
    for b in before {
        match after_by_id.get(b.fingerprint_id.as_str()) {
            Some(a) => matched.push(StatementDiff {
                fingerprint_id: b.fingerprint_id.clone(),
                fingerprint: a.fingerprint.clone(),
                calls: Change::of(b.count, a.count),
                round_trips: Change::of(b.round_trips, a.round_trips),
                time_us: Change::of(b.latency_us.sum, a.latency_us.sum),
                bytes: Change::of(query_bytes(b), query_bytes(a)),
            }),
            None => only_before.push(side_of(b)),
        }
    }
    let mut only_after: Vec<StatementSide> =
        after.iter().filter(|a| !before_ids.contains(a.fingerprint_id.as_str())).map(side_of).collect();
    matched.sort_by(|x, y| {
        y.time_us
            .change
            .unsigned_abs()
            .cmp(&x.time_us.change.unsigned_abs())
            .then(x.fingerprint_id.cmp(&y.fingerprint_id))
    });
    for side in [&mut only_before, &mut only_after] {
        side.sort_by(|x, y| y.time_us.cmp(&x.time_us).then(x.fingerprint_id.cmp(&y.fingerprint_id)));
    }
    (matched, only_before, only_after)
}

/// Findings of one report by kind and statement, occurrences of other applications or parents
/// summed: a fix is judged by whether the pattern on that statement is gone.
fn by_pattern(findings: &[FindingReport]) -> BTreeMap<(Kind, &str), FindingSide> {
    let mut out: BTreeMap<(Kind, &str), FindingSide> = BTreeMap::new();
    // Costliest first, so each pattern's sentence is its costliest occurrence's.
    let mut sorted: Vec<&FindingReport> = findings.iter().collect();
    sorted.sort_by_key(|f| std::cmp::Reverse(f.cost_us));
    for f in sorted {
        let entry = out.entry((f.kind, f.fingerprint_id.as_str())).or_insert_with(|| FindingSide {
            kind: f.kind,
            fingerprint_id: f.fingerprint_id.clone(),
            statement: f.evidence.statement.clone(),
            summary: f.evidence.summary.clone(),
            round_trips: 0,
            cost_us: 0,
        });
        entry.round_trips += f.round_trips;
        entry.cost_us += f.cost_us;
    }
    out
}

fn findings(before: &[FindingReport], after: &[FindingReport]) -> FindingsDiff {
    let (before, mut after) = (by_pattern(before), by_pattern(after));
    let mut diff = FindingsDiff::default();
    for (key, b) in before {
        match after.remove(&key) {
            Some(a) => diff.unchanged.push(FindingChange {
                kind: a.kind,
                fingerprint_id: a.fingerprint_id,
                statement: a.statement,
                summary: a.summary,
                round_trips: Change::of(b.round_trips, a.round_trips),
                cost_us: Change::of(b.cost_us, a.cost_us),
            }),
            None => diff.fixed.push(b),
        }
    }
    diff.new = after.into_values().collect();
    diff.fixed.sort_by_key(|x| std::cmp::Reverse(x.cost_us));
    diff.new.sort_by_key(|x| std::cmp::Reverse(x.cost_us));
    diff.unchanged.sort_by_key(|x| std::cmp::Reverse(x.cost_us.after));
    diff
}

/// A signed change for a sentence or a table: `+1,234`, `-56`, `0`.
fn signed(change: i64, show: impl Fn(u64) -> String) -> String {
    match change {
        0 => show(0),
        c if c > 0 => format!("+{}", show(c.unsigned_abs())),
        c => format!("-{}", show(c.unsigned_abs())),
    }
}

/// `×0.52`, `×0.0020`, `×12`, or `new` when there was nothing before.
fn ratio(c: &Change) -> String {
    match c.ratio {
        Some(r) if r >= 10.0 => format!("×{r:.0}"),
        Some(r) if r >= 0.1 => format!("×{r:.2}"),
        Some(r) => format!("×{r:.4}"),
        None if c.after == 0 => "—".to_owned(),
        None => "new".to_owned(),
    }
}

#[cfg(test)]
mod tests;
