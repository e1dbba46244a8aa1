//! The compressed protocol on one leg: the packet stream in and out of frames, over
//! whatever byte stream the leg has (TCP or TLS). The framing itself is the sans-io codec
//! in `protocol::compress`; this is the I/O around it, with bounded buffers: at most one
//! read's worth of frame bytes in, one write's worth of frames out.
//!
//! Compressed sequence ids are per leg. Reading a frame sets the next id to follow it;
//! writing a frame uses the next id and moves it on. Only the start of a new command resets
//! it to 0, and only towards the server: the client side of the conversation decides that,
//! so the relay marks where, in the packet stream it writes upstream, each command starts
//! ([`Compression::mark_command_start`]); a frame never straddles such a mark.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::protocol::compress::{Algorithm, FrameDecoder, FrameEncoder, MAX_FRAME_LEN};

/// Frame bytes read from the wire at a time.
const READ_CHUNK: usize = 16 << 10;
/// Command starts remembered ahead of the writer (commands pipelined at most this deep).
const MAX_MARKS: usize = 4096;

/// One leg's compressed-protocol state.
pub(crate) struct Compression {
    algorithm: Algorithm,
    decoder: FrameDecoder,
    encoder: FrameEncoder,
    /// Frame bytes read and not yet decoded: `raw[start..end]`.
    raw: Box<[u8]>,
    start: usize,
    end: usize,
    /// Frames made and not yet written: `out[sent..]`.
    out: Vec<u8>,
    sent: usize,
    /// The next compressed sequence id on this leg.
    next_seq: u8,
    /// Frame headers the decoder had read when `next_seq` last followed one.
    frames_seen: u64,
    /// Packet-stream bytes accepted for writing so far.
    written: u64,
    /// Where in the written stream new commands start (the id goes back to 0 there).
    marks: VecDeque<u64>,
    /// Bytes on the wire (below compression, above TLS), each way.
    pub wire_read: u64,
    pub wire_written: u64,
}

impl Compression {
    pub(crate) fn new(algorithm: Algorithm) -> io::Result<Compression> {
        Ok(Compression {
            algorithm,
            decoder: FrameDecoder::new(algorithm).map_err(io::Error::other)?,
            encoder: FrameEncoder::new(algorithm),
            raw: vec![0; READ_CHUNK].into_boxed_slice(),
            start: 0,
            end: 0,
            out: Vec::new(),
            sent: 0,
            next_seq: 0,
            frames_seen: 0,
            written: 0,
            marks: VecDeque::new(),
            wire_read: 0,
            wire_written: 0,
        })
    }

    pub(crate) fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Frame bytes the other end sent before compression was set up on this side (read
    /// with the handshake's last packet): decoded first.
    pub(crate) fn push_read(&mut self, bytes: &[u8]) {
        // Only ever a few bytes, read together with the auth OK.
        if bytes.len() > self.raw.len() {
            self.raw = vec![0; bytes.len()].into_boxed_slice();
        }
        self.raw[..bytes.len()].copy_from_slice(bytes);
        (self.start, self.end) = (0, bytes.len());
        self.wire_read += bytes.len() as u64;
    }

    /// A command starts at `offset` of the packet stream written through this leg: the
    /// frame holding it gets compressed sequence id 0.
    pub(crate) fn mark_command_start(&mut self, offset: u64) {
        if self.marks.len() < MAX_MARKS && self.marks.back().is_none_or(|&last| last < offset) {
            self.marks.push_back(offset);
        }
    }

    /// Packet-stream bytes accepted for writing since compression started: the offset the
    /// next written byte gets.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    pub(crate) fn poll_read<S: AsyncRead + Unpin>(
        &mut self,
        io: &mut S,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if self.start < self.end {
                let (used, made) = self
                    .decoder
                    .decode(&self.raw[self.start..self.end], buf.initialize_unfilled())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                self.start += used;
                buf.advance(made);
                if self.decoder.frames() != self.frames_seen {
                    self.frames_seen = self.decoder.frames();
                    self.next_seq = self.decoder.last_seq().map_or(0, |s| s.wrapping_add(1));
                }
                if made > 0 || buf.remaining() == 0 {
                    return Poll::Ready(Ok(()));
                }
                if used > 0 {
                    continue;
                }
            }
            let mut rb = ReadBuf::new(&mut self.raw);
            ready!(Pin::new(&mut *io).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            (self.start, self.end) = (0, n);
            if n == 0 {
                return Poll::Ready(if self.decoder.at_boundary() {
                    Ok(())
                } else {
                    Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed in the middle of a compressed frame"))
                });
            }
            self.wire_read += n as u64;
        }
    }

    /// Writes frames waiting in `out`; Pending until all are out.
    fn poll_drain<S: AsyncWrite + Unpin>(&mut self, io: &mut S, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = ready!(Pin::new(&mut *io).poll_write(cx, &self.out[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
            self.wire_written += n as u64;
        }
        self.out.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    pub(crate) fn poll_write<S: AsyncWrite + Unpin>(
        &mut self,
        io: &mut S,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        // One write's frames at a time: the buffer stays bounded, the caller waits.
        ready!(self.poll_drain(io, cx))?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        // Drop marks already passed (none should be), then take them as they come.
        while self.marks.front().is_some_and(|&m| m < self.written) {
            self.marks.pop_front();
        }
        if self.marks.front() == Some(&self.written) {
            self.marks.pop_front();
            self.next_seq = 0;
        }
        // A frame ends where the next command starts, and at the frame limit.
        let mut take = buf.len().min(MAX_FRAME_LEN);
        if let Some(&next) = self.marks.front() {
            take = take.min(usize::try_from(next - self.written).unwrap_or(usize::MAX));
        }
        self.encoder.encode(self.next_seq, &buf[..take], &mut self.out);
        self.next_seq = self.next_seq.wrapping_add(1);
        self.written += take as u64;
        // Send what the socket takes now; the rest goes on the next write or flush.
        if let Poll::Ready(Err(e)) = self.poll_drain(io, cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(take))
    }

    pub(crate) fn poll_flush<S: AsyncWrite + Unpin>(
        &mut self,
        io: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(io, cx))?;
        Pin::new(io).poll_flush(cx)
    }

    /// Whether frames are waiting to be written.
    pub(crate) fn has_pending(&self) -> bool {
        self.sent < self.out.len()
    }
}
