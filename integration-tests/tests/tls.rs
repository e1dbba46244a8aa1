//! TLS on each leg, end to end, with real clients against a private MariaDB that speaks TLS
//! ([`TlsDb`]): rttscope terminates the client's TLS with its own certificate and speaks TLS
//! of its own to the server. Each leg is read from the side that knows it: the client's
//! (the CLI's `status`, a driver's TLS version, a certificate check that fails against the
//! wrong CA), the server's (`Ssl_version`: the long hop), and rttscope's (`/connections`,
//! `/metrics`). Where a result can differ, it is compared with the same client straight to
//! the server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{ChangeUserOpts, Conn, OptsBuilder, ServerError, SslOpts};
use rttscope_config::{Config, ListenTlsMode, UpstreamTlsMode};
use rttscope_integration_tests::clients::{self, assert_same, conn_args};
use rttscope_integration_tests::fake_upstream::{com_query, native_login, read_packet, read_result, read_until_closed};
use rttscope_integration_tests::legs::{
    CliView, admin_get, assert_in_step, connections, logins, run_cli, run_cli_ok, status_value,
};
use rttscope_integration_tests::mariadb::{
    Account, DB, TLS_ED25519, TLS_NATIVE, TLS_PLAIN, TLS_X509, TestDb, TlsDb, ed25519_login,
};
use rttscope_integration_tests::proxy::{TestProxy, proxy_to};

/// A client call that takes longer failed.
const NO_HANG: Duration = Duration::from_secs(60);

fn db() -> &'static TlsDb {
    TlsDb::shared()
}

/// rttscope in front of the TLS server.
fn proxy(configure: impl FnOnce(&mut Config)) -> TestProxy {
    proxy_to(db().upstream_addr(), configure)
}

/// The `mariadb` CLI as `account` at `addr` with TLS options `tls`, running `sql` (`-N -e`).
fn cli(addr: SocketAddr, account: Account, tls: &[&str], sql: &str) -> std::process::Command {
    let mut cmd = db().mariadb_cli_tls(addr, account.user, account.password, Some(DB), tls);
    cmd.args(["-N", "-e", sql]);
    cmd
}

/// Like [`cli`], run to the end; the client must succeed. Its stdout.
fn cli_ok(addr: SocketAddr, account: Account, tls: &[&str], sql: &str) -> String {
    run_cli_ok(cli(addr, account, tls, sql), None)
}

/// Like [`cli`], and the client must fail: its stderr.
fn cli_fails(addr: SocketAddr, account: Account, tls: &[&str], sql: &str) -> String {
    let out = run_cli(cli(addr, account, tls, sql), None);
    assert!(!out.status.success(), "the client succeeded:\n{}", out.stdout);
    out.stderr
}

/// The server's view of the connection (its `Ssl_version`) and the client's own (`status`),
/// from one connection.
fn both_views(addr: SocketAddr, account: Account, tls: &[&str]) -> (String, CliView) {
    let out = cli_ok(addr, account, tls, "SHOW STATUS LIKE 'Ssl_version'; \\s");
    (status_value(&out, "Ssl_version"), CliView::parse(&out))
}

/// rttscope's generated CA, as its admin API serves it, in a file.
fn rttscope_ca(proxy: &TestProxy, dir: &tempfile::TempDir) -> PathBuf {
    let pem = admin_get(proxy.admin(), "/tls/ca.pem").unwrap_or_else(|e| panic!("{e:#}"));
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
    let path = dir.path().join("rttscope-ca.pem");
    std::fs::write(&path, pem).unwrap();
    path
}

fn assert_tls_version(version: &str) {
    assert!(version.starts_with("TLSv1."), "not a TLS version: {version:?}");
}

// ---- The mariadb CLI ---------------------------------------------------------------------

const WORKLOAD: &str = "SELECT CURRENT_USER(); SHOW STATUS LIKE 'Ssl_version'; \
    SELECT seq, SHA2(seq, 256), REPEAT(CHAR(65 + seq % 26), seq % 600) FROM seq_1_to_6000; \
    SELECT COUNT(*), MD5(GROUP_CONCAT(SHA2(seq, 512) ORDER BY seq)) FROM seq_1_to_3000";

