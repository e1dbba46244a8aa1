//! The admin API as an attacker meets it, through the real binary: changes need the
//! token, a foreign Host is refused (DNS rebinding), forms cannot post (CSRF), a slowloris
//! is cut off without blocking anyone, huge values are refused by name while MySQL
//! traffic carries on, connections are capped, a wide-open bind refuses to start, and
//! `admin: off` serves nothing. Requests are written by hand, so each header is exactly
//! what the test says.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::*;
use rttscope_config::ADMIN_TOKEN_ENV;
use rttscope_integration_tests::mariadb::{NATIVE, TestDb};
use rttscope_integration_tests::process::{ListeningChild, ProxyProcess, free_port, rttscope_binary};

const TOKEN: &str = "admin-security-test-token";

fn upstream_yaml() -> String {
    format!("upstream: {}\n", TestDb::shared().upstream_addr())
}

/// rttscope with `admin_keys` in its admin section and [`TOKEN`] in its environment
/// (`with_token`), or no token at all.
fn start(admin_keys: &str, with_token: bool) -> ProxyProcess {
    ProxyProcess::start_with_admin(admin_keys, &upstream_yaml(), |cmd| {
        cmd.env_remove(ADMIN_TOKEN_ENV);
        if with_token {
            cmd.env(ADMIN_TOKEN_ENV, TOKEN);
        }
    })
    .unwrap_or_else(|e| panic!("{e:#}"))
}

/// A reply: status (0 when the connection closed without one) and body.
struct Reply {
    status: u16,
    body: String,
}

/// Sends one request with exactly `headers` (plus `Content-Length` and
/// `Connection: close`) and reads the reply to the end.
fn request(admin: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut stream = TcpStream::connect(admin).expect("connect to the admin API");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    // The server may answer (and close) before it has read everything: ignore write errors.
    let _ = stream.write_all(text.as_bytes());
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    let status = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Reply { status, body }
}

/// `request` with the right Host and, if `token`, the bearer token.
fn call(admin: SocketAddr, method: &str, path: &str, token: Option<&str>, content_type: &str, body: &str) -> Reply {
    let host = admin.to_string();
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Host", host.as_str())];
    if let Some(auth) = &auth {
        headers.push(("Authorization", auth));
    }
    if !content_type.is_empty() {
        headers.push(("Content-Type", content_type));
    }
    request(admin, method, path, &headers, body)
}

fn inject_is_off(admin: SocketAddr) -> bool {
    let reply = call(admin, "GET", "/inject", None, "", "");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let inject: rttscope_config::Inject = serde_json::from_str(&reply.body).unwrap();
    !inject.is_active()
}

const JSON: &str = "application/json";

