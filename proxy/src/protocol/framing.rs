//! Incremental packet framing: walks a byte stream chunk by chunk, without
//! buffering payloads, and reports where each packet starts and ends.
//!
//! A MySQL packet is a 3-byte little-endian payload length, a 1-byte sequence
//! id, then the payload. A payload of `0xFFFFFF` bytes continues in the next
//! packet (whose sequence id is one higher); the logical message ends with the
//! first shorter packet, which may be empty. The scanner reports one logical
//! message as `start` (with its first bytes), optional `body` slices, and
//! `end`, so a 1 GB result or a 20 MiB row passes through in constant memory.

use super::constants::MAX_PAYLOAD_LEN;

/// How many leading payload bytes [`FrameSink::start`] sees. Enough for every
/// fixed-layout field the state machine reads (OK: 23 bytes at most; a
/// command's statement id and flags; a column count), for the type of a
/// column definition with names of ordinary length, and for the first
/// values of a row. Lent, not copied, unless it straddles two reads.
pub const PREFIX_LEN: usize = 128;

/// The consumer of a scanned stream.
pub trait FrameSink {
    /// A logical packet begins: its first sequence id, the length of its
    /// first physical packet, and its first `min(len, PREFIX_LEN)` bytes.
    /// Returns whether the rest of the payload should be passed to `body`.
    fn start(&mut self, seq: u8, len: usize, prefix: &[u8]) -> bool;
    /// Payload bytes after the prefix, in order, across continuation packets.
    fn body(&mut self, bytes: &[u8]);
    /// The logical packet is complete: the sequence id of its last physical
    /// packet, its total payload length and how many physical packets carried it.
    fn end(&mut self, last_seq: u8, total_len: u64, packets: u32);
    /// The sequence id a physical packet should carry instead of `seq` (a continuation
    /// if `continuation`), asked as its header completes; only [`PacketScanner::scan_mut`]
    /// writes the answer into the stream. By default, `seq` itself.
    fn renumber(&mut self, seq: u8, _continuation: bool) -> u8 {
        seq
    }
}

/// A chunk the scanner walks: read-only, or writable so sequence ids can be renumbered.
trait Chunk {
    fn bytes(&self) -> &[u8];
    /// Writes a packet's sequence id at `at`.
    fn set_seq(&mut self, at: usize, seq: u8);
}

impl Chunk for &[u8] {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn set_seq(&mut self, _at: usize, _seq: u8) {}
}

impl Chunk for &mut [u8] {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn set_seq(&mut self, at: usize, seq: u8) {
        self[at] = seq;
    }
}

/// The framing state of one direction of one connection; it keeps a partial header and up to
/// [`PREFIX_LEN`] payload bytes between chunks, nothing more.
#[derive(Debug, Default)]
pub struct PacketScanner {
    header: [u8; 4],
    header_have: u8,
    in_payload: bool,
    /// Payload bytes of the current physical packet still to come.
    remaining: usize,
    /// The current physical packet is `MAX_PAYLOAD_LEN` long, so another follows.
    full: bool,
    /// The current physical packet continues a logical message.
    continuation: bool,
    last_seq: u8,
    total_len: u64,
    packets: u32,
    prefix: Prefix,
    want_body: bool,
}

#[derive(Debug)]
struct Prefix {
    buf: [u8; PREFIX_LEN],
    have: usize,
    need: usize,
}

impl Default for Prefix {
    fn default() -> Self {
        Prefix { buf: [0; PREFIX_LEN], have: 0, need: 0 }
    }
}

impl PacketScanner {
    /// Positioned at a packet boundary: the next byte fed must be a packet header's first.
    pub fn new() -> Self {
        Self::default()
    }

    /// True between packets: no header or payload bytes are pending.
    pub fn at_boundary(&self) -> bool {
        self.header_have == 0 && !self.in_payload && !self.continuation
    }

    /// Feeds the next chunk of the stream.
    pub fn scan<S: FrameSink>(&mut self, chunk: &[u8], sink: &mut S) {
        self.walk(chunk, sink);
    }

    /// Like [`scan`](Self::scan), and writes into `chunk` the sequence ids
    /// [`FrameSink::renumber`] gives: a header's id byte is always in the chunk that
    /// completes the header, so nothing already passed on needs changing.
    pub fn scan_mut<S: FrameSink>(&mut self, chunk: &mut [u8], sink: &mut S) {
        self.walk(chunk, sink);
    }

