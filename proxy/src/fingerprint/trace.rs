//! Reads a W3C trace id from a sqlcommenter-style comment (`traceparent='00-<trace>-<span>-01'`).

const KEY: &[u8] = b"traceparent";

/// Returns the 32 lower-case hex digits of the trace id in the first well-formed
/// `traceparent` within `comment`, or `None`.
///
/// Accepts the value quoted with `'` or `"`, URL-encoded quotes (`%27`, `%22`, which some
/// sqlcommenter implementations emit), or unquoted, and spaces around `=`. The whole
/// traceparent must be well formed, so a stray word "traceparent" in a comment is ignored.
pub(super) fn trace_id(comment: &[u8]) -> Option<[u8; 32]> {
    // sqlcommenter comments are short; skip the search in the common comment without one.
    if comment.len() < KEY.len() + 55 {
        return None;
    }
    let mut rest = comment;
    while let Some(i) = rest.windows(KEY.len()).position(|w| w.eq_ignore_ascii_case(KEY)) {
        let after = rest.get(i + KEY.len()..)?;
        if let Some(id) = parse_value(after) {
            return Some(id);
        }
        rest = after;
    }
    None
}

fn parse_value(s: &[u8]) -> Option<[u8; 32]> {
    let s = skip_spaces(s).strip_prefix(b"=")?;
    let s = skip_spaces(s);
    let s = [&b"'"[..], b"\"", b"%27", b"%22"].iter().find_map(|q| strip_prefix_ci(s, q)).unwrap_or(s);
    bare_value(s)
}

/// The trace id of a bare traceparent value (`00-<trace>-<span>-01`, anything may follow):
/// a `traceparent` query attribute, or what follows the `=` in a comment.
pub(crate) fn bare_value(s: &[u8]) -> Option<[u8; 32]> {
    let (version, s) = hex(s, 2)?;
    // Version ff is forbidden by the W3C spec; anything else is forward-compatible.
    if version.eq_ignore_ascii_case(b"ff") {
        return None;
    }
    let (trace, s) = hex(s.strip_prefix(b"-")?, 32)?;
    let (span, s) = hex(s.strip_prefix(b"-")?, 16)?;
    hex(s.strip_prefix(b"-")?, 2)?;
    // All-zero ids are invalid by the spec: a propagator placeholder, not a trace.
    if trace.iter().all(|&c| c == b'0') || span.iter().all(|&c| c == b'0') {
        return None;
    }
    let mut id = [0u8; 32];
    for (d, s) in id.iter_mut().zip(trace) {
        *d = s.to_ascii_lowercase();
    }
    Some(id)
}

fn hex(s: &[u8], n: usize) -> Option<(&[u8], &[u8])> {
    let head = s.get(..n)?;
    head.iter().all(u8::is_ascii_hexdigit).then(|| (head, s.get(n..).unwrap_or_default()))
}

fn skip_spaces(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|c| c.is_ascii_whitespace()).count();
    s.get(n..).unwrap_or_default()
}

fn strip_prefix_ci<'a>(s: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| s.get(prefix.len()..).unwrap_or_default())
}
