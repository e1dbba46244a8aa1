//! The compressed protocol's framing, sans-io: what `CLIENT_COMPRESS` (zlib) and
//! `CLIENT_ZSTD_COMPRESSION_ALGORITHM` put around the ordinary packet stream once the
//! handshake is over.
//!
//! A frame is a 7-byte header — the payload's length on the wire (3 bytes, little-endian),
//! the compressed sequence id (1), and the payload's length once decompressed (3) — then
//! the payload. An uncompressed length of 0 means the payload is sent as it is (senders do
//! this below [`MIN_COMPRESS_LEN`] bytes, or when compressing would not help). Each frame
//! is compressed on its own. Frames carry bytes, not packets: one packet may span frames
//! and one frame may hold many packets; the packets inside keep their own headers.
//!
//! The compressed sequence id counts frames: it starts at 0 with each command the client
//! sends and goes on, frame by frame, through the response. The server checks it.
//!
//! [`FrameDecoder`] turns frames back into the packet stream without holding a whole frame:
//! compressed payloads are inflated as they arrive, straight into the caller's buffer, so a
//! connection's memory stays bounded whatever the frame size. [`FrameEncoder`] makes frames.

use std::fmt;

/// Bytes in a frame header.
pub const HEADER_LEN: usize = 7;
/// Payloads shorter than this are sent uncompressed (as MySQL and MariaDB do).
pub const MIN_COMPRESS_LEN: usize = 50;
/// The most a frame may carry, either length: 3 bytes of length.
pub const MAX_FRAME_LEN: usize = 0xFF_FFFF;
/// zstd window a decoder accepts (2^24 = 16 MiB: a frame never holds more). A larger
/// window in a frame is refused rather than allocated.
const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// A compression algorithm, as negotiated in the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// zlib (`CLIENT_COMPRESS`).
    Zlib,
    /// zstd (`CLIENT_ZSTD_COMPRESSION_ALGORITHM`) at the level the client asked for.
    Zstd {
        /// 1 to 22; MySQL's default is 3.
        level: u8,
    },
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Algorithm::Zlib => f.write_str("zlib"),
            Algorithm::Zstd { level } => write!(f, "zstd (level {level})"),
        }
    }
}

/// A stream that is not valid compressed protocol.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompressError {
    /// The payload would not inflate.
    #[error("compressed frame {seq} does not decompress: {reason}")]
    Corrupt {
        /// The frame's compressed sequence id.
        seq: u8,
        /// What the decompressor said.
        reason: String,
    },
    /// The payload inflated to another length than its header said.
    #[error("compressed frame {seq} decompressed to {got} bytes, its header says {expected}")]
    WrongLength {
        /// The frame's compressed sequence id.
        seq: u8,
        /// The length in the header.
        expected: usize,
        /// What it inflated to (so far).
        got: usize,
    },
}

/// The header of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload bytes on the wire.
    pub wire_len: usize,
    /// The compressed sequence id.
    pub seq: u8,
    /// Payload bytes once decompressed; 0 when the payload is not compressed.
    pub uncompressed_len: usize,
}

impl FrameHeader {
    /// Reads a header.
    pub fn parse(bytes: &[u8; HEADER_LEN]) -> FrameHeader {
        FrameHeader {
            wire_len: u32::from_le_bytes([bytes[0], bytes[1], bytes[2], 0]) as usize,
            seq: bytes[3],
            uncompressed_len: u32::from_le_bytes([bytes[4], bytes[5], bytes[6], 0]) as usize,
        }
    }

    /// Writes a header; both lengths must be below 2^24.
    pub fn write(&self, out: &mut Vec<u8>) {
        let w = (self.wire_len as u32).to_le_bytes();
        let u = (self.uncompressed_len as u32).to_le_bytes();
        out.extend_from_slice(&[w[0], w[1], w[2], self.seq, u[0], u[1], u[2]]);
    }
}

/// A streaming decompressor of one algorithm.
enum Inflater {
    Zlib(Box<flate2::Decompress>),
    Zstd(Box<zstd::stream::raw::Decoder<'static>>),
}

impl Inflater {
    fn new(algorithm: Algorithm) -> Result<Inflater, CompressError> {
        Ok(match algorithm {
            Algorithm::Zlib => Inflater::Zlib(Box::new(flate2::Decompress::new(true))),
            Algorithm::Zstd { .. } => {
                let mut decoder = zstd::stream::raw::Decoder::new()
                    .map_err(|e| CompressError::Corrupt { seq: 0, reason: e.to_string() })?;
                decoder
                    .set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(ZSTD_WINDOW_LOG_MAX))
                    .map_err(|e| CompressError::Corrupt { seq: 0, reason: e.to_string() })?;
                Inflater::Zstd(Box::new(decoder))
            }
        })
    }

