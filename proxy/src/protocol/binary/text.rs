//! The canonical text of a binary-protocol number or temporal value: what the same value reads
//! as in a SQL literal or a text-protocol row, written into a fixed buffer (no allocation).
//!
//! Drivers bind keys in whatever type their language has: Node's mysql2 sends every JavaScript
//! number as a `DOUBLE`, so `WHERE id = ?` bound to 42 carries the eight bytes of `42.0`. Its
//! text is `42`, as the literal and the parent row's `INT` cell are, or a loop keyed by it could
//! neither tell its executions apart nor find its parent.

use std::io::Write;

use super::Param;

/// Room for the longest text rendered here: a `DATETIME` of nonsense fields, each at its
/// type's maximum (`65535-255-255 255:255:255.4294967295`, 36), more than any real value (26)
/// or a `TIME` (at most 32) or an `f64` in Rust's shortest form (at most 24) takes.
pub const TEXT_LEN: usize = 40;

/// `text` as a [`Param::Text`]; `None` when it does not fit (it always does, by [`TEXT_LEN`]).
fn param(text: &[u8]) -> Option<Param<'static>> {
    let mut buf = [0u8; TEXT_LEN];
    buf.get_mut(..text.len())?.copy_from_slice(text);
    Some(Param::Text { buf, len: text.len() as u8 })
}

/// Formats into a [`Param::Text`]; `None` if the text would not fit.
fn formatted(args: std::fmt::Arguments<'_>) -> Option<Param<'static>> {
    let mut buf = [0u8; TEXT_LEN];
    let mut rest = &mut buf[..];
    rest.write_fmt(args).ok()?;
    let len = TEXT_LEN - rest.len();
    Some(Param::Text { buf, len: len as u8 })
}

/// An integer's decimal text. (By `itoa`, two digits a step: the digit-by-digit loop it
/// replaced divided an `i128`, a library call per digit, some 280 instructions for a
/// five-digit id, per parameter of every execute.)
pub(super) fn int_text(value: impl itoa::Integer) -> Param<'static> {
    let mut text = itoa::Buffer::new();
    // At most 20 bytes: `i64::MIN` and `u64::MAX` are 20 wide.
    param(text.format(value).as_bytes()).unwrap_or(Param::Other)
}

/// A `DOUBLE`: a whole number within `i64` as the integer it is (`42.0` is `42`), anything else
/// in Rust's shortest round-trip form (`1.5`, `1e300`), as such a literal is written; NaN and
/// infinities, which no literal spells, have no text.
pub(super) fn double_text(value: f64) -> Param<'static> {
    // 2^63: every whole f64 below it converts to i64 exactly.
    const WHOLE: f64 = 9_223_372_036_854_775_808.0;
    if !value.is_finite() {
        return Param::Other;
    }
    if value.fract() == 0.0 && value.abs() < WHOLE {
        return int_text(value as i64);
    }
    formatted(format_args!("{value:?}")).unwrap_or(Param::Other)
}

/// A `FLOAT`, as [`double_text`] renders a `DOUBLE`, in the shortest form of the `f32` itself
/// (`0.1f32` is `0.1`, not its widened `0.10000000149011612`).
pub(super) fn float_text(value: f32) -> Param<'static> {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 16_777_216.0 {
        return int_text(value as i64);
    }
    if !value.is_finite() {
        return Param::Other;
    }
    formatted(format_args!("{value:?}")).unwrap_or(Param::Other)
}

/// A `DATE`, `DATETIME` or `TIMESTAMP` value of `bytes` (after its length byte: 0, 4, 7 or 11
/// of them) as the server prints it: `YYYY-MM-DD` for a date, `YYYY-MM-DD HH:MM:SS` for the
/// others, `.ffffff` added when there are microseconds. Other lengths have no text.
pub(super) fn date_text(bytes: &[u8], with_time: bool) -> Param<'static> {
    let (mut year, mut month, mut day, mut hour, mut minute, mut second, mut micros) = (0u16, 0, 0, 0, 0, 0, 0u32);
    match bytes.len() {
        0 => {}
        4 | 7 | 11 => {
            year = u16::from_le_bytes([bytes[0], bytes[1]]);
            (month, day) = (bytes[2], bytes[3]);
            if let [h, m, s, rest @ ..] = &bytes[4..] {
                (hour, minute, second) = (*h, *m, *s);
                if let [a, b, c, d] = rest {
                    micros = u32::from_le_bytes([*a, *b, *c, *d]);
                }
            }
        }
        _ => return Param::Other,
    }
    let date = format_args!("{year:04}-{month:02}-{day:02}");
    match (with_time, micros) {
        (false, _) => formatted(date),
        (true, 0) => formatted(format_args!("{date} {hour:02}:{minute:02}:{second:02}")),
        (true, _) => formatted(format_args!("{date} {hour:02}:{minute:02}:{second:02}.{micros:06}")),
    }
    .unwrap_or(Param::Other)
}

