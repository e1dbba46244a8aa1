//! f. Instructions per round trip: each proxy run under `valgrind --tool=callgrind` while one
//! client makes sequential `SELECT 1` round trips, counting the user-space instructions the
//! proxy executes (all its threads) per round trip. Unlike wall time, this count barely moves
//! between runs, so a change to the hot path shows even on a noisy machine.
//!
//! How: the proxy starts under callgrind (collecting from the start); the client connects and
//! warms up; then, for each window, `vgdb --pid=P zero` clears the counters, the client makes
//! N round trips, and `vgdb --pid=P dump` writes the counts since the zero. Ir / N is the
//! window's figure; the fewest over the windows is reported, with the median and the spread.
//!
//! Why the fewest: part of the proxy's work goes by wall time, not by round trip (the timer
//! wheel, parking and waking the workers, the collector's batching sleep), and a window the
//! machine slowed down counts more of it. Pacing the client 1 ms between round trips added
//! 3.5 %, 3 ms 10 %; on a loaded machine two or three of five windows ran 4× slower and counted
//! 2 % more, moving the median, while the fewest stayed within ±0.4 % over seven runs. A last window
//! with no traffic, as long as the reported one, shows what the idle process costs in that time:
//! it is included in the figure, not subtracted.
//!
//! The reported window's dump is kept under `target/bench/callgrind/` for kcachegrind, with
//! `callgrind_annotate`'s view of it (functions by own and by inclusive cost) beside it.

pub mod profile;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rttscope_integration_tests::mariadb::TestDb;
use serde::Serialize;

use crate::child::{Endpoint, Programs, ProxyChild, Wrapper};
use crate::scenario::{self, Leg, Program, Scenario};
use crate::stats::median;
use crate::workload::sequential;

/// How many round trips, in how many windows.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct InstructionPlan {
    /// Round trips per window.
    pub round_trips: u64,
    pub windows: u32,
    /// Unmeasured round trips first: connection set-up, first-use allocations, lazy statics.
    pub warmup: u64,
}

impl InstructionPlan {
    pub fn new(quick: bool, round_trips: Option<u64>, windows: Option<u32>) -> InstructionPlan {
        InstructionPlan {
            round_trips: round_trips.unwrap_or(if quick { 200 } else { 2_000 }),
            windows: windows.unwrap_or(if quick { 2 } else { 5 }),
            warmup: if quick { 50 } else { 500 },
        }
    }
}

/// The valgrind tools f needs.
#[derive(Clone, Debug)]
pub struct Valgrind {
    valgrind: PathBuf,
    vgdb: PathBuf,
    annotate: PathBuf,
    pub version: String,
}

impl Valgrind {
    /// `valgrind`, `vgdb` and `callgrind_annotate` from the PATH (Debian's `valgrind`).
    pub fn find() -> Result<Valgrind> {
        let find = |name: &str| {
            std::env::var_os("PATH")
                .into_iter()
                .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
                .with_context(|| {
                    format!(
                        "f (instructions per round trip) needs {name}: install valgrind (`apt-get install \
                         valgrind`; scripts/bench.sh does), or leave f out with --only a,b,c,d"
                    )
                })
        };
        let valgrind = find("valgrind")?;
        let out = Command::new(&valgrind).arg("--version").output().context("running valgrind --version")?;
        let version = String::from_utf8_lossy(&out.stdout).trim().trim_start_matches("valgrind-").to_owned();
        Ok(Valgrind { valgrind, vgdb: find("vgdb")?, annotate: find("callgrind_annotate")?, version })
    }

    fn wrapper(&self, out_file: &Path) -> Wrapper {
        let mut out = OsString::from("--callgrind-out-file=");
        out.push(out_file);
        Wrapper {
            program: self.valgrind.clone(),
            args: vec!["--tool=callgrind".into(), out, "--vgdb=yes".into(), "--dump-line=yes".into()],
        }
    }

