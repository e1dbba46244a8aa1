//! A short soak through the real binary, the baseline issue #38 keeps as a test: 100 clients
//! inserting for 10 s (the review ran 500 for 120 s), none of them sees an error, and every
//! INSERT the server acknowledged is in the table: rttscope neither drops nor repeats one.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use rttscope_integration_tests::mariadb::{NATIVE, TestDb};
use rttscope_integration_tests::process::ProxyProcess;

const CLIENTS: u64 = 100;
const FOR: Duration = Duration::from_secs(10);
/// Between two clients' starts: clients ramp up, as an application's pool does.
const RAMP: Duration = Duration::from_millis(10);
const NO_HANG: Duration = Duration::from_secs(20);

async fn connect(addr: SocketAddr) -> mysql_async::Result<Conn> {
    let opts = TestDb::shared().opts_via(addr, NATIVE.user, NATIVE.password);
    tokio::time::timeout(NO_HANG, Conn::new(opts)).await.expect("connecting must not hang")
}

/// Inserts `(client, 0)`, `(client, 1)`, ... until `until`; returns how many the server
/// acknowledged.
async fn insert_until(addr: SocketAddr, table: &str, client: u64, until: Instant) -> mysql_async::Result<u64> {
    let mut conn = connect(addr).await?;
    let mut acknowledged = 0;
    while Instant::now() < until {
        let insert = conn.query_drop(format!("INSERT INTO {table} (client, seq) VALUES ({client}, {acknowledged})"));
        tokio::time::timeout(NO_HANG, insert).await.expect("an INSERT must not hang")?;
        acknowledged += 1;
    }
    conn.disconnect().await?;
    Ok(acknowledged)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_acknowledged_insert_from_100_clients_is_in_the_table() {
    let db = TestDb::shared();
    let proxy = ProxyProcess::start(&format!("upstream: {}\n", db.upstream_addr())).unwrap();
    let table = format!("acknowledged_{}", std::process::id());
    let mut direct = connect(db.upstream_addr()).await.unwrap();
    let create = format!("CREATE TABLE {table} (client INT NOT NULL, seq INT NOT NULL, PRIMARY KEY (client, seq))");
    direct.query_drop(create).await.unwrap();

    let (addr, until) = (proxy.listen(), Instant::now() + FOR);
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let table = table.clone();
        clients.push(tokio::spawn(async move { insert_until(addr, &table, client, until).await }));
        tokio::time::sleep(RAMP).await;
    }
    let mut acknowledged = Vec::new();
    for (client, task) in clients.into_iter().enumerate() {
        acknowledged.push(task.await.unwrap().unwrap_or_else(|e| panic!("client {client}: {e}")));
    }

    // Counted on a connection of its own to the server, not through rttscope.
    let stored: Vec<(u64, u64)> =
        direct.query(format!("SELECT client, COUNT(*) FROM {table} GROUP BY client")).await.unwrap();
    direct.query_drop(format!("DROP TABLE {table}")).await.unwrap();
    for (client, acked) in acknowledged.iter().enumerate() {
        let rows = stored.iter().find(|(c, _)| *c == client as u64).map_or(0, |(_, n)| *n);
        assert_eq!(rows, *acked, "client {client}: rows in the table, INSERTs acknowledged");
    }
    let total: u64 = acknowledged.iter().sum();
    assert!(total >= CLIENTS * 10, "{total} INSERTs in {FOR:?}: the clients were kept waiting");
}
