//! Connection churn through a real driver: PyMySQL connecting for every query over an emulated
//! link of a few ms, where each login pays its round trips again, is one `connection_churn`
//! finding with what the client did; the same queries over one connection are none.

use std::net::SocketAddr;

use rttscope::findings::Kind;
use rttscope::report::{ChurnEvidence, ConnectionReport, EvidenceDetail, FindingReport, Report};
use rttscope_config::HumanDuration;
use rttscope_integration_tests::clients;
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::{TestProxy, test_config};

/// Queries each client runs; more than `findings.connection_churn.min_connections` (20).
const QUERIES: u64 = 40;
/// The emulated link's RTT.
const RTT_MS: u64 = 4;

/// rttscope emulating a link of [`RTT_MS`].
fn proxy_over_a_short_link() -> TestProxy {
    let mut config = test_config();
    config.inject.rtt = HumanDuration::from_millis(RTT_MS);
    TestProxy::with_config(config)
}

/// What `connection_churn.py` says the client did and measured.
struct ClientRun {
    connections: u64,
    queries: u64,
    connect_us: u64,
    total_us: u64,
}

fn churn_script(addr: SocketAddr, mode: &str) -> ClientRun {
    let mut args = vec![mode.to_owned(), QUERIES.to_string()];
    args.extend(clients::conn_args(addr, NATIVE));
    let out = clients::run_python("connection_churn.py", &args).unwrap_or_else(|e| panic!("{e:#}"));
    let number = |key: &str| -> u64 {
        let value = out.split_whitespace().find_map(|w| w.strip_prefix(&format!("{key}=")));
        value.and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no {key}= in {out:?}"))
    };
    ClientRun {
        connections: number("connections"),
        queries: number("queries"),
        connect_us: number("connect_us"),
        total_us: number("total_us"),
    }
}

