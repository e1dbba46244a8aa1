//! CPU per query at the rates a sidecar sees, rttscope against HAProxy in the same run
//! (`scripts/bench.sh --cpu`): one connection paced at 100, 1,000 and 10,000 queries a second,
//! eight connections as fast as they go, and the same behind an upstream 2 ms away. Each
//! proxy's own CPU time (user and system, from `/proc`) over the measured window is divided by
//! the queries it carried; the proxies take turns, forwards then backwards (ABBA), so a drift
//! in the machine's speed weighs on both alike.
//!
//! The far upstream is another rttscope in front of MariaDB with `inject.rtt: 2ms`: both
//! proxies under test forward to it, and its own CPU is not counted.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use rttscope_integration_tests::mariadb::{NATIVE, TestDb};
use serde::Serialize;

use crate::child::{Endpoint, IdlePoll, Programs, ProxyChild, resolve_binary};
use crate::scenario::{self, Scenario};
use crate::workload::fixtures::{self, TABLE};
use crate::workload::point;
use crate::{haproxy, matrix};

/// Rows of the table the queries select from.
const ROWS: u64 = 10_000;
/// Unmeasured queries on a connection before its window.
const WARMUP: u64 = 200;
/// Turns each proxy takes at each case.
const ROUNDS: u32 = 2;

/// How the queries come.
#[derive(Clone, Copy, Debug, Serialize)]
pub enum Load {
    /// One connection, a query every 1/rate s on an absolute schedule (a late one goes at once).
    Paced { rate: u32 },
    /// Connections sending the next query as soon as the last is answered.
    Saturating { connections: usize },
}

/// One row of the table.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Case {
    pub load: Load,
    /// Behind the upstream 2 ms away.
    pub far: bool,
    /// Each proxy's measured window per turn.
    pub seconds: u64,
}

impl Case {
    fn name(&self) -> String {
        let load = match self.load {
            Load::Paced { rate } => format!("1 connection, {rate} q/s"),
            Load::Saturating { connections } => format!("{connections} connections, saturating"),
        };
        if self.far { format!("{load}, upstream 2 ms away") } else { load }
    }
}

/// The cases of issue 39's third item.
pub fn cases(quick: bool) -> Vec<Case> {
    let s = |full: u64| if quick { full.div_ceil(5) } else { full };
    vec![
        Case { load: Load::Paced { rate: 100 }, far: false, seconds: s(10) },
        Case { load: Load::Paced { rate: 1_000 }, far: false, seconds: s(5) },
        Case { load: Load::Paced { rate: 10_000 }, far: false, seconds: s(3) },
        Case { load: Load::Saturating { connections: 8 }, far: false, seconds: s(5) },
        Case { load: Load::Paced { rate: 100 }, far: true, seconds: s(10) },
        Case { load: Load::Saturating { connections: 8 }, far: true, seconds: s(5) },
    ]
}

/// What one proxy did over all its turns at one case.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Measured {
    pub queries: u64,
    pub seconds: f64,
    pub cpu_seconds: f64,
    /// CPU time the hypervisor gave other guests while this machine's vCPUs wanted to run
    /// (`/proc/stat`'s steal, all CPUs), over the turns.
    pub stolen_seconds: f64,
    /// `/proc/stat` could not be read at some turn: `stolen_seconds` is short.
    pub steal_unread: bool,
}

impl Measured {
    fn add(&mut self, queries: u64, elapsed: Duration, cpu: Duration, stolen: Option<Duration>) {
        self.queries += queries;
        self.seconds += elapsed.as_secs_f64();
        self.cpu_seconds += cpu.as_secs_f64();
        match stolen {
            Some(stolen) => self.stolen_seconds += stolen.as_secs_f64(),
            None => self.steal_unread = true,
        }
    }

    /// The share of the machine's CPU time stolen by the host over the turns, in percent.
    pub fn stolen_percent(&self) -> Option<f64> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        (!self.steal_unread).then(|| 100.0 * self.stolen_seconds / (self.seconds * cpus).max(f64::MIN_POSITIVE))
    }

    /// µs of the proxy's CPU per query.
    pub fn cpu_us_per_query(&self) -> f64 {
        1e6 * self.cpu_seconds / self.queries.max(1) as f64
    }

    pub fn per_second(&self) -> f64 {
        self.queries as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }
}

