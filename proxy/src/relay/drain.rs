//! The shutdown signal as connections see it. Each connection polls it on
//! every turn of its loop, so it must cost no shared lock: a shared flag,
//! and a waker per connection registered with atomics. The registry of
//! wakers is locked only when a connection starts or ends, and once at
//! shutdown to wake them all.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};

use crate::sync::locked;
use atomic_waker::AtomicWaker;

#[derive(Default)]
pub struct Drain {
    started: AtomicBool,
    connections: Mutex<HashMap<u64, Arc<AtomicWaker>>>,
}

impl Drain {
    /// Starts draining: every connection is woken to check whether it is idle.
    pub fn start(&self) {
        self.started.store(true, Ordering::Release);
        let connections = locked(&self.connections);
        for waker in connections.values() {
            waker.wake();
        }
    }

    pub fn watch(self: &Arc<Self>, conn_id: u64) -> DrainWatch {
        let waker = Arc::new(AtomicWaker::new());
        locked(&self.connections).insert(conn_id, waker.clone());
        DrainWatch { drain: self.clone(), conn_id, waker }
    }
}

/// One connection's view of the drain; deregisters itself when dropped.
pub struct DrainWatch {
    drain: Arc<Drain>,
    conn_id: u64,
    waker: Arc<AtomicWaker>,
}

impl DrainWatch {
    /// Whether draining has begun; if not, `cx` is woken when it does. `registered` is the
    /// caller's memory of the waker it registered last: the same waker is not registered
    /// again (the pump asks at every wake-up, and its task's waker does not change; a
    /// registration is two compare-and-swaps). The registration holds until the drain
    /// starts, which this then returns.
    #[inline]
    pub fn poll_started(&self, cx: &mut Context<'_>, registered: &mut Option<Waker>) -> bool {
        if !registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.register(cx.waker(), registered);
        }
        self.drain.started.load(Ordering::Acquire)
    }

    #[cold]
    fn register(&self, waker: &Waker, registered: &mut Option<Waker>) {
        self.waker.register(waker);
        *registered = Some(waker.clone());
    }
}

impl Drop for DrainWatch {
    fn drop(&mut self) {
        locked(&self.drain.connections).remove(&self.conn_id);
    }
}
