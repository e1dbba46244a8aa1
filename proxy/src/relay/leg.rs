//! One leg of a proxied connection as the pump sees it: a byte stream carrying MySQL
//! packets, over TCP, a Unix socket or TLS, optionally inside the compressed protocol.
//! The pump reads and writes the packet stream; what is below is the leg's business. The
//! raw TCP socket stays reachable for the link probe, also under TLS.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use super::compressed::Compression;
use crate::protocol::compress::Algorithm;
use crate::sys;

/// The stream under a leg.
pub(crate) enum Transport {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// rttscope is the TLS server: the client's leg.
    ServerTls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// rttscope is the TLS client: the server's leg.
    ClientTls(Box<tokio_rustls::client::TlsStream<UpstreamSocket>>),
}

impl Transport {
    /// The socket underneath, TCP or Unix, under any TLS: for asking the kernel about the
    /// connection itself (bytes waiting, a peer gone).
    pub(crate) fn socket(&self) -> BorrowedFd<'_> {
        match self {
            Transport::Tcp(s) => s.as_fd(),
            Transport::Unix(s) => s.as_fd(),
            Transport::ServerTls(s) => s.get_ref().0.as_fd(),
            Transport::ClientTls(s) => s.get_ref().0.tcp.as_fd(),
        }
    }

    /// The TCP socket underneath, if there is one.
    pub(crate) fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Transport::Tcp(s) => Some(s),
            Transport::Unix(_) => None,
            Transport::ServerTls(s) => Some(s.get_ref().0),
            Transport::ClientTls(s) => Some(&s.get_ref().0.tcp),
        }
    }
}

/// The server's TCP socket under rttscope's TLS. While the TLS handshake runs it keeps the
/// first bytes the server sent: a server that refuses the client instead (an ERR packet: a
/// host blocked or not allowed, named by a PROXY header the server read just before) sends
/// it whenever it has read that header, and when that is after the ClientHello went out,
/// rustls reads the ERR as a broken TLS record and it is gone from the socket. Kept here,
/// it still reaches the client as the server's answer.
pub(crate) struct UpstreamSocket {
    tcp: TcpStream,
    /// What the server sent so far, up to [`UpstreamSocket::KEPT`] bytes, until
    /// [`UpstreamSocket::handshake_done`].
    seen: Option<Vec<u8>>,
}

impl UpstreamSocket {
    /// An ERR packet is at most this long (a message of 512 bytes, and its head).
    const KEPT: usize = 1024;

    /// `tcp`, keeping what the server sends until the TLS handshake is done.
    pub(crate) fn new(tcp: TcpStream) -> UpstreamSocket {
        UpstreamSocket { tcp, seen: Some(Vec::new()) }
    }

    /// The TLS handshake is done: nothing more is kept.
    pub(crate) fn handshake_done(&mut self) {
        self.seen = None;
    }

    /// The first bytes the server sent during the TLS handshake (all rustls read of them).
    pub(crate) fn seen(&self) -> &[u8] {
        self.seen.as_deref().unwrap_or_default()
    }
}

impl AsyncRead for UpstreamSocket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.tcp).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some(seen)) = (&polled, &mut this.seen) {
            let read = buf.filled().get(before..).unwrap_or_default();
            let room = UpstreamSocket::KEPT.saturating_sub(seen.len());
            seen.extend_from_slice(read.get(..room.min(read.len())).unwrap_or_default());
        }
        polled
    }
}

impl AsyncWrite for UpstreamSocket {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

/// An accepted socket on its way from the runtime that accepted it to the one that serves
/// it ([`shards`](super::shards)): off the first one's reactor, not yet on the second's.
pub(crate) enum Detached {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Transport {
    /// Takes a plain socket off this runtime's reactor (it stays non-blocking).
    pub(crate) fn detach(self) -> io::Result<Detached> {
        match self {
            Transport::Tcp(s) => s.into_std().map(Detached::Tcp),
            Transport::Unix(s) => s.into_std().map(Detached::Unix),
            Transport::ServerTls(_) | Transport::ClientTls(_) => {
                Err(io::Error::other("a TLS stream cannot move between runtimes"))
            }
        }
    }
}

impl Detached {
    /// Registers the socket with the runtime this is called on (and its thread's poller).
    pub(crate) fn attach(self) -> io::Result<Transport> {
        match self {
            Detached::Tcp(s) => {
                super::idle_poll::watch(s.as_raw_fd());
                TcpStream::from_std(s).map(Transport::Tcp)
            }
            Detached::Unix(s) => {
                super::idle_poll::watch(s.as_raw_fd());
                UnixStream::from_std(s).map(Transport::Unix)
            }
        }
    }
}

macro_rules! each_transport {
    ($self:expr, $s:ident => $body:expr) => {
        match $self.get_mut() {
            Transport::Tcp($s) => $body,
            Transport::Unix($s) => $body,
            Transport::ServerTls($s) => $body,
            Transport::ClientTls($s) => $body,
        }
    };
}

impl AsyncRead for Transport {
    /// Plain sockets inline into the pipe's read; TLS, whose read is large, stays a call.
    #[inline]
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Unix(s) => Pin::new(s).poll_read(cx, buf),
            tls => tls.poll_read_tls(cx, buf),
        }
    }
}

