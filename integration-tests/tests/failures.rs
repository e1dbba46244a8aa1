//! Bad input and unreachable upstreams: each failure ends one connection with a clear error
//! for the client; the proxy and every other connection carry on.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use rttscope_config::HumanDuration;
use rttscope_integration_tests::fake_upstream::{
    self, CLIENT_LONG_PASSWORD, CLIENT_PLUGIN_AUTH, CLIENT_PROTOCOL_41, CLIENT_SECURE_CONNECTION, CLIENT_SSL, Ending,
    FakeUpstream, Script, handshake_response_head, native_login, ok_packet, packet, read_packet, read_until_closed,
};
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb, native_opts};
use rttscope_integration_tests::process::ProxyProcess;
use rttscope_integration_tests::proxy::proxy_to;

/// Bounds every client call: a failure must never be a hang.
const NO_HANG: Duration = Duration::from_secs(15);

async fn connect(addr: SocketAddr) -> mysql_async::Result<Conn> {
    tokio::time::timeout(NO_HANG, Conn::new(native_opts(addr))).await.expect("connecting must not hang")
}

/// Proves a connection still works end to end.
async fn assert_works(conn: &mut Conn, n: u32) {
    let echoed: Option<u32> = conn.exec_first("SELECT ?", (n,)).await.expect("healthy connection answers");
    assert_eq!(echoed, Some(n));
}

async fn cli_output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run the mariadb CLI")).await.expect("CLI thread")
}

/// An address that refuses connections while the returned socket lives: bound, never
/// listening, so no other test can take the port meanwhile.
fn refusing_addr() -> (socket2::Socket, SocketAddr) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    (socket, addr)
}

// --- Unreachable upstreams ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn refused_upstream_gives_an_err_naming_it() {
    let (_held, dead) = refusing_addr();
    let proxy = proxy_to(dead, |_| {});
    let started = Instant::now();
    let Err(mysql_async::Error::Server(e)) = connect(proxy.addr()).await else {
        panic!("expected an ERR packet from rttscope");
    };
    // connect_timeout is 5 s: a refusal must be reported at once, not after the timeout.
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    // 1429 "unable to connect to foreign data source": a server-range code, see below.
    assert_eq!((e.code, e.state.as_str()), (1429, "HY000"), "{e:?}");
    assert!(e.message.contains(&dead.to_string()) && e.message.contains("refused"), "{e:?}");
    assert_eq!(proxy.stats().upstream_connect_errors.load(Ordering::Relaxed), 1);
}

/// libmariadb (the `mariadb` CLI, mysqlclient, Connector/C) rejects an ERR from the wire whose
/// code is in the client-only ranges 2000-2999 and 5000-5999 as "2027 Received malformed
/// packet", losing the message; the code must be one a server may send.
#[tokio::test(flavor = "multi_thread")]
async fn refused_upstream_message_reaches_the_mariadb_cli() {
    let (_held, dead) = refusing_addr();
    let proxy = proxy_to(dead, |_| {});
    let out = cli_output(TestDb::shared().mariadb_cli(proxy.addr(), NATIVE.user, NATIVE.password, None)).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.starts_with("ERROR ") && !stderr.contains("ERROR 2027"), "{stderr}");
    assert!(stderr.contains(&dead.to_string()) && stderr.contains("refused"), "{stderr}");
}

/// Before the handshake no capabilities are agreed, so servers send ERR without the `#SQLSTATE`
/// marker and clients read the bytes after the code as the message.
#[tokio::test(flavor = "multi_thread")]
async fn pre_handshake_err_message_is_clean() {
    let (_held, dead) = refusing_addr();
    let proxy = proxy_to(dead, |_| {});
    let Err(mysql_async::Error::Server(e)) = connect(proxy.addr()).await else {
        panic!("expected an ERR packet from rttscope");
    };
    assert!(e.message.starts_with("rttscope:"), "client shows {:?}", e.message);
}

#[tokio::test(flavor = "multi_thread")]
async fn silent_upstream_fails_within_connect_timeout() {
    let fake = FakeUpstream::start(|_| Script::Silent).unwrap();
    let proxy = proxy_to(fake.addr(), |c| c.limits.connect_timeout = HumanDuration::from_secs(1));
    let started = Instant::now();
    let result = connect(proxy.addr()).await;
    let elapsed = started.elapsed();
    assert!(result.is_err(), "logged in through a server that never greeted");
    assert!(elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4), "failed after {elapsed:?}");
    // rttscope gave up on the upstream connection too.
    assert_eq!(fake.wait_ended(0, Duration::from_secs(5)), Some(Ending::PeerClosed));
}

