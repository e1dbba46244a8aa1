//! The table's rows: every scenario's figures against direct, and against HAProxy's on the
//! same leg (TCP or Unix socket) when HAProxy ran.

use serde::Serialize;

use super::{
    SideResult, TARGET_ADDED_P50_US, TARGET_ADDED_VS_PEER, TARGET_INSTRUCTIONS_VS_PEER, TARGET_QPS_VS_PEER,
    TARGET_RATIO,
};
use crate::instructions::InstructionCount;
use crate::options::{Plan, Workload};
use crate::scenario::{self, Leg, Program};

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

/// How a figure compares with HAProxy's in the same run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeerCompare {
    /// The HAProxy scenario compared with (`haproxy`, or `haproxy-unix` for a Unix leg).
    pub peer: String,
    /// For latency the added µs over HAProxy's added µs; otherwise this figure over
    /// HAProxy's. `None` when HAProxy added nothing measurable (the ratio means nothing).
    pub ratio: Option<f64>,
    pub target: Option<String>,
    pub met: Option<bool>,
}

/// One line of the table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// `a.p50`, `a.p99`, `b`, `c`, `d` or `f`.
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
    /// Against HAProxy, when it ran (not on HAProxy's own rows or direct's).
    pub versus_peer: Option<PeerCompare>,
}

/// The table's rows for every scenario against `direct` and against HAProxy, for the
/// workloads that ran; f's rows from `instructions`.
pub fn rows(plan: &Plan, direct: &SideResult, scenarios: &[SideResult], instructions: &[InstructionCount]) -> Vec<Row> {
    let mut rows = Vec::new();
    // TLS into MariaDB is compared with TLS straight to it, when a `--tls` run has that side;
    // `direct-tls` itself with plain direct (what TLS costs without a relay).
    let direct_tls = scenarios.iter().find(|s| s.program == Program::Direct && s.leg == Leg::Tcp && s.client_tls);
    for s in scenarios {
        let reference = match direct_tls {
            Some(d) if s.server_tls && s.name != d.name => d,
            _ => direct,
        };
        side_rows(plan, reference, s, &mut rows);
    }
    for count in instructions {
        rows.push(instruction_row(count));
    }
    let kinds: Vec<Kind<'_>> = scenarios
        .iter()
        .map(|s| Kind { name: &s.name, program: s.program, leg: s.leg, server_tls: s.server_tls })
        .chain(instructions.iter().map(|c| Kind {
            name: &c.scenario,
            program: c.program,
            leg: c.leg,
            server_tls: false,
        }))
        .collect();
    let versus: Vec<Option<PeerCompare>> = rows.iter().map(|row| versus_peer(row, &rows, &kinds)).collect();
    for (row, versus) in rows.iter_mut().zip(versus) {
        row.versus_peer = versus;
    }
    // By workload, then scenario (the sort is stable): what is compared sits together.
    const ORDER: [&str; 6] = ["a.p50", "a.p99", "b", "c", "d", "f"];
    rows.sort_by_key(|r| ORDER.iter().position(|id| *id == r.id));
    rows
}

/// What the target column says for a side that is not rttscope.
fn reference_label(program: Program) -> &'static str {
    match program {
        Program::Haproxy => "(peer)",
        Program::Direct => "(reference)",
        Program::Rttscope | Program::RawPipe => "(baseline)",
    }
}

fn side_rows(plan: &Plan, direct: &SideResult, s: &SideResult, rows: &mut Vec<Row>) {
    let rttscope = s.program.is_rttscope();
    let target = |t: String| Some(if rttscope { t } else { reference_label(s.program).to_owned() });
    let met = |m: bool| rttscope.then_some(m);
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
        versus_peer: None,
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
        let metric = format!("c. {} MB result set", super::trim_number(plan.large_bytes as f64 / 1e6));
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

/// f's row: its target is against HAProxy's count in the same run ([`versus_peer`]).
fn instruction_row(c: &InstructionCount) -> Row {
    let (target, met) = match c.program {
        Program::Rttscope => (None, None),
        other => (Some(reference_label(other).to_owned()), None),
    };
    Row {
        id: "f",
        workload: Workload::Instructions.letter(),
        metric: "f. proxy instructions per round trip (callgrind)".into(),
        scenario: c.scenario.clone(),
        unit: "instructions",
        direct: None,
        proxy: c.per_round_trip,
        compare: Compare::None,
        target,
        met,
        versus_peer: None,
    }
}

/// What a row's side is, for finding its peer.
struct Kind<'a> {
    name: &'a str,
    program: Program,
    leg: Leg,
    server_tls: bool,
}

