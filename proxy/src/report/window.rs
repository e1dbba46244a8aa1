//! `window`: which stretch of the recording a report covers — all of it since start (or
//! the last reset), or a rolling window of the last N minutes — in wall-clock time and on
//! the recording's clock.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// Whether a report covers the whole recording or a rolling window of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WindowKind {
    /// Since start or the last reset.
    Cumulative,
    /// The last `requested_us`, in whole slots of `resolution_us`.
    Rolling,
}

/// `window`: the stretch of the recording a report covers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowReport {
    /// The whole recording or a rolling window; decides what `requested_us` and `resolution_us` mean.
    pub kind: WindowKind,
    /// RFC 3339, UTC, to the millisecond.
    pub start: String,
    /// When the report was built; `start` is this minus the span, so both read the same wall clock.
    pub end: String,
    /// The same instants on the recording's clock, µs.
    pub start_us: u64,
    /// When the report was built, µs on the recording's clock.
    pub end_us: u64,
    /// What was asked for: the window's length for a rolling report; `end_us - start_us`
    /// for a cumulative one.
    pub requested_us: u64,
    /// A rolling window's slot length (it starts at a slot boundary); 0 for cumulative.
    pub resolution_us: u64,
    /// Whether `findings` covers just this window: a rolling report lists the occurrences
    /// that ended in it and the runs in progress. (Reports that left findings out of a
    /// rolling window said `false`.)
    pub findings: bool,
}

impl WindowReport {
    /// The whole recording, from `since_us` to `now_us`.
    pub fn cumulative(since_us: u64, now_us: u64) -> WindowReport {
        let length = now_us.saturating_sub(since_us);
        WindowReport {
            kind: WindowKind::Cumulative,
            requested_us: length,
            resolution_us: 0,
            findings: true,
            ..WindowReport::span(since_us, now_us)
        }
    }

    /// The last `requested_us` up to `now_us`, which in whole slots of `resolution_us`
    /// began at `start_us`.
    pub fn rolling(start_us: u64, now_us: u64, requested_us: u64, resolution_us: u64) -> WindowReport {
        WindowReport {
            kind: WindowKind::Rolling,
            requested_us,
            resolution_us,
            findings: true,
            ..WindowReport::span(start_us, now_us)
        }
    }

    fn span(start_us: u64, end_us: u64) -> WindowReport {
        let now = SystemTime::now();
        let ago = Duration::from_micros(end_us.saturating_sub(start_us));
        let wall = |t: SystemTime| humantime::format_rfc3339_millis(t).to_string();
        WindowReport {
            kind: WindowKind::Cumulative,
            start: wall(now.checked_sub(ago).unwrap_or(SystemTime::UNIX_EPOCH)),
            end: wall(now),
            start_us,
            end_us,
            requested_us: 0,
            resolution_us: 0,
            findings: true,
        }
    }
}
