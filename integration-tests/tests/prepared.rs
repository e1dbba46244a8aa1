//! Prepared statements through real drivers: every execution recorded under the statement that
//! ran, and loops over the binary protocol found as they are over the text protocol.
//!
//! - MariaDB Connector/Python's binary cursors run each execute() as Connector/C's
//!   execute-direct: a COM_STMT_PREPARE with a COM_STMT_EXECUTE naming "the statement just
//!   prepared" (0xFFFFFFFF) behind it, unanswered, and a COM_STMT_CLOSE before the next one.
//! - Node's mysql2 `execute()` prepares once, sends the parameter types with every execute, and
//!   binds a JavaScript number as a DOUBLE; Sequelize's `Model.create()` runs on it.
//! - MariaDB Connector/J (`useServerPrepStmts=true`) and mysql_async prepare once and execute by
//!   id.
//! - Connector/Python's `cursor(prepared=True)` ignores the statement of every execute() after
//!   the first (its documented behaviour): the report must show what the server ran.
//!
//! Each client runs against the private test server through rttscope, and the test reads
//! `/report` over HTTP. `scripts/install-deps.sh` installs the venv, the JDK, Connector/J,
//! Node and the Node packages (`npm ci` in `integration-tests/node`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use rttscope::findings::Kind;
use rttscope::report::{EvidenceDetail, FindingReport, QueryReport, Report};
use rttscope_integration_tests::browser::which;
use rttscope_integration_tests::clients::{self, is_mariadb};
use rttscope_integration_tests::legs::admin_get;
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::TestProxy;
use rttscope_integration_tests::skip;

const CONNECTOR_J: &str = "/usr/share/java/mariadb-java-client.jar";
const PARENT: &str = "select id, author_id from pl_books where id > ? order by id limit ?";
const CHILD: &str = "select name from pl_authors where id = ?";
const LIMIT: Duration = Duration::from_secs(180);

fn repo() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).canonicalize().expect("the workspace root")
}

fn python(mode: &str, addr: std::net::SocketAddr) -> String {
    let mut args = vec![mode.to_string()];
    args.extend(clients::conn_args(addr, NATIVE));
    clients::run_python("prepared_loops.py", &args).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The tables every loop reads, made once straight on the server.
fn setup() {
    static SETUP: Once = Once::new();
    SETUP.call_once(|| assert_eq!(python("setup", TestDb::shared().upstream_addr()).trim(), "setup done"));
}

/// Runs `cmd` to the end; its stdout, or a panic with both streams.
fn run_checked(cmd: Command) -> String {
    let out = clients::run(cmd, LIMIT).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "{}\n--- stdout\n{}\n--- stderr\n{}", out.status, out.stdout, out.stderr);
    out.stdout
}

/// `/report` once every client connection has closed and the findings engine has seen `done`.
fn report_when(proxy: &TestProxy, done: impl Fn(&Report) -> bool) -> Report {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let json = admin_get(proxy.admin(), "/report").unwrap_or_else(|e| panic!("{e:#}"));
        let r: Report = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
        let closed = !r.connections.is_empty() && r.connections.iter().all(|c| !c.open);
        if closed && done(&r) {
            return r;
        }
        assert!(Instant::now() < deadline, "the report never settled: {:#?}\n{:#?}", r.queries, r.findings);
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn query<'a>(r: &'a Report, fingerprint: &str) -> Option<&'a QueryReport> {
    r.queries.iter().find(|q| q.fingerprint == fingerprint)
}

fn executions(r: &Report, fingerprint: &str) -> u64 {
    query(r, fingerprint).and_then(|q| q.commands.get("COM_STMT_EXECUTE")).copied().unwrap_or(0)
}

fn findings(r: &Report, kind: Kind) -> Vec<&FindingReport> {
    r.findings.iter().filter(|f| f.kind == kind).collect()
}

fn parent_of(f: &FindingReport) -> Option<&str> {
    match &f.evidence.detail {
        EvidenceDetail::Loop(l) => l.parent_statement.as_deref(),
        _ => None,
    }
}

