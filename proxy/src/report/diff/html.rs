//! The diff as one self-contained page, like the HTML report: inline CSS and SVG, no scripts,
//! nothing fetched. Green where a number fell, red where it grew.

use std::fmt::Write;

use super::super::escape::html as escape;
use super::{Change, FindingSide, ReportDiff, StatementSide, ratio, signed};
use crate::human::{bytes, count, counted, us};

/// Statements charted by their change in time.
const CHARTED: usize = 15;

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}\
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;width:100%;font-size:13px}td,th{padding:4px 6px;border-bottom:1px solid #eee;text-align:right}\
td.sql,th.sql{text-align:left;font-family:ui-monospace,monospace;word-break:break-all}\
.less{color:#176b2c}.more{color:#b3261e}.muted{color:#777}\
.finding{border-left:4px solid #c33;padding:.3em 1em;margin:.8em 0;background:#fdf5f5}\
.finding.fixed{border-color:#2a8a3e;background:#f3faf4}.finding.unchanged{border-color:#e90;background:#fffaf0}\
code{font-family:ui-monospace,monospace}svg text{font:11px system-ui,sans-serif;fill:#333}";

/// `rttscope report --diff ... --format html`: the 15 largest changes in time are charted,
/// statements gone or new included.
pub fn render_html(d: &ReportDiff) -> String {
    let mut o = String::with_capacity(16 * 1024);
    // Writing to a String cannot fail.
    let _ = write_page(&mut o, d);
    o
}

fn write_page(o: &mut String, d: &ReportDiff) -> std::fmt::Result {
    writeln!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>rttscope report diff</title><style>{STYLE}</style></head><body>"
    )?;
    writeln!(o, "<h1>rttscope report diff</h1>")?;
    for (name, s) in [("Before", &d.before), ("After", &d.after)] {
        writeln!(
            o,
            "<p class=\"muted\">{name}: <code>{}</code> · generated {} · window {}</p>",
            escape(&s.source),
            escape(&s.generated_at),
            us(s.window_us)
        )?;
    }

    writeln!(
        o,
        "<h2 id=\"totals\">Totals</h2><table><tr><th class=\"sql\"></th><th>Before</th><th>After</th><th>Change</th><th>Ratio</th></tr>"
    )?;
    let t = &d.totals;
    total(o, "commands", &t.commands, count)?;
    total(o, "round trips", &t.round_trips, count)?;
    total(o, "time in commands", &t.time_us, us)?;
    total(o, "bytes", &t.bytes, bytes)?;
    writeln!(o, "</table>")?;

    writeln!(o, "<h2 id=\"findings\">Findings</h2>")?;
    let f = &d.findings;
    if f.fixed.is_empty() && f.new.is_empty() && f.unchanged.is_empty() {
        writeln!(o, "<p class=\"muted\">No findings on either side.</p>")?;
    }
    for x in &f.fixed {
        finding(o, "fixed", "Fixed", x)?;
    }
    for x in &f.new {
        finding(o, "new", "New", x)?;
    }
    for x in &f.unchanged {
        writeln!(
            o,
            "<div class=\"finding unchanged\"><b>Unchanged</b> · <b>{}</b> · statement {} · round trips {} · time {}<br>{}</div>",
            x.kind,
            escape(&x.fingerprint_id),
            arrow(&x.round_trips, count),
            arrow(&x.cost_us, us),
            escape(&x.summary)
        )?;
    }

    writeln!(o, "<h2 id=\"time-change\">Change in time per statement</h2>")?;
    change_chart(o, d)?;

    writeln!(
        o,
        "<h2 id=\"statements\">Statements in both</h2><table><tr><th>Calls</th><th>Round trips</th><th>Time</th><th>Bytes</th><th class=\"sql\">Statement</th></tr>"
    )?;
    for s in &d.statements {
        writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"sql\" title=\"{}\">{}</td></tr>",
            arrow(&s.calls, count),
            arrow(&s.round_trips, count),
            arrow(&s.time_us, us),
            arrow(&s.bytes, bytes),
            escape(&s.fingerprint_id),
            escape(&s.fingerprint)
        )?;
    }
    writeln!(o, "</table>")?;
    one_side(o, "only-before", "Statements only before (gone)", &d.only_before)?;
    one_side(o, "only-after", "Statements only after (new)", &d.only_after)?;
    writeln!(o, "</body></html>")
}

/// The class that colours a change: less is better for every number shown.
fn tone(change: i64) -> &'static str {
    match change {
        0 => "",
        c if c < 0 => "less",
        _ => "more",
    }
}

fn total(o: &mut String, name: &str, c: &Change, show: fn(u64) -> String) -> std::fmt::Result {
    writeln!(
        o,
        "<tr><td class=\"sql\">{name}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td class=\"{}\">{}</td></tr>",
        show(c.before),
        show(c.after),
        tone(c.change),
        signed(c.change, show),
        tone(c.change),
        ratio(c)
    )
}

/// `1,000 → 2` and the signed change, coloured.
fn arrow(c: &Change, show: fn(u64) -> String) -> String {
    format!(
        "{} → {} <span class=\"{}\">({})</span>",
        show(c.before),
        show(c.after),
        tone(c.change),
        signed(c.change, show)
    )
}

fn finding(o: &mut String, class: &str, label: &str, x: &FindingSide) -> std::fmt::Result {
    writeln!(
        o,
        "<div class=\"finding {class}\"><b>{label}</b> · <b>{}</b> · statement {} · {} · {}<br>{}</div>",
        x.kind,
        escape(&x.fingerprint_id),
        counted(x.round_trips, "round trip", "round trips"),
        us(x.cost_us),
        escape(&x.summary)
    )
}

fn one_side(o: &mut String, id: &str, title: &str, side: &[StatementSide]) -> std::fmt::Result {
    writeln!(o, "<h2 id=\"{id}\">{title}</h2>")?;
    if side.is_empty() {
        return writeln!(o, "<p class=\"muted\">None.</p>");
    }
    writeln!(
        o,
        "<table><tr><th>Calls</th><th>Round trips</th><th>Time</th><th>Bytes</th><th class=\"sql\">Statement</th></tr>"
    )?;
    for s in side {
        writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"sql\" title=\"{}\">{}</td></tr>",
            count(s.calls),
            count(s.round_trips),
            us(s.time_us),
            bytes(s.bytes),
            escape(&s.fingerprint_id),
            escape(&s.fingerprint)
        )?;
    }
    writeln!(o, "</table>")
}

/// Bars from a centre line: left (green) where a statement got faster, right (red) where it
/// got slower; statements only on one side count as all gone or all new.
fn change_chart(o: &mut String, d: &ReportDiff) -> std::fmt::Result {
    let mut bars: Vec<(i64, &str)> = d.statements.iter().map(|s| (s.time_us.change, s.fingerprint.as_str())).collect();
    bars.extend(d.only_before.iter().map(|s| (-(s.time_us.min(i64::MAX as u64) as i64), s.fingerprint.as_str())));
    bars.extend(d.only_after.iter().map(|s| (s.time_us.min(i64::MAX as u64) as i64, s.fingerprint.as_str())));
    bars.sort_by_key(|(c, _)| std::cmp::Reverse(c.unsigned_abs()));
    bars.truncate(CHARTED);
    if bars.is_empty() {
        return writeln!(o, "<p class=\"muted\">No statements.</p>");
    }
    let max = bars.iter().map(|(c, _)| c.unsigned_abs()).max().unwrap_or(0).max(1) as f64;
    let height = 22 * bars.len() + 4;
    // The centre line at 400, bars up to 250 either way, the statement from 740 on.
    writeln!(o, "<svg width=\"1060\" height=\"{height}\" role=\"img\" aria-label=\"change in time chart\">")?;
    writeln!(o, "<line x1=\"400\" y1=\"0\" x2=\"400\" y2=\"{height}\" stroke=\"#999\"/>")?;
    for (i, (c, text)) in bars.iter().enumerate() {
        let y = 22 * i + 2;
        let w = (c.unsigned_abs() as f64 / max * 250.0).max(1.0);
        let (x, fill, label_x, anchor) =
            if *c < 0 { (400.0 - w, "#2a8a3e", 394.0 - w, "end") } else { (400.0, "#b3261e", 406.0 + w, "start") };
        writeln!(
            o,
            "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"16\" fill=\"{fill}\"><title>{}</title></rect><text x=\"{label_x:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text><text x=\"740\" y=\"{}\">{}</text>",
            escape(text),
            y + 13,
            signed(*c, us),
            y + 13,
            escape(&super::super::text::abbreviate(text, 48))
        )?;
    }
    writeln!(o, "</svg>")
}
