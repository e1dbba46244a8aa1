//! The demos demonstrate, and README.md's sample report is what `scripts/demo.sh` produces:
//! the demo runs against the test server and writes a sample into a copy of the README, which
//! must match README.md's own once what varies run to run (times, sizes, rates, shares, the
//! date) is masked. docker/demo.sh runs the same workload through rttscope and must find what
//! the sample shows. To refresh the sample after a deliberate change: `scripts/demo.sh
//! --update-readme`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rttscope_integration_tests::mariadb::{ADMIN, TestDb};
use rttscope_integration_tests::process::rttscope_binary;
use rttscope_integration_tests::proxy::TestProxy;

/// Both demos make and drop the schema rttscope_demo on the shared test server: one at a time.
static SCHEMA: Mutex<()> = Mutex::new(());

const BEGIN: &str = "<!-- demo:begin -->";
const END: &str = "<!-- demo:end -->";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The lines between the demo markers of a README.
fn sample(readme: &str) -> Vec<&str> {
    let begin = readme.lines().position(|l| l == BEGIN).expect("README has <!-- demo:begin -->");
    let end = readme.lines().position(|l| l == END).expect("README has <!-- demo:end -->");
    assert!(begin < end, "the demo markers are in order");
    readme.lines().skip(begin + 1).take(end - begin - 1).collect()
}

/// Units whose numbers depend on timing or on the server build, each masked to one token
/// (a duration may print as `990.00 ms` one run and `1.01 s` the next).
const UNITS: &[(&str, &str)] = &[
    ("µs", "<time>"),
    ("ms", "<time>"),
    ("s", "<time>"),
    ("B", "<size>"),
    ("KiB", "<size>"),
    ("MiB", "<size>"),
    ("GiB", "<size>"),
    ("Mbit/s", "<rate>"),
    ("%", "<share>"),
];

/// `line` with its measured quantities and its timestamp masked and its spacing collapsed (the
/// profile's columns are as wide as their numbers). Counts with no unit — statements, round
/// trips, rows, pages — are the workload's own and stay.
fn mask(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        if c.is_ascii_digit() {
            let number = rest.find(|c: char| !(c.is_ascii_digit() || c == ',' || c == '.')).unwrap_or(rest.len());
            let (digits, after) = rest.split_at(number);
            let after_space = after.strip_prefix(' ').unwrap_or(after);
            let unit = UNITS.iter().find(|(unit, _)| {
                after_space.strip_prefix(unit).is_some_and(|tail| !tail.starts_with(|c: char| c.is_alphanumeric()))
            });
            if let Some((unit, token)) = unit {
                out.push_str(token);
                rest = &after_space[unit.len()..];
            } else if let Some(stamp) = timestamp(rest) {
                out.push_str("<date>");
                rest = &rest[stamp..];
            } else {
                out.push_str(digits.trim_end_matches([',', '.']));
                rest = &rest[digits.trim_end_matches([',', '.']).len()..];
            }
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    // Whether the application's own time between a loop's statements shows (over a tenth of
    // the loop) is a measurement too: present in one run, absent in the next.
    let out = out.replace(", within the loop's <time>", "").replace(", within the loops' <time>", "");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The length of an RFC 3339 UTC timestamp (`2026-11-26T05:28:02Z`) at the start of `s`.
fn timestamp(s: &str) -> Option<usize> {
    let shape = "dddd-dd-ddTdd:dd:ddZ";
    let matches = s.len() >= shape.len()
        && s.bytes().zip(shape.bytes()).all(|(c, p)| if p == b'd' { c.is_ascii_digit() } else { c == p });
    matches.then_some(shape.len())
}

/// The demo's environment: the test server, the admin account, this workspace's binary, and
/// a temporary directory of its own (to check it leaves nothing behind).
fn demo_command(script: &str, tmp: &Path) -> Command {
    let db = TestDb::shared();
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join(script))
        .env("DEMO_DB", format!("{}:{}", db.upstream_addr().ip(), db.port()))
        .env("DEMO_USER", ADMIN.user)
        .env("DEMO_PASSWORD", ADMIN.password)
        .env("TMPDIR", tmp);
    cmd
}

/// Runs a demo script to its end, or kills it (its process group: the script, its clients, its
/// rttscope) after `limit`, which fails the test: a demo that hangs demonstrates nothing.
fn run(mut cmd: Command, limit: Duration) -> Output {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().expect("bash");
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let out = child.wait_with_output();
        let _ = done.send(());
        out
    });
    let timed_out = finished.recv_timeout(limit).is_err();
    if timed_out {
        // The process group this test started (the child leads it), by its id.
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status();
    }
    let out = waiter.join().expect("the waiting thread").expect("the demo's output");
    assert!(!timed_out, "the demo did not finish in {limit:?}:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn demo_schema_exists() -> bool {
    let db = TestDb::shared();
    let out = db
        .mariadb_cli(db.upstream_addr(), ADMIN.user, ADMIN.password, None)
        .args(["-N", "-e", "SHOW DATABASES LIKE 'rttscope_demo'"])
        .output()
        .expect("mariadb CLI");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    !out.stdout.is_empty()
}

