//! Each fix in the words of the driver that ran the pattern: the setting, the call or the
//! idiom that does in that driver what the fix asks. `None` where the driver has nothing of
//! its own to say (the SQL-level fix is the whole fix) or cannot cause the pattern.
//!
//! Every sentence here is advice a user pastes: it names only calls the driver implements, and
//! only that driver's calls. `integration-tests/tests/driver_advice.rs` runs the advised code
//! of each driver installed for the tests (`php_fetch.rs` mysqlnd's) and checks that the
//! finding goes away; `docs/findings.md` lists which advice is run and which is not. `CLibrary` is whatever runs over libmariadb or libmysqlclient without naming
//! itself — a C program such as sysbench as well as MariaDB Connector/Python or mysqlclient,
//! which send the same attributes — so its words are the C API's, true for all of them.

use super::{Driver, Finding, Kind};
use crate::fingerprint::StatementKind;

/// The driver's own words for `f`'s fix, given `size` rows per fetch for an undersized fetch.
pub fn words(f: &Finding, driver: Driver, size: u64) -> Option<String> {
    match f.kind {
        Kind::NPlusOne => n_plus_one(driver),
        Kind::RepeatedWrite => match f.statement_kind {
            StatementKind::Insert | StatementKind::Replace => batched_insert(driver),
            _ => batched_change(driver),
        },
        Kind::UndersizedFetch => fetch(driver, size),
        Kind::ChattySession => chatty(driver),
        Kind::PaginationLoop | Kind::Compression => None,
        Kind::ConnectionChurn => pooling(driver),
    }
    .map(|w| format!("{}: {w}", label(driver)))
}

