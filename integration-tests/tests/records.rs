//! What rttscope records for known workloads, exactly: counts, round trips,
//! rows, and bytes equal to what the client really sent and received.

use mysql_async::Conn;
use mysql_async::prelude::*;
use rttscope::fingerprint::Fingerprinter;
use rttscope::record::{Aggregates, QueryStats};
use rttscope_integration_tests::counting::counting_relay;
use rttscope_integration_tests::mariadb::{NATIVE, TestDb};
use rttscope_integration_tests::proxy::{TestProxy, test_config};

fn stats_for(a: &Aggregates, sql: &str) -> Option<QueryStats> {
    let id = Fingerprinter::new().fingerprint(sql.as_bytes()).id;
    a.query(id).cloned()
}

fn command_count(q: &QueryStats, name: &str) -> u64 {
    q.commands.iter().filter(|(c, _)| rttscope::protocol::constants::command::name(*c) == name).map(|(_, n)| n).sum()
}

async fn connect(proxy: &TestProxy) -> Conn {
    Conn::new(TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await.expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_point_selects_are_one_statement() {
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    conn.query_drop("CREATE OR REPLACE TABLE points (id INT PRIMARY KEY, v VARCHAR(20))").await.unwrap();
    conn.query_drop("INSERT INTO points SELECT seq, CONCAT('v', seq) FROM seq_1_to_1000").await.unwrap();
    for id in 1..=1000 {
        let v: Option<String> = conn.query_first(format!("SELECT v FROM points WHERE id = {id}")).await.unwrap();
        assert_eq!(v, Some(format!("v{id}")));
    }
    let q = proxy.wait_for("1000 point selects", |a| {
        stats_for(a, "SELECT v FROM points WHERE id = 1").filter(|q| q.count == 1000)
    });
    assert_eq!(q.text.as_ref(), "select v from points where id = ?");
    assert_eq!((q.count, q.round_trips, q.rows_sum, q.rows_max, q.errors), (1000, 1000, 1000, 1, 0));
    assert_eq!(command_count(&q, "COM_QUERY"), 1000);
    let (first, last) = (q.first_byte.summary(), q.latency.summary());
    assert!(first.p50 > 0 && first.p50 <= last.p50, "{first:?} {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_are_attributed_to_their_sql() {
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    conn.query_drop("CREATE OR REPLACE TABLE prepared_points (id INT PRIMARY KEY)").await.unwrap();
    conn.query_drop("INSERT INTO prepared_points SELECT seq FROM seq_1_to_500").await.unwrap();
    let stmt = conn.prep("SELECT id FROM prepared_points WHERE id = ?").await.unwrap();
    for id in 1..=500u32 {
        let got: Option<u32> = conn.exec_first(&stmt, (id,)).await.unwrap();
        assert_eq!(got, Some(id));
    }
    conn.close(stmt).await.unwrap();
    conn.query_drop("DO 1").await.unwrap();
    let q = proxy.wait_for("500 executions", |a| {
        stats_for(a, "SELECT id FROM prepared_points WHERE id = ?").filter(|q| command_count(q, "COM_STMT_CLOSE") == 1)
    });
    assert_eq!(q.count, 500, "executions");
    assert_eq!(q.round_trips, 501, "one prepare and 500 executes; the close has no reply");
    assert_eq!(q.rows_sum, 500);
    assert_eq!(
        (
            command_count(&q, "COM_STMT_PREPARE"),
            command_count(&q, "COM_STMT_EXECUTE"),
            command_count(&q, "COM_STMT_CLOSE")
        ),
        (1, 500, 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_and_bytes_match_what_the_client_received() {
    let proxy = TestProxy::start();
    let (relay, counters) = counting_relay(proxy.addr()).await;
    let mut conn = Conn::new(TestDb::shared().opts_via(relay, NATIVE.user, NATIVE.password)).await.unwrap();
    conn.query_drop("CREATE OR REPLACE TABLE wide (id INT PRIMARY KEY, pad CHAR(100))").await.unwrap();
    conn.query_drop("INSERT INTO wide SELECT seq, REPEAT('p', 100) FROM seq_1_to_100000").await.unwrap();
    let conn_id = proxy.wait_for("the connection", |a| a.live_connections().first().map(|c| c.id));

    let before = counters.get();
    let rows: Vec<(u32, String)> = conn.query("SELECT id, pad FROM wide").await.unwrap();
    let after = counters.get();
    assert_eq!(rows.len(), 100_000);
    let q = proxy.wait_for("the 100k-row select", |a| stats_for(a, "SELECT id, pad FROM wide"));
    assert_eq!((q.rows_sum, q.count), (100_000, 1));
    assert_eq!(q.bytes_down, after.1 - before.1, "bytes down = what the client received for this query");
    assert_eq!(q.bytes_up, after.0 - before.0, "bytes up = what the client sent for this query");

    // Over the whole connection, greeting and COM_QUIT included, every byte is accounted for.
    conn.disconnect().await.unwrap();
    let total = proxy.wait_for("the connection to close", |a| {
        a.connections().find(|c| c.id == conn_id && c.closed_us.is_some()).map(|c| (c.bytes_up, c.bytes_down))
    });
    let wire = counters.get();
    assert_eq!(total, wire, "(up, down) recorded vs on the wire");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distinct_statements_fold_into_other() {
    let mut config = test_config();
    config.record.max_fingerprints = 10;
    let proxy = TestProxy::with_config(config);
    let mut conn = connect(&proxy).await;
    for i in 0..300 {
        // A different column alias makes each a different statement class.
        conn.query_drop(format!("SELECT 1 AS c{i}")).await.unwrap();
    }
    conn.query_drop("SELECT SLEEP(0.2) AS slowest").await.unwrap();
    let (classes, executions, other_count) = proxy.wait_for("the last statement", |a| {
        let listed = a.queries();
        let executions: u64 = listed.iter().map(|q| q.count).sum();
        let other = listed.iter().find(|q| q.fingerprint == rttscope::record::OTHER_FINGERPRINT).map(|q| q.count);
        listed.iter().any(|q| q.text.as_ref() == "select sleep(?) as slowest").then_some((
            listed.len(),
            executions,
            other,
        ))
    });
    assert!(classes <= 2 * 10 + 1, "{classes} classes tracked");
    assert!(other_count.unwrap_or(0) > 0, "some classes were folded");
    let recording = proxy.state().recording.lock().unwrap();
    let a = recording.cumulative();
    assert_eq!(executions, a.totals.executions, "folding loses no executions");
    assert_eq!(a.queries()[0].text.as_ref(), "select sleep(?) as slowest", "the slowest statement is kept");
}
