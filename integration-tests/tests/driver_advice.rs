//! The advice runs: for each driver installable here and each finding whose fix names that
//! driver's call or setting, the pattern runs through rttscope and gets the finding in the
//! driver's words, then the code those words advise runs through rttscope, reads or writes the
//! same rows (read back from the server), and leaves no such finding and far fewer round trips.
//!
//! Drivers: PyMySQL, mysqlclient (MySQLdb), MariaDB Connector/Python and Oracle's MySQL
//! Connector/Python from the test venv (`python/driver_fixes.py`), libmariadb's C API through ctypes (`python/capi_advice.py`,
//! `python/cursor_batches.py`), mysql2 and Sequelize (`node/driver_advice.js`), MariaDB
//! Connector/J from Debian (`java/DriverAdvice.java`), and mysql_async here. PHP's mysqlnd is
//! `php_fetch.rs`.

mod advice_rig;

use std::net::SocketAddr;

use advice_rig::{Advice, Client, INSERTED, NAMES, QUERIED, of_kind, settled, start_proxy};
use rttscope::findings::Kind;
use rttscope_integration_tests::clients::{self, is_mariadb};
use rttscope_integration_tests::mariadb::{NATIVE, TestDb};

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
