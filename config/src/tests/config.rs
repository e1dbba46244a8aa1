//! The whole file: defaults, the example, unknown keys, bad values, validation, overrides.

use std::path::PathBuf;
use std::time::Duration;

use super::{invalid, problems, yaml_err};
use crate::*;

const EXAMPLE: &str = include_str!("../../examples/rttscope.yaml");

#[test]
fn empty_documents_give_defaults() {
    for yaml in ["", "\n", "# only a comment\n", "~", "---\n"] {
        assert_eq!(Config::from_yaml(yaml).unwrap(), Config::default(), "{yaml:?}");
    }
    let d = Config::default();
    assert_eq!(d.listen.address, ["127.0.0.1:6033".parse::<ListenAddr>().unwrap()]);
    assert_eq!(d.listen.tls.mode, ListenTlsMode::Offered);
    assert_eq!(d.admin.address.to_string(), "127.0.0.1:6070");
    assert!(d.admin.enabled && d.admin.token.is_none());
    assert_eq!(d.upstream.address.to_string(), "127.0.0.1:3306");
    assert_eq!(
        (d.upstream.tls.mode, d.upstream.compression),
        (UpstreamTlsMode::Preferred, UpstreamCompression::Mirror)
    );
    assert_eq!(d.limits.idle_timeout.get(), Duration::from_secs(8 * 3600));
    assert_eq!(d.relay.buffer_size.bytes(), 32 * 1024);
    assert_eq!(d.findings.scenarios.len(), 3);
    assert!(!d.inject.is_active());
    assert!(d.validate().is_ok());
}

#[test]
fn example_file_is_defaults_plus_its_values() {
    let parsed = Config::from_yaml(EXAMPLE).unwrap();
    let defaults = Config::default();
    let expected = Config {
        upstream: UpstreamConfig::from("db.example.com:3306".parse::<UpstreamAddr>().unwrap()),
        report: ReportConfig {
            path: Some(PathBuf::from("rttscope-report.json")),
            every: Some(HumanDuration::from_secs(300)),
            dir: Some(PathBuf::from("/var/lib/rttscope/reports")),
            ..defaults.report.clone()
        },
        link: LinkConfig {
            expected_rtt: Some(HumanDuration::from_millis(15)),
            expected_bandwidth: Bandwidth::new(100_000_000),
            ..defaults.link.clone()
        },
        ..defaults
    };
    assert_eq!(parsed, expected);
}

/// Keys for experiments only, kept out of the example a user copies from (setting either
/// turns off the kernel's buffer autotuning, what makes long fast links slow); documented in
/// the configuration reference as such.
const EXPERIMENT_ONLY: [&str; 2] = ["relay.upstream_rcvbuf", "relay.upstream_sndbuf"];

/// Every key the config has (as serialized) appears in the example, and no other, but the
/// experiment-only ones, which do not.
#[test]
fn example_file_shows_every_key() {
    fn keys(v: &serde_yaml::Value, prefix: &str, out: &mut Vec<String>) {
        if let serde_yaml::Value::Mapping(m) = v {
            for (k, v) in m {
                let k = k.as_str().unwrap_or_default();
                let path = if prefix.is_empty() { k.to_owned() } else { format!("{prefix}.{k}") };
                keys(v, &path, out);
                out.push(path);
            }
        }
    }
    let (mut want, mut have) = (Vec::new(), Vec::new());
    keys(&serde_yaml::to_value(Config::default()).unwrap(), "", &mut want);
    keys(&serde_yaml::from_str(EXAMPLE).unwrap(), "", &mut have);
    assert!(EXPERIMENT_ONLY.iter().all(|k| want.iter().any(|w| w == k)), "{EXPERIMENT_ONLY:?} are keys");
    want.retain(|k| !EXPERIMENT_ONLY.contains(&k.as_str()));
    want.sort();
    have.sort();
    assert_eq!(want, have);
}

