//! The detectors through the engine, on scripted command streams with real fingerprints.

use std::net::SocketAddr;
use std::sync::Arc;

use rttscope_config::FindingsConfig;

use super::*;
use crate::fingerprint::{Fingerprinter, hash_value};
use crate::live::Legs;
use crate::protocol::constants::command::*;
use crate::record::{CommandRecord, Connected, Event, Origin};

/// A clock and an engine to script commands on.
struct Script {
    engine: FindingsEngine,
    now_us: u64,
}

impl Script {
    fn new() -> Script {
        Script::with(FindingsConfig::default())
    }

    fn with(config: FindingsConfig) -> Script {
        Script { engine: FindingsEngine::new(config), now_us: 1_000_000 }
    }

    /// A query taking `latency_us`, then `gap_us` of client think time.
    fn query(&mut self, conn: u64, sql: &str, rows: u64, sample: Option<Vec<u64>>, latency_us: u64, gap_us: u64) {
        let mut r = record(conn, COM_QUERY, sql, rows, self.now_us, latency_us);
        r.sample = sample.map(Vec::into_boxed_slice);
        self.engine.observe(&Event::Command(Box::new(r)));
        self.now_us += latency_us + gap_us;
    }

    /// A statement of `latency_us` followed by 50 µs of client time.
    fn sql(&mut self, conn: u64, sql: &str, rows: u64) {
        self.query(conn, sql, rows, None, 300, 50);
    }

    fn command(&mut self, r: CommandRecord) {
        self.now_us = r.last_byte_us + 50;
        self.engine.observe(&Event::Command(Box::new(r)));
    }

    fn connect(&mut self, conn: u64, user: &str) {
        self.connect_with(conn, user, Legs::default());
    }

    /// A login of `user` on `conn` from 10.0.0.7, its legs (and client library) `legs`.
    fn connect_with(&mut self, conn: u64, user: &str, legs: Legs) {
        let client = Arc::from(SocketAddr::from(([10, 0, 0, 7], 40000 + conn as u16)).to_string());
        self.engine.observe(&Event::Connected(Box::new(Connected {
            conn_id: conn,
            client,
            legs: Box::new(legs),
            user: Arc::from(user),
            schema: None,
            at_us: self.now_us,
        })));
    }

    fn close(&mut self, conn: u64) {
        self.engine.observe(&Event::Closed { conn_id: conn, at_us: self.now_us });
    }

    fn findings(&self) -> Vec<Assessed> {
        self.engine.report(&|_| 1)
    }

