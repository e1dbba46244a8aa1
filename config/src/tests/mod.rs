//! Tests on literal YAML and JSON strings, one file per area.

mod config;
mod inject;
mod layers;
mod units;

use crate::{Config, ConfigError};

/// The error `from_yaml` gives, which the test expects.
fn yaml_err(yaml: &str) -> ConfigError {
    match Config::from_yaml(yaml) {
        Ok(c) => panic!("expected an error for {yaml:?}, got {c:?}"),
        Err(e) => e,
    }
}

/// `(path, line, message)` of an `Invalid` error.
fn invalid(yaml: &str) -> (String, Option<usize>, String) {
    match yaml_err(yaml) {
        ConfigError::Invalid { path, line, message } => (path, line, message),
        other => panic!("expected Invalid for {yaml:?}, got {other:?}"),
    }
}

/// The paths and messages of a `Problems` error.
fn problems(yaml: &str) -> Vec<(String, String)> {
    match yaml_err(yaml) {
        ConfigError::Problems(list) => list.into_iter().map(|p| (p.path, p.message)).collect(),
        other => panic!("expected Problems for {yaml:?}, got {other:?}"),
    }
}
