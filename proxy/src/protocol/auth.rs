//! The few facts of the auth exchange rttscope needs to stand in for a server's RSA key:
//! the scramble a plugin was given, the plugin an auth switch names, a public-key request
//! of the SHA-256 plugins, and the XOR that hides a password under its scramble.

use crate::protocol::constants::capability::{
    CLIENT_PLUGIN_AUTH, CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA, CLIENT_SECURE_CONNECTION,
};
use crate::protocol::constants::header;
use crate::protocol::handshake::SSL_REQUEST_LEN;
use crate::protocol::packets::lenenc_int;

/// MySQL 8's default plugin: a SHA-256 scramble, or the password in full (fast and full auth).
pub const CACHING_SHA2_PASSWORD: &str = "caching_sha2_password";
/// The older SHA-256 plugin: the password in full on every login.
pub const SHA256_PASSWORD: &str = "sha256_password";

/// caching_sha2_password's "perform full authentication" (after the AuthMoreData byte).
pub const PERFORM_FULL_AUTHENTICATION: u8 = 0x04;
/// The byte a client sends to ask caching_sha2_password for the server's public key.
const CACHING_SHA2_KEY_REQUEST: u8 = 0x02;
/// The byte a client sends to ask sha256_password for the server's public key.
const SHA256_KEY_REQUEST: u8 = 0x01;
/// The length of the scramble the SHA-256 plugins XOR a password with.
pub const SCRAMBLE_LEN: usize = 20;

/// The scramble (auth-plugin-data) of a `HandshakeV10` payload: its 8 first bytes and the
/// rest of the second part, without the NUL MySQL ends it with. `None` if the greeting is
/// too short to hold one.
pub fn greeting_scramble(payload: &[u8]) -> Option<Vec<u8>> {
    let version_end = 1 + payload.get(1..)?.iter().position(|&b| b == 0)?;
    let part1_at = version_end + 1 + 4;
    let mut scramble = payload.get(part1_at..part1_at + 8)?.to_vec();
    let caps_low_at = part1_at + 8 + 1;
    let caps_high_at = caps_low_at + 2 + 1 + 2;
    let auth_data_len_at = caps_high_at + 2;
    let (Some(low), Some(high), Some(&data_len)) = (
        payload.get(caps_low_at..caps_low_at + 2),
        payload.get(caps_high_at..caps_high_at + 2),
        payload.get(auth_data_len_at),
    ) else {
        return Some(scramble);
    };
    let caps = u32::from_le_bytes([low[0], low[1], high[0], high[1]]);
    // Without CLIENT_PLUGIN_AUTH the length byte is 0 and the second part is 12 bytes + NUL.
    let part2_len =
        if u64::from(caps) & CLIENT_PLUGIN_AUTH != 0 { usize::from(data_len).saturating_sub(8).max(13) } else { 13 };
    let part2_at = auth_data_len_at + 1 + 10;
    if let Some(part2) = payload.get(part2_at..part2_at + part2_len) {
        scramble.extend_from_slice(part2.strip_suffix(&[0]).unwrap_or(part2));
    }
    Some(scramble)
}

/// An `AuthSwitchRequest` payload: the plugin it names and the scramble it carries
/// (without the trailing NUL). `None` for any other packet.
pub fn auth_switch(payload: &[u8]) -> Option<(&str, &[u8])> {
    let rest = payload.strip_prefix(&[header::EOF])?;
    // An old-style switch (a lone 0xFE) names no plugin: mysql_old_password, never SHA-256.
    let nul = rest.iter().position(|&b| b == 0)?;
    let plugin = std::str::from_utf8(&rest[..nul]).ok()?;
    let data = &rest[nul + 1..];
    Some((plugin, data.strip_suffix(&[0]).unwrap_or(data)))
}

/// Whether a client's auth packet under `plugin` asks the server for its public key.
pub fn is_key_request(plugin: &str, payload: &[u8]) -> bool {
    match plugin {
        CACHING_SHA2_PASSWORD => payload == [CACHING_SHA2_KEY_REQUEST],
        SHA256_PASSWORD => payload == [SHA256_KEY_REQUEST],
        _ => false,
    }
}