    fn of(&self, kind: Kind) -> Vec<Assessed> {
        self.findings().into_iter().filter(|a| a.finding.kind == kind).collect()
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
    r.affected_rows =
        u64::from(matches!(fp.kind, StatementKind::Insert | StatementKind::Update | StatementKind::Delete));
    r.paging = fp.paging;
    r.rows_in_values = fp.rows_in_values;
    r.trace = fp.trace.and_then(|t| u128::from_str_radix(t, 16).ok());
    let comment = fp.tags.and_then(|(from, to)| sql.as_bytes().get(from..to));
    r.origin = comment.and_then(crate::fingerprint::Tags::of).and_then(|t| Origin::of(&t)).map(Arc::new);
    r
}

fn employees(n: u64) -> Vec<u64> {
    (10001..10001 + n).map(|id| hash_value(id.to_string().as_bytes())).collect()
}

/// The article's loop: a parent listing employees, then one salary query per employee.
fn salary_loop(s: &mut Script, conn: u64, children: u64) {
    s.query(conn, "SELECT emp_no, first_name FROM employees LIMIT 100", 100, Some(employees(64)), 2000, 100);
    for id in 10001..10001 + children {
        s.query(conn, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 500, 50);
    }
}

/// A number that looks random and does not repeat soon.
fn scatter(i: u64) -> u64 {
    (i.wrapping_mul(2_654_435_761) % 9973) + 1
}

/// One transaction of sysbench's `oltp_read_write`: 10 point selects, four range reads, two
/// updates, a delete and an insert, each on a table picked at random among `tables`.
fn oltp_transaction(s: &mut Script, conn: u64, n: u64, tables: u64, transactions: bool) {
    let t = |i: u64| if tables == 1 { 1 } else { scatter(n * 31 + i) % tables + 1 };
    if transactions {
        s.sql(conn, "BEGIN", 0);
    }
    for i in 0..10 {
        s.sql(conn, &format!("SELECT c FROM sbtest{} WHERE id={}", t(i), scatter(n * 10 + i)), 1);
    }
    let id = scatter(n + 7);
    s.sql(conn, &format!("SELECT c FROM sbtest{} WHERE id BETWEEN {id} AND {}", t(10), id + 99), 100);
    s.sql(conn, &format!("SELECT SUM(k) FROM sbtest{} WHERE id BETWEEN {id} AND {}", t(11), id + 99), 1);
    s.sql(conn, &format!("SELECT c FROM sbtest{} WHERE id BETWEEN {id} AND {} ORDER BY c", t(12), id + 99), 100);
    s.sql(
        conn,
        &format!("SELECT DISTINCT c FROM sbtest{} WHERE id BETWEEN {id} AND {} ORDER BY c", t(13), id + 99),
        100,
    );
    s.sql(conn, &format!("UPDATE sbtest{} SET k=k+1 WHERE id={}", t(14), scatter(n + 1)), 0);
    s.sql(conn, &format!("UPDATE sbtest{} SET c='{n}' WHERE id={}", t(15), scatter(n + 2)), 0);
    s.sql(conn, &format!("DELETE FROM sbtest{} WHERE id={}", t(16), scatter(n + 3)), 0);
    s.sql(conn, &format!("INSERT INTO sbtest{} (id, k, c, pad) VALUES ({}, 1, 'c', 'p')", t(17), scatter(n + 3)), 0);
    if transactions {
        s.sql(conn, "COMMIT", 0);
    }
}

// ---- loops: what is back to back ----------------------------------------------------------

#[test]
fn the_salary_loop_is_an_n_plus_one_linked_to_its_parent() {
    let mut s = Script::new();
    salary_loop(&mut s, 1, 100);
    let findings = s.findings();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let (a, f) = (&findings[0], &findings[0].finding);
    // 100 children and their parent.
    assert_eq!((f.kind, f.round_trips, f.executions), (Kind::NPlusOne, 101, 100));
    assert_eq!(f.parent.as_ref().map(|(_, t)| t.as_ref()), Some("select emp_no, first_name from employees limit ?"));
    // Its cost is its own statements' time; the client's 50 µs between them is not.
    assert_eq!(f.cost_us(), 2000 + 100 * 500);
    // Its span: the parent's own 2 ms, then the loop's; the 100 µs between are neither's.
    assert_eq!(f.elapsed_us(), 2000 + 100 * 500 + 99 * 50);
    assert!(a.headline.starts_with("N+1 loop: `select salary from salaries where emp_no = ?` ran 100 times back to back for the rows of `select emp_no, first_name from employees limit ?`, 101 round trips in 52.00 ms"), "{}", a.headline);
    assert!(a.fix.contains("JOIN"), "{}", a.fix);
    assert!(a.fix.contains("where emp_no in (?, ?, ...)"), "{}", a.fix);
    // At 15 ms, each of the 101 round trips pays 15 ms, every byte 34 Mbit/s, on top of its
    // commands' own time: the application's between them is not what another link changes.
    let dc = a.what_if.iter().find(|w| w.scenario == "another data centre").unwrap();
    assert_eq!(dc.projected_us, f.cost_us() + 101 * 15_000 + (f.bytes * 8_000_000 / 34_000_000));
}

#[test]
fn few_repeats_or_one_join_are_not_findings() {
    let mut s = Script::new();
    for id in 1..=3 {
        s.query(1, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 500, 50);
    }
    s.query(
        1,
        "SELECT e.emp_no, s.salary FROM employees e JOIN salaries s USING (emp_no)",
        1000,
        Some(employees(64)),
        9000,
        0,
    );
    assert!(s.findings().is_empty(), "{:#?}", s.findings());
}

#[test]
fn a_gap_longer_than_max_gap_splits_loops() {
    // Thirty executions, enough for a loop without a parent, but 200 ms apart: not back to back.
    let mut s = Script::new();
    for id in 1..=30 {
        s.query(1, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 500, 200_000);
    }
    assert!(s.findings().is_empty(), "{:#?}", s.findings());
    // The same thirty 20 ms apart are one, whose time was mostly the application's.
    let mut s = Script::new();
    for id in 1..=30 {
        s.query(1, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 500, 20_000);
    }
    let loops = s.of(Kind::NPlusOne);
    assert_eq!(loops.len(), 1);
    assert!(
        loops[0].headline.ends_with("30 round trips in 15.00 ms, within the loop's 595.00 ms"),
        "{}",
        loops[0].headline
    );
}

#[test]
fn a_loop_without_a_parent_must_be_longer() {
    let lookups = |n: u64| {
        let mut s = Script::new();
        for id in 1..=n {
            s.sql(1, &format!("SELECT salary FROM salaries WHERE emp_no = {}", scatter(id)), 1);
        }
        s.of(Kind::NPlusOne).len()
    };
    assert_eq!(lookups(19), 0, "19 lookups with no parent are not yet a loop");
    assert_eq!(lookups(20), 1);
    // With its parent, five are.
    let mut s = Script::new();
    salary_loop(&mut s, 1, 5);
    assert_eq!(s.of(Kind::NPlusOne).len(), 1);
}

#[test]
fn sysbench_transactions_are_not_loops() {
    // 10 point selects per transaction, thousands of transactions: bursts of ten between
    // other statements, not one loop of thousands; one write per statement per transaction.
    for tables in [1, 4] {
        for transactions in [true, false] {
            let mut s = Script::new();
            for conn in 1..=4 {
                s.connect(conn, "sbtest");
            }
            for n in 0..600 {
                oltp_transaction(&mut s, 1 + n % 4, n, tables, transactions);
            }
            assert!(s.findings().is_empty(), "{tables} tables, transactions {transactions}: {:#?}", s.findings());
        }
    }
}

#[test]
fn a_loop_body_of_two_lookups_is_two_loops() {
    // An ORM loading each order's customer and address: both run once per parent row, each
    // with the other in between.
    let mut s = Script::new();
    let ids: Vec<u64> = (1..=40).collect();
    let sample = ids.iter().map(|id| hash_value(id.to_string().as_bytes())).collect();
    s.query(1, "SELECT id, customer_id FROM orders WHERE day = '2026-11-21'", 40, Some(sample), 1500, 50);
    for id in &ids {
        s.sql(1, &format!("SELECT name FROM customers WHERE id = {id}"), 1);
        s.sql(1, &format!("SELECT street FROM addresses WHERE customer_id = {id}"), 1);
    }
    let loops = s.of(Kind::NPlusOne);
    assert_eq!(loops.len(), 2, "{loops:#?}");
    assert!(loops.iter().all(|a| a.finding.executions == 40 && a.finding.parent.is_some()), "{loops:#?}");
}

#[test]
fn a_transaction_boundary_ends_a_loop() {
    // Fifteen lookups, COMMIT, fifteen more: two bursts too short alone, not one of thirty.
    let mut s = Script::new();
    for id in 1..=30 {
        if id == 16 {
            s.sql(1, "COMMIT", 0);
        }
        s.sql(1, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1);
    }
    assert!(s.findings().is_empty(), "{:#?}", s.findings());
    // One UPDATE per transaction is not one row at a time.
    let mut s = Script::new();
    for id in 1..=50 {
        s.sql(1, "START TRANSACTION", 0);
        s.sql(1, &format!("UPDATE accounts SET balance = balance - 1 WHERE id = {id}"), 0);
        s.sql(1, "COMMIT", 0);
    }
    assert!(s.findings().is_empty(), "{:#?}", s.findings());
}

#[test]
fn several_loops_say_how_big_each_was() {
    let mut s = Script::new();
    s.connect(1, "app");
    for _ in 0..5 {
        s.sql(1, "BEGIN", 0);
        salary_loop(&mut s, 1, 10);
        s.sql(1, "COMMIT", 0);
    }
    salary_loop(&mut s, 1, 12);
    let loops = s.of(Kind::NPlusOne);
    assert_eq!(loops.len(), 1, "{loops:#?}");
    let (a, f) = (&loops[0], &loops[0].finding);
    assert_eq!((f.occurrences, f.executions, f.smallest, f.largest), (6, 62, 10, 12));
    assert_eq!(f.round_trips, 62 + 6, "each loop's parent counts once");
    assert!(
        a.headline.contains("ran back to back in 6 loops of 10 to 12 (62 times in all) for the rows of"),
        "{}",
        a.headline
    );
    assert_eq!(&*f.application, "app@10.0.0.7");
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
    let f = &findings[0].finding;
    assert_eq!(f.scope, PatternScope::Trace(0x4bf92f3577b34da6a3ce929d0e0e4736));
    assert_eq!(f.per_conn.len(), 4);
    assert_eq!(f.round_trips, 40);
    // Without the trace, each connection's share (20) is a loop of its own, and the four
    // occurrences make one finding.
    let mut s = Script::new();
    for id in 0..80u64 {
        s.query(1 + id % 4, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 400, 50);
    }
    let f = &s.findings()[0].finding;
    assert_eq!((f.occurrences, f.executions), (4, 80));
}

#[test]
fn a_loop_is_named_and_grouped_by_the_place_its_sqlcommenter_tags_give() {
    let mut s = Script::new();
    let tags = |controller: &str| format!("/*action='index',controller='{controller}',framework='rails%3A7'*/");
    for (conn, controller) in [(1, "orders"), (1, "invoices"), (2, "orders")] {
        let t = tags(controller);
        s.query(conn, &format!("{t} SELECT emp_no FROM employees LIMIT 100"), 100, Some(employees(64)), 2000, 100);
        for id in 10001..10031 {
            // Leading on some, trailing on others: the same statement either way.
            let sql = if id % 2 == 0 {
                format!("{t} SELECT salary FROM salaries WHERE emp_no = {id}")
            } else {
                format!("SELECT salary FROM salaries WHERE emp_no = {id} {t}")
            };
            s.query(conn, &sql, 1, None, 500, 50);
        }
    }
    let loops = s.of(Kind::NPlusOne);
    assert_eq!(loops.len(), 2, "{loops:#?}");
    let orders = loops.iter().find(|a| a.headline.contains("in controller `orders#index`")).expect("orders");
    assert_eq!((orders.finding.occurrences, orders.finding.executions), (2, 60));
    assert!(
        orders.headline.starts_with("N+1 loop in controller `orders#index`: `select salary"),
        "{}",
        orders.headline
    );
    assert!(orders.finding.parent.is_some(), "linked to the listing: {}", orders.headline);
    assert!(loops.iter().any(|a| a.headline.contains("in controller `invoices#index`")));
}

#[test]
fn single_row_inserts_are_a_repeated_write() {
    let mut s = Script::new();
    for id in 0..50 {
        let r = record(1, COM_QUERY, &format!("INSERT INTO t (id, v) VALUES ({id}, 'x')"), 0, s.now_us, 300);
        s.command(r);
    }
    let a = &s.findings()[0];
    assert_eq!((a.finding.kind, a.finding.executions), (Kind::RepeatedWrite, 50));
    assert!(a.headline.starts_with("one row at a time: `insert into t (id, v) values(?+)` ran 50 times back to back"));
    assert!(a.fix.contains("multi-row INSERT"), "{}", a.fix);
}

#[test]
fn pipelined_commands_cost_their_union_not_their_sum() {
    // Fifty inserts sent in five flights of ten, answered 100 µs apart: each waited from the
    // first request, but together they took 5.1 ms.
    let mut s = Script::new();
    let start = s.now_us;
    for id in 0..50u64 {
        let mut r = record(1, COM_QUERY, &format!("INSERT INTO t (id) VALUES ({id})"), 0, start, 100 * (id + 1) + 100);
        r.round_trips = u32::from(id % 10 == 0);
        s.engine.observe(&Event::Command(Box::new(r)));
    }
    let f = &s.of(Kind::RepeatedWrite)[0].finding;
    assert_eq!((f.cost_us(), f.elapsed_us(), f.round_trips), (5_100, 5_100, 5));
}

// ---- the other kinds ----------------------------------------------------------------------

#[test]
fn small_cursor_fetches_are_undersized() {
    let mut s = Script::new();
    let mut execute = record(1, COM_STMT_EXECUTE, "SELECT id FROM big WHERE id > ?", 0, s.now_us, 500);
    (execute.statement, execute.cursor) = (Some(7), true);
    s.command(execute);
    for batch in 0..200 {
        let rows = if batch < 199 { 10 } else { 5 };
        let mut fetch = record(1, COM_STMT_FETCH, "SELECT id FROM big WHERE id > ?", rows, s.now_us, 200);
        (fetch.statement, fetch.fetch_rows) = (Some(7), 10);
        s.command(fetch);
    }
    let f = &s.findings()[0].finding;
    assert_eq!((f.kind, f.round_trips, f.rows), (Kind::UndersizedFetch, 200, 1995));
    assert_eq!(f.detail, Detail::Fetch { fetch_size: 10 });
}

#[test]
fn limit_offset_pages_are_a_pagination_loop() {
    let mut s = Script::new();
    for page in 0..20u64 {
        s.query(1, &format!("SELECT id FROM big ORDER BY id LIMIT 50 OFFSET {}", page * 50), 50, None, 800, 20);
    }
    let f = &s.findings()[0].finding;
    assert_eq!((f.kind, f.executions), (Kind::PaginationLoop, 20));
    assert_eq!(f.detail, Detail::Pages { page_size: 50, rescanned: (0..20u64).map(|p| p * 50).sum::<u64>() });
}

#[test]
fn housekeeping_round_trips_dense_in_time_are_a_chatty_session() {
    let mut s = Script::new();
    s.connect(1, "app");
    for i in 0..150 {
        s.query(1, &format!("SET @v{} = 1", i % 7), 0, None, 200, 10);
        s.query(1, "SELECT 1", 1, None, 200, 10);
    }
    let findings = s.findings();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let (a, f) = (&findings[0], &findings[0].finding);
    assert_eq!((f.kind, f.round_trips), (Kind::ChattySession, 300));
    assert_eq!(&*f.text, "select ?");
    assert!(
        a.headline.starts_with("chatty session of app@10.0.0.7: 300 round trips that did no work on data within"),
        "{}",
        a.headline
    );
    assert!(a.headline.contains("most of them `select ?` ×150"), "{}", a.headline);
}

#[test]
fn a_long_lived_connection_is_judged_by_the_window_not_its_lifetime() {
    // A pooled connection pinged every 5 s for most of two hours: 1,200 pings, never dense.
    let mut s = Script::new();
    for _ in 0..1200 {
        let r = record(1, COM_PING, "COM_PING", 0, s.now_us, 150);
        s.command(r);
        s.now_us += 5_000_000;
    }
    assert!(s.findings().is_empty(), "{:#?}", s.findings());
    // Busy data work is never chatty, however small its round trips.
    let mut s = Script::new();
    for n in 0..300 {
        oltp_transaction(&mut s, 1, n, 1, true);
    }
    assert!(s.of(Kind::ChattySession).is_empty(), "{:#?}", s.findings());
}

#[test]
fn chatty_sessions_of_one_application_are_one_finding() {
    let mut s = Script::new();
    for conn in 1..=3 {
        s.connect(conn, "app");
        for _ in 0..120 {
            s.query(conn, "SELECT @@session.transaction_isolation", 1, None, 150, 20);
        }
        s.close(conn);
    }
    let chatty = s.of(Kind::ChattySession);
    assert_eq!(chatty.len(), 1, "{chatty:#?}");
    assert_eq!((chatty[0].finding.occurrences, chatty[0].finding.round_trips), (3, 360));
    // A burst, a quiet spell longer than the window, a burst: two episodes.
    let mut s = Script::new();
    for _ in 0..2 {
        for _ in 0..120 {
            s.query(1, "SELECT 1", 1, None, 150, 20);
        }
        s.now_us += 60_000_000;
    }
    assert_eq!(s.of(Kind::ChattySession)[0].finding.occurrences, 2);
}

// ---- cost, projections and the emulated link ----------------------------------------------

#[test]
fn cost_is_never_more_than_the_wall_time_covered() {
    let mut s = Script::new();
    salary_loop(&mut s, 1, 50);
    for id in 0..50 {
        s.sql(2, &format!("INSERT INTO t (id, v) VALUES ({id}, 'x')"), 0);
    }
    let mut execute = record(3, COM_STMT_EXECUTE, "SELECT id FROM big WHERE id > ?", 0, s.now_us, 500);
    (execute.statement, execute.cursor) = (Some(7), true);
    s.command(execute);
    for _ in 0..50 {
        let mut fetch = record(3, COM_STMT_FETCH, "SELECT id FROM big WHERE id > ?", 10, s.now_us, 200);
        (fetch.statement, fetch.fetch_rows) = (Some(7), 10);
        s.command(fetch);
    }
    for page in 0..20u64 {
        s.query(4, &format!("SELECT id FROM big ORDER BY id LIMIT 50 OFFSET {}", page * 50), 50, None, 800, 20);
    }
    for _ in 0..150 {
        s.query(5, "SELECT 1", 1, None, 200, 10);
    }
    for conn in 10..40 {
        s.connect(conn, "churner");
        s.login(conn, 3_000, 3, 0);
        s.close(conn);
    }
    s.big_results(50, 3, 20_000, 100, false);
    let findings = s.findings();
    let kinds: Vec<Kind> = findings.iter().map(|a| a.finding.kind).collect();
    assert_eq!(kinds.len(), Kind::ALL.len(), "one of each kind: {kinds:?}");
    for a in &findings {
        let f = &a.finding;
        assert!(
            f.cost_us() > 0 && f.cost_us() <= f.elapsed_us(),
            "{}: cost {} of {} covered",
            f.kind,
            f.cost_us(),
            f.elapsed_us()
        );
    }
}

#[test]
fn a_loop_over_an_emulated_link_is_projected_from_what_the_link_did_not_add() {
    let mut s = Script::new();
    s.engine.set_emulated(Some(Emulated { rtt_us: 15_000, bandwidth_bps: None, window_bytes: None }));
    // A parent and 30 children, each with 15 ms of emulated link besides its own time (2 ms,
    // 300 µs), and the application's 100 and 50 µs between them.
    let mut parent = record(1, COM_QUERY, "SELECT emp_no, first_name FROM employees LIMIT 100", 100, s.now_us, 17_000);
    (parent.sample, parent.injected_us) = (Some(employees(64).into_boxed_slice()), 15_000);
    s.engine.observe(&Event::Command(Box::new(parent)));
    s.now_us += 17_100;
    for id in 10001..10031 {
        let mut r =
            record(1, COM_QUERY, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, s.now_us, 15_300);
        r.injected_us = 15_000;
        s.command(r);
    }
    let a = &s.of(Kind::NPlusOne)[0];
    let f = &a.finding;
    assert_eq!((f.round_trips, f.cost_us(), f.injected_us), (31, 17_000 + 30 * 15_300, 31 * 15_000));
    assert_eq!(f.elapsed_us(), f.cost_us() + 29 * 50);
    // The base is the commands' own time without the link's: the server's.
    assert_eq!(a.base_us, 2_000 + 30 * 300);
    let rack = a.what_if.iter().find(|w| w.scenario == "same rack").unwrap();
    let transfer = f.bytes * 8_000_000 / 10_000_000_000;
    assert_eq!(
        (rack.observed_us, rack.base_us, rack.projected_us),
        (f.cost_us(), a.base_us, a.base_us + 31 * 200 + transfer)
    );
    assert_eq!(rack.summary, "at 200 µs RTT and 10 Gbit/s (same rack): ≈ 17.20 ms");
}

// ---- the time model: costs and spans are wall-clock unions ---------------------------------

#[test]
fn concurrent_commands_cost_their_wall_clock_once() {
    // Four connections, each running 50 lookups at the same moments (a pool under
    // Promise.all): 200 commands of 500 µs in 50 × 550 µs of wall clock.
    let mut s = Script::new();
    let start = s.now_us;
    for i in 0..50u64 {
        for conn in 1..=4u64 {
            let id = 10001 + i * 4 + conn;
            let r =
                record(conn, COM_QUERY, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, s.now_us, 500);
            s.engine.observe(&Event::Command(Box::new(r)));
        }
        s.now_us += 550;
    }
    let wall = s.now_us - start;
    let findings = s.of(Kind::NPlusOne);
    let f = &findings[0].finding;
    assert_eq!(f.commands_us, 200 * 500);
    // Four connections' runs, each a union of its own: where their settled parts overlap the
    // union can only be bounded, by the wall time the runs spanned. Never the 100 ms summed.
    assert!(f.cost_us() >= 50 * 500 && f.cost_us() <= f.elapsed_us(), "{f:#?}");
    assert!(f.elapsed_us() <= wall);
    // Projected, the four connections still overlap: at 15 ms each connection's 50 pay it,
    // 775 ms, within the bound's 10 %.
    let dc = findings[0].what_if.iter().find(|w| w.scenario == "another data centre").unwrap();
    let transfer = f.bytes * 8_000_000 / 34_000_000;
    let exact = (200 * 500 + 200 * 15_000) / 4;
    assert!(dc.projected_us >= exact + transfer && dc.projected_us <= exact * 11 / 10 + transfer, "{dc:?}");
}

#[test]
fn a_write_loop_linked_to_a_parent_does_not_span_the_work_between_them() {
    // The demo: customers listed, an orders lookup per customer (its own loop), then one
    // audit INSERT per customer. The INSERTs' values are the customers' ids too.
    let mut s = Script::new();
    s.query(1, "SELECT id, name FROM customers LIMIT 100", 80, Some(employees(64)), 2000, 100);
    for id in 10001..10081 {
        s.query(1, &format!("SELECT count(*) FROM orders WHERE customer_id = {id}"), 1, None, 500, 50);
    }
    let inserts_from = s.now_us;
    for id in 10001..10031 {
        s.query(1, &format!("INSERT INTO audit_log (customer_id, event) VALUES ({id}, 'seen')"), 0, None, 400, 50);
    }
    let write = &s.of(Kind::RepeatedWrite)[0].finding;
    // Its span is its INSERTs' stretch and the parent's own 2 ms, not the lookups between.
    let own_stretch = s.now_us - 50 - inserts_from;
    assert!(write.elapsed_us() <= own_stretch + 2000, "{} µs spanned", write.elapsed_us());
    assert!(write.cost_us() <= write.elapsed_us());
}

// ---- loops need structure, not streaks -------------------------------------------------------

/// A pseudo-random number in `0..n` for step `i` (a fixed sequence, so a failure repeats).
fn pick(i: u64, n: u64) -> u64 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % n
}