#[test]
fn changes_need_the_token() {
    let proxy = start("", true);
    let admin = proxy.admin();
    let change = r#"{"rtt": "5ms"}"#;
    for token in [None, Some("wrong-token-of-some-length"), Some("")] {
        let reply = call(admin, "PUT", "/inject", token, JSON, change);
        assert_eq!(reply.status, 401, "PUT /inject with {token:?}: {}", reply.body);
        let reply = call(admin, "POST", "/reset", token, JSON, "{}");
        assert_eq!(reply.status, 401, "POST /reset with {token:?}: {}", reply.body);
    }
    assert!(inject_is_off(admin), "nothing changed");
    // Reads stay open on loopback: a Prometheus scrape needs no token.
    for path in ["/metrics", "/report", "/connections", "/healthz"] {
        assert_eq!(call(admin, "GET", path, None, "", "").status, 200, "{path}");
    }
    assert_eq!(call(admin, "PUT", "/inject", Some(TOKEN), JSON, change).status, 200);
    assert!(!inject_is_off(admin));
    assert_eq!(call(admin, "POST", "/reset", Some(TOKEN), JSON, "{}").status, 200);

    // The CLI sends the token from --token-file or the environment.
    let url = format!("http://{admin}");
    let cli = |args: &[&str], env_token: Option<&str>| {
        let mut cmd = Command::new(rttscope_binary().unwrap());
        cmd.args(args).env_remove(ADMIN_TOKEN_ENV);
        if let Some(t) = env_token {
            cmd.env(ADMIN_TOKEN_ENV, t);
        }
        cmd.output().unwrap()
    };
    let out = cli(&["inject", "--admin", &url, "--rtt", "8ms"], None);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("401") && stderr.contains("give the token with --token-file FILE"), "{stderr}");
    let out = cli(&["inject", "--admin", &url, "--rtt", "8ms"], Some("not-the-token-but-long-enough"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("is not this rttscope's"), "{stderr}");
    // The server logs the wrong token's attempt (where from, what), never the token itself.
    let logged = proxy.log_line(|l| l.contains("admin API: a wrong bearer token was refused"), Duration::from_secs(5));
    assert!(logged.is_some_and(|l| l.contains("PUT") && l.contains("/inject")), "{}", proxy.log());
    assert!(!proxy.log().contains("not-the-token-but-long-enough"), "the offered token reached the log");
    let token_file = proxy.dir().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let file = token_file.to_str().unwrap();
    let out = cli(&["inject", "--admin", &url, "--token-file", file, "--rtt", "8ms"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("rtt: 8ms"));
    let out = cli(&["inject", "--admin", &url, "--off"], Some(TOKEN));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(inject_is_off(admin));
    let out = cli(&["report", "--admin", &url, "--token-file", file], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Without a token configured, nothing can change state at all.
    let open = start("", false);
    let reply = call(open.admin(), "PUT", "/inject", Some(TOKEN), JSON, change);
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert!(reply.body.contains(ADMIN_TOKEN_ENV) && reply.body.contains("restart it with"), "{}", reply.body);
    assert!(inject_is_off(open.admin()));
}

#[test]
fn a_foreign_host_is_refused() {
    let proxy = start("", true);
    let admin = proxy.admin();
    let port = admin.port();
    let auth = format!("Bearer {TOKEN}");
    for host in [format!("evil.example:{port}"), "evil.example".to_owned(), format!("127.0.0.1:{}", port + 1)] {
        let reply = request(admin, "GET", "/report", &[("Host", &host)], "");
        assert_eq!(reply.status, 421, "GET with Host {host}: {}", reply.body);
        let headers = [("Host", host.as_str()), ("Authorization", &auth), ("Content-Type", JSON)];
        let reply = request(admin, "PUT", "/inject", &headers, r#"{"rtt": "5ms"}"#);
        assert_eq!(reply.status, 421, "PUT with Host {host}: {}", reply.body);
    }
    assert_eq!(request(admin, "GET", "/healthz", &[], "").status, 421, "no Host at all");
    assert!(inject_is_off(admin));
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}"), "localhost".to_owned()] {
        assert_eq!(request(admin, "GET", "/healthz", &[("Host", &host)], "").status, 200, "{host}");
    }
    let host = format!("rttscope.internal:{port}");
    assert_eq!(request(admin, "GET", "/healthz", &[("Host", &host)], "").status, 421, "a name not configured");

    // A name the operator gives (say, behind a reverse proxy) is accepted too.
    let named = start("  hosts: [rttscope.internal]\n", true);
    let host = format!("rttscope.internal:{}", named.admin().port());
    assert_eq!(request(named.admin(), "GET", "/healthz", &[("Host", &host)], "").status, 200, "{host}");
}

#[test]
fn only_json_can_change_state() {
    let proxy = start("", true);
    let admin = proxy.admin();
    for content_type in ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain", ""] {
        let reply = call(admin, "PUT", "/inject", Some(TOKEN), content_type, r#"{"rtt": "5ms"}"#);
        assert_eq!(reply.status, 415, "PUT as {content_type:?}: {}", reply.body);
        let reply = call(admin, "POST", "/reset", Some(TOKEN), content_type, "a=b");
        assert_eq!(reply.status, 415, "POST as {content_type:?}: {}", reply.body);
    }
    assert!(inject_is_off(admin));
    // A GET never changes anything, whatever it says.
    assert_eq!(call(admin, "GET", "/reset", Some(TOKEN), JSON, "{}").status, 405);

    // Heads and bodies have limits (16 KiB, 64 KiB by default).
    let huge = "x".repeat(20 * 1024);
    let host = admin.to_string();
    let reply = request(admin, "GET", "/healthz", &[("Host", &host), ("X-Padding", &huge)], "");
    assert_eq!(reply.status, 431, "{}", reply.body);
    let users: Vec<String> = (0..1000).map(|i| format!("user-{i:0>100}")).collect();
    let body = serde_json::json!({"rtt": "5ms", "scope": {"users": users}}).to_string();
    assert!(body.len() > 64 * 1024);
    let reply = call(admin, "PUT", "/inject", Some(TOKEN), JSON, &body);
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert!(inject_is_off(admin));
}

/// How long until the server closes `stream`, feeding it a byte of `trickle` every
/// 250 ms meanwhile; `None` if it is still open after `limit`.
fn closed_after(mut stream: TcpStream, trickle: bool, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    stream.set_read_timeout(Some(Duration::from_millis(250))).unwrap();
    let mut buf = [0u8; 256];
    while started.elapsed() < limit {
        if trickle && stream.write_all(b"x").is_err() {
            return Some(started.elapsed());
        }
        match stream.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Some(started.elapsed()),
        }
    }
    None
}

