//! What a run measured, per side, and the table made of it: Markdown for people and the
//! README, JSON (`schema_version` 1) for tools that compare runs.

use serde::Serialize;

use crate::accuracy::Accuracy;
use crate::options::{Plan, Workload};
use crate::stats::{Latency, mean, median};

/// Most rttscope may add to a round trip at p50.
pub const TARGET_ADDED_P50_US: f64 = 25.0;
/// Least share of direct throughput rttscope must keep (queries/s and MB/s).
pub const TARGET_RATIO: f64 = 0.90;

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
        }
    }
}

/// Raw results of one side: direct, or rttscope with one scenario's config.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SideResult {
    pub name: String,
    /// The scenario's extra YAML; `None` for direct.
    pub proxy_config: Option<String>,
    /// The raw-pipe baseline: shown for comparison, the targets are not its.
    pub baseline: bool,
    /// Environment variables the scenario gives the proxy.
    pub proxy_env: Vec<(String, String)>,
    pub sequential: Option<Latency>,
    pub point_runs: Vec<PointSample>,
    pub large_runs: Vec<LargeSample>,
    /// rttscope's peak resident memory over the whole run.
    pub peak_rss_kib: Option<u64>,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct PointSample {
    pub queries: u64,
    pub seconds: f64,
    pub per_second: f64,
    pub proxy_cpu_seconds: Option<f64>,
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

    /// Workload c: median MB/s.
    pub fn large_mbps(&self) -> Option<f64> {
        median(&self.large_runs.iter().map(|r| r.mb_per_second).collect::<Vec<_>>())
    }
}

/// How the proxy's figure compares with direct.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compare {
    /// proxy − direct, in the row's unit (latency).
    Added(f64),
    /// proxy / direct (throughput).
    Ratio(f64),
    None,
}

/// One line of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// `a.p50`, `a.p99`, `b`, `c` or `d`.
    pub id: &'static str,
    pub workload: &'static str,
    pub metric: String,
    pub scenario: String,
    pub unit: &'static str,
    pub direct: Option<f64>,
    pub proxy: f64,
    pub compare: Compare,
    pub target: Option<String>,
    pub met: Option<bool>,
}

/// The table's rows for every scenario against `direct`, for the workloads that ran.
pub fn rows(plan: &Plan, direct: &SideResult, scenarios: &[SideResult]) -> Vec<Row> {
    let mut rows = Vec::new();
    for s in scenarios {
        let target = |t: String| Some(if s.baseline { "(baseline)".to_owned() } else { t });
        let met = |m: bool| (!s.baseline).then_some(m);
        let row = |id, workload: Workload, metric: String, unit, direct: Option<f64>, proxy: f64| Row {
            id,
            workload: workload.letter(),
            metric,
            scenario: s.name.clone(),
            unit,
            direct,
            proxy,
            compare: Compare::None,
            target: None,
            met: None,
        };
        if let (Some(d), Some(p)) = (direct.sequential, s.sequential) {
            let added = p.p50_us - d.p50_us;
            rows.push(Row {
                compare: Compare::Added(added),
                target: target(format!("≤ +{TARGET_ADDED_P50_US} µs")),
                met: met(added <= TARGET_ADDED_P50_US),
                ..row("a.p50", Workload::Sequential, "a. sequential `SELECT 1`, p50".into(), "µs", Some(d.p50_us), p.p50_us)
            });
            rows.push(Row {
                compare: Compare::Added(p.p99_us - d.p99_us),
                ..row("a.p99", Workload::Sequential, "a. sequential `SELECT 1`, p99".into(), "µs", Some(d.p99_us), p.p99_us)
            });
        }
        // b and d come from the same runs: whenever one was asked for, both are shown.
        if plan.runs_point()
            && let (Some(d), Some(p)) = (direct.point_qps(), s.point_qps())
        {
            let ratio = p / d;
            let metric = format!("b. point selects, {} connections", plan.connections);
            rows.push(Row {
                compare: Compare::Ratio(ratio),
                target: target(format!("≥ {:.0} %", TARGET_RATIO * 100.0)),
                met: met(ratio >= TARGET_RATIO),
                ..row("b", Workload::Point, metric, "q/s", Some(d), p)
            });
        }
        if let (Some(d), Some(p)) = (direct.large_mbps(), s.large_mbps()) {
            let ratio = p / d;
            let metric = format!("c. {} MB result set", trim_number(plan.large_bytes as f64 / 1e6));
            rows.push(Row {
                compare: Compare::Ratio(ratio),
                target: target(format!("≥ {:.0} %", TARGET_RATIO * 100.0)),
                met: met(ratio >= TARGET_RATIO),
                ..row("c", Workload::Large, metric, "MB/s", Some(d), p)
            });
        }
        if plan.runs_point()
            && let Some(cpu) = s.cpu_per_100k()
        {
            rows.push(row("d", Workload::Cpu, "d. proxy CPU per 100k queries (during b)".into(), "s", None, cpu));
        }
    }
    // By workload, then scenario (the sort is stable): what is compared sits together.
    const ORDER: [&str; 5] = ["a.p50", "a.p99", "b", "c", "d"];
    rows.sort_by_key(|r| ORDER.iter().position(|id| *id == r.id));
    rows
}

