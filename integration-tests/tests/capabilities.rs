//! Capabilities rttscope carries instead of masking: the greeting a client reads through
//! rttscope offers what the server's does (TLS as the long hop allows), and a MariaDB bulk
//! insert from Connector/Python (`executemany`, COM_STMT_BULK_EXECUTE) goes through as one
//! command, lands the same rows with the same ids, and is reported as what it is.

use std::net::SocketAddr;

use mysql_async::prelude::*;
use rttscope::findings::Kind;
use rttscope::report::Report;
use rttscope_config::ListenTlsMode;
use rttscope_integration_tests::clients::{self, assert_same, conn_args};
use rttscope_integration_tests::fake_upstream::capture_greeting;
use rttscope_integration_tests::legs::{admin_get, assert_in_step};
use rttscope_integration_tests::mariadb::{NATIVE, TestDb, TlsDb};
use rttscope_integration_tests::proxy::{TestProxy, proxy_to};

const CLIENT_SSL: u64 = 1 << 11;
const MARIADB_CLIENT_STMT_BULK_OPERATIONS: u64 = 1 << 34;

/// What a `HandshakeV10` says, less what differs between two connections (the connection
/// id and the auth nonce).
#[derive(Debug, PartialEq, Eq)]
struct Greeting {
    version: String,
    /// All 64 bits: the lower 32 of the protocol, MariaDB's extended 32 above.
    capabilities: u64,
    charset: u8,
    status: u16,
    auth_data_len: u8,
    auth_plugin: String,
}

impl Greeting {
    fn read(addr: SocketAddr) -> Greeting {
        let packet = capture_greeting(addr).unwrap_or_else(|e| panic!("greeting from {addr}: {e}"));
        let p = &packet[4..];
        assert_eq!(p[0], 10, "a HandshakeV10: {p:?}");
        let version_end = 1 + p[1..].iter().position(|&b| b == 0).expect("a version");
        // version NUL, connection id (4), nonce part 1 (8), filler (1).
        let at = version_end + 1 + 4 + 8 + 1;
        let u16_at = |i: usize| u16::from_le_bytes([p[i], p[i + 1]]);
        let (low, charset, status, high) = (u16_at(at), p[at + 2], u16_at(at + 3), u16_at(at + 5));
        let auth_data_len = p[at + 7];
        // Six reserved bytes, then MariaDB's extended capabilities (the server is not MySQL:
        // CLIENT_MYSQL, bit 0, is clear).
        let ext = u32::from_le_bytes(p[at + 14..at + 18].try_into().unwrap());
        let nonce2 = (auth_data_len as usize).saturating_sub(8).max(13);
        let plugin = &p[at + 18 + nonce2..];
        Greeting {
            version: String::from_utf8_lossy(&p[1..version_end]).into_owned(),
            capabilities: u64::from(low) | u64::from(high) << 16 | u64::from(ext) << 32,
            charset,
            status,
            auth_data_len,
            auth_plugin: String::from_utf8_lossy(plugin.strip_suffix(&[0]).unwrap_or(plugin)).into_owned(),
        }
    }
}

/// The greeting a client reads through rttscope is the server's, capability for capability
/// (MariaDB's extended ones included: bulk operations, progress, metadata caching), in front
/// of a server with TLS and one without; rttscope changes `CLIENT_SSL` alone, and only when
/// its TLS settings say so.
#[test]
fn the_greeting_through_rttscope_offers_what_the_server_offers() {
    for db in [TestDb::shared(), &**TlsDb::shared()] {
        let direct = Greeting::read(db.upstream_addr());
        assert!(direct.capabilities & MARIADB_CLIENT_STMT_BULK_OPERATIONS != 0, "{direct:?}");
        let proxy = proxy_to(db.upstream_addr(), |_| {});
        assert_eq!(Greeting::read(proxy.addr()), direct, "through rttscope with its defaults");

        // TLS towards clients off: everything the same but CLIENT_SSL.
        let off = proxy_to(db.upstream_addr(), |c| c.listen.tls.mode = ListenTlsMode::Off);
        let through = Greeting::read(off.addr());
        assert_eq!(through.capabilities, direct.capabilities & !CLIENT_SSL, "listen.tls.mode: off");
        // TLS required of clients: CLIENT_SSL offered whatever the server does.
        let required = proxy_to(db.upstream_addr(), |c| c.listen.tls.mode = ListenTlsMode::Required);
        let through = Greeting::read(required.addr());
        assert_eq!(through.capabilities, direct.capabilities | CLIENT_SSL, "listen.tls.mode: required");
    }
    // The two servers differ in CLIENT_SSL, so the loop saw it carried both ways.
    let (plain, tls) =
        (Greeting::read(TestDb::shared().upstream_addr()), Greeting::read(TlsDb::shared().upstream_addr()));
    assert_eq!((plain.capabilities & CLIENT_SSL, tls.capabilities & CLIENT_SSL), (0, CLIENT_SSL));
}

