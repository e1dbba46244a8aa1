//! The process under test as a child: which binary, started how, reached where. The process
//! itself (log, CPU time, memory, kill on drop) is the harness's `ListeningChild`; what is
//! decided here is the command line: rttscope with a generated config (`listen: unix:PATH`
//! for a Unix-socket leg), the raw-pipe baseline (this very executable in another
//! mode), or HAProxy with a generated config; each perhaps under a [`Wrapper`] such as
//! valgrind.

use std::ffi::OsString;
use std::fmt;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use mysql_async::OptsBuilder;
use rttscope::cli::admin_client::AdminClient;
use rttscope_integration_tests::legs::samples;
use rttscope_integration_tests::mariadb::{DB, NATIVE, TestDb};
use rttscope_integration_tests::process::{ListeningChild, free_port, rttscope_binary};

use crate::haproxy;
use crate::scenario::{Leg, Program, Scenario, Tls};

/// The rttscope binary to benchmark: `explicit` if given; for a test executable (in
/// `deps/`) the harness's; else the `rttscope` next to this executable, rebuilt first when
/// cargo started us (a stale binary would benchmark old code; fresh, the build is a no-op).
pub fn resolve_binary(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        if !path.is_file() {
            bail!("--proxy-bin {}: no such file", path.display());
        }
        return Ok(path.to_owned());
    }
    let exe = std::env::current_exe().context("locating this executable")?;
    let dir = exe.parent().context("this executable has no directory")?;
    if dir.file_name().is_some_and(|n| n == "deps") {
        return rttscope_binary().map(Path::to_owned);
    }
    let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("release");
    if let Ok(cargo) = std::env::var("CARGO") {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let mut build = Command::new(cargo);
        build.args(["build", "--quiet", "-p", "rttscope", "--bin", "rttscope", "--manifest-path"]).arg(&manifest);
        if profile == "release" {
            build.arg("--release");
        }
        let status = build.status().context("running cargo build for the rttscope binary")?;
        if !status.success() {
            bail!("cargo build of the rttscope binary failed ({status})");
        }
    }
    let binary = dir.join("rttscope");
    if !binary.is_file() {
        bail!(
            "{} not found: build it with `cargo build --release -p rttscope` (scripts/bench.sh does), \
             or pass --proxy-bin FILE",
            binary.display()
        );
    }
    Ok(binary)
}

/// The raw pipe is this very executable in another mode, so only `rttscope-bench` has it.
fn pipe_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating this executable")?;
    if !exe.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("rttscope-bench")) {
        bail!("the raw-pipe scenario runs only from the rttscope-bench binary, not {}", exe.display());
    }
    Ok(exe)
}

/// The binaries the scenarios run.
#[derive(Clone, Debug)]
pub struct Programs {
    pub rttscope: PathBuf,
    /// `None` when HAProxy was left out (`--no-haproxy`).
    pub haproxy: Option<PathBuf>,
    /// In a `--tls` run, the certificate and key rttscope shows clients that ask for TLS
    /// (`listen.tls`): signed by the run's test CA, which the bench's TLS clients trust.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

impl Programs {
    pub fn rttscope(binary: &Path) -> Programs {
        Programs { rttscope: binary.to_owned(), haproxy: None, client_cert: None }
    }
}

/// A program the process runs under, e.g. `valgrind --tool=callgrind …`: the wrapped
/// command's program and arguments follow these.
#[derive(Clone, Debug)]
pub struct Wrapper {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

/// Where clients connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Endpoint {
    /// Options for the fixture user through this endpoint, default database the fixtures'.
    pub fn opts(&self, db: &TestDb) -> OptsBuilder {
        match self {
            Endpoint::Tcp(addr) => db.opts_via(*addr, NATIVE.user, NATIVE.password),
            // `rtt_native@localhost` has the same password as `@'%'`.
            Endpoint::Unix(path) => OptsBuilder::default()
                .socket(Some(path.to_string_lossy()))
                .user(Some(NATIVE.user))
                .pass(Some(NATIVE.password))
                .db_name(Some(DB)),
        }
    }

