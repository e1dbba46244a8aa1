//! Drains the event queue in batches, off the forwarding path, into the
//! recording and any further consumers (the findings detectors). A reader of
//! the recording applies what is queued first ([`CatchUp`]), so it misses no command.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Event, EventReceiver, MeasureBudget, Recording, pool};
use crate::sync::locked;

/// Something else that wants every event, in order (a detector). Gets
/// them a batch at a time, so it can take its own lock once per batch.
pub trait Consumer: Send {
    /// Called once per batch drained from the queue, after the recording took it.
    fn events(&mut self, batch: &[Event]);
}

/// The one task that drains the event queue; owns the consumers, shares the recording behind a mutex.
pub struct Collector {
    /// Waited on for events; the takes are the [`Drainer`]'s.
    rx: EventReceiver,
    drainer: Arc<Mutex<Drainer>>,
}

/// What applies events: the collector's task between its waits, and a reader catching up
/// ([`CatchUp::now`]). One lock, so that events are applied a batch at a time, in order.
struct Drainer {
    rx: EventReceiver,
    recording: Arc<Mutex<Recording>>,
    consumers: Vec<Box<dyn Consumer>>,
    budget: MeasureBudget,
    batch: Vec<Event>,
}

/// A reader's handle on the collector. The collector lets events gather for up to
/// [`GATHER_MAX`], so a reader of the recording or of a consumer's state (a report,
/// `/metrics`, `/connections`, `SHOW RTTSCOPE`) first applies what is queued itself, on
/// its own thread, without waiting for the collector's task — which may be asleep,
/// or gone. Sends wake no one for it: the forwarding path pays nothing.
#[derive(Clone)]
pub struct CatchUp(Arc<Mutex<Drainer>>);

impl CatchUp {
    /// Applies every event queued before this call, so that the recording and the
    /// consumers include them. Events sent meanwhile are left to the collector: a reader
    /// never chases a busy relay.
    pub fn now(&self) {
        let mut drainer = locked(&self.0);
        let mut queued = drainer.rx.queued();
        while queued > 0 {
            let taken = drainer.apply(queued.min(BATCH));
            if taken == 0 {
                break;
            }
            queued -= taken;
        }
    }
}

impl std::fmt::Debug for CatchUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatchUp").finish_non_exhaustive()
    }
}

impl Drainer {
    /// Takes up to `limit` queued events and applies them to the recording, then to the
    /// consumers: how many.
    fn apply(&mut self, limit: usize) -> usize {
        let taken = self.rx.take(&mut self.batch, limit);
        if taken == 0 {
            return 0;
        }
        // Samples of results are compressed here, before the lock, within a budget.
        let now = tokio::time::Instant::now();
        for event in &mut self.batch {
            if let Event::Command(r) = event {
                self.budget.measure(&mut r.payload_sample, now);
            }
        }
        {
            let mut recording = locked(&self.recording);
            for event in &self.batch {
                recording.apply(event);
            }
        }
        for consumer in &mut self.consumers {
            consumer.events(&self.batch);
        }
        for event in self.batch.drain(..) {
            if let Event::Command(record) = event {
                pool::recycle(record);
            }
        }
        taken
    }
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
/// a wake-up still serves tens of commands. Why as long as a second: at 100 queries a second
/// a longest of 100 ms woke the collector ten times a second, twice each (tokio's timer wheel
/// wakes once to move a timer past 64 ms to a finer level, then at its deadline), which cost
/// the main runtime's threads 8-10 µs of CPU per query; at a second, 2-3 µs (per-thread
/// schedstat, 600 prepared selects from Node's mysql2). Readers catch up first ([`CatchUp`]),
/// so none sees a command late; a queue a quarter full ends the gathering
/// ([`EventReceiver::gather`]; `record.event_queue`, 65,536 events by default), so a burst
/// after a quiet spell loses nothing.
const GATHER_MAX: Duration = Duration::from_secs(1);
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
        let drainer = Drainer {
            rx: rx.waiter(),
            recording,
            consumers: Vec::new(),
            budget: MeasureBudget::default(),
            batch: Vec::with_capacity(BATCH),
        };
        Collector { rx, drainer: Arc::new(Mutex::new(drainer)) }
    }

    /// Adds a consumer told every batch after the recording; call before [`Collector::run`].
    pub fn add_consumer(&mut self, consumer: Box<dyn Consumer>) {
        locked(&self.drainer).consumers.push(consumer);
    }

    /// The handle with which a reader catches up before it reads.
    pub fn catch_up(&self) -> CatchUp {
        CatchUp(self.drainer.clone())
    }

    /// Runs until every sender is gone (the relay stopped), so events sent
    /// before shutdown are all applied before the final report.
    pub async fn run(self) {
        let mut gather = GATHER;
        while self.rx.ready().await {
            let taken = locked(&self.drainer).apply(BATCH);
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

    /// Counts the events it is given, as a detector would see them.
    struct Counting(Arc<std::sync::atomic::AtomicUsize>);

    impl Consumer for Counting {
        fn events(&mut self, batch: &[Event]) {
            self.0.fetch_add(batch.len(), std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_sees_every_event_sent_before_it_asked_however_long_the_collector_gathers() {
        let (sink, rx) = super::super::EventSink::channel(1024);
        let windows =
            super::super::Windows::new(Duration::from_secs(1), Duration::from_secs(60), 10, 0, Arc::default());
        let recording = Arc::new(Mutex::new(Recording::new(super::super::Aggregates::new(10, 0), windows)));
        let mut collector = Collector::new(rx, recording);
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        collector.add_consumer(Box::new(Counting(seen.clone())));
        let catch_up = collector.catch_up();
        let task = tokio::spawn(collector.run());
        let closed = |conn_id| Event::Closed { conn_id, at_us: 0 };
        // 100 events a second: the collector's interval grows to the longest.
        for conn_id in 0..100 {
            tokio::time::sleep(10 * MS).await;
            sink.send(closed(conn_id));
        }
        let count = || seen.load(std::sync::atomic::Ordering::Relaxed);
        assert!(count() < 100, "the collector gathers, what came since waits in the queue: {}", count());
        catch_up.now();
        assert_eq!(count(), 100, "the reader applied them itself");
        // With the collector gone too.
        sink.send(closed(100));
        task.abort();
        let _ = task.await;
        catch_up.now();
        assert_eq!(count(), 101, "no collector to wait for");
    }

    #[test]
    fn the_interval_grows_while_batches_are_small_and_shrinks_when_they_are_large() {
        assert_eq!(next_gather(GATHER, 1), 20 * MS, "one event in 10 ms: wait longer");
        assert_eq!(next_gather(800 * MS, 10), GATHER_MAX);
        assert_eq!(next_gather(GATHER_MAX, 0), GATHER_MAX, "never past the longest");
        assert_eq!(next_gather(80 * MS, FEW), 80 * MS, "a batch of tens: kept");
        assert_eq!(next_gather(80 * MS, BATCH / 2 + 1), 40 * MS, "a batch of hundreds: shorter");
        assert_eq!(next_gather(GATHER, BATCH - 1), GATHER, "never under the first");
    }
}
