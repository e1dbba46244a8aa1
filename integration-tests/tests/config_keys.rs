//! Every key documented in config/examples/rttscope.yaml is read by rttscope: a documented
//! key with no code behind it is a promise nobody keeps (issue 13).
//!
//! Each key path of the example is mapped, through the struct definitions in config/src, to
//! the field that holds it (a key with no field fails too). The field counts as read when
//! rttscope's own code (proxy/src, tests left out) reads `.field` (not a method call, not an
//! assignment) on a value of its struct, or calls a config-crate method that reads it
//! (`listen.socket_mode()`, `inject.direction(..)`) on a value of the method's struct.
//! "A value of the struct" is followed back through the code: `config.limits.max_connections`
//! (the field that holds it, on a value of the struct above), a declared type
//! (`limits: &AdminConfig` is not `LimitsConfig`, whatever its name), or the nearest binding
//! (`let config = &upstream.tls;`). So `limits.max_connections` is not taken for
//! `admin.max_connections`, nor a field for another struct's field of the same name.
//! Validation, defaults, parsing and formatting in the config crate are not reads. Comments
//! and string literals are blanked first, so a doc comment or a message naming a key does not
//! count. What it cannot see: whether a read does what the documentation says.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_yaml::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Config-crate methods that are no use of a key: checking, defaults, parsing, printing.
fn is_bookkeeping(method: &str) -> bool {
    ["check", "validate", "default", "deserialize", "from_", "fmt", "every_problem", "apply_", "load", "with_lines"]
        .iter()
        .any(|p| method.starts_with(p))
}

// ---- Source text ---------------------------------------------------------------------------

