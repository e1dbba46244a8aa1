//! The bench's flags, and the [`Plan`] they resolve to (full run, `--quick`, or overrides).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;

use crate::accuracy::AccuracyPlan;
use crate::instructions::InstructionPlan;
use crate::scenario::{self, References, Scenario};

/// End-to-end benchmark: the same workloads against MariaDB directly and through the
/// rttscope binary, in one run, reported as ratios.
#[derive(Clone, Debug, Default, Parser)]
#[command(name = "rttscope-bench", version)]
pub struct Options {
    /// A short run (a few seconds per workload) for CI smoke and quick checks.
    #[arg(long)]
    pub quick: bool,
    /// Workloads to run, comma separated, from a (sequential round trips), b (point selects
    /// on many connections), c (large result), d (rttscope CPU per query), e (the emulated
    /// link's accuracy), f (instructions per round trip, under callgrind). d is measured
    /// during b, so asking for either reports both. Default: a, b, c, d and f.
    #[arg(long, value_delimiter = ',', value_name = "a,b,c,d,e,f")]
    pub only: Vec<String>,
    /// Also run e: how accurately `inject` emulates RTT, bandwidth and window, as a second
    /// table (a few minutes). `--only e` runs it alone.
    #[arg(long)]
    pub inject: bool,
    /// The `toxiproxy-server` e compares with (default: $TOXIPROXY_SERVER, else
    /// target/toxiproxy/toxiproxy-server if scripts/build-toxiproxy.sh built it; without one,
    /// e reports Toxiproxy as not run).
    #[arg(long, value_name = "FILE")]
    pub toxiproxy: Option<PathBuf>,
    /// How long each side runs in each round of workload b, e.g. `10s`, `500ms`.
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    pub duration: Option<Duration>,
    /// Rounds of workload b (each side runs once per round, in alternating order); more,
    /// shorter rounds cancel more of a noisy machine's drift.
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,
    /// Round trips measured per side in workload a, after the warm-up.
    #[arg(long, value_name = "N")]
    pub round_trips: Option<u64>,
    /// Unmeasured round trips on each connection of workload a before it is measured.
    #[arg(long, value_name = "N")]
    pub warmup: Option<u64>,
    /// Client connections in workload b.
    #[arg(long, value_name = "N")]
    pub connections: Option<usize>,
    /// Rows of the `sbtest` table workload b selects from (re-created when it differs).
    #[arg(long, value_name = "N")]
    pub table_rows: Option<u64>,
    /// Size of the result set of workload c, in MB (10^6 bytes of cell data).
    #[arg(long, value_name = "MB", value_parser = parse_mb)]
    pub large_mb: Option<f64>,
    /// A built-in proxy scenario to race against direct (repeatable): see
    /// `--list-scenarios`. `default` and the `raw-pipe` baseline are always run.
    #[arg(long = "scenario", value_name = "NAME")]
    pub scenarios: Vec<String>,
    /// Extra YAML for the proxy, as a further scenario (repeatable). NAME defaults to the
    /// file's stem. The file must not set `listen`, `admin` or `upstream`.
    #[arg(long = "proxy-config", value_name = "[NAME=]FILE")]
    pub proxy_configs: Vec<String>,
    /// Leave out the raw-pipe baseline (a plain tokio relay, run unless this is given).
    #[arg(long)]
    pub no_raw_pipe: bool,
    /// Leave out HAProxy, the peer (run unless this is given, in TCP mode; with
    /// `--scenario unix` also bound to a Unix socket).
    #[arg(long)]
    pub no_haproxy: bool,
    /// TLS on the hot path: run against a second private MariaDB that speaks TLS (generated
    /// certificates) and add the sides `direct-tls` (a TLS client), `upstream-tls` and
    /// `upstream-plain` (rttscope, plain client, `upstream.tls.mode` `required` and
    /// `disabled`) and `haproxy-tls` (a TLS client through HAProxy). a to d only.
    #[arg(long)]
    pub tls: bool,
    /// The `haproxy` binary (default: $HAPROXY, else `haproxy` on the PATH or in /usr/sbin).
    #[arg(long, value_name = "FILE")]
    pub haproxy: Option<PathBuf>,
    /// Round trips per measured window of f (instructions per round trip).
    #[arg(long, value_name = "N")]
    pub callgrind_round_trips: Option<u64>,
    /// Measured windows of f per proxy; the median is reported, the spread in the notes.
    #[arg(long, value_name = "N")]
    pub callgrind_windows: Option<u32>,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    pub list_scenarios: bool,
    /// The rttscope binary to run. Default: the one next to this executable (built
    /// first when run through cargo), or the workspace's for a test executable.
    #[arg(long, value_name = "FILE")]
    pub proxy_bin: Option<PathBuf>,
    /// Where `latest.md` and `latest.json` go. Default: `target/bench` in the workspace.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Internal: serve as the raw-pipe baseline on this address (with --raw-pipe-upstream).
    #[arg(long, hide = true, requires = "raw_pipe_upstream", value_name = "ADDR")]
    pub raw_pipe_listen: Option<SocketAddr>,
    /// Internal: where the raw pipe forwards.
    #[arg(long, hide = true, requires = "raw_pipe_listen", value_name = "ADDR")]
    pub raw_pipe_upstream: Option<SocketAddr>,
}

