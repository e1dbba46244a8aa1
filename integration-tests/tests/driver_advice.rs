//! The advice runs: for each driver installable here and each finding whose fix names that
//! driver's call or setting, the pattern runs through rttscope and gets the finding in the
//! driver's words, then the code those words advise runs through rttscope, reads or writes the
//! same rows (read back from the server), and leaves no such finding and far fewer round trips.
//!
//! Drivers: PyMySQL, mysqlclient (MySQLdb) and MariaDB Connector/Python from the test venv
//! (`python/driver_fixes.py`), libmariadb's C API through ctypes (`python/capi_advice.py`,
//! `python/cursor_batches.py`), mysql2 and Sequelize (`node/driver_advice.js`), MariaDB
//! Connector/J from Debian (`java/DriverAdvice.java`), and mysql_async here. PHP's mysqlnd is
//! `php_fetch.rs`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use rttscope::findings::Kind;
use rttscope::report::{FindingReport, Report};
use rttscope_config::HumanDuration;
use rttscope_integration_tests::browser::which;
use rttscope_integration_tests::clients::{self, is_mariadb};
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::{TestProxy, test_config};
use rttscope_integration_tests::skip;

const CONNECTOR_J: &str = "/usr/share/java/mariadb-java-client.jar";

/// What the N+1 modes print: 50 orders, each with a customer of its own.
const NAMES: &str = "names=50 distinct=50";
/// What the insert modes print: the 40 rows `(i, "w{i}")` read back.
const INSERTED: &str = "inserted=40 sum=780 max=w9";
/// What the churn modes print: 40 queries, `SELECT i` for i in 1..=40.
const QUERIED: &str = "queries=40 sum=820";

/// A client program and the driver it runs.
#[derive(Clone, Copy, Debug)]
enum Client {
    /// `python/driver_fixes.py --driver NAME`.
    Python(&'static str),
    /// `python/capi_advice.py`: libmariadb's C API itself, through ctypes.
    CApi,
    /// `node/driver_advice.js` (mysql2, and Sequelize over it).
    Node,
    /// `java/DriverAdvice.java` on MariaDB Connector/J.
    Java,
    /// [`mysql_async_mode`], naming itself in its connection attributes.
    MysqlAsync,
}

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Runs `client`'s `mode` against `addr` and returns what it printed, or `None` (skipped) when
/// the client is not installed here.
fn run(client: Client, mode: &str, addr: SocketAddr) -> Option<String> {
    let host = addr.ip().to_string();
    let port = addr.port().to_string();
    let out = match client {
        Client::Python(driver) => {
            let mut args = vec![mode.to_owned(), "--driver".to_owned(), driver.to_owned()];
            args.extend(clients::conn_args(addr, NATIVE));
            let out = clients::run_python("driver_fixes.py", &args).unwrap_or_else(|e| panic!("{e:#}"));
            return Some(out.trim().to_owned());
        }
        Client::CApi => {
            let mut args = vec![mode.to_owned()];
            args.extend(clients::conn_args(addr, NATIVE));
            let out = clients::run_python("capi_advice.py", &args).unwrap_or_else(|e| panic!("{e:#}"));
            return Some(out.trim().to_owned());
        }
        Client::Node => {
            let dir = repo().join("integration-tests/node");
            let Some(node) = which("node") else {
                skip("no node on PATH (scripts/install-deps.sh installs nodejs)");
                return None;
            };
            if !dir.join("node_modules/mysql2").is_dir() || !dir.join("node_modules/sequelize").is_dir() {
                skip("integration-tests/node/node_modules missing (scripts/install-deps.sh runs npm ci)");
                return None;
            }
            let mut cmd = Command::new(node);
            cmd.current_dir(&dir).arg("driver_advice.js").arg(mode);
            cmd.args(["--host", &host, "--port", &port, "--user", NATIVE.user, "--password", NATIVE.password]);
            cmd.args(["--db", DB]);
            clients::run(cmd, Duration::from_secs(120))
        }
        Client::MysqlAsync => {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            return Some(runtime.block_on(mysql_async_mode(mode, addr)));
        }
        Client::Java => {
            let (Some(java), true) = (which("java"), Path::new(CONNECTOR_J).is_file()) else {
                skip(format!("java or {CONNECTOR_J} missing (scripts/install-deps.sh installs both)"));
                return None;
            };
            let mut cmd = Command::new(java);
            cmd.args(["-cp", CONNECTOR_J]).arg(repo().join("integration-tests/java/DriverAdvice.java"));
            cmd.args([mode, &host, &port, NATIVE.user, NATIVE.password, DB]);
            clients::run(cmd, Duration::from_secs(180))
        }
    };
    let out = out.unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "{client:?} {mode}: {}\n{}", out.stdout, out.stderr);
    Some(out.stdout.trim().to_owned())
}