/// sysbench `oltp_point_select` (or `oltp_insert` with `write`): `threads` connections each
/// running one autocommit statement per event on one of `tables` tables picked at random, as
/// fast as the server answers.
fn random_table_stream(s: &mut Script, threads: u64, tables: u64, events: u64, write: bool) {
    for conn in 1..=threads {
        s.connect(conn, "sbtest");
    }
    for i in 0..events {
        let conn = 1 + i % threads;
        let (table, id) = (1 + pick(i, tables), scatter(i));
        let sql = if write {
            format!("INSERT INTO sbtest{table} (id, k, c, pad) VALUES ({id}, 1, 'c', 'p')")
        } else {
            format!("SELECT c FROM sbtest{table} WHERE id={id}")
        };
        s.query(conn, &sql, u64::from(!write), None, 300, 20);
    }
}

#[test]
fn random_streaks_of_independent_requests_are_not_loops() {
    for write in [false, true] {
        let mut s = Script::new();
        random_table_stream(&mut s, 4, 4, 8_000, write);
        let loops: Vec<String> = s
            .findings()
            .iter()
            .filter(|a| matches!(a.finding.kind, Kind::NPlusOne | Kind::RepeatedWrite))
            .map(|a| a.headline.clone())
            .collect();
        assert!(loops.is_empty(), "write {write}: {loops:#?}");
    }
}

