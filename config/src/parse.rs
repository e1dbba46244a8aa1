//! From text to typed config: YAML and JSON deserialization with key paths and lines, and
//! serde's messages rewritten for humans (`unknown field` becomes `unknown key`, ...).
//!
//! serde stops at the first type error, so `Invalid` carries one problem; range and
//! cross-field problems are collected afterwards, all at once, by `validate()`.

use serde::de::DeserializeOwned;

use crate::ConfigError;

/// Parses YAML text into `T`, with an empty (or all-comment, or `~`) document giving
/// `T::default()`.
pub(crate) fn from_yaml<T: DeserializeOwned + Default>(text: &str) -> Result<T, ConfigError> {
    // A first pass to a generic value separates malformed YAML (reported as `Syntax`) from
    // well-formed YAML with wrong keys or values, and spots the empty document, which serde
    // would call "invalid type: unit value".
    match serde_yaml::from_str::<serde_yaml::Value>(text) {
        Err(e) => {
            let (line, column) = e
                .location()
                .map_or((None, None), |l| (Some(l.line()), Some(l.column())));
            let message = strip_location(&e.to_string(), line, column);
            if let Some(err) = duplicate_key(text, &message, line, column) {
                return Err(err);
            }
            return Err(ConfigError::Syntax {
                line,
                column,
                message,
            });
        }
        Ok(serde_yaml::Value::Null) => return Ok(T::default()),
        Ok(_) => {}
    }
    let de = serde_yaml::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = key_path(e.path());
        let inner = e.inner();
        let (line, column) = inner
            .location()
            .map_or((None, None), |l| (Some(l.line()), Some(l.column())));
        let raw = strip_location(&inner.to_string(), line, column);
        // serde_yaml prefixes its own idea of the path, which for unknown keys is the parent.
        let raw = strip_path_prefix(&raw, &path);
        ConfigError::Invalid {
            message: humanize(raw),
            path,
            line,
        }
    })
}

/// Parses JSON text into `T`, reporting key paths the same way as [`from_yaml`].
pub(crate) fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = key_path(e.path());
        let inner = e.inner();
        let line = Some(inner.line()).filter(|l| *l > 0);
        let column = Some(inner.column()).filter(|c| *c > 0);
        let message = strip_location(&inner.to_string(), line, column);
        if inner.is_data() {
            ConfigError::Invalid {
                message: humanize(&message),
                path,
                line,
            }
        } else {
            ConfigError::Syntax {
                line,
                column,
                message,
            }
        }
    })?;
    // Trailing garbage after the object.
    de.end().map_err(|e| ConfigError::Syntax {
        line: Some(e.line()),
        column: Some(e.column()),
        message: strip_location(&e.to_string(), Some(e.line()), Some(e.column())),
    })?;
    Ok(value)
}

/// Recognises serde_yaml's `[path: ]duplicate entry with key "k"` and reports it as an
/// `Invalid` at `path.k`, on the line of the second occurrence where we can find it
/// (serde_yaml points at the start of the mapping instead).
fn duplicate_key(
    text: &str,
    message: &str,
    line: Option<usize>,
    column: Option<usize>,
) -> Option<ConfigError> {
    let (parent, rest) = match message.split_once(": duplicate entry with key ") {
        Some((parent, rest)) => (parent, rest),
        None => ("", message.strip_prefix("duplicate entry with key ")?),
    };
    let key = rest.strip_prefix('"')?.strip_suffix('"')?;
    let path = if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    };
    let second = match (line, column) {
        (Some(l), Some(c)) => second_occurrence(text, l, c, key),
        _ => None,
    };
    Some(ConfigError::Invalid {
        path,
        line: second.or(line),
        message: "duplicate key (it is already set above)".to_owned(),
    })
}

/// The 1-based line where `key:` appears for the second time in the block mapping whose
/// first key is at (`line`, `column`), or `None` (e.g. for flow mappings `{a: 1, a: 2}`).
fn second_occurrence(text: &str, line: usize, column: usize, key: &str) -> Option<usize> {
    let indent = column.checked_sub(1)?;
    let mut seen = 0;
    for (i, l) in text.lines().enumerate().skip(line.checked_sub(1)?) {
        // `- key: v` opens a mapping inside a list: the dash counts as indentation.
        let body = l.trim_start_matches([' ', '-']);
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let this_indent = l.len() - body.len();
        if this_indent < indent {
            break;
        }
        let is_key = this_indent == indent
            && [key.to_owned(), format!("\"{key}\""), format!("'{key}'")]
                .iter()
                .any(|k| {
                    body.strip_prefix(k.as_str())
                        .is_some_and(|r| r.trim_start().starts_with(':'))
                });
        if is_key {
            seen += 1;
            if seen == 2 {
                return Some(i + 1);
            }
        }
    }
    None
}