/// `--ssl` through rttscope: the same output as straight to the server, TLS on the client's
/// leg (the CLI's own status names a cipher) and on the long hop (the server's Ssl_version).
#[test]
fn cli_with_tls_matches_direct_and_both_legs_are_tls() {
    let proxy = proxy(|_| {});
    let direct = cli_ok(db().upstream_addr(), TLS_NATIVE, &["--ssl"], WORKLOAD);
    let proxied = cli_ok(proxy.addr(), TLS_NATIVE, &["--ssl"], WORKLOAD);
    assert_same("mariadb --ssl", &direct, &proxied);
    assert!(proxied.starts_with("tls_native@%\n"), "{}", &proxied[..200.min(proxied.len())]);
    assert_in_step(&proxy);

    let (server, client) = both_views(proxy.addr(), TLS_NATIVE, &["--ssl"]);
    assert_tls_version(&server);
    assert!(client.tls_cipher.is_some(), "the client's leg is not TLS: {client:?}");
}

/// A client that speaks plain SQL to rttscope still logs in to a REQUIRE SSL account: the
/// long hop is TLS whatever the client does. Straight to the server it is refused.
#[test]
fn plain_client_gets_tls_on_the_long_hop() {
    let plain = ["--skip-ssl"];
    let refused = cli_fails(db().upstream_addr(), TLS_NATIVE, &plain, "SELECT 1");
    assert!(refused.contains("ERROR 1045"), "{refused}");

    let proxy = proxy(|_| {});
    let (server, client) = both_views(proxy.addr(), TLS_NATIVE, &plain);
    assert_tls_version(&server);
    assert_eq!(client.tls_cipher, None, "the client asked for no TLS");

    // With a plain long hop, the server refuses the login as it refused the direct one.
    let plain_hop = proxy_to(db().upstream_addr(), |c| c.upstream.tls.mode = UpstreamTlsMode::Disabled);
    let refused = cli_fails(plain_hop.addr(), TLS_NATIVE, &plain, "SELECT 1");
    assert!(refused.contains("ERROR 1045"), "{refused}");
}

