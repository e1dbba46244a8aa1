//! What a run measured, per side, and the table made of it: Markdown for people and the
//! user guide (docs/benchmarks.md), JSON (`schema_version` 1) for tools that compare runs.
//!
//! - [`rows`]: the table's rows, each scenario against direct and against HAProxy;
//! - [`markdown`]: the table, its heading and notes, and number formatting.

pub mod markdown;
pub mod rows;

use serde::Serialize;

pub use markdown::{group, trim_number, utc};
pub use rows::{Compare, PeerCompare, Row, rows};

use crate::accuracy::Accuracy;
use crate::instructions::{InstructionCount, InstructionPlan};
use crate::options::Plan;
use crate::scenario::{Leg, Program};
use crate::stats::{Latency, mean, median};

/// Most rttscope may add to a round trip at p50.
pub const TARGET_ADDED_P50_US: f64 = 25.0;
/// Least share of direct throughput rttscope must keep (queries/s and MB/s).
pub const TARGET_RATIO: f64 = 0.90;
/// Most rttscope's added p50 may be, as a multiple of HAProxy's added p50.
pub const TARGET_ADDED_VS_PEER: f64 = 0.80;
/// Least rttscope's queries/s in b may be, as a multiple of HAProxy's.
pub const TARGET_QPS_VS_PEER: f64 = 1.00;
/// Most user-space instructions rttscope may execute per round trip (f), recording on, as a
/// multiple of HAProxy's in the same run (issue 39).
pub const TARGET_INSTRUCTIONS_VS_PEER: f64 = 1.00;

/// Everything one run produced.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub started_utc: String,
    /// The command line that produced it.
    pub command: String,
    pub environment: Environment,
    pub settings: Settings,
    /// The table's rows, in order.
    pub rows: Vec<Row>,
    /// Raw results of each side: `direct` first, then each scenario.
    pub sides: Vec<SideResult>,
    /// f, when it ran: instructions per round trip of each proxy under callgrind.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instructions: Vec<InstructionCount>,
    /// e, when it ran: the emulated link's probes and their table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<Accuracy>,
    /// The table with its heading and notes.
    #[serde(skip)]
    pub markdown: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Environment {
    pub cpus: usize,
    /// 1-minute load average before and after: high values mean other work shared the CPUs.
    pub load_before: Option<f64>,
    pub load_after: Option<f64>,
    pub server_version: String,
    /// `private` (started by the bench) or `RTTSCOPE_TEST_MYSQL_URL`.
    pub server: String,
    pub rttscope_binary: String,
    pub git: Option<String>,
    /// HAProxy's version, when it ran (`haproxy -v`).
    pub haproxy: Option<String>,
    /// valgrind's version, when f ran.
    pub valgrind: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    pub quick: bool,
    pub workloads: Vec<&'static str>,
    pub rounds: u32,
    pub round_trips: u64,
    pub warmup: u64,
    pub sequential_batches: u64,
    pub point_seconds: f64,
    pub connections: usize,
    pub table_rows: u64,
    pub large_mb: f64,
    pub large_row_len: u64,
    pub large_runs: u32,
    /// f's round trips per window, windows and warm-up.
    pub instructions: InstructionPlan,
}

impl Settings {
    pub fn of(plan: &Plan) -> Settings {
        Settings {
            quick: plan.quick,
            workloads: plan.workloads.iter().map(|w| w.letter()).collect(),
            rounds: plan.rounds,
            round_trips: plan.round_trips,
            warmup: plan.warmup,
            sequential_batches: plan.sequential_batches(),
            point_seconds: plan.point_duration.as_secs_f64(),
            connections: plan.connections,
            table_rows: plan.table_rows,
            large_mb: plan.large_bytes as f64 / 1e6,
            large_row_len: plan.large_row_len,
            large_runs: plan.large_runs,
            instructions: plan.instructions,
        }
    }
}

/// Raw results of one side: direct, or one scenario (rttscope with some config, the raw
/// pipe, HAProxy, MariaDB's own socket).
#[derive(Clone, Debug, Serialize)]
pub struct SideResult {
    pub name: String,
    pub program: Program,
    /// How clients reached it.
    pub leg: Leg,
    /// The client spoke TLS on its leg (`--tls` runs only).
    pub client_tls: bool,
    /// The bytes into MariaDB were TLS, the client's own or rttscope's long hop (`--tls`
    /// runs only). Such a side is compared with `direct-tls`, not with plain direct.
    pub server_tls: bool,
    /// The scenario's extra YAML; `None` for direct.
    pub proxy_config: Option<String>,
    /// Not rttscope (the raw pipe, HAProxy, MariaDB's socket): shown for comparison, the
    /// targets are not its.
    pub baseline: bool,
    /// Environment variables the scenario gives the proxy.
    pub proxy_env: Vec<(String, String)>,
    pub sequential: Option<Latency>,
    pub point_runs: Vec<PointSample>,
    pub large_runs: Vec<LargeSample>,
    /// The proxy's peak resident memory over the whole run.
    pub peak_rss_kib: Option<u64>,
}

impl SideResult {
    /// A side with nothing measured yet.
    pub fn new(name: &str, program: Program, leg: Leg) -> SideResult {
        SideResult {
            name: name.to_owned(),
            program,
            leg,
            client_tls: false,
            server_tls: false,
            proxy_config: None,
            baseline: !program.is_rttscope(),
            proxy_env: Vec::new(),
            sequential: None,
            point_runs: Vec::new(),
            large_runs: Vec::new(),
            peak_rss_kib: None,
        }
    }
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct PointSample {
    pub queries: u64,
    pub seconds: f64,
    pub per_second: f64,
    pub proxy_cpu_seconds: Option<f64>,
    /// rttscope's polling before sleeping over the run (its `/metrics`, before and after).
    pub proxy_idle_poll: Option<crate::child::IdlePoll>,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct LargeSample {
    pub megabytes: f64,
    pub seconds: f64,
    pub mb_per_second: f64,
}

impl SideResult {
    /// Workload b: mean queries/s over the rounds.
    pub fn point_qps(&self) -> Option<f64> {
        mean(&self.point_runs.iter().map(|r| r.per_second).collect::<Vec<_>>())
    }

    /// Workload d: proxy CPU seconds per 100k queries over all rounds of b.
    pub fn cpu_per_100k(&self) -> Option<f64> {
        let cpu: Option<f64> = self.point_runs.iter().map(|r| r.proxy_cpu_seconds).sum();
        let queries: u64 = self.point_runs.iter().map(|r| r.queries).sum();
        cpu.filter(|_| queries > 0).map(|cpu| cpu / queries as f64 * 1e5)
    }

    /// rttscope's polling before sleeping over all rounds of b.
    pub fn point_idle_poll(&self) -> Option<crate::child::IdlePoll> {
        self.point_runs.iter().map(|r| r.proxy_idle_poll).sum()
    }

    /// Workload c: median MB/s.
    pub fn large_mbps(&self) -> Option<f64> {
        median(&self.large_runs.iter().map(|r| r.mb_per_second).collect::<Vec<_>>())
    }
}
