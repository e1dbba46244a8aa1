//! The compressed protocol on each leg, end to end with real clients: rttscope speaks it to
//! the client as the client asked, and to the server as `upstream.compression` says
//! (`mirror`, `off`, `zlib`, `zstd`). Each workload runs straight to the server and through
//! rttscope with the same client and must print the same; each leg is read from the side
//! that knows it: the client's (the CLI's `status` prints `Protocol: Compressed`), the
//! server's (`Compression` of the connection it sees: the long hop) and rttscope's
//! (`rttscope_logins_total{leg,transport,compression}`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use rttscope_config::{Config, UpstreamCompression};
use rttscope_integration_tests::clients::{self, assert_same, conn_args};
use rttscope_integration_tests::legs::{
    CliView, assert_in_step, connections, desyncs, logins, run_cli_ok, status_value,
};
use rttscope_integration_tests::mariadb::{Account, DB, NATIVE, TLS_NATIVE, TestDb, TlsDb};
use rttscope_integration_tests::process::ProxyProcess;
use rttscope_integration_tests::proxy::{TestProxy, proxy_to};

const NO_HANG: Duration = Duration::from_secs(120);

fn compression(mode: UpstreamCompression) -> impl FnOnce(&mut Config) {
    move |c| c.upstream.compression = mode
}

/// The workload, in files of its own: `script.sql` for the CLI's stdin and the data it
/// uploads with LOAD DATA LOCAL INFILE into table `table`.
struct Workload {
    _dir: tempfile::TempDir,
    script: PathBuf,
}

impl Workload {
    /// Several MB each way: a LOCAL INFILE upload of ~4 MB (mostly incompressible, so the
    /// compressed upload spans many frames), a result of 20,000 rows (~7 MB), one row of
    /// 5 MB, one of 3.8 MB of hex, multi-statements in one COM_QUERY (DELIMITER), and a
    /// procedure with three result sets.
    fn new(table: &str) -> Workload {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("upload.tsv");
        std::fs::write(&data, upload_data()).unwrap();
        let script = dir.path().join("script.sql");
        let sql = WORKLOAD_SQL.replace("@T@", table).replace("@DATA@", &data.to_string_lossy());
        std::fs::write(&script, sql).unwrap();
        Workload { _dir: dir, script }
    }
}

const WORKLOAD_SQL: &str = r#"
SET SESSION group_concat_max_len = 67108864;
CREATE OR REPLACE TABLE @T@ (id INT PRIMARY KEY, name VARCHAR(100), payload TEXT);
LOAD DATA LOCAL INFILE '@DATA@' INTO TABLE @T@;
SELECT COUNT(*), SUM(LENGTH(payload)), MD5(GROUP_CONCAT(id, name, payload ORDER BY id)) FROM @T@;
SELECT * FROM @T@ WHERE id % 97 = 0 ORDER BY id;
SELECT seq, SHA2(seq, 256), REPEAT(CHAR(65 + seq % 26), seq % 700) FROM seq_1_to_20000;
SELECT LENGTH(big), MD5(big), big FROM (SELECT REPEAT(SHA2('big', 512), 40000) AS big) AS t;
SELECT GROUP_CONCAT(SHA2(seq, 512) ORDER BY seq SEPARATOR '') AS hex FROM seq_1_to_30000;
DELIMITER //
CREATE OR REPLACE PROCEDURE @T@_three(n INT)
BEGIN
  SELECT n AS first_result;
  SELECT id, name FROM @T@ WHERE id <= n ORDER BY id;
  SELECT COUNT(*) AS rows_total FROM @T@;
END//
SELECT 'multi1' AS m1; SELECT 'multi2' AS m2; SELECT seq FROM seq_1_to_5//
DELIMITER ;
CALL @T@_three(5);
SELECT 'done' AS last;
"#;

/// 4,000 lines of `id \t name \t payload`, the payload hex of a xorshift stream (deterministic
/// and not compressible below half), 0..2,000 characters long.
fn upload_data() -> String {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = String::with_capacity(4 << 20);
    for id in 1..=4000 {
        let len = (next() % 2000) as usize;
        let mut payload = String::with_capacity(len + 16);
        while payload.len() < len {
            payload.push_str(&format!("{:016x}", next()));
        }
        payload.truncate(len);
        out.push_str(&format!("{id}\tname-{id}-{}\t{payload}\n", next() % 1000));
    }
    out
}

/// The `mariadb` CLI at `addr` as `account`, with `extra` options.
fn cli(db: &TestDb, addr: SocketAddr, account: Account, extra: &[&str]) -> std::process::Command {
    let tls = extra.iter().any(|a| a.starts_with("--ssl"));
    let mut cmd = match tls {
        true => db.mariadb_cli_tls(addr, account.user, account.password, Some(DB), &[]),
        false => db.mariadb_cli(addr, account.user, account.password, Some(DB)),
    };
    cmd.arg("--default-character-set=utf8mb4").args(extra);
    cmd
}