/// A client that verifies rttscope's certificate (`--ssl-verify-server-cert`) with the CA
/// rttscope serves at `/tls/ca.pem` connects; with a CA that did not sign it, it refuses.
#[test]
fn cli_verifies_rttscope_with_the_ca_it_serves() {
    let proxy = proxy(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let ca = format!("--ssl-ca={}", rttscope_ca(&proxy, &dir).display());
    let verify = ["--ssl-verify-server-cert", ca.as_str()];
    let (server, client) = both_views(proxy.addr(), TLS_NATIVE, &verify);
    assert_tls_version(&server);
    assert!(client.tls_cipher.is_some(), "{client:?}");

    // The server's CA did not sign rttscope's certificate.
    let wrong = format!("--ssl-ca={}", db().certs().ca.display());
    let refused = cli_fails(proxy.addr(), TLS_NATIVE, &["--ssl-verify-server-cert", &wrong], "SELECT 1");
    assert!(refused.contains("ERROR 2026"), "not a TLS error: {refused}");
}

// ---- mysql_async (rustls) ----------------------------------------------------------------

/// TLS that trusts only `ca_pem`.
fn trusting(ca_pem: &[u8]) -> SslOpts {
    SslOpts::default().with_root_certs(vec![ca_pem.to_vec().into()]).with_disable_built_in_roots(true)
}

fn opts(addr: SocketAddr, account: Account, tls: Option<SslOpts>) -> OptsBuilder {
    db().opts_via(addr, account.user, account.password).ssl_opts(tls)
}

async fn connect(opts: OptsBuilder) -> Result<Conn, mysql_async::Error> {
    tokio::time::timeout(NO_HANG, Conn::new(opts)).await.expect("connecting hung")
}

async fn query_first(conn: &mut Conn, sql: &str) -> String {
    let row: Option<String> = tokio::time::timeout(NO_HANG, conn.query_first(sql)).await.expect("hung").unwrap();
    row.unwrap_or_else(|| panic!("{sql}: no row"))
}

/// The server's view of a connection: `(Ssl_version, Ssl_cipher)`.
async fn server_tls(conn: &mut Conn) -> (String, String) {
    let version = query_first(
        conn,
        "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'SSL_VERSION'",
    )
    .await;
    let cipher = query_first(
        conn,
        "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'SSL_CIPHER'",
    )
    .await;
    (version, cipher)
}

/// The ERR a login got from rttscope.
async fn login_error(opts: OptsBuilder) -> ServerError {
    match connect(opts).await {
        Err(mysql_async::Error::Server(e)) => e,
        Err(other) => panic!("not an ERR packet: {other:?}"),
        Ok(_) => panic!("the login succeeded"),
    }
}

/// mysql_async over rustls, verifying rttscope's certificate against the CA from
/// `/tls/ca.pem`: it connects and the server sees TLS; trusting the server's CA instead, the
/// TLS handshake with rttscope fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_async_verifies_rttscope_and_the_long_hop_is_tls() {
    let proxy = proxy(|_| {});
    let ca = admin_get(proxy.admin(), "/tls/ca.pem").unwrap();
    let mut conn = connect(opts(proxy.addr(), TLS_NATIVE, Some(trusting(ca.as_bytes())))).await.unwrap();
    assert_eq!(query_first(&mut conn, "SELECT CURRENT_USER()").await, "tls_native@%");
    assert_tls_version(&server_tls(&mut conn).await.0);
    conn.disconnect().await.unwrap();

    let server_ca = std::fs::read(&db().certs().ca).unwrap();
    match connect(opts(proxy.addr(), TLS_NATIVE, Some(trusting(&server_ca)))).await {
        Err(mysql_async::Error::Server(e)) => panic!("a login error, not a TLS one: {e}"),
        Err(e) => assert!(format!("{e}").to_lowercase().contains("certificate"), "{e}"),
        Ok(_) => panic!("connected trusting a CA that did not sign rttscope's certificate"),
    }
}

/// Auth over TLS on both legs, relayed as it is: client_ed25519 after an auth switch (the
/// client starts with mysql_native_password, as the server's greeting names it), then
/// COM_CHANGE_USER from one REQUIRE SSL account to another (with the switch again) and back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ed25519_and_change_user_over_tls_on_both_legs() {
    let proxy = proxy(|_| {});
    let ca = admin_get(proxy.admin(), "/tls/ca.pem").unwrap();
    let tls = trusting(ca.as_bytes());
    let mut conn = ed25519_login(|| connect(opts(proxy.addr(), TLS_ED25519, Some(tls.clone())))).await.unwrap();
    assert_eq!(query_first(&mut conn, "SELECT CURRENT_USER()").await, "tls_ed25519@%");

    // A refused change leaves no session; each retry starts from a new connection.
    let mut conn = ed25519_login(|| async {
        let mut conn = connect(opts(proxy.addr(), TLS_NATIVE, Some(tls.clone()))).await?;
        let change = ChangeUserOpts::default()
            .with_user(Some(TLS_ED25519.user.into()))
            .with_pass(Some(TLS_ED25519.password.into()));
        tokio::time::timeout(NO_HANG, conn.change_user(change)).await.expect("hung").map(|()| conn)
    })
    .await
    .unwrap();
    assert_eq!(query_first(&mut conn, "SELECT CURRENT_USER()").await, format!("{}@%", TLS_ED25519.user));
    assert_tls_version(&server_tls(&mut conn).await.0);
    let back =
        ChangeUserOpts::default().with_user(Some(TLS_NATIVE.user.into())).with_pass(Some(TLS_NATIVE.password.into()));
    tokio::time::timeout(NO_HANG, conn.change_user(back)).await.expect("hung").unwrap();
    assert_eq!(query_first(&mut conn, "SELECT CURRENT_USER()").await, format!("{}@%", TLS_NATIVE.user));
    assert_tls_version(&server_tls(&mut conn).await.0);
    let changes: Option<String> = conn.query_first("SELECT 'still usable'").await.unwrap();
    assert_eq!(changes.as_deref(), Some("still usable"));
    conn.disconnect().await.unwrap();
}

