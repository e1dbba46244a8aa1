//! Fixes in the driver's own words: real drivers through rttscope, each running a pattern whose
//! fix depends on the driver, and the finding naming that driver (from its connection
//! attributes) and its setting or call. PyMySQL and MariaDB Connector/Python (the test venv),
//! Connector/C (ctypes), MariaDB Connector/J, mysql_async and the mariadb CLI; PHP's mysqlnd in
//! `php_fetch.rs`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use rttscope::findings::Kind;
use rttscope::report::{FindingReport, Report};
use rttscope_integration_tests::browser::which;
use rttscope_integration_tests::clients::{self, is_mariadb};
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::TestProxy;
use rttscope_integration_tests::skip;

const CONNECTOR_J: &str = "/usr/share/java/mariadb-java-client.jar";
const CHILD: &str = "select name from df_customers where id = ?";

fn python(script: &str, addr: std::net::SocketAddr, args: &[&str]) -> String {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend(clients::conn_args(addr, NATIVE));
    clients::run_python(script, &all).unwrap_or_else(|e| panic!("{e:#}"))
}

fn setup() {
    static SETUP: Once = Once::new();
    SETUP.call_once(|| {
        let direct = TestDb::shared().upstream_addr();
        assert_eq!(python("driver_fixes.py", direct, &["setup"]).trim(), "setup done");
    });
}

/// The one finding of `kind`, once every connection has closed and the finding has caught up.
fn finding(proxy: &TestProxy, kind: Kind, done: impl Fn(&FindingReport) -> bool) -> (FindingReport, Report) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = proxy.state().report();
        let closed = !r.connections.is_empty() && r.connections.iter().all(|c| !c.open);
        let found: Vec<&FindingReport> = r.findings.iter().filter(|f| f.kind == kind).collect();
        if closed && found.len() == 1 && done(found[0]) {
            return (found[0].clone(), r);
        }
        assert!(Instant::now() < deadline, "no single settled {kind} finding: {:#?}", r.findings);
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn n_plus_one_by(driver: &str) -> FindingReport {
    setup();
    let proxy = TestProxy::start();
    assert_eq!(python("driver_fixes.py", proxy.addr(), &["loop", "--driver", driver]).trim(), "names=50 distinct=50");
    finding(&proxy, Kind::NPlusOne, |f| f.evidence.executions == 50 && f.evidence.statement == CHILD).0
}

#[test]
fn pymysql_n_plus_one_and_inserts_in_pymysql_words() {
    let f = n_plus_one_by("pymysql");
    assert_eq!(f.driver.as_deref(), Some("PyMySQL"), "{f:#?}");
    assert!(f.suggestion.contains("PyMySQL: `cursor.execute(\"... IN %s\", (tuple(keys),))`"), "{}", f.suggestion);

    let proxy = TestProxy::start();
    assert_eq!(
        python("driver_fixes.py", proxy.addr(), &["inserts", "--driver", "pymysql"]).trim(),
        "inserted=40 sum=780 max=w9"
    );
    let (f, _) = finding(&proxy, Kind::RepeatedWrite, |f| f.evidence.executions == 40);
    assert!(f.suggestion.contains("PyMySQL: `cursor.executemany(sql, rows)`"), "{}", f.suggestion);
}

/// Connector/Python sends the attributes of the libmariadb under it, as a C program such as
/// sysbench does: it gets the C API's words, which hold for both, and no Python a C program
/// could not use.
#[test]
fn connector_python_n_plus_one_in_the_c_librarys_words() {
    let f = n_plus_one_by("connector");
    assert_eq!(f.driver.as_deref(), Some("the C client library"), "{f:#?}");
    assert!(
        f.suggestion
            .starts_with("The C client library: one prepared statement with `IN (?, ?, ...)` per batch of keys"),
        "{}",
        f.suggestion
    );
    assert!(!f.suggestion.contains("Python"), "{}", f.suggestion);
}

