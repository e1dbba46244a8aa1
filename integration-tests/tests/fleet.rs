//! A fleet in a real Prometheus (Debian's `prometheus`, run by the test on a free loopback
//! port with a config and data directory of its own): three rttscope instances with three
//! service names — two from `metrics.service`, one from its client's `program_name` — each
//! running an N+1 loop through mysql_async, scraped with the bearer token as compose does it.
//! PromQL over the fleet answers "top statements by round trips", "N+1 findings by service"
//! and "what-if at 80 ms", each checked against the instances' own `/report`s; every query of
//! the fleet dashboard (`docker/grafana/dashboards/rttscope-fleet.json`) answers from it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::Conn;
use mysql_async::prelude::*;
use rttscope::findings::Kind;
use rttscope::fingerprint::summary;
use rttscope::report::Report;
use rttscope_config::{HumanDuration, Scenario};
use rttscope_integration_tests::mariadb::{NATIVE, TestDb};
use rttscope_integration_tests::proxy::{TEST_ADMIN_TOKEN, TestProxy, test_config};
use serde_json::Value;

/// The what-if scenario the fleet is asked about: 80 ms, bandwidth unlimited.
const RTT_80MS: f64 = 0.080;

/// `(service, how it is named, loops, rows per loop)`: `None` names it by `program_name`.
const FLEET: [(&str, Option<&str>, u32, u32); 3] =
    [("checkout", Some("checkout"), 2, 40), ("catalog", Some("catalog"), 1, 60), ("billing", None, 3, 50)];

/// Prometheus, run from its binary (never the system service), stopped and its data removed on drop.
struct Prometheus {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `targets` every second, with the admin token from a file as compose's does.
    fn start(targets: &[String]) -> Prometheus {
        let binary = which("prometheus").expect("Debian's prometheus (scripts/install-deps.sh installs it)");
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("rttscope-admin-token");
        std::fs::write(&token, TEST_ADMIN_TOKEN).unwrap();
        let config = dir.path().join("prometheus.yml");
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: rttscope\n    \
                 metrics_path: /metrics\n    authorization:\n      type: Bearer\n      credentials_file: {}\n    \
                 static_configs:\n      - targets: [{}]\n",
                token.display(),
                targets.join(", ")
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus starts");
        let prometheus = Prometheus { child, base: format!("http://127.0.0.1:{port}"), _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while ureq::get(format!("{}/-/ready", prometheus.base)).call().is_err() {
            assert!(Instant::now() < deadline, "prometheus not ready: {}", prometheus.log());
            std::thread::sleep(Duration::from_millis(200));
        }
        prometheus
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// An instant query's vector as `(labels, value)`.
    fn query(&self, promql: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let body = ureq::get(format!("{}/api/v1/query", self.base))
            .query("query", promql)
            .call()
            .unwrap_or_else(|e| panic!("{promql}: {e}"))
            .body_mut()
            .read_to_string()
            .unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{promql}: {body}");
        let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
        result
            .iter()
            .map(|r| {
                let labels = r["metric"].as_object().unwrap();
                let labels = labels.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned())).collect();
                (labels, r["value"][1].as_str().unwrap().parse().unwrap())
            })
            .collect()
    }