/// The same through the CLI: it asks for mysql_native_password and is switched to
/// client_ed25519 by the server, all inside TLS on both legs.
#[test]
fn cli_ed25519_auth_switch_over_tls() {
    let proxy = proxy(|_| {});
    let out =
        cli_ok(proxy.addr(), TLS_ED25519, &["--ssl"], "SELECT CURRENT_USER(); SHOW STATUS LIKE 'Ssl_version'; \\s");
    assert!(out.starts_with("tls_ed25519@%\n"), "{out}");
    assert_tls_version(&status_value(&out, "Ssl_version"));
    assert!(CliView::parse(&out).tls_cipher.is_some());
}

// ---- Python drivers ----------------------------------------------------------------------

/// `integration-tests/python/legs.py MODE` as `account` at `addr`, with `extra` options.
fn try_legs_py(mode: &str, addr: SocketAddr, account: Account, extra: &[&str]) -> anyhow::Result<String> {
    let mut args: Vec<String> = vec![mode.into()];
    args.extend(conn_args(addr, account));
    args.extend(extra.iter().map(|s| s.to_string()));
    clients::run_python("legs.py", &args)
}

/// Like [`try_legs_py`]; the script must succeed. Its stdout.
fn legs_py(mode: &str, addr: SocketAddr, account: Account, extra: &[&str]) -> String {
    try_legs_py(mode, addr, account, extra).unwrap_or_else(|e| panic!("{e:#}"))
}

