//! Sentences the text and HTML renderings share, so that both say the same thing in the
//! same words (`docs/time-model.md` defines the figures).

use super::Totals;
use crate::findings::whatif::Projection;
use crate::human::{bandwidth, us};

/// "1.97 s in commands", and where commands overlapped on several connections
/// "1.20 s in commands (wall clock; 3.40 s summed over connections)".
pub fn time_in_commands(t: &Totals) -> String {
    let wall = wall_us(t);
    if t.time_us > wall {
        format!("{} in commands (wall clock; {} summed over connections)", us(wall), us(t.time_us))
    } else {
        format!("{} in commands", us(wall))
    }
}

/// "of which 1.86 s the emulated link (as measured), 113.03 ms the server's own and the real
/// path's", of the time summed over connections; with the link's lateness beyond its settings
/// when it had any: "(as measured; 3.20 ms of it late, p50 20 µs, p99 410 µs a command)".
/// `None` without an emulated link.
pub fn emulated_share(t: &Totals) -> Option<String> {
    (t.injected_us > 0).then(|| {
        let of = if t.time_us > wall_us(t) { "of the time summed, " } else { "of which " };
        let late = &t.inject_lateness;
        let measured = if t.inject_late_us > 0 {
            format!(
                "as measured; {} of it late, p50 {}, p99 {} a command",
                us(t.inject_late_us),
                us(late.p50),
                us(late.p99)
            )
        } else {
            "as measured".to_owned()
        };
        format!(
            "{of}{} the emulated link ({measured}), {} the server's own and the real path's",
            us(t.injected_us),
            us(t.time_us.saturating_sub(t.injected_us))
        )
    })
}

/// The wall time in commands; a report written before `busy_us` existed has only the sum.
fn wall_us(t: &Totals) -> u64 {
    if t.busy_us == 0 { t.time_us } else { t.busy_us }
}

/// The head of a what-if table: "its 516.65 ms of commands (65.65 ms without the emulated
/// link) over", or without a link to take out "its 516.65 ms of commands over".
pub fn what_if_head(whose: &str, projections: &[Projection]) -> Option<String> {
    let p = projections.first()?;
    let without =
        if p.base_us < p.observed_us { format!(" ({} without this link)", us(p.base_us)) } else { String::new() };
    Some(format!("{whose} {} of commands{without}, over", us(p.observed_us)))
}

/// A projection's link in a table cell: "200 µs" or "15.00 ms, 34 Mbit/s".
pub fn link_cell(p: &Projection) -> String {
    match p.bandwidth_bps {
        Some(bw) => format!("{}, {}", us(p.rtt_us), bandwidth(bw)),
        None => us(p.rtt_us),
    }
}
