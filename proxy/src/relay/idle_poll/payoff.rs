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
//! So the thread measures it, as an A/B test on its own traffic: the application's cycle (from
//! one wait for its next command to the next) over [`BLOCK`] cycles not polled, then over as
//! many polled. Polling stays on for the next [`SETTLED_BLOCKS`] blocks if the polled cycles'
//! median was [`PAYS_BELOW`] of the unpolled one's or less, off otherwise; then it measures
//! again. A median, so one cycle that met a long pause does not decide. What is measured is
//! the polling for the next command and for an answer's first byte; the rest of an answer
//! under way is polled whatever this says (the link probe needs a result read as it streams).

use std::time::Duration;

/// Cycles per measured block.
pub(crate) const BLOCK: usize = 32;

/// Blocks a verdict stands after the one that reached it, before the next measurement: a
/// measurement is two blocks in 128, so where polling pays 1 cycle in 128 goes unpolled
/// (0.8 %: a latency benchmark's 99th percentile stays among the polled ones), and where it
/// does not, 1 in 128 is polled. At 10,000 cycles a second a verdict is 0.4 s old at most.
pub(crate) const SETTLED_BLOCKS: u32 = 125;

/// Polling pays when the polled cycle is at most this share of the unpolled one, in tenths:
/// a tenth shorter. Noise between two blocks back to back is a few percent; a sleep and a
/// wake-up saved twice per query shortens a loopback round trip by a quarter to a half, a
/// round trip of 2 ms by 2 %.
pub(crate) const PAYS_BELOW: u64 = 9;

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
    /// Measuring cycles with polling off.
    Unpolled,
    /// Measuring cycles with polling on; the unpolled block's median.
    Polled { unpolled_us: u32 },
    /// A verdict, standing for `blocks` more blocks.
    Settled { pays: bool, blocks: u32 },
}

impl Default for Payoff {
    fn default() -> Payoff {
        Payoff { phase: Phase::Unpolled, cycles: [0; BLOCK], filled: 0 }
    }
}

impl Payoff {
    /// A verdict that polling pays, standing.
    #[cfg(test)]
    pub(crate) fn paying() -> Payoff {
        Payoff { phase: Phase::Settled { pays: true, blocks: SETTLED_BLOCKS }, ..Payoff::default() }
    }

    /// Whether the thread may poll for the next command and an answer's first byte now.
    pub(crate) fn polls(&self) -> bool {
        match self.phase {
            Phase::Unpolled => false,
            Phase::Polled { .. } => true,
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
            Phase::Unpolled => Phase::Polled { unpolled_us: median_us },
            Phase::Polled { unpolled_us } => Phase::Settled {
                pays: u64::from(median_us) * 10 <= u64::from(unpolled_us) * PAYS_BELOW,
                blocks: SETTLED_BLOCKS,
            },
            Phase::Settled { blocks: 0, .. } => Phase::Unpolled,
            Phase::Settled { pays, blocks } => Phase::Settled { pays, blocks: blocks - 1 },
        }
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
        assert!(!p.polls(), "the first block is measured unpolled");
        block(&mut p, 95);
        assert!(p.polls(), "the second polled");
        block(&mut p, 65);
        for _ in 0..=SETTLED_BLOCKS {
            assert!(p.polls(), "a third shorter: polling pays");
            block(&mut p, 65);
        }
        assert!(!p.polls(), "then measured again");
    }

    #[test]
    fn polling_stops_where_the_application_keeps_its_own_pace() {
        let mut p = Payoff::default();
        block(&mut p, 100);
        block(&mut p, 97);
        assert!(!p.polls(), "3 % shorter (a paced client, a server far away): off");
        for _ in 0..SETTLED_BLOCKS {
            block(&mut p, 100);
        }
        assert!(!p.polls(), "off until the next measurement");
        block(&mut p, 100);
        assert!(!p.polls(), "which starts unpolled");
        block(&mut p, 100);
        assert!(p.polls(), "and polls its second block");
        block(&mut p, 60);
        assert!(p.polls(), "the pace changed: polling pays again");
    }

    #[test]
    fn the_median_ignores_a_few_long_cycles() {
        let mut values = [10, 1_000_000, 12, 11, u32::MAX];
        assert_eq!(median(&mut values), 12);
        assert_eq!(median(&mut []), 0);
    }
}
