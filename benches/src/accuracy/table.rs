//! e's table: each probe's configured link, what it promises, what was measured, the error
//! and the tolerance. Appended to `latest.md` after the rttscope-vs-direct table, and kept in
//! `latest.json` as `accuracy.table`.

use serde::Serialize;

use super::{Accuracy, BANDWIDTH_BPS, LINK_RTT, WINDOW_BYTES};
use crate::report::{group, trim_number};

/// Round trips: the added p50 may be off by this much, or by [`RTT_TOLERANCE_SHARE`] of
/// the RTT if that is more.
pub const RTT_TOLERANCE_MS: f64 = 0.3;
pub const RTT_TOLERANCE_SHARE: f64 = 0.03;
/// The large result's time through a bandwidth limit.
pub const BANDWIDTH_TOLERANCE_SHARE: f64 = 0.05;
/// Throughput through a window.
pub const WINDOW_TOLERANCE_SHARE: f64 = 0.10;

/// Why Toxiproxy has no figures: said in the table rather than left out silently.
pub const TOXIPROXY_NOT_RUN: &str = "not run: no toxiproxy-server binary; build one with scripts/build-toxiproxy.sh \
     (v2.8.0 from source, Debian's Go) or pass --toxiproxy FILE";
/// Why Toxiproxy has no window figure.
pub const TOXIPROXY_NO_WINDOW: &str = "no toxic limits the bytes in flight per round trip";

/// One line of the second table.
#[derive(Clone, Debug, Serialize)]
pub struct AccuracyRow {
    /// `e.rtt_1ms`, `e.rtt_15ms`, `e.rtt_80ms`, `e.bandwidth`, `e.window`, then Toxiproxy's
    /// `e.toxiproxy.rtt_1ms` … `e.toxiproxy.window`, or `e.toxiproxy` alone when it did not run.
    pub id: String,
    /// `rttscope` or `toxiproxy`.
    pub tool: &'static str,
    pub probe: String,
    /// The emulated link's settings.
    pub configured: String,
    /// `ms` (added round trip), `s` (time), `MB/s` (10^6 bytes on the wire per second).
    pub unit: &'static str,
    pub expected: Option<f64>,
    pub measured: Option<f64>,
    /// measured − expected, in `unit`.
    pub error: Option<f64>,
    /// The error as a share of `expected`, in percent.
    pub error_percent: Option<f64>,
    /// How far off `measured` may be, either way, in `unit`.
    pub tolerance: Option<f64>,
    pub tolerance_text: String,
    /// `None` for a line that measured nothing.
    pub met: Option<bool>,
    pub note: Option<String>,
}

impl AccuracyRow {
    fn measured(
        id: String,
        probe: String,
        configured: String,
        unit: &'static str,
        expected: f64,
        measured: f64,
    ) -> AccuracyRow {
        let error = measured - expected;
        AccuracyRow {
            id,
            tool: RTTSCOPE,
            probe,
            configured,
            unit,
            expected: Some(expected),
            measured: Some(measured),
            error: Some(error),
            error_percent: Some(error / expected * 100.0),
            tolerance: None,
            tolerance_text: String::new(),
            met: None,
            note: None,
        }
    }

    fn within(mut self, tolerance: f64, text: String) -> AccuracyRow {
        self.met = self.error.map(|e| e.abs() <= tolerance);
        self.tolerance = Some(tolerance);
        self.tolerance_text = text;
        self
    }
}

const RTTSCOPE: &str = "rttscope";
const TOXIPROXY: &str = "toxiproxy";

