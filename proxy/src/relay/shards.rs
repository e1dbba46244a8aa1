//! The threads that serve connections: one single-threaded runtime per CPU, each driven by
//! a thread of its own, and every connection on one of them for its whole life.
//!
//! Why not the process's work-stealing runtime: a connection is one task that wakes twice
//! per round trip, and each wake-up there pays for what one task never uses — the queues
//! and atomics other workers could steal through, and the scheduler's own statistics
//! (`powf` on every batch). A runtime per thread runs the same task for about 1,500 fewer
//! instructions per round trip (callgrind, `scripts/bench.sh --only f`: 1,575 recording on,
//! 1,440 off). Connections are
//! dealt out in turn; the rest of rttscope (accepting, the collector, the admin API) stays
//! on the main runtime, and so do the connections' timers: these runtimes have no timer
//! driver ([`timers`](super::timers)).

use std::io;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// The connection threads; dropped, they finish (a runtime drops what it still holds).
pub(super) struct Shards {
    handles: Vec<Handle>,
    /// Dropping a sender ends its thread's `block_on`.
    _stops: Vec<oneshot::Sender<()>>,
    next: usize,
}

impl Shards {
    /// One thread per CPU this process may use (at least one).
    pub fn start() -> io::Result<Shards> {
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        // Connection timers live on the runtime that starts the shards (`timers`).
        let timers = Handle::current();
        let mut shards = Shards { handles: Vec::with_capacity(threads), _stops: Vec::new(), next: 0 };
        for i in 0..threads {
            // No timer driver: it would cost every park (`timers`).
            let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
            let timers = timers.clone();
            let (stop, stopped) = oneshot::channel::<()>();
            shards.handles.push(runtime.handle().clone());
            shards._stops.push(stop);
            std::thread::Builder::new().name(format!("rttscope-conn-{i}")).spawn(move || {
                super::timers::keep_on(timers);
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        }
        Ok(shards)
    }

    /// The runtime the next connection goes to.
    pub fn next(&mut self) -> &Handle {
        self.next = (self.next + 1) % self.handles.len();
        &self.handles[self.next]
    }
}