/// The N+1 of the parent and 200 children, each execution under its own statement, found with
/// its parent linked.
fn assert_n_plus_one(proxy: &TestProxy) {
    let r = report_when(proxy, |r| executions(r, CHILD) >= 200 && !findings(r, Kind::NPlusOne).is_empty());
    assert_eq!(executions(&r, PARENT), 1, "{:#?}", r.queries);
    assert_eq!(executions(&r, CHILD), 200, "{:#?}", r.queries);
    let loops = findings(&r, Kind::NPlusOne);
    assert_eq!(loops.len(), 1, "{:#?}", r.findings);
    let f = loops[0];
    assert_eq!(f.evidence.statement, CHILD, "{f:#?}");
    assert_eq!(f.evidence.executions, 200, "{f:#?}");
    assert_eq!(parent_of(f), Some(PARENT), "{f:#?}");
}

/// One `repeated_write` of `statement`, 200 executions.
fn assert_repeated_write(proxy: &TestProxy, statement: &str) {
    let r = report_when(proxy, |r| executions(r, statement) >= 200 && !findings(r, Kind::RepeatedWrite).is_empty());
    assert_eq!(executions(&r, statement), 200, "{:#?}", r.queries);
    let writes = findings(&r, Kind::RepeatedWrite);
    assert_eq!(writes.len(), 1, "{:#?}", r.findings);
    assert_eq!(writes[0].evidence.statement, statement, "{:#?}", writes[0]);
    assert_eq!(writes[0].evidence.executions, 200, "{:#?}", writes[0]);
}

// ---- MariaDB Connector/Python: execute-direct ----------------------------------------------

#[test]
fn connector_python_binary_n_plus_one_is_found() {
    if !is_mariadb() {
        return;
    }
    setup();
    let proxy = TestProxy::start();
    assert_eq!(python("loop", proxy.addr()).trim(), "names=200 distinct=200");
    assert_n_plus_one(&proxy);
}

#[test]
fn connector_python_binary_inserts_are_found() {
    if !is_mariadb() {
        return;
    }
    setup();
    let proxy = TestProxy::start();
    assert_eq!(python("inserts", proxy.addr()).trim(), "inserted=200");
    assert_repeated_write(&proxy, "insert into pl_writes (id, qty) values(?+)");
}

/// Connector/C sends each document by COM_STMT_SEND_LONG_DATA: the execute carries only the
/// id (Connector/C also flags the document NULL in it; the server ignores that flag for a
/// long-data parameter), and every command is the statement's.
#[test]
fn connector_c_inserts_with_long_data_are_found() {
    if !is_mariadb() {
        return;
    }
    setup();
    let proxy = TestProxy::start();
    assert_eq!(python("longdata", proxy.addr()).trim(), "inserted=200");
    let statement = "insert into pl_docs (doc, id) values(?+)";
    assert_repeated_write(&proxy, statement);
    let r = report_when(&proxy, |_| true);
    let sent = query(&r, statement).and_then(|q| q.commands.get("COM_STMT_SEND_LONG_DATA")).copied();
    assert_eq!(sent, Some(200), "{:#?}", r.queries);
}

/// `cursor(prepared=True)` reruns its first statement for every later execute(): the server ran
/// the parent 201 times (its own counter says so, and every row had the parent's two columns),
/// and the report says the same.
#[test]
fn connector_python_prepared_cursor_is_recorded_as_the_server_ran_it() {
    if !is_mariadb() {
        return;
    }
    setup();
    let proxy = TestProxy::start();
    assert_eq!(python("reuse", proxy.addr()).trim(), "rows=200 selects=201 columns=[2]");
    let r = report_when(&proxy, |r| query(r, PARENT).is_some_and(|q| q.count >= 201));
    assert_eq!(query(&r, PARENT).map(|q| q.count), Some(201), "{:#?}", r.queries);
    assert!(query(&r, CHILD).is_none(), "the child never ran: {:#?}", r.queries);
}

// ---- Node mysql2 execute() -----------------------------------------------------------------

/// `node integration-tests/node/prepared_loops.js MODE` against `addr`, once `npm ci` has
/// installed mysql2; `None` (and a skip line) when Node or the packages are missing.
fn node(mode: &str, addr: std::net::SocketAddr) -> Option<String> {
    let dir = repo().join("integration-tests/node");
    let Some(node) = which("node") else {
        skip("no node on PATH (scripts/install-deps.sh installs nodejs)");
        return None;
    };
    if !dir.join("node_modules/mysql2").is_dir() {
        skip("integration-tests/node/node_modules missing (scripts/install-deps.sh runs npm ci)");
        return None;
    }
    let mut cmd = Command::new(node);
    cmd.current_dir(&dir).arg("prepared_loops.js").arg(mode).args(clients::conn_args(addr, NATIVE));
    Some(run_checked(cmd))
}

