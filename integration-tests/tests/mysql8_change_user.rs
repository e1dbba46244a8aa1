//! COM_CHANGE_USER through rttscope in front of the MySQL-8-style server
//! (`integration-tests/python/mysql8_server.py`) on every leg combination: the stand-in for
//! the server's key that a plain client over a TLS long hop gets at login
//! (`mysql8_auth.rs`) follows the change of user too, with either leg compressed or both;
//! other legs relay the exchange. By mysql_async, mysqlclient (libmariadb's
//! `mysql_change_user`) and libmysqlclient; the server's own log says which path each change
//! took and over which leg.

use anyhow::{Context, Result};
use rttscope_config::{HumanDuration, UpstreamCompression};
use rttscope_integration_tests::mysql8::{
    Mode, NATIVE, SHA2, SHA256, compression_lines, current_user, features, mysql_async_conn, mysql_async_conn_with,
    plugin, server_and_proxy, server_and_proxy_with, user,
};

/// COM_CHANGE_USER to a caching_sha2_password account by mysql_async over the TLS long hop:
/// full then fast with TLS on both legs; fast, the account cached, from a plain client.
#[tokio::test]
async fn mysql_async_changes_user_full_and_fast() -> Result<()> {
    let Some((server, proxy)) = server_and_proxy(Mode { tls: true, mysql9: false, sha256_default: false }) else {
        return Ok(());
    };
    let (name, password) = SHA2.split_once(':').unwrap_or_default();
    let change =
        || mysql_async::ChangeUserOpts::default().with_user(Some(name.into())).with_pass(Some(password.into()));
    let line = |path: &str| format!("u_sha2 caching_sha2_password {path} tls ok");
    server.flush()?;
    let mut conn = mysql_async_conn(proxy.addr(), SHA2, true).await?;
    // As after a restart: the change takes full authentication, the next one fast.
    server.flush()?;
    for _ in 0..2 {
        conn.change_user(change()).await?;
        assert_eq!(current_user(&mut conn).await?.as_deref(), Some("u_sha2 tls"));
    }
    assert_eq!(server.take_log(), [line("full"), line("full"), line("fast")], "TLS client");
    let mut conn = mysql_async_conn(proxy.addr(), SHA2, false).await?;
    conn.change_user(change()).await?;
    assert_eq!(current_user(&mut conn).await?.as_deref(), Some("u_sha2 tls"));
    assert_eq!(server.take_log(), [line("fast"), line("fast")], "plain client");
    Ok(())
}

/// What the server logs for a login as mysql_native_password (which leaves the cache alone)
/// and then changes of user to `accounts` in turn, the cache emptied before: caching_sha2_password
/// full the first time, fast after; the other plugins full every time.
fn changes_seen(accounts: &[&str], server_leg: &str) -> Vec<String> {
    let mut cached = false;
    let paths = [NATIVE].iter().chain(accounts).map(|a| match plugin(a) {
        "caching_sha2_password" => (a, if std::mem::replace(&mut cached, true) { "fast" } else { "full" }),
        _ => (a, "full"),
    });
    paths.map(|(a, path)| format!("{} {} {path} {server_leg} ok", user(a), plugin(a))).collect()
}