/// A case's figures for both proxies.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub case: Case,
    pub rttscope: Measured,
    pub haproxy: Measured,
    /// What rttscope's polling before sleeping did over its turns (`relay.idle_poll`).
    pub idle_poll: IdlePoll,
}

/// The run's results and the conditions they were measured in.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The scenario rttscope ran as.
    pub scenario: String,
    pub rows: Vec<Row>,
    pub load_before: Option<f64>,
    pub load_after: Option<f64>,
}

/// Runs every case against the shared test database, the release rttscope as the built-in
/// `scenario` says, and HAProxy.
pub fn run(cases: &[Case], scenario: &str) -> Result<Outcome> {
    let Some(ours) = scenario::builtin(scenario).filter(|s| s.program == scenario::Program::Rttscope) else {
        anyhow::bail!(
            "--scenario {scenario:?}: not a built-in rttscope scenario (try rttscope-bench --list-scenarios)"
        );
    };
    let load_before = matrix::load_average();
    let programs = Programs { rttscope: resolve_binary(None)?, haproxy: Some(haproxy::find(None)?), client_cert: None };
    let db = TestDb::shared();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(fixtures::prepare(&db.opts(NATIVE.user, NATIVE.password), Some(ROWS)))?;
    let far = ProxyChild::start(&programs, db.upstream_addr(), &Scenario::rttscope("far", "inject:\n  rtt: 2ms\n"))
        .context("starting the far upstream (rttscope with inject.rtt 2ms)")?;
    let Endpoint::Tcp(far_addr) = *far.endpoint() else { anyhow::bail!("the far upstream listens on TCP") };
    let mut rows = Vec::new();
    for (upstream, is_far) in [(db.upstream_addr(), false), (far_addr, true)] {
        let proxies = [Some(ours.clone()), scenario::builtin(scenario::HAPROXY)]
            .map(|s| s.context("a built-in scenario").and_then(|s| ProxyChild::start(&programs, upstream, &s)));
        let [rttscope, haproxy] = proxies;
        let (rttscope, haproxy) = (rttscope?, haproxy?);
        for case in cases.iter().filter(|c| c.far == is_far) {
            eprintln!("cpu: {}", case.name());
            let mut measured = [Measured::default(); 2];
            let mut idle_poll = IdlePoll::default();
            for round in 0..ROUNDS {
                let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
                for i in order {
                    let proxy = [&rttscope, &haproxy][i];
                    let opts = proxy.endpoint().opts(db);
                    let before = runtime.block_on(proxy.idle_poll())?;
                    let stolen_before = stolen();
                    let (queries, elapsed, cpu) = turn(&runtime, opts, case, &|| proxy.cpu_time())?;
                    let stolen = stolen_before.zip(stolen()).map(|(before, after)| after.saturating_sub(before));
                    measured[i].add(queries, elapsed, cpu, stolen);
                    if let (Some(before), Some(after)) = (before, runtime.block_on(proxy.idle_poll())?) {
                        idle_poll = idle_poll + after.since(before);
                    }
                }
            }
            rows.push(Row { case: *case, rttscope: measured[0], haproxy: measured[1], idle_poll });
        }
    }
    Ok(Outcome { scenario: scenario.to_owned(), rows, load_before, load_after: matrix::load_average() })
}

/// CPU time the hypervisor has stolen from this machine since boot, all CPUs (`/proc/stat`'s
/// eighth `cpu` field, in clock ticks of 1/100 s): on a virtual machine whose host is busy,
/// time a vCPU wanted to run and did not, which slows whichever proxy's turn it falls in.
fn stolen() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: u64 = stat.lines().next()?.split_whitespace().nth(8)?.parse().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// One proxy's turn at `case`: queries answered, the window, the proxy's CPU over it.
fn turn(
    runtime: &tokio::runtime::Runtime,
    opts: OptsBuilder,
    case: &Case,
    clock: point::CpuClock<'_>,
) -> Result<(u64, Duration, Duration)> {
    let duration = Duration::from_secs(case.seconds);
    match case.load {
        Load::Paced { rate } => paced(opts, rate, duration, clock),
        Load::Saturating { connections } => {
            let run = runtime.block_on(point::run(&opts, "cpu", connections, ROWS, duration, Some(clock)))?;
            Ok((run.queries, run.elapsed, run.cpu.unwrap_or_default()))
        }
    }
}