/// A workload, by the letter the report uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Workload {
    /// a: sequential `SELECT 1` round trips on one connection.
    Sequential,
    /// b: prepared point selects on many connections for a fixed time.
    Point,
    /// c: one large text result set.
    Large,
    /// d: rttscope's CPU time per 100k queries, measured during b.
    Cpu,
    /// e: the emulated link's accuracy: rttscope with `inject` against its settings.
    Accuracy,
    /// f: user-space instructions the proxy executes per round trip, under callgrind.
    Instructions,
}

impl Workload {
    pub const ALL: [Workload; 6] = [
        Workload::Sequential,
        Workload::Point,
        Workload::Large,
        Workload::Cpu,
        Workload::Accuracy,
        Workload::Instructions,
    ];
    /// What runs without `--only`: e asks a different question (is the emulation faithful,
    /// not what does rttscope cost) and takes minutes, so it runs when asked for.
    pub const DEFAULT: [Workload; 5] =
        [Workload::Sequential, Workload::Point, Workload::Large, Workload::Cpu, Workload::Instructions];

    pub fn letter(self) -> &'static str {
        match self {
            Workload::Sequential => "a",
            Workload::Point => "b",
            Workload::Large => "c",
            Workload::Cpu => "d",
            Workload::Accuracy => "e",
            Workload::Instructions => "f",
        }
    }
}

/// Everything a run needs to know, with defaults filled in.
#[derive(Clone, Debug)]
pub struct Plan {
    pub workloads: BTreeSet<Workload>,
    pub quick: bool,
    /// Measured round trips per side, split into interleaved batches.
    pub round_trips: u64,
    pub warmup: u64,
    pub point_duration: Duration,
    pub connections: usize,
    pub table_rows: u64,
    /// Cell bytes of workload c's result and the length of each row's single cell.
    pub large_bytes: u64,
    pub large_row_len: u64,
    /// Repeats of each workload, alternating direct and every scenario, so that drift in
    /// the machine's speed (another build starting, CPU frequency) hits every side alike.
    pub rounds: u32,
    /// Runs of workload c per side; the median is reported.
    pub large_runs: u32,
    pub scenarios: Vec<Scenario>,
    /// Against the private server that speaks TLS (`--tls`).
    pub tls: bool,
    /// e's probes and counts.
    pub accuracy: AccuracyPlan,
    /// f's round trips and windows.
    pub instructions: InstructionPlan,
    pub proxy_bin: Option<PathBuf>,
    /// `--haproxy`, if given.
    pub haproxy_bin: Option<PathBuf>,
    pub out_dir: PathBuf,
}

impl Plan {
    pub fn runs(&self, workload: Workload) -> bool {
        self.workloads.contains(&workload)
    }

    /// Workload a interleaves the sides in this many batches (at most 20, at least one
    /// round trip each).
    pub fn sequential_batches(&self) -> u64 {
        self.round_trips.clamp(1, 20)
    }

    /// Workload b also runs when only d was asked for: d is measured during b.
    pub fn runs_point(&self) -> bool {
        self.runs(Workload::Point) || self.runs(Workload::Cpu)
    }
}

impl Options {
    /// Options with only the given flags set, as a test would build them.
    pub fn quick() -> Options {
        Options { quick: true, ..Options::default() }
    }

