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
            let (line, column) = e.location().map_or((None, None), |l| (Some(l.line()), Some(l.column())));
            let message = strip_location(&e.to_string(), line, column);
            if let Some(err) = duplicate_key(text, &message, line, column) {
                return Err(err);
            }
            return Err(ConfigError::Syntax { line, column, message });
        }
        Ok(serde_yaml::Value::Null) => return Ok(T::default()),
        Ok(_) => {}
    }
    let de = serde_yaml::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = key_path(e.path());
        let inner = e.inner();
        let (line, column) = inner.location().map_or((None, None), |l| (Some(l.line()), Some(l.column())));
        let raw = strip_location(&inner.to_string(), line, column);
        // serde_yaml prefixes its own idea of the path, which for unknown keys is the parent.
        let raw = strip_path_prefix(&raw, &path);
        ConfigError::Invalid { message: humanize(raw), path, line }
    })
}

/// Deserializes a YAML tree (the effective config with settings applied) into `T`, with
/// key paths as [`from_yaml`] gives them; there are no lines.
pub(crate) fn from_value<T: DeserializeOwned>(value: serde_yaml::Value) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = key_path(e.path());
        let raw = e.inner().to_string();
        let raw = strip_path_prefix(&raw, &path);
        ConfigError::Invalid { message: humanize(raw), path, line: None }
    })
}

/// Every unknown key and bad value in well-formed YAML `text`, not only the first: each
/// one found is taken out of the tree and the rest parsed again (at most `limit` rounds).
/// Empty when the text parses, or is not well-formed (the caller has that error already).
pub(crate) fn every_invalid<T: DeserializeOwned>(text: &str, limit: usize) -> Vec<ConfigError> {
    let Ok(mut tree) = serde_yaml::from_str::<serde_yaml::Value>(text) else { return Vec::new() };
    let mut found = Vec::new();
    for _ in 0..limit {
        match from_value::<T>(tree.clone()) {
            Err(ConfigError::Invalid { path, message, .. }) => {
                let line = line_of(text, &path);
                let removed = remove(&mut tree, &path);
                found.push(ConfigError::Invalid { path, line, message });
                if !removed {
                    break;
                }
            }
            _ => break,
        }
    }
    found
}

/// `text` parsed with the keys of `errors` taken out; `None` if it still does not parse.
pub(crate) fn without<T: DeserializeOwned>(text: &str, errors: &[ConfigError]) -> Option<T> {
    let mut tree = serde_yaml::from_str::<serde_yaml::Value>(text).ok()?;
    for error in errors {
        if let ConfigError::Invalid { path, .. } = error {
            remove(&mut tree, path);
        }
    }
    from_value(tree).ok()
}

/// The segments of a key path: `a.b[1].c` is `a`, `b`, `[1]`, `c`.
fn segments(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        match part.find('[') {
            Some(at) => {
                if at > 0 {
                    out.push(&part[..at]);
                }
                out.extend(part[at..].split_inclusive(']'));
            }
            None => out.push(part),
        }
    }
    out
}

/// Takes the key or element at `path` out of `tree`; false if there is none.
fn remove(tree: &mut serde_yaml::Value, path: &str) -> bool {
    let segments = segments(path);
    let Some((last, parents)) = segments.split_last() else { return false };
    let mut node = tree;
    for segment in parents {
        let next = match index_of(segment) {
            Some(i) => node.as_sequence_mut().and_then(|s| s.get_mut(i)),
            None => node.as_mapping_mut().and_then(|m| m.get_mut(*segment)),
        };
        match next {
            Some(next) => node = next,
            None => return false,
        }
    }
    match index_of(last) {
        Some(i) => node.as_sequence_mut().is_some_and(|s| {
            i < s.len() && {
                s.remove(i);
                true
            }
        }),
        None => node.as_mapping_mut().is_some_and(|m| m.remove(*last).is_some()),
    }
}

