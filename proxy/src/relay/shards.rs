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
//!
//! Not while a link is emulated (`inject`): there a connection's bytes go on when a timer
//! says, and a thread that waits for its turn to be woken lets them go late. On a busy
//! machine (2 CPUs under a compiler), 15 ms of `inject.rtt` gave p50 16.4 ms and p90 20.6 ms
//! a round trip under `SCHED_BATCH`, 15.5 and 16.4 ms under the normal policy. Each thread
//! follows the link as it changes ([`follow_inject`]): one atomic load when it wakes.

use std::cell::RefCell;
use std::io;
use std::sync::{Arc, Once};

use rttscope_config::RelayConfig;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::RelayStats;
use crate::inject::InjectControl;

/// The connection threads; dropped, they finish (a runtime drops what it still holds).
pub(super) struct Shards {
    handles: Vec<Handle>,
    /// Dropping a sender ends its thread's `block_on`.
    _stops: Vec<oneshot::Sender<()>>,
    next: usize,
}

impl Shards {
    /// One thread per CPU this process may use (at least one), as `relay` says: how long each
    /// may poll before it sleeps ([`idle_poll`](super::idle_poll)), and its scheduling policy,
    /// which follows whether `inject` emulates a link.
    pub fn start(
        relay: &RelayConfig,
        stats: &Arc<RelayStats>,
        inject: Option<Arc<InjectControl>>,
    ) -> io::Result<Shards> {
        let (idle_poll, sched_batch) = (relay.idle_poll.0, relay.sched_batch);
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        // Connection timers live on the runtime that starts the shards (`timers`).
        let timers = Handle::current();
        let mut shards = Shards { handles: Vec::with_capacity(threads), _stops: Vec::new(), next: 0 };
        for i in 0..threads {
            // No timer driver: it would cost every park (`timers`).
            let mut builder = tokio::runtime::Builder::new_current_thread();
            builder.enable_io();
            match (idle_poll.is_zero(), sched_batch) {
                (false, true) => builder.on_thread_park(super::idle_poll::before_park).on_thread_unpark(|| {
                    super::idle_poll::after_unpark();
                    follow_inject();
                }),
                (false, false) => builder
                    .on_thread_park(super::idle_poll::before_park)
                    .on_thread_unpark(super::idle_poll::after_unpark),
                (true, true) => builder.on_thread_unpark(follow_inject),
                (true, false) => &mut builder,
            };
            let runtime = builder.build()?;
            let metrics = runtime.handle().metrics();
            let stats = stats.clone();
            let timers = timers.clone();
            let inject = inject.clone();
            let (stop, stopped) = oneshot::channel::<()>();
            shards.handles.push(runtime.handle().clone());
            shards._stops.push(stop);
            std::thread::Builder::new().name(format!("rttscope-conn-{i}")).spawn(move || {
                if sched_batch && use_batch_scheduling() {
                    FOLLOWER.with(|f| *f.borrow_mut() = inject.map(|inject| Follower { inject, seen: 0, batch: true }));
                    follow_inject();
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

/// A connection thread's policy as the emulated link last had it.
struct Follower {
    inject: Arc<InjectControl>,
    /// The link's generation last looked at.
    seen: u64,
    /// Whether the thread runs under `SCHED_BATCH` now.
    batch: bool,
}

thread_local! {
    /// Set on connection threads that moved to `SCHED_BATCH` themselves (not on those an
    /// operator's `chrt` placed, nor with `relay.sched_batch: false`).
    static FOLLOWER: RefCell<Option<Follower>> = const { RefCell::new(None) };
}

/// The calling connection thread under the normal policy while a link is emulated and
/// under `SCHED_BATCH` otherwise; a system call only when the link comes or goes.
fn follow_inject() {
    FOLLOWER.with(|f| {
        let mut follower = f.borrow_mut();
        let Some(f) = follower.as_mut() else { return };
        let generation = f.inject.generation();
        if generation == f.seen {
            return;
        }
        f.seen = generation;
        let batch = !f.inject.current().is_active();
        if batch == f.batch {
            return;
        }
        let moved = if batch { crate::sys::use_batch_scheduling() } else { crate::sys::use_normal_scheduling() };
        match moved {
            Ok(()) => f.batch = batch,
            Err(e) => {
                tracing::warn!(error = %e, batch, "relay.sched_batch: a connection thread could not change its policy")
            }
        }
    });
}

/// `relay.sched_batch`: the calling connection thread under `SCHED_BATCH`, unless it started
/// under another policy than the normal one (an operator's `chrt`); whether it moved. Said
/// once per process: every thread meets the same answer.
fn use_batch_scheduling() -> bool {
    static SAID: Once = Once::new();
    let outcome = match crate::sys::scheduling_policy() {
        Ok("SCHED_OTHER") => crate::sys::use_batch_scheduling().map(|()| None),
        Ok(other) => Ok(Some(other)),
        Err(e) => Err(e),
    };
    let moved = matches!(outcome, Ok(None));
    SAID.call_once(|| match outcome {
        Ok(None) => tracing::debug!(
            "connection threads run under SCHED_BATCH (relay.sched_batch), the normal policy while a link is emulated"
        ),
        Ok(Some(policy)) => {
            tracing::info!(policy, "relay.sched_batch: connection threads keep the policy rttscope was started with")
        }
        Err(e) => tracing::warn!(
            error = %e,
            "relay.sched_batch: connection threads cannot move to SCHED_BATCH and keep the normal policy"
        ),
    });
    moved
}