/// The table's rows: rttscope's (one per configured RTT, then bandwidth and window), then
/// Toxiproxy's in the same order, or one line saying why it did not run.
pub fn rows(a: &Accuracy) -> Vec<AccuracyRow> {
    let mut rows = Vec::new();
    for p in &a.round_trips {
        let rtt = trim_number(p.rtt_ms);
        rows.push(round_trip_row("e", format!("rtt: {rtt}ms"), p.rtt_ms, p.latency.count, p.added_p50_ms));
    }
    let h = &a.beside_hog;
    let configured = format!("rtt: {}ms, beside {} busy loops", trim_number(h.rtt_ms), h.busy_loops);
    rows.push(round_trip_row("e.cpu_hog", configured, h.rtt_ms, h.latency.count, h.added_p50_ms));
    let rtt_ms = trim_number(LINK_RTT.as_secs_f64() * 1e3);
    let configured = format!("rtt: {rtt_ms}ms, bandwidth: {}mbit", BANDWIDTH_BPS / 1_000_000);
    rows.push(bandwidth_row("e", configured, a, &a.bandwidth.seconds, a.bandwidth.median_seconds));

    let expected = WINDOW_BYTES as f64 / LINK_RTT.as_secs_f64() / 1e6;
    let configured = format!("rtt: {rtt_ms}ms, window: {}KiB", WINDOW_BYTES / 1024);
    let measured = a.wire_bytes as f64 / a.window.median_seconds / 1e6;
    let probe = format!("{} MB result: throughput", trim_number(a.wire_bytes as f64 / 1e6));
    let row = AccuracyRow::measured("e.window".into(), probe.clone(), configured, "MB/s", expected, measured);
    let share = WINDOW_TOLERANCE_SHARE;
    rows.push(row.within(share * expected, format!("±{:.0} % (±{:.3} MB/s)", share * 100.0, share * expected)));

    let Some(t) = &a.toxiproxy else {
        rows.push(not_measured("e.toxiproxy", "the same probes".into(), "Toxiproxy".into(), TOXIPROXY_NOT_RUN));
        return rows;
    };
    let tool = |toxics: &str| format!("Toxiproxy {} `{toxics}`", t.version);
    for p in &t.round_trips {
        let mut row = round_trip_row("e.toxiproxy", tool(&p.toxics), p.rtt_ms, p.latency.count, p.added_p50_ms);
        row.tool = TOXIPROXY;
        rows.push(row);
    }
    let configured = tool(&t.bandwidth.proxy_config);
    let mut row = bandwidth_row("e.toxiproxy", configured, a, &t.bandwidth.seconds, t.bandwidth.median_seconds);
    row.tool = TOXIPROXY;
    rows.push(row);
    rows.push(not_measured("e.toxiproxy.window", probe, format!("Toxiproxy {}", t.version), TOXIPROXY_NO_WINDOW));
    rows
}

/// Probe 1's row for one configured RTT.
fn round_trip_row(prefix: &str, configured: String, rtt_ms: f64, count: u64, added_ms: f64) -> AccuracyRow {
    let tolerance = RTT_TOLERANCE_MS.max(RTT_TOLERANCE_SHARE * rtt_ms);
    let probe = format!("round trip added, p50 of {} `SELECT 1`", group(count));
    let id = format!("{prefix}.rtt_{}ms", trim_number(rtt_ms));
    let row = AccuracyRow::measured(id, probe, configured, "ms", rtt_ms, added_ms);
    row.within(tolerance, format!("±{tolerance:.2} ms (max of 0.3 ms, 3 %)"))
}

/// TCP's initial window (ten segments of 1,448 bytes), where slow start begins.
const INITIAL_WINDOW: f64 = 14_480.0;

/// What TCP's slow start adds to `bytes` at `rate` bytes/s over `rtt` seconds: each round
/// whose window, doubling from ten segments, is still below the pipe (rate × RTT), and is not
/// the transfer's last, takes a round trip rather than its bytes' time at the rate.
pub fn slow_start_seconds(bytes: f64, rate: f64, rtt: f64) -> f64 {
    let (mut window, mut sent, mut extra) = (INITIAL_WINDOW, 0.0, 0.0);
    while window < rate * rtt && sent + window < bytes {
        extra += rtt - window / rate;
        sent += window;
        window *= 2.0;
    }
    extra
}

