//! Named proxy configurations, each raced against a direct connection in the same run.
//!
//! A scenario is a name, some YAML appended to the proxy's config, and perhaps environment
//! variables for the proxy process. To add one that every developer can run by name, add a
//! line to [`BUILTIN`]; for a one-off, pass `--proxy-config name=FILE`.

use std::path::Path;

use anyhow::{Context, Result, bail};

/// What runs between the client and MariaDB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    /// The rttscope binary.
    Rttscope,
    /// A plain tokio byte pipe ([`crate::pipe`]): what any userspace relay costs on this
    /// machine, so rttscope's own share of the overhead can be told apart.
    RawPipe,
}

/// One configuration under test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub name: String,
    pub program: Program,
    /// Appended to `listen`/`admin`/`upstream`, which the bench sets itself.
    pub yaml: String,
    /// Set in the proxy's environment, e.g. `TOKIO_WORKER_THREADS`.
    pub env: Vec<(String, String)>,
}

/// The baseline's name.
pub const RAW_PIPE: &str = "raw-pipe";

/// A built-in scenario.
pub struct Builtin {
    pub name: &'static str,
    pub about: &'static str,
    pub program: Program,
    pub yaml: &'static str,
    pub env: &'static [(&'static str, &'static str)],
}

const fn rttscope(name: &'static str, about: &'static str, yaml: &'static str, env: &'static [(&'static str, &'static str)]) -> Builtin {
    Builtin { name, about, program: Program::Rttscope, yaml, env }
}

/// Scenarios selectable with `--scenario NAME`. The first is always run: it is rttscope
/// as a user gets it, which is what the targets are about.
pub const BUILTIN: &[Builtin] = &[
    rttscope("default", "rttscope with its defaults", "", &[]),
    rttscope("no-record", "record.enabled: false: a plain relay, no per-command records", "record:\n  enabled: false\n", &[]),
    rttscope("small-buffer", "relay.buffer_size at its 4KiB minimum", "relay:\n  buffer_size: 4KiB\n", &[]),
    rttscope("large-buffer", "relay.buffer_size 256KiB", "relay:\n  buffer_size: 256KiB\n", &[]),
    rttscope("sample-1ms", "link.sample_interval 1ms, not 10ms: what TCP_INFO sampling costs", "link:\n  sample_interval: 1ms\n", &[]),
    rttscope("one-worker", "a single tokio worker thread (TOKIO_WORKER_THREADS=1)", "", &[("TOKIO_WORKER_THREADS", "1")]),
    Builtin {
        name: RAW_PIPE,
        about: "not rttscope: tokio copy_bidirectional, the floor for any userspace relay here",
        program: Program::RawPipe,
        yaml: "",
        env: &[],
    },
];

/// `default`, then (with `raw_pipe`) the raw-pipe baseline, then the named built-ins, then
/// one scenario per `[NAME=]FILE`.
pub fn resolve(names: &[String], files: &[String], raw_pipe: bool) -> Result<Vec<Scenario>> {
    let builtin = |name: &str| {
        BUILTIN.iter().find(|b| b.name == name).map(|b| Scenario {
            name: b.name.to_owned(),
            program: b.program,
            yaml: b.yaml.to_owned(),
            env: b.env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        })
    };
    let mut scenarios = Vec::new();
    scenarios.extend(builtin(BUILTIN[0].name));
    if raw_pipe && !names.iter().any(|n| n == RAW_PIPE) {
        scenarios.extend(builtin(RAW_PIPE));
    }
    for name in names {
        let Some(scenario) = builtin(name) else {
            bail!("--scenario {name:?}: not a built-in scenario (try --list-scenarios)");
        };
        scenarios.push(scenario);
    }
    for spec in files {
        scenarios.push(from_file(spec)?);
    }
    for (i, s) in scenarios.iter().enumerate() {
        if scenarios[..i].iter().any(|earlier| earlier.name == s.name) {
            bail!("scenario {:?} is given twice; name one with --proxy-config NAME=FILE", s.name);
        }
    }
    Ok(scenarios)
}

/// The `--list-scenarios` text.
pub fn list() -> String {
    BUILTIN.iter().map(|b| format!("{:14} {}\n", b.name, b.about)).collect()
}

fn from_file(spec: &str) -> Result<Scenario> {
    let (name, path) = match spec.split_once('=') {
        Some((name, path)) if !name.is_empty() => (name.to_owned(), Path::new(path)),
        _ => {
            let path = Path::new(spec);
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("custom");
            (stem.to_owned(), path)
        }
    };
    let yaml = std::fs::read_to_string(path).with_context(|| format!("--proxy-config: reading {}", path.display()))?;
    // The proxy would refuse the duplicate key too, but only after a start-up; say it now.
    for key in ["listen", "admin", "upstream"] {
        if yaml.lines().any(|line| line.starts_with(&format!("{key}:"))) {
            bail!("--proxy-config {}: must not set `{key}`; the bench sets it", path.display());
        }
    }
    let mut yaml = yaml;
    if !yaml.is_empty() && !yaml.ends_with('\n') {
        yaml.push('\n');
    }
    Ok(Scenario { name, program: Program::Rttscope, yaml, env: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_first_then_builtins_then_files() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("rec-off.yaml");
        std::fs::write(&file, "relay:\n  buffer_size: 8KiB")?;
        let files = [file.display().to_string(), format!("other={}", file.display())];
        let s = resolve(&["small-buffer".into()], &files, true)?;
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["default", "raw-pipe", "small-buffer", "rec-off", "other"]);
        assert_eq!(s[3].yaml, "relay:\n  buffer_size: 8KiB\n");
        assert_eq!(resolve(&["raw-pipe".into()], &[], true)?.len(), 2, "named once, run once");
        assert_eq!(resolve(&[], &[], false)?.len(), 1);
        assert!(resolve(&["nope".into()], &[], false).is_err());
        assert!(resolve(&["default".into()], &[], false).is_err(), "duplicate names");
        std::fs::write(&file, "upstream: 127.0.0.1:1\n")?;
        assert!(resolve(&[], &[file.display().to_string()], false).is_err());
        Ok(())
    }
}
