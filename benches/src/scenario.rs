//! Named proxy configurations, each raced against a direct connection in the same run.
//!
//! A scenario is a name, what runs between client and server (rttscope, a baseline relay,
//! HAProxy, or nothing), how clients reach it (TCP or a Unix socket), some YAML appended to
//! rttscope's config, and perhaps environment variables for the process. To add one that
//! every developer can run by name, add a line to [`BUILTIN`]; for a one-off, pass
//! `--proxy-config name=FILE`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;

/// What runs between the client and MariaDB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Program {
    /// The rttscope binary.
    Rttscope,
    /// A plain tokio byte pipe ([`crate::pipe`]): what any userspace relay costs on this
    /// machine, so rttscope's own share of the overhead can be told apart.
    RawPipe,
    /// HAProxy in TCP mode ([`crate::haproxy`]): the relay people put in front of MySQL
    /// today, the peer rttscope's speed is judged against.
    Haproxy,
    /// Nothing: the client talks to MariaDB itself (over its Unix socket: `direct-unix`).
    Direct,
}

impl Program {
    /// Whether the targets are about this program's figures (the others are references).
    pub fn is_rttscope(self) -> bool {
        self == Program::Rttscope
    }
}

/// How clients reach the side: the leg between client and proxy. The proxy's own leg to
/// MariaDB is TCP whatever this says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Leg {
    Tcp,
    /// A Unix-domain socket: rttscope with `listen: unix:PATH`, HAProxy with a
    /// `bind /PATH`, or MariaDB's own socket.
    Unix,
}

/// Where TLS runs in a `--tls` run, against the private server that offers it (no server
/// offers TLS otherwise, so there every leg is plain whatever this says).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tls {
    /// The client asks for TLS (trusting the test CA) on its leg.
    pub client: bool,
    /// The bytes into MariaDB are TLS: the client's own (direct, HAProxy passing them on) or
    /// rttscope's long hop (`upstream.tls.mode` `preferred`, the default, or `required`).
    pub server: bool,
    /// rttscope's `upstream.tls.mode` when the scenario sets it (the bench writes it beside
    /// `upstream.address`, which it sets itself); the config's default otherwise.
    pub upstream_mode: Option<&'static str>,
}

impl Tls {
    pub const PLAIN: Tls = Tls { client: false, server: false, upstream_mode: None };
    /// rttscope as configured by default: TLS upstream whenever the server offers it.
    pub const UPSTREAM: Tls = Tls { client: false, server: true, upstream_mode: None };
    /// The client's own TLS, carried to MariaDB.
    pub const END_TO_END: Tls = Tls { client: true, server: true, upstream_mode: None };
}

/// One configuration under test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub name: String,
    pub program: Program,
    pub leg: Leg,
    pub tls: Tls,
    /// Only in a `--tls` run: it needs a server that speaks TLS.
    pub needs_tls: bool,
    /// Appended to `listen`/`admin`/`upstream`, which the bench sets itself.
    pub yaml: String,
    /// Set in the proxy's environment, e.g. `TOKIO_WORKER_THREADS`.
    pub env: Vec<(String, String)>,
}

impl Scenario {
    /// rttscope over TCP with `yaml` appended to its config.
    pub fn rttscope(name: &str, yaml: &str) -> Scenario {
        Scenario {
            name: name.to_owned(),
            program: Program::Rttscope,
            leg: Leg::Tcp,
            tls: Tls::UPSTREAM,
            needs_tls: false,
            yaml: yaml.to_owned(),
            env: Vec::new(),
        }
    }
}