/// A `TIME` value of `bytes` (after its length byte: 0, 8 or 12 of them) as the server prints
/// it: `[-]HH:MM:SS`, days folded into the hours, `.ffffff` added when there are microseconds.
pub(super) fn time_text(bytes: &[u8]) -> Param<'static> {
    let (mut negative, mut days, mut hour, mut minute, mut second, mut micros) = (false, 0u32, 0u8, 0u8, 0u8, 0u32);
    match bytes {
        [] => {}
        [sign, d0, d1, d2, d3, h, m, s, rest @ ..] if rest.is_empty() || rest.len() == 4 => {
            negative = *sign == 1;
            days = u32::from_le_bytes([*d0, *d1, *d2, *d3]);
            (hour, minute, second) = (*h, *m, *s);
            if let [a, b, c, d] = rest {
                micros = u32::from_le_bytes([*a, *b, *c, *d]);
            }
        }
        _ => return Param::Other,
    }
    let hours = u64::from(days) * 24 + u64::from(hour);
    let sign = if negative { "-" } else { "" };
    if micros == 0 {
        formatted(format_args!("{sign}{hours:02}:{minute:02}:{second:02}"))
    } else {
        formatted(format_args!("{sign}{hours:02}:{minute:02}:{second:02}.{micros:06}"))
    }
    .unwrap_or(Param::Other)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(p: Param<'_>) -> Option<String> {
        p.canonical().map(|b| String::from_utf8(b.to_vec()).expect("ASCII"))
    }

    #[test]
    fn numbers_read_as_their_literals() {
        assert_eq!(text(double_text(42.0)).as_deref(), Some("42"));
        assert_eq!(text(double_text(-0.0)).as_deref(), Some("0"));
        assert_eq!(text(double_text(-7.0)).as_deref(), Some("-7"));
        assert_eq!(text(double_text(1.5)).as_deref(), Some("1.5"));
        assert_eq!(text(double_text(0.1)).as_deref(), Some("0.1"));
        assert_eq!(text(double_text(1e300)).as_deref(), Some("1e300"));
        assert_eq!(text(double_text(-f64::MAX)).as_deref(), Some("-1.7976931348623157e308"));
        assert_eq!(text(double_text(-5e-324)).as_deref(), Some("-5e-324"));
        assert_eq!(text(double_text(9_007_199_254_740_993.0)).as_deref(), Some("9007199254740992"));
        assert_eq!(text(double_text(f64::NAN)), None);
        assert_eq!(text(double_text(f64::INFINITY)), None);
        assert_eq!(text(float_text(3.0)).as_deref(), Some("3"));
        assert_eq!(text(float_text(0.1)).as_deref(), Some("0.1"));
        assert_eq!(text(float_text(-f32::MAX)).as_deref(), Some("-3.4028235e38"));
        assert_eq!(text(float_text(f32::NEG_INFINITY)), None);
        assert_eq!(text(int_text(i64::MIN)).as_deref(), Some("-9223372036854775808"));
        assert_eq!(text(int_text(u64::MAX)).as_deref(), Some("18446744073709551615"));
    }

    #[test]
    fn dates_and_times_read_as_the_server_prints_them() {
        let day = [0xe8, 0x07, 2, 29];
        assert_eq!(text(date_text(&day, false)).as_deref(), Some("2024-02-29"));
        assert_eq!(text(date_text(&day, true)).as_deref(), Some("2024-02-29 00:00:00"));
        assert_eq!(text(date_text(&[], true)).as_deref(), Some("0000-00-00 00:00:00"));
        let at = [0xe8, 0x07, 2, 29, 13, 5, 9];
        assert_eq!(text(date_text(&at, true)).as_deref(), Some("2024-02-29 13:05:09"));
        let micro = [0xe8, 0x07, 2, 29, 13, 5, 9, 0x40, 0xe2, 0x01, 0];
        assert_eq!(text(date_text(&micro, true)).as_deref(), Some("2024-02-29 13:05:09.123456"));
        assert_eq!(text(date_text(&[1, 2, 3], true)), None);
        let nonsense = [0xff; 11];
        assert_eq!(text(date_text(&nonsense, true)).as_deref(), Some("65535-255-255 255:255:255.4294967295"));
        let time = [1, 1, 0, 0, 0, 2, 3, 4];
        assert_eq!(text(time_text(&time)).as_deref(), Some("-26:03:04"));
        assert_eq!(text(time_text(&[])).as_deref(), Some("00:00:00"));
        let long = [0, 0xff, 0xff, 0xff, 0xff, 23, 59, 59, 0x3f, 0x42, 0x0f, 0];
        assert_eq!(text(time_text(&long)).as_deref(), Some("103079215103:59:59.999999"));
        let worst = [1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(text(time_text(&worst)).as_deref(), Some("-103079215335:255:255.4294967295"));
        assert_eq!(text(time_text(&[0; 5])), None);
    }
}
