//! `PacketScanner::scan` on arbitrary bytes split at arbitrary points.
//!
//! Input: one byte `n`, then `n % 8` chunk sizes (each byte + 1, used in
//! turn), then the stream. The stream is scanned twice — whole, and in those
//! chunks with an empty `scan` between each — and both runs must report the
//! same packets and the same body bytes: the relay reads
//! sockets in whatever pieces the kernel hands it, so how reads split must
//! never change what is decoded.

use rttscope::protocol::framing::{FrameSink, PREFIX_LEN, PacketScanner};

use super::Input;

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let n = usize::from(input.u8() % 8);
    let sizes: Vec<usize> = input.bytes(n).iter().map(|&b| usize::from(b) + 1).collect();
    let stream = input.rest();

    let whole = scan(stream, &[]);
    let chunked = scan(stream, &sizes);
    assert_eq!(whole, chunked, "chunk sizes {sizes:?} changed what was decoded");
}

#[derive(Debug, PartialEq, Eq)]
enum Event {
    Start {
        seq: u8,
        len: usize,
        prefix: Vec<u8>,
        want_body: bool,
    },
    /// Consecutive `body` calls merged: only the bytes, not how they were cut, must agree.
    Body(Vec<u8>),
    End {
        last_seq: u8,
        total_len: u64,
        packets: u32,
    },
}

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    events: Vec<Event>,
    at_boundary: bool,
}

fn scan(stream: &[u8], sizes: &[usize]) -> Outcome {
    let mut scanner = PacketScanner::new();
    let mut sink = Checker::default();
    if sizes.is_empty() {
        scanner.scan(stream, &mut sink);
    } else {
        let mut rest = stream;
        for &size in sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (chunk, after) = rest.split_at(size.min(rest.len()));
            rest = after;
            // An empty read must be a no-op wherever it falls.
            scanner.scan(chunk, &mut sink);
            scanner.scan(&[], &mut sink);
        }
    }
    Outcome { events: sink.events, at_boundary: scanner.at_boundary() }
}

/// Records events and checks the `FrameSink` contract as they arrive.
#[derive(Default)]
struct Checker {
    events: Vec<Event>,
    /// The packet being delivered: its first length, prefix length, whether
    /// its body was asked for, and the body bytes seen so far.
    open: Option<(usize, usize, bool, u64)>,
}

impl FrameSink for Checker {
    fn start(&mut self, seq: u8, len: usize, prefix: &[u8]) -> bool {
        assert!(self.open.is_none(), "start inside an unfinished packet");
        assert_eq!(prefix.len(), len.min(PREFIX_LEN), "prefix of a {len}-byte packet");
        // Deterministic in (seq, len), so both runs make the same choices.
        let want_body = !(usize::from(seq) + len).is_multiple_of(3);
        self.open = Some((len, prefix.len(), want_body, 0));
        self.events.push(Event::Start { seq, len, prefix: prefix.to_vec(), want_body });
        want_body
    }

    fn body(&mut self, bytes: &[u8]) {
        let Some((_, _, want_body, seen)) = &mut self.open else { panic!("body outside a packet") };
        assert!(*want_body, "body passed after start declined it");
        *seen += bytes.len() as u64;
        match self.events.last_mut() {
            Some(Event::Body(b)) => b.extend_from_slice(bytes),
            _ => self.events.push(Event::Body(bytes.to_vec())),
        }
    }

    fn end(&mut self, last_seq: u8, total_len: u64, packets: u32) {
        let (len, prefix, want_body, seen) = self.open.take().expect("end without start");
        assert!(packets >= 1);
        assert!(total_len >= len as u64, "total {total_len} shorter than the first packet {len}");
        if want_body {
            assert_eq!(prefix as u64 + seen, total_len, "prefix and body must cover the payload");
        }
        self.events.push(Event::End { last_seq, total_len, packets });
    }
}