/// mysql_async's modes, as the other clients': the pattern, and the advice in its words.
async fn mysql_async_mode(mode: &str, addr: SocketAddr) -> String {
    let attrs = HashMap::from([("_client_name".to_owned(), "mysql_async".to_owned())]);
    let opts = TestDb::shared().opts_via(addr, NATIVE.user, NATIVE.password).connect_attributes(attrs);
    if let Some(advised) = mode.strip_prefix("churn") {
        let mut total = 0;
        // The advice: one pool per process, a `get_conn()` per request.
        let pool = (advised == "-advised").then(|| mysql_async::Pool::new(opts.clone()));
        for i in 1..=40u64 {
            let mut conn = match &pool {
                Some(pool) => pool.get_conn().await.expect("pooled connection"),
                None => mysql_async::Conn::new(opts.clone()).await.expect("connect"),
            };
            let v: Option<u64> = conn.query_first(format!("SELECT {i} AS v")).await.expect("select");
            total += v.expect("a row");
            if pool.is_none() {
                conn.disconnect().await.expect("disconnect");
            }
        }
        if let Some(pool) = pool {
            pool.disconnect().await.expect("pool disconnect");
        }
        return format!("queries=40 sum={total}");
    }
    let mut conn = mysql_async::Conn::new(opts).await.expect("connect");
    let out = match mode {
        "loop" | "loop-advised" => {
            let keys: Vec<u32> = conn.query("SELECT customer FROM df_orders ORDER BY id").await.expect("orders");
            let names: Vec<String> = if mode == "loop" {
                let mut names = Vec::new();
                for key in &keys {
                    names.extend(
                        conn.exec_first("SELECT name FROM df_customers WHERE id = ?", (key,)).await.expect("one"),
                    );
                }
                names
            } else {
                // The advice, as worded.
                let sql = format!("SELECT name FROM df_customers WHERE id IN ({})", vec!["?"; keys.len()].join(", "));
                conn.exec(sql, keys.clone()).await.expect("in list")
            };
            let distinct: std::collections::HashSet<&String> = names.iter().collect();
            format!("names={} distinct={}", names.len(), distinct.len())
        }
        "inserts" | "inserts-advised" | "inserts-bulk" => {
            conn.query_drop("DELETE FROM df_writes").await.expect("delete");
            let rows: Vec<(u32, String)> = (0..40).map(|i| (i, format!("w{i}"))).collect();
            // In one transaction, as an application writes a batch.
            conn.query_drop("BEGIN").await.expect("begin");
            let sql = "INSERT INTO df_writes (id, name) VALUES (?, ?)";
            if mode == "inserts" {
                for row in rows {
                    conn.exec_drop(sql, row).await.expect("insert");
                }
            } else if mode == "inserts-bulk" {
                // The advice on MariaDB: one COM_STMT_BULK_EXECUTE for all the rows.
                conn.exec_batch(sql, rows).await.expect("exec_batch");
            } else {
                // The advice: one multi-row INSERT per batch of rows.
                let marks = vec!["(?, ?)"; rows.len()].join(", ");
                let params: Vec<mysql_async::Value> =
                    rows.into_iter().flat_map(|(id, name)| [id.into(), name.into()]).collect();
                conn.exec_drop(format!("INSERT INTO df_writes (id, name) VALUES {marks}"), params)
                    .await
                    .expect("insert");
            }
            conn.query_drop("COMMIT").await.expect("commit");
            let (n, sum, max): (u64, u64, String) = conn
                .query_first("SELECT COUNT(*), SUM(id), MAX(name) FROM df_writes")
                .await
                .expect("count")
                .expect("row");
            format!("inserted={n} sum={sum} max={max}")
        }
        _ => panic!("unknown mode {mode}"),
    };
    conn.disconnect().await.expect("disconnect");
    out
}

