//! The connection phase: the server's `HandshakeV10` greeting and the
//! client's `HandshakeResponse41`, parsed from whole payloads, with the
//! capabilities rttscope cannot carry masked in place (same length, so the
//! auth exchange that follows is relayed byte for byte).

use super::constants::capability::*;
use super::error::{DecodeError, Peer};
use super::packets::{lenenc_int, u16_at, u32_at};

/// Largest greeting or handshake response rttscope accepts. Most are a few hundred
/// bytes, but connection attributes may run past 64 KiB (MariaDB's mysql_client_test
/// sends 128 KiB, and the server takes it); the bound keeps a nonsense length from making
/// us buffer many megabytes before forwarding (and a declared length costs memory only
/// as its bytes arrive: the buffer's untouched pages are never resident).
pub const MAX_HANDSHAKE_LEN: usize = 1 << 20;

/// The server's greeting, with where its capability bits sit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeV10 {
    /// The NUL-terminated version string (`8.0.36`, `5.5.5-10.11.6-MariaDB`), lossily decoded as
    /// UTF-8.
    pub server_version: String,
    /// The server's thread id for this connection: what `KILL` and `CONNECTION_ID()` name.
    pub connection_id: u32,
    /// Classic flags in the low 32 bits, MariaDB's extended ones above.
    pub capabilities: u64,
    /// The default auth plugin (`caching_sha2_password`, ...); empty without `CLIENT_PLUGIN_AUTH`.
    pub auth_plugin: String,
    caps_low_at: usize,
    caps_high_at: Option<usize>,
    caps_ext_at: Option<usize>,
}

fn cstr(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let tail = buf.get(at..)?;
    let nul = tail.iter().position(|&b| b == 0)?;
    Some((&tail[..nul], at + nul + 1))
}