/// One connection, prepared point selects at `rate` a second for `duration`: on a runtime of
/// its own in this thread, which sleeps between queries (the timer wheel's millisecond would
/// bunch 10,000 a second into bursts).
fn paced(
    opts: OptsBuilder,
    rate: u32,
    duration: Duration,
    clock: point::CpuClock<'_>,
) -> Result<(u64, Duration, Duration)> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let mut conn = Conn::new(opts).await.context("connecting")?;
        let stmt = conn.prep(format!("SELECT c FROM {TABLE} WHERE id = ?")).await?;
        for i in 0..WARMUP {
            let _: Option<String> = conn.exec_first(&stmt, (i % ROWS + 1,)).await?;
        }
        let count = u64::from(rate) * duration.as_secs();
        let interval = Duration::from_secs(1) / rate;
        let before = clock()?;
        let start = Instant::now();
        for i in 0..count {
            let due = start + interval * u32::try_from(i).unwrap_or(u32::MAX);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let _: Option<String> = conn.exec_first(&stmt, (i * 7_919 % ROWS + 1,)).await?;
        }
        let elapsed = start.elapsed();
        let cpu = clock()?.saturating_sub(before);
        conn.disconnect().await?;
        Ok((count, elapsed, cpu))
    })
}

/// The table: per case, each proxy's CPU per query and rate, and rttscope's CPU against HAProxy's.
pub fn markdown(outcome: &Outcome) -> String {
    let mut out = String::from(
        "| case | rttscope CPU per query | HAProxy CPU per query | rttscope / HAProxy | queries/s (rttscope, HAProxy) | CPU stolen by the host (rttscope's turns, HAProxy's) |\n\
         |---|---:|---:|---:|---:|---:|\n",
    );
    for row in &outcome.rows {
        let (r, h) = (row.rttscope.cpu_us_per_query(), row.haproxy.cpu_us_per_query());
        let ratio = r / h.max(f64::MIN_POSITIVE);
        let shown = if ratio <= 1.0 { format!("{ratio:.2}×") } else { format!("**{ratio:.2}×**") };
        let stolen_share = |m: &Measured| m.stolen_percent().map_or_else(|| "?".to_owned(), |p| format!("{p:.0} %"));
        out.push_str(&format!(
            "| {} | {r:.1} µs | {h:.1} µs | {shown} | {:.0}, {:.0} | {}, {} |\n",
            row.case.name(),
            row.rttscope.per_second(),
            row.haproxy.per_second(),
            stolen_share(&row.rttscope),
            stolen_share(&row.haproxy)
        ));
    }
    out.push_str(&idle_poll_table(outcome));
    let load = |l: Option<f64>| l.map_or_else(|| "?".to_owned(), |l| format!("{l:.2}"));
    out.push_str(&format!(
        "\nrttscope as scenario `{}`. Load average {} before, {} after.\n",
        outcome.scenario,
        load(outcome.load_before),
        load(outcome.load_after)
    ));
    out
}

/// rttscope's polling before sleeping per case (`relay.idle_poll`): what it cost a query, and
/// how the idle moments with a window open went, over whole turns: the CPU figures leave the
/// warm-up out, these cannot (per query, over the measured queries). Counts reach `/metrics`
/// when a connection thread next sleeps, so a turn's last few may fall in the next turn.
fn idle_poll_table(outcome: &Outcome) -> String {
    let mut out = String::from(
        "\nrttscope's polling before sleeping over its turns, warm-ups included (idle moments with a window open):\n\n\
         | case | polling per query | caught | ran out | crowded | unpaid |\n\
         |---|---:|---:|---:|---:|---:|\n",
    );
    for row in &outcome.rows {
        let p = row.idle_poll;
        out.push_str(&format!(
            "| {} | {:.1} µs | {} | {} | {} | {} |\n",
            row.case.name(),
            1e6 * p.seconds / row.rttscope.queries.max(1) as f64,
            p.caught,
            p.missed,
            p.crowded,
            p.unpaid
        ));
    }
    out
}
