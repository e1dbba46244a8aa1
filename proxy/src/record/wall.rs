//! Wall-clock time covered by a set of intervals, overlaps counted once: what a finding's
//! cost and span and the recording's time in commands are (`docs/time-model.md`).
//!
//! Intervals come in roughly the order they end (commands as their responses complete, on
//! several connections at once), so the union is exact over a bounded window of the most
//! recent ones and settled into a sum behind it. An interval that arrives after the window
//! has moved past it (more than [`RECENT`] disjoint intervals late) is added whole, which can
//! count an overlap twice; whoever reports the union caps it by the wall time it covered.

/// Disjoint intervals kept unsettled: an interval that arrives up to this many later than
/// those it overlaps still merges with them (a pool of connections completing out of order).
pub const RECENT: usize = 16;

/// The union's length, in µs: settled intervals summed, recent ones kept to merge with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WallUnion {
    /// Length of the intervals settled out of `recent`, µs.
    settled_us: u64,
    /// Disjoint, sorted by start: `recent[..len]`.
    recent: [(u64, u64); RECENT],
    len: u8,
}

impl WallUnion {
    /// Adds `[start_us, end_us)`; an empty or reversed interval adds nothing.
    ///
    /// Inlined, with the rare paths out of line: the recording and every chatty or loop run
    /// add each command's interval, and as a call this small function paid as much again
    /// in its prologue (the inlined merge kept every register busy).
    #[inline(always)]
    pub fn add(&mut self, start_us: u64, end_us: u64) {
        if end_us <= start_us {
            return;
        }
        let n = usize::from(self.len);
        // The common case: after everything kept (a connection's next command).
        if n == 0 || start_us > self.recent[n - 1].1 {
            self.push(start_us, end_us);
            return;
        }
        self.merge_in(start_us, end_us);
    }

    /// Adds every interval of `other`, whose settled part lies before anything of ours
    /// that is still unsettled (a later window of the same recording, or another pattern's).
    pub fn absorb(&mut self, other: &WallUnion) {
        self.settled_us += other.settled_us;
        for &(start, end) in other.intervals() {
            self.add(start, end);
        }
    }

    /// The union's length, µs.
    pub fn us(&self) -> u64 {
        self.settled_us + self.intervals().iter().map(|(s, e)| e - s).sum::<u64>()
    }

    /// The intervals still kept unsettled: disjoint, sorted by start.
    pub fn intervals(&self) -> &[(u64, u64)] {
        &self.recent[..usize::from(self.len)]
    }

    #[inline(always)]
    fn push(&mut self, start_us: u64, end_us: u64) {
        if usize::from(self.len) == RECENT {
            self.settle_oldest();
        }
        self.recent[usize::from(self.len)] = (start_us, end_us);
        self.len += 1;
    }

    /// Settles the older half at once, so that a long stream of in-order intervals shifts the
    /// array once per `RECENT / 2` additions.
    #[inline(never)]
    fn settle_oldest(&mut self) {
        let half = RECENT / 2;
        self.settled_us += self.recent[..half].iter().map(|(s, e)| e - s).sum::<u64>();
        self.recent.copy_within(half.., 0);
        self.len -= half as u8;
    }

    /// Merges an interval that starts at or before the last one kept.
    #[inline(never)]
    fn merge_in(&mut self, start_us: u64, end_us: u64) {
        let n = usize::from(self.len);
        // The first kept interval that ends at or after `start_us`, and the first that starts
        // after `end_us`: everything between overlaps the new one.
        let first = self.recent[..n].iter().position(|&(_, e)| e >= start_us).unwrap_or(n);
        let past = self.recent[..n].iter().position(|&(s, _)| s > end_us).unwrap_or(n);
        if first >= past {
            // Overlaps nothing kept: insert it in order.
            if n == RECENT {
                if first == 0 {
                    // Older than everything kept: settled as it is.
                    self.settled_us += end_us - start_us;
                    return;
                }
                self.settle_oldest();
                return self.add(start_us, end_us);
            }
            self.recent.copy_within(first..n, first + 1);
            self.recent[first] = (start_us, end_us);
            self.len += 1;
            return;
        }
        let merged = (start_us.min(self.recent[first].0), end_us.max(self.recent[past - 1].1));
        self.recent[first] = merged;
        self.recent.copy_within(past..n, first + 1);
        self.len -= (past - first - 1) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn union_of(intervals: &[(u64, u64)]) -> u64 {
        let mut u = WallUnion::default();
        for &(s, e) in intervals {
            u.add(s, e);
        }
        u.us()
    }

    /// The exact union, by brute force over microseconds.
    fn brute(intervals: &[(u64, u64)]) -> u64 {
        let end = intervals.iter().map(|i| i.1).max().unwrap_or(0);
        (0..end).filter(|t| intervals.iter().any(|&(s, e)| s <= *t && *t < e)).count() as u64
    }

    #[test]
    fn sequential_intervals_add_up() {
        assert_eq!(union_of(&[(0, 10), (20, 30), (30, 35)]), 25);
    }

    #[test]
    fn overlaps_count_once() {
        // Four connections' commands over the same 100 µs.
        assert_eq!(union_of(&[(0, 100), (10, 90), (50, 120), (0, 40)]), 120);
        // One late interval bridging two kept ones.
        assert_eq!(union_of(&[(0, 10), (20, 30), (5, 25)]), 30);
        // Empty and reversed intervals add nothing.
        assert_eq!(union_of(&[(5, 5), (9, 3)]), 0);
    }

    #[test]
    fn a_long_stream_settles_and_stays_exact() {
        let intervals: Vec<(u64, u64)> = (0..1000).map(|i| (i * 10, i * 10 + 4)).collect();
        assert_eq!(union_of(&intervals), 4000);
    }

    #[test]
    fn out_of_order_within_the_window_is_exact() {
        // Pairs of overlapping intervals on two "connections", the second of each pair
        // reported after the next pair's first.
        let mut intervals = Vec::new();
        for i in 0..200u64 {
            intervals.push((i * 100, i * 100 + 60));
            if i > 0 {
                intervals.push(((i - 1) * 100 + 30, (i - 1) * 100 + 80));
            }
        }
        assert_eq!(union_of(&intervals), brute(&intervals));
    }

    #[test]
    fn absorbing_a_later_union_adds_it() {
        let mut a = WallUnion::default();
        a.add(0, 10);
        let mut b = WallUnion::default();
        for i in 0..40 {
            b.add(100 + i * 10, 105 + i * 10);
        }
        a.absorb(&b);
        assert_eq!(a.us(), 10 + 40 * 5);
    }

    #[test]
    fn never_more_than_the_intervals_summed_and_never_less_than_the_longest() {
        // A deterministic pseudo-random mix, checked against the brute force where exact.
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            seed >> 33
        };
        for _ in 0..50 {
            let intervals: Vec<(u64, u64)> = (0..40)
                .map(|i| {
                    let s = i * 20 + next() % 30;
                    (s, s + 1 + next() % 50)
                })
                .collect();
            let u = union_of(&intervals);
            assert_eq!(u, brute(&intervals), "{intervals:?}");
        }
    }
}
