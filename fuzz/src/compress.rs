//! The compressed protocol's framing (`FrameDecoder`, `FrameEncoder`) on arbitrary bytes.
//!
//! Input: one byte choosing zlib or zstd (and a level), one byte `n`, `n % 8` read sizes and
//! `n % 8` output sizes (each byte + 1), then the stream. The stream is decoded twice —
//! whole into a large buffer, and fed in those read sizes into those output sizes — and
//! both must give the same bytes and agree on whether it is valid: the leg decodes frames
//! in whatever pieces the socket and the caller's buffer allow. Decoding never produces
//! more than the frames' headers promise. Then the same bytes, taken as a packet stream,
//! are encoded into frames and must decode back to themselves.

use std::cell::RefCell;

use rttscope::protocol::compress::{Algorithm, FrameDecoder, FrameEncoder, MAX_FRAME_LEN};

use super::Input;

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let choice = input.u8();
    let algorithm = if choice & 1 == 0 { Algorithm::Zlib } else { Algorithm::Zstd { level: choice % 22 + 1 } };
    let n = usize::from(input.u8() % 8);
    let reads: Vec<usize> = input.bytes(n).iter().map(|&b| usize::from(b) + 1).collect();
    let writes: Vec<usize> = input.bytes(n).iter().map(|&b| usize::from(b) + 1).collect();
    let stream = input.rest();

    let whole = decode(algorithm, stream, &[stream.len().max(1)], &[ROOM]);
    let pieces = decode(algorithm, stream, &reads, &writes);
    match (&whole, &pieces) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "read sizes {reads:?} and output sizes {writes:?} changed the output"),
        // Both failed: they may fail at different bytes (the whole run sees more at once).
        (Err(()), Err(())) => {}
        // One stopped early for want of input, the other failed on it: both saw the same
        // bytes, so they must agree.
        _ => panic!("whole {whole:?} vs pieces {pieces:?}"),
    }

    // Encoding arbitrary bytes and decoding them gives them back.
    let mut frames = Vec::new();
    let mut encode = |encoder: &mut FrameEncoder| {
        for (seq, chunk) in stream.chunks(MAX_FRAME_LEN.min(reads.first().copied().unwrap_or(4096) * 64)).enumerate() {
            encoder.encode(seq as u8, chunk, &mut frames);
        }
    };
    match algorithm {
        Algorithm::Zlib => ZLIB.with_borrow_mut(encode),
        Algorithm::Zstd { .. } => encode(&mut FrameEncoder::new(algorithm)),
    }
    assert_eq!(decode(algorithm, &frames, &[frames.len().max(1)], &[ROOM]).as_deref(), Ok(stream));
}

/// The largest output buffer `decode` hands the decoder.
const ROOM: usize = 1 << 20;

thread_local! {
    /// One zlib encoder for every input, as the relay keeps one per connection: setting up
    /// zlib's state was a large share of a run, and `encode` resets it before every frame.
    static ZLIB: RefCell<FrameEncoder> = RefCell::new(FrameEncoder::new(Algorithm::Zlib));
    /// `decode`'s output buffer, allocated once: zeroing a fresh 1 MiB per turn was most of
    /// the harness's time. What it held before does not matter, the decoder only writes it.
    static OUTPUT: RefCell<Vec<u8>> = RefCell::new(vec![0; ROOM]);
}

/// Decodes `stream` in reads of `reads` sizes (cycled) into output buffers of `writes`
/// sizes (cycled). `Err` when the stream is invalid or ends inside a frame.
fn decode(algorithm: Algorithm, stream: &[u8], reads: &[usize], writes: &[usize]) -> Result<Vec<u8>, ()> {
    let mut decoder = FrameDecoder::new(algorithm).map_err(drop)?;
    let reads = if reads.is_empty() { &[stream.len().max(1)][..] } else { reads };
    let writes = if writes.is_empty() { &[ROOM][..] } else { writes };
    OUTPUT.with_borrow_mut(|buffer| decode_into(&mut decoder, stream, reads, writes, buffer))
}

fn decode_into(
    decoder: &mut FrameDecoder,
    stream: &[u8],
    reads: &[usize],
    writes: &[usize],
    buffer: &mut [u8],
) -> Result<Vec<u8>, ()> {
    let mut out = Vec::new();
    let (mut at, mut turn) = (0, 0usize);
    // Every turn makes progress or the stream is over: bounded by input and output.
    let mut idle = 0;
    while at < stream.len() || idle == 0 {
        let end = (at + reads[turn % reads.len()]).min(stream.len());
        let room = &mut buffer[..writes[turn % writes.len()]];
        let (used, made) = decoder.decode(&stream[at..end], room).map_err(drop)?;
        assert!(used <= end - at && made <= room.len());
        out.extend_from_slice(&room[..made]);
        at += used;
        turn += 1;
        idle = if used == 0 && made == 0 { idle + 1 } else { 0 };
        if idle > 2 * reads.len() * writes.len() + 2 {
            break;
        }
        // A cap far above what any frame in a fuzz input can promise: a decoder that
        // produced more than its headers allow would run away here.
        assert!(out.len() <= 64 * MAX_FRAME_LEN, "decoded more than any frames could hold");
    }
    if at < stream.len() || !decoder.at_boundary() {
        return Err(());
    }
    Ok(out)
}
