//! `/metrics` as a scraper sees it after real traffic: the OpenTelemetry database families
//! per statement, bounded to the top statements and `other` however many distinct statements
//! arrive; one `COM_UNKNOWN` series for every unknown command byte; the buffer and heap gauges.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::Duration;

use mysql_async::Conn;
use mysql_async::prelude::*;
use rttscope::cli::admin_client as client;
use rttscope_config::HumanDuration;
use rttscope_integration_tests::clients;
use rttscope_integration_tests::legs::{run_cli_ok, samples};
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::{TestProxy, proxy_to, test_config};

async fn connect(proxy: &TestProxy) -> Conn {
    Conn::new(TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await.expect("connect")
}

fn scrape(proxy: &TestProxy) -> String {
    client::get(&format!("http://{}", proxy.admin()), "/metrics").expect("admin API answers")
}

/// The label sets of family `name`'s series: its samples' labels without `le` (a histogram's
/// buckets are one series).
fn series(metrics: &str, name: &str) -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    for suffix in ["", "_total", "_bucket", "_sum", "_count"] {
        for labels in samples(metrics, &format!("{name}{suffix}")).keys() {
            let without_le: Vec<&str> = labels.split(',').filter(|l| !l.starts_with("le=")).collect();
            all.insert(without_le.join(","));
        }
    }
    all
}

/// `label="value"` out of a label set as written.
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    labels.split(',').find_map(|l| l.strip_prefix(name)?.strip_prefix("=\"")?.strip_suffix('"'))
}