/// The tables every client uses, made once per test binary.
fn setup() {
    static SETUP: Once = Once::new();
    SETUP.call_once(|| {
        let direct = TestDb::shared().upstream_addr();
        assert_eq!(run(Client::Python("pymysql"), "setup", direct).as_deref(), Some("setup done"));
    });
}

/// rttscope over an emulated link of a few ms when `link`: a login then costs enough for
/// connection churn to be worth a finding. Without, the plain test proxy.
fn start_proxy(link: bool) -> TestProxy {
    let mut config = test_config();
    if link {
        config.inject.rtt = HumanDuration::from_millis(4);
    }
    TestProxy::with_config(config)
}

/// The report once the findings have seen all the client did: its connections closed, then a
/// marker query from the `mariadb` CLI (another application, so in no finding of the client's)
/// went through; the collector applies a batch to the aggregates before the findings, so once
/// the aggregates show the marker, the findings have seen what came before it.
fn settled(proxy: &TestProxy, marker: &str) -> Report {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = proxy.state().report();
        if !r.connections.is_empty() && r.connections.iter().all(|c| !c.open) {
            break;
        }
        assert!(Instant::now() < deadline, "the client's connections did not close: {:#?}", r.connections);
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut cli = TestDb::shared().mariadb_cli(proxy.addr(), NATIVE.user, NATIVE.password, Some(DB));
    cli.args(["-N", "-e", &format!("SELECT 1 AS {marker}")]);
    let out = clients::run(cli, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    proxy.wait_for(marker, |a| a.queries().iter().any(|q| q.text.contains(marker)).then_some(()));
    proxy.state().report()
}

fn of_kind(r: &Report, kind: Kind) -> Vec<&FindingReport> {
    r.findings.iter().filter(|f| f.kind == kind).collect()
}

/// One pattern, the advice it gets and the code that follows the advice.
struct Advice {
    client: Client,
    kind: Kind,
    /// The mode that runs the pattern.
    pattern: &'static str,
    /// The modes that follow the advice, one per way it offers.
    advised: &'static [&'static str],
    /// `FindingReport::driver`.
    driver: &'static str,
    /// Words of the fix, each naming a call or setting an advised mode uses.
    words: &'static [&'static str],
    /// What each mode prints: the same rows, advised or not.
    prints: &'static str,
    /// Over an emulated link (connection churn).
    link: bool,
}

impl Advice {
    /// The pattern gets the finding in the driver's words; each advised mode gets the same rows,
    /// no such finding, and at most half the round trips.
    fn check(&self) {
        // Every client writes the same tables: one check at a time.
        static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        setup();
        let proxy = start_proxy(self.link);
        let Some(out) = run(self.client, self.pattern, proxy.addr()) else { return };
        assert_eq!(out, self.prints, "{:?} {}", self.client, self.pattern);
        let before = settled(&proxy, "advice_pattern_done");
        let found = of_kind(&before, self.kind);
        let queries: Vec<(&str, u64, u64)> =
            before.queries.iter().map(|q| (q.fingerprint.as_str(), q.count, q.round_trips)).collect();
        assert_eq!(found.len(), 1, "{:?} {}: {:#?} {queries:?}", self.client, self.pattern, before.findings);
        let f = found[0];
        assert_eq!(f.driver.as_deref(), Some(self.driver), "{f:#?}");
        for words in self.words {
            assert!(f.suggestion.contains(words), "{words} in {}", f.suggestion);
        }

        for mode in self.advised {
            let proxy = start_proxy(self.link);
            let out = run(self.client, mode, proxy.addr()).expect("the pattern's client ran");
            assert_eq!(out, self.prints, "{:?} {mode}", self.client);
            let after = settled(&proxy, "advice_followed");
            assert!(of_kind(&after, self.kind).is_empty(), "{:?} {mode}: {:#?}", self.client, after.findings);
            // The marker's own round trip is in both.
            let (was, is) = (before.totals.round_trips, after.totals.round_trips);
            assert!(is * 2 <= was, "{:?} {mode}: {is} round trips, the pattern {was}", self.client);
            eprintln!("{:?} {mode}: {:?} round trips {was} -> {is}", self.client, self.kind);
        }
    }
}

