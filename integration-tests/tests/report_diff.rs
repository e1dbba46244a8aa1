//! `rttscope report --save` and `--diff`: an N+1 loop run through rttscope by PyMySQL and saved,
//! then its fix (one JOIN) through another rttscope, compared as files and against a live admin
//! URL, in JSON, text, and HTML rendered by headless Chromium.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;
use std::time::{Duration, Instant};

use rttscope::findings::Kind;
use rttscope::report::Report;
use rttscope::report::diff::ReportDiff;
use rttscope_integration_tests::browser::{self, which};
use rttscope_integration_tests::clients::{self, Output};
use rttscope_integration_tests::mariadb::{NATIVE, TestDb};
use rttscope_integration_tests::process::rttscope_binary;
use rttscope_integration_tests::proxy::TestProxy;
use rttscope_integration_tests::skip;

const CHILD: &str = "select name from rd_customers where id = ?";
const JOIN: &str = "select o.id, c.name from rd_orders o join rd_customers c on c.id = o.customer order by o.id";

fn python(mode: &str, addr: std::net::SocketAddr) -> String {
    let mut args = vec![mode.to_owned()];
    args.extend(clients::conn_args(addr, NATIVE));
    clients::run_python("report_diff.py", &args).unwrap_or_else(|e| panic!("{e:#}"))
}

/// `rttscope report ARGS...`, which must succeed.
fn report_cli(args: &[&str]) -> Output {
    let mut cmd = Command::new(rttscope_binary().unwrap());
    cmd.arg("report").args(args);
    let out = clients::run(cmd, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "report {args:?}: {}\n{}", out.status, out.stderr);
    out
}

/// Waits until `proxy`'s report satisfies `done` (the findings trail the aggregates).
fn settled(proxy: &TestProxy, what: &str, done: impl Fn(&Report) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done(&proxy.state().report()) {
        assert!(Instant::now() < deadline, "{what}: {:#?}", proxy.state().report());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn admin_url(proxy: &TestProxy) -> String {
    format!("http://{}", proxy.admin())
}

fn closed(r: &Report) -> bool {
    !r.connections.is_empty() && r.connections.iter().all(|c| !c.open)
}

/// `before.json` with the N+1 loop, saved with `--save`; the proxy that ran the fix, still live.
fn loop_then_fix(dir: &Path) -> (PathBuf, PathBuf, TestProxy) {
    // Once: the tests run in parallel, and a table re-created under a running loop reads empty.
    static SETUP: Once = Once::new();
    SETUP.call_once(|| assert_eq!(python("setup", TestDb::shared().upstream_addr()).trim(), "setup orders=50"));

    let before = TestProxy::start();
    assert_eq!(python("loop", before.addr()).trim(), "names=50");
    settled(&before, "the whole loop of 50 as an n_plus_one finding", |r| {
        closed(r) && r.findings.iter().any(|f| f.kind == Kind::NPlusOne && f.evidence.executions == 50)
    });
    let before_file = dir.join("before.json");
    report_cli(&["--admin", &admin_url(&before), "--save", before_file.to_str().unwrap()]);

    let after = TestProxy::start();
    assert_eq!(python("join", after.addr()).trim(), "names=50");
    settled(&after, "the JOIN", |r| closed(r) && r.queries.iter().any(|q| q.fingerprint == JOIN));
    let after_file = dir.join("after.json");
    report_cli(&["--admin", &admin_url(&after), "--save", after_file.to_str().unwrap()]);
    (before_file, after_file, after)
}

#[test]
fn the_join_fixes_the_loop_and_the_diff_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (before, after, live) = loop_then_fix(dir.path());

    // What --save wrote is the report as the admin API served it.
    let saved: Report = serde_json::from_str(&std::fs::read_to_string(&before).unwrap()).unwrap();
    let child_id =
        saved.queries.iter().find(|q| q.fingerprint == CHILD).expect("the loop's child").fingerprint_id.clone();
    assert!(saved.findings.iter().any(|f| f.kind == Kind::NPlusOne && f.fingerprint_id == child_id));

    let out = report_cli(&["--diff", before.to_str().unwrap(), after.to_str().unwrap(), "--format", "json"]);
    let d: ReportDiff = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    let fixed: Vec<_> = d.findings.fixed.iter().map(|f| (f.kind, f.fingerprint_id.as_str())).collect();
    assert_eq!(fixed, [(Kind::NPlusOne, child_id.as_str())], "{:#?}", d.findings);
    assert!(d.findings.new.is_empty() && d.findings.unchanged.is_empty(), "{:#?}", d.findings);
    // 1 parent + 50 children before; 1 JOIN after; the connection's own commands on both sides.
    let rt = d.totals.round_trips;
    assert!(rt.before >= 51 && rt.after + 50 <= rt.before, "{rt:?}");
    assert_eq!(rt.change, rt.after as i64 - rt.before as i64);
    assert!(rt.ratio.is_some_and(|r| r < 0.5), "{rt:?}");
    let gone = d.only_before.iter().find(|s| s.fingerprint == CHILD).expect("the child statement gone");
    assert_eq!((gone.calls, gone.round_trips), (50, 50));
    assert!(d.only_after.iter().any(|s| s.fingerprint == JOIN && s.calls == 1), "{:#?}", d.only_after);
    assert_eq!(
        (d.before.source.as_str(), d.after.source.as_str()),
        (before.to_str().unwrap(), after.to_str().unwrap())
    );

    // A live admin URL is a side as good as a file.
    let url = admin_url(&live);
    let out = report_cli(&["--diff", before.to_str().unwrap(), &url]);
    assert!(out.stdout.contains(&format!("# after:  {url}")), "{}", out.stdout);
    assert!(out.stdout.contains(&format!("#   fixed n_plus_one {child_id}: was 51 round trips")), "{}", out.stdout);
    let totals = out.stdout.find("# Totals").unwrap();
    assert!(totals < out.stdout.find("# Findings fixed").unwrap());

    // So is a bare HOST:PORT, as `--admin` takes it.
    let bare = url.trim_start_matches("http://");
    let out = report_cli(&["--diff", before.to_str().unwrap(), bare]);
    assert!(out.stdout.contains(&format!("# after:  {url}")), "{}", out.stdout);
    assert!(out.stdout.contains(&format!("#   fixed n_plus_one {child_id}: was 51 round trips")), "{}", out.stdout);
}

#[test]
fn save_and_diff_refuse_what_they_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("saved.json");
    let mut cmd = Command::new(rttscope_binary().unwrap());
    cmd.args(["report", "--admin", "http://127.0.0.1:9", "--save"]).arg(&file);
    let out = clients::run(cmd, Duration::from_secs(60)).unwrap();
    assert!(!out.status.success() && out.stderr.contains("cannot reach the admin API"), "{}", out.stderr);
    assert!(!file.exists(), "nothing written when nothing was read");

    std::fs::write(&file, "{\"schema_version\": 1}").unwrap();
    let mut cmd = Command::new(rttscope_binary().unwrap());
    cmd.args(["report", "--diff"]).arg(&file).arg(&file);
    let out = clients::run(cmd, Duration::from_secs(60)).unwrap();
    assert!(!out.status.success() && out.stderr.contains("has report schema 1"), "{}", out.stderr);
}

