//! Addresses in the config: `UpstreamAddr` (`host:port`, resolved later) and friendlier
//! errors for socket addresses.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

use crate::units::ValueError;

/// The server rttscope dials: a host name, IPv4 address or bracketed IPv6 address, and a port
/// (`db.example.com:3306`, `10.0.0.5:3306`, `[::1]:3306`). Kept unresolved: the proxy looks
/// the name up when it connects, so DNS changes are followed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UpstreamAddr {
    host: String,
    port: u16,
}

impl UpstreamAddr {
    /// The host without brackets (`::1`, not `[::1]`), ready for `lookup_host((host, port))`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port, 1 to 65535.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Default for UpstreamAddr {
    fn default() -> Self {
        UpstreamAddr { host: Ipv4Addr::LOCALHOST.to_string(), port: 3306 }
    }
}

impl From<SocketAddr> for UpstreamAddr {
    fn from(addr: SocketAddr) -> Self {
        UpstreamAddr { host: addr.ip().to_string(), port: addr.port() }
    }
}

/// True for a DNS name: dot-separated labels of letters, digits, `-` and `_`, not starting or
/// ending with `-`. All-numeric names must be valid IPv4 addresses (catches `10.0.0.300`).
fn valid_host(host: &str) -> bool {
    if host.len() > 253 {
        return false;
    }
    let labels_ok = host.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    let numeric = host.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    labels_ok && (!numeric || host.parse::<Ipv4Addr>().is_ok())
}

impl FromStr for UpstreamAddr {
    type Err = ValueError;

    fn from_str(input: &str) -> Result<Self, ValueError> {
        let bad = |reason: &str| ValueError::new("upstream address", input, reason);
        let s = input.trim();
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (ip, port) = rest.split_once("]:").ok_or_else(|| bad("expected [IPv6]:port, e.g. [::1]:3306"))?;
            ip.parse::<Ipv6Addr>().map_err(|_| bad("not a valid IPv6 address between the brackets"))?;
            (ip, port)
        } else {
            let (host, port) = s.rsplit_once(':').ok_or_else(|| bad("expected host:port, e.g. db.example.com:3306"))?;
            if host.contains(':') {
                return Err(bad("put IPv6 addresses in brackets, e.g. [::1]:3306"));
            }
            if host.is_empty() {
                return Err(bad("the host must not be empty"));
            }
            if !valid_host(host) {
                return Err(bad("the host is not a valid name or IPv4 address"));
            }
            (host, port)
        };
        let port = match port.parse::<u64>() {
            Ok(p) => {
                u16::try_from(p).ok().filter(|p| *p != 0).ok_or_else(|| bad("the port must be between 1 and 65535"))?
            }
            Err(_) => return Err(bad("the port must be a number between 1 and 65535")),
        };
        Ok(UpstreamAddr { host: host.to_owned(), port })
    }
}

impl fmt::Display for UpstreamAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl Serialize for UpstreamAddr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for UpstreamAddr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = UpstreamAddr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("host:port, e.g. db.example.com:3306")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<UpstreamAddr, E> {
                v.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// Parses a listening address (`127.0.0.1:6033`, `[::1]:6033`) with a message that says
/// what is expected, where serde's own says only "invalid socket address syntax".
pub(crate) fn parse_socket_addr(input: &str) -> Result<SocketAddr, ValueError> {
    use std::net::IpAddr;
    let trimmed = input.trim();
    trimmed.parse().map_err(|_| {
        // Say which part is wrong: a bare IP lacks its port; after a good IP, the port is bad;
        // digits and dots are a mistyped IPv4 address; anything else is a host name.
        const EXAMPLE: &str = "expected ip:port, e.g. 127.0.0.1:6033 or [::1]:6033";
        let host = trimmed.rsplit_once(':').map_or(trimmed, |(host, _)| host);
        let why = if trimmed.parse::<IpAddr>().is_ok() {
            format!("no port: {EXAMPLE}")
        } else if host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().is_ok() {
            format!("the port is not a number from 0 to 65535: {EXAMPLE}")
        } else if !host.is_empty() && host.chars().all(|c| c.is_ascii_digit() || c == '.') {
            format!("{host} is not an IPv4 address: {EXAMPLE}")
        } else {
            format!("{EXAMPLE} (host names are not allowed here)")
        };
        ValueError::new("address", input, &why)
    })
}

/// `deserialize_with` for `SocketAddr` fields, using [`parse_socket_addr`].
pub(crate) fn socket_addr<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    struct Visitor;
    impl de::Visitor<'_> for Visitor {
        type Value = SocketAddr;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("ip:port, e.g. 127.0.0.1:6033")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<SocketAddr, E> {
            parse_socket_addr(v).map_err(E::custom)
        }
    }
    d.deserialize_str(Visitor)
}
