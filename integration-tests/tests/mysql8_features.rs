//! MySQL's protocol features beyond MariaDB's, through rttscope in front of the MySQL-8-style
//! server (`integration-tests/python/mysql8_server.py`, the features in `mysql8_protocol.py`
//! written from MySQL's protocol documentation), by MySQL's own clients: libmysqlclient 9.1
//! (the C library inside mysql-connector-python's wheel, driven through ctypes), Connector/Python
//! and PyMySQL (`integration-tests/python/mysql8_features.py`).
//!
//! Each scenario runs directly and through rttscope and must print the same; then what rttscope
//! recorded is checked: every statement under its fingerprint with its rows and round trips,
//! none unparsed.

use anyhow::Result;
use rttscope::findings::Kind;
use rttscope_integration_tests::mysql8::{Mode, Mysql8Server, NATIVE, SHA2, SHA256, features};
use rttscope_integration_tests::proxy::{TestProxy, proxy_to};

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// A server without TLS (the legs' TLS is mysql8_auth.rs's business) and rttscope in front.
fn server_and_proxy() -> Option<(Mysql8Server, TestProxy)> {
    match Mysql8Server::start(Mode::default()) {
        Ok(server) => {
            let proxy = proxy_to(server.addr(), |_| {});
            Some((server, proxy))
        }
        Err(e) => {
            rttscope_integration_tests::skip(format!("no MySQL-8-style server: {e:#}"));
            None
        }
    }
}

/// The account a scenario logs in as: caching_sha2_password (libmysqlclient 9 has no
/// mysql_native_password built in); Connector/Python's pure-Python client does no RSA key
/// exchange, so it logs in with mysql_native_password, the auth not being what it tests.
fn account(scenario: &str) -> &'static str {
    if scenario.starts_with("connector-") { NATIVE } else { SHA2 }
}

/// `scenario` directly and through rttscope: the same lines either way, returned.
fn same_both_ways(server: &Mysql8Server, proxy: &TestProxy, scenario: &str, args: &[&str]) -> Result<Vec<String>> {
    let direct = features(server.addr(), account(scenario), scenario, args)?;
    let proxied = features(proxy.addr(), account(scenario), scenario, args)?;
    assert_eq!(proxied, direct, "{scenario} {args:?}: through rttscope as directly");
    Ok(proxied)
}

/// What rttscope recorded for the statement `text` once it has `count` executions:
/// (executions, round trips, rows, unparsed).
fn recorded(proxy: &TestProxy, text: &str, count: u64) -> (u64, u64, u64, u64) {
    proxy.wait_for(text, |a| {
        let q = a.queries().into_iter().find(|q| q.text.as_ref() == text && q.count >= count)?;
        Some((q.count, q.round_trips, q.rows_sum, q.unparsed))
    })
}

/// The compression lines the server logged (one per compressed login).
fn compressions(server: &Mysql8Server) -> Vec<String> {
    server.take_log().into_iter().filter(|l| l.starts_with("compression ")).collect()
}

const ITEMS: &str = "select id, name from items";
const ONE_ITEM: &str = "select id, name from items where id = ?";

/// zstd at the level the client asked for (7, not MySQL's default 3) and zlib: the long hop
/// mirrors the client's algorithm and level, results are the same, and every statement is
/// recorded from the compressed streams.
#[test]
fn zstd_with_its_level_and_zlib_reach_the_server_as_the_client_asked() -> Result<()> {
    let Some((server, proxy)) = server_and_proxy() else { return Ok(()) };
    server.take_log();
    let lines = same_both_ways(&server, &proxy, "libmysql-zstd", &["7"])?;
    assert!(lines[0].starts_with("items: (2, [('1', 'item-1'), "), "{lines:?}");
    assert_eq!(compressions(&server), ["compression zstd 7", "compression zstd 7"], "direct, then the long hop");
    same_both_ways(&server, &proxy, "libmysql-zlib", &[])?;
    assert_eq!(compressions(&server), ["compression zlib 6", "compression zlib 6"]);
    // Per run: all 20 rows once; one row, then none.
    assert_eq!(recorded(&proxy, ITEMS, 2), (2, 2, 40, 0));
    assert_eq!(recorded(&proxy, ONE_ITEM, 4), (4, 4, 2, 0));
    Ok(())
}

/// CLIENT_OPTIONAL_RESULTSET_METADATA with `resultset_metadata = NONE`: result sets without
/// column definitions (the client gets no field list) are followed to their end.
#[test]
fn results_without_metadata_are_followed_to_their_end() -> Result<()> {
    let Some((server, proxy)) = server_and_proxy() else { return Ok(()) };
    let lines = same_both_ways(&server, &proxy, "libmysql-metadata", &[])?;
    // Before: names (2 columns); after NONE: no metadata at all (None); then FULL again.
    assert!(lines[0].starts_with("items: (2, "), "{lines:?}");
    assert!(lines[4].starts_with("items: (None, [('1', 'item-1'), "), "{lines:?}");
    assert_eq!(lines[5], "one: (None, [('7', 'item-7')])");
    assert!(lines[8].starts_with("items again: (2, "), "{lines:?}");
    assert_eq!(recorded(&proxy, ITEMS, 3), (3, 3, 60, 0));
    assert_eq!(recorded(&proxy, ONE_ITEM, 4), (4, 4, 2, 0));
    Ok(())
}

