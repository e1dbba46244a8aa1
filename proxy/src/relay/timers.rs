//! Timers for connection tasks, kept on the main runtime.
//!
//! The connection threads' runtimes ([`shards`](super::shards)) are built without a timer
//! driver. With one, every park — two per round trip — locks the driver, looks through its
//! wheel for the next deadline, reads the clock and processes the wheel afterwards, about
//! 1,200 instructions per round trip (callgrind, `scripts/bench.sh --only f`), for timers
//! that almost never fire: a connection's one timeout timer is re-armed only when it fires
//! (see `pump`). So a connection's timers are made here, on the main runtime's driver; when
//! one fires, that runtime wakes the connection's task on its own thread.
//!
//! A tokio timer made on a runtime without a timer driver panics where it is made, so a
//! connection-side timer made any other way fails at once in the tests, not quietly.

use std::cell::OnceCell;
use std::future::IntoFuture;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::{Instant, Sleep, Timeout};

thread_local! {
    /// On a connection thread: the runtime that keeps its timers.
    static TIMERS: OnceCell<Handle> = const { OnceCell::new() };
}

/// Makes this thread's connection timers on `handle`'s driver (once per thread).
pub(super) fn keep_on(handle: Handle) {
    TIMERS.with(|timers| {
        let _ = timers.set(handle);
    });
}

/// Runs `make` where tokio registers timers with the timer runtime, if this thread has one;
/// elsewhere (a test's runtime, the main runtime) with the current runtime.
fn made_there<T>(make: impl FnOnce() -> T) -> T {
    TIMERS.with(|timers| match timers.get() {
        Some(handle) => {
            let _entered = handle.enter();
            make()
        }
        None => make(),
    })
}

/// [`tokio::time::sleep_until`], on the timer runtime.
pub(crate) fn sleep_until(deadline: Instant) -> Sleep {
    made_there(|| tokio::time::sleep_until(deadline))
}

/// [`tokio::time::sleep`], on the timer runtime.
pub(crate) fn sleep(duration: Duration) -> Sleep {
    made_there(|| tokio::time::sleep(duration))
}

/// [`tokio::time::timeout`], on the timer runtime.
pub(crate) fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    made_there(|| tokio::time::timeout(duration, future))
}
