//! Codec micro-benchmarks: `PacketScanner` + `Session` over synthesised MariaDB streams
//! (raced against merely copying the same bytes), and the `Fingerprinter` per query.
//!
//! `cargo bench -p rttscope-benches --bench codec`; `cargo test` runs each once as a test.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rttscope::fingerprint::Fingerprinter;
use rttscope::protocol::constants::capability::*;
use rttscope::protocol::test_util::{column_def, ok, ok_eof, packet as pkt, query, text_row};
use rttscope::protocol::{Observer, PacketScanner, Session, Summary};

/// What the relay reads at most at once (`relay.buffer_size` default).
const CHUNK: usize = 32 * 1024;
const ROWS: usize = 100_000;
const OK_RESPONSES: usize = 1_000;
/// Roughly what mysql_async negotiates with MariaDB 10.11: rows end with an OK, no EOFs.
const CAPS: u64 = CLIENT_PROTOCOL_41 | CLIENT_MULTI_RESULTS | CLIENT_PS_MULTI_RESULTS | CLIENT_DEPRECATE_EOF;

/// What a recorder needs at the least: rows and completed commands counted.
#[derive(Default)]
struct Counts {
    rows: u64,
    finished: u64,
}

impl Observer for Counts {
    fn row(&mut self, _prefix: &[u8]) {
        self.rows += 1;
    }
    fn finished(&mut self, _summary: &Summary) {
        self.finished += 1;
    }
}

/// Both directions of one authenticated connection, as the pump holds them.
struct Conn {
    session: Session,
    counts: Counts,
    client: PacketScanner,
    upstream: PacketScanner,
}

impl Conn {
    fn authenticated() -> Conn {
        let mut counts = Counts::default();
        // Greeting of 80 bytes, handshake response (seq 1) of 100, as the session tests use.
        let session = Session::after_handshake(Default::default(), CAPS, 80, 1, 100, 1024, &mut counts);
        let mut conn = Conn { session, counts, client: PacketScanner::new(), upstream: PacketScanner::new() };
        conn.upstream_sends(&ok(2, 0, 2));
        conn
    }

    // The streams are built here and valid by construction: a decode error is a bug in
    // this file or in the codec, and should stop the bench loudly.
    fn client_sends(&mut self, bytes: &[u8]) {
        self.client.scan(bytes, &mut self.session.client(&mut self.counts));
    }

    fn upstream_sends(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(CHUNK) {
            self.upstream.scan(chunk, &mut self.session.upstream(&mut self.counts));
        }
    }
}

/// `SELECT id, k, c FROM sbtest` answered with `ROWS` rows of about 100 bytes.
fn text_result() -> (Vec<u8>, Vec<u8>) {
    let mut stream = pkt(1, &[3]);
    for (i, name) in ["id", "k", "c"].into_iter().enumerate() {
        stream.extend(column_def(2 + i as u8, name));
    }
    let mut seq = 5u8;
    let c = "83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41";
    for id in 1..=ROWS {
        let (id, k) = (id.to_string(), (id * 7919 % ROWS).to_string());
        stream.extend(text_row(seq, &[&id, &k, c]));
        seq = seq.wrapping_add(1);
    }
    stream.extend(ok_eof(seq, 2));
    (query("SELECT id, k, c FROM sbtest"), stream)
}

fn scan_large_result(c: &mut Criterion) {
    let (request, response) = text_result();
    let mut conn = Conn::authenticated();
    conn.client_sends(&request);
    conn.upstream_sends(&response);
    assert_eq!((conn.counts.rows, conn.counts.finished), (ROWS as u64, 2), "the stream is not what it claims");

    let mut group = c.benchmark_group("text_result_100k_rows");
    group.throughput(Throughput::Bytes(response.len() as u64));
    group.bench_function("scan", |b| {
        b.iter(|| {
            conn.client_sends(&request);
            conn.upstream_sends(black_box(&response));
        })
    });
    // The relay copies every byte through its buffer anyway: this is the floor.
    let mut buf = vec![0u8; CHUNK];
    group.bench_function("copy_only_baseline", |b| {
        b.iter(|| {
            for chunk in black_box(&response).chunks(CHUNK) {
                buf[..chunk.len()].copy_from_slice(chunk);
                black_box(&buf);
            }
        })
    });
    // Same work, reported per row: criterion's elements/s inverts to ns/row.
    group.throughput(Throughput::Elements(ROWS as u64));
    group.bench_function("scan_per_row", |b| {
        b.iter(|| {
            conn.client_sends(&request);
            conn.upstream_sends(black_box(&response));
        })
    });
    group.finish();
}

fn scan_ok_responses(c: &mut Criterion) {
    let exchanges: Vec<(Vec<u8>, Vec<u8>)> = (0..OK_RESPONSES)
        .map(|i| (query(&format!("UPDATE sbtest SET k = k + 1 WHERE id = {i}")), ok(1, 1, 2)))
        .collect();
    let mut conn = Conn::authenticated();
    let mut group = c.benchmark_group("ok_responses_1k");
    group.throughput(Throughput::Elements(OK_RESPONSES as u64));
    group.bench_function("scan", |b| {
        b.iter(|| {
            for (request, response) in &exchanges {
                conn.client_sends(black_box(request));
                conn.upstream_sends(black_box(response));
            }
        })
    });
    group.finish();
    assert!(conn.session.is_idle());
}

fn fingerprints(c: &mut Criterion) {
    let in_list: Vec<String> = (0..20).map(|i| (i * 7919 % 100_000).to_string()).collect();
    let tuples: Vec<String> =
        (0..50).map(|i| format!("({i}, {}, 'c-{i:08}-28773972837-60736120486', 'pad-{i:06}')", i * 31)).collect();
    let queries = [
        ("point_select", "SELECT c FROM sbtest WHERE id = 4242".to_owned()),
        // What an ORM sends with its literals inline (PHP's PDO emulates prepares by default):
        // a cache miss for every new value, so the whole pass runs each time.
        (
            "orm_select",
            "SELECT `users`.`id`, `users`.`name`, `users`.`email`, `users`.`created_at` FROM `users` \
             WHERE `users`.`account_id` = 4242 AND `users`.`deleted_at` IS NULL ORDER BY `users`.`id` ASC LIMIT 20"
                .to_owned(),
        ),
        ("in_list_20", format!("SELECT id, k, c FROM sbtest WHERE id IN ({})", in_list.join(", "))),
        ("insert_50_rows", format!("INSERT INTO sbtest (id, k, c, pad) VALUES {}", tuples.join(", "))),
    ];
    let mut fingerprinter = Fingerprinter::new();
    let mut group = c.benchmark_group("fingerprint");
    group.throughput(Throughput::Elements(1));
    for (name, sql) in &queries {
        group.bench_function(*name, |b| b.iter(|| black_box(fingerprinter.fingerprint(black_box(sql.as_bytes())).id)));
    }
    group.finish();
}

fn config() -> Criterion {
    // Shorter than criterion's defaults: each iteration is already thousands of packets.
    Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3))
}

criterion_group! { name = codec; config = config(); targets = scan_large_result, scan_ok_responses, fingerprints }
criterion_main!(codec);
