//! The two ends rttscope stands between: `listen` (where clients connect, and the TLS
//! rttscope offers them) and `upstream` (the server, the TLS rttscope uses on the long hop,
//! and its compression). Each accepts a plain address as shorthand:
//! `upstream: db.example.com:3306` is `upstream: {address: db.example.com:3306}`.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, value::MapAccessDeserializer};
use serde::{Deserialize, Serialize, Serializer};

use crate::addr::{UpstreamAddr, parse_socket_addr};
use crate::error::Checker;
use crate::units::ValueError;

/// An address clients connect to: TCP (`127.0.0.1:6033`) or a Unix socket
/// (`unix:/run/rttscope/mysql.sock`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ListenAddr {
    /// An IP and port.
    Tcp(SocketAddr),
    /// A Unix socket's path.
    Unix(PathBuf),
}

impl FromStr for ListenAddr {
    type Err = ValueError;

    fn from_str(input: &str) -> Result<Self, ValueError> {
        match input.trim().strip_prefix("unix:") {
            Some(path) if path.starts_with('/') => Ok(ListenAddr::Unix(PathBuf::from(path))),
            Some(_) => {
                Err(ValueError::new("address", input, "a Unix socket needs an absolute path: unix:/path/to.sock"))
            }
            None => parse_socket_addr(input).map(ListenAddr::Tcp),
        }
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => write!(f, "{addr}"),
            ListenAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl Serialize for ListenAddr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ListenAddr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = ListenAddr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("ip:port or unix:/path, e.g. 127.0.0.1:6033")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ListenAddr, E> {
                v.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// `listen`: where clients connect. Shorthand: `listen: 127.0.0.1:6033`, or a list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListenConfig {
    /// One address or a list: TCP `ip:port` and/or `unix:/path` (a Unix socket for
    /// applications on the same host; it skips TCP on the app's side of the hop).
    /// Default `127.0.0.1:6033`.
    #[serde(deserialize_with = "one_or_many")]
    pub address: Vec<ListenAddr>,
    /// Permissions of a Unix socket file, in octal (`"660"`: owner and group may connect).
    /// Default `"660"`.
    pub socket_mode: String,
    /// TLS towards clients.
    pub tls: ListenTls,
    /// RSA private key (PEM, PKCS#1 or PKCS#8) that clients without TLS encrypt their
    /// password with when the long hop is TLS and the server asks for the password in full
    /// (caching_sha2_password's full authentication, sha256_password). Default: a 2048-bit
    /// key generated at start.
    pub rsa_key: Option<PathBuf>,
}

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            address: vec![ListenAddr::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, 6033)))],
            socket_mode: "660".to_owned(),
            tls: ListenTls::default(),
            rsa_key: None,
        }
    }
}

impl ListenConfig {
    /// The first TCP address, if any.
    pub fn tcp(&self) -> Option<SocketAddr> {
        self.address.iter().find_map(|a| match a {
            ListenAddr::Tcp(addr) => Some(*addr),
            ListenAddr::Unix(_) => None,
        })
    }

    /// The Unix socket permissions as a number.
    pub fn socket_mode(&self) -> Option<u32> {
        u32::from_str_radix(self.socket_mode.trim_start_matches("0o"), 8).ok().filter(|m| *m <= 0o777)
    }

    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        c.require(!self.address.is_empty(), "address", "must name at least one address");
        c.require(self.socket_mode().is_some(), "socket_mode", "must be octal permissions such as \"660\"");
        self.tls.check(&mut c.at("tls"));
    }
}

impl From<SocketAddr> for ListenConfig {
    fn from(addr: SocketAddr) -> Self {
        ListenConfig { address: vec![ListenAddr::Tcp(addr)], ..ListenConfig::default() }
    }
}

/// When rttscope offers clients TLS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ListenTlsMode {
    /// Never: clients that insist on TLS are refused with an error saying so.
    Off,
    /// Offered; each client decides (the default).
    #[default]
    Offered,
    /// Required: clients that do not ask for TLS are refused.
    Required,
}

/// `listen.tls`: rttscope terminates clients' TLS itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListenTls {
    /// `off`, `offered` or `required`. Default `offered`.
    pub mode: ListenTlsMode,
    /// Certificate chain (PEM). Without `cert` and `key`, rttscope generates a CA and a
    /// certificate for `localhost` at start, logs their SHA-256 fingerprints and serves the
    /// CA at the admin API's `/tls/ca.pem`.
    pub cert: Option<PathBuf>,
    /// Private key of `cert` (PEM).
    pub key: Option<PathBuf>,
}

impl ListenTls {
    fn check(&self, c: &mut Checker<'_>) {
        if self.cert.is_some() != self.key.is_some() {
            c.problem(
                if self.cert.is_some() { "key" } else { "cert" },
                "cert and key go together: set both or neither",
            );
        }
    }
}

/// `upstream`: the server. Shorthand: `upstream: db.example.com:3306`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// `host:port`; the name is resolved on every connect. Default `127.0.0.1:3306`.
    pub address: UpstreamAddr,
    /// TLS on the long hop.
    pub tls: UpstreamTls,
    /// Compression on the long hop.
    pub compression: UpstreamCompression,
}

impl UpstreamConfig {
    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        self.tls.check(&mut c.at("tls"));
    }
}

