//! Random loss and reordering against the two senders this kernel lets a namespace choose,
//! across round trips (the link matrix's loss cells, issue #35): a loss-based sender (Reno,
//! the sender the Mathis bound models) is held to what its loss rate allows, and rttscope
//! says `loss`; a BBR sender paces by the bandwidth it measures and keeps the path full
//! through the same holes, and rttscope says `link` with the holes harmless. A clean line is
//! `link` for both, the drops of Reno's slow start harmless. Over the WAN
//! emulator (100 Mbit/s, a one-BDP queue; the impairments on the server's direction, seeded).
//! Run with `--nocapture` to read each cell's verdict. Tests that cannot run here (not root,
//! no TUN) print `skipped: <why>` and pass.

mod link_rig;

use std::time::{Duration, Instant};

use link_rig::*;
use rttscope_integration_tests::wan::{Chance, Impairments, WanImpairments};
use serde_json::Value;

/// BBR's, 8 MB: at 80 ms the path holds 1 MB, and a result of two or three of those would be
/// mostly BBR's start-up, whatever the loss.
const BBR_ROWS: u64 = 8_000;

/// One cell: what the line does to the server's packets, at which round trip, and the rows of
/// 1,000 bytes Reno's result has: enough for some 20 loss events (a rate from 6 is ±40 %),
/// few enough to end in seconds at the Mathis bound (2 % at 80 ms: 1.25 Mbit/s, 2 MB in 13 s).
struct Cell {
    name: &'static str,
    rtt_ms: u64,
    down: Impairments,
    reno_rows: u64,
}

const fn loss(rate: f64) -> Impairments {
    Impairments {
        loss: Chance::rate(rate),
        duplicate: Chance::rate(0.0),
        corrupt: Chance::rate(0.0),
        reorder: Chance::rate(0.0),
        reorder_gap: Duration::ZERO,
    }
}

/// 1 % of the packets held back 100 ms: far beyond the three duplicate ACKs (and RACK's
/// reordering window of a quarter RTT) that make a sender take a hole for a loss.
const REORDERING: Impairments =
    Impairments { reorder: Chance::correlated(0.01, 0.1), reorder_gap: Duration::from_millis(100), ..loss(0.0) };

/// A clean line: both senders fill it; the drops of Reno's slow start overflowing the
/// bottleneck queue are harmless.
const CLEAN: Cell = Cell { name: "a clean line at 20 ms", rtt_ms: 20, down: loss(0.0), reno_rows: 8_000 };

const CELLS: [Cell; 3] = [
    Cell { name: "0.5 % loss at 10 ms", rtt_ms: 10, down: loss(0.005), reno_rows: 6_000 },
    Cell { name: "2 % loss at 80 ms", rtt_ms: 80, down: loss(0.02), reno_rows: 2_000 },
    Cell { name: "reordering at 40 ms", rtt_ms: 40, down: REORDERING, reno_rows: 2_000 },
];

/// Streams `rows` rows of 1,000 bytes through a fresh rig over `cell`'s line with `sender` as the server's
/// congestion control; returns the verdict and what the emulator did.
fn run(sender: &str, cell: &Cell, rows: u64) -> Option<(Value, String)> {
    let line = Line {
        rtt: Duration::from_millis(cell.rtt_ms),
        bandwidth_bps: LINK_BPS,
        impairments: WanImpairments { seed: 15, server_to_client: cell.down, client_to_server: Impairments::default() },
    };
    let rig = Rig::start_on(line, &[("net.ipv4.tcp_congestion_control", sender)], &[], "")?;
    let started = Instant::now();
    let elapsed = finish(rig.stream(&format!("SELECT REPEAT('x', 1000) FROM seq_1_to_{rows}")), started);
    // The cell's verdict is the one on its result: at least the rows' bytes.
    let v = rig.verdict(|v| v["bytes"].as_u64().unwrap_or(0) >= rows * 1_000);
    let d = rig.link.stats().server_to_client;
    let line = format!(
        "{} lost, {} held back, {} queue-dropped of {} packets; the client took {:.2} s",
        d.lost,
        d.reordered,
        d.dropped,
        d.seen,
        elapsed.as_secs_f64()
    );
    Some((v, line))
}

/// The verdict in one line, with the figures that decide between `loss` and `link`.
fn show_cell(sender: &str, cell: &Cell, v: &Value, line: &str) {
    let l = &v["loss"];
    eprintln!(
        "{sender} × {}: {} {} | {:.2} Mbit/s, Mathis bound {:.2} Mbit/s | {} stalls ({} RTO), loss rate {:.2} % | idle {:.0} % | {line}",
        cell.name,
        v["limit"],
        v["secondary"],
        mbit(num(v, "throughput")),
        l["loss_limited_throughput"].as_f64().map_or(f64::NAN, mbit),
        l["recovery_stalls"],
        l["rto_stalls"],
        100.0 * l["loss_rate"].as_f64().unwrap_or(0.0),
        100.0 * num(v, "idle_us") / num(v, "duration_us").max(1.0),
    );
    eprintln!("{sender} × {}: {}", cell.name, v["summary"]);
}

#[test]
fn a_reno_sender_is_held_by_random_loss_and_reordering() {
    let _serial = serial();
    for cell in &CELLS {
        let Some((v, line)) = run("reno", cell, cell.reno_rows) else { return };
        show_cell("reno", cell, &v, &line);
        assert_eq!(v["limit"], "loss", "{}: {}", cell.name, v["summary"]);
        // The sentence carries its evidence: the Mathis bound beside what was carried.
        let summary = v["summary"].as_str().unwrap_or_default();
        assert!(summary.contains("the Mathis bound"), "{}: {summary}", cell.name);
        assert!(num(&v, "throughput") * 8.0 < 0.5 * LINK_BPS as f64, "{}: {v}", cell.name);
    }
    let Some((v, line)) = run("reno", &CLEAN, CLEAN.reno_rows) else { return };
    show_cell("reno", &CLEAN, &v, &line);
    assert_clean(&v);
}

/// A clean line's verdict: the link, and whatever holes slow start's drops left harmless.
fn assert_clean(v: &Value) {
    assert_eq!(v["limit"], "link", "{}", v["summary"]);
    let summary = v["summary"].as_str().unwrap_or_default();
    assert!(!summary.contains("out of order") || summary.contains("harmless"), "{summary}");
}

#[test]
fn a_bbr_sender_keeps_the_path_full_through_random_loss_and_reordering() {
    let _serial = serial();
    for cell in &CELLS {
        let Some((v, line)) = run("bbr", cell, BBR_ROWS) else { return };
        show_cell("bbr", cell, &v, &line);
        assert_eq!(v["limit"], "link", "{}: {}", cell.name, v["summary"]);
        let summary = v["summary"].as_str().unwrap_or_default();
        assert!(summary.contains("harmless"), "{}: {summary}", cell.name);
        assert!(num(&v["loss"], "out_of_order") > 0.0, "{}: {v}", cell.name);
    }
    let Some((v, line)) = run("bbr", &CLEAN, BBR_ROWS) else { return };
    show_cell("bbr", &CLEAN, &v, &line);
    assert_clean(&v);
}