    pub fn plan(&self) -> Result<Plan> {
        let mut workloads: BTreeSet<Workload> = if self.only.is_empty() {
            // f counts instructions of the plain relay; a `--tls` run is about a to d.
            Workload::DEFAULT.into_iter().filter(|w| !self.tls || *w != Workload::Instructions).collect()
        } else {
            self.only.iter().map(|w| parse_workload(w)).collect::<Result<_>>()?
        };
        if self.inject {
            workloads.insert(Workload::Accuracy);
        }
        let quick = self.quick;
        let pick = |given: Option<u64>, full: u64, short: u64| given.unwrap_or(if quick { short } else { full });
        let large_row_len = 1000;
        let large_mb = self.large_mb.unwrap_or(if quick { 2.0 } else { 100.0 });
        let plan = Plan {
            workloads,
            quick,
            round_trips: pick(self.round_trips, 20_000, 1_000),
            warmup: pick(self.warmup, 1_000, 100),
            point_duration: self.duration.unwrap_or(if quick {
                Duration::from_millis(750)
            } else {
                Duration::from_secs(10)
            }),
            connections: self.connections.unwrap_or(8),
            table_rows: pick(self.table_rows, 100_000, 10_000),
            large_bytes: (large_mb * 1e6) as u64,
            large_row_len,
            rounds: self.rounds.unwrap_or(2),
            large_runs: 3,
            scenarios: scenario::resolve(
                &self.scenarios,
                &self.proxy_configs,
                References { raw_pipe: !self.no_raw_pipe, haproxy: !self.no_haproxy, tls: self.tls },
            )?,
            tls: self.tls,
            accuracy: AccuracyPlan::new(quick, crate::accuracy::toxiproxy::find(self.toxiproxy.as_deref())),
            instructions: InstructionPlan::new(quick, self.callgrind_round_trips, self.callgrind_windows),
            proxy_bin: self.proxy_bin.clone(),
            haproxy_bin: self.haproxy.clone(),
            out_dir: self.out_dir.clone().unwrap_or_else(default_out_dir),
        };
        if plan.round_trips == 0 || plan.connections == 0 || plan.table_rows == 0 || plan.rounds == 0 {
            bail!("--round-trips, --connections, --table-rows and --rounds must be at least 1");
        }
        if plan.tls && (plan.runs(Workload::Accuracy) || plan.runs(Workload::Instructions)) {
            bail!("--tls measures a to d; e and f run without it");
        }
        if plan.instructions.round_trips == 0 || plan.instructions.windows == 0 {
            bail!("--callgrind-round-trips and --callgrind-windows must be at least 1");
        }
        if plan.large_bytes < plan.large_row_len {
            bail!("--large-mb must be at least {} bytes", plan.large_row_len);
        }
        Ok(plan)
    }
}

/// `<workspace>/target/bench`: where docs/benchmarks.md's tables are taken from, whatever
/// `CARGO_TARGET_DIR` says about build outputs.
fn default_out_dir() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(&manifest).join("target").join("bench")
}

fn parse_workload(s: &str) -> Result<Workload> {
    let letter = s.trim();
    Workload::ALL
        .into_iter()
        .find(|w| w.letter() == letter)
        .with_context(|| format!("--only: unknown workload {letter:?} (expected a, b, c, d, e or f)"))
}

/// `10s`, `500ms`, `1m`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len()));
    let value: f64 = number.trim().parse().map_err(|_| format!("{s:?} is not a duration like 10s or 500ms"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "m" | "min" => value * 60.0,
        _ => return Err(format!("{s:?}: unit must be ms, s or m")),
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(format!("{s:?}: must be greater than 0"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn parse_mb(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(mb) if mb.is_finite() && mb > 0.0 => Ok(mb),
        _ => Err(format!("{s:?} is not a positive number of MB")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("5h").is_err());
    }

    #[test]
    fn only_d_runs_b() -> Result<()> {
        let plan = Options { only: vec!["d".into()], ..Options::quick() }.plan()?;
        assert!(plan.runs_point() && !plan.runs(Workload::Sequential));
        assert!(Options { only: vec!["x".into()], ..Options::quick() }.plan().is_err());
        let plan = Options { inject: true, ..Options::quick() }.plan()?;
        assert_eq!(plan.workloads.len(), 6, "--inject adds e to the default a to d and f");
        assert!(!Options::quick().plan()?.runs(Workload::Accuracy));
        let plan = Options { only: vec!["e".into()], ..Options::quick() }.plan()?;
        assert!(plan.runs(Workload::Accuracy) && !plan.runs_point());
        let plan = Options { tls: true, ..Options::quick() }.plan()?;
        assert_eq!(plan.workloads.len(), 4, "--tls runs a to d, not f");
        assert!(Options { tls: true, only: vec!["f".into()], ..Options::quick() }.plan().is_err());
        assert!(Options { tls: true, inject: true, ..Options::quick() }.plan().is_err());
        Ok(())
    }
}