impl From<UpstreamAddr> for UpstreamConfig {
    fn from(address: UpstreamAddr) -> Self {
        UpstreamConfig { address, ..UpstreamConfig::default() }
    }
}

impl From<SocketAddr> for UpstreamConfig {
    fn from(addr: SocketAddr) -> Self {
        UpstreamConfig::from(UpstreamAddr::from(addr))
    }
}

/// How rttscope uses TLS towards the server, as MySQL clients' `--ssl-mode` names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpstreamTlsMode {
    /// Never. Clients that use TLS towards rttscope are then allowed to send credentials
    /// over a plain long hop (rttscope warns at start).
    Disabled,
    /// Whenever the server offers it (the default); the server's certificate is not checked.
    #[default]
    Preferred,
    /// Always; a server without TLS is an error. The certificate is not checked.
    Required,
    /// Always, with the server's certificate checked against `ca` (or the system's roots).
    VerifyCa,
    /// As `verify-ca`, and the certificate must name `server_name` (or the upstream host).
    VerifyIdentity,
}

impl UpstreamTlsMode {
    /// Whether the server's certificate chain is checked.
    pub fn verifies(self) -> bool {
        matches!(self, UpstreamTlsMode::VerifyCa | UpstreamTlsMode::VerifyIdentity)
    }
}

/// `upstream.tls`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamTls {
    /// `disabled`, `preferred`, `required`, `verify-ca` or `verify-identity`. Default `preferred`.
    pub mode: UpstreamTlsMode,
    /// CA certificates (PEM) for the verify modes; the system's roots when unset.
    pub ca: Option<PathBuf>,
    /// A client certificate (PEM), for `REQUIRE X509` accounts and mutual TLS.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
    /// The name sent as SNI and checked by `verify-identity`. Default: the upstream host.
    pub server_name: Option<String>,
}

impl UpstreamTls {
    fn check(&self, c: &mut Checker<'_>) {
        if self.cert.is_some() != self.key.is_some() {
            c.problem(
                if self.cert.is_some() { "key" } else { "cert" },
                "cert and key go together: set both or neither",
            );
        }
        if self.mode == UpstreamTlsMode::Disabled {
            for (key, set) in [("ca", self.ca.is_some()), ("cert", self.cert.is_some())] {
                c.require(!set, key, "has no effect with mode: disabled");
            }
        }
        if let Some(name) = &self.server_name {
            c.require(!name.trim().is_empty(), "server_name", "must not be empty");
        }
    }
}

/// Compression on the long hop, independent of what the client speaks to rttscope.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpstreamCompression {
    /// What the client asked for (the default).
    #[default]
    Mirror,
    /// Never.
    Off,
    /// zlib, whatever the client speaks (if the server supports it).
    Zlib,
    /// zstd, whatever the client speaks (falls back to zlib, then none, if the server lacks it).
    Zstd,
}

/// `deserialize_with` for a list that may be written as a single item.
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ListenAddr>, D::Error> {
    struct Visitor;
    impl<'de> de::Visitor<'de> for Visitor {
        type Value = Vec<ListenAddr>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an address (ip:port or unix:/path) or a list of them")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            v.parse().map(|a| vec![a]).map_err(E::custom)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut all = Vec::new();
            while let Some(addr) = seq.next_element()? {
                all.push(addr);
            }
            Ok(all)
        }
    }
    d.deserialize_any(Visitor)
}

/// A section that may be written as its address alone (or, for `listen`, a list of them).
struct Shorthand<T> {
    expecting: &'static str,
    from_str: fn(&str) -> Result<T, ValueError>,
    from_list: Option<fn(Vec<ListenAddr>) -> T>,
}

impl<'de, T: Deserialize<'de>> de::Visitor<'de> for Shorthand<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        (self.from_str)(v).map_err(E::custom)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        match self.from_list {
            Some(from_list) => Ok(from_list(one_or_many(de::value::SeqAccessDeserializer::new(seq))?)),
            None => Err(de::Error::invalid_type(de::Unexpected::Seq, &self)),
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map))
    }
}

impl ListenConfig {
    /// Deserializes the section, an address alone, or a list of addresses.
    pub(crate) fn deserialize_shorthand<'de, D: Deserializer<'de>>(d: D) -> Result<ListenConfig, D::Error> {
        d.deserialize_any(Shorthand {
            expecting: "an address (ip:port or unix:/path), a list of them, or a listen section",
            from_str: |v| v.parse::<ListenAddr>().map(|a| ListenConfig::from_addresses(vec![a])),
            from_list: Some(ListenConfig::from_addresses),
        })
    }

    fn from_addresses(address: Vec<ListenAddr>) -> ListenConfig {
        ListenConfig { address, ..ListenConfig::default() }
    }
}

impl UpstreamConfig {
    /// Deserializes the section, or its `host:port` alone.
    pub(crate) fn deserialize_shorthand<'de, D: Deserializer<'de>>(d: D) -> Result<UpstreamConfig, D::Error> {
        d.deserialize_any(Shorthand {
            expecting: "host:port, e.g. db.example.com:3306, or an upstream section",
            from_str: |v| v.parse::<UpstreamAddr>().map(UpstreamConfig::from),
            from_list: None,
        })
    }
}