/// The AuthMoreData payload that carries a public key (PEM) to the client.
pub fn public_key_packet(pem: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(1 + pem.len());
    payload.push(header::AUTH_MORE_DATA);
    payload.extend_from_slice(pem);
    payload
}

/// Where the auth response of a `HandshakeResponse41` payload sits: the start of its length
/// field, and the response's own range. `None` if the packet does not hold one.
fn auth_response_at(payload: &[u8]) -> Option<(usize, std::ops::Range<usize>)> {
    let caps = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?);
    let user_end = SSL_REQUEST_LEN + payload.get(SSL_REQUEST_LEN..)?.iter().position(|&b| b == 0)?;
    let len_at = user_end + 1;
    let (len, width) = if caps & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA as u32 != 0 {
        let (len, width) = lenenc_int(payload.get(len_at..)?)?;
        (usize::try_from(len).ok()?, width)
    } else if caps & CLIENT_SECURE_CONNECTION as u32 != 0 {
        (usize::from(*payload.get(len_at)?), 1)
    } else {
        return None;
    };
    let start = len_at + width;
    let end = start.checked_add(len).filter(|&end| end <= payload.len())?;
    Some((len_at, start..end))
}

/// The auth response of a `HandshakeResponse41` payload (length-prefixed, as every 4.1
/// client sends it).
pub fn auth_response(payload: &[u8]) -> Option<&[u8]> {
    let (_, range) = auth_response_at(payload)?;
    payload.get(range)
}

/// Whether the server's packet `payload`, under `plugin` (the one in force before it), asks
/// for the password in full: caching_sha2's "perform full authentication", or a switch to
/// sha256_password (which always wants it).
pub fn asks_for_full_password(plugin: &str, payload: &[u8]) -> bool {
    match auth_switch(payload) {
        Some((switched, _)) => switched == SHA256_PASSWORD,
        None => plugin == CACHING_SHA2_PASSWORD && payload == [header::AUTH_MORE_DATA, PERFORM_FULL_AUTHENTICATION],
    }
}

/// The password in clear sends itself with these plugins, where the client counts its
/// connection as secure (TLS, or a Unix socket): as the auth response of its first packet.
const CLEAR_FIRST: [&str; 2] = [SHA256_PASSWORD, "mysql_clear_password"];

/// Whether a `HandshakeResponse41` for `plugin` carries the password itself: a plugin that
/// sends it in clear, and an auth response other than nothing, an empty password (`\0`) or a
/// key request (`\x01`).
pub fn password_in_first_packet(plugin: Option<&str>, payload: &[u8]) -> bool {
    plugin.is_some_and(|p| CLEAR_FIRST.contains(&p))
        && auth_response(payload).is_some_and(|r| !matches!(r, [] | [0] | [SHA256_KEY_REQUEST]))
}

/// `payload` (a `HandshakeResponse41`) with its auth response replaced by `response` (under
/// 251 bytes, so its length fits either length field). `None` if it has none to replace.
pub fn with_auth_response(payload: &[u8], response: &[u8]) -> Option<Vec<u8>> {
    let (len_at, range) = auth_response_at(payload)?;
    let len = u8::try_from(response.len()).ok().filter(|&l| l < 0xFB)?;
    let mut out = Vec::with_capacity(payload.len() + response.len());
    out.extend_from_slice(&payload[..len_at]);
    out.push(len);
    out.extend_from_slice(response);
    out.extend_from_slice(&payload[range.end..]);
    Some(out)
}

/// The auth plugin a `COM_CHANGE_USER` payload (its command byte first) names: after the user,
/// the auth response (one length byte: CLIENT_SECURE_CONNECTION, which every 4.1+ client
/// sets), the schema and the two-byte character set. `None` when it names none: the server
/// then takes mysql_native_password, which no stand-in follows.
pub fn change_user_plugin(payload: &[u8]) -> Option<&str> {
    let rest = payload.get(1..)?;
    let rest = rest.get(rest.iter().position(|&b| b == 0)? + 1..)?;
    let (&len, rest) = rest.split_first()?;
    let rest = rest.get(usize::from(len)..)?;
    let rest = rest.get(rest.iter().position(|&b| b == 0)? + 1 + 2..)?;
    std::str::from_utf8(&rest[..rest.iter().position(|&b| b == 0)?]).ok()
}

