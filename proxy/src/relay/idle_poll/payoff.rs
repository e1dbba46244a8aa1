//! Whether polling pays: does it speed the application up, for no more CPU?
//!
//! A caught poll saves the relay a sleep and a wake-up — tens of microseconds on a virtual
//! machine — and costs the CPU it polled. That latency is worth it only where the
//! application waits on it: a client sending each query as soon as the last answer came
//! (its pace set by the round trip) goes faster; a client pacing its queries by its own clock
//! (10,000 a second on one connection, say), or one whose server is milliseconds away, sends at
//! the same pace either way, and the polling is CPU spent on every query for nothing. And it
//! is worth it only where it costs about what sleeping does: a sidecar's CPU is paid on every
//! application host (`scripts/bench.sh --cpu` races rttscope's against HAProxy's, which never
//! polls), and polling through an application's idle gaps can take twice the CPU per query
//! sleeping does, where a busy host makes every wake-up dear enough that it takes less.
//!
//! So the thread measures both, as an A/B/A test on its own traffic: the application's cycle
//! (from one wait for its next command to the next) and the thread's CPU time per cycle, over
//! [`BLOCK`] cycles polled, as many not polled, and as many polled again. Polling stays on for
//! the next [`SETTLED_BLOCKS`] blocks if each polled block's cycle was [`PAYS_AT_MOST`] of the
//! unpolled one's or less and its CPU per cycle [`CPU_AT_MOST`] of the unpolled one's or less,
//! off otherwise; then it measures again, or sooner if the cycle moved by half
//! ([`Phase::moved`]: a pool's warm-up back to back, then a paced load). A block's cycle is a
//! trimmed mean ([`typical`]), so one cycle that met a long pause does not decide; both polled
//! blocks must pass, so that a drift, or the noise of a thread serving several connections at
//! once (whose cycles interleave), passes for a gain less often. Polled first: a client
//! keeping a schedule (due times, as a paced load generator does) that fell behind while
//! unpolled catches up at once, back to back, and a polled block after an unpolled one
//! measures that catching up, not its pace; the first polled block does not. What is measured
//! is the polling for the next command and for an answer's first byte; the rest of an answer
//! under way is polled whatever this says (the link probe needs a result read as it streams).

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
/// a round trip of 2 ms by 2 %.
pub(crate) const PAYS_AT_MOST: u64 = 85;

/// Polling pays only if the thread's CPU per cycle polled is at most this share of its CPU
/// per cycle unpolled, in percent: a tenth more. A poll's CPU is its length; a sleep's is the
/// wake-up's. Measured here (`scripts/bench.sh --cpu`, 2026-11-30): a client paced at 10,000
/// queries a second on one connection, which polling lets keep its pace where unpolled it
/// falls behind (cycles 86–92 µs polled, 147 not), cost the thread 62–83 µs of CPU a cycle
/// polled against 51 unpolled, and where it polled the row read 1.42–1.56× HAProxy's CPU per
/// query; not polled, 0.76–0.96×. Where the host is busy enough that wake-ups cost more than
/// the polls, polling passes.
pub(crate) const CPU_AT_MOST: u64 = 110;

/// The thread's running measurement and its last verdict.
#[derive(Clone, Debug)]
pub(crate) struct Payoff {
    phase: Phase,
    /// The current block's cycles, in µs.
    cycles: [u32; BLOCK],
    filled: usize,
    /// The thread's CPU time when the current block began.
    cpu_at: Option<Duration>,
    /// Whether `cpu_at` was read yet.
    started: bool,
}

/// One measured block: its typical cycle ([`typical`]), and the thread's CPU time per cycle
/// (`None`: the clock could not be read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    cycle_us: u32,
    cpu_ns: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Measuring cycles with polling on.
    Polled,
    /// Measuring cycles with polling off, after the polled block.
    Unpolled { polled: Block },
    /// Measuring cycles with polling on again, after the first two blocks.
    PolledAgain { polled: Block, unpolled: Block },
    /// A verdict, standing for `blocks` more blocks while the cycle stays near `cycle_us`
    /// (the typical cycle it was reached with, polled or not as the verdict says).
    Settled { pays: bool, blocks: u32, cycle_us: u32 },
}

