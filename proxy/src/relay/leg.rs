//! One leg of a proxied connection as the pump sees it: a byte stream carrying MySQL
//! packets, over TCP, a Unix socket or TLS, optionally inside the compressed protocol.
//! The pump reads and writes the packet stream; what is below is the leg's business. The
//! raw TCP socket stays reachable for the link probe, also under TLS.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use super::compressed::Compression;
use crate::protocol::compress::Algorithm;

/// The stream under a leg.
pub(crate) enum Transport {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// rttscope is the TLS server: the client's leg.
    ServerTls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// rttscope is the TLS client: the server's leg.
    ClientTls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Transport {
    /// The socket underneath, TCP or Unix, under any TLS: for asking the kernel about the
    /// connection itself (bytes waiting, a peer gone).
    pub(crate) fn socket(&self) -> BorrowedFd<'_> {
        match self {
            Transport::Tcp(s) => s.as_fd(),
            Transport::Unix(s) => s.as_fd(),
            Transport::ServerTls(s) => s.get_ref().0.as_fd(),
            Transport::ClientTls(s) => s.get_ref().0.as_fd(),
        }
    }

    /// The TCP socket underneath, if there is one.
    pub(crate) fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Transport::Tcp(s) => Some(s),
            Transport::Unix(_) => None,
            Transport::ServerTls(s) => Some(s.get_ref().0),
            Transport::ClientTls(s) => Some(s.get_ref().0),
        }
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
    /// Registers the socket with the runtime this is called on.
    pub(crate) fn attach(self) -> io::Result<Transport> {
        match self {
            Detached::Tcp(s) => TcpStream::from_std(s).map(Transport::Tcp),
            Detached::Unix(s) => UnixStream::from_std(s).map(Transport::Unix),
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
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        each_transport!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Transport {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        each_transport!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each_transport!(self, s => Pin::new(s).poll_flush(cx))
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
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match &mut this.compression {
            None => Pin::new(&mut this.io).poll_read(cx, buf),
            Some(c) => c.poll_read(&mut this.io, cx, buf),
        }
    }
}

impl AsyncWrite for Leg {
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
