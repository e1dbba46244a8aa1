//! Per-statement Prometheus series, bounded: the top `N` statements by total time keep a
//! series of their own, every other statement counts in one `other` series, so a scrape has
//! at most `N + 1` series per family however many distinct statements arrive.
//!
//! Counters must only go up (or `rate()` reads a reset), so membership is sticky and counts
//! never move out of `other`:
//! - while fewer than `N` statements are labelled, a new statement is labelled at once;
//! - later ones are *candidates*: counted in `other`, ranked by their time;
//! - at a rebalance (each scrape, and when the candidates fill up) a candidate with more time
//!   than twice the least of the labelled takes its place: its past counts stay in `other` and its
//!   own series starts at zero; the statement it displaced folds into `other` (which grows)
//!   and its series ends.
//!
//! Since start, like [`CommandMetrics`](super::CommandMetrics): `/reset` leaves it alone.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::{BucketHistogram, CommandRecord, SECONDS_BUCKETS};
use crate::fingerprint::{FingerprintId, StatementKind, summary};
use crate::protocol::constants::command::{self, *};

/// Rows per response: none, one, a page, a batch, a bulk export.
pub const ROWS_BUCKETS: &[f64] =
    &[0.0, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 10000.0, 100000.0, 1000000.0];

/// One statement's series (or `other`'s).
#[derive(Clone, Debug)]
pub struct StatementSeries {
    /// `SELECT`, `INSERT`, ... for SQL (its first keyword); the command name otherwise.
    pub operation: Arc<str>,
    /// OpenTelemetry's `db.query.summary` (`SELECT shop_author`), from the normalised text.
    pub summary: Arc<str>,
    /// The normalised text (no literals), at most [`MAX_INFO_TEXT`] bytes: the info series'.
    pub text: Arc<str>,
    /// Request to last response byte, seconds: `db_client_operation_duration_seconds`.
    pub duration_seconds: BucketHistogram,
    /// Request to first response byte, seconds: `rttscope_statement_first_byte_seconds`.
    pub first_byte_seconds: BucketHistogram,
    /// Rows per response, in [`ROWS_BUCKETS`]: `db_client_response_returned_rows`.
    pub rows: BucketHistogram,
    /// Client waits summed: `rttscope_statement_round_trips_total`.
    pub round_trips: u64,
    /// Bytes on the long hop's wire (compressed when it is), requests and responses.
    pub wire_request_bytes: u64,
    /// The response side of `wire_request_bytes`.
    pub wire_response_bytes: u64,
    /// Total time since the statement was first seen, µs: its rank, kept across a promotion.
    rank_us: u64,
}

/// Longest normalised text the info series carries, in bytes; longer ones end in `…`.
pub const MAX_INFO_TEXT: usize = 200;

/// What names a statement's series, computed once when the series is made (never per
/// execution): its operation, summary and shortened text.
#[derive(Clone, Debug)]
struct Names {
    operation: Arc<str>,
    summary: Arc<str>,
    text: Arc<str>,
}

impl Names {
    fn of(r: &CommandRecord) -> Names {
        let operation = operation_name(r);
        if !carries_sql(r.command) {
            // No SQL: the command's name is all there is to say.
            return Names { summary: operation.clone(), text: operation.clone(), operation };
        }
        Names { summary: Arc::from(summary(&r.text)), text: Arc::from(shorten(&r.text, MAX_INFO_TEXT)), operation }
    }

    fn other() -> Names {
        let other: Arc<str> = Arc::from("other");
        Names { operation: other.clone(), summary: other, text: Arc::from("") }
    }
}