#[test]
fn serialized_config_parses_back() {
    let mut c = Config::from_yaml(EXAMPLE).unwrap();
    c.inject = Inject::from_json(
        r#"{"rtt": "15ms", "jitter": "1ms", "bandwidth": "34mbit", "window": "64KiB",
            "to_client": {"delay": "10ms"}, "scope": {"users": ["app"], "percent": 12.5}}"#,
    )
    .unwrap();
    c.relay.upstream_sndbuf = Some(ByteSize(16_000));
    let yaml = serde_yaml::to_string(&c).unwrap();
    assert_eq!(Config::from_yaml(&yaml).unwrap(), c, "{yaml}");
}

#[test]
fn unknown_keys_name_the_key_its_parent_and_the_line() {
    let (path, line, message) = invalid("listen: 127.0.0.1:6033\nlistne: 1\n");
    assert_eq!((path.as_str(), line), ("listne", Some(2)));
    assert!(message.starts_with("unknown key; did you mean 'listen'?"), "{message}");
    assert!(message.contains("expected one of: listen, admin, upstream"), "{message}");

    let yaml = "inject:\n  rtt: 5ms\n  rtts: 5ms\n";
    let (path, line, message) = invalid(yaml);
    assert_eq!((path.as_str(), line), ("inject.rtts", Some(3)));
    assert!(message.contains("did you mean 'rtt'?"), "{message}");
    assert!(message.contains("rtt, jitter, bandwidth, window"), "{message}");
    assert_eq!(yaml_err(yaml).to_string(), format!("line 3: inject.rtts: {message}"));

    let yaml = "findings:\n  scenarios:\n    - name: a\n      rtt: 1ms\n    - name: b\n      rt: 2ms\n";
    let (path, line, _) = invalid(yaml);
    assert_eq!((path.as_str(), line), ("findings.scenarios[1].rt", Some(6)));

    let (path, _, message) = invalid("inject:\n  to_client:\n    latency: 5ms\n");
    assert_eq!(path, "inject.to_client.latency");
    assert!(message.contains("expected one of: delay, jitter, bandwidth"), "{message}");
}

#[test]
fn bad_values_name_the_key_path() {
    // (yaml, path, line, part of the message)
    let cases = [
        ("inject:\n  rtt: -5ms\n", "inject.rtt", 2, "invalid duration '-5ms': must not be negative"),
        ("inject:\n  bandwidth: 0\n", "inject.bandwidth", 2, "must be greater than 0"),
        ("inject:\n  to_client:\n    bandwidth: 10\n", "inject.to_client.bandwidth", 3, "add a unit"),
        ("listen: nonsense\n", "listen", 1, "invalid address 'nonsense'"),
        ("admin: 6070\n", "admin", 1, "invalid address '6070'"),
        ("upstream: host:99999\n", "upstream", 1, "port must be between 1 and 65535"),
        ("upstream: ':3306'\n", "upstream", 1, "host must not be empty"),
        ("upstream: ::1:3306\n", "upstream", 1, "brackets"),
        ("upstream:\n  tls:\n    mode: sometimes\n", "upstream.tls.mode", 3, "unknown value 'sometimes'"),
        ("upstream:\n  compression: lz4\n", "upstream.compression", 2, "unknown value 'lz4'"),
        ("upstream: [a:1, b:2]\n", "upstream", 1, "host:port"),
        ("listen:\n  tls:\n    mode: always\n", "listen.tls.mode", 3, "unknown value 'always'"),
        ("listen: unix:relative.sock\n", "listen", 1, "absolute path"),
        ("listen:\n  address: [127.0.0.1:1, nonsense]\n", "listen.address[1]", 2, "invalid address 'nonsense'"),
        ("limits:\n  connect_timeout: 5\n", "limits.connect_timeout", 2, "add a unit, e.g. 5ms"),
        ("limits:\n  max_connections: lots\n", "limits.max_connections", 2, "expected u32"),
        ("limits:\n  max_connections: -1\n", "limits.max_connections", 2, "expected u32"),
        ("relay:\n  buffer_size: 16k\n", "relay.buffer_size", 2, "invalid size '16k'"),
        ("log:\n  format: xml\n", "log.format", 2, "unknown value 'xml' (expected one of: text, json)"),
        ("report:\n  format: pdf\n", "report.format", 2, "expected one of: json, text, html"),
        ("inject:\n  scope:\n    percent: 150\n", "inject.scope.percent", 3, "between 0 and 100"),
        ("findings:\n  scenarios:\n    - name: x\n", "findings.scenarios[0]", 3, "missing key 'rtt'"),
        ("limits: 5\n", "limits", 1, "expected a mapping of keys"),
        ("record:\n  enabled: maybe\n", "record.enabled", 2, "expected a boolean"),
    ];
    for (yaml, want_path, want_line, want_message) in cases {
        let (path, line, message) = invalid(yaml);
        assert_eq!(path, want_path, "{yaml:?}: {message}");
        assert_eq!(line, Some(want_line), "{yaml:?}");
        assert!(message.contains(want_message), "{yaml:?}: {message}");
    }
    assert_eq!(
        yaml_err("inject:\n  rtt: -5ms\n").to_string(),
        "line 2: inject.rtt: invalid duration '-5ms': must not be negative"
    );
}