/// PyMySQL with `ssl={"ca": ...}` (it verifies the certificate and the name): straight to the
/// server trusting the test CA, through rttscope trusting rttscope's; the same transcript.
/// Without TLS it still logs in to a REQUIRE SSL account through rttscope.
#[test]
fn pymysql_with_tls_matches_direct() {
    let proxy = proxy(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let ours = rttscope_ca(&proxy, &dir);
    let server_ca = db().certs().ca.to_string_lossy().into_owned();
    let direct = legs_py("pymysql", db().upstream_addr(), TLS_NATIVE, &["--ssl-ca", &server_ca]);
    let proxied = legs_py("pymysql", proxy.addr(), TLS_NATIVE, &["--ssl-ca", &ours.to_string_lossy()]);
    assert_same("PyMySQL ssl={ca}", &direct, &proxied);
    assert_in_step(&proxy);
    for line in ["client tls=TLSv1.", "server Ssl_version=TLSv1.", "current_user=tls_native@%"] {
        assert!(proxied.contains(line), "no {line:?} in:\n{proxied}");
    }

    let plain = legs_py("pymysql", proxy.addr(), TLS_NATIVE, &[]);
    for line in ["client tls=-", "server Ssl_version=TLSv1.", "current_user=tls_native@%"] {
        assert!(plain.contains(line), "no {line:?} in:\n{plain}");
    }
}

/// MariaDB Connector/Python with `ssl=True`, then verifying with `ssl_ca` +
/// `ssl_verify_cert`, and COM_CHANGE_USER (`conn.change_user`) to the ed25519 account over
/// TLS: the same transcript as straight to the server.
#[test]
fn connector_python_with_tls_matches_direct() {
    let proxy = proxy(|_| {});
    let change = format!("--change-user={}:{}", TLS_ED25519.user, TLS_ED25519.password);
    let direct = legs_py("connector", db().upstream_addr(), TLS_NATIVE, &["--ssl", &change]);
    let proxied = legs_py("connector", proxy.addr(), TLS_NATIVE, &["--ssl", &change]);
    assert_same("Connector/Python ssl=True", &direct, &proxied);
    assert_in_step(&proxy);
    for line in ["client tls=TLSv1.", "server Ssl_version=TLSv1.", "current_user=tls_ed25519@%"] {
        assert!(proxied.contains(line), "no {line:?} in:\n{proxied}");
    }

    let dir = tempfile::tempdir().unwrap();
    let ours = rttscope_ca(&proxy, &dir);
    let verified = legs_py("connector", proxy.addr(), TLS_NATIVE, &["--ssl-ca", &ours.to_string_lossy()]);
    assert!(verified.contains("client tls=TLSv1."), "{verified}");
    let server_ca = db().certs().ca.to_string_lossy().into_owned();
    let wrong = try_legs_py("connector", proxy.addr(), TLS_NATIVE, &["--ssl-ca", &server_ca])
        .expect_err("Connector/Python trusted rttscope's certificate with the wrong CA");
    assert!(format!("{wrong:#}").contains("certificate"), "{wrong:#}");
}

// ---- The long hop's TLS, as upstream.tls says ------------------------------------------

/// `verify-identity` with the test CA: the server's certificate names 127.0.0.1, so it
/// works; told to expect another name, rttscope refuses with an ERR that names the upstream
/// and the reason. `verify-ca` ignores the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_identity_checks_the_name_and_verify_ca_does_not() {
    let upstream = db().upstream_addr();
    let verify = |mode, name: Option<&str>| {
        let name = name.map(str::to_owned);
        proxy(move |c| {
            c.upstream.tls.mode = mode;
            c.upstream.tls.ca = Some(db().certs().ca.clone());
            c.upstream.tls.server_name = name;
        })
    };
    let good = verify(UpstreamTlsMode::VerifyIdentity, None);
    let mut conn = connect(opts(good.addr(), TLS_NATIVE, None)).await.unwrap();
    assert_tls_version(&server_tls(&mut conn).await.0);
    conn.disconnect().await.unwrap();

    let wrong_name = verify(UpstreamTlsMode::VerifyIdentity, Some("db.example.com"));
    let e = login_error(opts(wrong_name.addr(), TLS_NATIVE, None)).await;
    assert_eq!((e.code, e.state.as_str()), (1429, "HY000"), "{e:?}");
    assert!(e.message.contains(&upstream.to_string()), "does not name the upstream: {}", e.message);
    assert!(e.message.contains("not valid for name"), "does not say why: {}", e.message);

    let any_name = verify(UpstreamTlsMode::VerifyCa, Some("db.example.com"));
    let mut conn = connect(opts(any_name.addr(), TLS_NATIVE, None)).await.unwrap();
    assert_tls_version(&server_tls(&mut conn).await.0);
    conn.disconnect().await.unwrap();
}

/// `verify-ca` trusting a CA that did not sign the server's certificate: refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_ca_with_the_wrong_ca_is_refused() {
    let proxy = proxy(|c| {
        c.upstream.tls.mode = UpstreamTlsMode::VerifyCa;
        c.upstream.tls.ca = Some(db().certs().other_ca.clone());
    });
    let e = login_error(opts(proxy.addr(), TLS_PLAIN, None)).await;
    assert_eq!((e.code, e.state.as_str()), (1429, "HY000"), "{e:?}");
    assert!(e.message.contains(&db().upstream_addr().to_string()), "{}", e.message);
    assert!(e.message.contains("UnknownIssuer") || e.message.contains("unknown issuer"), "{}", e.message);
}

/// `required` in front of a server without TLS (the shared fixture server): refused, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_against_a_server_without_tls_is_refused() {
    let plain_server = TestDb::shared();
    let proxy = proxy_to(plain_server.upstream_addr(), |c| c.upstream.tls.mode = UpstreamTlsMode::Required);
    let opts = plain_server.opts_via(proxy.addr(), "rtt_native", "native-pw");
    let e = login_error(opts).await;
    assert_eq!((e.code, e.state.as_str()), (1429, "HY000"), "{e:?}");
    assert!(e.message.contains(&plain_server.upstream_addr().to_string()), "{}", e.message);
    assert!(e.message.contains("offers no TLS"), "{}", e.message);
}

