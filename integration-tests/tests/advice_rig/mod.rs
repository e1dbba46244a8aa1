//! The clients `driver_advice.rs` runs and the check each advice goes through: the pattern,
//! its finding in the driver's words, then the advised code with the same rows, no finding of
//! that kind and at most half the round trips.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use rttscope::findings::Kind;
use rttscope::report::{FindingReport, Report};
use rttscope_config::HumanDuration;
use rttscope_integration_tests::browser::which;
use rttscope_integration_tests::clients;
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::proxy::{TestProxy, test_config};
use rttscope_integration_tests::skip;

const CONNECTOR_J: &str = "/usr/share/java/mariadb-java-client.jar";

/// What the N+1 modes print: 50 orders, each with a customer of its own.
pub const NAMES: &str = "names=50 distinct=50";
/// What the insert modes print: the 40 rows `(i, "w{i}")` read back.
pub const INSERTED: &str = "inserted=40 sum=780 max=w9";
/// What the churn modes print: 40 queries, `SELECT i` for i in 1..=40.
pub const QUERIED: &str = "queries=40 sum=820";

/// A client program and the driver it runs.
#[derive(Clone, Copy, Debug)]
pub enum Client {
    /// `python/driver_fixes.py --driver NAME`.
    Python(&'static str),
    /// `python/capi_advice.py`: libmariadb's C API itself, through ctypes.
    CApi,
    /// `node/driver_advice.js` (mysql2, and Sequelize over it).
    Node,
    /// `java/DriverAdvice.java` on MariaDB Connector/J.
    Java,
    /// [`mysql_async_mode`], naming itself in its connection attributes.
    MysqlAsync,
}

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Runs `client`'s `mode` against `addr` and returns what it printed, or `None` (skipped) when
/// the client is not installed here.
pub fn run(client: Client, mode: &str, addr: SocketAddr) -> Option<String> {
    let host = addr.ip().to_string();
    let port = addr.port().to_string();
    let out = match client {
        Client::Python(driver) => {
            let mut args = vec![mode.to_owned(), "--driver".to_owned(), driver.to_owned()];
            args.extend(clients::conn_args(addr, NATIVE));
            let out = clients::run_python("driver_fixes.py", &args).unwrap_or_else(|e| panic!("{e:#}"));
            return Some(out.trim().to_owned());
        }
        Client::CApi => {
            let mut args = vec![mode.to_owned()];
            args.extend(clients::conn_args(addr, NATIVE));
            let out = clients::run_python("capi_advice.py", &args).unwrap_or_else(|e| panic!("{e:#}"));
            return Some(out.trim().to_owned());
        }
        Client::Node => {
            let dir = repo().join("integration-tests/node");
            let Some(node) = which("node") else {
                skip("no node on PATH (scripts/install-deps.sh installs nodejs)");
                return None;
            };
            if !dir.join("node_modules/mysql2").is_dir() || !dir.join("node_modules/sequelize").is_dir() {
                skip("integration-tests/node/node_modules missing (scripts/install-deps.sh runs npm ci)");
                return None;
            }
            let mut cmd = Command::new(node);
            cmd.current_dir(&dir).arg("driver_advice.js").arg(mode);
            cmd.args(["--host", &host, "--port", &port, "--user", NATIVE.user, "--password", NATIVE.password]);
            cmd.args(["--db", DB]);
            clients::run(cmd, Duration::from_secs(120))
        }
        Client::MysqlAsync => {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            return Some(runtime.block_on(mysql_async_mode(mode, addr)));
        }
        Client::Java => {
            let (Some(java), true) = (which("java"), Path::new(CONNECTOR_J).is_file()) else {
                skip(format!("java or {CONNECTOR_J} missing (scripts/install-deps.sh installs both)"));
                return None;
            };
            let mut cmd = Command::new(java);
            cmd.args(["-cp", CONNECTOR_J]).arg(repo().join("integration-tests/java/DriverAdvice.java"));
            cmd.args([mode, &host, &port, NATIVE.user, NATIVE.password, DB]);
            clients::run(cmd, Duration::from_secs(180))
        }
    };
    let out = out.unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "{client:?} {mode}: {}\n{}", out.stdout, out.stderr);
    Some(out.stdout.trim().to_owned())
}

