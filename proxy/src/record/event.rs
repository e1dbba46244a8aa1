//! What recording sends from the forwarding path to the collector, and the
//! bounded queue it travels on: a send never waits; a full queue drops the
//! event and counts it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::Poll;

use atomic_waker::AtomicWaker;
use crossbeam_queue::ArrayQueue;

use super::CommandRecord;
use crate::live::Legs;

/// What the relay tells the collector: one word and a tag (the rare, larger events are
/// boxed), so that the queue's slots are small and a record moves in and out of them cheaply.
#[derive(Debug)]
pub enum Event {
    /// A client logged in (the handshake was relayed).
    Connected(Box<Connected>),
    /// A command and its response.
    Command(Box<CommandRecord>),
    /// The server accepted a new default schema or user (`COM_INIT_DB`,
    /// `USE`, `COM_CHANGE_USER`).
    Identity(Box<IdentityChange>),
    /// The connection ended.
    Closed {
        /// The connection that ended.
        conn_id: u64,
        /// When the relay saw it end, µs since the recording epoch.
        at_us: u64,
    },
}

/// A client that logged in ([`Event::Connected`]).
#[derive(Debug)]
pub struct Connected {
    /// The relay's id for this connection, shared by all its later events.
    pub conn_id: u64,
    /// The client's address as the listener accepted it.
    pub client: Arc<str>,
    /// How each leg is carried (TLS, compression) and the client library.
    pub legs: Box<Legs>,
    /// The user it logged in as, from the handshake response.
    pub user: Arc<str>,
    /// The default schema from the handshake response; `None` when it named none.
    pub schema: Option<Arc<str>>,
    /// When the client connected (its TCP accept), µs since the recording epoch.
    pub at_us: u64,
}

/// A connection's new default schema or user ([`Event::Identity`]).
#[derive(Debug)]
pub struct IdentityChange {
    /// The connection whose identity changed.
    pub conn_id: u64,
    /// The user now logged in (changed only by `COM_CHANGE_USER`).
    pub user: Arc<str>,
    /// The default schema now selected; `None` when there is none.
    pub schema: Option<Arc<str>>,
}

/// The sending end of the event queue, one per connection (the collector holds the
/// receiving end, [`EventReceiver`]): a bounded lock-free array (crossbeam's `ArrayQueue`)
/// and the collector's waker. A send is a push and, when the collector waits for events, a
/// wake-up. tokio's bounded channel, used before, cost some 150 instructions a command
/// between its semaphore, its block list and its receiver.
pub struct EventSink {
    shared: Arc<Shared>,
}

/// The receiving end: the collector's.
pub struct EventReceiver {
    shared: Arc<Shared>,
}

struct Shared {
    queue: ArrayQueue<Event>,
    /// The collector, when it waits for events.
    collector: AtomicWaker,
    /// The collector, when it lets events gather ([`EventReceiver::gather`]): woken by the
    /// last sender's going, and by a send that leaves the queue [`Shared::filling`] — not by
    /// every send, or it would not gather.
    gathering: AtomicWaker,
    /// A quarter of the queue: a gathering collector is woken once this many are queued, so
    /// that however long it gathers, a burst does not fill the queue and lose events.
    filling: usize,
    /// Live senders: once the last is gone, the collector takes what is left and ends.
    senders: AtomicUsize,
    dropped: Arc<AtomicU64>,
}

impl EventSink {
    /// A queue of `capacity` events (at least 1), allocated at once: 32 bytes an event.
    pub fn channel(capacity: usize) -> (EventSink, EventReceiver) {
        let shared = Arc::new(Shared {
            queue: ArrayQueue::new(capacity.max(1)),
            collector: AtomicWaker::new(),
            gathering: AtomicWaker::new(),
            filling: (capacity / 4).max(1),
            senders: AtomicUsize::new(1),
            dropped: Arc::default(),
        });
        (EventSink { shared: shared.clone() }, EventReceiver { shared })
    }

    /// Queues `event`, or counts it as dropped when the queue is full: never waits.
    pub fn send(&self, event: Event) {
        match self.shared.queue.push(event) {
            Ok(()) => {
                self.shared.collector.wake();
                if self.shared.queue.len() >= self.shared.filling {
                    self.shared.gathering.wake();
                }
            }
            Err(_) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Events dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// The dropped-events counter itself, for a gauge that outlives the senders.
    pub fn dropped_counter(&self) -> Arc<AtomicU64> {
        self.shared.dropped.clone()
    }
}

impl Clone for EventSink {
    fn clone(&self) -> EventSink {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        EventSink { shared: self.shared.clone() }
    }
}

impl Drop for EventSink {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.collector.wake();
            self.shared.gathering.wake();
        }
    }
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink").field("queued", &self.shared.queue.len()).finish_non_exhaustive()
    }
}

impl EventReceiver {
    /// Waits for events and moves up to `limit` of them into `batch`: how many, or 0 once
    /// every sender is gone and nothing is left. For tests that read the queue whole; the
    /// collector waits ([`EventReceiver::ready`]) and takes under its lock.
    #[cfg(test)]
    pub async fn recv_many(&mut self, batch: &mut Vec<Event>, limit: usize) -> usize {
        while self.ready().await {
            let taken = self.take(batch, limit);
            if taken > 0 {
                return taken;
            }
        }
        0
    }

