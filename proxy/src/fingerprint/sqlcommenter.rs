//! sqlcommenter tags: `/*controller='orders',action='index',traceparent='00-...'*/`, leading or
//! trailing the statement (the spec puts them last; some libraries put them first).
//!
//! Per the spec, keys and values are URL-encoded, values are in single quotes with a quote
//! inside escaped as `\'`, and pairs are separated by commas. [`Tags`] walks the pairs of one
//! comment without allocating; [`decode`] undoes the encoding into a caller's buffer.

/// The key-value pairs of a comment body, in order, encoded as written. Iteration stops at the
/// first thing that is not a well-formed pair, so prose in a comment yields nothing.
#[derive(Clone, Debug)]
pub struct Tags<'a> {
    rest: &'a [u8],
}

impl<'a> Tags<'a> {
    /// The pairs of `comment` (a body without `/*` `*/`), if it starts with one.
    pub fn of(comment: &'a [u8]) -> Option<Tags<'a>> {
        let tags = Tags { rest: comment };
        tags.clone().next().is_some().then_some(tags)
    }

    /// The encoded value of `key` (compared case-insensitively), if the comment has it.
    pub fn get(&self, key: &str) -> Option<&'a [u8]> {
        self.clone().find(|(k, _)| k.eq_ignore_ascii_case(key.as_bytes())).map(|(_, v)| v)
    }
}

impl<'a> Iterator for Tags<'a> {
    /// (key, value), both still encoded.
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let s = self.rest.trim_ascii_start();
        let key_len = s.iter().take_while(|&&c| c.is_ascii_alphanumeric() || b"_-.%".contains(&c)).count();
        let (key, s) = s.split_at_checked(key_len)?;
        if key.is_empty() {
            self.rest = &[];
            return None;
        }
        let Some(s) = s.trim_ascii_start().strip_prefix(b"=").map(<[u8]>::trim_ascii_start) else {
            self.rest = &[];
            return None;
        };
        let Some(s) = s.strip_prefix(b"'") else {
            self.rest = &[];
            return None;
        };
        // The value ends at the first quote not escaped by a backslash.
        let mut i = 0;
        let end = loop {
            match s.get(i) {
                Some(b'\\') => i += 2,
                Some(b'\'') => break Some(i),
                Some(_) => i += 1,
                None => break None,
            }
        };
        let Some(end) = end else {
            self.rest = &[];
            return None;
        };
        let value = s.get(..end).unwrap_or_default();
        let after = s.get(end + 1..).unwrap_or_default().trim_ascii_start();
        self.rest = after.strip_prefix(b",").unwrap_or(if after.is_empty() { after } else { &[] });
        Some((key, value))
    }
}

/// Appends `value` to `out` with the spec's encodings undone: `\'` (and any backslash escape)
/// and `%XX`. Bytes that do not decode stay as written; invalid UTF-8 becomes U+FFFD.
pub fn decode(value: &[u8], out: &mut String) {
    let mut bytes = Vec::with_capacity(value.len());
    let mut i = 0;
    while let Some(&c) = value.get(i) {
        match c {
            b'\\' if i + 1 < value.len() => {
                bytes.extend(value.get(i + 1));
                i += 2;
            }
            b'%' => {
                match value.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()) {
                    Some(b) => {
                        bytes.push(b);
                        i += 3;
                    }
                    None => {
                        bytes.push(c);
                        i += 1;
                    }
                }
            }
            _ => {
                bytes.push(c);
                i += 1;
            }
        }
    }
    out.push_str(&String::from_utf8_lossy(&bytes));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(v: &[u8]) -> String {
        let mut s = String::new();
        decode(v, &mut s);
        s
    }

    #[test]
    fn reads_the_pairs_of_a_sqlcommenter_comment() {
        let body = b"action='index',application='shop',controller='orders',framework='rails%3A7.1',\
            route='%2Forders%2F%3Aid',traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',\
            tracestate='congo%3Dt61rcWkgMzE%2Crojo%3D00f067aa0ba902b7'";
        let tags = Tags::of(body).expect("a sqlcommenter comment");
        let keys: Vec<_> = tags.clone().map(|(k, _)| String::from_utf8_lossy(k).into_owned()).collect();
        assert_eq!(keys, ["action", "application", "controller", "framework", "route", "traceparent", "tracestate"]);
        assert_eq!(decoded(tags.get("controller").unwrap()), "orders");
        assert_eq!(decoded(tags.get("route").unwrap()), "/orders/:id");
        assert_eq!(decoded(tags.get("framework").unwrap()), "rails:7.1");
        assert_eq!(decoded(tags.get("tracestate").unwrap()), "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
        assert_eq!(
            decoded(tags.get("TRACEPARENT").unwrap()),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
    }

    #[test]
    fn spaces_escaped_quotes_and_bad_percent_signs() {
        let tags = Tags::of(b" controller = 'it\\'s' , route='100%', action='a%2'").unwrap();
        assert_eq!(decoded(tags.get("controller").unwrap()), "it's");
        assert_eq!(decoded(tags.get("route").unwrap()), "100%");
        assert_eq!(decoded(tags.get("action").unwrap()), "a%2");
        assert_eq!(decoded(b"caf%C3%A9%FF"), "café\u{fffd}");
    }

    #[test]
    fn prose_and_hints_are_not_tags() {
        assert!(Tags::of(b" just a comment ").is_none());
        assert!(Tags::of(b"+ INDEX(t i) ").is_none());
        assert!(Tags::of(b"key=unquoted").is_none());
        assert!(Tags::of(b"key='unterminated").is_none());
        assert!(Tags::of(b"").is_none());
        // A well-formed start, then junk: the pairs before it still count.
        let tags = Tags::of(b"route='/a' and then some").unwrap();
        assert_eq!(tags.count(), 1);
    }
}