#[test]
fn range_and_cross_field_problems_name_the_key_path() {
    let cases = [
        ("limits:\n  max_connections: 0\n", "limits.max_connections", "at least 1"),
        ("limits:\n  connect_timeout: 0\n", "limits.connect_timeout", "greater than 0"),
        ("limits:\n  max_connecting: 0\n", "limits.max_connecting", "at least 1"),
        ("limits:\n  first_byte_timeout: 0\n", "limits.first_byte_timeout", "greater than 0"),
        ("relay:\n  buffer_size: 2MiB\n", "relay.buffer_size", "between 4KiB and 1MiB, not 2MiB"),
        ("relay:\n  upstream_rcvbuf: 0\n", "relay.upstream_rcvbuf", "greater than 0"),
        ("relay:\n  idle_poll: 5ms\n", "relay.idle_poll", "at most 1ms (0 turns polling off), not 5ms"),
        ("log:\n  level: verbose\n", "log.level", "invalid directive 'verbose'"),
        ("record:\n  event_queue: 10\n", "record.event_queue", "at least 1024"),
        ("report:\n  path: ''\n", "report.path", "must not be empty"),
        ("link:\n  sample_interval: 0\n", "link.sample_interval", "greater than 0"),
        ("admin: 127.0.0.1:6033\n", "admin.address", "must differ from listen"),
        ("admin:\n  token: short\n", "admin.token", "at least 16 characters"),
        ("admin:\n  token: abcdefghijklmnopq\n  token_file: /t\n", "admin.token_file", "not both"),
        ("admin:\n  hosts: ['a.example:80']\n", "admin.hosts[0]", "no port"),
        ("admin:\n  max_connections: 0\n", "admin.max_connections", "between 1 and 1024, not 0"),
        ("admin:\n  header_timeout: 1h\n", "admin.header_timeout", "between 100ms and 1m, not 1h"),
        ("admin:\n  max_body_bytes: 1GiB\n", "admin.max_body_bytes", "between 1KiB and 16MiB, not 1GiB"),
        ("inject:\n  rtt: 61s\n  jitter: 1s\n", "inject.rtt", "at most 1m (is 61s)"),
        ("inject:\n  rtt: 2h\n  to_client:\n    delay: 1ms\n", "inject.rtt", "at most 1m (is 2h)"),
        ("inject:\n  bandwidth: 999bit\n", "inject.bandwidth", "between 1kbit and 100gbit"),
        (
            "inject:\n  to_upstream:\n    bandwidth: 101gbit\n",
            "inject.to_upstream.bandwidth",
            "between 1kbit and 100gbit",
        ),
        ("inject:\n  window: 100B\n", "inject.window", "between 512B and 1GiB"),
        ("inject:\n  window: 2GiB\n", "inject.window", "between 512B and 1GiB"),
        ("inject:\n  rtt: 10ms\n  jitter: 6ms\n", "inject.jitter", "at most rtt/2 (5ms), not 6ms"),
        ("inject:\n  window: 0\n", "inject.window", "between 512B and 1GiB (is 0B)"),
        ("inject:\n  scope:\n    users: ['']\n", "inject.scope.users[0]", "must not be empty"),
        (
            "inject:\n  rtt: 10ms\n  to_client:\n    delay: 1ms\n    jitter: 2ms\n",
            "inject.to_client.jitter",
            "jitter 2ms exceeds the one-way delay 1ms",
        ),
        (
            "inject:\n  rtt: 10ms\n  jitter: 4ms\n  to_upstream:\n    delay: 1ms\n",
            "inject.to_upstream.delay",
            "exceeds the one-way delay 1ms",
        ),
        (
            "findings:\n  scenarios:\n    - {name: lan, rtt: 1ms}\n    - {name: lan, rtt: 2ms}\n",
            "findings.scenarios[1].name",
            "'lan' is used by an earlier scenario",
        ),
        ("findings:\n  scenarios:\n    - {name: ' ', rtt: 1ms}\n", "findings.scenarios[0].name", "empty"),
        ("findings:\n  n_plus_one:\n    min_repeats: 1\n", "findings.n_plus_one.min_repeats", "at least 2"),
    ];
    for (yaml, want_path, want_message) in cases {
        let list = problems(yaml);
        assert_eq!(list.len(), 1, "{yaml:?}: {list:?}");
        assert_eq!(list[0].0, want_path, "{yaml:?}");
        assert!(list[0].1.contains(want_message), "{yaml:?}: {}", list[0].1);
    }
    // Listening on port 0 twice is fine: each gets its own free port.
    assert!(Config::from_yaml("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n").is_ok());
}

