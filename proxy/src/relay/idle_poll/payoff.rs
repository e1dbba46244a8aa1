//! Whether polling pays: does it speed the application up?
//!
//! A caught poll saves the relay a sleep and a wake-up — tens of microseconds on a virtual
//! machine — and costs the CPU it polled. That latency is worth the CPU only where the
//! application waits on it: a client sending each query as soon as the last answer came
//! (its pace set by the round trip) goes faster; a client pacing its queries by its own clock
//! (10,000 a second on one connection, say), or one whose server is milliseconds away, sends at
//! the same pace either way, and the polling is CPU spent on every query for nothing
//! (`scripts/bench.sh --cpu` races it against HAProxy's, which never polls).
//!
//! So the thread measures it, as an A/B/A test on its own traffic: the application's cycle
//! (from one wait for its next command to the next) over [`BLOCK`] cycles polled, as many not
//! polled, and as many polled again. Polling stays on for the next [`SETTLED_BLOCKS`] blocks
//! if the median of each polled block was [`PAYS_AT_MOST`] of the unpolled one's or less, off
//! otherwise; then it measures again, or sooner if the cycle moved by half ([`Phase::moved`]:
//! a pool's warm-up back to back, then a paced load). Medians, so one cycle that met a long
//! pause does not decide; both polled blocks, so that a drift, or the noise of a thread
//! serving several connections at once (whose cycles interleave), passes for a gain less
//! often. Polled
//! first: a client keeping a schedule (due times, as a paced load generator does) that fell
//! behind while unpolled catches up at once, back to back, and a polled block after an
//! unpolled one measures that catching up, not its pace; the first polled block does not.
//! What is measured is the polling for the next command and for an answer's first byte; the
//! rest of an answer under way is polled whatever this says (the link probe needs a result
//! read as it streams).

use std::time::Duration;

/// Cycles per measured block.
pub(crate) const BLOCK: usize = 32;

/// Blocks a verdict stands after the one that reached it, before the next measurement: a
/// measurement is three blocks in 256, so where polling pays 1 cycle in 256 goes unpolled
/// (0.4 %: a latency benchmark's 99th percentile stays among the polled ones; at 1 in 128 it
/// did not), and where it does not, 2 in 256 are polled. At 10,000 cycles a second a verdict
/// is 0.8 s old at most.
pub(crate) const SETTLED_BLOCKS: u32 = 252;

/// Polling pays when the polled cycle is at most this share of the unpolled one, in percent:
/// 15 % shorter. A sleep and a wake-up saved twice per query shortens a back-to-back client's
/// loopback round trip by a quarter to a half (`scripts/bench.sh --only a`: 23 %, 2026-11-30),
/// a round trip of 2 ms by 2 %. Between the two is a client paced close to its round trip
/// (10,000 queries a second on one connection), which polling lets keep its pace (cycles
/// 100 µs polled, 109 µs not, measured) for half again the relay's CPU per query: not worth
/// it. Where its unpolled cycles come out over 118 µs (up to 130 measured here, the machine
/// busier) it still polls.
pub(crate) const PAYS_AT_MOST: u64 = 85;

/// The thread's running measurement and its last verdict.
#[derive(Clone, Debug)]
pub(crate) struct Payoff {
    phase: Phase,
    /// The current block's cycles, in µs.
    cycles: [u32; BLOCK],
    filled: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Measuring cycles with polling on.
    Polled,
    /// Measuring cycles with polling off; the polled block's median.
    Unpolled { polled_us: u32 },
    /// Measuring cycles with polling on again; the first two blocks' medians.
    PolledAgain { polled_us: u32, unpolled_us: u32 },
    /// A verdict, standing for `blocks` more blocks while the cycle stays near `cycle_us`
    /// (the median it was reached with, polled or not as the verdict says).
    Settled { pays: bool, blocks: u32, cycle_us: u32 },
}

impl Default for Payoff {
    fn default() -> Payoff {
        Payoff { phase: Phase::Polled, cycles: [0; BLOCK], filled: 0 }
    }
}

impl Payoff {
    /// A verdict that polling pays, or not, standing.
    #[cfg(test)]
    pub(crate) fn settled(pays: bool) -> Payoff {
        Payoff { phase: Phase::Settled { pays, blocks: SETTLED_BLOCKS, cycle_us: 100 }, ..Payoff::default() }
    }

    /// Whether the thread may poll for the next command and an answer's first byte now.
    pub(crate) fn polls(&self) -> bool {
        match self.phase {
            Phase::Polled | Phase::PolledAgain { .. } => true,
            Phase::Unpolled { .. } => false,
            Phase::Settled { pays, .. } => pays,
        }
    }

