//! rttscope's own log as a service's: the real binary, its stderr a pipe as under systemd or
//! a container runtime. No colour codes there; `--log-format json` (or `log.format: json`)
//! gives one JSON object per line; the start-up lines give sizes as sizes.

use std::path::Path;
use std::time::Duration;

use rttscope::human;
use rttscope_config::Config;
use rttscope_integration_tests::process::{ProxyProcess, rttscope_binary};
use serde_json::Value;

fn binary() -> &'static Path {
    rttscope_binary().unwrap_or_else(|e| panic!("{e:#}"))
}

/// Runs rttscope until ready, stops it with SIGTERM, and returns everything it logged.
fn log_of_a_run(yaml: &str, configure: impl FnOnce(&mut std::process::Command)) -> String {
    let mut proxy = ProxyProcess::start_with(binary(), yaml, configure).unwrap_or_else(|e| panic!("{e:#}"));
    proxy.signal(libc::SIGTERM).unwrap();
    let status = proxy.wait_timeout(Duration::from_secs(20)).unwrap();
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{}", proxy.log());
    proxy.log()
}

#[test]
fn no_colour_codes_when_stderr_is_not_a_terminal() {
    // The harness sets NO_COLOR for every process; this run goes without it.
    let log = log_of_a_run("", |cmd| {
        cmd.env_remove("NO_COLOR");
    });
    assert!(log.contains("rttscope ready"), "{log}");
    assert!(!log.contains('\u{1b}'), "ANSI escape codes in a piped log:\n{log:?}");
}

#[test]
fn json_log_format_gives_one_object_per_line_from_the_flag_or_the_config() {
    let by_flag = log_of_a_run("", |cmd| {
        cmd.args(["--log-format", "json"]);
    });
    let by_config = log_of_a_run("log:\n  format: json\n", |_| {});
    let defaults = Config::default();
    for log in [by_flag, by_config] {
        let lines: Vec<Value> = log
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON object ({e}): {line}")))
            .collect();
        for line in &lines {
            assert!(line["timestamp"].is_string() && line["level"].is_string(), "{line}");
        }
        let ready = lines.iter().find(|l| l["fields"]["message"] == "rttscope ready").expect("a ready line");
        let size = |b: u64| Value::from(human::size(b));
        assert_eq!(ready["fields"]["buffer_size"], size(defaults.relay.buffer_size.0), "{ready}");
        assert_eq!(ready["fields"]["buffer_budget"], size(defaults.limits.buffer_budget.0), "{ready}");
        assert_eq!(ready["fields"]["idle_poll"], "100us", "{ready}");
        assert_eq!(ready["fields"]["sched_batch"], true, "{ready}");
        assert!(lines.iter().any(|l| l["fields"]["message"] == "rttscope stopped"), "{log}");
    }
}

#[test]
fn start_up_lines_give_sizes_as_sizes() {
    let log = log_of_a_run("relay:\n  buffer_size: 64KiB\nlimits:\n  buffer_budget: 4MiB\n", |_| {});
    let line = |message: &str| {
        log.lines().find(|l| l.contains(message)).unwrap_or_else(|| panic!("no {message:?} line in\n{log}"))
    };
    let ready = line("rttscope ready");
    assert!(ready.contains("buffer_size=64 KiB") && ready.contains("buffer_budget=4 MiB"), "{ready}");
    assert!(ready.contains("upstream.tls=preferred"), "as the config file spells it: {ready}");
    let limits = line("TCP buffer limits on this host");
    for debug_shape in ["Some(", "[", "None"] {
        assert!(!limits.contains(debug_shape), "{debug_shape:?} in {limits}");
    }
    // This host's sysctls are whatever they are; each is a size or says it is unknown.
    assert!(limits.contains("tcp_rmem=min ") || limits.contains("tcp_rmem=unknown"), "{limits}");
    assert!(limits.contains("iB") || limits.contains("unknown"), "{limits}");
}
