//! The proxy under test as a child process: which binary, started how. The process itself
//! (log, CPU time, memory, kill on drop) is the harness's `ListeningChild`; what differs here
//! is the binary (`rttscope-bench` sits one level below its profile directory, a test two)
//! and the raw-pipe baseline, which is this very executable in another mode.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use rttscope_integration_tests::process::{free_port, rttscope_binary, ListeningChild, ProxyProcess};

use crate::scenario::{Program, Scenario};

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

/// A running proxy (rttscope or the raw pipe); killed on drop.
pub enum ProxyChild {
    Rttscope(ProxyProcess),
    RawPipe(ListeningChild),
}

impl std::ops::Deref for ProxyChild {
    type Target = ListeningChild;
    fn deref(&self) -> &ListeningChild {
        match self {
            ProxyChild::Rttscope(p) => p,
            ProxyChild::RawPipe(p) => p,
        }
    }
}

impl std::ops::DerefMut for ProxyChild {
    fn deref_mut(&mut self) -> &mut ListeningChild {
        match self {
            ProxyChild::Rttscope(p) => p,
            ProxyChild::RawPipe(p) => p,
        }
    }
}

impl ProxyChild {
    /// Starts what `scenario` runs (`rttscope` with the scenario's YAML appended to its
    /// config, or the raw pipe) forwarding to `upstream`, and waits until it accepts
    /// connections.
    pub fn start(rttscope: &Path, upstream: SocketAddr, scenario: &Scenario) -> Result<ProxyChild> {
        let environment = |command: &mut Command| {
            command.env("NO_COLOR", "1").envs(scenario.env.iter().map(|(k, v)| (k, v)));
            // The scenario's `log.level` decides, unless the caller asked for a level on purpose.
            match std::env::var("RTTSCOPE_BENCH_LOG") {
                Ok(level) => command.env("RUST_LOG", level),
                Err(_) => command.env_remove("RUST_LOG"),
            };
        };
        match scenario.program {
            Program::Rttscope => {
                let yaml = format!("upstream: {upstream}\n{}", scenario.yaml);
                ProxyProcess::start_with(rttscope, &yaml, environment).map(ProxyChild::Rttscope)
            }
            Program::RawPipe => {
                let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
                let mut command = Command::new(pipe_binary()?);
                command.arg("--raw-pipe-listen").arg(listen.to_string());
                command.arg("--raw-pipe-upstream").arg(upstream.to_string());
                environment(&mut command);
                let ready = || TcpStream::connect(listen).is_ok();
                ListeningChild::spawn(command, listen, &ready).map(ProxyChild::RawPipe)
            }
        }
    }
}