/// mysql_async's modes, as the other clients': the pattern, and the advice in its words.
async fn mysql_async_mode(mode: &str, addr: SocketAddr) -> String {
    let attrs = HashMap::from([("_client_name".to_owned(), "mysql_async".to_owned())]);
    let opts = TestDb::shared().opts_via(addr, NATIVE.user, NATIVE.password).connect_attributes(attrs);
    if let Some(advised) = mode.strip_prefix("churn") {
        let mut total = 0;
        // The advice: one pool per process, a `get_conn()` per request.
        let pool = (advised == "-advised").then(|| mysql_async::Pool::new(opts.clone()));
        for i in 1..=40u64 {
            let mut conn = match &pool {
                Some(pool) => pool.get_conn().await.expect("pooled connection"),
                None => mysql_async::Conn::new(opts.clone()).await.expect("connect"),
            };
            let v: Option<u64> = conn.query_first(format!("SELECT {i} AS v")).await.expect("select");
            total += v.expect("a row");
            if pool.is_none() {
                conn.disconnect().await.expect("disconnect");
            }
        }
        if let Some(pool) = pool {
            pool.disconnect().await.expect("pool disconnect");
        }
        return format!("queries=40 sum={total}");
    }
    let mut conn = mysql_async::Conn::new(opts).await.expect("connect");
    let out = match mode {
        "loop" | "loop-advised" => {
            let keys: Vec<u32> = conn.query("SELECT customer FROM df_orders ORDER BY id").await.expect("orders");
            let names: Vec<String> = if mode == "loop" {
                let mut names = Vec::new();
                for key in &keys {
                    names.extend(
                        conn.exec_first("SELECT name FROM df_customers WHERE id = ?", (key,)).await.expect("one"),
                    );
                }
                names
            } else {
                // The advice, as worded.
                let sql = format!("SELECT name FROM df_customers WHERE id IN ({})", vec!["?"; keys.len()].join(", "));
                conn.exec(sql, keys.clone()).await.expect("in list")
            };
            let distinct: std::collections::HashSet<&String> = names.iter().collect();
            format!("names={} distinct={}", names.len(), distinct.len())
        }
        "inserts" | "inserts-advised" | "inserts-bulk" => {
            conn.query_drop("DELETE FROM df_writes").await.expect("delete");
            let rows: Vec<(u32, String)> = (0..40).map(|i| (i, format!("w{i}"))).collect();
            // In one transaction, as an application writes a batch.
            conn.query_drop("BEGIN").await.expect("begin");
            let sql = "INSERT INTO df_writes (id, name) VALUES (?, ?)";
            if mode == "inserts" {
                for row in rows {
                    conn.exec_drop(sql, row).await.expect("insert");
                }
            } else if mode == "inserts-bulk" {
                // The advice on MariaDB: one COM_STMT_BULK_EXECUTE for all the rows.
                conn.exec_batch(sql, rows).await.expect("exec_batch");
            } else {
                // The advice: one multi-row INSERT per batch of rows.
                let marks = vec!["(?, ?)"; rows.len()].join(", ");
                let params: Vec<mysql_async::Value> =
                    rows.into_iter().flat_map(|(id, name)| [id.into(), name.into()]).collect();
                conn.exec_drop(format!("INSERT INTO df_writes (id, name) VALUES {marks}"), params)
                    .await
                    .expect("insert");
            }
            conn.query_drop("COMMIT").await.expect("commit");
            let (n, sum, max): (u64, u64, String) = conn
                .query_first("SELECT COUNT(*), SUM(id), MAX(name) FROM df_writes")
                .await
                .expect("count")
                .expect("row");
            format!("inserted={n} sum={sum} max={max}")
        }
        _ => panic!("unknown mode {mode}"),
    };
    conn.disconnect().await.expect("disconnect");
    out
}

/// The tables every client uses, made once per test binary.
pub fn setup() {
    static SETUP: Once = Once::new();
    SETUP.call_once(|| {
        let direct = TestDb::shared().upstream_addr();
        assert_eq!(run(Client::Python("pymysql"), "setup", direct).as_deref(), Some("setup done"));
    });
}

