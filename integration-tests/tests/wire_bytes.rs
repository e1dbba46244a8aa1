//! Wire bytes apart from payload bytes, and the `compression` finding, with the `mariadb` CLI
//! against the real server.
//!
//! The long hop's wire bytes are checked against the server's own count (`Bytes_sent` of the
//! session, which MariaDB counts after compression): compressed (`upstream.compression:
//! zlib`) they are a small part of the payload and the text report shows the ratio; plain,
//! they are the payload, packet headers included. Over an emulated 20 Mbit/s link with the
//! long hop plain, a repetitive 5 MB result is reported as worth compressing, with its
//! measured ratio and saving; random bytes are not, and neither is anything once the long
//! hop is compressed.

use rttscope::findings::Kind;
use rttscope::record::QueryStats;
use rttscope::report::{EvidenceDetail, FindingReport, QueryReport, Report, render_text};
use rttscope_config::{Bandwidth, UpstreamCompression};
use rttscope_integration_tests::legs::run_cli_ok;
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::{TestProxy, test_config};

/// 5,000 rows of 1,000 `a`s: 5,035,000 bytes of row packets (4-byte header, 3-byte length,
/// 1,000 bytes each), compressing about 100:1.
const REPETITIVE: &str = "SELECT REPEAT('a', 1000) AS r FROM seq_1_to_5000";
/// 5,000 rows of 1,000 random bytes: nothing to compress.
const RANDOM: &str = "SELECT RANDOM_BYTES(1000) AS b FROM seq_1_to_5000";

fn proxy(compression: UpstreamCompression, bandwidth: Option<u64>) -> TestProxy {
    let mut config = test_config();
    config.upstream.compression = compression;
    config.inject.bandwidth = bandwidth.and_then(Bandwidth::new);
    TestProxy::with_config(config)
}

/// Runs `sql` on one connection through `proxy` with the CLI (uncompressed on its leg).
fn cli(proxy: &TestProxy, sql: &str) -> String {
    let db = TestDb::shared();
    let mut cmd = db.mariadb_cli(proxy.addr(), NATIVE.user, NATIVE.password, Some(DB));
    cmd.args(["-N", "-B", "-e", sql]);
    run_cli_ok(cmd, None)
}

/// The statement whose normalised text contains `needle`, once the collector has it.
fn statement(proxy: &TestProxy, needle: &str) -> QueryStats {
    proxy.wait_for(needle, |a| a.queries().into_iter().find(|q| q.text.contains(needle)).cloned())
}

/// The server's `Bytes_sent` before and after `sql`, on one connection through `proxy`.
fn bytes_sent_around(proxy: &TestProxy, sql: &str) -> (u64, u64) {
    let show = "SHOW SESSION STATUS LIKE 'Bytes_sent'";
    let out = cli(proxy, &format!("{show}; {sql}; {show}"));
    let values: Vec<u64> =
        out.lines().filter_map(|l| l.strip_prefix("Bytes_sent\t")).map(|v| v.parse().unwrap()).collect();
    assert_eq!(values.len(), 2, "two Bytes_sent lines in {} bytes of output", out.len());
    (values[0], values[1])
}

/// `a` within `pct` percent of `b`.
fn close(a: u64, b: u64, pct: f64) -> bool {
    (a as f64 - b as f64).abs() <= b as f64 * pct / 100.0
}

#[test]
fn a_compressed_long_hop_counts_the_server_s_compressed_bytes_apart_from_the_payload() {
    let proxy = proxy(UpstreamCompression::Zlib, None);
    let (before, after) = bytes_sent_around(&proxy, REPETITIVE);
    let q = statement(&proxy, "repeat");
    // The payload as the client got it: every row packet, headers included.
    assert!(q.bytes_down >= 5_035_000 && q.bytes_down < 5_036_000, "payload {}", q.bytes_down);
    // On the long hop's wire: what the server says it sent between the two SHOWs (the first
    // SHOW's own response, a few dozen bytes, is counted there too).
    let sent = after - before;
    assert!(close(q.wire_down, sent, 3.0), "wire {} vs the server's Bytes_sent {sent}", q.wire_down);
    assert!(q.wire_down * 20 < q.bytes_down, "wire {} of payload {}", q.wire_down, q.bytes_down);
    // The statement's request went up compressed too (short frames are sent as they are).
    assert!(q.wire_up > 0 && q.wire_up <= q.bytes_up + 7, "{} up of {}", q.wire_up, q.bytes_up);
    // Compressed, nothing is sampled: the wire says what compression does.
    assert_eq!(q.compressibility.samples, 0);
    // The text report shows both, and the ratio.
    let text = render_text(&proxy.state().report());
    let ratio = (q.bytes_up + q.bytes_down) as f64 / (q.wire_up + q.wire_down) as f64;
    let line = format!("on the long hop's wire {} up", rttscope::human::bytes(q.wire_up));
    assert!(text.contains(&line) && text.contains(&format!("({ratio:.1}:1)")), "{line} ({ratio:.1}:1) in:\n{text}");
}

