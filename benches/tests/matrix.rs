//! The link matrix's cell list and table, without a network (no timings asserted): the
//! cells themselves run in `link-matrix` (`scripts/bench.sh --matrix`).

use std::time::Duration;

use rttscope_benches::matrix::{self, Buffers, Cell, CellResult, Condition, Settings};
use serde_json::json;

#[test]
fn every_buffer_setting_meets_every_condition_once() {
    let cells = matrix::cells();
    assert_eq!(cells.len(), 15);
    for buffers in Buffers::ALL {
        for condition in Condition::ALL {
            assert_eq!(cells.iter().filter(|c| **c == Cell { buffers, condition }).count(), 1);
        }
    }
    // Buffers outer, conditions inner: the table reads a buffer setting at a time.
    assert_eq!(cells[0].key(), "auto/clean");
    assert_eq!(cells[5].key(), "wmem/clean");
    assert_eq!(cells[14].key(), "rmem/cpu");
    // The settings the brief names.
    assert_eq!(Buffers::SendPinned.server_sysctls(), &[("net.ipv4.tcp_wmem", "4096 16384 16384")]);
    assert_eq!(Buffers::ReceiveCapped.client_sysctls(), &[("net.ipv4.tcp_rmem", "4096 32768 32768")]);
    assert!(Buffers::Autotuned.server_sysctls().is_empty() && Buffers::Autotuned.client_sysctls().is_empty());
    assert_eq!(Condition::Loss.impairments().server_to_client.loss.rate, 0.01);
    let reorder = Condition::Reordering.impairments().server_to_client;
    assert_eq!((reorder.reorder.rate, reorder.reorder_gap), (0.01, Duration::from_millis(100)));
    assert_eq!(Condition::Clean.impairments(), Condition::BusyServer.impairments());
}

#[test]
fn cells_are_chosen_by_key_row_or_column() {
    let keys = |only: &str| matrix::select(only).unwrap().iter().map(Cell::key).collect::<Vec<_>>();
    assert_eq!(keys("").len(), 15);
    assert_eq!(keys("auto/loss"), ["auto/loss"]);
    assert_eq!(keys("loss"), ["auto/loss", "wmem/loss", "rmem/loss"]);
    assert_eq!(keys("rmem, auto/cpu").len(), 6);
    assert!(matrix::select("auto/snow").unwrap_err().contains("rmem/cpu"));
}

#[test]
fn the_table_shows_rate_rtt_verdict_and_evidence() {
    let lossy = json!({
        "limit": "receive_window", "secondary": "loss", "bytes": 8_000_000, "duration_us": 16_000_000,
        "throughput": 500_000, "base_rtt_us": 20_150, "bytes_per_rtt": 10_500, "advertised_window": 16_384,
        "server_pauses": 0, "server_pause_us": 0, "held_off_us": 0, "idle_us": 8_000_000,
        "loss": { "recovery_stalls": 41, "rto_stalls": 3, "recovery_stall_us": 1_200_000, "loss_rate": 0.0071,
                  "loss_limited_throughput": 810_000, "out_of_order": 60, "duplicates": 0, "retransmitted": 0 }
    });
    let clean = json!({
        "limit": "link", "secondary": null, "throughput": 11_900_000, "base_rtt_us": 20_000,
        "bytes_per_rtt": 250_000, "advertised_window": 3_000_000, "duration_us": 700_000, "loss": {}
    });
    let settings = Settings::default();
    let results = [
        CellResult {
            cell: Cell { buffers: Buffers::ReceiveCapped, condition: Condition::Loss },
            load: 4.5,
            client_seconds: 16.3,
            verdict: Some(lossy),
            line: "58 lost of 5800 packets".into(),
            error: None,
        },
        CellResult {
            cell: Cell { buffers: Buffers::Autotuned, condition: Condition::Clean },
            load: 3.25,
            client_seconds: 0.9,
            verdict: Some(clean),
            line: "6000 packets, none impaired".into(),
            error: None,
        },
        CellResult {
            cell: Cell { buffers: Buffers::SendPinned, condition: Condition::BusyServer },
            load: 6.0,
            client_seconds: f64::NAN,
            verdict: None,
            line: String::new(),
            error: Some("the client had not | finished".into()),
        },
    ];
    let table = matrix::table(&results, "scripts/bench.sh --matrix", &settings);
    eprintln!("{table}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0], "Link matrix: `scripts/bench.sh --matrix`");
    assert!(lines[1].contains("seq_1_to_8000") && lines[1].contains("reno") && lines[1].contains("3.2 to 6.0"));
    let header = lines.iter().position(|l| l.starts_with("| buffers")).unwrap();
    let columns = lines[header].matches('|').count();
    let rows = &lines[header + 2..];
    assert_eq!(rows.len(), 3);
    // A '|' in an error cannot break the table.
    assert!(rows.iter().all(|r| r.matches('|').count() == columns), "{table}");
    assert_eq!(
        rows[0],
        "| rttscope rmem 32K | 1 % loss | 4.0 | 20.1 ms | receive_window + loss | 10 KB/RTT, adv. window 16 KB, \
         41 stalls (3 RTO, 1200 ms), loss 0.71 %, Mathis 6.5 Mbit/s, 60 out of order, idle 50 % | 58 lost of 5800 packets | \
         16.3 s | 4.5 |"
    );
    assert!(rows[1].starts_with("| autotuned | clean | 95.2 | 20.0 ms | link | 250 KB/RTT, adv. window 3.0 MB |"));
    assert!(rows[2].contains("| — | — | (none) | the client had not / finished |"), "{}", rows[2]);
}
