//! Logins through rttscope in front of a MySQL-8-style server (mysql-mimic with
//! caching_sha2_password and sha256_password written from MySQL's documentation; see
//! `integration-tests/python/mysql8_server.py`), on every combination of TLS legs, with full
//! and fast authentication, by real clients: PyMySQL, mysqlclient and the `mariadb` CLI
//! (libmariadb), Node's mysql2, MariaDB Connector/J and mysql_async. The server's own log says
//! which path each login took and over which leg. Changes of user: `mysql8_change_user.rs`.
//!
//! The cell that failed before rttscope stood in for the server's key: a client without TLS
//! (the sidecar set-up) in front of a TLS server, after the server's cache was emptied — the
//! client's request for the public key went over TLS, where the server read it as a password.

use std::net::SocketAddr;

use anyhow::Result;
use rttscope_config::{ListenAddr, ListenTlsMode, UpstreamCompression};
use rttscope_integration_tests::mysql8::{
    Mode, Mysql8Server, NATIVE, SHA2, SHA256, compression_lines, current_user, mysql_async_conn, mysql_async_conn_with,
    plugin, server_and_proxy, server_and_proxy_with, user,
};
use rttscope_integration_tests::proxy::{TestProxy, proxy_to};

/// The three accounts, each with its plugin.
const ACCOUNTS: [&str; 3] = [SHA2, SHA256, NATIVE];

/// The clients of the login matrix, as `Mysql8Server::logins` names them.
const DRIVERS: [&str; 5] = ["pymysql", "mysqlclient", "mariadb-cli", "mysql2", "connector-j"];

/// What the login script prints when every login of `accounts` succeeds over `server_leg`.
fn logged_in(accounts: &[&str], server_leg: &str) -> Vec<String> {
    let lines = accounts.iter().flat_map(|a| [1, 2].map(|n| format!("{} {n}: {} {server_leg}", user(a), user(a))));
    lines.collect()
}

/// What the server logs for those logins: full authentication first (its cache was just
/// emptied), then fast for caching_sha2_password; full every time for the others.
fn server_saw(accounts: &[&str], server_leg: &str) -> Vec<String> {
    let line = |a: &str, path: &str| format!("{} {} {path} {server_leg} ok", user(a), plugin(a));
    let second = |a: &str| if plugin(a) == "caching_sha2_password" { "fast" } else { "full" };
    accounts.iter().flat_map(|a| [line(a, "full"), line(a, second(a))]).collect()
}

/// `driver` logs in as each account through `proxy` over a `client_leg`, and the server
/// saw each login over `server_leg`, taking the path it should.
fn assert_cell(
    driver: &str,
    server: &Mysql8Server,
    proxy: SocketAddr,
    client_leg: &str,
    server_leg: &str,
) -> Result<()> {
    server.take_log();
    let lines = server.logins(driver, proxy, client_leg, &ACCOUNTS)?;
    let cell = format!("{driver}, client {client_leg}, long hop {server_leg}");
    assert_eq!(lines, logged_in(&ACCOUNTS, server_leg), "{cell}: the client's logins");
    assert_eq!(server.take_log(), server_saw(&ACCOUNTS, server_leg), "{cell}: the server's view");
    Ok(())
}

/// Plain client → TLS long hop (rttscope's key stands in for the server's), TLS → TLS,
/// plain → plain: every plugin logs in, full and fast, with PyMySQL, mysqlclient, the
/// `mariadb` CLI, Node's mysql2 and Connector/J (`allowPublicKeyRetrieval` on a plain leg).
#[test]
fn every_plugin_logs_in_full_and_fast_on_every_leg_combination() -> Result<()> {
    let Some((tls_server, tls_hop)) = server_and_proxy(Mode { tls: true, mysql9: false, sha256_default: false }) else {
        return Ok(());
    };
    let Some((plain_server, plain_hop)) = server_and_proxy(Mode { tls: false, mysql9: false, sha256_default: false })
    else {
        return Ok(());
    };
    for driver in DRIVERS {
        assert_cell(driver, &tls_server, tls_hop.addr(), "plain", "tls")?;
        assert_cell(driver, &tls_server, tls_hop.addr(), "tls", "tls")?;
        assert_cell(driver, &plain_server, plain_hop.addr(), "plain", "plain")?;
        // Directly, as a check on the server itself: the same answers.
        assert_cell(driver, &tls_server, tls_server.addr(), "plain", "plain")?;
    }
    Ok(())
}

