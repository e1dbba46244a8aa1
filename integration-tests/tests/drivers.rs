//! Real drivers and real consumers through rttscope: Connector/C's server-side cursor (undersized
//! fetch batches), MariaDB Connector/J's fetch size and pipelined batches, `/metrics` read by the
//! official Prometheus parser, and the HTML report rendered by headless Chromium.
//!
//! Each workload also runs straight to the server where results can differ, so a finding is never
//! bought with wrong rows. `scripts/install-deps.sh` installs the JDK, Connector/J, Chromium and
//! the venv's `prometheus-client`; a test whose tool is missing says so and skips.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::*;
use rttscope::findings::Kind;
use rttscope::report::{EvidenceDetail, FetchEvidence, FindingReport, QueryReport, Report};
use rttscope_config::HumanDuration;
use rttscope_integration_tests::browser::{self, which};
use rttscope_integration_tests::clients::{self, Output, assert_same, is_mariadb};
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::{TestProxy, test_config};
use rttscope_integration_tests::skip;
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(180);
const CONNECTOR_J: &str = "/usr/share/java/mariadb-java-client.jar";

fn repo() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).canonicalize().expect("the workspace root")
}

fn run_checked(cmd: Command) -> Output {
    let out = clients::run(cmd, LIMIT).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "{}\n--- stdout\n{}\n--- stderr\n{}", out.status, out.stdout, out.stderr);
    out
}

/// `integration-tests/python/<script> MODE...` as `rtt_native` at `addr`; its stdout.
fn python(script: &str, addr: SocketAddr, args: &[&str]) -> String {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend(clients::conn_args(addr, NATIVE));
    clients::run_python(script, &all).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The number after `prefix` on the line that starts with it.
fn number_after(text: &str, prefix: &str) -> u64 {
    let line = text.lines().find_map(|l| l.strip_prefix(prefix)).unwrap_or_else(|| panic!("no {prefix:?} in:\n{text}"));
    line.trim().parse().unwrap_or_else(|e| panic!("{prefix:?}{line}: {e}"))
}

async fn connect(proxy: &TestProxy) -> Conn {
    Conn::new(TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await.expect("connect")
}

fn findings_of(r: &Report, kind: Kind) -> Vec<&FindingReport> {
    r.findings.iter().filter(|f| f.kind == kind).collect()
}

fn query<'a>(r: &'a Report, fingerprint: &str) -> &'a QueryReport {
    let found = r.queries.iter().find(|q| q.fingerprint == fingerprint);
    found.unwrap_or_else(|| panic!("no {fingerprint:?} in {:#?}", r.queries))
}

/// A report that includes everything `clients` client programs did on this proxy, findings too.
///
/// Once every connection the aggregates know is closed (markers of earlier calls included),
/// one more marker query is sent. The collector applies a batch to the aggregates and then to
/// the findings engine; the marker's events come in a later batch than the closed connections',
/// so when the aggregates show the marker, the findings have seen all of the workload. Without
/// this a "no finding" assertion could pass only because the detector had not caught up.
fn settled_report(proxy: &TestProxy, clients: usize) -> Report {
    let marker = |q: &str| q.contains("drivers_settled");
    let markers = proxy.wait_for("the client connections to close", |a| {
        let markers = a.queries().iter().filter(|q| marker(&q.text)).count();
        let conns: Vec<_> = a.connections().collect();
        (conns.len() >= clients + markers && conns.iter().all(|c| c.closed_us.is_some())).then_some(markers)
    });
    let alias = format!("drivers_settled_{markers}");
    let db = TestDb::shared();
    let mut cli = db.mariadb_cli(proxy.addr(), NATIVE.user, NATIVE.password, Some(DB));
    cli.args(["-N", "-e", &format!("SELECT 1 AS {alias}")]);
    run_checked(cli);
    proxy.wait_for(&alias, |a| a.queries().iter().any(|q| q.text.contains(&alias)).then_some(()));
    proxy.state().report()
}

fn assert_no_protocol_errors(proxy: &TestProxy) {
    let errors = proxy.stats().protocol_errors.load(Ordering::Relaxed);
    assert_eq!(errors, 0, "rttscope closed {errors} connection(s) on a protocol error");
}

// ---- 1. Connector/C's real server-side cursor --------------------------------------------