    /// `promql` by the value of label `by`, once it equals `want` (scrapes lag by a second or
    /// two); panics with what it last saw after 30 s.
    fn until(&self, promql: &str, by: &str, want: &BTreeMap<String, f64>, close: f64) -> BTreeMap<String, f64> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got: BTreeMap<String, f64> = self
                .query(promql)
                .into_iter()
                .map(|(labels, v)| (labels.get(by).cloned().unwrap_or_default(), v))
                .collect();
            let same = got.len() == want.len()
                && got.iter().zip(want).all(|((gk, gv), (wk, wv))| gk == wk && (gv - wv).abs() <= close * wv.abs());
            if same {
                eprintln!("{promql}\n  = {got:?}");
                return got;
            }
            assert!(Instant::now() < deadline, "{promql}\n got {got:?}\nwant {want:?}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // Only the child this test started.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| Path::new(p).is_file())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// An instance named `service` by config, or (`None`) by its client's `program_name`.
fn instance(service: Option<&str>) -> TestProxy {
    let mut config = test_config();
    config.metrics.service = service.map(str::to_owned);
    config.findings.scenarios =
        vec![Scenario { name: "80ms".into(), rtt: HumanDuration::from_millis(80), bandwidth: None }];
    TestProxy::with_config(config)
}

/// `loops` N+1 loops of `rows` children each: a parent's ids, then one query per id.
async fn n_plus_one(proxy: &TestProxy, program: &str, loops: u32, rows: u32) {
    let attributes = [("program_name".to_owned(), program.to_owned())].into_iter().collect();
    let opts = TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password).connect_attributes(attributes);
    let mut conn = Conn::new(opts).await.expect("connect");
    for _ in 0..loops {
        let authors: Vec<u32> = conn.query(format!("SELECT id FROM fleet_author WHERE id <= {rows}")).await.unwrap();
        for id in authors {
            let _: Vec<String> =
                conn.query(format!("SELECT title FROM fleet_book WHERE author_id = {id}")).await.unwrap();
        }
        // A pause past findings.n_plus_one.max_gap (100 ms) ends one occurrence.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    conn.disconnect().await.unwrap();
}

async fn tables() {
    let mut conn = Conn::new(TestDb::shared().opts(NATIVE.user, NATIVE.password)).await.expect("connect");
    conn.query_drop("CREATE OR REPLACE TABLE fleet_author (id INT PRIMARY KEY)").await.unwrap();
    conn.query_drop("INSERT INTO fleet_author SELECT seq FROM seq_1_to_100").await.unwrap();
    conn.query_drop("CREATE OR REPLACE TABLE fleet_book (author_id INT, title VARCHAR(40), KEY (author_id))")
        .await
        .unwrap();
    conn.query_drop("INSERT INTO fleet_book SELECT seq, CONCAT('title ', seq) FROM seq_1_to_100").await.unwrap();
    conn.disconnect().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_answers_fleet_questions_as_the_reports_do() {
    tables().await;
    let fleet: Vec<(&str, TestProxy)> =
        FLEET.iter().map(|(service, named, _, _)| (*service, instance(*named))).collect();
    let prometheus = Prometheus::start(&fleet.iter().map(|(_, p)| p.admin().to_string()).collect::<Vec<_>>());
    for ((service, proxy), (_, _, loops, rows)) in fleet.iter().zip(FLEET) {
        n_plus_one(proxy, service, loops, rows).await;
    }
    let reports = reports_once_every_loop_ended(&fleet);
    every_series_names_its_service(&fleet);

    // "Top statements by round trips across the fleet", readable by their summaries.
    let mut by_summary: BTreeMap<String, f64> = BTreeMap::new();
    for (_, r) in &reports {
        for q in r.queries.iter().filter(|q| q.kind == "select") {
            *by_summary.entry(summary(&q.fingerprint)).or_default() += q.round_trips as f64;
        }
    }
    let children = (FLEET.iter().map(|(_, _, loops, rows)| loops * rows).sum::<u32>()) as f64;
    assert_eq!(by_summary.get("SELECT fleet_book"), Some(&children), "{by_summary:?}");
    let top = "topk(2, sum by (summary) (rttscope_statement_round_trips_total \
               * on (instance, service, statement) group_left (summary) rttscope_statement_info{summary=~\"SELECT .*\"}))";
    let mut top_two: Vec<(&String, &f64)> = by_summary.iter().collect();
    top_two.sort_by(|a, b| b.1.total_cmp(a.1));
    let want: BTreeMap<String, f64> = top_two.into_iter().take(2).map(|(k, v)| (k.clone(), *v)).collect();
    prometheus.until(top, "summary", &want, 0.0);

    // "N+1 findings by service": occurrences, round trips and the time wasted at 15 ms.
    let per_service = |pick: &dyn Fn(&rttscope::report::FindingReport) -> u64| -> BTreeMap<String, f64> {
        reports
            .iter()
            .map(|(service, r)| {
                let n: u64 = r.findings.iter().filter(|f| f.kind == Kind::NPlusOne).map(pick).sum();
                (service.to_string(), n as f64)
            })
            .collect()
    };
    let occurrences = per_service(&|f| f.evidence.occurrences);
    let round_trips = per_service(&|f| f.round_trips);
    assert_eq!(occurrences["billing"], 3.0);
    assert_eq!(round_trips["billing"], 3.0 * 51.0, "50 children and their parent, three times");
    let n1 = |family: &str| format!("sum by (service) ({family}{{kind=\"n_plus_one\"}})");
    prometheus.until(&n1("rttscope_finding_occurrences_total"), "service", &occurrences, 0.0);
    prometheus.until(&n1("rttscope_finding_round_trips_total"), "service", &round_trips, 0.0);
    let wasted: BTreeMap<String, f64> =
        round_trips.iter().map(|(s, rt)| (s.clone(), (rt - occurrences[s]) * 0.015)).collect();
    prometheus.until(&n1("rttscope_finding_wasted_seconds_total"), "service", &wasted, 1e-9);
    let summaries = prometheus.query("count by (summary) (rttscope_finding_round_trips_total{kind=\"n_plus_one\"})");
    let summaries: Vec<&str> = summaries.iter().map(|(l, _)| l["summary"].as_str()).collect();
    assert_eq!(summaries, ["SELECT fleet_book"]);

    // "What-if at 80 ms across the fleet": the commands' time without the real path's round
    // trips, plus every round trip at 80 ms — the reports' projections summed.
    let projected: f64 = reports
        .iter()
        .map(|(_, r)| r.what_if.iter().find(|w| w.scenario == "80ms").unwrap().recording.projected_us as f64 / 1e6)
        .sum();
    let whatif = format!(
        "sum(rttscope_query_duration_seconds_sum) - sum(rttscope_upstream_rtt_seconds_sum) \
         + {RTT_80MS} * sum(rttscope_round_trips_total)"
    );
    let want = BTreeMap::from([(String::new(), projected)]);
    prometheus.until(&whatif, "", &want, 0.005);

    fleet_dashboard_answers(&prometheus);
}

/// Each instance's report, once it shows every loop its workload ran, ended.
fn reports_once_every_loop_ended<'a>(fleet: &[(&'a str, TestProxy)]) -> Vec<(&'a str, Report)> {
    let mut reports = Vec::new();
    for ((service, proxy), (_, _, loops, _)) in fleet.iter().zip(FLEET) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = proxy.state().report();
            let found: u64 =
                r.findings.iter().filter(|f| f.kind == Kind::NPlusOne).map(|f| f.evidence.occurrences).sum();
            if found == u64::from(loops) {
                reports.push((*service, r));
                break;
            }
            assert!(Instant::now() < deadline, "{service}: {found} of {loops} loops found");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    reports
}