/// A server whose default plugin is sha256_password: a plain client puts its key request in
/// its first packet, which rttscope answers before that packet goes upstream over TLS (with
/// the password in it instead). caching_sha2_password and native accounts are switched to.
#[test]
fn a_sha256_password_default_plugin_logs_in_from_a_plain_client_over_tls() -> Result<()> {
    let mode = Mode { tls: true, mysql9: false, sha256_default: true };
    let Some((server, proxy)) = server_and_proxy(mode) else { return Ok(()) };
    assert_cell("pymysql", &server, proxy.addr(), "plain", "tls")?;
    assert_cell("pymysql", &server, proxy.addr(), "tls", "tls")?;
    Ok(())
}

/// A TLS client in front of a server without TLS is refused before any password is sent,
/// never its login in clear on the long hop: when `listen.tls.mode: required` made rttscope
/// offer TLS, with an ERR that says why; otherwise rttscope offers it no TLS, as the server
/// does not, and the client does what it does directly — PyMySQL, mysql2 and Connector/J
/// refuse themselves; libmariadb (mysqlclient, the CLI) carries on without TLS. Every client,
/// every plugin; the refusal comes before authentication starts, so full and fast are alike.
#[test]
fn a_tls_client_is_refused_a_plain_long_hop_with_the_reason() -> Result<()> {
    let Some((server, offers_none)) = server_and_proxy(Mode { tls: false, mysql9: false, sha256_default: false })
    else {
        return Ok(());
    };
    let requires_tls = proxy_to(server.addr(), |c| c.listen.tls.mode = ListenTlsMode::Required);
    let why = ("3159", "rttscope: the client connected with TLS but upstream 127.0.0.1:");
    for driver in DRIVERS {
        server.take_log();
        let Some(refusal) = refuses_itself(driver) else {
            carries_on_without_tls(&server, driver, &offers_none)?;
            assert_refused(&server, driver, &requires_tls, why)?;
            continue;
        };
        assert_refused(&server, driver, &offers_none, refusal)?;
        assert_refused(&server, driver, &requires_tls, why)?;
    }
    Ok(())
}

/// How `driver`, told to use TLS, refuses a server (rttscope) that offers none: the error
/// code and a part of its message; `None` if it carries on without TLS.
fn refuses_itself(driver: &str) -> Option<(&'static str, &'static str)> {
    match driver {
        "pymysql" => Some(("2026", "SSL is required but the server doesn't support it")),
        "mysql2" => Some(("undefined", "Server does not support secure connection")),
        "connector-j" => Some(("-1", "Trying to connect with ssl, but ssl not enabled in the server")),
        _ => None,
    }
}

/// libmariadb's clients, told to use TLS that is not offered, carry on without it and, still
/// taking the connection for a secure one, send caching_sha2_password's password in clear
/// when the server wants it in full: connected directly it crosses the plain hop so (the
/// server logs it arriving in clear, and denies it). Through rttscope, offering no TLS as the
/// server does, that packet is refused with the reason, never forwarded; every other login
/// goes as directly.
fn carries_on_without_tls(server: &Mysql8Server, driver: &str, proxy: &TestProxy) -> Result<()> {
    let direct = server.logins(driver, server.addr(), "tls", &ACCOUNTS)?;
    let direct_log = server.take_log();
    let in_clear: Vec<&str> = direct_log
        .iter()
        .filter(|l| l.ends_with(" plain denied-in-clear"))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert!(!in_clear.is_empty(), "{driver} directly: {direct_log:?}");
    let proxied = server.logins(driver, proxy.addr(), "tls", &ACCOUNTS)?;
    let proxied_log = server.take_log();
    assert!(proxied_log.iter().all(|l| !l.contains("in-clear")), "{driver} through rttscope: {proxied_log:?}");
    assert_eq!(proxied.len(), direct.len(), "{driver}: {proxied:?}");
    for (proxied, direct) in proxied.iter().zip(&direct) {
        if in_clear.iter().any(|u| proxied.starts_with(&format!("{u} "))) {
            assert!(
                proxied.contains("error 3159") && proxied.contains("sent its password in clear"),
                "{driver}: {proxied}"
            );
        } else {
            assert_eq!(proxied, direct, "{driver}");
        }
    }
    Ok(())
}

/// `driver` logs in over TLS through `proxy` as every account, twice each, and every login is
/// refused with the error `code` and a message holding `reason`; the server saw no login.
fn assert_refused(server: &Mysql8Server, driver: &str, proxy: &TestProxy, (code, reason): (&str, &str)) -> Result<()> {
    let lines = server.logins(driver, proxy.addr(), "tls", &ACCOUNTS)?;
    let logins = ACCOUNTS.iter().flat_map(|a| [1, 2].map(|n| format!("{} {n}: error {code} ", user(a))));
    assert_eq!(lines.len(), 6, "{driver}: {lines:?}");
    for (line, login) in lines.iter().zip(logins) {
        assert!(line.starts_with(&login) && line.contains(reason), "{driver}: {line}");
    }
    assert_eq!(server.take_log(), Vec::<String>::new(), "{driver}: the server saw no login");
    Ok(())
}