#[test]
fn pymysql_in_list_and_executemany_work() {
    Advice {
        client: Client::Python("pymysql"),
        kind: Kind::NPlusOne,
        pattern: "loop",
        advised: &["loop-advised"],
        driver: "PyMySQL",
        words: &["PyMySQL: `cursor.execute(\"... IN %s\", (tuple(keys),))`"],
        prints: NAMES,
        link: false,
    }
    .check();
    Advice {
        client: Client::Python("pymysql"),
        kind: Kind::RepeatedWrite,
        pattern: "inserts",
        advised: &["inserts-advised"],
        driver: "PyMySQL",
        words: &["PyMySQL: `cursor.executemany(sql, rows)`"],
        prints: INSERTED,
        link: false,
    }
    .check();
}

/// mysqlclient and MariaDB Connector/Python send libmariadb's attributes, as a C program does,
/// and Oracle's Connector/Python over its C extension sends libmysql's: they get the C API's
/// words. The SQL those words advise runs in each of them, with its own placeholder, and
/// `cursor.executemany` batches as the C API's array binding does.
#[test]
fn c_library_words_run_in_mysqlclient_and_connector_python() {
    for driver in ["mysqlclient", "connector", "oracle-c"] {
        Advice {
            client: Client::Python(driver),
            kind: Kind::NPlusOne,
            pattern: "loop",
            advised: &["loop-advised"],
            driver: "the C client library",
            words: &["one prepared statement with `IN (?, ?, ...)` per batch of keys"],
            prints: NAMES,
            link: false,
        }
        .check();
        Advice {
            client: Client::Python(driver),
            kind: Kind::RepeatedWrite,
            pattern: "inserts",
            advised: &["inserts-multirow", "inserts-advised"],
            driver: "the C client library",
            words: &["build one `INSERT ... VALUES (?, ?), (?, ?), ...` per batch of rows"],
            prints: INSERTED,
            link: false,
        }
        .check();
        Advice {
            client: Client::Python(driver),
            kind: Kind::ConnectionChurn,
            pattern: "churn",
            advised: &["churn-advised"],
            driver: "the C client library",
            words: &["keep the `MYSQL` handle open between requests"],
            prints: QUERIED,
            link: true,
        }
        .check();
    }
}

/// The C library's words as a C program follows them: the C API calls they name.
#[test]
fn c_library_words_run_through_the_c_api() {
    Advice {
        client: Client::CApi,
        kind: Kind::NPlusOne,
        pattern: "loop",
        advised: &["loop-advised"],
        driver: "the C client library",
        words: &["(`mysql_stmt_prepare`, then `mysql_stmt_bind_param` with one bind per key)"],
        prints: NAMES,
        link: false,
    }
    .check();
    Advice {
        client: Client::CApi,
        kind: Kind::RepeatedWrite,
        pattern: "inserts",
        advised: &["inserts-advised"],
        driver: "the C client library",
        words: &[
            "bind arrays of rows to one prepared INSERT (`mysql_stmt_attr_set(stmt, STMT_ATTR_ARRAY_SIZE, &rows)`",
        ],
        prints: INSERTED,
        link: false,
    }
    .check();
}

#[test]
fn mysql2_in_list_nested_array_and_pool_work() {
    Advice {
        client: Client::Node,
        kind: Kind::NPlusOne,
        pattern: "loop",
        advised: &["loop-advised"],
        driver: "Node.js (mysql2)",
        words: &["`connection.query('... IN (?)', [keys])`"],
        prints: NAMES,
        link: false,
    }
    .check();
    Advice {
        client: Client::Node,
        kind: Kind::RepeatedWrite,
        pattern: "inserts",
        advised: &["inserts-advised"],
        driver: "Node.js (mysql2)",
        words: &["`connection.query('INSERT INTO t (a, b) VALUES ?', [rows])`"],
        prints: INSERTED,
        link: false,
    }
    .check();
    Advice {
        client: Client::Node,
        kind: Kind::ConnectionChurn,
        pattern: "churn",
        advised: &["churn-advised"],
        driver: "Node.js (mysql2)",
        words: &["`mysql.createPool({...})` once, then `pool.query(...)`"],
        prints: QUERIED,
        link: true,
    }
    .check();
}