/// `listen.tls.mode: required`: a plain client is refused (3159); one with TLS is let in.
#[test]
fn listen_required_refuses_a_plain_client() {
    let proxy = proxy(|c| c.listen.tls.mode = ListenTlsMode::Required);
    let refused = cli_fails(proxy.addr(), TLS_PLAIN, &["--skip-ssl"], "SELECT 1");
    assert!(refused.contains("ERROR 3159 (HY000)") && refused.contains("listen.tls.mode: required"), "{refused}");
    let (server, client) = both_views(proxy.addr(), TLS_PLAIN, &["--ssl"]);
    assert_tls_version(&server);
    assert!(client.tls_cipher.is_some());
}

/// A client that protects its login with TLS while the long hop cannot be TLS (rttscope,
/// requiring TLS of clients, in front of a server without it): refused with 3159 rather than
/// sending the login in clear — unless `upstream.tls.mode: disabled` says a plain long hop is
/// intended.
#[test]
fn tls_client_is_refused_when_the_long_hop_cannot_be_tls() {
    let plain_server = TestDb::shared();
    let addr = plain_server.upstream_addr();
    let account = rttscope_integration_tests::mariadb::NATIVE;
    let required = |c: &mut Config| c.listen.tls.mode = ListenTlsMode::Required;
    let proxy = proxy_to(addr, required);
    let refused = cli_fails(proxy.addr(), account, &["--ssl"], "SELECT 1");
    assert!(refused.contains("ERROR 3159 (HY000)"), "{refused}");
    assert!(refused.contains(&addr.to_string()) && refused.contains("upstream.tls.mode: disabled"), "{refused}");

    let allowed = proxy_to(addr, |c| {
        required(c);
        c.upstream.tls.mode = UpstreamTlsMode::Disabled;
    });
    let out = cli_ok(allowed.addr(), account, &["--ssl"], "SELECT CURRENT_USER(); SHOW STATUS LIKE 'Ssl_version'; \\s");
    assert!(out.starts_with("rtt_native@"), "{out}");
    assert_eq!(status_value(&out, "Ssl_version"), "", "the long hop is plain");
    assert!(CliView::parse(&out).tls_cipher.is_some(), "the client's leg is TLS");
}

/// `REQUIRE X509`: rttscope presents `upstream.tls.cert`/`key` (signed by the server's CA) on
/// the long hop, so the account logs in whatever the client's leg; without them the server
/// refuses.
#[test]
fn require_x509_with_rttscope_s_client_certificate() {
    let certs = db().certs();
    let with_cert = proxy(|c| {
        c.upstream.tls.cert = Some(certs.client_cert.clone());
        c.upstream.tls.key = Some(certs.client_key.clone());
    });
    for tls in ["--ssl", "--skip-ssl"] {
        let out = cli_ok(with_cert.addr(), TLS_X509, &[tls], "SELECT CURRENT_USER(); SHOW STATUS LIKE 'Ssl_version'");
        assert!(out.starts_with("tls_x509@%\n"), "{tls}: {out}");
        assert_tls_version(&status_value(&out, "Ssl_version"));
    }
    let without = proxy(|_| {});
    let refused = cli_fails(without.addr(), TLS_X509, &["--ssl"], "SELECT 1");
    assert!(refused.contains("ERROR 1045"), "{refused}");
}

/// A plain client that half-closes after its query still reads the whole answer, then the
/// close, with TLS on the long hop: rttscope passes the half-close on with a TLS
/// `close_notify`, after which the server still answers. (A bare FIN instead, tried for
/// clients gone mid-command, made the server cut the answer short: see unix_socket.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_closed_client_still_reads_its_answer_over_a_tls_long_hop() {
    use std::io::Write;
    let proxy = proxy(|_| {});
    let addr = proxy.addr();
    for round in 0..5 {
        let read = tokio::task::spawn_blocking(move || -> std::io::Result<(Vec<Vec<u8>>, Vec<u8>)> {
            let mut stream = std::net::TcpStream::connect(addr)?;
            stream.set_read_timeout(Some(NO_HANG))?;
            let (_, greeting) = read_packet(&mut stream)?;
            native_login(&mut stream, &greeting, TLS_NATIVE.user, TLS_NATIVE.password, DB);
            stream.write_all(&com_query("SELECT seq, REPEAT('x', 1000) FROM seq_1_to_2000"))?;
            stream.shutdown(std::net::Shutdown::Write)?;
            let result = read_result(&mut stream)?;
            Ok((result, read_until_closed(&mut stream)?))
        });
        let (result, rest) = read.await.unwrap().unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(result.len(), 1 + 2 + 1 + 2000 + 1, "column count, 2 columns, EOF, rows, EOF");
        assert_eq!(result[2003], [b"\x042000".as_slice(), &[0xFC, 0xE8, 0x03], &[b'x'; 1000]].concat());
        assert!(rest.is_empty(), "nothing after the result: {rest:?}");
    }
}

