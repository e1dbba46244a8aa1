//! No literal reaches any place rttscope writes, however the client changed `sql_mode`: issue
//! #38's cases, each on its own connection through a real client — numeric, unquoted, hex,
//! `PREPARE`/`EXECUTE`, `EXECUTE IMMEDIATE`, a user variable, `CONCAT(@@sql_mode, ...)`, the
//! global mode a new session takes, a multi-statement, a `SET` pipelined with the next query
//! both ways, mysqldump's `/*!40101 SET SQL_MODE=... */` (the `mariadb` CLI), a `*/`
//! inside a string in an executable comment, and a versioned comment the server skips as a
//! comment that ends at its first `*/`. `report.examples` is off, as by default.
//!
//! Then the same promise as a property: statements generated from a seed, a fresh secret in
//! each, in every form of literal, under every combination of `ANSI_QUOTES` and
//! `NO_BACKSLASH_ESCAPES` and with the mode changed mid-stream.
//!
//! Checked in the JSON, text and HTML reports, a rolling window, the snapshots, the final
//! report file, `/metrics`, `SHOW RTTSCOPE STATEMENTS` and `FINDINGS`, and the debug log.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use rttscope::cli::admin_client as client;
use rttscope::report::Report;
use rttscope_integration_tests::clients::{conn_args, run_python};
use rttscope_integration_tests::mariadb::{ADMIN, DB, NATIVE, TestDb};
use rttscope_integration_tests::process::{ProxyProcess, rttscope_binary};

/// Every case's marker; the server returns each in a value (the script prints it). And how
/// many times the case's statement runs: each names its case (`1 AS case_numeric`).
const MARKERS: [(&str, &str, u64); 15] = [
    ("numeric", "LEAKNUMERIC", 1),
    ("unquoted", "LEAKUNQUOTED", 25),
    ("hex", "LEAKHEX", 1),
    ("prepare", "LEAKPREPARE", 1),
    ("immediate", "LEAKIMMEDIATE", 1),
    ("variable", "LEAKVARIABLE", 1),
    ("concat", "LEAKCONCAT", 1),
    ("global", "LEAKGLOBAL", 1),
    ("multi", "LEAKMULTI", 1),
    ("pipelined_on", "LEAKPIPEON", 1),
    ("pipelined_off", "LEAKPIPEOFF", 1),
    ("executable", "LEAKEXECUTABLE", 1),
    ("versioned", "LEAKVERSIONED", 1),
    ("nested", "LEAKNESTED", 1),
    ("dump", "LEAKDUMP", 1),
];

/// Both tests set the server's global `sql_mode` for a new session, then put it back: one at a
/// time, or one's new session takes the other's mode.
static GLOBAL_SQL_MODE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What every generated secret starts with (`sql_mode_secrets.py`): a word, as a secret read
/// as a name would show, and the digits of hex, bit and decimal literals.
const SECRET_PREFIXES: [&str; 4] = ["qzvsecret", "f00dfacecafe", "1011001110001111", "7130291577"];