/// Probe 2's row: the large result's time against wire bytes / bandwidth + RTT, and what
/// slow start adds.
fn bandwidth_row(prefix: &str, configured: String, a: &Accuracy, runs: &[f64], median_seconds: f64) -> AccuracyRow {
    let wire = a.wire_bytes as f64;
    let (rate, rtt) = (BANDWIDTH_BPS as f64 / 8.0, LINK_RTT.as_secs_f64());
    let expected = wire / rate + rtt + slow_start_seconds(wire, rate, rtt);
    let probe = format!("{} MB result: time (median of {})", trim_number(wire / 1e6), runs.len());
    let row = AccuracyRow::measured(format!("{prefix}.bandwidth"), probe, configured, "s", expected, median_seconds);
    let share = BANDWIDTH_TOLERANCE_SHARE;
    row.within(share * expected, format!("±{:.0} % (±{:.3} s)", share * 100.0, share * expected))
}

/// A Toxiproxy line without figures, and why.
fn not_measured(id: &str, probe: String, configured: String, why: &str) -> AccuracyRow {
    AccuracyRow {
        id: id.into(),
        tool: TOXIPROXY,
        probe,
        configured,
        unit: "",
        expected: None,
        measured: None,
        error: None,
        error_percent: None,
        tolerance: None,
        tolerance_text: String::new(),
        met: None,
        note: Some(why.into()),
    }
}

/// The second table, with its heading and notes.
pub fn markdown(a: &Accuracy) -> String {
    let mut md = String::from("### e. emulated link accuracy (`inject`): measured vs configured\n\n");
    md += "| probe | configured | expected | measured | error | tolerance | met |\n";
    md += "|---|---|---:|---:|---:|---|:-:|\n";
    for r in &a.table {
        let tool = if r.tool == RTTSCOPE { format!("rttscope `{}`", r.configured) } else { r.configured.clone() };
        let (Some(expected), Some(measured), Some(error), Some(percent)) =
            (r.expected, r.measured, r.error, r.error_percent)
        else {
            let note = r.note.as_deref().unwrap_or("");
            md += &format!("| {} | {tool} | — | — | — | — | {note} |\n", r.probe);
            continue;
        };
        let sign = if r.unit == "ms" { "+" } else { "" };
        let met = match r.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "",
        };
        md += &format!(
            "| {} | {tool} | {sign}{} | {sign}{} | {} ({}) | {} | {met} |\n",
            r.probe,
            value(expected, r.unit),
            value(measured, r.unit),
            signed(error, &value(error.abs(), r.unit)),
            signed(percent, &format!("{:.1} %", percent.abs())),
            r.tolerance_text,
        );
    }
    let b = &a.baseline;
    let batches = "the sides take turns in batches, so drift hits all alike";
    md += &format!(
        "\n- Round trips: added = p50 through the emulated link − p50 through rttscope without injection \
         ({:.1} µs, p99 {:.1} µs, over {} round trips); {batches}. Each direction is delayed by rtt/2.\n",
        b.p50_us,
        b.p99_us,
        group(b.count)
    );
    for p in &a.round_trips {
        md += &format!(
            "  `rtt: {}ms`: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms.\n",
            trim_number(p.rtt_ms),
            p.latency.p50_us / 1e3,
            p.latency.p99_us / 1e3,
            p.latency.max_us / 1e3
        );
    }
    let idle: Vec<String> = a
        .round_trips
        .iter()
        .map(|p| {
            let rtt = trim_number(p.rtt_ms);
            let error = p.added_vs_idle_ms - p.rtt_ms;
            format!(
                "{rtt} ms: idle p50 {:.1} µs, added {:.3} ms, error {}",
                p.idle_baseline.p50_us,
                p.added_vs_idle_ms,
                signed(error, &value(error.abs(), "ms"))
            )
        })
        .collect();
    md += &format!(
        "- Diagnosis: the same rttscope without injection, the client idle for the RTT before each round trip (so \
         client, proxy and server wake from idle, as they do on the emulated link): {}. The difference to the table is the \
         machine's wake-up cost after idling, which a real link's waits bring too.\n",
        idle.join("; ")
    );
    md += &format!(
        "- The large result is `SELECT REPEAT('x', {}) FROM seq_1_to_{}`, read fully by the client: {} bytes on the \
         wire as the proxy forwards them (MySQL packets: per row a 4-byte header, a 3-byte length prefix and the cell; \
         the ~60 bytes of result head and end left out). Without injection it takes {:.3} s through rttscope.\n",
        a.row_len,
        a.rows,
        group(a.wire_bytes),
        a.no_injection_seconds
    );
    md += &format!(
        "- Bandwidth: expected time = wire bytes / {} Mbit/s + RTT + what slow start adds ({:.3} s: the rounds \
         whose window, doubling from ten segments, is below the pipe take a round trip each); runs {}.\n",
        BANDWIDTH_BPS / 1_000_000,
        slow_start_seconds(a.wire_bytes as f64, BANDWIDTH_BPS as f64 / 8.0, LINK_RTT.as_secs_f64()),
        seconds_list(&a.bandwidth.seconds)
    );
    md += &format!(
        "- Window: throughput = wire bytes / time ({}); expected = {} B / {} ms.\n",
        seconds_list(&a.window.seconds),
        WINDOW_BYTES,
        trim_number(LINK_RTT.as_secs_f64() * 1e3)
    );
    if let Some(t) = &a.toxiproxy {
        let b = &t.baseline;
        md += &format!(
            "- Toxiproxy {}: one `toxiproxy-server`, a proxy per link, its round trips taking turns with rttscope's; \
             added = p50 through the toxic − p50 through a Toxiproxy proxy without toxics ({:.1} µs, p99 {:.1} µs). \
             Its `latency` toxic takes whole milliseconds, so the whole RTT is on the downstream side.\n",
            t.version, b.p50_us, b.p99_us
        );
        for p in &t.round_trips {
            md += &format!(
                "  `{}`: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms.\n",
                p.toxics,
                p.latency.p50_us / 1e3,
                p.latency.p99_us / 1e3,
                p.latency.max_us / 1e3
            );
        }
        md += &format!("  Bandwidth runs {}.\n", seconds_list(&t.bandwidth.seconds));
    }
    md
}