#[test]
fn mysql2_execute_n_plus_one_is_found() {
    if !is_mariadb() {
        return;
    }
    setup();
    let proxy = TestProxy::start();
    let Some(out) = node("loop", proxy.addr()) else { return };
    assert_eq!(out.trim(), "names=200 distinct=200");
    assert_n_plus_one(&proxy);
}

#[test]
fn mysql2_execute_inserts_are_found() {
    let proxy = TestProxy::start();
    let Some(out) = node("inserts", proxy.addr()) else { return };
    assert_eq!(out.trim(), "inserted=200");
    assert_repeated_write(&proxy, "insert into pl_node_writes (id, qty) values(?+)");
}

/// Sequelize's `Model.create()` inserts through mysql2's execute(): rows that differ only in a
/// number (and their timestamps, which Sequelize binds as strings) are still distinct writes.
#[test]
fn sequelize_create_loop_is_found() {
    let proxy = TestProxy::start();
    let Some(out) = node("creates", proxy.addr()) else { return };
    assert_eq!(out.trim(), "created=200");
    assert_repeated_write(
        &proxy,
        "insert into `pl_seq_items` (`id`, `qty`, `createdAt`, `updatedAt`) values (default, ?, ?, ?)",
    );
}

// ---- MariaDB Connector/J and mysql_async: prepare once, execute by id ----------------------

#[test]
fn connector_j_server_prepared_n_plus_one_is_found() {
    if !is_mariadb() {
        return;
    }
    let (Some(java), true) = (which("java"), Path::new(CONNECTOR_J).is_file()) else {
        skip(format!("java or {CONNECTOR_J} missing (scripts/install-deps.sh installs both)"));
        return;
    };
    setup();
    let proxy = TestProxy::start();
    let addr = proxy.addr();
    let mut cmd = Command::new(java);
    cmd.args(["-cp", CONNECTOR_J]).arg(repo().join("integration-tests/java/PreparedLoop.java"));
    cmd.args([&addr.ip().to_string(), &addr.port().to_string(), NATIVE.user, NATIVE.password, DB]);
    assert_eq!(run_checked(cmd).trim(), "names=200 distinct=200");
    assert_n_plus_one(&proxy);
}

/// mysql_async without its statement cache: every execution prepares again, so each child runs
/// under a new statement id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_async_n_plus_one_with_a_statement_a_execution_is_found() {
    if !is_mariadb() {
        return;
    }
    tokio::task::spawn_blocking(setup).await.expect("setup");
    let proxy = TestProxy::start();
    let opts = TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password).stmt_cache_size(0);
    let mut conn = mysql_async::Conn::new(opts).await.expect("connect");
    let sql = "SELECT id, author_id FROM pl_books WHERE id > ? ORDER BY id LIMIT 200";
    let books: Vec<(u32, u32)> = conn.exec(sql, (0,)).await.expect("books");
    let mut names = std::collections::BTreeSet::new();
    for (_, author) in &books {
        let name: Option<String> =
            conn.exec_first("SELECT name FROM pl_authors WHERE id = ?", (author,)).await.expect("author");
        names.insert(name.expect("every book has its author"));
    }
    assert_eq!((books.len(), names.len()), (200, 200));
    // What the server saw: a prepare and an execute per child (and no close: mysql_async
    // leaves an uncached statement to the server).
    let status: Vec<(String, u64)> = conn.query("SHOW SESSION STATUS LIKE 'Com_stmt_%e'").await.expect("status");
    let server = |name: &str| status.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| *v);
    assert_eq!((server("Com_stmt_prepare"), server("Com_stmt_execute")), (Some(201), Some(201)), "{status:?}");
    conn.disconnect().await.expect("disconnect");
    tokio::task::spawn_blocking(move || {
        assert_n_plus_one(&proxy);
        let r = report_when(&proxy, |_| true);
        let child = query(&r, CHILD).expect("the child");
        assert_eq!(child.commands.get("COM_STMT_PREPARE"), Some(&200), "{child:#?}");
    })
    .await
    .expect("assertions");
}