impl Report {
    /// Renders [`Report::markdown`] from the rest.
    pub fn render(&mut self) {
        let e = &self.environment;
        let mut md = format!("### rttscope vs direct — {}\n\n", self.started_utc);
        let load = |l: Option<f64>| l.map_or("?".to_owned(), |l| format!("{l:.2}"));
        let revision = e.git.as_deref().map_or(String::new(), |g| format!(" {g}"));
        md += &format!(
            "`{}` · rttscope{revision} (`{}`) · MariaDB {} ({}) · {} CPUs, load {} before, {} after\n\n",
            self.command,
            e.rttscope_binary,
            e.server_version,
            e.server,
            e.cpus,
            load(e.load_before),
            load(e.load_after),
        );
        // Only e ran: its table is the whole report.
        if self.rows.is_empty() {
            if let Some(accuracy) = &self.accuracy {
                md += &accuracy.markdown;
            }
            self.markdown = md;
            return;
        }
        md += "| workload | scenario | direct | through the proxy | proxy vs direct | target | met |\n";
        md += "|---|---|---:|---:|---:|---|:-:|\n";
        for r in &self.rows {
            let compare = match r.compare {
                Compare::Added(v) => format!("{:+.1} {}", v, r.unit),
                Compare::Ratio(v) => format!("{:.1} %", v * 100.0),
                Compare::None => "—".into(),
            };
            let met = match r.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "",
            };
            md += &format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                r.metric,
                r.scenario,
                r.direct.map_or("—".to_owned(), |d| value(d, r.unit)),
                value(r.proxy, r.unit),
                compare,
                r.target.as_deref().unwrap_or("—"),
                met,
            );
        }
        md += &format!("\n{}\n", self.notes());
        if let Some(accuracy) = &self.accuracy {
            md += &format!("\n{}", accuracy.markdown);
        }
        self.markdown = md;
    }

    fn notes(&self) -> String {
        let s = &self.settings;
        let mut notes = Vec::new();
        let order = "Sides alternate in every round and batch (direct, rttscope, then rttscope, direct), so drift hits both alike.";
        if s.workloads.contains(&"a") {
            notes.push(format!(
                "a: {} round trips per side on one connection (text protocol) after {} warm-up, in {} batches interleaved with the other sides.",
                group(s.round_trips),
                group(s.warmup),
                s.sequential_batches
            ));
        }
        if s.workloads.iter().any(|w| *w == "b" || *w == "d") {
            notes.push(format!(
                "b: prepared `SELECT c FROM sbtest WHERE id = ?` over {} rows, {} connections, mean of {} × {} s per side.",
                group(s.table_rows),
                s.connections,
                s.rounds,
                trim_number(s.point_seconds)
            ));
        }
        if s.workloads.contains(&"c") {
            notes.push(format!(
                "c: `SELECT REPEAT('x', {}) FROM seq_1_to_N`, {} MB of cells, median of {} per side.",
                s.large_row_len,
                trim_number(s.large_mb),
                s.large_runs
            ));
        }
        if s.workloads.iter().any(|w| *w == "b" || *w == "d") {
            notes.push("d: the proxy's CPU time (user + system, all threads) over b's timed windows, per 100k queries.".into());
        }
        notes.push(order.into());
        if self.sides.iter().any(|side| side.baseline) {
            notes.push(
                "raw-pipe is not rttscope but tokio's copy_bidirectional in a process of its own: what any \
                 userspace relay costs on this machine. rttscope's own cost is its gap to raw-pipe."
                    .into(),
            );
        }
        notes.extend(self.versus_default());
        let rss: Vec<String> = self
            .sides
            .iter()
            .filter_map(|side| side.peak_rss_kib.map(|kib| format!("{} {:.1} MiB", side.name, kib as f64 / 1024.0)))
            .collect();
        if !rss.is_empty() {
            notes.push(format!("Proxy peak RSS: {}.", rss.join(", ")));
        }
        if s.quick {
            notes.push("**--quick run: a smoke test, not a measurement.**".into());
        }
        notes.join("\n")
    }
}

