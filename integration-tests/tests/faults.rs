//! Faults of the network and of peers that do unusual but legal things: an upstream
//! blackholed after login, resets mid-handshake from either side, half-closes from either
//! side, a client that reads a large result very slowly. Each checks what the client gets,
//! that the slot is freed and that other connections carry on.

use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use rttscope_integration_tests::fake_upstream::{
    Ending, FakeUpstream, Script, com_query, native_login, ok_packet, read_packet, read_result, read_until_closed,
    reset,
};
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb, native_opts};
use rttscope_integration_tests::process::ProxyProcess;
use rttscope_integration_tests::proxy::{TestProxy, proxy_to};
use rttscope_integration_tests::skip;
use rttscope_integration_tests::wan::{WanConfig, WanLink};

/// Bounds every client call: a failure must never be a hang.
const NO_HANG: Duration = Duration::from_secs(20);

async fn connect(addr: SocketAddr) -> mysql_async::Result<Conn> {
    tokio::time::timeout(NO_HANG, Conn::new(native_opts(addr))).await.expect("connecting must not hang")
}

async fn assert_works(conn: &mut Conn, n: u32) {
    let echoed: Option<u32> = conn.exec_first("SELECT ?", (n,)).await.expect("healthy connection answers");
    assert_eq!(echoed, Some(n));
}

fn greeting() -> Vec<u8> {
    rttscope_integration_tests::fake_upstream::capture_greeting(TestDb::shared().upstream_addr())
        .expect("capture a real greeting")
}

