//! Untrusted text made safe to show: SQL, user names and anything read back from a report file
//! may hold control characters (a terminal escape, a carriage return that overprints a line, a
//! newline that forges one) or markup. Both renderings show such characters as visible escapes
//! (`\n`, `\u{1b}`); HTML also escapes markup.

use std::borrow::Cow;
use std::fmt::Write;

/// Characters that change how text after them displays without being visible themselves: the
/// bidirectional overrides and isolates, and the marks that steer them.
fn invisible_format(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every control or bidi character written as a visible escape.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || invisible_format(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || invisible_format(c) => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `s` as HTML text or attribute value: markup escaped, control characters made visible.
pub fn html(s: &str) -> String {
    let s = visible(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_become_visible() {
        assert!(matches!(visible("select ? from t"), Cow::Borrowed(_)));
        assert_eq!(visible("a\nb\r\tc\u{0}\u{1b}[31m\u{7f}\u{85}"), "a\\nb\\r\\tc\\u{0}\\u{1b}[31m\\u{7f}\\u{85}");
        assert_eq!(visible("x\u{202e}y\u{2066}z"), "x\\u{202e}y\\u{2066}z");
        // Printable text outside ASCII stays as it is.
        assert_eq!(visible("größe ≈ 15 µs"), "größe ≈ 15 µs");
    }

    #[test]
    fn html_escapes_markup_after_making_controls_visible() {
        assert_eq!(html("<b>&amp;</b> 'a' \"b\"\n"), "&lt;b&gt;&amp;amp;&lt;/b&gt; &#39;a&#39; &quot;b&quot;\\n");
    }
}