fn index_of(segment: &str) -> Option<usize> {
    segment.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
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
            ConfigError::Invalid { message: humanize(&message), path, line }
        } else {
            ConfigError::Syntax { line, column, message }
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
fn duplicate_key(text: &str, message: &str, line: Option<usize>, column: Option<usize>) -> Option<ConfigError> {
    let (parent, rest) = match message.split_once(": duplicate entry with key ") {
        Some((parent, rest)) => (parent, rest),
        None => ("", message.strip_prefix("duplicate entry with key ")?),
    };
    let key = rest.strip_prefix('"')?.strip_suffix('"')?;
    let path = if parent.is_empty() { key.to_owned() } else { format!("{parent}.{key}") };
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
                .any(|k| body.strip_prefix(k.as_str()).is_some_and(|r| r.trim_start().starts_with(':')));
        if is_key {
            seen += 1;
            if seen == 2 {
                return Some(i + 1);
            }
        }
    }
    None
}

/// The 1-based line where the key at `path` (`inject.to_client.jitter`) is written in a
/// block-style YAML document. A list index or a flow mapping (`{rtt: 5ms}`) on the way
/// stops the search at the deepest key found, which still points the reader at the place.
pub(crate) fn line_of(text: &str, path: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found: Option<usize> = None;
    // Lines below the key found last, and the indentation that key had.
    let (mut from, mut parent_indent) = (0usize, None::<usize>);
    for segment in path.split('.') {
        let key = segment.split('[').next().unwrap_or(segment);
        if key.is_empty() {
            break;
        }
        let mut hit = None;
        for (i, line) in lines.iter().enumerate().skip(from) {
            let body = line.trim_start();
            if body.is_empty() || body.starts_with('#') {
                continue;
            }
            let indent = line.len() - body.len();
            match parent_indent {
                Some(p) if indent <= p => break,
                None if indent > 0 => continue,
                _ => {}
            }
            let is_key = [key.to_owned(), format!("\"{key}\""), format!("'{key}'")]
                .iter()
                .any(|k| body.strip_prefix(k.as_str()).is_some_and(|r| r.trim_start().starts_with(':')));
            if is_key {
                hit = Some((i, indent));
                break;
            }
        }
        let Some((i, indent)) = hit else { break };
        found = Some(i + 1);
        (from, parent_indent) = (i + 1, Some(indent));
        if segment.contains('[') {
            break;
        }
    }
    found
}

/// serde_path_to_error prints the root as `.`; we print nothing.
fn key_path(path: &serde_path_to_error::Path) -> String {
    let p = path.to_string();
    if p == "." || p == "?" { String::new() } else { p }
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
        if let Some(rest) = message.strip_prefix(candidate).and_then(|r| r.strip_prefix(": ")) {
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
        let hint = closest(key, &expected).map(|k| format!("; did you mean '{k}'?")).unwrap_or_default();
        return format!("unknown key{hint} (expected one of: {})", expected.join(", "));
    }
    if message.starts_with("unknown variant `") {
        let value = first_quoted(message);
        let expected = expected_names(message);
        return format!("unknown value '{value}' (expected one of: {})", expected.join(", "));
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
        assert_eq!(strip_path_prefix("inject: unknown", "inject.rtts"), "unknown");
        assert_eq!(strip_path_prefix("a.b[1].c: x", "a.b[1].c"), "x");
        assert_eq!(strip_path_prefix("a.b: x", "a.b[1]"), "x");
        assert_eq!(strip_path_prefix("invalid 'x': y", "rtt"), "invalid 'x': y");
    }

    #[test]
    fn finds_the_line_of_a_key_path() {
        let yaml = "# c\nlisten: x\ninject:\n  rtt: 5ms\n  to_client:\n    jitter: 1ms\nadmin:\n  hosts: [a]\n";
        assert_eq!(line_of(yaml, "inject.rtt"), Some(4));
        assert_eq!(line_of(yaml, "inject.to_client.jitter"), Some(6));
        assert_eq!(line_of(yaml, "admin.hosts[0]"), Some(8));
        assert_eq!(line_of(yaml, "admin.token"), Some(7), "an unwritten key points at its section");
        assert_eq!(line_of(yaml, "relay"), None);
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
