//! `admin`: where the admin HTTP API listens, who may use it, and what one request may
//! cost it. Shorthands: `admin: 127.0.0.1:6070` (the address alone) and `admin: off`.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, value::MapAccessDeserializer};
use serde::{Deserialize, Serialize, Serializer};

use crate::addr::{parse_socket_addr, socket_addr};
use crate::error::Checker;
use crate::units::{ByteSize, HumanDuration};

/// The environment variable that carries the admin token (it wins over the file's keys).
pub const ADMIN_TOKEN_ENV: &str = "RTTSCOPE_ADMIN_TOKEN";
/// Shortest token accepted: 16 characters is about 96 bits from a random base64 source.
pub const MIN_TOKEN_LEN: usize = 16;

/// Ranges of the limits, as `validate()` enforces them and docs/configuration.md documents them.
const MAX_CONNECTIONS: (usize, usize) = (1, 1024);
const TIMEOUTS: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(60));
/// hyper refuses a read buffer below 8 KiB.
const HEADER_BYTES: (u64, u64) = (8 * 1024, 1024 * 1024);
const BODY_BYTES: (u64, u64) = (1024, 16 * 1024 * 1024);

/// The bearer token of the admin API. Never printed: `Debug` and `Serialize` redact it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct AdminToken(String);

impl AdminToken {
    /// The token, from the environment or a file.
    pub fn new(token: impl Into<String>) -> AdminToken {
        AdminToken(token.into())
    }

    /// The secret itself, for comparing.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Why this token is not acceptable, if it is not.
    pub fn problem(&self) -> Option<String> {
        let len = self.0.chars().count();
        if len < MIN_TOKEN_LEN {
            Some(format!("must be at least {MIN_TOKEN_LEN} characters (has {len}); e.g. `openssl rand -base64 24`"))
        } else if self.0.chars().any(|c| c.is_whitespace() || c.is_control()) {
            Some("must not contain spaces or control characters".to_owned())
        } else {
            None
        }
    }
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

impl Serialize for AdminToken {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("<redacted>")
    }
}

/// `admin`: the HTTP API (`/metrics`, `/report`, `/connections`, `/inject`, `/reset`).
///
/// Requests that change state (any method but GET and HEAD) need
/// `Authorization: Bearer <token>` and a JSON body; when `address` is beyond loopback,
/// every request needs the token, and rttscope refuses to start without one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// Serve the admin API at all. `admin: off` is the shorthand for `false`. Default `true`.
    pub enabled: bool,
    /// An IP and port. Default `127.0.0.1:6070`.
    #[serde(deserialize_with = "socket_addr")]
    pub address: SocketAddr,
    /// The bearer token (at least 16 characters). Prefer `RTTSCOPE_ADMIN_TOKEN` or
    /// `token_file`, which keep it out of the config file. Default: none.
    pub token: Option<AdminToken>,
    /// A file holding the token (surrounding whitespace ignored). Default: none.
    pub token_file: Option<PathBuf>,
    /// Names the `Host` header may carry besides the address the client connected to
    /// (and `localhost` on loopback), e.g. `rttscope.internal`; anything else gets 421,
    /// which defeats DNS rebinding. Default: none.
    pub hosts: Vec<String>,
    /// Admin connections served at once (1–1024); more are answered 503 and closed, except
    /// that a few more may still ask for `/healthz` (health checks get through when every
    /// slot is taken). Default `32`.
    pub max_connections: usize,
    /// Time a client has to send a request's headers (100ms–60s); slower ones are cut off.
    /// Default `5s`.
    pub header_timeout: HumanDuration,
    /// Time a client has to send a request's body (100ms–60s). Default `10s`.
    pub body_timeout: HumanDuration,
    /// Largest request head (8KiB–1MiB); larger gets 431. Default `16KiB`.
    pub max_header_bytes: ByteSize,
    /// Largest request body (1KiB–16MiB); larger gets 413. Default `64KiB`.
    pub max_body_bytes: ByteSize,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            enabled: true,
            address: SocketAddr::from((Ipv4Addr::LOCALHOST, 6070)),
            token: None,
            token_file: None,
            hosts: Vec::new(),
            max_connections: 32,
            header_timeout: HumanDuration::from_secs(5),
            body_timeout: HumanDuration::from_secs(10),
            max_header_bytes: ByteSize(16 * 1024),
            max_body_bytes: ByteSize(64 * 1024),
        }
    }
}

impl From<SocketAddr> for AdminConfig {
    fn from(address: SocketAddr) -> Self {
        AdminConfig { address, ..AdminConfig::default() }
    }
}

impl AdminConfig {
    /// The API switched off (`admin: off`).
    pub fn off() -> AdminConfig {
        AdminConfig { enabled: false, ..AdminConfig::default() }
    }

    /// Whether clients beyond this host can reach the API.
    pub fn beyond_loopback(&self) -> bool {
        !self.address.ip().is_loopback()
    }

    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        if let Some(problem) = self.token.as_ref().and_then(AdminToken::problem) {
            c.problem("token", problem);
        }
        if self.token.is_some() && self.token_file.is_some() {
            c.problem("token_file", "set token or token_file, not both");
        }
        for (i, host) in self.hosts.iter().enumerate() {
            let ok = !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
            c.require(ok, &format!("hosts[{i}]"), "must be a host name (letters, digits, '-', '.', '_'), no port");
        }
        let (lo, hi) = MAX_CONNECTIONS;
        c.require(
            (lo..=hi).contains(&self.max_connections),
            "max_connections",
            format!("must be between {lo} and {hi}, not {}", self.max_connections),
        );
        let (lo, hi) = TIMEOUTS;
        for (key, value) in [("header_timeout", self.header_timeout), ("body_timeout", self.body_timeout)] {
            c.require(
                (lo..=hi).contains(&value.0),
                key,
                format!("must be between {} and {}, not {value}", HumanDuration(lo), HumanDuration(hi)),
            );
        }
        for (key, value, (lo, hi)) in [
            ("max_header_bytes", self.max_header_bytes, HEADER_BYTES),
            ("max_body_bytes", self.max_body_bytes, BODY_BYTES),
        ] {
            c.require(
                (lo..=hi).contains(&value.0),
                key,
                format!("must be between {} and {}, not {value}", ByteSize(lo), ByteSize(hi)),
            );
        }
    }

    /// Deserializes the section, its address alone, or `off`/`false`.
    pub(crate) fn deserialize_shorthand<'de, D: Deserializer<'de>>(d: D) -> Result<AdminConfig, D::Error> {
        struct Visitor;
        impl<'de> de::Visitor<'de> for Visitor {
            type Value = AdminConfig;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("ip:port, e.g. 127.0.0.1:6070, `off`, or an admin section")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<AdminConfig, E> {
                match v.trim() {
                    "off" | "false" => Ok(AdminConfig::off()),
                    "on" | "true" => Ok(AdminConfig::default()),
                    other => parse_socket_addr(other).map(AdminConfig::from).map_err(E::custom),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<AdminConfig, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<AdminConfig, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<AdminConfig, E> {
                Ok(if v { AdminConfig::default() } else { AdminConfig::off() })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<AdminConfig, A::Error> {
                AdminConfig::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_any(Visitor)
    }
}
