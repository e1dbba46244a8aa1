//! The time model (`docs/time-model.md`) against the wall clock, through a real client and a
//! real server over rttscope's emulated link: a loop handed round a pool of four connections,
//! and the demo's shop (a parent, an N+1 loop over its rows, then one INSERT per row). Every
//! span is within the client's own wall time, every cost within its span, the findings' costs
//! within the recording's wall time in commands, and no finding's projection above the
//! recording's in the same scenario.

use std::time::Instant;

use mysql_async::Conn;
use mysql_async::prelude::*;
use rttscope::findings::Kind;
use rttscope::report::{FindingReport, Report};
use rttscope_config::HumanDuration;
use rttscope_integration_tests::mariadb::{NATIVE, TestDb};
use rttscope_integration_tests::proxy::{TestProxy, test_config};

const CUSTOMERS: u32 = 80;

async fn connect(proxy: &TestProxy) -> Conn {
    Conn::new(TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await.expect("connect")
}

/// rttscope with the database emulated `rtt_ms` away.
fn far_proxy(rtt_ms: u64) -> TestProxy {
    let mut config = test_config();
    config.inject.rtt = HumanDuration::from_millis(rtt_ms);
    TestProxy::with_config(config)
}

async fn shop(conn: &mut Conn, prefix: &str) {
    conn.query_drop(format!("CREATE OR REPLACE TABLE {prefix}_customers (id INT PRIMARY KEY, name VARCHAR(20))"))
        .await
        .unwrap();
    conn.query_drop(format!("INSERT INTO {prefix}_customers SELECT seq, CONCAT('c', seq) FROM seq_1_to_{CUSTOMERS}"))
        .await
        .unwrap();
    conn.query_drop(format!("CREATE OR REPLACE TABLE {prefix}_orders (customer_id INT, total INT, KEY (customer_id))"))
        .await
        .unwrap();
    conn.query_drop(format!("INSERT INTO {prefix}_orders SELECT seq % {CUSTOMERS} + 1, seq FROM seq_1_to_800"))
        .await
        .unwrap();
    conn.query_drop(format!("CREATE OR REPLACE TABLE {prefix}_audit (customer_id INT, event VARCHAR(10))"))
        .await
        .unwrap();
}

/// Waits until the collector has seen a statement `n` times, then reports.
fn report_after(proxy: &TestProxy, text: &str, n: u64) -> Report {
    proxy.wait_for(text, |a| a.queries().iter().any(|q| q.text.as_ref() == text && q.count >= n).then_some(()));
    proxy.state().report()
}

/// What every report must hold whatever ran: the four figures nest.
fn assert_figures_nest(r: &Report) {
    for f in &r.findings {
        let e = &f.evidence;
        assert!(f.cost_us <= e.elapsed_us, "{}: cost {} of a {} µs span", f.kind, f.cost_us, e.elapsed_us);
        assert!(f.cost_us <= e.commands_us, "{}: cost {} of {} µs summed", f.kind, f.cost_us, e.commands_us);
        assert!(e.elapsed_us <= r.window_us, "{}: span {} in a {} µs recording", f.kind, e.elapsed_us, r.window_us);
    }
    let costs: u64 = r.findings.iter().map(|f| f.cost_us).sum();
    assert!(costs <= r.totals.busy_us, "findings cost {costs} µs of {} µs in commands", r.totals.busy_us);
    assert!(r.totals.busy_us <= r.totals.time_us && r.totals.busy_us <= r.window_us, "{:?}", r.totals);
    for (i, whole) in r.what_if.iter().enumerate() {
        for f in &r.findings {
            let part = &f.what_if[i];
            assert_eq!(part.scenario, whole.scenario);
            assert!(
                part.projected_us <= whole.recording.projected_us,
                "{} at {}: {} µs, more than the whole recording's {} µs",
                f.kind,
                whole.scenario,
                part.projected_us,
                whole.recording.projected_us
            );
        }
    }
}

fn only(r: &Report, kind: Kind) -> &FindingReport {
    let found: Vec<&FindingReport> = r.findings.iter().filter(|f| f.kind == kind).collect();
    assert_eq!(found.len(), 1, "{kind}: {:#?}", r.findings);
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_handed_round_a_pool_spans_no_more_than_the_client_waited() {
    loop_handed_round_a_pool(15, "tm_pool").await;
}

/// 50 ms away, each connection waits 150 ms between its own children (the other three's
/// round trips), past `max_gap`: still one loop over the parent's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_handed_round_a_pool_over_a_far_link_is_found() {
    loop_handed_round_a_pool(50, "tm_far_pool").await;
}

async fn loop_handed_round_a_pool(rtt_ms: u64, prefix: &str) {
    let proxy = far_proxy(rtt_ms);
    let mut pool = Vec::new();
    for _ in 0..4 {
        pool.push(connect(&proxy).await);
    }
    shop(&mut pool[0], prefix).await;
    let started = Instant::now();
    let customers: Vec<u32> = pool[0].query(format!("SELECT id FROM {prefix}_customers ORDER BY id")).await.unwrap();
    for (i, id) in customers.iter().enumerate() {
        let _: Option<i64> = pool[i % 4]
            .query_first(format!("SELECT sum(total) FROM {prefix}_orders WHERE customer_id = {id}"))
            .await
            .unwrap();
    }
    let client_us = started.elapsed().as_micros() as u64;
    let child = format!("select sum(total) from {prefix}_orders where customer_id = ?");
    let r = report_after(&proxy, &child, u64::from(CUSTOMERS));
    let f = only(&r, Kind::NPlusOne);
    // One loop over one result, on four connections: the parent is counted once.
    assert_eq!((f.evidence.executions, f.round_trips), (u64::from(CUSTOMERS), u64::from(CUSTOMERS) + 1), "{f:#?}");
    assert_eq!(f.evidence.connections.len(), 4, "{f:#?}");
    assert!(
        f.evidence.elapsed_us <= client_us,
        "the loop's span {} µs, the client's whole loop {client_us} µs: {f:#?}",
        f.evidence.elapsed_us
    );
    // Each child waited its round trip: the children's own time is most of the client's.
    assert!(f.cost_us >= u64::from(CUSTOMERS) * rtt_ms * 1_000, "{f:#?}");
    assert_figures_nest(&r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shops_write_loop_spans_its_own_inserts_not_the_lookups_before() {
    let proxy = far_proxy(15);
    let mut conn = connect(&proxy).await;
    shop(&mut conn, "tm_shop").await;
    let customers: Vec<u32> = conn.query("SELECT id FROM tm_shop_customers ORDER BY id").await.unwrap();
    for id in &customers {
        let _: Option<i64> =
            conn.query_first(format!("SELECT sum(total) FROM tm_shop_orders WHERE customer_id = {id}")).await.unwrap();
    }
    let writes_started = Instant::now();
    for id in customers.iter().take(30) {
        conn.query_drop(format!("INSERT INTO tm_shop_audit (customer_id, event) VALUES ({id}, 'seen')")).await.unwrap();
    }
    let writes_us = writes_started.elapsed().as_micros() as u64;
    let r = report_after(&proxy, "insert into tm_shop_audit (customer_id, event) values(?+)", 30);
    let write = only(&r, Kind::RepeatedWrite);
    let lookups = only(&r, Kind::NPlusOne);
    // The INSERTs' values are the customers' ids too, so the write loop may be linked to the
    // customers query; its span is then that query's own interval and the INSERTs', never the
    // 80 lookups between them.
    assert!(
        write.evidence.elapsed_us <= writes_us + 20_000 + 5_000,
        "the write loop spans {} µs, its INSERTs took {writes_us} µs",
        write.evidence.elapsed_us
    );
    assert!(write.evidence.elapsed_us < lookups.evidence.elapsed_us, "{write:#?}\n{lookups:#?}");
    assert_figures_nest(&r);
}

/// A client that reads a large result slower than an emulated link lets it go: rttscope holds
/// what the link released until the client takes it. That wait is the client's, as it would be
/// without the link, so it stays in the time left once the link's is taken out — and in the
/// streaming the slow-start rounds of a what-if overlap — instead of being blamed on the link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reading_slower_than_the_link_is_not_the_links_time() {
    const ROWS: u32 = 16_000;
    let proxy = far_proxy(5);
    let mut conn = connect(&proxy).await;
    let started = Instant::now();
    let mut result = conn.query_iter(format!("SELECT REPEAT('x', 1000) FROM seq_1_to_{ROWS}")).await.unwrap();
    let (mut rows, mut paused) = (0u32, std::time::Duration::ZERO);
    while let Some(_row) = result.next().await.unwrap() {
        rows += 1;
        if rows % 20 == 0 {
            let pause = Instant::now();
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            paused += pause.elapsed();
        }
    }
    drop(result);
    let waited = started.elapsed();
    assert_eq!(rows, ROWS);
    let large = |text: &str| text.starts_with("select repeat");
    proxy.wait_for("the large read", |a| a.queries().iter().any(|q| large(&q.text)).then_some(()));
    let r = proxy.state().report();
    let q = r.queries.iter().find(|q| large(&q.fingerprint)).expect("the large read");
    let own_us = q.latency_us.sum.saturating_sub(q.injected_us);
    let stream_us = r.totals.large_responses.stream_us;
    eprintln!(
        "16 MB read by a slow client at 5 ms: {waited:?} (paused {paused:?}), recorded {} µs, link {} µs, \
         streamed {stream_us} µs",
        q.latency_us.sum, q.injected_us
    );
    // The link held the request and the end 2.5 ms each, and released the result in a few
    // 5 ms rounds: far less than the client's own pauses, which are not the link's.
    assert!(q.injected_us < 60_000, "the client's pace blamed on the link: {q:?}");
    // The client paused for its last few MB after the last byte was in the sockets' buffers,
    // where rttscope does not see it: the rest it does, and it is the client's.
    let half_paused = paused.as_micros() as u64 / 2;
    assert!(own_us >= half_paused && stream_us >= half_paused, "{own_us} µs left, {stream_us} µs streamed");
    assert!(q.latency_us.sum <= waited.as_micros() as u64, "{q:?} beyond the client's {waited:?}");
}