    /// Inflates from `input` into `output`; returns (consumed, produced).
    fn run(&mut self, input: &[u8], output: &mut [u8]) -> Result<(usize, usize), String> {
        match self {
            Inflater::Zlib(d) => {
                let (before_in, before_out) = (d.total_in(), d.total_out());
                d.decompress(input, output, flate2::FlushDecompress::None).map_err(|e| e.to_string())?;
                Ok(((d.total_in() - before_in) as usize, (d.total_out() - before_out) as usize))
            }
            Inflater::Zstd(d) => {
                use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
                let mut inb = InBuffer::around(input);
                let mut outb = OutBuffer::around(output);
                d.run(&mut inb, &mut outb).map_err(|e| e.to_string())?;
                Ok((inb.pos(), outb.pos()))
            }
        }
    }

    /// Ready for the next frame (each frame is compressed on its own).
    fn reset(&mut self) -> Result<(), String> {
        match self {
            Inflater::Zlib(d) => {
                d.reset(true);
                Ok(())
            }
            Inflater::Zstd(d) => {
                use zstd::stream::raw::Operation;
                d.reinit().map_err(|e| e.to_string())
            }
        }
    }
}

/// Where the decoder stands.
#[derive(Clone, Copy, Debug)]
enum Part {
    /// Reading a header; `have` bytes of it so far.
    Header { have: usize },
    /// Passing an uncompressed payload through; `left` bytes to come.
    Raw { left: usize },
    /// Inflating a compressed payload: `left` wire bytes to come, `produced` of
    /// `expected` decompressed bytes made.
    Compressed { left: usize, produced: usize, expected: usize },
}

/// Frames in, the packet stream out.
pub struct FrameDecoder {
    inflater: Inflater,
    header: [u8; HEADER_LEN],
    part: Part,
    /// The compressed sequence id of the last header read.
    last_seq: Option<u8>,
    /// Headers read so far.
    frames: u64,
}

impl FrameDecoder {
    /// A decoder for frames compressed with `algorithm`.
    pub fn new(algorithm: Algorithm) -> Result<FrameDecoder, CompressError> {
        Ok(FrameDecoder {
            inflater: Inflater::new(algorithm)?,
            header: [0; HEADER_LEN],
            part: Part::Header { have: 0 },
            last_seq: None,
            frames: 0,
        })
    }

    /// How many frame headers have been read: a caller compares it to see whether
    /// [`last_seq`](Self::last_seq) is new.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The compressed sequence id of the latest frame header.
    pub fn last_seq(&self) -> Option<u8> {
        self.last_seq
    }

    /// True between frames.
    pub fn at_boundary(&self) -> bool {
        matches!(self.part, Part::Header { have: 0 })
    }