/// Sequelize runs over mysql2 and names itself as mysql2 does.
#[test]
fn sequelize_bulk_create_works() {
    Advice {
        client: Client::Node,
        kind: Kind::RepeatedWrite,
        pattern: "creates",
        advised: &["creates-advised"],
        driver: "Node.js (mysql2)",
        words: &["with Sequelize, `Model.bulkCreate(rows)`"],
        prints: "created=40 sum=780",
        link: false,
    }
    .check();
}

#[test]
fn connector_j_in_list_batches_and_pool_work() {
    Advice {
        client: Client::Java,
        kind: Kind::NPlusOne,
        pattern: "loop",
        advised: &["loop-advised"],
        driver: "MariaDB Connector/J",
        words: &["one PreparedStatement with `IN (?, ?, ...)` per batch of keys"],
        prints: NAMES,
        link: false,
    }
    .check();
    Advice {
        client: Client::Java,
        kind: Kind::RepeatedWrite,
        pattern: "batch",
        advised: &["batch-bulk", "batch-rewrite"],
        driver: "MariaDB Connector/J",
        words: &["`addBatch()` then `executeBatch()`, with `useBulkStmts=true`", "`rewriteBatchedStatements=true`"],
        prints: INSERTED,
        link: false,
    }
    .check();
    Advice {
        client: Client::Java,
        kind: Kind::ConnectionChurn,
        pattern: "churn",
        advised: &["churn-advised"],
        driver: "MariaDB Connector/J",
        words: &["`MariaDbPoolDataSource` (`pool=true&maxPoolSize=10` in the URL)"],
        prints: QUERIED,
        link: true,
    }
    .check();
}

#[test]
fn mysql_async_in_list_multirow_insert_and_pool_work() {
    Advice {
        client: Client::MysqlAsync,
        kind: Kind::NPlusOne,
        pattern: "loop",
        advised: &["loop-advised"],
        driver: "mysql_async",
        words: &["`conn.exec(format!(\"... IN ({})\", vec![\"?\"; keys.len()].join(\", \")), keys)`"],
        prints: NAMES,
        link: false,
    }
    .check();
    Advice {
        client: Client::MysqlAsync,
        kind: Kind::RepeatedWrite,
        pattern: "inserts",
        // `exec_batch` is one bulk command only where the server is MariaDB.
        advised: if is_mariadb() { &["inserts-bulk", "inserts-advised"] } else { &["inserts-advised"] },
        driver: "mysql_async",
        words: &[
            "`conn.exec_batch(sql, rows)` sends the rows as one bulk command on MariaDB",
            "build one multi-row INSERT per batch of rows",
        ],
        prints: INSERTED,
        link: false,
    }
    .check();
    Advice {
        client: Client::MysqlAsync,
        kind: Kind::ConnectionChurn,
        pattern: "churn",
        advised: &["churn-advised"],
        driver: "mysql_async",
        words: &["one `mysql_async::Pool::new(opts)` per process and `pool.get_conn()` per request"],
        prints: QUERIED,
        link: true,
    }
    .check();
}

/// The C API's cursor advice, run over libmariadb (ctypes, `python/cursor_batches.py`): a cursor
/// read 10 rows a fetch is told to fetch `rows = N` or to read without a cursor; both ways read
/// the same 20,000 rows with no such finding and a handful of round trips.
#[test]
fn connector_c_prefetch_advice_reads_in_few_fetches() {
    if !is_mariadb() {
        return; // the table is filled from MariaDB's sequence engine
    }
    let cursor = |addr: SocketAddr, args: &[&str]| -> String {
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.extend(["--table".to_owned(), "da_cursor_rows".to_owned()]);
        all.extend(clients::conn_args(addr, NATIVE));
        clients::run_python("cursor_batches.py", &all).unwrap_or_else(|e| panic!("{e:#}"))
    };
    let rows = |out: &str| out.lines().find(|l| l.starts_with("rows=")).map(str::to_owned);
    assert!(cursor(TestDb::shared().upstream_addr(), &["setup"]).contains("setup rows=20000"));

    let proxy = start_proxy(false);
    let read = rows(&cursor(proxy.addr(), &["read", "--prefetch", "10"])).expect("rows=");
    assert!(read.starts_with("rows=20000 complete=True "), "{read}");
    let before = settled(&proxy, "advice_pattern_done");
    let found = of_kind(&before, Kind::UndersizedFetch);
    assert_eq!(found.len(), 1, "{:#?}", before.findings);
    let fix = &found[0].suggestion;
    assert_eq!(found[0].driver.as_deref(), Some("the C client library"), "{:#?}", found[0]);
    // The advice's own number, as the user would paste it.
    let size = fix
        .split_once("`mysql_stmt_attr_set(stmt, STMT_ATTR_PREFETCH_ROWS, &rows)` with rows = ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no rows = N in {fix}"));
    assert!(fix.contains("`mysql_stmt_store_result`"), "{fix}");

    for args in [vec!["read", "--prefetch", &size.to_string()], vec!["read", "--no-cursor"]] {
        let args: Vec<&str> = args.iter().map(|s| s.as_ref()).collect();
        let proxy = start_proxy(false);
        assert_eq!(rows(&cursor(proxy.addr(), &args)).as_ref(), Some(&read), "{args:?}");
        let after = settled(&proxy, "advice_followed");
        assert!(of_kind(&after, Kind::UndersizedFetch).is_empty(), "{args:?}: {:#?}", after.findings);
        let (was, is) = (before.totals.round_trips, after.totals.round_trips);
        assert!(is * 2 <= was, "{args:?}: {is} round trips, the pattern {was}");
        eprintln!("Connector/C {args:?}: round trips {was} -> {is}");
    }
}