/// Every series of an instance carries its one service, however it was named.
fn every_series_names_its_service(fleet: &[(&str, TestProxy)]) {
    for (service, proxy) in fleet {
        let text = rttscope::cli::admin_client::get(&format!("http://{}", proxy.admin()), "/metrics").unwrap();
        let label = format!("service=\"{service}\"");
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(samples.len() > 50 && samples.iter().all(|l| l.contains(&label)), "{service}:\n{text}");
    }
}

/// Every query of the fleet dashboard answers from this Prometheus, a series for each of
/// the fleet's services where it groups by service; so does its `service` variable.
fn fleet_dashboard_answers(prometheus: &Prometheus) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docker/grafana/dashboards/rttscope-fleet.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let services: BTreeSet<String> = FLEET.iter().map(|f| f.0.to_owned()).collect();
    let variable = &dashboard["templating"]["list"][0];
    assert_eq!(variable["name"], "service");
    let definition = variable["definition"].as_str().unwrap();
    let metric = definition.strip_prefix("label_values(").and_then(|d| d.strip_suffix(", service)")).unwrap();
    let values: BTreeSet<String> = prometheus
        .query(&format!("count by (service) ({metric})"))
        .into_iter()
        .map(|(l, _)| l["service"].clone())
        .collect();
    assert_eq!(values, services, "{definition}");
    let mut checked = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            // As Grafana fills them in with every service chosen.
            let promql = expr.replace("$__rate_interval", "1m").replace("$__range", "5m").replace("$service", ".*");
            // A rate wants two scrapes of each series: the latest of them may be a second away.
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let result = prometheus.query(&promql);
                let seen: BTreeSet<String> = result.iter().filter_map(|(l, _)| l.get("service").cloned()).collect();
                assert!(seen.is_subset(&services), "{promql}: {seen:?}");
                let complete = !expr.contains("by (service") || seen == services;
                if !result.is_empty() && complete {
                    break;
                }
                let title = &panel["title"];
                assert!(Instant::now() < deadline, "panel {title}: {promql} answers {result:?}");
                std::thread::sleep(Duration::from_millis(500));
            }
            checked += 1;
        }
    }
    assert!(checked >= 8, "{checked} queries");
}