/// The values of sample `name`, by the value of its label `by`.
fn by_label(metrics: &str, name: &str, by: &str) -> BTreeMap<String, f64> {
    samples(metrics, name).into_iter().filter_map(|(labels, v)| Some((label(&labels, by)?.to_owned(), v))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_statement_has_opentelemetry_series_matching_the_report() {
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    conn.query_drop("CREATE OR REPLACE TABLE m_rows (id INT PRIMARY KEY)").await.unwrap();
    conn.query_drop("INSERT INTO m_rows SELECT seq FROM seq_1_to_30").await.unwrap();
    for limit in 1..=6 {
        let _: Vec<u32> = conn.query(format!("SELECT id FROM m_rows WHERE id <= {limit}")).await.unwrap();
    }
    conn.disconnect().await.unwrap();
    let fingerprint = "select id from m_rows where id <= ?";
    let stats = proxy.wait_for("the selects", |a| {
        a.queries().iter().find(|q| q.text.as_ref() == fingerprint && q.count == 6).map(|q| (*q).clone())
    });
    let id = stats.fingerprint.to_string();
    let text = scrape(&proxy);

    let durations = samples(&text, "db_client_operation_duration_seconds_count");
    let (labels, count) = durations
        .iter()
        .find(|(labels, _)| label(labels, "statement") == Some(&id))
        .unwrap_or_else(|| panic!("no series for {id} in\n{text}"));
    assert_eq!(*count, 6.0);
    let system = if clients::is_mariadb() { "mariadb" } else { "mysql" };
    assert_eq!(label(labels, "db_system_name"), Some(system), "{labels}");
    assert_eq!(label(labels, "db_operation_name"), Some("SELECT"), "{labels}");
    assert_eq!(label(labels, "server_address"), Some("127.0.0.1"), "{labels}");
    // OpenTelemetry's summary: the operation and its table, never a literal.
    assert_eq!(label(labels, "db_query_summary"), Some("SELECT m_rows"), "{labels}");
    let info = samples(&text, "rttscope_statement_info");
    let want = format!("statement=\"{id}\",summary=\"SELECT m_rows\",text=\"{fingerprint}\"");
    assert_eq!(info.get(&want), Some(&1.0), "{info:?}");

    let rows = |suffix: &str| samples(&text, &format!("db_client_response_returned_rows{suffix}"))[labels.as_str()];
    assert_eq!(rows("_sum"), 21.0, "1 + 2 + ... + 6 rows");
    assert_eq!(rows("_sum") as u64, stats.rows_sum);
    let per_statement = |name: &str| by_label(&text, name, "statement")[&id];
    assert_eq!(per_statement("rttscope_statement_round_trips_total") as u64, stats.round_trips);
    assert_eq!(per_statement("rttscope_statement_wire_request_bytes_total") as u64, stats.wire_up);
    assert_eq!(per_statement("rttscope_statement_wire_response_bytes_total") as u64, stats.wire_down);
    assert_eq!(per_statement("rttscope_statement_first_byte_seconds_count"), 6.0);

    // Under the default bound every statement so far has its own series: no `other`.
    assert!(!series(&text, "db_client_operation_duration_seconds").iter().any(|l| l.contains("\"other\"")));
}

/// 100,000 distinct statements (the `mariadb` CLI, one COM_QUERY each) and one slow one: each
/// per-statement family keeps at most `top_statements` + 1 series, the slow statement earns
/// its own, and the series together count every command once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_statement_series_stay_bounded_under_100000_distinct_statements() {
    const TOP: usize = 100;
    let mut config = test_config();
    assert_eq!(config.metrics.top_statements, TOP, "the default bound is tested");
    config.metrics.top_statements = TOP;
    let proxy = TestProxy::with_config(config);

    let mut script = tempfile::NamedTempFile::new().unwrap();
    {
        let mut w = std::io::BufWriter::new(script.as_file_mut());
        for i in 0..100_000 {
            // A distinct alias is a distinct statement after normalisation.
            writeln!(w, "SELECT 1 AS c{i};").unwrap();
        }
    }
    let cli = TestDb::shared().mariadb_cli(proxy.addr(), NATIVE.user, NATIVE.password, Some(DB));
    let flood_done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mid = tokio::task::spawn_blocking({
        let (admin, flood_done) = (proxy.admin(), flood_done.clone());
        move || {
            // Scrapes while the flood runs: the bound holds at every scrape, not just the last.
            // Only while it runs: a scrape between the slow statements below would promote the
            // slow one early (a faster build finished the flood within the scrapes' time).
            let mut worst = 0;
            while !flood_done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(500));
                let Ok(text) = client::get(&format!("http://{admin}"), "/metrics") else { continue };
                worst = worst.max(series(&text, "db_client_operation_duration_seconds").len());
            }
            worst
        }
    });
    let path = script.path().to_owned();
    tokio::task::spawn_blocking(move || run_cli_ok(cli, Some(&path))).await.unwrap();
    flood_done.store(true, std::sync::atomic::Ordering::Relaxed);
    let worst_mid_flood = mid.await.unwrap();
    // Slower than all the others put together per statement: it must earn a series.
    let mut conn = connect(&proxy).await;
    for _ in 0..3 {
        conn.query_drop("SELECT SLEEP(0.2) AS slow_one").await.unwrap();
    }
    let slow = proxy.wait_for("the slow statement", |a| {
        a.queries().iter().find(|q| q.text.contains("slow_one") && q.count == 3).map(|q| q.fingerprint.to_string())
    });
    assert!(worst_mid_flood <= TOP + 1, "{worst_mid_flood} series while the flood ran");

    // The scrape promotes it: its series starts at zero (what it did before stays in
    // `other`, which only ever grows), and counts it from then on.
    let promoted = by_label(&scrape(&proxy), "db_client_operation_duration_seconds_count", "statement");
    assert_eq!(promoted.get(&slow), Some(&0.0), "the slow statement has a series of its own: {slow}");
    for _ in 0..2 {
        conn.query_drop("SELECT SLEEP(0.2) AS slow_one").await.unwrap();
    }
    conn.disconnect().await.unwrap();
    proxy.wait_for("the slow statement again", |a| {
        a.queries().iter().any(|q| q.text.contains("slow_one") && q.count == 5).then_some(())
    });

    let text = scrape(&proxy);
    for family in [
        "db_client_operation_duration_seconds",
        "db_client_response_returned_rows",
        "rttscope_statement_round_trips",
        "rttscope_statement_wire_request_bytes",
        "rttscope_statement_wire_response_bytes",
        "rttscope_statement_first_byte_seconds",
        "rttscope_statement_info",
    ] {
        let n = series(&text, family).len();
        assert!((TOP..=TOP + 1).contains(&n), "{family}: {n} series");
    }
    let counts = by_label(&text, "db_client_operation_duration_seconds_count", "statement");
    assert!(counts.contains_key("other"), "the many fold into other");
    assert_eq!(counts.get(&slow), Some(&2.0), "runs since its promotion: {slow}");
    let all_commands = samples(&text, "rttscope_query_duration_seconds_count")[""];
    assert!(all_commands > 100_000.0 * 0.5, "most of the flood was recorded: {all_commands}");
    assert_eq!(counts.values().sum::<f64>(), all_commands, "every command counted once, in one series");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_command_bytes_count_as_one_com_unknown_series() {
    let proxy = TestProxy::start();
    let mut args = clients::conn_args(proxy.addr(), NATIVE);
    args.extend(["20", "21", "30"].map(String::from));
    let out = tokio::task::spawn_blocking(move || clients::run_python("unknown_commands.py", &args))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(out, "20 1047\n21 1047\n30 1047\nselect 1 -> 1\n", "the server refused each, the session lived");
    proxy.wait_for("three unknown commands", |a| {
        let unknown: u64 = a.metrics.by_command().filter(|(c, _, _)| *c == "COM_UNKNOWN").map(|(_, n, _)| n).sum();
        (unknown == 3).then_some(())
    });
    let text = scrape(&proxy);
    for family in ["rttscope_commands_total", "rttscope_command_errors_total"] {
        let unknown = samples(&text, family);
        let unknown: Vec<_> = unknown.iter().filter(|(labels, _)| labels.contains("COM_UNKNOWN")).collect();
        assert_eq!(unknown, [(&"command=\"COM_UNKNOWN\"".to_owned(), &3.0)], "{family}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffer_bytes_gauge_follows_open_connections() {
    let config = test_config();
    let per_connection = 2.0 * config.relay.buffer_size.0 as f64;
    let proxy = TestProxy::with_config(config);
    let gauge = |proxy: &TestProxy| samples(&scrape(proxy), "rttscope_buffer_bytes")[""];
    assert_eq!(gauge(&proxy), 0.0, "no connection, no buffers");
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut conn = connect(&proxy).await;
        conn.query_drop("DO 1").await.unwrap();
        open.push(conn);
    }
    assert_eq!(gauge(&proxy), 3.0 * per_connection, "one buffer per direction per connection");
    for conn in open {
        conn.disconnect().await.unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while gauge(&proxy) != 0.0 {
        assert!(std::time::Instant::now() < deadline, "buffers given back when connections close");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let text = scrape(&proxy);
    let budget = samples(&text, "rttscope_buffer_budget_bytes")[""];
    assert_eq!(budget as u64, test_config().limits.buffer_budget.0);
    // The allocator's count beside RSS (glibc here): what is held, and what is kept free.
    assert!(samples(&text, "rttscope_heap_bytes")[""] > 0.0, "heap in use");
    assert!(samples(&text, "rttscope_heap_free_bytes").contains_key(""), "heap kept free");
}

/// `relay.idle_poll` in front of an application pacing its queries milliseconds apart: the
/// connection thread polls neither for its next query nor, since the queries are not back to
/// back, for the server's answers — polling would buy latency with CPU on every query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paced_queries_are_not_polled_for() {
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    const QUERIES: usize = 80;
    for _ in 0..QUERIES {
        tokio::time::sleep(Duration::from_millis(3)).await;
        conn.query_drop("DO 1").await.unwrap();
    }
    // Counts reach the metrics at a thread's next park at the latest: these ones.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(3)).await;
        conn.query_drop("DO 1").await.unwrap();
    }
    let text = scrape(&proxy);
    conn.disconnect().await.unwrap();
    let outcomes = by_label(&text, "rttscope_idle_polls_total", "outcome");
    // Polled, or would have been but for a crowded machine or polling not paying: the idle
    // moments with a window open. The connection's first exchanges come back to back and may
    // open one.
    let polled = outcomes.values().sum::<f64>();
    assert!(polled < (QUERIES / 8) as f64, "{QUERIES} queries 3 ms apart: {outcomes:?}");
}

/// `relay.idle_poll` in front of a server 2 ms away: the client sends each query as soon as
/// the last answer came, but its cycle is the server's 2 ms, so polling for its next query
/// (tens of microseconds after each answer, well inside the window) would shorten nothing. The
/// thread measures that on the first cycles and stops: the idle moments read `unpaid`, not
/// polled. (The longest window, 1 ms, keeps the window open however slow this test's client.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_that_does_not_speed_the_application_up_stops() {
    let far = proxy_to(TestDb::shared().upstream_addr(), |c| c.inject.rtt = HumanDuration::from_millis(2));
    let proxy = proxy_to(far.addr(), |c| c.relay.idle_poll = HumanDuration::from_millis(1));
    let mut conn = connect(&proxy).await;
    const QUERIES: usize = 600;
    for _ in 0..QUERIES {
        conn.query_drop("DO 1").await.unwrap();
    }
    // A thread adds its counts when it next sleeps after a poll or reads the machine's load
    // (at most 100 ms apart while it has work): wait for that.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let outcomes = loop {
        let outcomes = by_label(&scrape(&proxy), "rttscope_idle_polls_total", "outcome");
        if outcomes.values().sum::<f64>() >= (QUERIES / 2) as f64 || std::time::Instant::now() > deadline {
            break outcomes;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    conn.disconnect().await.unwrap();
    let polled = outcomes["caught"] + outcomes["missed"];
    // The measurement polls two blocks of 32 cycles (and the login's exchanges may be polled
    // for); the rest is not polled.
    assert!(polled <= 80.0, "{QUERIES} queries 2 ms away: {outcomes:?}");
    assert!(outcomes["unpaid"] >= (QUERIES / 2) as f64, "{QUERIES} queries 2 ms away: {outcomes:?}");
}

/// `relay.idle_poll`: through a client's back-to-back queries the connection threads poll
/// (or, on a crowded machine, count the idle moments they did not poll), and the metrics
/// say so; at `0` they never poll. Whether polling pays here depends on the machine: on a
/// quiet one it does (539 caught, 64 unpaid), beside the other tests of this file in CI it
/// did not (127 caught, 472 unpaid), so that is not asserted; workload a of the benchmarks
/// measures it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_polling_is_counted_and_off_at_zero() {
    for polling in [true, false] {
        let mut config = test_config();
        if !polling {
            config.relay.idle_poll = HumanDuration::ZERO;
        }
        let proxy = TestProxy::with_config(config);
        // Only idle moments with a window open are polled, and so counted: on a slow host,
        // where most gaps between round trips outlast the longest window, the windows stay
        // shut for stretches (97 of 600 counted in one CI run). Batches of 300 round trips
        // until 100 are counted, at most ten.
        let enough = |outcomes: &BTreeMap<String, f64>| !polling || outcomes.values().sum::<f64>() >= 100.0;
        let mut batches = 0;
        let (outcomes, seconds) = loop {
            batches += 1;
            let mut conn = connect(&proxy).await;
            for _ in 0..300 {
                conn.query_drop("DO 1").await.unwrap();
            }
            conn.disconnect().await.unwrap();
            // A thread adds its counts when it next sleeps after a poll or reads the machine's
            // load (at most 100 ms apart while it has work): wait for that.
            let deadline = std::time::Instant::now() + Duration::from_secs(2);
            let (outcomes, seconds) = loop {
                let text = scrape(&proxy);
                let outcomes = by_label(&text, "rttscope_idle_polls_total", "outcome");
                let seconds = samples(&text, "rttscope_idle_poll_seconds_total")[""];
                if enough(&outcomes) || std::time::Instant::now() > deadline {
                    break (outcomes, seconds);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            if enough(&outcomes) || batches == 10 {
                break (outcomes, seconds);
            }
        };
        assert_eq!(outcomes.keys().collect::<Vec<_>>(), ["caught", "crowded", "missed", "unpaid"]);
        let (caught, missed, crowded) = (outcomes["caught"], outcomes["missed"], outcomes["crowded"]);
        let counted = caught + missed + crowded + outcomes["unpaid"];
        if polling {
            assert!(counted >= 100.0, "up to 3,000 round trips, 2 idle moments each: {outcomes:?}");
            assert_eq!(seconds > 0.0, caught + missed > 0.0, "time is counted when polls were: {seconds}");
        } else {
            assert_eq!(counted, 0.0, "relay.idle_poll 0: {outcomes:?}");
            assert_eq!(seconds, 0.0);
        }
    }
}
