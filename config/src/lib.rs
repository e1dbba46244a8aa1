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
//! - `sections`: `limits`, `relay`, `log`, `metrics`, `record`, `sql_view`, `link`.
//! - `report`: the final report, periodic snapshots and rolling windows.
//! - `findings`: detector thresholds and what-if [`Scenario`]s.
//! - `inject`: the emulated link, also parsed alone from JSON by the admin API.
//! - `layers`: `RTTSCOPE_*` environment variables and `--set KEY=VALUE` flags over the file.
//! - `parse`: YAML/JSON to types with key paths and lines; serde's messages made human.
//! - `error`: [`ConfigError`] and [`Problem`].
#![warn(missing_docs)]

mod addr;
mod admin;
mod endpoints;
mod error;
mod findings;
mod inject;
mod layers;
mod parse;
mod report;
mod sections;
mod units;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use addr::UpstreamAddr;
pub use admin::{ADMIN_TOKEN_ENV, AdminConfig, AdminToken, MIN_TOKEN_LEN};
pub use endpoints::{
    ListenAddr, ListenConfig, ListenTls, ListenTlsMode, UpstreamCompression, UpstreamConfig, UpstreamTls,
    UpstreamTlsMode,
};
pub use error::{ConfigError, Problem};
pub use findings::{
    ChattyConfig, CompressionConfig, ConnectionChurnConfig, FetchConfig, FindingsConfig, NPlusOneConfig,
    PaginationConfig, RepeatedWriteConfig, Scenario,
};
pub use inject::{Direction, DirectionOverride, Inject, OneWay, Scope};
pub use layers::{ENV_PREFIX, Setting, env_name, env_settings, flag_setting, key_paths};
pub use report::{MAX_WINDOW_SLOTS, ReportConfig, ReportFormat};
pub use sections::{
    LimitsConfig, LinkConfig, LogConfig, LogFormat, MetricsConfig, RecordConfig, RelayConfig, SqlViewConfig,
};
pub use units::{Bandwidth, ByteSize, HumanDuration, Percent, ValueError};

use error::{Checker, into_result};

/// The whole configuration file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where clients connect (point the application here), and the TLS rttscope offers
    /// them. Shorthand: `listen: 127.0.0.1:6033` (`0.0.0.0:6033` for all interfaces).
    /// Default `127.0.0.1:6033`.
    #[serde(deserialize_with = "ListenConfig::deserialize_shorthand")]
    pub listen: ListenConfig,
    /// The admin HTTP API (`/metrics`, `/report`, `/inject`, ...): address, token, limits.
    /// Shorthands: `admin: 127.0.0.1:6070`, `admin: off`. Default `127.0.0.1:6070`.
    #[serde(deserialize_with = "AdminConfig::deserialize_shorthand")]
    pub admin: AdminConfig,
    /// The MySQL or MariaDB server to forward to, with TLS and compression on the long hop.
    /// Shorthand: `upstream: host:port` (the name is resolved on every connect). Default
    /// `127.0.0.1:3306`.
    #[serde(deserialize_with = "UpstreamConfig::deserialize_shorthand")]
    pub upstream: UpstreamConfig,
    /// Connection limits and timeouts.
    pub limits: LimitsConfig,
    /// Byte forwarding.
    pub relay: RelayConfig,
    /// rttscope's own logging.
    pub log: LogConfig,
    /// What `/metrics` exposes.
    pub metrics: MetricsConfig,
    /// Per-command recording and per-fingerprint aggregates.
    pub record: RecordConfig,
    /// The report written on shutdown, periodic snapshots, rolling windows.
    pub report: ReportConfig,
    /// Detector thresholds and what-if scenarios.
    pub findings: FindingsConfig,
    /// Upstream TCP link observation.
    pub link: LinkConfig,
    /// Latency injection (the emulated link). Default: off. Can be replaced at run time
    /// with `PUT /inject`.
    pub inject: Inject,
    /// Statements rttscope answers itself at the SQL prompt.
    pub sql_view: SqlViewConfig,
}

/// Command-line flags that replace values from the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--listen ADDR`, repeatable: TCP or `unix:PATH`; empty keeps the file's.
    pub listen: Vec<ListenAddr>,
    /// `--upstream HOST:PORT`.
    pub upstream: Option<UpstreamAddr>,
    /// `--admin ADDR`.
    pub admin: Option<SocketAddr>,
    /// `--log-format text|json`.
    pub log_format: Option<LogFormat>,
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
        config.validate().map_err(|e| e.with_lines(text))?;
        Ok(config)
    }

    /// Every problem in YAML `text` at once, for `check-config`: each unknown key and bad
    /// value (serde alone stops at the first), then, once the rest parses, every range and
    /// cross-field problem. Empty when the text is a valid config.
    pub fn every_problem(text: &str) -> Vec<ConfigError> {
        match Config::from_yaml(text) {
            Ok(_) => Vec::new(),
            Err(ConfigError::Invalid { .. }) => {
                let mut found = parse::every_invalid::<Config>(text, 100);
                // With the bad keys taken out, what else is wrong.
                if let Some(Err(problems)) = parse::without::<Config>(text, &found).map(|c| c.validate()) {
                    found.push(problems);
                }
                found
            }
            Err(other) => vec![other],
        }
    }

    /// Reads `path` and parses it with [`Config::from_yaml`]. Print errors with
    /// `err.with_source_name(path)` to get `rttscope.yaml:12: ...`.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.to_owned(), source })?;
        Config::from_yaml(&text)
    }

    /// Checks every range and cross-field rule and reports all problems at once, each with
    /// its key path.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        let mut c = Checker::new(&mut problems);
        // Port 0 (pick any free port) is fine for both, as tests do.
        let admin = self.admin.address;
        if self.admin.enabled && self.listen.address.contains(&ListenAddr::Tcp(admin)) && admin.port() != 0 {
            c.problem("admin.address", format!("must differ from listen ({admin})"));
        }
        self.listen.check(&mut c.at("listen"));
        self.upstream.check(&mut c.at("upstream"));
        self.limits.check(&mut c.at("limits"));
        self.relay.check(&mut c.at("relay"));
        self.log.check(&mut c.at("log"));
        self.metrics.check(&mut c.at("metrics"));
        self.record.check(&mut c.at("record"));
        self.report.check(&mut c.at("report"));
        self.findings.check(&mut c.at("findings"));
        self.link.check(&mut c.at("link"));
        self.admin.check(&mut c.at("admin"));
        self.inject.check(&mut c.at("inject"));
        into_result(problems)
    }

    /// Applies command-line flags over the file's values (flags win), then validates again,
    /// since a flag can clash with the file (e.g. `--admin` equal to `listen`).
    pub fn apply_overrides(&mut self, overrides: Overrides) -> Result<(), ConfigError> {
        let Overrides { listen, upstream, admin, log_format } = overrides;
        if let Some(format) = log_format {
            self.log.format = format;
        }
        if !listen.is_empty() {
            self.listen.address = listen;
        }
        if let Some(upstream) = upstream {
            self.upstream.address = upstream;
        }
        if let Some(admin) = admin {
            self.admin.address = admin;
        }
        self.validate()
    }
}
