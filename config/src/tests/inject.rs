//! The `inject` section and the admin API's JSON form of it.

use std::time::Duration;

use crate::*;

fn json_invalid(json: &str) -> (String, Option<usize>, String) {
    match Inject::from_json(json) {
        Err(ConfigError::Invalid { path, line, message }) => (path, line, message),
        other => panic!("expected Invalid for {json}, got {other:?}"),
    }
}

#[test]
fn json_errors_name_the_key() {
    let (path, line, message) = json_invalid(r#"{"rtt":"-5ms"}"#);
    assert_eq!((path.as_str(), line), ("rtt", Some(1)));
    assert_eq!(message, "invalid duration '-5ms': must not be negative");

    let (path, _, message) = json_invalid(r#"{"rtts":"5ms"}"#);
    assert_eq!(path, "rtts");
    assert!(message.starts_with("unknown key; did you mean 'rtt'?"), "{message}");

    let (path, _, message) = json_invalid(r#"{"bandwidth":0}"#);
    assert_eq!(path, "bandwidth");
    assert!(message.contains("must be greater than 0"), "{message}");

    let (path, line, message) = json_invalid("{\n  \"to_client\": {\"bandwidth\": \"fast\"}\n}");
    assert_eq!((path.as_str(), line), ("to_client.bandwidth", Some(2)));
    assert!(message.starts_with("invalid bandwidth 'fast'"), "{message}");

    let (path, _, _) = json_invalid(r#"{"scope": {"users": ["a", 5]}}"#);
    assert_eq!(path, "scope.users[1]");

    let err = Inject::from_json(r#"{"rtt":"-5ms"}"#).unwrap_err();
    assert_eq!(err.to_string(), "line 1: rtt: invalid duration '-5ms': must not be negative");
}

#[test]
fn json_syntax_and_validation_errors() {
    for bad in ["", "{", r#"{"rtt": "1ms"} x"#, r#"{"rtt": }"#] {
        assert!(matches!(Inject::from_json(bad), Err(ConfigError::Syntax { .. })), "{bad:?}");
    }
    let err = Inject::from_json(r#"{"rtt": "10ms", "jitter": "6ms", "window": 0}"#).unwrap_err();
    let paths: Vec<String> = err.problems().into_iter().map(|p| p.path).collect();
    assert_eq!(paths, ["jitter", "window"]);
}

#[test]
fn json_form_round_trips() {
    let inject = Inject::from_json(
        r#"{"rtt": "15ms", "jitter": "2ms", "bandwidth": "34mbit", "window": "16KiB", "loss": "1.5%",
            "to_upstream": {"bandwidth": "1mbit", "loss": "0.5%"},
            "scope": {"schemas": ["shop"], "percent": "50%"}}"#,
    )
    .unwrap();
    let json = serde_json::to_string(&inject).unwrap();
    assert_eq!(Inject::from_json(&json).unwrap(), inject, "{json}");
    assert_eq!(Inject::from_json("{}").unwrap(), Inject::default());
}

#[test]
fn directions_resolve_overrides() {
    let yaml = "\
inject:
  rtt: 15ms
  jitter: 1ms
  bandwidth: 34mbit
  loss: 1%
  to_client:
    delay: 20ms
    bandwidth: 100mbit
    loss: 0.25%
  to_upstream:
    jitter: 0
";
    let inject = Config::from_yaml(yaml).unwrap().inject;
    assert_eq!(
        inject.direction(Direction::ToUpstream),
        OneWay {
            delay: Duration::from_micros(7500),
            jitter: Duration::ZERO,
            bandwidth_bps: Some(34_000_000),
            loss_ppm: 10_000
        }
    );
    assert_eq!(
        inject.direction(Direction::ToClient),
        OneWay {
            delay: Duration::from_millis(20),
            jitter: Duration::from_millis(1),
            bandwidth_bps: Some(100_000_000),
            loss_ppm: 2_500
        }
    );
    assert!(inject.is_active());
}

#[test]
fn active_only_when_it_changes_something() {
    let active = |json: &str| Inject::from_json(json).unwrap().is_active();
    assert!(!active("{}"));
    assert!(!active(r#"{"scope": {"users": ["app"]}}"#));
    assert!(!active(r#"{"to_client": {"delay": "0"}}"#));
    assert!(active(r#"{"rtt": "1ms"}"#));
    assert!(active(r#"{"bandwidth": "1mbit"}"#));
    assert!(active(r#"{"window": "64KiB"}"#));
    assert!(active(r#"{"to_upstream": {"delay": "5ms"}}"#));
    assert!(active(r#"{"loss": "1%"}"#));
    assert!(active(r#"{"to_client": {"loss": "0.1%"}}"#));
    assert!(!active(r#"{"loss": "0%"}"#));
}

#[test]
fn scope_matches_users_and_schemas() {
    let all = Scope::default();
    assert!(all.matches("app", None));
    let scope = Scope { users: vec!["app".into()], schemas: vec!["shop".into()], percent: Percent::FULL };
    assert!(scope.matches("app", Some("shop")));
    assert!(!scope.matches("root", Some("shop")));
    assert!(!scope.matches("app", Some("other")));
    assert!(!scope.matches("app", None));
}

#[test]
fn every_value_has_a_range() {
    for (body, key) in [
        (r#"{"rtt": "1000000h"}"#, "rtt"),
        (r#"{"rtt": "2m", "jitter": "1m"}"#, "rtt"),
        (r#"{"to_client": {"delay": "18446744073709551615s"}}"#, "to_client.delay"),
        (r#"{"to_upstream": {"delay": "61s", "jitter": "61s"}}"#, "to_upstream.delay"),
        (r#"{"bandwidth": "1bit"}"#, "bandwidth"),
        (r#"{"to_client": {"bandwidth": "18446744073709551615bit"}}"#, "to_client.bandwidth"),
        (r#"{"window": "16EiB"}"#, "window"),
        (r#"{"window": "18446744073709551615"}"#, "window"),
        (r#"{"scope": {"percent": 101}}"#, "scope.percent"),
        (r#"{"loss": "50.1%"}"#, "loss"),
        (r#"{"loss": "-1%"}"#, "loss"),
        (r#"{"to_upstream": {"loss": 90}}"#, "to_upstream.loss"),
    ] {
        let err = Inject::from_json(body).unwrap_err();
        assert_eq!(err.problems()[0].path, key, "{body}: {err}");
    }
    // The edges themselves are fine.
    let edge = r#"{"rtt": "60s", "jitter": "30s", "bandwidth": "1kbit", "window": "1GiB", "loss": "50%",
                   "to_client": {"delay": "60s", "jitter": "60s", "bandwidth": "100gbit", "loss": 0}}"#;
    Inject::from_json(edge).unwrap();
}