impl Default for Payoff {
    fn default() -> Payoff {
        Payoff { phase: Phase::Polled, cycles: [0; BLOCK], filled: 0, cpu_at: None, started: false }
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

    /// Takes one application cycle that lasted `cycle`; `cpu_time` reads the thread's CPU
    /// time (at a block's bounds only: it is a system call).
    pub(crate) fn cycled(&mut self, cycle: Duration, cpu_time: impl Fn() -> Option<Duration>) {
        if !self.started {
            // The CPU clock starts here: the first cycle, whose CPU is not on it, is not taken.
            self.started = true;
            self.cpu_at = cpu_time();
            return;
        }
        let Some(slot) = self.cycles.get_mut(self.filled) else { return };
        *slot = u32::try_from(cycle.as_micros()).unwrap_or(u32::MAX);
        self.filled += 1;
        if self.filled == BLOCK {
            self.filled = 0;
            let now = cpu_time();
            let cpu_ns = self.cpu_at.zip(now).map(|(at, now)| per_cycle_ns(now.saturating_sub(at)));
            self.cpu_at = now;
            let block = Block { cycle_us: typical(&mut self.cycles), cpu_ns };
            self.phase = self.phase.after_block(block);
        }
    }
}

/// CPU time spent over a block, per cycle, in ns.
fn per_cycle_ns(spent: Duration) -> u32 {
    u32::try_from(spent.as_nanos() / BLOCK as u128).unwrap_or(u32::MAX)
}

impl Phase {
    /// The phase after `block`.
    fn after_block(self, block: Block) -> Phase {
        match self {
            Phase::Polled => Phase::Unpolled { polled: block },
            Phase::Unpolled { polled } => Phase::PolledAgain { polled, unpolled: block },
            Phase::PolledAgain { polled, unpolled } => {
                let pays = pays(polled, unpolled, block);
                let cycle_us = if pays { block.cycle_us } else { unpolled.cycle_us };
                Phase::Settled { pays, blocks: SETTLED_BLOCKS, cycle_us }
            }
            Phase::Settled { blocks: 0, .. } => Phase::Polled,
            Phase::Settled { cycle_us, .. } if Phase::moved(cycle_us, block.cycle_us) => Phase::Polled,
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

/// The verdict on an A/B/A measurement: polling pays if both polled blocks' cycles were
/// [`PAYS_AT_MOST`] of the unpolled one's or less, for [`CPU_AT_MOST`] of its CPU per cycle or
/// less (the CPU unread: it does not pay).
fn pays(polled: Block, unpolled: Block, again: Block) -> bool {
    let shorter = |b: Block| u64::from(b.cycle_us) * 100 <= u64::from(unpolled.cycle_us) * PAYS_AT_MOST;
    let cheap = |b: Block| match (b.cpu_ns, unpolled.cpu_ns) {
        (Some(polled), Some(unpolled)) => u64::from(polled) * 100 <= u64::from(unpolled) * CPU_AT_MOST,
        _ => false,
    };
    let pays = shorter(polled) && shorter(again) && cheap(polled) && cheap(again);
    tracing::debug!(
        polled_us = polled.cycle_us,
        unpolled_us = unpolled.cycle_us,
        again_us = again.cycle_us,
        polled_cpu_ns = polled.cpu_ns,
        unpolled_cpu_ns = unpolled.cpu_ns,
        again_cpu_ns = again.cpu_ns,
        pays,
        "relay.idle_poll: measured whether polling pays (cycles and the thread's CPU per cycle, polled, unpolled, polled)"
    );
    pays
}

/// Cycles a block's typical cycle leaves out: its longest, those that met a pause.
const LONGEST_LEFT_OUT: usize = BLOCK / 8;

/// The block's typical cycle: the mean of `cycles` (reordered) but their [`LONGEST_LEFT_OUT`]
/// longest. A mean, not a median: a paced client's cycles come out two-humped (its sleeps
/// overshoot, then it catches up back to back) and a median lands on either hump, block by
/// block, where the mean stays at its pace.
fn typical(cycles: &mut [u32]) -> u32 {
    let kept = cycles.len().saturating_sub(LONGEST_LEFT_OUT);
    if kept == 0 {
        return 0;
    }
    cycles.select_nth_unstable(kept - 1);
    let sum: u64 = cycles.iter().take(kept).map(|&c| u64::from(c)).sum();
    u32::try_from(sum / kept as u64).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    const US: Duration = Duration::from_micros(1);

    thread_local! {
        /// The thread's CPU time as the tests make it pass.
        static CPU: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    }

    /// A payoff past its first cycle, which only starts the CPU clock.
    fn started() -> Payoff {
        let mut p = Payoff::default();
        p.cycled(US, || Some(CPU.with(Cell::get)));
        p
    }

    /// Feeds one block of cycles of `us` µs, one of them a long pause, each costing the
    /// thread a µs of CPU.
    fn block(payoff: &mut Payoff, us: u32) {
        block_costing(payoff, us, 1);
    }

    /// Feeds one block of cycles of `us` µs, one of them a long pause, each costing the
    /// thread `cpu_us` of CPU.
    fn block_costing(payoff: &mut Payoff, us: u32, cpu_us: u32) {
        for i in 0..BLOCK {
            CPU.with(|c| c.set(c.get() + cpu_us * US));
            payoff.cycled(if i == 5 { 50_000 * US } else { us * US }, || Some(CPU.with(Cell::get)));
        }
    }

    #[test]
    fn polling_stays_on_where_it_shortens_the_applications_cycle() {
        let mut p = started();
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
        let mut p = started();
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
        let mut p = started();
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
    fn polling_that_costs_more_cpu_than_sleeping_stops() {
        let mut p = started();
        let cases = [
            ((72, 70), false, "40 % shorter for 40 % more CPU a cycle (a paced client kept to its pace)"),
            ((57, 40), false, "one polled block over a tenth dearer"),
            ((56, 40), true, "at most a tenth dearer, and cheaper (wake-ups dear on a busy host)"),
        ];
        for ((first_cpu, again_cpu), pays, why) in cases {
            block_costing(&mut p, 86, first_cpu);
            block_costing(&mut p, 147, 51);
            block_costing(&mut p, 92, again_cpu);
            assert_eq!(p.polls(), pays, "{why}");
            for _ in 0..=SETTLED_BLOCKS {
                block_costing(&mut p, 147, 51);
            }
        }
    }

    #[test]
    fn without_a_cpu_clock_polling_does_not_pay() {
        let mut p = Payoff::default();
        for us in std::iter::once(1).chain([60, 90, 60].into_iter().flat_map(|us| [us; BLOCK])) {
            p.cycled(us * US, || None);
        }
        assert!(!p.polls(), "a third shorter, the cost unknown: off");
    }

    #[test]
    fn the_typical_cycle_leaves_out_the_longest_and_keeps_a_pace() {
        let mut values: Vec<u32> = (0..BLOCK as u32).map(|i| if i < 4 { 1_000_000 } else { 10 }).collect();
        assert_eq!(typical(&mut values), 10, "the longest eighth is left out");
        let mut two_humped: Vec<u32> = (0..BLOCK as u32).map(|i| if i % 5 < 3 { 140 } else { 40 }).collect();
        let mut other_humps: Vec<u32> = (0..BLOCK as u32).map(|i| if i % 5 < 2 { 140 } else { 40 }).collect();
        let (a, b) = (typical(&mut two_humped), typical(&mut other_humps));
        assert!(!Phase::moved(a, b), "a paced client's blocks, more or fewer of them behind: the same pace ({a}, {b})");
        assert_eq!(typical(&mut []), 0);
    }
}