    /// Decodes what it can of `input` into `output`: returns how many input bytes it
    /// consumed and how many output bytes it produced. Either may be less than offered;
    /// call again with the rest (and, when `output` was filled, more room).
    pub fn decode(&mut self, input: &[u8], output: &mut [u8]) -> Result<(usize, usize), CompressError> {
        let (mut consumed, mut produced) = (0, 0);
        loop {
            let (rest_in, rest_out) = (&input[consumed..], &mut output[produced..]);
            match self.part {
                Part::Header { have } => {
                    if rest_in.is_empty() {
                        break;
                    }
                    let take = (HEADER_LEN - have).min(rest_in.len());
                    self.header[have..have + take].copy_from_slice(&rest_in[..take]);
                    consumed += take;
                    if have + take < HEADER_LEN {
                        self.part = Part::Header { have: have + take };
                        continue;
                    }
                    let header = FrameHeader::parse(&self.header);
                    self.last_seq = Some(header.seq);
                    self.frames += 1;
                    self.part = match (header.wire_len, header.uncompressed_len) {
                        (0, _) => Part::Header { have: 0 },
                        (left, 0) => Part::Raw { left },
                        (left, expected) => Part::Compressed { left, produced: 0, expected },
                    };
                }
                Part::Raw { left } => {
                    let n = left.min(rest_in.len()).min(rest_out.len());
                    if n == 0 {
                        break;
                    }
                    rest_out[..n].copy_from_slice(&rest_in[..n]);
                    consumed += n;
                    produced += n;
                    self.part = if left == n { Part::Header { have: 0 } } else { Part::Raw { left: left - n } };
                }
                Part::Compressed { left, produced: made, expected } => {
                    let seq = self.last_seq.unwrap_or(0);
                    let corrupt = |reason| CompressError::Corrupt { seq, reason };
                    let feed = &rest_in[..left.min(rest_in.len())];
                    let (used, out) = if made < expected {
                        // Never let a frame inflate past what its header promised.
                        let room = (expected - made).min(rest_out.len());
                        if room == 0 {
                            break;
                        }
                        self.inflater.run(feed, &mut rest_out[..room]).map_err(corrupt)?
                    } else {
                        // Everything promised is out; what is left on the wire can only
                        // be the stream's end (zlib's checksum): nothing more may come out.
                        let mut scratch = [0u8; 1];
                        let (used, extra) = self.inflater.run(feed, &mut scratch).map_err(corrupt)?;
                        if extra > 0 {
                            return Err(CompressError::WrongLength { seq, expected, got: made + extra });
                        }
                        (used, 0)
                    };
                    consumed += used;
                    produced += out;
                    let (left, made) = (left - used, made + out);
                    if left == 0 && made == expected {
                        self.inflater.reset().map_err(corrupt)?;
                        self.part = Part::Header { have: 0 };
                        continue;
                    }
                    self.part = Part::Compressed { left, produced: made, expected };
                    if used == 0 && out == 0 {
                        if left == 0 {
                            // The payload is over and did not make what it promised.
                            return Err(CompressError::WrongLength { seq, expected, got: made });
                        }
                        if !feed.is_empty() {
                            return Err(corrupt("the decompressor made no progress".to_owned()));
                        }
                        break;
                    }
                }
            }
        }
        Ok((consumed, produced))
    }
}

/// The packet stream in, frames out.
pub struct FrameEncoder {
    algorithm: Algorithm,
    zlib: Option<Box<flate2::Compress>>,
    scratch: Vec<u8>,
}

impl FrameEncoder {
    /// An encoder compressing with `algorithm`.
    pub fn new(algorithm: Algorithm) -> FrameEncoder {
        let zlib = match algorithm {
            // MySQL and MariaDB use zlib's default level.
            Algorithm::Zlib => Some(Box::new(flate2::Compress::new(flate2::Compression::default(), true))),
            Algorithm::Zstd { .. } => None,
        };
        FrameEncoder { algorithm, zlib, scratch: Vec::new() }
    }

    /// Appends to `out` one frame with sequence id `seq` carrying `payload` (at most
    /// [`MAX_FRAME_LEN`] bytes), compressed when that makes it smaller.
    pub fn encode(&mut self, seq: u8, payload: &[u8], out: &mut Vec<u8>) {
        debug_assert!(payload.len() <= MAX_FRAME_LEN);
        if payload.len() >= MIN_COMPRESS_LEN && self.compress(payload) && self.scratch.len() < payload.len() {
            FrameHeader { wire_len: self.scratch.len(), seq, uncompressed_len: payload.len() }.write(out);
            out.extend_from_slice(&self.scratch);
        } else {
            FrameHeader { wire_len: payload.len(), seq, uncompressed_len: 0 }.write(out);
            out.extend_from_slice(payload);
        }
    }

    /// Compresses `payload` into the scratch buffer; false if the compressor failed.
    fn compress(&mut self, payload: &[u8]) -> bool {
        self.scratch.clear();
        match (&mut self.zlib, self.algorithm) {
            (Some(z), _) => {
                z.reset();
                // zlib's bound for incompressible input is a few bytes per 16 KiB over.
                self.scratch.reserve(payload.len() + payload.len() / 1000 + 64);
                matches!(
                    z.compress_vec(payload, &mut self.scratch, flate2::FlushCompress::Finish),
                    Ok(flate2::Status::StreamEnd)
                )
            }
            (None, Algorithm::Zstd { level }) => match zstd::bulk::compress(payload, i32::from(level)) {
                Ok(compressed) => {
                    self.scratch = compressed;
                    true
                }
                Err(_) => false,
            },
            (None, Algorithm::Zlib) => false,
        }
    }
}

#[cfg(test)]
mod tests;
