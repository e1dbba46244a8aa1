//! What becomes of a login's secrets in rttscope in front of the MySQL-8-style server
//! (`integration-tests/python/mysql8_server.py`): no password in its log, at debug level, on
//! any leg; and the key a plain client encrypts its password with is `listen.rsa_key` when
//! one is configured.

use std::process::Command;

use anyhow::{Context, Result, bail};
use rttscope_integration_tests::mysql8::{Mode, Mysql8Server, NATIVE, SHA2, SHA256, features};
use rttscope_integration_tests::process::{ProxyProcess, rttscope_binary};
use rttscope_integration_tests::proxy::proxy_to;

/// Every client of the login matrix (`mysql8_auth.rs`).
const DRIVERS: [&str; 5] = ["pymysql", "mysqlclient", "mariadb-cli", "mysql2", "connector-j"];

fn start_server(tls: bool) -> Option<Mysql8Server> {
    match Mysql8Server::start(Mode { tls, mysql9: false, sha256_default: false }) {
        Ok(server) => Some(server),
        Err(e) => {
            rttscope_integration_tests::skip(format!("no MySQL-8-style server: {e:#}"));
            None
        }
    }
}

/// The rttscope binary in front of `server`, logging at debug level.
fn debug_logging_proxy(server: &Mysql8Server) -> Result<ProxyProcess> {
    let yaml = format!("upstream: {}\n", server.addr());
    // RUST_LOG wins over log.level, and the harness sets it (to info unless told otherwise).
    ProxyProcess::start_with(rttscope_binary()?, &yaml, |c| {
        c.env("RUST_LOG", "debug");
    })
}

/// How a password could show in a log line: as text, as hex, as a Rust byte slice's `Debug`.
fn spellings(password: &str) -> [String; 3] {
    let hex: String = password.bytes().map(|b| format!("{b:02x}")).collect();
    [password.to_owned(), hex, format!("{:?}", password.as_bytes())]
}

/// After every client of the matrix has logged in as every account, full then fast, on each
/// leg combination (plain → TLS through rttscope's key included), and changed user with full
/// authentication on each, rttscope's own log at debug level holds none of the passwords.
#[test]
fn no_password_reaches_rttscopes_log_at_debug_level() -> Result<()> {
    let (Some(tls_server), Some(plain_server)) = (start_server(true), start_server(false)) else {
        return Ok(());
    };
    let tls_hop = debug_logging_proxy(&tls_server)?;
    let plain_hop = debug_logging_proxy(&plain_server)?;
    let cells = [
        (&tls_server, &tls_hop, "plain", "tls"),
        (&tls_server, &tls_hop, "tls", "tls"),
        (&plain_server, &plain_hop, "plain", "plain"),
    ];
    for (server, proxy, client_leg, server_leg) in cells {
        for driver in DRIVERS {
            let lines = server.logins(driver, proxy.listen(), client_leg, &[SHA2, SHA256, NATIVE])?;
            let failed: Vec<&String> = lines.iter().filter(|l| l.contains(": error")).collect();
            assert!(lines.len() == 6 && failed.is_empty(), "{driver}, client {client_leg}: {lines:?}");
        }
        // The cache emptied: the change to caching_sha2_password takes full authentication.
        server.flush()?;
        server.take_log();
        let lines = features(proxy.listen(), NATIVE, "mysqlclient-change-user", &[client_leg, SHA2, SHA256])?;
        assert_eq!(lines, [format!("u_sha2: u_sha2 {server_leg}"), format!("u_sha256: u_sha256 {server_leg}")]);
        let full = ["u_native mysql_native_password", "u_sha2 caching_sha2_password", "u_sha256 sha256_password"];
        assert_eq!(server.take_log(), full.map(|l| format!("{l} full {server_leg} ok")), "client {client_leg}");
    }
    let log = tls_hop.log() + &plain_hop.log();
    assert!(log.contains(" DEBUG "), "rttscope logged at debug level:\n{log}");
    for password in [SHA2, SHA256, NATIVE].map(|a| a.split_once(':').unwrap_or_default().1) {
        for spelling in spellings(password) {
            assert!(!log.contains(&spelling), "{spelling:?} in rttscope's log");
        }
    }
    Ok(())
}

/// An RSA key made by OpenSSL in `dir`: the private key's path and the public key's PEM.
fn openssl_rsa_key(dir: &std::path::Path) -> Result<(std::path::PathBuf, String)> {
    let key = dir.join("rsa_key.pem");
    let made = Command::new("openssl")
        .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out"])
        .arg(&key)
        .output()
        .context("running openssl")?;
    if !made.status.success() {
        bail!("openssl genpkey failed: {}", String::from_utf8_lossy(&made.stderr));
    }
    let public = Command::new("openssl").args(["pkey", "-pubout", "-in"]).arg(&key).output()?;
    if !public.status.success() {
        bail!("openssl pkey -pubout failed: {}", String::from_utf8_lossy(&public.stderr));
    }
    Ok((key, String::from_utf8(public.stdout)?))
}

/// With `listen.rsa_key` set, a plain client over the TLS long hop that asks for the server's
/// key for full authentication gets that key's public half (PyMySQL keeps what it was sent),
/// and its password, encrypted with it, logs it in.
#[test]
fn a_plain_client_gets_the_configured_rsa_key() -> Result<()> {
    let Some(server) = start_server(true) else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let (key, public_pem) = openssl_rsa_key(dir.path())?;
    let proxy = proxy_to(server.addr(), |c| c.listen.rsa_key = Some(key));
    for account in [SHA2, SHA256] {
        server.flush()?;
        server.take_log();
        let lines = features(proxy.addr(), account, "pymysql-server-key", &[])?;
        let user = account.split(':').next().unwrap_or_default();
        let expected: Vec<String> = public_pem.lines().map(str::to_owned).chain([format!("who: {user} tls")]).collect();
        assert_eq!(lines, expected, "{user}: the key PyMySQL was sent, then who it is");
        let log = server.take_log();
        assert!(
            log.last().is_some_and(|l| l.starts_with(&format!("{user} ")) && l.ends_with(" full tls ok")),
            "{log:?}"
        );
    }
    Ok(())
}
