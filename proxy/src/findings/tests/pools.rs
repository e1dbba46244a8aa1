//! Loops handed round a pool of connections: one finding over every connection, its parent
//! counted once, its span the wall clock's.

use super::*;

/// `children` lookups of the parent's rows, handed round-robin to `pool` connections one
/// after another (each awaited before the next), as an application iterating over a result
/// with a pool does: every connection's run spans the whole loop.
fn pooled_loop(s: &mut Script, pool: u64, children: u64, latency_us: u64) {
    s.query(1, "SELECT emp_no, first_name FROM employees LIMIT 100", 100, Some(employees(64)), 2000, 100);
    for (i, id) in (10001..10001 + children).enumerate() {
        let conn = 1 + i as u64 % pool;
        s.query(conn, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, latency_us, 50);
    }
}

#[test]
fn a_pooled_loop_spans_the_wall_clock_once() {
    let mut s = Script::new();
    let start = s.now_us;
    pooled_loop(&mut s, 4, 200, 500);
    let wall = s.now_us - start;
    let f = &s.of(Kind::NPlusOne)[0].finding;
    assert_eq!(f.executions, 200, "{f:#?}");
    // Four overlapping runs: their spans counted once are within the loop's wall time, and
    // the children's commands, which did not overlap, are all of the cost.
    assert!(f.elapsed_us() <= wall, "spans {} in a {wall} µs loop", f.elapsed_us());
    assert!(f.cost_us() >= 200 * 500 && f.cost_us() <= f.elapsed_us(), "{f:#?}");
}

#[test]
fn a_pooled_loop_links_every_connection_to_the_parent_and_counts_it_once() {
    let mut s = Script::new();
    pooled_loop(&mut s, 4, 200, 500);
    let loops = s.of(Kind::NPlusOne);
    assert_eq!(loops.len(), 1, "one finding, not one per connection: {loops:#?}");
    let f = &loops[0].finding;
    assert_eq!((f.occurrences, f.executions), (4, 200));
    assert!(f.parent.is_some());
    assert_eq!(f.round_trips, 201, "the children and their parent, once");
    assert_eq!(f.per_conn.len(), 4);
}

#[test]
fn a_pooled_loop_over_a_far_link_is_one_loop() {
    // One child at a time round a pool of four over a 50 ms link: each connection waits
    // 150 ms between its own children, past max_gap, but they are all over the parent's rows.
    let mut s = Script::new();
    pooled_loop(&mut s, 4, 200, 50_000);
    let loops = s.of(Kind::NPlusOne);
    assert_eq!(loops.len(), 1, "{loops:#?}");
    let f = &loops[0].finding;
    assert_eq!((f.occurrences, f.executions, f.round_trips), (4, 200, 201), "{f:#?}");
}

#[test]
fn a_far_pooled_loop_ends_when_its_parent_runs_again() {
    // The same loop twice, each over a fresh run of its parent: two loops on each connection,
    // not one 400 long, however short the time between them.
    let mut s = Script::new();
    pooled_loop(&mut s, 4, 200, 50_000);
    pooled_loop(&mut s, 4, 200, 50_000);
    let loops = s.of(Kind::NPlusOne);
    assert_eq!(loops.len(), 1, "{loops:#?}");
    let f = &loops[0].finding;
    assert_eq!((f.occurrences, f.executions, f.round_trips), (8, 400, 402), "{f:#?}");
}

#[test]
fn lookups_far_apart_without_a_parent_are_not_one_loop() {
    // Lookups 120 ms apart on each connection (four connections, 40 ms each), with no result
    // they come from.
    let mut s = Script::new();
    for (i, id) in (10001..10201u64).enumerate() {
        let conn = 1 + i as u64 % 4;
        s.query(conn, &format!("SELECT salary FROM salaries WHERE emp_no = {id}"), 1, None, 40_000, 50);
    }
    assert!(s.of(Kind::NPlusOne).is_empty());
}
