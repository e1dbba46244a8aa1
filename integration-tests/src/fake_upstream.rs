//! A scripted fake MySQL server: per accepted connection, relay to a real
//! server or play bytes that break the protocol at a chosen point; and the
//! wire helpers it shares with hand-made test clients.
//!
//! Blocking std sockets and one thread per connection: it works the same from
//! sync tests and from any tokio runtime, and a script reads top to bottom.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the fake does with one accepted connection.
#[derive(Clone, Debug)]
pub enum Script {
    /// Forward bytes both ways to a real server, so a normal client works.
    Relay(SocketAddr),
    /// Accept and say nothing, until the peer closes.
    Silent,
    /// Send these bytes first (e.g. a broken greeting), then close.
    GreetThenClose(Vec<u8>),
    /// Send `greeting`, read the handshake response, answer OK, read one
    /// command and answer it with `response`; then close at once if
    /// `then_close`, else wait for the peer to close.
    AfterLogin { greeting: Vec<u8>, response: Vec<u8>, then_close: bool },
    /// Send `greeting`, read the handshake response, then answer nothing until the peer
    /// closes: a server that hangs mid-login.
    StallAfterLogin { greeting: Vec<u8> },
    /// Send `greeting`, then reset the connection (`SO_LINGER` 0: an RST, no FIN) — a
    /// server that crashed or a middlebox that killed the flow mid-handshake.
    GreetThenReset(Vec<u8>),
    /// Send `greeting`, read the handshake response, answer OK, read one command, answer it
    /// with `response` and shut down the write side (FIN) only, then keep reading until the
    /// peer closes: a server half-closing after its last answer.
    HalfCloseAfterResponse { greeting: Vec<u8>, response: Vec<u8> },
    /// Send `greeting` (offering TLS), read the SSLRequest and the TLS record after it (the
    /// ClientHello), then answer `err` instead of TLS and close: a server that refuses the
    /// client only once it got that far (a host blocked, named by a PROXY header it read late).
    RefuseAfterClientHello { greeting: Vec<u8>, err: Vec<u8> },
    /// Send `greeting`, read whatever comes until the peer ends its side, wait `linger`, then
    /// close: a server that takes a while over a handshake aborted (counting it against the
    /// host) before it closes.
    ReadToEndThenClose { greeting: Vec<u8>, linger: Duration },
}

/// How one connection ended, as the fake saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The peer closed (EOF or reset) while the fake was waiting on it.
    PeerClosed,
    /// The script closed the connection itself.
    ClosedByScript,
}

/// A running fake; stops accepting on drop (connections already accepted
/// end when their peers close).
pub struct FakeUpstream {
    addr: SocketAddr,
    /// The listener again, to wake the acceptor on drop: a connect to `addr` cannot reach a
    /// listener in another network namespace.
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    endings: Arc<(Mutex<Vec<Option<Ending>>>, Condvar)>,
    acceptor: Option<JoinHandle<()>>,
}

/// An OK packet with sequence id `seq`: no rows, no id, autocommit, no warnings.
pub fn ok_packet(seq: u8) -> Vec<u8> {
    packet(seq, &[0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00])
}

/// A packet: 3-byte little-endian length, sequence id, payload.
pub fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("payload under 16 MiB").to_le_bytes();
    let mut out = vec![len[0], len[1], len[2], seq];
    out.extend_from_slice(payload);
    out
}

/// Reads one whole packet: (sequence id, payload).
pub fn read_packet(stream: &mut impl Read) -> io::Result<(u8, Vec<u8>)> {
    let mut head = [0u8; 4];
    stream.read_exact(&mut head)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload)?;
    Ok((head[3], payload))
}

/// A `COM_QUERY` of `sql`, sequence id 0.
pub fn com_query(sql: &str) -> Vec<u8> {
    packet(0, &[&[0x03][..], sql.as_bytes()].concat())
}

/// A text result set as read (no CLIENT_DEPRECATE_EOF): every payload from the column count
/// to the closing EOF, in order; an ERR instead is an error.
pub fn read_result(stream: &mut impl Read) -> io::Result<Vec<Vec<u8>>> {
    let mut payloads = Vec::new();
    let mut eofs = 0;
    while eofs < 2 {
        let (_, payload) = read_packet(stream)?;
        let first = payload.first().copied();
        if payloads.is_empty() && first == Some(0xFF) {
            return Err(io::Error::other(format!("ERR: {}", String::from_utf8_lossy(&payload))));
        }
        if first == Some(0xFE) && payload.len() < 9 {
            eofs += 1;
        }
        payloads.push(payload);
    }
    Ok(payloads)
}

