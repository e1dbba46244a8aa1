//! The text report, in the spirit of pt-query-digest: totals, findings
//! ranked by cost, a profile of statement classes by total time, then each
//! class in detail — with time to first byte kept apart from time to last
//! byte, which is the difference between a slow query and a slow link. Every string from the
//! report is shown through `escape::visible`: a control character in SQL cannot forge a line
//! or drive the terminal.

use std::fmt::Write;

use super::escape::visible as v;
use super::{BytesReport, QueryReport, Report, WhatIfReport, WindowKind, words};
use crate::findings::whatif::Projection;
use crate::human::{bytes, count, counted, us};

/// How many statement classes get a detail section.
const DETAILED: usize = 20;

/// `--format text`: totals, findings by cost, what-ifs, link verdicts, a profile of every
/// statement class, then the 20 slowest in detail.
pub fn render_text(r: &Report) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_report(&mut out, r);
    out
}

fn write_report(o: &mut String, r: &Report) -> std::fmt::Result {
    let t = &r.totals;
    writeln!(o, "# {} report, generated {}, over {}", v(&r.generator), v(&r.generated_at), us(r.window_us))?;
    if let Some(w) = r.window.as_ref().filter(|w| w.kind == WindowKind::Rolling) {
        writeln!(
            o,
            "# Rolling window: the last {} (asked), from {} to {}",
            us(w.requested_us),
            v(&w.start),
            v(&w.end)
        )?;
    }
    writeln!(
        o,
        "# Totals: {} ({}), {}, {}, {}",
        counted(t.commands, "command", "commands"),
        counted(t.executions, "execution", "executions"),
        counted(t.round_trips, "round trip", "round trips"),
        counted(t.errors, "error", "errors"),
        counted(t.connections, "connection", "connections")
    )?;
    writeln!(
        o,
        "#         {}, {} up, {} down, {}",
        words::time_in_commands(t),
        bytes(t.bytes_up),
        bytes(t.bytes_down),
        counted(t.rows, "row", "rows")
    )?;
    let wire =
        BytesReport { up: t.bytes_up, down: t.bytes_down, max_down: 0, wire_up: t.wire_up, wire_down: t.wire_down };
    if let Some(words) = wire.wire_words().strip_prefix(", ") {
        writeln!(o, "#         {words}")?;
    }
    if let Some(share) = words::emulated_share(t) {
        writeln!(o, "#         {share}")?;
    }
    if t.events_dropped > 0 {
        writeln!(
            o,
            "#         {} dropped: the collector fell behind (forwarding never waits)",
            counted(t.events_dropped, "record", "records")
        )?;
    }

    if !r.findings.is_empty() {
        writeln!(o, "\n# Findings, by what they would cost at the reference RTT")?;
        writeln!(o, "# (each: its round trips and the wall time of its own commands; `within`: the wall")?;
        writeln!(o, "# time its occurrences spanned; what if: its commands over other links)")?;
        for (i, f) in r.findings.iter().enumerate() {
            writeln!(
                o,
                "# {:>2}. [{}] {} — {}, {}",
                i + 1,
                f.severity,
                f.kind,
                counted(f.round_trips, "round trip", "round trips"),
                us(f.cost_us)
            )?;
            writeln!(o, "#     statement {}", v(&f.fingerprint_id))?;
            writeln!(o, "#     {}", v(&f.evidence.summary))?;
            write_what_if(o, "#     ", "its", &f.what_if)?;
            writeln!(o, "#     fix: {}", v(&f.suggestion))?;
        }
    }

    if !r.what_if.is_empty() {
        writeln!(o, "\n# What if the database were elsewhere")?;
        let projections: Vec<Projection> = r.what_if.iter().map(WhatIfReport::projection).collect();
        write_what_if(o, "# ", "the recording's", &projections)?;
    }

    if !r.links.is_empty() {
        writeln!(o, "\n# Upstream link")?;
        for l in &r.links {
            writeln!(o, "# [{}] {}", l.limits(), v(&l.summary))?;
            writeln!(o, "#     fix: {}", v(&l.fix))?;
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
            v(&q.fingerprint_id),
            us(q.latency_us.sum),
            q.time_share * 100.0,
            count(q.count),
            count(q.round_trips),
            us(q.latency_us.p50),
            us(q.first_byte_us.p50),
            count(q.rows.sum),
            bytes(q.bytes.down),
            abbreviate(&v(&q.fingerprint), 60)
        )?;
    }
    for (i, q) in r.queries.iter().take(DETAILED).enumerate() {
        write_query(o, i + 1, q)?;
    }
    Ok(())
}