#[test]
fn validate_reports_every_problem_at_once() {
    let yaml = "\
limits:
  max_connections: 0
relay:
  buffer_size: 1KiB
inject:
  rtt: 2ms
  jitter: 5ms
findings:
  scenarios:
    - {name: a, rtt: 1ms}
    - {name: a, rtt: 1ms}
";
    let err = yaml_err(yaml);
    let paths: Vec<String> = problems(yaml).into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["limits.max_connections", "relay.buffer_size", "findings.scenarios[1].name", "inject.jitter"]);
    let text = err.to_string();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(text.starts_with("line 2: limits.max_connections: must be at least 1\n"), "{text}");
    let named = err.with_source_name("rttscope.yaml").to_string();
    assert!(named.lines().all(|l| l.starts_with("rttscope.yaml:")), "{named}");
    assert!(named.contains("rttscope.yaml:7: inject.jitter"), "{named}");
}

#[test]
fn syntax_errors_are_reported_with_line_and_column() {
    let err = yaml_err("limits:\n  max_connections: [1\n");
    let ConfigError::Syntax { line, column, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!((*line, column.is_some()), (Some(3), true));
    assert!(err.with_source_name("rttscope.yaml").to_string().starts_with("rttscope.yaml:3:"));
    assert!(matches!(yaml_err("a: 1\n---\nb: 2\n"), ConfigError::Syntax { line: None, .. }));
}

#[test]
fn duplicate_keys_name_the_second_occurrence() {
    let cases = [
        ("listen: 1\n# comment\n\nlisten: 2\n", "listen", 4),
        ("inject:\n  rtt: 1ms\n  scope:\n    users: []\n  rtt: 2ms\n", "inject.rtt", 5),
        ("inject:\n  to_client: {delay: 1ms, delay: 2ms}\n", "inject.to_client.delay", 2),
        ("findings:\n  scenarios:\n    - name: a\n      rtt: 1ms\n      name: b\n", "findings.scenarios[0].name", 5),
    ];
    for (yaml, want_path, want_line) in cases {
        let (path, line, message) = invalid(yaml);
        assert_eq!((path.as_str(), line), (want_path, Some(want_line)), "{yaml:?}");
        assert!(message.starts_with("duplicate key"), "{message}");
    }
}

#[test]
fn error_display_with_source_name() {
    let err = yaml_err("inject:\n  rtt: -5ms\n");
    assert_eq!(
        err.with_source_name("rttscope.yaml").to_string(),
        "rttscope.yaml:2: inject.rtt: invalid duration '-5ms': must not be negative"
    );
    assert_eq!(err.problems()[0].path, "inject.rtt");
}

#[test]
fn load_reads_files_and_names_missing_ones() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rttscope.yaml");
    assert_eq!(Config::load(example).unwrap(), Config::from_yaml(EXAMPLE).unwrap());
    let err = Config::load("/nonexistent/rttscope.yaml").unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }));
    assert!(err.to_string().starts_with("cannot read /nonexistent/rttscope.yaml: "), "{err}");
}