/// `carried.py bulk` (Connector/Python `executemany` of 1,000 rows) at `addr`.
fn bulk(addr: SocketAddr, table: &str) -> String {
    let mut args: Vec<String> = vec!["bulk".into()];
    args.extend(conn_args(addr, NATIVE));
    args.extend(["--table".into(), table.into()]);
    clients::run_python("carried.py", &args).unwrap_or_else(|e| panic!("{e:#}"))
}

/// A report that includes everything recorded before it was asked for, findings too: once
/// every connection the aggregates know has closed, a marker query's record comes in a batch
/// after theirs, so when the aggregates show it the findings engine has seen the rest.
async fn settled_report(proxy: &TestProxy, marker: &str) -> Report {
    proxy.wait_for("the client connections to close", |a| {
        let conns: Vec<_> = a.connections().collect();
        (!conns.is_empty() && conns.iter().all(|c| c.closed_us.is_some())).then_some(())
    });
    let db = TestDb::shared();
    let mut conn = mysql_async::Conn::new(db.opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await.unwrap();
    let _: Option<u8> = conn.query_first(format!("SELECT 1 AS {marker}")).await.unwrap();
    conn.disconnect().await.unwrap();
    proxy.wait_for(marker, |a| a.queries().iter().any(|q| q.text.contains(marker)).then_some(()));
    let admin = proxy.admin();
    let body = tokio::task::spawn_blocking(move || admin_get(admin, "/report")).await.unwrap().unwrap();
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("/report: {e}\n{body}"))
}

/// Connector/Python's `executemany` sends one COM_STMT_BULK_EXECUTE through rttscope as it
/// does straight to the server (the server counts one execute for 1,000 rows), the rows land
/// with the same auto-increment ids, and the report records one bulk command of the INSERT,
/// one round trip, and no `repeated_write` loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executemany_is_one_bulk_command_through_rttscope() {
    let db = TestDb::shared();
    let direct = tokio::task::spawn_blocking(move || bulk(db.upstream_addr(), "cap_bulk")).await.unwrap();
    let proxy = proxy_to(db.upstream_addr(), |_| {});
    let addr = proxy.addr();
    let proxied = tokio::task::spawn_blocking(move || bulk(addr, "cap_bulk")).await.unwrap();
    assert_same("executemany", &direct, &proxied);
    for line in ["COM_STMT_EXECUTE for the batch: 1\n", "rows=1000 ids=1..1000\n", "all rows as sent: True"] {
        assert!(proxied.contains(line), "no {line:?} in:\n{proxied}");
    }

    let report = settled_report(&proxy, "cap_bulk_settled").await;
    let loops: Vec<_> = report.findings.iter().filter(|f| f.kind == Kind::RepeatedWrite).collect();
    assert!(loops.is_empty(), "{loops:#?}");
    assert_in_step(&proxy);
    let insert = report.queries.iter().find(|q| q.fingerprint.starts_with("insert into cap_bulk"));
    let insert = insert.unwrap_or_else(|| panic!("no insert in {:#?}", report.queries));
    let unattributed = report.queries.iter().find(|q| q.fingerprint == "COM_STMT_BULK_EXECUTE");
    assert!(unattributed.is_none(), "a bulk execute not attributed to its statement: {unattributed:#?}");
    assert_eq!(insert.commands.get("COM_STMT_BULK_EXECUTE"), Some(&1), "{insert:#?}");
    assert_eq!(insert.commands.get("COM_STMT_EXECUTE"), None, "{insert:#?}");
    // Connector/Python sends the prepare and the bulk execute together (execute_direct):
    // the whole batch is one round trip.
    assert_eq!(insert.round_trips, 1, "{insert:#?}");
}
