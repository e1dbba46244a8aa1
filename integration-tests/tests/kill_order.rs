//! A KILL of one proxied connection from another. The server shuts the victim's socket
//! before it answers the KILL, so directly the victim is closed by the time the killer has
//! the answer: libmariadb looks (a zero-timeout poll) before each command and reconnects
//! (`MYSQL_OPT_RECONNECT`) instead of sending into the dead connection; MariaDB's own
//! `mysql_client_test` (test_bug17512527) depends on it. Through rttscope the two connections
//! are two tasks on two threads, and the answer must not overtake the victim's close.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use rttscope_integration_tests::fake_upstream::{
    FakeUpstream, Script, capture_greeting, com_query, native_login, ok_packet, packet, read_packet,
};
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::proxy_to;

/// Before the fix about one round in ten found the victim open (2 cores, idle machine):
/// 200 rounds all passing by chance is out of the question.
const ROUNDS: usize = 200;

/// Connects and logs in by hand; returns the stream and the connection id of the greeting.
fn raw_login(addr: SocketAddr) -> (TcpStream, u32) {
    let (mut stream, greeting) = greeted(addr);
    native_login(&mut stream, &greeting, NATIVE.user, NATIVE.password, DB);
    (stream, connection_id(&greeting))
}

/// Connects and reads the greeting, nothing more.
fn greeted(addr: SocketAddr) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (_, greeting) = read_packet(&mut stream).expect("a greeting");
    (stream, greeting)
}

/// Where a greeting's payload holds its connection id: after the protocol version and the
/// NUL-terminated server version.
fn connection_id_at(greeting: &[u8]) -> usize {
    greeting.iter().skip(1).position(|&b| b == 0).expect("a version") + 2
}

fn connection_id(greeting: &[u8]) -> u32 {
    let at = connection_id_at(greeting);
    let id = greeting.get(at..at + 4).expect("a connection id");
    u32::from_le_bytes([id[0], id[1], id[2], id[3]])
}

/// What libmariadb asks before sending a command: has the server closed (or said anything)?
/// The victim was idle, so readable means closed.
fn readable_now(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let readable = !matches!(stream.peek(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock);
    stream.set_nonblocking(false).unwrap();
    readable
}

/// How many of `ROUNDS` KILLs were answered while their victim was still open.
fn kills_answered_before_the_close(addr: SocketAddr) -> usize {
    let mut still_open = 0;
    for _ in 0..ROUNDS {
        let (mut victim, id) = raw_login(addr);
        let (mut killer, _) = raw_login(addr);
        killer.write_all(&com_query(&format!("KILL {id}"))).unwrap();
        let (seq, ok) = read_packet(&mut killer).expect("the KILL's answer");
        assert_eq!((seq, ok.first()), (1, Some(&0x00)), "KILL OK, got {ok:?}");
        if !readable_now(&victim) {
            still_open += 1;
        }
        // Closed by now in any case, and nothing but the close arrives.
        let mut rest = Vec::new();
        let _ = victim.read_to_end(&mut rest);
        killer.write_all(&packet(0, &[0x01])).unwrap();
    }
    still_open
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_connection_is_closed_before_the_kill_is_answered() {
    let db = TestDb::shared();
    let direct = db.upstream_addr();
    let proxy = proxy_to(direct, |_| {});
    let proxied = proxy.addr();
    let (direct, proxied) = tokio::task::spawn_blocking(move || {
        (kills_answered_before_the_close(direct), kills_answered_before_the_close(proxied))
    })
    .await
    .unwrap();
    assert_eq!(direct, 0, "the server closes its victim before it answers the KILL");
    assert_eq!(proxied, 0, "{proxied} of {ROUNDS} KILLs answered through rttscope while the victim was still open");
}

/// A KILL that kills nothing (an ERR) is answered at once: nothing to wait for.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_kill_is_answered_at_once() {
    let proxy = proxy_to(TestDb::shared().upstream_addr(), |_| {});
    let addr = proxy.addr();
    tokio::task::spawn_blocking(move || {
        let (mut killer, _) = raw_login(addr);
        let started = std::time::Instant::now();
        killer.write_all(&com_query("KILL 4000000000")).unwrap();
        let (_, err) = read_packet(&mut killer).expect("the KILL's answer");
        assert_eq!(err.first(), Some(&0xFF), "ERR 1094 unknown thread, got {err:?}");
        // A held answer would take at least the hold limit, 200 ms.
        assert!(started.elapsed() < Duration::from_millis(200), "took {:?}", started.elapsed());
    })
    .await
    .unwrap();
}

/// A client may name a connection in a KILL as soon as its greeting is out: the victim is
/// listed from then on, not from its login's OK, which reaches its client before the
/// victim's task can list it. A fake server answers the KILL without closing anything, so
/// the answer must wait until the victim's client hangs up.
#[tokio::test(flavor = "multi_thread")]
async fn a_kill_naming_a_connection_that_was_just_greeted_waits_for_it() {
    let real = capture_greeting(TestDb::shared().upstream_addr()).expect("a real greeting");
    let greeting_with_id = move |id: u32| {
        let mut greeting = real.clone();
        let at = 4 + connection_id_at(&greeting[4..]);
        greeting[at..at + 4].copy_from_slice(&id.to_le_bytes());
        greeting
    };
    let fake = FakeUpstream::start(move |n| match n {
        0 => Script::StallAfterLogin { greeting: greeting_with_id(77) },
        _ => Script::AfterLogin { greeting: greeting_with_id(78), response: ok_packet(1), then_close: false },
    })
    .expect("a fake server");
    let proxy = proxy_to(fake.addr(), |_| {});
    let addr = proxy.addr();
    tokio::task::spawn_blocking(move || {
        let (victim, greeting) = greeted(addr);
        assert_eq!(connection_id(&greeting), 77);
        let (mut killer, greeting) = greeted(addr);
        native_login(&mut killer, &greeting, "anyone", "anything", DB);
        killer.write_all(&com_query("KILL 77")).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let answered_while_open = readable_now(&killer);
        drop(victim);
        let (seq, ok) = read_packet(&mut killer).expect("the KILL's answer");
        assert_eq!((seq, ok.first()), (1, Some(&0x00)), "KILL OK, got {ok:?}");
        assert!(!answered_while_open, "the KILL was answered while its victim, just greeted, was still open");
    })
    .await
    .unwrap();
}
