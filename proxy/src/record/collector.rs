//! Drains the event queue in batches, off the forwarding path, into the
//! recording and any further consumers (the findings detectors).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Event, EventReceiver, MeasureBudget, Recording, pool};

/// Something else that wants every event, in order (a detector). Gets
/// them a batch at a time, so it can take its own lock once per batch.
pub trait Consumer: Send {
    /// Called once per batch drained from the queue, after the recording took it.
    fn events(&mut self, batch: &[Event]);
}

/// The one task that drains the event queue; owns the consumers, shares the recording behind a mutex.
pub struct Collector {
    rx: EventReceiver,
    recording: Arc<Mutex<Recording>>,
    consumers: Vec<Box<dyn Consumer>>,
}

/// Events taken from the queue per lock of the recording.
const BATCH: usize = 512;
/// After a batch, the collector lets events gather before it looks again: one wake-up per
/// interval instead of one per command (each wake-up is a context switch the relay's
/// threads pay for, and some 4,000 instructions of the runtime's however few events it
/// brings). This long at first, and again when batches come large.
const GATHER: Duration = Duration::from_millis(10);
/// The longest it lets them gather. The interval doubles after a batch of fewer than
/// [`FEW`] events and halves after one of more than half a [`BATCH`], so that at a low rate
/// a wake-up still serves tens of commands — 100 queries a second paid a wake-up each at
/// `GATHER` — while a report or `/metrics` sees a command at most this late. The queue
/// (`record.event_queue`, 65,536 events by default) holds what arrives meanwhile at
/// anything up to hundreds of thousands of events a second.
const GATHER_MAX: Duration = Duration::from_millis(100);
/// A batch smaller than this lengthens the interval.
const FEW: usize = 64;

/// The gathering interval after a batch of `taken` events, from `gather`.
fn next_gather(gather: Duration, taken: usize) -> Duration {
    if taken < FEW {
        (gather * 2).min(GATHER_MAX)
    } else if taken > BATCH / 2 {
        (gather / 2).max(GATHER)
    } else {
        gather
    }
}

impl Collector {
    /// Applies events to `recording`, which reports and `/metrics` lock to read.
    pub fn new(rx: EventReceiver, recording: Arc<Mutex<Recording>>) -> Collector {
        Collector { rx, recording, consumers: Vec::new() }
    }

    /// Adds a consumer told every batch after the recording; call before [`Collector::run`].
    pub fn add_consumer(&mut self, consumer: Box<dyn Consumer>) {
        self.consumers.push(consumer);
    }

    /// Runs until every sender is gone (the relay stopped), so events sent
    /// before shutdown are all applied before the final report.
    pub async fn run(mut self) {
        let mut batch = Vec::with_capacity(BATCH);
        let mut budget = MeasureBudget::default();
        let mut gather = GATHER;
        while self.rx.recv_many(&mut batch, BATCH).await > 0 {
            // Samples of results are compressed here, before the lock, within a budget.
            let now = tokio::time::Instant::now();
            for event in &mut batch {
                if let Event::Command(r) = event {
                    budget.measure(&mut r.payload_sample, now);
                }
            }
            {
                let Ok(mut recording) = self.recording.lock() else { return };
                for event in &batch {
                    recording.apply(event);
                }
            }
            for consumer in &mut self.consumers {
                consumer.events(&batch);
            }
            let taken = batch.len();
            for event in batch.drain(..) {
                if let Event::Command(record) = event {
                    pool::recycle(record);
                }
            }
            if taken < BATCH {
                gather = next_gather(gather, taken);
                self.rx.gather(gather).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_interval_grows_while_batches_are_small_and_shrinks_when_they_are_large() {
        assert_eq!(next_gather(GATHER, 1), 20 * MS, "one event in 10 ms: wait longer");
        assert_eq!(next_gather(80 * MS, 10), GATHER_MAX);
        assert_eq!(next_gather(GATHER_MAX, 0), GATHER_MAX, "never past the longest");
        assert_eq!(next_gather(80 * MS, FEW), 80 * MS, "a batch of tens: kept");
        assert_eq!(next_gather(80 * MS, BATCH / 2 + 1), 40 * MS, "a batch of hundreds: shorter");
        assert_eq!(next_gather(GATHER, BATCH - 1), GATHER, "never under the first");
    }
}