impl Transport {
    /// A write that must wait (a full socket) or goes through TLS: out of the inlined path.
    #[inline(never)]
    fn poll_write_waiting(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let written = each_transport!(Pin::new(&mut *self), s => Pin::new(s).poll_write(cx, buf));
        if written.is_pending() {
            super::idle_poll::write_waiting(self.socket().as_raw_fd());
        }
        written
    }

    /// A TLS stream's read (the plain sockets are read inline, before this is reached).
    #[inline(never)]
    fn poll_read_tls(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        each_transport!(Pin::new(self), s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Transport {
    #[inline]
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        // A plain socket is written at once when the runtime last saw it writable (nearly
        // always): a try (tokio's `try_write`, with the system call of `sys::send`) skips
        // the task budget and the waker bookkeeping `poll_write` goes through first. Only
        // when the socket is full does the write wait, through `poll_write`, which registers
        // the waker (the failed try cleared the readiness, so it does not write again).
        // A TLS stream has no such try: it goes straight to `poll_write`.
        let this = self.get_mut();
        let tried = match this {
            Transport::Tcp(s) => s.try_io(Interest::WRITABLE, || sys::send(s.as_raw_fd(), buf)),
            Transport::Unix(s) => s.try_io(Interest::WRITABLE, || sys::send(s.as_raw_fd(), buf)),
            Transport::ServerTls(_) | Transport::ClientTls(_) => Err(io::ErrorKind::WouldBlock.into()),
        };
        match tried {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => this.poll_write_waiting(cx, buf),
            done => Poll::Ready(done),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = each_transport!(Pin::new(&mut *this), s => Pin::new(s).poll_flush(cx));
        // A TLS stream takes a write into its buffer and sends it here: a flush that waits
        // is a write waiting for room (plain sockets never wait here).
        if flushed.is_pending() {
            super::idle_poll::write_waiting(this.socket().as_raw_fd());
        }
        flushed
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each_transport!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}

/// A leg: the transport and, once negotiated, the compressed protocol on it.
pub(crate) struct Leg {
    io: Transport,
    compression: Option<Box<Compression>>,
}

impl Leg {
    pub(crate) fn new(io: Transport) -> Leg {
        Leg { io, compression: None }
    }

    /// Switches to the compressed protocol (after the handshake); `pending` are frame
    /// bytes already read from this leg with the handshake's last packet.
    pub(crate) fn compress(&mut self, algorithm: Algorithm, pending: &[u8]) -> io::Result<()> {
        let mut compression = Compression::new(algorithm)?;
        if !pending.is_empty() {
            compression.push_read(pending);
        }
        self.compression = Some(Box::new(compression));
        Ok(())
    }

    pub(crate) fn transport(&self) -> &Transport {
        &self.io
    }

    /// The compression algorithm, if the leg is compressed.
    pub(crate) fn compression(&self) -> Option<Algorithm> {
        self.compression.as_ref().map(|c| c.algorithm())
    }

    /// A command starts at `offset` of the packet stream written to this leg (it matters
    /// only to the compressed protocol's sequence ids).
    pub(crate) fn mark_command_start(&mut self, offset: u64) {
        if let Some(c) = &mut self.compression {
            c.mark_command_start(offset);
        }
    }

    /// A command starts with the next byte written to this leg (a command the relay writes
    /// itself, outside the pump).
    pub(crate) fn mark_next_write_command_start(&mut self) {
        if let Some(c) = &mut self.compression {
            c.mark_command_start(c.written());
        }
    }

    /// Packet-stream bytes written to this leg since it became compressed (the coordinates
    /// of [`Leg::mark_command_start`]), when it is.
    pub(crate) fn written(&self) -> Option<u64> {
        self.compression.as_ref().map(|c| c.written())
    }

    /// Bytes on the wire below the compressed protocol (TLS plaintext), read and
    /// written so far, when the leg is compressed.
    pub(crate) fn wire_counters(&self) -> Option<(u64, u64)> {
        self.compression.as_ref().map(|c| (c.wire_read, c.wire_written))
    }

    /// Whether written bytes wait inside the leg (frames not yet out; TLS records may too,
    /// which a flush pushes).
    pub(crate) fn may_hold_writes(&self) -> bool {
        self.compression.as_ref().is_some_and(|c| c.has_pending())
            || matches!(self.io, Transport::ServerTls(_) | Transport::ClientTls(_))
    }
}

impl AsyncRead for Leg {
    #[inline]
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match &mut this.compression {
            None => Pin::new(&mut this.io).poll_read(cx, buf),
            Some(c) => c.poll_read(&mut this.io, cx, buf),
        }
    }
}

impl AsyncWrite for Leg {
    #[inline]
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match &mut this.compression {
            None => Pin::new(&mut this.io).poll_write(cx, buf),
            Some(c) => c.poll_write(&mut this.io, cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match &mut this.compression {
            None => Pin::new(&mut this.io).poll_flush(cx),
            Some(c) => c.poll_flush(&mut this.io, cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