/// Oracle's MySQL Connector/Python in pure Python names itself, and gets its own words.
#[test]
fn mysql_connector_python_in_list_executemany_and_pool_work() {
    let driver = "oracle";
    Advice {
        client: Client::Python(driver),
        kind: Kind::NPlusOne,
        pattern: "loop",
        advised: &["loop-advised"],
        driver: "MySQL Connector/Python",
        words: &["`cursor.execute(\"... IN (\" + \", \".join([\"%s\"] * len(keys)) + \")\", keys)`"],
        prints: NAMES,
        link: false,
    }
    .check();
    Advice {
        client: Client::Python(driver),
        kind: Kind::RepeatedWrite,
        pattern: "inserts",
        advised: &["inserts-advised"],
        driver: "MySQL Connector/Python",
        words: &["`cursor.executemany(sql, rows)` rewrites the INSERT into multi-row INSERTs"],
        prints: INSERTED,
        link: false,
    }
    .check();
    Advice {
        client: Client::Python(driver),
        kind: Kind::ConnectionChurn,
        pattern: "churn",
        advised: &["churn-advised"],
        driver: "MySQL Connector/Python",
        words: &[
            "`mysql.connector.pooling.MySQLConnectionPool(pool_name=..., pool_size=..., pool_reset_session=False)`",
            "`pool.get_connection()` per request",
        ],
        prints: QUERIED,
        link: true,
    }
    .check();
}

/// Session settings made on every use, then once per connection as each driver's words say.
#[test]
fn chatty_session_settings_once_per_connection_work() {
    const PYTHON: &str = "requests=60 names=60 autocommit=1 time_zone=+00:00";
    const ZONE: &str = "requests=60 names=60 time_zone=+00:00";
    let cases: [(Client, &str, &[&str], &str); 4] = [
        (Client::Python("pymysql"), "PyMySQL", &["`autocommit=` and `init_command=` in `pymysql.connect()`"], PYTHON),
        // mysqlclient's `init_command=` and `autocommit=` are the C calls the words name.
        (
            Client::Python("mysqlclient"),
            "the C client library",
            &["`mysql_optionsv(mysql, MYSQL_INIT_COMMAND, \"SET ...\")`", "`mysql_autocommit()` only when it changes"],
            PYTHON,
        ),
        (
            Client::Node,
            "Node.js (mysql2)",
            &[
                "session variables once per connection (the pool's `connection` event)",
                "`enableKeepAlive` rather than a ping",
            ],
            ZONE,
        ),
        (
            Client::Java,
            "MariaDB Connector/J",
            &["session variables in `sessionVariables=` of the URL"],
            "requests=60 names=60 time_zone=+00:00 wait_timeout=600",
        ),
    ];
    for (client, driver, words, prints) in cases {
        Advice {
            client,
            kind: Kind::ChattySession,
            pattern: "chatty",
            advised: &["chatty-advised"],
            driver,
            words,
            prints,
            link: false,
        }
        .check();
    }
}
