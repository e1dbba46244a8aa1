//! Wake-ups with sub-millisecond precision for the delay line. tokio's timer
//! ticks in whole milliseconds, which would add up to a millisecond of error
//! to every emulated hop; one thread with a heap of deadlines and 1 µs timer
//! slack wakes tasks within tens of microseconds. Only connections with an
//! active emulated link ever use it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
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
                let wait =
                    heap.peek().map_or(Duration::from_secs(3600), |Reverse(e)| e.at.saturating_duration_since(now));
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

/// How long a wake-up takes to reach the task: from the deadline the timer
/// fires for to the task's poll (timer thread wake-up, waker, scheduler).
/// Fired this much early, a task polls close to when its bytes are due, so
/// they leave on time rather than consistently late, or, with a fixed lead
/// larger than the real chain, consistently early (a fixed 100 µs made
/// `rtt: 1ms` add 0.89 ms on a 2-vCPU VM). Learnt from the wake-ups
/// themselves, shared by all connections: their median, so that half the
/// held bytes leave a little early and half a little late, on an idle
/// machine (tens of µs) as beside a CPU-bound load (hundreds).
pub struct WakeLatency {
    nanos: AtomicU64,
}

impl WakeLatency {
    const INITIAL: Duration = Duration::from_micros(50);
    /// The lead never grows past this: a machine slower to wake is swamped, and firing
    /// earlier would send bytes early whenever one wake-up happens to be quick (a link's
    /// own delay caps it further, at a quarter).
    const MAX_LEAD: Duration = Duration::from_millis(1);
    /// Below this the chain cannot go: the lead never collapses to nothing between samples.
    const MIN_LEAD: Duration = Duration::from_micros(5);

    /// Starts at 50 µs, then learns from the wake-ups measured.
    pub const fn new() -> WakeLatency {
        WakeLatency { nanos: AtomicU64::new(Self::INITIAL.as_nanos() as u64) }
    }

    /// How early to fire for a deadline: the current estimate.
    pub fn lead(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }

    /// A task woken by a timer that fired at `fired` polled at `polled`: the
    /// lead moves a thirty-second of itself towards the sample, up when the
    /// chain took longer, down when it took less. It settles where as many
    /// take longer as take less — the median — and a busy spell of any length
    /// moves it one step, not by its size (a lost update between tasks is
    /// harmless).
    pub fn observe(&self, fired: Instant, polled: Instant) {
        let sample = polled.saturating_duration_since(fired).as_nanos() as u64;
        let old = self.nanos.load(Ordering::Relaxed);
        let new = if sample > old { old + old / 32 } else { old - old / 33 };
        let (min, max) = (Self::MIN_LEAD.as_nanos() as u64, Self::MAX_LEAD.as_nanos() as u64);
        self.nanos.store(new.clamp(min, max), Ordering::Relaxed);
    }
}

impl Default for WakeLatency {
    fn default() -> Self {
        WakeLatency::new()
    }
}

/// The process's estimate, learnt by every emulated connection.
pub static WAKE_LATENCY: WakeLatency = WakeLatency::new();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lead_follows_the_wake_ups_and_ignores_busy_spells() {
        let latency = WakeLatency::new();
        assert_eq!(latency.lead(), WakeLatency::INITIAL);
        let t0 = Instant::now();
        let around =
            |lead: Duration, us: u64| lead.abs_diff(Duration::from_micros(us)) <= Duration::from_micros(us / 16);
        for _ in 0..200 {
            latency.observe(t0, t0 + Duration::from_micros(20));
        }
        let lead = latency.lead();
        assert!(around(lead, 20), "{lead:?}");
        // A task busy for 5 ms moves it a step, not to 5 ms.
        latency.observe(t0, t0 + Duration::from_millis(5));
        assert!(latency.lead() <= lead + lead / 32, "{:?}", latency.lead());
        // A slower machine, a CPU-bound load beside it: the lead grows to match ...
        for _ in 0..200 {
            latency.observe(t0, t0 + Duration::from_micros(400));
        }
        assert!(around(latency.lead(), 400), "{:?}", latency.lead());
        // ... to the median, whatever the outliers: a third of the wake-ups 20 ms late.
        for i in 0..300 {
            let took = if i % 3 == 0 { 20_000 } else { 400 };
            latency.observe(t0, t0 + Duration::from_micros(took));
        }
        assert!(around(latency.lead(), 400), "{:?}", latency.lead());
    }
}