#[test]
fn command_line_overrides_win() {
    let mut c = Config::from_yaml("listen: 0.0.0.0:7000\nupstream: db:3306\n").unwrap();
    let overrides = Overrides {
        listen: vec!["127.0.0.1:7001".parse().unwrap(), "unix:/run/rttscope/mysql.sock".parse().unwrap()],
        upstream: Some("[::1]:3307".parse().unwrap()),
        admin: None,
        log_format: Some(LogFormat::Json),
    };
    c.apply_overrides(overrides).unwrap();
    assert_eq!(c.log.format, LogFormat::Json);
    let listen: Vec<String> = c.listen.address.iter().map(ToString::to_string).collect();
    assert_eq!(listen, ["127.0.0.1:7001", "unix:/run/rttscope/mysql.sock"], "every --listen, the file's replaced");
    assert_eq!((c.upstream.address.host(), c.upstream.address.port()), ("::1", 3307));
    assert_eq!(c.admin, Config::default().admin);

    let clash = Overrides { admin: c.listen.tcp(), ..Overrides::default() };
    let err = c.apply_overrides(clash).unwrap_err();
    assert_eq!(err.problems()[0].path, "admin.address");
}

#[test]
fn listen_and_upstream_take_an_address_or_a_section() {
    let c = Config::from_yaml(
        "listen: [127.0.0.1:7000, unix:/run/rttscope/mysql.sock]\nupstream:\n  address: db:3306\n  tls:\n    mode: verify-identity\n    ca: /etc/ca.pem\n    server_name: db.internal\n  compression: zstd\n",
    )
    .unwrap();
    assert_eq!(
        c.listen.address,
        [
            ListenAddr::Tcp("127.0.0.1:7000".parse().unwrap()),
            ListenAddr::Unix(PathBuf::from("/run/rttscope/mysql.sock"))
        ]
    );
    assert_eq!(c.upstream.address.to_string(), "db:3306");
    assert_eq!(c.upstream.tls.mode, UpstreamTlsMode::VerifyIdentity);
    assert_eq!(c.upstream.tls.server_name.as_deref(), Some("db.internal"));
    assert_eq!(c.upstream.compression, UpstreamCompression::Zstd);
    let c = Config::from_yaml(
        "listen:\n  address: 127.0.0.1:7000\n  tls:\n    mode: required\n    cert: c.pem\n    key: k.pem\n",
    )
    .unwrap();
    assert_eq!(c.listen.tls.mode, ListenTlsMode::Required);
    assert_eq!(c.listen.tcp(), Some("127.0.0.1:7000".parse().unwrap()));
    // What check-config prints parses back to the same config.
    let printed = serde_yaml::to_string(&c).unwrap();
    assert_eq!(Config::from_yaml(&printed).unwrap(), c);
}

