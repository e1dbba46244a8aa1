//! What recording sends from the forwarding path to the collector, and the
//! bounded channel it travels on: `try_send`, never a wait; a full channel
//! drops the event and counts it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use super::CommandRecord;
use crate::live::Legs;

/// What the relay tells the collector. Records travel inline (no box): the
/// channel's slots are allocated in blocks, so a record costs no allocation.
#[derive(Debug)]
pub enum Event {
    /// A client logged in (the handshake was relayed).
    Connected {
        /// The relay's id for this connection, shared by all its later events.
        conn_id: u64,
        /// The client's address as the listener accepted it.
        client: Arc<str>,
        /// How each leg is carried (TLS, compression) and the client library.
        legs: Box<Legs>,
        /// The user it logged in as, from the handshake response.
        user: Arc<str>,
        /// The default schema from the handshake response; `None` when it named none.
        schema: Option<Arc<str>>,
        /// When the client connected (its TCP accept), µs since the recording epoch.
        at_us: u64,
    },
    /// A command and its response.
    Command(Box<CommandRecord>),
    /// The server accepted a new default schema or user (`COM_INIT_DB`,
    /// `USE`, `COM_CHANGE_USER`).
    Identity {
        /// The connection whose identity changed.
        conn_id: u64,
        /// The user now logged in (changed only by `COM_CHANGE_USER`).
        user: Arc<str>,
        /// The default schema now selected; `None` when there is none.
        schema: Option<Arc<str>>,
    },
    /// The connection ended.
    Closed {
        /// The connection that ended.
        conn_id: u64,
        /// When the relay saw it end, µs since the recording epoch.
        at_us: u64,
    },
}

/// The relay's end of the event channel. Cloned into every connection.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: mpsc::Sender<Event>,
    dropped: Arc<AtomicU64>,
}

impl EventSink {
    /// A channel holding at most `capacity` events.
    pub fn channel(capacity: usize) -> (EventSink, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (EventSink { tx, dropped: Arc::default() }, rx)
    }

    /// Never waits: a full channel drops the event and counts it.
    pub fn send(&self, event: Event) {
        if self.tx.try_send(event).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Events dropped because the collector fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The drop counter alone, for readers that must not hold a sender
    /// (which would keep the channel open past shutdown).
    pub fn dropped_counter(&self) -> Arc<AtomicU64> {
        self.dropped.clone()
    }
}
