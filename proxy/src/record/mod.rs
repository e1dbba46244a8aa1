//! Per-command records and their aggregates.
//!
//! The relay's [`Recorder`] (one per connection, on the forwarding path)
//! turns what the protocol state machine sees into compact [`Event`]s and
//! hands them to a bounded channel with `try_send`: when the channel is
//! full the event is counted as dropped and forwarding goes on. The
//! [`Collector`] drains the channel in batches, off the forwarding path, and
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
//!   the bounded channel ([`EventSink`]) they travel on;
//! - `collector`: drains the channel into `aggregate` ([`Aggregates`] per
//!   statement and connection, with `latency` histograms; `aggregate/merge` adds them
//!   together) and any further [`Consumer`]s (the findings detectors, and `windows`, the
//!   per-slot [`Windows`] behind `/report?window=`);
//! - `metric_state`: the counters and histograms `/metrics` exposes, with
//!   `statement_metrics` (per-statement series, bounded to the top N and `other`).

mod aggregate;
mod collector;
mod command;
mod compressibility;
mod event;
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
mod windows;

use std::sync::OnceLock;

use tokio::time::Instant;

pub use aggregate::{Aggregates, ConnectionStats, OTHER_FINGERPRINT, QueryStats, Totals};
pub use collector::{Collector, Consumer};
pub use command::{CommandRecord, Values};
pub use compressibility::{Compressibility, MeasureBudget, PayloadSample, ResponseSampler};
pub use event::{Event, EventSink};
pub use latency::{Latency, LatencySummary};
pub use metric_state::{BYTES_BUCKETS, BucketHistogram, CommandMetrics, SECONDS_BUCKETS};
pub use origin::Origin;
pub use recorder::{Recorder, RecorderSettings};
pub use recording::Recording;
pub use statement_metrics::{ROWS_BUCKETS, StatementMetrics, StatementSeries};
pub use tap::Tap;
pub use windows::{Window, WindowError, Windows};

/// Microseconds since the process's recording epoch: compact monotonic
/// timestamps that all connections share.
pub fn micros(at: Instant) -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    at.saturating_duration_since(epoch).as_micros() as u64
}
