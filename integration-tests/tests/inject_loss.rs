//! Injected loss against real loss: the same workload (two 4 MB results, then a series of
//! one-row queries) once over the WAN emulator losing 1.5 % of the packets each way at
//! 20 ms and 100 Mbit/s — real kernel TCP, a loss-based sender (Reno) on the server — and
//! once through rttscope on loopback with `rtt: 20ms, bandwidth: 100mbit, loss: 1.5%`. The
//! transfer time and the queries' p50 and p99 must agree within 20 %. Run with
//! `--nocapture` for the figures; `RTTSCOPE_TEST_WAN_SEED=<n>` loses other packets (the
//! default seed is 15). Without root or TUN the test prints `skipped: <why>` and passes.
//! Also: the loss is set and cleared live with `rttscope inject --loss`, on an open
//! connection.

mod link_rig;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use link_rig::*;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use rttscope_config::ADMIN_TOKEN_ENV;
use rttscope_config::{AdminConfig, Bandwidth, Config, HumanDuration, Percent};
use rttscope_integration_tests::mariadb::NATIVE;
use rttscope_integration_tests::mariadb::TestDb;
use rttscope_integration_tests::process::rttscope_binary;
use rttscope_integration_tests::proxy::{TEST_ADMIN_TOKEN, TestProxy};
use rttscope_integration_tests::wan::{Chance, Impairments, WanImpairments};

/// Share of packets lost, each way.
const LOSS: f64 = 0.015;
/// One-row queries timed for the percentiles: at 1.5 % each way about 3 % of them lose
/// their query or its answer, 15 or so, so that the p99 (the 5th slowest) falls among them
/// in every run.
const QUERIES: u32 = 500;
/// Transfers timed and summed: one loss-limited transfer varies with where its losses fall.
const TRANSFERS: u32 = 2;
/// The tolerance the issue asks for.
const WITHIN: f64 = 0.20;

/// What one side measured.
#[derive(Debug)]
struct Figures {
    transfer: Duration,
    p50: Duration,
    p99: Duration,
}

/// The workload: `TRANSFERS` × 4 MB, then `QUERIES` one-row queries one after another.
async fn workload(opts: OptsBuilder) -> Figures {
    let mut conn = Conn::new(opts).await.expect("connect");
    let mut transfer = Duration::ZERO;
    for _ in 0..TRANSFERS {
        let started = Instant::now();
        let rows: Vec<String> = conn.query(SMALLER_SQL).await.expect("bulk select");
        transfer += started.elapsed();
        assert_eq!(rows.len(), 4000);
        assert!(rows.iter().all(|r| r.len() == 1000));
    }
    let mut latencies = Vec::with_capacity(QUERIES as usize);
    for i in 0..QUERIES {
        let started = Instant::now();
        let got: Option<u32> = conn.query_first(format!("SELECT {i} + 0")).await.expect("point select");
        latencies.push(started.elapsed());
        assert_eq!(got, Some(i));
    }
    conn.disconnect().await.expect("disconnect");
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Figures { transfer, p50: at(0.50), p99: at(0.99) }
}

/// (A): the client straight to the server across the lossy WAN.
fn over_the_wan(rig: &Rig) -> Figures {
    let opts = rig.db.opts_via(rig.db.upstream_addr(), NATIVE.user, NATIVE.password);
    let figures = rig
        .link
        .in_namespace(rig.link.client_ns(), move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(workload(opts))
        })
        .expect("enter client ns");
    let stats = rig.link.stats();
    eprintln!(
        "WAN: lost {} of {} packets to the client, {} of {} to the server",
        stats.server_to_client.lost,
        stats.server_to_client.seen,
        stats.client_to_server.lost,
        stats.client_to_server.seen
    );
    figures
}

/// (B): the client through rttscope emulating the same link, in front of the same server,
/// all three on the loopback of the server's namespace (the proxy's threads, started from
/// there, stay there).
fn injected(rig: &Rig) -> Figures {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut config = Config {
        listen: loopback.into(),
        admin: AdminConfig::from(loopback),
        upstream: rig.db.upstream_addr().into(),
        ..Config::default()
    };
    config.inject.rtt = HumanDuration(RTT);
    config.inject.bandwidth = Bandwidth::new(LINK_BPS);
    config.inject.loss = Percent::new(LOSS * 100.0);
    let db = &rig.db;
    rig.link
        .in_namespace(rig.link.server_ns(), move || {
            let proxy = TestProxy::with_config(config);
            let opts = db.opts_via(proxy.addr(), NATIVE.user, NATIVE.password);
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(workload(opts))
        })
        .expect("enter server ns")
}