/// The (kind, statement id) of each finding of a sample, in its order.
fn sample_findings(sample: &[&str]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut lines = sample.iter();
    while let Some(line) = lines.next() {
        // `#  1. [warning] n_plus_one — 81 round trips, 1.27 s`, then `#     statement <id>`.
        let Some((_, rest)) = line.split_once("] ") else { continue };
        let kind = rest.split_whitespace().next().unwrap_or_default().to_owned();
        let id = lines.next().and_then(|l| l.trim_start_matches(['#', ' ']).strip_prefix("statement "));
        found.push((kind, id.unwrap_or_default().to_owned()));
    }
    found
}

#[test]
fn the_readme_sample_is_what_the_demo_reports() {
    let _schema = SCHEMA.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().expect("a temp dir");
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let copy = tmp.path().join("README.md");
    std::fs::write(&copy, &readme).unwrap();
    let report = tmp.path().join("report.txt");

    let started = Instant::now();
    let mut demo = demo_command("scripts/demo.sh", &work);
    demo.env("DEMO_RTTSCOPE", rttscope_binary().expect("the rttscope binary"));
    demo.arg("-o").arg(&report).arg("--update-readme").arg("--readme").arg(&copy);
    let out = run(demo, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "scripts/demo.sh failed:\n{stderr}");
    eprintln!("scripts/demo.sh took {:.1?}:\n{stderr}", started.elapsed());

    // The report went to stdout and to the file, and holds what the demo is for.
    let written = std::fs::read_to_string(&report).expect("the report file");
    assert_eq!(String::from_utf8_lossy(&out.stdout), written, "stdout is the report");
    for kind in ["n_plus_one", "repeated_write", "pagination_loop"] {
        assert!(written.contains(&format!("] {kind} —")), "the demo's report has a {kind} finding:\n{written}");
    }
    // It cleaned up: rttscope's files (its work dir) and the schema.
    let left: Vec<_> = std::fs::read_dir(&work).unwrap().collect();
    assert!(left.is_empty(), "scripts/demo.sh left {left:?}");
    assert!(!demo_schema_exists(), "scripts/demo.sh dropped rttscope_demo");

    // README.md's sample is the fresh one, up to what varies run to run.
    let fresh = std::fs::read_to_string(&copy).unwrap();
    let (ours, theirs) = (sample(&readme), sample(&fresh));
    assert!(theirs.len() > 10, "the demo wrote a sample: {theirs:?}");
    let (ours_masked, theirs_masked): (Vec<String>, Vec<String>) =
        (ours.iter().map(|l| mask(l)).collect(), theirs.iter().map(|l| mask(l)).collect());
    for (i, (a, b)) in ours_masked.iter().zip(&theirs_masked).enumerate() {
        assert_eq!(
            a,
            b,
            "README.md's sample, line {} of the block, is not what scripts/demo.sh reports now \
             (masked as compared; `scripts/demo.sh --update-readme` refreshes it):\n  README: {}\n  demo:   {}",
            i + 1,
            ours[i],
            theirs[i]
        );
    }
    assert_eq!(ours_masked.len(), theirs_masked.len(), "README.md's sample and the demo's have as many lines");
    // Everything outside the block stays as it was.
    let outside = |t: &str| t.lines().filter(|l| !l.is_empty()).count() - sample(t).len();
    assert_eq!(outside(&readme), outside(&fresh), "--update-readme touches only the block");
}