/// The report once the findings engine has seen all of the client's connections: after they
/// closed, one marker query from the `mariadb` CLI (another application, so it cannot be
/// part of the finding) goes through; the collector applies a batch to the aggregates before
/// the findings, so once the aggregates show the marker, the findings have seen what came
/// before it.
fn settled_report(proxy: &TestProxy, clients: u64, marker: &str) -> Report {
    proxy.wait_for("the client's connections to close", |a| {
        let conns: Vec<_> = a.connections().collect();
        (conns.len() as u64 >= clients && conns.iter().all(|c| c.closed_us.is_some())).then_some(())
    });
    let db = TestDb::shared();
    let mut cli = db.mariadb_cli(proxy.addr(), NATIVE.user, NATIVE.password, Some(DB));
    cli.args(["-N", "-e", &format!("SELECT 1 AS {marker}")]);
    let out = clients::run(cli, std::time::Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    proxy.wait_for(marker, |a| a.queries().iter().any(|q| q.text.contains(marker)).then_some(()));
    proxy.state().report()
}

fn churn_findings(r: &Report) -> Vec<&FindingReport> {
    r.findings.iter().filter(|f| f.kind == Kind::ConnectionChurn).collect()
}

/// The report's connections made by PyMySQL (its connection attributes name it).
fn pymysql_connections(r: &Report) -> Vec<&ConnectionReport> {
    let by_pymysql = |c: &&ConnectionReport| c.legs.client_library.as_deref().is_some_and(|l| l.contains("pymysql"));
    r.connections.iter().filter(by_pymysql).collect()
}

/// How many times the client's `SELECT %s + 1` ran, as the report counts it.
fn selects(r: &Report) -> u64 {
    r.queries.iter().filter(|q| q.fingerprint == "select ? + ?").map(|q| q.count).sum()
}

#[test]
fn a_connection_per_query_is_connection_churn() {
    let proxy = proxy_over_a_short_link();
    let client = churn_script(proxy.addr(), "per-query");
    assert_eq!((client.connections, client.queries), (QUERIES, QUERIES));
    let r = settled_report(&proxy, QUERIES, "churn_settled");
    assert_eq!(selects(&r), QUERIES, "{:#?}", r.queries);

    let found = churn_findings(&r);
    assert_eq!(found.len(), 1, "{:#?}", r.findings);
    let f = found[0];
    let EvidenceDetail::Churn(e) = &f.evidence.detail else { panic!("churn evidence: {:#?}", f.evidence) };
    let conns = pymysql_connections(&r);
    assert_eq!(conns.len() as u64, QUERIES, "{:#?}", r.connections);
    assert_eq!((e.connections_opened, f.evidence.executions), (QUERIES, QUERIES));
    assert!(e.connections_per_second > 0.0, "{e:?}");

    // Every login paid the TCP handshake, the greeting, its TLS (if the long hop has it) and
    // one auth round trip: three, without TLS.
    let setup_round_trips: u64 = conns
        .iter()
        .map(|c| 3 + c.legs.upstream_tls.as_ref().map_or(0, |t| u64::from(t.handshake_round_trips())))
        .sum();
    assert_eq!(f.round_trips, setup_round_trips, "{e:?}");
    // ... and over the emulated link, an RTT for each.
    let rtt_us = RTT_MS * 1000;
    assert!(e.setup_avg_us >= (setup_round_trips / QUERIES) * rtt_us, "{e:?}");
    assert!(f.evidence.injected_us >= setup_round_trips * rtt_us * 9 / 10, "{:?}", f.evidence);

    // The share is of the time the report has for PyMySQL's connections: over a link where
    // every round trip costs the same, three of each connection's five (login, `SET NAMES`,
    // the query) went to the login.
    let recorded: u64 = conns.iter().map(|c| c.latency_us.sum).sum();
    assert_eq!(e.recorded_us, recorded, "{e:?}");
    assert!((e.setup_share - e.setup_us as f64 / recorded as f64).abs() < 1e-9, "{e:?}");
    assert_eq!(f.evidence.share_of_connection_time, e.setup_share);
    assert!(e.setup_share > 0.5 && e.setup_share < 1.0, "{e:?}");
    // What rttscope recorded lies within what the client measured itself: every login within
    // a connect() call (which also sends `SET NAMES`), every command within the run.
    assert!(e.setup_us <= client.connect_us, "rttscope {e:?}, the client {} µs", client.connect_us);
    assert!(e.setup_us >= client.connect_us / 2, "rttscope {e:?}, the client {} µs", client.connect_us);
    assert!(e.recorded_us <= client.total_us, "rttscope {e:?}, the client {} µs", client.total_us);

    // What a pool saves at 80 ms: every setup round trip at that RTT, on top of what the
    // setups took without any link, and their bytes at its bandwidth.
    let region = f.what_if.iter().find(|w| w.rtt_us == 80_000).expect("the 80 ms scenario");
    let transfer = region.bandwidth_bps.map_or(0, |bw| f.evidence.bytes * 8_000_000 / bw);
    assert_eq!(region.projected_us, f.evidence.base_us + setup_round_trips * 80_000 + transfer, "{region:?}");

    // The fix is Python's pooling, in PyMySQL's words.
    assert_eq!(f.driver.as_deref(), Some("PyMySQL"));
    assert!(f.suggestion.contains("PyMySQL: with SQLAlchemy"), "{}", f.suggestion);
    assert!(f.suggestion.contains("pool"), "{}", f.suggestion);
    assert_fits_schema(e);
}

/// The evidence reads back as what it was written as.
fn assert_fits_schema(e: &ChurnEvidence) {
    let json = serde_json::to_value(e).expect("evidence serialises");
    for key in ["connections_opened", "connections_per_second", "setup_avg_us", "setup_round_trips_avg", "setup_share"]
    {
        assert!(json.get(key).is_some(), "no {key} in {json}");
    }
}

#[test]
fn the_same_queries_over_one_connection_are_no_churn() {
    let proxy = proxy_over_a_short_link();
    let client = churn_script(proxy.addr(), "one-connection");
    assert_eq!((client.connections, client.queries), (1, QUERIES));
    let r = settled_report(&proxy, 1, "one_conn_settled");
    // The workload really ran through rttscope: the same queries as the churning client's.
    assert_eq!(selects(&r), QUERIES, "{:#?}", r.queries);
    assert_eq!(pymysql_connections(&r).len(), 1);
    assert!(churn_findings(&r).is_empty(), "{:#?}", r.findings);
}
