//! Values in the binary protocol: the parameters of `COM_STMT_EXECUTE`,
//! rendered in the same canonical text a literal in SQL would have, so a
//! prepared `WHERE id = ?` and a literal `WHERE id = 10001` compare equal.

mod text;

use super::packets::lenenc_int;
pub use text::TEXT_LEN;
use text::{date_text, double_text, float_text, int_text, time_text};

/// Column/parameter type codes (`enum_field_types`).
pub mod types {
    /// Pre-5.0 `DECIMAL`; sent, like `NEWDECIMAL`, as a length-encoded decimal string.
    pub const MYSQL_TYPE_DECIMAL: u8 = 0x00;
    /// `TINYINT`: 1 byte in the binary protocol.
    pub const MYSQL_TYPE_TINY: u8 = 0x01;
    /// `SMALLINT`: 2 bytes little-endian.
    pub const MYSQL_TYPE_SHORT: u8 = 0x02;
    /// `INT`: 4 bytes little-endian.
    pub const MYSQL_TYPE_LONG: u8 = 0x03;
    /// `FLOAT`: 4-byte IEEE 754 single.
    pub const MYSQL_TYPE_FLOAT: u8 = 0x04;
    /// `DOUBLE`: 8-byte IEEE 754 double.
    pub const MYSQL_TYPE_DOUBLE: u8 = 0x05;
    /// A parameter bound as NULL: no value bytes.
    pub const MYSQL_TYPE_NULL: u8 = 0x06;
    /// `TIMESTAMP`: a length byte (0, 4, 7 or 11), then date, time and microseconds.
    pub const MYSQL_TYPE_TIMESTAMP: u8 = 0x07;
    /// `BIGINT`: 8 bytes little-endian.
    pub const MYSQL_TYPE_LONGLONG: u8 = 0x08;
    /// `MEDIUMINT`: sent as 4 bytes in the binary protocol, not 3.
    pub const MYSQL_TYPE_INT24: u8 = 0x09;
    /// `DATE`: a length byte (0 or 4), then year, month, day.
    pub const MYSQL_TYPE_DATE: u8 = 0x0a;
    /// `TIME`: a length byte (0, 8 or 12), then sign, days, hours, minutes, seconds, microseconds.
    pub const MYSQL_TYPE_TIME: u8 = 0x0b;
    /// `DATETIME`: laid out like `MYSQL_TYPE_TIMESTAMP`.
    pub const MYSQL_TYPE_DATETIME: u8 = 0x0c;
    /// `YEAR`: 2 bytes little-endian in the binary protocol.
    pub const MYSQL_TYPE_YEAR: u8 = 0x0d;
}

use types::*;

/// Flag on a parameter type: the integer is unsigned.
const UNSIGNED: u8 = 0x80;
/// Flag on a column definition: the integer is unsigned.
pub const UNSIGNED_FLAG: u16 = 0x20;

/// One parameter of an execute, as far as it could be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param<'a> {
    /// SQL NULL: its bit set in the NULL bitmap, or type `MYSQL_TYPE_NULL`.
    Null,
    /// A number, date or time, rendered as the same value reads in a SQL literal or a
    /// text-protocol row (`42`, `1.5`, `2024-02-29 13:05:09`).
    Text {
        /// The text; only the first `len` bytes count.
        buf: [u8; TEXT_LEN],
        /// How many bytes of `buf` hold it.
        len: u8,
    },
    /// Strings, decimals, blobs, JSON: the bytes as sent.
    Bytes(&'a [u8]),
    /// A value without a literal's text (a NaN, a date of the wrong length).
    Other,
}

impl Param<'_> {
    /// The canonical bytes of this value, as a SQL literal would give them;
    /// `None` for NULL and for types without one.
    pub fn canonical(&self) -> Option<&[u8]> {
        match self {
            Param::Text { buf, len } => buf.get(..usize::from(*len)),
            Param::Bytes(b) => Some(b),
            Param::Null | Param::Other => None,
        }
    }
}

