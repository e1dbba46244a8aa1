//! sqlcommenter tags as applications send them, through the proxy: tags leading or trailing a
//! statement leave it one statement (prepared too), name the place an N+1 loop ran in, and an
//! optimizer hint stays part of the statement.

use std::process::Command;
use std::time::{Duration, Instant};

use rttscope::cli::admin_client as client;
use rttscope::report::Report;
use rttscope_integration_tests::clients::python;
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::process::ProxyProcess;

/// A Rails-like request: the listing, then one lookup per row, each tagged as sqlcommenter
/// libraries tag (URL-encoded values, keys sorted), the comment first on even rows and last on
/// odd ones; then the same lookup prepared by Connector/Python with a different comment each
/// time.
const SCRIPT: &str = r#"
import sys, pymysql, mariadb
host, port, user, password, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
tags = ("/*action='index',controller='orders',framework='rails%3A7.1',route='%2Forders',"
        "traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'*/")
c = pymysql.connect(host=host, port=port, user=user, password=password, database=db, autocommit=True)
cur = c.cursor()
cur.execute("CREATE OR REPLACE TABLE sc_orders (id INT PRIMARY KEY, customer INT)")
cur.execute("INSERT INTO sc_orders SELECT seq, seq % 7 FROM seq_1_to_40")
cur.execute(tags + " SELECT /*+ MAX_EXECUTION_TIME(1000) */ id FROM sc_orders ORDER BY id")
ids = [r[0] for r in cur.fetchall()]
for i in ids:
    sql = "SELECT customer FROM sc_orders WHERE id = %d" % i
    cur.execute(tags + " " + sql if i % 2 == 0 else sql + " " + tags)
    assert cur.fetchone() is not None
c.close()
m = mariadb.connect(host=host, port=port, user=user, password=password, database=db)
for i in range(1, 6):
    p = m.cursor(prepared=True)
    p.execute("/*controller='invoices',action='show',request='%d'*/ SELECT id FROM sc_orders WHERE customer = ?" % i, (i,))
    p.fetchall()
    p.close()
m.close()
print(len(ids))
"#;

#[test]
fn tagged_statements_are_one_statement_and_name_their_loop() {
    let db = TestDb::shared();
    let proxy = ProxyProcess::start(&format!("upstream: {}\n", db.upstream_addr())).unwrap();
    let listen = proxy.listen();
    let out = Command::new(python().unwrap())
        .args(["-c", SCRIPT, &listen.ip().to_string(), &listen.port().to_string()])
        .args([NATIVE.user, NATIVE.password, DB])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "40");

    let base = format!("http://{}", proxy.admin());
    let deadline = Instant::now() + Duration::from_secs(10);
    let report: Report = loop {
        let report: Report = serde_json::from_str(&client::get(&base, "/report").unwrap()).unwrap();
        let done = report.queries.iter().any(|q| q.fingerprint.contains("where customer = ?") && q.count >= 5);
        if done || Instant::now() > deadline {
            break report;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let texts: Vec<&str> = report.queries.iter().map(|q| q.fingerprint.as_str()).collect();
    let lookups: Vec<_> = report.queries.iter().filter(|q| q.fingerprint.contains("from sc_orders where id")).collect();
    assert_eq!(lookups.len(), 1, "leading and trailing tags make one statement: {texts:#?}");
    assert_eq!(
        (lookups[0].fingerprint.as_str(), lookups[0].count),
        ("select customer from sc_orders where id = ?", 40)
    );
    let prepared: Vec<_> = report.queries.iter().filter(|q| q.fingerprint.contains("where customer = ?")).collect();
    assert_eq!(prepared.len(), 1, "five prepares differing by their comments are one statement: {texts:#?}");
    assert!(prepared[0].count >= 5, "{:?}", prepared[0]);
    // The hint changes the plan: it is part of the statement, its literal a `?`.
    assert!(
        texts.contains(&"select /*+ max_execution_time(?) */ id from sc_orders order by id"),
        "the hint is kept: {texts:#?}"
    );

    let loops: Vec<_> = report.findings.iter().filter(|f| f.kind.to_string() == "n_plus_one").collect();
    assert_eq!(loops.len(), 1, "{:#?}", report.findings);
    let summary = &loops[0].evidence.summary;
    assert!(summary.starts_with("N+1 loop in controller `orders#index`: `select customer"), "{summary}");
    assert!(summary.contains("for the rows of `select /*+ max_execution_time(?) */ id"), "the parent: {summary}");
    let origin = loops[0].evidence.origin.clone().unwrap_or_default();
    let pairs: Vec<(&str, &str)> = origin.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        pairs,
        [("action", "index"), ("controller", "orders"), ("framework", "rails:7.1"), ("route", "/orders")]
    );
    let text = client::get(&base, "/report?format=text").unwrap();
    assert!(text.contains("N+1 loop in controller `orders#index`"), "{text}");
}
