//! The HTML report: one self-contained page (inline CSS and SVG, no
//! scripts, nothing fetched), readable offline and attachable to a ticket.

use std::fmt::Write;

use super::escape::html as escape;
use super::{QueryReport, Report, WhatIfReport, WindowKind, words};
use crate::findings::whatif::Projection;
use crate::human::{bytes, count, counted, us};

const CHARTED: usize = 15;

/// `--format html`: totals, findings, what-ifs, link verdicts, charts of the 15 slowest
/// statements, then every statement and connection; untrusted text escaped for HTML.
pub fn render_html(r: &Report) -> String {
    let mut o = String::with_capacity(32 * 1024);
    // Writing to a String cannot fail.
    let _ = write_page(&mut o, r);
    o
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}\
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;width:100%;font-size:13px}td,th{padding:4px 6px;border-bottom:1px solid #eee;text-align:right}\
td.sql,th.sql{text-align:left;font-family:ui-monospace,monospace;word-break:break-all}\
.totals span{display:inline-block;margin-right:1.5em}.finding{border-left:4px solid #c33;padding:.3em 1em;margin:.8em 0;background:#fdf5f5}\
.finding.warning{border-color:#e90;background:#fffaf0}.finding.info{border-color:#39c;background:#f4f9fd}\
.link{border-left:4px solid #39c;padding:.3em 1em;margin:.8em 0;background:#f4f9fd}\
code{font-family:ui-monospace,monospace}svg text{font:11px system-ui,sans-serif;fill:#333}.muted{color:#777}";

fn write_page(o: &mut String, r: &Report) -> std::fmt::Result {
    let t = &r.totals;
    writeln!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>rttscope report</title><style>{STYLE}</style></head><body>"
    )?;
    writeln!(
        o,
        "<h1>rttscope report</h1><p class=\"muted\">{} · generated {} · window {}</p>",
        escape(&r.generator),
        escape(&r.generated_at),
        us(r.window_us)
    )?;
    if let Some(w) = r.window.as_ref().filter(|w| w.kind == WindowKind::Rolling) {
        writeln!(
            o,
            "<p class=\"muted\">Rolling window: the last {} (asked), from {} to {}.</p>",
            us(w.requested_us),
            escape(&w.start),
            escape(&w.end)
        )?;
    }
    writeln!(
        o,
        "<p class=\"totals\"><span><b>{}</b> commands</span><span><b>{}</b> round trips</span><span>{}</span>\
         <span><b>{}</b> errors</span><span><b>{}</b> up / <b>{}</b> down</span><span><b>{}</b> rows</span><span><b>{}</b> connections</span></p>",
        count(t.commands),
        count(t.round_trips),
        escape(&words::time_in_commands(t)),
        count(t.errors),
        bytes(t.bytes_up),
        bytes(t.bytes_down),
        count(t.rows),
        count(t.connections)
    )?;
    if let Some(share) = words::emulated_share(t) {
        writeln!(o, "<p>{}.</p>", escape(&capitalised(&share)))?;
    }
    if t.events_dropped > 0 {
        writeln!(
            o,
            "<p class=\"muted\">{} dropped: the collector fell behind (forwarding never waits).</p>",
            counted(t.events_dropped, "record", "records")
        )?;
    }

    writeln!(o, "<h2 id=\"findings\">Findings</h2>")?;
    writeln!(
        o,
        "<p class=\"muted\">By what each would cost at the reference RTT. Each shows its round trips and the wall \
         time of its own commands; \"within\": the wall time its occurrences spanned; what if: its commands over other links.</p>"
    )?;
    if r.findings.is_empty() {
        writeln!(o, "<p class=\"muted\">No findings.</p>")?;
    }
    for f in &r.findings {
        writeln!(
            o,
            "<div class=\"finding {}\"><b>{}</b> · {} · {} <br>{}<br><span class=\"muted\">statement {}</span>",
            f.severity,
            f.kind,
            counted(f.round_trips, "round trip", "round trips"),
            us(f.cost_us),
            escape(&f.evidence.summary),
            escape(&f.fingerprint_id)
        )?;
        what_if_table(o, "its", &f.what_if)?;
        writeln!(o, "<b>Fix:</b> {}</div>", escape(&f.suggestion))?;
    }

    if !r.what_if.is_empty() {
        writeln!(o, "<h2 id=\"what-if\">What if the database were elsewhere</h2>")?;
        let projections: Vec<Projection> = r.what_if.iter().map(WhatIfReport::projection).collect();
        what_if_table(o, "the recording's", &projections)?;
    }

    if !r.links.is_empty() {
        writeln!(o, "<h2 id=\"links\">Upstream link</h2>")?;
        for l in &r.links {
            writeln!(
                o,
                "<div class=\"link\"><b>{}</b>: {}<br><b>Fix:</b> {}</div>",
                l.limits(),
                escape(&l.summary),
                escape(&l.fix)
            )?;
        }
    }

    let charted: Vec<&QueryReport> = r.queries.iter().take(CHARTED).collect();
    writeln!(o, "<h2 id=\"round-trips\">Round trips per statement</h2>")?;
    bar_chart(o, &charted, |q| q.round_trips as f64, |q| count(q.round_trips))?;
    writeln!(o, "<h2 id=\"time\">Time per statement: to first byte, then transfer</h2>")?;
    time_chart(o, &charted)?;

    writeln!(
        o,
        "<h2 id=\"statements\">Statements</h2><table><tr><th>#</th><th>Calls</th><th>Round trips</th><th>Time</th><th>p50</th><th>p99</th><th>First byte p50</th><th>Rows</th><th>Down</th><th>Distribution</th><th class=\"sql\">Statement</th></tr>"
    )?;
    for (i, q) in r.queries.iter().enumerate() {
        write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>",
            i + 1,
            count(q.count),
            count(q.round_trips),
            us(q.latency_us.sum),
            us(q.latency_us.p50),
            us(q.latency_us.p99),
            us(q.first_byte_us.p50),
            count(q.rows.sum),
            down_cell(&q.bytes)
        )?;
        distribution(o, q)?;
        writeln!(
            o,
            "</td><td class=\"sql\" title=\"{}\">{}</td></tr>",
            escape(&q.fingerprint_id),
            escape(&q.fingerprint)
        )?;
    }
    writeln!(o, "</table>")?;
    for (i, q) in r.queries.iter().enumerate() {
        if let Some(waits) = q.retransmission_waits.sentence(q.count, &q.latency_us) {
            writeln!(o, "<p class=\"retransmits\">#{} {}: {}</p>", i + 1, escape(&q.fingerprint), escape(&waits))?;
        }
    }

    writeln!(
        o,
        "<h2 id=\"connections\">Connections</h2><table><tr><th>id</th><th class=\"sql\">client</th><th class=\"sql\">user</th><th class=\"sql\">schema</th><th>open</th><th>commands</th><th>round trips</th><th>p50</th><th>down</th></tr>"
    )?;
    for c in &r.connections {
        writeln!(
            o,
            "<tr><td>{}</td><td class=\"sql\">{}</td><td class=\"sql\">{}</td><td class=\"sql\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            c.id,
            escape(&c.client),
            escape(&c.user),
            escape(c.schema.as_deref().unwrap_or("")),
            if c.open { "yes" } else { "no" },
            count(c.commands),
            count(c.round_trips),
            us(c.latency_us.p50),
            bytes(c.bytes.down)
        )?;
    }
    writeln!(o, "</table></body></html>")
}

/// Horizontal bars, one per statement, labelled by rank.
fn bar_chart(
    o: &mut String,
    qs: &[&QueryReport],
    value: impl Fn(&QueryReport) -> f64,
    label: impl Fn(&QueryReport) -> String,
) -> std::fmt::Result {
    let max = qs.iter().map(|q| value(q)).fold(0.0, f64::max).max(1.0);
    let height = 22 * qs.len() + 4;
    writeln!(o, "<svg width=\"900\" height=\"{height}\" role=\"img\" aria-label=\"bar chart\">")?;
    for (i, q) in qs.iter().enumerate() {
        let y = 22 * i + 2;
        let w = (value(q) / max * 620.0).max(1.0);
        writeln!(
            o,
            "<text x=\"0\" y=\"{}\">#{}</text><rect x=\"40\" y=\"{y}\" width=\"{w:.1}\" height=\"16\" fill=\"#4a7fb5\"><title>{}</title></rect><text x=\"{:.1}\" y=\"{}\">{}</text>",
            y + 13,
            i + 1,
            escape(&q.fingerprint),
            46.0 + w,
            y + 13,
            escape(&label(q))
        )?;
    }
    writeln!(o, "</svg>")
}

/// Stacked bars: total time to first byte (server work plus a round trip)
/// and the rest (the transfer), per statement.
fn time_chart(o: &mut String, qs: &[&QueryReport]) -> std::fmt::Result {
    let max = qs.iter().map(|q| q.latency_us.sum as f64).fold(0.0, f64::max).max(1.0);
    let height = 22 * qs.len() + 24;
    writeln!(o, "<svg width=\"900\" height=\"{height}\" role=\"img\" aria-label=\"time chart\">")?;
    for (i, q) in qs.iter().enumerate() {
        let y = 22 * i + 2;
        let first = q.first_byte_us.sum.min(q.latency_us.sum) as f64 / max * 620.0;
        let rest = (q.latency_us.sum.saturating_sub(q.first_byte_us.sum)) as f64 / max * 620.0;
        writeln!(
            o,
            "<text x=\"0\" y=\"{}\">#{}</text><rect x=\"40\" y=\"{y}\" width=\"{first:.1}\" height=\"16\" fill=\"#4a7fb5\"/><rect x=\"{:.1}\" y=\"{y}\" width=\"{rest:.1}\" height=\"16\" fill=\"#e0a040\"/><text x=\"{:.1}\" y=\"{}\">{}</text>",
            y + 13,
            i + 1,
            40.0 + first,
            46.0 + first + rest,
            y + 13,
            us(q.latency_us.sum)
        )?;
    }
    let y = 22 * qs.len() + 16;
    writeln!(
        o,
        "<rect x=\"40\" y=\"{}\" width=\"10\" height=\"10\" fill=\"#4a7fb5\"/><text x=\"55\" y=\"{y}\">to first byte</text><rect x=\"150\" y=\"{}\" width=\"10\" height=\"10\" fill=\"#e0a040\"/><text x=\"165\" y=\"{y}\">transfer</text></svg>",
        y - 9,
        y - 9
    )
}

/// A small latency histogram (power-of-two buckets) inline in the table.
fn distribution(o: &mut String, q: &QueryReport) -> std::fmt::Result {
    let max = q.distribution.iter().map(|[_, c]| *c).max().unwrap_or(0).max(1) as f64;
    let n = q.distribution.len().max(1);
    let w = (120.0 / n as f64).min(12.0);
    write!(o, "<svg width=\"124\" height=\"28\" role=\"img\" aria-label=\"latency distribution\">")?;
    for (i, [upper, c]) in q.distribution.iter().enumerate() {
        let h = (*c as f64 / max * 26.0).max(1.0);
        write!(
            o,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"#4a7fb5\"><title>≤ {}: {}</title></rect>",
            i as f64 * w,
            27.0 - h,
            (w - 1.0).max(1.0),
            us(*upper),
            count(*c)
        )?;
    }
    write!(o, "</svg>")
}

/// Bytes down, and beside them the long hop's compression ratio when its wire bytes differ.
fn down_cell(b: &super::BytesReport) -> String {
    match b.wire_ratio() {
        Some(ratio) => format!(
            "{} <span title=\"on the long hop's wire\">(wire {}, {ratio:.1}:1)</span>",
            bytes(b.down),
            bytes(b.wire_down)
        ),
        None => bytes(b.down),
    }
}

/// A what-if table: its head, then a row per scenario (name, link, projected time).
fn what_if_table(o: &mut String, whose: &str, projections: &[Projection]) -> std::fmt::Result {
    let Some(head) = words::what_if_head(whose, projections) else { return Ok(()) };
    writeln!(o, "<p>What if {}:</p><table class=\"what-if\">", escape(&head))?;
    for p in projections {
        writeln!(
            o,
            "<tr><td class=\"sql\">{}</td><td>{}</td><td>≈ {}</td></tr>",
            escape(&p.scenario),
            escape(&words::link_cell(p)),
            us(p.projected_us)
        )?;
    }
    writeln!(o, "</table>")
}

/// `s` with its first letter in upper case.
fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}