/// `text` cut to at most `max` bytes at a character boundary, with `…` when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl StatementSeries {
    fn new(names: Names) -> StatementSeries {
        let Names { operation, summary, text } = names;
        StatementSeries {
            operation,
            summary,
            text,
            duration_seconds: BucketHistogram::new(SECONDS_BUCKETS),
            first_byte_seconds: BucketHistogram::new(SECONDS_BUCKETS),
            rows: BucketHistogram::new(ROWS_BUCKETS),
            round_trips: 0,
            wire_request_bytes: 0,
            wire_response_bytes: 0,
            rank_us: 0,
        }
    }

    #[inline(always)]
    fn add(&mut self, r: &CommandRecord) {
        let latency_us = r.latency_us();
        self.duration_seconds.observe(latency_us as f64 / 1e6);
        if let Some(us) = r.first_byte_latency_us() {
            self.first_byte_seconds.observe(us as f64 / 1e6);
        }
        self.rows.observe(r.rows as f64);
        self.round_trips += u64::from(r.round_trips);
        let (up, down) = r.wire();
        self.wire_request_bytes += up;
        self.wire_response_bytes += down;
        self.rank_us += latency_us;
    }

    fn merge(&mut self, other: &StatementSeries) {
        self.duration_seconds.merge(&other.duration_seconds);
        self.first_byte_seconds.merge(&other.first_byte_seconds);
        self.rows.merge(&other.rows);
        self.round_trips += other.round_trips;
        self.wire_request_bytes += other.wire_request_bytes;
        self.wire_response_bytes += other.wire_response_bytes;
    }

    /// The same statement with nothing counted yet, keeping its rank.
    fn fresh(&self) -> StatementSeries {
        let names = Names { operation: self.operation.clone(), summary: self.summary.clone(), text: self.text.clone() };
        StatementSeries { rank_us: self.rank_us, ..StatementSeries::new(names) }
    }
}

/// How many times a labelled statement's time a candidate needs to take its place.
const STICKINESS: u64 = 2;

/// Per-statement series, at most `top` labelled plus `other` (see the module docs for why membership is sticky).
#[derive(Clone, Debug)]
pub struct StatementMetrics {
    top: usize,
    labelled: HashMap<FingerprintId, StatementSeries>,
    candidates: HashMap<FingerprintId, StatementSeries>,
    /// What `other` holds beyond the candidates: folded candidates and displaced statements.
    folded: StatementSeries,
}

impl StatementMetrics {
    /// At most `top` statements get series of their own.
    pub fn new(top: usize) -> StatementMetrics {
        StatementMetrics {
            top,
            labelled: HashMap::default(),
            candidates: HashMap::default(),
            folded: StatementSeries::new(Names::other()),
        }
    }

    /// Candidates kept for ranking before the least of them fold into `other` for good:
    /// enough that a statement that runs often is seen again before it is forgotten.
    fn candidate_limit(&self) -> usize {
        (2 * self.top).max(256)
    }

    /// Counts a command in its statement's series, or in `other` while it is only a candidate.
    #[inline(always)]
    pub fn record(&mut self, r: &CommandRecord) {
        match self.labelled.get_mut(&r.fingerprint) {
            Some(series) => series.add(r),
            None => self.record_unlabelled(r),
        }
    }

    /// [`StatementMetrics::record`] for a statement without a series of its own yet.
    #[inline(never)]
    fn record_unlabelled(&mut self, r: &CommandRecord) {
        if self.labelled.len() < self.top {
            let mut series = StatementSeries::new(Names::of(r));
            series.add(r);
            self.labelled.insert(r.fingerprint, series);
        } else {
            self.candidates.entry(r.fingerprint).or_insert_with(|| StatementSeries::new(Names::of(r))).add(r);
            if self.candidates.len() > self.candidate_limit() {
                self.rebalance();
            }
        }
    }

