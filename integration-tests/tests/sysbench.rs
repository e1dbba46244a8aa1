//! Findings that hold up in production: sysbench's `oltp_read_write` — four pooled connections
//! running transactions of ten point selects, four range reads, two updates, a delete and an
//! insert — through rttscope against the private MariaDB. Nothing in it is an N+1 loop, a
//! one-row-at-a-time write or a chatty session, and rttscope must not say so; while on the same
//! proxy, at the same time, a real N+1 loop over a parent's rows and a real run of single-row
//! inserts are still found.
//!
//! `scripts/install-deps.sh` installs Debian's `sysbench`. Without it the test fails rather
//! than skips: a false-positive test that does not run proves nothing.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use mysql_async::Conn;
use mysql_async::prelude::*;
use rttscope::findings::Kind;
use rttscope::report::{EvidenceDetail, Report};
use rttscope_integration_tests::clients;
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::TestProxy;

const THREADS: u32 = 4;
const SECONDS: u32 = 12;
const CHILDREN: usize = 200;
const INSERTS: u32 = 60;

fn sysbench() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("sysbench"))
        .find(|p| p.is_file())
        .expect("sysbench is not installed: scripts/install-deps.sh installs Debian's sysbench")
}

/// `sysbench oltp_read_write ... <action>` as `rtt_native` at `addr`; its stdout.
fn oltp(addr: SocketAddr, action: &str) -> String {
    sysbench_script("oltp_read_write", addr, action, SECONDS)
}

/// `sysbench <script> ... <action>` for `seconds`, as `rtt_native` at `addr`; its stdout.
fn sysbench_script(script: &str, addr: SocketAddr, action: &str, seconds: u32) -> String {
    let mut cmd = Command::new(sysbench());
    cmd.args([script, "--db-driver=mysql", "--mysql-ssl=off"])
        .arg(format!("--mysql-host={}", addr.ip()))
        .arg(format!("--mysql-port={}", addr.port()))
        .arg(format!("--mysql-user={}", NATIVE.user))
        .arg(format!("--mysql-password={}", NATIVE.password))
        .arg(format!("--mysql-db={DB}"))
        .args(["--tables=4", "--table-size=5000", "--report-interval=0"])
        .arg(format!("--threads={THREADS}"))
        .arg(format!("--time={seconds}"))
        .arg(action);
    let out =
        clients::run(cmd, Duration::from_secs(180)).unwrap_or_else(|e| panic!("sysbench {script} {action}: {e:#}"));
    assert!(out.status.success(), "sysbench {script} {action}: {}\n{}\n{}", out.status, out.stdout, out.stderr);
    out.stdout
}

/// The tests share sysbench's tables (`sbtest1` to `sbtest4`): one at a time.
static TABLES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The number after `label` on sysbench's summary line, e.g. `transactions:  4378 (437.61 per sec.)`.
fn summary_number(out: &str, label: &str) -> u64 {
    let line = out.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label} in {out}"));
    let value = line.trim_start()[label.len()..].split_whitespace().next().unwrap_or_default();
    value.parse().unwrap_or_else(|e| panic!("{line}: {e}"))
}