const CURSOR_SQL: &str = "select id, name, amount, at, note from drv_cursor_rows order by id";

fn cursor_table() {
    static SETUP: Once = Once::new();
    SETUP.call_once(|| {
        let out = python("cursor_batches.py", TestDb::shared().upstream_addr(), &["setup"]);
        assert!(out.contains("setup rows=20000"), "{out}");
    });
}

/// The cursor read straight to the server and through `proxy`, which must print the same.
/// Returns what the proxied run printed.
fn cursor_read(proxy: &TestProxy, prefetch: u32) -> String {
    let args = ["read", "--prefetch", &prefetch.to_string()];
    let direct = python("cursor_batches.py", TestDb::shared().upstream_addr(), &args);
    let proxied = python("cursor_batches.py", proxy.addr(), &args);
    assert_same(&format!("cursor read, prefetch {prefetch}"), &direct, &proxied);
    // Every id once: a fetch answered short or twice would show here, not only in a count.
    assert!(direct.contains("rows=20000 complete=True"), "{direct}");
    proxied
}

/// The background article's JDBC story with a driver that really fetches from a cursor:
/// 20,000 rows 10 at a time is 2,000 COM_STMT_FETCH round trips.
#[test]
fn cursor_read_10_rows_a_fetch_is_an_undersized_fetch() {
    if !is_mariadb() {
        return;
    }
    cursor_table();
    let proxy = TestProxy::start();
    let out = cursor_read(&proxy, 10);
    let server_fetches = number_after(&out, "COM_STMT_FETCH on this connection: ");
    assert!(server_fetches >= 2000, "{out}");
    let r = settled_report(&proxy, 1);
    assert_no_protocol_errors(&proxy);

    let q = query(&r, CURSOR_SQL);
    let fetches = q.commands.get("COM_STMT_FETCH");
    assert_eq!(fetches, Some(&server_fetches), "rttscope counts the fetches the server counted: {q:#?}");
    assert_eq!(q.rows.sum, 20_000, "{q:#?}");
    let found = findings_of(&r, Kind::UndersizedFetch);
    assert_eq!(found.len(), 1, "{:#?}", r.findings);
    let f = found[0];
    assert_eq!(f.fingerprint_id, q.fingerprint_id, "attributed to the prepared SQL, not to COM_STMT_FETCH: {f:#?}");
    assert_eq!(f.evidence.detail, EvidenceDetail::Fetch(FetchEvidence { fetch_size: 10 }), "{:?}", f.evidence);
    assert_eq!(f.evidence.rows, 20_000, "{:?}", f.evidence);
    assert_eq!(f.evidence.executions, server_fetches, "{:?}", f.evidence);
    assert!(f.round_trips >= 2000, "{f:#?}");
    assert!(!f.suggestion.is_empty());
}

/// Batches at or above `findings.fetch.min_rows` (100) are not flagged, however many there are:
/// 5,000 rows a fetch takes 5 fetches (4 full, 1 empty), and exactly 100 takes 201. Both reach
/// `min_fetches` (5), so only the batch size keeps them out.
#[test]
fn cursor_reads_in_batches_of_100_or_more_are_not_flagged() {
    if !is_mariadb() {
        return;
    }
    cursor_table();
    let proxy = TestProxy::start();
    let fetched = |n| number_after(&cursor_read(&proxy, n), "COM_STMT_FETCH on this connection: ");
    let fetches = fetched(5000) + fetched(100);
    let r = settled_report(&proxy, 2);
    assert_no_protocol_errors(&proxy);
    let q = query(&r, CURSOR_SQL);
    assert_eq!(q.commands.get("COM_STMT_FETCH"), Some(&fetches), "{q:#?}");
    assert_eq!(q.rows.sum, 40_000, "{q:#?}");
    assert!(findings_of(&r, Kind::UndersizedFetch).is_empty(), "{:#?}", r.findings);
}

// ---- 2. MariaDB Connector/J (JDBC) --------------------------------------------------------