/// Waits until rttscope's active-connections gauge is 0 and `/connections` lists none.
async fn assert_no_connection_left(proxy: &TestProxy, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let admin = proxy.admin_client();
    loop {
        let active = proxy.stats().connections_active.load(Ordering::Relaxed);
        let listed = tokio::task::block_in_place(|| admin.get("/connections")).expect("GET /connections");
        let listed: serde_json::Value = serde_json::from_str(&listed).expect("JSON");
        let count = listed.as_array().map_or(usize::MAX, Vec::len);
        if active == 0 && count == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: gauge {active}, /connections lists {count}: {listed}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// --- Raw protocol clients ------------------------------------------------------------------

/// Logs in as `rtt_native` with mysql_native_password, by hand, on `stream`.
fn raw_login_on(mut stream: TcpStream) -> TcpStream {
    stream.set_read_timeout(Some(NO_HANG)).unwrap();
    let (_, greeting) = read_packet(&mut stream).expect("greeting");
    native_login(&mut stream, &greeting, NATIVE.user, NATIVE.password, DB);
    stream
}

fn raw_login(addr: SocketAddr) -> TcpStream {
    raw_login_on(TcpStream::connect(addr).unwrap())
}

// --- A blackholed upstream ------------------------------------------------------------------

/// The long hop goes dark after login — every packet dropped, no RST, no ICMP (a firewall
/// that drops, a dead path) — while a command waits for its answer. The kernel retransmits
/// the command until `relay.user_timeout` (TCP_USER_TIMEOUT) declares the path dead; the
/// client must then get an ERR saying so, once that expires — not wait for the kernel's
/// ~15 minutes — the slot must be freed, one line logged naming it, and a connection that sat
/// idle during the outage must still work once the path is back.
#[tokio::test(flavor = "multi_thread")]
async fn blackholed_upstream_gives_an_err_within_user_timeout() {
    if let Err(why) = WanLink::available() {
        return skip(why);
    }
    let link = WanLink::start(WanConfig::with_rtt(Duration::from_millis(2))).unwrap();
    let real = TestDb::shared().upstream_addr();
    // The far end of the long hop: a relay to the real server, listening in the server's
    // namespace; rttscope runs in the client's, and the test reaches it through a bridge.
    let far = link.in_namespace(link.server_ns(), || TcpListener::bind("0.0.0.0:0")).unwrap().unwrap();
    let far_port = far.local_addr().unwrap().port();
    let _fake = FakeUpstream::start_on(far, move |_| Script::Relay(real)).unwrap();
    let yaml = format!("upstream: {}:{far_port}\nrelay:\n  user_timeout: 2s\n", link.server_ip());
    let proxy = ProxyProcess::start_in_namespace(&link, link.client_ns(), &yaml).unwrap();
    let bridge = link.bridge(link.client_ns(), proxy.listen()).unwrap();

    let mut idle = connect(bridge.addr()).await.expect("login over the link");
    let mut victim = connect(bridge.addr()).await.expect("login over the link");
    assert_works(&mut victim, 1).await;

    link.set_cut(true);
    let started = Instant::now();
    let result = tokio::time::timeout(NO_HANG, victim.query_drop("SELECT 1")).await.expect("no hang");
    let elapsed = started.elapsed();
    link.set_cut(false);
    eprintln!("blackholed: {result:?} after {elapsed:?}; link lost {:?}", link.stats());
    assert!(
        elapsed >= Duration::from_millis(1500) && elapsed < Duration::from_secs(8),
        "the command ended after {elapsed:?}, user_timeout is 2 s"
    );
    match result {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!((e.code, e.state.as_str()), (1159, "08S01"), "{e:?}");
            assert!(e.message.contains("user_timeout") && e.message.contains(&far_port.to_string()), "{e:?}");
        }
        other => panic!("expected an ERR naming the dead upstream, got {other:?}"),
    }

    // The slot is freed: only `idle` is left.
    let admin = proxy.admin();
    let active = || {
        let metrics = link
            .in_namespace(link.client_ns(), || {
                rttscope::cli::admin_client::AdminClient::new(&format!("http://{admin}"), None).get("/metrics")
            })
            .unwrap()
            .expect("GET /metrics");
        rttscope_integration_tests::legs::samples(&metrics, "rttscope_connections_active").get("").map(|v| *v as u64)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while active() != Some(1) {
        assert!(Instant::now() < deadline, "connections_active is {:?}, expected 1 (the idle one)", active());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_works(&mut idle, 2).await;
    let mut fresh = connect(bridge.addr()).await.expect("a new login after the outage");
    assert_works(&mut fresh, 3).await;

    let log = proxy.log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("user_timeout")).collect();
    assert_eq!(lines.len(), 1, "one line naming the dead upstream:\n{log}");
    assert!(lines[0].contains(" INFO ") || lines[0].contains(" WARN "), "{}", lines[0]);
    assert!(!log.contains("closing connection"), "not a protocol error:\n{log}");
}

// --- Resets mid-handshake ----------------------------------------------------------------

/// The upstream greets and then resets (RST, not FIN). The client has the greeting and sends
/// its login; it must get an ERR naming the upstream rather than a bare close, and nothing of
/// the connection may be left in rttscope.
#[tokio::test(flavor = "multi_thread")]
async fn upstream_reset_mid_handshake_gives_an_err_and_leaks_nothing() {
    let fake = FakeUpstream::start(|_| Script::GreetThenReset(greeting())).unwrap();
    let proxy = proxy_to(fake.addr(), |_| {});
    match connect(proxy.addr()).await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 1429, "{e:?}");
            assert!(e.message.contains(&fake.addr().to_string()), "{e:?}");
        }
        other => panic!("expected an ERR naming the upstream, got {other:?}"),
    }
    assert_eq!(fake.wait_ended(0, Duration::from_secs(5)), Some(Ending::ClosedByScript));
    assert_no_connection_left(&proxy, "after an upstream reset mid-handshake").await;
    assert_eq!(proxy.stats().protocol_errors.load(Ordering::Relaxed), 0, "a reset is not a protocol error");
}

/// The client reads the greeting and resets. rttscope must close the upstream leg and keep
/// nothing of the connection.
#[tokio::test(flavor = "multi_thread")]
async fn client_reset_mid_handshake_leaks_nothing() {
    let real = TestDb::shared().upstream_addr();
    let fake = FakeUpstream::start(move |_| Script::Relay(real)).unwrap();
    let proxy = proxy_to(fake.addr(), |_| {});
    for _ in 0..5 {
        let mut stream = TcpStream::connect(proxy.addr()).unwrap();
        stream.set_read_timeout(Some(NO_HANG)).unwrap();
        let (seq, greeting) = read_packet(&mut stream).expect("greeting through rttscope");
        assert_eq!((seq, greeting.first()), (0, Some(&10)));
        reset(stream).unwrap();
    }
    for n in 0..5 {
        assert_eq!(fake.wait_ended(n, Duration::from_secs(5)), Some(Ending::PeerClosed), "upstream leg {n} closed");
    }
    assert_no_connection_left(&proxy, "after clients reset mid-handshake").await;
    assert_eq!(proxy.stats().protocol_errors.load(Ordering::Relaxed), 0, "a reset is not a protocol error");
    let mut conn = connect(proxy.addr()).await.expect("a login after the resets");
    assert_works(&mut conn, 4).await;
}

