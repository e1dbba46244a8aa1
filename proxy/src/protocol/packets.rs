//! The generic response packets (OK, EOF, ERR) read from a payload prefix,
//! length-encoded integers, and the ERR packets rttscope itself sends.

use super::constants::{MAX_PAYLOAD_LEN, header};
use super::framing;

/// Reads a length-encoded integer; returns the value and the bytes it took.
/// `None` for the NULL marker (0xFB), the invalid 0xFF, or too few bytes.
pub fn lenenc_int(buf: &[u8]) -> Option<(u64, usize)> {
    let (&first, rest) = buf.split_first()?;
    let width = match first {
        0..=0xFA => return Some((u64::from(first), 1)),
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        _ => return None,
    };
    let bytes = rest.get(..width)?;
    let mut le = [0u8; 8];
    le[..width].copy_from_slice(bytes);
    Some((u64::from_le_bytes(le), 1 + width))
}

/// A little-endian `u16` at `at`, if the buffer reaches that far.
pub fn u16_at(buf: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(buf.get(at..at + 2)?.try_into().ok()?))
}

/// A little-endian `u32` at `at`, if the buffer reaches that far.
pub fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

/// The fields of an OK packet (or of an EOF-marker OK with header 0xFE) that
/// the state machine and the records use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OkPacket {
    /// Rows changed by the statement (or matched, with `CLIENT_FOUND_ROWS`); a length-encoded
    /// integer.
    pub affected_rows: u64,
    /// The `AUTO_INCREMENT` value the statement generated, 0 if none; a length-encoded integer.
    pub last_insert_id: u64,
    /// Server status flags (`SERVER_*`, see [`status`](super::constants::status)).
    pub status: u16,
    /// Warnings the statement raised, as `SHOW WARNINGS` would list.
    pub warnings: u16,
}

impl OkPacket {
    /// Parses an OK packet from the first bytes of its payload (header byte
    /// included). Fields cut off by a short packet read as zero; a malformed
    /// length-encoded integer gives `None`.
    pub fn parse(prefix: &[u8]) -> Option<OkPacket> {
        let body = prefix.get(1..)?;
        let (affected_rows, a) = lenenc_int(body)?;
        let (last_insert_id, b) = lenenc_int(body.get(a..)?)?;
        let at = a + b;
        Some(OkPacket {
            affected_rows,
            last_insert_id,
            status: u16_at(body, at).unwrap_or(0),
            warnings: u16_at(body, at + 2).unwrap_or(0),
        })
    }
}

/// The end of a row stream: either a classic EOF packet (exactly 5 bytes:
/// header, warnings, status) or, with `CLIENT_DEPRECATE_EOF`, an OK packet
/// with the 0xFE header. Telling them apart by length works for both modes.
pub fn terminator_status(prefix: &[u8], len: usize) -> Option<(u16, u16)> {
    if len == 5 {
        let warnings = u16_at(prefix, 1)?;
        let status = u16_at(prefix, 3)?;
        Some((status, warnings))
    } else {
        OkPacket::parse(prefix).map(|ok| (ok.status, ok.warnings))
    }
}

/// True when a packet in a row stream is its terminator rather than a row.
/// A text row can start with 0xFE only as the prefix of a string of at least
/// 2^24 bytes, which makes its first packet a full 0xFFFFFF; a classic EOF is
/// shorter than 9 bytes.
pub fn is_terminator(first: u8, len: usize, deprecate_eof: bool) -> bool {
    first == header::EOF && if deprecate_eof { len < MAX_PAYLOAD_LEN } else { len < 9 }
}