/// The greeting packet (header included) a real server sends, captured
/// fresh so its version and capabilities are genuine.
pub fn capture_greeting(server: SocketAddr) -> io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(server)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let (seq, payload) = read_packet(&mut stream)?;
    Ok(packet(seq, &payload))
}

impl FakeUpstream {
    /// Listens on 127.0.0.1:0; the `n`th accepted connection (from 0) plays `script(n)`.
    pub fn start(script: impl Fn(usize) -> Script + Send + 'static) -> io::Result<FakeUpstream> {
        FakeUpstream::start_on(TcpListener::bind("127.0.0.1:0")?, script)
    }

    /// Like [`start`](Self::start) on a listener of the caller's, e.g. one made inside a
    /// network namespace.
    pub fn start_on(
        listener: TcpListener,
        script: impl Fn(usize) -> Script + Send + 'static,
    ) -> io::Result<FakeUpstream> {
        let addr = listener.local_addr()?;
        let waker = listener.try_clone()?;
        let stop = Arc::new(AtomicBool::new(false));
        let endings: Arc<(Mutex<Vec<Option<Ending>>>, Condvar)> = Arc::default();
        let (stop2, endings2) = (stop.clone(), endings.clone());
        let acceptor = std::thread::Builder::new().name("fake-upstream".into()).spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                if let Ok(mut list) = endings2.0.lock() {
                    list.push(None);
                }
                let (script, endings) = (script(n), endings2.clone());
                std::thread::spawn(move || {
                    // Any I/O error means the peer went away: that is an ending too.
                    let ending = play(stream, script).unwrap_or(Ending::PeerClosed);
                    if let Ok(mut list) = endings.0.lock() {
                        list[n] = Some(ending);
                    }
                    endings.1.notify_all();
                });
            }
        })?;
        Ok(FakeUpstream { addr, listener: waker, stop, endings, acceptor: Some(acceptor) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.endings.0.lock().map(|l| l.len()).unwrap_or(0)
    }

    /// Waits up to `timeout` for connection `n` to end; `None` if it has not.
    pub fn wait_ended(&self, n: usize, timeout: Duration) -> Option<Ending> {
        let deadline = Instant::now() + timeout;
        let mut list = self.endings.0.lock().ok()?;
        loop {
            if let Some(ending) = list.get(n).copied().flatten() {
                return Some(ending);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            list = self.endings.1.wait_timeout(list, left).ok()?.0;
        }
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the thread sees the flag: shutting a listening
        // socket down makes accept(2) fail at once on Linux, wherever the socket lives.
        let _ = socket2::SockRef::from(&self.listener).shutdown(Shutdown::Both);
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn play(mut stream: TcpStream, script: Script) -> io::Result<Ending> {
    match script {
        Script::Relay(server) => relay(stream, server),
        Script::Silent => wait_for_close(&mut stream),
        Script::GreetThenClose(bytes) => {
            stream.write_all(&bytes)?;
            stream.shutdown(Shutdown::Both)?;
            Ok(Ending::ClosedByScript)
        }
        Script::AfterLogin { greeting, response, then_close } => {
            stream.write_all(&greeting)?;
            let (seq, _handshake_response) = read_packet(&mut stream)?;
            stream.write_all(&ok_packet(seq.wrapping_add(1)))?;
            let _command = read_packet(&mut stream)?;
            stream.write_all(&response)?;
            if then_close {
                stream.shutdown(Shutdown::Both)?;
                return Ok(Ending::ClosedByScript);
            }
            wait_for_close(&mut stream)
        }
        Script::StallAfterLogin { greeting } => {
            stream.write_all(&greeting)?;
            let _handshake_response = read_packet(&mut stream)?;
            wait_for_close(&mut stream)
        }
        Script::GreetThenReset(greeting) => {
            stream.write_all(&greeting)?;
            reset(stream)?;
            Ok(Ending::ClosedByScript)
        }
        Script::RefuseAfterClientHello { greeting, err } => {
            stream.write_all(&greeting)?;
            let _ssl_request = read_packet(&mut stream)?;
            // A TLS record: type, version, 2-byte big-endian length, then that many bytes.
            let mut head = [0u8; 5];
            stream.read_exact(&mut head)?;
            let mut client_hello = vec![0u8; usize::from(u16::from_be_bytes([head[3], head[4]]))];
            stream.read_exact(&mut client_hello)?;
            stream.write_all(&err)?;
            stream.shutdown(Shutdown::Write)?;
            wait_for_close(&mut stream)
        }
        Script::ReadToEndThenClose { greeting, linger } => {
            stream.write_all(&greeting)?;
            let mut buf = [0u8; 4096];
            while stream.read(&mut buf)? > 0 {}
            std::thread::sleep(linger);
            stream.shutdown(Shutdown::Both)?;
            Ok(Ending::ClosedByScript)
        }
        Script::HalfCloseAfterResponse { greeting, response } => {
            stream.write_all(&greeting)?;
            let (seq, _handshake_response) = read_packet(&mut stream)?;
            stream.write_all(&ok_packet(seq.wrapping_add(1)))?;
            let _command = read_packet(&mut stream)?;
            stream.write_all(&response)?;
            stream.shutdown(Shutdown::Write)?;
            wait_for_close(&mut stream)
        }
    }
}

/// Closes `stream` with an RST instead of a FIN: `SO_LINGER` with a zero timeout makes
/// close(2) discard what is unsent and reset the connection.
pub fn reset(stream: TcpStream) -> io::Result<()> {
    socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO))?;
    drop(stream);
    Ok(())
}

/// Reads and discards until the peer closes.
fn wait_for_close(stream: &mut TcpStream) -> io::Result<Ending> {
    let mut sink = [0u8; 4096];
    while stream.read(&mut sink)? > 0 {}
    Ok(Ending::PeerClosed)
}

fn relay(client: TcpStream, server: SocketAddr) -> io::Result<Ending> {
    let upstream = TcpStream::connect(server)?;
    let (mut c_read, mut u_write) = (client.try_clone()?, upstream.try_clone()?);
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut c_read, &mut u_write);
        let _ = u_write.shutdown(Shutdown::Write);
    });
    let (mut u_read, mut c_write) = (upstream, client);
    let _ = io::copy(&mut u_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Both);
    let _ = up.join();
    Ok(Ending::PeerClosed)
}

