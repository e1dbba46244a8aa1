//! The emulated link as a team uses it: a configured RTT that every round
//! trip pays, the article's loop slowed as predicted, a live change through
//! the admin API mid-workload with nothing lost, scopes, and bad values
//! refused by name. Precise accuracy figures belong to the benchmark.

use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::*;
use rttscope::cli::admin_client::ClientError;
use rttscope::report::Report;
use rttscope_config::{Bandwidth, ByteSize, Config, HumanDuration, Inject, Percent};
use rttscope_integration_tests::mariadb::{DB, NATIVE, OTHER, TestDb};
use rttscope_integration_tests::proxy::{TestProxy, test_config};
use rttscope_integration_tests::skip;
use rttscope_integration_tests::wan::{WanConfig, WanLink};

fn with_rtt(rtt_ms: u64) -> Config {
    let mut config = test_config();
    config.inject.rtt = HumanDuration::from_millis(rtt_ms);
    config
}

async fn connect(proxy: &TestProxy) -> Conn {
    Conn::new(TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password)).await.expect("connect")
}

async fn hundred_selects(conn: &mut Conn) -> Duration {
    let started = Instant::now();
    for i in 0..100u32 {
        let echoed: Option<u32> = conn.exec_first("SELECT ?", (i,)).await.unwrap();
        assert_eq!(echoed, Some(i));
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_round_trip_pays_the_configured_rtt() {
    let plain = TestProxy::start();
    let mut conn = connect(&plain).await;
    let _ = hundred_selects(&mut conn).await; // warm the statement cache
    let without = hundred_selects(&mut conn).await;

    let slow = TestProxy::with_config(with_rtt(10));
    let mut conn = connect(&slow).await;
    let _: Option<u8> = conn.exec_first("SELECT ?", (1u8,)).await.unwrap();
    let with = hundred_selects(&mut conn).await;
    let added = with.saturating_sub(without);
    eprintln!("100 round trips: {without:?} plain, {with:?} at 10 ms: +{added:?}");
    // Every round trip waits out the RTT: a floor the slow run alone must clear. Its
    // difference from the plain run only bounds the overshoot: a scheduling hiccup in the
    // plain run (on a busy host its 100 round trips took 86 ms) would otherwise read as
    // an emulated RTT that fell short.
    assert!(with >= Duration::from_millis(1000), "100 round trips at 10 ms took {with:?}");
    assert!(added <= Duration::from_millis(1200), "added {added:?}");

    // The report tells the emulated time apart from the server's own.
    let r: Report = slow.state().report();
    let q = r.queries.iter().find(|q| q.fingerprint == "select ?").unwrap();
    assert!(q.injected_us >= 100 * 10_000 && q.injected_us <= q.latency_us.sum, "{q:?}");
    assert!(q.latency_us.p50 >= 10_000, "latency as the client lives it: {:?}", q.latency_us);
}

/// The article's loop at 300 children, first on the plain link, then at
/// 15 ms: it costs about 300 × 15 ms more, and the what-if projection made
/// from the plain run predicts the slow run within 15 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_projection_predicts_the_emulated_loop() {
    async fn salary_loop(proxy: &TestProxy, prefix: &str) -> Duration {
        let mut conn = connect(proxy).await;
        conn.query_drop(format!("CREATE OR REPLACE TABLE {prefix}_salaries (emp_no INT PRIMARY KEY, salary INT)"))
            .await
            .unwrap();
        conn.query_drop(format!("INSERT INTO {prefix}_salaries SELECT 10000 + seq, 40000 + seq FROM seq_1_to_300"))
            .await
            .unwrap();
        let started = Instant::now();
        let staff: Vec<u32> = conn.query(format!("SELECT emp_no FROM {prefix}_salaries")).await.unwrap();
        for emp_no in staff {
            let _: Option<u32> = conn
                .query_first(format!("SELECT salary FROM {prefix}_salaries WHERE emp_no = {emp_no}"))
                .await
                .unwrap();
        }
        started.elapsed()
    }
    let mut plain_config = test_config();
    plain_config.findings.scenarios =
        vec![rttscope_config::Scenario { name: "15 ms".into(), rtt: HumanDuration::from_millis(15), bandwidth: None }];
    let plain = TestProxy::with_config(plain_config);
    let here = salary_loop(&plain, "proj_plain").await;
    plain.wait_for("the loop", |a| {
        a.queries()
            .iter()
            .any(|q| q.text.as_ref() == "select salary from proj_plain_salaries where emp_no = ?" && q.count == 300)
            .then_some(())
    });
    let r = plain.state().report();
    let f = r.findings.iter().find(|f| f.kind == rttscope::findings::Kind::NPlusOne).expect("the loop is found");
    let predicted = Duration::from_micros(f.what_if[0].projected_us);

    let slow = TestProxy::with_config(with_rtt(15));
    let there = salary_loop(&slow, "proj_slow").await;
    let added = there.saturating_sub(here);
    eprintln!("loop: {here:?} plain, {there:?} at 15 ms (+{added:?}); predicted {predicted:?}");
    let expected_added = Duration::from_millis(301 * 15);
    assert!(added >= expected_added.mul_f64(0.95) && added <= expected_added.mul_f64(1.15), "added {added:?}");
    let error = (there.as_secs_f64() - predicted.as_secs_f64()).abs() / there.as_secs_f64();
    assert!(error < 0.15, "projection off by {:.1} %", error * 100.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_change_reaches_open_connections_and_loses_nothing() {
    let proxy = TestProxy::start();
    let admin = proxy.admin_client();
    let mut conn = connect(&proxy).await;
    conn.query_drop("CREATE OR REPLACE TABLE live_rows (id INT PRIMARY KEY, pad CHAR(200))").await.unwrap();
    conn.query_drop("INSERT INTO live_rows SELECT seq, REPEAT('p', 200) FROM seq_1_to_20000").await.unwrap();
    async fn timed(conn: &mut Conn) -> Duration {
        let started = Instant::now();
        let n: Option<u32> = conn.query_first("SELECT COUNT(*) FROM live_rows").await.unwrap();
        assert_eq!(n, Some(20_000));
        started.elapsed()
    }
    let before = timed(&mut conn).await;

    // A result streaming while the link changes under it arrives whole.
    let mut streaming = connect(&proxy).await;
    let stream = tokio::spawn(async move {
        let rows: Vec<(u32, String)> = streaming.query("SELECT id, pad FROM live_rows ORDER BY id").await.unwrap();
        rows
    });
    admin.put_json("/inject", r#"{"rtt": "20ms", "bandwidth": "50mbit"}"#).unwrap();
    let during = timed(&mut conn).await;
    admin.put_json("/inject", "{}").unwrap();
    let rows = stream.await.unwrap();
    assert_eq!(rows.len(), 20_000);
    assert!(rows.iter().enumerate().all(|(i, (id, pad))| *id == i as u32 + 1 && pad.len() == 200));
    let after = timed(&mut conn).await;
    eprintln!("one query: {before:?} before, {during:?} at 20 ms, {after:?} after");
    assert!(during >= Duration::from_millis(20), "{during:?}");
    assert!(before < Duration::from_millis(15) && after < Duration::from_millis(15), "{before:?} {after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scope_picks_the_connections() {
    let mut config = with_rtt(30);
    config.inject.scope.users = vec![OTHER.user.to_owned()];
    let proxy = TestProxy::with_config(config);
    let mut native = connect(&proxy).await;
    let mut other = Conn::new(TestDb::shared().opts_via(proxy.addr(), OTHER.user, OTHER.password)).await.unwrap();
    async fn time(c: &mut Conn) -> Duration {
        let t = Instant::now();
        c.query_drop("DO 1").await.unwrap();
        t.elapsed()
    }
    let (fast, slow) = (time(&mut native).await, time(&mut other).await);
    assert!(fast < Duration::from_millis(20) && slow >= Duration::from_millis(30), "{fast:?} {slow:?}");

    // 0 % of connections: nobody.
    let mut config = with_rtt(30);
    config.inject.scope.percent = Percent::new(0.0).unwrap();
    let proxy = TestProxy::with_config(config);
    let mut conn = connect(&proxy).await;
    assert!(time(&mut conn).await < Duration::from_millis(20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_values_are_refused_by_name() {
    for (yaml, key) in [
        ("inject:\n  rtt: -5ms\n", "inject.rtt"),
        ("inject:\n  bandwidth: 0\n", "inject.bandwidth"),
        ("inject:\n  rtts: 5ms\n", "inject.rtts"),
    ] {
        let e = Config::from_yaml(yaml).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains("line 2"), "{yaml}: {e}");
    }
    let proxy = TestProxy::start();
    let admin = proxy.admin_client();
    for (body, key) in [
        (r#"{"rtt": "-5ms"}"#, "rtt"),
        (r#"{"bandwidth": 0}"#, "bandwidth"),
        (r#"{"rtts": "5ms"}"#, "rtts"),
        (r#"{"to_client": {"jitter": "9ms"}}"#, "to_client.jitter"),
    ] {
        let Err(ClientError::Status { status: 400, body: reply, .. }) = admin.put_json("/inject", body) else {
            panic!("{body} is not refused with 400");
        };
        let error: serde_json::Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(error["problems"][0]["key"], key, "{body}: {error}");
    }
    // Nothing changed.
    let current: Inject = serde_json::from_str(
        &rttscope::cli::admin_client::get(&format!("http://{}", proxy.admin()), "/inject").unwrap(),
    )
    .unwrap();
    assert!(!current.is_active());
}

#[test]
fn the_shipped_presets_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            seen += 1;
        }
    }
    assert!(seen >= 5, "{seen} presets");
    let dc = Config::load(dir.join("another-datacentre.yaml")).unwrap();
    assert_eq!(
        (dc.inject.rtt.0, dc.inject.bandwidth.map(|b| b.bits_per_second())),
        (Duration::from_millis(15), Some(34_000_000))
    );
}

/// The median wall time of `runs` runs of a command that must succeed.
fn median_run(runs: usize, mut command: impl FnMut() -> std::process::Command) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let out = command().output().expect("run the mariadb CLI");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            started.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

/// Connecting pays the emulated link as it would a real one: a whole `mariadb -e` run
/// (TCP handshake, greeting, login, the query) through rttscope at `inject.rtt: 40ms` takes
/// as long as the same run directly across a real 40 ms link (the WAN emulator), within
/// 15 %. Apps that connect per request are then not shown 2–3 round trips too cheap.
#[test]
fn connecting_pays_the_emulated_link_like_a_real_one() {
    if let Err(why) = WanLink::available() {
        skip(why);
        return;
    }
    const RTT_MS: u64 = 40;
    const SQL: &str = "SELECT 1";
    let link = WanLink::start(WanConfig::with_rtt(Duration::from_millis(RTT_MS))).expect("start WAN link");
    let far = TestDb::start_in_namespace(link.server_ns(), link.server_ip()).expect("MariaDB across the link");
    let real = median_run(5, || {
        let cli = far.mariadb_cli(far.upstream_addr(), NATIVE.user, NATIVE.password, Some(DB));
        let mut cmd = link.command(link.client_ns(), &cli.get_program().to_string_lossy());
        cmd.args(cli.get_args()).args(["-e", SQL]);
        cmd
    });

    let proxy = TestProxy::with_config(with_rtt(RTT_MS));
    let db = TestDb::shared();
    let emulated = median_run(5, || {
        let mut cli = db.mariadb_cli(proxy.addr(), NATIVE.user, NATIVE.password, Some(DB));
        cli.args(["-e", SQL]);
        cli
    });
    let local = median_run(5, || {
        let mut cli = db.mariadb_cli(db.upstream_addr(), NATIVE.user, NATIVE.password, Some(DB));
        cli.args(["-e", SQL]);
        cli
    });
    eprintln!("mariadb -e: {real:?} across a real {RTT_MS} ms link, {emulated:?} emulated, {local:?} local");
    // At least the round trips of a TCP connect, the greeting, the login and the query.
    assert!(real >= Duration::from_millis(3 * RTT_MS), "the real link is not {RTT_MS} ms: {real:?}");
    let error = (emulated.as_secs_f64() - real.as_secs_f64()).abs() / real.as_secs_f64();
    assert!(error <= 0.15, "emulated {emulated:?} vs real {real:?}: off by {:.0} %", error * 100.0);
}

/// A large result over the emulated link is held by the emulation, and the verdict says so in
/// its figures: with `config/examples/pinned-16k-sndbuf.yaml`'s values (20 ms, 100 Mbit/s, a
/// 16 KiB window) its window, with a bandwidth alone that bandwidth — never the server, which
/// only waited for rttscope to read on, and never the loopback path's RTT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_the_emulated_link_held_is_the_emulations_verdict() {
    let cases = [
        (
            Some(ByteSize::kib(16)),
            Bandwidth::new(100_000_000),
            "receive_window",
            "a 16.0 KiB window at its 20.00 ms RTT",
        ),
        (None, Bandwidth::new(20_000_000), "link", "20 Mbit/s at 20.00 ms RTT"),
    ];
    for (window, bandwidth, limit, words) in cases {
        let mut config = with_rtt(20);
        (config.inject.window, config.inject.bandwidth) = (window, bandwidth);
        let proxy = TestProxy::with_config(config);
        let mut conn = connect(&proxy).await;
        let rows: Vec<String> = conn.query("SELECT REPEAT('x', 1000) FROM seq_1_to_2000").await.unwrap();
        assert_eq!(rows.len(), 2_000);
        let deadline = Instant::now() + Duration::from_secs(10);
        let verdict = loop {
            if let Some(v) = proxy.state().report().links.into_iter().last() {
                break v;
            }
            assert!(Instant::now() < deadline, "no verdict on the transfer");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let summary = &verdict.summary;
        assert_eq!(verdict.limit.name(), limit, "{summary}");
        assert!(summary.contains(&format!("the emulated link (inject) is the limit: {words}")), "{summary}");
        assert!(!summary.contains("server paused") && !summary.contains("µs RTT"), "{summary}");
        assert!(verdict.emulated_us * 2 >= verdict.duration_us, "{verdict:?}");
        assert!(verdict.fix.contains("inject"), "{}", verdict.fix);
    }
}