/// The type and flags of a column definition (`Protocol::ColumnDefinition41`):
/// six length-encoded names, MariaDB's optional extended type info, then
/// `0x0c` and the fixed fields. `None` when the prefix ends first (very long
/// names): a missing type only means a row is not sampled.
pub fn column_type(prefix: &[u8]) -> Option<(u8, u16)> {
    let mut at = 0;
    for _ in 0..6 {
        let first = *prefix.get(at)?;
        at = if first < 0xFB {
            // A name under 251 bytes, as almost all are (read for every column of every
            // result): its length is this byte. `at` is within the prefix, so no overflow.
            at + 1 + usize::from(first)
        } else {
            let (len, width) = lenenc_int(&prefix[at..])?;
            // Checked: a hostile length near 2^64 must not wrap (or panic) into a small offset.
            at.checked_add(width)?.checked_add(usize::try_from(len).ok()?)?
        };
    }
    if *prefix.get(at)? != 0x0c {
        // MariaDB extended type info: a length-encoded blob before the fixed fields.
        let (len, width) = lenenc_int(prefix.get(at..)?)?;
        at = at.checked_add(width)?.checked_add(usize::try_from(len).ok()?)?;
        if *prefix.get(at)? != 0x0c {
            return None;
        }
    }
    // 0x0c, charset (2), column length (4), type (1), flags (2).
    let ty = *prefix.get(at + 7)?;
    let flags = u16_at(prefix, at + 8)?;
    Some((ty, flags))
}

/// The error code and SQL state of an ERR packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrPacket {
    /// The server error number (`1062` for a duplicate key; `0xFFFF` a MariaDB progress report).
    pub code: u16,
    /// The five-character SQLSTATE after the `#` marker; `HY000` when the packet has none.
    pub sql_state: [u8; 5],
}

impl ErrPacket {
    /// Reads header byte, code and optional `#`-prefixed SQL state from an ERR_Packet's first
    /// bytes;
    /// `None` when fewer than 3 bytes (or a cut-off SQL state) arrived.
    pub fn parse(prefix: &[u8]) -> Option<ErrPacket> {
        let code = u16_at(prefix, 1)?;
        let sql_state = match prefix.get(3) {
            Some(b'#') => prefix.get(4..9)?.try_into().ok()?,
            _ => *b"HY000",
        };
        Some(ErrPacket { code, sql_state })
    }
}