/// `text` with comments removed and string and char literals emptied (`"…"` → `""`), keeping
/// line breaks, so that only code is left to search.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let (mut out, mut i) = (String::with_capacity(text.len()), 0);
    while i < b.len() {
        let next = b.get(i + 1).copied();
        match b[i] {
            '/' if next == Some('/') => {
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
            }
            '/' if next == Some('*') => {
                i += 2;
                while i < b.len() && !(b[i] == '*' && b.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                i += 2;
            }
            'r' if (next == Some('#') || next == Some('"')) && (i == 0 || !is_ident(b[i - 1])) => {
                let hashes = b[i + 1..].iter().take_while(|c| **c == '#').count();
                if b.get(i + 1 + hashes) != Some(&'"') {
                    out.push(b[i]);
                    i += 1;
                    continue;
                }
                i += 2 + hashes;
                while i < b.len()
                    && !(b[i] == '"' && b[i + 1..].iter().take(hashes).filter(|c| **c == '#').count() == hashes)
                {
                    i += 1;
                }
                i += 1 + hashes;
                out.push_str("\"\"");
            }
            '"' => {
                i += 1;
                while i < b.len() && b[i] != '"' {
                    i += if b[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // A char literal ('x', '\n', '\u{1b}'), not a lifetime ('a).
            '\'' if next == Some('\\') || b.get(i + 2) == Some(&'\'') => {
                i += 1;
                while i < b.len() && b[i] != '\'' {
                    i += if b[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("' '");
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `code` without its `#[cfg(test)] mod … { … }` blocks.
fn without_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let item = after.trim_start();
        if item.starts_with("mod ") {
            let brace = item.find(['{', ';']).unwrap_or(item.len());
            if item[brace..].starts_with('{') {
                let (mut depth, mut end) = (0usize, item.len());
                for (j, c) in item[brace..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = brace + j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &item[end..];
            } else {
                rest = &item[(brace + 1).min(item.len())..];
            }
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Whether `code` reads the field `name` (`.name`, not a method call or an assignment).
fn accesses_field(code: &str, name: &str) -> bool {
    field_reads(code, name).next().is_some()
}

/// Whether `code` calls the method `name`.
fn calls(code: &str, name: &str) -> bool {
    method_calls(code, name).next().is_some()
}

/// Whether `code` has `word` as a whole identifier.
fn names(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The `.rs` files under `dir` (test directories and files left out), as code only.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            if path.is_dir() {
                if name != "tests" {
                    stack.push(path);
                }
            } else if name.ends_with(".rs")
                && name != "tests.rs"
                && !name.ends_with("_tests.rs")
                && name != "proptests.rs"
            {
                let text = std::fs::read_to_string(&path).expect("a source file");
                out.push((path, without_test_modules(&code_only(&text))));
            }
        }
    }
    out
}

// ---- The config crate's structs and methods ------------------------------------------------

/// A struct of the config crate: its fields and their types.
#[derive(Default, Debug)]
struct Struct {
    fields: BTreeMap<String, String>,
}

/// A method of the config crate: the type it belongs to and the fields it accesses.
#[derive(Debug)]
struct Method {
    owner: String,
    name: String,
    body: String,
}

fn parse_config_crate(files: &[(PathBuf, String)]) -> (BTreeMap<String, Struct>, Vec<Method>) {
    let mut structs = BTreeMap::new();
    let mut methods = Vec::new();
    for (_, code) in files {
        let lines: Vec<&str> = code.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            if let Some(name) = line.strip_prefix("pub struct ").and_then(|r| r.strip_suffix(" {")) {
                let mut s = Struct::default();
                i += 1;
                while i < lines.len() && lines[i] != "}" {
                    if let Some((field, ty)) = lines[i].trim().strip_prefix("pub ").and_then(|f| f.split_once(": ")) {
                        s.fields.insert(field.to_owned(), ty.trim_end_matches(',').to_owned());
                    }
                    i += 1;
                }
                structs.insert(name.to_owned(), s);
            } else if line.starts_with("impl") && line.ends_with(" {") {
                // `impl Type {` or `impl Trait for Type {`: methods at four spaces of indent.
                let header = line.trim_end_matches(" {");
                let owner = header.rsplit(' ').next().unwrap_or_default().to_owned();
                i += 1;
                let mut current: Option<Method> = None;
                while i < lines.len() && lines[i] != "}" {
                    let l = lines[i];
                    let signature = l.strip_prefix("    pub fn ").or_else(|| l.strip_prefix("    fn "));
                    if let Some(sig) = signature {
                        methods.extend(current.take());
                        let name: String = sig.chars().take_while(|c| is_ident(*c)).collect();
                        current = Some(Method { owner: owner.clone(), name, body: String::new() });
                    } else if let Some(m) = current.as_mut() {
                        m.body.push_str(l);
                        m.body.push('\n');
                    }
                    i += 1;
                }
                methods.extend(current);
            }
            i += 1;
        }
    }
    (structs, methods)
}

/// The struct a field's type names, if it is one of the config crate's (`Option<Scope>`,
/// `Vec<Scenario>`).
fn struct_of<'a>(ty: &str, structs: &'a BTreeMap<String, Struct>) -> Option<(&'a String, &'a Struct)> {
    let inner = ty.trim_start_matches("Option<").trim_start_matches("Vec<").trim_end_matches('>');
    structs.get_key_value(inner)
}

// ---- The example's keys --------------------------------------------------------------------

/// Every leaf key path of the example (`findings.scenarios.rtt` for a key of a list's items).
fn documented_keys(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Mapping(map) => {
            for (k, inner) in map {
                let Some(k) = k.as_str() else { continue };
                prefix.push(k.to_owned());
                documented_keys(inner, prefix, out);
                prefix.pop();
            }
        }
        Value::Sequence(items) if items.iter().any(Value::is_mapping) => {
            let mut seen = BTreeSet::new();
            for item in items.iter().filter_map(Value::as_mapping) {
                for (k, inner) in item {
                    if let Some(k) = k.as_str().filter(|k| seen.insert(k.to_string())) {
                        prefix.push(k.to_owned());
                        documented_keys(inner, prefix, out);
                        prefix.pop();
                    }
                }
            }
        }
        _ => out.push(prefix.clone()),
    }
}

/// A documented key: the chain of (struct, field) from `Config` to it.
struct Key {
    chain: Vec<(String, String)>,
}

fn resolve(path: &[String], structs: &BTreeMap<String, Struct>) -> Result<Key, String> {
    let mut owner = "Config".to_owned();
    let mut chain = Vec::new();
    for (depth, key) in path.iter().enumerate() {
        let s = structs.get(&owner).ok_or_else(|| format!("{owner} is not a struct of config/src"))?;
        let ty = s.fields.get(key).ok_or_else(|| format!("`{key}` is no field of {owner}"))?;
        chain.push((owner.clone(), key.clone()));
        match struct_of(ty, structs) {
            Some((name, _)) => owner = name.clone(),
            None if depth + 1 == path.len() => {}
            None => return Err(format!("{owner}.{key} ({ty}) has no keys under it")),
        }
    }
    Ok(Key { chain })
}

// ---- Reads -----------------------------------------------------------------------------------

/// Whether the expression that ends at byte `end` of `code` is a value of the struct at
/// `key.chain[level]`, followed back through field accesses and the nearest binding of each
/// variable: `config.limits` (the field that holds it, on a value of the struct above),
/// `limits: &AdminConfig` (a declared type: not `LimitsConfig`, whatever the name),
/// `let config = &upstream.tls;`, `for s in &self.scenarios`, `scenarios.iter().map(|s| …)`.
fn value_is(code: &str, end: usize, key: &Key, level: usize) -> bool {
    let (ty, holder) = (key.chain[level].0.as_str(), level.checked_sub(1).map(|l| key.chain[l].1.as_str()));
    let Some((start, ident)) = ident_before(code, code[..end].trim_end().len()) else { return false };
    if level == 0 {
        // The whole config: whatever holds it.
        return true;
    }
    if ident == "self" {
        return names(code, &format!("impl {ty}")) || code.contains(&format!("for {ty} {{"));
    }
    let dot = code[..start].trim_end();
    if dot.ends_with('.') {
        // A field: the key that holds this struct, on a value of the struct above it, or a
        // field declared with this type (`config: SqlViewConfig`).
        if Some(ident) == holder {
            return value_is(code, dot.len() - 1, key, level - 1);
        }
        return declarations(code, ident).any(|(_, t)| names(t, ty));
    }
    match binding(code, ident, start) {
        Some(Binding::Declared(t)) => names(t, ty),
        Some(Binding::From(expr_start, expr)) => {
            // The value it was bound from: the last mention of the holding key in it.
            let Some(holder) = holder else { return false };
            match expr.match_indices(holder).filter(|(at, _)| is_word(expr, *at, holder.len())).last() {
                Some((at, _)) => value_is(code, expr_start + at + holder.len(), key, level),
                None => false,
            }
        }
        // Bound some other way (a pattern, a match arm): not known to be this struct.
        None => false,
    }
}

enum Binding<'a> {
    /// `name: Type` (a parameter or a field).
    Declared(&'a str),
    /// `let name = expr`, `let Some(name) = expr`, `for name in expr`, `expr.map(|name| …)`:
    /// where expr starts, and expr.
    From(usize, &'a str),
}

/// The nearest binding of the variable `name` before byte `before` of `code`.
fn binding<'a>(code: &'a str, name: &'a str, before: usize) -> Option<Binding<'a>> {
    let mut best: Option<(usize, Binding<'a>)> = None;
    let mut consider = |at: usize, b: Binding<'a>| {
        if at < before && best.as_ref().is_none_or(|(p, _)| at > *p) {
            best = Some((at, b));
        }
    };
    for (at, ty) in declarations(code, name) {
        consider(at, Binding::Declared(ty));
    }
    let intros = [
        format!("let {name} = "),
        format!("let mut {name} = "),
        format!("for {name} in "),
        format!("Some({name}) = "),
        format!("Some(&{name}) = "),
        format!("Ok({name}) = "),
    ];
    for intro in intros {
        for (at, _) in code.match_indices(intro.as_str()).filter(|(at, _)| !code[..*at].ends_with(is_ident)) {
            let from = at + intro.len();
            let rest = &code[from..];
            consider(at, Binding::From(from, &rest[..rest.find([';', '{']).unwrap_or(rest.len())]));
        }
    }
    for closure in [format!("|{name}|"), format!("|&{name}|")] {
        for (at, _) in code.match_indices(closure.as_str()) {
            let statement = code[..at].rfind([';', '{', '}']).map_or(0, |i| i + 1);
            consider(at, Binding::From(statement, &code[statement..at]));
        }
    }
    best.map(|(_, b)| b)
}

/// Whether the `len` bytes at `at` of `code` are a whole word.
fn is_word(code: &str, at: usize, len: usize) -> bool {
    !code[..at].chars().next_back().is_some_and(is_ident) && !code[at + len..].chars().next().is_some_and(is_ident)
}

/// The identifier that ends at byte `end` of `code`, if any.
fn ident_before(code: &str, end: usize) -> Option<(usize, &str)> {
    let before = &code[..end];
    let start = before.rfind(|c: char| !is_ident(c)).map_or(0, |i| i + 1);
    (start < end).then(|| (start, &code[start..end]))
}

/// Where `name` is declared with a type in `code` (`name: &'a Type,`), parameters and fields,
/// and the type's text.
fn declarations<'a>(code: &'a str, name: &'a str) -> impl Iterator<Item = (usize, &'a str)> + 'a {
    code.match_indices(name).filter_map(move |(at, _)| {
        let rest = code[at + name.len()..].strip_prefix(':')?;
        if !is_word(code, at, name.len()) || rest.starts_with(':') {
            return None;
        }
        let end = rest.find([',', ')', '=', ';', '{', '|']).unwrap_or(rest.len());
        Some((at, &rest[..end]))
    })
}

/// The byte offsets of the dots of every read of the field `name` in `code` (an access, not
/// a method call, not the left side of an assignment).
fn field_reads<'a>(code: &'a str, name: &'a str) -> impl Iterator<Item = usize> + 'a {
    let needle = format!(".{name}");
    code.match_indices(&needle).map(|(at, _)| at).collect::<Vec<_>>().into_iter().filter(move |at| {
        let tail = code[at + 1 + name.len()..].trim_start();
        let assigned = tail.starts_with('=') && !tail.starts_with("==") && !tail.starts_with("=>");
        !tail.starts_with(|c: char| is_ident(c) || c == '(') && !tail.starts_with("::") && !assigned
    })
}

/// The byte offsets of the dots of every call of the method `name` in `code`.
fn method_calls<'a>(code: &'a str, name: &'a str) -> impl Iterator<Item = usize> + 'a {
    let needle = format!(".{name}");
    code.match_indices(&needle).map(|(at, _)| at).collect::<Vec<_>>().into_iter().filter(move |at| {
        let tail = code[at + 1 + name.len()..].trim_start();
        tail.starts_with('(') || tail.starts_with("::<")
    })
}

fn line_of(code: &str, at: usize) -> usize {
    code[..at].matches('\n').count() + 1
}

/// Where rttscope reads `key`, or None.
fn read_at(key: &Key, proxy: &[(PathBuf, String)], methods: &[Method]) -> Option<String> {
    let last = key.chain.len() - 1;
    let field = &key.chain[last].1;
    // Directly: `.field` on a value of its struct.
    for (path, code) in proxy {
        if let Some(at) = field_reads(code, field).find(|at| value_is(code, *at, key, last)) {
            return Some(format!("`.{field}` at {}:{}", path.display(), line_of(code, at)));
        }
    }
    // Through a config-crate method of its struct or of one above it, called on a value of
    // that struct. One level of `self.other()` within the crate is followed.
    for level in (0..=last).rev() {
        let owner = &key.chain[level].0;
        let of_owner = |m: &&Method| m.owner == *owner && !is_bookkeeping(&m.name);
        for m in methods.iter().filter(of_owner).filter(|m| field_reads(&m.body, field).next().is_some()) {
            let mut names: Vec<&str> = vec![&m.name];
            names.extend(methods.iter().filter(of_owner).filter(|c| calls(&c.body, &m.name)).map(|c| c.name.as_str()));
            for name in names {
                for (path, code) in proxy {
                    if let Some(at) = method_calls(code, name).find(|at| value_is(code, *at, key, level)) {
                        return Some(format!("{owner}::{name}() at {}:{}", path.display(), line_of(code, at)));
                    }
                }
            }
        }
    }
    None
}

#[test]
fn every_documented_key_is_read_by_rttscope() {
    let example = std::fs::read_to_string(repo().join("config/examples/rttscope.yaml")).expect("the example");
    let yaml: Value = serde_yaml::from_str(&example).expect("the example is YAML");
    let mut paths = Vec::new();
    documented_keys(&yaml, &mut Vec::new(), &mut paths);
    assert!(paths.len() > 60, "the example documents every key: {paths:?}");

    let config = sources(&repo().join("config/src"));
    let (structs, methods) = parse_config_crate(&config);
    assert!(structs.contains_key("Config") && structs.len() > 20, "parsed config/src: {:?}", structs.keys());
    let proxy = sources(&repo().join("proxy/src"));

    let mut problems = Vec::new();
    for path in &paths {
        let dotted = path.join(".");
        match resolve(path, &structs) {
            Err(why) => problems.push(format!("{dotted}: documented, but {why}")),
            Ok(key) => match read_at(&key, &proxy, &methods) {
                Some(at) => eprintln!("{dotted}: {at}"),
                None => {
                    let (owner, field) = &key.chain[key.chain.len() - 1];
                    problems.push(format!("{dotted}: documented, but nothing in proxy/src reads {owner}.{field}"))
                }
            },
        }
    }
    assert!(problems.is_empty(), "config/examples/rttscope.yaml promises what no code does:\n{}", problems.join("\n"));
}

/// The scanner's own rules, on code written for them.
#[test]
fn the_scan_sees_code_not_comments_or_strings() {
    let code = code_only("let a = x.limits.max_connections; // .admin\nlet s = \"y.admin.max_connections\";");
    assert!(accesses_field(&code, "max_connections") && accesses_field(&code, "limits"));
    assert!(!accesses_field(&code, "admin"), "{code}");
    assert!(!accesses_field("x.socket_mode()", "socket_mode") && calls("x.socket_mode()", "socket_mode"));
    assert!(!accesses_field("x.max_gap_us", "max_gap") && accesses_field("x.max_gap.0", "max_gap"));
    let code = without_test_modules("fn a() { c.rtt }\n#[cfg(test)]\nmod tests {\n fn b() { c.jitter }\n}\nfn d() {}");
    assert!(accesses_field(&code, "rtt") && !accesses_field(&code, "jitter") && code.contains("fn d"), "{code}");
    assert!(names("let s: &Scope = x;", "Scope") && !names("ScopeSet", "Scope"));
}

/// Which struct a receiver is, on code shaped like rttscope's.
#[test]
fn the_scan_follows_receivers_to_their_struct() {
    let key =
        |chain: &[(&str, &str)]| Key { chain: chain.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect() };
    let limits = key(&[("Config", "limits"), ("LimitsConfig", "max_connections")]);
    let admin = key(&[("Config", "admin"), ("AdminConfig", "max_connections")]);
    let reads = |code: &str, key: &Key| field_reads(code, &key.chain[1].1).any(|at| value_is(code, at, key, 1));
    // Chained from the config.
    assert!(reads("fn f(c: &Config) { g(c.limits.max_connections) }", &limits));
    assert!(!reads("fn f(c: &Config) { g(c.limits.max_connections) }", &admin));
    // A parameter named after one section, typed as another.
    let code = "fn serve(limits: &AdminConfig) { Semaphore::new(limits.max_connections) }";
    assert!(reads(code, &admin) && !reads(code, &limits));
    // A binding from the section; an assignment is no read.
    assert!(reads("let l = &config.limits; let n = l.max_connections;", &limits));
    assert!(!reads("config.limits.max_connections = 5;", &limits));

    let tls = key(&[("Config", "upstream"), ("UpstreamConfig", "tls"), ("UpstreamTls", "ca")]);
    let listen = key(&[("Config", "listen"), ("ListenConfig", "tls"), ("ListenTls", "ca")]);
    let reads = |code: &str, key: &Key| field_reads(code, "ca").any(|at| value_is(code, at, key, 2));
    let code = "fn a(config: &ListenTls) { x(&config.cert) }\n\
                fn b(upstream: &UpstreamConfig) { let config = &upstream.tls; y(&config.ca) }";
    assert!(reads(code, &tls) && !reads(code, &listen));
    // Bound by a pattern from something else that merely has a `tls`.
    assert!(!reads("let Some(tls) = s.upstream_tls else { return }; z(tls.ca)", &tls));
    // Items of a list, through a closure.
    let scenarios = key(&[("Config", "findings"), ("FindingsConfig", "scenarios"), ("Scenario", "rtt")]);
    let code = "fn p(scenarios: &[Scenario]) { scenarios.iter().map(|s| s.rtt.0) }";
    assert!(field_reads(code, "rtt").any(|at| value_is(code, at, &scenarios, 2)));
}
