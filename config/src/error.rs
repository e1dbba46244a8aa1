//! `ConfigError`, the one error type of this crate, and the collector `validate()` fills.

use std::fmt;
use std::path::PathBuf;

/// Everything that can be wrong with a config file or an `/inject` body.
///
/// `Display` prints one human line per problem, e.g.
/// `line 12: inject.rtt: invalid duration '-5ms': must not be negative`; use
/// [`ConfigError::with_source_name`] to prefix the file name instead
/// (`rttscope.yaml:12: inject.rtt: ...`).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file we tried to read.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The text is not well-formed YAML (or JSON): nothing was interpreted yet.
    #[error("{}", self.with_source_name(""))]
    Syntax {
        /// 1-based line of the problem, when the parser knows it.
        line: Option<usize>,
        /// 1-based column of the problem, when the parser knows it.
        column: Option<usize>,
        /// The parser's description.
        message: String,
    },
    /// Well-formed, but a key is unknown, a value has the wrong type, or a value does not
    /// parse (`15` for a duration, `-5ms`, `nonsense` for an address).
    ///
    /// Only the first such error is reported: serde stops deserializing at the first failure.
    #[error("{}", self.with_source_name(""))]
    Invalid {
        /// Dotted key path of the offending key, e.g. `inject.to_client.bandwidth` or
        /// `findings.scenarios[1].rtt`; empty for the document itself.
        path: String,
        /// 1-based line of the offending key or value, when known.
        line: Option<usize>,
        /// Why it was rejected.
        message: String,
    },
    /// Every cross-field and range problem found by `validate()`, in one go.
    #[error("{}", self.with_source_name(""))]
    Problems(Vec<Problem>),
}

/// One problem found by `validate()`: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key path, e.g. `limits.max_connections`.
    pub path: String,
    /// Why the value is not acceptable.
    pub message: String,
    /// 1-based line of the key in the YAML file, when it is there to be found.
    pub line: Option<usize>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl ConfigError {
    /// Displays the error with every line prefixed by `name` the way compilers do:
    /// `rttscope.yaml:12: inject.rtt: ...`, `rttscope.yaml:3:7: ...` for syntax errors and
    /// `rttscope.yaml: limits.max_connections: ...` for problems without a line.
    /// An empty `name` gives the plain form (`line 12: inject.rtt: ...`).
    pub fn with_source_name<'a>(&'a self, name: &'a str) -> impl fmt::Display + 'a {
        SourceDisplay { err: self, name }
    }

    /// The problems of a [`ConfigError::Problems`], or one synthesised from the other variants,
    /// so callers (the admin API) can list them uniformly.
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            ConfigError::Problems(list) => list.clone(),
            ConfigError::Invalid { path, message, line } => {
                vec![Problem { path: path.clone(), message: message.clone(), line: *line }]
            }
            other => vec![Problem { path: String::new(), message: other.to_string(), line: None }],
        }
    }
}

struct SourceDisplay<'a> {
    err: &'a ConfigError,
    name: &'a str,
}

impl fmt::Display for SourceDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name;
        match self.err {
            ConfigError::Io { .. } => write!(f, "{}", self.err),
            ConfigError::Syntax { line, column, message } => {
                match (name.is_empty(), line, column) {
                    (true, Some(l), Some(c)) => write!(f, "line {l}, column {c}: ")?,
                    (true, Some(l), None) => write!(f, "line {l}: ")?,
                    (false, Some(l), Some(c)) => write!(f, "{name}:{l}:{c}: ")?,
                    (false, Some(l), None) => write!(f, "{name}:{l}: ")?,
                    (false, None, _) => write!(f, "{name}: ")?,
                    (true, None, _) => {}
                }
                write!(f, "{message}")
            }
            ConfigError::Invalid { path, line, message } => {
                match (name.is_empty(), line) {
                    (true, Some(l)) => write!(f, "line {l}: ")?,
                    (false, Some(l)) => write!(f, "{name}:{l}: ")?,
                    (false, None) => write!(f, "{name}: ")?,
                    (true, None) => {}
                }
                if !path.is_empty() {
                    write!(f, "{path}: ")?;
                }
                write!(f, "{message}")
            }
            ConfigError::Problems(list) => {
                for (i, p) in list.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    match (name.is_empty(), p.line) {
                        (false, Some(l)) => write!(f, "{name}:{l}: ")?,
                        (false, None) => write!(f, "{name}: ")?,
                        (true, Some(l)) => write!(f, "line {l}: ")?,
                        (true, None) => {}
                    }
                    write!(f, "{}: {}", p.path, p.message)?;
                }
                Ok(())
            }
        }
    }
}

/// Collects problems under a key-path prefix; sections call `check` with a nested checker so
/// every message carries its full path.
pub(crate) struct Checker<'a> {
    prefix: String,
    out: &'a mut Vec<Problem>,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(out: &'a mut Vec<Problem>) -> Self {
        Checker { prefix: String::new(), out }
    }

    fn join(&self, key: &str) -> String {
        match (self.prefix.is_empty(), key.is_empty()) {
            (true, _) => key.to_owned(),
            (false, true) => self.prefix.clone(),
            (false, false) if key.starts_with('[') => format!("{}{key}", self.prefix),
            (false, false) => format!("{}.{key}", self.prefix),
        }
    }

    /// A checker for the section `key` below this one (`[2]` for a list element).
    pub(crate) fn at(&mut self, key: &str) -> Checker<'_> {
        Checker { prefix: self.join(key), out: self.out }
    }

    /// Records that the value at `key` (relative to this checker) is wrong.
    pub(crate) fn problem(&mut self, key: &str, message: impl Into<String>) {
        let path = self.join(key);
        self.out.push(Problem { path, message: message.into(), line: None });
    }

    /// Records a problem at `key` unless `ok`.
    pub(crate) fn require(&mut self, ok: bool, key: &str, message: impl Into<String>) {
        if !ok {
            self.problem(key, message);
        }
    }
}

impl ConfigError {
    /// Finds the line of each problem's key in `yaml`, the text it was parsed from.
    pub(crate) fn with_lines(self, yaml: &str) -> ConfigError {
        match self {
            ConfigError::Problems(list) => ConfigError::Problems(
                list.into_iter()
                    .map(|p| Problem { line: p.line.or_else(|| crate::parse::line_of(yaml, &p.path)), ..p })
                    .collect(),
            ),
            other => other,
        }
    }
}

/// Turns collected problems into the result `validate()` returns.
pub(crate) fn into_result(problems: Vec<Problem>) -> Result<(), ConfigError> {
    if problems.is_empty() { Ok(()) } else { Err(ConfigError::Problems(problems)) }
}
