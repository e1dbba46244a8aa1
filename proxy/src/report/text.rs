//! The text report, in the spirit of pt-query-digest: totals, findings
//! ranked by cost, a profile of statement classes by total time, then each
//! class in detail — with time to first byte kept apart from time to last
//! byte, which is the difference between a slow query and a slow link.

use std::fmt::Write;

use super::fmt::{bytes, count, us};
use super::{QueryReport, Report};

/// How many statement classes get a detail section.
const DETAILED: usize = 20;

pub fn render_text(r: &Report) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_report(&mut out, r);
    out
}

fn write_report(o: &mut String, r: &Report) -> std::fmt::Result {
    let t = &r.totals;
    writeln!(o, "# {} report, generated {}, over {}", r.generator, r.generated_at, us(r.window_us))?;
    writeln!(
        o,
        "# Totals: {} commands ({} executions), {} round trips, {} errors, {} connections",
        count(t.commands),
        count(t.executions),
        count(t.round_trips),
        count(t.errors),
        count(t.connections)
    )?;
    writeln!(
        o,
        "#         {} in commands, {} up, {} down, {} rows",
        us(t.time_us),
        bytes(t.bytes_up),
        bytes(t.bytes_down),
        count(t.rows)
    )?;
    if t.injected_us > 0 {
        writeln!(
            o,
            "#         of which {} emulated link, {} the server's own and the real path's",
            us(t.injected_us),
            us(t.time_us.saturating_sub(t.injected_us))
        )?;
    }
    if t.events_dropped > 0 {
        writeln!(o, "#         {} records dropped: the collector fell behind (forwarding never waits)", count(t.events_dropped))?;
    }

    if !r.findings.is_empty() {
        writeln!(o, "\n# Findings, by cost")?;
        for (i, f) in r.findings.iter().enumerate() {
            writeln!(o, "# {:>2}. [{}] {} — {} round trips, {}", i + 1, f.severity, f.kind, count(f.round_trips), us(f.cost_us))?;
            writeln!(o, "#     statement {}", f.fingerprint_id)?;
            if let Some(summary) = f.evidence.get("summary").and_then(|s| s.as_str()) {
                writeln!(o, "#     {summary}")?;
            }
            for w in &f.what_if {
                if let Some(line) = w.get("summary").and_then(|s| s.as_str()) {
                    writeln!(o, "#     what if: {line}")?;
                }
            }
            writeln!(o, "#     fix: {}", f.suggestion)?;
        }
    }

    if !r.what_if.is_empty() {
        writeln!(o, "\n# What if the database were elsewhere")?;
        for w in &r.what_if {
            writeln!(o, "# {}", w.summary)?;
        }
    }

    if !r.links.is_empty() {
        writeln!(o, "\n# Upstream link")?;
        for l in &r.links {
            let summary = l.detail.get("summary").and_then(|s| s.as_str()).unwrap_or("");
            writeln!(o, "# [{}] {summary}", l.limit)?;
            if let Some(fix) = l.detail.get("fix").and_then(|s| s.as_str()) {
                writeln!(o, "#     fix: {fix}")?;
            }
        }
    }

    writeln!(o, "\n# Profile")?;
    writeln!(
        o,
        "# {:>4} {:<16} {:>10} {:>6} {:>9} {:>9} {:>10} {:>10} {:>9} {:>10}  Statement",
        "Rank", "Statement id", "Time", "Time%", "Calls", "RTs", "Latency50", "FirstByte", "Rows", "Down"
    )?;
    for (i, q) in r.queries.iter().enumerate() {
        writeln!(
            o,
            "# {:>4} {:<16} {:>10} {:>5.1}% {:>9} {:>9} {:>10} {:>10} {:>9} {:>10}  {}",
            i + 1,
            q.fingerprint_id,
            us(q.latency_us.sum),
            q.time_share * 100.0,
            count(q.count),
            count(q.round_trips),
            us(q.latency_us.p50),
            us(q.first_byte_us.p50),
            count(q.rows.sum),
            bytes(q.bytes.down),
            abbreviate(&q.fingerprint, 60)
        )?;
    }
    for (i, q) in r.queries.iter().take(DETAILED).enumerate() {
        write_query(o, i + 1, q)?;
    }
    Ok(())
}

fn write_query(o: &mut String, rank: usize, q: &QueryReport) -> std::fmt::Result {
    writeln!(o, "\n# Statement {rank}: {} — {:.1}% of time", q.fingerprint_id, q.time_share * 100.0)?;
    writeln!(o, "#   count {}, errors {}, round trips {}", count(q.count), count(q.errors), count(q.round_trips))?;
    let l = &q.latency_us;
    writeln!(o, "#   to last byte   p50 {}  p95 {}  p99 {}  max {}  total {}", us(l.p50), us(l.p95), us(l.p99), us(l.max), us(l.sum))?;
    let f = &q.first_byte_us;
    writeln!(o, "#   to first byte  p50 {}  p95 {}  p99 {}  max {}", us(f.p50), us(f.p95), us(f.p99), us(f.max))?;
    if q.injected_us > 0 {
        writeln!(o, "#   emulated link  {} of the {} total; the server's own {}", us(q.injected_us), us(l.sum), us(l.sum.saturating_sub(q.injected_us)))?;
    }
    writeln!(o, "#   rows {} (max {}), {} up, {} down (largest response {})", count(q.rows.sum), count(q.rows.max), bytes(q.bytes.up), bytes(q.bytes.down), bytes(q.bytes.max_down))?;
    let commands: Vec<String> = q.commands.iter().map(|(c, n)| format!("{c} {}", count(*n))).collect();
    writeln!(o, "#   commands {}", commands.join(", "))?;
    if q.folded > 0 {
        writeln!(o, "#   ({} statement classes folded in)", count(q.folded))?;
    }
    if let Some(example) = &q.example {
        writeln!(o, "#   example: {example}")?;
    }
    writeln!(o, "{}", q.fingerprint)
}

fn abbreviate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut cut: String = s.chars().take(max - 1).collect();
    cut.push('…');
    cut
}