    /// A callgrind monitor command (`zero`, `dump`) to process `pid`.
    fn monitor(&self, pid: u32, command: &str) -> Result<()> {
        let out = Command::new(&self.vgdb)
            .arg(format!("--pid={pid}"))
            .arg(command)
            .output()
            .with_context(|| format!("running vgdb {command}"))?;
        if !out.status.success() {
            bail!(
                "vgdb --pid={pid} {command} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

/// What to measure: every process scenario of the run, and rttscope with recording off even
/// when a to d do not race it.
pub fn scenarios(all: &[Scenario]) -> Vec<Scenario> {
    let mut chosen: Vec<Scenario> = all.iter().filter(|s| s.program != Program::Direct).cloned().collect();
    if !chosen.iter().any(|s| s.name == scenario::NO_RECORD)
        && let Some(no_record) = scenario::builtin(scenario::NO_RECORD)
    {
        let at = chosen.iter().position(|s| s.program == Program::Rttscope).map_or(0, |i| i + 1);
        chosen.insert(at, no_record);
    }
    chosen
}

/// One function's own instructions per round trip, in the reported window.
#[derive(Clone, Debug, Serialize)]
pub struct TopFunction {
    pub function: String,
    pub per_round_trip: f64,
    pub share: f64,
}

/// f's result for one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct InstructionCount {
    pub scenario: String,
    pub program: Program,
    pub leg: Leg,
    /// The scenario's extra YAML (rttscope only).
    pub proxy_config: String,
    pub round_trips: u64,
    /// Instructions (Ir) of each window, in order.
    pub windows: Vec<u64>,
    /// Wall time of each window under valgrind.
    pub window_seconds: Vec<f64>,
    /// The fewest Ir / round trips over the windows: the figure.
    pub per_round_trip: f64,
    pub median_per_round_trip: f64,
    pub max_per_round_trip: f64,
    /// Instructions with no traffic over as long as the reported window took.
    pub idle: u64,
    /// The functions with the most own instructions in the reported window, per round trip.
    pub top: Vec<TopFunction>,
    /// The reported window's dump and `callgrind_annotate`'s view of it.
    pub callgrind_out: Option<String>,
    pub annotated: Option<String>,
}

impl InstructionCount {
    /// (max − min) / min of the windows' figures.
    pub fn spread(&self) -> f64 {
        if self.per_round_trip > 0.0 {
            (self.max_per_round_trip - self.per_round_trip) / self.per_round_trip
        } else {
            0.0
        }
    }
}

/// Functions kept per scenario, in `latest.json` and at the head of the profile's text.
const TOP: usize = 30;

/// Measures `scenario`'s proxy under callgrind; `out_dir` gets `callgrind/<scenario>.*`.
pub async fn measure(
    plan: &InstructionPlan,
    valgrind: &Valgrind,
    programs: &Programs,
    db: &'static TestDb,
    scenario: &Scenario,
    out_dir: &Path,
) -> Result<InstructionCount> {
    let scratch = tempfile::Builder::new().prefix("rttscope-callgrind-").tempdir()?;
    let out_file = scratch.path().join("callgrind.out");
    let wrapper = valgrind.wrapper(&out_file);
    let (programs, s, upstream): (_, _, SocketAddr) = (programs.clone(), scenario.clone(), db.upstream_addr());
    let mut proxy =
        tokio::task::spawn_blocking(move || ProxyChild::start_under(&programs, upstream, &s, Some(&wrapper)))
            .await?
            .with_context(|| format!("starting {:?} under callgrind", scenario.name))?;
    let pid = proxy.pid();
    let endpoint: Endpoint = proxy.endpoint().clone();
    let label = format!("f. {} under callgrind at {endpoint}", scenario.name);
    let mut client = sequential::Client::start(&endpoint.opts(db), &label, plan.warmup).await?;
    let mut histogram = sequential::histogram()?;

    let mut dumps = 0;
    let mut window = async |valgrind: &Valgrind, work: Work| -> Result<(PathBuf, u64, f64)> {
        blocking_monitor(valgrind, pid, "zero").await?;
        let start = Instant::now();
        match work {
            Work::RoundTrips(n) => client.measure(n, &mut histogram).await?,
            Work::Idle(time) => tokio::time::sleep(time).await,
        }
        let seconds = start.elapsed().as_secs_f64();
        blocking_monitor(valgrind, pid, "dump").await?;
        dumps += 1;
        let dump = PathBuf::from(format!("{}.{dumps}", out_file.display()));
        let total = read_total(&dump).await?;
        Ok((dump, total, seconds))
    };
    let mut windows = Vec::with_capacity(plan.windows as usize);
    for _ in 0..plan.windows {
        windows.push(window(valgrind, Work::RoundTrips(plan.round_trips)).await?);
    }
    let n = plan.round_trips as f64;
    let per: Vec<f64> = windows.iter().map(|w| w.1 as f64 / n).collect();
    let fewest = fewest_index(&per);
    let (dump, total, seconds) = &windows[fewest];
    let (_, idle, _) = window(valgrind, Work::Idle(Duration::from_secs_f64(*seconds))).await?;
    client.finish().await?;
    proxy.check_alive().with_context(|| format!("{} under callgrind", scenario.name))?;

    let text = tokio::fs::read_to_string(dump).await?;
    let parsed = profile::parse(&text)?;
    let top: Vec<TopFunction> = parsed
        .functions
        .iter()
        .take(TOP)
        .map(|f| TopFunction {
            function: f.function.clone(),
            per_round_trip: f.instructions as f64 / n,
            share: f.instructions as f64 / (*total).max(1) as f64,
        })
        .collect();
    let (callgrind_out, annotated) = match keep(valgrind, &text, &scenario.name, out_dir, &top).await {
        Ok((dump, annotated)) => (Some(dump.display().to_string()), Some(annotated.display().to_string())),
        Err(e) => {
            eprintln!("rttscope-bench: f. could not keep the profile of {}: {e:#}", scenario.name);
            (None, None)
        }
    };
    drop(proxy);
    let max = per.iter().copied().fold(0.0, f64::max);
    Ok(InstructionCount {
        scenario: scenario.name.clone(),
        program: scenario.program,
        leg: scenario.leg,
        proxy_config: scenario.yaml.clone(),
        round_trips: plan.round_trips,
        windows: windows.iter().map(|w| w.1).collect(),
        window_seconds: windows.iter().map(|w| w.2).collect(),
        per_round_trip: per[fewest],
        median_per_round_trip: median(&per).unwrap_or(per[fewest]),
        max_per_round_trip: max,
        idle,
        top,
        callgrind_out,
        annotated,
    })
}

enum Work {
    RoundTrips(u64),
    Idle(Duration),
}

async fn blocking_monitor(valgrind: &Valgrind, pid: u32, command: &'static str) -> Result<()> {
    let valgrind = valgrind.clone();
    tokio::task::spawn_blocking(move || valgrind.monitor(pid, command)).await?
}

/// The dump's total, once callgrind has written all of it (it ends with `totals:`).
async fn read_total(dump: &Path) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = tokio::fs::read_to_string(dump).await
            && text.lines().any(|l| l.starts_with("totals:"))
        {
            return Ok(profile::parse(&text)?.total);
        }
        if Instant::now() > deadline {
            bail!("callgrind wrote no complete dump at {} within 30 s", dump.display());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Index of the smallest value (the first of equals).
fn fewest_index(values: &[f64]) -> usize {
    (0..values.len()).min_by(|&a, &b| values[a].total_cmp(&values[b])).unwrap_or(0)
}

/// Writes `callgrind/<name>.callgrind.out` (fixed for `callgrind_annotate`, see
/// [`profile::fix_open_calls`]) and `callgrind/<name>.txt`: functions by own cost, then by
/// inclusive cost.
async fn keep(
    valgrind: &Valgrind,
    text: &str,
    name: &str,
    out_dir: &Path,
    top: &[TopFunction],
) -> Result<(PathBuf, PathBuf)> {
    let dir = out_dir.join("callgrind");
    tokio::fs::create_dir_all(&dir).await?;
    let dump = dir.join(format!("{name}.callgrind.out"));
    tokio::fs::write(&dump, profile::fix_open_calls(text)).await?;
    let (annotate, file) = (valgrind.annotate.clone(), dump.clone());
    let (own, inclusive) = tokio::task::spawn_blocking(move || {
        let run = |inclusive: &str| {
            let out = Command::new(&annotate)
                .args(["--auto=no", "--threshold=99", &format!("--inclusive={inclusive}")])
                .arg(&file)
                .output()
                .context("running callgrind_annotate")?;
            if !out.status.success() {
                bail!("callgrind_annotate failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            Ok(shorten(&String::from_utf8_lossy(&out.stdout)))
        };
        Ok::<_, anyhow::Error>((run("no")?, run("yes")?))
    })
    .await??;
    let annotated = dir.join(format!("{name}.txt"));
    let mut heading = format!(
        "# {name}: the proxy's instructions in one window of f (see benches/README.md).\n\
         # Open {} in kcachegrind for the call graph.\n\n\
         ## Own instructions per round trip, by function (its inlined code from every file summed)\n\n",
        dump.display()
    );
    for f in top {
        heading += &format!("{:>9.1}  {:>5.1} %  {}\n", f.per_round_trip, f.share * 100.0, f.function);
    }
    heading += "\n## By own cost (exclusive), callgrind_annotate\n\n";
    tokio::fs::write(&annotated, format!("{heading}{own}\n\n## By inclusive cost, callgrind_annotate\n\n{inclusive}"))
        .await?;
    Ok((dump, annotated))
}

/// Paths shortened for reading: the cargo registry's, rustc's and the workspace's prefixes go.
fn shorten(text: &str) -> String {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = format!("{}/", manifest.parent().unwrap_or(manifest).display());
    text.lines()
        .map(|line| {
            let mut line = line.replace(&workspace, "");
            for marker in ["/.cargo/registry/src/", "/rustc/"] {
                while let Some(at) = line.find(marker) {
                    let start = line[..at].rfind([' ', '\t']).map_or(0, |i| i + 1);
                    let after = at + marker.len();
                    let end = line[after..].find('/').map_or(line.len(), |i| after + i + 1);
                    line.replace_range(start..end, "");
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_record_is_always_measured() {
        let all = crate::scenario::resolve(
            &[],
            &[],
            crate::scenario::References { raw_pipe: true, haproxy: true, tls: false },
        )
        .expect("built-ins resolve");
        let names: Vec<String> = scenarios(&all).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["default", "no-record", "raw-pipe", "haproxy"]);
    }

    #[test]
    fn fewest_and_paths() {
        assert_eq!(fewest_index(&[3.0, 1.0, 2.0]), 1);
        assert_eq!(fewest_index(&[4.0, 1.0, 1.0, 3.0]), 1);
        let line =
            "  1,000 (3.1%)  /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tokio-1.54.1/src/io.rs:f [x]";
        assert_eq!(shorten(line), "  1,000 (3.1%)  tokio-1.54.1/src/io.rs:f [x]");
        assert_eq!(shorten("9 (1%)  /rustc/5980761/library/core/src/a.rs:g"), "9 (1%)  library/core/src/a.rs:g");
    }
}