#[test]
fn tls_keys_that_go_together() {
    let problems = |yaml: &str| Config::from_yaml(yaml).unwrap_err().problems();
    let p = problems("listen:\n  tls:\n    cert: c.pem\n");
    assert_eq!(
        (p[0].path.as_str(), p[0].message.as_str()),
        ("listen.tls.key", "cert and key go together: set both or neither")
    );
    let p = problems("upstream:\n  tls:\n    key: k.pem\n");
    assert_eq!(p[0].path, "upstream.tls.cert");
    let p = problems("upstream:\n  tls:\n    mode: disabled\n    ca: ca.pem\n");
    assert_eq!((p[0].path.as_str(), p[0].message.as_str()), ("upstream.tls.ca", "has no effect with mode: disabled"));
    let p = problems("listen:\n  socket_mode: rwx\n");
    assert_eq!(p[0].path, "listen.socket_mode");
}

#[test]
fn metrics_service_is_a_short_printable_name() {
    assert_eq!(Config::default().metrics.service, None);
    let c = Config::from_yaml("metrics:\n  service: checkout\n").unwrap();
    assert_eq!(c.metrics.service.as_deref(), Some("checkout"));
    for bad in ["\"\"", "\"a\\tb\"", &"x".repeat(256)] {
        let p = problems(&format!("metrics:\n  service: {bad}\n"));
        assert_eq!(p.len(), 1, "{bad}: {p:?}");
        assert_eq!(p[0].0, "metrics.service");
    }
}

