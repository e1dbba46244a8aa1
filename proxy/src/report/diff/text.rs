//! The diff as text, in the report's style: totals first, then statements by the size of their
//! change in time, then findings fixed, new and unchanged. Every string from a report is shown
//! through `escape::visible`.

use std::fmt::Write;

use super::super::escape::visible as v;
use super::{Change, FindingSide, ReportDiff, StatementSide, ratio, signed};
use crate::human::{bytes, count, counted, us};

/// `rttscope report --diff ... --format text`: changes signed (`+1,234`, `-56`) beside their
/// ratios (`×0.52`, `new`).
pub fn render_text(d: &ReportDiff) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_diff(&mut out, d);
    out
}

fn write_diff(o: &mut String, d: &ReportDiff) -> std::fmt::Result {
    writeln!(o, "# {} report diff", v(&d.generator))?;
    writeln!(
        o,
        "# before: {} (generated {}, over {})",
        v(&d.before.source),
        v(&d.before.generated_at),
        us(d.before.window_us)
    )?;
    writeln!(
        o,
        "# after:  {} (generated {}, over {})",
        v(&d.after.source),
        v(&d.after.generated_at),
        us(d.after.window_us)
    )?;

    writeln!(o, "\n# {:<12} {:>14} {:>14} {:>14} {:>8}", "Totals", "Before", "After", "Change", "Ratio")?;
    let t = &d.totals;
    total(o, "commands", &t.commands, count)?;
    total(o, "round trips", &t.round_trips, count)?;
    total(o, "time", &t.time_us, us)?;
    total(o, "bytes", &t.bytes, bytes)?;

    writeln!(o, "\n# Statements in both, by change in time")?;
    if d.statements.is_empty() {
        writeln!(o, "#   none")?;
    } else {
        writeln!(
            o,
            "# {:<16} {:>19} {:>21} {:>25} {:>21}  Statement",
            "Statement id", "Calls", "Round trips", "Time", "Bytes"
        )?;
        for s in &d.statements {
            writeln!(
                o,
                "# {:<16} {:>19} {:>21} {:>25} {:>21}  {}",
                v(&s.fingerprint_id),
                arrow(&s.calls, count),
                arrow(&s.round_trips, count),
                arrow(&s.time_us, us),
                arrow(&s.bytes, bytes),
                v(&s.fingerprint)
            )?;
        }
    }
    one_side(o, "Statements only before (gone)", &d.only_before)?;
    one_side(o, "Statements only after (new)", &d.only_after)?;

    let f = &d.findings;
    one_sided_findings(o, "fixed", "was ", &f.fixed)?;
    one_sided_findings(o, "new", "", &f.new)?;
    writeln!(o, "\n# Findings unchanged")?;
    if f.unchanged.is_empty() {
        writeln!(o, "#   none")?;
    }
    for x in &f.unchanged {
        writeln!(
            o,
            "#   still {} {}: round trips {}, time {}",
            x.kind,
            v(&x.fingerprint_id),
            arrow(&x.round_trips, count),
            arrow(&x.cost_us, us)
        )?;
        writeln!(o, "#     {}", v(&x.summary))?;
    }
    Ok(())
}

fn total(o: &mut String, name: &str, c: &Change, show: fn(u64) -> String) -> std::fmt::Result {
    writeln!(
        o,
        "# {name:<12} {:>14} {:>14} {:>14} {:>8}",
        show(c.before),
        show(c.after),
        signed(c.change, show),
        ratio(c)
    )
}

/// `1,000 → 2 (-998)`.
fn arrow(c: &Change, show: fn(u64) -> String) -> String {
    format!("{} → {} ({})", show(c.before), show(c.after), signed(c.change, show))
}

/// Findings in one report only: `# Findings fixed` (what they cost, `was ...`) or `# Findings new`.
fn one_sided_findings(o: &mut String, what: &str, cost_was: &str, side: &[FindingSide]) -> std::fmt::Result {
    writeln!(o, "\n# Findings {what}")?;
    if side.is_empty() {
        writeln!(o, "#   none")?;
    }
    for x in side {
        writeln!(
            o,
            "#   {what} {} {}: {cost_was}{}, {}",
            x.kind,
            v(&x.fingerprint_id),
            counted(x.round_trips, "round trip", "round trips"),
            us(x.cost_us)
        )?;
        writeln!(o, "#     {}", v(&x.summary))?;
    }
    Ok(())
}

fn one_side(o: &mut String, title: &str, side: &[StatementSide]) -> std::fmt::Result {
    writeln!(o, "\n# {title}")?;
    if side.is_empty() {
        return writeln!(o, "#   none");
    }
    writeln!(
        o,
        "# {:<16} {:>9} {:>11} {:>10} {:>10}  Statement",
        "Statement id", "Calls", "Round trips", "Time", "Bytes"
    )?;
    for s in side {
        writeln!(
            o,
            "# {:<16} {:>9} {:>11} {:>10} {:>10}  {}",
            v(&s.fingerprint_id),
            count(s.calls),
            count(s.round_trips),
            us(s.time_us),
            bytes(s.bytes),
            v(&s.fingerprint)
        )?;
    }
    Ok(())
}
