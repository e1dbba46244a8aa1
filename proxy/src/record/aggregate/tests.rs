//! Aggregation arithmetic and the memory bound.

use super::*;

fn record(fingerprint: u64, command: u8, latency_us: u64, rows: u64) -> CommandRecord {
    let text = Arc::from(format!("select {fingerprint}").as_str());
    let mut r = CommandRecord::new(1, command, FingerprintId(fingerprint), text, 1000);
    r.kind = StatementKind::Select;
    r.first_byte_us = Some(1000 + latency_us / 2);
    r.last_byte_us = 1000 + latency_us;
    (r.round_trips, r.bytes_up, r.bytes_down, r.rows, r.columns) = (1, 10, 100, rows, 1);
    r
}

#[test]
fn executions_and_round_trips_are_counted_apart() {
    let mut a = Aggregates::new(10, 0);
    a.apply(&Event::Command(Box::new(record(7, COM_STMT_PREPARE, 100, 0))));
    a.apply(&Event::Command(Box::new(record(7, COM_STMT_EXECUTE, 200, 0))));
    for _ in 0..3 {
        a.apply(&Event::Command(Box::new(record(7, COM_STMT_FETCH, 50, 100))));
    }
    let q = a.query(FingerprintId(7)).unwrap();
    assert_eq!((q.count, q.round_trips, q.rows_sum, q.rows_max), (1, 5, 300, 100));
    assert_eq!(q.commands, vec![(COM_STMT_PREPARE, 1), (COM_STMT_EXECUTE, 1), (COM_STMT_FETCH, 3)]);
    assert_eq!(q.latency.summary().sum, 450);
    assert_eq!((a.totals.commands, a.totals.executions, a.totals.bytes_down), (5, 1, 500));
}

#[test]
fn distinct_statements_without_end_stay_bounded() {
    let mut a = Aggregates::new(100, 0);
    // One slow statement that must survive every fold.
    a.apply(&Event::Command(Box::new(record(u64::MAX, COM_QUERY, 10_000_000, 1))));
    // 200,000 classes through a 100-entry table: 1,000 folds.
    for i in 1..=200_000u64 {
        a.apply(&Event::Command(Box::new(record(i, COM_QUERY, 1 + i % 1000, 1))));
        assert!(a.queries.len() < 200, "at {i}: {}", a.queries.len());
    }
    let listed = a.queries();
    let other = listed.last().unwrap();
    assert_eq!(other.fingerprint, OTHER_FINGERPRINT);
    assert_eq!(listed[0].fingerprint, FingerprintId(u64::MAX));
    // Nothing is lost by folding: the sums still add up.
    let executions: u64 = listed.iter().map(|q| q.count).sum();
    assert_eq!(executions, 200_001);
    assert_eq!(a.totals.executions, 200_001);
    assert_eq!(other.folded as usize + listed.len() - 1, 200_001);
}

#[test]
fn reset_keeps_open_connections() {
    let mut a = Aggregates::new(10, 0);
    a.apply(&Event::Connected(Box::new(Connected {
        conn_id: 1,
        client: Arc::from("127.0.0.1:5000"),
        legs: Box::default(),
        user: Arc::from("app"),
        schema: None,
        at_us: 0,
    })));
    a.apply(&Event::Command(Box::new(record(1, COM_QUERY, 10, 1))));
    a.reset(99);
    assert!(a.queries().is_empty());
    assert_eq!(a.live_connections().len(), 1);
    assert_eq!(a.live_connections()[0].commands, 0);
    assert_eq!(a.since_us, 99);
}

#[test]
fn the_emulated_time_of_a_command_is_within_its_own() {
    // A query the emulated link delayed 15 ms of its 15.3, and a COM_QUIT whose request it held
    // 7.5 ms that nobody waited for: no response, no time.
    let mut query = record(7, COM_QUERY, 15_300, 1);
    query.injected_us = 15_000;
    let mut quit = record(8, COM_QUIT, 0, 0);
    quit.injected_us = 7_500;
    let mut a = Aggregates::new(10, 0);
    a.apply(&Event::Connected(Box::new(Connected {
        conn_id: 1,
        client: Arc::from("127.0.0.1:5000"),
        legs: Box::default(),
        user: Arc::from("u"),
        schema: None,
        at_us: 0,
    })));
    a.apply(&Event::Command(Box::new(query)));
    a.apply(&Event::Command(Box::new(quit)));
    assert_eq!((a.totals.time_us, a.totals.injected_us), (15_300, 15_000));
    assert_eq!(a.query(FingerprintId(8)).map(|q| q.injected_us), Some(0));
    assert_eq!(a.connection(1).map(|c| c.injected_us), Some(15_000));
}
