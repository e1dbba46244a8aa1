//! Framing on literal wire bytes: every split point, and the 16 MiB edges.

use super::*;

#[derive(Debug, Default, PartialEq)]
struct Recorder {
    events: Vec<Event>,
    want_body: bool,
}

#[derive(Clone, Debug, PartialEq)]
enum Event {
    Start { seq: u8, len: usize, prefix: Vec<u8> },
    Body(Vec<u8>),
    End { last_seq: u8, total_len: u64, packets: u32 },
}

impl FrameSink for Recorder {
    fn start(&mut self, seq: u8, len: usize, prefix: &[u8]) -> bool {
        self.events.push(Event::Start { seq, len, prefix: prefix.to_vec() });
        self.want_body
    }
    fn body(&mut self, bytes: &[u8]) {
        // Merge adjacent body slices so results don't depend on chunking.
        if let Some(Event::Body(b)) = self.events.last_mut() {
            b.extend_from_slice(bytes);
        } else {
            self.events.push(Event::Body(bytes.to_vec()));
        }
    }
    fn end(&mut self, last_seq: u8, total_len: u64, packets: u32) {
        self.events.push(Event::End { last_seq, total_len, packets });
    }
}

fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = header(payload.len(), seq).to_vec();
    p.extend_from_slice(payload);
    p
}

fn scan_in_chunks(stream: &[u8], chunk: usize, want_body: bool) -> Vec<Event> {
    let mut scanner = PacketScanner::new();
    let mut rec = Recorder { want_body, ..Default::default() };
    for piece in stream.chunks(chunk) {
        scanner.scan(piece, &mut rec);
    }
    assert!(scanner.at_boundary());
    rec.events
}

#[test]
fn com_query_from_the_wire() {
    // `select 1` as the mariadb CLI sent it.
    let wire = [0x09, 0x00, 0x00, 0x00, 0x03, b's', b'e', b'l', b'e', b'c', b't', b' ', b'1'];
    let events = scan_in_chunks(&wire, wire.len(), false);
    assert_eq!(
        events,
        vec![
            Event::Start { seq: 0, len: 9, prefix: b"\x03select 1".to_vec() },
            Event::End { last_seq: 0, total_len: 9, packets: 1 }
        ]
    );
}

#[test]
fn every_split_point_gives_the_same_events() {
    let mut stream = packet(0, &[0x03; 2 * PREFIX_LEN]);
    stream.extend(packet(1, b""));
    stream.extend(packet(2, &[7; PREFIX_LEN - 1]));
    stream.extend(packet(3, &[8; PREFIX_LEN + 1]));
    let whole = scan_in_chunks(&stream, stream.len(), true);
    for chunk in 1..stream.len() {
        assert_eq!(scan_in_chunks(&stream, chunk, true), whole, "chunk size {chunk}");
    }
    assert_eq!(whole.len(), 3 + 2 + 2 + 3);
    assert_eq!(whole[0], Event::Start { seq: 0, len: 2 * PREFIX_LEN, prefix: vec![0x03; PREFIX_LEN] });
    assert_eq!(whole[1], Event::Body(vec![0x03; PREFIX_LEN]));
    assert_eq!(whole[3], Event::Start { seq: 1, len: 0, prefix: vec![] });
}

#[test]
fn body_is_withheld_unless_asked() {
    let stream = packet(0, &[1; PREFIX_LEN + 100]);
    let events = scan_in_chunks(&stream, 7, false);
    assert_eq!(events.len(), 2);
}

/// A logical payload of `len` bytes as the protocol splits it.
fn split_payload(len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut stream = Vec::new();
    let mut seq = 0u8;
    let mut rest = &payload[..];
    loop {
        let n = rest.len().min(MAX_PAYLOAD_LEN);
        stream.extend(packet(seq, &rest[..n]));
        seq = seq.wrapping_add(1);
        rest = &rest[n..];
        if n < MAX_PAYLOAD_LEN {
            break;
        }
    }
    stream
}

#[test]
fn payload_of_exactly_max_len_ends_with_an_empty_packet() {
    let stream = split_payload(MAX_PAYLOAD_LEN);
    assert_eq!(stream.len(), MAX_PAYLOAD_LEN + 8);
    let events = scan_in_chunks(&stream, 1 << 16, true);
    assert_eq!(events.last(), Some(&Event::End { last_seq: 1, total_len: MAX_PAYLOAD_LEN as u64, packets: 2 }));
    let Event::Body(body) = &events[1] else { panic!("expected body") };
    assert_eq!(body.len(), MAX_PAYLOAD_LEN - PREFIX_LEN);
}