/// CLIENT_SESSION_TRACK: OK packets carrying a system variable, the schema, GTIDs and the
/// state-change flag reach the client as the server sent them; the writes are recorded.
#[test]
fn session_state_in_ok_packets_reaches_the_client() -> Result<()> {
    let Some((server, proxy)) = server_and_proxy() else { return Ok(()) };
    let lines = same_both_ways(&server, &proxy, "libmysql-session-track", &[])?;
    let gtid = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    assert_eq!(
        lines,
        [
            "SET SESSION time_zone = '+01:00': None variables=time_zone,+01:00 state=1".to_owned(),
            "USE shop: None schema=shop state=1".to_owned(),
            format!("INSERT INTO items VALUES (21, 'x'): None state=1 gtids={gtid}:1-1"),
            "SELECT id, name FROM items WHERE id = 3: (2, [('3', 'item-3')]) none".to_owned(),
            format!("INSERT INTO items VALUES (22, 'y'): None state=1 gtids={gtid}:1-2"),
        ]
    );
    assert_eq!(recorded(&proxy, "insert into items values(?+)", 2), (2, 2, 0, 0));
    assert_eq!(recorded(&proxy, ONE_ITEM, 1), (1, 1, 1, 0));
    Ok(())
}

/// COM_RESET_CONNECTION and COM_CHANGE_USER (to a sha256_password account, full
/// authentication with the server's key on plain legs) by libmysqlclient.
#[test]
fn reset_connection_and_change_user_by_libmysqlclient() -> Result<()> {
    let Some((server, proxy)) = server_and_proxy() else { return Ok(()) };
    let lines = same_both_ways(&server, &proxy, "libmysql-reset", &[])?;
    assert_eq!(lines, ["before: (1, [('u_sha2 plain',)])", "reset: 0", "after: (1, [('u_sha2 plain',)])"]);
    let lines = same_both_ways(&server, &proxy, "libmysql-change-user", &[SHA256])?;
    assert_eq!(lines, ["change: ok", "who: (1, [('u_sha256 plain',)])"]);
    assert_eq!(recorded(&proxy, "COM_RESET_CONNECTION", 1).3, 0);
    Ok(())
}

/// Both result shapes: PyMySQL without CLIENT_DEPRECATE_EOF (EOF packets after the columns
/// and the rows), libmysqlclient with it (an OK with the EOF header ends the rows).
#[test]
fn results_with_and_without_eof_packets() -> Result<()> {
    let Some((server, proxy)) = server_and_proxy() else { return Ok(()) };
    let eof = same_both_ways(&server, &proxy, "pymysql-rows", &[])?;
    assert_eq!(eof[1], "one: (2, [(7, 'item-7')])");
    assert_eq!(recorded(&proxy, ITEMS, 1), (1, 1, 20, 0));
    same_both_ways(&server, &proxy, "libmysql-zlib", &[])?;
    assert_eq!(recorded(&proxy, ITEMS, 2), (2, 2, 40, 0));
    assert_eq!(recorded(&proxy, ONE_ITEM, 4), (4, 4, 2, 0));
    Ok(())
}

/// Query attributes (CLIENT_QUERY_ATTRIBUTES) from Connector/Python's
/// `cursor.add_attribute()`, pure Python and C extension: the server reads them as sent; and
/// a loop over a pool of four connections whose statements carry one `traceparent` attribute
/// is one N+1 finding with that trace, its fingerprint free of the attributes.
#[test]
fn query_attributes_reach_the_server_and_traceparent_scopes_a_loop() -> Result<()> {
    let Some((server, proxy)) = server_and_proxy() else { return Ok(()) };
    let lines = same_both_ways(&server, &proxy, "connector-attributes", &[TRACEPARENT])?;
    assert_eq!(lines[0], format!("pure traceparent: [('{TRACEPARENT}',)]"));
    assert_eq!(lines[3], "c n: [(7,)]");
    features(proxy.addr(), NATIVE, "connector-traced-loop", &[TRACEPARENT])?;
    let by_id = "select name from items where id = ?";
    assert_eq!(recorded(&proxy, by_id, 20), (20, 20, 20, 0));
    let report = proxy.state().report();
    let loops: Vec<_> = report.findings.iter().filter(|f| f.kind == Kind::NPlusOne).collect();
    assert_eq!(loops.len(), 1, "{:#?}", report.findings);
    assert_eq!(loops[0].evidence.trace_id.as_deref(), Some("0af7651916cd43dd8448eb211c80319c"));
    assert_eq!(loops[0].evidence.connections.len(), 4);
    assert!(report.queries.iter().all(|q| !q.fingerprint.contains("traceparent")));
    Ok(())
}
