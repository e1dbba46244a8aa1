//! The diff's numbers, matching and renderings, on reports built by hand.

use std::collections::BTreeSet;

use super::super::tests::{HOSTILE_SQL, documented_in, full_report, key_paths};
use super::*;
use crate::report::{LatencySummary, Totals};

const DIFF_DOC: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/report-diff-schema.md"));

fn statement(id: &str, text: &str, calls: u64, round_trips: u64, time_us: u64) -> QueryReport {
    let mut q = full_report().queries.remove(0);
    q.fingerprint_id = id.into();
    q.fingerprint = text.into();
    q.count = calls;
    q.round_trips = round_trips;
    q.latency_us = LatencySummary { sum: time_us, ..q.latency_us };
    q.bytes.up = 10 * calls;
    q.bytes.down = 100 * calls;
    q
}

/// Before: an N+1 loop of 1,000 children under its parent. After: one JOIN, the parent still
/// there, and the loop's finding gone; the fetch finding stays.
fn before_and_after() -> (Report, Report) {
    let mut before = full_report();
    let base = before.totals;
    let totals = |commands, round_trips, time_us| Totals {
        commands,
        round_trips,
        time_us,
        bytes_up: 10 * commands,
        bytes_down: 100 * commands,
        ..base
    };
    let all = before.findings.clone();
    let keep = |kinds: &[Kind]| all.iter().filter(|f| kinds.contains(&f.kind)).cloned().collect::<Vec<_>>();
    before.totals = totals(1_001, 1_001, 500_000);
    before.queries = vec![
        statement("00000000000000c1", "select name from customers where id = ?", 1_000, 1_000, 450_000),
        statement("00000000000000a0", "select id from orders", 1, 1, 50_000),
    ];
    before.findings = keep(&[Kind::NPlusOne, Kind::UndersizedFetch]);
    before.findings[0].fingerprint_id = "00000000000000c1".into();
    let mut after = before.clone();
    after.generated_at = "2026-11-22T08:00:00Z".into();
    after.totals = totals(2, 2, 61_000);
    after.queries = vec![
        statement("00000000000000a0", "select id from orders", 1, 1, 1_000),
        statement(
            "00000000000000f0",
            "select o.id, c.name from orders o join customers c on c.id = o.customer",
            1,
            1,
            60_000,
        ),
    ];
    after.findings = keep(&[Kind::UndersizedFetch]);
    after.findings[0].round_trips = 5;
    (before, after)
}

#[test]
fn totals_show_before_after_change_and_ratio() {
    let (before, after) = before_and_after();
    let d = diff(&before, &after, ("before.json", "after.json"));
    assert_eq!(d.totals.round_trips, Change { before: 1_001, after: 2, change: -999, ratio: Some(2.0 / 1_001.0) });
    assert_eq!(d.totals.time_us.change, -439_000);
    assert_eq!(d.totals.bytes, Change::of(110 * 1_001, 220));
    assert_eq!(Change::of(0, 5), Change { before: 0, after: 5, change: 5, ratio: None });
    assert_eq!((d.before.source.as_str(), d.after.generated_at.as_str()), ("before.json", "2026-11-22T08:00:00Z"));
}

#[test]
fn statements_match_by_id_and_the_rest_is_only_before_or_after() {
    let (before, after) = before_and_after();
    let d = diff(&before, &after, ("a", "b"));
    assert_eq!(d.statements.len(), 1);
    let s = &d.statements[0];
    assert_eq!((s.fingerprint_id.as_str(), s.time_us.change, s.calls.change), ("00000000000000a0", -49_000, 0));
    let ids = |side: &[StatementSide]| side.iter().map(|s| s.fingerprint_id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&d.only_before), ["00000000000000c1"]);
    assert_eq!(ids(&d.only_after), ["00000000000000f0"]);
    assert_eq!((d.only_before[0].round_trips, d.only_before[0].bytes), (1_000, 110_000));
}

#[test]
fn statements_sort_by_the_size_of_their_change_in_time() {
    let (mut before, mut after) = before_and_after();
    before.queries =
        vec![statement("1", "a", 1, 1, 100), statement("2", "b", 1, 1, 100), statement("3", "c", 1, 1, 100)];
    after.queries = vec![statement("1", "a", 1, 1, 150), statement("2", "b", 1, 1, 10), statement("3", "c", 1, 1, 99)];
    let d = diff(&before, &after, ("a", "b"));
    let order: Vec<(&str, i64)> = d.statements.iter().map(|s| (s.fingerprint_id.as_str(), s.time_us.change)).collect();
    assert_eq!(order, [("2", -90), ("1", 50), ("3", -1)]);
}

