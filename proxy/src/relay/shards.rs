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
//! driver ([`timers`](super::timers)). Each thread polls its sockets a little before it
//! sleeps ([`idle_poll`](super::idle_poll)), and runs under `SCHED_BATCH` (`relay.sched_batch`):
//! woken by a socket while every CPU is busy, it lets the task that woke it finish its turn
//! rather than preempt it, and then serves what has come in meanwhile in one go. On workload b
//! (8 clients, the server and rttscope on 2 CPUs) that is 4.6 % more queries a second for 7 %
//! less CPU each (ten rounds of `scripts/bench.sh --only b --scenario no-sched-batch`).

use std::io;
use std::sync::{Arc, Once};

use rttscope_config::RelayConfig;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::RelayStats;

/// The connection threads; dropped, they finish (a runtime drops what it still holds).
pub(super) struct Shards {
    handles: Vec<Handle>,
    /// Dropping a sender ends its thread's `block_on`.
    _stops: Vec<oneshot::Sender<()>>,
    next: usize,
}

impl Shards {
    /// One thread per CPU this process may use (at least one), as `relay` says: how long each
    /// may poll before it sleeps ([`idle_poll`](super::idle_poll)), and its scheduling policy.
    pub fn start(relay: &RelayConfig, stats: &Arc<RelayStats>) -> io::Result<Shards> {
        let (idle_poll, sched_batch) = (relay.idle_poll.0, relay.sched_batch);
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        // Connection timers live on the runtime that starts the shards (`timers`).
        let timers = Handle::current();
        let mut shards = Shards { handles: Vec::with_capacity(threads), _stops: Vec::new(), next: 0 };
        for i in 0..threads {
            // No timer driver: it would cost every park (`timers`).
            let mut builder = tokio::runtime::Builder::new_current_thread();
            builder.enable_io();
            if !idle_poll.is_zero() {
                builder.on_thread_park(super::idle_poll::before_park).on_thread_unpark(super::idle_poll::after_unpark);
            }
            let runtime = builder.build()?;
            let metrics = runtime.handle().metrics();
            let stats = stats.clone();
            let timers = timers.clone();
            let (stop, stopped) = oneshot::channel::<()>();
            shards.handles.push(runtime.handle().clone());
            shards._stops.push(stop);
            std::thread::Builder::new().name(format!("rttscope-conn-{i}")).spawn(move || {
                if sched_batch {
                    use_batch_scheduling();
                }
                super::timers::keep_on(timers);
                super::idle_poll::install(idle_poll, metrics, stats);
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

/// `relay.sched_batch`: the calling connection thread under `SCHED_BATCH`, unless it started
/// under another policy than the normal one (an operator's `chrt`). Said once per process:
/// every thread meets the same answer.
fn use_batch_scheduling() {
    static SAID: Once = Once::new();
    let outcome = match crate::sys::scheduling_policy() {
        Ok("SCHED_OTHER") => crate::sys::use_batch_scheduling().map(|()| None),
        Ok(other) => Ok(Some(other)),
        Err(e) => Err(e),
    };
    SAID.call_once(|| match outcome {
        Ok(None) => tracing::debug!("connection threads run under SCHED_BATCH (relay.sched_batch)"),
        Ok(Some(policy)) => {
            tracing::info!(policy, "relay.sched_batch: connection threads keep the policy rttscope was started with")
        }
        Err(e) => tracing::warn!(
            error = %e,
            "relay.sched_batch: connection threads cannot move to SCHED_BATCH and keep the normal policy"
        ),
    });
}