// ---- rttscope's own view -----------------------------------------------------------------

/// While a TLS connection is open, `/connections` shows both legs' TLS version and cipher
/// (the long hop's as the server reports it), and `rttscope_logins_total` counts the login
/// on each leg by how it is carried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_and_metrics_show_each_leg() {
    let proxy = proxy(|_| {});
    let ca = admin_get(proxy.admin(), "/tls/ca.pem").unwrap();
    let mut conn = connect(opts(proxy.addr(), TLS_NATIVE, Some(trusting(ca.as_bytes())))).await.unwrap();
    let (version, cipher) = server_tls(&mut conn).await;
    let admin = proxy.admin();
    let open = tokio::task::spawn_blocking(move || connections(admin)).await.unwrap();
    assert_eq!(open.len(), 1, "{open:#?}");
    let legs = open[0].legs.clone().expect("legs, once logged in");
    let client = legs.client_tls.expect("the client's leg is TLS");
    let upstream = legs.upstream_tls.expect("the long hop is TLS");
    assert_tls_version(&client.version);
    assert!(!client.cipher.is_empty() && client.cipher != "unknown", "{client:?}");
    assert_eq!(upstream.version, version, "the long hop's version, as the server sees it");
    assert!(!upstream.cipher.is_empty() && upstream.cipher != "unknown", "{upstream:?} (server: {cipher})");
    assert_eq!((legs.client_compression, legs.upstream_compression), (None, None));

    let count = |leg: &str, transport: &str| (leg.to_owned(), transport.to_owned(), "none".to_owned());
    let seen = tokio::task::spawn_blocking(move || logins(admin)).await.unwrap();
    assert_eq!(seen, [(count("client", "tls"), 1), (count("upstream", "tls"), 1)].into(), "{seen:?}");

    // A plain client: its own leg plain, the long hop TLS all the same.
    let mut plain = connect(opts(proxy.addr(), TLS_NATIVE, None)).await.unwrap();
    assert_tls_version(&server_tls(&mut plain).await.0);
    let seen = tokio::task::spawn_blocking(move || logins(admin)).await.unwrap();
    let expected = [(count("client", "tls"), 1), (count("client", "plain"), 1), (count("upstream", "tls"), 2)];
    assert_eq!(seen, expected.into(), "{seen:?}");
    conn.disconnect().await.unwrap();
    plain.disconnect().await.unwrap();
}

/// `/connections` names a cipher suite by its IANA name (what `TlsInfo` promises), which for
/// TLS 1.3 is also what the server reports as `Ssl_cipher` for the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_name_the_long_hop_s_cipher_as_the_server_does() {
    let proxy = proxy(|_| {});
    let mut conn = connect(opts(proxy.addr(), TLS_NATIVE, None)).await.unwrap();
    let (version, cipher) = server_tls(&mut conn).await;
    let admin = proxy.admin();
    let open = tokio::task::spawn_blocking(move || connections(admin)).await.unwrap();
    let upstream = open[0].legs.clone().and_then(|l| l.upstream_tls).expect("the long hop is TLS");
    assert_eq!(version, "TLSv1.3", "OpenSSL names TLS 1.2 suites its own way; this check needs TLS 1.3");
    assert_eq!(upstream.cipher, cipher, "the long hop's cipher suite, as /connections and the server name it");
    conn.disconnect().await.unwrap();
}
