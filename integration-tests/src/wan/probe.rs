//! A measurement across a link: a bulk transfer from the server namespace to the client
//! namespace, every byte checked, with both ends' `TCP_INFO` and the link's counters.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::kernel::{TcpInfo, tcp_info};
use super::{WanLink, WanStats};

/// The byte at offset `i` of a transfer is `i % PATTERN_PERIOD`: a prime, so no read or write
/// size lines up with it and a misplaced or corrupted segment shows.
const PATTERN_PERIOD: usize = 251;
/// Size of each write on the sender.
const WRITE_CHUNK: usize = 64 * 1024;
/// Size of each read on the receiver.
const READ_CHUNK: usize = 256 * 1024;
/// A transfer stalled this long fails rather than hangs a test.
const STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest the receiver waits, after end of stream, for packets still on the line to it.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// What one bulk transfer measured.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// Bytes sent and received (they are checked to be equal, and the same bytes).
    pub bytes: usize,
    /// On the receiver, from `connect` to the last byte: slow start included, as a query's
    /// result set would see it.
    pub elapsed: Duration,
    /// The sender's `TCP_INFO` once the receiver has closed, so every segment is acknowledged.
    pub sender: TcpInfo,
    /// The receiver's `TCP_INFO` at end of stream, once the line to it has drained.
    pub receiver: TcpInfo,
    /// The link's counters at the receiver's end of stream, once the line to it has drained
    /// (packets held back or duplicated have arrived, up to 2 s) and before it closes: every
    /// packet counted here on the way to the client belonged to the data, its SYN-ACK or its
    /// FIN (the server sends no ACK until the receiver closes).
    pub stats_at_eof: WanStats,
}

impl Transfer {
    /// Goodput in bits per second over [`elapsed`](Self::elapsed).
    pub fn bps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64()
    }
}

impl WanLink {
    /// Sends `bytes` from a fresh listener in the server namespace to a fresh connection from
    /// the client namespace and checks that every byte arrived, in order and intact. Sockets
    /// get the namespaces' default buffers (set sysctls first to change them). An error names
    /// the first wrong byte, or says which side stalled for 60 s.
    pub fn bulk_download(&self, bytes: usize) -> io::Result<Transfer> {
        let listener = self.in_namespace(self.server_ns(), || TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)))??;
        let addr = SocketAddr::from((self.server_ip(), listener.local_addr()?.port()));
        std::thread::scope(|s| {
            let sender = s.spawn(move || send(&listener, bytes));
            let start = Instant::now();
            let received = self
                .in_namespace(self.client_ns(), || TcpStream::connect(addr))?
                .and_then(|stream| receive(stream, bytes, start, || self.stats()));
            let sent = sender.join().map_err(|_| io::Error::other("the sender thread panicked"))?;
            let (elapsed, receiver, stats_at_eof) = received?;
            Ok(Transfer { bytes, elapsed, sender: sent?, receiver, stats_at_eof })
        })
    }
}

/// The sender: writes the pattern, half-closes, waits for the receiver to close, and returns
/// its `TCP_INFO`.
fn send(listener: &TcpListener, bytes: usize) -> io::Result<TcpInfo> {
    let (mut stream, _) = listener.accept()?;
    stream.set_write_timeout(Some(STALL_TIMEOUT))?;
    stream.set_read_timeout(Some(STALL_TIMEOUT))?;
    let pattern = pattern(WRITE_CHUNK);
    let mut sent = 0;
    while sent < bytes {
        let n = (bytes - sent).min(WRITE_CHUNK);
        let from = sent % PATTERN_PERIOD;
        stream.write_all(&pattern[from..from + n]).map_err(|e| context(e, "sender write"))?;
        sent += n;
    }
    stream.shutdown(Shutdown::Write)?;
    // The receiver closes after our FIN, and its FIN acknowledges everything we sent.
    let mut rest = [0u8; 1];
    match stream.read(&mut rest).map_err(|e| context(e, "sender waiting for the receiver to close"))? {
        0 => tcp_info(&stream),
        _ => Err(io::Error::new(io::ErrorKind::InvalidData, "the receiver sent data")),
    }
}

/// The receiver: reads to end of stream checking every byte; returns the time since `start`,
/// its `TCP_INFO` and `stats()` taken at end of stream.
fn receive(
    mut stream: TcpStream,
    bytes: usize,
    start: Instant,
    stats: impl Fn() -> WanStats,
) -> io::Result<(Duration, TcpInfo, WanStats)> {
    stream.set_read_timeout(Some(STALL_TIMEOUT))?;
    let pattern = pattern(READ_CHUNK);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut got = 0;
    loop {
        let n = stream.read(&mut buf).map_err(|e| context(e, "receiver read"))?;
        if n == 0 {
            break;
        }
        let from = got % PATTERN_PERIOD;
        // Slices compare with memcmp; the byte loop runs only to name a mismatch.
        if buf[..n] != pattern[from..from + n]
            && let Some(i) = (0..n).find(|&i| buf[i] != pattern[from + i])
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("byte {} is {:#04x}, sent {:#04x}", got + i, buf[i], pattern[from + i]),
            ));
        }
        got += n;
        if got > bytes {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{got} bytes, more than {bytes} sent")));
        }
    }
    let elapsed = start.elapsed();
    if got != bytes {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("{got} of {bytes} bytes arrived")));
    }
    // Late packets (held back for reordering, duplicates) reach an open socket, which answers
    // them as TCP does (a D-SACK), rather than a closed one, which would reset.
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while stats().server_to_client.in_flight() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok((elapsed, tcp_info(&stream)?, stats()))
}

/// `len + PATTERN_PERIOD` bytes of the pattern, so `pattern[offset % PERIOD..][..len]` is the
/// pattern at any offset.
fn pattern(len: usize) -> Vec<u8> {
    (0..len + PATTERN_PERIOD).map(|i| (i % PATTERN_PERIOD) as u8).collect()
}

fn context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_at_any_offset() {
        let p = pattern(1000);
        for offset in [0, 1, 250, 251, 252, 65_536, 1_000_003] {
            let from = offset % PATTERN_PERIOD;
            let expected: Vec<u8> = (offset..offset + 1000).map(|i| (i % PATTERN_PERIOD) as u8).collect();
            assert_eq!(&p[from..from + 1000], &expected[..]);
        }
    }
}