/// `java` when it and Debian's Connector/J are installed; otherwise why not, printed.
fn java() -> Option<PathBuf> {
    let java = which("java");
    match (&java, Path::new(CONNECTOR_J).is_file()) {
        (Some(_), true) => java,
        (None, _) => {
            skip("no java on PATH (scripts/install-deps.sh installs default-jdk-headless)");
            None
        }
        (_, false) => {
            skip(format!("{CONNECTOR_J} missing (scripts/install-deps.sh installs libmariadb-java)"));
            None
        }
    }
}

/// `integration-tests/java/JdbcProbe.java MODE` against `addr`, run as a single source file.
fn jdbc(java: &Path, mode: &str, addr: SocketAddr, table: &str) -> String {
    let mut cmd = Command::new(java);
    cmd.args(["-cp", CONNECTOR_J]).arg(repo().join("integration-tests/java/JdbcProbe.java"));
    cmd.args([mode, &addr.ip().to_string(), &addr.port().to_string(), NATIVE.user, NATIVE.password, DB, table]);
    run_checked(cmd).stdout
}

/// `setFetchSize(10)` does not cost a round trip per 10 rows with this driver: Connector/J 2.x
/// sends one COM_QUERY and streams the result, reading 10 rows at a time from the socket while
/// TCP flow control holds the rest. No cursor, no COM_STMT_FETCH, so no undersized_fetch:
/// flagging it would send a user chasing a cost they do not pay.
#[test]
fn jdbc_fetch_size_streams_one_result_and_is_not_flagged() {
    let Some(java) = java() else { return };
    if !is_mariadb() {
        return;
    }
    let setup = jdbc(&java, "setup", TestDb::shared().upstream_addr(), "drv_jdbc_rows");
    assert!(setup.contains("setup rows=20000"), "{setup}");
    let direct = jdbc(&java, "stream", TestDb::shared().upstream_addr(), "drv_jdbc_rows");
    let proxy = TestProxy::start();
    let proxied = jdbc(&java, "stream", proxy.addr(), "drv_jdbc_rows");
    assert_same("JDBC stream", &direct, &proxied);
    assert!(direct.contains("stream fetchSize=10 rows=20000 sha256="), "{direct}");
    let cursor_fetches = number_after(&direct, "server saw COM_STMT_FETCH: ");
    assert_eq!(cursor_fetches, 0, "the driver opened a cursor after all: {direct}");

    let r = settled_report(&proxy, 1);
    assert_no_protocol_errors(&proxy);
    let q = query(&r, "select id, name, amount, at, note from drv_jdbc_rows order by id");
    assert_eq!((q.count, q.round_trips, q.rows.sum), (1, 1, 20_000), "{q:#?}");
    assert_eq!(q.commands, BTreeMap::from([("COM_QUERY".to_string(), 1)]), "{q:#?}");
    assert!(findings_of(&r, Kind::UndersizedFetch).is_empty(), "{:#?}", r.findings);
}

const BATCH_INSERT: &str = "insert into drv_jdbc_batch (id, name, amount) values(?+)";

/// What goes over the wire for `executeBatch()` of 1,000 single-row INSERTs with
/// `useBatchMultiSend` (and no rewriting, no bulk protocol, client-side prepared statements):
/// 1,000 COM_QUERY packets, each one INSERT with its values inlined, written up to 100 at a time
/// before the driver reads the OK packets (a capture shows client segments carrying up to 100
/// INSERTs while the server's OKs trail behind). rttscope must follow the pipeline, forward it
/// intact, and record 1,000 executions; it reports the run as a `repeated_write` (one row at a
/// time, where one multi-row INSERT would do).
#[test]
fn jdbc_pipelined_batch_arrives_intact_and_is_a_repeated_write() {
    let Some(java) = java() else { return };
    if !is_mariadb() {
        return;
    }
    let direct = jdbc(&java, "batch", TestDb::shared().upstream_addr(), "drv_jdbc_batch");
    let proxy = TestProxy::start();
    let proxied = jdbc(&java, "batch", proxy.addr(), "drv_jdbc_batch");
    // The table is read back on the same connection: identical digests mean identical contents.
    assert_same("JDBC batch", &direct, &proxied);
    assert!(direct.contains("batch update counts=1000 of which 1: 1000"), "{direct}");
    assert!(direct.contains("table rows=1000 sha256="), "{direct}");
    assert_eq!(number_after(&direct, "server saw INSERT: "), 1000, "{direct}");

    let r = settled_report(&proxy, 1);
    assert_no_protocol_errors(&proxy);
    let q = query(&r, BATCH_INSERT);
    assert_eq!((q.count, &q.commands), (1000, &BTreeMap::from([("COM_QUERY".to_string(), 1000)])), "{q:#?}");
    // Proof that the commands overlapped (were pipelined) as rttscope saw them, without timing
    // anything: their latencies, each from request to answer, add up to more than the whole
    // life of the connection. Serial commands never can.
    let conn = r.connections.iter().find(|c| c.user == NATIVE.user && c.commands > 1000).expect("the JDBC connection");
    let lifetime = conn.closed_at_us.expect("closed") - conn.opened_at_us;
    let busy = q.latency_us.sum;
    assert!(busy > lifetime, "not pipelined? {busy}µs of command latency in a {lifetime}µs connection");
    let writes = findings_of(&r, Kind::RepeatedWrite);
    assert_eq!(writes.len(), 1, "{:#?}", r.findings);
    assert_eq!(writes[0].fingerprint_id, q.fingerprint_id);
    assert_eq!(writes[0].evidence.executions, 1000, "{:?}", writes[0].evidence);
}