    /// Whether something accepts connections here now.
    fn accepts(&self) -> bool {
        match self {
            Endpoint::Tcp(addr) => TcpStream::connect(addr).is_ok(),
            Endpoint::Unix(path) => UnixStream::connect(path).is_ok(),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(addr) => write!(f, "{addr}"),
            Endpoint::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// A running proxy (rttscope, the raw pipe or HAProxy); killed on drop.
pub struct ProxyChild {
    process: ListeningChild,
    endpoint: Endpoint,
    /// rttscope's admin address (none for the other programs).
    admin: Option<SocketAddr>,
    /// The config file and any Unix socket live here, as long as the process.
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for ProxyChild {
    type Target = ListeningChild;
    fn deref(&self) -> &ListeningChild {
        &self.process
    }
}

impl std::ops::DerefMut for ProxyChild {
    fn deref_mut(&mut self) -> &mut ListeningChild {
        &mut self.process
    }
}

impl ProxyChild {
    /// Starts what `scenario` runs forwarding to `upstream`, and waits until it accepts
    /// connections.
    pub fn start(programs: &Programs, upstream: SocketAddr, scenario: &Scenario) -> Result<ProxyChild> {
        Self::start_under(programs, upstream, scenario, None)
    }

    /// Like [`ProxyChild::start`], run under `wrapper` if given.
    pub fn start_under(
        programs: &Programs,
        upstream: SocketAddr,
        scenario: &Scenario,
        wrapper: Option<&Wrapper>,
    ) -> Result<ProxyChild> {
        let dir = tempfile::Builder::new().prefix("rttscope-bench-").tempdir()?;
        let tcp = || Endpoint::Tcp(SocketAddr::from(([127, 0, 0, 1], free_port())));
        let command = |program: &Path| match wrapper {
            Some(w) => {
                let mut command = Command::new(&w.program);
                command.args(&w.args).arg(program);
                command
            }
            None => Command::new(program),
        };
        let mut admin_addr = None;
        let (mut command, endpoint) = match (scenario.program, scenario.leg) {
            (Program::Rttscope, leg) => {
                let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
                admin_addr = Some(admin);
                let mut command = command(&programs.rttscope);
                let (endpoint, listen_key) = match leg {
                    Leg::Tcp if scenario.tls.client => {
                        let (cert, key) = programs
                            .client_cert
                            .as_ref()
                            .with_context(|| format!("scenario {:?} needs a --tls run", scenario.name))?;
                        let endpoint = tcp();
                        (endpoint.clone(), client_tls_listen_yaml(&endpoint, cert, key))
                    }
                    Leg::Tcp => {
                        let endpoint = tcp();
                        let key = format!("listen: {endpoint}\n");
                        (endpoint, key)
                    }
                    // In the file, as a user writes it.
                    Leg::Unix => {
                        let path = dir.path().join("rttscope.sock");
                        let key = unix_listen_yaml(&path);
                        (Endpoint::Unix(path), key)
                    }
                };
                let config = dir.path().join("rttscope.yaml");
                let yaml =
                    format!("{listen_key}admin: {admin}\n{}{}", upstream_yaml(upstream, &scenario.tls), scenario.yaml);
                std::fs::write(&config, yaml).with_context(|| format!("writing {}", config.display()))?;
                command.arg("--config").arg(&config);
                if wrapper.is_some() {
                    // Under callgrind (f), polling before sleeping would count its spin as
                    // the relay's work, at valgrind's pace: f counts the work itself.
                    command.arg("--set").arg("relay.idle_poll=0");
                }
                (command, endpoint)
            }
            (Program::RawPipe, Leg::Tcp) => {
                let endpoint = tcp();
                let mut command = command(&pipe_binary()?);
                command.arg("--raw-pipe-listen").arg(endpoint.to_string());
                command.arg("--raw-pipe-upstream").arg(upstream.to_string());
                (command, endpoint)
            }
            (Program::Haproxy, leg) => {
                let binary = programs.haproxy.as_deref().context("HAProxy was left out (--no-haproxy)")?;
                let endpoint = match leg {
                    Leg::Tcp => tcp(),
                    Leg::Unix => Endpoint::Unix(dir.path().join("haproxy.sock")),
                };
                let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
                let config = dir.path().join("haproxy.cfg");
                std::fs::write(&config, haproxy::config(&endpoint, upstream, threads))
                    .with_context(|| format!("writing {}", config.display()))?;
                let mut command = command(binary);
                command.args(haproxy::args(&config));
                (command, endpoint)
            }
            (program, leg) => bail!("scenario {:?}: no process runs {program:?} over {leg:?}", scenario.name),
        };
        command.env("NO_COLOR", "1").envs(scenario.env.iter().map(|(k, v)| (k, v)));
        // The scenario's `log.level` decides, unless the caller asked for a level on purpose.
        match std::env::var("RTTSCOPE_BENCH_LOG") {
            Ok(level) => command.env("RUST_LOG", level),
            Err(_) => command.env_remove("RUST_LOG"),
        };
        // `ListeningChild` keeps a TCP address for show; a Unix side's is never dialled.
        let shown = match &endpoint {
            Endpoint::Tcp(addr) => *addr,
            Endpoint::Unix(_) => SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let ready = || endpoint.accepts();
        let process = ListeningChild::spawn(command, shown, &ready).map_err(|e| match &endpoint {
            Endpoint::Unix(path) if scenario.program == Program::Rttscope => {
                e.context(format!("rttscope with `listen: unix:{}` did not start", path.display()))
            }
            _ => e,
        })?;
        Ok(ProxyChild { process, endpoint, admin: admin_addr, _dir: dir })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// What rttscope's polling before sleeping (`relay.idle_poll`) has done so far, from its
    /// `/metrics`, and its CPU time; `None` for the other programs.
    pub async fn idle_poll(&self) -> Result<Option<IdlePoll>> {
        let Some(admin) = self.admin else { return Ok(None) };
        let cpu_seconds = self.cpu_time()?.as_secs_f64();
        let url = format!("http://{admin}");
        let metrics = tokio::task::spawn_blocking(move || AdminClient::new(&url, None).get("/metrics"))
            .await?
            .context("GET /metrics")?;
        let seconds = samples(&metrics, "rttscope_idle_poll_seconds_total").get("").copied().unwrap_or(0.0);
        let polls = samples(&metrics, "rttscope_idle_polls_total");
        let count = |outcome: &str| polls.get(&format!("outcome=\"{outcome}\"")).map_or(0, |n| *n as u64);
        Ok(Some(IdlePoll {
            seconds,
            cpu_seconds,
            caught: count("caught"),
            missed: count("missed"),
            crowded: count("crowded"),
            unpaid: count("unpaid"),
        }))
    }
}

/// rttscope's `relay.idle_poll` counters: seconds spent polling, and how the idle moments
/// with the window open went (a poll caught work, a poll ran out and the thread slept, the
/// machine was too busy to poll, or polling did not shorten the application's cycle).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct IdlePoll {
    pub seconds: f64,
    /// The proxy's CPU time over the same span, polling included.
    pub cpu_seconds: f64,
    pub caught: u64,
    pub missed: u64,
    pub crowded: u64,
    pub unpaid: u64,
}

impl IdlePoll {
    /// What happened between `before` and this.
    pub fn since(self, before: IdlePoll) -> IdlePoll {
        IdlePoll {
            seconds: self.seconds - before.seconds,
            cpu_seconds: self.cpu_seconds - before.cpu_seconds,
            caught: self.caught.saturating_sub(before.caught),
            missed: self.missed.saturating_sub(before.missed),
            crowded: self.crowded.saturating_sub(before.crowded),
            unpaid: self.unpaid.saturating_sub(before.unpaid),
        }
    }
}

impl std::ops::Add for IdlePoll {
    type Output = IdlePoll;
    fn add(self, other: IdlePoll) -> IdlePoll {
        IdlePoll {
            seconds: self.seconds + other.seconds,
            cpu_seconds: self.cpu_seconds + other.cpu_seconds,
            caught: self.caught + other.caught,
            missed: self.missed + other.missed,
            crowded: self.crowded + other.crowded,
            unpaid: self.unpaid + other.unpaid,
        }
    }
}

impl std::iter::Sum for IdlePoll {
    fn sum<I: Iterator<Item = IdlePoll>>(runs: I) -> IdlePoll {
        runs.fold(IdlePoll::default(), |a, b| a + b)
    }
}

/// rttscope's `listen` key at `endpoint` with TLS for clients by `cert` and `key` (PEM files).
pub fn client_tls_listen_yaml(endpoint: &Endpoint, cert: &Path, key: &Path) -> String {
    format!(
        "listen:\n  address: {endpoint}\n  tls:\n    mode: required\n    cert: {}\n    key: {}\n",
        cert.display(),
        key.display()
    )
}

/// rttscope's `upstream` key: the address, and `tls.mode` when the scenario sets it.
pub fn upstream_yaml(upstream: SocketAddr, tls: &Tls) -> String {
    match tls.upstream_mode {
        None => format!("upstream: {upstream}\n"),
        Some(mode) => format!("upstream:\n  address: {upstream}\n  tls:\n    mode: {mode}\n"),
    }
}

/// rttscope's `listen` key for a Unix socket at `path`.
pub fn unix_listen_yaml(path: &Path) -> String {
    format!("listen: unix:{}\n", path.display())
}

/// Fails with a clear message when `rttscope` cannot listen on a Unix socket, as builds
/// before Unix-socket listening cannot: `rttscope check-config` on a file with `listen:
/// unix:PATH` (nothing is bound), before the bench starts MariaDB.
pub fn accepts_unix_listen(rttscope: &Path, path: &Path, scenario: &str) -> Result<()> {
    let dir = tempfile::Builder::new().prefix("rttscope-bench-probe-").tempdir()?;
    let config = dir.path().join("rttscope.yaml");
    std::fs::write(&config, unix_listen_yaml(path)).with_context(|| format!("writing {}", config.display()))?;
    let out = Command::new(rttscope)
        .arg("check-config")
        .arg(&config)
        .output()
        .with_context(|| format!("running {}", rttscope.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!(
            "{} does not accept `listen: unix:PATH` (it has no Unix-socket listener yet): {}\n\
             Leave out --scenario {scenario}.",
            rttscope.display(),
            stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rttscope_config::{Config, ListenAddr, UpstreamTlsMode};

    #[test]
    fn upstream_tls_mode_is_written_where_rttscope_reads_it() {
        let upstream = SocketAddr::from(([127, 0, 0, 1], 3306));
        let read = |tls: Tls| {
            let yaml = format!("listen: 127.0.0.1:6033\n{}", upstream_yaml(upstream, &tls));
            Config::from_yaml(&yaml).unwrap_or_else(|e| panic!("{yaml}: {e}")).upstream
        };
        assert_eq!(read(Tls::PLAIN).tls.mode, UpstreamTlsMode::Preferred, "the default");
        let required = read(Tls { upstream_mode: Some("required"), ..Tls::UPSTREAM });
        assert_eq!(
            (required.tls.mode, required.address.to_string()),
            (UpstreamTlsMode::Required, "127.0.0.1:3306".into())
        );
        assert_eq!(read(Tls { upstream_mode: Some("disabled"), ..Tls::PLAIN }).tls.mode, UpstreamTlsMode::Disabled);
    }

    #[test]
    fn unix_listen_is_written_where_rttscope_reads_it() {
        let path = Path::new("/tmp/rttscope-bench-x/rttscope.sock");
        let yaml = format!("{}upstream: 127.0.0.1:3306\n", unix_listen_yaml(path));
        let config = Config::from_yaml(&yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        assert_eq!(config.listen.address, [ListenAddr::Unix(path.to_owned())]);
    }
}