/// Connector/C itself (ctypes over libmariadb), the background article's cursor at its worst: one
/// row a fetch. (MariaDB Connector/Python 1.1 reads a READ_ONLY cursor in one fetch whatever its
/// `prefetch_size`, so it cannot show the pattern.)
#[test]
fn connector_c_cursor_in_connector_c_words() {
    if !is_mariadb() {
        return;
    }
    let direct = TestDb::shared().upstream_addr();
    let table = ["--table", "df_cursor_rows"];
    let out = python("cursor_batches.py", direct, &[&["setup"][..], &table].concat());
    assert!(out.contains("setup rows=20000"), "{out}");
    let proxy = TestProxy::start();
    python("cursor_batches.py", proxy.addr(), &[&["read", "--prefetch", "1"][..], &table].concat());
    let (f, r) = finding(&proxy, Kind::UndersizedFetch, |f| f.round_trips >= 20_000);
    assert_eq!(f.driver.as_deref(), Some("the C client library"), "{f:#?}");
    // One row a fetch, said in the singular.
    assert!(f.evidence.summary.starts_with("cursor fetched 1 row per round trip: "), "{}", f.evidence.summary);
    assert!(
        f.suggestion.contains("`mysql_stmt_attr_set(stmt, STMT_ATTR_PREFETCH_ROWS, &rows)` with rows = 2000"),
        "{}",
        f.suggestion
    );
    let legs = &r.connections[0].legs;
    assert!(legs.client_library.as_deref().is_some_and(|l| l.starts_with("libmariadb")), "{legs:?}");
}

#[test]
fn connector_j_batch_in_connector_j_words() {
    let java = which("java");
    let (Some(java), true) = (java, Path::new(CONNECTOR_J).is_file()) else {
        skip(format!("java or {CONNECTOR_J} missing (scripts/install-deps.sh installs both)"));
        return;
    };
    let proxy = TestProxy::start();
    let repo: PathBuf = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).to_owned();
    let mut cmd = Command::new(java);
    cmd.args(["-cp", CONNECTOR_J]).arg(repo.join("integration-tests/java/JdbcProbe.java"));
    let addr = proxy.addr();
    cmd.args(["batch", &addr.ip().to_string(), &addr.port().to_string(), NATIVE.user, NATIVE.password, DB]);
    cmd.arg("df_jdbc_batch");
    let out = clients::run(cmd, Duration::from_secs(180)).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let (f, _) = finding(&proxy, Kind::RepeatedWrite, |f| f.evidence.executions == 1000);
    assert_eq!(f.driver.as_deref(), Some("MariaDB Connector/J"), "{f:#?}");
    assert!(
        f.suggestion.contains("MariaDB Connector/J: `addBatch()` then `executeBatch()`, with `useBulkStmts=true`"),
        "{}",
        f.suggestion
    );
}

/// mysql_async sends no connection attributes unless told; told, its fix speaks Rust.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_async_n_plus_one_in_mysql_async_words_when_it_says_so() {
    setup();
    for (attributes, words) in [(false, None), (true, Some("`mysql_async`: `conn.exec(format!("))] {
        let proxy = TestProxy::start();
        let mut opts = TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password).db_name(Some(DB));
        if attributes {
            let attrs = HashMap::from([("_client_name".to_owned(), "mysql_async".to_owned())]);
            opts = opts.connect_attributes(attrs);
        }
        let mut conn = mysql_async::Conn::new(opts).await.expect("connect");
        let orders: Vec<(u32, u32)> = conn.query("SELECT id, customer FROM df_orders ORDER BY id").await.unwrap();
        for (_, customer) in orders {
            let _: Option<String> =
                conn.query_first(format!("SELECT name FROM df_customers WHERE id = {customer}")).await.unwrap();
        }
        conn.disconnect().await.unwrap();
        let (f, _) = finding(&proxy, Kind::NPlusOne, |f| f.evidence.executions == 50);
        match words {
            Some(words) => {
                assert_eq!(f.driver.as_deref(), Some("mysql_async"));
                assert!(f.suggestion.contains(words), "{}", f.suggestion);
            }
            None => assert_eq!((f.driver.as_deref(), f.suggestion.contains(": `")), (None, false), "{f:#?}"),
        }
    }
}

/// The CLI names itself (`program_name`); a script's loop gets the general fix, no driver words.
#[test]
fn the_cli_is_recognised_and_gets_the_general_fix() {
    setup();
    let proxy = TestProxy::start();
    let mut script = String::from("SELECT id, customer FROM df_orders ORDER BY id;\n");
    for id in 1..=50 {
        script.push_str(&format!("SELECT name FROM df_customers WHERE id = {id};\n"));
    }
    let mut cli = TestDb::shared().mariadb_cli(proxy.addr(), NATIVE.user, NATIVE.password, Some(DB));
    cli.args(["-N", "-e", &script]);
    let out = clients::run(cli, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "{}", out.stderr);
    let (f, r) = finding(&proxy, Kind::NPlusOne, |f| f.evidence.executions == 50);
    let legs = &r.connections[0].legs;
    assert!(matches!(legs.client_program.as_deref(), Some("mysql" | "mariadb")), "{legs:?}");
    assert_eq!(f.driver.as_deref(), Some("the mariadb/mysql command-line client"));
    assert!(f.suggestion.ends_with("instead of one per row."), "{}", f.suggestion);
}