/// A NUL-terminated string at `at` as the server reads the last fields of a handshake
/// response: its read buffer holds a NUL past the packet's end, so a string the packet
/// leaves unterminated runs to the end. `None` when the packet ends before it; else the
/// string, where the next field starts, and whether the packet terminated it.
fn cstr_or_rest(buf: &[u8], at: usize) -> Option<(&[u8], usize, bool)> {
    let tail = buf.get(at..).filter(|t| !t.is_empty())?;
    Some(match tail.iter().position(|&b| b == 0) {
        Some(nul) => (&tail[..nul], at + nul + 1, true),
        None => (tail, buf.len(), false),
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl HandshakeV10 {
    /// Reads a greeting payload; a greeting that stops after the low capability bits is legal and
    /// yields only those. Only protocol version 10 is accepted.
    pub fn parse(payload: &[u8]) -> Result<HandshakeV10, DecodeError> {
        let bad = |why| DecodeError::malformed(Peer::Upstream, "server greeting", why);
        let version = *payload.first().ok_or_else(|| bad("empty packet"))?;
        if version != 10 {
            return Err(DecodeError::ProtocolVersion(version));
        }
        let (server_version, at) = cstr(payload, 1).ok_or_else(|| bad("unterminated server version"))?;
        let connection_id = u32_at(payload, at).ok_or_else(|| bad("truncated before connection id"))?;
        // auth-plugin-data-part-1 (8) and a filler byte.
        let caps_low_at = at + 4 + 8 + 1;
        let low = u16_at(payload, caps_low_at).ok_or_else(|| bad("truncated before capability flags"))?;
        let mut greeting = HandshakeV10 {
            server_version: text(server_version),
            connection_id,
            capabilities: u64::from(low),
            auth_plugin: String::new(),
            caps_low_at,
            caps_high_at: None,
            caps_ext_at: None,
        };
        // Charset (1) and status flags (2) come before the upper capability bits;
        // a greeting may legally stop after the lower ones.
        let caps_high_at = caps_low_at + 2 + 1 + 2;
        let Some(high) = u16_at(payload, caps_high_at) else {
            return Ok(greeting);
        };
        greeting.caps_high_at = Some(caps_high_at);
        greeting.capabilities |= u64::from(high) << 16;
        let auth_data_len_at = caps_high_at + 2;
        let auth_data_len = *payload.get(auth_data_len_at).ok_or_else(|| bad("truncated before auth data length"))?;
        // Ten reserved bytes; MariaDB puts its extended capabilities in the last
        // four when it clears CLIENT_MYSQL.
        let reserved_at = auth_data_len_at + 1;
        if greeting.capabilities & CLIENT_MYSQL == 0 {
            let ext_at = reserved_at + 6;
            let ext = u32_at(payload, ext_at).ok_or_else(|| bad("truncated extended capabilities"))?;
            greeting.caps_ext_at = Some(ext_at);
            greeting.capabilities |= u64::from(ext) << 32;
        }
        if greeting.capabilities & CLIENT_PLUGIN_AUTH != 0 {
            let part2_len = (usize::from(auth_data_len).saturating_sub(8)).max(13);
            let name_at = reserved_at + 10 + part2_len;
            // Some servers omit the name's terminating NUL at the end of the packet.
            let name = match cstr(payload, name_at) {
                Some((name, _)) => name,
                None => payload.get(name_at..).unwrap_or_default(),
            };
            greeting.auth_plugin = text(name);
        }
        Ok(greeting)
    }

    /// Writes `capabilities` over the ones inside `payload`, which must be the
    /// payload this greeting was parsed from (same length: the auth exchange
    /// that follows is relayed byte for byte). Bits with no place in a short
    /// greeting are dropped.
    pub fn set_capabilities(&mut self, payload: &mut [u8], capabilities: u64) {
        let mut fits = 0xFFFF;
        if self.caps_high_at.is_some() {
            fits |= 0xFFFF_0000;
        }
        if self.caps_ext_at.is_some() {
            fits |= 0xFFFF_FFFF_0000_0000;
        }
        self.capabilities = capabilities & fits;
        write_u16(payload, self.caps_low_at, self.capabilities as u16);
        if let Some(at) = self.caps_high_at {
            write_u16(payload, at, (self.capabilities >> 16) as u16);
        }
        if let Some(at) = self.caps_ext_at {
            write_u32(payload, at, (self.capabilities >> 32) as u32);
        }
    }
}

fn write_u16(buf: &mut [u8], at: usize, v: u16) {
    if let Some(slot) = buf.get_mut(at..at + 2) {
        slot.copy_from_slice(&v.to_le_bytes());
    }
}

fn write_u32(buf: &mut [u8], at: usize, v: u32) {
    if let Some(slot) = buf.get_mut(at..at + 4) {
        slot.copy_from_slice(&v.to_le_bytes());
    }
}

/// The client's answer to the greeting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeResponse41 {
    /// The client's flags, MariaDB's extended ones in the high 32 bits when `CLIENT_MYSQL` is
    /// clear.
    pub capabilities: u64,
    /// The login name, lossily decoded as UTF-8.
    pub user: String,
    /// The initial schema (`CLIENT_CONNECT_WITH_DB`); `None` when absent or empty.
    pub schema: Option<String>,
    /// The plugin that computed the auth response (`CLIENT_PLUGIN_AUTH`); `None` without the flag.
    pub auth_plugin: Option<String>,
    /// Connection attributes (`_client_name`, `program_name`, ...), the first
    /// [`MAX_ATTRIBUTES`] of them.
    pub attributes: Vec<(String, String)>,
    /// The zstd level asked for (`CLIENT_ZSTD_COMPRESSION_ALGORITHM`).
    pub zstd_level: Option<u8>,
    /// Where the fields after the connection attributes begin (the zstd level),
    /// or the end of the payload when the attributes could not be walked.
    attributes_end: usize,
    /// Flags among `CLIENT_CONNECT_WITH_DB`, `CLIENT_PLUGIN_AUTH` and `CLIENT_CONNECT_ATTRS`
    /// whose field the packet ends before: the server reads those as absent.
    absent: u64,
    /// The packet ends inside its schema or plugin name, with no NUL.
    unterminated: bool,
    /// `CLIENT_CONNECT_ATTRS` is set and the packet has an attribute block that cannot be
    /// walked (a length beyond the packet): nothing after it can be found.
    attributes_unreadable: bool,
}

/// Connection attributes kept from a handshake response.
pub const MAX_ATTRIBUTES: usize = 32;

/// Offset of MariaDB's extended client capabilities in a handshake response.
const RESPONSE_EXT_CAPS_AT: usize = 4 + 4 + 1 + 19;
/// Length of an `SSLRequest`: the response cut short before the user name.
pub const SSL_REQUEST_LEN: usize = 32;

/// Whether a client's first packet is an `SSLRequest` (TLS starts next).
pub fn is_ssl_request(payload: &[u8]) -> bool {
    payload.len() == SSL_REQUEST_LEN && u32_at(payload, 0).is_some_and(|caps| u64::from(caps) & CLIENT_SSL != 0)
}

impl HandshakeResponse41 {
    /// Reads a client's first packet after TLS, if any: fails on an SSLRequest (see
    /// [`is_ssl_request`]) and on a pre-4.1 client.
    pub fn parse(payload: &[u8]) -> Result<HandshakeResponse41, DecodeError> {
        let bad = |why| DecodeError::malformed(Peer::Client, "handshake response", why);
        let low = u32_at(payload, 0).ok_or_else(|| bad("shorter than its capability flags"))?;
        let mut capabilities = u64::from(low);
        if capabilities & CLIENT_PROTOCOL_41 == 0 {
            return Err(DecodeError::PreProtocol41);
        }
        if capabilities & CLIENT_SSL != 0 && payload.len() == SSL_REQUEST_LEN {
            return Err(DecodeError::TlsRequested);
        }
        if capabilities & CLIENT_MYSQL == 0 {
            let ext = u32_at(payload, RESPONSE_EXT_CAPS_AT).ok_or_else(|| bad("truncated extended capabilities"))?;
            capabilities |= u64::from(ext) << 32;
        }
        let (user, mut at) = cstr(payload, SSL_REQUEST_LEN).ok_or_else(|| bad("unterminated user name"))?;
        let auth_len = if capabilities & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
            let (len, width) =
                lenenc_int(payload.get(at..).unwrap_or_default()).ok_or_else(|| bad("bad auth data length"))?;
            at += width;
            usize::try_from(len).map_err(|_| bad("bad auth data length"))?
        } else if capabilities & CLIENT_SECURE_CONNECTION != 0 {
            let len = *payload.get(at).ok_or_else(|| bad("truncated auth data"))?;
            at += 1;
            usize::from(len)
        } else {
            let (_, next) = cstr(payload, at).ok_or_else(|| bad("unterminated auth data"))?;
            at = next;
            0
        };
        at = at.checked_add(auth_len).filter(|&end| end <= payload.len()).ok_or_else(|| bad("truncated auth data"))?;
        let (mut absent, mut unterminated) = (0, false);
        let mut schema = None;
        if capabilities & CLIENT_CONNECT_WITH_DB != 0 {
            // Some clients set the flag and end the packet without a schema.
            match cstr_or_rest(payload, at) {
                Some((db, next, terminated)) => {
                    schema = Some(text(db)).filter(|s| !s.is_empty());
                    (at, unterminated) = (next, !terminated);
                }
                None => absent |= CLIENT_CONNECT_WITH_DB,
            }
        }
        let mut auth_plugin = None;
        if capabilities & CLIENT_PLUGIN_AUTH != 0 {
            match cstr_or_rest(payload, at) {
                Some((name, next, terminated)) => {
                    auth_plugin = Some(text(name));
                    (at, unterminated) = (next, !terminated);
                }
                None => absent |= CLIENT_PLUGIN_AUTH,
            }
        }
        let mut attributes_unreadable = false;
        let (attributes, attributes_end) = if capabilities & CLIENT_CONNECT_ATTRS != 0 {
            if at >= payload.len() {
                absent |= CLIENT_CONNECT_ATTRS;
            }
            attributes(payload, at).unwrap_or_else(|| {
                attributes_unreadable = at < payload.len();
                (Vec::new(), payload.len())
            })
        } else {
            (Vec::new(), at.min(payload.len()))
        };
        let zstd_level = (capabilities & CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0)
            .then(|| payload.get(attributes_end).copied())
            .flatten();
        Ok(HandshakeResponse41 {
            capabilities,
            user: text(user),
            schema,
            auth_plugin,
            attributes,
            zstd_level,
            attributes_end,
            absent,
            unterminated,
            attributes_unreadable,
        })
    }

    /// The flags among `CLIENT_CONNECT_WITH_DB`, `CLIENT_PLUGIN_AUTH` and
    /// `CLIENT_CONNECT_ATTRS` that promise a field the packet ends before.
    pub fn absent_fields(&self) -> u64 {
        self.absent
    }

    /// Whether `CLIENT_CONNECT_ATTRS` is set and the attribute block there cannot be walked
    /// (its length runs past the packet): no field after it, the zstd level, can be read.
    pub fn attributes_unreadable(&self) -> bool {
        self.attributes_unreadable
    }

    /// The value of connection attribute `key`.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Rewrites `payload` (the one this response was parsed from) for a leg with other
    /// capabilities: `capabilities` replace the announced ones (in place), and the zstd
    /// level after the attributes is set, added or removed to match.
    /// With `CLIENT_MYSQL` set the packet has no room for MariaDB's extended bits (the
    /// reserved bytes are not read then), so they are dropped: `capabilities` afterwards is
    /// what the packet says, never more (found by the `handshake` fuzz target).
    ///
    /// A level appended to a packet that ends early would be read as a field the flags
    /// promise and the packet lacks. So before one is appended, an unterminated last string
    /// gets its NUL and the flags of absent fields are cleared: the server reads the
    /// result as it read the original (a missing plugin name: MariaDB clears
    /// `CLIENT_PLUGIN_AUTH` itself, "some clients lie"; a missing schema or attribute block
    /// is empty), with the level where it looks for it (found by the `handshake` fuzz
    /// target: a level of 0 became an empty plugin name).
    ///
    /// Behind an attribute block that cannot be walked (its length runs past the packet) no
    /// reader finds a level, and the server refuses such a packet whatever follows: no level
    /// is written then, and `zstd_level` says so (found by the
    /// `handshake` fuzz target: a level appended there read back as none).
    pub fn rewrite(&mut self, payload: &mut Vec<u8>, capabilities: u64, zstd_level: Option<u8>) {
        let mut capabilities =
            if capabilities & CLIENT_MYSQL == 0 { capabilities } else { capabilities & u64::from(u32::MAX) };
        let level =
            zstd_level.filter(|_| capabilities & CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0 && !self.attributes_unreadable);
        payload.truncate(self.attributes_end.min(payload.len()));
        if level.is_some() {
            if std::mem::take(&mut self.unterminated) {
                payload.push(0);
                self.attributes_end = payload.len();
            }
            capabilities &= !std::mem::take(&mut self.absent);
        }
        self.capabilities = capabilities;
        write_u32(payload, 0, capabilities as u32);
        if capabilities & CLIENT_MYSQL == 0 {
            write_u32(payload, RESPONSE_EXT_CAPS_AT, (capabilities >> 32) as u32);
        }
        payload.extend(level);
        self.zstd_level = level;
    }

    /// The `SSLRequest` that opens TLS before this response is sent: its first 32 bytes,
    /// with `CLIENT_SSL` set.
    pub fn ssl_request(payload: &[u8]) -> Vec<u8> {
        let mut request = payload[..SSL_REQUEST_LEN.min(payload.len())].to_vec();
        request.resize(SSL_REQUEST_LEN, 0);
        let caps = u32_at(&request, 0).unwrap_or(0) | CLIENT_SSL as u32;
        write_u32(&mut request, 0, caps);
        request
    }
}

/// Walks the length-encoded connection attributes at `at`: the first
/// [`MAX_ATTRIBUTES`] pairs, and where the block ends.
fn attributes(payload: &[u8], at: usize) -> Option<(Vec<(String, String)>, usize)> {
    let (len, width) = lenenc_int(payload.get(at..)?)?;
    let start = at + width;
    let end = start.checked_add(usize::try_from(len).ok()?).filter(|&e| e <= payload.len())?;
    let mut pairs = Vec::new();
    let mut pos = start;
    let string = |pos: &mut usize| -> Option<String> {
        let (n, w) = lenenc_int(payload.get(*pos..end)?)?;
        let from = *pos + w;
        let to = from.checked_add(usize::try_from(n).ok()?).filter(|&t| t <= end)?;
        *pos = to;
        Some(text(&payload[from..to]))
    };
    while pos < end && pairs.len() < MAX_ATTRIBUTES {
        let key = string(&mut pos)?;
        let value = string(&mut pos)?;
        pairs.push((key, value));
    }
    Some((pairs, end))
}

/// The capabilities both sides agreed on. MariaDB's extended ones count only
/// when both sides announced them (both cleared `CLIENT_MYSQL`).
pub fn negotiated(server: u64, client: u64) -> u64 {
    let both = server & client;
    if (server | client) & CLIENT_MYSQL != 0 { both & 0xFFFF_FFFF } else { both }
}

#[cfg(test)]
mod tests;