/// Builds a complete ERR packet (header included) that rttscope sends to a
/// client itself. `protocol_41` is false before the handshake, where servers
/// send no SQL state marker and clients do not expect one.
pub fn err_packet(seq: u8, code: u16, sql_state: &str, message: &str, protocol_41: bool) -> Vec<u8> {
    let mut payload = Vec::with_capacity(16 + message.len());
    payload.push(header::ERR);
    payload.extend_from_slice(&code.to_le_bytes());
    if protocol_41 {
        payload.push(b'#');
        let mut state = [b'0'; 5];
        for (slot, b) in state.iter_mut().zip(sql_state.bytes()) {
            *slot = b;
        }
        payload.extend_from_slice(&state);
    }
    // A message never comes near 16 MiB, but keep the packet well-formed if it did.
    let room = MAX_PAYLOAD_LEN - 1 - payload.len();
    payload.extend_from_slice(&message.as_bytes()[..message.len().min(room)]);
    let mut packet = framing::header(payload.len(), seq).to_vec();
    packet.extend_from_slice(&payload);
    packet
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_widths() {
        assert_eq!(lenenc_int(&[0xFA]), Some((250, 1)));
        assert_eq!(lenenc_int(&[0xFC, 0x01, 0x02]), Some((0x0201, 3)));
        assert_eq!(lenenc_int(&[0xFD, 1, 2, 3]), Some((0x030201, 4)));
        assert_eq!(lenenc_int(&[0xFE, 1, 0, 0, 0, 0, 0, 0, 0]), Some((1, 9)));
        assert_eq!(lenenc_int(&[0xFB]), None);
        assert_eq!(lenenc_int(&[0xFF]), None);
        assert_eq!(lenenc_int(&[0xFC, 0x01]), None);
        assert_eq!(lenenc_int(&[]), None);
    }

    #[test]
    fn ok_packet_from_the_wire() {
        // OK: 1 affected row, insert id 0x0203 (lenenc 0xFC), status AUTOCOMMIT|MORE_RESULTS, 1 warning.
        let wire = [0x00, 0x01, 0xFC, 0x03, 0x02, 0x0A, 0x00, 0x01, 0x00];
        let ok = OkPacket::parse(&wire).unwrap();
        assert_eq!(ok, OkPacket { affected_rows: 1, last_insert_id: 0x0203, status: 0x000A, warnings: 1 });
        assert_eq!(OkPacket::parse(&[0x00, 0xFF]), None);
    }

    #[test]
    fn terminators() {
        // Classic EOF: 0xFE, warnings 0, status 0x0022.
        let eof = [0xFE, 0x00, 0x00, 0x22, 0x00];
        assert_eq!(terminator_status(&eof, 5), Some((0x22, 0)));
        // OK-as-EOF (CLIENT_DEPRECATE_EOF): 0xFE, 0 rows, 0 id, status 0x0008, 2 warnings.
        let ok = [0xFE, 0x00, 0x00, 0x08, 0x00, 0x02, 0x00];
        assert_eq!(terminator_status(&ok, 7), Some((0x08, 2)));
        assert!(is_terminator(0xFE, 5, false));
        assert!(!is_terminator(0xFE, 9, false));
        assert!(is_terminator(0xFE, 200, true));
        assert!(!is_terminator(0xFE, MAX_PAYLOAD_LEN, true));
        assert!(!is_terminator(0x00, 5, true));
    }

    #[test]
    fn column_definition_type() {
        // Captured from MariaDB 10.11: column "1", type LONG (0x03), flags 0x0081.
        let def = [3, b'd', b'e', b'f', 0, 0, 0, 1, b'1', 0, 0x0c, 0x3f, 0, 1, 0, 0, 0, 3, 0x81, 0, 0, 0, 0];
        assert_eq!(column_type(&def), Some((3, 0x81)));
        assert_eq!(column_type(&def[..15]), None);
        // With a (MariaDB) extended-type-info blob before the fixed fields.
        let mut ext = def[..10].to_vec();
        ext.extend_from_slice(&[4, 0, 2, b'{', b'}']);
        ext.extend_from_slice(&def[10..]);
        assert_eq!(column_type(&ext), Some((3, 0x81)));
        // A name of 300 bytes: its length takes 0xFC and two bytes.
        let mut long = def[..7].to_vec();
        long.extend_from_slice(&[0xFC, 0x2C, 0x01]);
        long.extend(std::iter::repeat_n(b'n', 300));
        long.extend_from_slice(&def[9..]);
        assert_eq!(column_type(&long), Some((3, 0x81)));
        // A hostile length near 2^64 ends the walk; it does not wrap into a small offset.
        let mut hostile = def[..7].to_vec();
        hostile.extend_from_slice(&[0xFE, 0xF8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
        hostile.extend_from_slice(&def[9..]);
        assert_eq!(column_type(&hostile), None);
    }

    #[test]
    fn err_packet_round_trip() {
        let packet = err_packet(0, 2003, "HY000", "can't connect", true);
        assert_eq!(&packet[..4], &[22, 0, 0, 0]);
        let err = ErrPacket::parse(&packet[4..]).unwrap();
        assert_eq!(err, ErrPacket { code: 2003, sql_state: *b"HY000" });
        assert_eq!(&packet[13..], b"can't connect");
        let pre41 = err_packet(0, 1040, "08004", "Too many connections", false);
        assert_eq!(&pre41[4..7], &[0xFF, 0x10, 0x04]);
        assert_eq!(&pre41[7..], b"Too many connections");
        assert_eq!(ErrPacket::parse(&pre41[4..]).unwrap().sql_state, *b"HY000");
    }
}