/// The workload's output at `addr`.
fn run_workload(db: &TestDb, addr: SocketAddr, account: Account, extra: &[&str], workload: &Workload) -> String {
    let out = run_cli_ok(cli(db, addr, account, extra), Some(&workload.script));
    assert!(out.ends_with("last\ndone\n"), "the workload did not run to its end");
    out
}

/// The server's `Compression` for one connection and what the client says of it.
fn views(db: &TestDb, addr: SocketAddr, account: Account, extra: &[&str]) -> (String, CliView) {
    let mut cmd = cli(db, addr, account, extra);
    cmd.args(["-N", "-e", "SHOW SESSION STATUS LIKE 'Compression'; \\s"]);
    let out = run_cli_ok(cmd, None);
    (status_value(&out, "Compression"), CliView::parse(&out))
}

type Logins = BTreeMap<(String, String, String), u64>;

fn logins_of(entries: &[(&str, &str, &str, u64)]) -> Logins {
    entries.iter().map(|(l, t, c, n)| ((l.to_string(), t.to_string(), c.to_string()), *n)).collect()
}

/// Runs the workload with `extra` client options straight to the server and through a
/// rttscope with `mode`; the outputs must match. Returns the proxy for more checks (each test
/// checks last that rttscope followed the whole workload: [`assert_in_step`]).
fn same_as_direct(db: &TestDb, account: Account, table: &str, extra: &[&str], mode: UpstreamCompression) -> TestProxy {
    let workload = Workload::new(table);
    let direct = run_workload(db, db.upstream_addr(), account, extra, &workload);
    let proxy = proxy_to(db.upstream_addr(), compression(mode));
    let proxied = run_workload(db, proxy.addr(), account, extra, &workload);
    assert_same(&format!("mariadb {extra:?}, upstream.compression {mode:?}"), &direct, &proxied);
    assert!(direct.len() > 16 << 20, "the workload is smaller than it should be: {} bytes", direct.len());
    proxy
}

/// `--compress` through rttscope as it mirrors it: the same output as straight to the
/// server, both legs compressed.
#[test]
fn cli_compressed_mirrored_matches_direct() {
    let db = TestDb::shared();
    let proxy = same_as_direct(db, NATIVE, "cz_mirror", &["--compress"], UpstreamCompression::Mirror);
    let (server, client) = views(db, proxy.addr(), NATIVE, &["--compress"]);
    assert_eq!((server.as_str(), client.compressed), ("ON", true));
    let expected = logins_of(&[("client", "plain", "zlib", 2), ("upstream", "plain", "zlib", 2)]);
    assert_eq!(logins(proxy.admin()), expected);
    assert_in_step(&proxy);
}

/// `upstream.compression: zlib` for a client that does not compress: the long hop is
/// compressed (the server says so), the client's leg is not, the output is the client's.
#[test]
fn upstream_zlib_for_an_uncompressed_client() {
    let db = TestDb::shared();
    let proxy = same_as_direct(db, NATIVE, "cz_zlib", &[], UpstreamCompression::Zlib);
    let (server, client) = views(db, proxy.addr(), NATIVE, &[]);
    assert_eq!((server.as_str(), client.compressed), ("ON", false));
    let expected = logins_of(&[("client", "plain", "none", 2), ("upstream", "plain", "zlib", 2)]);
    assert_eq!(logins(proxy.admin()), expected);
    assert_in_step(&proxy);
}

/// `upstream.compression: off` for a `--compress` client: compressed towards the client
/// only.
#[test]
fn upstream_off_for_a_compressed_client() {
    let db = TestDb::shared();
    let proxy = same_as_direct(db, NATIVE, "cz_off", &["--compress"], UpstreamCompression::Off);
    let (server, client) = views(db, proxy.addr(), NATIVE, &["--compress"]);
    assert_eq!((server.as_str(), client.compressed), ("OFF", true));
    let expected = logins_of(&[("client", "plain", "zlib", 2), ("upstream", "plain", "none", 2)]);
    assert_eq!(logins(proxy.admin()), expected);
    assert_in_step(&proxy);
}