/// MySQL 9: no mysql_native_password. caching_sha2_password and sha256_password log in on
/// every leg a plain or TLS client can have, by PyMySQL and Node's mysql2; the native account
/// does not exist.
#[test]
fn mysql9_mode_without_mysql_native_password() -> Result<()> {
    let mysql9 = |tls| Mode { tls, mysql9: true, sha256_default: false };
    let Some((tls_server, tls_hop)) = server_and_proxy(mysql9(true)) else { return Ok(()) };
    let Some((plain_server, plain_hop)) = server_and_proxy(mysql9(false)) else { return Ok(()) };
    let legs = [(&tls_server, &tls_hop, "plain", "tls"), (&tls_server, &tls_hop, "tls", "tls")];
    for driver in ["pymysql", "mysql2"] {
        for (server, proxy, client_leg, server_leg) in
            legs.into_iter().chain([(&plain_server, &plain_hop, "plain", "plain")])
        {
            let cell = format!("{driver}, client {client_leg}, long hop {server_leg}");
            server.take_log();
            let lines = server.logins(driver, proxy.addr(), client_leg, &[SHA2, SHA256, NATIVE])?;
            assert_eq!(lines[..4], logged_in(&[SHA2, SHA256], server_leg)[..], "{cell}");
            assert_eq!(
                lines[4..],
                [
                    "u_native 1: error 3162 User u_native does not exist",
                    "u_native 2: error 3162 User u_native does not exist"
                ],
                "{cell}"
            );
            assert_eq!(server.take_log(), server_saw(&[SHA2, SHA256], server_leg), "{cell}");
        }
    }
    Ok(())
}

/// mysql_async (its own caching_sha2_password, rustls): full then fast authentication on a
/// plain client leg and on a TLS one, both over the TLS long hop.
#[tokio::test]
async fn mysql_async_logs_in_full_and_fast_over_the_tls_long_hop() -> Result<()> {
    let Some((server, proxy)) = server_and_proxy(Mode { tls: true, mysql9: false, sha256_default: false }) else {
        return Ok(());
    };
    for client_tls in [false, true] {
        server.flush()?;
        server.take_log();
        for _ in 0..2 {
            let mut conn = mysql_async_conn(proxy.addr(), SHA2, client_tls).await?;
            assert_eq!(current_user(&mut conn).await?.as_deref(), Some("u_sha2 tls"), "client TLS {client_tls}");
            conn.disconnect().await?;
        }
        assert_eq!(server.take_log(), server_saw(&[SHA2], "tls"), "client TLS {client_tls}");
    }
    Ok(())
}

/// A login with full authentication over a compressed long hop, by a plain client and a
/// compressed one: the client's auth packets (its key request, its password) went upstream
/// before the long hop was compressed, so each command after the login starts a frame where
/// the compressed stream has it, with sequence id 0. Before, marked where the client's stream
/// had it, the second command's frame carried the server's next id (MySQL answers "Got packets
/// out of order"; the test server closes the connection).
#[tokio::test]
async fn commands_after_a_full_authentication_login_over_a_compressed_long_hop_start_at_sequence_id_0() -> Result<()> {
    let mode = Mode { tls: true, mysql9: false, sha256_default: false };
    let Some((server, proxy)) = server_and_proxy_with(mode, |c| c.upstream.compression = UpstreamCompression::Zstd)
    else {
        return Ok(());
    };
    for compress in [false, true] {
        server.flush()?;
        server.take_log();
        let mut conn = mysql_async_conn_with(proxy.addr(), SHA2, false, compress).await?;
        for _ in 0..3 {
            assert_eq!(current_user(&mut conn).await?.as_deref(), Some("u_sha2 tls"), "client compressed: {compress}");
        }
        conn.disconnect().await?;
        let log = server.take_log();
        assert!(log.contains(&"u_sha2 caching_sha2_password full tls ok".to_owned()), "{log:?}");
        assert_eq!(compression_lines(&log), ["compression zstd"], "{log:?}");
    }
    Ok(())
}

/// Reads one packet: its sequence id and payload.
fn read_packet(stream: &mut std::net::TcpStream) -> Result<(u8, Vec<u8>)> {
    use std::io::Read;
    let mut head = [0u8; 4];
    stream.read_exact(&mut head)?;
    let mut payload = vec![0; usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16];
    stream.read_exact(&mut payload)?;
    Ok((head[3], payload))
}