    fn walk<C: Chunk, S: FrameSink>(&mut self, mut chunk: C, sink: &mut S) {
        let len = chunk.bytes().len();
        let mut at = 0;
        while at < len {
            if self.at_boundary()
                && let Some(next) = Self::whole_packet(&mut chunk, at, sink)
            {
                at = next;
                continue;
            }
            if !self.in_payload {
                let take = (4 - self.header_have as usize).min(len - at);
                let have = self.header_have as usize;
                self.header[have..have + take].copy_from_slice(&chunk.bytes()[at..at + take]);
                self.header_have += take as u8;
                at += take;
                if self.header_have == 4 {
                    self.header_have = 0;
                    let seq = sink.renumber(self.header[3], self.continuation);
                    if seq != self.header[3] {
                        self.header[3] = seq;
                        chunk.set_seq(at - 1, seq);
                    }
                    self.begin_packet(sink);
                }
                continue;
            }
            let take = self.remaining.min(len - at);
            self.remaining -= take;
            self.payload(&chunk.bytes()[at..at + take], sink);
            at += take;
            if self.remaining == 0 {
                self.finish_packet(sink);
            }
        }
    }

    /// The common case, taken at a packet boundary: a whole packet (header and payload, no
    /// continuation) lies in the chunk from `at`. It goes to the sink straight from the chunk,
    /// with none of the state a packet split across reads needs; the scanner stays at a
    /// boundary. Returns where the next packet starts, or `None` to take the general path.
    /// Every packet of a small result is one of these: five of a round trip's six.
    #[inline]
    fn whole_packet<C: Chunk, S: FrameSink>(chunk: &mut C, at: usize, sink: &mut S) -> Option<usize> {
        let header: [u8; 4] = chunk.bytes().get(at..at + 4)?.try_into().ok()?;
        let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
        let end = at + 4 + len;
        if len == MAX_PAYLOAD_LEN || end > chunk.bytes().len() {
            return None;
        }
        let seq = sink.renumber(header[3], false);
        if seq != header[3] {
            chunk.set_seq(at + 3, seq);
        }
        let payload = &chunk.bytes()[at + 4..end];
        let (prefix, body) = payload.split_at(len.min(PREFIX_LEN));
        if sink.start(seq, len, prefix) && !body.is_empty() {
            sink.body(body);
        }
        sink.end(seq, len as u64, 1);
        Some(end)
    }

    fn begin_packet<S: FrameSink>(&mut self, sink: &mut S) {
        let len = u32::from_le_bytes([self.header[0], self.header[1], self.header[2], 0]) as usize;
        let seq = self.header[3];
        // A continuation's sequence id is not checked: lengths alone frame the
        // stream, and the peer that reads it judges the ids (the relay forwards).
        if !self.continuation {
            self.total_len = 0;
            self.packets = 0;
            self.prefix.have = 0;
            self.prefix.need = len.min(PREFIX_LEN);
            self.want_body = false;
        }
        self.last_seq = seq;
        self.total_len += len as u64;
        self.packets += 1;
        self.remaining = len;
        self.full = len == MAX_PAYLOAD_LEN;
        self.in_payload = true;
        if !self.continuation && self.prefix.need == 0 {
            self.want_body = sink.start(seq, len, &[]);
        }
        if len == 0 {
            self.finish_packet(sink);
        }
    }

    fn payload<S: FrameSink>(&mut self, bytes: &[u8], sink: &mut S) {
        if self.continuation || self.prefix.have >= self.prefix.need {
            if self.want_body {
                sink.body(bytes);
            }
            return;
        }
        // The prefix comes from the first physical packet, whose length is
        // still the whole of `total_len`.
        let len = self.total_len as usize;
        let missing = self.prefix.need - self.prefix.have;
        let rest = if self.prefix.have == 0 && bytes.len() >= missing {
            // The common case: the whole prefix is in this chunk; lend it, don't copy.
            self.prefix.have = self.prefix.need;
            self.want_body = sink.start(self.last_seq, len, &bytes[..missing]);
            &bytes[missing..]
        } else {
            let take = missing.min(bytes.len());
            let at = self.prefix.have;
            self.prefix.buf[at..at + take].copy_from_slice(&bytes[..take]);
            self.prefix.have += take;
            if self.prefix.have < self.prefix.need {
                return;
            }
            self.want_body = sink.start(self.last_seq, len, &self.prefix.buf[..self.prefix.need]);
            &bytes[take..]
        };
        if self.want_body && !rest.is_empty() {
            sink.body(rest);
        }
    }

    fn finish_packet<S: FrameSink>(&mut self, sink: &mut S) {
        self.in_payload = false;
        if self.full {
            self.continuation = true;
            return;
        }
        self.continuation = false;
        self.want_body = false;
        sink.end(self.last_seq, self.total_len, self.packets);
    }
}

/// Writes a packet header for a payload of `len` bytes (`len` < 2^24).
pub fn header(len: usize, seq: u8) -> [u8; 4] {
    let l = (len as u32).to_le_bytes();
    [l[0], l[1], l[2], seq]
}

#[cfg(test)]
mod tests;