/// XORs `data` with `scramble`, cycled: how the SHA-256 plugins hide the NUL-terminated
/// password before encrypting it, and how the receiver recovers it. Involutive.
pub fn xor_scramble(data: &mut [u8], scramble: &[u8]) {
    if scramble.is_empty() {
        return;
    }
    for (byte, key) in data.iter_mut().zip(scramble.iter().cycle()) {
        *byte ^= key;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MySQL 8.0 greeting, byte for byte as the server sends it (protocol 10, version
    /// "8.0.36", thread 8, scramble "ABCDEFGH" + "IJKLMNOPQRST", caching_sha2_password).
    fn mysql8_greeting() -> Vec<u8> {
        let mut p = vec![10];
        p.extend_from_slice(b"8.0.36\0");
        p.extend_from_slice(&8u32.to_le_bytes());
        p.extend_from_slice(b"ABCDEFGH");
        p.push(0);
        p.extend_from_slice(&0xffffu16.to_le_bytes());
        p.push(0xff);
        p.extend_from_slice(&2u16.to_le_bytes());
        p.extend_from_slice(&0xdfffu16.to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 10]);
        p.extend_from_slice(b"IJKLMNOPQRST\0");
        p.extend_from_slice(b"caching_sha2_password\0");
        p
    }

    #[test]
    fn the_greeting_scramble_is_both_parts_without_the_nul() {
        assert_eq!(greeting_scramble(&mysql8_greeting()).unwrap(), b"ABCDEFGHIJKLMNOPQRST");
    }

    #[test]
    fn a_short_greeting_gives_what_it_has_and_a_broken_one_none() {
        let greeting = mysql8_greeting();
        assert_eq!(greeting_scramble(&greeting[..25]).unwrap(), b"ABCDEFGH");
        assert_eq!(greeting_scramble(&greeting[..14]), None);
        assert_eq!(greeting_scramble(&[10, b'8']), None);
        assert_eq!(greeting_scramble(&[]), None);
    }

    #[test]
    fn an_auth_switch_names_its_plugin_and_scramble() {
        let switch = b"\xfesha256_password\0abcdefghijklmnopqrst\0";
        assert_eq!(auth_switch(switch), Some((SHA256_PASSWORD, &b"abcdefghijklmnopqrst"[..])));
        assert_eq!(auth_switch(b"\xfe"), None, "the old-style switch names no plugin");
        assert_eq!(auth_switch(b"\x01\x04"), None);
        assert_eq!(auth_switch(b"\xfe\xff\xfe"), None, "no NUL, no name");
    }

    #[test]
    fn key_requests_are_the_plugins_own_bytes() {
        assert!(is_key_request(CACHING_SHA2_PASSWORD, &[2]));
        assert!(is_key_request(SHA256_PASSWORD, &[1]));
        assert!(!is_key_request(CACHING_SHA2_PASSWORD, &[1]));
        assert!(!is_key_request(SHA256_PASSWORD, &[2]));
        assert!(!is_key_request("mysql_native_password", &[2]));
        assert!(!is_key_request(CACHING_SHA2_PASSWORD, b"secret\0"));
    }

    /// A HandshakeResponse41 as PyMySQL sends it to a sha256_password greeting over a plain
    /// connection: its auth response is the key request.
    fn sha256_response(caps: u32) -> Vec<u8> {
        let mut p = caps.to_le_bytes().to_vec();
        p.extend_from_slice(&(1u32 << 24).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&[0; 23]);
        p.extend_from_slice(b"u_sha256\0");
        p.extend_from_slice(&[1, 1]);
        p.extend_from_slice(b"sha256_password\0");
        p
    }

    #[test]
    fn the_auth_response_is_found_and_replaced_under_either_length_field() {
        for caps in [0x000a_8201, 0x002a_8201] {
            let payload = sha256_response(caps);
            assert_eq!(auth_response(&payload), Some(&[1][..]));
            let replaced = with_auth_response(&payload, b"secret\0").unwrap();
            assert_eq!(auth_response(&replaced), Some(&b"secret\0"[..]));
            assert!(replaced.ends_with(b"\x07secret\0sha256_password\0"));
            assert_eq!(with_auth_response(&payload, &[0; 251]), None, "too long for one length byte");
        }
        assert_eq!(auth_response(&sha256_response(0x0008_0201)), None, "no length field (pre-4.1 auth)");
        assert_eq!(auth_response(&sha256_response(0x000a_8201)[..42]), None, "truncated");
    }

    #[test]
    fn the_server_asks_for_the_password_in_full_two_ways() {
        assert!(asks_for_full_password(CACHING_SHA2_PASSWORD, &[0x01, 0x04]));
        assert!(!asks_for_full_password(CACHING_SHA2_PASSWORD, &[0x01, 0x03]), "fast authentication succeeded");
        assert!(!asks_for_full_password(SHA256_PASSWORD, &[0x01, 0x04]));
        assert!(asks_for_full_password(CACHING_SHA2_PASSWORD, b"\xfesha256_password\0abcdefghijklmnopqrst\0"));
        assert!(!asks_for_full_password(SHA256_PASSWORD, b"\xfecaching_sha2_password\0abcdefghijklmnopqrst\0"));
        assert!(!asks_for_full_password("mysql_native_password", &[0x01, 0x04]));
    }

    #[test]
    fn a_first_packet_carries_the_password_only_in_a_clear_plugins_response() {
        let key_request = sha256_response(0x000a_8201);
        assert!(!password_in_first_packet(Some(SHA256_PASSWORD), &key_request));
        let password = with_auth_response(&key_request, b"secret\0").unwrap();
        assert!(password_in_first_packet(Some(SHA256_PASSWORD), &password));
        assert!(password_in_first_packet(Some("mysql_clear_password"), &password));
        assert!(!password_in_first_packet(Some(CACHING_SHA2_PASSWORD), &password), "a scramble, not the password");
        assert!(!password_in_first_packet(None, &password));
        let empty = with_auth_response(&key_request, &[0]).unwrap();
        assert!(!password_in_first_packet(Some(SHA256_PASSWORD), &empty));
    }

    #[test]
    fn a_change_user_names_its_plugin_after_the_schema_and_charset() {
        // COM_CHANGE_USER as libmysqlclient sends it: user, a 32-byte scramble, schema "",
        // utf8mb4_0900_ai_ci (255), the plugin, connection attributes.
        let mut p = b"\x11u_sha2\0\x20".to_vec();
        p.extend_from_slice(&[7; 32]);
        p.extend_from_slice(b"\0\xff\0caching_sha2_password\0\x00");
        assert_eq!(change_user_plugin(&p), Some(CACHING_SHA2_PASSWORD));
        // Without CLIENT_PLUGIN_AUTH: nothing after the charset; truncated: nothing at all.
        let bare = b"\x11u\0\x00db\0\x21\0";
        assert_eq!(change_user_plugin(bare), None);
        for len in 0..p.len() - 2 {
            assert_eq!(change_user_plugin(&p[..len]), None, "{len}");
        }
    }

    #[test]
    fn the_xor_cycles_the_scramble_and_undoes_itself() {
        let scramble = b"ABCDEFGHIJKLMNOPQRST";
        let mut data = b"a password longer than twenty bytes\0".to_vec();
        xor_scramble(&mut data, scramble);
        assert_eq!(data[0], b'a' ^ b'A');
        assert_eq!(data[20], b"a password longer than twenty bytes"[20] ^ b'A');
        xor_scramble(&mut data, scramble);
        assert_eq!(data, b"a password longer than twenty bytes\0");
    }
}
