//! Wakers that say who woke the task. A connection is one task with several things that
//! can wake it — each leg's reads, the timeout timer — and a task is not told which one
//! did: re-polling all of them on every wake-up cost a few hundred instructions per round
//! trip (a read that finds nothing still goes through the reactor's readiness and waker
//! registration). Each source is polled with a waker of its own that raises its flag and
//! then wakes the task; on the next wake-up only a source whose flag is up is polled again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Wake, Waker};

/// One source's flag, and the waker to poll it with.
pub(super) struct WakeFlag {
    flag: Arc<Flag>,
    waker: Waker,
}

struct Flag {
    raised: AtomicBool,
    task: Waker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Raised before the task runs: it looks at the flag when it does.
        self.raised.store(true, Ordering::Release);
        self.task.wake_by_ref();
    }
}

impl WakeFlag {
    // Out of line: made once per connection (and when the task's waker changes).
    #[inline(never)]
    fn new(task: &Waker) -> WakeFlag {
        let flag = Arc::new(Flag { raised: AtomicBool::new(false), task: task.clone() });
        WakeFlag { waker: Waker::from(flag.clone()), flag }
    }

    /// At a wake-up of the task whose waker is `task`: whether the source must be polled
    /// again — its flag was up (taken down now), or there was no flag for this task yet
    /// (the first poll, or the task's waker changed), so nothing is registered that
    /// would wake it.
    #[inline]
    pub fn poll_again(slot: &mut Option<WakeFlag>, task: &Waker) -> bool {
        match slot {
            Some(flag) if flag.flag.task.will_wake(task) => flag.flag.raised.swap(false, Ordering::AcqRel),
            _ => {
                *slot = Some(WakeFlag::new(task));
                true
            }
        }
    }

    /// The waker to poll the source with.
    pub fn waker(&self) -> &Waker {
        &self.waker
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_source_is_polled_again_only_after_it_woke_the_task() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let task = Waker::from(count.clone());
        let mut slot = None;
        assert!(WakeFlag::poll_again(&mut slot, &task), "nothing registered yet");
        assert!(!WakeFlag::poll_again(&mut slot, &task), "registered, and it did not wake the task");
        let source = slot.as_ref().map(|f| f.waker().clone()).expect("a flag");
        source.wake_by_ref();
        assert_eq!(count.0.load(Ordering::Relaxed), 1, "the task is woken");
        assert!(WakeFlag::poll_again(&mut slot, &task), "it woke the task");
        assert!(!WakeFlag::poll_again(&mut slot, &task), "once");
        let other = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
        assert!(WakeFlag::poll_again(&mut slot, &other), "a new task waker: registered again");
    }
}
