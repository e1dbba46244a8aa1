//! Binary- and text-protocol values: `execute_params` with arbitrary
//! parameter counts and remembered types, `binary_row` and `text_row` with
//! arbitrary column lists, and `read_value` of every type. Values are
//! observations, so these may stop early but never fail; what they return
//! must point into the payload and render as the literal a query would have.

use rttscope::protocol::binary::{Param, binary_row, execute_params, read_value, text_row};

use super::Input;

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    // Parameter counts come from a prepare OK: 16 bits on the wire.
    let count = usize::from(input.u16());
    // Types remembered from an earlier execute of the same statement.
    let remembered = usize::from(input.u8());
    let mut types: Vec<(u8, u8)> = input.bytes(2 * remembered).chunks_exact(2).map(|t| (t[0], t[1])).collect();
    let ncols = usize::from(input.u8() % 64);
    let columns: Vec<(u8, bool)> = input.bytes(2 * ncols).chunks_exact(2).map(|c| (c[0], c[1] & 1 != 0)).collect();
    let max = usize::from(input.u8() % 16);
    let payload = input.rest();

    // Twice: the second execute reuses whatever types the first left.
    for _ in 0..2 {
        let mut seen = 0;
        execute_params(payload, count, &mut types, false, |p| {
            seen += 1;
            check(p, payload);
        });
        assert!(seen <= count, "{seen} params of {count}");
    }

    let mut seen = 0;
    binary_row(payload, &columns, max, |p| {
        seen += 1;
        check(p, payload);
    });
    assert!(seen <= max.min(columns.len()));

    let mut seen = 0;
    text_row(payload, max, |p| {
        seen += 1;
        assert!(matches!(p, Param::Null | Param::Bytes(_)), "text rows hold strings: {p:?}");
        check(p, payload);
    });
    assert!(seen <= max);

    if let Some((&ty, rest)) = payload.split_first() {
        for unsigned in [false, true] {
            if let Some((p, after)) = read_value(ty, unsigned, rest) {
                check(p, rest);
                assert!(after.len() <= rest.len() && std::ptr::eq(after.as_ptr_range().end, rest.as_ptr_range().end));
            }
        }
    }
}

/// A value either borrows from the payload or is a number, date or time as a literal spells it.
fn check(p: Param<'_>, payload: &[u8]) {
    match p {
        Param::Bytes(b) => {
            let range = payload.as_ptr_range();
            let inner = b.as_ptr_range();
            assert!(range.start <= inner.start && inner.end <= range.end, "value outside the payload");
        }
        Param::Text { .. } => {
            let text = std::str::from_utf8(p.canonical().expect("rendered values have a literal")).expect("ASCII");
            assert!(!text.is_empty() && !text.starts_with('+'), "{text:?}");
            if text.parse::<i128>().is_ok() {
                assert!(!text.starts_with("-0") && (text == "0" || !text.starts_with('0')), "{text:?}");
            }
        }
        Param::Null | Param::Other => assert_eq!(p.canonical(), None),
    }
}
