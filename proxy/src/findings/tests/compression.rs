//! `compression`: a bandwidth-bound statement whose sampled results compress well, only while
//! the long hop is plain; its saving at each scenario's bandwidth.

use super::*;
use crate::record::{Compressibility, PayloadSample};

const BIG: &str = "SELECT REPEAT('a', 1000) FROM seq_1_to_5000";

impl Script {
    /// `n` executions of a 5 MB result taking `latency_us` each, sampled at `ratio`:1; over a
    /// compressed long hop (wire bytes apart, no samples) when `compressed_hop`.
    pub(super) fn big_results(&mut self, conn: u64, n: u64, latency_us: u64, ratio: u64, compressed_hop: bool) {
        for _ in 0..n {
            let mut r = record(conn, COM_QUERY, BIG, 5000, self.now_us, latency_us);
            r.bytes_down = 5_030_000;
            if compressed_hop {
                (r.wire_up, r.wire_down) = (Some(40), Some(5_030_000 / ratio));
            } else {
                let sampled = 65_536;
                let m = Compressibility { samples: 1, sampled_bytes: sampled, compressed_bytes: sampled / ratio };
                r.payload_sample = Some(PayloadSample::Measured(m));
            }
            self.command(r);
        }
    }
}

#[test]
fn a_bandwidth_bound_result_that_compresses_well_is_a_finding_with_its_saving() {
    let mut s = Script::new();
    // 5 MB in 20 ms here: at 34 Mbit/s its transfer takes ≈ 1.18 s of ≈ 1.22 s.
    s.big_results(1, 3, 20_000, 64, false);
    let found = s.of(Kind::Compression);
    assert_eq!(found.len(), 1, "{found:#?}");
    let a = &found[0];
    let Detail::Compression(c) = &a.finding.detail else { panic!("{:?}", a.finding.detail) };
    assert_eq!((c.samples, c.ratio()), (3, 64.0));
    assert!(a.headline.contains("compress 64.0:1"), "{}", a.headline);
    assert!(a.fix.contains("`upstream.compression: zlib`"), "{}", a.fix);
    // The saving at 34 Mbit/s: 63/64 of 3 × 5 MB (and 120 bytes up) is 14.85 MB, 3.50 s.
    let saved = crate::findings::compression::savings(&a.finding, &a.what_if);
    assert_eq!(saved.len(), 3, "every default scenario has a bandwidth: {saved:?}");
    let (name, bw, saved_us) = &saved[1];
    assert_eq!((name.as_str(), *bw), ("another data centre", 34_000_000));
    let bytes = 3 * (5_030_000 + 40);
    let expected = (bytes - bytes / 64) as f64 * 8.0 / 34.0;
    assert!((*saved_us as f64 - expected).abs() < expected * 0.01, "{saved_us} vs {expected}");
    assert!(a.fix.contains(", ≈ 3.50 s at 34 Mbit/s (another data centre),"), "{}", a.fix);
}

#[test]
fn not_when_it_compresses_poorly_is_not_bandwidth_bound_or_the_hop_is_compressed() {
    let mut s = Script::new();
    s.big_results(1, 3, 20_000, 1, false);
    assert!(s.of(Kind::Compression).is_empty(), "1:1");
    // The server took 10 s for each: the transfer is a small part of it anywhere.
    let mut s = Script::new();
    s.big_results(1, 3, 10_000_000, 100, false);
    assert!(s.of(Kind::Compression).is_empty(), "server-bound");
    // Over a compressed long hop there are no samples, and nothing to gain.
    let mut s = Script::new();
    s.big_results(1, 3, 20_000, 100, true);
    assert!(s.of(Kind::Compression).is_empty(), "already compressed");
    // Compressed on one connection, sampled on another: it already compresses somewhere.
    let mut s = Script::new();
    s.big_results(1, 3, 20_000, 100, false);
    s.big_results(1, 1, 20_000, 100, true);
    assert!(s.of(Kind::Compression).is_empty(), "compressed once");
}

#[test]
fn the_emulated_link_counts_as_a_bandwidth_to_be_bound_by() {
    // No scenario has a bandwidth, but the emulated 20 Mbit/s link the statement ran over does.
    let mut config = FindingsConfig::default();
    config.scenarios.retain(|s| s.bandwidth.is_none());
    let mut s = Script::with(config);
    s.engine.set_emulated(Some(Emulated { rtt_us: 2_000, bandwidth_bps: Some(20_000_000), window_bytes: None }));
    for _ in 0..2 {
        let mut r = record(1, COM_QUERY, BIG, 5000, s.now_us, 2_020_000);
        (r.bytes_down, r.injected_us) = (5_030_000, 2_000_000);
        let m = Compressibility { samples: 1, sampled_bytes: 65_536, compressed_bytes: 1_000 };
        r.payload_sample = Some(PayloadSample::Measured(m));
        s.command(r);
    }
    let found = s.of(Kind::Compression);
    assert_eq!(found.len(), 1, "{found:#?}");
    let saved = crate::findings::compression::savings(&found[0].finding, &found[0].what_if);
    assert_eq!(
        saved.iter().map(|(n, bw, _)| (n.as_str(), *bw)).collect::<Vec<_>>(),
        [("the emulated link", 20_000_000)]
    );
}