fn write_packet(stream: &mut std::net::TcpStream, seq: u8, payload: &[u8]) -> Result<()> {
    use std::io::Write;
    let len = payload.len().to_le_bytes();
    stream.write_all(&[len[0], len[1], len[2], seq])?;
    Ok(stream.write_all(payload)?)
}

/// A plain client that asks for the key and then sends bytes that are no ciphertext of it
/// gets ERR 1045 saying so, on that connection alone: the next client logs in.
#[test]
fn a_password_rttscope_cannot_decrypt_ends_that_login_with_1045() -> Result<()> {
    let Some((server, proxy)) = server_and_proxy(Mode { tls: true, mysql9: false, sha256_default: false }) else {
        return Ok(());
    };
    server.flush()?;
    let mut client = std::net::TcpStream::connect(proxy.addr())?;
    client.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    read_packet(&mut client)?;
    // HandshakeResponse41: PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH | LONG_PASSWORD, a
    // 32-byte scramble that cannot match, caching_sha2_password.
    let caps: u32 = 0x0200 | 0x8000 | 0x0008_0000 | 0x0001;
    let mut response = caps.to_le_bytes().to_vec();
    response.extend_from_slice(&(1u32 << 24).to_le_bytes());
    response.push(45);
    response.extend_from_slice(&[0; 23]);
    response.extend_from_slice(b"u_sha2\0");
    response.push(32);
    response.extend_from_slice(&[7; 32]);
    response.extend_from_slice(b"caching_sha2_password\0");
    write_packet(&mut client, 1, &response)?;
    assert_eq!(read_packet(&mut client)?, (2, vec![1, 4]), "perform full authentication");
    write_packet(&mut client, 3, &[2])?;
    let (seq, key) = read_packet(&mut client)?;
    assert_eq!(seq, 4);
    assert!(key.starts_with(b"\x01-----BEGIN PUBLIC KEY-----"), "{}", String::from_utf8_lossy(&key));
    write_packet(&mut client, 5, &[0x5a; 256])?;
    let (seq, err) = read_packet(&mut client)?;
    assert_eq!((seq, &err[..3]), (6, &[0xff, 0x15, 0x04][..]), "ERR 1045");
    let message = String::from_utf8_lossy(&err[9..]).into_owned();
    assert!(message.contains("could not be decrypted"), "{message}");
    assert_eq!(server.take_log(), Vec::<String>::new(), "nothing reached the server as a password");
    let lines = server.logins("pymysql", proxy.addr(), "plain", &[SHA2])?;
    assert_eq!(lines, logged_in(&[SHA2], "tls"));
    Ok(())
}

/// A client on a Unix socket treats it as secure and sends its password in clear when the
/// server wants it in full: over a plain long hop rttscope refuses at that point, with an ERR
/// saying why, and the server never sees the password. With the account cached, fast
/// authentication (no password sent) logs in as before.
#[tokio::test]
async fn a_unix_socket_client_is_refused_where_its_password_would_cross_a_plain_long_hop() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("rttscope.sock");
    let Some((server, proxy)) = server_and_proxy_with(Mode { tls: false, mysql9: false, sha256_default: false }, |c| {
        c.listen.address.push(ListenAddr::Unix(socket.clone()))
    }) else {
        return Ok(());
    };
    server.take_log();
    let lines = server.logins_via_socket(&socket, &[SHA2])?;
    let refused =
        "error 3159 rttscope: the server wants the password in full, which a client on a Unix socket sends in clear";
    for (n, line) in lines.iter().enumerate() {
        assert!(line.starts_with(&format!("u_sha2 {}: {refused}", n + 1)), "{line}");
    }
    assert_eq!(lines.len(), 2);
    assert_eq!(server.take_log(), Vec::<String>::new(), "the server saw no password");
    // Cached by a TCP client's full authentication (the server's own key), then fast.
    assert_eq!(server.logins("pymysql", proxy.addr(), "plain", &[SHA2])?, logged_in(&[SHA2], "plain"));
    let (name, password) = SHA2.split_once(':').unwrap_or_default();
    let opts = mysql_async::OptsBuilder::default()
        .socket(Some(socket.display().to_string()))
        .user(Some(name))
        .pass(Some(password));
    let mut conn = mysql_async::Conn::new(opts).await?;
    assert_eq!(current_user(&mut conn).await?.as_deref(), Some("u_sha2 plain"));
    let lines = server.take_log();
    assert_eq!(lines.last().map(String::as_str), Some("u_sha2 caching_sha2_password fast plain ok"), "{lines:?}");
    Ok(())
}
