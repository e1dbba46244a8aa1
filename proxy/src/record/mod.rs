//! Per-command records and their aggregates.
//!
//! The relay's [`Recorder`] (one per connection, on the forwarding path)
//! turns what the protocol state machine sees into compact [`Event`]s and
//! hands them to a bounded queue, never waiting: when the queue is
//! full the event is counted as dropped and forwarding goes on. The
//! [`Collector`] drains the queue in batches, off the forwarding path, and
//! keeps the [`Aggregates`] that metrics and reports read.
//!
//! Files, in the order data flows through them:
//! - `tap`: the [`Tap`] trait, what the relay tells every observer;
//! - `recorder`: the per-connection [`Recorder`], built from
//!   `texts` (SQL to fingerprint, with a cache of normalised texts),
//!   `origin` (the sqlcommenter tags that place a statement in the application),
//!   `statements` (the prepared-statement registry) and
//!   `rows` (values sampled from results, to link N+1 loops to parents),
//!   `retransmits` (which commands waited for a retransmission) and
//!   `compressibility` (slices of large results, measured by the collector);
//! - `command`: the [`CommandRecord`] it emits; `event`: the [`Event`]s and
//!   the bounded queue ([`EventSink`]) they travel on;
//! - `collector`: drains the queue into `aggregate` ([`Aggregates`] per
//!   statement and connection, with `latency` histograms; `aggregate/merge` adds them
//!   together) and any further [`Consumer`]s (the findings detectors, and `windows`, the
//!   per-slot [`Windows`] behind `/report?window=`);
//! - `wall`: [`WallUnion`], wall-clock time covered by intervals with overlaps counted
//!   once (the recording's and every finding's time, `docs/time-model.md`);
//! - `metric_state`: the counters and histograms `/metrics` exposes, with
//!   `statement_metrics` (per-statement series, bounded to the top N and `other`).

mod aggregate;
mod collector;
mod command;
mod compressibility;
mod event;
mod indexed;
mod latency;
mod metric_state;
mod origin;
mod pool;
mod recorder;
mod recording;
mod retransmits;
mod rows;
mod statement_metrics;
mod statements;
mod tap;
mod texts;
mod wall;
mod windows;

use std::sync::OnceLock;

use tokio::time::Instant;

pub use aggregate::{Aggregates, ConnectionStats, OTHER_FINGERPRINT, QueryStats, Totals};
pub use collector::{CatchUp, Collector, Consumer};
pub use command::{CommandRecord, LargeResponses, Values};
pub use compressibility::{Compressibility, MeasureBudget, PayloadSample, ResponseSampler};
pub use event::{Connected, Event, EventReceiver, EventSink, IdentityChange};
pub use indexed::IndexedMap;
pub use latency::{Latency, LatencySummary};
pub use metric_state::{BYTES_BUCKETS, BucketHistogram, CommandMetrics, SECONDS_BUCKETS};
pub use origin::Origin;
pub use recorder::{Recorder, RecorderSettings};
pub use recording::Recording;
pub use statement_metrics::{ROWS_BUCKETS, StatementMetrics, StatementSeries};
pub use tap::Tap;
pub(crate) use tap::tell_each;
pub use wall::WallUnion;
pub use windows::{Window, WindowError, Windows};

/// The recording epoch, as an `Instant` and on the monotonic clock in ns. The clock is read
/// just before and just after the `Instant` (the tightest of a few tries), and the epoch
/// put halfway: the two then agree to well within a microsecond.
fn epoch() -> &'static (Instant, u64) {
    static EPOCH: OnceLock<(Instant, u64)> = OnceLock::new();
    EPOCH.get_or_init(|| {
        let mut best: Option<(Instant, u64, u64)> = None;
        for _ in 0..8 {
            let before = crate::sys::monotonic_ns();
            let instant = Instant::now();
            let after = crate::sys::monotonic_ns();
            if best.is_none_or(|(_, b, a)| after - before < a - b) {
                best = Some((instant, before, after));
            }
        }
        let (instant, before, after) = best.unwrap_or_else(|| (Instant::now(), 0, 0));
        (instant, before + (after - before) / 2)
    })
}

/// Microseconds since the process's recording epoch: compact monotonic
/// timestamps that all connections share.
pub fn micros(at: Instant) -> u64 {
    at.saturating_duration_since(epoch().0).as_micros() as u64
}

/// `micros(Instant::now())`, for half the instructions: the monotonic clock `Instant` reads
/// too, in µs, without an `Instant` to take the epoch from (a subtraction of two `timespec`s
/// alone is some 30 instructions). Every chunk read is stamped with it. The two agree to
/// within a microsecond. Unit tests read tokio's clock instead, which they may pause.
#[inline(always)]
pub fn now_us() -> u64 {
    if cfg!(test) {
        return micros(Instant::now());
    }
    clock_us()
}

/// [`now_us`] from the monotonic clock.
#[inline(always)]
fn clock_us() -> u64 {
    crate::sys::monotonic_ns().saturating_sub(epoch().1) / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock read between two `Instant`s reads between them (each truncates to whole
    /// µs on its own: one apart at most), at the epoch and 20 ms on.
    #[test]
    fn the_clock_reads_what_instants_do() {
        let between = || {
            let before = micros(Instant::now());
            let clock = clock_us();
            let after = micros(Instant::now());
            assert!(before <= clock + 1 && clock <= after + 1, "{before} {clock} {after}");
        };
        for _ in 0..1000 {
            between();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        between();
    }
}
