//! Drains the event queue in batches, off the forwarding path, into the
//! recording and any further consumers (the findings detectors).

use std::sync::{Arc, Mutex};

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
/// After a batch, the collector lets events gather this long before it
/// looks again: one wake-up per interval instead of one per command (each
/// wake-up is a context switch the relay's threads pay for). The queue
/// is sized to hold far more than an interval's worth.
const GATHER: std::time::Duration = std::time::Duration::from_millis(10);

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
            let full = batch.len() == BATCH;
            for event in batch.drain(..) {
                if let Event::Command(record) = event {
                    pool::recycle(record);
                }
            }
            if !full {
                tokio::time::sleep(GATHER).await;
            }
        }
    }
}