#[test]
fn injected_loss_matches_real_loss() {
    let _serial = serial();
    let lossy = Impairments { loss: Chance::rate(LOSS), ..Impairments::default() };
    let reno = &[("net.ipv4.tcp_congestion_control", "reno")];
    let seed = std::env::var("RTTSCOPE_TEST_WAN_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(15);
    let started = Instant::now();
    let Some(rig) = Rig::start_impaired(reno, &[], WanImpairments::both(seed, lossy)) else {
        return;
    };
    eprintln!("rig up: {:.1} s", started.elapsed().as_secs_f64());
    let started = Instant::now();
    let real = over_the_wan(&rig);
    eprintln!("over the WAN: {:.1} s", started.elapsed().as_secs_f64());
    let started = Instant::now();
    let emulated = injected(&rig);
    eprintln!("injected: {:.1} s", started.elapsed().as_secs_f64());
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut off = Vec::new();
    for (what, a, b) in [
        ("transfer", real.transfer, emulated.transfer),
        ("p50", real.p50, emulated.p50),
        ("p99", real.p99, emulated.p99),
    ] {
        let ratio = b.as_secs_f64() / a.as_secs_f64();
        eprintln!("{what}: real {:.1} ms, injected {:.1} ms ({:+.1} %)", ms(a), ms(b), (ratio - 1.0) * 100.0);
        if (ratio - 1.0).abs() > WITHIN {
            off.push(what);
        }
    }
    assert!(off.is_empty(), "{off:?} off by more than 20 %: real {real:?}, injected {emulated:?}");
}

/// One-row queries on `conn`: how long each took.
async fn one_row_queries(conn: &mut Conn, n: u32) -> Vec<Duration> {
    let mut took = Vec::new();
    for i in 0..n {
        let started = Instant::now();
        let got: Option<u32> = conn.query_first(format!("SELECT {i} + 0")).await.expect("point select");
        took.push(started.elapsed());
        assert_eq!(got, Some(i));
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loss_is_set_and_cleared_live_through_the_cli() {
    let proxy = TestProxy::start();
    let url = format!("http://{}", proxy.admin());
    let inject = |args: &[&str]| {
        let out = std::process::Command::new(rttscope_binary().expect("the rttscope binary"))
            .args(["inject", "--admin", &url])
            .args(args)
            .env(ADMIN_TOKEN_ENV, TEST_ADMIN_TOKEN)
            .output()
            .expect("run rttscope inject");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut conn =
        Conn::new(TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await.expect("connect");
    let slow = |took: &[Duration]| took.iter().filter(|t| **t >= Duration::from_millis(200)).count();
    let before = one_row_queries(&mut conn, 40).await;

    // Half the segments lost each way: a query goes through clean only if neither it nor its
    // one-segment answer is lost (a quarter of them); the others wait out a timeout of
    // RTT + 200 ms.
    let shown = inject(&["--rtt", "2ms", "--loss", "50%"]);
    assert!(shown.contains("loss: 50%"), "{shown}");
    let lossy = one_row_queries(&mut conn, 40).await;
    let current = rttscope::cli::admin_client::get(&url, "/inject").expect("GET /inject");
    assert!(current.contains(r#""loss":"50%""#), "{current}");

    let shown = inject(&["--loss", "0"]);
    assert!(shown.contains("loss: 0%"), "{shown}");
    let after = one_row_queries(&mut conn, 40).await;
    conn.disconnect().await.expect("disconnect");
    eprintln!("waited ≥ 200 ms: {} of 40 before, {} at 50 % loss, {} after", slow(&before), slow(&lossy), slow(&after));
    assert_eq!(slow(&before), 0);
    assert!((20..=38).contains(&slow(&lossy)), "{lossy:?}");
    assert!(lossy.iter().all(|t| *t < Duration::from_millis(30) || *t >= Duration::from_millis(200)), "{lossy:?}");
    assert_eq!(slow(&after), 0);
}