/// serde_path_to_error prints the root as `.`; we print nothing.
fn key_path(path: &serde_path_to_error::Path) -> String {
    let p = path.to_string();
    if p == "." || p == "?" {
        String::new()
    } else {
        p
    }
}

/// Removes the ` at line L column C` both parsers append (we report the line ourselves).
fn strip_location(message: &str, line: Option<usize>, column: Option<usize>) -> String {
    if let (Some(l), Some(c)) = (line, column) {
        let at = format!(" at line {l} column {c}");
        if let Some(i) = message.find(&at) {
            return format!("{}{}", &message[..i], &message[i + at.len()..]);
        }
    }
    message.to_owned()
}

/// Drops a leading `some.path: ` that names `path` or one of its ancestors.
fn strip_path_prefix<'a>(message: &'a str, path: &str) -> &'a str {
    let mut candidate = path;
    while !candidate.is_empty() {
        if let Some(rest) = message
            .strip_prefix(candidate)
            .and_then(|r| r.strip_prefix(": "))
        {
            return rest;
        }
        candidate = match candidate.rfind(['.', '[']) {
            Some(i) => &candidate[..i],
            None => "",
        };
    }
    message
}

/// The names between backticks after `expected` in a serde message.
fn expected_names(message: &str) -> Vec<&str> {
    let Some((_, tail)) = message.split_once("expected") else {
        return Vec::new();
    };
    tail.split('`').skip(1).step_by(2).collect()
}

/// The first backtick-quoted name in a serde message.
fn first_quoted(message: &str) -> &str {
    message.split('`').nth(1).unwrap_or("")
}

/// Rewrites serde's stock messages in the config's own words.
fn humanize(message: &str) -> String {
    if message.starts_with("unknown field `") {
        let key = first_quoted(message);
        let expected = expected_names(message);
        if expected.is_empty() {
            return "unknown key (this section takes no keys)".to_owned();
        }
        let hint = closest(key, &expected)
            .map(|k| format!("; did you mean '{k}'?"))
            .unwrap_or_default();
        return format!(
            "unknown key{hint} (expected one of: {})",
            expected.join(", ")
        );
    }
    if message.starts_with("unknown variant `") {
        let value = first_quoted(message);
        let expected = expected_names(message);
        return format!(
            "unknown value '{value}' (expected one of: {})",
            expected.join(", ")
        );
    }
    if message.starts_with("missing field `") {
        return format!("missing key '{}'", first_quoted(message));
    }
    if message.starts_with("duplicate field `") {
        return format!("key '{}' appears twice", first_quoted(message));
    }
    let message = message.replace("unit value", "empty value");
    match message.find("expected struct ") {
        // serde names the Rust type; users think in YAML mappings / JSON objects.
        Some(i) => format!("{}expected a mapping of keys", &message[..i]),
        None => message,
    }
}

/// The expected key closest to a misspelt one, if it is close enough to be a typo.
fn closest<'a>(key: &str, expected: &[&'a str]) -> Option<&'a str> {
    expected
        .iter()
        .map(|e| (edit_distance(key, e), *e))
        .filter(|(d, e)| *d <= 2 && *d < e.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, e)| e)
}

/// Levenshtein distance; keys are short, so the quadratic table is fine.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev_diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            let next = (row[j] + 1).min(row[j + 1] + 1).min(prev_diag + cost);
            prev_diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_parent_paths_only() {
        assert_eq!(
            strip_path_prefix("inject: unknown", "inject.rtts"),
            "unknown"
        );
        assert_eq!(strip_path_prefix("a.b[1].c: x", "a.b[1].c"), "x");
        assert_eq!(strip_path_prefix("a.b: x", "a.b[1]"), "x");
        assert_eq!(strip_path_prefix("invalid 'x': y", "rtt"), "invalid 'x': y");
    }

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance("rtts", "rtt"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(closest("rtts", &["rtt", "jitter"]), Some("rtt"));
        assert_eq!(closest("xyz", &["rtt", "jitter"]), None);
    }

    #[test]
    fn humanizes_serde_messages() {
        assert_eq!(
            humanize("unknown field `rtts`, expected one of `rtt`, `jitter`"),
            "unknown key; did you mean 'rtt'? (expected one of: rtt, jitter)"
        );
        assert_eq!(
            humanize("unknown variant `xml`, expected `text` or `json`"),
            "unknown value 'xml' (expected one of: text, json)"
        );
        assert_eq!(humanize("missing field `rtt`"), "missing key 'rtt'");
    }
}
