//! PHP's mysqlnd (PHP 8.2's default driver) through rttscope: a server-side cursor that fetches
//! a row per round trip gets the `undersized_fetch` finding in mysqlnd's words, and every call
//! those words advise runs under mysqlnd and reads the whole result in a round trip or two. The
//! advice they replaced, `MYSQLI_STMT_ATTR_PREFETCH_ROWS`, throws "Not implemented" there.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rttscope::findings::Kind;
use rttscope::report::{FindingReport, Report};
use rttscope_integration_tests::browser::which;
use rttscope_integration_tests::clients::{self, is_mariadb};
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::TestProxy;
use rttscope_integration_tests::skip;

/// Rows the result has: enough fetches for a finding, few enough for a debug build.
const ROWS: &str = "2000";

/// `php fetch.php MODE ...` against `addr`: what it printed (`rows=N` or `error=...`).
fn php(mode: &str, addr: std::net::SocketAddr) -> Option<String> {
    let Some(php) = which("php") else {
        skip("php missing (scripts/install-deps.sh installs php-cli and php-mysql)");
        return None;
    };
    let script = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/php/fetch.php"));
    let mut cmd = Command::new(php);
    cmd.arg(script).arg(mode).arg(addr.ip().to_string()).arg(addr.port().to_string());
    cmd.args([NATIVE.user, NATIVE.password, DB, ROWS]);
    let out = clients::run(cmd, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "php {mode}: {}\n{}", out.stdout, out.stderr);
    if out.stdout.contains("Class \"mysqli\" not found") {
        skip("php has no mysqli (scripts/install-deps.sh installs php-mysql)");
        return None;
    }
    Some(out.stdout.trim().to_owned())
}

/// The report once every connection has closed and the findings have caught up with them.
fn settled(proxy: &TestProxy, done: impl Fn(&Report) -> bool) -> Report {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = proxy.state().report();
        let closed = !r.connections.is_empty() && r.connections.iter().all(|c| !c.open);
        if closed && done(&r) {
            return r;
        }
        assert!(Instant::now() < deadline, "the report did not settle: {:#?}", r.findings);
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn undersized(r: &Report) -> Vec<&FindingReport> {
    r.findings.iter().filter(|f| f.kind == Kind::UndersizedFetch).collect()
}

#[test]
fn mysqlnd_gets_fetch_advice_that_mysqlnd_runs() {
    if !is_mariadb() {
        return; // the result is MariaDB's sequence engine
    }
    // A READ_ONLY cursor: mysqlnd fetches one row per round trip.
    let proxy = TestProxy::start();
    let Some(out) = php("cursor", proxy.addr()) else { return };
    assert_eq!(out, format!("rows={ROWS}"));
    let r = settled(&proxy, |r| undersized(r).first().is_some_and(|f| f.round_trips >= 1000));
    let f = undersized(&r)[0];
    assert_eq!(f.driver.as_deref(), Some("PHP (mysqlnd)"), "{f:#?}");
    let fix = &f.suggestion;
    assert!(fix.starts_with("PHP (mysqlnd): "), "the driver's words first: {fix}");
    // What the advice names, each run below.
    for call in ["`$stmt->get_result()`", "`$stmt->store_result()`", "`$mysqli->query($sql, MYSQLI_USE_RESULT)`"] {
        assert!(fix.contains(call), "{call} in {fix}");
    }
    assert!(!fix.contains("attr_set(MYSQLI_STMT_ATTR_PREFETCH_ROWS"), "{fix}");

    // The advice, each way: the whole result, no cursor, no finding, a round trip or two a read.
    for mode in ["get", "store", "stream"] {
        let proxy = TestProxy::start();
        assert_eq!(php(mode, proxy.addr()).as_deref(), Some(format!("rows={ROWS}").as_str()), "{mode}");
        let r = settled(&proxy, |r| r.totals.commands > 0);
        assert!(undersized(&r).is_empty(), "{mode}: {:#?}", r.findings);
        assert!(r.totals.round_trips < 20, "{mode}: {} round trips", r.totals.round_trips);
    }

    // The advice it replaces throws under mysqlnd.
    let direct = TestDb::shared().upstream_addr();
    let refused = php("prefetch", direct).unwrap_or_default();
    assert_eq!(refused, "error=mysqli_sql_exception: Not implemented");
}