/// The driver's name as the first words of a sentence: "The C client library", and a
/// lower-case crate name as code ("`mysql_async`"), which no capital may change.
fn label(driver: Driver) -> String {
    let name = driver.name();
    let mut chars = name.chars();
    match chars.next() {
        Some(_) if driver == Driver::MysqlAsync => format!("`{name}`"),
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// One query per batch of keys: how the driver takes a list of keys.
fn n_plus_one(driver: Driver) -> Option<String> {
    Some(match driver {
        Driver::PyMysql => "`cursor.execute(\"... IN %s\", (tuple(keys),))` sends a batch of keys as one list.",
        Driver::MysqlConnectorPython => "`cursor.execute(\"... IN (\" + \", \".join([\"%s\"] * len(keys)) + \")\", keys)`, one statement per batch of keys.",
        Driver::CLibrary => "one prepared statement with `IN (?, ?, ...)` per batch of keys (`mysql_stmt_prepare`, then `mysql_stmt_bind_param` with one bind per key).",
        Driver::MysqlConnectorJ | Driver::MariadbConnectorJ => "one PreparedStatement with `IN (?, ?, ...)` per batch of keys; with JPA/Hibernate, `JOIN FETCH` or `@BatchSize(size = 500)` on the association.",
        Driver::Mysqlnd => "`$pdo->prepare('... IN (' . implode(',', array_fill(0, count($keys), '?')) . ')')->execute($keys)`; with an ORM, eager loading (Eloquent `with()`, Doctrine `JOIN FETCH`).",
        Driver::Go => "build `IN (?, ?, ...)` for each batch and pass the keys as args (`sqlx.In` expands a slice).",
        Driver::Node => "`connection.query('... IN (?)', [keys])` expands an array into a list (with `query`, not `execute`).",
        Driver::DotNet => "Dapper expands a list (`WHERE id IN @ids`); with plain ADO.NET, one parameter per key.",
        Driver::MysqlAsync => "`conn.exec(format!(\"... IN ({})\", vec![\"?\"; keys.len()].join(\", \")), keys)`, one statement per batch.",
        Driver::Cli => return None,
    }
    .to_owned())
}

/// Many rows per INSERT: how the driver batches.
fn batched_insert(driver: Driver) -> Option<String> {
    Some(match driver {
        Driver::PyMysql => "`cursor.executemany(sql, rows)` rewrites `INSERT ... VALUES (%s, ...)` into multi-row INSERTs.",
        Driver::MysqlConnectorPython => "`cursor.executemany(sql, rows)` rewrites the INSERT into multi-row INSERTs.",
        Driver::CLibrary => "bind arrays of rows to one prepared INSERT (`mysql_stmt_attr_set(stmt, STMT_ATTR_ARRAY_SIZE, &rows)`, MariaDB Connector/C: one bulk command per batch), or build one `INSERT ... VALUES (?, ?), (?, ?), ...` per batch of rows.",
        Driver::MysqlConnectorJ => "`addBatch()` then `executeBatch()`, with `rewriteBatchedStatements=true` in the URL: the driver sends multi-row INSERTs.",
        Driver::MariadbConnectorJ => "`addBatch()` then `executeBatch()`, with `useBulkStmts=true` (one bulk command per batch) or `rewriteBatchedStatements=true` in the URL.",
        Driver::Mysqlnd => "build one `INSERT ... VALUES (?, ?), (?, ?), ...` per batch of rows: PDO and mysqli have no batch call.",
        Driver::Go => "build one `INSERT ... VALUES (?, ?), (?, ?), ...` per batch of rows; `interpolateParams=true` in the DSN also saves the prepare round trips.",
        Driver::Node => "`connection.query('INSERT INTO t (a, b) VALUES ?', [rows])` sends a nested array as one multi-row INSERT; with Sequelize, `Model.bulkCreate(rows)`.",
        Driver::DotNet => "MySqlConnector's `MySqlBulkCopy`, or one multi-row INSERT per batch of rows.",
        // mysql_async's `exec_batch` uses COM_STMT_BULK_EXECUTE when MariaDB offers it, and
        // one COM_STMT_EXECUTE per row (each awaited) on MySQL.
        Driver::MysqlAsync => "`conn.exec_batch(sql, rows)` sends the rows as one bulk command on MariaDB; on MySQL it waits for each row, so there build one multi-row INSERT per batch of rows.",
        Driver::Cli => return None,
    }
    .to_owned())
}

/// Many rows per UPDATE/DELETE: only the batching APIs differ.
fn batched_change(driver: Driver) -> Option<String> {
    Some(match driver {
        Driver::MysqlConnectorJ | Driver::MariadbConnectorJ => "`addBatch()` then `executeBatch()` with `rewriteBatchedStatements=true` sends the batch in one round trip.",
        Driver::PyMysql | Driver::MysqlConnectorPython => "pass the keys of a batch as one list (`WHERE id IN %s` with a tuple).",
        Driver::CLibrary => "bind arrays of keys to one prepared UPDATE or DELETE (`mysql_stmt_attr_set(stmt, STMT_ATTR_ARRAY_SIZE, &rows)`, MariaDB Connector/C): one bulk command per batch.",
        _ => return None,
    }
    .to_owned())
}

/// More rows per cursor fetch.
fn fetch(driver: Driver, size: u64) -> Option<String> {
    Some(match driver {
        Driver::MysqlConnectorJ => format!(
            "`useCursorFetch=true&defaultFetchSize={size}` in the JDBC URL, or `statement.setFetchSize({size})`."
        ),
        Driver::MariadbConnectorJ => {
            format!("`statement.setFetchSize({size})`, or `defaultFetchSize={size}` in the JDBC URL.")
        }
        Driver::CLibrary => format!(
            "`mysql_stmt_attr_set(stmt, STMT_ATTR_PREFETCH_ROWS, &rows)` with rows = {size} before `mysql_stmt_execute`, or no cursor (`STMT_ATTR_CURSOR_TYPE` left at `CURSOR_TYPE_NO_CURSOR`): `mysql_stmt_store_result` then reads the whole result in one round trip."
        ),
        // mysqlnd has no rows-per-fetch setting: `MYSQLI_STMT_ATTR_PREFETCH_ROWS` throws
        // "Not implemented". What it does implement is reading without a cursor.
        Driver::Mysqlnd => "mysqlnd cannot fetch more rows per round trip (`MYSQLI_STMT_ATTR_PREFETCH_ROWS` is not implemented), so leave the statement without a cursor (no `MYSQLI_CURSOR_TYPE_READ_ONLY`; the default is `MYSQLI_CURSOR_TYPE_NO_CURSOR`) and read it with `$stmt->get_result()` or `$stmt->store_result()`, or stream a query with `$mysqli->query($sql, MYSQLI_USE_RESULT)`: the whole result then comes in one round trip.".to_owned(),
        Driver::PyMysql => format!(
            "`pymysql.cursors.SSCursor` with `fetchmany({size})` streams the result without a server-side cursor."
        ),
        _ => return None,
    })
}

/// Fewer round trips that do no work.
fn chatty(driver: Driver) -> Option<String> {
    Some(match driver {
        Driver::MysqlConnectorJ => "`useLocalSessionState=true` and `cacheServerConfiguration=true` in the URL drop the SET and SHOW round trips; in HikariCP leave `connectionTestQuery` unset (JDBC4 `isValid()` validates only idle connections).",
        Driver::MariadbConnectorJ => "in HikariCP leave `connectionTestQuery` unset (JDBC4 `isValid()` validates only idle connections); session variables in `sessionVariables=` of the URL.",
        Driver::PyMysql => "`autocommit=` and `init_command=` in `pymysql.connect()` instead of SETs on each use; with SQLAlchemy, `pool_recycle` rather than `pool_pre_ping`.",
        Driver::MysqlConnectorPython => "`autocommit=` and `init_command=` in `connect()`; with SQLAlchemy, `pool_recycle` rather than `pool_pre_ping`.",
        Driver::CLibrary => "set session variables once per connection with `mysql_optionsv(mysql, MYSQL_INIT_COMMAND, \"SET ...\")` and autocommit with `mysql_autocommit()` only when it changes, and call `mysql_ping()` only on a connection that has been idle.",
        Driver::Mysqlnd => "session variables once in `PDO::MYSQL_ATTR_INIT_COMMAND`, and persistent connections (`PDO::ATTR_PERSISTENT`) to keep them.",
        Driver::Go => "`interpolateParams=true` in the DSN (no prepare and close round trips per query), session variables as DSN parameters, and `db.SetConnMaxIdleTime` rather than pings.",
        Driver::Node => "session variables once per connection (the pool's `connection` event), and `enableKeepAlive` rather than a ping per query.",
        Driver::DotNet => "with MySqlConnector, `Connection Reset=false` when the code needs no fresh session on each `Open()` (a reset per borrow otherwise).",
        Driver::MysqlAsync => "`PoolOpts::with_reset_connection(false)` when no session state leaks between users (a reset per return to the pool otherwise), and session variables in `OptsBuilder::init`.",
        Driver::Cli => return None,
    }
    .to_owned())
}

/// A connection kept and reused instead of one opened per request.
fn pooling(driver: Driver) -> Option<String> {
    Some(match driver {
        Driver::PyMysql => "with SQLAlchemy, one `create_engine(...)` per process pools the connections (`pool_size`, `pool_recycle`); without it, DBUtils' `PooledDB(pymysql, ...)`, or one connection kept per worker instead of `pymysql.connect()` per request.",
        // Each return to the pool resets the session and sets it up again (COM_RESET_CONNECTION,
        // then the charset and autocommit), as many round trips as the login it saves.
        Driver::MysqlConnectorPython => "`mysql.connector.pooling.MySQLConnectionPool(pool_name=..., pool_size=..., pool_reset_session=False)` and `pool.get_connection()` per request (its `close()` returns it to the pool; without `pool_reset_session=False`, each return resets the session, costing as many round trips as a login, so keep the reset only if session state must not pass between requests), or SQLAlchemy's engine pool.",
        Driver::CLibrary => "keep the `MYSQL` handle open between requests (one per worker thread) instead of `mysql_real_connect()` for each, or put a pooler such as ProxySQL beside the application.",
        Driver::MysqlConnectorJ => "a `HikariDataSource` (HikariCP) over the JDBC URL, or the application server's pooled DataSource, with `maximumPoolSize` near the concurrency; `getConnection()`/`close()` then borrow and return.",
        Driver::MariadbConnectorJ => "a `HikariDataSource` (HikariCP), or the driver's own `MariaDbPoolDataSource` (`pool=true&maxPoolSize=10` in the URL); `getConnection()`/`close()` then borrow and return.",
        Driver::Mysqlnd => "PHP cannot share a pool between requests: persistent connections (`PDO::ATTR_PERSISTENT => true`, or mysqli's `p:` host prefix) keep one per PHP-FPM worker; or a pooler beside the application such as ProxySQL.",
        Driver::Go => "`database/sql` pools already: open the `*sql.DB` once and share it (not `sql.Open` per request), and keep idle connections with `db.SetMaxIdleConns(n)` near the concurrency (the default keeps 2) and `db.SetConnMaxIdleTime` rather than closing them.",
        Driver::Node => "`mysql.createPool({...})` once, then `pool.query(...)` or `pool.getConnection()` per request instead of `createConnection` each time.",
        Driver::DotNet => "MySqlConnector and Connector/NET pool by default: keep `Pooling=true` in the connection string and `Open()`/`Dispose()` per use; `Pooling=false` or a new connection string per request defeats the pool.",
        Driver::MysqlAsync => "one `mysql_async::Pool::new(opts)` per process and `pool.get_conn()` per request instead of `Conn::new` each time.",
        Driver::Cli => "a shell loop of `mariadb -e` opens a connection per statement: feed the statements to one `mariadb` process (a file or a here-document).",
    }
    .to_owned())
}
