//! Hands the heap memory rttscope has freed back to the system every `limits.heap_trim`.
//!
//! glibc's allocator keeps freed memory for reuse, spread over its per-thread arenas, and
//! returns only what sits at the top of an arena. Under many connections whose buffers and
//! records come and go on different threads, what it keeps grows for a long while (the soak
//! without it: 41 MiB kept free after the first minute, +1.2 MiB a minute after that, RSS
//! growing four times as fast as the heap), so RSS follows the peak rather than what rttscope
//! holds. A periodic `malloc_trim` releases the free pages in every arena.

use std::time::Duration;

use crate::sys;

/// Trims the heap every `every` until the task is dropped; each trim on a blocking thread,
/// as it locks each arena in turn.
pub async fn trim_every(every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate: nothing has been freed yet.
    tick.tick().await;
    loop {
        tick.tick().await;
        // The readings lock every arena too: with the trim, off the runtime's threads.
        let trimmed = tokio::task::spawn_blocking(|| {
            let kept_before = sys::heap().map_or(0, |h| h.free);
            let released = sys::trim_heap();
            (released, kept_before, sys::heap().map_or(0, |h| h.free))
        });
        let Ok((released, kept_free_before, kept_free_after)) = trimmed.await else { return };
        tracing::debug!(released, kept_free_before, kept_free_after, "heap trimmed");
    }
}
