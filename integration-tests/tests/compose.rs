//! docker-compose.yml and its rttscope config agree with rttscope's own
//! defaults: the published ports are the default ports, the config parses,
//! and the upstream and the demo client point where the services are. The
//! `monitoring` profile's Prometheus scrapes rttscope's admin port, Grafana gets
//! the data source its dashboard names, and every metric that dashboard queries
//! is in `/metrics` of a running rttscope.
//! (No Docker engine runs here; this keeps the files from drifting.)

use std::path::{Path, PathBuf};

use rttscope_config::Config;
use serde_yaml::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn compose() -> Value {
    let text = std::fs::read_to_string(repo().join("docker-compose.yml")).expect("docker-compose.yml");
    serde_yaml::from_str(&text).expect("docker-compose.yml is YAML")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence().map(|s| s.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

#[test]
fn ports_and_config_match_the_defaults() {
    let compose = compose();
    let services = &compose["services"];
    for name in ["mariadb", "rttscope", "demo"] {
        assert!(services.get(name).is_some(), "service {name}");
    }
    let defaults = Config::default();
    let config = Config::load(repo().join("docker/rttscope.yaml")).expect("docker/rttscope.yaml is a valid config");

    // Listening where the defaults listen, on every interface of the container.
    let (listen, default_listen) = (config.listen.tcp().expect("a TCP listener"), defaults.listen.tcp().unwrap());
    assert_eq!(listen.port(), default_listen.port());
    let (admin, default_admin) = (config.admin.address, defaults.admin.address);
    assert_eq!(admin.port(), default_admin.port());
    assert!(listen.ip().is_unspecified() && admin.ip().is_unspecified());
    let published = strings(&services["rttscope"]["ports"]);
    let port = default_listen.port();
    assert!(published.contains(&format!("{port}:{port}")), "rttscope publishes {port}: {published:?}");
    // The admin API: on the host's loopback only, with a token from the environment (no
    // token in the file; rttscope would refuse to start without one).
    let port = default_admin.port();
    assert!(published.contains(&format!("127.0.0.1:{port}:{port}")), "admin on loopback: {published:?}");
    assert!(config.admin.token.is_none() && config.admin.token_file.is_none());
    let token = services["rttscope"]["environment"]["RTTSCOPE_ADMIN_TOKEN"].as_str().unwrap_or_default();
    assert!(token.starts_with("${RTTSCOPE_ADMIN_TOKEN:?"), "the token comes from the environment: {token:?}");

    // Forwarding to the mariadb service on MySQL's port, the default's port.
    assert_eq!(config.upstream.address.host(), "mariadb");
    assert_eq!(config.upstream.address.port(), defaults.upstream.address.port());
    assert!(strings(&services["mariadb"]["expose"]).contains(&defaults.upstream.address.port().to_string()));

    // The config file compose mounts is this one, where the image's command reads it.
    let mounts = strings(&services["rttscope"]["volumes"]);
    assert!(mounts.iter().any(|m| m.starts_with("./docker/rttscope.yaml:/etc/rttscope/rttscope.yaml")), "{mounts:?}");
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("\"/etc/rttscope/rttscope.yaml\""));

    // The demo client talks to rttscope, not to the database behind it, and runs the shared
    // workload (tests/demo.rs runs it through rttscope).
    let demo = std::fs::read_to_string(repo().join("docker/demo.sh")).unwrap();
    assert!(demo.contains(&format!("DEMO_PROXY:-rttscope:{}", default_listen.port())), "demo.sh targets rttscope");
    assert!(
        demo.contains("DEMO_DB:-mariadb:3306") && demo.contains("DEMO_PASSWORD-demo"),
        "demo.sh logs in to mariadb"
    );
    let mounts = strings(&services["demo"]["volumes"]);
    for mount in ["./docker/demo.sh:/demo.sh:ro", "./scripts/demo-workload.sh:/demo-workload.sh:ro"] {
        assert!(mounts.contains(&mount.to_owned()), "{mount}: {mounts:?}");
    }
    assert!(demo.contains("${DEMO_WORKLOAD:-/demo-workload.sh}"), "demo.sh sources the mounted workload");
    assert_eq!(strings(&services["demo"]["entrypoint"]), ["bash", "/demo.sh"], "the workload needs bash");
}

// ---- The monitoring profile: Prometheus scraping rttscope, Grafana with its dashboard -------

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn dashboard() -> serde_json::Value {
    serde_json::from_str(&read("docker/grafana/dashboards/rttscope.json")).expect("the dashboard is JSON")
}

/// The PromQL of every panel of the dashboard.
fn dashboard_queries() -> Vec<String> {
    let dashboard = dashboard();
    let panels = dashboard["panels"].as_array().expect("panels");
    let targets = panels.iter().flat_map(|p| p["targets"].as_array().into_iter().flatten());
    targets.map(|t| t["expr"].as_str().expect("each target has an expr").to_owned()).collect()
}

/// The metric names a query reads: rttscope's own and the OpenTelemetry ones (label names,
/// functions and `$__rate_interval` never start so).
fn metric_names(query: &str) -> Vec<&str> {
    query
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|t| t.starts_with("rttscope_") || t.starts_with("db_client_"))
        .collect()
}