    /// Lets events gather for `interval`, or until the last sender goes (so that the final
    /// report waits for no interval): sends do not end it, unless they leave the queue a
    /// quarter full.
    pub async fn gather(&self, interval: std::time::Duration) {
        let mut sleep = std::pin::pin!(tokio::time::sleep(interval));
        std::future::poll_fn(|cx| {
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            self.shared.gathering.register(cx.waker());
            if self.shared.senders.load(Ordering::Acquire) == 0 || self.shared.queue.len() >= self.shared.filling {
                return Poll::Ready(());
            }
            Poll::Pending
        })
        .await;
    }

    /// Waits until events are queued: true, or false once every sender is gone and nothing
    /// is left. Takes none: the collector takes them under its lock ([`EventReceiver::take`]),
    /// where a reader catching up takes them too.
    pub async fn ready(&self) -> bool {
        std::future::poll_fn(|cx| {
            if !self.shared.queue.is_empty() {
                return Poll::Ready(true);
            }
            self.shared.collector.register(cx.waker());
            // Looked at again once registered: a send just before woke nobody.
            if !self.shared.queue.is_empty() {
                return Poll::Ready(true);
            }
            if self.shared.senders.load(Ordering::Acquire) == 0 {
                // The last sender went after its last send: one more look for that.
                return Poll::Ready(!self.shared.queue.is_empty());
            }
            Poll::Pending
        })
        .await
    }

    /// A second handle on the same queue, for the collector to wait on while the first is
    /// behind the lock that takes from it: takes stay one at a time, in order.
    pub(super) fn waiter(&self) -> EventReceiver {
        EventReceiver { shared: self.shared.clone() }
    }

    /// How many events are queued now.
    pub fn queued(&self) -> usize {
        self.shared.queue.len()
    }

    /// Moves up to `limit` queued events into `batch`, in the order they were sent, without
    /// waiting: how many.
    pub fn take(&self, batch: &mut Vec<Event>, limit: usize) -> usize {
        let mut taken = 0;
        while taken < limit {
            let Some(event) = self.shared.queue.pop() else { break };
            batch.push(event);
            taken += 1;
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_two_words() {
        assert!(size_of::<Event>() <= 24, "{}", size_of::<Event>());
    }

    #[tokio::test]
    async fn events_arrive_in_order_until_the_last_sender_goes() {
        let (sink, mut rx) = EventSink::channel(4);
        let other = sink.clone();
        let closed = |conn_id| Event::Closed { conn_id, at_us: 0 };
        for conn_id in 0..6 {
            sink.send(closed(conn_id));
        }
        assert_eq!(sink.dropped(), 2, "a full queue drops and counts");
        let mut batch = Vec::new();
        assert_eq!(rx.recv_many(&mut batch, 3).await, 3);
        assert_eq!(rx.recv_many(&mut batch, 3).await, 1);
        let ids: Vec<u64> =
            batch.iter().map(|e| if let Event::Closed { conn_id, .. } = e { *conn_id } else { 99 }).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
        // Waiting: woken by a send from another thread, then by the last sender's going.
        let waiter = tokio::spawn(async move {
            let mut batch = Vec::new();
            let first = rx.recv_many(&mut batch, 8).await;
            let end = rx.recv_many(&mut batch, 8).await;
            (first, end)
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        std::thread::spawn(move || other.send(closed(7))).join().expect("the sender thread");
        // The waiter takes that one and waits again, until the last sender goes.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(sink);
        let waited = tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await;
        assert_eq!(waited.expect("woken each time").expect("the waiter"), (1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_queue_a_quarter_full_ends_the_gathering() {
        let (sink, rx) = EventSink::channel(8);
        let start = tokio::time::Instant::now();
        let sender = tokio::spawn(async move {
            for _ in 0..2 {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                sink.send(Event::Closed { conn_id: 1, at_us: 0 });
            }
            sink
        });
        rx.gather(std::time::Duration::from_secs(60)).await;
        assert_eq!(start.elapsed(), std::time::Duration::from_secs(2), "ended by the second event, a quarter of 8");
        drop(sender.await.expect("the sender"));
    }

    #[tokio::test(start_paused = true)]
    async fn gathering_outlasts_sends_and_ends_when_the_last_sender_goes() {
        let (sink, mut rx) = EventSink::channel(16);
        let start = tokio::time::Instant::now();
        let sender = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            sink.send(Event::Closed { conn_id: 1, at_us: 0 });
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            drop(sink);
        });
        rx.gather(std::time::Duration::from_secs(60)).await;
        assert_eq!(start.elapsed(), std::time::Duration::from_secs(2), "ended by the last sender, not the send");
        sender.await.expect("the sender");
        let mut batch = Vec::new();
        assert_eq!(rx.recv_many(&mut batch, 8).await, 1);
        assert_eq!(rx.recv_many(&mut batch, 8).await, 0, "no sender left");
        rx.gather(std::time::Duration::from_secs(60)).await;
        assert_eq!(start.elapsed(), std::time::Duration::from_secs(2), "no sender: no gathering");
    }
}