/// The baseline's name.
pub const RAW_PIPE: &str = "raw-pipe";
/// The peer's name, and its name over a Unix socket.
pub const HAPROXY: &str = "haproxy";
pub const HAPROXY_UNIX: &str = "haproxy-unix";
/// rttscope taking clients on a Unix socket, and MariaDB's own socket as its reference.
pub const UNIX: &str = "unix";
pub const DIRECT_UNIX: &str = "direct-unix";
/// rttscope with recording off: the instruction count (f) always measures it too.
pub const NO_RECORD: &str = "no-record";
/// A `--tls` run's sides: MariaDB by a TLS client, rttscope with `upstream.tls.mode`
/// `required` and `disabled` (plain clients), HAProxy passing a TLS client's bytes on.
pub const DIRECT_TLS: &str = "direct-tls";
pub const UPSTREAM_TLS: &str = "upstream-tls";
pub const UPSTREAM_PLAIN: &str = "upstream-plain";
pub const HAPROXY_TLS: &str = "haproxy-tls";
/// rttscope with TLS on both legs: a TLS client to it, TLS from it into MariaDB.
pub const CLIENT_TLS: &str = "client-tls";

/// A built-in scenario.
pub struct Builtin {
    pub name: &'static str,
    pub about: &'static str,
    pub program: Program,
    pub leg: Leg,
    pub tls: Tls,
    pub needs_tls: bool,
    pub yaml: &'static str,
    pub env: &'static [(&'static str, &'static str)],
}

const fn rttscope(
    name: &'static str,
    about: &'static str,
    yaml: &'static str,
    env: &'static [(&'static str, &'static str)],
) -> Builtin {
    Builtin { name, about, program: Program::Rttscope, leg: Leg::Tcp, tls: Tls::UPSTREAM, needs_tls: false, yaml, env }
}

const fn reference(name: &'static str, about: &'static str, program: Program, leg: Leg) -> Builtin {
    Builtin { name, about, program, leg, tls: Tls::PLAIN, needs_tls: false, yaml: "", env: &[] }
}

/// A side of a `--tls` run.
const fn tls_side(name: &'static str, about: &'static str, program: Program, tls: Tls) -> Builtin {
    Builtin { name, about, program, leg: Leg::Tcp, tls, needs_tls: true, yaml: "", env: &[] }
}

/// Scenarios selectable with `--scenario NAME`. The first is always run: it is rttscope
/// as a user gets it, which is what the targets are about.
pub const BUILTIN: &[Builtin] = &[
    rttscope("default", "rttscope with its defaults", "", &[]),
    rttscope(
        NO_RECORD,
        "record.enabled: false: a plain relay, no per-command records",
        "record:\n  enabled: false\n",
        &[],
    ),
    rttscope("small-buffer", "relay.buffer_size at its 4KiB minimum", "relay:\n  buffer_size: 4KiB\n", &[]),
    rttscope("large-buffer", "relay.buffer_size 256KiB", "relay:\n  buffer_size: 256KiB\n", &[]),
    rttscope(
        "sample-1ms",
        "link.sample_interval 1ms, not 10ms: what TCP_INFO sampling costs",
        "link:\n  sample_interval: 1ms\n",
        &[],
    ),
    rttscope(
        "no-idle-poll",
        "relay.idle_poll: 0: a connection thread sleeps as soon as it is idle, as HAProxy's do by default",
        "relay:\n  idle_poll: 0\n",
        &[],
    ),
    rttscope(
        "no-sched-batch",
        "relay.sched_batch: false: connection threads under the normal policy, free to preempt the task that woke them, as HAProxy's are",
        "relay:\n  sched_batch: false\n",
        &[],
    ),
    rttscope(
        "one-worker",
        "a single tokio worker thread (TOKIO_WORKER_THREADS=1)",
        "",
        &[("TOKIO_WORKER_THREADS", "1")],
    ),
    Builtin {
        name: UNIX,
        about: "rttscope with `listen: unix:PATH`: clients on a Unix socket (adds direct-unix, haproxy-unix)",
        program: Program::Rttscope,
        leg: Leg::Unix,
        tls: Tls::UPSTREAM,
        needs_tls: false,
        yaml: "",
        env: &[],
    },
    reference(
        RAW_PIPE,
        "not rttscope: tokio copy_bidirectional, the floor for any userspace relay here",
        Program::RawPipe,
        Leg::Tcp,
    ),
    reference(
        HAPROXY,
        "not rttscope: HAProxy in TCP mode, the peer (run unless --no-haproxy)",
        Program::Haproxy,
        Leg::Tcp,
    ),
    reference(HAPROXY_UNIX, "not rttscope: HAProxy in TCP mode bound to a Unix socket", Program::Haproxy, Leg::Unix),
    reference(DIRECT_UNIX, "not a proxy: MariaDB's own Unix socket (private server only)", Program::Direct, Leg::Unix),
    tls_side(DIRECT_TLS, "not a proxy: a TLS client straight to MariaDB (--tls)", Program::Direct, Tls::END_TO_END),
    tls_side(
        UPSTREAM_TLS,
        "rttscope, plain client, upstream.tls.mode: required (--tls)",
        Program::Rttscope,
        Tls { upstream_mode: Some("required"), ..Tls::UPSTREAM },
    ),
    tls_side(
        UPSTREAM_PLAIN,
        "rttscope, plain client, upstream.tls.mode: disabled (--tls)",
        Program::Rttscope,
        Tls { upstream_mode: Some("disabled"), ..Tls::PLAIN },
    ),
    tls_side(
        CLIENT_TLS,
        "rttscope, TLS client (listen.tls.mode: required), TLS into MariaDB (--tls)",
        Program::Rttscope,
        Tls::END_TO_END,
    ),
    tls_side(
        HAPROXY_TLS,
        "not rttscope: HAProxy in TCP mode passing a TLS client's bytes on (--tls)",
        Program::Haproxy,
        Tls::END_TO_END,
    ),
];