#[test]
fn one_insert_per_request_on_a_pooled_connection_is_not_a_loop() {
    // A service handling requests as they arrive: each request one INSERT on whichever
    // connection is free, the requests' arrivals random (exponential, mean 2 ms).
    let mut s = Script::new();
    s.connect(1, "service");
    for i in 0..2_000u64 {
        let uniform = (pick(i, 1_000_000) as f64 + 0.5) / 1_000_000.0;
        let gap = (-uniform.ln() * 2_000.0) as u64;
        s.query(
            1,
            &format!("INSERT INTO audit_log (customer_id, event) VALUES ({}, 'seen')", scatter(i)),
            0,
            None,
            300,
            gap,
        );
    }
    assert!(s.of(Kind::RepeatedWrite).is_empty(), "{:#?}", s.of(Kind::RepeatedWrite));
}

#[test]
fn an_application_loop_is_regular_and_found_without_a_parent() {
    // 200 `create()` calls back to back, with the application's steady time between them.
    let mut s = Script::new();
    s.connect(1, "shop");
    for i in 0..200u64 {
        s.query(
            1,
            &format!("INSERT INTO audit_log (customer_id, event) VALUES ({i}, 'seen')"),
            0,
            None,
            300,
            40 + pick(i, 20),
        );
    }
    let writes = s.of(Kind::RepeatedWrite);
    assert_eq!(writes.len(), 1, "{writes:#?}");
    assert_eq!(writes[0].finding.detail, Detail::Loop { distinct: 200, shape: Some(LoopShape::Regular) });
    // A loop body of a lookup and its insert is as regular: each has one other between.
    let mut s = Script::new();
    for i in 0..100u64 {
        s.sql(1, &format!("SELECT name FROM customers WHERE id = {i}"), 1);
        s.sql(1, &format!("INSERT INTO audit_log (customer_id, event) VALUES ({i}, 'seen')"), 0);
    }
    assert_eq!(s.of(Kind::RepeatedWrite).len(), 1);
    assert_eq!(s.of(Kind::NPlusOne).len(), 1);
}