#[test]
fn the_monitoring_profile_scrapes_rttscope_and_provisions_the_dashboard() {
    let compose = compose();
    let services = &compose["services"];
    for name in ["prometheus", "grafana"] {
        assert_eq!(strings(&services[name]["profiles"]), ["monitoring"], "{name} only with --profile monitoring");
    }
    // Prometheus scrapes the admin API where compose's rttscope serves it.
    let config = Config::load(repo().join("docker/rttscope.yaml")).unwrap();
    let prometheus: Value = serde_yaml::from_str(&read("docker/prometheus/prometheus.yml")).unwrap();
    let targets = strings(&prometheus["scrape_configs"][0]["static_configs"][0]["targets"]);
    assert_eq!(targets, [format!("rttscope:{}", config.admin.address.port())]);
    assert_eq!(prometheus["scrape_configs"][0]["metrics_path"].as_str(), Some("/metrics"));
    let mounts = strings(&services["prometheus"]["volumes"]);
    assert!(mounts.iter().any(|m| m.starts_with("./docker/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml")));
    // The admin API beyond loopback wants its token for every request, /metrics included:
    // the scrape shows it, from the file the service writes from RTTSCOPE_ADMIN_TOKEN.
    let auth = &prometheus["scrape_configs"][0]["authorization"];
    assert_eq!(auth["type"].as_str(), Some("Bearer"));
    let token_file = auth["credentials_file"].as_str().expect("a bearer token file");
    let entrypoint = strings(&services["prometheus"]["entrypoint"]).join(" ");
    assert!(entrypoint.contains("RTTSCOPE_ADMIN_TOKEN") && entrypoint.contains(token_file), "{entrypoint}");
    assert!(services["prometheus"]["environment"]["RTTSCOPE_ADMIN_TOKEN"].is_string());

    // Grafana gets the data source the dashboard names, and the dashboard itself.
    let mounts = strings(&services["grafana"]["volumes"]);
    assert!(mounts.contains(&"./docker/grafana/provisioning:/etc/grafana/provisioning:ro".to_owned()), "{mounts:?}");
    assert!(mounts.contains(&"./docker/grafana/dashboards:/var/lib/grafana/dashboards:ro".to_owned()), "{mounts:?}");
    let datasources: Value =
        serde_yaml::from_str(&read("docker/grafana/provisioning/datasources/prometheus.yml")).unwrap();
    let source = &datasources["datasources"][0];
    assert_eq!(source["url"].as_str(), Some("http://prometheus:9090"));
    let uid = source["uid"].as_str().expect("a data source uid");
    let providers: Value = serde_yaml::from_str(&read("docker/grafana/provisioning/dashboards/rttscope.yml")).unwrap();
    assert_eq!(providers["providers"][0]["options"]["path"].as_str(), Some("/var/lib/grafana/dashboards"));
    // The per-instance dashboard and the fleet's (tests/fleet.rs runs the fleet's queries).
    let fleet: serde_json::Value =
        serde_json::from_str(&read("docker/grafana/dashboards/rttscope-fleet.json")).unwrap();
    for dashboard in [dashboard(), fleet] {
        for panel in dashboard["panels"].as_array().unwrap() {
            assert_eq!(panel["datasource"]["uid"], uid, "panel {}", panel["title"]);
            for target in panel["targets"].as_array().unwrap() {
                assert_eq!(target["datasource"]["uid"], uid, "panel {}", panel["title"]);
            }
        }
    }
}

/// Every metric the dashboard charts is in `/metrics` of a running rttscope, with samples,
/// after ordinary traffic (an N+1 loop included, so there are findings to chart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_queries_is_in_metrics() {
    use mysql_async::prelude::Queryable;
    use rttscope_integration_tests::mariadb::{NATIVE, TestDb};
    use rttscope_integration_tests::proxy::TestProxy;

    let proxy = TestProxy::start();
    let opts = TestDb::shared().opts_via(proxy.addr(), NATIVE.user, NATIVE.password);
    let mut conn = mysql_async::Conn::new(opts).await.expect("connect");
    conn.query_drop("CREATE OR REPLACE TABLE dash_orders (id INT PRIMARY KEY, total INT)").await.unwrap();
    conn.query_drop("INSERT INTO dash_orders SELECT seq, seq * 10 FROM seq_1_to_30").await.unwrap();
    let ids: Vec<u32> = conn.query("SELECT id FROM dash_orders").await.unwrap();
    for id in ids {
        let _: Option<u32> = conn.query_first(format!("SELECT total FROM dash_orders WHERE id = {id}")).await.unwrap();
    }
    conn.query_drop("DO 1").await.unwrap();
    // The collector applies events in order: once the last command is in the aggregates,
    // everything before it is recorded. (Waiting for the findings' counts to be non-empty
    // waited for nothing: they list every kind from the start.)
    proxy
        .wait_for("the last command recorded", |a| a.queries().iter().any(|q| q.text.as_ref() == "do ?").then_some(()));
    let text = rttscope::cli::admin_client::get(&format!("http://{}", proxy.admin()), "/metrics").unwrap();
    let sampled: std::collections::BTreeSet<&str> =
        text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split(['{', ' ']).next()).collect();
    let queries = dashboard_queries();
    assert!(queries.len() >= 10, "{queries:?}");
    for query in &queries {
        let names = metric_names(query);
        assert!(!names.is_empty(), "a query of no rttscope metric: {query}");
        for name in names {
            assert!(sampled.contains(name), "{name} (in `{query}`) has no samples in /metrics:\n{text}");
        }
    }
    conn.disconnect().await.unwrap();
}