#[test]
fn a_plain_long_hop_s_wire_bytes_are_the_payload_with_its_headers() {
    let proxy = proxy(UpstreamCompression::Off, None);
    let (before, after) = bytes_sent_around(&proxy, REPETITIVE);
    let q = statement(&proxy, "repeat");
    assert!(q.bytes_down >= 5_035_000 && q.bytes_down < 5_036_000, "payload {}", q.bytes_down);
    assert_eq!((q.wire_up, q.wire_down), (q.bytes_up, q.bytes_down));
    assert!(close(q.wire_down, after - before, 0.1), "wire {} vs Bytes_sent {}", q.wire_down, after - before);
    // No ratio where there is nothing compressed.
    let text = render_text(&proxy.state().report());
    assert!(!text.contains("on the long hop's wire"), "{text}");
}

/// The report once everything before a marker query has reached the findings: the marker
/// runs after `needle`'s statement shows in the aggregates, so in a later batch.
fn settled_report(proxy: &TestProxy, needle: &str) -> Report {
    statement(proxy, needle);
    cli(proxy, "SELECT 'wire_bytes_marker' AS wire_bytes_marker");
    statement(proxy, "wire_bytes_marker");
    proxy.state().report()
}

fn compression_findings<'a>(r: &'a Report, needle: &str) -> Vec<&'a FindingReport> {
    r.findings.iter().filter(|f| f.kind == Kind::Compression && f.evidence.statement.contains(needle)).collect()
}

fn query<'a>(r: &'a Report, needle: &str) -> &'a QueryReport {
    r.queries.iter().find(|q| q.fingerprint.contains(needle)).unwrap_or_else(|| panic!("no {needle} in the report"))
}

#[test]
fn a_repetitive_result_over_a_slow_plain_hop_is_worth_compressing_random_bytes_are_not() {
    let proxy = proxy(UpstreamCompression::Off, Some(20_000_000));
    // One connection each: the first large response of a connection is always sampled.
    cli(&proxy, RANDOM);
    cli(&proxy, REPETITIVE);
    let report = settled_report(&proxy, "repeat");

    let random = query(&report, "random_bytes").compressibility.expect("random bytes sampled");
    assert!(random.ratio < 1.1, "random bytes compress {:.2}:1", random.ratio);
    assert!(compression_findings(&report, "random_bytes").is_empty(), "{:#?}", report.findings);

    // The 20 Mbit/s link made most of its 2 s: the time its full buffer kept rttscope from
    // reading the server counts, not only how long the last bytes were held (13 ms before).
    let q = query(&report, "repeat");
    eprintln!("repeat: the link added {} µs of {} µs", q.injected_us, q.latency_us.sum);
    assert!(q.injected_us * 10 >= q.latency_us.sum * 9, "injected {} of {:?}", q.injected_us, q.latency_us);
    let repetitive = query(&report, "repeat").compressibility.expect("the repetitive result sampled");
    assert!(repetitive.ratio >= 2.0, "{repetitive:?}");
    let found = compression_findings(&report, "repeat");
    assert_eq!(found.len(), 1, "{:#?}", report.findings);
    let f = found[0];
    eprintln!("{}\nfix: {}", f.evidence.summary, f.suggestion);
    let EvidenceDetail::Compression(e) = &f.evidence.detail else { panic!("{:?}", f.evidence.detail) };
    assert_eq!(
        (e.samples, e.sampled_bytes, e.compressed_bytes),
        (1, repetitive.sampled_bytes, repetitive.compressed_bytes)
    );
    assert!(e.compression_ratio >= 2.0, "{e:?}");
    // The saving at every default scenario (each has a bandwidth) and over the emulated link:
    // most of 5 MB's transfer at each (at 20 Mbit/s, 2 s).
    let saved: Vec<(&str, u64, u64)> =
        e.savings.iter().map(|s| (s.scenario.as_str(), s.bandwidth_bps, s.saved_us)).collect();
    assert_eq!(
        saved.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>(),
        [
            ("same rack", 10_000_000_000),
            ("another data centre", 34_000_000),
            ("another region", 20_000_000),
            ("the emulated link", 20_000_000)
        ]
    );
    assert!(saved[3].2 > 1_800_000 && saved[3].2 < 2_020_000, "{saved:?}");
    assert!(f.suggestion.contains("`upstream.compression: zlib`"), "{}", f.suggestion);
    assert!(f.evidence.summary.contains(&format!("compress {:.1}:1", e.compression_ratio)), "{}", f.evidence.summary);
}

#[test]
fn no_compression_finding_once_the_long_hop_is_compressed() {
    let proxy = proxy(UpstreamCompression::Zlib, Some(20_000_000));
    cli(&proxy, REPETITIVE);
    let report = settled_report(&proxy, "repeat");
    assert!(query(&report, "repeat").compressibility.is_none(), "nothing sampled over a compressed hop");
    assert!(report.findings.iter().all(|f| f.kind != Kind::Compression), "{:#?}", report.findings);
}