/// Over an emulated 15 ms link (the findings' reference RTT) the pipelined batch of 1,000 takes
/// about a dozen round trips of time, because the client waits once per 100 commands. A finding
/// must not price it at 1,000 round trips: its projection to 15 ms must agree with what the batch
/// just took at 15 ms.
#[test]
fn jdbc_pipelined_batch_is_priced_by_its_waits() {
    let Some(java) = java() else { return };
    if !is_mariadb() {
        return;
    }
    let mut config = test_config();
    config.inject.rtt = HumanDuration::from_millis(15);
    let proxy = TestProxy::with_config(config);
    jdbc(&java, "batch", proxy.addr(), "drv_jdbc_batch_wan");
    let r = settled_report(&proxy, 1);
    let q = query(&r, "insert into drv_jdbc_batch_wan (id, name, amount) values(?+)");
    for f in r.findings.iter().filter(|f| f.fingerprint_id == q.fingerprint_id) {
        let elapsed = f.evidence.elapsed_us;
        let projected = f.evidence.projected_at_reference_us;
        assert!(
            f.round_trips <= 100 && projected <= 4 * elapsed,
            "{}: {} round trips, projected {projected}µs at 15 ms; measured {elapsed}µs at 15 ms",
            f.kind,
            f.round_trips
        );
    }
}

// ---- 3. /metrics through the official Prometheus parser -----------------------------------

/// The samples of family `name` as `prometheus_client.parser` read it; its type must be `kind`.
fn family<'a>(parsed: &'a Value, name: &str, kind: &str) -> &'a [Value] {
    let family = &parsed["families"][name];
    assert_eq!(family["type"], kind, "family {name}: {family}");
    family["samples"].as_array().map_or(&[], Vec::as_slice)
}

