//! rttscope's configuration: the YAML file's types, defaults and validation.
//!
//! Parse with [`Config::from_yaml`] (or [`Config::load`], a thin wrapper that reads a file),
//! which deserializes and then runs [`Config::validate`]. Every key has a default, so an empty
//! file is a valid config; unknown keys are errors. The field docs below are the reference
//! for each key; `config/examples/rttscope.yaml` shows them all with their defaults.
//!
//! Errors name the key path, the line when known, and the reason
//! (`line 12: inject.rtt: invalid duration '-5ms': must not be negative`).
//!
//! Modules:
//! - `units`: human units ([`HumanDuration`] `15ms`, [`ByteSize`] `16KiB`,
//!   [`Bandwidth`] `34mbit`, [`Percent`] `25%`).
//! - `addr`: [`UpstreamAddr`] (`host:port`, resolved by the proxy) and listen addresses.
//! - `sections`: `limits`, `relay`, `log`, `record`, `report`, `link`.
//! - `findings`: detector thresholds and what-if [`Scenario`]s.
//! - `inject`: the emulated link, also parsed alone from JSON by the admin API.
//! - `parse`: YAML/JSON to types with key paths and lines; serde's messages made human.
//! - `error`: [`ConfigError`] and [`Problem`].
#![warn(missing_docs)]

mod addr;
mod error;
mod findings;
mod inject;
mod parse;
mod sections;
mod units;

#[cfg(test)]
mod tests;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use addr::UpstreamAddr;
pub use error::{ConfigError, Problem};
pub use findings::{
    ChattyConfig, FetchConfig, FindingsConfig, NPlusOneConfig, PaginationConfig,
    RepeatedWriteConfig, Scenario,
};
pub use inject::{Direction, DirectionOverride, Inject, OneWay, Scope};
pub use sections::{
    LimitsConfig, LinkConfig, LogConfig, LogFormat, RecordConfig, RelayConfig, ReportConfig,
    ReportFormat,
};
pub use units::{Bandwidth, ByteSize, HumanDuration, Percent, ValueError};

use error::{Checker, into_result};

/// The whole configuration file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the MySQL listener binds; point the application here. An IP and port
    /// (`0.0.0.0:6033` for all interfaces). Default `127.0.0.1:6033`.
    #[serde(deserialize_with = "addr::socket_addr")]
    pub listen: SocketAddr,
    /// Address of the admin HTTP API (`/metrics`, `/report`, `/inject`, ...). An IP and
    /// port. Default `127.0.0.1:6070`.
    #[serde(deserialize_with = "addr::socket_addr")]
    pub admin: SocketAddr,
    /// The MySQL or MariaDB server to forward to, as `host:port`; the name is resolved
    /// on every connect. Default `127.0.0.1:3306`.
    pub upstream: UpstreamAddr,
    /// Connection limits and timeouts.
    pub limits: LimitsConfig,
    /// Byte forwarding.
    pub relay: RelayConfig,
    /// rttscope's own logging.
    pub log: LogConfig,
    /// Per-command recording and per-fingerprint aggregates.
    pub record: RecordConfig,
    /// The report written on shutdown.
    pub report: ReportConfig,
    /// Detector thresholds and what-if scenarios.
    pub findings: FindingsConfig,
    /// Upstream TCP link observation.
    pub link: LinkConfig,
    /// Latency injection (the emulated link). Default: off. Can be replaced at run time
    /// with `PUT /inject`.
    pub inject: Inject,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 6033)),
            admin: SocketAddr::from((Ipv4Addr::LOCALHOST, 6070)),
            upstream: UpstreamAddr::default(),
            limits: LimitsConfig::default(),
            relay: RelayConfig::default(),
            log: LogConfig::default(),
            record: RecordConfig::default(),
            report: ReportConfig::default(),
            findings: FindingsConfig::default(),
            link: LinkConfig::default(),
            inject: Inject::default(),
        }
    }
}

/// Command-line flags that replace values from the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--listen ADDR`.
    pub listen: Option<SocketAddr>,
    /// `--upstream HOST:PORT`.
    pub upstream: Option<UpstreamAddr>,
    /// `--admin ADDR`.
    pub admin: Option<SocketAddr>,
}

impl Config {
    /// Parses YAML text and validates it. An empty document gives the defaults.
    ///
    /// A malformed document is [`ConfigError::Syntax`]; an unknown key or a bad value is
    /// [`ConfigError::Invalid`] (the first one only: serde stops there); if everything
    /// parses, all range and cross-field problems come together as
    /// [`ConfigError::Problems`].
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = parse::from_yaml(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Reads `path` and parses it with [`Config::from_yaml`]. Print errors with
    /// `err.with_source_name(path)` to get `rttscope.yaml:12: ...`.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        Config::from_yaml(&text)
    }

    /// Checks every range and cross-field rule and reports all problems at once, each with
    /// its key path.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        let mut c = Checker::new(&mut problems);
        // Port 0 (pick any free port) is fine for both, as tests do.
        if self.listen == self.admin && self.listen.port() != 0 {
            c.problem(
                "admin",
                format!("must differ from listen ({})", self.listen),
            );
        }
        self.limits.check(&mut c.at("limits"));
        self.relay.check(&mut c.at("relay"));
        self.log.check(&mut c.at("log"));
        self.record.check(&mut c.at("record"));
        self.report.check(&mut c.at("report"));
        self.findings.check(&mut c.at("findings"));
        self.link.check(&mut c.at("link"));
        self.inject.check(&mut c.at("inject"));
        into_result(problems)
    }

    /// Applies command-line flags over the file's values (flags win), then validates again,
    /// since a flag can clash with the file (e.g. `--admin` equal to `listen`).
    pub fn apply_overrides(&mut self, overrides: Overrides) -> Result<(), ConfigError> {
        let Overrides {
            listen,
            upstream,
            admin,
        } = overrides;
        if let Some(listen) = listen {
            self.listen = listen;
        }
        if let Some(upstream) = upstream {
            self.upstream = upstream;
        }
        if let Some(admin) = admin {
            self.admin = admin;
        }
        self.validate()
    }
}