/// docker/demo.sh (no Docker engine runs here) with the compose services replaced by the test
/// server and an rttscope in front of it: the same workload, the same findings as the sample.
#[test]
fn the_docker_demo_finds_what_the_sample_shows() {
    let _schema = SCHEMA.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().expect("a temp dir");
    let proxy = TestProxy::start();
    let mut demo = demo_command("docker/demo.sh", tmp.path());
    demo.env("DEMO_PROXY", proxy.addr().to_string())
        .env("DEMO_ROUNDS", "1")
        .env("DEMO_WORKLOAD", repo().join("scripts/demo-workload.sh"));
    let out = run(demo, Duration::from_secs(60));
    assert!(out.status.success(), "docker/demo.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));

    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let mut expected = sample_findings(&sample(&readme));
    assert_eq!(expected.len(), 3, "the sample shows three findings: {expected:?}");
    expected.sort();
    // Findings are made off the forwarding path: wait for them.
    let deadline = Instant::now() + Duration::from_secs(10);
    let found = loop {
        let admin = format!("http://{}", proxy.admin());
        let json = rttscope::cli::admin_client::get(&admin, "/report").expect("GET /report");
        let report: serde_json::Value = serde_json::from_str(&json).expect("the report is JSON");
        let mut found: Vec<(String, String)> = report["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| (f["kind"].as_str().unwrap_or_default().to_owned(), f["fingerprint_id"].to_string()))
            .map(|(kind, id)| (kind, id.trim_matches('"').to_owned()))
            .collect();
        found.sort();
        if found == expected || Instant::now() > deadline {
            break found;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(found, expected, "docker/demo.sh's findings (kind, statement) are the sample's");
    // The test server is shared: leave no schema behind (compose's database is thrown away).
    let db = TestDb::shared();
    let drop = db
        .mariadb_cli(db.upstream_addr(), ADMIN.user, ADMIN.password, None)
        .args(["-e", "DROP DATABASE IF EXISTS rttscope_demo"])
        .status()
        .expect("mariadb CLI");
    assert!(drop.success());
}

#[test]
fn masking_keeps_counts_and_statements_and_hides_measurements() {
    let a = "#  2. [warning] n_plus_one — 81 round trips, 1.27 s, 2,250 rows at 34 Mbit/s, 61.0% (990.00 ms)";
    let b = "#  2. [warning] n_plus_one — 81 round trips, 597.92 ms, 2,250 rows at 34 Mbit/s, 7.5% (1.01 s)";
    assert_eq!(mask(a), mask(b));
    assert_eq!(mask(a), "# 2. [warning] n_plus_one — 81 round trips, <time>, 2,250 rows at <rate>, <share> (<time>)");
    assert_ne!(mask("ran 80 times"), mask("ran 81 times"));
    assert_eq!(mask("81 round trips in 1.26 s, within the loop's 1.42 s"), mask("81 round trips in 1.25 s"));
    assert_eq!(mask("generated 2026-11-26T05:28:02Z, over 2.90 s"), "generated <date>, over <time>");
    assert_eq!(mask("#    1 a82b3ac03d61f398     1.33 s   8.5 KiB"), mask("#  1 a82b3ac03d61f398  628.35 ms  330 B"));
}