/// The value of sample `name` with exactly `labels`, beside the `service` every sample carries.
fn value(samples: &[Value], name: &str, labels: Value) -> f64 {
    let without_service = |l: &Value| {
        let mut l = l.clone();
        l.as_object_mut().and_then(|o| o.remove("service")).expect("every sample names its service");
        l
    };
    let found = samples.iter().find(|s| s["name"] == name && without_service(&s["labels"]) == labels);
    found.and_then(|s| s["value"].as_f64()).unwrap_or_else(|| panic!("no {name}{labels} in {samples:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_with_the_prometheus_client() {
    let proxy = TestProxy::start();
    // Kept open while scraping: the active-connections gauge must count it.
    let mut conn = connect(&proxy).await;
    conn.query_drop("CREATE OR REPLACE TABLE drv_metrics (id INT PRIMARY KEY, secret VARCHAR(40))").await.unwrap();
    conn.query_drop("INSERT INTO drv_metrics SELECT seq, CONCAT('metrics-secret-', seq) FROM seq_1_to_20")
        .await
        .unwrap();
    for id in 1..=20 {
        let _: Option<String> =
            conn.query_first(format!("SELECT secret FROM drv_metrics WHERE id = {id}")).await.unwrap();
    }
    for id in 1..=5 {
        let _: Option<String> = conn.exec_first("SELECT secret FROM drv_metrics WHERE id = ?", (id,)).await.unwrap();
    }
    let fingerprint = "select secret from drv_metrics where id = ?";
    proxy.wait_for("the workload", |a| {
        a.queries().iter().any(|q| q.text.as_ref() == fingerprint && q.count >= 25).then_some(())
    });

    let url = format!("http://{}/metrics", proxy.admin());
    let scrape = tokio::task::spawn_blocking(move || clients::run_python("metrics_parse.py", &["--url", &url]));
    let out = scrape.await.unwrap().unwrap_or_else(|e| panic!("{e:#}"));
    let report = proxy.state().report();
    let parsed: Value = serde_json::from_str(&out).expect("metrics_parse.py prints JSON");
    assert_eq!(parsed["content_type"], "text/plain; version=0.0.4; charset=utf-8");

    // The parser names a counter family without its `_total`; the samples keep it.
    let trips = value(family(&parsed, "rttscope_round_trips", "counter"), "rttscope_round_trips_total", json!({}));
    assert_eq!(trips as u64, report.totals.round_trips, "the counter is the report's total");
    assert_eq!(report.connections.iter().map(|c| c.round_trips).sum::<u64>(), report.totals.round_trips);
    assert_eq!(query(&report, fingerprint).round_trips, 26, "20 queries, a prepare, 5 executes");

    let active = family(&parsed, "rttscope_connections_active", "gauge");
    assert_eq!(value(active, "rttscope_connections_active", json!({})), 1.0);

    let commands = family(&parsed, "rttscope_commands", "counter");
    let by_command = |c: &str| value(commands, "rttscope_commands_total", json!({ "command": c }));
    assert_eq!(by_command("COM_STMT_EXECUTE"), 5.0);
    assert_eq!(by_command("COM_STMT_PREPARE"), 1.0);
    assert!(by_command("COM_QUERY") >= 22.0, "{commands:?}");
    let all_commands: f64 = commands.iter().map(|s| s["value"].as_f64().unwrap()).sum();
    assert_eq!(all_commands as u64, report.totals.commands);

    let latency = family(&parsed, "rttscope_query_duration_seconds", "histogram");
    let count = value(latency, "rttscope_query_duration_seconds_count", json!({}));
    assert_eq!(count, all_commands, "one observation per command");
    assert!(value(latency, "rttscope_query_duration_seconds_sum", json!({})) > 0.0);
    assert_eq!(value(latency, "rttscope_query_duration_seconds_bucket", json!({"le": "+Inf"})), count);
    let is_bucket = |s: &&Value| s["name"] == "rttscope_query_duration_seconds_bucket";
    let buckets: Vec<f64> = latency.iter().filter(is_bucket).map(|s| s["value"].as_f64().unwrap()).collect();
    assert!(buckets.len() > 5 && buckets.windows(2).all(|w| w[0] <= w[1]), "cumulative buckets: {buckets:?}");

    // Raw SQL is never a label: every label value is a name or a number, but for the
    // statements' OpenTelemetry summaries and the info series' normalised text (literals `?`).
    let normalised: Vec<&str> = report.queries.iter().map(|q| q.fingerprint.as_str()).collect();
    for (name, f) in parsed["families"].as_object().unwrap() {
        for (label, v) in f["samples"].as_array().unwrap().iter().flat_map(|s| s["labels"].as_object().unwrap()) {
            let v = v.as_str().unwrap();
            let plain = |extra: &str| v.chars().all(|c| c.is_ascii_alphanumeric() || extra.contains(c));
            let ok = match label.as_str() {
                "text" => v.is_empty() || normalised.contains(&v) || v.ends_with('…'),
                "summary" | "db_query_summary" => plain("_.+- `"),
                _ => plain("_.+-"),
            };
            assert!(ok, "{name}{{{label}={v:?}}}");
        }
    }
    // No literal anywhere; the SQL's shape only in the info series and the summaries.
    let text = parsed["text"].as_str().unwrap().to_lowercase();
    assert!(!text.contains("metrics-secret"), "a literal in /metrics");
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let labels_left = line.split(",text=").next().unwrap();
        for sql in ["select secret", "insert into", "where id"] {
            assert!(!labels_left.contains(sql), "{sql:?} outside an info series' text: {line}");
        }
    }
    let summaries = family(&parsed, "rttscope_statement_info", "gauge");
    let summaries: std::collections::BTreeSet<&str> =
        summaries.iter().filter_map(|s| s["labels"]["summary"].as_str()).collect();
    assert!(summaries.contains("SELECT drv_metrics"), "{summaries:?}");
    assert!(summaries.iter().any(|s| s.starts_with("INSERT drv_metrics")), "{summaries:?}");
    let operations = family(&parsed, "db_client_operation_duration_seconds", "histogram");
    let verbs: std::collections::BTreeSet<&str> =
        operations.iter().filter_map(|s| s["labels"]["db_operation_name"].as_str()).collect();
    assert!(verbs.contains("SELECT") && verbs.contains("INSERT"), "{verbs:?}");
    conn.disconnect().await.unwrap();
}

/// Prometheus's naming rules reserve `_total` for counters (`promtool check metrics` flags a
/// non-counter with it), yet `rttscope_link_limited_seconds_total` is a gauge. It only ever
/// grows, so it is a counter.
#[test]
fn metric_types_follow_prometheus_naming() {
    let proxy = TestProxy::start();
    let text = rttscope::cli::admin_client::get(&format!("http://{}", proxy.admin()), "/metrics").unwrap();
    for line in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, kind) = line.split_once(' ').unwrap();
        assert_eq!(name.ends_with("_total"), kind == "counter", "# TYPE {line}");
    }
}

