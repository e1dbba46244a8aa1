//! How a test sees each leg of a proxied connection, from three sides: the client's own view
//! (the `mariadb` CLI's `status`), the server's (its session status, `Ssl_version` and
//! `Compression`, which describe the long hop), and rttscope's (`/connections`, `/metrics`).

use std::collections::BTreeMap;
use std::fs::File;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result};
use rttscope::admin::LiveConnectionView;

use crate::clients::{self, Output};
use crate::proxy::TestProxy;

/// How long one client program may run.
pub const LIMIT: Duration = Duration::from_secs(180);

/// Runs a `mariadb` CLI command to the end (killed after [`LIMIT`]), with `script` on stdin
/// if given (else stdin closed).
pub fn run_cli(mut cmd: Command, script: Option<&Path>) -> Output {
    let stdin = match script {
        Some(path) => Stdio::from(File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))),
        None => Stdio::null(),
    };
    cmd.stdin(stdin).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    clients::wait_with_output(child, LIMIT).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Like [`run_cli`], and the client must succeed: its stdout.
pub fn run_cli_ok(cmd: Command, script: Option<&Path>) -> String {
    let out = run_cli(cmd, script);
    assert!(out.status.success(), "{}\n--- stdout\n{}\n--- stderr\n{}", out.status, out.stdout, out.stderr);
    out.stdout
}

/// What the `mariadb` CLI's `status` (`\s`) says about its own connection: the client's leg.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliView {
    /// `Cipher in use is X`: the cipher; `Not in use`: none.
    pub tls_cipher: Option<String>,
    /// `Protocol: Compressed` is printed only for a compressed connection.
    pub compressed: bool,
}

impl CliView {
    /// Reads the `status` block in `stdout`; panics if there is none.
    pub fn parse(stdout: &str) -> CliView {
        let ssl = stdout
            .lines()
            .find_map(|l| l.strip_prefix("SSL:"))
            .unwrap_or_else(|| panic!("no SSL: line (no status output?) in:\n{stdout}"))
            .trim();
        let tls_cipher = match ssl.strip_prefix("Cipher in use is ") {
            Some(cipher) => Some(cipher.split_whitespace().next().unwrap_or_default().to_owned()),
            None if ssl == "Not in use" => None,
            None => panic!("unexpected SSL: line {ssl:?}"),
        };
        let compressed = stdout.lines().any(|l| l.starts_with("Protocol:") && l.contains("Compressed"));
        CliView { tls_cipher, compressed }
    }
}

/// The value of `name` in the CLI's batch output of `SHOW STATUS LIKE 'name'` (`name\tvalue`).
pub fn status_value(stdout: &str, name: &str) -> String {
    let prefix = format!("{name}\t");
    let line = stdout.lines().find_map(|l| l.strip_prefix(&prefix));
    line.unwrap_or_else(|| panic!("no {name} in:\n{stdout}")).to_owned()
}

/// `GET path` from the admin API at `admin`.
pub fn admin_get(admin: SocketAddr, path: &str) -> Result<String> {
    rttscope::cli::admin_client::get(&format!("http://{admin}"), path).with_context(|| format!("GET {path}"))
}

/// `/connections`.
pub fn connections(admin: SocketAddr) -> Vec<LiveConnectionView> {
    let body = admin_get(admin, "/connections").unwrap_or_else(|e| panic!("{e:#}"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("/connections: {e}\n{body}"))
}

/// Every sample of the family `name` in the Prometheus text `metrics`, by its label set
/// (`leg="client",transport="tls"` as written, in order), without the `service` label that
/// every series of a process carries alike.
pub fn samples(metrics: &str, name: &str) -> BTreeMap<String, f64> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(r) => {
                    let (labels, value) = r.split_once('}')?;
                    // Every series carries the process's one `service`: keyed without it.
                    let rest: Vec<&str> = labels.split(',').filter(|l| !l.starts_with("service=\"")).collect();
                    (rest.join(","), value)
                }
                None if rest.starts_with(' ') => (String::new(), rest),
                None => return None,
            };
            Some((labels, value.trim().parse().ok()?))
        })
        .collect()
}

/// `rttscope_logins_total` as `(leg, transport, compression) -> count`, zeros left out.
pub fn logins(admin: SocketAddr) -> BTreeMap<(String, String, String), u64> {
    let metrics = admin_get(admin, "/metrics").unwrap_or_else(|e| panic!("{e:#}"));
    let label = |labels: &str, key: &str| {
        let found = labels.split(',').find_map(|kv| kv.strip_prefix(&format!("{key}=\"")));
        found.map(|v| v.trim_end_matches('"').to_owned()).unwrap_or_default()
    };
    samples(&metrics, "rttscope_logins_total")
        .into_iter()
        .filter(|(_, n)| *n > 0.0)
        .map(|(l, n)| ((label(&l, "leg"), label(&l, "transport"), label(&l, "compression")), n as u64))
        .collect()
}

/// The sum of `rttscope_protocol_desyncs_total` over every reason.
pub fn desyncs(admin: SocketAddr) -> u64 {
    let metrics = admin_get(admin, "/metrics").unwrap_or_else(|e| panic!("{e:#}"));
    samples(&metrics, "rttscope_protocol_desyncs_total").values().sum::<f64>() as u64
}

/// rttscope closed no connection for a protocol error and never lost its place in one.
pub fn assert_in_step(proxy: &TestProxy) {
    let stats = proxy.stats();
    let errors = stats.protocol_errors.load(Ordering::Relaxed);
    let desyncs: Vec<_> = stats.desync_counts().filter(|(_, n)| *n > 0).collect();
    assert_eq!((errors, desyncs), (0, vec![]), "(protocol errors, desyncs by reason): see rttscope's log");
}
