//! The parser never costs a connection, replayed with real clients on the two responses that
//! used to throw it off: a CALL whose procedure loops over a cursor and SELECTs inside the
//! loop (its result sets carry SERVER_STATUS_CURSOR_EXISTS, which only an execute's cursor
//! really means), and a prepared statement executed with a server-side cursor whose query
//! fails only when materialised (an ERR where rows were expected). Each client gets what it
//! gets straight from the server, the connection stays usable, and rttscope never loses its
//! place (`rttscope_protocol_desyncs_total` stays 0).

use std::net::SocketAddr;

use rttscope::report::Report;
use rttscope_integration_tests::clients::{self, assert_same, conn_args};
use rttscope_integration_tests::legs::{admin_get, assert_in_step, desyncs, run_cli_ok};
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::TestProxy;

/// `carried.py MODE --table TABLE` as `rtt_native` at `addr`: its stdout.
fn carried(mode: &str, addr: SocketAddr, table: &str) -> String {
    let mut args: Vec<String> = vec![mode.into()];
    args.extend(conn_args(addr, NATIVE));
    args.extend(["--table".into(), table.into()]);
    clients::run_python("carried.py", &args).unwrap_or_else(|e| panic!("{e:#}"))
}

fn report(proxy: &TestProxy) -> Report {
    let body = admin_get(proxy.admin(), "/report").unwrap_or_else(|e| panic!("{e:#}"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("/report: {e}\n{body}"))
}

/// `CALL` of a procedure that loops over a cursor and SELECTs a row each time round (25
/// result sets, then a count, then the CALL's own OK): Connector/Python (twice on one
/// connection) and the mariadb CLI print what they print straight to the server, and
/// rttscope follows every result set.
#[test]
fn call_of_a_procedure_looping_over_a_cursor() {
    let db = TestDb::shared();
    let table = "st_loop";
    let direct = carried("procedure", db.upstream_addr(), table);
    assert!(direct.contains("result sets: 27"), "{direct}");
    let proxy = TestProxy::start();
    let proxied = carried("procedure", proxy.addr(), table);
    assert_same("Connector/Python CALL", &direct, &proxied);

    let cli = |addr: SocketAddr| {
        let mut cmd = db.mariadb_cli(addr, NATIVE.user, NATIVE.password, Some(DB));
        cmd.args(["-e", &format!("CALL {table}_loop(); CALL {table}_loop(); SELECT 'after the CALLs' AS still")]);
        run_cli_ok(cmd, None)
    };
    let direct = cli(db.upstream_addr());
    assert!(direct.contains("name-25") && direct.ends_with("still\nafter the CALLs\n"), "{direct}");
    assert_same("mariadb CLI CALL", &direct, &cli(proxy.addr()));

    assert_eq!(desyncs(proxy.admin()), 0, "rttscope_protocol_desyncs_total");
    assert_in_step(&proxy);
}

/// `SELECT 1 < (SELECT a FROM t)` with two rows in `t`, prepared and executed with a
/// READ_ONLY cursor by Connector/C and by Connector/Python: the server answers the execute
/// with column definitions, then an error (1242, subquery returns more than 1 row). Each
/// client gets that error as it does straight from the server, twice, and its connection
/// answers the next query.
#[test]
fn cursor_whose_query_fails_when_materialised() {
    let db = TestDb::shared();
    let direct = carried("cursor-error", db.upstream_addr(), "st_cursor_error");
    for line in [
        "Connector/C cursor execute 1: rc=1 errno=1242 Subquery returns more than 1 row",
        "Connector/C then: [[(b'still usable', b'1')]]",
        "Connector/Python cursor 1: errno=1242 sqlstate=21000 Subquery returns more than 1 row",
        "Connector/Python then: [('still usable', 1)]",
    ] {
        assert!(direct.contains(line), "no {line:?} in:\n{direct}");
    }
    let proxy = TestProxy::start();
    let proxied = carried("cursor-error", proxy.addr(), "st_cursor_error");
    assert_same("a cursor's error", &direct, &proxied);
    assert_eq!(desyncs(proxy.admin()), 0, "rttscope_protocol_desyncs_total");
    assert_in_step(&proxy);
}

/// Connector/Python runs `CALL` through the binary protocol with MariaDB's execute-direct:
/// COM_STMT_PREPARE and a COM_STMT_EXECUTE naming "the statement just prepared" (id
/// 0xFFFFFFFF) sent together, before the prepare's answer. The report files each CALL, its
/// rows and its round trip under the CALL (a procedure without cursors: two result sets of one
/// row each, so rttscope stays in step).
#[test]
fn execute_direct_is_recorded_under_its_statement() {
    let db = TestDb::shared();
    let table = "st_direct";
    let direct = carried("call-simple", db.upstream_addr(), table);
    let proxy = TestProxy::start();
    let proxied = carried("call-simple", proxy.addr(), table);
    assert_same("Connector/Python CALL", &direct, &proxied);
    assert_in_step(&proxy);
    let wanted = format!("call {table}_two()");
    proxy.wait_for("the connection to close", |a| a.connections().all(|c| c.closed_us.is_some()).then_some(()));
    let r = report(&proxy);
    let strays: Vec<_> = r
        .queries
        .iter()
        .filter(|q| q.fingerprint.starts_with("COM_STMT_") || q.fingerprint.contains("unknown"))
        .collect();
    assert!(strays.is_empty(), "executes not filed under their statement: {strays:#?}");
    let call = r.queries.iter().find(|q| q.fingerprint == wanted);
    let call = call.unwrap_or_else(|| panic!("no {wanted:?} in {:#?}", r.queries));
    assert_eq!((call.count, call.rows.sum, call.commands.get("COM_STMT_EXECUTE")), (2, 4, Some(&2)), "{call:#?}");
}