/// `upstream.compression: zstd` against MariaDB, which has zlib only: the long hop falls back
/// to zlib, everything works, and rttscope says so in one log line, not one per connection.
#[test]
fn upstream_zstd_falls_back_to_zlib_with_one_log_line() {
    let db = TestDb::shared();
    let yaml = format!("upstream:\n  address: {}\n  compression: zstd\n", db.upstream_addr());
    let proxy = ProxyProcess::start(&yaml).unwrap();
    let workload = Workload::new("cz_zstd");
    let direct = run_workload(db, db.upstream_addr(), NATIVE, &[], &workload);
    for extra in [&[][..], &["--compress"][..]] {
        let proxied = run_workload(db, proxy.listen(), NATIVE, extra, &workload);
        assert_same(&format!("mariadb {extra:?} with upstream.compression zstd"), &direct, &proxied);
        let (server, client) = views(db, proxy.listen(), NATIVE, extra);
        assert_eq!((server.as_str(), client.compressed), ("ON", !extra.is_empty()));
    }
    let log = proxy.log();
    let fallbacks: Vec<&str> = log.lines().filter(|l| l.contains("offers no zstd")).collect();
    assert_eq!(fallbacks.len(), 1, "one line about zstd, for 4 connections:\n{log}");
    assert!(fallbacks[0].contains("zlib") && fallbacks[0].contains(&db.upstream_addr().to_string()), "{log}");
    assert_eq!(desyncs(proxy.admin()), 0, "{log}");
}

/// A client that does not compress, behind a compressed long hop, gets the packets it would
/// get straight from the server — sequence ids included — also where the server flushes
/// part-way through a response (several result sets of one statement, LOAD DATA LOCAL
/// INFILE's final OK), which under compression it numbers by its compressed frames.
/// PyMySQL checks every sequence id.
#[test]
fn pymysql_uncompressed_behind_a_zlib_long_hop() {
    let db = TestDb::shared();
    let run = |addr: SocketAddr| {
        let mut args: Vec<String> = vec!["pymysql-results".into()];
        args.extend(conn_args(addr, NATIVE));
        args.extend(["--table".into(), "cz_pymysql".into()]);
        clients::run_python("legs.py", &args).unwrap_or_else(|e| panic!("{e:#}"))
    };
    let direct = run(db.upstream_addr());
    let proxy = proxy_to(db.upstream_addr(), compression(UpstreamCompression::Zlib));
    let proxied = run(proxy.addr());
    assert_same("PyMySQL behind upstream.compression zlib", &direct, &proxied);
    assert_eq!(logins(proxy.admin()), logins_of(&[("client", "plain", "none", 1), ("upstream", "plain", "zlib", 1)]));
    assert_in_step(&proxy);
}

/// The same with mysql_async, which checks sequence ids too: a multi-statement query's
/// result sets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_async_uncompressed_behind_a_zlib_long_hop() {
    let db = TestDb::shared();
    async fn results(opts: OptsBuilder) -> Result<Vec<Vec<String>>, mysql_async::Error> {
        let mut conn = tokio::time::timeout(NO_HANG, Conn::new(opts)).await.expect("hung")?;
        let sql = "SELECT 'one'; SELECT 'two', 'three'; SELECT seq FROM seq_1_to_3";
        let mut result = tokio::time::timeout(NO_HANG, conn.query_iter(sql)).await.expect("hung")?;
        let mut sets = Vec::new();
        while !result.is_empty() {
            let rows: Vec<mysql_async::Row> = tokio::time::timeout(NO_HANG, result.collect()).await.expect("hung")?;
            sets.push(rows.into_iter().map(|r| format!("{r:?}")).collect());
        }
        drop(result);
        let after: Option<String> = conn.query_first("SELECT 'after'").await?;
        sets.push(after.into_iter().collect());
        conn.disconnect().await?;
        Ok(sets)
    }
    let direct = results(db.opts(NATIVE.user, NATIVE.password)).await.unwrap();
    let proxy = proxy_to(db.upstream_addr(), compression(UpstreamCompression::Zlib));
    let proxied = results(db.opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await;
    assert_eq!(proxied.as_ref().ok(), Some(&direct), "{proxied:?}");
    assert_in_step(&proxy);
}

/// TLS and compression together on both legs (`--ssl --compress`), to the TLS server.
#[test]
fn tls_and_compression_on_both_legs() {
    let db: &TestDb = TlsDb::shared();
    let both = ["--ssl", "--compress"];
    let proxy = same_as_direct(db, TLS_NATIVE, "cz_tls", &both, UpstreamCompression::Mirror);
    let mut cmd = cli(db, proxy.addr(), TLS_NATIVE, &both);
    cmd.args(["-N", "-e", "SHOW SESSION STATUS LIKE 'Compression'; SHOW STATUS LIKE 'Ssl_version'; \\s"]);
    let out = run_cli_ok(cmd, None);
    assert_eq!(status_value(&out, "Compression"), "ON");
    assert!(status_value(&out, "Ssl_version").starts_with("TLSv1."), "{out}");
    let client = CliView::parse(&out);
    assert!(client.tls_cipher.is_some() && client.compressed, "{client:?}");
    let expected = logins_of(&[("client", "tls", "zlib", 2), ("upstream", "tls", "zlib", 2)]);
    assert_eq!(logins(proxy.admin()), expected);
    assert_in_step(&proxy);
}

