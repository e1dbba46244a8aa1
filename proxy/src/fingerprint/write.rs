//! Writing tokens into the normalised text: names lower-cased, every literal `?`, the text
//! kept UTF-8 whatever the input.

use super::lexer::Token;

/// Writes a token's normalised text: names lower-cased, quoted names in backticks, every
/// literal `?`; spaces, comments, hints and semicolons write nothing here. Returns whether
/// it wrote a comma: one canonical space follows, so `a,b` and `a, b` are the same query.
pub(super) fn push_token(out: &mut Vec<u8>, token: &Token<'_>) -> bool {
    match *token {
        // Lower-casing the name `0X1F` would turn it into the literal `0x1f`.
        Token::Word(w, _) if w.starts_with(b"0X") || w.starts_with(b"0B") => push_lossy(out, w),
        Token::Word(w, _) => push_lower(out, w),
        Token::Quoted(w) => {
            out.push(b'`');
            push_lossy(out, w);
            out.push(b'`');
        }
        Token::Literal { .. } | Token::Placeholder => out.push(b'?'),
        Token::Punct(b) => {
            // Punctuation is ASCII (the lexer reads bytes from 0x80 as part of a word); the
            // text stays UTF-8 whatever comes.
            if b.is_ascii() {
                out.push(b);
            } else {
                out.extend_from_slice(REPLACEMENT);
            }
            return b == b',';
        }
        Token::Space | Token::Comment(_) | Token::Hint(_) | Token::Semicolon => {}
    }
    false
}

/// Lower-cases a word; bytes that are not UTF-8 become U+FFFD, one per invalid sequence.
fn push_lower(out: &mut Vec<u8>, bytes: &[u8]) {
    // Nearly every word is ASCII: lower-cased a byte at a time, without decoding it (written
    // as characters into a `String`, a word cost about 120 instructions; callgrind).
    if bytes.is_ascii() {
        out.extend(bytes.iter().map(u8::to_ascii_lowercase));
        return;
    }
    let mut utf8 = [0u8; 4];
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            for lower in c.to_lowercase() {
                out.extend_from_slice(lower.encode_utf8(&mut utf8).as_bytes());
            }
        }
        if !chunk.invalid().is_empty() {
            out.extend_from_slice(REPLACEMENT);
        }
    }
}

/// U+FFFD in UTF-8: what an invalid sequence becomes.
const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

/// Copies `bytes`, each invalid UTF-8 sequence made U+FFFD.
fn push_lossy(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.is_ascii() {
        out.extend_from_slice(bytes);
        return;
    }
    for chunk in bytes.utf8_chunks() {
        out.extend_from_slice(chunk.valid().as_bytes());
        if !chunk.invalid().is_empty() {
            out.extend_from_slice(REPLACEMENT);
        }
    }
}
