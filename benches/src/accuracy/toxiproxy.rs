//! Toxiproxy, the tool teams reach for today to add latency, run through e's probes beside
//! rttscope: one `toxiproxy-server` process, one Toxiproxy proxy per probe (so the round
//! trips can take turns with rttscope's exactly as rttscope's links do), set up through its
//! HTTP API.
//!
//! Toxiproxy's `latency` toxic takes whole milliseconds, so each link's whole RTT goes on
//! the downstream (server → client) side: for a request/response exchange that adds the
//! same time as rtt/2 each way, and `1 ms` stays expressible. Its `bandwidth` toxic takes
//! KB/s (10^3 bytes). It has nothing that limits bytes in flight per round trip, so the
//! window probe has no Toxiproxy figure.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rttscope_integration_tests::process::{ListeningChild, free_port};

/// The binary `scripts/build-toxiproxy.sh` writes, relative to the workspace root.
pub const DEFAULT_BINARY: &str = "target/toxiproxy/toxiproxy-server";
/// Names a `toxiproxy-server` binary elsewhere.
pub const BINARY_ENV: &str = "TOXIPROXY_SERVER";

/// The Toxiproxy binary to run: `explicit`, else `$TOXIPROXY_SERVER`, else the one
/// `scripts/build-toxiproxy.sh` builds, if it is there. `None`: e reports Toxiproxy as not run.
pub fn find(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_owned());
    }
    if let Some(path) = std::env::var_os(BINARY_ENV) {
        return Some(PathBuf::from(path));
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(DEFAULT_BINARY);
    built.is_file().then_some(built)
}

/// One Toxiproxy link: where it listens and what it is configured with.
pub struct ToxiproxyLink {
    pub listen: SocketAddr,
    /// What the table shows, e.g. `latency 15 ms downstream`.
    pub configured: String,
}

/// A running `toxiproxy-server`, killed on drop, and its version.
pub struct Toxiproxy {
    api: SocketAddr,
    pub version: String,
    _process: ListeningChild,
}

impl Toxiproxy {
    pub fn start(binary: &Path) -> Result<Toxiproxy> {
        if !binary.is_file() {
            bail!("Toxiproxy: {} not found (build it with scripts/build-toxiproxy.sh)", binary.display());
        }
        let version = Command::new(binary)
            .arg("-version")
            .output()
            .with_context(|| format!("running {} -version", binary.display()))?;
        let version =
            String::from_utf8_lossy(&version.stdout).trim().rsplit(' ').next().unwrap_or("unknown").to_owned();
        let api = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut command = Command::new(binary);
        command.args(["-host", "127.0.0.1", "-port"]).arg(api.port().to_string());
        let ready = || TcpStream::connect(api).is_ok();
        let process = ListeningChild::spawn(command, api, &ready).context("starting toxiproxy-server")?;
        Ok(Toxiproxy { api, version, _process: process })
    }

    /// A proxy named `name` to `upstream` with `toxics` (JSON objects of the API) in order.
    pub fn link(&self, name: &str, upstream: SocketAddr, toxics: &[String], configured: &str) -> Result<ToxiproxyLink> {
        let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let proxy = format!(r#"{{"name":"{name}","listen":"{listen}","upstream":"{upstream}","enabled":true}}"#);
        self.post("/proxies", &proxy)?;
        for toxic in toxics {
            self.post(&format!("/proxies/{name}/toxics"), toxic)?;
        }
        Ok(ToxiproxyLink { listen, configured: configured.to_owned() })
    }

    fn post(&self, path: &str, body: &str) -> Result<()> {
        let url = format!("http://{}{path}", self.api);
        let agent: ureq::Agent =
            ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(10))).build().into();
        agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(body)
            .with_context(|| format!("Toxiproxy API: POST {path} {body}"))?;
        Ok(())
    }
}

/// A `latency` toxic on the downstream side, in whole milliseconds.
pub fn latency(name: &str, rtt: Duration) -> String {
    format!(
        r#"{{"name":"{name}","type":"latency","stream":"downstream","toxicity":1.0,"attributes":{{"latency":{},"jitter":0}}}}"#,
        rtt.as_millis()
    )
}

/// A `bandwidth` toxic on the downstream side; Toxiproxy counts KB/s of 10^3 bytes.
pub fn bandwidth(name: &str, bits_per_second: u64) -> String {
    format!(
        r#"{{"name":"{name}","type":"bandwidth","stream":"downstream","toxicity":1.0,"attributes":{{"rate":{}}}}}"#,
        bits_per_second / 8 / 1000
    )
}
