//! The detectors on synthetic command streams with real fingerprints.

use std::sync::Arc;

use rttscope_config::FindingsConfig;

use super::*;
use crate::fingerprint::{hash_value, Fingerprinter};
use crate::protocol::constants::command::*;

/// A clock and a connection to script commands on.
struct Script {
    engine: FindingsEngine,
    now_us: u64,
}

impl Script {
    fn new() -> Script {
        Script { engine: FindingsEngine::new(FindingsConfig::default()), now_us: 1_000_000 }
    }

    /// A query taking `latency_us`, then `gap_us` of client think time.
    fn query(&mut self, conn: u64, sql: &str, rows: u64, sample: Option<Vec<u64>>, latency_us: u64, gap_us: u64) {
        let mut r = record(conn, COM_QUERY, sql, rows, self.now_us, latency_us);
        r.sample = sample.map(Vec::into_boxed_slice);
        self.engine.observe(&Event::Command(r));
        self.now_us += latency_us + gap_us;
    }

    fn command(&mut self, r: CommandRecord) {
        self.now_us = r.last_byte_us + 50;
        self.engine.observe(&Event::Command(r));
    }

    fn findings(&self) -> Vec<FindingReport> {
        self.engine.report(&|_| 1)
    }
}

fn record(conn: u64, command: u8, sql: &str, rows: u64, at_us: u64, latency_us: u64) -> CommandRecord {
    let mut fingerprinter = Fingerprinter::new();
    let fp = fingerprinter.fingerprint(sql.as_bytes());
    let mut r = CommandRecord::new(conn, command, fp.id, Arc::from(fp.text), at_us);
    for &v in fp.values {
        r.values.push(v);
    }
    r.kind = fp.kind;
    r.first_byte_us = Some(at_us + latency_us / 2);
    r.last_byte_us = at_us + latency_us;
    (r.round_trips, r.bytes_up, r.bytes_down, r.rows, r.columns) = (1, 40, 80, rows, 2);
    r.limit = fp.limit;
    r.rows_in_values = fp.rows_in_values;
    r.trace = fp.trace.and_then(|t| u128::from_str_radix(t, 16).ok());
    r
}

fn employees(n: u64) -> Vec<u64> {
    (10001..10001 + n).map(|id| hash_value(id.to_string().as_bytes())).collect()
}

#[test]
fn the_salary_loop_is_an_n_plus_one_linked_to_its_parent() {
    let mut s = Script::new();
    s.query(1, "SELECT emp_no, first_name FROM employees LIMIT 100", 100, Some(employees(64)), 2000, 100);
    for id in 10001..10101 {
        s.query(1, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 500, 50);
    }
    let findings = s.findings();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    // 100 children and their parent.
    assert_eq!((f.kind.as_str(), f.round_trips), ("n_plus_one", 101));
    assert_eq!(f.evidence["executions"], 100);
    assert_eq!(f.evidence["parent_statement"], "select emp_no, first_name from employees limit ?");
    assert!(f.suggestion.contains("JOIN"), "{}", f.suggestion);
    assert!(f.suggestion.contains("where emp_no in (?, ?, ...)"), "{}", f.suggestion);
    // At 15 ms, 101 round trips add 1.5 s to what was seen.
    let dc = f.what_if.iter().find(|w| w["scenario"] == "another data centre").unwrap();
    let observed = f.cost_us;
    let expected = observed + 101 * 15_000 + (f.evidence["bytes"].as_u64().unwrap() * 8_000_000 / 34_000_000);
    assert_eq!(dc["projected_us"], expected);
}

#[test]
fn few_repeats_or_one_join_are_not_findings() {
    let mut s = Script::new();
    for id in 1..=3 {
        s.query(1, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 500, 50);
    }
    s.query(1, "SELECT e.emp_no, s.salary FROM employees e JOIN salaries s USING (emp_no)", 1000, Some(employees(64)), 9000, 0);
    assert!(s.findings().is_empty(), "{:#?}", s.findings());
}

