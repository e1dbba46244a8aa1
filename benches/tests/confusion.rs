//! The confusion matrix's cells, setups and scores, without a network (no timings asserted):
//! the cells themselves run in `link-confusion` (`scripts/bench.sh --confusion`).

use rttscope_benches::confusion::run::CellResult;
use rttscope_benches::confusion::table::{self, Confusion};
use rttscope_benches::confusion::{self, Cause, Cell};
use serde_json::json;

#[test]
fn six_causes_meet_three_rtts_and_three_sizes() {
    let cells = confusion::cells();
    assert_eq!(cells.len(), 54);
    assert_eq!(cells[0].key(), "sndbuf/5ms/1MiB");
    assert_eq!(cells[53].key(), "reader/80ms/40MiB");
    let keys = |only: &str| confusion::select(only).unwrap().iter().map(Cell::key).collect::<Vec<_>>();
    assert_eq!(keys("loss/80ms").len(), 3);
    assert_eq!(keys("80ms/40MiB").len(), 6);
    assert_eq!(
        keys("reader/1MiB,rate/5ms/10MiB"),
        ["rate/5ms/10MiB", "reader/5ms/1MiB", "reader/20ms/1MiB", "reader/80ms/1MiB"]
    );
    assert!(confusion::select("snow").is_err());
}

#[test]
fn each_cause_is_scaled_to_its_round_trip() {
    let setup = |cause: Cause, rtt| cause.setup(rtt, 10);
    // A quarter of the 100 Mbit/s line's BDP: 16 KiB at 5 ms, 256 KiB at 80 ms.
    let wmem = |rtt| setup(Cause::SendBuffer, rtt).server_sysctls[1].1.clone();
    assert_eq!((wmem(5), wmem(80)), ("4096 16384 16384".to_owned(), "4096 262144 262144".to_owned()));
    assert_eq!(setup(Cause::ReceiveWindow, 20).client_sysctls[0].1, "4096 131072 131072");
    // A loss-based sender, losing less the longer the round trip.
    assert_eq!(setup(Cause::RandomLoss, 5).server_sysctls[0].1, "reno");
    let loss = |rtt| setup(Cause::RandomLoss, rtt).down.loss.rate;
    assert_eq!((loss(5), loss(20), loss(80)), (0.01, 0.005, 0.003));
    assert_eq!(setup(Cause::LinkRate, 20).bandwidth_bps, confusion::CAPPED_BPS);
    assert!(setup(Cause::SlowClient, 20).slow_reader);
    assert_eq!(setup(Cause::SlowClient, 20).client_sysctls[0].1, "4096 16384 65536");
    // 10 MiB in six chunks of 1.7 MB: 139 ms at the line, 7 round trips of slow start; the
    // sleep five round trips beyond twice that.
    assert_eq!(
        setup(Cause::SlowServer, 20).sql,
        "SELECT REPEAT('x', 1000), IF(seq % 1747 = 0, SLEEP(0.658), 0) FROM seq_1_to_10486"
    );
    assert_eq!(confusion::rows_for(1), 1_049);
}

fn result(cause: Cause, limit: Option<&str>) -> CellResult {
    CellResult {
        cell: Cell { cause, rtt_ms: 20, mib: 10 },
        load: 2.0,
        client_seconds: 1.5,
        verdict: limit.map(|l| json!({ "limit": l, "throughput": 1_000_000, "loss": {} })),
        line: "100 packets, none impaired".into(),
        error: limit.is_none().then(|| "the client had | not finished".into()),
    }
}

#[test]
fn precision_recall_and_unknown_count_misses_as_misses() {
    let results = [
        result(Cause::RandomLoss, Some("loss")),
        result(Cause::RandomLoss, Some("sender")),
        result(Cause::SendBuffer, Some("sender")),
        result(Cause::LinkRate, Some("latency")),
        result(Cause::SlowServer, None),
    ];
    let c = Confusion::of(&results);
    let loss = c.score(Cause::RandomLoss);
    assert_eq!((loss.precision(), loss.recall()), (Some(1.0), Some(0.5)));
    let sender = c.score(Cause::SendBuffer);
    assert_eq!((sender.precision(), sender.recall()), (Some(0.5), Some(1.0)));
    assert_eq!(c.score(Cause::LinkRate).recall(), Some(0.0));
    assert_eq!(c.score(Cause::LinkRate).precision(), None);
    assert!((c.unknown_rate() - 0.2).abs() < 1e-9);
    let summary = table::summary(&c);
    eprintln!("{summary}");
    assert!(summary.contains("| loss | 1 | 0 | 1 | 0 | 0 | 0 | 0 | 0 | 50 % |"), "{summary}");
    assert!(summary.contains("| rate | 0 | 0 | 0 | 0 | 0 | 0 | 1 | 0 | 0 % |"), "{summary}");
    assert!(summary.contains("5 cells; unknown (no verdict) 20.0 %."), "{summary}");
    let cells = table::cells(&results);
    let rows: Vec<&str> = cells.lines().skip(2).collect();
    assert!(rows[1].starts_with("| loss/20ms/10MiB | sender | **miss** | 8.0 |"), "{cells}");
    assert!(rows[0].starts_with("| loss/20ms/10MiB | loss |  | 8.0 |"), "{cells}");
    // A '|' in an error cannot break the table.
    assert!(rows.iter().all(|r| r.matches('|').count() == 9), "{cells}");
}

#[test]
fn cells_that_cannot_test_their_cause_are_excluded_before_the_run() {
    let excluded: Vec<String> = confusion::cells().iter().filter(|c| c.excluded().is_some()).map(Cell::key).collect();
    // 1 MiB at 80 ms is the line's BDP: slow start carries it before any pace but the
    // server's sleeps can hold it; 0.3 % of its ~730 segments is two losses, 0.5 % of them
    // (at 20 ms) 3.6, under three in 30 % of runs.
    assert_eq!(
        excluded,
        [
            "sndbuf/80ms/1MiB",
            "rcvbuf/80ms/1MiB",
            "loss/20ms/1MiB",
            "loss/80ms/1MiB",
            "rate/80ms/1MiB",
            "reader/80ms/1MiB"
        ],
        "{excluded:?}"
    );
    let cell = Cell { cause: Cause::RandomLoss, rtt_ms: 80, mib: 1 };
    let results =
        [CellResult { cell, ..result(Cause::RandomLoss, Some("sender")) }, result(Cause::RandomLoss, Some("loss"))];
    let c = Confusion::of(&results);
    assert_eq!((c.total(), c.excluded, c.score(Cause::RandomLoss).recall()), (1, 1, Some(1.0)));
    assert!(table::summary(&c).contains("1 cells; unknown (no verdict) 0.0 %. 1 more cells excluded"));
    assert!(table::cells(&results).contains(
        "| loss/80ms/1MiB | sender | excluded (2.2 losses expected, fewer than 3 loss events in 63 % of runs)"
    ));
}