#[test]
fn payload_of_max_plus_one_and_twice_max() {
    let events = scan_in_chunks(&split_payload(MAX_PAYLOAD_LEN + 1), 1 << 20, false);
    assert_eq!(events.last(), Some(&Event::End { last_seq: 1, total_len: MAX_PAYLOAD_LEN as u64 + 1, packets: 2 }));
    let events = scan_in_chunks(&split_payload(2 * MAX_PAYLOAD_LEN), 1 << 20, false);
    assert_eq!(events.len(), 2);
    assert_eq!(events[1], Event::End { last_seq: 2, total_len: 2 * MAX_PAYLOAD_LEN as u64, packets: 3 });
}

#[test]
fn continuation_with_wrong_sequence_id_is_still_framed_by_length() {
    let mut stream = split_payload(MAX_PAYLOAD_LEN + 10);
    // Corrupt the second packet's sequence id (expected 1): the peer judges that; the
    // scanner still knows where the message ends.
    stream[4 + MAX_PAYLOAD_LEN + 3] = 5;
    let events = scan_in_chunks(&stream, 1 << 20, false);
    assert_eq!(events.last(), Some(&Event::End { last_seq: 5, total_len: MAX_PAYLOAD_LEN as u64 + 10, packets: 2 }));
}

#[test]
fn sequence_ids_wrap() {
    let mut stream = Vec::new();
    let mut seq = 250u8;
    for _ in 0..10 {
        stream.extend(packet(seq, &[0; MAX_PAYLOAD_LEN][..0]));
        seq = seq.wrapping_add(1);
    }
    let events = scan_in_chunks(&stream, 3, false);
    assert_eq!(events.len(), 20);
}

#[test]
fn partial_header_is_not_a_boundary() {
    let mut scanner = PacketScanner::new();
    let mut rec = Recorder::default();
    scanner.scan(&[5, 0], &mut rec);
    assert!(!scanner.at_boundary());
    scanner.scan(&[0, 0, 1, 2], &mut rec);
    assert!(!scanner.at_boundary());
    scanner.scan(&[3, 4, 5], &mut rec);
    assert!(scanner.at_boundary());
}

/// Renumbers every packet to `seq + 10`, as a compressed leg's session does.
struct Renumber(Recorder);

impl FrameSink for Renumber {
    fn start(&mut self, seq: u8, len: usize, prefix: &[u8]) -> bool {
        self.0.start(seq, len, prefix)
    }
    fn body(&mut self, bytes: &[u8]) {
        self.0.body(bytes);
    }
    fn end(&mut self, last_seq: u8, total_len: u64, packets: u32) {
        self.0.end(last_seq, total_len, packets);
    }
    fn renumber(&mut self, seq: u8, _continuation: bool) -> u8 {
        seq.wrapping_add(10)
    }
}

/// Whole packets in one read take the scanner's short path, a packet split across reads the
/// general one: both must write the same ids into the stream and report the same packets.
#[test]
fn renumbering_is_the_same_for_whole_and_split_packets() {
    let mut stream = packet(0, b"\x01");
    stream.extend(packet(1, &[5; PREFIX_LEN + 3]));
    stream.extend(packet(2, b""));
    let scan = |chunk: usize| {
        let (mut bytes, mut scanner) = (stream.clone(), PacketScanner::new());
        let mut sink = Renumber(Recorder { want_body: true, ..Default::default() });
        for piece in bytes.chunks_mut(chunk) {
            scanner.scan_mut(piece, &mut sink);
        }
        (bytes, sink.0.events)
    };
    let (whole_bytes, whole_events) = scan(stream.len());
    assert_eq!([whole_bytes[3], whole_bytes[8], whole_bytes[4 + 1 + 4 + PREFIX_LEN + 3 + 3]], [10, 11, 12]);
    assert_eq!(whole_events[0], Event::Start { seq: 10, len: 1, prefix: vec![1] });
    for chunk in 1..stream.len() {
        assert_eq!(scan(chunk), (whole_bytes.clone(), whole_events.clone()), "chunk size {chunk}");
    }
}