/// The client should learn why, as with a refused upstream, not see a bare close, and the
/// message names the limit that ran out (`limits.connect_timeout`).
#[tokio::test(flavor = "multi_thread")]
async fn silent_upstream_gives_an_err_packet() {
    let fake = FakeUpstream::start(|_| Script::Silent).unwrap();
    let proxy = proxy_to(fake.addr(), |c| c.limits.connect_timeout = HumanDuration::from_secs(1));
    match connect(proxy.addr()).await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 1429, "{e:?}");
            assert!(e.message.contains(&fake.addr().to_string()) && e.message.contains("greeting"), "{e:?}");
            // The limit that ran out, by its name: not handshake_timeout.
            assert!(e.message.contains("(limits.connect_timeout)"), "{e:?}");
            assert!(!e.message.contains("handshake_timeout"), "{e:?}");
        }
        other => panic!("expected an ERR packet naming the upstream, got {other:?}"),
    }
}

/// Past `limits.max_connecting`, a newcomer waits for a slot for `limits.connect_timeout`,
/// then gets 1040 naming the limit; a slot held by a login the server stalls is not given up
/// (the client is not the one keeping it waiting).
#[tokio::test(flavor = "multi_thread")]
async fn a_newcomer_past_max_connecting_gets_1040_after_connect_timeout() {
    let fake = FakeUpstream::start(|_| Script::StallAfterLogin { greeting: greeting() }).unwrap();
    let proxy = proxy_to(fake.addr(), |c| {
        c.limits.max_connecting = 1;
        c.limits.connect_timeout = HumanDuration::from_secs(1);
        c.limits.handshake_timeout = HumanDuration::from_secs(5);
    });
    let addr = proxy.addr();
    let stalled = tokio::spawn(async move { connect(addr).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let Err(mysql_async::Error::Server(e)) = connect(addr).await else {
        panic!("expected an ERR packet from rttscope");
    };
    let elapsed = started.elapsed();
    assert_eq!(e.code, 1040, "{e:?}");
    assert!(e.message.contains("limits.max_connecting = 1"), "{e:?}");
    assert!(elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(3), "after {elapsed:?}");
    let Err(mysql_async::Error::Server(e)) = stalled.await.unwrap() else {
        panic!("the stalled login ends with an ERR")
    };
    assert!(e.message.contains("handshake_timeout"), "{e:?}");
}

/// A server that greets, takes the login and then hangs: the client hears why within
/// `handshake_timeout` instead of hanging until its own timeout, and the slot is freed.
#[tokio::test(flavor = "multi_thread")]
async fn upstream_stalling_mid_login_gives_an_err_within_handshake_timeout() {
    let fake = FakeUpstream::start(|_| Script::StallAfterLogin { greeting: greeting() }).unwrap();
    let proxy = proxy_to(fake.addr(), |c| c.limits.handshake_timeout = HumanDuration::from_secs(1));
    let started = Instant::now();
    let Err(mysql_async::Error::Server(e)) = connect(proxy.addr()).await else {
        panic!("expected an ERR packet from rttscope");
    };
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4), "failed after {elapsed:?}");
    assert_eq!(e.code, 1429, "{e:?}");
    assert!(e.message.contains("handshake_timeout") && e.message.contains(&fake.addr().to_string()), "{e:?}");
    assert_eq!(fake.wait_ended(0, Duration::from_secs(5)), Some(Ending::PeerClosed), "the upstream leg is closed");
    let deadline = Instant::now() + Duration::from_secs(5);
    while proxy.stats().connections_active.load(Ordering::Relaxed) != 0 {
        assert!(Instant::now() < deadline, "the stalled login still holds its slot");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unanswered_connect_gives_an_err_within_connect_timeout() {
    // Backlog 0 admits one unaccepted connection; SYNs beyond it are dropped, so a connect
    // neither succeeds nor fails — what a firewalled or dead host looks like.
    let listener = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    listener.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).unwrap();
    listener.listen(0).unwrap();
    let target = listener.local_addr().unwrap().as_socket().unwrap();
    let mut fillers = Vec::new();
    while let Ok(stream) = TcpStream::connect_timeout(&target, Duration::from_millis(300)) {
        fillers.push(stream);
        assert!(fillers.len() < 64, "the accept queue never filled");
    }

    let proxy = proxy_to(target, |c| c.limits.connect_timeout = HumanDuration::from_secs(1));
    let started = Instant::now();
    let Err(mysql_async::Error::Server(e)) = connect(proxy.addr()).await else {
        panic!("expected an ERR packet from rttscope");
    };
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4), "failed after {elapsed:?}");
    assert_eq!(e.code, 1429, "{e:?}");
    assert!(e.message.contains(&target.to_string()), "{e:?}");
    assert!(e.message.contains("(limits.connect_timeout)"), "names the setting to change: {e:?}");
}