/// The references that run unless left out: the raw pipe and HAProxy; and whether this is a
/// `--tls` run (against a server that speaks TLS), which brings the TLS sides.
#[derive(Clone, Copy, Debug)]
pub struct References {
    pub raw_pipe: bool,
    pub haproxy: bool,
    pub tls: bool,
}

/// A built-in scenario by name.
pub fn builtin(name: &str) -> Option<Scenario> {
    BUILTIN.iter().find(|b| b.name == name).map(|b| Scenario {
        name: b.name.to_owned(),
        program: b.program,
        leg: b.leg,
        tls: b.tls,
        needs_tls: b.needs_tls,
        yaml: b.yaml.to_owned(),
        env: b.env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
    })
}

/// `default`, then the references (`raw-pipe`, `haproxy`) unless left out, then the named
/// built-ins, then one scenario per `[NAME=]FILE`. `unix` brings its references along:
/// `direct-unix`, and `haproxy-unix` with HAProxy. A `--tls` run brings `direct-tls`,
/// `upstream-tls`, `upstream-plain`, `client-tls` and, with HAProxy, `haproxy-tls`.
pub fn resolve(names: &[String], files: &[String], references: References) -> Result<Vec<Scenario>> {
    let mut scenarios = Vec::new();
    scenarios.extend(builtin(BUILTIN[0].name));
    let named = |n: &str| names.iter().any(|name| name == n);
    if references.raw_pipe && !named(RAW_PIPE) {
        scenarios.extend(builtin(RAW_PIPE));
    }
    if references.haproxy && !named(HAPROXY) {
        scenarios.extend(builtin(HAPROXY));
    }
    for name in names {
        let Some(scenario) = builtin(name) else {
            bail!("--scenario {name:?}: not a built-in scenario (try --list-scenarios)");
        };
        scenarios.push(scenario);
    }
    if named(UNIX) {
        let implied = [(DIRECT_UNIX, true), (HAPROXY_UNIX, references.haproxy)];
        for (name, wanted) in implied {
            if wanted && !named(name) {
                scenarios.extend(builtin(name));
            }
        }
    }
    if references.tls {
        let implied = [
            (DIRECT_TLS, true),
            (UPSTREAM_TLS, true),
            (UPSTREAM_PLAIN, true),
            (CLIENT_TLS, true),
            (HAPROXY_TLS, references.haproxy),
        ];
        for (name, wanted) in implied {
            if wanted && !named(name) {
                scenarios.extend(builtin(name));
            }
        }
    } else if let Some(s) = scenarios.iter().find(|s| s.needs_tls) {
        bail!("--scenario {:?} needs a server that speaks TLS: add --tls", s.name);
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
    Ok(Scenario { yaml, ..Scenario::rttscope(&name, "") })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: References = References { raw_pipe: true, haproxy: true, tls: false };
    const NONE: References = References { raw_pipe: false, haproxy: false, tls: false };

    #[test]
    fn default_first_then_builtins_then_files() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("rec-off.yaml");
        std::fs::write(&file, "relay:\n  buffer_size: 8KiB")?;
        let files = [file.display().to_string(), format!("other={}", file.display())];
        let s = resolve(&["small-buffer".into()], &files, BOTH)?;
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["default", "raw-pipe", "haproxy", "small-buffer", "rec-off", "other"]);
        assert_eq!(s[4].yaml, "relay:\n  buffer_size: 8KiB\n");
        assert_eq!((s[4].program, s[4].leg), (Program::Rttscope, Leg::Tcp));
        assert_eq!(resolve(&["raw-pipe".into()], &[], BOTH)?.len(), 3, "named once, run once");
        assert_eq!(resolve(&[], &[], NONE)?.len(), 1);
        assert!(resolve(&["nope".into()], &[], NONE).is_err());
        assert!(resolve(&["default".into()], &[], NONE).is_err(), "duplicate names");
        std::fs::write(&file, "upstream: 127.0.0.1:1\n")?;
        assert!(resolve(&[], &[file.display().to_string()], NONE).is_err());
        Ok(())
    }

    #[test]
    fn unix_brings_its_references() -> Result<()> {
        let names = |s: Vec<Scenario>| s.into_iter().map(|s| (s.name, s.program, s.leg)).collect::<Vec<_>>();
        let s = names(resolve(&["unix".into()], &[], BOTH)?);
        assert_eq!(s[3], ("unix".into(), Program::Rttscope, Leg::Unix));
        assert_eq!(s[4], ("direct-unix".into(), Program::Direct, Leg::Unix));
        assert_eq!(s[5], ("haproxy-unix".into(), Program::Haproxy, Leg::Unix));
        assert_eq!(s.len(), 6);
        let s = names(resolve(&["unix".into(), "direct-unix".into()], &[], NONE)?);
        let n: Vec<&str> = s.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(n, ["default", "unix", "direct-unix"], "no HAProxy when it is left out; no duplicate");
        Ok(())
    }

    #[test]
    fn tls_brings_its_sides() -> Result<()> {
        let tls = References { tls: true, ..BOTH };
        let s = resolve(&[], &[], tls)?;
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "default",
                "raw-pipe",
                "haproxy",
                "direct-tls",
                "upstream-tls",
                "upstream-plain",
                "client-tls",
                "haproxy-tls"
            ]
        );
        let find = |n: &str| s.iter().find(|s| s.name == n).expect(n);
        assert_eq!(find("default").tls, Tls::UPSTREAM, "preferred: TLS when offered");
        assert_eq!(find("haproxy").tls, Tls::PLAIN);
        assert_eq!((find("direct-tls").program, find("direct-tls").tls), (Program::Direct, Tls::END_TO_END));
        assert_eq!((find("haproxy-tls").program, find("haproxy-tls").tls), (Program::Haproxy, Tls::END_TO_END));
        assert_eq!(find("upstream-tls").tls, Tls { client: false, server: true, upstream_mode: Some("required") });
        assert_eq!(find("upstream-plain").tls, Tls { client: false, server: false, upstream_mode: Some("disabled") });
        assert_eq!((find("client-tls").program, find("client-tls").tls), (Program::Rttscope, Tls::END_TO_END));
        let names: Vec<String> =
            resolve(&[], &[], References { tls: true, ..NONE })?.into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["default", "direct-tls", "upstream-tls", "upstream-plain", "client-tls"],
            "no HAProxy, no haproxy-tls"
        );
        let err = resolve(&["upstream-tls".into()], &[], BOTH).expect_err("no TLS server");
        assert!(err.to_string().contains("add --tls"), "{err}");
        Ok(())
    }
}