fn value(v: f64, unit: &str) -> String {
    match unit {
        "ms" => format!("{v:.3} ms"),
        "s" => format!("{v:.3} s"),
        _ => format!("{v:.3} {unit}"),
    }
}

/// `text` (the magnitude of `v`) with a sign, a real minus for negative values (not for
/// one that rounds to zero: "−0.000" reads as a finding).
fn signed(v: f64, text: &str) -> String {
    let zero = !text.chars().any(|c| c.is_ascii_digit() && c != '0');
    if v < 0.0 && !zero { format!("−{text}") } else { format!("+{text}") }
}

fn seconds_list(seconds: &[f64]) -> String {
    seconds.iter().map(|s| format!("{s:.3} s")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::super::{HogProbe, LargeProbe, RttProbe, ToxiproxyResult, ToxiproxyRtt};
    use super::*;
    use crate::stats::Latency;

    fn accuracy(added_ms: f64, bandwidth_s: f64, window_s: f64) -> Accuracy {
        let latency = Latency { count: 100, p50_us: 100.0 + added_ms * 1e3, ..Latency::default() };
        let probe = |s: f64| LargeProbe { proxy_config: String::new(), seconds: vec![s], median_seconds: s };
        let mut a = Accuracy {
            baseline: Latency { count: 100, p50_us: 100.0, ..Latency::default() },
            round_trips: vec![RttProbe {
                rtt_ms: 1.0,
                proxy_config: String::new(),
                latency,
                added_p50_ms: added_ms,
                idle_baseline: Latency { count: 50, p50_us: 150.0, ..Latency::default() },
                added_vs_idle_ms: added_ms - 0.05,
            }],
            rows: 50_000,
            row_len: 1000,
            wire_bytes: 50_350_000,
            no_injection_seconds: 0.5,
            bandwidth: probe(bandwidth_s),
            window: probe(window_s),
            beside_hog: HogProbe {
                rtt_ms: 15.0,
                busy_loops: 2,
                baseline: Latency { count: 100, p50_us: 300.0, ..Latency::default() },
                latency: Latency { count: 100, p50_us: 15_500.0, ..Latency::default() },
                added_p50_ms: 15.2,
            },
            toxiproxy: None,
            table: Vec::new(),
            markdown: String::new(),
        };
        a.table = rows(&a);
        a.markdown = markdown(&a);
        a
    }

    #[test]
    fn errors_against_tolerances() {
        // 50.35 MB at 12.5 MB/s is 4.028 s, + 20 ms; at 1.6384 MB/s it takes 30.73 s.
        let a = accuracy(1.25, 4.048 * 1.04, 50.35 / 1.6384 * 1.2);
        let met: Vec<Option<bool>> = a.table.iter().map(|r| r.met).collect();
        assert_eq!(met, [Some(true), Some(true), Some(true), Some(false), None], "{}", a.markdown);
        // 4.048 s at the rate and RTT; slow start's five rounds below the 250 KB pipe carry
        // 448,880 bytes in 100 ms instead of 35.9 ms.
        assert!((a.table[2].expected.unwrap_or(0.0) - (4.048 + 0.1 - 0.0359104)).abs() < 1e-9);
        assert!((a.table[3].expected.unwrap_or(0.0) - 1.6384).abs() < 1e-9);
        assert!(
            a.markdown
                .contains("| round trip added, p50 of 100 `SELECT 1` | rttscope `rtt: 1ms` | +1.000 ms | +1.250 ms |")
        );
        assert!(
            a.markdown.contains("| the same probes | Toxiproxy | — | — | — | — | not run: no toxiproxy-server binary")
        );
        assert_eq!(signed(-0.0001, "0.000 ms"), "+0.000 ms");
        assert_eq!(signed(-0.2, "0.200 ms"), "−0.200 ms");
        let a = accuracy(0.65, 4.048, 30.73);
        assert_eq!(a.table[0].met, Some(false), "0.35 ms short of 1 ms is out of ±0.3 ms");
    }

    #[test]
    fn toxiproxy_rows_follow_rttscope_rows() {
        let mut a = accuracy(1.0, 4.048, 30.73);
        let latency = Latency { count: 100, p50_us: 1_500.0, ..Latency::default() };
        a.toxiproxy = Some(ToxiproxyResult {
            version: "2.8.0".into(),
            baseline: Latency { count: 100, p50_us: 200.0, ..Latency::default() },
            round_trips: vec![ToxiproxyRtt {
                rtt_ms: 1.0,
                toxics: "latency 1 ms downstream".into(),
                latency,
                added_p50_ms: 1.4,
            }],
            bandwidth: LargeProbe { proxy_config: String::new(), seconds: vec![4.5], median_seconds: 4.5 },
        });
        a.table = rows(&a);
        a.markdown = markdown(&a);
        let ids: Vec<&str> = a.table.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "e.rtt_1ms",
                "e.cpu_hog.rtt_15ms",
                "e.bandwidth",
                "e.window",
                "e.toxiproxy.rtt_1ms",
                "e.toxiproxy.bandwidth",
                "e.toxiproxy.window"
            ]
        );
        let met: Vec<Option<bool>> = a.table[4..].iter().map(|r| r.met).collect();
        // 1.4 ms for 1 ms is out of ±0.3 ms; 4.5 s for 4.048 s is out of ±5 %.
        assert_eq!(met, [Some(false), Some(false), None], "{}", a.markdown);
        assert!(
            a.markdown.contains("| Toxiproxy 2.8.0 `latency 1 ms downstream` | +1.000 ms | +1.400 ms |"),
            "{}",
            a.markdown
        );
        assert!(a.markdown.contains(TOXIPROXY_NO_WINDOW));
    }
}
