//! Settings from outside the file: `RTTSCOPE_*` environment variables and `--set KEY=VALUE`
//! flags, for every key of the file (a Kubernetes sidecar is configured by its environment).
//!
//! Precedence: flag > environment > file > default. Each setting names a key path
//! (`limits.idle_timeout`) and a value written as in the file (`5s`, `true`, `[a, b]`); it is
//! applied to the effective config as a YAML tree, which is then deserialized and validated
//! again, so a bad value is reported exactly like one in the file, plus where it came from.
//!
//! An environment variable's name is `RTTSCOPE_` and the key path upper-cased with `_` for
//! `.` (`RTTSCOPE_LIMITS_IDLE_TIMEOUT`, `RTTSCOPE_INJECT_TO_CLIENT_BANDWIDTH`). Underscores
//! inside key names make that ambiguous in principle, so names are matched against the
//! config's own key paths, never split by guesswork.

use serde_yaml::{Mapping, Value};

use crate::{Config, ConfigError, parse};

/// The prefix of rttscope's environment variables.
pub const ENV_PREFIX: &str = "RTTSCOPE_";

/// One value from outside the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// Where it came from, for messages: `RTTSCOPE_LIMITS_IDLE_TIMEOUT` or `--set limits.idle_timeout`.
    pub source: String,
    /// The key path, e.g. `["limits", "idle_timeout"]`.
    pub path: Vec<String>,
    /// The value, as it would be written in the file.
    pub value: Value,
}

/// The settings in `vars` (an environment) that name a config key, and the names of the
/// `RTTSCOPE_*` variables that name none (to warn about: a typo, or a variable meant for
/// something else, such as the tests' own).
pub fn env_settings(vars: impl IntoIterator<Item = (String, String)>) -> (Vec<Setting>, Vec<String>) {
    let keys = key_paths();
    let (mut settings, mut unknown) = (Vec::new(), Vec::new());
    for (name, raw) in vars {
        let Some(rest) = name.strip_prefix(ENV_PREFIX) else { continue };
        match keys.iter().find(|path| env_name(path) == rest) {
            Some(path) => settings.push(Setting { source: name.clone(), path: path.clone(), value: scalar(&raw) }),
            None => unknown.push(name),
        }
    }
    // The environment's order is arbitrary: make the result not depend on it.
    settings.sort_by(|a, b| a.source.cmp(&b.source));
    unknown.sort();
    (settings, unknown)
}

/// A `--set KEY=VALUE` flag.
pub fn flag_setting(arg: &str) -> Result<Setting, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid { path: String::new(), line: None, message };
    let (key, raw) = arg.split_once('=').ok_or_else(|| invalid(format!("--set {arg}: expected KEY=VALUE")))?;
    let key = key.trim();
    if key.is_empty() || key.split('.').any(str::is_empty) {
        return Err(invalid(format!("--set {arg}: expected a dotted key path such as limits.idle_timeout")));
    }
    Ok(Setting {
        source: format!("--set {key}"),
        path: key.split('.').map(str::to_owned).collect(),
        value: scalar(raw),
    })
}

/// The environment variable for a key path.
pub fn env_name(path: &[String]) -> String {
    path.join("_").to_ascii_uppercase()
}

/// A value as the file would have it: `5s` a string, `true` a bool, `[a, b]` a list. Text
/// that is not YAML on its own (`a: b: c`) stays a string.
fn scalar(raw: &str) -> Value {
    match serde_yaml::from_str::<Value>(raw) {
        Ok(Value::Null) if !raw.trim().is_empty() && raw.trim() != "~" && raw.trim() != "null" => {
            Value::String(raw.to_owned())
        }
        Ok(value) => value,
        Err(_) => Value::String(raw.to_owned()),
    }
}

/// Every key path of the config, sections and leaves, as the defaults serialize them.
pub fn key_paths() -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    if let Ok(Value::Mapping(root)) = serde_yaml::to_value(Config::default()) {
        walk(&root, &mut Vec::new(), &mut paths);
    }
    paths
}

fn walk(map: &Mapping, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    for (key, value) in map {
        let Some(key) = key.as_str() else { continue };
        prefix.push(key.to_owned());
        out.push(prefix.clone());
        if let Value::Mapping(inner) = value {
            walk(inner, prefix, out);
        }
        prefix.pop();
    }
}

impl Config {
    /// Applies `settings` in order over this config (later ones win), then validates the
    /// result. A bad key or value is reported with its key path and its source.
    pub fn apply_settings(&mut self, settings: &[Setting]) -> Result<(), ConfigError> {
        if settings.is_empty() {
            return Ok(());
        }
        let mut tree = serde_yaml::to_value(&*self).map_err(|e| ConfigError::Invalid {
            path: String::new(),
            line: None,
            message: format!("cannot apply settings: {e}"),
        })?;
        for setting in settings {
            set(&mut tree, &setting.path, setting.value.clone());
        }
        let mut applied: Config = parse::from_value(tree).map_err(|e| name_sources(e, settings))?;
        // The admin token is written as `<redacted>`, never as itself: unless a setting
        // gave a new one, keep the one there was.
        let sets_token = settings.iter().any(|s| matches!(s.path.as_slice(), [a] | [a, _] if a == "admin"));
        if !sets_token {
            applied.admin.token = self.admin.token.take();
        }
        *self = applied;
        self.validate().map_err(|e| name_sources(e, settings))
    }
}

/// Puts `value` at `path` in `tree`, making sections on the way.
fn set(tree: &mut Value, path: &[String], value: Value) {
    let Some((first, rest)) = path.split_first() else {
        *tree = value;
        return;
    };
    if !tree.is_mapping() {
        *tree = Value::Mapping(Mapping::new());
    }
    if let Value::Mapping(map) = tree {
        let slot = map.entry(Value::String(first.clone())).or_insert(Value::Null);
        set(slot, rest, value);
    }
}

/// Adds, to each problem about a key a setting gave, the setting's source.
fn name_sources(err: ConfigError, settings: &[Setting]) -> ConfigError {
    let source_of = |path: &str| {
        settings.iter().rev().find(|s| {
            let key = s.path.join(".");
            path == key || path.starts_with(&format!("{key}.")) || path.starts_with(&format!("{key}["))
        })
    };
    match err {
        ConfigError::Invalid { path, line, message } => {
            let message = match source_of(&path) {
                Some(s) => format!("{message} (from {})", s.source),
                None => message,
            };
            ConfigError::Invalid { path, line, message }
        }
        ConfigError::Problems(problems) => ConfigError::Problems(
            problems
                .into_iter()
                .map(|mut p| {
                    if let Some(s) = source_of(&p.path) {
                        p.message = format!("{} (from {})", p.message, s.source);
                    }
                    p
                })
                .collect(),
        ),
        other => other,
    }
}