#[test]
fn a_loop_on_a_busy_machine_is_still_a_loop() {
    // 100 lookups, the application's time between them stretched by a loaded machine: most
    // 60 µs, three in ten anywhere up to 20 ms, never much shorter than usual.
    let mut s = Script::new();
    s.connect(1, "shop");
    for i in 0..100u64 {
        let gap = if pick(i, 10) < 3 { 60 + pick(i + 1_000, 20_000) } else { 60 };
        s.query(1, &format!("SELECT name FROM customers WHERE id = {}", scatter(i)), 1, None, 300, gap);
    }
    let loops = s.of(Kind::NPlusOne);
    assert_eq!(loops.len(), 1, "{loops:#?}");
    assert_eq!(loops[0].finding.detail, Detail::Loop { distinct: 100, shape: Some(LoopShape::Regular) });
}

#[test]
fn severity_weighs_the_share_of_the_connections_time() {
    assert_eq!(Severity::of(12_000_000, Some(0.5)), Severity::Critical);
    assert_eq!(Severity::of(12_000_000, Some(0.01)), Severity::Info);
    assert_eq!(Severity::of(12_000_000, Some(0.1)), Severity::Warning);
    assert_eq!(Severity::of(2_000_000, Some(0.1)), Severity::Warning);
    assert_eq!(Severity::of(2_000_000, None), Severity::Warning);
    assert_eq!(Severity::of(200_000, Some(1.0)), Severity::Info);
}

#[test]
fn every_kind_has_exactly_one_detector() {
    let engine = FindingsEngine::new(FindingsConfig::default());
    for kind in Kind::ALL {
        assert_eq!(engine.detectors().filter(|d| d.kinds().contains(&kind)).count(), 1, "{kind}");
    }
}

#[test]
fn closing_a_connection_keeps_its_findings() {
    let mut s = Script::new();
    salary_loop(&mut s, 9, 20);
    s.close(9);
    assert_eq!(s.findings().len(), 1);
    assert_eq!(s.engine.counts.of_kind("n_plus_one"), 1);
}

mod churn;
mod compression;
mod drivers;
mod pools;