#[test]
fn metrics_top_statements_is_bounded() {
    assert_eq!(Config::default().metrics.top_statements, 100);
    assert_eq!(Config::from_yaml("metrics:\n  top_statements: 0\n").unwrap().metrics.top_statements, 0);
    let p = problems("metrics:\n  top_statements: 20000\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "metrics.top_statements");
    let (path, _, _) = invalid("metrics:\n  top_series: 5\n");
    assert!(path.starts_with("metrics"), "{path}");
}

#[test]
fn log_format_parses_from_a_flag_value() {
    assert_eq!("json".parse::<LogFormat>().unwrap(), LogFormat::Json);
    assert_eq!(" Text ".parse::<LogFormat>().unwrap(), LogFormat::Text);
    assert!("yaml".parse::<LogFormat>().is_err());
}

#[test]
fn heap_trim_is_off_or_at_least_a_second() {
    assert_eq!(Config::default().limits.heap_trim, HumanDuration::from_secs(30));
    assert!(Config::from_yaml("limits:\n  heap_trim: 0\n").unwrap().limits.heap_trim.is_zero());
    assert_eq!(
        problems("limits:\n  heap_trim: 10ms\n"),
        [("limits.heap_trim".to_owned(), "must be 0 (never) or at least 1s, not 10ms".to_owned())]
    );
}

#[test]
fn problems_name_their_line() {
    let yaml = "listen: 127.0.0.1:6033\ninject:\n  rtt: 10ms\n  to_client:\n    delay: 90s\n";
    let err = Config::from_yaml(yaml).unwrap_err();
    assert_eq!(err.to_string(), "line 5: inject.to_client.delay: must be at most 1m (is 90s)");
    assert_eq!(
        err.with_source_name("r.yaml").to_string(),
        "r.yaml:5: inject.to_client.delay: must be at most 1m (is 90s)"
    );
}

#[test]
fn admin_takes_an_address_off_or_a_section() {
    let c = Config::from_yaml("admin: 0.0.0.0:7070\n").unwrap();
    assert_eq!(c.admin.address.to_string(), "0.0.0.0:7070");
    assert!(c.admin.enabled && c.admin.beyond_loopback());
    for off in ["admin: off\n", "admin: false\n", "admin:\n  enabled: false\n"] {
        assert!(!Config::from_yaml(off).unwrap().admin.enabled, "{off}");
    }
    let c = Config::from_yaml(
        "admin:\n  address: 127.0.0.1:7070\n  token: abcdefghijklmnopqrst\n  hosts: [rttscope.internal]\n",
    )
    .unwrap();
    assert_eq!(c.admin.token.as_ref().map(|t| t.expose()), Some("abcdefghijklmnopqrst"));
    assert_eq!(c.admin.hosts, ["rttscope.internal"]);
    // The token never reaches a printed config.
    let printed = serde_yaml::to_string(&c).unwrap();
    assert!(!printed.contains("abcdefghijklmnopqrst") && printed.contains("<redacted>"), "{printed}");
    assert!(!format!("{c:?}").contains("abcdefghijklmnopqrst"));
}

#[test]
fn report_snapshots_and_windows_are_checked_with_their_key_paths() {
    let c = Config::from_yaml("report:\n  every: 5m\n  dir: /tmp/r\n  keep: 3\n  window_max: 15m\n").unwrap();
    assert_eq!(c.report.snapshots(), Some((Duration::from_secs(300), std::path::Path::new("/tmp/r"))));
    assert_eq!((c.report.keep, c.report.window_max.get()), (3, Duration::from_secs(900)));
    assert_eq!(Config::default().report.snapshots(), None, "snapshots are off unless asked for");
    assert_eq!(Config::default().report.keep, 24);
    let cases = [
        ("report:\n  every: 500ms\n  dir: /tmp/r\n", vec![("report.every", "at least 1s, not 500ms")]),
        ("report:\n  every: 5m\n", vec![("report.dir", "must be set when report.every is")]),
        ("report:\n  every: 5m\n  dir: ''\n", vec![("report.dir", "must not be empty")]),
        ("report:\n  keep: 0\n", vec![("report.keep", "at least 1")]),
        ("report:\n  window_max: 25h\n", vec![("report.window_max", "at most 24h, not 25h")]),
        ("report:\n  window_resolution: 10ms\n", vec![("report.window_resolution", "at least 1s, not 10ms")]),
        (
            "report:\n  window_max: 10s\n  window_resolution: 1m\n",
            vec![("report.window_resolution", "at most window_max")],
        ),
        ("report:\n  window_max: 24h\n  window_resolution: 1s\n", vec![("report.window_max", "86400 slots")]),
        // Every problem at once.
        (
            "report:\n  every: 0\n  keep: 0\n",
            vec![("report.every", "at least 1s"), ("report.dir", "must be set"), ("report.keep", "at least 1")],
        ),
    ];
    for (yaml, want) in cases {
        let got = problems(yaml);
        assert_eq!(got.len(), want.len(), "{yaml:?}: {got:?}");
        for ((path, message), (want_path, want_message)) in got.iter().zip(&want) {
            assert_eq!(path, want_path, "{yaml:?}");
            assert!(message.contains(want_message), "{yaml:?}: {message}");
        }
    }
    // 0 turns the windows off, whatever the resolution.
    assert!(Config::from_yaml("report:\n  window_max: 0\n").is_ok());
}

#[test]
fn compression_finding_thresholds() {
    let c = Config::from_yaml("findings:\n  compression:\n    min_ratio: 3.5\n    min_transfer_share: 40%\n").unwrap();
    assert_eq!(c.findings.compression.min_ratio, 3.5);
    assert_eq!(c.findings.compression.min_transfer_share.value(), 40.0);
    let d = Config::default().findings.compression;
    assert_eq!((d.min_ratio, d.min_transfer_share.value()), (2.0, 50.0));
    assert_eq!(
        problems("findings:\n  compression:\n    min_ratio: 0.5\n"),
        [("findings.compression.min_ratio".to_owned(), "must be a number of at least 1".to_owned())]
    );
}

#[test]
fn a_bad_listen_address_says_which_part_is_wrong() {
    let why = |input: &str| input.parse::<ListenAddr>().unwrap_err().to_string();
    for (input, said) in [
        ("127.0.0.1", "no port"),
        ("::1", "no port"),
        ("127.0.0.1:99999", "the port is not a number from 0 to 65535"),
        ("[::1]:x", "the port is not a number"),
        ("999.1.1.1:5", "999.1.1.1 is not an IPv4 address"),
        ("db.example.com:3306", "host names are not allowed here"),
    ] {
        let message = why(input);
        assert!(message.contains(said), "{input}: {message}");
        assert!(message.contains("expected ip:port"), "{input}: {message}");
    }
}
