//! What the findings add to `/metrics`, since start (`POST /reset` leaves it alone, so that
//! counters only go up): occurrences by kind, and by kind and statement the occurrences, round
//! trips and time wasted, bounded like the statement series.
//!
//! The bound is per kind: the first `metrics.top_statements` statements a kind finds keep a
//! series of their own, every later one counts in that kind's `other`. Membership never
//! changes, so no count ever moves between series.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Finding, Kind};
use crate::fingerprint::{FingerprintId, summary};

/// Statements a kind labels unless [`FindingCounts::set_top`] says otherwise.
const DEFAULT_TOP: usize = 100;

/// One kind's findings of one statement (or of its `other`), summed since start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatementFindings {
    /// OpenTelemetry's `db.query.summary` of the statement (`other` for the rest).
    pub summary: Arc<str>,
    /// Occurrences that qualified.
    pub occurrences: u64,
    /// Their round trips (an N+1 parent's included).
    pub round_trips: u64,
    /// Round trips beyond one per occurrence, each at the reference RTT, µs: what the fix
    /// (one round trip per occurrence) would have saved over a link at `findings.reference_rtt`.
    pub wasted_us: u64,
}

impl StatementFindings {
    fn add(&mut self, f: &Finding, reference_rtt_us: u64) {
        self.occurrences += f.occurrences;
        self.round_trips += f.round_trips;
        self.wasted_us += f.round_trips.saturating_sub(f.occurrences) * reference_rtt_us;
    }
}

/// The findings' metrics counts.
#[derive(Clone, Debug)]
pub struct FindingCounts {
    by_kind: BTreeMap<&'static str, u64>,
    top: usize,
    reference_rtt_us: u64,
    by_statement: BTreeMap<(&'static str, FingerprintId), StatementFindings>,
    labelled: BTreeMap<&'static str, usize>,
    other: BTreeMap<&'static str, StatementFindings>,
}

impl FindingCounts {
    /// Nothing counted yet; wasted time at `reference_rtt_us` per round trip.
    pub fn new(reference_rtt_us: u64) -> FindingCounts {
        FindingCounts {
            by_kind: Kind::ALL.iter().map(|k| (k.name(), 0)).collect(),
            top: DEFAULT_TOP,
            reference_rtt_us,
            by_statement: BTreeMap::new(),
            labelled: BTreeMap::new(),
            other: BTreeMap::new(),
        }
    }

    /// At most `top` statements per kind get series of their own (`metrics.top_statements`).
    pub fn set_top(&mut self, top: usize) {
        self.top = top;
    }

    /// Counts one qualifying occurrence (or merged occurrences) `f`.
    pub fn count(&mut self, f: &Finding) {
        let kind = f.kind.name();
        *self.by_kind.entry(kind).or_default() += f.occurrences.max(1);
        let key = (kind, f.fingerprint);
        let labelled = self.labelled.entry(kind).or_default();
        let series = match self.by_statement.get_mut(&key) {
            Some(series) => series,
            None if *labelled < self.top => {
                *labelled += 1;
                // Computed once, when the statement's series is made.
                let named = StatementFindings { summary: Arc::from(summary(&f.text)), ..Default::default() };
                self.by_statement.entry(key).or_insert(named)
            }
            None => self
                .other
                .entry(kind)
                .or_insert_with(|| StatementFindings { summary: Arc::from("other"), ..Default::default() }),
        };
        series.add(f, self.reference_rtt_us);
    }

    /// Occurrences by kind, every kind listed.
    pub fn by_kind(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.by_kind.iter().map(|(k, n)| (*k, *n))
    }

    /// Occurrences of the kind named `kind` (0 for a name that is none).
    pub fn of_kind(&self, kind: &str) -> u64 {
        self.by_kind.get(kind).copied().unwrap_or(0)
    }

    /// `(kind, statement id or "other", counts)` of every series.
    pub fn by_statement(&self) -> impl Iterator<Item = (&'static str, String, &StatementFindings)> + '_ {
        self.by_statement
            .iter()
            .map(|((kind, id), s)| (*kind, id.to_string(), s))
            .chain(self.other.iter().map(|(kind, s)| (*kind, "other".to_owned(), s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{Detail, PatternScope};
    use crate::fingerprint::StatementKind;
    use crate::record::{LargeResponses, WallUnion};

    fn finding(kind: Kind, id: u64, text: &str, round_trips: u64) -> Finding {
        Finding {
            kind,
            fingerprint: FingerprintId(id),
            text: Arc::from(text),
            statement_kind: StatementKind::Select,
            application: Arc::from("app@host"),
            origin: None,
            parent: None,
            scope: PatternScope::Connection(1),
            occurrences: 1,
            executions: round_trips,
            smallest: round_trips,
            largest: round_trips,
            round_trips,
            spans: WallUnion::default(),
            busy: WallUnion::default(),
            commands_us: 0,
            injected_us: 0,
            large_responses: LargeResponses::default(),
            bytes: 0,
            rows: 0,
            detail: Detail::Loop { distinct: 0, shape: None },
            per_conn: Vec::new(),
            rtt_us: 0,
            emulated: None,
            driver: None,
        }
    }

    #[test]
    fn each_kind_labels_its_first_statements_and_sums_the_rest() {
        let mut counts = FindingCounts::new(10_000);
        counts.set_top(2);
        for id in [1, 2, 3, 4, 1] {
            // 11 round trips: an N+1 parent and ten children.
            counts.count(&finding(Kind::NPlusOne, id, "select * from shop_author where id = ?", 11));
        }
        let series: Vec<(String, StatementFindings)> =
            counts.by_statement().map(|(k, id, s)| (format!("{k} {id}"), s.clone())).collect();
        assert_eq!(series.len(), 3, "{series:?}");
        let one = &series.iter().find(|(k, _)| k == &format!("n_plus_one {}", FingerprintId(1))).unwrap().1;
        assert_eq!((one.occurrences, one.round_trips, one.wasted_us), (2, 22, 2 * 10 * 10_000));
        assert_eq!(&*one.summary, "SELECT shop_author");
        let other = &series.iter().find(|(k, _)| k == "n_plus_one other").unwrap().1;
        assert_eq!((other.occurrences, other.round_trips, &*other.summary), (2, 22, "other"));
        assert_eq!(counts.of_kind("n_plus_one"), 5);
    }
}
