//! The documentation keeps its promises, without a network:
//!
//! - every relative link in README.md, docs/*.md and benches/README.md resolves: the file (or
//!   directory) exists, and an `#anchor` names a heading of the target by GitHub's slug;
//! - the configuration reference (docs/configuration.md) documents only keys the config has
//!   (rttscope-config's own key paths), and every key of config/examples/rttscope.yaml.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

use serde_yaml::Value;

fn repo() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).to_owned()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The pages whose links are checked.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md"), root.join("benches/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

// ---- Markdown, as far as links and headings go -------------------------------------------

/// Each line outside fenced code blocks, with its 1-based number and its inline code spans
/// blanked (a link or a `#` in code is not one).
fn prose_lines(md: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            let text: String =
                line.split('`').enumerate().map(|(n, part)| if n % 2 == 1 { "" } else { part }).collect();
            out.push((i + 1, text));
        }
    }
    out
}

/// `(line, target)` of every inline link `[text](target)` and image.
fn links(md: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (line, text) in prose_lines(md) {
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            found.push((line, target.to_owned()));
            rest = &after[end..];
        }
    }
    found
}

/// GitHub's anchor for a heading: lower case; letters, digits, `-` and `_` kept, spaces made
/// `-`, everything else dropped; a link in the heading counts by its text.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // [text](url) reads as text.
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](").map(|m| open + m) else { break };
        let Some(close) = rest[mid..].find(')').map(|c| mid + c) else { break };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..mid]);
        rest = &rest[close + 1..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of `md`'s headings, a repeated one numbered `-1`, `-2`, ... as GitHub does.
fn anchors(md: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..].replace('`', ""));
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// `path` with `.` and `..` folded away, without asking the file system.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with the relative links of `page`: a missing file, or an anchor no heading
/// of the target has.
fn dead_links(page: &Path) -> Vec<String> {
    let md = read(page);
    let dir = page.parent().expect("a page is in a directory");
    let mut dead = Vec::new();
    for (line, target) in links(&md) {
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = target.split_once('#').map_or((target.as_str(), None), |(f, a)| (f, Some(a)));
        let path = if file.is_empty() { page.to_owned() } else { normal(&dir.join(file)) };
        let at = format!("{}:{line}: ({target})", page.display());
        if !path.exists() {
            dead.push(format!("{at}: no such file {}", path.display()));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if path.extension().is_none_or(|x| x != "md") {
            dead.push(format!("{at}: an anchor into a file that is not Markdown"));
        } else if !anchors(&read(&path)).contains(anchor) {
            dead.push(format!("{at}: {} has no heading #{anchor}", path.display()));
        }
    }
    dead
}

#[test]
fn every_relative_link_resolves() {
    let root = normal(&repo());
    let pages = pages(&root);
    assert!(pages.len() >= 10, "the guide's pages: {pages:?}");
    let dead: Vec<String> = pages.iter().flat_map(|p| dead_links(p)).collect();
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
}

/// The checker itself finds what it is for: a missing file, a missing anchor, and not a link
/// in code.
#[test]
fn the_link_checker_finds_dead_links_and_reads_slugs_as_github_does() {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(dir.path().join("b.md"), "# Title\n## The admin API, locked down\n## `SCHED_BATCH`\n## Title\n")
        .expect("write");
    let page = dir.path().join("a.md");
    let md = "[ok](b.md#the-admin-api-locked-down) [ok](b.md#sched_batch) [ok](b.md#title-1) [ok](#top)\n\
              # Top\n\
              `[in code](nowhere.md)`\n\
              ```\n[in a fence](nowhere.md)\n```\n\
              [dead](missing.md) [dead](b.md#nothing) [ok](https://example.com/x.md)\n";
    std::fs::write(&page, md).expect("write");
    let dead = dead_links(&page);
    assert_eq!(dead.len(), 2, "{dead:#?}");
    assert!(dead[0].contains("(missing.md): no such file"), "{}", dead[0]);
    assert!(dead[1].contains("has no heading #nothing"), "{}", dead[1]);
}

// ---- The configuration reference ---------------------------------------------------------

/// The keys the reference documents: the first cell of a table row, when it is one code span
/// holding a dotted key path (`findings.scenarios[].rtt` for a key of a list's items).
fn documented_keys(md: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for line in md.lines() {
        let Some(cell) = line.strip_prefix('|').and_then(|l| l.split('|').next()).map(str::trim) else { continue };
        let Some(key) = cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')) else { continue };
        let is_path = key.contains('.')
            && key.split('.').all(|part| {
                let part = part.strip_suffix("[]").unwrap_or(part);
                !part.is_empty() && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            });
        if is_path {
            keys.insert(key.to_owned());
        }
    }
    keys
}

/// Every leaf key path of a YAML document, a list's items' keys as `list[].key`.
fn yaml_keys(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Mapping(map) => {
            for (key, value) in map {
                let Some(key) = key.as_str() else { continue };
                let path = if prefix.is_empty() { key.to_owned() } else { format!("{prefix}.{key}") };
                yaml_keys(value, &path, out);
            }
        }
        Value::Sequence(items) if items.iter().any(Value::is_mapping) => {
            for item in items {
                yaml_keys(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {
            out.insert(prefix.to_owned());
        }
    }
}

/// What is wrong between the reference `md` and the example config `example`: documented keys
/// the config does not have, and keys of the example the reference leaves out.
fn key_problems(md: &str, example: &str) -> Vec<String> {
    let documented = documented_keys(md);
    let yaml: Value = serde_yaml::from_str(example).expect("the example is YAML");
    let mut in_example = BTreeSet::new();
    yaml_keys(&yaml, "", &mut in_example);
    let in_code: BTreeSet<String> = rttscope_config::key_paths().iter().map(|p| p.join(".")).collect();
    let mut problems = Vec::new();
    for key in &documented {
        // A list item's key is real when the list is and the example shows the key.
        let real = match key.split_once("[]") {
            None => in_code.contains(key),
            Some((list, _)) => in_code.contains(list) && in_example.contains(key),
        };
        if !real {
            problems.push(format!("documented, but the config has no key {key}"));
        }
    }
    for key in in_example.difference(&documented) {
        problems.push(format!("in config/examples/rttscope.yaml, but not documented: {key}"));
    }
    problems
}

#[test]
fn the_configuration_reference_documents_every_key_and_only_real_ones() {
    let root = repo();
    let md = read(&root.join("docs/configuration.md"));
    let example = read(&root.join("config/examples/rttscope.yaml"));
    assert!(documented_keys(&md).len() > 80, "the reference's tables: {:?}", documented_keys(&md));
    let problems = key_problems(&md, &example);
    assert!(problems.is_empty(), "docs/configuration.md and the config disagree:\n{}", problems.join("\n"));
}

/// The key check itself finds a key that does not exist and a key left out.
#[test]
fn the_key_check_finds_a_made_up_key_and_a_missing_one() {
    let md = "| key | default |\n|---|---|\n| `limits.max_connections` | 1024 |\n| `limits.max_conections` | 1024 |\n\
              | `findings.scenarios[].rtt` | |\n";
    let example = "limits:\n  max_connections: 1024\n  idle_timeout: 8h\nfindings:\n  scenarios:\n    - rtt: 1ms\n";
    assert_eq!(
        key_problems(md, example),
        [
            "documented, but the config has no key limits.max_conections",
            "in config/examples/rttscope.yaml, but not documented: limits.idle_timeout",
        ]
    );
}
