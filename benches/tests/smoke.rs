//! The end-to-end bench in miniature, so the harness cannot rot: every workload runs on
//! both sides and the table has a sane row for each; e (the emulated link's accuracy) adds
//! its second table.

use std::time::Duration;

use rttscope_benches::report::Compare;
use rttscope_benches::{Options, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_bench_produces_the_whole_table() -> anyhow::Result<()> {
    let out = tempfile::tempdir()?;
    let options = Options {
        round_trips: Some(300),
        warmup: Some(20),
        duration: Some(Duration::from_millis(300)),
        connections: Some(4),
        table_rows: Some(1_000),
        large_mb: Some(2.0),
        out_dir: Some(out.path().to_owned()),
        // a to d: f needs valgrind, which the tests do not install (scripts/bench.sh does).
        only: ["a", "b", "c", "d"].map(String::from).to_vec(),
        // The raw pipe is the rttscope-bench binary in another mode; this test is not it.
        no_raw_pipe: true,
        // HAProxy is the bench's dependency, not the tests' (scripts/bench.sh installs it).
        no_haproxy: true,
        // e in its quick form: a few round trips per RTT and a 2 MB result, about 3 s.
        inject: true,
        ..Options::quick()
    };
    let report = run(&options).await?;

    for id in ["a.p50", "a.p99", "b", "c", "d"] {
        let row = report.rows.iter().find(|r| r.id == id);
        let Some(row) = row else { panic!("no row {id} in\n{}", report.markdown) };
        assert_eq!(row.scenario, "default");
        assert!(row.proxy.is_finite() && row.proxy > 0.0, "{id}: {row:?}");
        if id != "d" {
            let direct = row.direct.unwrap_or(0.0);
            assert!(direct.is_finite() && direct > 0.0, "{id}: {row:?}");
        }
        match row.compare {
            Compare::Ratio(r) => assert!(r.is_finite() && r > 0.0, "{id}: {row:?}"),
            Compare::Added(a) => assert!(a.is_finite(), "{id}: {row:?}"),
            Compare::None => assert_eq!(id, "d"),
        }
    }
    for (letter, what) in [("a.", "sequential"), ("b.", "point selects"), ("c.", "result set"), ("d.", "CPU")] {
        assert!(
            report.markdown.lines().any(|l| l.starts_with(&format!("| {letter}")) && l.contains(what)),
            "no {letter} row in\n{}",
            report.markdown
        );
    }
    let direct = &report.sides[0];
    assert_eq!(direct.sequential.map(|l| l.count), Some(300));
    assert_eq!(direct.large_runs.len(), 3);
    // rttscope's polling before sleeping is read from its /metrics around each run of b,
    // and reported beside d; direct has none.
    assert!(direct.point_idle_poll().is_none());
    let default = report.sides.iter().find(|s| s.name == "default").expect("a default side");
    let polled = default.point_idle_poll().expect("default's idle polling during b");
    assert!(polled.caught + polled.missed + polled.crowded > 0, "no idle moment counted: {polled:?}");
    assert!(report.markdown.contains("default polled before sleeping for"), "{}", report.markdown);

    let Some(accuracy) = &report.accuracy else { panic!("no accuracy table in\n{}", report.markdown) };
    let ids: Vec<&str> = accuracy.table.iter().map(|r| r.id.as_str()).collect();
    let rttscope_ids = ["e.rtt_1ms", "e.rtt_15ms", "e.rtt_80ms", "e.cpu_hog.rtt_15ms", "e.bandwidth", "e.window"];
    assert_eq!(ids[..6], rttscope_ids);
    // Toxiproxy runs when scripts/build-toxiproxy.sh has built it (or $TOXIPROXY_SERVER names it).
    let measured_rows = if accuracy.toxiproxy.is_some() {
        assert_eq!(
            ids[6..],
            [
                "e.toxiproxy.rtt_1ms",
                "e.toxiproxy.rtt_15ms",
                "e.toxiproxy.rtt_80ms",
                "e.toxiproxy.bandwidth",
                "e.toxiproxy.window"
            ]
        );
        10
    } else {
        assert_eq!(ids[6..], ["e.toxiproxy"]);
        6
    };
    for row in accuracy.table.iter().take(measured_rows) {
        let measured = row.measured.unwrap_or(f64::NAN);
        // Quick counts prove the plumbing, not the accuracy: the sign and the rough size only.
        assert!(measured.is_finite() && measured > 0.0 && row.met.is_some(), "{row:?}");
    }
    assert!(report.markdown.contains("\n### e. emulated link accuracy"), "{}", report.markdown);

    let md = std::fs::read_to_string(out.path().join("latest.md"))?;
    assert_eq!(md, report.markdown);
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.path().join("latest.json"))?)?;
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["rows"].as_array().map(Vec::len), Some(report.rows.len()));
    assert_eq!(json["accuracy"]["table"].as_array().map(Vec::len), Some(accuracy.table.len()));
    Ok(())
}

/// The Unix-socket leg end to end: rttscope with `listen: unix:PATH` and MariaDB's own
/// socket, each with a row against direct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_scenario_runs() -> anyhow::Result<()> {
    let out = tempfile::tempdir()?;
    let options = Options {
        round_trips: Some(200),
        warmup: Some(20),
        only: vec!["a".into()],
        scenarios: vec!["unix".into()],
        no_raw_pipe: true,
        no_haproxy: true,
        out_dir: Some(out.path().to_owned()),
        ..Options::quick()
    };
    let report = run(&options).await?;
    for scenario in ["default", "unix", "direct-unix"] {
        let row = report.rows.iter().find(|r| r.id == "a.p50" && r.scenario == scenario);
        let Some(row) = row else { panic!("no a.p50 row for {scenario} in\n{}", report.markdown) };
        assert!(row.proxy.is_finite() && row.proxy > 0.0, "{row:?}");
    }
    Ok(())
}

/// `--tls` end to end against the private server that speaks TLS: the TLS sides run, and
/// those with TLS into MariaDB are compared with `direct-tls`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_run_compares_tls_sides_with_direct_tls() -> anyhow::Result<()> {
    let out = tempfile::tempdir()?;
    let options = Options {
        round_trips: Some(200),
        warmup: Some(20),
        large_mb: Some(1.0),
        only: vec!["a".into(), "c".into()],
        tls: true,
        no_raw_pipe: true,
        no_haproxy: true,
        out_dir: Some(out.path().to_owned()),
        ..Options::quick()
    };
    let report = run(&options).await?;
    let find = |id: &str, scenario: &str| {
        let row = report.rows.iter().find(|r| r.id == id && r.scenario == scenario);
        row.unwrap_or_else(|| panic!("no {id} row for {scenario} in\n{}", report.markdown)).clone()
    };
    let direct_tls = find("a.p50", "direct-tls");
    for scenario in ["default", "upstream-tls"] {
        assert_eq!(find("a.p50", scenario).direct, Some(direct_tls.proxy), "{scenario} against direct-tls");
        assert!(find("c", scenario).proxy > 0.0);
    }
    assert_ne!(find("a.p50", "upstream-plain").direct, Some(direct_tls.proxy), "plain against plain direct");
    let sides = |name: &str| report.sides.iter().find(|s| s.name == name).map(|s| (s.client_tls, s.server_tls));
    assert_eq!(sides("direct-tls"), Some((true, true)));
    assert_eq!(sides("upstream-tls"), Some((false, true)));
    assert_eq!(sides("upstream-plain"), Some((false, false)));
    Ok(())
}
