//! The confusion matrix of a run: injected cause against the verdict rttscope gave, each
//! class's precision and recall, the share of cells without a verdict; in Markdown, with the
//! cells one by one below it so that every miss can be read with its figures.

use std::fmt::Write as _;

use super::Cause;
use super::run::CellResult;
use crate::matrix::{evidence, limit};

/// The verdicts the table has a column for beyond the six causes' own.
const OTHER: &str = "other";
const UNKNOWN: &str = "unknown";

/// Counts of one run: `cells[cause][predicted]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Confusion {
    /// (injected cause, predicted column) → cells.
    pub counts: std::collections::BTreeMap<(Cause, String), u32>,
    /// Cells left out of the scores because they cannot test their cause ([`Cell::excluded`](super::Cell::excluded)).
    pub excluded: u32,
}

/// A class's figures: cells, correct ones, cells predicted as it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClassScore {
    pub cause: Cause,
    pub injected: u32,
    pub correct: u32,
    pub predicted: u32,
}

impl ClassScore {
    /// Correct over predicted; `None` when nothing was predicted as this class.
    pub fn precision(&self) -> Option<f64> {
        (self.predicted > 0).then(|| f64::from(self.correct) / f64::from(self.predicted))
    }

    /// Correct over injected.
    pub fn recall(&self) -> Option<f64> {
        (self.injected > 0).then(|| f64::from(self.correct) / f64::from(self.injected))
    }
}

/// The column a verdict counts in: a cause's own limit, `other` (latency, a limit no cause
/// injects) or `unknown` (no verdict).
pub fn column(predicted: &str) -> String {
    if predicted == UNKNOWN || Cause::ALL.iter().any(|c| c.expected() == predicted) {
        predicted.to_owned()
    } else {
        OTHER.to_owned()
    }
}

impl Confusion {
    pub fn of(results: &[CellResult]) -> Confusion {
        let mut counts = std::collections::BTreeMap::new();
        let mut excluded = 0;
        for r in results {
            if r.cell.excluded().is_some() {
                excluded += 1;
                continue;
            }
            *counts.entry((r.cell.cause, column(r.predicted()))).or_insert(0) += 1;
        }
        Confusion { counts, excluded }
    }

    fn count(&self, cause: Cause, column: &str) -> u32 {
        self.counts.get(&(cause, column.to_owned())).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u32 {
        self.counts.values().sum()
    }

    /// Cells without a verdict over all cells.
    pub fn unknown_rate(&self) -> f64 {
        let unknown: u32 = Cause::ALL.iter().map(|&c| self.count(c, UNKNOWN)).sum();
        f64::from(unknown) / f64::from(self.total().max(1))
    }

    pub fn score(&self, cause: Cause) -> ClassScore {
        ClassScore {
            cause,
            injected: self.counts.iter().filter(|((c, _), _)| *c == cause).map(|(_, n)| n).sum(),
            correct: self.count(cause, cause.expected()),
            predicted: Cause::ALL.iter().map(|&c| self.count(c, cause.expected())).sum(),
        }
    }
}

fn percent(v: Option<f64>) -> String {
    v.map_or("—".to_owned(), |v| format!("{:.0} %", 100.0 * v))
}

/// The confusion matrix and the scores, in Markdown.
pub fn summary(confusion: &Confusion) -> String {
    let columns: Vec<&str> = Cause::ALL.iter().map(|c| c.expected()).chain([OTHER, UNKNOWN]).collect();
    let mut out = String::new();
    let _ = writeln!(out, "| injected \\ verdict | {} | recall |", columns.join(" | "));
    let _ = writeln!(out, "|---|{}---:|", "---:|".repeat(columns.len()));
    for cause in Cause::ALL {
        let row: Vec<String> = columns.iter().map(|col| confusion.count(cause, col).to_string()).collect();
        let _ =
            writeln!(out, "| {} | {} | {} |", cause.key(), row.join(" | "), percent(confusion.score(cause).recall()));
    }
    let precision: Vec<String> = Cause::ALL.iter().map(|&c| percent(confusion.score(c).precision())).collect();
    let _ = writeln!(out, "| precision | {} | | | |", precision.join(" | "));
    let _ =
        write!(out, "\n{} cells; unknown (no verdict) {:.1} %.", confusion.total(), 100.0 * confusion.unknown_rate());
    if confusion.excluded > 0 {
        let _ = write!(out, " {} more cells excluded: they cannot test their cause (below).", confusion.excluded);
    }
    out.push('\n');
    out
}

/// Every cell: its cause, line, verdict, rate and evidence; misses marked.
pub fn cells(results: &[CellResult]) -> String {
    let mut out = String::new();
    out.push_str("| cell | verdict | | Mbit/s | evidence | the line | client | load |\n");
    out.push_str("|---|---|---|---:|---|---|---:|---:|\n");
    for r in results {
        let hit = match r.cell.excluded() {
            Some(why) => format!("excluded ({why})"),
            None if r.predicted() == r.cell.cause.expected() => String::new(),
            None => "**miss**".to_owned(),
        };
        let (verdict, rate, ev) = match (&r.verdict, &r.error) {
            (Some(v), _) => (
                limit(v),
                v["throughput"].as_f64().map_or("?".into(), |t| format!("{:.1}", t * 8.0 / 1e6)),
                evidence(v),
            ),
            (None, why) => {
                (UNKNOWN.to_owned(), "—".into(), why.clone().unwrap_or_default().replace('|', "/").replace('\n', " "))
            }
        };
        let client = if r.client_seconds.is_finite() { format!("{:.1} s", r.client_seconds) } else { "—".into() };
        let _ = writeln!(
            out,
            "| {} | {verdict} | {hit} | {rate} | {ev} | {} | {client} | {:.1} |",
            r.cell.key(),
            r.line,
            r.load
        );
    }
    out
}