/// Reads one binary-protocol value of type `ty` from the front of `buf`;
/// returns it and the rest, or `None` if `buf` is too short.
pub fn read_value(ty: u8, unsigned: bool, buf: &[u8]) -> Option<(Param<'_>, &[u8])> {
    let int = |n: usize| -> Option<(Param<'static>, &[u8])> {
        let (b, rest) = split(buf, n)?;
        let mut le = [0u8; 8];
        le[..n].copy_from_slice(b);
        let raw = u64::from_le_bytes(le);
        let text = if unsigned {
            int_text(raw)
        } else {
            // Sign-extend from n bytes.
            let shift = 64 - 8 * n as u32;
            int_text(((raw << shift) as i64) >> shift)
        };
        Some((text, rest))
    };
    match ty {
        MYSQL_TYPE_TINY => int(1),
        MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR => int(2),
        MYSQL_TYPE_LONG | MYSQL_TYPE_INT24 => int(4),
        MYSQL_TYPE_LONGLONG => int(8),
        MYSQL_TYPE_FLOAT => {
            let (b, rest) = split(buf, 4)?;
            Some((float_text(f32::from_le_bytes([b[0], b[1], b[2], b[3]])), rest))
        }
        MYSQL_TYPE_DOUBLE => {
            let (b, rest) = split(buf, 8)?;
            let mut le = [0u8; 8];
            le.copy_from_slice(b);
            Some((double_text(f64::from_le_bytes(le)), rest))
        }
        MYSQL_TYPE_NULL => Some((Param::Null, buf)),
        MYSQL_TYPE_DATE | MYSQL_TYPE_DATETIME | MYSQL_TYPE_TIMESTAMP | MYSQL_TYPE_TIME => {
            // A length byte, then that many bytes.
            let (&n, r) = buf.split_first()?;
            let (value, rest) = split(r, usize::from(n))?;
            let text = match ty {
                MYSQL_TYPE_TIME => time_text(value),
                _ => date_text(value, ty != MYSQL_TYPE_DATE),
            };
            Some((text, rest))
        }
        // Everything else travels as a length-encoded string.
        _ => {
            let (n, width) = lenenc_int(buf)?;
            let n = usize::try_from(n).ok()?;
            split(buf.get(width..)?, n).map(|(bytes, r)| (Param::Bytes(bytes), r))
        }
    }
}

/// Reads the parameters of a `COM_STMT_EXECUTE` payload (command byte
/// excluded). `count` comes from the statement's prepare response; `types`
/// holds the types from the last execute that sent them and is updated when
/// this one sends new ones (the "new params bound" flag). Stops quietly at
/// the first thing it cannot read: parameters are observations, never a
/// reason to fail a connection.
pub fn execute_params<'a>(
    payload: &'a [u8],
    count: usize,
    types: &mut Vec<(u8, u8)>,
    query_attributes: bool,
    each: impl FnMut(Param<'a>),
) {
    execute_params_after_long_data(payload, count, types, query_attributes, 0, each);
}

/// [`execute_params`] for a statement whose parameters `long_data` (bit `i`: parameter `i`,
/// the first 64) were sent by `COM_STMT_SEND_LONG_DATA` since its last execute or reset: the
/// execute carries no value for those (the server takes the long data instead, whatever the
/// NULL bitmap says), and each reads as [`Param::Other`].
pub fn execute_params_after_long_data<'a>(
    payload: &'a [u8],
    count: usize,
    types: &mut Vec<(u8, u8)>,
    query_attributes: bool,
    long_data: u64,
    mut each: impl FnMut(Param<'a>),
) {
    // statement id (4), flags (1), iteration count (4)
    let Some(rest) = payload.get(9..) else { return };
    // With query attributes, a flag says the parameter count follows: the statement's
    // parameters, then the attributes, each type followed by its name.
    let flags = payload.get(4).copied().unwrap_or(0);
    let (count, rest) = if query_attributes && flags & PARAMETER_COUNT_AVAILABLE != 0 {
        let Some((n, width)) = lenenc_int(rest) else { return };
        let Ok(n) = usize::try_from(n) else { return };
        (n.max(count), &rest[width..])
    } else {
        (count, rest)
    };
    if count == 0 {
        return;
    }
    let bitmap_len = count.div_ceil(8);
    let Some((bitmap, rest)) = split(rest, bitmap_len) else { return };
    let Some((&new_bound, mut rest)) = rest.split_first() else { return };
    if new_bound == 1 {
        types.clear();
        if query_attributes {
            for _ in 0..count {
                let Some((t, after)) = split(rest, 2) else { return };
                let Some(after) = skip_lenenc_string(after) else { return };
                types.push((t[0], t[1]));
                rest = after;
            }
        } else {
            let Some((sent, after)) = split(rest, 2 * count) else { return };
            types.extend(sent.chunks_exact(2).map(|t| (t[0], t[1])));
            rest = after;
        }
    }
    if types.len() != count {
        return;
    }
    for (i, &(ty, flags)) in types.iter().enumerate() {
        if i < 64 && long_data & (1 << i) != 0 {
            each(Param::Other);
            continue;
        }
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            each(Param::Null);
            continue;
        }
        let Some((param, after)) = read_value(ty, flags & UNSIGNED != 0, rest) else { return };
        each(param);
        rest = after;
    }
}

