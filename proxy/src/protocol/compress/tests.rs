//! The compressed framing on literal wire bytes, whole and byte by byte.

use super::*;

/// Eight `COM_QUERY select 1` packets, as MySQL's `my_compress` (zlib's `compress()`)
/// deflates them: 104 bytes into 24.
const EIGHT_QUERIES_ZLIB: [u8; 24] = [
    0x78, 0x9c, 0xe3, 0x64, 0x60, 0x60, 0x60, 0x2e, 0x4e, 0xcd, 0x49, 0x4d, 0x2e, 0x51, 0x30, 0xe4, 0xa4, 0x1d, 0x07,
    0x00, 0x89, 0x08, 0x16, 0xe9,
];

fn eight_queries() -> Vec<u8> {
    b"\x09\x00\x00\x00\x03select 1".repeat(8)
}

fn frame(seq: u8, uncompressed_len: usize, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    FrameHeader { wire_len: payload.len(), seq, uncompressed_len }.write(&mut out);
    out.extend_from_slice(payload);
    out
}

/// Decodes `wire` feeding `step_in` bytes at a time with `step_out` bytes of room.
fn decode(algorithm: Algorithm, wire: &[u8], step_in: usize, step_out: usize) -> Result<Vec<u8>, CompressError> {
    let mut decoder = FrameDecoder::new(algorithm)?;
    let mut out = Vec::new();
    let mut room = vec![0u8; step_out];
    let mut at = 0;
    let mut stalls = 0;
    while at < wire.len() || stalls < 3 {
        let end = at.saturating_add(step_in).min(wire.len());
        let (used, made) = decoder.decode(&wire[at..end], &mut room)?;
        out.extend_from_slice(&room[..made]);
        at += used;
        stalls = if used == 0 && made == 0 { stalls + 1 } else { 0 };
        assert!(stalls < 10, "no progress at {at} of {}", wire.len());
        if at == wire.len() && made == 0 {
            break;
        }
    }
    assert!(decoder.at_boundary(), "stopped inside a frame");
    Ok(out)
}

#[test]
fn a_zlib_frame_from_the_wire() {
    let wire = frame(0, 104, &EIGHT_QUERIES_ZLIB);
    assert_eq!(&wire[..7], &[24, 0, 0, 0, 104, 0, 0]);
    for (step_in, step_out) in [(usize::MAX, 4096), (1, 4096), (1, 1), (5, 3), (31, 104)] {
        assert_eq!(decode(Algorithm::Zlib, &wire, step_in, step_out).unwrap(), eight_queries(), "{step_in}/{step_out}");
    }
}

#[test]
fn an_uncompressed_frame_passes_through() {
    // A short command travels as it is: uncompressed length 0.
    let wire = frame(3, 0, b"\x01\x00\x00\x00\x0e");
    assert_eq!(decode(Algorithm::Zlib, &wire, 2, 2).unwrap(), b"\x01\x00\x00\x00\x0e");
}

#[test]
fn frames_hold_many_packets_and_packets_span_frames() {
    let stream = eight_queries();
    // A packet cut in two across frames, both kinds of frame in one read, and an empty frame.
    let mut wire = frame(0, 0, &stream[..30]);
    wire.extend(frame(1, 0, &[]));
    let mut encoder = FrameEncoder::new(Algorithm::Zlib);
    encoder.encode(2, &stream[30..], &mut wire);
    assert_ne!(wire[44 + 4], 0, "the third frame is compressed");
    let mut decoder = FrameDecoder::new(Algorithm::Zlib).unwrap();
    let mut out = vec![0u8; 4096];
    let (used, made) = decoder.decode(&wire, &mut out).unwrap();
    assert_eq!((used, &out[..made]), (wire.len(), &stream[..]));
    assert_eq!(decoder.last_seq(), Some(2));
}

#[test]
fn the_encoder_compresses_only_what_gains() {
    let mut encoder = FrameEncoder::new(Algorithm::Zlib);
    let mut out = Vec::new();
    encoder.encode(0, b"\x05\x00\x00\x00\x03show", &mut out);
    assert_eq!(FrameHeader::parse(out[..7].try_into().unwrap()).uncompressed_len, 0, "below the threshold");
    out.clear();
    encoder.encode(7, &eight_queries(), &mut out);
    let header = FrameHeader::parse(out[..7].try_into().unwrap());
    assert_eq!((header.seq, header.uncompressed_len, header.wire_len), (7, 104, out.len() - 7));
    assert!(header.wire_len < 40, "{header:?}");
    // Random bytes do not compress: sent as they are.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let noise: Vec<u8> = (0..4000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    out.clear();
    encoder.encode(1, &noise, &mut out);
    assert_eq!(FrameHeader::parse(out[..7].try_into().unwrap()).uncompressed_len, 0);
    assert_eq!(&out[7..], &noise[..]);
}

#[test]
fn zstd_round_trips_at_the_clients_level() {
    let stream: Vec<u8> = (0..200).flat_map(|i: u32| format!("\x20\x00\x00\x01row {i:>27}").into_bytes()).collect();
    let mut wire = Vec::new();
    let mut encoder = FrameEncoder::new(Algorithm::Zstd { level: 3 });
    for (seq, chunk) in stream.chunks(1000).enumerate() {
        encoder.encode(seq as u8, chunk, &mut wire);
    }
    assert!(wire.len() < stream.len() / 2, "{} of {}", wire.len(), stream.len());
    for (step_in, step_out) in [(usize::MAX, 65536), (1, 7), (13, 1)] {
        assert_eq!(decode(Algorithm::Zstd { level: 3 }, &wire, step_in, step_out).unwrap(), stream);
    }
}

#[test]
fn bad_frames_are_errors_not_panics() {
    // Garbage where zlib is expected.
    let wire = frame(4, 100, &[0xde, 0xad, 0xbe, 0xef, 1, 2, 3]);
    assert!(matches!(decode(Algorithm::Zlib, &wire, 64, 64), Err(CompressError::Corrupt { seq: 4, .. })));
    // A header promising fewer bytes than the payload inflates to.
    let wire = frame(0, 50, &EIGHT_QUERIES_ZLIB);
    assert!(matches!(decode(Algorithm::Zlib, &wire, 64, 64), Err(CompressError::WrongLength { expected: 50, .. })));
    // ... or more.
    let wire = frame(0, 200, &EIGHT_QUERIES_ZLIB);
    assert!(matches!(
        decode(Algorithm::Zlib, &wire, 64, 64),
        Err(CompressError::WrongLength { expected: 200, got: 104, .. })
    ));
    // Bytes after the end of the deflate stream.
    let mut padded = EIGHT_QUERIES_ZLIB.to_vec();
    padded.extend_from_slice(&[0, 0, 0]);
    let wire = frame(0, 104, &padded);
    assert!(decode(Algorithm::Zlib, &wire, 64, 1024).is_err());
}

#[test]
fn a_large_frame_inflates_in_bounded_steps() {
    // 4 MiB of rows through a 16 KiB output buffer: the decoder never needs the whole frame.
    let stream = b"\x0c\x00\x00\x05hello world!".repeat(4 << 20 >> 4);
    let mut wire = Vec::new();
    FrameEncoder::new(Algorithm::Zlib).encode(9, &stream, &mut wire);
    assert_eq!(decode(Algorithm::Zlib, &wire, 16 << 10, 16 << 10).unwrap(), stream);
}