// --- Half-close ----------------------------------------------------------------------------

const HALF_CLOSE_SQL: &str = "SELECT seq, REPEAT('x', 1000) FROM seq_1_to_2000";

/// Logs in at `addr`, sends a query, shuts down the write side, and reads the result and the
/// close: what `mariadb < file` and scripts that pipe one query do.
fn query_then_half_close(addr: SocketAddr) -> io::Result<(Vec<Vec<u8>>, Vec<u8>)> {
    let mut stream = raw_login(addr);
    stream.write_all(&com_query(HALF_CLOSE_SQL))?;
    stream.shutdown(Shutdown::Write)?;
    let result = read_result(&mut stream)?;
    let rest = read_until_closed(&mut stream)?;
    Ok((result, rest))
}

/// Directly, the server answers a query whose client then half-closed, and closes after.
/// Through rttscope the client must read the same result, then the close.
#[tokio::test(flavor = "multi_thread")]
async fn client_half_close_after_a_query_still_gets_the_result() {
    let db = TestDb::shared();
    let (direct, direct_rest) = query_then_half_close(db.upstream_addr()).expect("directly, the result arrives");
    assert_eq!(direct.len(), 1 + 2 + 1 + 2000 + 1, "column count, 2 columns, EOF, rows, EOF");
    assert!(direct_rest.is_empty());

    let proxy = proxy_to(db.upstream_addr(), |_| {});
    let addr = proxy.addr();
    let proxied = tokio::task::spawn_blocking(move || query_then_half_close(addr)).await.unwrap();
    let (proxied, rest) = proxied.expect("through rttscope, the result arrives");
    assert_eq!(proxied.len(), direct.len(), "as many packets as directly");
    assert!(proxied == direct, "the same result as directly");
    assert!(rest.is_empty(), "nothing after the result: {rest:?}");
    assert_no_connection_left(&proxy, "after the half-closed client").await;
}

/// The mariadb CLI fed by a pipe that closes: the same output directly and through rttscope.
#[tokio::test(flavor = "multi_thread")]
async fn mariadb_cli_fed_by_a_closing_pipe_gets_the_same_output() {
    let db = TestDb::shared();
    let proxy = proxy_to(db.upstream_addr(), |_| {});
    let run = |addr: SocketAddr| {
        let mut cmd = db.mariadb_cli(addr, NATIVE.user, NATIVE.password, Some(DB));
        cmd.args(["-N", "--batch"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("run the mariadb CLI");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"SELECT COUNT(*), SUM(seq) FROM seq_1_to_100000;\nSELECT 'done';\n").unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let direct = tokio::task::block_in_place(|| run(db.upstream_addr()));
    let proxied = tokio::task::block_in_place(|| run(proxy.addr()));
    assert!(direct.status.success(), "{}", String::from_utf8_lossy(&direct.stderr));
    assert_eq!(String::from_utf8_lossy(&direct.stdout), "100000\t5000050000\ndone\n");
    assert!(proxied.status.success(), "{}", String::from_utf8_lossy(&proxied.stderr));
    assert_eq!(proxied.stdout, direct.stdout);
}

/// The upstream answers and shuts down its write side (FIN) while still reading. The client
/// gets the answer whole; then its connection closes, as the server's would, and the slot
/// and the upstream leg are freed.
#[tokio::test(flavor = "multi_thread")]
async fn upstream_half_close_after_an_answer_closes_cleanly() {
    let fake = FakeUpstream::start(|_| Script::HalfCloseAfterResponse { greeting: greeting(), response: ok_packet(1) })
        .unwrap();
    let proxy = proxy_to(fake.addr(), |_| {});
    let mut conn = connect(proxy.addr()).await.expect("the fake's login passes through");
    conn.query_drop("DO 1").await.expect("the answer arrives whole");
    assert_eq!(fake.wait_ended(0, Duration::from_secs(5)), Some(Ending::PeerClosed), "rttscope closed the upstream");
    let next = tokio::time::timeout(NO_HANG, conn.query_drop("DO 2")).await.expect("no hang");
    assert!(next.is_err(), "a command after the server closed succeeded");
    assert_no_connection_left(&proxy, "after the upstream half-closed").await;
    assert_eq!(proxy.stats().protocol_errors.load(Ordering::Relaxed), 0);
    assert_eq!(proxy.stats().upstream_closed_mid_response.load(Ordering::Relaxed), 0, "it closed between answers");
}

// --- A slow reader -----------------------------------------------------------------------

/// Reads at most `chunk` bytes a call and sleeps `pause` after each: a client that takes its
/// result a little at a time (a report written row by row to a slow disk).
struct SlowReader {
    inner: TcpStream,
    chunk: usize,
    pause: Duration,
}

impl Read for SlowReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len().min(self.chunk);
        let n = self.inner.read(&mut buf[..len])?;
        std::thread::sleep(self.pause);
        Ok(n)
    }
}

