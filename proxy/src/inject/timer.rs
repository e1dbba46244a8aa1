//! Wake-ups with sub-millisecond precision for the delay line. tokio's timer
//! ticks in whole milliseconds, which would add up to a millisecond of error
//! to every emulated hop; one thread with a heap of deadlines and 1 µs timer
//! slack wakes tasks within tens of microseconds. Only connections with an
//! active emulated link ever use it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::task::Waker;
use std::time::{Duration, Instant};

struct Entry {
    at: Instant,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The timer thread's inbox. A std channel: sending is a lock-free push.
fn inbox() -> &'static Sender<(Instant, Waker)> {
    static INBOX: OnceLock<Sender<(Instant, Waker)>> = OnceLock::new();
    INBOX.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<(Instant, Waker)>();
        let spawned = std::thread::Builder::new().name("rttscope-inject-timer".into()).spawn(move || {
            crate::sys::set_timer_slack(Duration::from_micros(1));
            let mut heap: BinaryHeap<Reverse<Entry>> = BinaryHeap::new();
            let mut seq = 0u64;
            loop {
                let now = Instant::now();
                while heap.peek().is_some_and(|Reverse(e)| e.at <= now) {
                    if let Some(Reverse(e)) = heap.pop() {
                        e.waker.wake();
                    }
                }
                let wait = heap.peek().map_or(Duration::from_secs(3600), |Reverse(e)| e.at.saturating_duration_since(now));
                match rx.recv_timeout(wait) {
                    Ok((at, waker)) => {
                        seq += 1;
                        heap.push(Reverse(Entry { at, seq, waker }));
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the injection timer; emulated delays will not be released");
        }
        tx
    })
}

/// Wakes `waker` at `at` (or soon after).
pub fn wake_at(at: Instant, waker: Waker) {
    // Only fails if the timer thread is gone, which it never leaves.
    let _ = inbox().send((at, waker));
}