fn write_query(o: &mut String, rank: usize, q: &QueryReport) -> std::fmt::Result {
    writeln!(o, "\n# Statement {rank}: {} — {:.1}% of time", v(&q.fingerprint_id), q.time_share * 100.0)?;
    writeln!(o, "#   count {}, errors {}, round trips {}", count(q.count), count(q.errors), count(q.round_trips))?;
    let l = &q.latency_us;
    writeln!(
        o,
        "#   to last byte   p50 {}  p95 {}  p99 {}  max {}  total {}",
        us(l.p50),
        us(l.p95),
        us(l.p99),
        us(l.max),
        us(l.sum)
    )?;
    let f = &q.first_byte_us;
    writeln!(o, "#   to first byte  p50 {}  p95 {}  p99 {}  max {}", us(f.p50), us(f.p95), us(f.p99), us(f.max))?;
    if let Some(waits) = q.retransmission_waits.sentence(q.count, l) {
        writeln!(o, "#   retransmits    {waits}")?;
    }
    if q.injected_us > 0 {
        writeln!(
            o,
            "#   emulated link  {} of the {} total; the server's own {}",
            us(q.injected_us),
            us(l.sum),
            us(l.sum.saturating_sub(q.injected_us))
        )?;
    }
    writeln!(
        o,
        "#   rows {} (max {}), {} up, {} down (largest response {}){}",
        count(q.rows.sum),
        count(q.rows.max),
        bytes(q.bytes.up),
        bytes(q.bytes.down),
        bytes(q.bytes.max_down),
        q.bytes.wire_words()
    )?;
    if let Some(c) = &q.compressibility {
        writeln!(
            o,
            "#   compresses     {:.1}:1 with zlib ({} of results sampled, {})",
            c.ratio,
            bytes(c.sampled_bytes),
            counted(c.samples, "sample", "samples")
        )?;
    }
    let commands: Vec<String> = q.commands.iter().map(|(c, n)| format!("{} {}", v(c), count(*n))).collect();
    writeln!(o, "#   commands {}", commands.join(", "))?;
    if q.folded > 0 {
        writeln!(o, "#   ({} statement classes folded in)", count(q.folded))?;
    }
    if let Some(example) = &q.example {
        writeln!(o, "#   example: {}", v(example))?;
    }
    writeln!(o, "{}", v(&q.fingerprint))
}

/// The first `max` characters of `s`, with an ellipsis when it was longer.
/// A what-if table: its head, then a line per scenario (name, link, projected time).
fn write_what_if(o: &mut String, indent: &str, whose: &str, projections: &[Projection]) -> std::fmt::Result {
    let Some(head) = words::what_if_head(whose, projections) else { return Ok(()) };
    writeln!(o, "{indent}what if {head}:")?;
    let name_width = projections.iter().map(|p| p.scenario.chars().count()).max().unwrap_or(0);
    let links: Vec<String> = projections.iter().map(words::link_cell).collect();
    let link_width = links.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    for (p, link) in projections.iter().zip(&links) {
        writeln!(o, "{indent}  {:<name_width$}  {:<link_width$}  ≈ {}", v(&p.scenario), link, us(p.projected_us))?;
    }
    Ok(())
}

pub(super) fn abbreviate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut cut: String = s.chars().take(max - 1).collect();
    cut.push('…');
    cut
}
