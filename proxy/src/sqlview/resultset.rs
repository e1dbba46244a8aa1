//! Text-protocol responses rttscope makes itself: a result set, an OK, an ERR, each
//! shaped for the capabilities the client negotiated (EOF or not, MariaDB's metadata
//! extensions, MySQL's optional metadata), so any client reads them as a server's.

use crate::protocol::constants::capability::*;
use crate::protocol::framing;
use crate::protocol::packets::err_packet;

/// Column types used here (`enum_field_types`).
const TYPE_LONGLONG: u8 = 0x08;
const TYPE_DOUBLE: u8 = 0x05;
const TYPE_VAR_STRING: u8 = 0xFD;
/// Column flags.
const NOT_NULL: u16 = 0x0001;
const UNSIGNED: u16 = 0x0020;
const NUM: u16 = 0x8000;
/// Collations: utf8mb4_general_ci for text, binary for numbers.
const UTF8MB4: u16 = 45;
const BINARY: u16 = 63;
/// Decimals of a DOUBLE shown as it comes (not a fixed scale).
const NOT_FIXED_DEC: u8 = 31;
/// The server status flags an answer repeats from the server's last: the transaction
/// state and the SQL mode the client tracks. The others describe a response (more
/// results, cursors, session-state changes) and must not be echoed.
const KEPT_STATUS: u16 = 0x0001 | 0x0002 | 0x0200 | 0x2000;

/// A column's kind: how its values are typed for the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    /// A whole number ≥ 0.
    Count,
    /// A number with decimals.
    Number,
}

/// A result set under construction.
pub struct ResultSet {
    table: &'static str,
    columns: Vec<(&'static str, Kind)>,
    rows: Vec<Vec<Option<String>>>,
}

impl ResultSet {
    /// A result set of `table` (the name clients show as the column's table).
    pub fn new(table: &'static str, columns: &[(&'static str, Kind)]) -> ResultSet {
        ResultSet { table, columns: columns.to_vec(), rows: Vec::new() }
    }

    /// Adds a row, one value per column (`None` is NULL; missing values are NULL too).
    pub fn row(&mut self, values: Vec<Option<String>>) {
        self.rows.push(values);
    }

    /// The response packets, sequence ids from 1.
    pub fn encode(&self, capabilities: u64, server_status: u16) -> Vec<u8> {
        let status = server_status & KEPT_STATUS;
        let mut out = Packets::new();
        let mut count = Vec::new();
        lenenc_int(&mut count, self.columns.len() as u64);
        // "Metadata follows", where the client can be told it does not.
        if capabilities & CLIENT_OPTIONAL_RESULTSET_METADATA != 0 {
            count.push(1);
        }
        if capabilities & MARIADB_CLIENT_CACHE_METADATA != 0 {
            count.push(1);
        }
        out.push(&count);
        for (i, &(name, kind)) in self.columns.iter().enumerate() {
            out.push(&self.column_definition(i, name, kind, capabilities));
        }
        let deprecate_eof = capabilities & CLIENT_DEPRECATE_EOF != 0;
        if !deprecate_eof {
            out.push(&eof(status));
        }
        for row in &self.rows {
            let mut payload = Vec::new();
            for i in 0..self.columns.len() {
                match row.get(i).and_then(Option::as_deref) {
                    Some(value) => lenenc_str(&mut payload, value.as_bytes()),
                    None => payload.push(0xFB),
                }
            }
            out.push(&payload);
        }
        if deprecate_eof {
            // An OK packet with the EOF header ends the rows.
            let mut end = vec![0xFE, 0, 0];
            end.extend_from_slice(&status.to_le_bytes());
            end.extend_from_slice(&0u16.to_le_bytes());
            out.push(&end);
        } else {
            out.push(&eof(status));
        }
        out.bytes
    }

    fn column_definition(&self, index: usize, name: &str, kind: Kind, capabilities: u64) -> Vec<u8> {
        let mut p = Vec::new();
        for field in ["def", "rttscope", self.table, self.table, name, name] {
            lenenc_str(&mut p, field.as_bytes());
        }
        if capabilities & MARIADB_CLIENT_EXTENDED_TYPE_INFO != 0 {
            p.push(0);
        }
        // Display width: the widest value (in characters, ×4 bytes for utf8mb4 text).
        let widest = self
            .rows
            .iter()
            .filter_map(|row| row.get(index).and_then(Option::as_deref))
            .map(|v| v.chars().count())
            .max()
            .unwrap_or(0)
            .max(name.len()) as u32;
        let (charset, length, ty, flags, decimals) = match kind {
            Kind::Text => (UTF8MB4, widest.saturating_mul(4), TYPE_VAR_STRING, 0, 0),
            Kind::Count => (BINARY, 20, TYPE_LONGLONG, NOT_NULL | UNSIGNED | NUM, 0),
            Kind::Number => (BINARY, 22, TYPE_DOUBLE, NUM, NOT_FIXED_DEC),
        };
        p.push(0x0C);
        p.extend_from_slice(&charset.to_le_bytes());
        p.extend_from_slice(&length.to_le_bytes());
        p.push(ty);
        p.extend_from_slice(&flags.to_le_bytes());
        p.push(decimals);
        p.extend_from_slice(&[0, 0]);
        p
    }
}

/// An OK packet (sequence id 1) that changes nothing.
pub fn ok(server_status: u16) -> Vec<u8> {
    let mut payload = vec![0x00, 0, 0];
    payload.extend_from_slice(&(server_status & KEPT_STATUS).to_le_bytes());
    payload.extend_from_slice(&0u16.to_le_bytes());
    let mut out = Packets::new();
    out.push(&payload);
    out.bytes
}

