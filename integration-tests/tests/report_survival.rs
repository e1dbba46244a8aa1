//! Reports that survive: periodic snapshots in `report.dir` (whole files, rotated to
//! `report.keep`, the last one still there after SIGKILL) and `GET /report?window=` over
//! the last N seconds only — through the real binary, the `mariadb` CLI and the test server.
//!
//! Settings come from `RTTSCOPE_REPORT_*` environment variables, as a sidecar gets them.
//! An rttscope without these features ignores them with a warning and still starts, so
//! with `RTTSCOPE_TEST_BINARY` pointing at an older binary each test fails on the missing
//! behaviour itself (no snapshot appears; a window counts old statements).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rttscope::cli::admin_client::{self, ClientError};
use rttscope::report::snapshots::is_snapshot;
use rttscope::report::{Report, WindowKind};
use rttscope_integration_tests::clients::run;
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::process::{ProxyProcess, rttscope_binary};

fn start(env: &[(&str, &str)]) -> ProxyProcess {
    let yaml = format!("upstream: {}\n", TestDb::shared().upstream_addr());
    ProxyProcess::start_with(rttscope_binary().unwrap(), &yaml, |cmd| {
        cmd.envs(env.iter().copied());
    })
    .unwrap()
}

/// Runs `statements` through the proxy with the `mariadb` CLI.
fn sql(proxy: &ProxyProcess, statements: &str) {
    let mut cmd = TestDb::shared().mariadb_cli(proxy.listen(), NATIVE.user, NATIVE.password, Some(DB));
    cmd.args(["-e", statements]);
    let out = run(cmd, Duration::from_secs(30)).unwrap();
    assert!(out.status.success(), "{statements}: {}", out.stderr);
}

/// The snapshots in `dir`, oldest first (names sort by time).
fn snapshots(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| is_snapshot(p)).collect(),
        Err(_) => Vec::new(),
    };
    found.sort();
    found
}