/// MariaDB Connector/Python with `compress=True`, alone and over TLS: the same transcript
/// (text and binary results) as straight to the server, and the server sees compression.
/// (PyMySQL has no compression: `compress=True` raises NotImplementedError.)
#[test]
fn connector_python_compressed_matches_direct() {
    let cases: [(&TestDb, Account, &[&str]); 2] =
        [(TestDb::shared(), NATIVE, &["--compress"]), (TlsDb::shared(), TLS_NATIVE, &["--compress", "--ssl"])];
    for (db, account, extra) in cases {
        let run = |addr: SocketAddr| {
            let mut args: Vec<String> = vec!["connector".into()];
            args.extend(conn_args(addr, account));
            args.extend(extra.iter().map(|s| s.to_string()));
            clients::run_python("legs.py", &args).unwrap_or_else(|e| panic!("{e:#}"))
        };
        let direct = run(db.upstream_addr());
        let proxy = proxy_to(db.upstream_addr(), |_| {});
        let proxied = run(proxy.addr());
        assert_same(&format!("Connector/Python {extra:?}"), &direct, &proxied);
        assert!(proxied.contains("server Compression=ON"), "{proxied}");
        assert_in_step(&proxy);
    }
}

/// mysql_async's own compressed protocol (flate2), a multi-MB text result and a prepared
/// statement's binary rows: the same rows as straight to the server, both legs compressed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_async_compressed_matches_direct() {
    let db = TestDb::shared();
    let opts = |addr: SocketAddr| -> OptsBuilder {
        db.opts_via(addr, NATIVE.user, NATIVE.password).compression(mysql_async::Compression::default())
    };
    async fn rows(opts: OptsBuilder) -> (Vec<(u32, String, String)>, Vec<(u32, Vec<u8>)>, String) {
        let mut conn = tokio::time::timeout(NO_HANG, Conn::new(opts)).await.expect("hung").unwrap();
        let text = "SELECT seq, SHA2(seq, 256), REPEAT(CHAR(65 + seq % 26), seq % 700) FROM seq_1_to_20000";
        let text = tokio::time::timeout(NO_HANG, conn.query(text)).await.expect("hung").unwrap();
        let binary = "SELECT seq, UNHEX(SHA2(seq, 512)) FROM seq_1_to_10000 WHERE seq > ?";
        let binary = tokio::time::timeout(NO_HANG, conn.exec(binary, (0,))).await.expect("hung").unwrap();
        let status = "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COMPRESSION'";
        let compression: Option<String> = conn.query_first(status).await.unwrap();
        conn.disconnect().await.unwrap();
        (text, binary, compression.unwrap_or_default())
    }
    let direct = rows(opts(db.upstream_addr())).await;
    let proxy = proxy_to(db.upstream_addr(), |_| {});
    let proxied = rows(opts(proxy.addr())).await;
    assert_eq!(direct.2, "ON");
    assert!(direct == proxied, "different rows through rttscope");
    assert_eq!(direct.0.len(), 20_000);
    let admin = proxy.admin();
    let seen = tokio::task::spawn_blocking(move || logins(admin)).await.unwrap();
    assert_eq!(seen, logins_of(&[("client", "plain", "zlib", 1), ("upstream", "plain", "zlib", 1)]));
    assert_in_step(&proxy);
}

/// While a connection is open, `/connections` shows each leg's compression as configured:
/// a compressing client in front of `upstream.compression: off`, and a plain client in
/// front of `zlib`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_show_each_leg_s_compression() {
    let db = TestDb::shared();
    let cases = [
        (UpstreamCompression::Off, true, (Some("zlib"), None)),
        (UpstreamCompression::Zlib, false, (None, Some("zlib"))),
        (UpstreamCompression::Mirror, true, (Some("zlib"), Some("zlib"))),
    ];
    for (mode, client_compresses, expected) in cases {
        let proxy = proxy_to(db.upstream_addr(), compression(mode));
        let mut opts = db.opts_via(proxy.addr(), NATIVE.user, NATIVE.password);
        if client_compresses {
            opts = opts.compression(mysql_async::Compression::default());
        }
        let mut conn = tokio::time::timeout(NO_HANG, Conn::new(opts)).await.expect("hung").unwrap();
        let one: Option<u8> = conn.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
        let admin = proxy.admin();
        let open = tokio::task::spawn_blocking(move || connections(admin)).await.unwrap();
        let legs = open.first().and_then(|c| c.legs.clone()).expect("an open, logged-in connection");
        let seen = (legs.client_compression.as_deref(), legs.upstream_compression.as_deref());
        assert_eq!(seen, expected, "upstream.compression {mode:?}, client compresses: {client_compresses}");
        conn.disconnect().await.unwrap();
    }
}
