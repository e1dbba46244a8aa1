//! docker-compose.yml and its rttscope config agree with rttscope's own
//! defaults: the published ports are the default ports, the config parses,
//! and the upstream and the demo client point where the services are.
//! (No Docker engine runs here; this keeps the file from drifting.)

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
    assert_eq!(config.listen.port(), defaults.listen.port());
    assert_eq!(config.admin.port(), defaults.admin.port());
    assert!(config.listen.ip().is_unspecified() && config.admin.ip().is_unspecified());
    let published = strings(&services["rttscope"]["ports"]);
    for port in [defaults.listen.port(), defaults.admin.port()] {
        assert!(published.contains(&format!("{port}:{port}")), "rttscope publishes {port}: {published:?}");
    }

    // Forwarding to the mariadb service on MySQL's port, the default's port.
    assert_eq!(config.upstream.host(), "mariadb");
    assert_eq!(config.upstream.port(), defaults.upstream.port());
    assert!(strings(&services["mariadb"]["expose"]).contains(&defaults.upstream.port().to_string()));

    // The config file compose mounts is this one, where the image's command reads it.
    let mounts = strings(&services["rttscope"]["volumes"]);
    assert!(mounts.iter().any(|m| m.starts_with("./docker/rttscope.yaml:/etc/rttscope/rttscope.yaml")), "{mounts:?}");
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("\"/etc/rttscope/rttscope.yaml\""));

    // The demo client talks to rttscope, not to the database behind it.
    let demo = std::fs::read_to_string(repo().join("docker/demo.sh")).unwrap();
    assert!(demo.contains(&format!("--host=rttscope --port={}", defaults.listen.port())), "demo.sh targets rttscope");
}
