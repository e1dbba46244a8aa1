//! Canonical bytes of a literal, so one value hashes the same however the client spelled it.
//!
//! The canonical form is what the server would store for the literal as a string: quotes and
//! escapes removed, hex and bit literals decoded to their bytes, numbers exactly as written
//! (a `-` sign kept, a `+` sign dropped), `TRUE`/`FALSE` as `1`/`0`, `NULL` as the four bytes
//! `NULL`. That makes `10001`, `'10001'` and a binary-protocol integer rendered as decimal text
//! agree, which is how the relay matches a result-set cell to a later query's parameter.

use super::hash_value;
use super::lexer::Lit;

/// Hashes a literal's canonical form; `scratch` is reused so this never allocates once grown.
pub(super) fn hash_literal(lit: Lit, negative: bool, body: &[u8], scratch: &mut Vec<u8>) -> u64 {
    scratch.clear();
    let canonical: &[u8] = match lit {
        Lit::Number if negative => {
            scratch.push(b'-');
            scratch.extend_from_slice(body);
            scratch
        }
        Lit::Number => body,
        Lit::Str { escaped: false, .. } => body,
        Lit::Str { quote, escaped: true, backslash } => {
            unescape(body, quote, backslash, scratch);
            scratch
        }
        Lit::Hex => decode(body, 4, scratch),
        Lit::Bits => decode(body, 1, scratch),
        Lit::True => b"1",
        Lit::False => b"0",
        Lit::Null => b"NULL",
    };
    hash_value(canonical)
}

/// Undoes MySQL string escapes (`\n`, `\0`, `\Z`, ... and doubled quotes). `\%` and `\_` keep
/// their backslash, as MySQL does, because they only mean something to `LIKE`.
/// Without `backslash` (`NO_BACKSLASH_ESCAPES`) only doubled quotes are undone.
fn unescape(body: &[u8], quote: u8, backslash: bool, out: &mut Vec<u8>) {
    let mut bytes = body.iter().copied();
    while let Some(c) = bytes.next() {
        if backslash && c == b'\\' {
            // A backslash that truncation left at the very end has nothing to escape: drop it.
            let Some(e) = bytes.next() else { break };
            match e {
                b'0' => out.push(0),
                b'b' => out.push(0x08),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'Z' => out.push(0x1a),
                b'%' | b'_' => out.extend_from_slice(&[b'\\', e]),
                _ => out.push(e),
            }
        } else if c == quote {
            // The lexer only lets a quote into a body as the first half of a doubled pair.
            bytes.next();
            out.push(quote);
        } else {
            out.push(c);
        }
    }
}

/// Decodes hex (`bits` = 4) or binary (`bits` = 1) digits into bytes, padding on the left as
/// MySQL does for odd lengths. Digits that are not valid hash as written: the server would
/// reject the statement, and the text itself is the best identity left.
fn decode<'a>(digits: &'a [u8], bits: u32, out: &'a mut Vec<u8>) -> &'a [u8] {
    let per_byte = (8 / bits) as usize;
    let mut acc: u32 = 0;
    let mut filled = (per_byte - digits.len() % per_byte) % per_byte;
    for &d in digits {
        let Some(v) = char::from(d).to_digit(1 << bits) else {
            return digits;
        };
        acc = (acc << bits) | v;
        filled += 1;
        if filled == per_byte {
            out.push(acc as u8);
            acc = 0;
            filled = 0;
        }
    }
    out
}