/// rttscope over an emulated link of a few ms when `link`: a login then costs enough for
/// connection churn to be worth a finding. Without, the plain test proxy.
pub fn start_proxy(link: bool) -> TestProxy {
    let mut config = test_config();
    if link {
        config.inject.rtt = HumanDuration::from_millis(4);
    }
    TestProxy::with_config(config)
}

/// The report once the findings have seen all the client did: its connections closed, then a
/// marker query from the `mariadb` CLI (another application, so in no finding of the client's)
/// went through; the collector applies a batch to the aggregates before the findings, so once
/// the aggregates show the marker, the findings have seen what came before it.
pub fn settled(proxy: &TestProxy, marker: &str) -> Report {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = proxy.state().report();
        if !r.connections.is_empty() && r.connections.iter().all(|c| !c.open) {
            break;
        }
        assert!(Instant::now() < deadline, "the client's connections did not close: {:#?}", r.connections);
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut cli = TestDb::shared().mariadb_cli(proxy.addr(), NATIVE.user, NATIVE.password, Some(DB));
    cli.args(["-N", "-e", &format!("SELECT 1 AS {marker}")]);
    let out = clients::run(cli, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    proxy.wait_for(marker, |a| a.queries().iter().any(|q| q.text.contains(marker)).then_some(()));
    proxy.state().report()
}

pub fn of_kind(r: &Report, kind: Kind) -> Vec<&FindingReport> {
    r.findings.iter().filter(|f| f.kind == kind).collect()
}

/// One pattern, the advice it gets and the code that follows the advice.
pub struct Advice {
    pub client: Client,
    pub kind: Kind,
    /// The mode that runs the pattern.
    pub pattern: &'static str,
    /// The modes that follow the advice, one per way it offers.
    pub advised: &'static [&'static str],
    /// `FindingReport::driver`.
    pub driver: &'static str,
    /// Words of the fix, each naming a call or setting an advised mode uses.
    pub words: &'static [&'static str],
    /// What each mode prints: the same rows, advised or not.
    pub prints: &'static str,
    /// Over an emulated link (connection churn).
    pub link: bool,
}

impl Advice {
    /// The pattern gets the finding in the driver's words; each advised mode gets the same rows,
    /// no such finding, and at most half the round trips.
    pub fn check(&self) {
        // Every client writes the same tables: one check at a time.
        static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        setup();
        let proxy = start_proxy(self.link);
        let Some(out) = run(self.client, self.pattern, proxy.addr()) else { return };
        assert_eq!(out, self.prints, "{:?} {}", self.client, self.pattern);
        let before = settled(&proxy, "advice_pattern_done");
        let found = of_kind(&before, self.kind);
        let queries: Vec<(&str, u64, u64)> =
            before.queries.iter().map(|q| (q.fingerprint.as_str(), q.count, q.round_trips)).collect();
        assert_eq!(found.len(), 1, "{:?} {}: {:#?} {queries:?}", self.client, self.pattern, before.findings);
        let f = found[0];
        assert_eq!(f.driver.as_deref(), Some(self.driver), "{f:#?}");
        for words in self.words {
            assert!(f.suggestion.contains(words), "{words} in {}", f.suggestion);
        }

        for mode in self.advised {
            let proxy = start_proxy(self.link);
            let out = run(self.client, mode, proxy.addr()).expect("the pattern's client ran");
            assert_eq!(out, self.prints, "{:?} {mode}", self.client);
            let after = settled(&proxy, "advice_followed");
            assert!(of_kind(&after, self.kind).is_empty(), "{:?} {mode}: {:#?}", self.client, after.findings);
            // The marker's own round trip is in both.
            let (was, is) = (before.totals.round_trips, after.totals.round_trips);
            assert!(is * 2 <= was, "{:?} {mode}: {is} round trips, the pattern {was}", self.client);
            eprintln!("{:?} {mode}: {:?} round trips {was} -> {is}", self.client, self.kind);
        }
    }
}
