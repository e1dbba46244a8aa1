//! The `report` section: the final report, periodic snapshots, and the rolling windows
//! `GET /report?window=` reads.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Checker;
use crate::units::HumanDuration;

/// Report rendering.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportFormat {
    /// The versioned JSON schema.
    #[default]
    Json,
    /// Plain text for terminals.
    Text,
    /// A self-contained HTML page.
    Html,
}

impl FromStr for ReportFormat {
    type Err = crate::ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "json" => Ok(ReportFormat::Json),
            "text" => Ok(ReportFormat::Text),
            "html" => Ok(ReportFormat::Html),
            _ => Err(crate::ValueError::new("report format", s, "expected one of: json, text, html")),
        }
    }
}

impl fmt::Display for ReportFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReportFormat::Json => "json",
            ReportFormat::Text => "text",
            ReportFormat::Html => "html",
        })
    }
}

/// Most window slots kept: at one a minute, a day. Bounds the ring's memory whatever
/// `window_max` and `window_resolution` say.
pub const MAX_WINDOW_SLOTS: u64 = 1440;

/// `report`: the final report written on shutdown, snapshots written while running, and
/// the rolling windows of `GET /report?window=`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReportConfig {
    /// Write the final report to this file on shutdown. Unset (the default): no file; the
    /// report is still available from the admin API.
    pub path: Option<PathBuf>,
    /// `json`, `text` or `html`, for the final report and the snapshots. Default `json`.
    pub format: ReportFormat,
    /// Include one example statement per fingerprint, with its literal values. Off by
    /// default: literal values (which may be personal data) never appear in reports unless
    /// this is `true`.
    pub examples: bool,
    /// Write a snapshot of the cumulative report this often, so a process killed without a
    /// clean stop (SIGKILL, the OOM killer) still leaves its last one. At least `1s`; needs
    /// `dir`. Unset (the default): no snapshots.
    pub every: Option<HumanDuration>,
    /// Where snapshots go, as `rttscope-report-<UTC time>.<json|txt|html>`, each written
    /// atomically (a temporary file in the same directory, fsync, rename). Created if
    /// missing. Unset (the default): no snapshots.
    pub dir: Option<PathBuf>,
    /// Snapshots kept in `dir`: after each write the oldest beyond this many are deleted.
    /// At least 1. Default `24`.
    pub keep: usize,
    /// The longest window `GET /report?window=` can report on. The recording is kept in
    /// slots of `window_resolution`, at most 1440 of them; `0` keeps none (only the
    /// cumulative report). At most `24h`. Default `1h`.
    pub window_max: HumanDuration,
    /// The slot length of the rolling windows: a window covers whole slots, so it may
    /// start up to one slot earlier than asked (the report says where it starts). At
    /// least `1s`, at most `window_max`. Default `1m`.
    pub window_resolution: HumanDuration,
}

impl Default for ReportConfig {
    fn default() -> Self {
        ReportConfig {
            path: None,
            format: ReportFormat::Json,
            examples: false,
            every: None,
            dir: None,
            keep: 24,
            window_max: HumanDuration::from_secs(3600),
            window_resolution: HumanDuration::from_secs(60),
        }
    }
}

impl ReportConfig {
    pub(crate) fn check(&self, c: &mut Checker<'_>) {
        if let Some(path) = &self.path {
            c.require(!path.as_os_str().is_empty(), "path", "must not be empty; leave it unset for no report file");
        }
        if let Some(every) = self.every {
            c.require(every.get() >= SECOND, "every", format!("must be at least 1s, not {every}"));
            c.require(self.dir.is_some(), "dir", "must be set when report.every is (where do snapshots go?)");
        }
        if let Some(dir) = &self.dir {
            c.require(!dir.as_os_str().is_empty(), "dir", "must not be empty; leave it unset for no snapshots");
        }
        c.require(self.keep >= 1, "keep", "must be at least 1");
        let (max, resolution) = (self.window_max.get(), self.window_resolution.get());
        c.require(max <= DAY, "window_max", format!("must be at most 24h, not {}", self.window_max));
        c.require(
            resolution >= SECOND,
            "window_resolution",
            format!("must be at least 1s, not {}", self.window_resolution),
        );
        if !max.is_zero() && max <= DAY && resolution >= SECOND {
            c.require(
                resolution <= max,
                "window_resolution",
                format!("must be at most window_max ({}), not {}", self.window_max, self.window_resolution),
            );
            let slots = max.as_nanos().div_ceil(resolution.as_nanos());
            c.require(
                slots <= u128::from(MAX_WINDOW_SLOTS),
                "window_max",
                format!(
                    "{} in slots of {} is {slots} slots; at most {MAX_WINDOW_SLOTS} are kept (raise window_resolution)",
                    self.window_max, self.window_resolution
                ),
            );
        }
    }

    /// Whether snapshots are on: `every` and `dir` both set (validation demands both).
    pub fn snapshots(&self) -> Option<(std::time::Duration, &std::path::Path)> {
        Some((self.every?.get(), self.dir.as_deref()?))
    }
}

const SECOND: std::time::Duration = std::time::Duration::from_secs(1);
const DAY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