#[test]
fn findings_are_fixed_new_or_unchanged_by_kind_and_statement() {
    let (before, mut after) = before_and_after();
    // The same statement with another kind is another finding: new, not unchanged.
    let mut other_kind = before.findings[0].clone();
    other_kind.kind = Kind::RepeatedWrite;
    after.findings.push(other_kind);
    let d = diff(&before, &after, ("a", "b"));
    let f = &d.findings;
    assert_eq!(
        f.fixed.iter().map(|x| (x.kind, x.fingerprint_id.as_str())).collect::<Vec<_>>(),
        [(Kind::NPlusOne, "00000000000000c1")]
    );
    assert_eq!(f.fixed[0].round_trips, before.findings[0].round_trips);
    assert_eq!(f.new.iter().map(|x| x.kind).collect::<Vec<_>>(), [Kind::RepeatedWrite]);
    assert_eq!(f.unchanged.len(), 1);
    assert_eq!((f.unchanged[0].kind, f.unchanged[0].round_trips.after), (Kind::UndersizedFetch, 5));
}

#[test]
fn occurrences_of_one_pattern_are_summed_on_each_side() {
    let (mut before, after) = before_and_after();
    let mut again = before.findings[0].clone();
    again.evidence.application = "other@10.0.0.8".into();
    before.findings.push(again);
    let d = diff(&before, &after, ("a", "b"));
    assert_eq!(d.findings.fixed.len(), 1);
    assert_eq!(d.findings.fixed[0].round_trips, 2 * before.findings[0].round_trips);
}

#[test]
fn the_diff_schema_doc_lists_every_key_and_no_other() {
    let (before, after) = before_and_after();
    let mut d = diff(&before, &after, ("a", "b"));
    // Every list non-empty, so every key is present.
    d.findings.new = d.findings.fixed.clone();
    let json = serde_json::to_value(&d).unwrap();
    let (documented, maps) = documented_in(DIFF_DOC);
    let mut present = BTreeSet::new();
    key_paths(&json, "", &maps, &mut present);
    let undocumented: Vec<_> = present.difference(&documented).collect();
    let absent: Vec<_> = documented.difference(&present).collect();
    assert!(undocumented.is_empty(), "keys missing from docs/report-diff-schema.md: {undocumented:#?}");
    assert!(absent.is_empty(), "documented keys the diff does not have: {absent:#?}");
    assert!(DIFF_DOC.starts_with(&format!("# rttscope report diff schema (version {DIFF_SCHEMA_VERSION})")));
    let back: ReportDiff = serde_json::from_str(&render(&d, ReportFormat::Json).unwrap()).unwrap();
    assert_eq!(back, d);
}

#[test]
fn the_text_diff_has_totals_first_then_statements_and_findings() {
    let (before, after) = before_and_after();
    let text = render_text(&diff(&before, &after, ("before.json", "http://127.0.0.1:6070")));
    let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("no {needle:?} in:\n{text}"));
    assert!(at("# Totals") < at("# Statements in both") && at("# Statements in both") < at("# Findings fixed"));
    assert!(text.contains("# round trips           1,001              2           -999  ×0.0020"), "{text}");
    assert!(text.contains("#   fixed n_plus_one 00000000000000c1: was 21 round trips"), "{text}");
    assert!(text.contains("#   still undersized_fetch"), "{text}");
    assert!(text.contains("select o.id, c.name from orders o join customers c on c.id = o.customer"));
}

#[test]
fn renderings_escape_what_the_reports_hold() {
    let (mut before, after) = before_and_after();
    before.queries[0].fingerprint = HOSTILE_SQL.into();
    let d = diff(&before, &after, ("<b>before</b>\u{1b}[2J", "after"));
    let text = render_text(&d);
    assert!(!text.contains('\u{1b}') && !text.contains('\u{202e}') && !text.contains('\r'), "{text:?}");
    let html = render_html(&d);
    assert!(!html.contains("<b>x</b>") && !html.contains("<b>before</b>") && !html.contains('\u{1b}'));
    assert!(html.contains("&lt;b&gt;x&lt;/b&gt;"));
    assert!(!html.to_lowercase().contains("<script") && !html.contains("http"), "no scripts, nothing fetched");
    for id in ["totals", "findings", "time-change", "statements", "only-before", "only-after"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "no {id} section");
    }
}