/// Rows of 1,000 bytes: 20,000 make 20 MB.
const SLOW_ROWS: u32 = 20_000;

/// A client reads a 20 MB result at about 3 MB/s through a small receive buffer. rttscope
/// must hold no more than its buffers for it — backpressure, not growth: RSS grows by less
/// than two `relay.buffer_size` buffers plus 4 MiB of allocator and runtime slack — every
/// byte must arrive, and a second connection's queries must keep their latency meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn slow_reader_keeps_memory_bounded_and_others_fast() {
    const BUFFER: u64 = 32 << 10;
    let db = TestDb::shared();
    let proxy =
        ProxyProcess::start(&format!("upstream: {}\nrelay:\n  buffer_size: 32KiB\n", db.upstream_addr())).unwrap();
    let mut other = connect(proxy.listen()).await.unwrap();
    let before = median_latency(&mut other).await;
    let (rss_before, _) = proxy.memory_kib().unwrap();

    let addr = proxy.listen();
    let reader = tokio::task::spawn_blocking(move || {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        socket.set_recv_buffer_size(16 << 10)?;
        socket.connect(&addr.into())?;
        let mut stream = raw_login_on(socket.into());
        let sql = format!("SELECT REPEAT('x', 1000) FROM seq_1_to_{SLOW_ROWS}");
        stream.write_all(&com_query(&sql))?;
        let started = Instant::now();
        let slow = SlowReader { inner: stream, chunk: 32 << 10, pause: Duration::from_millis(10) };
        let result = read_result(&mut BufReader::with_capacity(32 << 10, slow))?;
        Ok::<_, io::Error>((result, started.elapsed()))
    });
    // Let the reader fall behind, then measure the bystander while it still is.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = median_latency(&mut other).await;
    let (result, took) =
        tokio::time::timeout(Duration::from_secs(60), reader).await.expect("no hang").unwrap().unwrap();
    let (rss_after, hwm) = proxy.memory_kib().unwrap();

    // A row is one 1,000-byte string: its length as 0xFC and two bytes, then the bytes.
    let rows = result.iter().filter(|p| p.len() == 1003 && p[0] == 0xFC).count();
    let bytes: usize = result.iter().map(Vec::len).sum();
    eprintln!(
        "slow reader: {} rows, {bytes} bytes in {took:?}; rttscope RSS {rss_before} -> {rss_after} KiB (peak {hwm}); \
         other connection p50 {before:?} before, {during:?} during",
        result.len().saturating_sub(4)
    );
    assert_eq!(result.len(), 1 + 1 + 1 + SLOW_ROWS as usize + 1, "every row arrived");
    assert_eq!(rows, SLOW_ROWS as usize, "rows of 1,000 bytes");
    assert!(took > Duration::from_secs(3), "the reader was slow ({took:?}), or the test proves nothing");
    let bound_kib = (2 * BUFFER + (4 << 20)) / 1024;
    assert!(hwm.saturating_sub(rss_before) < bound_kib, "RSS grew {} KiB (bound {bound_kib} KiB)", hwm - rss_before);
    assert!(
        during < before * 4 + Duration::from_millis(5),
        "the other connection slowed from {before:?} to {during:?}"
    );
}

/// The median of 40 `SELECT ?` round trips on `conn`, 25 ms apart.
async fn median_latency(conn: &mut Conn) -> Duration {
    let mut times = Vec::new();
    for n in 0..40 {
        let started = Instant::now();
        assert_works(conn, n).await;
        times.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    times.sort();
    times[times.len() / 2]
}