/// COM_CHANGE_USER on every leg combination a login can take — plain → plain (the client gets
/// the server's own key), plain → TLS (rttscope's key stands in), TLS → TLS — after a login as
/// mysql_native_password: to caching_sha2_password in full (the cache emptied), again (fast),
/// and back to mysql_native_password by an auth switch; by mysql_async and by mysqlclient
/// (libmariadb's `mysql_change_user`, which also changes to sha256_password).
#[tokio::test]
async fn every_plugin_changes_user_full_and_fast_on_every_leg_combination() -> Result<()> {
    let Some((tls_server, tls_hop)) = server_and_proxy(Mode { tls: true, mysql9: false, sha256_default: false }) else {
        return Ok(());
    };
    let Some((plain_server, plain_hop)) = server_and_proxy(Mode { tls: false, mysql9: false, sha256_default: false })
    else {
        return Ok(());
    };
    let cells = [(&tls_server, &tls_hop, "plain", "tls"), (&tls_server, &tls_hop, "tls", "tls")];
    for (server, proxy, client_leg, server_leg) in
        cells.into_iter().chain([(&plain_server, &plain_hop, "plain", "plain")])
    {
        let cell = format!("client {client_leg}, long hop {server_leg}");
        let changes = [SHA2, SHA2, NATIVE];
        server.flush()?;
        server.take_log();
        let mut conn = mysql_async_conn(proxy.addr(), NATIVE, client_leg == "tls").await?;
        for account in changes {
            let (name, password) = account.split_once(':').unwrap_or_default();
            let change =
                mysql_async::ChangeUserOpts::default().with_user(Some(name.into())).with_pass(Some(password.into()));
            conn.change_user(change).await.with_context(|| format!("mysql_async, {cell}: to {name}"))?;
            assert_eq!(current_user(&mut conn).await?, Some(format!("{name} {server_leg}")), "mysql_async, {cell}");
        }
        conn.disconnect().await?;
        assert_eq!(server.take_log(), changes_seen(&changes, server_leg), "mysql_async, {cell}: the server's view");
        let changes = [SHA2, SHA2, SHA256, NATIVE];
        server.flush()?;
        server.take_log();
        let lines = features(proxy.addr(), NATIVE, "mysqlclient-change-user", &[&[client_leg][..], &changes].concat())?;
        let answers: Vec<String> = changes.iter().map(|a| format!("{}: {} {server_leg}", user(a), user(a))).collect();
        assert_eq!(lines, answers, "mysqlclient, {cell}");
        assert_eq!(server.take_log(), changes_seen(&changes, server_leg), "mysqlclient, {cell}: the server's view");
    }
    Ok(())
}

/// COM_CHANGE_USER by a plain client over the TLS long hop when the server wants the
/// password in full (its cache emptied, or sha256_password): the client asks for the server's
/// key, rttscope answers with its own as at login and sends the password over TLS. By
/// mysql_async (its own caching_sha2_password) and libmysqlclient (`mysql_change_user`, with an
/// auth switch to sha256_password and back). Before the stand-in followed COM_CHANGE_USER, the
/// key request reached the server as a password: 1045.
#[tokio::test]
async fn a_plain_client_changes_user_with_full_authentication_over_the_tls_long_hop() -> Result<()> {
    changes_user_in_full(Compressed { client: None, upstream: UpstreamCompression::Mirror }, None).await
}

/// The same with the client's leg compressed (mysql_async with zlib, libmysqlclient with
/// zstd) and the long hop not: the stand-in's answer goes out in the client's frames, in
/// step with its compressed sequence ids. Before the stand-in followed COM_CHANGE_USER on
/// compressed legs: 1045.
#[tokio::test]
async fn a_compressed_client_changes_user_with_full_authentication_over_the_tls_long_hop() -> Result<()> {
    changes_user_in_full(Compressed { client: Some("zstd"), upstream: UpstreamCompression::Off }, None).await
}

/// The same with the long hop compressed (`upstream.compression: zstd`) and the client not:
/// the COM_CHANGE_USER starts a compressed frame with sequence id 0, the commands after it
/// too (the stream written upstream is shorter than the client's by what the stand-in kept
/// from the server), and the server's packets reach the client numbered as it expects.
/// Before: 1045.
#[tokio::test]
async fn a_plain_client_changes_user_with_full_authentication_over_a_compressed_tls_long_hop() -> Result<()> {
    changes_user_in_full(Compressed { client: None, upstream: UpstreamCompression::Zstd }, Some("zstd")).await
}

/// The same with both legs compressed (`upstream.compression: mirror`: zlib for mysql_async,
/// zstd for libmysqlclient). Before: 1045.
#[tokio::test]
async fn a_compressed_client_changes_user_with_full_authentication_over_a_compressed_tls_long_hop() -> Result<()> {
    let mirror = Compressed { client: Some("zstd"), upstream: UpstreamCompression::Mirror };
    changes_user_in_full(mirror, Some("mirror")).await
}