/// Reads the first values of a binary-protocol row (`0x00`, a NULL bitmap
/// offset by 2 bits, then the non-NULL values). `columns` are the result's
/// `(type, unsigned)`; stops at `max` values or where the prefix runs out.
pub fn binary_row<'a>(row: &'a [u8], columns: &[(u8, bool)], max: usize, mut each: impl FnMut(Param<'a>)) {
    let Some(rest) = row.get(1..) else { return };
    let Some((bitmap, mut rest)) = split(rest, (columns.len() + 7 + 2) / 8) else { return };
    for (i, &(ty, unsigned)) in columns.iter().enumerate().take(max) {
        let bit = i + 2;
        if bitmap[bit / 8] & (1 << (bit % 8)) != 0 {
            each(Param::Null);
            continue;
        }
        let Some((value, after)) = read_value(ty, unsigned, rest) else { return };
        each(value);
        rest = after;
    }
}

/// Reads the first values of a text-protocol row: length-encoded strings,
/// `0xFB` for NULL. Stops at `max` values or where the prefix runs out.
pub fn text_row<'a>(row: &'a [u8], max: usize, mut each: impl FnMut(Param<'a>)) {
    let mut rest = row;
    for _ in 0..max {
        match rest.first() {
            None => return,
            Some(0xFB) => {
                each(Param::Null);
                rest = &rest[1..];
            }
            Some(_) => {
                let Some((value, after)) = read_value(0xFD, false, rest) else { return };
                each(value);
                rest = after;
            }
        }
    }
}

/// `COM_STMT_EXECUTE` flag (with query attributes): the parameter count is sent.
const PARAMETER_COUNT_AVAILABLE: u8 = 0x08;

/// The rest after a length-encoded string.
fn skip_lenenc_string(buf: &[u8]) -> Option<&[u8]> {
    let (n, width) = lenenc_int(buf)?;
    split(buf.get(width..)?, usize::try_from(n).ok()?).map(|(_, rest)| rest)
}

/// A length-encoded string and the rest.
fn lenenc_string(buf: &[u8]) -> Option<(&[u8], &[u8])> {
    let (n, width) = lenenc_int(buf)?;
    split(buf.get(width..)?, usize::try_from(n).ok()?)
}

/// A `COM_QUERY` payload (command byte excluded) sent with `CLIENT_QUERY_ATTRIBUTES`:
/// the attributes before the SQL.
pub struct QueryAttributes<'a> {
    /// `(name, value)`, in order; a NULL or non-string value has no bytes.
    pub attributes: Vec<(&'a [u8], Option<&'a [u8]>)>,
    /// The statement's text.
    pub sql: &'a [u8],
}

/// Reads a `COM_QUERY` payload with query attributes: `None` when it does not parse.
pub fn query_attributes(payload: &[u8]) -> Option<QueryAttributes<'_>> {
    let (count, width) = lenenc_int(payload)?;
    let rest = payload.get(width..)?;
    // The parameter set count, always 1.
    let (_, width) = lenenc_int(rest)?;
    let mut rest = rest.get(width..)?;
    let count = usize::try_from(count).ok()?;
    let mut attributes = Vec::new();
    if count > 0 {
        let (bitmap, after) = split(rest, count.div_ceil(8))?;
        let (&new_bound, after) = after.split_first()?;
        if new_bound != 1 {
            return None;
        }
        rest = after;
        let mut names = Vec::with_capacity(count.min(64));
        for _ in 0..count {
            let (t, after) = split(rest, 2)?;
            let (name, after) = lenenc_string(after)?;
            names.push((t[0], t[1], name));
            rest = after;
        }
        for (i, (ty, flags, name)) in names.into_iter().enumerate() {
            if bitmap[i / 8] & (1 << (i % 8)) != 0 {
                attributes.push((name, None));
                continue;
            }
            let (value, after) = read_value(ty, flags & UNSIGNED != 0, rest)?;
            let bytes = match value {
                Param::Bytes(b) => Some(b),
                _ => None,
            };
            attributes.push((name, bytes));
            rest = after;
        }
    }
    Some(QueryAttributes { attributes, sql: rest })
}