#[test]
fn a_gap_longer_than_max_gap_splits_loops() {
    // Ten executions, enough for a loop, but 200 ms apart: not back to back.
    let mut s = Script::new();
    for id in 1..=10 {
        s.query(1, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 500, 200_000);
    }
    assert!(s.findings().is_empty(), "{:#?}", s.findings());
    // The same ten 20 ms apart are one.
    let mut s = Script::new();
    for id in 1..=10 {
        s.query(1, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 500, 20_000);
    }
    assert_eq!(s.findings().len(), 1);
}

#[test]
fn a_traced_loop_over_a_pool_is_one_finding() {
    let mut s = Script::new();
    let trace = "/*traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'*/";
    for id in 0..40u64 {
        let conn = 1 + id % 4;
        s.query(conn, &format!("SELECT salary FROM salaries WHERE emp_no = {id} {trace}"), 1, None, 400, 50);
    }
    let findings = s.findings();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0].evidence["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(findings[0].evidence["connections"].as_array().unwrap().len(), 4);
    assert_eq!(findings[0].round_trips, 40);
    // Without the trace, each connection's share (10) is still a loop of its own.
    let mut s = Script::new();
    for id in 0..40u64 {
        s.query(1 + id % 4, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 400, 50);
    }
    assert_eq!(s.findings()[0].evidence["occurrences"], 4);
}

#[test]
fn single_row_inserts_are_a_repeated_write() {
    let mut s = Script::new();
    for id in 0..50 {
        let mut r = record(1, COM_QUERY, &format!("INSERT INTO t (id, v) VALUES ({id}, 'x')"), 0, s.now_us, 300);
        r.affected_rows = 1;
        s.command(r);
    }
    let f = &s.findings()[0];
    assert_eq!(f.kind, "repeated_write");
    assert!(f.suggestion.contains("multi-row INSERT"), "{}", f.suggestion);
}

#[test]
fn small_cursor_fetches_are_undersized() {
    let mut s = Script::new();
    let mut execute = record(1, COM_STMT_EXECUTE, "SELECT id FROM big WHERE id > ?", 0, s.now_us, 500);
    (execute.statement, execute.cursor) = (Some(7), true);
    s.command(execute);
    for batch in 0..200 {
        let mut fetch = record(1, COM_STMT_FETCH, "SELECT id FROM big WHERE id > ?", if batch < 199 { 10 } else { 5 }, s.now_us, 200);
        (fetch.statement, fetch.fetch_rows) = (Some(7), 10);
        s.command(fetch);
    }
    let f = &s.findings()[0];
    assert_eq!((f.kind.as_str(), f.round_trips), ("undersized_fetch", 200));
    assert_eq!(f.evidence["fetch_size"], 10);
    assert_eq!(f.evidence["rows"], 1995);
}

#[test]
fn limit_offset_pages_are_a_pagination_loop() {
    let mut s = Script::new();
    for page in 0..20u64 {
        s.query(1, &format!("SELECT id FROM big ORDER BY id LIMIT 50 OFFSET {}", page * 50), 50, None, 800, 20);
    }
    let f = &s.findings()[0];
    assert_eq!(f.kind, "pagination_loop");
    assert_eq!((f.evidence["pages"].as_u64(), f.evidence["page_size"].as_u64()), (Some(20), Some(50)));
    assert_eq!(f.evidence["offset_rows_rescanned"], (0..20u64).map(|p| p * 50).sum::<u64>());
}

#[test]
fn many_different_tiny_statements_are_a_chatty_session() {
    let mut s = Script::new();
    for i in 0..150 {
        s.query(1, &format!("SET @v{} = 1", i % 7), 0, None, 200, 10);
        s.query(1, "SELECT 1", 1, None, 200, 10);
    }
    let findings = s.findings();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0].kind, "chatty_session");
    assert_eq!(findings[0].round_trips, 300);
}

#[test]
fn closing_a_connection_keeps_its_findings() {
    let mut s = Script::new();
    for id in 0..20 {
        s.query(9, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 500, 50);
    }
    s.engine.observe(&Event::Closed { conn_id: 9, at_us: s.now_us });
    assert_eq!(s.findings().len(), 1);
    assert_eq!(s.engine.counts["n_plus_one"], 1);
}
