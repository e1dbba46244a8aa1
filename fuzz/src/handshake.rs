//! `HandshakeV10` and `HandshakeResponse41` on arbitrary payloads, and
//! masking: a masked packet must keep its length, change only capability
//! bytes, and parse again to the same packet minus the masked bits — the
//! relay forwards the masked bytes, and the auth exchange after them is
//! relayed byte for byte, so a mask that moved anything would break logins.

use rttscope::protocol::constants::capability::{CLIENT_MYSQL, CLIENT_PLUGIN_AUTH, MASKED};
use rttscope::protocol::handshake::{negotiated, HandshakeResponse41, HandshakeV10};

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
    parsed.mask(&mut masked, mask);
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
    // Only bits of MASKED, as the relay does: others (CLIENT_PROTOCOL_41,
    // the auth-data encodings) change how the rest of the packet is read.
    let mask = mask & MASKED;
    let mut masked = payload.to_vec();
    parsed.mask(&mut masked, mask);
    assert_eq!(masked.len(), payload.len());
    assert!(changed(payload, &masked) <= RESPONSE_CAP_BYTES, "mask touched more than capability bytes");
    let again = HandshakeResponse41::parse(&masked).expect("a masked handshake response parses again");
    assert_eq!(again.capabilities, before.capabilities & !mask);
    assert_eq!((&again.user, &again.schema, &again.auth_plugin), (&before.user, &before.schema, &before.auth_plugin));
    Some(parsed.capabilities)
}

fn changed(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count()
}