    /// Promotes candidates with more time than labelled statements, then forgets the least
    /// of the candidates (their counts stay in `other`).
    pub fn rebalance(&mut self) {
        let mut ranked: Vec<(u64, bool, FingerprintId)> = self
            .labelled
            .iter()
            .map(|(id, s)| (s.rank_us.saturating_mul(STICKINESS), true, *id))
            .chain(self.candidates.iter().map(|(id, s)| (s.rank_us, false, *id)))
            .collect();
        // Most time first; a labelled statement counts STICKINESS times its time and wins
        // ties, so statements of about equal time do not trade places (series churn).
        ranked.sort_unstable_by(|a, b| b.cmp(a));
        let (winners, losers) = ranked.split_at(self.top.min(ranked.len()));
        for &(_, _, id) in losers.iter().filter(|(_, labelled, _)| *labelled) {
            if let Some(series) = self.labelled.remove(&id) {
                self.folded.merge(&series);
                // Still a candidate: it may earn its place back.
                self.candidates.insert(id, series.fresh());
            }
        }
        for &(_, _, id) in winners.iter().filter(|(_, labelled, _)| !*labelled) {
            if let Some(series) = self.candidates.remove(&id) {
                self.folded.merge(&series);
                self.labelled.insert(id, series.fresh());
            }
        }
        let keep = self.candidate_limit() / 2;
        if self.candidates.len() > keep {
            let mut by_rank: Vec<(u64, FingerprintId)> =
                self.candidates.iter().map(|(id, s)| (s.rank_us, *id)).collect();
            by_rank.sort_unstable_by(|a, b| b.cmp(a));
            for &(_, id) in &by_rank[keep..] {
                if let Some(series) = self.candidates.remove(&id) {
                    self.folded.merge(&series);
                }
            }
        }
    }

    /// The statements with series of their own, in no particular order.
    pub fn labelled(&self) -> impl Iterator<Item = (FingerprintId, &StatementSeries)> {
        self.labelled.iter().map(|(id, s)| (*id, s))
    }

    /// Everything else, summed; `None` until something counts there.
    pub fn other(&self) -> Option<StatementSeries> {
        let mut other = self.folded.clone();
        for series in self.candidates.values() {
            other.merge(series);
        }
        (other.duration_seconds.count() > 0).then_some(other)
    }

    /// Every statement's series summed: each command counted once, whichever series holds
    /// it (`rttscope_query_duration_seconds`, `rttscope_round_trips_total`, …). Goes up
    /// only, as its parts' sum does: a promotion or a fold moves counts between them.
    pub fn sum(&self) -> StatementSeries {
        let mut all = StatementSeries::new(Names::other());
        for series in self.labelled.values().chain(self.candidates.values()).chain([&self.folded]) {
            all.merge(series);
        }
        all
    }
}

/// Whether a command's record names SQL (else its text is the command's name).
fn carries_sql(command: u8) -> bool {
    matches!(command, COM_QUERY | COM_STMT_PREPARE | COM_STMT_EXECUTE | COM_STMT_FETCH | COM_STMT_BULK_EXECUTE)
}

