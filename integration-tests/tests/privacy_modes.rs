//! No literal reaches any place rttscope writes, however the client changed `sql_mode`: issue
//! #38's cases, each on its own connection through a real client — numeric, unquoted, hex,
//! `PREPARE`/`EXECUTE`, `EXECUTE IMMEDIATE`, a user variable, `CONCAT(@@sql_mode, ...)`, the
//! global mode a new session takes, a multi-statement, a `SET` pipelined with the next query
//! both ways, mysqldump's `/*!40101 SET SQL_MODE=... */` (the `mariadb` CLI), and a `*/`
//! inside a string in an executable comment. `report.examples` is off, as by default.
//!
//! Checked in the JSON, text and HTML reports, a rolling window, the snapshots, the final
//! report file, `/metrics`, `SHOW RTTSCOPE STATEMENTS` and `FINDINGS`, and the debug log.

use std::path::Path;
use std::time::{Duration, Instant};

use rttscope::cli::admin_client as client;
use rttscope_integration_tests::clients::{conn_args, run_python};
use rttscope_integration_tests::mariadb::{ADMIN, DB, NATIVE, TestDb};
use rttscope_integration_tests::process::{ProxyProcess, rttscope_binary};

/// Every case's marker; the server returns each in a value (the script prints it).
const MARKERS: [(&str, &str); 13] = [
    ("numeric", "LEAKNUMERIC"),
    ("unquoted", "LEAKUNQUOTED"),
    ("hex", "LEAKHEX"),
    ("prepare", "LEAKPREPARE"),
    ("immediate", "LEAKIMMEDIATE"),
    ("variable", "LEAKVARIABLE"),
    ("concat", "LEAKCONCAT"),
    ("global", "LEAKGLOBAL"),
    ("multi", "LEAKMULTI"),
    ("pipelined_on", "LEAKPIPEON"),
    ("pipelined_off", "LEAKPIPEOFF"),
    ("executable", "LEAKEXECUTABLE"),
    ("dump", "LEAKDUMP"),
];

fn admin(proxy: &ProxyProcess, path: &str) -> String {
    client::get(&format!("http://{}", proxy.admin()), path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// mysqldump's preamble, as a dump file restored through the `mariadb` CLI sends it.
fn restore_a_dump(proxy: &ProxyProcess) -> String {
    let mut cli = TestDb::shared().mariadb_cli(proxy.listen(), NATIVE.user, NATIVE.password, Some(DB));
    let dump = "/*!40101 SET SQL_MODE='ANSI_QUOTES' */;\nSELECT 1 AS \"a\\\", 'x\"LEAKDUMP';\n";
    let out = cli.args(["--batch", "-e", dump]).output().expect("run the mariadb CLI");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the SQL prompt shows, through the proxy.
fn sql_view(proxy: &ProxyProcess, what: &str) -> String {
    let mut cli = TestDb::shared().mariadb_cli(proxy.listen(), NATIVE.user, NATIVE.password, Some(DB));
    let out = cli.args(["--batch", "-e", &format!("SHOW RTTSCOPE {what}")]).output().expect("run the mariadb CLI");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn files_under(dir: &Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        all.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
    }
    all
}

#[test]
fn no_literal_leaks_however_the_sql_mode_changes() {
    let db = TestDb::shared();
    let dir = tempfile::tempdir().unwrap();
    let (final_report, snapshots) = (dir.path().join("final.json"), dir.path().join("snapshots"));
    std::fs::create_dir(&snapshots).unwrap();
    let yaml = format!(
        "upstream: {}\nreport:\n  path: {}\n  every: 1s\n  dir: {}\n  examples: false\n",
        db.upstream_addr(),
        final_report.display(),
        snapshots.display()
    );
    let mut proxy = ProxyProcess::start_with(rttscope_binary().unwrap(), &yaml, |cmd| {
        cmd.env("RUST_LOG", "debug");
    })
    .unwrap();

    let mut script = conn_args(proxy.listen(), NATIVE);
    script.extend(["--admin-user", ADMIN.user, "--admin-password", ADMIN.password].map(String::from));
    let mut seen = run_python("sql_mode_leaks.py", &script).unwrap();
    seen.push_str(&restore_a_dump(&proxy));
    // The server read every marker as a literal: it sent each back.
    for (case, marker) in MARKERS {
        assert!(seen.contains(marker), "{case}: the server did not return {marker}:\n{seen}");
    }

    // Recorded: the loop of 25 is a finding, and the last query is in the report.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !admin(&proxy, "/report").contains("n_plus_one") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1200));
    let mut places = vec![
        ("json report", admin(&proxy, "/report")),
        ("text report", admin(&proxy, "/report?format=text")),
        ("html report", admin(&proxy, "/report?format=html")),
        ("rolling window", admin(&proxy, "/report?window=5m")),
        ("/metrics", admin(&proxy, "/metrics")),
        ("/connections", admin(&proxy, "/connections")),
        ("SHOW RTTSCOPE STATEMENTS", sql_view(&proxy, "STATEMENTS")),
        ("SHOW RTTSCOPE FINDINGS", sql_view(&proxy, "FINDINGS")),
        ("snapshots", files_under(&snapshots)),
    ];
    assert!(places[0].1.contains("n_plus_one"), "the loop is a finding: {}", places[0].1);
    assert!(places[6].1.contains("select"), "the SQL view lists statements: {}", places[6].1);
    assert!(!places[8].1.is_empty(), "a snapshot was written");

    proxy.signal(libc::SIGTERM).unwrap();
    proxy.wait_timeout(Duration::from_secs(15)).unwrap().expect("rttscope exits on SIGTERM");
    places.push(("final report", std::fs::read_to_string(&final_report).expect("the final report")));
    places.push(("debug log", proxy.log()));
    let mut leaks = Vec::new();
    for (place, body) in &places {
        for (case, marker) in MARKERS {
            if body.to_ascii_lowercase().contains(&marker.to_ascii_lowercase()) {
                leaks.push(format!("{case} in the {place}"));
            }
        }
    }
    assert!(leaks.is_empty(), "literals leaked: {leaks:#?}");
}
