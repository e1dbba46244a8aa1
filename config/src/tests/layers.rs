//! Settings from the environment and `--set` flags over the file.

use crate::*;

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn every_key_has_its_own_environment_variable() {
    let paths = key_paths();
    assert!(paths.len() > 50, "{paths:?}");
    let mut names: Vec<String> = paths.iter().map(|p| env_name(p)).collect();
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "two key paths share an environment variable");
    assert!(names.contains(&"LIMITS_IDLE_TIMEOUT".to_owned()));
    assert!(names.contains(&"INJECT_TO_CLIENT_BANDWIDTH".to_owned()));
}

#[test]
fn environment_overrides_the_file_and_flags_override_the_environment() {
    let mut config = Config::from_yaml("limits:\n  idle_timeout: 30s\nrecord:\n  enabled: true\n").unwrap();
    let (mut settings, unknown) = env_settings(vars(&[
        ("RTTSCOPE_LIMITS_IDLE_TIMEOUT", "5s"),
        ("RTTSCOPE_RECORD_ENABLED", "false"),
        ("RTTSCOPE_INJECT_RTT", "15ms"),
        ("RTTSCOPE_TEST_MYSQL_URL", "mysql://x"),
        ("PATH", "/bin"),
    ]));
    assert_eq!(unknown, ["RTTSCOPE_TEST_MYSQL_URL"]);
    settings.push(flag_setting("limits.idle_timeout=7s").unwrap());
    config.apply_settings(&settings).unwrap();
    assert_eq!(config.limits.idle_timeout, HumanDuration::from_secs(7));
    assert!(!config.record.enabled);
    assert_eq!(config.inject.rtt, HumanDuration::from_millis(15));
}

#[test]
fn a_bad_setting_names_its_key_and_its_source() {
    let mut config = Config::default();
    let (settings, _) = env_settings(vars(&[("RTTSCOPE_LIMITS_MAX_CONNECTIONS", "lots")]));
    let err = config.apply_settings(&settings).unwrap_err().to_string();
    assert!(err.contains("limits.max_connections") && err.contains("RTTSCOPE_LIMITS_MAX_CONNECTIONS"), "{err}");

    let err = Config::default().apply_settings(&[flag_setting("limits.idle_timout=5s").unwrap()]).unwrap_err();
    let err = err.to_string();
    assert!(err.contains("idle_timout") && err.contains("idle_timeout"), "{err}");

    let err = Config::default().apply_settings(&[flag_setting("inject.rtt=-5ms").unwrap()]).unwrap_err().to_string();
    assert!(err.contains("inject.rtt") && err.contains("--set inject.rtt"), "{err}");

    assert!(flag_setting("no-equals-sign").is_err());
    assert!(flag_setting("limits..idle_timeout=5s").is_err());
}

#[test]
fn sections_and_lists_can_be_set_whole() {
    let mut config = Config::default();
    let settings = [
        flag_setting("listen=[127.0.0.1:7000, 127.0.0.1:7001]").unwrap(),
        flag_setting("upstream.address=db.example.com:3307").unwrap(),
    ];
    config.apply_settings(&settings).unwrap();
    assert_eq!(config.listen.address.len(), 2);
    assert_eq!(config.upstream.address.to_string(), "db.example.com:3307");
}

#[test]
fn check_finds_every_problem_not_only_the_first() {
    let yaml = "listen: 127.0.0.1:6033\nlistne: 1\nlimits:\n  idle_timeout: soon\n  max_connections: 0\ninject:\n  rtts: 5ms\n";
    let found: Vec<String> = Config::every_problem(yaml).iter().map(ToString::to_string).collect();
    let all = found.join("\n");
    assert!(all.contains("line 2: listne"), "{all}");
    assert!(all.contains("line 4: limits.idle_timeout"), "{all}");
    assert!(all.contains("line 7: inject.rtts"), "{all}");
    assert!(all.contains("limits.max_connections"), "{all}");
    assert!(Config::every_problem("limits:\n  idle_timeout: 5s\n").is_empty());
}

#[test]
fn the_admin_token_survives_other_settings_and_can_be_set() {
    let mut config = Config::from_yaml("admin:\n  token: abcdefghijklmnopqrst\n").unwrap();
    config.apply_settings(&[flag_setting("limits.idle_timeout=5s").unwrap()]).unwrap();
    assert_eq!(config.admin.token.as_ref().map(|t| t.expose()), Some("abcdefghijklmnopqrst"));
    let (settings, _) = env_settings(vars(&[("RTTSCOPE_ADMIN_TOKEN", "zyxwvutsrqponmlkjihg")]));
    config.apply_settings(&settings).unwrap();
    assert_eq!(config.admin.token.as_ref().map(|t| t.expose()), Some("zyxwvutsrqponmlkjihg"));
}

#[test]
fn connection_churn_thresholds_come_from_the_environment_and_flags() {
    let mut config = Config::default();
    let (mut settings, unknown) = env_settings(vars(&[
        ("RTTSCOPE_FINDINGS_CONNECTION_CHURN_MIN_CONNECTIONS", "50"),
        ("RTTSCOPE_FINDINGS_CONNECTION_CHURN_MIN_SHARE", "40%"),
    ]));
    assert!(unknown.is_empty(), "{unknown:?}");
    settings.push(flag_setting("findings.connection_churn.min_share=60%").unwrap());
    config.apply_settings(&settings).unwrap();
    assert_eq!(config.findings.connection_churn.min_connections, 50);
    assert_eq!(config.findings.connection_churn.min_share.value(), 60.0);

    let bad = flag_setting("findings.connection_churn.min_connections=1").unwrap();
    let err = Config::default().apply_settings(&[bad]).unwrap_err().to_string();
    assert!(err.contains("findings.connection_churn.min_connections") && err.contains("--set"), "{err}");
}

#[test]
fn report_snapshot_keys_come_from_the_environment_and_flags() {
    let mut config = Config::default();
    let (mut settings, unknown) = env_settings(vars(&[
        ("RTTSCOPE_REPORT_EVERY", "30s"),
        ("RTTSCOPE_REPORT_DIR", "/var/tmp/snapshots"),
        ("RTTSCOPE_REPORT_WINDOW_MAX", "2h"),
    ]));
    assert!(unknown.is_empty(), "{unknown:?}");
    settings.push(flag_setting("report.keep=5").unwrap());
    settings.push(flag_setting("report.window_resolution=2m").unwrap());
    config.apply_settings(&settings).unwrap();
    assert_eq!(config.report.snapshots(), Some((std::time::Duration::from_secs(30), "/var/tmp/snapshots".as_ref())));
    assert_eq!(config.report.keep, 5);
    assert_eq!(
        (config.report.window_max, config.report.window_resolution),
        (HumanDuration::from_secs(7200), HumanDuration::from_secs(120))
    );

    // `every` without `dir` is refused, naming the key and where the value came from.
    let (settings, _) = env_settings(vars(&[("RTTSCOPE_REPORT_EVERY", "30s")]));
    let err = Config::default().apply_settings(&settings).unwrap_err().to_string();
    assert!(err.contains("report.dir") && err.contains("must be set when report.every is"), "{err}");
}