fn admin(proxy: &ProxyProcess, path: &str) -> String {
    client::get(&format!("http://{}", proxy.admin()), path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// mysqldump's preamble, as a dump file restored through the `mariadb` CLI sends it.
fn restore_a_dump(proxy: &ProxyProcess) -> String {
    let mut cli = TestDb::shared().mariadb_cli(proxy.listen(), NATIVE.user, NATIVE.password, Some(DB));
    let dump = "/*!40101 SET SQL_MODE='ANSI_QUOTES' */;\nSELECT 1 AS case_dump, 1 AS \"a\\\", 'x\"LEAKDUMP';\n";
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

/// rttscope in front of the test server, writing snapshots every second and a final report,
/// with `report.examples` off and a debug log.
struct Watched {
    proxy: ProxyProcess,
    final_report: PathBuf,
    snapshots: PathBuf,
    _dir: tempfile::TempDir,
}

impl Watched {
    fn start() -> Watched {
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
        let proxy = ProxyProcess::start_with(rttscope_binary().unwrap(), &yaml, |cmd| {
            cmd.env("RUST_LOG", "debug");
        })
        .unwrap();
        Watched { proxy, final_report, snapshots, _dir: dir }
    }

    /// A script's arguments: the proxy's address, the test account, the admin account.
    fn script_args(&self) -> Vec<String> {
        let mut args = conn_args(self.proxy.listen(), NATIVE);
        args.extend(["--admin-user", ADMIN.user, "--admin-password", ADMIN.password].map(String::from));
        args
    }

    fn report(&self) -> Report {
        serde_json::from_str(&admin(&self.proxy, "/report")).expect("the JSON report")
    }

    /// Every place rttscope writes, read once a snapshot has been written since the traffic;
    /// the final report and the log once rttscope has stopped on SIGTERM.
    fn every_place(mut self) -> Vec<(&'static str, String)> {
        std::thread::sleep(Duration::from_millis(1200));
        let proxy = &self.proxy;
        let mut places = vec![
            ("json report", admin(proxy, "/report")),
            ("text report", admin(proxy, "/report?format=text")),
            ("html report", admin(proxy, "/report?format=html")),
            ("rolling window", admin(proxy, "/report?window=5m")),
            ("/metrics", admin(proxy, "/metrics")),
            ("/connections", admin(proxy, "/connections")),
            ("SHOW RTTSCOPE STATEMENTS", sql_view(proxy, "STATEMENTS")),
            ("SHOW RTTSCOPE FINDINGS", sql_view(proxy, "FINDINGS")),
            ("snapshots", files_under(&self.snapshots)),
        ];
        assert!(place(&places, "SHOW RTTSCOPE STATEMENTS").contains("select"), "the SQL view lists statements");
        assert!(!place(&places, "snapshots").is_empty(), "a snapshot was written");
        self.proxy.signal(libc::SIGTERM).unwrap();
        self.proxy.wait_timeout(Duration::from_secs(15)).unwrap().expect("rttscope exits on SIGTERM");
        places.push(("final report", std::fs::read_to_string(&self.final_report).expect("the final report")));
        places.push(("debug log", self.proxy.log()));
        places
    }
}

fn place<'p>(places: &'p [(&str, String)], name: &str) -> &'p str {
    places.iter().find(|(p, _)| *p == name).map_or("", |(_, body)| body)
}

/// Each of `needles` (case-insensitive) found in a place, with the text around it.
fn found_in(places: &[(&str, String)], needles: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for (place, body) in places {
        let lower = body.to_ascii_lowercase();
        for needle in needles {
            for (at, _) in lower.match_indices(&needle.to_ascii_lowercase()) {
                let around = lower.get(at.saturating_sub(60)..(at + 80).min(lower.len())).unwrap_or(needle);
                found.push(format!("{needle} in the {place}: …{around}…"));
            }
        }
    }
    found
}

#[test]
fn no_literal_leaks_however_the_sql_mode_changes() {
    let _global = GLOBAL_SQL_MODE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let watched = Watched::start();
    let mut seen = run_python("sql_mode_leaks.py", &watched.script_args()).unwrap();
    seen.push_str(&restore_a_dump(&watched.proxy));
    // The server read every marker as a literal: it sent each back.
    for (case, marker, _) in MARKERS {
        assert!(seen.contains(marker), "{case}: the server did not return {marker}:\n{seen}");
    }

    // Recorded: the loop of 25 is a finding, and each case's statement as often as it ran.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !admin(&watched.proxy, "/report").contains("n_plus_one") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let json = admin(&watched.proxy, "/report");
    assert!(json.contains("n_plus_one"), "the loop is a finding: {json}");
    let report = watched.report();
    for (case, _, runs) in MARKERS {
        let name = format!("case_{case},");
        let recorded: u64 = report.queries.iter().filter(|q| q.fingerprint.contains(&name)).map(|q| q.count).sum();
        assert_eq!(recorded, runs, "{case}: its statement's executions recorded");
    }
    // Read as the server reads it (its greeting says which versioned comments it runs), the
    // skipped comment's statement keeps its shape, not one `?` from the comment on.
    let versioned = report.queries.iter().find(|q| q.fingerprint.contains("case_versioned,"));
    assert_eq!(versioned.map(|q| q.fingerprint.as_str()), Some("select ? as case_versioned, ?, ?"));

    let places = watched.every_place();
    let markers = MARKERS.map(|(_, marker, _)| marker);
    let leaks = found_in(&places, &markers);
    assert!(leaks.is_empty(), "literals leaked: {leaks:#?}");
}

#[test]
fn no_generated_secret_leaks_under_any_sql_mode() {
    let _global = GLOBAL_SQL_MODE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // A new seed each run, printed on failure; RTTSCOPE_TEST_SEED runs one again.
    let seed = std::env::var("RTTSCOPE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() % 1_000_000)
    });
    let again = format!("seed {seed} (RTTSCOPE_TEST_SEED={seed} runs it again)");
    let watched = Watched::start();
    let mut args = watched.script_args();
    args.extend(["--seed".to_string(), seed.to_string()]);
    let out = run_python("sql_mode_secrets.py", &args).unwrap_or_else(|e| panic!("{again}: {e}"));
    let sent: u64 = out.trim().strip_prefix("sent ").and_then(|n| n.parse().ok()).expect("the script counts");

    // Recorded: every query sent is counted (more: the connections' own commands).
    let deadline = Instant::now() + Duration::from_secs(10);
    let recorded = loop {
        let recorded: u64 = watched.report().queries.iter().map(|q| q.count).sum();
        if recorded >= sent || Instant::now() > deadline {
            break recorded;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(recorded >= sent, "{again}: {sent} queries sent, {recorded} recorded");

    let leaks = found_in(&watched.every_place(), &SECRET_PREFIXES);
    let first = &leaks[..leaks.len().min(20)];
    assert!(leaks.is_empty(), "{again}: {} secrets leaked, the first: {first:#?}", leaks.len());
}
