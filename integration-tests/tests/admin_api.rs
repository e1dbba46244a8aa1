//! The admin API and reports as a user meets them: literals stay out of
//! reports unless asked for, the live view shows what is in flight, reset
//! forgets, and the final report lands on disk at shutdown.

use std::process::Command;
use std::time::Duration;

use mysql_async::Conn;
use mysql_async::prelude::*;
use rttscope::cli::admin_client as client;
use rttscope::report::Report;
use rttscope_integration_tests::legs::samples;
use rttscope_integration_tests::mariadb::{NATIVE, TestDb};
use rttscope_integration_tests::process::rttscope_binary;
use rttscope_integration_tests::proxy::{TestProxy, test_config};

async fn connect(proxy: &TestProxy) -> Conn {
    Conn::new(TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await.expect("connect")
}

fn admin_get(proxy: &TestProxy, path: &str) -> String {
    client::get(&format!("http://{}", proxy.admin()), path).expect("admin API answers")
}

const SECRET: &str = "hunter2-not-for-reports";

async fn run_secret_query(proxy: &TestProxy) {
    let mut conn = connect(proxy).await;
    let _: Option<u8> = conn.query_first(format!("SELECT 1 FROM DUAL WHERE '{SECRET}' = 'x'")).await.unwrap();
    proxy
        .wait_for("the secret query", |a| a.queries().iter().any(|q| q.text.contains("from dual where")).then_some(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn literals_never_reach_reports_unless_asked() {
    let proxy = TestProxy::start();
    run_secret_query(&proxy).await;
    for format in ["json", "text", "html"] {
        let body = admin_get(&proxy, &format!("/report?format={format}"));
        assert!(body.contains("from dual where"), "{format} report lists the statement");
        assert!(!body.contains(SECRET), "{format} report leaks a literal");
    }

    let mut config = test_config();
    config.report.examples = true;
    let proxy = TestProxy::with_config(config);
    run_secret_query(&proxy).await;
    let report: Report = serde_json::from_str(&admin_get(&proxy, "/report")).unwrap();
    let q = report.queries.iter().find(|q| q.fingerprint.contains("from dual where")).unwrap();
    assert!(q.example.as_deref().unwrap_or_default().contains(SECRET), "{q:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_connections_show_the_command_in_flight() {
    let proxy = TestProxy::start();
    let mut busy = connect(&proxy).await;
    // The same statement twice, with another between and after: each time the statement in
    // flight is the one shown (the second time, rttscope only marks the stored one current).
    for (round, sql) in ["SELECT SLEEP(1.2)", "SELECT SLEEP(1.2)"].into_iter().enumerate() {
        let sleeping = tokio::spawn(async move {
            let _: Option<u8> = busy.query_first(sql).await.unwrap();
            busy.query_drop("DO 1").await.unwrap();
            busy
        });
        tokio::time::sleep(Duration::from_millis(600)).await;
        let views: serde_json::Value = serde_json::from_str(&admin_get(&proxy, "/connections")).unwrap();
        let views = views.as_array().unwrap();
        let busy_view =
            views.iter().find(|v| v["current_command"] == "COM_QUERY").expect("a connection running a query");
        assert_eq!(busy_view["user"], NATIVE.user);
        assert!(busy_view["current_for_us"].as_u64().unwrap() >= 400_000, "{busy_view}");
        assert_eq!(busy_view["current_statement"], "select sleep(?)", "round {round}: {busy_view}");
        busy = sleeping.await.unwrap();
        // The client can read DO 1's answer a moment before rttscope marks the connection idle.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let idle = loop {
            let views: serde_json::Value = serde_json::from_str(&admin_get(&proxy, "/connections")).unwrap();
            let view = views.as_array().unwrap()[0].clone();
            if view["current_command"].is_null() || std::time::Instant::now() > deadline {
                break view;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert!(idle["current_command"].is_null(), "round {round}, never idle: {idle}");
        assert!(idle["current_statement"].is_null(), "round {round}, idle: {idle}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_forgets_what_was_recorded() {
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    conn.query_drop("DO 42").await.unwrap();
    proxy.wait_for("DO 42", |a| a.queries().iter().any(|q| q.text.as_ref() == "do ?").then_some(()));
    proxy.admin_client().post_json("/reset", "{}").expect("reset");
    let report: Report = serde_json::from_str(&admin_get(&proxy, "/report")).unwrap();
    assert!(report.queries.is_empty(), "{:?}", report.queries);
    assert_eq!(report.totals.commands, 0);
    // The open connection is still listed, with fresh counters.
    assert_eq!(report.connections.iter().filter(|c| c.open).count(), 1);
    conn.query_drop("DO 43").await.unwrap();
    proxy.wait_for("DO 43 after reset", |a| a.queries().iter().any(|q| q.count == 1).then_some(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn final_report_is_written_at_shutdown_and_renders_from_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("final.json");
    let mut config = test_config();
    config.report.path = Some(path.clone());
    let proxy = TestProxy::with_config(config);
    let mut conn = connect(&proxy).await;
    conn.query_drop("SELECT 'written at shutdown'").await.unwrap();
    conn.disconnect().await.unwrap();
    proxy.stop();

    let report: Report = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(report.schema_version, rttscope::report::SCHEMA_VERSION);
    assert!(report.queries.iter().any(|q| q.fingerprint == "select ?"), "{:?}", report.queries);
    // Every record was applied before the file was written: the quit is in it.
    assert!(report.queries.iter().any(|q| q.fingerprint == "COM_QUIT"), "{:#?}", report.connections);

    let binary = rttscope_binary().unwrap();
    let version = format!("\"schema_version\": {}", rttscope::report::SCHEMA_VERSION);
    for (format, expect) in [("text", "# Profile"), ("html", "<svg"), ("json", version.as_str())] {
        let out = Command::new(binary).args(["report", "--format", format]).arg(&path).output().unwrap();
        assert!(out.status.success(), "{format}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains(expect), "{format}");
    }
    // A report of another schema version is refused by its version, not by some field.
    let older = path.with_extension("v1.json");
    std::fs::write(&older, std::fs::read_to_string(&path).unwrap().replacen(&version, "\"schema_version\": 1", 1))
        .unwrap();
    let out = Command::new(binary).args(["report"]).arg(&older).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has report schema 1, this rttscope reads schema"));
    let out = Command::new(binary).args(["report", "--admin", "http://127.0.0.1:9"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot reach the admin API"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_subcommand_reads_a_live_admin_api() {
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    conn.query_drop("SELECT 'live'").await.unwrap();
    proxy.wait_for("the query", |a| a.queries().iter().any(|q| q.text.as_ref() == "select ?").then_some(()));
    let out = Command::new(rttscope_binary().unwrap())
        .args(["report", "--admin", &format!("http://{}", proxy.admin())])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("select ?") && text.contains("to first byte"), "{text}");
}

/// `/report` and `/metrics` count every command answered before they were asked, however
/// long the collector lets events gather at a paced client's rate (up to 100 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_count_every_command_answered_before_they_asked() {
    const QUERIES: u64 = 40;
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    paced(&mut conn, QUERIES).await;
    let report: Report = serde_json::from_str(&admin_get(&proxy, "/report")).expect("a JSON report");
    let probe = report.queries.iter().find(|q| q.fingerprint == "select ? + ? as paced_probe");
    assert_eq!(probe.map(|q| q.count), Some(QUERIES), "/report right after the last");

    paced(&mut conn, QUERIES).await;
    let metrics = admin_get(&proxy, "/metrics");
    let queries = samples(&metrics, "rttscope_commands_total").get("command=\"COM_QUERY\"").copied();
    // The connection's own queries on connecting count too.
    assert!(queries.is_some_and(|n| n >= (2 * QUERIES) as f64), "/metrics right after the last: {queries:?}");
}

/// `queries` selects, 10 ms apart (100 a second).
async fn paced(conn: &mut Conn, queries: u64) {
    for i in 0..queries {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let _: Option<u64> = conn.query_first(format!("SELECT {i} + 0 AS paced_probe")).await.unwrap();
    }
}