impl Report {
    /// What each further rttscope scenario changes against `default`, e.g. what sampling
    /// TCP_INFO every millisecond costs: the direct runs sit between them, so compare them
    /// with each other, not just each with direct.
    fn versus_default(&self) -> Vec<String> {
        let Some(default) = self.sides.iter().find(|s| s.name == crate::scenario::BUILTIN[0].name) else {
            return Vec::new();
        };
        let change = |p: Option<f64>, d: Option<f64>| match (p, d) {
            (Some(p), Some(d)) if d > 0.0 => Some((p / d - 1.0) * 100.0),
            _ => None,
        };
        let mut notes = Vec::new();
        for s in self.sides.iter().skip(1).filter(|s| !s.baseline && s.name != default.name) {
            let mut parts = Vec::new();
            if let (Some(p), Some(d)) = (s.sequential, default.sequential) {
                parts.push(format!("a p50 {:+.1} µs", p.p50_us - d.p50_us));
            }
            if let Some(c) = change(s.point_qps(), default.point_qps()) {
                parts.push(format!("b {c:+.1} % q/s"));
            }
            if let Some(c) = change(s.large_mbps(), default.large_mbps()) {
                parts.push(format!("c {c:+.1} % MB/s"));
            }
            if let Some(c) = change(s.cpu_per_100k(), default.cpu_per_100k()) {
                parts.push(format!("d {c:+.1} % CPU per query"));
            }
            if !parts.is_empty() {
                notes.push(format!("{} vs default: {}.", s.name, parts.join(", ")));
            }
        }
        notes
    }
}

fn value(v: f64, unit: &str) -> String {
    match unit {
        "q/s" => format!("{} q/s", group(v.round() as u64)),
        "MB/s" => format!("{v:.0} MB/s"),
        "s" => format!("{v:.3} s"),
        _ => format!("{v:.1} {unit}"),
    }
}

/// 20000 → "20,000".
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// 100.0 → "100", 0.75 → "0.75".
pub fn trim_number(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `YYYY-MM-DD HH:MM UTC` for seconds since the epoch (no time-zone database needed).
pub fn utc(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let secs = unix_seconds % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", secs / 3600, secs % 3600 / 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting() {
        assert_eq!(group(20_000), "20,000");
        assert_eq!(group(999), "999");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(trim_number(100.0), "100");
        assert_eq!(trim_number(0.75), "0.75");
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_709_251_200 + 3_600 + 120), "2024-03-01 01:02 UTC");
    }
}
