//! What the link probes send to the collector of link verdicts, on a
//! channel of their own (so the link's observations never depend on
//! whether commands are recorded): bounded, `try_send`, a full channel
//! drops the event and counts it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::measurement::Measurement;
use super::verdict::Links;
use crate::inject::EmulatedLink;
use crate::sync::locked;

/// One observation of a connection's long-haul link.
#[derive(Clone, Debug)]
pub enum LinkEvent {
    /// A large transfer's limit, or a run of small responses judged latency-bound (boxed:
    /// one per large transfer, while `Rtt` events come with every reading).
    Measured {
        /// The relay's connection id.
        conn_id: u64,
        /// When the transfer ended, µs since the recording epoch.
        at_us: u64,
        /// What the transfer tracker measured, before words are put to it.
        measurement: Box<Measurement>,
    },
    /// The kernel's base RTT of an upstream socket, µs (one per reading).
    Rtt {
        /// `tcpi_min_rtt` (else the smoothed RTT), µs; never 0.
        base_rtt_us: u32,
    },
}

/// The probes' end of the channel. Cloned into every connection.
#[derive(Clone, Debug)]
pub struct LinkSink {
    tx: mpsc::Sender<LinkEvent>,
    dropped: Arc<AtomicU64>,
}

impl LinkSink {
    /// A channel holding at most `capacity` events.
    pub fn channel(capacity: usize) -> (LinkSink, mpsc::Receiver<LinkEvent>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (LinkSink { tx, dropped: Arc::default() }, rx)
    }

    /// Never waits: a full channel drops the event and counts it.
    pub fn send(&self, event: LinkEvent) {
        if self.tx.try_send(event).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Events applied to [`Links`] per lock.
const BATCH: usize = 256;

/// Applies link events to `links` until every probe's sender is gone; `emulated` says which
/// link `inject` emulates at the moment it is called.
pub async fn collect(
    mut rx: mpsc::Receiver<LinkEvent>,
    links: Arc<Mutex<Links>>,
    emulated: impl Fn() -> Option<EmulatedLink>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let emulated = emulated();
        let mut links = locked(&links);
        links.set_emulated(emulated);
        for event in batch.drain(..) {
            match event {
                LinkEvent::Measured { conn_id, at_us, measurement } => {
                    let v = links.add(conn_id, at_us, *measurement);
                    tracing::info!(conn.id = conn_id, limit = v.measurement.limit.name(), "link: {}", v.summary);
                }
                LinkEvent::Rtt { base_rtt_us } => links.rtt.observe(f64::from(base_rtt_us) / 1e6),
            }
        }
    }
}