async fn connect(proxy: &TestProxy) -> Conn {
    Conn::new(TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await.expect("connect")
}

/// The real patterns, on a connection of their own beside sysbench: an N+1 loop over a
/// parent's rows, and single-row inserts one after another.
async fn real_patterns(proxy: &TestProxy) -> usize {
    let mut conn = connect(proxy).await;
    conn.query_drop("CREATE OR REPLACE TABLE sb_orders (id INT PRIMARY KEY, customer INT)").await.unwrap();
    conn.query_drop("INSERT INTO sb_orders SELECT seq, seq % 50 FROM seq_1_to_200").await.unwrap();
    conn.query_drop("CREATE OR REPLACE TABLE sb_audit (id INT PRIMARY KEY, note CHAR(10))").await.unwrap();
    // Let sysbench get going first: the loops run in the middle of its load.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let orders: Vec<u32> = conn.query("SELECT id FROM sb_orders ORDER BY id").await.unwrap();
    for id in &orders {
        let _: Option<u32> = conn.exec_first("SELECT customer FROM sb_orders WHERE id = ?", (id,)).await.unwrap();
    }
    for id in 0..INSERTS {
        conn.exec_drop("INSERT INTO sb_audit (id, note) VALUES (?, 'x')", (id,)).await.unwrap();
    }
    conn.disconnect().await.unwrap();
    orders.len()
}

/// A report that includes everything the clients did: once every connection is closed, a
/// marker query goes through; the collector applies a batch to the aggregates before the
/// findings, so when the marker is in the aggregates the findings have seen all before it.
async fn settled_report(proxy: &TestProxy) -> Report {
    proxy.wait_for("the connections to close", |a| {
        let all: Vec<_> = a.connections().collect();
        (all.len() > THREADS as usize && all.iter().all(|c| c.closed_us.is_some())).then_some(())
    });
    let mut conn = connect(proxy).await;
    conn.query_drop("SELECT 1 AS sysbench_settled").await.unwrap();
    conn.disconnect().await.unwrap();
    proxy.wait_for("the marker", |a| a.queries().iter().any(|q| q.text.contains("sysbench_settled")).then_some(()));
    proxy.state().report()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oltp_read_write_has_no_loops_and_no_chatty_sessions() {
    let _tables = TABLES.lock().await;
    let db = TestDb::shared();
    oltp(db.upstream_addr(), "prepare");
    let proxy = TestProxy::start();
    let addr = proxy.addr();
    let load = tokio::task::spawn_blocking(move || oltp(addr, "run"));
    let children = real_patterns(&proxy).await;
    let out = load.await.unwrap();
    let r = settled_report(&proxy).await;
    oltp(db.upstream_addr(), "cleanup");

    // The workload ran, and rttscope saw all of it: ten point selects a transaction.
    let transactions = summary_number(&out, "transactions:");
    assert!(transactions >= 500, "only {transactions} transactions:\n{out}");
    // Four threads on small tables deadlock now and then; sysbench rolls back and retries
    // (its "ignored errors"), as an application would. A few are part of a realistic load.
    let retried = summary_number(&out, "ignored errors:");
    assert!(retried * 100 <= transactions, "{retried} retried of {transactions}:\n{out}");
    let point_selects: u64 = r
        .queries
        .iter()
        .filter(|q| q.fingerprint.starts_with("select c from sbtest") && q.fingerprint.ends_with("where id=?"))
        .map(|q| q.count)
        .sum();
    assert!(point_selects >= 10 * transactions, "{point_selects} point selects for {transactions} transactions");
    assert_eq!(children, CHILDREN);

    // Nothing of sysbench's is a finding of these kinds ...
    let about_sysbench: Vec<_> = r
        .findings
        .iter()
        .filter(|f| matches!(f.kind, Kind::NPlusOne | Kind::RepeatedWrite | Kind::ChattySession))
        .filter(|f| f.evidence.statement.contains("sbtest"))
        .map(|f| &f.evidence.summary)
        .collect();
    assert!(about_sysbench.is_empty(), "false positives: {about_sysbench:#?}");
    assert!(r.findings.iter().all(|f| f.kind != Kind::ChattySession), "{:#?}", r.findings);

    // ... while the real loop and the real inserts, run in the middle of it, are.
    let loops: Vec<_> = r.findings.iter().filter(|f| f.kind == Kind::NPlusOne).collect();
    assert_eq!(loops.len(), 1, "{:#?}", r.findings);
    assert_eq!(loops[0].evidence.executions, CHILDREN as u64);
    assert_eq!(loops[0].round_trips, CHILDREN as u64 + 1, "the children and their parent");
    let EvidenceDetail::Loop(l) = &loops[0].evidence.detail else { panic!("{:?}", loops[0].evidence) };
    assert_eq!(l.parent_statement.as_deref(), Some("select id from sb_orders order by id"));
    assert!(
        loops[0].evidence.summary.contains(&format!("ran {CHILDREN} times back to back")),
        "{}",
        loops[0].evidence.summary
    );
    let writes: Vec<_> = r.findings.iter().filter(|f| f.kind == Kind::RepeatedWrite).collect();
    assert_eq!(writes.len(), 1, "{:#?}", r.findings);
    assert_eq!(
        (writes[0].evidence.statement.as_str(), writes[0].evidence.executions),
        ("insert into sb_audit (id, note) values(?+)", u64::from(INSERTS))
    );

    // Every finding's cost is its own statements' wall time: within the wall time it covered,
    // and all of them together within the recording's wall time in commands.
    for f in &r.findings {
        assert!(f.cost_us <= f.evidence.elapsed_us, "{}: {} of {}", f.kind, f.cost_us, f.evidence.elapsed_us);
    }
    let costs: u64 = r.findings.iter().map(|f| f.cost_us).sum();
    assert!(costs <= r.totals.busy_us, "findings cost {costs} µs of {} µs in commands", r.totals.busy_us);
    assert!(r.totals.busy_us <= r.window_us, "{:?} in a {} µs window", r.totals, r.window_us);
}

/// sysbench's single-statement workloads: every event one autocommit statement on one of four
/// tables picked at random, four threads each on its own connection. Streaks of one table's
/// statement come by chance, and their values are random ids: independent requests, which no
/// JOIN or batch could replace. None of them is a loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_point_selects_inserts_and_updates_are_not_loops() {
    let _tables = TABLES.lock().await;
    let db = TestDb::shared();
    let proxy = TestProxy::start();
    for script in ["oltp_point_select", "oltp_insert", "oltp_update_non_index"] {
        sysbench_script(script, db.upstream_addr(), "prepare", 4);
        let out = sysbench_script(script, proxy.addr(), "run", 4);
        sysbench_script(script, db.upstream_addr(), "cleanup", 4);
        let events = summary_number(&out, "transactions:");
        assert!(events >= 1_000, "{script}: only {events} events:\n{out}");
    }
    let r = settled_report(&proxy).await;
    let statements: u64 = r.queries.iter().filter(|q| q.fingerprint.contains("sbtest")).map(|q| q.count).sum();
    assert!(statements >= 3_000, "rttscope saw {statements} of sysbench's statements");
    let loops: Vec<_> = r
        .findings
        .iter()
        .filter(|f| matches!(f.kind, Kind::NPlusOne | Kind::RepeatedWrite | Kind::ChattySession))
        .map(|f| (f.kind, f.severity, &f.evidence.summary))
        .collect();
    assert!(loops.is_empty(), "independent requests taken for loops: {loops:#?}");
}
