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
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::{Instant, Sleep, Timeout};

use super::wake_flag::WakeFlag;

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

/// A timer the pump can ask about on every wake-up for almost nothing: polled only after it
/// is set and when it may have fired. A tokio timer polled on every wake-up re-registers
/// its waker each time, on another runtime here, some 130 instructions per wake-up and two
/// wake-ups per round trip; this one is polled with a [`WakeFlag`]'s waker, and only when
/// that flag is up.
pub(crate) struct FlaggedTimer {
    sleep: Pin<Box<Sleep>>,
    flag: Option<WakeFlag>,
    /// Polled since it was last set: its registration stands until it fires.
    armed: bool,
}

impl FlaggedTimer {
    /// Set for `deadline`, on the timer runtime.
    pub(crate) fn new(deadline: Instant) -> FlaggedTimer {
        FlaggedTimer { sleep: Box::pin(sleep_until(deadline)), flag: None, armed: false }
    }

    /// Ready once the deadline has passed; until then the task is woken when it does.
    /// Inlined: at nearly every wake-up the timer is armed and did not fire, a flag's look.
    #[inline]
    pub(crate) fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let woke = WakeFlag::poll_again(&mut self.flag, cx.waker());
        if self.armed && !woke {
            return Poll::Pending;
        }
        self.poll_sleep(cx)
    }

    #[cold]
    fn poll_sleep(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let fired = match &self.flag {
            Some(flag) => self.sleep.as_mut().poll(&mut Context::from_waker(flag.waker())),
            None => self.sleep.as_mut().poll(cx),
        };
        self.armed = fired.is_pending();
        fired
    }

    /// Sets it again, for `deadline`.
    pub(crate) fn reset(&mut self, deadline: Instant) {
        self.sleep.as_mut().reset(deadline);
        self.armed = false;
    }
}