/// An ERR packet (sequence id 1), its message prefixed so the user knows who says it.
pub fn err(code: u16, sql_state: &str, message: &str) -> Vec<u8> {
    err_packet(1, code, sql_state, &format!("rttscope: {message}"), true)
}

fn eof(status: u16) -> Vec<u8> {
    let mut p = vec![0xFE, 0, 0];
    p.extend_from_slice(&status.to_le_bytes());
    p
}

/// Packets in sequence from id 1. Payloads here are far below 16 MiB; a longer one is
/// cut rather than split (a table row never comes near).
struct Packets {
    bytes: Vec<u8>,
    seq: u8,
}

impl Packets {
    fn new() -> Packets {
        Packets { bytes: Vec::new(), seq: 1 }
    }

    fn push(&mut self, payload: &[u8]) {
        let payload = &payload[..payload.len().min(crate::protocol::constants::MAX_PAYLOAD_LEN - 1)];
        self.bytes.extend_from_slice(&framing::header(payload.len(), self.seq));
        self.bytes.extend_from_slice(payload);
        self.seq = self.seq.wrapping_add(1);
    }
}

fn lenenc_int(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=250 => out.push(n as u8),
        251..=0xFFFF => {
            out.push(0xFC);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xFE);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

fn lenenc_str(out: &mut Vec<u8>, s: &[u8]) {
    lenenc_int(out, s.len() as u64);
    out.extend_from_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::packets::lenenc_int as read_lenenc;
    use crate::protocol::{NoObserver, PacketScanner};

    fn payloads(bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while rest.len() >= 4 {
            let len = usize::from(rest[0]) | usize::from(rest[1]) << 8 | usize::from(rest[2]) << 16;
            out.push((rest[3], rest[4..4 + len].to_vec()));
            rest = &rest[4 + len..];
        }
        assert!(rest.is_empty());
        out
    }

    fn table() -> ResultSet {
        let mut rs = ResultSet::new("statements", &[("statement", Kind::Text), ("calls", Kind::Count)]);
        rs.row(vec![Some("select ?".into()), Some("3".into())]);
        rs.row(vec![Some("é".repeat(300)), None]);
        rs
    }

    #[test]
    fn result_set_with_eof_packets() {
        let packets = payloads(&table().encode(CLIENT_PROTOCOL_41, 0x0002 | 0x0008));
        let seqs: Vec<u8> = packets.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, (1..=7).collect::<Vec<u8>>());
        assert_eq!(packets[0].1, vec![2]);
        // EOF after the definitions and after the rows, with the kept status only.
        assert_eq!(packets[3].1, vec![0xFE, 0, 0, 2, 0]);
        assert_eq!(packets[6].1, vec![0xFE, 0, 0, 2, 0]);
        assert_eq!(packets[4].1, b"\x08select ?\x013".to_vec());
        // A 600-byte value takes a 3-byte length; NULL is 0xFB.
        assert_eq!(read_lenenc(&packets[5].1), Some((600, 3)));
        assert_eq!(packets[5].1.last(), Some(&0xFB));
    }

    #[test]
    fn result_set_for_a_modern_client() {
        let caps = CLIENT_PROTOCOL_41 | CLIENT_DEPRECATE_EOF | MARIADB_CLIENT_CACHE_METADATA;
        let packets = payloads(&table().encode(caps, 0x0003));
        assert_eq!(packets.len(), 6, "count, 2 definitions, 2 rows, OK");
        assert_eq!(packets[0].1, vec![2, 1]);
        assert_eq!(packets[5].1, vec![0xFE, 0, 0, 3, 0, 0, 0]);
    }

    #[test]
    fn the_session_reads_it_as_a_whole_response() {
        use crate::protocol::Session;
        use crate::protocol::session::Identity;
        for caps in [CLIENT_PROTOCOL_41, CLIENT_PROTOCOL_41 | CLIENT_DEPRECATE_EOF | MARIADB_CLIENT_EXTENDED_TYPE_INFO]
        {
            let identity = Identity { user: "u".into(), schema: None };
            let mut obs = NoObserver;
            let mut session = Session::after_handshake(identity, caps, 0, 1, 0, 64, &mut obs);
            // The login's OK, then a COM_QUERY and the answer.
            let login_ok = [&framing::header(7, 2)[..], &[0, 0, 0, 2, 0, 0, 0]].concat();
            PacketScanner::new().scan(&login_ok, &mut session.upstream(&mut obs));
            let query = [&framing::header(9, 0)[..], b"\x03SHOW LOL"].concat();
            PacketScanner::new().scan(&query, &mut session.client(&mut obs));
            assert_eq!(session.pending(), 1);
            PacketScanner::new().scan(&table().encode(caps, 2), &mut session.upstream(&mut obs));
            assert!(session.is_idle() && session.is_synced(), "caps {caps:x}");
        }
    }

    #[test]
    fn ok_and_err() {
        assert_eq!(payloads(&ok(0x0001 | 0x4000)), vec![(1, vec![0, 0, 0, 1, 0, 0, 0])]);
        let err = payloads(&err(1064, "42000", "no"));
        assert_eq!(err[0].0, 1);
        assert_eq!(&err[0].1[..9], b"\xff\x28\x04#42000");
        assert!(err[0].1.ends_with(b"rttscope: no"));
    }
}