#[test]
fn a_slowloris_is_cut_off_and_blocks_nobody() {
    let proxy = start("", true);
    let admin = proxy.admin();
    let mut slow = TcpStream::connect(admin).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: ").unwrap();
    let silent = TcpStream::connect(admin).unwrap();
    // The default admin.header_timeout is 5 s.
    let limit = Duration::from_secs(12);
    let slow = std::thread::spawn(move || closed_after(slow, true, limit));
    let silent = std::thread::spawn(move || closed_after(silent, false, limit));
    for _ in 0..5 {
        let started = Instant::now();
        assert_eq!(call(admin, "GET", "/healthz", None, "", "").status, 200);
        assert!(started.elapsed() < Duration::from_secs(1), "blocked for {:?}", started.elapsed());
        std::thread::sleep(Duration::from_millis(500));
    }
    for (what, handle) in [("a client trickling its headers", slow), ("a client sending nothing", silent)] {
        let cut = handle.join().unwrap();
        assert!(cut.is_some_and(|d| d >= Duration::from_secs(4) && d < Duration::from_secs(8)), "{what}: {cut:?}");
    }
}

/// Clients holding every admin slot (`admin.max_connections`, 32 by default) leave health
/// checks their own headroom: `/healthz` answers 200 at once, while anything else is told
/// the API is busy (503). Before, the health check got the 503 too, and an orchestrator
/// restarted a healthy proxy.
#[test]
fn health_checks_get_through_when_every_admin_slot_is_taken() {
    let proxy = start("", true);
    let admin = proxy.admin();
    let mut holders: Vec<TcpStream> = (0..32).map(|_| TcpStream::connect(admin).unwrap()).collect();
    for holder in &mut holders {
        holder.write_all(b"GET /metrics HTTP/1.1\r\nHost: ").unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(call(admin, "GET", "/metrics", None, "", "").status, 503, "every slot is taken");
    for _ in 0..3 {
        let started = Instant::now();
        let reply = call(admin, "GET", "/healthz", None, "", "");
        assert_eq!((reply.status, reply.body.as_str()), (200, "ok\n"));
        assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    }
    // The guard still stands in the headroom: a Host that does not name the API is refused.
    let rebound = std::net::TcpStream::connect(admin).and_then(|mut s| {
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")?;
        let mut reply = String::new();
        std::io::Read::read_to_string(&mut s, &mut reply)?;
        Ok(reply)
    });
    assert!(rebound.unwrap().starts_with("HTTP/1.1 421"), "the guard checks health requests too");
    drop(holders);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_values_are_refused_by_name_and_mysql_carries_on() {
    let proxy = start("", true);
    let admin = proxy.admin();
    let opts = TestDb::shared().opts_via(proxy.listen(), NATIVE.user, NATIVE.password);
    let mut open = Conn::new(opts.clone()).await.unwrap();
    for (body, key) in [
        (r#"{"rtt": "1000000h"}"#, "rtt"),
        (r#"{"to_client": {"delay": "18446744073709551615s"}}"#, "to_client.delay"),
        (r#"{"to_upstream": {"delay": "61s"}}"#, "to_upstream.delay"),
        (r#"{"window": "16EiB"}"#, "window"),
        (r#"{"window": "18446744073709551615"}"#, "window"),
        (r#"{"bandwidth": "1bit"}"#, "bandwidth"),
        (r#"{"bandwidth": "18446744073709551615bit"}"#, "bandwidth"),
    ] {
        let reply = tokio::task::block_in_place(|| call(admin, "PUT", "/inject", Some(TOKEN), JSON, body));
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        let error: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(error["problems"][0]["key"], key, "{body}: {error}");
    }
    assert!(tokio::task::block_in_place(|| inject_is_off(admin)));
    // The connection open all along and a new one both work, undelayed.
    for conn in [&mut open, &mut Conn::new(opts).await.unwrap()] {
        let started = Instant::now();
        let one: Option<u8> = conn.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    }
}

#[test]
fn connections_over_the_cap_are_turned_away() {
    // The default admin.max_connections is 32.
    let proxy = start("", true);
    let admin = proxy.admin();
    let held: Vec<TcpStream> = (0..32)
        .map(|_| {
            let mut s = TcpStream::connect(admin).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // Anything but /healthz, which has headroom of its own (the test above).
    let reply = call(admin, "GET", "/metrics", None, "", "");
    assert!(reply.status == 503 || reply.status == 0, "connection 33 got {}: {}", reply.status, reply.body);
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(3);
    while call(admin, "GET", "/healthz", None, "", "").status != 200 {
        assert!(Instant::now() < deadline, "slots not freed when clients left");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// rttscope with a config whose admin section is `admin` verbatim.
fn command_with(admin: &str, dir: &std::path::Path) -> (Command, SocketAddr) {
    let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let config = dir.join("rttscope.yaml");
    std::fs::write(&config, format!("listen: {listen}\n{admin}{}", upstream_yaml())).unwrap();
    let mut cmd = Command::new(rttscope_binary().unwrap());
    cmd.arg("--config").arg(&config).env_remove(ADMIN_TOKEN_ENV);
    (cmd, listen)
}

#[test]
fn beyond_loopback_it_needs_a_token_to_start_and_for_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (mut cmd, listen) = command_with(&format!("admin: 0.0.0.0:{port}\n"), dir.path());
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(status.is_some_and(|s| !s.success()), "started without a token: {status:?}\n{stderr}");
    assert!(
        stderr.contains("admin.token") && stderr.contains(ADMIN_TOKEN_ENV) && stderr.contains("0.0.0.0"),
        "{stderr}"
    );
    assert!(TcpStream::connect(listen).is_err(), "nothing listens");
    // check-config says so before anyone tries to start it.
    let out = Command::new(rttscope_binary().unwrap())
        .arg("check-config")
        .arg(dir.path().join("rttscope.yaml"))
        .env_remove(ADMIN_TOKEN_ENV)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("admin.token") && stderr.contains(ADMIN_TOKEN_ENV), "{stderr}");

    let (mut cmd, listen) = command_with(&format!("admin: 0.0.0.0:{port}\n"), dir.path());
    cmd.env(ADMIN_TOKEN_ENV, TOKEN);
    let _running = ListeningChild::spawn(cmd, listen, &|| TcpStream::connect(listen).is_ok()).unwrap();
    let admin = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(admin).is_err() {
        assert!(Instant::now() < deadline, "admin API not listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    for path in ["/metrics", "/report", "/healthz"] {
        assert_eq!(call(admin, "GET", path, None, "", "").status, 401, "{path} without the token");
        assert_eq!(call(admin, "GET", path, Some(TOKEN), "", "").status, 200, "{path} with the token");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_off_serves_nothing_and_relays_as_ever() {
    let proxy = start("  enabled: false\n", false);
    assert!(TcpStream::connect(proxy.admin()).is_err(), "nothing listens on the admin address");
    let mut conn = Conn::new(TestDb::shared().opts_via(proxy.listen(), NATIVE.user, NATIVE.password)).await.unwrap();
    let one: Option<u8> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

#[test]
fn a_body_that_does_not_arrive_in_time_gets_408() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("admin-token");
    std::fs::write(&token_file, format!("  {TOKEN}\n")).unwrap();
    let keys = format!("  token_file: {}\n  body_timeout: 1s\n", token_file.display());
    let proxy = start(&keys, false);
    let admin = proxy.admin();
    // The token from admin.token_file opens the door ...
    assert_eq!(call(admin, "POST", "/reset", Some(TOKEN), JSON, "{}").status, 200);
    // ... but a body promised and never finished is cut off after admin.body_timeout.
    let mut stream = TcpStream::connect(admin).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "PUT /inject HTTP/1.1\r\nHost: {admin}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: {JSON}\r\n\
         Content-Length: 100\r\n\r\n{{\"rtt\": "
    );
    let started = Instant::now();
    stream.write_all(head.as_bytes()).unwrap();
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(started.elapsed() >= Duration::from_millis(900) && started.elapsed() < Duration::from_secs(4));
    assert!(inject_is_off(admin));
}