// --- Wire helpers for hand-made clients --------------------------------------------------

pub const CLIENT_LONG_PASSWORD: u32 = 1;
pub const CLIENT_CONNECT_WITH_DB: u32 = 1 << 3;
pub const CLIENT_PROTOCOL_41: u32 = 1 << 9;
pub const CLIENT_SSL: u32 = 1 << 11;
pub const CLIENT_SECURE_CONNECTION: u32 = 1 << 15;
pub const CLIENT_PLUGIN_AUTH: u32 = 1 << 19;

/// The fixed 32-byte start of a `HandshakeResponse41` (alone, an `SSLRequest`): capabilities,
/// a 16 MiB max packet, utf8mb4, and the reserved zeros.
pub fn handshake_response_head(capabilities: u32) -> Vec<u8> {
    let mut head = capabilities.to_le_bytes().to_vec();
    head.extend_from_slice(&(16u32 << 20).to_le_bytes());
    head.push(45); // utf8mb4_general_ci
    head.extend_from_slice(&[0; 23]);
    head
}

/// The 20-byte auth nonce of a `HandshakeV10` payload: 8 bytes after the version and
/// connection id, 12 more after the capability, charset, status and reserved fields.
pub fn greeting_nonce(greeting: &[u8]) -> Option<Vec<u8>> {
    let version_end = greeting.get(1..)?.iter().position(|&b| b == 0)? + 2;
    let part1 = greeting.get(version_end + 4..version_end + 12)?;
    let part2_at = version_end + 12 + 1 + 2 + 1 + 2 + 2 + 1 + 10;
    let part2 = greeting.get(part2_at..part2_at + 12)?;
    Some([part1, part2].concat())
}

/// Logs in by hand on `stream`, whose HandshakeV10 `greeting` was just read: a
/// HandshakeResponse41 for `user`, `password` (mysql_native_password) and schema `db`.
/// Panics unless the server answers OK.
pub fn native_login(stream: &mut TcpStream, greeting: &[u8], user: &str, password: &str, db: &str) {
    let nonce = greeting_nonce(greeting).expect("a nonce in the greeting");
    let scramble = mysql_common::scramble::scramble_native(&nonce, password.as_bytes()).expect("a scramble");
    let caps = CLIENT_LONG_PASSWORD
        | CLIENT_CONNECT_WITH_DB
        | CLIENT_PROTOCOL_41
        | CLIENT_SECURE_CONNECTION
        | CLIENT_PLUGIN_AUTH;
    let mut response = handshake_response_head(caps);
    for part in [user.as_bytes(), &[0, 20], &scramble, db.as_bytes(), b"\0mysql_native_password\0"] {
        response.extend_from_slice(part);
    }
    stream.write_all(&packet(1, &response)).expect("the handshake response written");
    let (seq, ok) = read_packet(stream).expect("the login's answer");
    assert_eq!((seq, ok.first()), (2, Some(&0x00)), "login OK, got {ok:?}");
}

/// Reads until the peer closes (EOF or reset); returns what arrived before. Any other error,
/// such as the socket's read timeout expiring, is returned: the peer did not close.
pub fn read_until_closed(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(got),
            Err(e) => return Err(e),
        }
    }
}
