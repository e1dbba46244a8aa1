//! Handshake parsing and masking on bytes captured from MariaDB 10.11 and
//! its command-line client, cross-checked against mysql_common's parsers.

use super::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// MariaDB 10.11.19's greeting payload (after the 4-byte header).
const GREETING: &str = "0a352e352e352d31302e31312e31392d4d6172696144422d302b64656231327531003400000057692a325a526b4400fef72d0200ff81150000000000001d0000005250772b6b5d6c2b2e45524c006d7973716c5f6e61746976655f70617373776f726400";

/// The `mariadb` CLI's handshake response payload to it.
const RESPONSE: &str = "84a2bf000000100021000000000000000000000000000000000000001d000000726f6f7400006d7973716c5f6e61746976655f70617373776f7264007f035f6f73054c696e75780c5f636c69656e745f6e616d650a6c69626d617269616462045f7069640531363036310f5f636c69656e745f76657273696f6e06332e332e3230095f706c6174666f726d067838365f36340c70726f6772616d5f6e616d65056d7973716c0c5f7365727665725f686f7374093132372e302e302e31";

#[test]
fn mariadb_greeting() {
    let payload = hex(GREETING);
    let g = HandshakeV10::parse(&payload).unwrap();
    assert_eq!(g.server_version, "5.5.5-10.11.19-MariaDB-0+deb12u1");
    assert_eq!(g.connection_id, 0x34);
    assert_eq!(g.auth_plugin, "mysql_native_password");
    // MariaDB clears CLIENT_MYSQL and announces extended capabilities.
    assert_eq!(g.capabilities & CLIENT_MYSQL, 0);
    assert_ne!(g.capabilities & MARIADB_CLIENT_CACHE_METADATA, 0);
    // This server has no TLS configured; it offers compression.
    assert_eq!(g.capabilities & CLIENT_SSL, 0);
    assert_ne!(g.capabilities & CLIENT_COMPRESS, 0);
    assert_ne!(g.capabilities & CLIENT_DEPRECATE_EOF, 0);
}

#[test]
fn masking_the_greeting_keeps_everything_else() {
    let original = hex(GREETING);
    let mut payload = original.clone();
    let mut g = HandshakeV10::parse(&payload).unwrap();
    g.set_capabilities(&mut payload, g.capabilities & !MASKED);
    assert_eq!(payload.len(), original.len());
    let reparsed = HandshakeV10::parse(&payload).unwrap();
    assert_eq!(reparsed.capabilities, g.capabilities);
    assert_eq!(reparsed.capabilities & MASKED, 0);
    assert_eq!(reparsed.capabilities | (original_caps(&original) & MASKED), original_caps(&original));
    // Only capability bytes changed.
    let changed: Vec<usize> = (0..payload.len()).filter(|&i| payload[i] != original[i]).collect();
    assert!(
        changed.iter().all(|&i| [g.caps_low_at, g.caps_low_at + 1].contains(&i)
            || g.caps_high_at.is_some_and(|at| i == at || i == at + 1)
            || g.caps_ext_at.is_some_and(|at| (at..at + 4).contains(&i))),
        "{changed:?}"
    );

    // mysql_common reads the masked greeting the same way.
    let theirs: mysql_common::packets::HandshakePacket<'_> =
        mysql_common::proto::MyDeserialize::deserialize((), &mut mysql_common::io::ParseBuf(&payload)).unwrap();
    assert_eq!(u64::from(theirs.capabilities().bits()), reparsed.capabilities & 0xFFFF_FFFF);
    assert_eq!(theirs.connection_id(), reparsed.connection_id);
    assert_eq!(theirs.auth_plugin_name_ref(), Some(&b"mysql_native_password"[..]));
}

fn original_caps(payload: &[u8]) -> u64 {
    HandshakeV10::parse(payload).unwrap().capabilities
}

