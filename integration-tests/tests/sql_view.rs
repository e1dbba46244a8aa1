//! The SQL view: `SHOW RTTSCOPE ...` and `SET RTTSCOPE ...` answered by rttscope itself,
//! through the `mariadb` CLI (libmariadb: EOF packets, compression) and mysql_async
//! (DEPRECATE_EOF), never reaching the server and recorded at no round trip upstream.

use std::process::Command;
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::*;
use rttscope::fingerprint::Fingerprinter;
use rttscope_config::{Config, HumanDuration};
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::{TestProxy, test_config};

async fn connect(proxy: &TestProxy) -> Conn {
    Conn::new(TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await.expect("connect")
}

/// Statements the server has counted for this session.
async fn questions(conn: &mut Conn) -> u64 {
    let row: Option<(String, u64)> = conn.query_first("SHOW SESSION STATUS LIKE 'Questions'").await.unwrap();
    row.expect("the Questions counter").1
}

fn cli(proxy: &TestProxy, extra: &[&str], sql: &str) -> std::process::Output {
    let mut cmd: Command = TestDb::shared().mariadb_cli(proxy.addr(), NATIVE.user, NATIVE.password, Some(DB));
    cmd.args(extra).args(["-e", sql]);
    cmd.output().expect("run the mariadb CLI")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_statements_answers_with_rows_a_driver_reads() {
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    for i in 0..7u32 {
        let _: Option<u32> = conn.query_first(format!("SELECT {i} + 0 AS sql_view_probe")).await.unwrap();
    }
    let probe = Fingerprinter::new().fingerprint(b"SELECT 1 + 0 AS sql_view_probe").id;
    proxy.wait_for("the probes", |a| a.query(probe).filter(|q| q.count == 7).map(|_| ()));

    let before = questions(&mut conn).await;
    let rows: Vec<(String, u64, u64, f64)> = conn
        .query_map("show rttscope statements", |row: mysql_async::Row| {
            let (statement, calls, round_trips, total_ms) = (
                row.get::<String, _>("statement").unwrap(),
                row.get::<u64, _>("calls").unwrap(),
                row.get::<u64, _>("round_trips").unwrap(),
                row.get::<f64, _>("total_ms").unwrap(),
            );
            (statement, calls, round_trips, total_ms)
        })
        .await
        .expect("mysql_async reads the answer");
    let after = questions(&mut conn).await;
    assert_eq!(after - before, 1, "the server saw SHOW RTTSCOPE (only the second SHOW STATUS should count)");
    let probe_row = rows.iter().find(|r| r.0 == "select ? + ? as sql_view_probe").unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!((probe_row.1, probe_row.2), (7, 7), "{probe_row:?}");
    assert!(probe_row.3 > 0.0, "{probe_row:?}");

    // The connection carries on, and the statement is recorded at no round trip upstream.
    let echoed: Option<u32> = conn.exec_first("SELECT ?", (5u32,)).await.unwrap();
    assert_eq!(echoed, Some(5));
    let own = Fingerprinter::new().fingerprint(b"show rttscope statements").id;
    let q = proxy.wait_for("the SHOW itself", |a| a.query(own).cloned());
    assert_eq!((q.count, q.round_trips, q.errors), (1, 0, 0));
    assert_eq!(q.rows_sum, rows.len() as u64);
}

/// `SHOW RTTSCOPE STATEMENTS` counts every command answered before it, however long the
/// collector lets events gather at a paced client's rate (up to 100 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_statements_counts_every_command_before_it() {
    const QUERIES: u64 = 40;
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    for i in 0..QUERIES {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let _: Option<u64> = conn.query_first(format!("SELECT {i} + 0 AS paced_probe")).await.unwrap();
    }
    let rows: Vec<(String, u64)> = conn
        .query_map("show rttscope statements", |row: mysql_async::Row| {
            (row.get::<String, _>("statement").unwrap(), row.get::<u64, _>("calls").unwrap())
        })
        .await
        .expect("mysql_async reads the answer");
    let probe = rows.iter().find(|r| r.0 == "select ? + ? as paced_probe");
    assert_eq!(probe.map(|r| r.1), Some(QUERIES), "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_shows_every_table_plain_and_compressed() {
    let mut config = test_config();
    config.inject.rtt = HumanDuration::from_millis(30);
    let proxy = TestProxy::with_config(config);
    let out = cli(&proxy, &[], "SELECT 1");
    assert!(out.status.success(), "{out:?}");
    for compress in [&[][..], &["--compress"][..]] {
        let started = Instant::now();
        let out = cli(
            &proxy,
            compress,
            "SHOW RTTSCOPE STATEMENTS; SHOW RTTSCOPE FINDINGS; SHOW RTTSCOPE LINK; SHOW RTTSCOPE INJECT; SELECT 'still here'",
        );
        let elapsed = started.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{compress:?}: {}", String::from_utf8_lossy(&out.stderr));
        // No findings and no large transfers yet: those two are empty (the CLI prints
        // nothing for an empty result), and what follows them still reads.
        for needle in ["statement\tcalls", "Variable_name\tValue", "rtt\t30ms"] {
            assert!(stdout.contains(needle), "{compress:?}: no {needle:?} in\n{stdout}");
        }
        assert!(stdout.contains("still here"), "{stdout}");
        // Connect (greeting, login) and one query pay the 30 ms link; the four SHOWs do not.
        assert!(elapsed < Duration::from_millis(4 * 30 + 120), "{compress:?}: took {elapsed:?}");
    }
    let out = cli(&proxy, &[], "SHOW RTTSCOPE TABLES");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ERROR 1064") && stderr.contains("rttscope: no SHOW RTTSCOPE TABLES"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_changes_the_emulated_link_only_when_allowed() {
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    let Err(mysql_async::Error::Server(e)) = conn.query_drop("SET RTTSCOPE rtt = '25ms'").await else {
        panic!("SET RTTSCOPE must be refused by default");
    };
    assert_eq!(e.code, 1227, "{e:?}");
    assert!(e.message.contains("allow_set"), "{e:?}");
    assert!(!proxy.state().inject.current().is_active());

    let mut config: Config = test_config();
    config.sql_view.allow_set = true;
    let proxy = TestProxy::with_config(config);
    let mut conn = connect(&proxy).await;
    conn.query_drop("SET RTTSCOPE rtt = '25ms'").await.expect("allowed");
    assert_eq!(proxy.state().inject.current().rtt.0, Duration::from_millis(25));
    // The connection that set it pays it from its next round trip.
    let started = Instant::now();
    let _: Option<u8> = conn.query_first("SELECT 1").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(25), "{:?}", started.elapsed());
    let value: Option<(String, String)> = conn.query_first("SHOW RTTSCOPE INJECT").await.unwrap();
    assert_eq!(value, Some(("active".into(), "ON".into())));

    let Err(mysql_async::Error::Server(e)) = conn.query_drop("SET RTTSCOPE rtt = '10ms', jitter = '50ms'").await else {
        panic!("an invalid combination must be refused");
    };
    assert_eq!(e.code, 1231, "{e:?}");
    assert!(e.message.contains("jitter"), "{e:?}");
    assert_eq!(proxy.state().inject.current().rtt.0, Duration::from_millis(25), "a refused SET changes nothing");
    conn.query_drop("SET RTTSCOPE rtt = DEFAULT").await.unwrap();
    assert!(!proxy.state().inject.current().is_active());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turned_off_the_server_answers() {
    let mut config = test_config();
    config.sql_view.enabled = false;
    let proxy = TestProxy::with_config(config);
    let mut conn = connect(&proxy).await;
    let Err(mysql_async::Error::Server(e)) = conn.query_drop("SHOW RTTSCOPE STATEMENTS").await else {
        panic!("the server has no such statement");
    };
    assert_eq!(e.code, 1064, "{e:?}");
    assert!(!e.message.contains("rttscope:"), "rttscope answered although turned off: {e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_findings_names_the_loop() {
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    conn.query_drop("CREATE OR REPLACE TABLE sv_salaries (emp_no INT PRIMARY KEY, salary INT)").await.unwrap();
    conn.query_drop("INSERT INTO sv_salaries SELECT 10000 + seq, 40000 + seq FROM seq_1_to_200").await.unwrap();
    let staff: Vec<u32> = conn.query("SELECT emp_no FROM sv_salaries").await.unwrap();
    for emp_no in staff {
        let _: Option<u32> =
            conn.query_first(format!("SELECT salary FROM sv_salaries WHERE emp_no = {emp_no}")).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let expected = loop {
        let report = proxy.state().report();
        if let Some(f) = report.findings.first() {
            break (f.kind.to_string(), f.evidence.statement.clone());
        }
        assert!(Instant::now() < deadline, "no finding for a 200-step loop");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let rows: Vec<mysql_async::Row> = conn.query("SHOW RTTSCOPE FINDINGS").await.unwrap();
    let first = rows.first().expect("a finding row");
    assert_eq!(first.get::<String, _>("kind"), Some(expected.0.clone()));
    assert_eq!(first.get::<String, _>("statement"), Some(expected.1.clone()));
    assert!(expected.1.contains("sv_salaries"), "{expected:?}");
    assert!(first.get::<String, _>("fix").is_some_and(|fix| !fix.is_empty()));
}
