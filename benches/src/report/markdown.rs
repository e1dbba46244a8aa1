//! The report as Markdown: a heading with the command and the machine, the table, notes on
//! how each workload was run and what the scenarios change; and number formatting.

use super::{Compare, PointSample, Report, TARGET_INSTRUCTIONS_VS_PEER};
use crate::scenario::{self, Leg, Program};

impl Report {
    /// Renders [`Report::markdown`] from the rest.
    pub fn render(&mut self) {
        let e = &self.environment;
        let mut md = format!("### rttscope vs direct — {}\n\n", self.started_utc);
        let load = |l: Option<f64>| l.map_or("?".to_owned(), |l| format!("{l:.2}"));
        let revision = e.git.as_deref().map_or(String::new(), |g| format!(" {g}"));
        let haproxy = e.haproxy.as_deref().map_or(String::new(), |v| format!(" · HAProxy {v}"));
        let valgrind = e.valgrind.as_deref().map_or(String::new(), |v| format!(" · valgrind {v}"));
        md += &format!(
            "`{}` · rttscope{revision} (`{}`) · MariaDB {} ({}){haproxy}{valgrind} · {} CPUs, load {} before, {} after\n\n",
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
        // The columns against HAProxy only when it ran.
        let peer = self.rows.iter().any(|r| r.versus_peer.is_some());
        md += "| workload | scenario | direct | through the proxy | proxy vs direct | target | met |";
        md += if peer { " vs HAProxy | target | met |\n" } else { "\n" };
        md += "|---|---|---:|---:|---:|---|:-:|";
        md += if peer { "---:|---|:-:|\n" } else { "\n" };
        let met = |m: Option<bool>| match m {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        for r in &self.rows {
            let compare = match r.compare {
                Compare::Added(v) => format!("{:+.1} {}", v, r.unit),
                Compare::Ratio(v) => format!("{:.1} %", v * 100.0),
                Compare::None => "—".into(),
            };
            let (versus, versus_target, versus_met) = match &r.versus_peer {
                Some(v) => (v.ratio.map_or("n/a".to_owned(), |x| format!("{x:.2}×")), v.target.as_deref(), v.met),
                None => ("—".to_owned(), None, None),
            };
            md += &format!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.metric,
                r.scenario,
                r.direct.map_or("—".to_owned(), |d| value(d, r.unit)),
                value(r.proxy, r.unit),
                compare,
                r.target.as_deref().unwrap_or("—"),
                met(r.met),
            );
            if peer {
                md += &format!(" {versus} | {} | {} |", versus_target.unwrap_or("—"), met(versus_met));
            }
            md.push('\n');
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
            notes.push(
                "d: the proxy's CPU time (user + system, all threads) over b's timed windows, per 100k queries.".into(),
            );
        }
        notes.extend(self.instruction_notes());
        notes.push(order.into());
        notes.extend(self.reference_notes());
        notes.extend(self.versus_default());
        notes.extend(self.round_spread_notes());
        notes.extend(self.idle_poll_notes());
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

    /// What the raw pipe, HAProxy, the Unix legs and the "vs HAProxy" column are.
    fn reference_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let ran = |program: Program| self.sides.iter().any(|side| side.program == program);
        if ran(Program::RawPipe) {
            notes.push(
                "raw-pipe is not rttscope but tokio's copy_bidirectional in a process of its own: what any \
                 userspace relay costs on this machine. rttscope's own cost is its gap to raw-pipe."
                    .into(),
            );
        }
        if ran(Program::Haproxy) {
            let threads = self.environment.cpus;
            notes.push(format!(
                "haproxy is HAProxy {} in `mode tcp` (nbthread {threads}, no health checks), the relay rttscope is \
                 judged against. vs HAProxy: for a, the µs rttscope adds over the µs HAProxy adds; for b and c, \
                 its q/s and MB/s over HAProxy's; for d and f, its CPU and instructions over HAProxy's \
                 (below 1× is better for a, d and f, above for b and c). Targets: added p50 ≤ {:.2}× HAProxy's, \
                 b ≥ {:.2}×.",
                self.environment.haproxy.as_deref().unwrap_or("?"),
                super::TARGET_ADDED_VS_PEER,
                super::TARGET_QPS_VS_PEER,
            ));
        }
        if self.sides.iter().any(|side| side.leg == Leg::Unix) {
            notes.push(format!(
                "{} takes clients on a Unix socket (`listen: unix:PATH`; its leg to MariaDB stays TCP), as does \
                 {} (`bind /PATH`); {} is MariaDB's own socket, the floor for that leg. \"direct\" is TCP for \
                 every row; compare the Unix rows with each other.",
                scenario::UNIX,
                scenario::HAPROXY_UNIX,
                scenario::DIRECT_UNIX
            ));
        }
        if self.sides.iter().any(|side| side.client_tls || side.server_tls) {
            notes.push(format!(
                "--tls: MariaDB speaks TLS (certificates generated for the run). {} is a TLS client straight to \
                 it; {} and {} are rttscope with plain clients and `upstream.tls.mode: required` and `disabled`; \
                 `default` uses TLS upstream too (`preferred`); {} is a TLS client through rttscope, which \
                 decrypts it and encrypts again into MariaDB; {} is a TLS client through HAProxy, which passes \
                 the TLS bytes on. Every side with TLS into MariaDB is compared with {} (its \"direct\"), the \
                 plain ones with plain direct, and each with the HAProxy side that, like it, has TLS into \
                 MariaDB or not. {} against direct is what TLS itself costs.",
                scenario::DIRECT_TLS,
                scenario::UPSTREAM_TLS,
                scenario::UPSTREAM_PLAIN,
                scenario::CLIENT_TLS,
                scenario::HAPROXY_TLS,
                scenario::DIRECT_TLS,
                scenario::DIRECT_TLS,
            ));
        }
        notes
    }

    /// How f was measured and how steady it was.
    fn instruction_notes(&self) -> Vec<String> {
        let counts = &self.instructions;
        if counts.is_empty() {
            return Vec::new();
        }
        let plan = &self.settings.instructions;
        let worst = counts.iter().map(|c| c.spread()).fold(0.0, f64::max);
        let medians = counts
            .iter()
            .map(|c| format!("{} {}", c.scenario, group(c.median_per_round_trip.round() as u64)))
            .collect::<Vec<_>>()
            .join(", ");
        let idle = counts.iter().map(|c| format!("{} {}", c.scenario, group(c.idle))).collect::<Vec<_>>().join(", ");
        let mut notes = vec![format!(
            "f: each proxy under `valgrind --tool=callgrind`: one connection, {} warm-up round trips, then {} \
             windows of {} sequential `SELECT 1` (counters zeroed before and dumped after each, through vgdb); \
             user-space instructions of all the proxy's threads / round trips, the fewest over the windows (a \
             window the machine slows counts more timer and wake-up work). Medians: {}. The windows of a \
             scenario differed by at most {:.2} % (max − min over min). Idle, over as long as the reported \
             window took: {} instructions in all. Target ≤ {:.2}× HAProxy's is rttscope's with recording on.",
            group(plan.warmup),
            plan.windows,
            group(plan.round_trips),
            medians,
            worst * 100.0,
            idle,
            TARGET_INSTRUCTIONS_VS_PEER,
        )];
        if let Some(c) = counts.iter().find(|c| c.program == Program::Rttscope)
            && !c.top.is_empty()
        {
            let top: Vec<String> = c
                .top
                .iter()
                .take(5)
                .map(|f| format!("`{}` {}", short_function(&f.function), group(f.per_round_trip.round() as u64)))
                .collect();
            notes.push(format!("f, {}: most own instructions per round trip in {}.", c.scenario, top.join(", ")));
        }
        let files: Vec<&str> = counts.iter().filter_map(|c| c.annotated.as_deref()).collect();
        if !files.is_empty() {
            notes.push(format!("f's profiles (callgrind_annotate, own and inclusive): {}.", files.join(", ")));
        }
        notes
    }

    /// What each further rttscope scenario changes against `default`, e.g. what sampling
    /// TCP_INFO every millisecond costs: the direct runs sit between them, so compare them
    /// with each other, not just each with direct.
    fn versus_default(&self) -> Vec<String> {
        let Some(default) = self.sides.iter().find(|s| s.name == scenario::BUILTIN[0].name) else {
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

impl Report {
    /// b's ratio against HAProxy round by round: how far one round's figure moves between
    /// rounds of the same build, which the mean's ratio in the table does not show.
    fn round_spread_notes(&self) -> Vec<String> {
        let mut spreads = Vec::new();
        for row in self.rows.iter().filter(|r| r.id == "b") {
            let Some(peer) = &row.versus_peer else { continue };
            let side = self.sides.iter().find(|s| s.name == row.scenario);
            let theirs = self.sides.iter().find(|s| s.name == peer.peer);
            let (Some(side), Some(theirs)) = (side, theirs) else { continue };
            if let Some((median, low, high, rounds)) = round_ratios(&side.point_runs, &theirs.point_runs) {
                spreads.push(format!(
                    "{} against {} median {median:.2}×, {low:.2}×–{high:.2}× over {rounds} rounds",
                    side.name, peer.peer
                ));
            }
        }
        if spreads.is_empty() {
            return Vec::new();
        }
        vec![format!("b round by round (each round's q/s over the peer's in that round): {}.", spreads.join("; "))]
    }

    /// What rttscope's polling before sleeping did during b: its share of the proxy's CPU
    /// (what it costs the machine) and how the idle moments went (what it bought).
    fn idle_poll_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for side in &self.sides {
            let Some(polled) = side.point_idle_poll() else { continue };
            let moments = polled.caught + polled.missed + polled.crowded + polled.unpaid;
            if moments == 0 || polled.cpu_seconds <= 0.0 {
                continue;
            }
            let share = |n: u64| n as f64 / moments as f64 * 100.0;
            notes.push(format!(
                "{} polled before sleeping for {:.2} s of its {:.2} s CPU over b's runs, warm-ups included ({:.0} %); of {} idle moments with the window open a poll caught work in {:.0} %, ran out in {:.0} %, {:.0} % were not polled because work was waiting for a CPU, {:.0} % because polling did not pay.",
                side.name,
                polled.seconds,
                polled.cpu_seconds,
                polled.seconds / polled.cpu_seconds * 100.0,
                group(moments),
                share(polled.caught),
                share(polled.missed),
                share(polled.crowded),
                share(polled.unpaid),
            ));
        }
        notes
    }
}

/// `rttscope::relay::pipe::HalfPipe::poll_step` → `HalfPipe::poll_step`: the last two
/// path segments, generics and all, for a note that fits on a line.
fn short_function(name: &str) -> String {
    let plain = name.split('<').next().unwrap_or(name);
    let segments: Vec<&str> = plain.split("::").collect();
    if name.contains('<') || segments.len() <= 2 {
        return name.to_owned();
    }
    segments[segments.len() - 2..].join("::")
}

fn value(v: f64, unit: &str) -> String {
    match unit {
        "q/s" => format!("{} q/s", group(v.round() as u64)),
        "MB/s" => format!("{v:.0} MB/s"),
        "s" => format!("{v:.3} s"),
        "instructions" => group(v.round() as u64),
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

/// The median, lowest and highest of `mine[i] / theirs[i]` over the rounds both ran (the
/// peer's with queries), and how many rounds that is; `None` for fewer than two (no spread
/// to show).
fn round_ratios(mine: &[PointSample], theirs: &[PointSample]) -> Option<(f64, f64, f64, usize)> {
    let ratios: Vec<f64> =
        mine.iter().zip(theirs).filter(|(_, t)| t.per_second > 0.0).map(|(m, t)| m.per_second / t.per_second).collect();
    if ratios.len() < 2 {
        return None;
    }
    let low = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let high = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((crate::stats::median(&ratios)?, low, high, ratios.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(per_second: &[f64]) -> Vec<PointSample> {
        per_second
            .iter()
            .map(|&q| PointSample {
                queries: q as u64,
                seconds: 1.0,
                per_second: q,
                proxy_cpu_seconds: None,
                proxy_idle_poll: None,
            })
            .collect()
    }

    #[test]
    fn round_by_round_ratios() {
        let mine = rounds(&[90.0, 110.0, 100.0]);
        let theirs = rounds(&[100.0, 100.0, 125.0]);
        assert_eq!(round_ratios(&mine, &theirs), Some((0.9, 0.8, 1.1, 3)));
        let one_peer_round_empty = rounds(&[90.0, 0.0, 80.0]);
        assert_eq!(
            round_ratios(&mine, &one_peer_round_empty),
            Some((1.125, 1.0, 1.25, 2)),
            "an empty round is left out"
        );
        assert_eq!(round_ratios(&mine[..1], &theirs[..1]), None, "one round has no spread");
        assert_eq!(round_ratios(&mine, &rounds(&[0.0, 0.0, 0.0])), None);
    }

    #[test]
    fn formatting() {
        assert_eq!(group(20_000), "20,000");
        assert_eq!(group(999), "999");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(trim_number(100.0), "100");
        assert_eq!(trim_number(0.75), "0.75");
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_709_251_200 + 3_600 + 120), "2024-03-01 01:02 UTC");
        assert_eq!(short_function("rttscope::relay::pipe::HalfPipe::poll_step"), "HalfPipe::poll_step");
        assert_eq!(short_function("__memcpy_avx_unaligned_erms"), "__memcpy_avx_unaligned_erms");
        assert_eq!(value(16_123.4, "instructions"), "16,123");
    }
}