// --- A broken upstream, played by the fake ---------------------------------------------

/// A fake upstream breaks the protocol on connection 1 (of 0, 1, 2): a good
/// connection through the same proxy works before and after; the broken one errors
/// as it would directly. `counted` is what rttscope should count it as.
async fn broken_upstream_spares_the_others(broken: Script, counted: Counted) {
    let real = TestDb::shared().upstream_addr();
    let breaks_login = matches!(broken, Script::GreetThenClose(_));
    let fake = FakeUpstream::start(move |n| if n == 1 { broken.clone() } else { Script::Relay(real) }).unwrap();
    let proxy = proxy_to(fake.addr(), |_| {});
    let mut good = connect(proxy.addr()).await.expect("connection 0 relays");
    assert_works(&mut good, 1).await;

    let bad = connect(proxy.addr()).await;
    if breaks_login {
        assert!(bad.is_err(), "logged in through a broken greeting");
    } else {
        let mut bad = bad.expect("the fake's login passes through");
        let result = tokio::time::timeout(NO_HANG, bad.query_drop("SELECT 1")).await.expect("no hang");
        assert!(result.is_err(), "a broken response passed as a result");
        // The client gives up on the connection, as it would on the server directly.
    }
    // The broken connection's upstream side closed (rttscope followed the client or the script).
    assert!(fake.wait_ended(1, Duration::from_secs(5)).is_some(), "upstream connection left open");
    let stats = proxy.stats();
    let desyncs = || stats.desync_counts().filter(|(_, n)| *n > 0).collect::<Vec<_>>();
    let counts = || {
        (
            stats.protocol_errors.load(Ordering::Relaxed),
            stats.upstream_connect_errors.load(Ordering::Relaxed),
            desyncs(),
            stats.upstream_closed_mid_response.load(Ordering::Relaxed),
        )
    };
    let expected = match counted {
        Counted::NoUsableGreeting => (0, 1, vec![], 0),
        // Not understood is forwarded anyway: counted as a desync, never a closed connection.
        Counted::Desync(reason) => (0, 0, vec![(reason, 1)], 0),
        Counted::UpstreamClosedMidResponse => (0, 0, vec![], 1),
    };
    // The connection's task counts after it has closed both sockets, so the fake can
    // see the close a moment before the count moves.
    let deadline = Instant::now() + Duration::from_secs(5);
    while counts() != expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(counts(), expected, "(protocol errors, upstream connect errors, desyncs, upstream closed mid-response)");

    assert_works(&mut good, 2).await;
    let mut fresh = connect(proxy.addr()).await.expect("a new connection after the broken one");
    assert_works(&mut fresh, 3).await;
    assert_eq!(fake.accepted(), 3);
}