/// A change of user through the stand-in pays the emulated link's round trips, as the login
/// does: under `inject.rtt`, full authentication — the COM_CHANGE_USER answered with a request
/// for the password in full, the key request answered by rttscope, the password sent over TLS
/// and the server's OK — takes at least two of them. Before, the exchange went at the real
/// path's pace.
#[tokio::test]
async fn a_change_of_user_through_the_stand_in_pays_the_emulated_round_trips() -> Result<()> {
    let rtt = std::time::Duration::from_millis(150);
    let mode = Mode { tls: true, mysql9: false, sha256_default: false };
    let Some((server, proxy)) = server_and_proxy_with(mode, |c| c.inject.rtt = HumanDuration(rtt)) else {
        return Ok(());
    };
    let (name, password) = SHA2.split_once(':').unwrap_or_default();
    let change = mysql_async::ChangeUserOpts::default().with_user(Some(name.into())).with_pass(Some(password.into()));
    let mut conn = mysql_async_conn(proxy.addr(), SHA2, false).await?;
    server.flush()?;
    server.take_log();
    let started = std::time::Instant::now();
    conn.change_user(change).await?;
    let took = started.elapsed();
    assert_eq!(server.take_log(), ["u_sha2 caching_sha2_password full tls ok"]);
    assert!(took >= 2 * rtt, "a change of user with full authentication took {took:?} over an emulated {rtt:?} RTT");
    Ok(())
}

/// Which legs are compressed: the client's (libmysqlclient with this algorithm, mysql_async
/// with zlib), and the long hop as `upstream.compression` says.
struct Compressed {
    client: Option<&'static str>,
    upstream: UpstreamCompression,
}

/// The server's compression line for a login, if the long hop is compressed: `long_hop` is
/// its algorithm, or `mirror` for the client's.
fn long_hop_compression(long_hop: Option<&str>, client: Option<&str>) -> Vec<String> {
    match long_hop {
        Some("mirror") => client.map(|a| format!("compression {a}")).into_iter().collect(),
        Some(algorithm) => vec![format!("compression {algorithm}")],
        None => vec![],
    }
}

/// A plain client (mysql_async, then libmysqlclient) over the TLS long hop, its leg and the
/// long hop compressed as `legs` says, changes user with full authentication, then fast, and
/// runs a statement after each change; `long_hop`: the long hop's algorithm as the server
/// logs it (see [`long_hop_compression`]).
async fn changes_user_in_full(legs: Compressed, long_hop: Option<&str>) -> Result<()> {
    let upstream = legs.upstream;
    let Some((server, proxy)) = server_and_proxy_with(Mode { tls: true, mysql9: false, sha256_default: false }, |c| {
        c.upstream.compression = upstream
    }) else {
        return Ok(());
    };
    let (name, password) = SHA2.split_once(':').unwrap_or_default();
    let change =
        || mysql_async::ChangeUserOpts::default().with_user(Some(name.into())).with_pass(Some(password.into()));
    let mut conn = mysql_async_conn_with(proxy.addr(), SHA2, false, legs.client.is_some()).await?;
    let zlib = legs.client.map(|_| "zlib");
    assert_eq!(compression_lines(&server.take_log()), long_hop_compression(long_hop, zlib), "mysql_async's login");
    server.flush()?;
    server.take_log();
    for _ in 0..2 {
        conn.change_user(change()).await?;
        assert_eq!(current_user(&mut conn).await?.as_deref(), Some("u_sha2 tls"));
    }
    let line = |user: &str, plugin: &str, path: &str| format!("{user} {plugin} {path} tls ok");
    let sha2 = "caching_sha2_password";
    assert_eq!(server.take_log(), [line("u_sha2", sha2, "full"), line("u_sha2", sha2, "fast")], "mysql_async");
    conn.disconnect().await?;
    for (from, to, plugin) in [(SHA2, SHA256, "sha256_password"), (SHA256, SHA2, sha2)] {
        server.flush()?;
        let args: Vec<&str> = [to].into_iter().chain(legs.client).collect();
        let lines = features(proxy.addr(), from, "libmysql-change-user", &args)?;
        let user = to.split(':').next().unwrap_or_default();
        assert_eq!(lines, ["change: ok".to_owned(), format!("who: (1, [('{user} tls',)])")], "libmysqlclient");
        let log = server.take_log();
        assert_eq!(compression_lines(&log), long_hop_compression(long_hop, legs.client), "libmysqlclient's login");
        assert_eq!(log.last(), Some(&line(user, plugin, "full")), "libmysqlclient: {log:?}");
    }
    Ok(())
}