#[test]
fn the_html_diff_renders_in_headless_chromium() {
    let Some(chromium) = which("chromium") else {
        skip("chromium not found (scripts/install-deps.sh installs Debian's chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (before, after, _live) = loop_then_fix(dir.path());
    let artifacts = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/test-artifacts")).to_owned();
    std::fs::create_dir_all(&artifacts).unwrap();
    let (page, png) = (artifacts.join("report-diff.html"), artifacts.join("report-diff.png"));
    let args = ["--diff", before.to_str().unwrap(), after.to_str().unwrap(), "--format", "html", "-o"];
    report_cli(&[&args[..], &[page.to_str().unwrap()]].concat());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.to_lowercase().contains("<script"), "no scripts");

    browser::screenshot(&chromium, &page, &png, (1280, 1600));
    // The DOM as Chromium built it: the parser's own <tbody> shows each table really parsed.
    let dom = browser::dom(&chromium, &page);
    std::fs::write(artifacts.join("report-diff.dom.html"), &dom).unwrap();
    let section = |id: &str| dom.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no {id} section"));
    assert!(section("totals") < section("findings"), "totals at the top");
    assert!(dom[section("totals")..].contains("<table><tbody><tr>"), "the totals table");
    let findings = &dom[section("findings")..section("time-change")];
    assert!(findings.contains("class=\"finding fixed\"><b>Fixed</b> · <b>n_plus_one</b>"), "{findings}");
    assert!(dom[section("only-before")..].contains(CHILD), "the loop's child, gone");
    assert!(dom[section("only-after")..].contains(JOIN), "the JOIN, new");
    assert!(dom[section("time-change")..].contains("<svg"), "the chart");
    println!("artifacts: {}", artifacts.display());
}