#[derive(Clone, Copy)]
enum Counted {
    /// The client was told the upstream sent no usable greeting.
    NoUsableGreeting,
    /// Forwarded as it was; the state machine lost its place for this reason.
    Desync(&'static str),
    /// The upstream closed in the middle of a response.
    UpstreamClosedMidResponse,
}

fn greeting() -> Vec<u8> {
    fake_upstream::capture_greeting(TestDb::shared().upstream_addr()).expect("capture a real greeting")
}

fn after_login(response: Vec<u8>, then_close: bool) -> Script {
    Script::AfterLogin { greeting: greeting(), response, then_close }
}

/// A column count of 2, then something that is not a column definition.
fn bad_column_definition() -> Vec<u8> {
    [packet(1, &[2]), packet(2, b"\x05hello")].concat()
}

#[tokio::test(flavor = "multi_thread")]
async fn greeting_with_protocol_version_9_is_relayed_as_it_is() {
    let mut bytes = greeting();
    bytes[4] = 9;
    broken_upstream_spares_the_others(Script::GreetThenClose(bytes), Counted::Desync("protocol_version")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn truncated_greeting_then_close() {
    let bytes = greeting();
    let half = bytes[..bytes.len() / 2].to_vec();
    // The client has seen nothing yet, so it is told the upstream gave no usable greeting.
    broken_upstream_spares_the_others(Script::GreetThenClose(half), Counted::NoUsableGreeting).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn column_count_then_garbage() {
    broken_upstream_spares_the_others(
        after_login(bad_column_definition(), true),
        Counted::Desync("upstream_malformed"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn response_with_wrong_sequence_id() {
    broken_upstream_spares_the_others(after_login(ok_packet(5), false), Counted::Desync("upstream_sequence")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn response_header_promising_1000_bytes_then_close() {
    let response = [&[0xE8, 0x03, 0x00, 0x01][..], b"only ten b"].concat();
    // A server that dies mid-packet is the server closing, not a protocol error.
    broken_upstream_spares_the_others(after_login(response, true), Counted::UpstreamClosedMidResponse).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_upstream_logs_one_warning_naming_it() {
    let real = TestDb::shared().upstream_addr();
    let bad = after_login(bad_column_definition(), true);
    // Connection 0 is ProxyProcess's readiness probe, 1 a good client, 2 the broken one.
    let fake = FakeUpstream::start(move |n| if n == 2 { bad.clone() } else { Script::Relay(real) }).unwrap();
    let proxy = ProxyProcess::start(&format!("upstream: {}\n", fake.addr())).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.accepted() < 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(fake.accepted(), 1, "the readiness probe reached the fake");
    let mut good = connect(proxy.listen()).await.unwrap();
    let mut broken = connect(proxy.listen()).await.unwrap();
    let answered = tokio::time::timeout(NO_HANG, broken.query_drop("SELECT 1")).await.expect("no hang");
    assert!(answered.is_err());
    drop(broken);
    assert_eq!(fake.wait_ended(2, Duration::from_secs(5)), Some(Ending::ClosedByScript));
    assert_works(&mut good, 7).await;

    let log = proxy.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    for needle in ["lost track of the protocol", "upstream_malformed", "conn.id=3"] {
        assert!(warnings[0].contains(needle), "no {needle:?} in {:?}", warnings[0]);
    }
    assert!(!log.to_lowercase().contains("panic"), "{log}");
}

// --- Malformed client input ------------------------------------------------------------

/// A raw client that has read the greeting: (stream, greeting payload).
fn raw_client(addr: SocketAddr) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(NO_HANG)).unwrap();
    let (seq, greeting) = read_packet(&mut stream).expect("greeting through rttscope");
    assert_eq!((seq, greeting.first()), (0, Some(&10)), "a HandshakeV10");
    (stream, greeting)
}

/// What arrived before rttscope closed the connection. Promptly: well before connect_timeout
/// (5 s) would end a stalled handshake anyway.
fn closed(stream: &mut TcpStream) -> Vec<u8> {
    let started = Instant::now();
    let got = read_until_closed(stream).expect("rttscope closes the connection");
    assert!(started.elapsed() < Duration::from_secs(3), "closed only after {:?}", started.elapsed());
    got
}

/// Logs in as `rtt_native` with mysql_native_password, by hand.
fn raw_login(addr: SocketAddr) -> TcpStream {
    let (mut stream, greeting) = raw_client(addr);
    native_login(&mut stream, &greeting, NATIVE.user, NATIVE.password, DB);
    // COM_PING proves the session works before the test breaks it.
    stream.write_all(&packet(0, &[0x0E])).unwrap();
    let (seq, pong) = read_packet(&mut stream).unwrap();
    assert_eq!((seq, pong.first()), (1, Some(&0x00)), "COM_PING OK, got {pong:?}");
    stream
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_handshake_responses_close_only_that_connection() {
    let proxy = proxy_to(TestDb::shared().upstream_addr(), |_| {});
    let mut good = connect(proxy.addr()).await.unwrap();
    let addr = proxy.addr();
    tokio::task::spawn_blocking(move || {
        // Garbage: protocol 4.1 flags, then nothing where the user name should be: an ERR
        // saying so (the client still reads), then close.
        let (mut garbage, _) = raw_client(addr);
        garbage.write_all(&packet(1, &[0xFF; 5])).unwrap();
        let reply = closed(&mut garbage);
        let (seq, err) = read_packet(&mut reply.as_slice()).expect("an ERR packet");
        assert_eq!((seq, err[0], u16::from_le_bytes([err[1], err[2]])), (2, 0xFF, 1043), "{err:?}");
        assert!(String::from_utf8_lossy(&err).contains("malformed handshake response"), "{err:?}");

        // Truncated: a header promising 100 bytes, 10 bytes, then the client stops sending.
        let (mut truncated, _) = raw_client(addr);
        truncated.write_all(&[100, 0, 0, 1]).unwrap();
        truncated.write_all(&[0xAB; 10]).unwrap();
        truncated.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(closed(&mut truncated).is_empty());
    })
    .await
    .unwrap();
    assert_works(&mut good, 4).await;
    let mut fresh = connect(proxy.addr()).await.unwrap();
    assert_works(&mut fresh, 5).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_handshake_response_is_refused_without_buffering() {
    let db = TestDb::shared();
    let proxy = ProxyProcess::start(&format!("upstream: {}\n", db.upstream_addr())).unwrap();
    let mut good = connect(proxy.listen()).await.unwrap();
    assert_works(&mut good, 1).await;
    let (rss_before, _) = proxy.memory_kib().unwrap();
    let addr = proxy.listen();
    let (written, elapsed) = tokio::task::spawn_blocking(move || {
        let (mut stream, _) = raw_client(addr);
        stream.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        let started = Instant::now();
        stream.write_all(&[0xFF, 0xFF, 0xFF, 1]).unwrap();
        // Keep sending the promised 16 MiB: if rttscope buffered it, every write would succeed.
        let chunk = vec![0x61u8; 256 << 10];
        let mut written = 0usize;
        while written < (16 << 20) {
            match stream.write(&chunk) {
                Ok(n) => written += n,
                Err(e) => {
                    assert!(matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe), "{e}");
                    break;
                }
            }
        }
        (written, started.elapsed())
    })
    .await
    .unwrap();
    assert!(written < (16 << 20), "rttscope swallowed all {written} bytes");
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?} to refuse");
    let (rss_after, _) = proxy.memory_kib().unwrap();
    assert!(rss_after < rss_before + 4096, "RSS grew from {rss_before} to {rss_after} KiB");
    assert_works(&mut good, 2).await;
    assert!(proxy.log().contains("handshake packet"), "{}", proxy.log());
}

/// An HTTP request sent to the MySQL port is logged as what it is, not as a packet too large
/// to accept; the connection closes and rttscope carries on.
#[tokio::test(flavor = "multi_thread")]
async fn an_http_request_is_named_as_not_mysql() {
    let db = TestDb::shared();
    let proxy = ProxyProcess::start(&format!("upstream: {}\n", db.upstream_addr())).unwrap();
    let addr = proxy.listen();
    tokio::task::spawn_blocking(move || {
        let (mut stream, _) = raw_client(addr);
        stream.write_all(b"GET / HTTP/1.1\r\nHost: db\r\n\r\n").unwrap();
        closed(&mut stream);
    })
    .await
    .unwrap();
    let wanted = |l: &str| l.contains("client does not speak the MySQL protocol: its first bytes are text (\"GET \")");
    assert!(proxy.log_line(wanted, Duration::from_secs(5)).is_some(), "{}", proxy.log());
    let mut good = connect(proxy.listen()).await.unwrap();
    assert_works(&mut good, 1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn command_with_wrong_sequence_id_reaches_the_server_as_sent() {
    let db = TestDb::shared();
    let proxy = proxy_to(db.upstream_addr(), |_| {});
    let mut good = connect(proxy.addr()).await.unwrap();
    let (addr, direct) = (proxy.addr(), db.upstream_addr());
    let (proxied, direct) = tokio::task::spawn_blocking(move || {
        // The server itself judges a command with sequence id 3; the client hears it.
        let answer = |addr| {
            let mut stream = raw_login(addr);
            stream.write_all(&packet(3, b"\x03SELECT 1")).unwrap();
            closed(&mut stream)
        };
        (answer(addr), answer(direct))
    })
    .await
    .unwrap();
    assert_eq!(proxied, direct, "what the server said reaches the client unchanged");
    let stats = proxy.stats();
    assert_eq!(stats.protocol_errors.load(Ordering::Relaxed), 0);
    assert_eq!(stats.desync_counts().find(|(k, _)| *k == "client_sequence").map(|(_, n)| n), Some(1));
    assert_works(&mut good, 6).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_request_gets_an_err_saying_so_when_tls_is_off() {
    let proxy = proxy_to(TestDb::shared().upstream_addr(), |c| c.listen.tls.mode = rttscope_config::ListenTlsMode::Off);
    let addr = proxy.addr();
    let reply = tokio::task::spawn_blocking(move || {
        let (mut stream, greeting) = raw_client(addr);
        assert_eq!(greeting_caps(&greeting) & CLIENT_SSL, 0, "TLS is not offered");
        let caps =
            CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SSL | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH;
        stream.write_all(&packet(1, &handshake_response_head(caps))).unwrap();
        closed(&mut stream)
    })
    .await
    .unwrap();
    let (seq, err) = read_packet(&mut reply.as_slice()).expect("an ERR packet, then close");
    assert_eq!(seq, 2);
    // 1043 "bad handshake": a server-range code libmariadb will show.
    assert_eq!((err[0], u16::from_le_bytes([err[1], err[2]])), (0xFF, 1043), "{err:?}");
    let message = String::from_utf8_lossy(&err[9..]);
    assert!(message.contains("rttscope") && message.contains("TLS"), "{message}");
}

/// The capability flags of a greeting payload (low 16 bits and high 16 bits).
fn greeting_caps(greeting: &[u8]) -> u32 {
    let version_end = greeting.iter().skip(1).position(|&b| b == 0).map_or(0, |p| p + 2);
    let low_at = version_end + 4 + 8 + 1;
    let high_at = low_at + 2 + 1 + 2;
    let u16_at = |at: usize| greeting.get(at..at + 2).map_or(0, |b| u32::from(u16::from_le_bytes([b[0], b[1]])));
    u16_at(low_at) | (u16_at(high_at) << 16)
}

// --- Either side going away mid-session ------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn client_killed_mid_result_ends_the_upstream_query() {
    const SQL: &str = "SELECT REPEAT('x', 1000) FROM seq_1_to_1000000";
    let db = TestDb::shared();
    let proxy = ProxyProcess::start(&format!("upstream: {}\n", db.upstream_addr())).unwrap();
    let mut cli = db.mariadb_cli(proxy.listen(), NATIVE.user, NATIVE.password, Some(DB));
    cli.args(["--quick", "-N", "-e", SQL]).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cli.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let read = tokio::task::spawn_blocking(move || {
        let mut buf = vec![0u8; 100_000];
        stdout.read_exact(&mut buf).map(|()| stdout)
    });
    let stdout = tokio::time::timeout(NO_HANG, read).await.expect("rows arrive").unwrap().expect("100 KB of rows");

    let mut admin = Conn::from_url(db.admin_url()).await.unwrap();
    let running =
        "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? AND INFO LIKE 'SELECT REPEAT%seq_1_to_1000000%'";
    let ids: Vec<u64> = admin.exec(running, (NATIVE.user,)).await.unwrap();
    assert_eq!(ids.len(), 1, "the query runs upstream");
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdout);

    let deadline = Instant::now() + Duration::from_secs(10);
    let gone = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?";
    while admin.exec_first::<u64, _, _>(gone, (ids[0],)).await.unwrap() != Some(0) {
        assert!(Instant::now() < deadline, "upstream connection {} still there 10 s after the client died", ids[0]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut fresh = connect(proxy.listen()).await.unwrap();
    assert_works(&mut fresh, 8).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn server_side_kill_ends_the_client_connection() {
    let db = TestDb::shared();
    let proxy = proxy_to(db.upstream_addr(), |_| {});
    let mut conn = connect(proxy.addr()).await.unwrap();
    let id: u64 = conn.query_first("SELECT CONNECTION_ID()").await.unwrap().unwrap();
    let mut admin = Conn::from_url(db.admin_url()).await.unwrap();
    admin.query_drop(format!("KILL {id}")).await.unwrap();

    // rttscope notices the upstream hangup by itself and closes the client side.
    let deadline = Instant::now() + Duration::from_secs(10);
    while proxy.stats().connections_active.load(Ordering::Relaxed) != 0 {
        assert!(Instant::now() < deadline, "the killed connection is still open in rttscope");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let result = tokio::time::timeout(NO_HANG, conn.query_drop("SELECT 1")).await.expect("no hang");
    match result {
        Err(mysql_async::Error::Server(e)) => {
            assert!([1927, 2006, 2013].contains(&e.code), "{e:?}")
        }
        Err(_) => {}
        Ok(()) => panic!("a query on a killed connection succeeded"),
    }
    let mut fresh = connect(proxy.addr()).await.unwrap();
    assert_works(&mut fresh, 9).await;
}