fn split(buf: &[u8], n: usize) -> Option<(&[u8], &[u8])> {
    (buf.len() >= n).then(|| buf.split_at(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(payload: &[u8], count: usize, types: &mut Vec<(u8, u8)>) -> Vec<Option<Vec<u8>>> {
        let mut out = Vec::new();
        execute_params(payload, count, types, false, |p| out.push(p.canonical().map(<[u8]>::to_vec)));
        out
    }

    /// A traceparent as OpenTelemetry's MySQL instrumentations send it.
    const TRACEPARENT: &[u8] = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_query_with_attributes_as_mysql_8_sends_it() {
        // 2 attributes, 1 set; no NULLs; new types: VAR_STRING "traceparent", LONG "n";
        // then their values; then the SQL (MySQL's COM_QUERY with CLIENT_QUERY_ATTRIBUTES).
        let mut p = vec![2, 1, 0b0000_0000, 1];
        p.extend_from_slice(&[0xfd, 0, 11]);
        p.extend_from_slice(b"traceparent");
        p.extend_from_slice(&[MYSQL_TYPE_LONG, 0, 1, b'n']);
        p.push(TRACEPARENT.len() as u8);
        p.extend_from_slice(TRACEPARENT);
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(b"SELECT 1");
        let q = query_attributes(&p).expect("parses");
        assert_eq!(q.sql, b"SELECT 1");
        assert_eq!(q.attributes, vec![(&b"traceparent"[..], Some(TRACEPARENT)), (&b"n"[..], None)]);
        // No attributes: two zero counts, then the SQL.
        let q = query_attributes(b"\x00\x01SELECT 2").expect("parses");
        assert_eq!((q.attributes.len(), q.sql), (0, &b"SELECT 2"[..]));
        // Truncated anywhere: None, never a panic.
        for len in 0..p.len() - 8 {
            assert!(query_attributes(&p[..len]).is_none_or(|q| q.sql.is_empty() || len >= p.len() - 8), "{len}");
        }
    }

    #[test]
    fn an_execute_with_attributes_names_every_parameter() {
        // stmt 1, flags PARAMETER_COUNT_AVAILABLE, 1 iteration; 2 parameters (the
        // statement's one and an attribute); no NULLs; new types with names.
        let mut p = vec![1, 0, 0, 0, PARAMETER_COUNT_AVAILABLE, 1, 0, 0, 0, 2, 0, 1];
        p.extend_from_slice(&[MYSQL_TYPE_LONGLONG, 0, 0]);
        p.extend_from_slice(&[0xfd, 0, 2, b'a', b't']);
        p.extend_from_slice(&10001i64.to_le_bytes());
        p.extend_from_slice(&[2, b'x', b'y']);
        let mut types = Vec::new();
        let mut out = Vec::new();
        execute_params(&p, 1, &mut types, true, |v| out.push(v.canonical().map(<[u8]>::to_vec)));
        assert_eq!(out, vec![Some(b"10001".to_vec()), Some(b"xy".to_vec())]);
    }

    #[test]
    fn integers_strings_and_nulls() {
        // stmt 1, no cursor, 1 iteration; 4 params; NULL bitmap marks param 3;
        // new types: LONGLONG, VAR_STRING, TINY, LONG unsigned.
        let mut p = vec![1, 0, 0, 0, 0, 1, 0, 0, 0, 0b0000_0100, 1];
        p.extend_from_slice(&[MYSQL_TYPE_LONGLONG, 0, 0xfd, 0, MYSQL_TYPE_TINY, 0, MYSQL_TYPE_LONG, 0x80]);
        p.extend_from_slice(&10001i64.to_le_bytes());
        p.extend_from_slice(&[3, b'a', b'b', b'c']);
        p.extend_from_slice(&u32::MAX.to_le_bytes());
        let mut types = Vec::new();
        let got = collect(&p, 4, &mut types);
        assert_eq!(got, vec![Some(b"10001".to_vec()), Some(b"abc".to_vec()), None, Some(b"4294967295".to_vec())]);
        // A later execute without new types reuses the remembered ones.
        let mut again = vec![1, 0, 0, 0, 0, 1, 0, 0, 0, 0b0000_0110, 0];
        again.extend_from_slice(&(-7i64).to_le_bytes());
        again.extend_from_slice(&7u32.to_le_bytes());
        assert_eq!(collect(&again, 4, &mut types), vec![Some(b"-7".to_vec()), None, None, Some(b"7".to_vec())]);
    }

    /// mysql2 binds a JavaScript number as a DOUBLE, sending the types with every execute: the
    /// key 10001 reads as the literal `10001` does, and two keys differ.
    #[test]
    fn a_number_bound_as_a_double_reads_as_its_literal() {
        let execute = |key: f64| {
            let mut p = vec![7, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, MYSQL_TYPE_DOUBLE, 0, MYSQL_TYPE_DATETIME, 0];
            p.extend_from_slice(&key.to_le_bytes());
            p.extend_from_slice(&[7, 0xe8, 0x07, 2, 29, 13, 5, 9]);
            collect(&p, 2, &mut Vec::new())
        };
        assert_eq!(execute(10001.0), vec![Some(b"10001".to_vec()), Some(b"2024-02-29 13:05:09".to_vec())]);
        assert_eq!(execute(0.5)[0], Some(b"0.5".to_vec()));
        assert_ne!(execute(10001.0), execute(10002.0));
    }

    /// A parameter sent by COM_STMT_SEND_LONG_DATA has no bytes in the execute: the next
    /// parameter's value is read from where it starts, not taken for the blob's.
    #[test]
    fn a_long_data_parameter_has_no_value_in_the_execute() {
        // stmt 1; 2 params, no NULLs; new types: BLOB, LONG; only the LONG's value follows.
        let mut p = vec![1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0xfc, 0, MYSQL_TYPE_LONG, 0];
        p.extend_from_slice(&42i32.to_le_bytes());
        let mut out = Vec::new();
        execute_params_after_long_data(&p, 2, &mut Vec::new(), false, 0b01, |v| {
            out.push(v.canonical().map(<[u8]>::to_vec))
        });
        assert_eq!(out, vec![None, Some(b"42".to_vec())]);
        // Read as if the blob were in the packet, the integer's bytes are taken for its length.
        assert_eq!(collect(&p, 2, &mut Vec::new()), Vec::<Option<Vec<u8>>>::new());
    }

    #[test]
    fn rows_in_both_protocols_give_the_same_text() {
        // Text row: "10001", NULL, "Georgi".
        let text = [5, b'1', b'0', b'0', b'0', b'1', 0xFB, 6, b'G', b'e', b'o', b'r', b'g', b'i'];
        let mut got = Vec::new();
        text_row(&text, 4, |p| got.push(p.canonical().map(<[u8]>::to_vec)));
        assert_eq!(got, vec![Some(b"10001".to_vec()), None, Some(b"Georgi".to_vec())]);
        // The same row in the binary protocol: LONG, LONGLONG (NULL), VAR_STRING.
        let mut binary = vec![0x00, 0b0000_1000];
        binary.extend_from_slice(&10001i32.to_le_bytes());
        binary.extend_from_slice(&[6, b'G', b'e', b'o', b'r', b'g', b'i']);
        let columns = [(MYSQL_TYPE_LONG, false), (MYSQL_TYPE_LONGLONG, false), (0xFD, false)];
        let mut again = Vec::new();
        binary_row(&binary, &columns, 4, |p| again.push(p.canonical().map(<[u8]>::to_vec)));
        assert_eq!(again, got);
        // Signed and unsigned readings of the same bytes differ as they should.
        let neg = [0x00, 0, 0xFF];
        let mut signed = Vec::new();
        binary_row(&neg, &[(MYSQL_TYPE_TINY, false)], 1, |p| signed.push(p.canonical().map(<[u8]>::to_vec)));
        binary_row(&neg, &[(MYSQL_TYPE_TINY, true)], 1, |p| signed.push(p.canonical().map(<[u8]>::to_vec)));
        assert_eq!(signed, vec![Some(b"-1".to_vec()), Some(b"255".to_vec())]);
    }

    #[test]
    fn truncated_payloads_stop_quietly() {
        let mut p = vec![1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, MYSQL_TYPE_LONGLONG, 0];
        p.extend_from_slice(&42i64.to_le_bytes());
        for len in 0..p.len() {
            let mut types = Vec::new();
            let got = collect(&p[..len], 1, &mut types);
            assert!(got.is_empty(), "len {len}: {got:?}");
        }
        assert_eq!(collect(&p, 1, &mut Vec::new()), vec![Some(b"42".to_vec())]);
        assert_eq!(int_text(i64::MIN).canonical(), Some(&b"-9223372036854775808"[..]));
        assert_eq!(int_text(u64::MAX).canonical(), Some(&b"18446744073709551615"[..]));
        assert_eq!(int_text(0u64).canonical(), Some(&b"0"[..]));
    }
}
