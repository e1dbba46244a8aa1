//! The small readers of `protocol::packets` on arbitrary prefixes: each
//! returns `None` on what it cannot read, and what it does read must be
//! consistent with the bytes (widths within the buffer, ERR packets that
//! rttscope builds read back as built).

use rttscope::protocol::packets::{
    ErrPacket, OkPacket, column_type, err_packet, is_terminator, lenenc_int, terminator_status, u16_at, u32_at,
};

use super::Input;

pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    // A declared packet length independent of the prefix the state machine
    // sees: real payloads are usually longer than their 128-byte prefix.
    let declared = usize::from(input.u16()) | (usize::from(input.u8()) << 16);
    let deprecate_eof = input.u8() & 1 != 0;
    let p = input.rest();

    if let Some((value, width)) = lenenc_int(p) {
        assert!(matches!(width, 1 | 3 | 4 | 9) && width <= p.len(), "width {width} of {}", p.len());
        if width == 1 {
            assert!(value < 0xFB);
        }
    }
    let _ = OkPacket::parse(p);
    let _ = ErrPacket::parse(p);
    let _ = column_type(p);
    for len in [declared, p.len()] {
        let _ = terminator_status(p, len);
        if let Some(&first) = p.first() {
            let _ = is_terminator(first, len, deprecate_eof);
        }
    }
    // Offsets as far as a parser could ask: up to just past the end.
    for at in 0..=p.len() + 4 {
        let _ = (u16_at(p, at), u32_at(p, at));
    }
    err_round_trip(p, declared);
}

/// `err_packet` builds what rttscope sends a client; `ErrPacket::parse`
/// must read the code and state back, whatever message and state it got.
fn err_round_trip(p: &[u8], declared: usize) {
    let text = String::from_utf8_lossy(p);
    let state: String = text.chars().take(declared % 8).collect();
    let code = declared as u16;
    let seq = p.first().copied().unwrap_or(0);

    let packet = err_packet(seq, code, &state, &text, true);
    let len = u32::from_le_bytes([packet[0], packet[1], packet[2], 0]) as usize;
    assert_eq!(len + 4, packet.len(), "header length");
    let err = ErrPacket::parse(&packet[4..]).expect("our own ERR packet parses");
    let mut want = [b'0'; 5];
    for (slot, b) in want.iter_mut().zip(state.bytes()) {
        *slot = b;
    }
    assert_eq!((err.code, err.sql_state), (code, want));

    // Without the `#` marker a message that starts with `#` reads as a
    // state: pre-4.1 ERR packets are ambiguous on the wire, so only the
    // build is checked.
    let pre41 = err_packet(seq, code, &state, &text, false);
    assert_eq!(u32::from_le_bytes([pre41[0], pre41[1], pre41[2], 0]) as usize + 4, pre41.len());
    let _ = ErrPacket::parse(&pre41[4..]);
}