    /// Takes one application cycle that lasted `cycle`.
    pub(crate) fn cycled(&mut self, cycle: Duration) {
        let Some(slot) = self.cycles.get_mut(self.filled) else { return };
        *slot = u32::try_from(cycle.as_micros()).unwrap_or(u32::MAX);
        self.filled += 1;
        if self.filled == BLOCK {
            self.filled = 0;
            let median = median(&mut self.cycles);
            self.phase = self.phase.after_block(median);
        }
    }
}

impl Phase {
    /// The phase after a block whose median cycle was `median_us`.
    fn after_block(self, median_us: u32) -> Phase {
        match self {
            Phase::Polled => Phase::Unpolled { polled_us: median_us },
            Phase::Unpolled { polled_us } => Phase::PolledAgain { polled_us, unpolled_us: median_us },
            Phase::PolledAgain { polled_us, unpolled_us } => {
                let shorter = |polled: u32| u64::from(polled) * 100 <= u64::from(unpolled_us) * PAYS_AT_MOST;
                let pays = shorter(polled_us) && shorter(median_us);
                let cycle_us = if pays { median_us } else { unpolled_us };
                Phase::Settled { pays, blocks: SETTLED_BLOCKS, cycle_us }
            }
            Phase::Settled { blocks: 0, .. } => Phase::Polled,
            Phase::Settled { cycle_us, .. } if Phase::moved(cycle_us, median_us) => Phase::Polled,
            Phase::Settled { pays, blocks, cycle_us } => Phase::Settled { pays, blocks: blocks - 1, cycle_us },
        }
    }

    /// Whether the cycle moved from `before` to `now` by half or more, either way: the
    /// application's pace changed, and the verdict reached at the old one may not hold.
    /// Blocks of the same load differ by a few percent.
    fn moved(before: u32, now: u32) -> bool {
        let (before, now) = (u64::from(before), u64::from(now));
        2 * now >= 3 * before || 3 * now <= 2 * before
    }
}

/// The median of `values` (reordered).
fn median(values: &mut [u32]) -> u32 {
    let middle = values.len() / 2;
    match values.get(middle) {
        Some(_) => *values.select_nth_unstable(middle).1,
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    /// Feeds one block of cycles of `us` µs, one of them a long pause.
    fn block(payoff: &mut Payoff, us: u32) {
        for i in 0..BLOCK {
            payoff.cycled(if i == 5 { 50_000 * US } else { us * US });
        }
    }

    #[test]
    fn polling_stays_on_where_it_shortens_the_applications_cycle() {
        let mut p = Payoff::default();
        assert!(p.polls(), "the first block is measured polled");
        block(&mut p, 65);
        assert!(!p.polls(), "the second unpolled");
        block(&mut p, 95);
        assert!(p.polls(), "the third polled again");
        block(&mut p, 66);
        for _ in 0..=SETTLED_BLOCKS {
            assert!(p.polls(), "a third shorter: polling pays");
            block(&mut p, 65);
        }
        assert!(p.polls(), "then measured again, polled first");
        block(&mut p, 65);
        assert!(!p.polls());
    }

    #[test]
    fn polling_stops_where_the_application_keeps_its_own_pace() {
        let mut p = Payoff::default();
        block(&mut p, 100);
        block(&mut p, 109);
        block(&mut p, 61);
        assert!(!p.polls(), "8 % shorter, then catching up (a client paced near its round trip): off");
        for _ in 0..SETTLED_BLOCKS {
            block(&mut p, 109);
        }
        assert!(!p.polls(), "off until the next measurement");
        block(&mut p, 109);
        assert!(p.polls(), "which starts polled");
        block(&mut p, 2_030);
        block(&mut p, 2_060);
        block(&mut p, 2_020);
        assert!(!p.polls(), "2 % shorter (a server 2 ms away): off");
        for _ in 0..=SETTLED_BLOCKS {
            block(&mut p, 2_060);
        }
        block(&mut p, 1_300);
        block(&mut p, 2_000);
        block(&mut p, 2_100);
        assert!(!p.polls(), "one polled block shorter, the other not (connections interleaving): off");
    }

    #[test]
    fn a_new_pace_is_measured_at_once() {
        let mut p = Payoff::default();
        block(&mut p, 60);
        block(&mut p, 90);
        block(&mut p, 60);
        assert!(p.polls(), "back to back (a warm-up): polling pays");
        block(&mut p, 80);
        assert!(p.polls(), "a third longer: the same load");
        block(&mut p, 100);
        assert!(p.polls(), "the measurement starts again, polled");
        block(&mut p, 100);
        block(&mut p, 104);
        block(&mut p, 100);
        assert!(!p.polls(), "paced at 100 µs: polling does not pay");
        block(&mut p, 10_000);
        assert!(p.polls(), "paced at 10 ms: measured again");
    }

    #[test]
    fn the_median_ignores_a_few_long_cycles() {
        let mut values = [10, 1_000_000, 12, 11, u32::MAX];
        assert_eq!(median(&mut values), 12);
        assert_eq!(median(&mut []), 0);
    }
}