/// `db.operation.name`: the statement's verb for SQL, upper case as OpenTelemetry writes it
/// (`SELECT`, `SET`, `CREATE`), else the command's name (`COM_PING`). Only letters ever reach
/// the label: a statement that starts oddly is `OTHER`.
fn operation_name(r: &CommandRecord) -> Arc<str> {
    if !carries_sql(r.command) {
        return Arc::from(command::name(r.command));
    }
    let verb = match r.kind {
        StatementKind::Other => {
            let word = r.text.split(|c: char| !c.is_ascii_alphabetic()).find(|w| !w.is_empty()).unwrap_or("");
            if word.is_empty() || word.len() > 20 { "OTHER".to_owned() } else { word.to_ascii_uppercase() }
        }
        kind => kind.as_str().to_ascii_uppercase(),
    };
    Arc::from(verb)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u64, latency_us: u64) -> CommandRecord {
        let mut r = CommandRecord::new(1, COM_QUERY, FingerprintId(id), Arc::from("select ?"), 0);
        r.kind = StatementKind::Select;
        r.last_byte_us = latency_us;
        r.round_trips = 1;
        r
    }

    fn series_count(m: &StatementMetrics) -> usize {
        m.labelled().count() + usize::from(m.other().is_some())
    }

    fn total_count(m: &StatementMetrics) -> u64 {
        m.labelled().map(|(_, s)| s.duration_seconds.count()).sum::<u64>()
            + m.other().map_or(0, |o| o.duration_seconds.count())
    }

    #[test]
    fn many_distinct_statements_stay_within_top_plus_other() {
        let mut m = StatementMetrics::new(10);
        for id in 1..=100_000 {
            m.record(&record(id, 100));
            if id % 1000 == 0 {
                m.rebalance();
                assert!(series_count(&m) <= 11);
            }
        }
        assert_eq!(total_count(&m), 100_000, "nothing lost, nothing counted twice");
        assert!(m.candidates.len() <= m.candidate_limit());
    }

    #[test]
    fn a_heavy_late_statement_takes_a_place_and_other_never_shrinks() {
        let mut m = StatementMetrics::new(2);
        m.record(&record(1, 10));
        m.record(&record(2, 20));
        let mut other_before = 0;
        for _ in 0..50 {
            m.record(&record(3, 1000));
            m.rebalance();
            let other = m.other().map_or(0, |o| o.duration_seconds.count());
            assert!(other >= other_before, "other went down: {other_before} -> {other}");
            other_before = other;
        }
        let labelled: Vec<u64> = m.labelled().map(|(id, _)| id.0).collect();
        assert!(labelled.contains(&3) && labelled.contains(&2), "{labelled:?}");
        assert_eq!(total_count(&m), 52);
    }

    /// The command-level series are the statements' summed: every command once, and never
    /// less after a rebalance moves counts between series.
    #[test]
    fn the_sum_counts_every_command_once_and_only_goes_up() {
        let mut m = StatementMetrics::new(3);
        let mut last = (0, 0);
        for i in 1..=2_000u64 {
            // A few heavy statements among many light ones, so that places change hands.
            let id = if i % 10 == 0 { 1 + i % 7 } else { 100 + i };
            m.record(&record(id, if id < 100 { 5_000 } else { 10 }));
            if i % 100 == 0 {
                m.rebalance();
            }
            let all = m.sum();
            let now = (all.duration_seconds.count(), all.round_trips);
            assert_eq!(now, (i, i), "each command once in the sum");
            assert!(now >= last);
            last = now;
        }
    }

    #[test]
    fn a_series_is_named_once_by_its_summary_and_short_text() {
        let mut m = StatementMetrics::new(2);
        let mut r = record(1, 10);
        r.text = Arc::from(format!("select * from shop_author where id = ? and name in ({})", "?, ".repeat(100)));
        m.record(&r);
        let mut ping = record(2, 10);
        ping.command = COM_PING;
        ping.text = Arc::from("COM_PING");
        m.record(&ping);
        let named: HashMap<u64, (String, String)> =
            m.labelled().map(|(id, s)| (id.0, (s.summary.to_string(), s.text.to_string()))).collect();
        assert_eq!(named[&1].0, "SELECT shop_author");
        assert!(named[&1].1.len() <= MAX_INFO_TEXT && named[&1].1.ends_with('…'), "{}", named[&1].1);
        assert_eq!(named[&2], ("COM_PING".to_owned(), "COM_PING".to_owned()));
    }

    #[test]
    fn operation_names_are_words() {
        let mut r = record(1, 1);
        assert_eq!(&*operation_name(&r), "SELECT");
        r.kind = StatementKind::Other;
        r.text = Arc::from("set names ?");
        assert_eq!(&*operation_name(&r), "SET");
        r.text = Arc::from("(( ?");
        assert_eq!(&*operation_name(&r), "OTHER");
        r.command = COM_PING;
        assert_eq!(&*operation_name(&r), "COM_PING");
    }
}