// ---- 4. The HTML report in headless Chromium ----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_report_renders_in_headless_chromium() {
    let Some(chromium) = which("chromium") else {
        skip("chromium not found (scripts/install-deps.sh installs Debian's chromium)");
        return;
    };
    let proxy = TestProxy::start();
    let mut conn = connect(&proxy).await;
    conn.query_drop("CREATE OR REPLACE TABLE drv_html_orders (id INT PRIMARY KEY, customer VARCHAR(20))")
        .await
        .unwrap();
    conn.query_drop("INSERT INTO drv_html_orders SELECT seq, CONCAT('c', seq) FROM seq_1_to_20").await.unwrap();
    // An N+1 loop of 20 children: one query per order for its customer's name.
    let ids: Vec<u32> = conn.query("SELECT id FROM drv_html_orders ORDER BY id").await.unwrap();
    for id in &ids {
        let _: Option<String> =
            conn.query_first(format!("SELECT customer FROM drv_html_orders WHERE id = {id}")).await.unwrap();
    }
    // The whole loop, not the moment it first qualified (the findings trail the aggregates).
    let deadline = Instant::now() + Duration::from_secs(10);
    let whole_loop = |r: &Report| findings_of(r, Kind::NPlusOne).iter().any(|f| f.evidence.executions == 20);
    while !whole_loop(&proxy.state().report()) {
        assert!(Instant::now() < deadline, "no n_plus_one finding of 20: {:#?}", proxy.state().report().findings);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let html = rttscope::cli::admin_client::get(&format!("http://{}", proxy.admin()), "/report?format=html").unwrap();
    conn.disconnect().await.unwrap();

    let artifacts = repo().join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let (page, png) = (artifacts.join("report.html"), artifacts.join("report.png"));
    std::fs::write(&page, &html).unwrap();
    browser::screenshot(&chromium, &page, &png, (1280, 2400));

    // The DOM as Chromium built it: the parser's own <tbody> shows the table really parsed.
    let dom = browser::dom(&chromium, &page);
    std::fs::write(artifacts.join("report.dom.html"), &dom).unwrap();
    let statements = dom.find("id=\"statements\"").expect("the statements section");
    assert!(dom[statements..].contains("<table><tbody><tr><th>"), "the statements table");
    assert!(dom[statements..].contains("select customer from drv_html_orders where id = ?"));
    assert!(dom.contains("<svg"), "the charts");
    let findings = dom.find("id=\"findings\"").expect("the findings section");
    let finding = dom[findings..].find("n_plus_one").expect("the n_plus_one finding in the findings section");
    let before = &dom[findings..findings + finding];
    assert!(before.contains("class=\"finding"), "n_plus_one outside a finding: {before}");
    assert!(dom[findings..].contains("ran 20 times back to back"), "the loop's evidence");
    println!("artifacts: {}", artifacts.display());
}