#[test]
fn mariadb_cli_handshake_response() {
    let payload = hex(RESPONSE);
    let r = HandshakeResponse41::parse(&payload).unwrap();
    assert_eq!(r.user, "root");
    assert_eq!(r.schema, None);
    assert_eq!(r.auth_plugin.as_deref(), Some("mysql_native_password"));
    assert_ne!(r.capabilities & MARIADB_CLIENT_PROGRESS, 0);
    assert_eq!(r.attribute("_client_name"), Some("libmariadb"));
    assert_eq!(r.attribute("program_name"), Some("mysql"));
    assert_eq!(r.zstd_level, None);
    // Rewritten for a compressed leg with zstd at level 3: one byte longer, all else equal.
    let mut rewritten = payload.clone();
    let mut r2 = r.clone();
    let caps = (r.capabilities | CLIENT_ZSTD_COMPRESSION_ALGORITHM | CLIENT_COMPRESS) & !MASKED;
    r2.rewrite(&mut rewritten, caps, Some(3));
    assert_eq!(rewritten.len(), payload.len() + 1);
    let again = HandshakeResponse41::parse(&rewritten).unwrap();
    assert_eq!((again.capabilities, again.zstd_level), (caps, Some(3)));
    assert_eq!((&again.user, &again.attributes), (&r.user, &r.attributes));
    // And back: the level byte goes with the flag.
    let mut r3 = again.clone();
    r3.rewrite(&mut rewritten, r.capabilities, Some(3));
    assert_eq!(rewritten, payload);
}

#[test]
fn an_ssl_request_is_the_responses_first_32_bytes() {
    let payload = hex(RESPONSE);
    let request = HandshakeResponse41::ssl_request(&payload);
    assert_eq!(request.len(), SSL_REQUEST_LEN);
    assert!(is_ssl_request(&request));
    assert!(!is_ssl_request(&payload[..32]), "without CLIENT_SSL it is no SSLRequest");
    assert_eq!(&request[4..], &payload[4..32]);
}

#[test]
fn ssl_request_is_refused() {
    let mut payload = hex(RESPONSE)[..32].to_vec();
    payload[1] |= (CLIENT_SSL >> 8) as u8;
    assert_eq!(HandshakeResponse41::parse(&payload), Err(DecodeError::TlsRequested));
}

#[test]
fn response_with_schema_and_lenenc_auth() {
    // CLIENT_PROTOCOL_41 | SECURE_CONNECTION | CONNECT_WITH_DB | PLUGIN_AUTH | LENENC, CLIENT_MYSQL set (MySQL client).
    let caps = (CLIENT_MYSQL
        | CLIENT_PROTOCOL_41
        | CLIENT_SECURE_CONNECTION
        | CLIENT_CONNECT_WITH_DB
        | CLIENT_PLUGIN_AUTH
        | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA) as u32;
    let mut p = caps.to_le_bytes().to_vec();
    p.extend_from_slice(&[0, 0, 0, 1, 33]);
    p.extend_from_slice(&[0; 23]);
    p.extend_from_slice(b"app\0");
    p.extend_from_slice(&[3, 1, 2, 3]);
    p.extend_from_slice(b"shop\0caching_sha2_password\0");
    let r = HandshakeResponse41::parse(&p).unwrap();
    assert_eq!(r.user, "app");
    assert_eq!(r.schema.as_deref(), Some("shop"));
    assert_eq!(r.auth_plugin.as_deref(), Some("caching_sha2_password"));
    // Auth data longer than the packet is malformed, not a panic.
    p[36] = 200;
    assert!(matches!(HandshakeResponse41::parse(&p), Err(DecodeError::Malformed { .. })));
}

#[test]
fn greeting_truncated_at_every_length_never_panics() {
    let payload = hex(GREETING);
    for len in 0..payload.len() {
        let _ = HandshakeV10::parse(&payload[..len]);
    }
    let response = hex(RESPONSE);
    for len in 0..response.len() {
        let _ = HandshakeResponse41::parse(&response[..len]);
    }
}

#[test]
fn negotiation() {
    let mariadb = CLIENT_PROTOCOL_41 | MARIADB_CLIENT_CACHE_METADATA;
    assert_eq!(negotiated(mariadb, mariadb), mariadb);
    // A MySQL-flavoured peer on either side: no extended capabilities.
    assert_eq!(negotiated(mariadb, mariadb | CLIENT_MYSQL), CLIENT_PROTOCOL_41);
    assert_eq!(negotiated(0xFFFF_FFFF, CLIENT_PROTOCOL_41), CLIENT_PROTOCOL_41);
}

#[test]
fn wrong_protocol_version() {
    assert_eq!(HandshakeV10::parse(&[9, b'x', 0]), Err(DecodeError::ProtocolVersion(9)));
}
