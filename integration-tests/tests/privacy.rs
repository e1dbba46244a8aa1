//! No literal reaches a report, `/metrics`, `/connections` or the log, whatever `sql_mode` the
//! client set: statements are fingerprinted as the server reads them (`NO_BACKSLASH_ESCAPES` from
//! the status flags, `ANSI_QUOTES` from the client's `SET sql_mode`), and the text report shows
//! control characters in names as visible escapes.

use std::process::Command;
use std::time::{Duration, Instant};

use rttscope::cli::admin_client as client;
use rttscope_integration_tests::clients::python;
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::process::{ProxyProcess, rttscope_binary};

/// PyMySQL through the proxy: each mode's statement whose literal ends in a backslash or holds
/// the other quote, so that read under the wrong mode part of it comes out as a word.
const SCRIPT: &str = r#"
import sys, pymysql
host, port, user, password, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
c = pymysql.connect(host=host, port=port, user=user, password=password, database=db, autocommit=True)
cur = c.cursor()
cur.execute("SET sql_mode='NO_BACKSLASH_ESCAPES'")
cur.execute("SELECT 'a\\', 'LEAKC1'")
print(cur.fetchone())
cur.execute("SET sql_mode='ANSI_QUOTES'")
cur.execute("SELECT 1 AS \"a\\\", 'x\"LEAKC2'")
print(cur.fetchone())
cur.execute("SET sql_mode=DEFAULT")
cur.execute("SELECT 2 AS `esc\x1b[31m\r\nX`, 'LEAKC3\\' \x1b[0m'")
print(cur.fetchone())
c.close()
# A query that sets the mode and then uses it: the server reads the rest under the new mode.
c = pymysql.connect(host=host, port=port, user=user, password=password, database=db, autocommit=True,
                    client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
cur = c.cursor()
cur.execute("SET sql_mode='NO_BACKSLASH_ESCAPES'; SELECT 'a\\', 'LEAKC4'")
cur.nextset()
print(cur.fetchone())
c.close()
"#;

fn admin(proxy: &ProxyProcess, path: &str) -> String {
    client::get(&format!("http://{}", proxy.admin()), path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn literals_stay_out_of_reports_metrics_and_logs_in_every_sql_mode() {
    let db = TestDb::shared();
    let yaml = format!("upstream: {}\n", db.upstream_addr());
    // The most verbose log there is: not even debug lines may carry a literal.
    let proxy = ProxyProcess::start_with(rttscope_binary().unwrap(), &yaml, |cmd| {
        cmd.env("RUST_LOG", "debug");
    })
    .unwrap();
    let listen = proxy.listen();
    let out = Command::new(python().unwrap())
        .args(["-c", SCRIPT, &listen.ip().to_string(), &listen.port().to_string()])
        .args([NATIVE.user, NATIVE.password, DB])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // The server read each statement as intended, so the markers really are literals.
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["('a\\\\', 'LEAKC1')", "(1, 'x\"LEAKC2')", "(2, \"LEAKC3' \\x1b[0m\")", "('a\\\\', 'LEAKC4')"],
        "{stdout}"
    );

    let deadline = Instant::now() + Duration::from_secs(10);
    let json = loop {
        let json = admin(&proxy, "/report");
        if json.contains("set sql_mode=?; select") || Instant::now() > deadline {
            break json;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(json.contains(r#""select ?, ?""#), "the NO_BACKSLASH_ESCAPES statement: {json}");
    assert!(json.contains(r#""select ? as ?, ?""#), "the ANSI_QUOTES statement: {json}");
    assert!(json.contains(r#""set sql_mode=?; select ?, ?""#), "the multi-statement query: {json}");
    let text = admin(&proxy, "/report?format=text");
    let places = [
        ("json report", json),
        ("text report", text.clone()),
        ("html report", admin(&proxy, "/report?format=html")),
        ("/metrics", admin(&proxy, "/metrics")),
        ("/connections", admin(&proxy, "/connections")),
        ("log", proxy.log()),
    ];
    for (place, body) in &places {
        for marker in ["LEAKC1", "LEAKC2", "LEAKC3", "LEAKC4"] {
            assert!(
                !body.to_ascii_lowercase().contains(&marker.to_ascii_lowercase()),
                "{marker} in the {place}:\n{body}"
            );
        }
    }
    // A name keeps its bytes, but the text report shows the control characters in it.
    assert!(text.contains(r"select ? as `esc\u{1b}[31m\r\nX`, ?"), "{text}");
    assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text:?}");
}
