//! `HandshakeV10` and `HandshakeResponse41` on arbitrary payloads, and their
//! rewriting for the other leg: a greeting keeps its length and changes only
//! capability bytes; a response changes only capability bytes and its zstd
//! level — both parse again to the same packet with the new capabilities. The
//! relay forwards rewritten packets, so a rewrite that moved anything else
//! would break logins.

use rttscope::protocol::constants::capability::{
    CLIENT_MYSQL, CLIENT_PLUGIN_AUTH, CLIENT_ZSTD_COMPRESSION_ALGORITHM, MASKED, PER_LEG,
};
use rttscope::protocol::handshake::{HandshakeResponse41, HandshakeV10, negotiated};

use super::Input;

/// Greeting capability bytes: low (2) + high (2) + MariaDB extended (4).
const GREETING_CAP_BYTES: usize = 8;
/// Response capability bytes: classic (4) + MariaDB extended (4).
const RESPONSE_CAP_BYTES: usize = 8;

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mask = input.u64();
    let payload = input.rest();
    // The same bytes are tried as both packets: either parser may meet
    // anything, and a valid greeting is rarely a valid response.
    let server = greeting(payload, mask);
    let client = response(payload, mask);
    if let (Some(server), Some(client)) = (server, client) {
        let both = negotiated(server, client);
        assert_eq!(both & !(server & client), 0, "negotiated more than both offered");
    }
}

/// Returns the masked capabilities when `payload` parses as a greeting.
fn greeting(payload: &[u8], mask: u64) -> Option<u64> {
    let mut parsed = HandshakeV10::parse(payload).ok()?;
    let before = parsed.clone();
    // Clearing CLIENT_MYSQL would move where the extended bits are read
    // from; the relay never masks it.
    let mask = mask & !CLIENT_MYSQL;
    let mut masked = payload.to_vec();
    parsed.set_capabilities(&mut masked, before.capabilities & !mask);
    assert_eq!(masked.len(), payload.len());
    assert!(changed(payload, &masked) <= GREETING_CAP_BYTES, "mask touched more than capability bytes");
    assert_eq!(parsed.capabilities, before.capabilities & !mask);
    let again = HandshakeV10::parse(&masked).expect("a masked greeting parses again");
    assert_eq!(again.capabilities, parsed.capabilities);
    assert_eq!((&again.server_version, again.connection_id), (&before.server_version, before.connection_id));
    if mask & CLIENT_PLUGIN_AUTH == 0 {
        assert_eq!(again.auth_plugin, before.auth_plugin);
    }
    Some(parsed.capabilities)
}

/// Returns the masked capabilities when `payload` parses as a handshake response.
fn response(payload: &[u8], mask: u64) -> Option<u64> {
    let mut parsed = HandshakeResponse41::parse(payload).ok()?;
    let before = parsed.clone();
    // Only bits the relay changes (MASKED, and the per-leg TLS and compression
    // bits): others (CLIENT_PROTOCOL_41, the auth-data encodings) change how the
    // rest of the packet is read. The relay never sets CLIENT_SSL on a response.
    let flip = mask & (MASKED | PER_LEG) & !rttscope::protocol::constants::capability::CLIENT_SSL;
    let caps = before.capabilities ^ flip;
    let level = (mask >> 56) as u8;
    let mut rewritten = payload.to_vec();
    parsed.rewrite(&mut rewritten, caps, Some(level));
    let common = payload.len().min(rewritten.len());
    assert!(
        changed(&payload[..common], &rewritten[..common]) <= RESPONSE_CAP_BYTES + 1,
        "touched more than capabilities"
    );
    let again = HandshakeResponse41::parse(&rewritten).expect("a rewritten handshake response parses again");
    // What the rewrite says it wrote is what the packet says: the asked-for capabilities,
    // less MariaDB's extended bits when CLIENT_MYSQL leaves them no room, and less the flags
    // of fields the packet lacks when a zstd level follows them. No level follows an
    // attribute block that runs past the packet: nothing after it can be read.
    let representable = if caps & CLIENT_MYSQL == 0 { caps } else { caps & u64::from(u32::MAX) };
    let appended = representable & CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0 && !before.attributes_unreadable();
    let expected = if appended { representable & !before.absent_fields() } else { representable };
    assert_eq!(parsed.capabilities, expected);
    if appended {
        assert_eq!(again.zstd_level, Some(level), "the level is read where it was written");
    }
    assert_eq!(again.zstd_level, parsed.zstd_level, "the rewrite reports the level the packet carries");
    assert_eq!(again.capabilities, parsed.capabilities);
    assert_eq!((&again.user, &again.schema, &again.auth_plugin), (&before.user, &before.schema, &before.auth_plugin));
    assert_eq!(again.attributes, before.attributes);
    Some(parsed.capabilities)
}

fn changed(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count()
}