/// Reads and parses a snapshot; `None` if rotation deleted it in the meantime. A file that
/// is there but not a whole report fails the test.
fn read_snapshot(path: &Path) -> Option<Report> {
    match std::fs::read_to_string(path) {
        Ok(text) => Some(
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not a whole report: {e}", path.display())),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

fn count_of(report: &Report, fingerprint: &str) -> u64 {
    report.queries.iter().filter(|q| q.fingerprint == fingerprint).map(|q| q.count).sum()
}

#[test]
fn snapshots_are_whole_reports_and_never_more_than_keep() {
    let dir = tempfile::tempdir().unwrap();
    let dir_str = dir.path().to_str().unwrap();
    let proxy =
        start(&[("RTTSCOPE_REPORT_EVERY", "1s"), ("RTTSCOPE_REPORT_DIR", dir_str), ("RTTSCOPE_REPORT_KEEP", "3")]);
    sql(&proxy, "SELECT 1 AS in_a_snapshot");
    let mut seen = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(7);
    while Instant::now() < deadline {
        let now = snapshots(dir.path());
        assert!(now.len() <= 3, "more snapshots than report.keep: {now:?}");
        for path in &now {
            if seen.insert(path.clone()) {
                read_snapshot(path);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(seen.len() >= 5, "one snapshot a second for 7 s, saw {}: {seen:?}\n{}", seen.len(), proxy.log());
    let kept = snapshots(dir.path());
    assert_eq!(kept.len(), 3, "the newest report.keep remain: {kept:?}");
    let newest = read_snapshot(kept.last().unwrap()).unwrap();
    assert_eq!(count_of(&newest, "select ? as in_a_snapshot"), 1, "{:#?}", newest.queries);
    assert_eq!(newest.window.as_ref().map(|w| w.kind), Some(WindowKind::Cumulative));
    let names: Vec<String> = kept.iter().filter_map(|p| p.file_name()?.to_str().map(str::to_owned)).collect();
    assert!(names.iter().all(|n| n.starts_with("rttscope-report-2") && n.ends_with("Z.json")), "{names:?}");
}

#[test]
fn a_process_killed_with_sigkill_leaves_its_last_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let dir_str = dir.path().to_str().unwrap();
    let mut proxy = start(&[("RTTSCOPE_REPORT_EVERY", "1s"), ("RTTSCOPE_REPORT_DIR", dir_str)]);
    sql(&proxy, "SELECT 1 AS before_the_kill; SELECT 2 AS before_the_kill");
    // Two periods: a snapshot taken after the statements were recorded.
    std::thread::sleep(Duration::from_millis(2500));
    proxy.signal(libc::SIGKILL).unwrap();
    let status = proxy.wait_timeout(Duration::from_secs(5)).unwrap().expect("SIGKILL ends it");
    assert!(!status.success());

    let left = snapshots(dir.path());
    let last = left.last().unwrap_or_else(|| panic!("no snapshot survived the kill; log:\n{}", proxy.log()));
    let report = read_snapshot(last).expect("the last snapshot is there");
    assert_eq!(count_of(&report, "select ? as before_the_kill"), 2, "{:#?}", report.queries);
}

fn admin_get(proxy: &ProxyProcess, path: &str) -> Result<String, ClientError> {
    admin_client::get(&format!("http://{}", proxy.admin()), path)
}

fn report_at(proxy: &ProxyProcess, path: &str) -> Report {
    serde_json::from_str(&admin_get(proxy, path).unwrap()).unwrap()
}

#[test]
fn a_rolling_window_counts_only_the_statements_in_it() {
    let proxy = start(&[("RTTSCOPE_REPORT_WINDOW_RESOLUTION", "1s"), ("RTTSCOPE_REPORT_WINDOW_MAX", "1m")]);
    sql(&proxy, &"SELECT 1 AS before_the_window;".repeat(5));
    std::thread::sleep(Duration::from_secs(5));
    sql(&proxy, &"SELECT 2 AS in_the_window;".repeat(3));
    // The collector applies records a moment after the client saw its results.
    let deadline = Instant::now() + Duration::from_secs(10);
    let cumulative = loop {
        let r = report_at(&proxy, "/report");
        if count_of(&r, "select ? as in_the_window") == 3 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(count_of(&cumulative, "select ? as before_the_window"), 5);
    assert_eq!(count_of(&cumulative, "select ? as in_the_window"), 3);

    let window = report_at(&proxy, "/report?window=2s");
    assert_eq!(count_of(&window, "select ? as before_the_window"), 0, "5 s old: outside a 2 s window");
    assert_eq!(count_of(&window, "select ? as in_the_window"), 3, "{:#?}", window.queries);
    // Totals are the window's: what its statement classes add up to, less than the whole.
    let executions: u64 = window.queries.iter().map(|q| q.count).sum();
    assert_eq!(window.totals.executions, executions);
    assert!(window.totals.executions < cumulative.totals.executions);
    assert_eq!(window.totals.connections, 1, "one CLI session in the window");
    let w = window.window.as_ref().expect("the report says which window");
    assert_eq!(
        (w.kind, w.requested_us, w.resolution_us, w.findings),
        (WindowKind::Rolling, 2_000_000, 1_000_000, true)
    );
    assert!((2_000_000..=3_000_000).contains(&(w.end_us - w.start_us)), "{w:?}");

    let longer = report_at(&proxy, "/report?window=1m");
    assert_eq!(count_of(&longer, "select ? as before_the_window"), 5);
    assert_eq!(count_of(&longer, "select ? as in_the_window"), 3);
    let text = admin_get(&proxy, "/report?window=2s&format=text").unwrap();
    assert!(text.contains("# Rolling window: the last 2"), "{text}");
    let html = admin_get(&proxy, "/report?window=2s&format=html").unwrap();
    assert!(html.contains("Rolling window: the last 2"), "{html}");
    // The command line asks for the same window.
    let mut cli = std::process::Command::new(rttscope_binary().unwrap());
    cli.args(["report", "--admin", &format!("http://{}", proxy.admin()), "--window", "2s", "--format", "json"]);
    let out = run(cli, Duration::from_secs(30)).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    let from_cli: Report = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(count_of(&from_cli, "select ? as before_the_window"), 0);
    assert_eq!(count_of(&from_cli, "select ? as in_the_window"), 3);

    for (window, says) in [
        ("abc", "window: invalid duration 'abc'"),
        ("500ms", "at least report.window_resolution (1s), not 500ms"),
        ("2h", "at most report.window_max (1m), not 2h"),
    ] {
        match admin_get(&proxy, &format!("/report?window={window}")) {
            Err(ClientError::Status { status, body, .. }) => {
                assert_eq!(status, 400, "{window}: {body}");
                assert!(body.contains(says), "{window}: {body}");
            }
            other => panic!("{window}: expected 400, got {other:?}"),
        }
    }
}

/// The statements of a finding, as its report names them.
fn found(report: &Report) -> Vec<(String, String)> {
    report.findings.iter().map(|f| (f.kind.to_string(), f.evidence.statement.clone())).collect()
}

#[test]
fn a_rolling_window_lists_only_the_findings_in_it() {
    let proxy = start(&[
        ("RTTSCOPE_REPORT_WINDOW_RESOLUTION", "1s"),
        ("RTTSCOPE_REPORT_WINDOW_MAX", "1m"),
        ("RTTSCOPE_INJECT_RTT", "2ms"),
    ]);
    // Two loops of one-row inserts, 5 s apart: each a repeated write.
    let inserts = |table: &str| -> String { (0..30).map(|i| format!("INSERT INTO {table} VALUES ({i}); ")).collect() };
    let early = "CREATE TEMPORARY TABLE early (a INT); ".to_owned() + &inserts("early");
    sql(&proxy, &early);
    std::thread::sleep(Duration::from_secs(5));
    let late = "CREATE TEMPORARY TABLE late (a INT); ".to_owned() + &inserts("late");
    sql(&proxy, &late);
    let deadline = Instant::now() + Duration::from_secs(10);
    let cumulative = loop {
        let r = report_at(&proxy, "/report");
        if found(&r).iter().filter(|(_, text)| text.contains("insert into")).count() >= 2 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let all = found(&cumulative);
    assert!(all.iter().any(|(_, t)| t.contains("insert into early")), "{all:?}");
    assert!(all.iter().any(|(_, t)| t.contains("insert into late")), "{all:?}");

    let window = report_at(&proxy, "/report?window=2s");
    let recent = found(&window);
    assert!(recent.iter().any(|(_, t)| t.contains("insert into late")), "{recent:?}");
    assert!(!recent.iter().any(|(_, t)| t.contains("insert into early")), "5 s old: {recent:?}");
    assert!(window.window.as_ref().is_some_and(|w| w.findings));
    let longer = report_at(&proxy, "/report?window=1m");
    assert_eq!(found(&longer).len(), found(&cumulative).len(), "{:?}", found(&longer));
}
