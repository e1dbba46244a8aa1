//! Every result a client gets through rttscope is the one it gets directly:
//! each workload runs against the server and through the proxy, and the
//! results — values, column metadata, affected rows, errors — must be equal.

use std::net::SocketAddr;

use mysql_async::prelude::*;
use mysql_async::{ChangeUserOpts, Column, Conn, Row, Value, WhiteListFsHandler};
use rttscope_integration_tests::mariadb::{ED25519, NATIVE, OTHER, TestDb, ed25519_login};
use rttscope_integration_tests::proxy::TestProxy;
use rttscope_integration_tests::skip;

/// Where a workload runs: straight at the server, or through rttscope.
fn targets(proxy: &TestProxy) -> [(&'static str, SocketAddr); 2] {
    [("direct", TestDb::shared().upstream_addr()), ("proxy", proxy.addr())]
}

async fn connect(addr: SocketAddr) -> Conn {
    Conn::new(TestDb::shared().opts_via(addr, NATIVE.user, NATIVE.password)).await.expect("connect")
}

/// What a result set amounts to, in comparable form.
#[derive(Debug, PartialEq)]
struct ResultSet {
    columns: Vec<ColumnMeta>,
    rows: Vec<Vec<Value>>,
    affected_rows: u64,
}

#[derive(Debug, PartialEq)]
struct ColumnMeta {
    name: String,
    table: String,
    column_type: String,
    flags: String,
    charset: u16,
    length: u32,
    decimals: u8,
}

fn meta(columns: &[Column]) -> Vec<ColumnMeta> {
    columns
        .iter()
        .map(|c| ColumnMeta {
            name: c.name_str().into_owned(),
            table: c.table_str().into_owned(),
            column_type: format!("{:?}", c.column_type()),
            flags: format!("{:?}", c.flags()),
            charset: c.character_set(),
            length: c.column_length(),
            decimals: c.decimals(),
        })
        .collect()
}

/// Collects every result set of a (possibly multi-result) response.
async fn all_sets<P: Protocol>(mut result: mysql_async::QueryResult<'_, '_, P>) -> Vec<ResultSet> {
    let mut sets = Vec::new();
    loop {
        let columns = meta(result.columns_ref());
        let rows: Vec<Row> = result.collect().await.expect("rows");
        let affected_rows = result.affected_rows();
        sets.push(ResultSet { columns, rows: rows.into_iter().map(Row::unwrap).collect(), affected_rows });
        if result.is_empty() {
            return sets;
        }
    }
}

const TYPES_TABLE: &str = r"
CREATE OR REPLACE TABLE types (
  id INT PRIMARY KEY, ti TINYINT, si SMALLINT UNSIGNED, mi MEDIUMINT, i INT, bi BIGINT UNSIGNED,
  de DECIMAL(30,10), f FLOAT, d DOUBLE, bt BIT(12), c CHAR(10), vc VARCHAR(300), tx TEXT,
  bl BLOB, dt DATE, tm TIME(6), dtm DATETIME(6), ts TIMESTAMP(6) NULL, yr YEAR, js JSON,
  en ENUM('a','b'), st SET('x','y'), u UUID, ip INET6
) DEFAULT CHARSET=utf8mb4";

const TYPES_ROWS: &str = r#"
INSERT INTO types VALUES
 (1, -128, 65535, -8388608, -2147483648, 18446744073709551615, -12345678901234567890.0123456789,
  3.25, -1.5e300, b'101010101010', 'char', 'héllo wörld 🦀 ∑', REPEAT('t', 5000), x'00FF10EE',
  '1000-01-01', '-838:59:59.999999', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.123456',
  2155, '{"k": [1, "two", null]}', 'b', 'x,y', '123e4567-e89b-12d3-a456-426614174000', '::1'),
 (2, 127, 0, 8388607, 2147483647, 0, 0.0000000001, -0.0, 2.2250738585072014e-308, b'0', '', '',
  '', '', '2024-02-29', '00:00:00', '1970-01-01 00:00:01', '1970-01-01 00:00:01', 1901, '[]',
  'a', '', '00000000-0000-0000-0000-000000000000', '::ffff:192.0.2.1'),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"#;

#[tokio::test]
async fn every_column_type_by_text_and_binary_protocol() {
    let proxy = TestProxy::start();
    let mut seen = Vec::new();
    for (name, addr) in targets(&proxy) {
        let mut conn = connect(addr).await;
        conn.query_drop(TYPES_TABLE).await.unwrap();
        conn.query_drop(TYPES_ROWS).await.unwrap();
        let text = all_sets(conn.query_iter("SELECT * FROM types ORDER BY id").await.unwrap()).await;
        let binary =
            all_sets(conn.exec_iter("SELECT * FROM types WHERE id >= ? ORDER BY id", (0,)).await.unwrap()).await;
        // Binary parameters of every kind, round-tripped through the server.
        let echoed: Vec<Row> = conn
            .exec(
                "SELECT ?, ?, ?, ?, ?, ?, ?",
                (
                    i64::MIN,
                    u64::MAX,
                    -1.5f64,
                    "utf8 ✓ 🦀",
                    vec![0u8, 255, 10],
                    Value::NULL,
                    Value::Date(2024, 2, 29, 23, 59, 58, 123456),
                ),
            )
            .await
            .unwrap();
        assert_eq!(text[0].rows.len(), 3, "{name}");
        seen.push((text, binary, echoed.into_iter().map(Row::unwrap).collect::<Vec<_>>()));
        conn.disconnect().await.unwrap();
    }
    assert_eq!(seen[0], seen[1], "direct and proxied results differ");
}

#[tokio::test]
async fn multi_statements_and_multi_result_procedures() {
    let proxy = TestProxy::start();
    let mut seen = Vec::new();
    for (_, addr) in targets(&proxy) {
        let mut conn = connect(addr).await;
        conn.query_drop("CREATE OR REPLACE TABLE multi (a INT)").await.unwrap();
        conn.query_drop(
            "CREATE OR REPLACE PROCEDURE two_sets(IN n INT) BEGIN \
             SELECT n AS a; SELECT 'x' AS b, n * 2 AS c UNION ALL SELECT 'y', n * 3; \
             INSERT INTO multi VALUES (n), (n + 1); END",
        )
        .await
        .unwrap();
        let statements = all_sets(
            conn.query_iter(
                "SELECT 1 AS one; INSERT INTO multi VALUES (1),(2),(3); SELECT a FROM multi ORDER BY a; DO 1",
            )
            .await
            .unwrap(),
        )
        .await;
        let call_text = all_sets(conn.query_iter("CALL two_sets(7)").await.unwrap()).await;
        let call_binary = all_sets(conn.exec_iter("CALL two_sets(?)", (9,)).await.unwrap()).await;
        // An error in the middle of a multi-statement ends the response there.
        let err = conn.query_drop("SELECT 1; SELECT * FROM no_such_table; SELECT 3").await.unwrap_err();
        let still_in_sync: Vec<u8> = conn.query("SELECT 42").await.unwrap();
        seen.push((statements, call_text, call_binary, err.to_string(), still_in_sync));
    }
    // mysql_async folds the trailing DO's OK into the set before it: three sets.
    assert_eq!(seen[0].0.len(), 3, "{:?}", seen[0].0);
    // Two result sets; mysql_async folds the CALL's final OK into the last one.
    assert_eq!(seen[0].1.len(), 2, "{:?}", seen[0].1);
    assert_eq!(seen[0], seen[1]);
}

#[tokio::test]
async fn a_20_mib_row_both_ways() {
    let db = TestDb::shared();
    if db.max_allowed_packet() < 48 << 20 {
        skip(format!("the server's max_allowed_packet ({}) is below 48 MiB", db.max_allowed_packet()));
        return;
    }
    let proxy = TestProxy::start();
    // More than 16 MiB, so the payload spans packets in both directions.
    let blob: Vec<u8> = (0..20 * 1024 * 1024u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    for (name, addr) in targets(&proxy) {
        let mut conn = connect(addr).await;
        conn.query_drop("CREATE OR REPLACE TABLE big_row (id INT PRIMARY KEY, b LONGBLOB)").await.unwrap();
        conn.exec_drop("INSERT INTO big_row VALUES (1, ?)", (blob.clone(),)).await.unwrap();
        let text: Option<Vec<u8>> = conn.query_first("SELECT b FROM big_row WHERE id = 1").await.unwrap();
        let binary: Option<Vec<u8>> = conn.exec_first("SELECT b FROM big_row WHERE id = ?", (1,)).await.unwrap();
        assert!(text.as_ref() == Some(&blob), "{name}: text protocol row differs");
        assert!(binary.as_ref() == Some(&blob), "{name}: binary protocol row differs");
        let after: u8 = conn.query_first("SELECT 7").await.unwrap().unwrap();
        assert_eq!(after, 7);
    }
}

#[tokio::test]
async fn local_infile_upload() {
    let proxy = TestProxy::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rows.tsv");
    let data: String = (0..5000).map(|i| format!("{i}\tname-{i}\n")).collect();
    std::fs::write(&file, data).unwrap();
    let mut seen = Vec::new();
    for (_, addr) in targets(&proxy) {
        let opts = TestDb::shared()
            .opts_via(addr, NATIVE.user, NATIVE.password)
            .local_infile_handler(Some(WhiteListFsHandler::new([file.clone()])));
        let mut conn = Conn::new(opts).await.unwrap();
        conn.query_drop("CREATE OR REPLACE TABLE infile_rows (id INT PRIMARY KEY, name VARCHAR(20))").await.unwrap();
        let sql = format!("LOAD DATA LOCAL INFILE '{}' INTO TABLE infile_rows", file.display());
        let result = conn.query_iter(sql).await.unwrap();
        let affected = result.affected_rows();
        result.drop_result().await.unwrap();
        let summary: Option<(u64, u64, String)> =
            conn.query_first("SELECT COUNT(*), SUM(id), MAX(name) FROM infile_rows").await.unwrap();
        seen.push((affected, summary));
    }
    assert_eq!(seen[0].0, 5000);
    assert_eq!(seen[0], seen[1]);
}

#[tokio::test]
async fn prepared_statements_are_prepared_executed_and_closed() {
    let proxy = TestProxy::start();
    let mut conn = connect(proxy.addr()).await;
    for round in 0..3u32 {
        let stmt = conn.prep("SELECT ? + ?, CONCAT(?, 'x')").await.unwrap();
        for i in 0..20u32 {
            let row: Option<(u64, String)> = conn.exec_first(&stmt, (i, round, "v")).await.unwrap();
            assert_eq!(row, Some((u64::from(i + round), "vx".to_owned())));
        }
        // COM_STMT_CLOSE has no reply: the next command must still line up.
        conn.close(stmt).await.unwrap();
        let n: u32 = conn.query_first("SELECT 5").await.unwrap().unwrap();
        assert_eq!(n, 5);
    }
    conn.ping().await.unwrap();
}

#[tokio::test]
async fn change_user_and_reset_connection() {
    let db = TestDb::shared();
    let proxy = TestProxy::start();
    let mut conn = connect(proxy.addr()).await;
    let current = |c: &str| c.split('@').next().unwrap_or_default().to_owned();

    conn.change_user(
        ChangeUserOpts::default().with_user(Some(OTHER.user.into())).with_pass(Some(OTHER.password.into())),
    )
    .await
    .unwrap();
    let who: String = conn.query_first("SELECT CURRENT_USER()").await.unwrap().unwrap();
    assert_eq!(current(&who), OTHER.user);

    if db.has_ed25519() {
        // The server answers with an auth switch to client_ed25519: a second round trip.
        // A refused change leaves no session; each retry starts from a new connection.
        let mut changed = ed25519_login(|| async {
            let mut conn = Conn::new(db.opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await?;
            let to_ed25519 =
                ChangeUserOpts::default().with_user(Some(ED25519.user.into())).with_pass(Some(ED25519.password.into()));
            conn.change_user(to_ed25519).await.map(|()| conn)
        })
        .await
        .unwrap();
        let who: String = changed.query_first("SELECT CURRENT_USER()").await.unwrap().unwrap();
        assert_eq!(current(&who), ED25519.user);
    }

    conn.query_drop("SET @kept = 5").await.unwrap();
    assert!(conn.reset().await.unwrap(), "COM_RESET_CONNECTION supported");
    let kept: Option<Option<i64>> = conn.query_first("SELECT @kept").await.unwrap();
    assert_eq!(kept, Some(None), "user variables are cleared by COM_RESET_CONNECTION");
}

#[tokio::test]
async fn authentication_outcomes_match_the_server() {
    let db = TestDb::shared();
    let proxy = TestProxy::start();
    let mut outcomes = Vec::new();
    for (_, addr) in targets(&proxy) {
        let wrong = Conn::new(db.opts_via(addr, NATIVE.user, "not-the-password")).await.unwrap_err();
        let unknown = Conn::new(db.opts_via(addr, "nobody_here", "x")).await.unwrap_err();
        let mut ok = Vec::new();
        for account in [NATIVE, OTHER].into_iter().chain(db.has_ed25519().then_some(ED25519)) {
            let mut conn =
                ed25519_login(|| Conn::new(db.opts_via(addr, account.user, account.password))).await.unwrap();
            let who: String = conn.query_first("SELECT CURRENT_USER()").await.unwrap().unwrap();
            ok.push(who);
        }
        let mut conn = connect(addr).await;
        let syntax = conn.query_drop("SELEKT 1").await.unwrap_err();
        let missing = conn.exec_drop("SELECT * FROM no_such_table WHERE id = ?", (1,)).await.unwrap_err();
        outcomes.push((wrong.to_string(), unknown.to_string(), ok, syntax.to_string(), missing.to_string()));
    }
    assert!(outcomes[0].0.contains("1045"), "{}", outcomes[0].0);
    assert_eq!(outcomes[0], outcomes[1]);
}
