//! Complete packets as a server or client writes them, built from a few
//! parameters: for tests, fuzzing and benchmarks that need realistic bytes
//! without a server. Nothing on the forwarding path uses them.

use super::constants::command::COM_QUERY;
use super::framing::header;

/// A packet: header (payload length, `seq`) and payload.
pub fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = header(payload.len(), seq).to_vec();
    p.extend_from_slice(payload);
    p
}

/// A `COM_QUERY` with `sql`.
pub fn query(sql: &str) -> Vec<u8> {
    let mut payload = vec![COM_QUERY];
    payload.extend_from_slice(sql.as_bytes());
    packet(0, &payload)
}

/// A column definition named `name` (catalog "def", a LONG column).
pub fn column_def(seq: u8, name: &str) -> Vec<u8> {
    let mut p = vec![3, b'd', b'e', b'f', 0, 0, 0, name.len() as u8];
    p.extend_from_slice(name.as_bytes());
    p.extend_from_slice(&[0, 0x0c, 0x3f, 0, 1, 0, 0, 0, 3, 0x81, 0, 0, 0, 0]);
    packet(seq, &p)
}

/// A classic EOF packet with `status`.
pub fn eof(seq: u8, status: u16) -> Vec<u8> {
    let s = status.to_le_bytes();
    packet(seq, &[0xFE, 0, 0, s[0], s[1]])
}

/// An OK packet: `affected` rows, `status`.
pub fn ok(seq: u8, affected: u8, status: u16) -> Vec<u8> {
    let s = status.to_le_bytes();
    packet(seq, &[0x00, affected, 0, s[0], s[1], 0, 0])
}

/// The OK packet with header 0xFE that ends rows under CLIENT_DEPRECATE_EOF.
pub fn ok_eof(seq: u8, status: u16) -> Vec<u8> {
    let s = status.to_le_bytes();
    packet(seq, &[0xFE, 0, 0, s[0], s[1], 0, 0])
}

/// A text-protocol row of values shorter than 251 bytes each.
pub fn text_row(seq: u8, values: &[&str]) -> Vec<u8> {
    let mut p = Vec::with_capacity(128);
    for v in values {
        p.push(v.len() as u8);
        p.extend_from_slice(v.as_bytes());
    }
    packet(seq, &p)
}

/// An ERR packet with `code` and SQL state 42000.
pub fn err(seq: u8, code: u16) -> Vec<u8> {
    let c = code.to_le_bytes();
    let mut p = vec![0xFF, c[0], c[1], b'#'];
    p.extend_from_slice(b"42000oops");
    packet(seq, &p)
}