/// `row` against HAProxy's row of the same workload on the same leg, with TLS into MariaDB
/// or not as the row's side (`haproxy-tls` carries its client's TLS).
fn versus_peer(row: &Row, rows: &[Row], kinds: &[Kind<'_>]) -> Option<PeerCompare> {
    let side = kinds.iter().find(|k| k.name == row.scenario)?;
    let (program, leg) = (side.program, side.leg);
    if matches!(program, Program::Haproxy | Program::Direct) {
        return None;
    }
    let peer =
        kinds.iter().find(|k| k.program == Program::Haproxy && k.leg == leg && k.server_tls == side.server_tls)?.name;
    let peer_row = rows.iter().find(|r| r.id == row.id && r.scenario == peer)?;
    let ratio = match (row.compare, peer_row.compare) {
        // Added latency over added latency; HAProxy adding nothing leaves no ratio.
        (Compare::Added(mine), Compare::Added(theirs)) => (theirs > 0.0).then(|| mine / theirs),
        _ => (peer_row.proxy > 0.0).then(|| row.proxy / peer_row.proxy),
    };
    let (target, met) = match (program.is_rttscope(), row.id) {
        (true, "a.p50") => (Some(format!("≤ {TARGET_ADDED_VS_PEER:.2}×")), ratio.map(|r| r <= TARGET_ADDED_VS_PEER)),
        (true, "b") => (Some(format!("≥ {TARGET_QPS_VS_PEER:.2}×")), ratio.map(|r| r >= TARGET_QPS_VS_PEER)),
        // The target is rttscope's with recording on: `no-record` has none.
        (true, "f") if row.scenario != scenario::NO_RECORD => {
            (Some(format!("≤ {TARGET_INSTRUCTIONS_VS_PEER:.2}×")), ratio.map(|r| r <= TARGET_INSTRUCTIONS_VS_PEER))
        }
        _ => (None, None),
    };
    Some(PeerCompare { peer: peer.to_owned(), ratio, target, met })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;
    use crate::report::{LargeSample, PointSample, SideResult};
    use crate::stats::Latency;

    fn side(name: &str, program: Program, leg: Leg, p50: f64, qps: f64) -> SideResult {
        let mut s = SideResult::new(name, program, leg);
        s.large_runs = vec![LargeSample { megabytes: 100.0, seconds: 100.0 / p50, mb_per_second: p50 }];
        s.sequential = Some(Latency { count: 1, p50_us: p50, p99_us: p50 * 2.0, ..Latency::default() });
        s.point_runs = vec![PointSample {
            queries: qps as u64,
            seconds: 1.0,
            per_second: qps,
            proxy_cpu_seconds: Some(0.5),
            proxy_idle_poll: None,
        }];
        s
    }

    #[test]
    fn against_haproxy_on_the_same_leg() -> anyhow::Result<()> {
        let plan = Options { only: vec!["a".into(), "b".into()], ..Options::quick() }.plan()?;
        let direct = side("direct", Program::Direct, Leg::Tcp, 60.0, 70_000.0);
        let scenarios = [
            side("default", Program::Rttscope, Leg::Tcp, 90.0, 50_000.0),
            side("haproxy", Program::Haproxy, Leg::Tcp, 100.0, 40_000.0),
            side("raw-pipe", Program::RawPipe, Leg::Tcp, 95.0, 45_000.0),
            side("unix", Program::Rttscope, Leg::Unix, 70.0, 60_000.0),
        ];
        let rows = rows(&plan, &direct, &scenarios, &[]);
        let find = |id: &str, s: &str| rows.iter().find(|r| r.id == id && r.scenario == s).expect("row");
        let a = find("a.p50", "default").versus_peer.clone().expect("vs HAProxy");
        assert_eq!(a.peer, "haproxy");
        assert_eq!(a.ratio, Some(0.75), "30 µs added against HAProxy's 40");
        assert_eq!((a.target.as_deref(), a.met), (Some("≤ 0.80×"), Some(true)));
        let b = find("b", "default").versus_peer.clone().expect("vs HAProxy");
        assert_eq!((b.ratio, b.met), (Some(1.25), Some(true)));
        let d = find("d", "default").versus_peer.clone().expect("vs HAProxy");
        assert_eq!((d.ratio, d.target), (Some(0.8), None), "the same CPU for 50k queries as HAProxy for 40k");
        assert!(find("a.p50", "haproxy").versus_peer.is_none());
        assert_eq!(find("a.p50", "haproxy").target.as_deref(), Some("(peer)"));
        let raw = find("b", "raw-pipe").versus_peer.clone().expect("the baseline is compared too");
        assert_eq!((raw.target, raw.met), (None, None));
        assert!(find("a.p50", "unix").versus_peer.is_none(), "no haproxy-unix ran");
        Ok(())
    }

    #[test]
    fn tls_into_mariadb_against_direct_tls_and_haproxy_tls() -> anyhow::Result<()> {
        let plan = Options { only: vec!["a".into(), "c".into()], tls: true, ..Options::quick() }.plan()?;
        let tls = |mut s: SideResult, client: bool, server: bool| {
            (s.client_tls, s.server_tls) = (client, server);
            s
        };
        let direct = side("direct", Program::Direct, Leg::Tcp, 60.0, 0.0);
        let scenarios = [
            tls(side("default", Program::Rttscope, Leg::Tcp, 110.0, 0.0), false, true),
            side("haproxy", Program::Haproxy, Leg::Tcp, 100.0, 0.0),
            tls(side("direct-tls", Program::Direct, Leg::Tcp, 70.0, 0.0), true, true),
            tls(side("upstream-tls", Program::Rttscope, Leg::Tcp, 105.0, 0.0), false, true),
            side("upstream-plain", Program::Rttscope, Leg::Tcp, 90.0, 0.0),
            tls(side("haproxy-tls", Program::Haproxy, Leg::Tcp, 110.0, 0.0), true, true),
        ];
        let rows = rows(&plan, &direct, &scenarios, &[]);
        let find = |id: &str, s: &str| rows.iter().find(|r| r.id == id && r.scenario == s).expect("row");
        let direct_tls = find("a.p50", "direct-tls");
        assert_eq!((direct_tls.direct, direct_tls.compare), (Some(60.0), Compare::Added(10.0)), "TLS's own cost");
        assert!(direct_tls.versus_peer.is_none());
        let upstream = find("a.p50", "upstream-tls");
        assert_eq!((upstream.direct, upstream.compare), (Some(70.0), Compare::Added(35.0)), "against direct-tls");
        let peer = upstream.versus_peer.clone().expect("vs HAProxy");
        assert_eq!((peer.peer.as_str(), peer.ratio), ("haproxy-tls", Some(35.0 / 40.0)));
        let c = find("c", "upstream-tls");
        assert_eq!((c.direct, c.compare), (Some(70.0), Compare::Ratio(1.5)));
        assert_eq!(find("a.p50", "default").versus_peer.clone().expect("vs HAProxy").peer, "haproxy-tls");
        let plain = find("a.p50", "upstream-plain");
        assert_eq!((plain.direct, plain.compare), (Some(60.0), Compare::Added(30.0)), "against plain direct");
        let peer = plain.versus_peer.clone().expect("vs HAProxy");
        assert_eq!((peer.peer.as_str(), peer.ratio), ("haproxy", Some(0.75)));
        assert_eq!(find("a.p50", "haproxy-tls").compare, Compare::Added(40.0));
        Ok(())
    }

    fn count(scenario: &str, program: Program, per_round_trip: f64) -> InstructionCount {
        InstructionCount {
            scenario: scenario.into(),
            program,
            leg: Leg::Tcp,
            proxy_config: String::new(),
            round_trips: 2_000,
            windows: vec![(per_round_trip * 2_000.0) as u64],
            window_seconds: vec![1.0],
            per_round_trip,
            median_per_round_trip: per_round_trip,
            max_per_round_trip: per_round_trip,
            idle: 0,
            top: Vec::new(),
            callgrind_out: None,
            annotated: None,
        }
    }

    /// f is held to HAProxy's count in the same run, recording on (issue 39).
    #[test]
    fn instructions_against_haproxys_in_the_same_run() -> anyhow::Result<()> {
        let plan = Options { only: vec!["f".into()], ..Options::quick() }.plan()?;
        let direct = side("direct", Program::Direct, Leg::Tcp, 60.0, 70_000.0);
        let counts = [
            count("default", Program::Rttscope, 8_090.0),
            count(scenario::NO_RECORD, Program::Rttscope, 5_831.0),
            count("haproxy", Program::Haproxy, 6_347.0),
        ];
        let rows = rows(&plan, &direct, &[], &counts);
        let find = |s: &str| rows.iter().find(|r| r.id == "f" && r.scenario == s).expect("row");
        let default = find("default").versus_peer.clone().expect("vs HAProxy");
        assert_eq!((default.target.as_deref(), default.met), (Some("≤ 1.00×"), Some(false)));
        assert!((default.ratio.unwrap_or_default() - 8_090.0 / 6_347.0).abs() < 1e-9);
        assert_eq!(find("default").target, None, "no fixed count");
        let off = find(scenario::NO_RECORD).versus_peer.clone().expect("compared too");
        assert_eq!((off.target, off.met), (None, None), "the target is recording on");
        Ok(())
    }
}
